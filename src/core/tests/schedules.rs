//! Scheduled pods in virtual time (docs/behaviour.md §6.6; the CronJob controller's
//! `syncCronJob`): the wall clock is set once and moves with the harness's monotonic clock,
//! unless a test sets it (a jump).

use super::harness::*;
use crate::config::schedule::{CronPattern, Zone};
use crate::config::spec::*;
use crate::core::*;

/// A pod `job` (restart policy Never, one container `run`) on `cron` in `zone`.
fn scheduled(cron: &str, zone: &str, concurrency: Concurrency, deadline: Option<f64>) -> PodSpec {
    let mut p = pod(
        "job",
        vec![with_policy(container("run"), RestartPolicy::Never)],
    );
    p.restart_policy = RestartPolicy::Never;
    p.schedule = Some(ScheduleSpec {
        cron: CronPattern::parse(cron).unwrap(),
        time_zone: Zone::get(Some(zone)).unwrap(),
        concurrency,
        starting_deadline: deadline.map(secs),
        suspend: false,
    });
    p
}

fn harness(p: PodSpec, wall: &str) -> Harness {
    let mut h = Harness::new(config(vec![p]));
    h.wall(wall);
    h
}

fn spawns(h: &mut Harness) -> usize {
    let key = h.key("job", "run");
    (h.take().iter())
        .filter(|a| matches!(a, Action::Spawn { key: k, .. } if *k == key))
        .count()
}

fn triggered(h: &Harness) -> Vec<String> {
    (h.events().into_iter())
        .filter(|e| e.reason == "Triggered")
        .map(|e| e.message)
        .collect()
}

/// Hours since t0 as the harness's seconds.
fn hours(h: f64) -> f64 {
    h * 3600.0
}

#[test]
fn a_scheduled_pod_waits_for_its_trigger_and_runs_anew_at_each() {
    let mut h = harness(
        scheduled("0 2 * * *", "UTC", Concurrency::Forbid, None),
        "2026-05-01T00:00:00Z",
    );
    assert_eq!(spawns(&mut h), 0, "no run at start");
    assert_eq!(
        h.waiting("job", "run").map(|w| w.1),
        Some("waiting for its schedule".to_string())
    );
    h.advance_to(hours(2.0) - 1.0);
    assert_eq!(spawns(&mut h), 0);
    h.advance_to(hours(2.0));
    assert_eq!(spawns(&mut h), 1, "the 02:00 trigger");
    h.ack_spawns();
    h.exit("job", "run", 0);
    assert_eq!(
        h.phase("job"),
        Phase::Succeeded,
        "the run's end stays visible"
    );
    let s = h.pod("job").schedule.unwrap();
    assert_eq!(
        s.last_schedule
            .map(jiff::Timestamp::try_from)
            .unwrap()
            .unwrap(),
        "2026-05-01T02:00:00Z".parse::<jiff::Timestamp>().unwrap()
    );
    assert_eq!(
        s.next_run.map(jiff::Timestamp::try_from).unwrap().unwrap(),
        "2026-05-02T02:00:00Z".parse::<jiff::Timestamp>().unwrap()
    );
    h.advance_to(hours(26.0));
    assert_eq!(spawns(&mut h), 1, "a new run the next day");
    assert_eq!(triggered(&h).len(), 2);
}

#[test]
fn each_run_starts_with_the_init_containers() {
    let mut p = scheduled("0 * * * *", "UTC", Concurrency::Forbid, None);
    p.init_containers = shared(vec![with_policy(container("setup"), RestartPolicy::Never)]);
    let mut h = harness(p, "2026-05-01T00:30:00Z");
    let setup = h.key("job", "setup");
    for run in 1..=2 {
        h.advance_to(hours(0.5 + f64::from(run - 1)));
        let acts = h.take();
        assert!(has_spawn(&acts, setup), "run {run}: init container first");
        h.ack_spawns();
        h.exit("job", "setup", 0);
        h.ack_spawns();
        h.exit("job", "run", 0);
        assert_eq!(h.phase("job"), Phase::Succeeded);
    }
}

