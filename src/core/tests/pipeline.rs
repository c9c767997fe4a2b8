//! Pipelined starts: the runtime confirms a container's exec (`Spawned`) or reports its failure
//! (`SpawnFailed`) later, after other inputs, commands and timeouts; meanwhile the container is
//! `Creating` (waiting, `ContainerCreating`), and the runtime may leave queued actions for a
//! later turn (`peek_action`).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn three() -> Harness {
    Harness::new(config(vec![
        pod("a", vec![container("app")]),
        pod("b", vec![container("app")]),
        pod("c", vec![container("app")]),
    ]))
}

fn spawned_pid(h: &mut Harness, pod: &str, pid: u32) {
    let key = h.key(pod, "app");
    let generation = h.generation(key);
    h.input(Input::Spawned {
        key,
        generation,
        pid,
    });
}

fn spawn_failed(h: &mut Harness, pod: &str, message: &str) {
    let key = h.key(pod, "app");
    let generation = h.generation(key);
    h.input(Input::SpawnFailed {
        key,
        generation,
        message: message.to_string(),
    });
}

#[test]
fn a_confirmation_after_other_containers_events_starts_the_run_at_the_confirmation() {
    let mut h = three();
    let acts = h.take();
    assert_eq!(
        acts.iter()
            .filter(|a| matches!(a, Action::Spawn { .. }))
            .count(),
        3
    );
    // c confirms first and exits; b confirms; a's exec is still unconfirmed a second later.
    spawned_pid(&mut h, "c", 3);
    h.exit("c", "app", 1);
    h.advance_to(1.0);
    spawned_pid(&mut h, "b", 2);
    assert_eq!(
        h.waiting("a", "app").unwrap().0,
        WaitingReason::ContainerCreating,
        "not Running before its exec is confirmed"
    );
    assert_eq!(h.status("a", "app").pid, None);
    assert_eq!(h.phase("a"), Phase::Pending);
    h.advance_to(2.0);
    spawned_pid(&mut h, "a", 1);
    let st = h.status("a", "app");
    assert_eq!(st.pid, Some(1));
    assert_eq!(
        st.state,
        ContainerState::Running {
            started_at: h.t0 + secs(2.0),
            terminating: None
        },
        "the run starts when its program does"
    );
    assert!(h.is_running("b", "app"));
    assert_eq!(h.status("c", "app").restart_count, 1);
}

#[test]
fn a_stop_while_the_exec_is_unconfirmed_is_carried_out_once_it_is_confirmed() {
    let mut h = three();
    h.take();
    h.cmd(Command::Stop {
        pod: "a".into(),
        container: None,
    })
    .unwrap();
    let key = h.key("a", "app");
    let acts = h.take();
    assert!(
        !has_signal(&acts, key) && !has_kill(&acts, key),
        "no pid to signal yet: {acts:?}"
    );
    assert_eq!(
        h.waiting("a", "app").unwrap().0,
        WaitingReason::ContainerCreating
    );
    spawned_pid(&mut h, "a", 7);
    assert!(has_signal(&h.take(), key), "stopped once confirmed");
    h.killed_by("a", "app", 15);
    let t = h.terminated("a", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::Stopped);
    assert!(
        !has_spawn(&h.take(), key),
        "a stopped container stays stopped"
    );
}

#[test]
fn an_exec_failure_after_a_stop_request_ends_it_without_a_restart() {
    let mut h = three();
    h.take();
    h.cmd(Command::Stop {
        pod: "b".into(),
        container: None,
    })
    .unwrap();
    spawn_failed(
        &mut h,
        "b",
        "exec \"/nonexistent\": No such file or directory",
    );
    let key = h.key("b", "app");
    let t = h.terminated("b", "app").expect("ended for good");
    assert_eq!(
        t.reason,
        TerminationReason::StartError,
        "what happened, not the stop"
    );
    h.advance_to(600.0);
    assert!(!has_spawn(&h.take(), key), "stopped, so not restarted");
}

