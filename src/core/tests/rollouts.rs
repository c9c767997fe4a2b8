//! Rollouts of pods with replicas (docs/behaviour.md §14.2): `restart --rolling` and a reload
//! with `update = "rolling"` replace the replicas a batch at a time, highest index first, each
//! batch after the previous one is Ready on its new run; a replica that fails, or a batch not
//! Ready within `progress_deadline_seconds`, stops the rollout and leaves the rest running.

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

/// `web` with `n` replicas, each with a readiness probe every second, rolled out with
/// `max_unavailable` at a time and the given progress deadline (seconds).
fn web(n: u32, update: UpdateStrategy, max_unavailable: u32, deadline: f64) -> Config {
    let mut c = container("app");
    c.readiness_probe = Some(probe(1.0));
    let mut template = pod("web", vec![c]);
    template.replica = Some(Replica {
        set: "web".to_string(),
        index: 0,
        min_ready: None,
        update,
        max_unavailable,
        progress_deadline: secs(deadline),
    });
    let set = ReplicaSetSpec {
        name: "web".to_string(),
        replicas: n,
        file_replicas: n,
        template,
    };
    let mut cfg = config(set.replicas().expect("replicas"));
    cfg.replica_sets = vec![set];
    cfg
}

/// How the replicas behave from now on: the ones in `crash` exit 1 as soon as they start;
/// the readiness probes of those in `unready` fail; the others pass.
#[derive(Default)]
struct Fates<'a> {
    crash: &'a [&'a str],
    unready: &'a [&'a str],
}

/// Plays the runtime and the containers until `until` seconds: spawns succeed, a stop signal
/// or a kill ends the run at once, probes answer as `fates` say. Returns what happened, in
/// order: `start web-2`, `stop web-2`.
fn run(h: &mut Harness, until: f64, fates: &Fates) -> Vec<String> {
    let mut log = Vec::new();
    loop {
        for _ in 0..1000 {
            let actions = h.take();
            if actions.is_empty() {
                break;
            }
            for a in actions {
                match a {
                    Action::Spawn {
                        key,
                        generation,
                        pod,
                        ..
                    } => {
                        log.push(format!("start {pod}"));
                        h.input(Input::Spawned {
                            key,
                            generation,
                            pid: 4000,
                        });
                        if fates.crash.contains(&pod.as_str()) {
                            h.input(Input::Exited {
                                key,
                                generation,
                                exit: ExitInfo {
                                    code: Some(1),
                                    ..ExitInfo::default()
                                },
                            });
                        }
                    }
                    Action::Signal {
                        key, generation, ..
                    }
                    | Action::Kill { key, generation } => {
                        let pod = pod_of(h, key);
                        log.push(format!("stop {pod}"));
                        h.input(Input::Exited {
                            key,
                            generation,
                            exit: ExitInfo {
                                signal: Some(15),
                                ..ExitInfo::default()
                            },
                        });
                    }
                    Action::StartProbe {
                        key,
                        generation,
                        pod,
                        kind,
                        seq,
                        ..
                    } => {
                        let outcome = if fates.unready.contains(&pod.as_str()) {
                            ProbeOutcome::Failure("HTTP probe failed with statuscode: 503".into())
                        } else {
                            ProbeOutcome::Success("ok".to_string())
                        };
                        h.input(Input::ProbeResult {
                            key,
                            generation,
                            kind,
                            seq,
                            outcome,
                            duration: secs(0.01),
                        });
                    }
                    _ => {}
                }
            }
        }
        if !h.step_until(until) {
            break;
        }
    }
    h.advance_to(until);
    log
}

fn pod_of(h: &Harness, key: ContainerKey) -> String {
    (h.sup.pods().into_iter())
        .find(|p| {
            p.containers
                .iter()
                .any(|c| h.sup.container_key(&p.name, &c.name) == Some(key))
        })
        .map(|p| p.name)
        .unwrap_or_default()
}

fn ready(h: &Harness, pod: &str) -> bool {
    h.condition(pod, ConditionType::Ready).status
}

fn restart(h: &mut Harness, max_unavailable: Option<u32>) -> Result<String, CommandError> {
    h.cmd(Command::RollingRestart {
        pod: "web".to_string(),
        max_unavailable,
    })
}

/// Three replicas running and Ready at 5 s.
fn three(update: UpdateStrategy, max_unavailable: u32, deadline: f64) -> Harness {
    let mut h = Harness::new(web(3, update, max_unavailable, deadline));
    run(&mut h, 5.0, &Fates::default());
    assert!(ready(&h, "web-0") && ready(&h, "web-1") && ready(&h, "web-2"));
    h
}

