//! Sidecar containers (Kubernetes 1.29+ restartable init containers): an init container
//! whose own `restart_policy` is `Always`. Each test names the kubelet function it mirrors.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn sidecar(name: &str) -> ContainerSpec {
    with_policy(container(name), RestartPolicy::Always)
}

/// Pod `job` (policy `policy`): init containers `inits`, one main container `app`.
fn job(policy: RestartPolicy, inits: Vec<ContainerSpec>) -> Harness {
    let mut p = pod("job", vec![with_policy(container("app"), policy)]);
    p.restart_policy = policy;
    p.init_containers = shared(inits);
    Harness::new(config(vec![p]))
}

fn setup() -> ContainerSpec {
    with_policy(container("setup"), RestartPolicy::OnFailure)
}

/// `kuberuntime_manager.go` computePodActions: init containers start in order; after a
/// restartable init container has started, the next init container starts while it keeps
/// running; the regular containers start after the last init container.
#[test]
fn compute_pod_actions_next_init_starts_once_the_sidecar_is_running() {
    let mut h = job(RestartPolicy::Never, vec![sidecar("log"), setup()]);
    let (log, set, app) = (
        h.key("job", "log"),
        h.key("job", "setup"),
        h.key("job", "app"),
    );
    let acts = h.take();
    assert!(has_spawn(&acts, log) && !has_spawn(&acts, set));
    h.spawned("job", "log");
    let acts = h.take();
    assert!(has_spawn(&acts, set) && !has_spawn(&acts, app));
    assert!(h.status("job", "log").started);
    h.spawned("job", "setup");
    h.exit("job", "setup", 0);
    assert!(has_spawn(&h.take(), app));
    h.spawned("job", "app");
    assert!(h.is_running("job", "log"), "the sidecar keeps running");
    assert_eq!(h.phase("job"), Phase::Running);
}

/// computePodActions with a startup probe: "started" means the startup probe passed; until
/// then the next init container waits (and `Initialized` lists the sidecar,
/// `status/generate.go` isInitContainerInitialized).
#[test]
fn compute_pod_actions_next_init_waits_for_the_sidecars_startup_probe() {
    let mut s = sidecar("log");
    s.startup_probe = Some(probe(1.0));
    let mut h = job(RestartPolicy::Never, vec![s, setup()]);
    let set = h.key("job", "setup");
    h.ack_spawns();
    assert!(!has_spawn(&h.take(), set), "not started yet");
    assert_eq!(
        h.condition("job", ConditionType::Initialized).message,
        "containers with incomplete status: [log setup]"
    );
    assert_eq!(h.step(), 0.0);
    let (kind, seq) = h.probe_starts()[0];
    assert_eq!(kind, ProbeKind::Startup);
    h.probe_result("job", "log", kind, seq, true);
    assert!(has_spawn(&h.take(), set));
    assert_eq!(
        h.condition("job", ConditionType::Initialized).message,
        "containers with incomplete status: [setup]"
    );
}

