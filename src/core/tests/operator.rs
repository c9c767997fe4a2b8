//! Operator `start` and `restart` of a whole pod honour its order (issue 14 point 5): a start
//! waits for `depends_on` like a pod that has not begun, and a pod restart runs the init
//! containers again, as a new pod would (behaviour.md §6.1, §8).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn start(pod: &str) -> Command {
    Command::Start {
        pod: pod.to_string(),
        container: None,
    }
}

fn stop(pod: &str) -> Command {
    Command::Stop {
        pod: pod.to_string(),
        container: None,
    }
}

fn restart(pod: &str, container: Option<&str>) -> Command {
    Command::Restart {
        pod: pod.to_string(),
        container: container.map(str::to_string),
    }
}

/// `db` (one container) and `app` (init container `migrate`, container `web`), `app`
/// depending on `db` being `condition`.
fn stack(condition: DependencyCondition) -> Harness {
    let mut app = pod("app", vec![container("web")]);
    app.init_containers = shared(vec![with_policy(
        container("migrate"),
        RestartPolicy::OnFailure,
    )]);
    app.depends_on = vec![Dependency::new("db", condition)];
    Harness::new(config(vec![pod("db", vec![container("db")]), app]))
}

/// Both pods running: db started, app's init completed, web running.
fn running_stack() -> Harness {
    let mut h = stack(DependencyCondition::Started);
    h.ack_spawns();
    h.ack_spawns();
    h.exit("app", "migrate", 0);
    h.ack_spawns();
    assert!(h.is_running("app", "web"));
    h
}

/// Stop a pod and let every container exit on the stop signal.
fn stop_and_exit(h: &mut Harness, pod: &str, containers: &[&str]) {
    h.cmd(stop(pod)).unwrap();
    for c in containers {
        if h.is_running(pod, c) {
            h.killed_by(pod, c, 15);
        }
    }
}

#[test]
fn start_of_a_stopped_pod_waits_for_its_stopped_dependency() {
    let mut h = running_stack();
    stop_and_exit(&mut h, "app", &["web"]);
    stop_and_exit(&mut h, "db", &["db"]);
    h.take();
    let msg = h.cmd(start("app")).unwrap();
    assert_eq!(msg, "starting pod app: waiting for pod db to be started");
    let (web, migrate) = (h.key("app", "web"), h.key("app", "migrate"));
    assert!(!has_spawn(&h.take(), web), "must not start before db");
    assert_eq!(
        h.waiting("app", "web"),
        Some((
            WaitingReason::WaitingForDependencies,
            "waiting for pod db to be started".to_string()
        ))
    );
    assert_eq!(h.phase("app"), Phase::Pending);
    let last = h
        .status("app", "web")
        .last_state
        .expect("the stopped run is kept");
    assert_eq!(last.reason, TerminationReason::Stopped);
    h.cmd(start("db")).unwrap();
    assert!(!has_spawn(&h.take(), web), "db created, not started yet");
    h.spawned("db", "db");
    let acts = h.take();
    assert!(has_spawn(&acts, web), "resumes once db has started");
    assert!(
        !has_spawn(&acts, migrate),
        "a start resumes the pod at its stage: init containers do not run again"
    );
    h.spawned("app", "web");
    assert_eq!(h.status("app", "web").restart_count, 1);
}

#[test]
fn start_of_a_pod_not_begun_no_longer_overrides_its_dependencies() {
    let mut db = container("db");
    db.readiness_probe = Some(probe(1.0));
    let mut app = pod("app", vec![container("web")]);
    app.depends_on = vec![Dependency::new("db", DependencyCondition::Ready)];
    let mut h = Harness::new(config(vec![pod("db", vec![db]), app]));
    let web = h.key("app", "web");
    h.take();
    h.cmd(start("app")).unwrap();
    assert!(!has_spawn(&h.take(), web));
    assert_eq!(
        h.waiting("app", "web").unwrap().0,
        WaitingReason::WaitingForDependencies
    );
    // A stop holds it; a start lifts the hold and it waits again.
    h.cmd(stop("app")).unwrap();
    h.cmd(start("app")).unwrap();
    assert!(!has_spawn(&h.take(), web));
    h.spawned("db", "db");
    h.step();
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("db", "db", ProbeKind::Readiness, seq, true);
    assert!(has_spawn(&h.take(), web), "starts once db is ready");
}

