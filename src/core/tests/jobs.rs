//! Run-to-completion pods: `active_deadline_seconds` (kubelet `active_deadline.go`, the Job
//! controller's `activeDeadlineSeconds`; docs/behaviour.md, "Jobs").

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

/// A pod `job` of `containers` (restart policy `policy`) that may be active `limit` seconds.
fn job(policy: RestartPolicy, limit: f64, containers: &[&str]) -> PodSpec {
    let mut p = pod(
        "job",
        containers
            .iter()
            .map(|c| with_policy(container(c), policy))
            .collect(),
    );
    p.restart_policy = policy;
    p.active_deadline = Some(secs(limit));
    p
}

#[test]
fn a_pod_past_its_active_deadline_is_stopped_and_fails_with_deadline_exceeded() {
    let mut h = Harness::new(config(vec![job(RestartPolicy::Never, 60.0, &["run"])]));
    h.ack_spawns();
    let key = h.key("job", "run");
    h.take();
    assert_eq!(h.step(), 60.0, "the deadline is the next thing due");
    assert!(has_signal(&h.take(), key), "stopped with its stop signal");
    let ev = h.event("DeadlineExceeded").expect("an event says why");
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(ev.object, "job");
    h.killed_by("job", "run", 15);
    let t = h.terminated("job", "run").expect("terminated");
    assert_eq!(t.reason, TerminationReason::DeadlineExceeded);
    assert!(
        t.message.contains("active_deadline_seconds (1m0s)"),
        "{}",
        t.message
    );
    assert_eq!(h.phase("job"), Phase::Failed);
    assert!(!has_spawn(&h.take(), key), "not restarted");
    assert_eq!(h.sup.poll_timeout(), None, "nothing left to do");
}

#[test]
fn a_run_that_ignores_the_stop_is_killed_after_its_grace_period() {
    let mut h = Harness::new(config(vec![job(RestartPolicy::Never, 60.0, &["run"])]));
    h.ack_spawns();
    let key = h.key("job", "run");
    h.advance_to(60.0);
    h.take();
    assert_eq!(h.step(), 90.0, "the default 30 s grace");
    assert!(has_kill(&h.take(), key));
    h.killed_by("job", "run", 9);
    assert_eq!(
        h.terminated("job", "run").unwrap().reason,
        TerminationReason::DeadlineExceeded
    );
}

#[test]
fn the_deadline_counts_from_the_pods_start_init_containers_included() {
    let mut p = job(RestartPolicy::Never, 60.0, &["run"]);
    p.init_containers = shared(vec![with_policy(container("setup"), RestartPolicy::Never)]);
    let mut h = Harness::new(config(vec![p]));
    h.ack_spawns();
    h.advance_to(40.0);
    h.exit("job", "setup", 0);
    h.ack_spawns();
    assert!(h.is_running("job", "run"));
    h.take();
    assert_eq!(
        h.step(),
        60.0,
        "60 s after the pod began, not after `run` did"
    );
    assert!(h.event("DeadlineExceeded").is_some());
}

#[test]
fn a_pod_that_ends_before_its_deadline_keeps_its_result() {
    let mut h = Harness::new(config(vec![job(RestartPolicy::Never, 60.0, &["run"])]));
    h.ack_spawns();
    h.advance_to(30.0);
    h.exit("job", "run", 0);
    assert_eq!(h.phase("job"), Phase::Succeeded);
    assert_eq!(h.sup.poll_timeout(), None, "no deadline once it ended");
    assert!(h.event("DeadlineExceeded").is_none());
}

#[test]
fn a_container_in_back_off_at_the_deadline_ends_without_a_restart() {
    let mut h = Harness::new(config(vec![job(RestartPolicy::OnFailure, 15.0, &["run"])]));
    h.ack_spawns();
    let key = h.key("job", "run");
    h.advance_to(1.0);
    h.exit("job", "run", 1); // back-off until 11 s
    h.advance_to(11.0);
    h.ack_spawns();
    h.advance_to(12.0);
    h.exit("job", "run", 1); // back-off 20 s: until 32 s, past the deadline
    h.take();
    assert_eq!(h.step(), 15.0);
    assert_eq!(
        h.terminated("job", "run").unwrap().reason,
        TerminationReason::DeadlineExceeded
    );
    assert_eq!(h.phase("job"), Phase::Failed);
    h.advance_to(100.0);
    assert!(
        !has_spawn(&h.take(), key),
        "the back-off's restart never comes"
    );
}

#[test]
fn an_operator_start_after_the_deadline_gives_the_pod_a_new_one() {
    let mut h = Harness::new(config(vec![job(RestartPolicy::Never, 60.0, &["run"])]));
    h.ack_spawns();
    h.advance_to(60.0);
    h.killed_by("job", "run", 15);
    h.advance_to(100.0);
    h.cmd(Command::Start {
        pod: "job".to_string(),
        container: None,
    })
    .unwrap();
    h.ack_spawns();
    assert!(h.is_running("job", "run"));
    assert_eq!(h.sup.poll_timeout(), Some(h.t0 + secs(160.0)));
    assert_ne!(h.phase("job"), Phase::Failed);
}