#[test]
fn a_trigger_in_the_skipped_hour_of_spring_forward_runs_once_at_the_jump() {
    // Europe/Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST at 01:00 UTC.
    let mut h = harness(
        scheduled("30 2 * * *", "Europe/Berlin", Concurrency::Forbid, None),
        "2026-03-28T12:00:00Z",
    );
    h.advance_to(hours(13.0) - 1.0);
    assert_eq!(spawns(&mut h), 0);
    h.advance_to(hours(13.0)); // 2026-03-29T01:00:00Z
    assert_eq!(spawns(&mut h), 1);
    h.ack_spawns();
    h.exit("job", "run", 0);
    h.advance_to(hours(36.5) - 1.0); // until just before 2026-03-30T00:30Z (02:30 CEST)
    assert_eq!(spawns(&mut h), 0, "once that day");
    h.advance_to(hours(36.5));
    assert_eq!(spawns(&mut h), 1, "02:30 CEST the next day");
}

#[test]
fn a_trigger_in_the_repeated_hour_of_fall_back_runs_once() {
    // America/New_York, 1 November 2026: 01:30 EDT is 05:30 UTC, 01:30 EST is 06:30 UTC.
    let mut h = harness(
        scheduled("30 1 * * *", "America/New_York", Concurrency::Forbid, None),
        "2026-11-01T05:00:00Z",
    );
    h.advance_to(hours(0.5));
    assert_eq!(spawns(&mut h), 1, "the first 01:30");
    h.ack_spawns();
    h.exit("job", "run", 0);
    h.advance_to(hours(24.0));
    assert_eq!(spawns(&mut h), 0, "not the second 01:30");
    assert_eq!(triggered(&h).len(), 1);
}

#[test]
fn a_wall_clock_set_forward_runs_the_skipped_trigger_within_its_deadline() {
    let mut h = harness(
        scheduled("0 * * * *", "UTC", Concurrency::Forbid, Some(3600.0)),
        "2026-05-01T00:10:00Z",
    );
    h.advance_to(60.0);
    // The clock is set an hour and a half forward, past 01:00.
    h.wall("2026-05-01T01:41:00Z");
    assert_eq!(spawns(&mut h), 1, "01:00, 41 minutes late, within the hour");
    assert!(
        triggered(&h)[0].contains("2026-05-01T01:00:00+00:00"),
        "{:?}",
        triggered(&h)
    );
}

#[test]
fn a_wall_clock_set_forward_past_the_deadline_skips_the_trigger_with_an_event() {
    let mut h = harness(
        scheduled("0 * * * *", "UTC", Concurrency::Forbid, Some(300.0)),
        "2026-05-01T00:10:00Z",
    );
    h.advance_to(60.0);
    h.wall("2026-05-01T01:41:00Z");
    assert_eq!(spawns(&mut h), 0);
    let ev = h.event("MissSchedule").expect("an event says so");
    assert_eq!(ev.kind, EventType::Warning);
    assert!(
        ev.message.contains("2026-05-01T01:00:00+00:00"),
        "{}",
        ev.message
    );
    // The next trigger runs as usual.
    h.advance_to(60.0 + 19.0 * 60.0);
    assert_eq!(spawns(&mut h), 1, "02:00");
}

