//! Start-up sequence, init containers, dependencies, phases and conditions (§1, §5), and
//! operator start/stop/restart.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn with_inits(policy: RestartPolicy) -> Harness {
    let mut p = pod(
        "web",
        vec![
            with_policy(container("a"), policy),
            with_policy(container("b"), policy),
        ],
    );
    // As validation folds it: under a pod's Always a plain init container gets OnFailure
    // (an init container's own Always would make it a sidecar).
    let init_policy = match policy {
        RestartPolicy::Always => RestartPolicy::OnFailure,
        p => p,
    };
    p.init_containers = shared(vec![
        with_policy(container("i1"), init_policy),
        with_policy(container("i2"), init_policy),
    ]);
    p.restart_policy = policy;
    Harness::new(config(vec![p]))
}

#[test]
fn spawn_then_spawned_gives_running_and_started_event() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    let key = h.key("web", "app");
    let acts = h.take();
    assert!(matches!(
        &acts[..],
        [Action::Spawn { key: k, generation: 1, pod, init: false, .. }] if *k == key && pod == "web"
    ));
    assert_eq!(
        h.waiting("web", "app").unwrap().0,
        WaitingReason::ContainerCreating
    );
    assert_eq!(h.phase("web"), Phase::Pending);
    let pid = h.spawned("web", "app");
    let st = h.status("web", "app");
    assert_eq!(st.pid, Some(pid));
    assert!(st.started && st.ready, "no probes: started and ready");
    assert_eq!(
        st.state,
        ContainerState::Running {
            started_at: h.t0,
            terminating: None
        }
    );
    assert_eq!(h.phase("web"), Phase::Running);
    let ev = h.event("Started").unwrap();
    assert_eq!(ev.kind, EventType::Normal);
    assert_eq!(ev.message, "Started container app");
    assert!(h.condition("web", ConditionType::Ready).status);
}

#[test]
fn init_containers_run_one_at_a_time_then_all_containers() {
    let mut h = with_inits(RestartPolicy::Always);
    let (i1, i2, a, b) = (
        h.key("web", "i1"),
        h.key("web", "i2"),
        h.key("web", "a"),
        h.key("web", "b"),
    );
    let acts = h.take();
    assert!(has_spawn(&acts, i1) && !has_spawn(&acts, i2) && !has_spawn(&acts, a));
    assert_eq!(
        h.waiting("web", "a").unwrap().0,
        WaitingReason::PodInitializing
    );
    assert_eq!(h.phase("web"), Phase::Pending);
    let init = h.condition("web", ConditionType::Initialized);
    assert!(!init.status);
    assert_eq!(init.message, "containers with incomplete status: [i1 i2]");
    h.spawned("web", "i1");
    h.exit("web", "i1", 0);
    let acts = h.take();
    assert!(has_spawn(&acts, i2) && !has_spawn(&acts, a));
    h.spawned("web", "i2");
    h.exit("web", "i2", 0);
    let acts = h.take();
    assert!(has_spawn(&acts, a) && has_spawn(&acts, b));
    assert!(h.condition("web", ConditionType::Initialized).status);
    assert_eq!(
        h.terminated("web", "i1").unwrap().reason,
        TerminationReason::Completed
    );
}

