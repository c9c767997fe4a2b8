//! Schedules: when a scheduled pod's runs are due, in wall-clock time (docs/behaviour.md §6.6).
//!
//! Owns two things. The trigger times of a `schedule`: its cron pattern matched on the civil
//! calendar (croner), each match placed in the pod's time zone (jiff) by vigil's rules for
//! daylight-saving changes ([`place`]). And the bookkeeping of one scheduled pod as the
//! CronJob controller keeps it (`pkg/controller/cronjob`: `mostRecentScheduleTime` and
//! `syncCronJob` in `cronjob_controllerv2.go`): the triggers decided so far, the one due now,
//! whether it is past its starting deadline, and what the concurrency policy makes of it.
//! It reads no clock: the wall-clock time is an input, like the core's `now`. It starts and
//! stops nothing: the supervisor carries out its [`Decision`]s.

use crate::config::on_event::EventReason;
use std::time::Duration;

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};

use super::pod::{Out, Pod, Stage, StopCause};
use super::{EventType, ScheduleStatus, Time};
use crate::config::spec::{Concurrency, ScheduleSpec};

/// More unmet triggers than this between two looks is worth a warning (CronJob:
/// `TooManyMissedTimes`, "too many missed start times"); they are not all counted.
pub(super) const MAX_MISSED: u32 = 100;

/// Civil matches tried for one trigger: the matches that fall on instants already past (in the
/// repeated hour of a fall-back) are skipped, at most an hour or two of them.
const MAX_CANDIDATES: usize = 10_000;

/// The instant civil time `c` stands for in `tz`. Where it happens once, that instant. In the
/// hour a spring-forward skips (`02:30` when clocks go from 02:00 to 03:00), the moment the
/// clocks jump (03:00 new time): a trigger in the gap runs as soon as the day has passed its
/// time, and several in one gap run once (Vixie cron runs them right after the change too).
/// In the hour a fall-back repeats (`01:30` twice), the first of the two: it runs once.
pub(super) fn place(tz: &TimeZone, c: DateTime) -> Option<Timestamp> {
    let amb = tz.to_ambiguous_timestamp(c);
    match amb.offset() {
        AmbiguousOffset::Unambiguous { .. } | AmbiguousOffset::Fold { .. } => amb.earlier().ok(),
        AmbiguousOffset::Gap { .. } => {
            // `earlier` lies before the transition, `later` after it.
            let before = amb.earlier().ok()?;
            let t = tz.following(before).next()?.timestamp();
            Some(t)
        }
    }
}

/// The first civil time after `after` that `cron` matches.
fn next_civil(cron: &croner::Cron, after: DateTime) -> Option<DateTime> {
    // chrono's UTC stands for the civil calendar here: no zone, no daylight saving.
    let date = chrono::NaiveDate::from_ymd_opt(
        i32::from(after.year()),
        u32::try_from(after.month()).ok()?,
        u32::try_from(after.day()).ok()?,
    )?;
    let time = chrono::NaiveTime::from_hms_opt(
        u32::try_from(after.hour()).ok()?,
        u32::try_from(after.minute()).ok()?,
        u32::try_from(after.second()).ok()?,
    )?;
    let next = cron
        .find_next_occurrence(&date.and_time(time).and_utc(), false)
        .ok()?;
    use chrono::{Datelike, Timelike};
    DateTime::new(
        i16::try_from(next.year()).ok()?,
        i8::try_from(next.month()).ok()?,
        i8::try_from(next.day()).ok()?,
        i8::try_from(next.hour()).ok()?,
        i8::try_from(next.minute()).ok()?,
        0,
        0,
    )
    .ok()
}

/// The first trigger of `spec` strictly after `after`; `None` when there is none (a pattern
/// that never matches, such as 30 February, or the end of the calendar).
pub(super) fn next_after(spec: &ScheduleSpec, after: Timestamp) -> Option<Timestamp> {
    let tz = spec.time_zone.tz();
    let mut civil = tz.to_datetime(after);
    for _ in 0..MAX_CANDIDATES {
        let c = next_civil(spec.cron.cron(), civil)?;
        if let Some(t) = place(tz, c)
            && t > after
        {
            return Some(t);
        }
        civil = c;
    }
    None
}

