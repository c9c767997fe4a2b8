//! Probe bookkeeping (docs/behaviour.md §4).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;

fn probed(f: impl FnOnce(&mut ContainerSpec)) -> Harness {
    let mut c = container("app");
    f(&mut c);
    let mut h = Harness::new(config(vec![pod("web", vec![c])]));
    h.ack_spawns();
    h
}

fn result(h: &Harness, kind: ProbeKind) -> ProbeResultState {
    h.status("web", "app")
        .probes
        .iter()
        .find(|p| p.kind == kind)
        .unwrap()
        .result
}

#[test]
fn initial_published_results_follow_kubelet() {
    let h = probed(|c| {
        c.startup_probe = Some(probe(1.0));
        c.liveness_probe = Some(probe(1.0));
        c.readiness_probe = Some(probe(1.0));
    });
    assert_eq!(result(&h, ProbeKind::Startup), ProbeResultState::Unknown);
    assert_eq!(result(&h, ProbeKind::Liveness), ProbeResultState::Success);
    assert_eq!(result(&h, ProbeKind::Readiness), ProbeResultState::Failure);
    let s = h.status("web", "app");
    assert!(!s.started && !s.ready);
}

#[test]
fn probe_schedule_runs_on_fixed_deadlines_without_drift() {
    let mut h = probed(|c| {
        let mut p = probe(10.0);
        p.initial_delay = secs(5.0);
        c.readiness_probe = Some(p);
    });
    let mut times = Vec::new();
    for _ in 0..4 {
        let t = h.step();
        let starts = h.probe_starts();
        assert_eq!(starts.len(), 1);
        times.push(t);
        // Results arrive 0.3 s later; the schedule does not move.
        h.advance_to(t + 0.3);
        h.probe_result("web", "app", ProbeKind::Readiness, starts[0].1, true);
    }
    assert_eq!(times, [5.0, 15.0, 25.0, 35.0]);
}

#[test]
fn probe_in_flight_when_next_due_is_not_doubled() {
    let mut h = probed(|c| {
        let mut p = probe(1.0);
        p.timeout = secs(5.0);
        c.readiness_probe = Some(p);
    });
    assert_eq!(h.step(), 0.0);
    let first = h.probe_starts();
    assert_eq!(first.len(), 1);
    h.advance_to(3.5);
    assert!(
        h.probe_starts().is_empty(),
        "no second attempt while one is in flight"
    );
    h.probe_result("web", "app", ProbeKind::Readiness, first[0].1, true);
    assert_eq!(h.step(), 4.0, "next attempt on the original grid");
    assert_eq!(h.probe_starts().len(), 1);
}

#[test]
fn probe_timeout_records_failure_and_cancels_before_result() {
    let mut h = probed(|c| c.readiness_probe = Some(probe(10.0)));
    let key = h.key("web", "app");
    h.step();
    let (_, seq) = h.probe_starts()[0];
    assert_eq!(h.step(), 1.0);
    let acts = h.take();
    assert!(acts.contains(&Action::CancelProbe {
        key,
        generation: 1,
        kind: ProbeKind::Readiness,
        seq
    }));
    let st = h.status("web", "app");
    let rec = &st.probes[0].recent;
    assert_eq!(rec.len(), 1);
    assert!(!rec[0].success);
    assert_eq!(rec[0].message, "probe timed out after 1s");
    // The late result is dropped.
    h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    assert_eq!(h.status("web", "app").probes[0].recent.len(), 1);
    assert_eq!(result(&h, ProbeKind::Readiness), ProbeResultState::Failure);
    let ev = h.event("Unhealthy").unwrap();
    assert_eq!(
        ev.message,
        "Readiness probe failed: probe timed out after 1s"
    );
}

#[test]
fn probe_result_with_wrong_seq_or_generation_is_dropped() {
    let mut h = probed(|c| c.readiness_probe = Some(probe(10.0)));
    let key = h.key("web", "app");
    h.step();
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Readiness, seq + 7, true);
    h.input(Input::ProbeResult {
        key,
        generation: 0,
        kind: ProbeKind::Readiness,
        seq,
        outcome: ProbeOutcome::Success(String::new()),
        duration: secs(0.01),
    });
    assert!(h.status("web", "app").probes[0].recent.is_empty());
    h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    assert!(h.status("web", "app").ready);
}

