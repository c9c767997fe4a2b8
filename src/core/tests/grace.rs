//! The pod's `termination_grace_period_seconds` as one budget for a whole-pod stop (kubelet
//! `kuberuntime_container.go` killContainersWithSyncResult → killContainer, and
//! `kuberuntime_termination_order.go` waitForTurn for sidecars stopped after the others):
//! pre-stop hook, stop signal and wait all end by the pod's deadline; a single-container stop
//! keeps the container's own grace.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn stop(h: &mut Harness, pod: &str, container: Option<&str>) {
    h.cmd(Command::Stop {
        pod: pod.to_string(),
        container: container.map(str::to_string),
    })
    .unwrap();
}

/// Pod `web` with grace `pod_grace` and one container `app` (grace 60 s), after `f`.
fn web(pod_grace: f64, f: impl FnOnce(&mut ContainerSpec)) -> (Harness, ContainerKey) {
    let mut c = with_policy(container("app"), RestartPolicy::Never);
    c.termination_grace = secs(60.0);
    f(&mut c);
    let mut p = pod("web", vec![c]);
    p.termination_grace = secs(pod_grace);
    let mut h = Harness::new(config(vec![p]));
    h.ack_spawns();
    h.take();
    let key = h.key("web", "app");
    (h, key)
}

/// killContainersWithSyncResult: a container's own grace longer than the pod's is cut to the
/// pod's; `stop web/app` (killContainer for one container) keeps the container's own.
#[test]
fn kill_containers_with_sync_result_caps_a_longer_container_grace_at_the_pods() {
    let (mut h, key) = web(10.0, |_| {});
    stop(&mut h, "web", None);
    assert!(has_signal(&h.take(), key));
    assert_eq!(h.step(), 10.0);
    assert!(has_kill(&h.take(), key));
    let ev = h.events();
    assert!(
        ev.iter()
            .any(|e| e.message == "Container app did not stop within 10s, sending SIGKILL"),
        "{ev:?}"
    );

    let (mut h, key) = web(10.0, |_| {});
    stop(&mut h, "web", Some("app"));
    assert!(has_signal(&h.take(), key));
    assert_eq!(
        h.step(),
        60.0,
        "a single-container stop keeps its own grace"
    );
    assert!(has_kill(&h.take(), key));
}

/// killContainer → executePreStopHook: the hook runs within the pod's grace; a hook that
/// hangs, or one that returns but leaves a container that ignores its stop signal, is ended
/// by SIGKILL at the pod's deadline, not at the container's longer grace.
#[test]
fn kill_container_hung_pre_stop_and_ignored_signal_are_killed_at_the_pod_deadline() {
    let exec = Hook::Action(ProbeAction::Exec {
        command: vec!["hook".to_string()],
    });
    let (mut h, key) = web(5.0, |c| c.lifecycle.pre_stop = Some(exec));
    stop(&mut h, "web", None);
    assert!(!has_signal(&h.take(), key), "the hook runs first");
    assert_eq!(h.step(), 5.0);
    let acts = h.take();
    assert!(has_kill(&acts, key));
    assert!(acts.iter().any(|a| matches!(
        a,
        Action::CancelProbe {
            kind: ProbeKind::Hook,
            ..
        }
    )));

    let (mut h, key) = web(5.0, |c| c.lifecycle.pre_stop = Some(Hook::Sleep(secs(2.5))));
    stop(&mut h, "web", None);
    assert!(!has_signal(&h.take(), key));
    assert_eq!(h.step(), 2.5);
    assert!(has_signal(&h.take(), key), "the signal follows the hook");
    assert_eq!(h.step(), 5.0, "the pod's deadline, not 2.5 + 60");
    assert!(has_kill(&h.take(), key));
}

