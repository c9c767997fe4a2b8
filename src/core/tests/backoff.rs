//! Restart policy and back-off (docs/behaviour.md §2).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn one(c: ContainerSpec) -> Harness {
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    h
}

#[test]
fn backoff_ten_restarts_follow_kubelet_deadlines() {
    let mut h = one(container("app"));
    let key = h.key("web", "app");
    let mut delays = Vec::new();
    for i in 0..10 {
        let finished = h.t();
        h.exit("web", "app", 1);
        let spawned_now = has_spawn(&h.take(), key);
        let delay = if spawned_now {
            0.0
        } else {
            let t = h.step();
            assert!(
                has_spawn(&h.take(), key),
                "restart {i} spawns at its deadline"
            );
            t - finished
        };
        delays.push(delay);
        h.spawned("web", "app");
        assert_eq!(h.status("web", "app").restart_count, i + 1);
    }
    assert_eq!(
        delays,
        [
            0.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0, 300.0, 300.0
        ]
    );
}

#[test]
fn crash_loop_waiting_state_and_backoff_event() {
    let mut h = one(container("app"));
    h.exit("web", "app", 1);
    h.spawned("web", "app");
    h.exit("web", "app", 1);
    assert_eq!(
        h.waiting("web", "app"),
        Some((
            WaitingReason::CrashLoopBackOff,
            "back-off 10s restarting failed container=app pod=web".to_string()
        ))
    );
    let ev = h.event("BackOff").expect("BackOff event");
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(
        ev.message,
        "Back-off restarting failed container app in pod web"
    );
    assert_eq!(ev.object, "web/app");
    let last = h.status("web", "app").last_state.expect("last_state");
    assert_eq!(last.reason, TerminationReason::Error);
    assert_eq!(last.exit_code, 1);
    // Keep crashing: the message follows the delay and the event aggregates.
    for _ in 0..3 {
        h.step();
        h.spawned("web", "app");
        h.exit("web", "app", 1);
    }
    assert_eq!(
        h.waiting("web", "app").unwrap().1,
        "back-off 1m20s restarting failed container=app pod=web"
    );
    assert_eq!(h.event("BackOff").unwrap().count, 4);
    assert_eq!(
        h.phase("web"),
        Phase::Running,
        "crash-looping Always pod stays Running"
    );
}