#[test]
fn a_rolling_restart_replaces_one_replica_at_a_time_highest_index_first() {
    let mut h = three(UpdateStrategy::Recreate, 1, 600.0);
    let message = restart(&mut h, None).expect("accepted");
    assert_eq!(
        message,
        "rolling restart of pod web: 3 replicas, 1 at a time"
    );
    let log = run(&mut h, 30.0, &Fates::default());
    assert_eq!(
        log,
        [
            "stop web-2",
            "start web-2",
            "stop web-1",
            "start web-1",
            "stop web-0",
            "start web-0"
        ]
    );
    let r = h.sup.rollout("web").expect("a rollout");
    assert_eq!(r.state, RolloutState::Complete);
    assert_eq!((r.replaced, r.total), (3, 3));
    assert!(ready(&h, "web-0") && ready(&h, "web-1") && ready(&h, "web-2"));
    let events: Vec<String> = (h.events().into_iter())
        .filter(|e| e.reason == "RollingUpdate")
        .map(|e| e.message)
        .collect();
    assert_eq!(
        events.last().map(String::as_str),
        Some("rolling restart of pod web complete: 3 replicas replaced")
    );
}

#[test]
fn the_next_replica_waits_until_the_new_one_is_ready() {
    let mut h = three(UpdateStrategy::Recreate, 1, 600.0);
    restart(&mut h, None).expect("accepted");
    // web-2's new run never passes its readiness probe: web-1 and web-0 are not touched.
    let log = run(
        &mut h,
        60.0,
        &Fates {
            unready: &["web-2"],
            ..Fates::default()
        },
    );
    assert_eq!(log, ["stop web-2", "start web-2"]);
    assert!(ready(&h, "web-0") && ready(&h, "web-1") && !ready(&h, "web-2"));
    let r = h.sup.rollout("web").expect("a rollout");
    assert_eq!(r.state, RolloutState::Progressing);
    assert_eq!(r.waiting_for, ["web-2"]);
    // Once it is Ready, the rollout goes on.
    let log = run(&mut h, 90.0, &Fates::default());
    assert_eq!(log[..2], ["stop web-1", "start web-1"]);
    assert_eq!(
        h.sup.rollout("web").expect("a rollout").state,
        RolloutState::Complete
    );
}

#[test]
fn max_unavailable_replaces_that_many_replicas_at_once() {
    let mut h = Harness::new(web(4, UpdateStrategy::Recreate, 1, 600.0));
    run(&mut h, 5.0, &Fates::default());
    // `--max-unavailable 2` over the pod's own 1.
    assert_eq!(
        restart(&mut h, Some(2)).expect("accepted"),
        "rolling restart of pod web: 4 replicas, 2 at a time"
    );
    let log = run(
        &mut h,
        30.0,
        &Fates {
            unready: &["web-3", "web-2"],
            ..Fates::default()
        },
    );
    assert_eq!(
        log,
        ["stop web-3", "stop web-2", "start web-3", "start web-2"]
    );
    assert!(ready(&h, "web-0") && ready(&h, "web-1"));
    let log = run(&mut h, 60.0, &Fates::default());
    assert_eq!(
        log,
        ["stop web-1", "stop web-0", "start web-1", "start web-0"]
    );
    assert_eq!(
        h.sup.rollout("web").expect("a rollout").state,
        RolloutState::Complete
    );
}

#[test]
fn a_replica_that_fails_on_its_new_run_halts_the_rollout_and_leaves_the_rest() {
    let mut h = three(UpdateStrategy::Recreate, 1, 600.0);
    restart(&mut h, None).expect("accepted");
    let log = run(
        &mut h,
        60.0,
        &Fates {
            crash: &["web-2"],
            ..Fates::default()
        },
    );
    assert!(
        !log.iter()
            .any(|l| l.ends_with("web-1") || l.ends_with("web-0"))
    );
    let r = h.sup.rollout("web").expect("a rollout");
    let RolloutState::Halted { reason, message } = r.state else {
        panic!("not halted: {:?}", r.state);
    };
    assert_eq!(reason, HaltReason::ReplicaFailed);
    assert!(message.contains("web-2"), "{message}");
    let event = h.event("ReplicaFailed").expect("an event");
    assert_eq!(event.kind, EventType::Warning);
    assert_eq!(event.object, "web");
    assert!(
        event.message.contains("web-1, web-0 left on their old run"),
        "{}",
        event.message
    );
    assert!(ready(&h, "web-0") && ready(&h, "web-1"));
}