/// `t + d`, or the end of time.
fn plus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// `t - d`, or the start of time.
fn minus(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_sub(d).unwrap_or(Timestamp::MIN)
}

/// The CronJob controller's `mostRecentScheduleTime`: the latest trigger in `(since, now]` and
/// how many triggers that interval holds, counted up to [`MAX_MISSED`] + 1 (past that, the
/// latest is found by looking back from `now` in growing windows, not by counting).
pub(super) fn most_recent(
    spec: &ScheduleSpec,
    since: Timestamp,
    now: Timestamp,
) -> Option<(Timestamp, u32)> {
    let mut latest = next_after(spec, since).filter(|&t| t <= now)?;
    let mut count = 1;
    while let Some(t) = next_after(spec, latest).filter(|&t| t <= now) {
        latest = t;
        count += 1;
        if count > MAX_MISSED {
            break;
        }
    }
    if count <= MAX_MISSED {
        return Some((latest, count));
    }
    let mut window = Duration::from_secs(3600);
    loop {
        let from = minus(now, window).max(latest);
        let mut last = None;
        let mut t = from;
        for _ in 0..=MAX_MISSED * 100 {
            match next_after(spec, t).filter(|&u| u <= now) {
                Some(u) => {
                    last = Some(u);
                    t = u;
                }
                None => break,
            }
        }
        if let Some(l) = last.filter(|&l| next_after(spec, l).is_none_or(|n| n > now)) {
            return Some((l, count));
        }
        if from <= latest {
            return Some((latest, count));
        }
        window = window.saturating_mul(4);
    }
}

/// What a look at a schedule found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// Nothing is due.
    Nothing,
    /// Start a run for the trigger at `at`; `replace`: stop the active run first
    /// (`concurrency = "Replace"`). `missed`: how many triggers were unmet since the last one
    /// decided, this one included (more than [`MAX_MISSED`]: too many to count).
    Run {
        at: Timestamp,
        replace: bool,
        missed: u32,
    },
    /// The trigger at `at` is past its starting deadline: skipped (CronJob `MissSchedule`).
    TooLate { at: Timestamp },
    /// A run is active and `concurrency = "Forbid"`: the trigger at `at` waits for it to end
    /// (and runs then, if still within its starting deadline). `first`: it was not held back
    /// at the look before.
    HeldBack { at: Timestamp, first: bool },
}

/// The state of one scheduled pod's schedule.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) struct ScheduleState {
    /// Every trigger at or before this has been decided (run, replaced into, or skipped): the
    /// CronJob's `lastScheduleTime`, or its creation (here: when vigil took the schedule on).
    pub decided: Timestamp,
    /// The trigger of the last run started by the schedule (`LAST SCHEDULE`).
    pub last_schedule: Option<Timestamp>,
    /// `suspend`, or an operator `stop`: no trigger is looked at.
    pub suspended: bool,
    /// The trigger a `Forbid` holds back, once reported.
    pub held_back: Option<Timestamp>,
}

impl ScheduleState {
    /// A schedule taken on at wall-clock time `now`: triggers before it are not run.
    pub(super) fn new(spec: &ScheduleSpec, now: Timestamp) -> ScheduleState {
        ScheduleState {
            decided: now,
            last_schedule: None,
            suspended: spec.suspend,
            held_back: None,
        }
    }

    /// Looks at the schedule at wall-clock time `now`, with a run of the pod `active` or not
    /// (CronJob `syncCronJob`): the latest unmet trigger runs, unless it is past the starting
    /// deadline (skipped) or the concurrency policy holds it back; earlier unmet ones are
    /// skipped with it.
    pub(super) fn look(&mut self, spec: &ScheduleSpec, now: Timestamp, active: bool) -> Decision {
        if self.suspended {
            return Decision::Nothing;
        }
        let Some((at, missed)) = most_recent(spec, self.decided, now) else {
            return Decision::Nothing;
        };
        if let Some(deadline) = spec.starting_deadline
            && plus(at, deadline) < now
        {
            self.decided = at;
            self.held_back = None;
            return Decision::TooLate { at };
        }
        if active && spec.concurrency == Concurrency::Forbid {
            let first = self.held_back != Some(at);
            self.held_back = Some(at);
            return Decision::HeldBack { at, first };
        }
        self.decided = at;
        self.last_schedule = Some(at);
        self.held_back = None;
        Decision::Run {
            at,
            replace: active,
            missed,
        }
    }

