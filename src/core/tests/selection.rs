//! Pods this run's selection leaves out (`autostart` false once `config::select` has run:
//! `autostart = false`, a profile not active, not named at `vigil run POD…`): shown `Pending`
//! with reason `NotStarted`, never spawned until an operator `start` (which starts the pods
//! it depends on that were left out too); a reload keeps them so, and a crash of vigil keeps
//! one an operator had started running.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn off(mut p: PodSpec) -> PodSpec {
    p.autostart = false;
    p
}

fn depends(mut p: PodSpec, on: &str) -> PodSpec {
    p.depends_on = vec![Dependency::new(on, DependencyCondition::Started)];
    p
}

/// `web` starts; `db` and `migrate` (which needs `db`) are left out.
fn stack() -> Vec<PodSpec> {
    vec![
        pod("web", vec![container("app")]),
        off(pod("db", vec![container("pg")])),
        off(depends(pod("migrate", vec![container("run")]), "db")),
    ]
}

fn start(h: &mut Harness, pod: &str) -> String {
    h.cmd(Command::Start {
        pod: pod.to_string(),
        container: None,
    })
    .unwrap()
}

#[test]
fn a_pod_left_out_is_pending_not_started_and_never_spawned() {
    let mut h = Harness::new(config(stack()));
    let actions = h.take();
    assert!(has_spawn(&actions, h.key("web", "app")));
    assert!(!has_spawn(&actions, h.key("db", "pg")), "{actions:?}");
    assert_eq!(h.phase("db"), Phase::Pending);
    let (reason, message) = h.waiting("db", "pg").expect("waiting");
    assert_eq!(reason, WaitingReason::NotStarted);
    assert!(message.contains("vigil start"), "{message}");
    // Nothing wakes it: no deadline, and time passing starts nothing.
    h.ack_spawns();
    h.advance_to(3600.0);
    assert!(!has_spawn(&h.take(), h.key("db", "pg")));
    assert_eq!(
        h.waiting("db", "pg").map(|w| w.0),
        Some(WaitingReason::NotStarted)
    );
}

#[test]
fn an_operator_start_starts_it_and_a_stop_before_says_it_is_not_started() {
    let mut h = Harness::new(config(stack()));
    h.ack_spawns();
    assert_eq!(
        h.cmd(Command::Stop {
            pod: "db".to_string(),
            container: None
        })
        .unwrap(),
        "pod db is not started"
    );
    assert_eq!(start(&mut h, "db"), "starting pod db");
    assert!(has_spawn(&h.take(), h.key("db", "pg")));
    h.spawned("db", "pg");
    assert!(h.is_running("db", "pg"));
}

#[test]
fn starting_a_pod_also_starts_the_dependencies_left_out() {
    let mut h = Harness::new(config(stack()));
    h.ack_spawns();
    let msg = start(&mut h, "migrate");
    assert_eq!(
        msg,
        "starting pod migrate (and pod db, which it depends on): waiting for pod db to be started"
    );
    let actions = h.take();
    assert!(has_spawn(&actions, h.key("db", "pg")), "{actions:?}");
    assert!(!has_spawn(&actions, h.key("migrate", "run")));
    assert_eq!(
        h.waiting("migrate", "run").map(|w| w.0),
        Some(WaitingReason::WaitingForDependencies)
    );
    h.spawned("db", "pg");
    h.ack_spawns();
    assert!(h.is_running("migrate", "run"));
}

#[test]
fn a_reload_keeps_a_pod_left_out_and_one_an_operator_started() {
    let mut h = Harness::new(config(stack()));
    h.ack_spawns();
    start(&mut h, "db");
    h.ack_spawns();
    let pg = h.key("db", "pg");
    let msg = h.cmd(Command::Reload(Box::new(config(stack())))).unwrap();
    assert_eq!(msg, "reloaded: 0 changed, 0 added, 0 removed, 3 unchanged");
    let actions = h.take();
    assert!(!has_signal(&actions, pg), "{actions:?}");
    assert!(h.is_running("db", "pg"));
    assert_eq!(
        h.waiting("migrate", "run").map(|w| w.0),
        Some(WaitingReason::NotStarted)
    );
}

#[test]
fn a_reload_that_selects_a_pod_starts_it_and_one_that_changes_a_started_one_restarts_it() {
    let mut h = Harness::new(config(stack()));
    h.ack_spawns();
    start(&mut h, "db");
    h.ack_spawns();
    let pg = h.key("db", "pg");
    let mut pods = stack();
    // migrate now starts (and db, which it needs, runs already); db's definition changes.
    pods[2].autostart = true;
    std::sync::Arc::make_mut(&mut pods[1].containers[0]).command = vec!["/bin/pg2".to_string()];
    let msg = h.cmd(Command::Reload(Box::new(config(pods)))).unwrap();
    assert_eq!(msg, "reloaded: 1 changed, 0 added, 0 removed, 2 unchanged");
    let actions = h.take();
    assert!(has_signal(&actions, pg));
    assert!(
        has_spawn(&actions, h.key("migrate", "run")),
        "selected now, its dependency started: {actions:?}"
    );
    h.spawned("migrate", "run");
    h.killed_by("db", "pg", 15);
    let actions = h.take();
    let new_pg = h.key("db", "pg");
    assert!(
        has_spawn(&actions, new_pg),
        "the replacement of a pod an operator started starts: {actions:?}"
    );
    h.spawned("db", "pg");
    assert!(h.is_running("db", "pg"));
    assert!(h.is_running("migrate", "run"));
}

#[test]
fn a_changed_pod_still_left_out_is_replaced_by_one_left_out() {
    let mut h = Harness::new(config(stack()));
    h.ack_spawns();
    let mut pods = stack();
    std::sync::Arc::make_mut(&mut pods[1].containers[0]).command = vec!["/bin/pg2".to_string()];
    h.cmd(Command::Reload(Box::new(config(pods)))).unwrap();
    let actions = h.take();
    assert!(!has_spawn(&actions, h.key("db", "pg")), "{actions:?}");
    assert_eq!(
        h.waiting("db", "pg").map(|w| w.0),
        Some(WaitingReason::NotStarted)
    );
}

#[test]
fn after_a_crash_a_pod_an_operator_had_started_runs_on() {
    let mut h = Harness::new(config(stack()));
    h.ack_spawns();
    start(&mut h, "db");
    h.ack_spawns();
    let (mut next, _) = h.after_crash(
        &config(stack()),
        5.0,
        &[("web", "app", 11), ("db", "pg", 12)],
    );
    let actions = next.take();
    assert!(
        !has_spawn(&actions, next.key("db", "pg")),
        "adopted: {actions:?}"
    );
    assert!(next.is_running("db", "pg"));
    assert_eq!(
        next.waiting("migrate", "run").map(|w| w.0),
        Some(WaitingReason::NotStarted)
    );
}