#[test]
fn a_batch_not_ready_within_the_progress_deadline_halts_the_rollout() {
    let mut h = three(UpdateStrategy::Recreate, 1, 20.0);
    restart(&mut h, None).expect("accepted");
    let unready = Fates {
        unready: &["web-2"],
        ..Fates::default()
    };
    run(&mut h, 24.0, &unready);
    assert_eq!(
        h.sup.rollout("web").expect("a rollout").state,
        RolloutState::Progressing
    );
    assert!(h.event("ProgressDeadlineExceeded").is_none());
    // 20 s after the batch began (at 5 s).
    run(&mut h, 26.0, &unready);
    let r = h.sup.rollout("web").expect("a rollout");
    assert!(
        matches!(
            r.state,
            RolloutState::Halted {
                reason: HaltReason::ProgressDeadlineExceeded,
                ..
            }
        ),
        "{:?}",
        r.state
    );
    let event = h.event("ProgressDeadlineExceeded").expect("an event");
    assert_eq!(event.kind, EventType::Warning);
    assert_eq!(
        event.message,
        "rolling restart of pod web halted after 0/3 replicas: no progress in 20s: web-2 not \
         Ready on its new run; web-1, web-0 left on their old run"
    );
    // Halted for good: web-2 becoming Ready later starts nothing else.
    let log = run(&mut h, 60.0, &Fates::default());
    assert!(log.is_empty(), "{log:?}");
    assert!(ready(&h, "web-2"));
}

#[test]
fn a_second_rolling_restart_is_refused_while_one_is_under_way() {
    let mut h = three(UpdateStrategy::Recreate, 1, 600.0);
    restart(&mut h, None).expect("accepted");
    let e = restart(&mut h, None).expect_err("refused");
    assert_eq!(e.kind, CommandErrorKind::NotApplicable);
    assert!(e.message.contains("under way"), "{}", e.message);
    let e = h
        .cmd(Command::RollingRestart {
            pod: "nope".to_string(),
            max_unavailable: None,
        })
        .expect_err("refused");
    assert_eq!(e.kind, CommandErrorKind::NotFound);
}

#[test]
fn a_reload_of_a_pod_with_rolling_update_replaces_its_replicas_a_batch_at_a_time() {
    let mut h = three(UpdateStrategy::Rolling, 1, 600.0);
    let mut new = web(3, UpdateStrategy::Rolling, 1, 600.0);
    for p in &mut new.pods {
        let mut c = ContainerSpec::clone(&p.containers[0]);
        c.command = vec!["/bin/app".to_string(), "--v2".to_string()];
        p.containers[0] = std::sync::Arc::new(c);
    }
    let message = h.cmd(Command::Reload(Box::new(new))).expect("reloaded");
    assert_eq!(
        message,
        "reloaded: 3 changed, 0 added, 0 removed, 0 unchanged; rolling update of pod web"
    );
    let log = run(
        &mut h,
        30.0,
        &Fates {
            unready: &["web-2"],
            ..Fates::default()
        },
    );
    // Only web-2 is replaced while it is not Ready; the others run their old definition.
    assert_eq!(log, ["stop web-2", "start web-2"]);
    let command = |h: &Harness, p: &str| h.status(p, "app").spec.command.clone();
    assert_eq!(
        command(&h, "web-2").last().map(String::as_str),
        Some("--v2")
    );
    assert_eq!(
        command(&h, "web-1").last().map(String::as_str),
        Some("/bin/app")
    );
    let log = run(&mut h, 60.0, &Fates::default());
    assert_eq!(
        log,
        ["stop web-1", "start web-1", "stop web-0", "start web-0"]
    );
    assert_eq!(
        command(&h, "web-0").last().map(String::as_str),
        Some("--v2")
    );
    let r = h.sup.rollout("web").expect("a rollout");
    assert_eq!(
        (r.kind, r.state),
        (RolloutKind::Update, RolloutState::Complete)
    );
}

#[test]
fn a_reload_of_a_pod_without_rolling_update_restarts_every_replica_at_once() {
    let mut h = three(UpdateStrategy::Recreate, 1, 600.0);
    let mut new = web(3, UpdateStrategy::Recreate, 1, 600.0);
    for p in &mut new.pods {
        let mut c = ContainerSpec::clone(&p.containers[0]);
        c.command = vec!["/bin/app".to_string(), "--v2".to_string()];
        p.containers[0] = std::sync::Arc::new(c);
    }
    h.cmd(Command::Reload(Box::new(new))).expect("reloaded");
    let log = run(&mut h, 30.0, &Fates::default());
    assert_eq!(log[..3], ["stop web-0", "stop web-1", "stop web-2"]);
    assert!(h.sup.rollout("web").is_none());
}
