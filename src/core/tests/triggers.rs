//! Trigger times and the CronJob bookkeeping of `core::schedule`, on wall-clock values alone
//! (docs/behaviour.md §6.6): daylight-saving changes, missed triggers, deadlines, policies.

use std::time::Duration;

use jiff::Timestamp;

use crate::config::schedule::{CronPattern, Zone};
use crate::config::spec::{Concurrency, ScheduleSpec};
use crate::core::schedule::*;

fn spec(cron: &str, zone: &str) -> ScheduleSpec {
    ScheduleSpec {
        cron: CronPattern::parse(cron).unwrap(),
        time_zone: Zone::get(Some(zone)).unwrap(),
        concurrency: Concurrency::Forbid,
        starting_deadline: None,
        suspend: false,
    }
}

/// A wall-clock time written with its offset.
fn at(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// The triggers of `s` after `from`, `n` of them, as RFC 3339 in UTC.
fn triggers(s: &ScheduleSpec, from: &str, n: usize) -> Vec<String> {
    let mut t = at(from);
    let mut out = Vec::new();
    for _ in 0..n {
        t = next_after(s, t).unwrap();
        out.push(t.to_string());
    }
    out
}

#[test]
fn a_daily_trigger_is_placed_in_its_time_zone() {
    let s = spec("0 2 * * *", "Europe/Berlin");
    // 02:00 CET is 01:00 UTC.
    assert_eq!(
        triggers(&s, "2026-01-10T12:00:00Z", 2),
        ["2026-01-11T01:00:00Z", "2026-01-12T01:00:00Z"]
    );
}

#[test]
fn a_trigger_in_the_hour_spring_forward_skips_runs_once_when_the_clocks_jump() {
    // Europe/Berlin, 29 March 2026: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 does
    // not exist that day.
    let s = spec("30 2 * * *", "Europe/Berlin");
    assert_eq!(
        triggers(&s, "2026-03-28T12:00:00Z", 3),
        [
            "2026-03-29T01:00:00Z", // the jump: 03:00 CEST
            "2026-03-30T00:30:00Z", // 02:30 CEST
            "2026-03-31T00:30:00Z",
        ]
    );
    // Every quarter hour across the gap: the gap's four run once, at the jump, and the
    // hour after it as usual.
    let s = spec("*/15 * * * *", "Europe/Berlin");
    assert_eq!(
        triggers(&s, "2026-03-29T00:50:00Z", 4),
        [
            "2026-03-29T01:00:00Z",
            "2026-03-29T01:15:00Z",
            "2026-03-29T01:30:00Z",
            "2026-03-29T01:45:00Z",
        ]
    );
}

#[test]
fn a_trigger_in_the_hour_fall_back_repeats_runs_once() {
    // America/New_York, 1 November 2026: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:30
    // happens at 05:30 UTC (EDT) and again at 06:30 UTC (EST).
    let s = spec("30 1 * * *", "America/New_York");
    assert_eq!(
        triggers(&s, "2026-10-31T12:00:00Z", 2),
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"]
    );
    // Looked at from inside the repeated hour, after the first 01:30: not again.
    assert_eq!(
        triggers(&s, "2026-11-01T06:10:00Z", 1),
        ["2026-11-02T06:30:00Z"]
    );
}

#[test]
fn a_pattern_that_never_matches_has_no_trigger() {
    let s = spec("0 0 30 2 *", "UTC");
    assert_eq!(next_after(&s, at("2026-01-01T00:00:00Z")), None);
}

#[test]
fn the_latest_of_several_missed_triggers_runs_and_they_are_counted() {
    let s = spec("0 * * * *", "UTC");
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:30:00Z"));
    assert_eq!(
        st.look(&s, at("2026-05-01T00:59:00Z"), false),
        Decision::Nothing
    );
    assert_eq!(
        st.look(&s, at("2026-05-01T03:10:00Z"), false),
        Decision::Run {
            at: at("2026-05-01T03:00:00Z"),
            replace: false,
            missed: 3
        }
    );
    assert_eq!(st.last_schedule, Some(at("2026-05-01T03:00:00Z")));
    assert_eq!(
        st.look(&s, at("2026-05-01T03:20:00Z"), false),
        Decision::Nothing
    );
    assert_eq!(
        st.next_run(&s, at("2026-05-01T03:20:00Z")),
        Some(at("2026-05-01T04:00:00Z"))
    );
}

#[test]
fn more_than_a_hundred_missed_triggers_still_find_the_latest() {
    let s = spec("* * * * *", "UTC");
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:00:30Z"));
    match st.look(&s, at("2026-05-03T07:42:10Z"), false) {
        Decision::Run { at: t, missed, .. } => {
            assert_eq!(t, at("2026-05-03T07:42:00Z"));
            assert!(missed > MAX_MISSED, "{missed}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_trigger_past_its_starting_deadline_is_skipped_once() {
    let mut s = spec("0 2 * * *", "UTC");
    s.starting_deadline = Some(Duration::from_secs(300));
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:00:00Z"));
    assert_eq!(
        st.look(&s, at("2026-05-01T02:04:00Z"), false),
        Decision::Run {
            at: at("2026-05-01T02:00:00Z"),
            replace: false,
            missed: 1
        },
        "4 minutes late is within 5"
    );
    assert_eq!(
        st.look(&s, at("2026-05-02T02:06:00Z"), false),
        Decision::TooLate {
            at: at("2026-05-02T02:00:00Z")
        }
    );
    assert_eq!(
        st.look(&s, at("2026-05-02T02:07:00Z"), false),
        Decision::Nothing
    );
    assert_eq!(st.last_schedule, Some(at("2026-05-01T02:00:00Z")));
}

#[test]
fn forbid_holds_a_trigger_back_until_the_run_ends_and_replace_takes_it() {
    let mut s = spec("0 2 * * *", "UTC");
    s.starting_deadline = Some(Duration::from_secs(600));
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:00:00Z"));
    let now = at("2026-05-01T02:00:00Z");
    let held = Decision::HeldBack {
        at: now,
        first: true,
    };
    assert_eq!(st.look(&s, now, true), held);
    assert_eq!(
        st.look(&s, at("2026-05-01T02:01:00Z"), true),
        Decision::HeldBack {
            at: now,
            first: false
        }
    );
    assert_eq!(
        st.next_look(&s, at("2026-05-01T02:01:00Z")),
        Some(at("2026-05-01T02:10:00.001Z")),
        "woken when it becomes too late"
    );
    // The run ended within the deadline: the held-back trigger runs, late.
    assert_eq!(
        st.look(&s, at("2026-05-01T02:05:00Z"), false),
        Decision::Run {
            at: now,
            replace: false,
            missed: 1
        }
    );
    s.concurrency = Concurrency::Replace;
    assert_eq!(
        st.look(&s, at("2026-05-02T02:00:00Z"), true),
        Decision::Run {
            at: at("2026-05-02T02:00:00Z"),
            replace: true,
            missed: 1
        }
    );
}

#[test]
fn a_wall_clock_set_back_does_not_run_a_trigger_twice() {
    let s = spec("0 2 * * *", "UTC");
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:00:00Z"));
    assert!(matches!(
        st.look(&s, at("2026-05-01T02:00:00Z"), false),
        Decision::Run { .. }
    ));
    // The clock goes back an hour, then forward past 02:00 again.
    assert_eq!(
        st.look(&s, at("2026-05-01T01:30:00Z"), false),
        Decision::Nothing
    );
    assert_eq!(
        st.look(&s, at("2026-05-01T02:00:30Z"), false),
        Decision::Nothing
    );
    assert_eq!(
        st.next_run(&s, at("2026-05-01T01:30:00Z")),
        Some(at("2026-05-02T02:00:00Z"))
    );
}

#[test]
fn a_wall_clock_set_forward_runs_the_latest_skipped_trigger_within_its_deadline() {
    let mut s = spec("15 * * * *", "UTC");
    s.starting_deadline = Some(Duration::from_secs(3600));
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:00:00Z"));
    // 00:10 → 01:40: the 00:15 and 01:15 triggers were jumped over; 01:15 runs now.
    assert_eq!(
        st.look(&s, at("2026-05-01T01:40:00Z"), false),
        Decision::Run {
            at: at("2026-05-01T01:15:00Z"),
            replace: false,
            missed: 2
        }
    );
}

#[test]
fn a_suspended_schedule_looks_at_nothing() {
    let mut s = spec("* * * * *", "UTC");
    s.suspend = true;
    let mut st = ScheduleState::new(&s, at("2026-05-01T00:00:00Z"));
    assert_eq!(
        st.look(&s, at("2026-05-01T05:00:00Z"), false),
        Decision::Nothing
    );
    assert_eq!(st.next_run(&s, at("2026-05-01T05:00:00Z")), None);
}
