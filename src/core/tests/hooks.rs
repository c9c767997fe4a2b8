//! Lifecycle hooks (kubelet `kuberuntime_container.go` startContainer / killContainer →
//! executePreStopHook, `lifecycle/handlers.go`): `post_start` gates `started`, a failing one
//! kills the container; `pre_stop` runs before the stop signal, within the grace period.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn exec_hook() -> Hook {
    Hook::Action(ProbeAction::Exec {
        command: vec!["hook".to_string()],
    })
}

fn hooked(f: impl FnOnce(&mut ContainerSpec)) -> (Harness, ContainerKey) {
    let mut c = with_policy(container("app"), RestartPolicy::Never);
    c.termination_grace = secs(10.0);
    f(&mut c);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    (h, key)
}

fn hook_result(h: &mut Harness, key: ContainerKey, seq: u64, outcome: ProbeOutcome) {
    h.input(Input::ProbeResult {
        key,
        generation: h.generation(key),
        kind: ProbeKind::Hook,
        seq,
        outcome,
        duration: secs(0.01),
    });
}

/// startContainer: the post-start hook runs right after the start; the container is running
/// but not started (nor ready) until it returns.
#[test]
fn start_container_post_start_hook_gates_started() {
    let (mut h, key) = hooked(|c| c.lifecycle.post_start = Some(exec_hook()));
    let starts = h.probe_starts();
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0].0, ProbeKind::Hook);
    assert!(h.is_running("web", "app"));
    assert!(!h.status("web", "app").started);
    assert!(!h.condition("web", ConditionType::Ready).status);
    hook_result(
        &mut h,
        key,
        starts[0].1,
        ProbeOutcome::Success(String::new()),
    );
    assert!(h.status("web", "app").started && h.status("web", "app").ready);
}

/// startContainer: a failing post-start hook is a `FailedPostStartHook` event and the
/// container is killed; its termination says why and is a failure.
#[test]
fn start_container_failing_post_start_hook_kills_the_container() {
    let (mut h, key) = hooked(|c| c.lifecycle.post_start = Some(exec_hook()));
    let (_, seq) = h.probe_starts()[0];
    h.take();
    hook_result(
        &mut h,
        key,
        seq,
        ProbeOutcome::Failure("command exited with code 1: no db".to_string()),
    );
    let ev = h.event("FailedPostStartHook").unwrap();
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(ev.message, "command exited with code 1: no db");
    assert!(has_signal(&h.take(), key));
    h.exit("web", "app", 0);
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::FailedPostStartHook);
    assert_eq!(t.message, "command exited with code 1: no db");
    assert_eq!(h.phase("web"), Phase::Failed, "a hook kill is a failure");
}

/// killContainer → executePreStopHook: the hook runs first and the stop signal follows it;
/// the grace counts from when the hook started.
#[test]
fn kill_container_runs_pre_stop_before_the_signal() {
    let (mut h, key) = hooked(|c| c.lifecycle.pre_stop = Some(exec_hook()));
    h.take();
    h.advance_to(1.0);
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    let starts = h.probe_starts();
    assert_eq!(starts.len(), 1, "the pre-stop hook");
    assert!(!has_signal(&h.take(), key), "no signal while the hook runs");
    h.advance_to(4.0);
    hook_result(
        &mut h,
        key,
        starts[0].1,
        ProbeOutcome::Success(String::new()),
    );
    assert!(has_signal(&h.take(), key));
    assert_eq!(h.step(), 11.0, "kill at hook start + grace");
    assert!(has_kill(&h.take(), key));
}

/// executePreStopHook gives up at the end of the grace: a hung hook is cancelled and the
/// container killed.
#[test]
fn kill_container_hung_pre_stop_hook_is_cut_off_at_the_grace() {
    let (mut h, key) = hooked(|c| c.lifecycle.pre_stop = Some(exec_hook()));
    h.take();
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    h.probe_starts();
    assert_eq!(h.step(), 10.0);
    let acts = h.take();
    assert!(has_kill(&acts, key));
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::CancelProbe {
            kind: ProbeKind::Hook,
            ..
        }
    )));
}

/// A `sleep` pre-stop hook is a deadline of the core's, then the signal; a failed exec
/// pre-stop hook is a `FailedPreStopHook` event and the signal still follows.
#[test]
fn sleep_pre_stop_then_signal_and_failed_pre_stop_still_signals() {
    let (mut h, key) = hooked(|c| c.lifecycle.pre_stop = Some(Hook::Sleep(secs(3.0))));
    h.take();
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    assert!(!has_signal(&h.take(), key));
    assert_eq!(h.step(), 3.0);
    assert!(has_signal(&h.take(), key));

    let (mut h, key) = hooked(|c| c.lifecycle.pre_stop = Some(exec_hook()));
    h.take();
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    let (_, seq) = h.probe_starts()[0];
    hook_result(
        &mut h,
        key,
        seq,
        ProbeOutcome::Failure("refused".to_string()),
    );
    assert!(has_signal(&h.take(), key));
    assert_eq!(h.event("FailedPreStopHook").unwrap().message, "refused");
}
