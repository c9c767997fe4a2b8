//! A pod whose dependency cannot get there on its own — refused at start
//! (`--allow-missing-controllers`) or failed for good — keeps waiting, but says so: its
//! containers show `DependencyFailed` naming the dependency and why, its conditions carry the
//! same, a Warning `DependencyFailed` event is recorded once, and it starts when a reload or
//! an operator `start` brings the dependency back (docs/behaviour.md, "Dependencies").

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn depends(mut p: PodSpec, on: &str, condition: DependencyCondition) -> PodSpec {
    p.depends_on = vec![Dependency::new(on, condition)];
    p
}

const WHY: &str = "memory controller not available in cgroup2 at /sys/fs/cgroup/unified";

/// `big` refused at start; `after` needs it started; `last` needs `after` started.
fn refused_chain() -> (Harness, Config) {
    let cfg = config(vec![
        pod("big", vec![container("c")]),
        depends(
            pod("after", vec![container("c")]),
            "big",
            DependencyCondition::Started,
        ),
        depends(
            pod("last", vec![container("c")]),
            "after",
            DependencyCondition::Started,
        ),
    ]);
    let mut h = Harness::new(cfg.clone());
    h.sup = Supervisor::new_refusing(&cfg, h.now, &[("big".to_string(), WHY.to_string())]);
    h.pending.clear();
    h.drain();
    (h, cfg)
}

#[test]
fn a_pod_waiting_on_a_refused_pod_names_it_and_why_in_status_conditions_and_one_event() {
    let (mut h, _) = refused_chain();
    let (reason, message) = h.waiting("after", "c").expect("waiting");
    assert_eq!(reason, WaitingReason::DependencyFailed);
    assert!(
        message.contains("pod big to be started") && message.contains("refused at start"),
        "{message}"
    );
    assert!(message.contains(WHY), "{message}");
    assert_eq!(
        h.phase("after"),
        Phase::Pending,
        "it waits, it has not failed"
    );
    let ready = h.condition("after", ConditionType::Ready);
    assert!(!ready.status);
    assert_eq!(ready.reason, "DependencyFailed");
    assert_eq!(ready.message, message);
    // Further down the chain: blocked too, naming the pod it waits on.
    let (reason, message) = h.waiting("last", "c").expect("waiting");
    assert_eq!(reason, WaitingReason::DependencyFailed);
    assert!(
        message.contains("pod after waits on a dependency that cannot start"),
        "{message}"
    );
    // One Warning per waiting container, not one per loop turn.
    for _ in 0..3 {
        h.cmd(Command::Start {
            pod: "after".to_string(),
            container: None,
        })
        .ok();
        h.advance_to(h.t() + 10.0);
    }
    let events: Vec<Event> = h
        .events()
        .into_iter()
        .filter(|e| e.reason == "DependencyFailed")
        .collect();
    let objects: Vec<&str> = events.iter().map(|e| e.object.as_str()).collect();
    assert_eq!(objects, ["after/c", "last/c"], "{events:#?}");
    assert!(
        events
            .iter()
            .all(|e| e.count == 1 && e.kind == EventType::Warning)
    );
    assert!(events[0].message.contains(WHY), "{}", events[0].message);
    assert!(!h.take().iter().any(|a| matches!(a, Action::Spawn { .. })));
}

#[test]
fn dependents_of_a_refused_pod_start_once_a_reload_fixes_it() {
    let (mut h, cfg) = refused_chain();
    h.take();
    let mut pods = cfg.pods.clone();
    std::sync::Arc::make_mut(&mut pods[0].containers[0]).command =
        vec!["/bin/app".to_string(), "--small".to_string()];
    let msg = h.cmd(Command::Reload(Box::new(config(pods)))).unwrap();
    assert_eq!(msg, "reloaded: 1 changed, 0 added, 0 removed, 2 unchanged");
    let acts = h.take();
    assert!(has_spawn(&acts, h.key("big", "c")), "{acts:#?}");
    // `big` is being created: the dependents wait as usual again, no longer blocked.
    assert_eq!(
        h.waiting("after", "c").unwrap().0,
        WaitingReason::WaitingForDependencies
    );
    assert_eq!(
        h.condition("after", ConditionType::Ready).reason,
        "ContainersNotReady"
    );
    h.spawned("big", "c");
    assert!(has_spawn(&h.take(), h.key("after", "c")));
    h.spawned("after", "c");
    assert!(has_spawn(&h.take(), h.key("last", "c")));
}