#[test]
fn start_of_a_pod_still_running_in_part_starts_what_is_stopped_at_once() {
    let mut app = pod("app", vec![container("web"), container("worker")]);
    app.depends_on = vec![Dependency::new("db", DependencyCondition::Started)];
    let mut h = Harness::new(config(vec![pod("db", vec![container("db")]), app]));
    h.ack_spawns();
    h.ack_spawns();
    h.cmd(Command::Stop {
        pod: "app".to_string(),
        container: Some("worker".to_string()),
    })
    .unwrap();
    h.killed_by("app", "worker", 15);
    stop_and_exit(&mut h, "db", &["db"]);
    h.take();
    // The pod has begun and still runs: its dependencies are not watched any more (§8).
    h.cmd(start("app")).unwrap();
    assert!(has_spawn(&h.take(), h.key("app", "worker")));
}

#[test]
fn restart_of_a_pod_runs_its_init_containers_again_once_everything_stopped() {
    let mut h = running_stack();
    let (web, migrate) = (h.key("app", "web"), h.key("app", "migrate"));
    h.take();
    assert_eq!(h.cmd(restart("app", None)).unwrap(), "restarting pod app");
    let acts = h.take();
    assert!(has_signal(&acts, web));
    assert!(!has_spawn(&acts, migrate) && !has_spawn(&acts, web));
    assert_eq!(
        h.cmd(restart("app", None)).unwrap(),
        "pod app is already restarting"
    );
    h.killed_by("app", "web", 15);
    let acts = h.take();
    assert!(has_spawn(&acts, migrate), "init container first");
    assert!(!has_spawn(&acts, web));
    assert_eq!(
        h.waiting("app", "web"),
        Some((WaitingReason::PodInitializing, String::new()))
    );
    assert!(!h.condition("app", ConditionType::Initialized).status);
    h.spawned("app", "migrate");
    h.exit("app", "migrate", 0);
    assert!(has_spawn(&h.take(), web));
    h.spawned("app", "web");
    let st = h.status("app", "web");
    assert_eq!(st.restart_count, 1);
    assert_eq!(st.last_state.unwrap().reason, TerminationReason::Stopped);
    assert_eq!(h.status("app", "migrate").restart_count, 1);
    assert!(h.condition("app", ConditionType::Initialized).status);
}

#[test]
fn restart_of_a_pod_waits_for_its_dependencies_before_its_init_containers() {
    let mut h = running_stack();
    stop_and_exit(&mut h, "db", &["db"]);
    h.take();
    h.cmd(restart("app", None)).unwrap();
    h.killed_by("app", "web", 15);
    let migrate = h.key("app", "migrate");
    assert!(!has_spawn(&h.take(), migrate));
    assert_eq!(
        h.waiting("app", "migrate"),
        Some((
            WaitingReason::WaitingForDependencies,
            "waiting for pod db to be started".to_string()
        ))
    );
    h.cmd(start("db")).unwrap();
    h.spawned("db", "db");
    assert!(has_spawn(&h.take(), migrate));
}

#[test]
fn restart_of_a_stopped_pod_starts_it_over_at_once() {
    let mut h = running_stack();
    stop_and_exit(&mut h, "app", &["web"]);
    h.take();
    h.cmd(restart("app", None)).unwrap();
    assert!(has_spawn(&h.take(), h.key("app", "migrate")));
}

#[test]
fn restart_of_one_container_does_not_run_init_containers_again() {
    let mut h = running_stack();
    let (web, migrate) = (h.key("app", "web"), h.key("app", "migrate"));
    h.take();
    h.cmd(restart("app", Some("web"))).unwrap();
    h.killed_by("app", "web", 15);
    let acts = h.take();
    assert!(has_spawn(&acts, web));
    assert!(!has_spawn(&acts, migrate));
}