#[test]
fn readiness_success_threshold_gates_ready_and_conditions() {
    let mut h = probed(|c| {
        let mut p = probe(1.0);
        p.success_threshold = 2;
        p.failure_threshold = 2;
        c.readiness_probe = Some(p);
    });
    let ready = |h: &Harness| h.condition("web", ConditionType::Ready);
    assert!(!ready(&h).status);
    assert_eq!(ready(&h).reason, "ContainersNotReady");
    assert_eq!(ready(&h).message, "containers with unready status: [app]");
    let run = |h: &mut Harness, ok: bool| {
        h.step();
        let (_, seq) = h.probe_starts()[0];
        h.probe_result("web", "app", ProbeKind::Readiness, seq, ok);
    };
    run(&mut h, true);
    assert!(
        !h.status("web", "app").ready,
        "one success is below the threshold"
    );
    run(&mut h, true);
    assert!(h.status("web", "app").ready);
    let c = ready(&h);
    assert!(c.status);
    assert_eq!(c.last_transition, h.now);
    assert!(h.condition("web", ConditionType::ContainersReady).status);
    let flipped = h.now;
    run(&mut h, true);
    assert_eq!(ready(&h).last_transition, flipped, "no flip, no transition");
    run(&mut h, false);
    assert!(
        h.status("web", "app").ready,
        "one failure is below the threshold"
    );
    run(&mut h, true);
    run(&mut h, false);
    run(&mut h, false);
    assert!(!h.status("web", "app").ready);
    assert!(h.is_running("web", "app"), "readiness never kills");
}

#[test]
fn startup_probe_gates_liveness_and_readiness() {
    let mut h = probed(|c| {
        c.startup_probe = Some(probe(1.0));
        let mut l = probe(10.0);
        l.initial_delay = secs(3.0);
        c.liveness_probe = Some(l);
        c.readiness_probe = Some(probe(10.0));
    });
    h.step();
    let starts = h.probe_starts();
    assert_eq!(
        starts.iter().map(|s| s.0).collect::<Vec<_>>(),
        [ProbeKind::Startup]
    );
    h.probe_result("web", "app", ProbeKind::Startup, starts[0].1, false);
    h.step();
    let starts = h.probe_starts();
    assert_eq!(
        starts.iter().map(|s| s.0).collect::<Vec<_>>(),
        [ProbeKind::Startup]
    );
    h.advance_to(1.5);
    h.probe_result("web", "app", ProbeKind::Startup, starts[0].1, true);
    let s = h.status("web", "app");
    assert!(s.started && !s.ready);
    // Readiness starts at once (no delay), liveness 3 s after startup succeeded; startup stops.
    assert_eq!(h.step(), 1.5);
    let starts = h.probe_starts();
    assert_eq!(
        starts.iter().map(|s| s.0).collect::<Vec<_>>(),
        [ProbeKind::Readiness]
    );
    h.probe_result("web", "app", ProbeKind::Readiness, starts[0].1, true);
    assert!(h.status("web", "app").ready);
    assert_eq!(h.step(), 4.5);
    assert_eq!(
        h.probe_starts().iter().map(|s| s.0).collect::<Vec<_>>(),
        [ProbeKind::Liveness]
    );
}

