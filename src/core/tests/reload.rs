//! Reload: unchanged pods untouched, changed ones restarted, added ones started, removed ones
//! stopped and forgotten.

use super::harness::*;
use crate::core::*;

fn base() -> Vec<crate::config::spec::PodSpec> {
    vec![
        pod("crash", vec![container("app")]),
        pod("web", vec![container("app")]),
        pod("old", vec![container("app")]),
    ]
}

fn reload(h: &mut Harness, pods: Vec<crate::config::spec::PodSpec>) -> String {
    h.cmd(Command::Reload(Box::new(config(pods)))).unwrap()
}

#[test]
fn reload_leaves_unchanged_pod_in_backoff_untouched() {
    let mut h = Harness::new(config(base()));
    h.ack_spawns();
    let key = h.key("crash", "app");
    h.exit("crash", "app", 1);
    h.spawned("crash", "app");
    h.advance_to(1.0);
    h.exit("crash", "app", 1);
    h.take();
    let before = h.status("crash", "app");
    let msg = reload(&mut h, base());
    assert_eq!(msg, "reloaded: 0 changed, 0 added, 0 removed, 3 unchanged");
    assert!(h.take().is_empty());
    assert_eq!(h.status("crash", "app"), before);
    assert_eq!(h.step(), 11.0, "the back-off deadline is kept");
    assert!(has_spawn(&h.take(), key));
}

#[test]
fn reload_restarts_changed_pod_with_new_keys() {
    let mut h = Harness::new(config(base()));
    h.ack_spawns();
    let old_key = h.key("web", "app");
    let mut pods = base();
    std::sync::Arc::make_mut(&mut pods[1].containers[0]).command =
        vec!["/bin/app".to_string(), "--v2".to_string()];
    let msg = reload(&mut h, pods);
    assert_eq!(msg, "reloaded: 1 changed, 0 added, 0 removed, 2 unchanged");
    assert!(has_signal(&h.take(), old_key));
    h.killed_by("web", "app", 15);
    let acts = h.take();
    assert!(acts.contains(&Action::Forget { key: old_key }));
    let new_key = h.key("web", "app");
    assert_ne!(new_key, old_key);
    assert!(has_spawn(&acts, new_key));
    let spawn = acts
        .iter()
        .find_map(|a| match a {
            Action::Spawn { key, container, .. } if *key == new_key => Some(container.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(spawn.command[1], "--v2");
    assert_eq!(h.status("web", "app").restart_count, 0);
}

#[test]
fn reload_probe_only_change_restarts_pod() {
    let mut h = Harness::new(config(base()));
    h.ack_spawns();
    let old_key = h.key("web", "app");
    let mut pods = base();
    std::sync::Arc::make_mut(&mut pods[1].containers[0]).readiness_probe = Some(probe(5.0));
    let msg = reload(&mut h, pods);
    assert!(msg.starts_with("reloaded: 1 changed"));
    assert!(has_signal(&h.take(), old_key));
}

#[test]
fn reload_adds_and_removes_pods() {
    let mut h = Harness::new(config(base()));
    h.ack_spawns();
    let old = h.key("old", "app");
    let mut pods = base();
    pods.remove(2);
    pods.push(pod("new", vec![container("app")]));
    let msg = reload(&mut h, pods);
    assert_eq!(msg, "reloaded: 0 changed, 1 added, 1 removed, 2 unchanged");
    let acts = h.take();
    assert!(has_signal(&acts, old));
    assert!(has_spawn(&acts, h.key("new", "app")));
    // The removed pod is visible until it has stopped, then forgotten.
    assert_eq!(h.terminated("old", "app"), None);
    let t = h.sup.pods();
    assert_eq!(t.len(), 4);
    h.killed_by("old", "app", 15);
    assert!(h.take().contains(&Action::Forget { key: old }));
    let names: Vec<String> = h.sup.pods().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["crash", "web", "new"]);
}

#[test]
fn reload_of_changed_pod_records_killing_event_for_old_run() {
    let mut h = Harness::new(config(base()));
    h.ack_spawns();
    let mut pods = base();
    std::sync::Arc::make_mut(&mut pods[1].containers[0]).env =
        vec![("A".to_string(), "1".to_string())];
    reload(&mut h, pods);
    // Snapshot the old run's termination before the replacement pod appears.
    let key = h.key("web", "app");
    let generation = h.generation(key);
    h.sup.handle(
        h.now,
        Input::Exited {
            key,
            generation,
            exit: ExitInfo {
                signal: Some(15),
                ..ExitInfo::default()
            },
        },
    );
    // The replacement pod exists; the event log shows the stop.
    assert!(
        h.sup
            .events_since(0)
            .iter()
            .any(|e| e.reason == "Killing" && e.object == "web/app")
    );
}

#[test]
fn reload_adopts_new_shutdown_timeout() {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![{
            let mut c = container("app");
            c.termination_grace = secs(1000.0);
            c
        }],
    )]));
    h.ack_spawns();
    let mut cfg = config(vec![pod(
        "web",
        vec![{
            let mut c = container("app");
            c.termination_grace = secs(1000.0);
            c
        }],
    )]);
    cfg.supervisor.shutdown_timeout = std::time::Duration::from_secs(7);
    h.cmd(Command::Reload(Box::new(cfg))).unwrap();
    h.cmd(Command::Shutdown { force: false }).unwrap();
    assert_eq!(h.step(), 7.0);
}

#[test]
fn reload_removing_pod_in_backoff_forgets_it_at_once() {
    let mut h = Harness::new(config(base()));
    h.ack_spawns();
    let key = h.key("old", "app");
    h.exit("old", "app", 1);
    h.spawned("old", "app");
    h.exit("old", "app", 1);
    h.take();
    let mut pods = base();
    pods.remove(2);
    reload(&mut h, pods);
    assert!(h.take().contains(&Action::Forget { key }));
    assert!(h.sup.pod("old").is_none());
    assert_eq!(h.sup.poll_timeout(), None);
}
