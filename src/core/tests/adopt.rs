//! Adopting a container an earlier vigil left running (issue 17.4): it is Running at once with
//! the recorded pid, start time and restart count and is not spawned again; its end has an
//! unknown status (`ContainerStatusUnknown`, exit code 137, a failure) and the restart policy
//! applies; probes run against it; a stop works on it.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn two() -> Config {
    config(vec![pod("web", vec![container("app"), container("side")])])
}

#[test]
fn an_adopted_container_is_running_with_its_pid_start_and_restart_count_and_is_not_spawned() {
    let (mut h, ok) = Harness::adopting(two(), &[("web", "app", 4242, 30.0, 5)]);
    assert_eq!(ok, vec![true]);
    let actions = h.take();
    let app = h.key("web", "app");
    let side = h.key("web", "side");
    assert!(!has_spawn(&actions, app), "{actions:?}");
    assert!(
        has_spawn(&actions, side),
        "the other container starts as usual"
    );
    let st = h.status("web", "app");
    assert_eq!(st.pid, Some(4242));
    assert_eq!(st.restart_count, 5);
    match st.state {
        ContainerState::Running { started_at, .. } => assert_eq!(started_at, h.t0 - secs(30.0)),
        other => panic!("{other:?}"),
    }
    let ev = h.event("Adopted").expect("an Adopted event");
    assert!(ev.message.contains("pid 4242"), "{}", ev.message);
    assert!(
        h.event("Started").is_none(),
        "no Started for an adopted run"
    );
}

#[test]
fn an_adopted_container_that_ends_is_reported_status_unknown_and_restarted_by_policy() {
    let (mut h, _) = Harness::adopting(two(), &[("web", "app", 4242, 30.0, 2)]);
    h.ack_spawns();
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            status_unknown: true,
            ..ExitInfo::default()
        },
    );
    let st = h.status("web", "app");
    let last = st.last_state.clone().or_else(|| h.terminated("web", "app"));
    let t = last.expect("the adopted run's end is recorded");
    assert_eq!(t.reason, TerminationReason::ContainerStatusUnknown);
    assert_eq!(t.exit_code, 137);
    assert_eq!(t.started_at, Some(h.t0 - secs(30.0)));
    // Always: a failure, restarted (after the back-off's first delay).
    h.advance_to(60.0);
    let actions = h.take();
    assert!(has_spawn(&actions, h.key("web", "app")), "{actions:?}");
    assert_eq!(
        h.status("web", "app").restart_count,
        3,
        "the recorded count goes on"
    );
}

#[test]
fn under_on_failure_an_unknown_end_is_a_failure_and_restarts() {
    let mut cfg = config(vec![pod(
        "job",
        vec![with_policy(container("c"), RestartPolicy::OnFailure)],
    )]);
    std::sync::Arc::make_mut(&mut cfg.pods[0].containers[0])
        .backoff
        .initial = secs(0.0);
    let (mut h, _) = Harness::adopting(cfg, &[("job", "c", 77, 1.0, 0)]);
    h.exit_info(
        "job",
        "c",
        ExitInfo {
            status_unknown: true,
            ..ExitInfo::default()
        },
    );
    let actions = h.take();
    assert!(has_spawn(&actions, h.key("job", "c")), "{actions:?}");
}

#[test]
fn a_stop_of_an_adopted_container_signals_it_and_its_end_is_stopped_with_an_unknown_status() {
    let (mut h, _) = Harness::adopting(two(), &[("web", "app", 4242, 30.0, 0)]);
    h.ack_spawns();
    h.take();
    h.cmd(Command::Stop {
        pod: "web".into(),
        container: Some("app".into()),
    })
    .unwrap();
    let actions = h.take();
    assert!(has_signal(&actions, h.key("web", "app")), "{actions:?}");
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            status_unknown: true,
            ..ExitInfo::default()
        },
    );
    let t = h.terminated("web", "app").expect("stopped");
    assert_eq!(t.reason, TerminationReason::Stopped);
    assert!(t.message.contains("unknown"), "{}", t.message);
    h.advance_to(100.0);
    assert!(h.terminated("web", "app").is_some(), "a stop is not undone");
}

#[test]
fn probes_run_against_an_adopted_container() {
    let mut c = container("app");
    c.liveness_probe = Some(probe(1.0));
    let (mut h, _) = Harness::adopting(
        config(vec![pod("web", vec![c])]),
        &[("web", "app", 9, 5.0, 0)],
    );
    h.take();
    h.advance_to(3.0);
    assert!(!h.probe_starts().is_empty(), "liveness probes start");
}

#[test]
fn a_plain_init_container_or_a_second_adoption_is_refused() {
    let mut p = pod("web", vec![container("app")]);
    p.init_containers = shared(vec![with_policy(container("setup"), RestartPolicy::Never)]);
    let (_, ok) = Harness::adopting(
        config(vec![p, pod("db", vec![container("pg")])]),
        &[
            ("web", "app", 10, 1.0, 0),
            ("web", "setup", 11, 1.0, 0),
            ("db", "pg", 12, 1.0, 0),
            ("db", "pg", 13, 1.0, 0),
        ],
    );
    assert_eq!(ok, vec![true, false, true, false]);
}

