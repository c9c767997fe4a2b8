//! After a crash of vigil (issue 36.2): the next vigil takes back the record the earlier one
//! left — restart counts, last states, back-off remaining, ended containers, events, pods'
//! ages — and a completed job never runs again because vigil crashed, even in a pod that
//! waits for a dependency.

use super::harness::*;
use crate::config::spec::*;
use crate::core::recall::Recalled;
use crate::core::*;

fn depends(mut p: PodSpec, on: &str) -> PodSpec {
    p.depends_on = vec![Dependency::new(on, DependencyCondition::Started)];
    p
}

/// `db` (a service), `jobs` (a one-shot job that waits for `db`), `crashy` (fails at once,
/// restarts Always with a 10 s back-off).
fn mix() -> Config {
    let mut crashy = container("c");
    crashy.backoff.initial = secs(10.0);
    crashy.backoff.max = secs(40.0);
    config(vec![
        pod("db", vec![container("db")]),
        depends(
            pod(
                "jobs",
                vec![with_policy(container("job"), RestartPolicy::OnFailure)],
            ),
            "db",
        ),
        pod("crashy", vec![crashy]),
    ])
}

/// Runs the mix until the job has completed and `crashy` waits in its back-off after
/// several failures.
fn settled() -> Harness {
    let mut h = Harness::new(mix());
    h.ack_spawns();
    h.ack_spawns();
    assert!(h.is_running("jobs", "job"), "{:?}", h.status("jobs", "job"));
    h.exit("jobs", "job", 0);
    for _ in 0..3 {
        h.exit("crashy", "c", 3);
        h.ack_spawns();
        while !h.is_running("crashy", "c") {
            h.step();
            h.ack_spawns();
        }
    }
    h.exit("crashy", "c", 3);
    assert!(matches!(
        h.status("crashy", "c").state,
        ContainerState::Waiting {
            reason: WaitingReason::CrashLoopBackOff,
            ..
        }
    ));
    h
}

#[test]
fn a_completed_job_in_a_pod_that_waits_for_a_dependency_does_not_run_again() {
    let old = settled();
    let db_pid = old.status("db", "db").pid.unwrap();
    let (mut h, done) = old.after_crash(&mix(), 1.0, &[("db", "db", db_pid)]);
    assert!(
        done.contains(&(
            "jobs/job".to_string(),
            Recalled::Ended(TerminationReason::Completed)
        )),
        "{done:?}"
    );
    let actions = h.take();
    assert!(!has_spawn(&actions, h.key("jobs", "job")), "{actions:?}");
    let t = h.terminated("jobs", "job").expect("still completed");
    assert_eq!(t.reason, TerminationReason::Completed);
    assert_eq!(h.phase("jobs"), Phase::Succeeded);
    // Nor later, whatever the dependency does.
    h.advance_to(600.0);
    h.ack_spawns();
    assert!(!has_spawn(&h.take(), h.key("jobs", "job")));
    assert_eq!(h.status("jobs", "job").restart_count, 0);
}

#[test]
fn a_crash_looping_container_keeps_its_count_last_state_and_the_rest_of_its_back_off() {
    let old = settled();
    let before = old.status("crashy", "c");
    let until = old.sup.poll_timeout().expect("the back-off's end");
    let db_pid = old.status("db", "db").pid.unwrap();
    let (mut h, done) = old.after_crash(&mix(), 1.0, &[("db", "db", db_pid)]);
    assert!(
        done.contains(&("crashy/c".to_string(), Recalled::BackOff)),
        "{done:?}"
    );
    let after = h.status("crashy", "c");
    assert_eq!(after.restart_count, before.restart_count);
    assert_eq!(after.last_state, before.last_state);
    assert_eq!(
        after.state, before.state,
        "still waiting out the same back-off"
    );
    assert!(!has_spawn(&h.take(), h.key("crashy", "c")), "not at once");
    // It restarts when the back-off the earlier vigil began ends, not sooner.
    while h.sup.poll_timeout().is_some_and(|t| t < until) {
        h.step();
        assert!(!has_spawn(&h.take(), h.key("crashy", "c")));
    }
    h.step();
    assert!(has_spawn(&h.take(), h.key("crashy", "c")));
    h.ack_spawns();
    assert_eq!(
        h.status("crashy", "c").restart_count,
        before.restart_count + 1
    );
}

#[test]
fn events_and_pod_ages_survive_and_new_events_follow_the_old_ones() {
    let old = settled();
    let events = old.events();
    let created = old.pod("jobs").created_at;
    let db_pid = old.status("db", "db").pid.unwrap();
    let (h, _) = old.after_crash(&mix(), 1.0, &[("db", "db", db_pid)]);
    assert_eq!(h.pod("jobs").created_at, created, "the pod's age goes on");
    assert_eq!(h.pod("crashy").created_at, created);
    let now = h.events();
    assert_eq!(
        &now[..events.len()],
        &events[..],
        "the earlier events, as they were"
    );
    let adopted = h
        .event("Adopted")
        .expect("the adoption recorded after them");
    assert!(adopted.seq > events.last().unwrap().seq);
}