/// `job` (restartPolicy Never) and `app`, which needs it completed.
fn job_stack() -> Harness {
    Harness::new(config(vec![
        pod(
            "job",
            vec![with_policy(container("run"), RestartPolicy::Never)],
        ),
        depends(
            pod("app", vec![container("web")]),
            "job",
            DependencyCondition::Completed,
        ),
    ]))
}

#[test]
fn a_dependency_failed_for_good_holds_dependents_with_its_exit_until_started_again() {
    let mut h = job_stack();
    h.spawned("job", "run");
    h.exit("job", "run", 3);
    assert_eq!(h.phase("job"), Phase::Failed);
    let (reason, message) = h.waiting("app", "web").expect("waiting");
    assert_eq!(reason, WaitingReason::DependencyFailed);
    assert!(
        message.contains("pod job to be completed")
            && message.contains("pod job failed and will not run again")
            && message.contains("container run: Error, exit code 3"),
        "{message}"
    );
    let ev = h.event("DependencyFailed").expect("event");
    assert_eq!(
        (ev.kind, ev.object.as_str()),
        (EventType::Warning, "app/web")
    );
    assert_eq!(h.phase("app"), Phase::Pending);
    h.take();
    // The operator runs the job again: the dependent waits as usual, then starts.
    h.cmd(Command::Start {
        pod: "job".to_string(),
        container: None,
    })
    .unwrap();
    assert!(has_spawn(&h.take(), h.key("job", "run")));
    assert_eq!(
        h.waiting("app", "web").unwrap().0,
        WaitingReason::WaitingForDependencies
    );
    h.spawned("job", "run");
    h.exit("job", "run", 0);
    assert!(has_spawn(&h.take(), h.key("app", "web")));
}

#[test]
fn a_dependency_backing_off_between_restarts_is_waited_for_not_reported_failed() {
    // restartPolicy OnFailure: a failed run is followed by another, so it may still complete.
    let mut h = Harness::new(config(vec![
        pod(
            "job",
            vec![with_policy(container("run"), RestartPolicy::OnFailure)],
        ),
        depends(
            pod("app", vec![container("web")]),
            "job",
            DependencyCondition::Completed,
        ),
    ]));
    for _ in 0..3 {
        h.ack_spawns();
        h.exit("job", "run", 1);
    }
    assert_eq!(
        h.waiting("job", "run").unwrap().0,
        WaitingReason::CrashLoopBackOff
    );
    assert_ne!(h.phase("job"), Phase::Failed);
    assert_eq!(
        h.waiting("app", "web").unwrap().0,
        WaitingReason::WaitingForDependencies
    );
    assert!(h.event("DependencyFailed").is_none());
}

#[test]
fn start_ignoring_dependencies_begins_a_blocked_pod_now_and_a_plain_start_keeps_it_waiting() {
    let (mut h, _) = refused_chain();
    h.take();
    let start = |pod: &str| Command::Start {
        pod: pod.to_string(),
        container: None,
    };
    let msg = h.cmd(start("after")).unwrap();
    assert!(
        msg.starts_with(
            "starting pod after: waiting for pod big to be started: pod big was refused"
        ),
        "{msg}"
    );
    assert!(!has_spawn(&h.take(), h.key("after", "c")));
    let msg = h
        .cmd(Command::StartIgnoringDependencies {
            pod: "after".to_string(),
        })
        .unwrap();
    assert_eq!(
        msg,
        "starting pod after without waiting for pod big to be started"
    );
    assert!(has_spawn(&h.take(), h.key("after", "c")));
    // `last` now waits on a pod being created: as usual again, not blocked.
    assert_eq!(
        h.waiting("last", "c").unwrap().0,
        WaitingReason::WaitingForDependencies
    );
    h.spawned("after", "c");
    assert!(
        has_spawn(&h.take(), h.key("last", "c")),
        "its own dependents follow"
    );
    // The override is about dependencies only: a refused pod still cannot run.
    let e = h
        .cmd(Command::StartIgnoringDependencies {
            pod: "big".to_string(),
        })
        .unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::NotApplicable);
    assert!(e.message.contains("refused at start"), "{}", e.message);
}
