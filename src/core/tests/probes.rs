//! Probe bookkeeping (docs/behaviour.md §4).

use super::harness::*;
use crate::config::spec::*;
use crate::core::*;
use std::time::{Duration, Instant};

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

    // b's probe began at the same instant as a's: its schedule is shifted (phase spreading).
    let b_phase = h.status("b", "app").probes[0].phase;
    assert!(b_phase > Duration::ZERO);
    h.step();
    assert_eq!(h.now, h.t0 + secs(0.5) + b_phase);
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

/// `n` pods `p00`.. each with one container whose readiness probe has `period` and `delay`,
/// all started (acknowledged) at the same instant, as pipelined starts at boot nearly do.
fn started_together(n: usize, period: f64, delay: f64) -> Harness {
    let pods = (0..n)
        .map(|i| {
            let mut c = container("app");
            let mut p = probe(period);
            p.initial_delay = secs(delay);
            c.liveness_probe = Some(p.clone());
            c.readiness_probe = Some(p);
            pod(&format!("p{i:02}"), vec![c])
        })
        .collect();
    let mut h = Harness::new(config(pods));
    h.ack_spawns();
    h
}

/// The first attempt time of each pod's probes (every probe due in the window answered).
fn first_attempts(h: &mut Harness, n: usize, until: f64) -> Vec<Instant> {
    let mut first: Vec<Option<Instant>> = vec![None; n];
    while h.step_until(until) {
        for a in h.take() {
            if let Action::StartProbe { key, kind, seq, .. } = a {
                let i = (0..n)
                    .find(|&i| h.key(&format!("p{i:02}"), "app") == key)
                    .unwrap();
                first[i].get_or_insert(h.now);
                h.probe_result(&format!("p{i:02}"), "app", kind, seq, true);
            }
        }
    }
    first.into_iter().map(|t| t.expect("probed")).collect()
}

#[test]
fn probes_of_containers_started_in_the_same_turn_are_spread_over_the_period() {
    // kubelet prober/worker.go run(): workers found at a (re)start wait a random part of the
    // period before their first probe, so that they do not all fire at once. vigil spreads
    // deterministically; never before start + initial delay, at most min(period, 1 s) after.
    let n = 20;
    let mut h = started_together(n, 1.0, 0.5);
    let start = h.t0;
    let first = first_attempts(&mut h, n, 1.499_999);
    let mut sorted = first.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), n, "no two containers' first probes coincide");
    assert_eq!(
        first[0],
        start + secs(0.5),
        "the first of the turn keeps its schedule"
    );
    for &t in &first {
        assert!(t >= start + secs(0.5), "never before start + initial delay");
        assert!(t < start + secs(1.5), "at most one period later");
    }
    // Evenly: no gap between neighbours (round the period) wider than 3 × period / n.
    let mut gaps: Vec<Duration> = sorted.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.push(sorted[0] + secs(1.0) - sorted[n - 1]);
    let widest = gaps.iter().max().unwrap();
    assert!(*widest < secs(3.0 / n as f64), "widest gap {widest:?}");
    // Each container's liveness and readiness share its phase, and the schedule keeps it.
    for (i, &t) in first.iter().enumerate() {
        let s = h.status(&format!("p{i:02}"), "app");
        assert!(s.probes.iter().all(|p| p.phase == t - start - secs(0.5)));
    }
    let second = first_attempts(&mut h, n, 2.499_999);
    for i in 0..n {
        assert_eq!(
            second[i],
            first[i] + secs(1.0),
            "on the shifted grid, no drift"
        );
    }
}

#[test]
fn phase_spreading_stays_within_a_short_period() {
    let n = 50;
    let mut h = started_together(n, 0.2, 1.0);
    let first = first_attempts(&mut h, n, 1.25);
    for &t in &first {
        assert!(t >= h.t0 + secs(1.0) && t < h.t0 + secs(1.2));
    }
    let mut sorted = first.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), n);
}

#[test]
fn a_container_restarted_alone_is_probed_at_start_plus_initial_delay_again() {
    let mut h = started_together(3, 1.0, 0.5);
    let shifted = h.status("p02", "app").probes[0].phase;
    assert!(shifted > Duration::ZERO);
    h.advance_to(3.0);
    h.take();
    h.exit("p02", "app", 1);
    // The restart (after its back-off) is acknowledged in a turn of its own.
    let key = h.key("p02", "app");
    while !has_spawn(&h.take(), key) {
        assert!(h.step_until(60.0), "restarted");
    }
    h.spawned("p02", "app");
    let restarted = h.now;
    let limit = h.t() + 0.5 + 1e-6;
    let mut probed_at = None;
    while probed_at.is_none() && h.step_until(limit) {
        let mine = h
            .take()
            .iter()
            .any(|a| matches!(a, Action::StartProbe { key: k, .. } if *k == key));
        probed_at = mine.then_some(h.now);
    }
    assert_eq!(probed_at, Some(restarted + secs(0.5)));
    let s = h.status("p02", "app");
    assert_eq!(s.restart_count, 1);
    assert!(s.probes.iter().all(|p| p.phase == Duration::ZERO));
}