#[test]
fn a_wall_clock_set_back_runs_no_trigger_twice() {
    let mut h = harness(
        scheduled("0 2 * * *", "UTC", Concurrency::Forbid, None),
        "2026-05-01T01:59:00Z",
    );
    h.advance_to(60.0);
    assert_eq!(spawns(&mut h), 1);
    h.ack_spawns();
    h.exit("job", "run", 0);
    h.advance_to(120.0);
    h.wall("2026-05-01T01:00:00Z"); // an hour back
    h.advance_to(120.0 + hours(2.0));
    assert_eq!(spawns(&mut h), 0, "02:00 again is not a new trigger");
    h.advance_to(120.0 + hours(25.0) - 1.0);
    assert_eq!(spawns(&mut h), 0);
    h.advance_to(120.0 + hours(25.0)); // 2026-05-02T02:00Z on the clock as set
    assert_eq!(spawns(&mut h), 1, "the next day's");
}

#[test]
fn forbid_holds_a_trigger_back_while_a_run_is_active_and_runs_it_after() {
    let mut h = harness(
        scheduled("*/10 * * * *", "UTC", Concurrency::Forbid, None),
        "2026-05-01T00:05:00Z",
    );
    h.advance_to(300.0);
    assert_eq!(spawns(&mut h), 1, "00:10");
    h.ack_spawns();
    h.advance_to(900.0); // 00:20: still running
    assert_eq!(spawns(&mut h), 0);
    let ev = h.event("JobAlreadyActive").expect("said once");
    assert!(ev.message.contains("00:20:00"), "{}", ev.message);
    h.advance_to(1000.0);
    h.exit("job", "run", 0);
    assert_eq!(
        spawns(&mut h),
        1,
        "the held-back 00:20 runs once the run ended"
    );
}

#[test]
fn forbid_skips_a_held_back_trigger_past_its_deadline() {
    let mut h = harness(
        scheduled("*/10 * * * *", "UTC", Concurrency::Forbid, Some(60.0)),
        "2026-05-01T00:05:00Z",
    );
    h.advance_to(300.0);
    h.ack_spawns();
    h.advance_to(1000.0); // 00:21:40: the 00:20 trigger is held back, then too late
    assert!(h.event("MissSchedule").is_some());
    h.exit("job", "run", 0);
    assert_eq!(spawns(&mut h), 0, "too late to run");
}

#[test]
fn replace_stops_the_active_run_and_starts_a_new_one() {
    let mut h = harness(
        scheduled("*/10 * * * *", "UTC", Concurrency::Replace, None),
        "2026-05-01T00:05:00Z",
    );
    let key = h.key("job", "run");
    h.advance_to(300.0);
    h.ack_spawns();
    h.advance_to(900.0);
    assert!(
        has_signal(&h.take(), key),
        "the 00:20 trigger stops the 00:10 run"
    );
    h.killed_by("job", "run", 15);
    assert_eq!(
        h.status("job", "run").last_state.unwrap().reason,
        TerminationReason::Stopped
    );
    assert_eq!(spawns(&mut h), 1, "and starts its own");
}

#[test]
fn stop_suspends_the_schedule_and_start_resumes_it_without_a_run() {
    let mut h = harness(
        scheduled("0 * * * *", "UTC", Concurrency::Forbid, Some(60.0)),
        "2026-05-01T00:30:00Z",
    );
    let stop = Command::Stop {
        pod: "job".to_string(),
        container: None,
    };
    assert!(h.cmd(stop).unwrap().contains("suspended"));
    assert!(h.pod("job").schedule.unwrap().suspended);
    assert_eq!(h.pod("job").schedule.unwrap().next_run, None);
    h.advance_to(hours(3.0));
    assert_eq!(spawns(&mut h), 0, "no trigger while suspended");
    let start = Command::Start {
        pod: "job".to_string(),
        container: None,
    };
    assert!(h.cmd(start).unwrap().contains("resumed"));
    assert_eq!(spawns(&mut h), 0, "the 03:00 trigger is past its deadline");
    h.advance_to(hours(3.5));
    assert_eq!(spawns(&mut h), 1, "04:00");
}