#[test]
fn stop_during_a_pod_restart_cancels_the_restart() {
    let mut h = running_stack();
    h.take();
    h.cmd(restart("app", None)).unwrap();
    h.cmd(stop("app")).unwrap();
    h.killed_by("app", "web", 15);
    let acts = h.take();
    assert!(!has_spawn(&acts, h.key("app", "migrate")));
    assert!(!acts.iter().any(|a| matches!(a, Action::Spawn { .. })));
    assert_eq!(
        h.terminated("app", "web").unwrap().reason,
        TerminationReason::Stopped
    );
}

#[test]
fn container_start_in_a_pod_not_begun_is_refused_naming_the_pod_start() {
    let mut app = pod("app", vec![container("web")]);
    app.depends_on = vec![Dependency::new("db", DependencyCondition::Completed)];
    let mut db = pod(
        "db",
        vec![with_policy(container("db"), RestartPolicy::Never)],
    );
    db.restart_policy = RestartPolicy::Never;
    let mut h = Harness::new(config(vec![db, app]));
    let e = h
        .cmd(Command::Start {
            pod: "app".to_string(),
            container: Some("web".to_string()),
        })
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::NotApplicable);
    assert!(
        e.message.contains("before its pod has started"),
        "{}",
        e.message
    );
}

#[test]
fn shutdown_during_a_pod_restart_exits_without_starting_it_over() {
    let mut h = running_stack();
    h.take();
    h.cmd(restart("app", None)).unwrap();
    h.cmd(Command::Shutdown { force: false }).unwrap();
    h.killed_by("app", "web", 15);
    h.killed_by("db", "db", 15);
    let acts = h.take();
    assert!(!acts.iter().any(|a| matches!(a, Action::Spawn { .. })));
    assert_eq!(exit_code(&acts), Some(0));
}

#[test]
fn a_pod_refused_at_start_fails_alone_and_cannot_be_started() {
    let mut big = pod("big", vec![container("c")]);
    big.init_containers = shared(vec![with_policy(
        container("init"),
        RestartPolicy::OnFailure,
    )]);
    let mut after = pod("after", vec![container("c")]);
    after.depends_on = vec![Dependency::new("big", DependencyCondition::Started)];
    let cfg = config(vec![big, pod("small", vec![container("c")]), after]);
    let mut h = Harness::new(cfg.clone());
    let why = "memory controller not available in cgroup2 at /sys/fs/cgroup/unified";
    h.sup = Supervisor::new_refusing(&cfg, h.now, &[("big".to_string(), why.to_string())]);
    h.pending.clear();
    let acts = h.take();
    assert!(has_spawn(&acts, h.key("small", "c")), "the others start");
    assert!(!has_spawn(&acts, h.key("big", "c")) && !has_spawn(&acts, h.key("big", "init")));
    assert_eq!(h.phase("big"), Phase::Failed);
    for c in ["init", "c"] {
        let t = h.terminated("big", c).expect("terminated");
        assert_eq!(t.reason, TerminationReason::StartError);
        assert_eq!(t.message, why);
    }
    let ev = h.event("FailedCreatePodContainer").expect("event");
    assert_eq!(ev.kind, EventType::Warning);
    assert!(ev.message.contains(why), "{}", ev.message);
    // A dependent waits, saying on what (tests/dependencies.rs has the rest).
    assert_eq!(
        h.waiting("after", "c").unwrap().0,
        WaitingReason::DependencyFailed
    );
    for cmd in [
        start("big"),
        restart("big", None),
        restart("big", Some("c")),
    ] {
        let e = h.cmd(cmd).unwrap_err();
        assert_eq!(e.kind, CommandErrorKind::NotApplicable);
        assert!(e.message.contains("refused at start"), "{}", e.message);
    }
    assert_eq!(h.cmd(stop("big")).unwrap(), "pod big is already stopped");
    assert!(!h.take().iter().any(|a| matches!(a, Action::Spawn { .. })));
}