#[test]
fn each_attempt_records_how_late_after_its_due_time_it_started() {
    let mut h = probed(|c| {
        let mut p = probe(1.0);
        p.initial_delay = secs(2.0);
        c.readiness_probe = Some(p);
    });
    // The loop was busy: the turn that starts the attempt due at 2.0 s reads 2.3 s.
    h.now = h.t0 + secs(2.3);
    h.sup.handle_timeout(h.now);
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    // Due at 3.0 s, started on time.
    assert_eq!(h.step(), 3.0);
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    let recent = &h.status("web", "app").probes[0].recent;
    assert_eq!(recent[0].late, secs(2.3) - secs(2.0));
    assert_eq!(recent[1].late, Duration::ZERO);
}

#[test]
fn only_probes_begun_within_a_millisecond_of_each_other_are_shifted() {
    let probed_pod = |name: &str| {
        let mut c = container("app");
        c.readiness_probe = Some(probe(1.0));
        pod(name, vec![c])
    };
    let mut h = Harness::new(config(vec![
        probed_pod("a"),
        probed_pod("b"),
        probed_pod("c"),
    ]));
    h.drain();
    h.spawned("a", "app");
    h.now += secs(0.0005);
    h.spawned("b", "app");
    h.now += secs(0.002);
    h.spawned("c", "app");
    let phase = |h: &Harness, p: &str| h.status(p, "app").probes[0].phase;
    assert_eq!(phase(&h, "a"), Duration::ZERO);
    assert!(phase(&h, "b") > Duration::ZERO, "b began 0.5 ms after a");
    assert_eq!(phase(&h, "c"), Duration::ZERO, "c began a group of its own");
}

#[test]
fn a_readiness_timeout_that_reaches_the_threshold_makes_the_pod_unready_at_that_instant() {
    let mut h = probed(|c| {
        let mut p = probe(10.0);
        p.failure_threshold = 2;
        c.readiness_probe = Some(p);
    });
    let ready = |h: &Harness| h.condition("web", ConditionType::Ready);
    assert_eq!(h.step(), 0.0);
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Readiness, seq, true);
    assert!(ready(&h).status);
    // Two attempts time out (1 s each); the first is below the threshold and moves nothing.
    for (start, flips) in [(10.0, false), (20.0, true)] {
        assert_eq!(h.step(), start);
        assert_eq!(h.probe_starts().len(), 1);
        assert_eq!(h.step(), start + 1.0);
        let c = ready(&h);
        assert_eq!(
            c.status, !flips,
            "after the timeout of the attempt at {start}"
        );
        if flips {
            assert_eq!(c.reason, "ContainersNotReady");
            assert_eq!(c.last_transition, h.now, "flipped at the timeout");
            assert!(!h.condition("web", ConditionType::ContainersReady).status);
        } else {
            assert_eq!(
                c.last_transition, h.t0,
                "one timeout is below the threshold"
            );
        }
    }
}

#[test]
fn liveness_timeouts_that_reach_the_threshold_kill_the_container() {
    let mut h = probed(|c| {
        let mut l = probe(10.0);
        l.failure_threshold = 2;
        c.liveness_probe = Some(l);
    });
    let key = h.key("web", "app");
    for (start, kills) in [(0.0, false), (10.0, true)] {
        assert_eq!(h.step(), start);
        assert_eq!(h.probe_starts().len(), 1);
        assert_eq!(h.step(), start + 1.0);
        assert_eq!(
            has_signal(&h.take(), key),
            kills,
            "signal only after the second timeout"
        );
    }
    assert_eq!(
        h.event("Killing").unwrap().message,
        "Container app failed liveness probe, will be restarted"
    );
}

#[test]
fn each_probe_record_names_the_run_it_probed_across_a_restart() {
    let mut h = probed(|c| c.readiness_probe = Some(probe(1.0)));
    h.step();
    let (_, seq) = h.probe_starts()[0];
    h.probe_result("web", "app", ProbeKind::Readiness, seq, false);
    h.exit("web", "app", 1);
    // Back-off, then the second run and its first attempt.
    let mut second = None;
    h.ack_spawns();
    for _ in 0..50 {
        h.step();
        if let Some((_, seq)) = h.probe_starts().first() {
            second = Some(*seq);
            break;
        }
    }
    assert_eq!(h.status("web", "app").restart_count, 1);
    h.probe_result("web", "app", ProbeKind::Readiness, second.unwrap(), true);
    let runs: Vec<(u32, bool)> = h.status("web", "app").probes[0]
        .recent
        .iter()
        .map(|r| (r.run, r.success))
        .collect();
    assert_eq!(runs, [(1, false), (2, true)]);
}
