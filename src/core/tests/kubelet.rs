//! Conformance with the kubelet, rule by rule: each test names the kubelet function whose
//! behaviour it replays (paths under `kubernetes/pkg/kubelet/`). Where vigil differs on purpose
//! the test says so and docs/behaviour.md §9 lists it.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn never_pod_with_init() -> Harness {
    let mut p = pod(
        "job",
        vec![with_policy(container("main"), RestartPolicy::Never)],
    );
    p.init_containers = shared(vec![with_policy(container("setup"), RestartPolicy::Never)]);
    p.restart_policy = RestartPolicy::Never;
    let mut h = Harness::new(config(vec![p]));
    h.ack_spawns();
    h
}

/// `prober/prober_manager.go` UpdatePodStatus: "init containers are ready if they have exited
/// with success"; a failed one is not.
#[test]
fn update_pod_status_completed_init_container_is_ready() {
    let mut h = never_pod_with_init();
    assert!(!h.status("job", "setup").ready, "running init: not ready");
    h.exit("job", "setup", 0);
    assert!(h.status("job", "setup").ready);
    assert!(!h.status("job", "setup").started, "terminated: not started");

    let mut h = never_pod_with_init();
    h.exit("job", "setup", 1);
    assert!(!h.status("job", "setup").ready);
}

fn liveness_failing(policy: RestartPolicy) -> Harness {
    let mut c = with_policy(container("app"), policy);
    let mut l = probe(1.0);
    l.failure_threshold = 1;
    c.liveness_probe = Some(l);
    let mut p = pod("web", vec![c]);
    p.restart_policy = policy;
    let mut h = Harness::new(config(vec![p]));
    h.ack_spawns();
    h.step();
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Liveness, seq, false);
    h
}

/// `kuberuntime/kuberuntime_manager.go` computePodActions: the kill message gains
/// ", will be restarted" only when the container is going to be restarted.
#[test]
fn compute_pod_actions_killing_message_says_restart_only_when_it_will() {
    let h = liveness_failing(RestartPolicy::Never);
    assert_eq!(
        h.event("Killing").unwrap().message,
        "Container app failed liveness probe"
    );
    for policy in [RestartPolicy::Always, RestartPolicy::OnFailure] {
        let h = liveness_failing(policy);
        assert_eq!(
            h.event("Killing").unwrap().message,
            "Container app failed liveness probe, will be restarted"
        );
    }
}

fn condition_reason(h: &Harness, pod: &str, kind: ConditionType) -> (bool, String) {
    let c = h.condition(pod, kind);
    (c.status, c.reason)
}

/// `status/generate.go` GeneratePodInitializedCondition: a Succeeded pod's `Initialized` is
/// true with reason `PodCompleted`; GenerateContainersReadyCondition and
/// GeneratePodReadyCondition: false with `PodCompleted`.
#[test]
fn generate_conditions_succeeded_pod_says_pod_completed() {
    let mut h = never_pod_with_init();
    h.exit("job", "setup", 0);
    h.ack_spawns();
    assert_eq!(
        condition_reason(&h, "job", ConditionType::Initialized),
        (true, String::new())
    );
    h.exit("job", "main", 0);
    assert_eq!(h.phase("job"), Phase::Succeeded);
    let completed = (false, "PodCompleted".to_string());
    assert_eq!(
        condition_reason(&h, "job", ConditionType::Initialized),
        (true, "PodCompleted".to_string())
    );
    assert_eq!(
        condition_reason(&h, "job", ConditionType::ContainersReady),
        completed
    );
    assert_eq!(condition_reason(&h, "job", ConditionType::Ready), completed);
}

/// `status/generate.go` GenerateContainersReadyCondition / GeneratePodReadyCondition: "if the
/// pod phase is failed, explicitly set the ready condition to false" with reason `PodFailed`;
/// `Initialized` keeps its ordinary value (true once the main containers ran).
#[test]
fn generate_conditions_failed_pod_says_pod_failed() {
    let mut h = never_pod_with_init();
    h.exit("job", "setup", 0);
    h.ack_spawns();
    h.exit("job", "main", 2);
    assert_eq!(h.phase("job"), Phase::Failed);
    let failed = (false, "PodFailed".to_string());
    assert_eq!(
        condition_reason(&h, "job", ConditionType::ContainersReady),
        failed
    );
    assert_eq!(condition_reason(&h, "job", ConditionType::Ready), failed);
    assert_eq!(
        condition_reason(&h, "job", ConditionType::Initialized),
        (true, String::new())
    );

    // Failed during initialisation: Initialized stays false, naming the init container.
    let mut h = never_pod_with_init();
    h.exit("job", "setup", 1);
    assert_eq!(h.phase("job"), Phase::Failed);
    assert_eq!(
        condition_reason(&h, "job", ConditionType::Initialized),
        (false, "ContainersNotInitialized".to_string())
    );
    assert_eq!(condition_reason(&h, "job", ConditionType::Ready), failed);
}