fn with_init_and_sidecar() -> Config {
    let mut p = pod("web", vec![container("app"), container("worker")]);
    p.init_containers = shared(vec![
        with_policy(container("setup"), RestartPolicy::Never),
        with_policy(container("proxy"), RestartPolicy::Always),
    ]);
    config(vec![p])
}

#[test]
fn adopting_in_a_pod_with_init_containers_skips_them_as_completed_and_starts_the_rest() {
    let (mut h, ok) = Harness::adopting(with_init_and_sidecar(), &[("web", "app", 20, 9.0, 3)]);
    assert_eq!(ok, vec![true]);
    let actions = h.take();
    assert!(
        !has_spawn(&actions, h.key("web", "setup")),
        "init not run again: {actions:?}"
    );
    assert!(!has_spawn(&actions, h.key("web", "app")));
    assert!(
        has_spawn(&actions, h.key("web", "proxy")),
        "the sidecar starts"
    );
    assert!(
        has_spawn(&actions, h.key("web", "worker")),
        "the other container starts"
    );
    let setup = h.terminated("web", "setup").expect("recorded as completed");
    assert_eq!(setup.reason, TerminationReason::Completed);
    assert_eq!(setup.message, "completed under an earlier vigil");
    assert!(h.condition("web", ConditionType::Initialized).status);
    assert_eq!(h.status("web", "app").pid, Some(20));
}

#[test]
fn a_sidecar_is_adopted_like_a_regular_container() {
    let (mut h, ok) = Harness::adopting(
        with_init_and_sidecar(),
        &[
            ("web", "proxy", 21, 9.0, 1),
            ("web", "app", 22, 9.0, 0),
            ("web", "worker", 23, 9.0, 0),
        ],
    );
    assert_eq!(ok, vec![true, true, true]);
    let actions = h.take();
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Spawn { .. })),
        "nothing spawned: {actions:?}"
    );
    assert_eq!(h.status("web", "proxy").pid, Some(21));
    assert_eq!(h.status("web", "proxy").restart_count, 1);
    // The sidecar ends (status unknown): restarted, as a sidecar is.
    h.exit_info(
        "web",
        "proxy",
        ExitInfo {
            status_unknown: true,
            ..ExitInfo::default()
        },
    );
    h.advance_to(30.0);
    assert!(has_spawn(&h.take(), h.key("web", "proxy")));
}

#[test]
fn an_adopted_container_of_a_pod_waiting_for_its_dependency_is_not_spawned_again_and_stops_at_shutdown()
 {
    let mut db = container("pg");
    db.readiness_probe = Some(probe(1.0));
    let mut web = pod("web", vec![container("app")]);
    web.depends_on = vec![Dependency::new("db", DependencyCondition::Ready)];
    let (mut h, ok) = Harness::adopting(
        config(vec![pod("db", vec![db]), web]),
        &[("db", "pg", 10, 5.0, 0), ("web", "app", 11, 5.0, 0)],
    );
    assert_eq!(ok, vec![true, true]);
    let app = h.key("web", "app");
    // db becomes ready: web's turn comes, and its adopted container is not spawned again.
    h.advance_to(1.5);
    for (kind, seq) in h.probe_starts() {
        h.probe_result("db", "pg", kind, seq, true);
    }
    h.advance_to(3.0);
    assert!(!has_spawn(&h.take(), app));
    assert_eq!(h.status("web", "app").pid, Some(11));
    h.cmd(Command::Shutdown { force: false }).unwrap();
    let actions = h.take();
    assert!(has_signal(&actions, app), "{actions:?}");
}

#[test]
fn a_container_an_operator_stopped_is_listed_and_can_be_kept_stopped_by_the_next_vigil() {
    let mut h = Harness::new(two());
    h.ack_spawns();
    h.cmd(Command::Stop {
        pod: "web".into(),
        container: Some("app".into()),
    })
    .unwrap();
    h.killed_by("web", "app", 15);
    let app = h.key("web", "app");
    assert_eq!(
        h.sup.kept_ends(),
        vec![(app, "web", "app", KeptEnd::Stopped)]
    );

    // The next vigil, after a crash of this one.
    let t0 = h.now;
    let mut sup = Supervisor::new(&two(), t0);
    assert_eq!(
        sup.container_key("web", "app"),
        Some(app),
        "keys are assigned alike"
    );
    assert!(sup.keep_ended(t0, app, KeptEnd::Stopped));
    let mut actions = Vec::new();
    while let Some(a) = sup.poll_action() {
        actions.push(a);
    }
    assert!(!has_spawn(&actions, app), "{actions:?}");
    assert!(has_spawn(
        &actions,
        sup.container_key("web", "side").unwrap()
    ));
    assert_eq!(
        sup.kept_ends(),
        vec![(app, "web", "app", KeptEnd::Stopped)],
        "still recorded as stopped, for a crash after this one"
    );
    // `start` starts it, as any stopped container.
    sup.command(
        t0,
        Command::Start {
            pod: "web".into(),
            container: Some("app".into()),
        },
    )
    .unwrap();
    let mut spawned = false;
    while let Some(a) = sup.poll_action() {
        spawned |= matches!(a, Action::Spawn { key, .. } if key == app);
    }
    assert!(spawned);
    let st = sup.pod("web").unwrap();
    assert_eq!(st.containers[0].restart_count, 0);
}