    /// The next trigger to come after `now`, unless suspended (`NEXT RUN`).
    pub(super) fn next_run(&self, spec: &ScheduleSpec, now: Timestamp) -> Option<Timestamp> {
        if self.suspended {
            return None;
        }
        next_after(spec, self.decided.max(now))
    }

    /// When to look again: the next trigger, or just after a held-back trigger's starting
    /// deadline (so its `MissSchedule` is reported then).
    pub(super) fn next_look(&self, spec: &ScheduleSpec, now: Timestamp) -> Option<Timestamp> {
        let next = self.next_run(spec, now)?;
        let expiry = self
            .held_back
            .zip(spec.starting_deadline)
            .map(|(t, d)| plus(plus(t, d), Duration::from_millis(1)));
        Some(expiry.map_or(next, |e| e.min(next)))
    }
}

/// The wall clock as the core knows it: the shell's reading at a loop turn's `now`, and the
/// monotonic time elapsed since for the instants between.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct WallClock {
    anchor: Option<(Time, Timestamp)>,
    /// The last reading (what status computes the next run from).
    last: Option<Timestamp>,
}

/// A reading further than this from what the last one predicts is a jump of the wall clock.
const JUMP: Duration = Duration::from_secs(1);

impl WallClock {
    /// Takes a reading: `wall` at `now`. Returns whether it is the first, or the wall clock
    /// was set (it moved more than a second away from the monotonic clock).
    pub(super) fn set(&mut self, now: Time, wall: Timestamp) -> bool {
        self.last = Some(wall);
        let jumped = match self.at(now) {
            None => true,
            Some(predicted) => {
                let off = wall.duration_since(predicted).unsigned_abs();
                off > JUMP
            }
        };
        if jumped {
            self.anchor = Some((now, wall));
        }
        jumped
    }

    /// The wall-clock time at `now`, once read.
    pub(super) fn at(&self, now: Time) -> Option<Timestamp> {
        let (t0, w0) = self.anchor?;
        Some(if now >= t0 {
            plus(w0, now.duration_since(t0))
        } else {
            minus(w0, t0.duration_since(now))
        })
    }

    /// The monotonic time at which the wall clock will read `wall` (`now` if it already has).
    pub(super) fn instant_of(&self, wall: Timestamp, now: Time) -> Option<Time> {
        let (t0, w0) = self.anchor?;
        let ahead = wall.duration_since(w0);
        let t = if ahead.is_negative() {
            t0.checked_sub(ahead.unsigned_abs()).unwrap_or(t0)
        } else {
            crate::instant::saturating_add(t0, ahead.unsigned_abs())
        };
        Some(t.max(now))
    }
}

/// Whether a run of `pod` is under way: anything of it running, starting, backing off, being
/// stopped, or waiting for its dependencies after a start (what `concurrency` judges).
pub(super) fn run_active(pod: &Pod) -> bool {
    pod.restart_pending
        || pod.awaiting
        || !pod.at_rest()
        || (pod.stage == Stage::Waiting && !pod.held)
}

/// A trigger's time, written in the schedule's zone (`2026-05-01T02:00:00+02:00[Europe/Berlin]`).
fn show(spec: &ScheduleSpec, t: Timestamp) -> String {
    t.to_zoned(spec.time_zone.tz().clone()).to_string()
}