#[test]
fn backoff_applies_to_exit_zero_under_always() {
    let mut h = one(container("app"));
    h.exit("web", "app", 0);
    assert!(h.waiting("web", "app").unwrap().0 == WaitingReason::ContainerCreating);
    h.spawned("web", "app");
    h.exit("web", "app", 0);
    assert_eq!(
        h.waiting("web", "app").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
}

#[test]
fn backoff_delay_counts_from_finish_and_long_run_forgives() {
    let mut h = one(container("app"));
    let key = h.key("web", "app");
    h.exit("web", "app", 1); // immediate restart at 0
    h.spawned("web", "app");
    h.advance_to(5.0);
    h.exit("web", "app", 1); // ran 5 s: 10 s back-off from 5 s
    assert_eq!(h.step(), 15.0);
    assert!(has_spawn(&h.take(), key));
    h.spawned("web", "app");
    // Run for exactly 600 s: not forgiven (needs more than reset_after).
    h.advance_to(615.0);
    h.exit("web", "app", 1);
    assert_eq!(h.step(), 635.0);
    h.spawned("web", "app");
    // Run for 601 s: forgiven, next restart immediate, then the sequence restarts at 10 s.
    h.advance_to(1236.0);
    h.exit("web", "app", 1);
    assert!(has_spawn(&h.take(), key));
    h.spawned("web", "app");
    h.exit("web", "app", 1);
    assert_eq!(
        h.waiting("web", "app").unwrap().1,
        "back-off 10s restarting failed container=app pod=web"
    );
}

#[test]
fn fractional_backoff_from_container_spec() {
    let mut c = container("app");
    c.backoff = Backoff {
        initial: secs(0.05),
        max: secs(0.2),
        reset_after: secs(1.0),
    };
    let mut h = one(c);
    let mut deadlines = Vec::new();
    for _ in 0..5 {
        let f = h.t();
        h.exit("web", "app", 1);
        if h.waiting("web", "app").unwrap().0 == WaitingReason::CrashLoopBackOff {
            deadlines.push(((h.step() - f) * 1000.0).round() as u64);
        } else {
            deadlines.push(0);
        }
        h.spawned("web", "app");
    }
    assert_eq!(deadlines, [0, 50, 100, 200, 200]);
}

#[test]
fn zero_initial_backoff_restarts_immediately_every_time() {
    let mut c = container("app");
    c.backoff.initial = std::time::Duration::ZERO;
    let mut h = one(c);
    for _ in 0..5 {
        h.exit("web", "app", 1);
        assert_eq!(
            h.waiting("web", "app").unwrap().0,
            WaitingReason::ContainerCreating
        );
        h.spawned("web", "app");
    }
    assert_eq!(h.status("web", "app").restart_count, 5);
}

#[test]
fn on_failure_restarts_failures_only() {
    let mut h = one(with_policy(container("app"), RestartPolicy::OnFailure));
    h.exit("web", "app", 2);
    h.spawned("web", "app");
    h.exit("web", "app", 0);
    let t = h.terminated("web", "app").expect("terminated");
    assert_eq!(t.reason, TerminationReason::Completed);
    assert_eq!(h.phase("web"), Phase::Succeeded);
    assert_eq!(h.status("web", "app").restart_count, 1);
}

#[test]
fn never_policy_does_not_restart_and_pod_fails() {
    let mut h = one(with_policy(container("app"), RestartPolicy::Never));
    h.exit("web", "app", 3);
    assert!(h.take().is_empty());
    assert_eq!(
        h.terminated("web", "app").unwrap().reason,
        TerminationReason::Error
    );
    assert_eq!(h.phase("web"), Phase::Failed);
}

#[test]
fn max_restarts_exhausted_terminates_with_restart_limit_exceeded() {
    let mut c = container("app");
    c.max_restarts = Some(2);
    c.backoff.initial = std::time::Duration::ZERO;
    let mut h = one(c);
    h.exit("web", "app", 3);
    h.spawned("web", "app");
    h.exit("web", "app", 3);
    h.spawned("web", "app");
    h.take();
    h.exit("web", "app", 3);
    let key = h.key("web", "app");
    assert!(!has_spawn(&h.take(), key));
    let t = h.terminated("web", "app").expect("terminated");
    assert_eq!(t.reason, TerminationReason::RestartLimitExceeded);
    assert_eq!(
        t.message,
        "restart limit 2 reached; last exit: Error exit code 3"
    );
    assert_eq!(t.exit_code, 3);
    assert_eq!(h.status("web", "app").restart_count, 2);
    let ev = h.event("RestartLimitExceeded").expect("event");
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(h.phase("web"), Phase::Failed);
    assert_eq!(h.sup.poll_timeout(), None);
}

#[test]
fn crash_looping_container_does_not_restart_pod_mates() {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![container("a"), container("b")],
    )]));
    h.ack_spawns();
    let b = h.key("web", "b");
    h.exit("web", "a", 1);
    h.spawned("web", "a");
    h.exit("web", "a", 1);
    h.step();
    let acts = h.take();
    assert!(!has_spawn(&acts, b) && !has_signal(&acts, b));
    assert!(h.is_running("web", "b"));
    assert_eq!(h.status("web", "b").restart_count, 0);
}

#[test]
fn stale_generation_exit_is_ignored() {
    let mut h = one(container("app"));
    let key = h.key("web", "app");
    h.exit("web", "app", 1);
    h.spawned("web", "app");
    h.input(Input::Exited {
        key,
        generation: 1,
        exit: ExitInfo {
            code: Some(1),
            ..ExitInfo::default()
        },
    });
    assert!(h.is_running("web", "app"));
    assert_eq!(h.status("web", "app").restart_count, 1);
}