fn stop_with_grace(grace: f64) -> (Harness, ContainerKey) {
    let mut c = container("app");
    c.termination_grace = secs(grace);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    assert!(has_signal(&h.take(), key), "stop signal first");
    (h, key)
}

/// `kuberuntime/kuberuntime_container.go` killContainer: a grace below
/// `minimumGracePeriodInSeconds` (2 s) is raised to 2 s. vigil applies this to whole seconds
/// (what a Kubernetes spec can hold) and keeps `0` (SIGKILL at once) and fractions as written.
#[test]
fn kill_container_minimum_grace_period_is_two_seconds_for_whole_seconds() {
    let (mut h, key) = stop_with_grace(1.0);
    assert_eq!(h.step(), 2.0, "grace 1 waits the kubelet's 2 s");
    assert!(has_kill(&h.take(), key));

    let (mut h, key) = stop_with_grace(0.0);
    assert_eq!(h.step(), 0.0, "grace 0 kills right after the stop signal");
    assert!(has_kill(&h.take(), key));

    let (mut h, key) = stop_with_grace(0.5);
    assert_eq!(h.step(), 0.5, "a fractional grace is honoured as written");
    assert!(has_kill(&h.take(), key));

    let (mut h, key) = stop_with_grace(3.0);
    assert_eq!(h.step(), 3.0);
    assert!(has_kill(&h.take(), key));
}

/// killContainer applies the same floor to a probe's own `terminationGracePeriodSeconds`.
#[test]
fn kill_container_minimum_grace_applies_to_probe_grace() {
    let mut c = with_policy(container("app"), RestartPolicy::Never);
    let mut l = probe(1.0);
    l.failure_threshold = 1;
    l.termination_grace = Some(secs(1.0));
    c.liveness_probe = Some(l);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    assert_eq!(h.step(), 0.0);
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Liveness, seq, false);
    assert!(has_signal(&h.take(), key));
    assert_eq!(h.step(), 2.0);
    assert!(has_kill(&h.take(), key));
}

/// `prober/prober.go` probe: a `probe.Warning` result (the HTTP prober's "Probe terminated
/// redirects", `pkg/probe/http` DoHTTPProbe) is a success, recorded as a `ProbeWarning` Warning
/// event `"<Kind> probe warning: <output>"`.
#[test]
fn probe_warning_counts_as_success_and_records_probe_warning_event() {
    let mut c = container("app");
    c.readiness_probe = Some(probe(1.0));
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    h.step();
    let (kind, seq) = h.probe_starts()[0];
    let key = h.key("web", "app");
    h.input(Input::ProbeResult {
        key,
        generation: h.generation(key),
        kind,
        seq,
        outcome: ProbeOutcome::Warning(
            "Probe terminated redirects, Response body: moved".to_string(),
        ),
        duration: secs(0.01),
    });
    assert!(h.status("web", "app").ready, "a warning is a success");
    let ev = h.event("ProbeWarning").unwrap();
    assert_eq!(ev.kind, EventType::Warning);
    assert_eq!(
        ev.message,
        "Readiness probe warning: Probe terminated redirects, Response body: moved"
    );
    assert!(h.event("Unhealthy").is_none());
}

/// `kuberuntime/kuberuntime_container.go` getTerminationMessage: what the container left (its
/// file, or its log tail under FallbackToLogsOnError, read by the runtime) is
/// `terminated.message`; without one vigil's own explanation stays (the kubelet leaves it
/// empty).
#[test]
fn get_termination_message_replaces_vigils_explanation_when_present() {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![with_policy(container("app"), RestartPolicy::Never)],
    )]));
    h.ack_spawns();
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            code: Some(3),
            termination_message: Some("config file missing: /etc/app.toml".to_string()),
            ..ExitInfo::default()
        },
    );
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.message, "config file missing: /etc/app.toml");
    assert_eq!(t.reason, TerminationReason::Error);
    assert_eq!(t.exit_code, 3);

    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![with_policy(container("app"), RestartPolicy::Never)],
    )]));
    h.ack_spawns();
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            code: Some(3),
            termination_message: Some(String::new()),
            ..ExitInfo::default()
        },
    );
    assert_eq!(
        h.terminated("web", "app").unwrap().message,
        "exited with code 3",
        "an empty message keeps vigil's explanation"
    );
}