#[test]
fn failed_init_container_restarts_with_backoff_under_always() {
    let mut h = with_inits(RestartPolicy::Always);
    let i1 = h.key("web", "i1");
    h.ack_spawns();
    h.exit("web", "i1", 1);
    assert!(has_spawn(&h.take(), i1), "first restart immediate");
    h.spawned("web", "i1");
    h.exit("web", "i1", 1);
    assert_eq!(
        h.waiting("web", "i1").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
    assert_eq!(h.step(), 10.0);
    assert!(has_spawn(&h.take(), i1));
    assert_eq!(h.phase("web"), Phase::Pending);
}

#[test]
fn failed_init_container_fails_pod_under_never() {
    let mut h = with_inits(RestartPolicy::Never);
    h.ack_spawns();
    h.exit("web", "i1", 1);
    assert!(h.take().is_empty());
    assert_eq!(h.phase("web"), Phase::Failed);
    assert_eq!(
        h.waiting("web", "a").unwrap().0,
        WaitingReason::PodInitializing
    );
}

#[test]
fn phases_succeeded_and_failed_when_nothing_restarts() {
    let p = |n: &str| {
        pod(
            n,
            vec![
                with_policy(container("a"), RestartPolicy::Never),
                with_policy(container("b"), RestartPolicy::Never),
            ],
        )
    };
    let mut h = Harness::new(config(vec![p("ok"), p("bad")]));
    h.ack_spawns();
    h.exit("ok", "a", 0);
    assert_eq!(h.phase("ok"), Phase::Running, "b still runs");
    h.exit("ok", "b", 0);
    assert_eq!(h.phase("ok"), Phase::Succeeded);
    let ready = h.condition("ok", ConditionType::Ready);
    assert!(!ready.status);
    assert_eq!(ready.reason, "PodCompleted");
    h.exit("bad", "a", 0);
    h.exit("bad", "b", 2);
    assert_eq!(h.phase("bad"), Phase::Failed);
}

#[test]
fn dependent_pod_waits_until_dependency_ready() {
    let mut web = pod("web", vec![container("app")]);
    web.depends_on = vec![Dependency::new("db", DependencyCondition::Ready)];
    let mut db = container("db");
    db.readiness_probe = Some(probe(1.0));
    let mut h = Harness::new(config(vec![pod("db", vec![db]), web]));
    let app = h.key("web", "app");
    assert!(!has_spawn(&h.take(), app));
    assert_eq!(
        h.waiting("web", "app"),
        Some((
            WaitingReason::WaitingForDependencies,
            "waiting for pod db to be ready".to_string()
        ))
    );
    h.spawned("db", "db");
    h.step();
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("db", "db", ProbeKind::Readiness, seq, true);
    assert!(has_spawn(&h.take(), app));
}

#[test]
fn dependency_conditions_started_and_completed() {
    let dep = |n: &str, on: &str, c: DependencyCondition| {
        let mut p = pod(n, vec![container("app")]);
        p.depends_on = vec![Dependency::new(on, c)];
        p
    };
    let mut mig = pod(
        "migrate",
        vec![with_policy(container("app"), RestartPolicy::Never)],
    );
    mig.restart_policy = RestartPolicy::Never;
    let mut h = Harness::new(config(vec![
        mig,
        dep("api", "migrate", DependencyCondition::Completed),
        dep("worker", "migrate", DependencyCondition::Started),
    ]));
    let (api, worker) = (h.key("api", "app"), h.key("worker", "app"));
    let acts = h.take();
    assert!(!has_spawn(&acts, api) && !has_spawn(&acts, worker));
    h.spawned("migrate", "app");
    let acts = h.take();
    assert!(has_spawn(&acts, worker) && !has_spawn(&acts, api));
    h.exit("migrate", "app", 0);
    assert!(has_spawn(&h.take(), api));
}

#[test]
fn unknown_pod_or_container_is_not_found() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    let e = h
        .cmd(Command::Stop {
            pod: "nope".to_string(),
            container: None,
        })
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::NotFound);
    assert!(e.message.contains("nope"));
    let e = h
        .cmd(Command::Start {
            pod: "web".to_string(),
            container: Some("zz".to_string()),
        })
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::NotFound);
    assert!(e.message.contains("zz"));
}

#[test]
fn start_after_stop_runs_again_with_fresh_backoff() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    // Build up some back-off history.
    h.exit("web", "app", 1);
    h.spawned("web", "app");
    h.exit("web", "app", 1);
    assert_eq!(
        h.waiting("web", "app").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    assert_eq!(
        h.terminated("web", "app").unwrap().reason,
        TerminationReason::Stopped
    );
    assert_eq!(h.sup.poll_timeout(), None, "no restart pending");
    h.take();
    h.cmd(Command::Start {
        pod: "web".to_string(),
        container: Some("app".to_string()),
    })
    .unwrap();
    assert!(has_spawn(&h.take(), key));
    h.spawned("web", "app");
    h.exit("web", "app", 1);
    assert!(
        has_spawn(&h.take(), key),
        "fresh back-off: immediate restart"
    );
}

#[test]
fn restart_stops_then_starts_immediately_after_exit() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    h.cmd(Command::Restart {
        pod: "web".to_string(),
        container: Some("app".to_string()),
    })
    .unwrap();
    let acts = h.take();
    assert!(has_signal(&acts, key) && !has_spawn(&acts, key));
    h.advance_to(2.0);
    h.killed_by("web", "app", 15);
    assert!(has_spawn(&h.take(), key));
    let st = h.status("web", "app");
    assert_eq!(st.restart_count, 1);
    assert_eq!(st.last_state.unwrap().reason, TerminationReason::Stopped);
}

#[test]
fn stop_signal_then_kill_after_grace() {
    let mut c = container("app");
    c.termination_grace = secs(5.0);
    c.stop_signal = 2;
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    let key = h.key("web", "app");
    h.advance_to(1.0);
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    assert!(h.take().contains(&Action::Signal {
        key,
        generation: 1,
        signal: 2
    }));
    assert!(h.is_running("web", "app"), "running until it exits");
    assert_eq!(h.step(), 6.0);
    assert_eq!(h.take(), vec![Action::Kill { key, generation: 1 }]);
    assert_eq!(h.sup.poll_timeout(), None, "kill is sent once");
    h.killed_by("web", "app", 9);
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::Stopped);
    assert_eq!(
        t.message,
        "stopped by request; did not stop within 5s, killed with SIGKILL"
    );
    let kill = h
        .events()
        .into_iter()
        .find(|e| e.reason == "Killing" && e.kind == EventType::Warning)
        .expect("a Warning Killing event for the SIGKILL");
    assert_eq!(
        kill.message,
        "Container app did not stop within 5s, sending SIGKILL"
    );
}