/// Pod `job` (grace 10 s): sidecar `log` (grace 30 s) and main container `app`.
fn job() -> (Harness, ContainerKey, ContainerKey) {
    let mut p = pod(
        "job",
        vec![with_policy(container("app"), RestartPolicy::Never)],
    );
    p.restart_policy = RestartPolicy::Never;
    p.init_containers = shared(vec![with_policy(container("log"), RestartPolicy::Always)]);
    p.termination_grace = secs(10.0);
    let mut h = Harness::new(config(vec![p]));
    h.ack_spawns();
    h.ack_spawns();
    h.take();
    let (log, app) = (h.key("job", "log"), h.key("job", "app"));
    (h, log, app)
}

/// waitForTurn: a sidecar stopped after the main containers gets only what remains of the
/// pod's grace, and never less than the 2 s `minimumGracePeriodInSeconds`.
#[test]
fn wait_for_turn_sidecar_stopped_after_main_gets_only_the_remainder() {
    let (mut h, log, app) = job();
    stop(&mut h, "job", None);
    let acts = h.take();
    assert!(has_signal(&acts, app) && !has_signal(&acts, log));
    h.advance_to(7.0);
    h.exit("job", "app", 0);
    assert!(has_signal(&h.take(), log));
    assert_eq!(h.step(), 10.0, "the remaining 3 s, not the sidecar's 30 s");
    assert!(has_kill(&h.take(), log));

    let (mut h, log, _app) = job();
    stop(&mut h, "job", None);
    h.take();
    h.advance_to(9.5);
    h.exit("job", "app", 0);
    assert!(has_signal(&h.take(), log));
    assert_eq!(h.step(), 11.5, "at least 2 s after its turn came");
    assert!(has_kill(&h.take(), log));
}

/// Without a pod-level key the budget is the longest container grace, so nothing written in
/// a container is cut by an unwritten default.
#[test]
fn kill_containers_with_sync_result_without_pod_key_uses_the_longest_container_grace() {
    let mut c = with_policy(container("app"), RestartPolicy::Never);
    c.termination_grace = secs(60.0);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    h.take();
    stop(&mut h, "web", None);
    h.take();
    assert_eq!(h.step(), 60.0);
}

/// The largest `terminationGracePeriodSeconds` Kubernetes accepts (an int64), and durations
/// beyond what an `Instant` can hold, never panic a stop, a shutdown, a back-off, a pre-stop
/// sleep or a probe (docs/bad-input.md): each deadline saturates far in the future.
#[test]
fn a_huge_grace_backoff_hook_or_probe_duration_never_panics_the_core() {
    let huge = std::time::Duration::from_secs(i64::MAX as u64);
    // A whole-pod stop and a single-container stop with the huge grace.
    for one in [None, Some("app")] {
        let mut c = with_policy(container("app"), RestartPolicy::Never);
        c.termination_grace = huge;
        let mut h = Harness::new(config(vec![pod("web", vec![c])]));
        h.ack_spawns();
        h.take();
        let key = h.key("web", "app");
        stop(&mut h, "web", one);
        assert!(has_signal(&h.take(), key));
        h.exit("web", "app", 0);
        assert!(!h.is_running("web", "app"));
    }
    // A pre-stop sleep hook as long, then a shutdown with the huge timeout.
    let (mut h, key) = web(0.0, |c| {
        c.termination_grace = huge;
        c.lifecycle.pre_stop = Some(Hook::Sleep(huge));
    });
    stop(&mut h, "web", None);
    let _ = h.take();
    h.cmd(Command::Shutdown { force: false }).unwrap();
    let _ = h.take();
    let _ = key;
    // A back-off, a probe period, delay and timeout as long.
    let mut c = container("app");
    c.backoff = Backoff {
        initial: huge,
        max: huge,
        reset_after: huge,
    };
    let mut p = probe(1.0);
    p.period = huge;
    p.initial_delay = huge;
    p.timeout = huge;
    c.liveness_probe = Some(p);
    let mut cfg = config(vec![pod("web", vec![c])]);
    cfg.supervisor.shutdown_timeout = huge;
    let mut h = Harness::new(cfg);
    h.ack_spawns();
    for _ in 0..3 {
        h.exit("web", "app", 1);
        h.advance_to(h.t() + 1.0);
    }
    h.cmd(Command::Shutdown { force: false }).unwrap();
    let _ = h.take();
}
