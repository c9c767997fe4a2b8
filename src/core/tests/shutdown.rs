//! Supervisor shutdown (docs/behaviour.md §6.2).

use std::time::Duration;

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn shutdown(h: &mut Harness, force: bool) {
    h.cmd(Command::Shutdown { force }).unwrap();
}

#[test]
fn shutdown_with_nothing_running_exits_at_once() {
    let mut h = Harness::new(config(vec![pod(
        "job",
        vec![with_policy(container("a"), RestartPolicy::Never)],
    )]));
    h.ack_spawns();
    h.exit("job", "a", 0);
    h.take();
    shutdown(&mut h, false);
    assert_eq!(exit_code(&h.take()), Some(0));
}

#[test]
fn clean_shutdown_exits_zero_and_records_stopped() {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![container("a"), container("b")],
    )]));
    h.ack_spawns();
    let (a, b) = (h.key("web", "a"), h.key("web", "b"));
    shutdown(&mut h, false);
    let acts = h.take();
    assert!(has_signal(&acts, a) && has_signal(&acts, b));
    h.exit("web", "a", 0);
    assert_eq!(exit_code(&h.take()), None);
    h.killed_by("web", "b", 15);
    assert!(!has_spawn(&h.pending, a), "no restarts during shutdown");
    assert_eq!(exit_code(&h.take()), Some(0));
    let t = h.terminated("web", "b").unwrap();
    assert_eq!(t.reason, TerminationReason::Stopped);
    assert_eq!(t.message, "supervisor shutting down");
    assert!(h.sup.is_shutting_down());
}

#[test]
fn shutdown_with_kill_after_grace_is_still_clean() {
    let mut c = container("a");
    c.termination_grace = secs(3.0);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    let a = h.key("web", "a");
    shutdown(&mut h, false);
    h.take();
    assert_eq!(h.step(), 3.0);
    assert!(has_kill(&h.take(), a));
    h.killed_by("web", "a", 9);
    // The grace-period SIGKILL is the normal end of a stop; only the shutdown deadline or a
    // forced shutdown makes the exit code 1.
    assert_eq!(exit_code(&h.take()), Some(0));
}

#[test]
fn shutdown_stops_dependents_before_their_dependencies() {
    let mut api = pod("api", vec![container("app")]);
    api.depends_on = vec![Dependency {
        pod: "db".to_string(),
        condition: DependencyCondition::Started,
    }];
    let mut h = Harness::new(config(vec![api, pod("db", vec![container("db")])]));
    h.ack_spawns(); // db
    h.ack_spawns(); // api (started once db was)
    assert!(h.is_running("api", "app") && h.is_running("db", "db"));
    let (api_k, db_k) = (h.key("api", "app"), h.key("db", "db"));
    shutdown(&mut h, false);
    let acts = h.take();
    assert!(has_signal(&acts, api_k));
    assert!(!has_signal(&acts, db_k), "db waits for api to stop");
    h.killed_by("api", "app", 15);
    assert!(has_signal(&h.take(), db_k));
    h.killed_by("db", "db", 15);
    assert_eq!(exit_code(&h.take()), Some(0));
}

#[test]
fn shutdown_timeout_kills_everything_left() {
    let mut c = container("a");
    c.termination_grace = secs(100.0);
    let mut cfg = config(vec![pod("web", vec![c])]);
    cfg.supervisor.shutdown_timeout = Duration::from_secs(10);
    let mut h = Harness::new(cfg);
    h.ack_spawns();
    let a = h.key("web", "a");
    shutdown(&mut h, false);
    h.take();
    assert_eq!(h.step(), 10.0);
    assert!(has_kill(&h.take(), a));
    h.killed_by("web", "a", 9);
    assert_eq!(exit_code(&h.take()), Some(1));
}

#[test]
fn forced_shutdown_kills_at_once() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("a")])]));
    h.ack_spawns();
    let a = h.key("web", "a");
    shutdown(&mut h, false);
    h.take();
    shutdown(&mut h, true);
    assert!(has_kill(&h.take(), a));
    h.killed_by("web", "a", 9);
    assert_eq!(exit_code(&h.take()), Some(1));
    assert_eq!(
        h.terminated("web", "a").unwrap().reason,
        TerminationReason::Stopped
    );
}

#[test]
fn shutdown_during_backoff_cancels_restart() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("a")])]));
    h.ack_spawns();
    h.exit("web", "a", 1);
    h.spawned("web", "a");
    h.exit("web", "a", 1);
    assert_eq!(
        h.waiting("web", "a").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
    h.take();
    shutdown(&mut h, false);
    assert_eq!(exit_code(&h.take()), Some(0));
    assert_eq!(
        h.terminated("web", "a").unwrap().reason,
        TerminationReason::Stopped
    );
    assert_eq!(h.sup.poll_timeout(), None);
}

#[test]
fn commands_other_than_stop_are_refused_while_shutting_down() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("a")])]));
    h.ack_spawns();
    shutdown(&mut h, false);
    let e = h
        .cmd(Command::Start {
            pod: "web".to_string(),
            container: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::ShuttingDown);
    let e = h
        .cmd(Command::Reload(Box::new(config(vec![]))))
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::ShuttingDown);
}
