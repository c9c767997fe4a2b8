//! Dependents that follow their dependency (issue 41 point 3, behaviour.md §8.2):
//! `restart = true` restarts the dependent after its dependency was restarted or replaced
//! (compose's `depends_on.restart`), `stop = true` stops it while the dependency is stopped
//! or has ended and starts it when the dependency is back (systemd's `BindsTo=`).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn cmd(pod: &str, op: &str) -> Command {
    let (pod, container) = (pod.to_string(), None);
    match op {
        "start" => Command::Start { pod, container },
        "stop" => Command::Stop { pod, container },
        _ => Command::Restart { pod, container },
    }
}

/// `db` and `app`, `app` depending on `db` ready with the given flags; both running.
fn stack(restart: bool, stop: bool) -> Harness {
    let mut app = pod("app", vec![container("web")]);
    let mut dep = Dependency::new("db", DependencyCondition::Ready);
    dep.restart = restart;
    dep.stop = stop;
    app.depends_on = vec![dep];
    let mut h = Harness::new(config(vec![pod("db", vec![container("db")]), app]));
    h.spawned("db", "db");
    h.spawned("app", "web");
    assert!(h.is_running("app", "web"));
    h.take();
    h
}

fn changed_events(h: &Harness) -> Vec<Event> {
    h.events()
        .into_iter()
        .filter(|e| e.reason == "DependencyChanged")
        .collect()
}

#[test]
fn a_dependent_with_restart_restarts_after_its_dependency_crashed_and_came_back() {
    let mut h = stack(true, false);
    let web = h.key("app", "web");
    h.exit("db", "db", 1);
    // db's next run (at once or after its back-off) restarts app.
    let mut acts = h.take();
    while !has_spawn(&acts, h.key("db", "db")) {
        assert!(
            !has_signal(&acts, web),
            "not before db runs again: {acts:#?}"
        );
        assert!(h.step_until(h.t() + 30.0), "db restarts");
        acts.extend(h.take());
    }
    assert!(
        has_signal(&acts, web),
        "the dependent is stopped: {acts:#?}"
    );
    let events = changed_events(&h);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0].object, "app");
    assert_eq!(events[0].message, "Restarting: dependency db was restarted");
    h.killed_by("app", "web", 15);
    // It starts again once the new run of db is ready, as a new pod would.
    assert!(!has_spawn(&h.take(), web));
    assert_eq!(
        h.waiting("app", "web").map(|w| w.0),
        Some(WaitingReason::WaitingForDependencies)
    );
    h.spawned("db", "db");
    assert!(has_spawn(&h.take(), web));
    h.spawned("app", "web");
    // Begun beside db's new run: nothing more happens while it runs on.
    h.advance_to(h.t() + 60.0);
    assert!(!has_signal(&h.take(), web));
    assert_eq!(changed_events(&h).len(), 1);
}

#[test]
fn an_operator_restart_of_the_dependency_restarts_a_dependent_with_restart() {
    let mut h = stack(true, false);
    let web = h.key("app", "web");
    h.cmd(cmd("db", "restart")).unwrap();
    h.killed_by("db", "db", 15);
    let acts = h.take();
    assert!(has_spawn(&acts, h.key("db", "db")), "{acts:#?}");
    assert!(has_signal(&acts, web), "{acts:#?}");
}

#[test]
fn without_restart_a_dependent_runs_on_when_its_dependency_restarts() {
    let mut h = stack(false, false);
    let web = h.key("app", "web");
    h.exit("db", "db", 1);
    h.step_until(h.t() + 30.0);
    h.spawned("db", "db");
    h.advance_to(h.t() + 60.0);
    assert!(!has_signal(&h.take(), web));
    assert!(h.is_running("app", "web"));
    assert!(changed_events(&h).is_empty());
}

#[test]
fn a_dependent_with_stop_stops_while_its_dependency_is_stopped_and_starts_when_it_is_back() {
    let mut h = stack(false, true);
    let web = h.key("app", "web");
    h.cmd(cmd("db", "stop")).unwrap();
    // Still stopping: the dependent runs on until the dependency is down.
    assert!(!has_signal(&h.take(), web));
    h.killed_by("db", "db", 15);
    assert!(has_signal(&h.take(), web));
    assert_eq!(
        changed_events(&h)[0].message,
        "Restarting: dependency db was stopped"
    );
    h.killed_by("app", "web", 15);
    h.advance_to(h.t() + 60.0);
    assert!(!has_spawn(&h.take(), web), "it waits while db is stopped");
    assert!(h.waiting("app", "web").is_some());
    h.cmd(cmd("db", "start")).unwrap();
    h.spawned("db", "db");
    assert!(has_spawn(&h.take(), web), "db is back: app starts again");
}

