//! Health verdicts (docs/behaviour.md §5.6): Ready or Completed is healthy; which pods are
//! expected to run; the first thing that keeps a pod from being ready.

use super::harness::*;
use crate::config::schedule::{CronPattern, Zone};
use crate::config::spec::*;
use crate::core::*;

fn verdict(h: &Harness, pod: &str) -> (HealthState, bool, String) {
    let v = h.sup.pod_health(pod).expect("pod");
    (v.state, v.expected, v.object)
}

#[test]
fn a_pod_is_starting_then_not_ready_then_ready_and_a_stopped_one_is_no_longer_expected() {
    let mut app = container("app");
    app.readiness_probe = Some(probe(1.0));
    let mut h = Harness::new(config(vec![pod("web", vec![app])]));
    assert_eq!(verdict(&h, "web").0, HealthState::ContainerCreating);
    h.ack_spawns();
    assert_eq!(
        verdict(&h, "web"),
        (HealthState::NotReady, true, "web/app".to_string())
    );
    h.step();
    let seq = h.probe_starts()[0].1;
    h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    assert_eq!(
        verdict(&h, "web"),
        (HealthState::Ready, true, "web".to_string())
    );
    assert!(!h.sup.pod_health("web").unwrap().at_rest);
    h.cmd(Command::Stop {
        pod: "web".into(),
        container: None,
    })
    .unwrap();
    assert_eq!(verdict(&h, "web").0, HealthState::Terminating);
    h.exit("web", "app", 0);
    let v = h.sup.pod_health("web").unwrap();
    assert_eq!(
        (v.state, v.expected, v.at_rest),
        (HealthState::Stopped, false, true)
    );
    assert!(
        h.sup.health_of(&[]).unwrap().is_empty(),
        "not judged by default"
    );
    assert_eq!(h.sup.health_of(&["web".into()]).unwrap().len(), 1);
    assert_eq!(h.sup.health_of(&["nope".into()]), Err("nope".to_string()));
}

#[test]
fn a_failed_pod_names_its_container_and_a_crash_loop_is_broken() {
    let never = {
        let mut p = pod(
            "job",
            vec![with_policy(container("run"), RestartPolicy::Never)],
        );
        p.restart_policy = RestartPolicy::Never;
        p
    };
    let mut h = Harness::new(config(vec![never, pod("svc", vec![container("c")])]));
    h.ack_spawns();
    h.exit("job", "run", 3);
    let v = h.sup.pod_health("job").unwrap();
    assert_eq!(
        (v.state, v.object.as_str()),
        (HealthState::Failed, "job/run")
    );
    assert_eq!(v.message, "Error, exit code 3: exited with code 3");
    assert!(v.state.broken());
    // The first restart is immediate, the second waits: back-off.
    h.exit("svc", "c", 1);
    h.ack_spawns();
    h.exit("svc", "c", 1);
    let v = h.sup.pod_health("svc").unwrap();
    assert_eq!(v.state, HealthState::CrashLoopBackOff);
    assert!(v.state.broken() && v.expected && !v.at_rest);
}

#[test]
fn a_scheduled_pod_awaits_its_first_run_then_is_completed_and_suspended_once_stopped() {
    let mut p = pod(
        "job",
        vec![with_policy(container("run"), RestartPolicy::Never)],
    );
    p.restart_policy = RestartPolicy::Never;
    p.schedule = Some(ScheduleSpec {
        cron: CronPattern::parse("0 2 * * *").unwrap(),
        time_zone: Zone::get(Some("UTC")).unwrap(),
        concurrency: Concurrency::Forbid,
        starting_deadline: None,
        suspend: false,
    });
    let mut h = Harness::new(config(vec![p]));
    h.wall("2026-05-01T00:00:00Z");
    assert_eq!(
        verdict(&h, "job"),
        (HealthState::AwaitingSchedule, false, "job".to_string())
    );
    h.advance_to(2.0 * 3600.0);
    h.ack_spawns();
    assert_eq!(verdict(&h, "job").0, HealthState::Ready);
    h.exit("job", "run", 0);
    assert_eq!(
        verdict(&h, "job"),
        (HealthState::Completed, true, "job".to_string())
    );
    h.cmd(Command::Stop {
        pod: "job".into(),
        container: None,
    })
    .unwrap();
    assert_eq!(verdict(&h, "job").0, HealthState::Suspended);
}

#[test]
fn a_pod_left_out_by_the_selection_is_not_started_and_not_expected() {
    let mut p = pod("later", vec![container("c")]);
    p.autostart = false;
    let h = Harness::new(config(vec![p]));
    assert_eq!(
        verdict(&h, "later"),
        (HealthState::NotStarted, false, "later".to_string())
    );
}