/// computePodActions: a restartable init container is restarted whenever it exits (its policy
/// is Always), with the usual back-off, while the pod runs; the pod neither fails nor waits.
#[test]
fn compute_pod_actions_sidecar_restarts_with_backoff_under_a_never_pod() {
    let mut h = job(RestartPolicy::Never, vec![sidecar("log")]);
    let log = h.key("job", "log");
    h.ack_spawns();
    h.ack_spawns();
    assert!(h.is_running("job", "app"));
    h.exit("job", "log", 1);
    assert!(has_spawn(&h.take(), log), "first restart is immediate");
    h.spawned("job", "log");
    h.exit("job", "log", 1);
    assert_eq!(
        h.waiting("job", "log").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
    assert_eq!(
        h.phase("job"),
        Phase::Running,
        "a sidecar never fails the pod"
    );
    assert_eq!(h.step(), 10.0);
    assert!(has_spawn(&h.take(), log));
    assert_eq!(h.status("job", "log").restart_count, 2);
}

fn two_sidecars(policy: RestartPolicy) -> Harness {
    let mut h = job(policy, vec![sidecar("s1"), sidecar("s2")]);
    h.ack_spawns();
    h.ack_spawns();
    h.ack_spawns();
    assert!(h.is_running("job", "s1") && h.is_running("job", "s2") && h.is_running("job", "app"));
    h.take();
    h
}

/// `kubelet_pods.go` getPhase: terminated restartable init containers do not count; a pod with
/// Never/OnFailure whose regular containers have finished is Succeeded (or Failed) while its
/// sidecars are stopped — the last sidecar first, each earlier one after the later ones exited.
#[test]
fn get_phase_pod_completes_and_sidecars_stop_after_it_in_reverse_order() {
    let mut h = two_sidecars(RestartPolicy::Never);
    let (s1, s2) = (h.key("job", "s1"), h.key("job", "s2"));
    h.exit("job", "app", 0);
    assert_eq!(h.phase("job"), Phase::Succeeded);
    let acts = h.take();
    assert!(
        has_signal(&acts, s2) && !has_signal(&acts, s1),
        "last sidecar first"
    );
    h.exit("job", "s2", 143);
    assert!(has_signal(&h.take(), s1));
    h.exit("job", "s1", 0);
    assert_eq!(h.phase("job"), Phase::Succeeded);
    let t = h.terminated("job", "s2").unwrap();
    assert_eq!(
        t.reason,
        TerminationReason::Stopped,
        "stopped, not restarted"
    );
    assert_eq!(t.message, "the pod's containers have finished");
    assert!(h.terminated("job", "s1").is_some());
    assert_eq!(
        h.condition("job", ConditionType::Ready).reason,
        "PodCompleted"
    );

    let mut h = two_sidecars(RestartPolicy::Never);
    h.exit("job", "app", 1);
    assert_eq!(
        h.phase("job"),
        Phase::Failed,
        "the sidecars do not hide a failure"
    );
}

/// getPhase under OnFailure: a failed regular container restarts, so the sidecars stay.
#[test]
fn get_phase_sidecars_stay_while_a_regular_container_restarts() {
    let mut h = two_sidecars(RestartPolicy::OnFailure);
    let (s1, s2) = (h.key("job", "s1"), h.key("job", "s2"));
    h.exit("job", "app", 1);
    let acts = h.take();
    assert!(!has_signal(&acts, s1) && !has_signal(&acts, s2));
    assert_eq!(h.phase("job"), Phase::Running);
}

/// Pod termination with sidecars (kubelet 1.29+ `killPodWithSyncResult` ordering): regular
/// containers are stopped first, sidecars after them, in reverse order.
#[test]
fn kill_pod_stops_regular_containers_then_sidecars_in_reverse_order() {
    let mut h = two_sidecars(RestartPolicy::Always);
    let (s1, s2, app) = (h.key("job", "s1"), h.key("job", "s2"), h.key("job", "app"));
    h.cmd(Command::Stop {
        pod: "job".to_string(),
        container: None,
    })
    .unwrap();
    let acts = h.take();
    assert!(has_signal(&acts, app) && !has_signal(&acts, s1) && !has_signal(&acts, s2));
    h.exit("job", "app", 0);
    let acts = h.take();
    assert!(has_signal(&acts, s2) && !has_signal(&acts, s1));
    h.exit("job", "s2", 0);
    assert!(has_signal(&h.take(), s1));
    h.exit("job", "s1", 0);
    assert!(!h.sup.pods().iter().any(|p| {
        p.init_containers
            .iter()
            .chain(&p.containers)
            .any(|c| matches!(c.state, ContainerState::Running { .. }))
    }));
    // Starting the pod again runs its sidecars again too.
    h.cmd(Command::Start {
        pod: "job".to_string(),
        container: None,
    })
    .unwrap();
    let acts = h.take();
    assert!(has_spawn(&acts, s1) && has_spawn(&acts, s2) && has_spawn(&acts, app));
}

/// Shutdown follows the same order, and the supervisor exits once the sidecars have stopped.
#[test]
fn shutdown_stops_sidecars_after_the_regular_containers() {
    let mut h = two_sidecars(RestartPolicy::Always);
    let (s1, s2, app) = (h.key("job", "s1"), h.key("job", "s2"), h.key("job", "app"));
    h.cmd(Command::Shutdown { force: false }).unwrap();
    let acts = h.take();
    assert!(has_signal(&acts, app) && !has_signal(&acts, s2));
    h.exit("job", "app", 0);
    assert!(has_signal(&h.take(), s2));
    h.exit("job", "s2", 0);
    let acts = h.take();
    assert!(has_signal(&acts, s1) && exit_code(&acts).is_none());
    h.exit("job", "s1", 0);
    assert_eq!(exit_code(&h.take()), Some(0));
}

/// `status/generate.go` GenerateContainersReadyCondition: restartable init containers count
/// for readiness; `prober_manager.go` UpdatePodStatus makes a sidecar ready like a regular
/// container (running, started, readiness probe passed).
#[test]
fn generate_containers_ready_condition_counts_sidecars() {
    let mut s = sidecar("log");
    s.readiness_probe = Some(probe(1.0));
    let mut h = job(RestartPolicy::Always, vec![s]);
    h.ack_spawns();
    h.ack_spawns();
    let c = h.condition("job", ConditionType::ContainersReady);
    assert!(!c.status);
    assert_eq!(c.message, "containers with unready status: [log]");
    h.step();
    let (kind, seq) = h
        .probe_starts()
        .into_iter()
        .find(|p| p.0 == ProbeKind::Readiness)
        .unwrap();
    h.probe_result("job", "log", kind, seq, true);
    assert!(h.status("job", "log").ready);
    assert!(h.condition("job", ConditionType::Ready).status);
}