#[test]
fn a_dependent_with_stop_stops_when_its_dependency_ends_for_good() {
    let mut app = pod("app", vec![container("web")]);
    let mut dep = Dependency::new("db", DependencyCondition::Started);
    dep.stop = true;
    app.depends_on = vec![dep];
    let db = pod(
        "db",
        vec![with_policy(container("db"), RestartPolicy::Never)],
    );
    let mut h = Harness::new(config(vec![db, app]));
    h.spawned("db", "db");
    h.spawned("app", "web");
    h.take();
    h.exit("db", "db", 0);
    assert!(has_signal(&h.take(), h.key("app", "web")));
    assert_eq!(
        changed_events(&h)[0].message,
        "Restarting: dependency db has ended"
    );
}

#[test]
fn a_completed_dependent_is_not_run_again_when_its_dependency_restarts() {
    let mut app = pod(
        "app",
        vec![with_policy(container("job"), RestartPolicy::Never)],
    );
    let mut dep = Dependency::new("db", DependencyCondition::Ready);
    dep.restart = true;
    dep.stop = true;
    app.depends_on = vec![dep];
    let mut h = Harness::new(config(vec![pod("db", vec![container("db")]), app]));
    h.spawned("db", "db");
    h.spawned("app", "job");
    h.exit("app", "job", 0);
    assert_eq!(h.phase("app"), Phase::Succeeded);
    h.take();
    h.cmd(cmd("db", "restart")).unwrap();
    h.killed_by("db", "db", 15);
    h.spawned("db", "db");
    h.advance_to(h.t() + 60.0);
    assert!(!has_spawn(&h.take(), h.key("app", "job")));
    assert_eq!(h.phase("app"), Phase::Succeeded);
    assert!(changed_events(&h).is_empty());
}

#[test]
fn a_chain_of_followers_restarts_down_the_chain_once_each() {
    let follow = |name: &str, on: &str| {
        let mut p = pod(name, vec![container("c")]);
        let mut dep = Dependency::new(on, DependencyCondition::Ready);
        dep.restart = true;
        p.depends_on = vec![dep];
        p
    };
    let mut h = Harness::new(config(vec![
        pod("db", vec![container("c")]),
        follow("api", "db"),
        follow("web", "api"),
    ]));
    h.spawned("db", "c");
    h.spawned("api", "c");
    h.spawned("web", "c");
    h.take();
    h.cmd(cmd("db", "restart")).unwrap();
    h.killed_by("db", "c", 15);
    h.take();
    h.killed_by("api", "c", 15);
    h.spawned("db", "c");
    h.spawned("api", "c");
    // api's new run restarts web, once.
    assert!(has_signal(&h.take(), h.key("web", "c")));
    h.killed_by("web", "c", 15);
    h.spawned("web", "c");
    h.advance_to(h.t() + 120.0);
    let objects: Vec<String> = changed_events(&h).into_iter().map(|e| e.object).collect();
    assert_eq!(objects, ["api", "web"]);
}

#[test]
fn a_dependent_follows_every_replica_of_a_dependency_with_replicas() {
    let mut cfg = super::replicas::web_and_front(2, None);
    cfg.pods[0].depends_on[0].restart = true;
    cfg.pods[0].depends_on[0].stop = true;
    let mut h = Harness::new(cfg);
    h.spawned("web-0", "app");
    h.spawned("web-1", "app");
    h.spawned("front", "app");
    h.take();
    let front = h.key("front", "app");
    // A new run of one replica is a new run of the dependency.
    h.cmd(cmd("web-1", "restart")).unwrap();
    h.killed_by("web-1", "app", 15);
    assert!(has_signal(&h.take(), front));
    h.killed_by("front", "app", 15);
    h.spawned("web-1", "app");
    assert!(has_spawn(&h.take(), front));
    h.spawned("front", "app");
    // One replica stopped is not the dependency down; all of them are.
    h.cmd(cmd("web-0", "stop")).unwrap();
    h.killed_by("web-0", "app", 15);
    assert!(!has_signal(&h.take(), front));
    h.cmd(cmd("web-1", "stop")).unwrap();
    h.killed_by("web-1", "app", 15);
    assert!(has_signal(&h.take(), front));
    assert_eq!(
        changed_events(&h).last().map(|e| e.message.clone()),
        Some("Restarting: dependency web was stopped".to_string())
    );
}