#[test]
fn a_container_gone_while_no_vigil_watched_ends_status_unknown_and_restarts_by_policy() {
    let cfg = || {
        config(vec![
            pod("web", vec![container("app")]),
            pod(
                "once",
                vec![with_policy(container("run"), RestartPolicy::Never)],
            ),
        ])
    };
    let mut old = Harness::new(cfg());
    old.ack_spawns();
    old.exit("web", "app", 1);
    old.advance_to(30.0);
    old.ack_spawns();
    assert_eq!(old.status("web", "app").restart_count, 1);
    // Neither is running when the next vigil starts.
    let (mut h, done) = old.after_crash(&cfg(), 1.0, &[]);
    assert!(
        done.contains(&("web/app".to_string(), Recalled::GoneRestarted)),
        "{done:?}"
    );
    assert!(
        done.contains(&("once/run".to_string(), Recalled::GoneEnded)),
        "{done:?}"
    );
    let actions = h.take();
    assert!(has_spawn(&actions, h.key("web", "app")));
    assert!(
        !has_spawn(&actions, h.key("once", "run")),
        "Never: not again"
    );
    h.ack_spawns();
    let app = h.status("web", "app");
    assert_eq!(app.restart_count, 2, "a restart of the runs before");
    let last = app.last_state.expect("the unseen end");
    assert_eq!(last.reason, TerminationReason::ContainerStatusUnknown);
    assert_eq!(last.exit_code, 137);
    let run = h.terminated("once", "run").expect("ended");
    assert_eq!(run.reason, TerminationReason::ContainerStatusUnknown);
}

#[test]
fn a_container_whose_definition_changed_starts_afresh() {
    let old = settled();
    let mut cfg = mix();
    std::sync::Arc::make_mut(&mut cfg.pods[1].containers[0])
        .command
        .push("--again".into());
    let db_pid = old.status("db", "db").pid.unwrap();
    let (mut h, done) = old.after_crash(&cfg, 1.0, &[("db", "db", db_pid)]);
    assert!(!done.iter().any(|(l, _)| l == "jobs/job"), "{done:?}");
    h.ack_spawns();
    assert!(h.is_running("jobs", "job"), "its new definition runs");
    assert_eq!(h.status("jobs", "job").restart_count, 0);
}

#[test]
fn init_containers_that_completed_are_not_run_again_and_keep_their_last_state() {
    let mut p = pod("web", vec![container("app")]);
    p.init_containers = shared(vec![
        with_policy(container("migrate"), RestartPolicy::OnFailure),
        with_policy(container("seed"), RestartPolicy::OnFailure),
    ]);
    let cfg = config(vec![p]);
    let mut old = Harness::new(cfg.clone());
    old.ack_spawns();
    old.exit("web", "migrate", 0);
    old.ack_spawns();
    // Crash while `seed` runs: `migrate` is not run again, `seed` is (it had not completed).
    let (mut h, _) = old.after_crash(&cfg, 1.0, &[]);
    let actions = h.take();
    assert!(!has_spawn(&actions, h.key("web", "migrate")), "{actions:?}");
    assert!(has_spawn(&actions, h.key("web", "seed")), "{actions:?}");
    assert_eq!(
        h.terminated("web", "migrate")
            .map(|t| t.started_at.is_some()),
        Some(true),
        "its own end, not a synthetic one"
    );
}

#[test]
fn an_end_for_good_written_after_the_record_was_taken_wins_over_it() {
    let cfg = config(vec![pod(
        "job",
        vec![with_policy(container("run"), RestartPolicy::OnFailure)],
    )]);
    let mut old = Harness::new(cfg.clone());
    old.ack_spawns();
    // The record says running; the job completed within the record's interval, which only
    // the state file's `completed` line knows.
    let hash = |_: ContainerKey, s: &ContainerSpec| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        format!("{s:?}").hash(&mut h);
        h.finish()
    };
    let json = serde_json::to_string(&old.sup.recollection(&hash)).unwrap();
    let mut memory: recall::Recollection = serde_json::from_str(&json).unwrap();
    let spec = hash(old.key("job", "run"), &cfg.pods[0].containers[0]);
    memory.ended_since("job", "run", spec, KeptEnd::Completed, old.now);
    let mut sup = Supervisor::new(&cfg, old.now);
    let done = sup.recall(old.now, &memory, &hash);
    assert_eq!(
        done,
        vec![(
            "job/run".to_string(),
            Recalled::Ended(TerminationReason::Completed)
        )]
    );
    let mut spawned = false;
    while let Some(a) = sup.poll_action() {
        spawned |= matches!(a, Action::Spawn { .. });
    }
    assert!(!spawned, "the job does not run again");
}