#[test]
fn a_container_of_a_pod_waiting_for_init_containers_is_not_kept_stopped() {
    let (mut sup, t0) = {
        let t0 = std::time::Instant::now();
        (Supervisor::new(&with_init_and_sidecar(), t0), t0)
    };
    let app = sup.container_key("web", "app").unwrap();
    assert!(
        !sup.keep_ended(t0, app, KeptEnd::Stopped),
        "init containers would start it later"
    );
}

#[test]
fn a_completed_job_is_listed_and_kept_completed_by_the_next_vigil() {
    let cfg = || {
        config(vec![pod(
            "job",
            vec![with_policy(container("run"), RestartPolicy::OnFailure)],
        )])
    };
    let mut h = Harness::new(cfg());
    h.ack_spawns();
    h.exit("job", "run", 0);
    let run = h.key("job", "run");
    assert_eq!(
        h.sup.kept_ends(),
        vec![(run, "job", "run", KeptEnd::Completed)]
    );
    let t0 = h.now;
    let mut sup = Supervisor::new(&cfg(), t0);
    assert!(sup.keep_ended(t0, run, KeptEnd::Completed));
    let mut spawned = false;
    while let Some(a) = sup.poll_action() {
        spawned |= matches!(a, Action::Spawn { .. });
    }
    assert!(!spawned, "a completed job does not run again");
    let p = sup.pod("job").unwrap();
    assert_eq!(p.phase, Phase::Succeeded);
    assert_eq!(
        sup.kept_ends(),
        vec![(run, "job", "run", KeptEnd::Completed)]
    );
}

#[test]
fn an_adopted_run_whose_output_was_lost_is_marked_told_and_restarted_by_default() {
    let (mut h, _) = Harness::adopting(two(), &[("web", "app", 4242, 30.0, 2)]);
    h.ack_spawns();
    let app = h.key("web", "app");
    let g = h.generation(app);
    assert!(h.sup.output_lost(h.now, app, g, true));
    h.drain();
    let ev = h.event(REASON_OUTPUT_LOST).expect("an OutputLost event");
    assert_eq!(ev.kind, EventType::Warning);
    assert!(ev.message.contains("pid 4242"), "{}", ev.message);
    assert!(ev.message.contains("restarting"), "{}", ev.message);
    assert!(h.status("web", "app").output_lost, "marked while stopping");
    assert!(has_signal(&h.take(), app), "stopped with its stop signal");
    h.exit_info(
        "web",
        "app",
        ExitInfo {
            status_unknown: true,
            ..ExitInfo::default()
        },
    );
    // Started again at once, as an operator's restart would be (no back-off).
    let actions = h.take();
    assert!(has_spawn(&actions, app), "{actions:?}");
    h.ack_spawns();
    let st = h.status("web", "app");
    assert!(!st.output_lost, "the new run's output is read");
    assert_eq!(st.restart_count, 3);
    let last = st.last_state.expect("the adopted run's end");
    assert!(last.message.contains("output pipes were lost"), "{last:?}");
    assert_eq!(h.sup.adoption_counts(), (1, 1));
}

#[test]
fn with_keep_an_adopted_run_whose_output_was_lost_runs_on_marked() {
    let (mut h, _) = Harness::adopting(two(), &[("web", "app", 4242, 30.0, 2)]);
    h.ack_spawns();
    let app = h.key("web", "app");
    let g = h.generation(app);
    assert!(h.sup.output_lost(h.now, app, g, false));
    let actions = h.take();
    assert!(!has_signal(&actions, app), "{actions:?}");
    let st = h.status("web", "app");
    assert!(st.output_lost);
    assert_eq!(st.pid, Some(4242));
    assert!(matches!(st.state, ContainerState::Running { .. }));
    let ev = h.event(REASON_OUTPUT_LOST).expect("an OutputLost event");
    assert!(
        ev.message.contains("on_output_lost = \"keep\""),
        "{}",
        ev.message
    );
    // A stale generation is refused.
    assert!(!h.sup.output_lost(h.now, app, g + 1, true));
    assert_eq!(h.sup.adoption_counts(), (1, 1));
}

#[test]
fn an_adopted_ready_log_line_run_is_taken_as_ready() {
    let mut app = container("app");
    app.ready_log_line = Some(LinePattern::new("^ready$").expect("pattern"));
    let cfg = config(vec![pod("web", vec![app])]);
    let (h, ok) = Harness::adopting(cfg, &[("web", "app", 4242, 30.0, 0)]);
    assert_eq!(ok, vec![true]);
    assert!(
        h.status("web", "app").ready,
        "it printed its line to the earlier vigil and will not print it again"
    );
}