#[test]
fn trigger_runs_a_pod_at_rest_now_and_refuses_one_under_way() {
    let mut h = harness(
        scheduled("0 2 * * *", "UTC", Concurrency::Forbid, None),
        "2026-05-01T00:00:00Z",
    );
    let trigger = || Command::Trigger {
        pod: "job".to_string(),
    };
    assert!(h.cmd(trigger()).is_ok());
    assert_eq!(spawns(&mut h), 1);
    h.ack_spawns();
    let e = h.cmd(trigger()).unwrap_err();
    assert_eq!(e.kind, CommandErrorKind::NotApplicable);
    h.exit("job", "run", 0);
    assert_eq!(
        h.pod("job").schedule.unwrap().last_schedule,
        None,
        "not a trigger"
    );
    assert!(h.cmd(trigger()).is_ok(), "again once it ended");
}

#[test]
fn without_a_schedule_nothing_wakes_an_idle_supervisor() {
    let mut h = Harness::new(config(vec![pod(
        "web",
        vec![with_policy(container("app"), RestartPolicy::Never)],
    )]));
    h.wall("2026-05-01T00:00:00Z");
    h.ack_spawns();
    assert_eq!(h.sup.poll_timeout(), None);
}

#[test]
fn after_a_crash_a_trigger_missed_meanwhile_runs_within_its_starting_deadline() {
    let cfg = config(vec![scheduled(
        "0 2 * * *",
        "UTC",
        Concurrency::Forbid,
        Some(600.0),
    )]);
    let h = harness(cfg.pods[0].clone(), "2026-05-01T00:00:00Z");
    // vigil died at 00:00 and is back at 02:05: the 02:00 trigger is 5 minutes late.
    let (mut h2, _) = h.after_crash(&cfg, hours(2.0) + 300.0, &[]);
    h2.wall("2026-05-01T02:05:00Z");
    assert_eq!(spawns(&mut h2), 1, "the missed 02:00 trigger runs");
    assert!(
        triggered(&h2)[0].contains("2026-05-01T02:00:00+00:00"),
        "{:?}",
        triggered(&h2)
    );
    // Back at 02:20 instead: past the deadline, skipped with MissSchedule.
    let (mut h3, _) = h.after_crash(&cfg, hours(2.0) + 1200.0, &[]);
    h3.wall("2026-05-01T02:20:00Z");
    assert_eq!(spawns(&mut h3), 0);
    assert!(h3.event("MissSchedule").is_some());
}

#[test]
fn after_a_crash_a_suspended_schedule_stays_suspended_and_its_last_schedule_is_kept() {
    let cfg = config(vec![scheduled(
        "0 2 * * *",
        "UTC",
        Concurrency::Forbid,
        None,
    )]);
    let mut h = harness(cfg.pods[0].clone(), "2026-05-01T00:00:00Z");
    h.advance_to(hours(2.0));
    assert_eq!(spawns(&mut h), 1);
    h.ack_spawns();
    h.exit("job", "run", 0);
    h.cmd(Command::Stop {
        pod: "job".to_string(),
        container: None,
    })
    .unwrap();
    let (mut h2, _) = h.after_crash(&cfg, 60.0, &[]);
    h2.wall("2026-05-01T02:01:00Z");
    let s = h2.pod("job").schedule.unwrap();
    assert!(s.suspended, "suspended by the operator before the crash");
    assert_eq!(
        s.last_schedule
            .map(jiff::Timestamp::try_from)
            .unwrap()
            .unwrap(),
        "2026-05-01T02:00:00Z".parse::<jiff::Timestamp>().unwrap()
    );
    // A changed pattern is a new schedule: nothing is taken back.
    let other = config(vec![scheduled(
        "0 3 * * *",
        "UTC",
        Concurrency::Forbid,
        None,
    )]);
    let (mut h3, _) = h.after_crash(&other, 60.0, &[]);
    h3.wall("2026-05-01T02:01:00Z");
    let s = h3.pod("job").schedule.unwrap();
    assert!(!s.suspended && s.last_schedule.is_none());
}