#[test]
fn a_forced_shutdown_names_each_container_it_sigkills() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    h.cmd(Command::Shutdown { force: true }).unwrap();
    let kill = h
        .events()
        .into_iter()
        .find(|e| e.reason == "Killing" && e.kind == EventType::Warning)
        .expect("a Warning Killing event");
    assert_eq!(kill.object, "web/app");
    assert_eq!(
        kill.message,
        "Container app: forced shutdown, sending SIGKILL"
    );
}

#[test]
fn stop_while_creating_signals_once_spawned() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    let key = h.key("web", "app");
    h.take();
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    assert!(!has_signal(&h.take(), key));
    h.spawned("web", "app");
    assert!(has_signal(&h.take(), key));
}

#[test]
fn events_aggregate_and_bump_seq() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    let first = h.event("Started").unwrap();
    assert_eq!(first.count, 1);
    h.exit("web", "app", 1);
    h.spawned("web", "app");
    let again = h.event("Started").unwrap();
    assert_eq!(again.count, 2);
    assert!(again.seq > first.seq);
    assert_eq!(again.first, first.first);
    let started_since = |seq| {
        h.sup
            .events_since(seq)
            .iter()
            .filter(|e| e.reason == "Started")
            .count()
    };
    assert_eq!(started_since(first.seq), 1);
    assert_eq!(started_since(again.seq), 0);
}

#[test]
fn an_exit_is_an_event_before_the_restart_normal_when_clean_warning_when_failed() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    h.exit("web", "app", 0);
    let reasons: Vec<_> = h.events().iter().map(|e| e.reason.clone()).collect();
    assert_eq!(reasons, ["Started", "Exited"]);
    let ev = h.event("Exited").unwrap();
    assert_eq!(ev.kind, EventType::Normal);
    assert_eq!(ev.message, "Container app exited: Completed, exit code 0");
    h.spawned("web", "app");
    h.exit("web", "app", 3);
    let failed = h
        .events()
        .into_iter()
        .find(|e| e.reason == "Exited" && e.kind == EventType::Warning)
        .expect("a Warning Exited event");
    assert_eq!(failed.message, "Container app exited: Error, exit code 3");
}

#[test]
fn starting_a_container_before_its_init_containers_completed_is_not_applicable() {
    let mut h = with_inits(RestartPolicy::Always);
    h.take();
    let e = h
        .cmd(Command::Start {
            pod: "web".to_string(),
            container: Some("a".to_string()),
        })
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::NotApplicable);
    assert!(e.message.contains("web/a"), "{}", e.message);
}

#[test]
fn a_repeated_stop_says_the_pod_is_already_stopped() {
    let mut h = Harness::new(config(vec![pod("web", vec![container("app")])]));
    h.ack_spawns();
    let stop = |container: Option<&str>| Command::Stop {
        pod: "web".to_string(),
        container: container.map(str::to_string),
    };
    assert_eq!(h.cmd(stop(None)).unwrap(), "stopping pod web");
    h.killed_by("web", "app", 15);
    h.take();
    assert_eq!(h.cmd(stop(None)).unwrap(), "pod web is already stopped");
    assert_eq!(
        h.cmd(stop(Some("app"))).unwrap(),
        "web/app is already stopped"
    );
    assert!(h.take().is_empty(), "nothing is signalled again");
}

#[test]
fn a_container_being_stopped_is_terminating_and_not_ready_from_the_stop_signal() {
    let mut c = container("app");
    c.termination_grace = secs(5.0);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    assert!(h.status("web", "app").ready);
    h.advance_to(1.0);
    h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    })
    .unwrap();
    let st = h.status("web", "app");
    assert!(!st.ready, "not ready from the moment the stop begins");
    assert!(!h.condition("web", ConditionType::Ready).status);
    let ContainerState::Running {
        terminating: Some(t),
        ..
    } = st.state
    else {
        panic!("expected Running with terminating, got {:?}", st.state);
    };
    assert_eq!(t.since, h.t0 + secs(1.0));
    assert_eq!(t.grace, secs(5.0));
    assert_eq!(t.message, "stopped by request");
    assert!(!t.killed);
    assert_eq!(h.step(), 6.0);
    let ContainerState::Running {
        terminating: Some(t),
        ..
    } = h.status("web", "app").state
    else {
        panic!("still running until reaped");
    };
    assert!(t.killed, "the SIGKILL is shown once sent");
}
