//! Pods with `replicas` (docs/behaviour.md §14): a `depends_on` naming the set waits for
//! every replica, or for `min_ready` of them; shutdown stops the dependents before any
//! replica.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

/// `web` with `n` replicas (`min_ready` as given) and `front`, which needs `web` ready.
pub(super) fn web_and_front(n: u32, min_ready: Option<u32>) -> Config {
    let mut template = pod("web", vec![container("app")]);
    template.replica = Some(Replica {
        set: "web".to_string(),
        index: 0,
        min_ready,
        update: UpdateStrategy::Recreate,
        max_unavailable: 1,
        progress_deadline: DEFAULT_PROGRESS_DEADLINE,
    });
    let set = ReplicaSetSpec {
        name: "web".to_string(),
        replicas: n,
        file_replicas: n,
        template,
    };
    let mut front = pod("front", vec![container("app")]);
    front.depends_on = vec![Dependency::new("web", DependencyCondition::Ready)];
    let mut pods = vec![front];
    pods.extend(set.replicas().expect("replicas"));
    let mut cfg = config(pods);
    cfg.replica_sets = vec![set];
    cfg
}

#[test]
fn a_dependency_on_a_pod_with_replicas_waits_for_every_replica() {
    let mut h = Harness::new(web_and_front(3, None));
    h.spawned("web-0", "app");
    h.spawned("web-1", "app");
    let (reason, message) = h.waiting("front", "app").expect("waits");
    assert_eq!(reason, WaitingReason::WaitingForDependencies);
    assert_eq!(
        message,
        "waiting for every replica of pod web (2/3) to be ready"
    );
    h.spawned("web-2", "app");
    assert!(
        h.waiting("front", "app")
            .is_none_or(|(r, _)| r == WaitingReason::ContainerCreating)
    );
    assert!(
        h.take()
            .iter()
            .any(|a| matches!(a, Action::Spawn { pod, .. } if pod == "front"))
    );
}

#[test]
fn min_ready_lets_a_dependent_start_once_that_many_replicas_are_ready() {
    let mut h = Harness::new(web_and_front(3, Some(2)));
    h.spawned("web-0", "app");
    let (_, message) = h.waiting("front", "app").expect("waits");
    assert_eq!(
        message,
        "waiting for 2 of the 3 replicas of pod web to be ready"
    );
    h.spawned("web-2", "app");
    assert!(
        h.take()
            .iter()
            .any(|a| matches!(a, Action::Spawn { pod, .. } if pod == "front"))
    );
}

#[test]
fn shutdown_stops_the_dependent_before_any_replica() {
    let mut h = Harness::new(web_and_front(2, None));
    h.ack_spawns();
    h.ack_spawns();
    assert!(h.is_running("front", "app") && h.is_running("web-1", "app"));
    h.take();
    h.cmd(Command::Shutdown { force: false }).expect("shutdown");
    let actions = h.take();
    assert!(has_signal(&actions, h.key("front", "app")));
    assert!(!has_signal(&actions, h.key("web-0", "app")));
    assert!(!has_signal(&actions, h.key("web-1", "app")));
    h.exit("front", "app", 0);
    let actions = h.take();
    assert!(has_signal(&actions, h.key("web-0", "app")));
    assert!(has_signal(&actions, h.key("web-1", "app")));
}