/// Starts a new run of `pod` (a trigger, or `vigil trigger`): as a whole-pod `restart` does,
/// once nothing of it runs — now when it is at rest, else after `replace` stopped it.
pub(super) fn start_run(pod: &mut Pod, trigger: Option<Timestamp>, why: &str, out: &mut Out) {
    let name = pod.spec.name.clone();
    pod.history.starts_next(trigger);
    out.events.record(
        out.now,
        EventType::Normal,
        EventReason::Triggered,
        name,
        why.to_string(),
    );
    if pod.at_rest() && !pod.restart_pending {
        pod.reset_for_restart();
    } else {
        pod.restart_pending = true;
        pod.held = false;
        pod.stop_all(
            StopCause::Request {
                message: MSG_REPLACED.to_string(),
                then_start: false,
            },
            false,
            out,
        );
    }
}

/// The message of a run `concurrency = "Replace"` stopped.
pub(super) const MSG_REPLACED: &str = "replaced by a new scheduled run (concurrency = \"Replace\")";

/// Looks at `pod`'s schedule at wall-clock time `wall` and carries out what it decides;
/// returns whether the pod changed. A pod without a schedule is left alone.
pub(super) fn drive(pod: &mut Pod, wall: Timestamp, out: &mut Out) -> bool {
    let Some(spec) = pod.spec.schedule.clone() else {
        return false;
    };
    let active = run_active(pod);
    let state = pod
        .schedule
        .get_or_insert_with(|| ScheduleState::new(&spec, wall));
    let decision = state.look(&spec, wall, active);
    let name = pod.spec.name.clone();
    match decision {
        Decision::Nothing => false,
        Decision::HeldBack { at, first } => {
            if first {
                out.events.record(
                    out.now,
                    EventType::Normal,
                    EventReason::JobAlreadyActive,
                    name,
                    format!(
                        "Not starting the run scheduled for {}: the previous run is still active and concurrency is Forbid",
                        show(&spec, at)
                    ),
                );
            }
            false
        }
        Decision::TooLate { at } => {
            out.events.record(
                out.now,
                EventType::Warning,
                EventReason::MissSchedule,
                name,
                format!(
                    "Missed scheduled time to start a run: {} (past starting_deadline_seconds)",
                    show(&spec, at)
                ),
            );
            false
        }
        Decision::Run {
            at,
            replace: _,
            missed,
        } => {
            if missed > MAX_MISSED {
                out.events.record(
                    out.now,
                    EventType::Warning,
                    EventReason::TooManyMissedTimes,
                    name.clone(),
                    format!(
                        "too many missed start times (more than {MAX_MISSED}): set or decrease starting_deadline_seconds or check the clock"
                    ),
                );
            }
            let skipped = match missed {
                0 | 1 => String::new(),
                n if n > MAX_MISSED => " (the earlier missed triggers skipped)".to_string(),
                n => format!(" ({} earlier missed triggers skipped)", n - 1),
            };
            let why = format!("Started the run scheduled for {}{skipped}", show(&spec, at));
            start_run(pod, Some(at), &why, out);
            true
        }
    }
}

/// When `pod`'s schedule wants a look (its next trigger, or a held-back trigger's deadline),
/// as a monotonic time.
pub(super) fn wake(pod: &Pod, clock: &WallClock, now: Time) -> Option<Time> {
    let spec = pod.spec.schedule.as_ref()?;
    let wall = clock.at(now)?;
    let state = pod.schedule.as_ref()?;
    let next = state.next_look(spec, wall)?;
    clock.instant_of(next, now)
}

/// What status shows of `pod`'s schedule, at the last wall-clock reading.
pub(super) fn status(pod: &Pod, clock: &WallClock) -> Option<ScheduleStatus> {
    let spec = pod.spec.schedule.as_ref()?;
    let state = pod.schedule.as_ref();
    let wall = clock.last;
    Some(ScheduleStatus {
        cron: spec.cron.as_str().to_string(),
        time_zone: spec.time_zone.name().map(str::to_string),
        concurrency: spec.concurrency,
        suspended: state.map_or(spec.suspend, |s| s.suspended),
        last_schedule: state
            .and_then(|s| s.last_schedule)
            .map(std::time::SystemTime::from),
        next_run: state
            .zip(wall)
            .and_then(|(s, w)| s.next_run(spec, w))
            .map(std::time::SystemTime::from),
        active: run_active(pod),
    })
}
