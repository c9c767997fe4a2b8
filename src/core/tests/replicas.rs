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

/// `stop`, `start` and `restart` naming the set act on every replica, in this turn; naming a
/// replica acts on that one only (docs/behaviour.md §14, "Operator commands").
#[test]
fn stop_start_and_restart_of_the_set_act_on_every_replica_and_of_a_replica_on_that_one() {
    let mut h = Harness::new(web_and_front(3, None));
    h.ack_spawns();
    h.ack_spawns();
    let replicas = ["web-0", "web-1", "web-2"];
    assert!(replicas.iter().all(|r| h.is_running(r, "app")));
    // One replica by its name: the others are not signalled.
    let out = h.cmd(Command::Stop {
        pod: "web-1".to_string(),
        container: None,
    });
    assert_eq!(out.as_deref(), Ok("stopping pod web-1"));
    let actions = h.take();
    assert!(has_signal(&actions, h.key("web-1", "app")), "{actions:?}");
    for r in ["web-0", "web-2"] {
        assert!(!has_signal(&actions, h.key(r, "app")), "{r}: {actions:?}");
    }
    h.exit("web-1", "app", 0);
    // The set's name: every replica, in one command.
    let out = h.cmd(Command::Stop {
        pod: "web".to_string(),
        container: None,
    });
    assert_eq!(
        out.as_deref(),
        Ok("stopping pod web-0; pod web-1 is already stopped; stopping pod web-2")
    );
    let actions = h.take();
    for r in ["web-0", "web-2"] {
        assert!(has_signal(&actions, h.key(r, "app")), "{r}: {actions:?}");
    }
    h.exit("web-0", "app", 0);
    h.exit("web-2", "app", 0);
    assert!(replicas.iter().all(|r| !h.is_running(r, "app")));
    let out = h.cmd(Command::Start {
        pod: "web".to_string(),
        container: None,
    });
    assert_eq!(
        out.as_deref(),
        Ok("starting pod web-0; starting pod web-1; starting pod web-2")
    );
    let actions = h.take();
    for r in replicas {
        assert!(has_spawn(&actions, h.key(r, "app")), "{r}: {actions:?}");
    }
    for a in actions {
        if let Action::Spawn {
            key, generation, ..
        } = a
        {
            h.input(Input::Spawned {
                key,
                generation,
                pid: 9000 + key.0,
            });
        }
    }
    assert!(replicas.iter().all(|r| h.is_running(r, "app")));
    // A container of the set: that container of every replica.
    let out = h.cmd(Command::Restart {
        pod: "web".to_string(),
        container: Some("app".to_string()),
    });
    assert_eq!(
        out.as_deref(),
        Ok("restarting web-0/app; restarting web-1/app; restarting web-2/app")
    );
    let actions = h.take();
    for r in replicas {
        assert!(has_signal(&actions, h.key(r, "app")), "{r}: {actions:?}");
    }
    // A container the set does not have is refused as for one pod.
    let err = h
        .cmd(Command::Stop {
            pod: "web".to_string(),
            container: Some("nope".to_string()),
        })
        .expect_err("no such container");
    assert_eq!(err.kind, CommandErrorKind::NotFound);
    assert!(
        err.message
            .starts_with("pod web: web-0: container \"nope\""),
        "{}",
        err.message
    );
}