#[test]
fn an_exec_failure_among_many_confirmations_ends_only_that_container_with_start_error() {
    let mut h = three();
    h.take();
    spawned_pid(&mut h, "a", 1);
    spawn_failed(
        &mut h,
        "b",
        "exec \"/nonexistent\": No such file or directory",
    );
    spawned_pid(&mut h, "c", 3);
    // Under `Always` it waits out the back-off, its last state the start error.
    let t = h.status("b", "app").last_state.expect("b ended");
    assert_eq!(t.reason, TerminationReason::StartError);
    assert_eq!(t.exit_code, 128);
    assert_eq!(
        t.message,
        "exec \"/nonexistent\": No such file or directory"
    );
    assert!(h.is_running("a", "app") && h.is_running("c", "app"));
    let ev = h.event("Failed").unwrap();
    assert_eq!(ev.object, "b/app");
    let key = h.key("b", "app");
    let mut acts = h.take();
    if !has_spawn(&acts, key) {
        h.step();
        acts = h.take();
    }
    assert!(has_spawn(&acts, key), "restarted like any start error");
}

#[test]
fn a_pod_removed_by_reload_while_its_exec_is_unconfirmed_is_stopped_then_forgotten() {
    let mut h = three();
    h.take();
    spawned_pid(&mut h, "a", 1);
    spawned_pid(&mut h, "c", 3);
    let key = h.key("b", "app");
    h.cmd(Command::Reload(Box::new(config(vec![
        pod("a", vec![container("app")]),
        pod("c", vec![container("app")]),
    ]))))
    .unwrap();
    let acts = h.take();
    assert!(!has_signal(&acts, key), "no pid to signal yet: {acts:?}");
    spawned_pid(&mut h, "b", 2);
    assert!(has_signal(&h.take(), key), "stopped once confirmed");
    h.killed_by("b", "app", 15);
    assert!(h.take().contains(&Action::Forget { key }));
    // A confirmation arriving after the pod is gone changes nothing.
    h.input(Input::Spawned {
        key,
        generation: 1,
        pid: 2,
    });
    assert!(h.take().is_empty());
    let names: Vec<String> = h.sup.pods().into_iter().map(|p| p.name).collect();
    assert_eq!(names, ["a", "c"]);
}

#[test]
fn an_unconfirmed_init_container_holds_the_next_one_back() {
    let mut p = pod("web", vec![container("app")]);
    p.init_containers = shared(vec![
        with_policy(container("i1"), RestartPolicy::OnFailure),
        with_policy(container("i2"), RestartPolicy::OnFailure),
    ]);
    let mut h = Harness::new(config(vec![p]));
    let i1 = h.key("web", "i1");
    let i2 = h.key("web", "i2");
    let acts = h.take();
    assert!(has_spawn(&acts, i1) && !has_spawn(&acts, i2));
    h.advance_to(5.0);
    assert!(!has_spawn(&h.take(), i2), "i2 waits for i1's run");
    let generation = h.generation(i1);
    h.input(Input::SpawnFailed {
        key: i1,
        generation,
        message: "exec \"i1\": Permission denied".into(),
    });
    let mut acts = h.take();
    assert!(!has_spawn(&acts, i2), "a failed i1 does not let i2 start");
    if !has_spawn(&acts, i1) {
        h.step();
        acts = h.take();
    }
    assert!(has_spawn(&acts, i1), "i1 is retried");
    assert!(!has_spawn(&acts, i2));
    h.spawned("web", "i1");
    h.exit("web", "i1", 0);
    assert!(has_spawn(&h.take(), i2));
}

#[test]
fn peeking_leaves_the_queue_as_it_was() {
    let mut sup = Supervisor::new(
        &config(vec![
            pod("a", vec![container("app")]),
            pod("b", vec![container("app")]),
        ]),
        std::time::Instant::now(),
    );
    assert!(sup.has_actions());
    let first = sup.peek_action().cloned();
    assert!(matches!(first, Some(Action::Spawn { .. })));
    assert_eq!(sup.poll_action(), first, "peek does not take");
    assert!(sup.has_actions());
    let second = sup.poll_action();
    assert!(matches!(second, Some(Action::Spawn { .. })));
    assert_ne!(first, second);
    assert!(!sup.has_actions());
    assert_eq!(sup.peek_action(), None);
}