#[test]
fn liveness_failure_after_threshold_kills_and_holds() {
    let mut h = probed(|c| {
        let mut l = probe(10.0);
        l.termination_grace = Some(secs(2.0));
        c.liveness_probe = Some(l);
        c.readiness_probe = Some(probe(10.0));
    });
    let key = h.key("web", "app");
    for i in 0..3 {
        h.step();
        for (kind, seq) in h.probe_starts() {
            h.probe_result("web", "app", kind, seq, kind == ProbeKind::Readiness);
        }
        let killed = has_signal(&h.take(), key);
        assert_eq!(killed, i == 2, "signal only after the third failure");
    }
    let ev = h.event("Killing").unwrap();
    assert_eq!(
        ev.message,
        "Container app failed liveness probe, will be restarted"
    );
    assert_eq!(h.event("Unhealthy").unwrap().count, 3);
    assert!(h.is_running("web", "app"), "still running until it exits");
    // Probes hold: the next deadline is the probe-level grace kill, not another attempt.
    assert_eq!(h.step(), 22.0);
    let acts = h.take();
    assert!(has_kill(&acts, key));
    assert!(!acts.iter().any(|a| matches!(a, Action::StartProbe { .. })));
    h.killed_by("web", "app", 9);
    let last = h.status("web", "app").last_state.unwrap();
    assert_eq!(last.reason, TerminationReason::LivenessProbeFailed);
    assert_eq!(last.exit_code, 137);
    // New run: probes start over with initial results.
    h.spawned("web", "app");
    assert_eq!(result(&h, ProbeKind::Liveness), ProbeResultState::Success);
}

#[test]
fn startup_probe_failure_kills_with_startup_reason() {
    let mut h = probed(|c| {
        let mut s = probe(1.0);
        s.failure_threshold = 2;
        c.startup_probe = Some(s);
        c.restart_policy = RestartPolicy::Never;
    });
    for _ in 0..2 {
        h.step();
        let (_, seq) = h.probe_starts()[0];
        h.probe_result("web", "app", ProbeKind::Startup, seq, false);
    }
    assert!(
        h.event("Killing")
            .unwrap()
            .message
            .contains("failed startup probe")
    );
    h.killed_by("web", "app", 15);
    let t = h.terminated("web", "app").unwrap();
    assert_eq!(t.reason, TerminationReason::StartupProbeFailed);
    assert_eq!(h.phase("web"), Phase::Failed);
}

#[test]
fn probe_history_keeps_last_ten() {
    let mut h = probed(|c| c.readiness_probe = Some(probe(1.0)));
    for _ in 0..15 {
        h.step();
        let (_, seq) = h.probe_starts()[0];
        h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    }
    let st = h.status("web", "app");
    assert_eq!(st.probes[0].recent.len(), 10);
    assert_eq!(st.probes[0].recent[9].at, h.t0 + secs(14.0));
}

#[test]
fn in_flight_probe_is_cancelled_when_container_exits() {
    let mut h = probed(|c| c.readiness_probe = Some(probe(10.0)));
    let key = h.key("web", "app");
    h.step();
    let (_, seq) = h.probe_starts()[0];
    h.exit("web", "app", 1);
    assert!(h.take().contains(&Action::CancelProbe {
        key,
        generation: 1,
        kind: ProbeKind::Readiness,
        seq
    }));
}

#[test]
fn probe_results_update_their_own_pods_conditions_and_leave_the_others_alone() {
    let probed_pod = |name: &str, delay: f64| {
        let mut c = container("app");
        let mut p = probe(1.0);
        p.initial_delay = secs(delay);
        c.readiness_probe = Some(p);
        pod(name, vec![c])
    };
    let mut h = Harness::new(config(vec![probed_pod("a", 0.2), probed_pod("b", 0.5)]));
    h.ack_spawns();
    let ready = |h: &Harness, p: &str| h.condition(p, ConditionType::Ready);
    let b_before = ready(&h, "b");

    assert_eq!(h.step(), 0.2);
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("a", "app", ProbeKind::Readiness, seq, true);
    assert!(ready(&h, "a").status);
    assert_eq!(ready(&h, "a").last_transition, h.now);
    assert!(h.condition("a", ConditionType::ContainersReady).status);
    assert_eq!(ready(&h, "b"), b_before, "b had no result yet");

    assert_eq!(h.step(), 0.5);
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("b", "app", ProbeKind::Readiness, seq, true);
    let b = ready(&h, "b");
    assert!(b.status && b.reason.is_empty() && b.message.is_empty());
    assert_eq!(b.last_transition, h.now);
    assert_eq!(
        ready(&h, "a").last_transition,
        h.t0 + secs(0.2),
        "a did not flip again"
    );
}
