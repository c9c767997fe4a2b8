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
    api.depends_on = vec![Dependency::new("db", DependencyCondition::Started)];
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

/// A job pod with `shutdown_on` and a long-running web pod.
fn job_and_web(on: ShutdownOn, job: ContainerSpec) -> Harness {
    let mut p = pod("job", vec![with_policy(job, RestartPolicy::Never)]);
    p.shutdown_on = Some(on);
    let mut h = Harness::new(config(vec![p, pod("web", vec![container("app")])]));
    h.ack_spawns();
    h.take();
    h
}

#[test]
fn shutdown_on_failed_stops_everything_and_exits_with_the_pods_code() {
    let mut h = job_and_web(ShutdownOn::Failed, container("run"));
    let web = h.key("web", "app");
    h.exit("job", "run", 3);
    let acts = h.take();
    assert!(has_signal(&acts, web), "the usual shutdown: web is stopped");
    assert!(h.sup.is_shutting_down());
    let ev = h.event("ShutdownOn").expect("an event says why");
    assert_eq!(ev.kind, EventType::Warning);
    assert!(
        ev.message.contains("pod job failed, exit code 3"),
        "{}",
        ev.message
    );
    h.killed_by("web", "app", 15);
    assert_eq!(exit_code(&h.take()), Some(3), "the pod's code, not 0");
}

#[test]
fn shutdown_on_completed_ignores_a_failure_and_ended_takes_both() {
    let mut h = job_and_web(ShutdownOn::Completed, container("run"));
    h.exit("job", "run", 1);
    assert!(!h.sup.is_shutting_down(), "failed is not completed");

    let mut h = job_and_web(ShutdownOn::Ended, container("run"));
    h.exit("job", "run", 0);
    assert!(h.sup.is_shutting_down());
    h.killed_by("web", "app", 15);
    assert_eq!(exit_code(&h.take()), Some(0));

    let mut h = job_and_web(ShutdownOn::Ended, container("run"));
    h.killed_by("job", "run", 9);
    h.killed_by("web", "app", 15);
    assert_eq!(exit_code(&h.take()), Some(137), "128 + the signal");
}

#[test]
fn success_exit_codes_complete_the_run_and_the_pod() {
    let mut run = container("run");
    run.success_exit_codes = vec![3];
    let mut h = job_and_web(ShutdownOn::Completed, run);
    h.exit("job", "run", 3);
    let t = h.terminated("job", "run").unwrap();
    assert_eq!(t.reason, TerminationReason::Completed);
    assert_eq!(t.exit_code, 3);
    assert!(t.message.contains("success_exit_codes"), "{}", t.message);
    assert_eq!(h.phase("job"), Phase::Succeeded);
    assert!(h.sup.is_shutting_down());
    h.killed_by("web", "app", 15);
    assert_eq!(exit_code(&h.take()), Some(0), "a success exits 0");
}

#[test]
fn success_exit_codes_are_no_failure_for_on_failure_restarts() {
    let mut c = with_policy(container("run"), RestartPolicy::OnFailure);
    c.success_exit_codes = vec![3];
    let mut h = Harness::new(config(vec![pod("job", vec![c])]));
    h.ack_spawns();
    let key = h.key("job", "run");
    h.exit("job", "run", 3);
    assert!(!has_spawn(&h.take(), key), "a success is not restarted");
    assert_eq!(h.phase("job"), Phase::Succeeded);
}

#[test]
fn a_pod_the_operator_stops_does_not_trigger_shutdown_on() {
    let mut h = job_and_web(ShutdownOn::Ended, container("run"));
    h.cmd(Command::Stop {
        pod: "job".to_string(),
        container: None,
    })
    .unwrap();
    h.advance_to(1.0);
    h.killed_by("job", "run", 15);
    h.advance_to(2.0);
    assert!(
        !h.sup.is_shutting_down(),
        "vigil stop is not the pod ending"
    );
}

#[test]
fn shutdown_on_dependency_failed_exits_1_when_the_dependency_fails_for_good() {
    // `migrate` must complete before `app` starts; it fails under Never.
    let db = with_policy(container("pg"), RestartPolicy::Never);
    let mut app = pod("app", vec![container("srv")]);
    app.depends_on = vec![Dependency::new("db", DependencyCondition::Completed)];
    app.shutdown_on = Some(ShutdownOn::DependencyFailed);
    let mut h = Harness::new(config(vec![pod("db", vec![db]), app]));
    h.ack_spawns();
    h.exit("db", "pg", 2);
    assert!(h.sup.is_shutting_down());
    let ev = h.event("ShutdownOn").unwrap();
    assert!(
        ev.message.contains("pod app cannot start"),
        "{}",
        ev.message
    );
    assert_eq!(exit_code(&h.take()), Some(1));
}
