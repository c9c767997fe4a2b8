//! Time for the control surface: monotonic → wall-clock anchoring, RFC 3339 (JSON) and
//! RFC 1123Z (`describe`). kubectl's human durations (`AGE`) are in [`crate::format`].
//!
//! Owns only pure conversions. It must not read the clock itself except in
//! [`WallClock::now`], the one convenience constructor the runtime calls; everything else takes
//! `now` as an argument so renderers are testable on fixed values. Calendar arithmetic,
//! formatting and parsing are jiff's.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How far the wall clock may drift from the anchor before answers take a new one
/// ([`WallClock::refreshed`]): above the time between reading the two clocks, below any
/// step worth showing (times are shown to the millisecond).
pub const ANCHOR_TOLERANCE: Duration = Duration::from_millis(1);

/// Pairs one monotonic instant with the wall-clock time read at the same moment, so core
/// [`Instant`]s can be shown as wall-clock times. The anchor is checked at every answer and
/// replaced only when the wall clock has moved away from it ([`WallClock::refreshed`]): a
/// wall-clock step shifts what is shown, never the core's timers.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    pub mono: Instant,
    pub wall: SystemTime,
}

impl WallClock {
    pub fn new(mono: Instant, wall: SystemTime) -> WallClock {
        WallClock { mono, wall }
    }

    /// Anchors at the current time (reads both clocks).
    pub fn now() -> WallClock {
        WallClock {
            mono: Instant::now(),
            wall: SystemTime::now(),
        }
    }

    /// The wall-clock time of monotonic instant `t`.
    pub fn to_system(&self, t: Instant) -> SystemTime {
        if t >= self.mono {
            self.wall + (t - self.mono)
        } else {
            let back = self.mono - t;
            self.wall.checked_sub(back).unwrap_or(UNIX_EPOCH)
        }
    }

    /// The anchor to show times with from now on, given a `fresh` reading of both clocks:
    /// this one while the wall clock still agrees with it to within [`ANCHOR_TOLERANCE`],
    /// else `fresh` (the wall clock was stepped: NTP, a resumed VM, `date -s`; steps smaller
    /// than the tolerance add up until they pass it). The two clocks are read one after the
    /// other, so each reading is off by the time between the reads: taking every reading
    /// as the anchor showed one instant (a container's `started_at`) a millisecond apart in
    /// two answers now and then, which a client comparing answers takes for a new run.
    /// NTP's slewing does not move the offset: it adjusts the monotonic clock alike.
    pub fn refreshed(self, fresh: WallClock) -> WallClock {
        let predicted = self.to_system(fresh.mono);
        let gap = match fresh.wall.duration_since(predicted) {
            Ok(ahead) => ahead,
            Err(behind) => behind.duration(),
        };
        if gap > ANCHOR_TOLERANCE { fresh } else { self }
    }

    /// `t` as RFC 3339 UTC with milliseconds: `2026-11-22T00:48:17.000Z`.
    pub fn rfc3339(&self, t: Instant) -> String {
        rfc3339(self.to_system(t))
    }
}

/// `t` as a jiff timestamp (times jiff cannot hold, beyond the years -9999 to 9999, are
/// clamped to its range: no wall clock reaches them).
fn timestamp(t: SystemTime) -> jiff::Timestamp {
    jiff::Timestamp::try_from(t).unwrap_or_else(|_| {
        if t >= UNIX_EPOCH {
            jiff::Timestamp::MAX
        } else {
            jiff::Timestamp::MIN
        }
    })
}

/// RFC 3339 UTC with milliseconds: `2026-11-22T00:48:17.250Z`. Sub-second precision lets a
/// script measure back-off delays and probe timing from status alone.
pub fn rfc3339(t: SystemTime) -> String {
    let mut out = String::with_capacity(24);
    rfc3339_to(t, &mut out);
    out
}

/// [`rfc3339`] appended to `out` (a full status carries several per container: one buffer).
pub fn rfc3339_to(t: SystemTime, out: &mut String) {
    // Truncated to the millisecond first, so the printer's fixed precision never rounds up.
    let ts = timestamp(t);
    let millis = ts.as_millisecond();
    let ts = jiff::Timestamp::from_millisecond(millis).unwrap_or(ts);
    let printer = jiff::fmt::temporal::DateTimePrinter::new().precision(Some(3));
    // Writing to a String cannot fail.
    let _ = printer.print_timestamp(&ts, out);
}

/// RFC 1123 with numeric zone, as `kubectl describe` prints times: `Sun, 22 Nov 2026 00:48:17 +0000`.
pub fn rfc1123z(t: SystemTime) -> String {
    timestamp(t)
        .strftime("%a, %d %b %Y %H:%M:%S +0000")
        .to_string()
}

/// Parses RFC 3339 (what vigil emits, and any offset or fraction): jiff's parser, which
/// refuses impossible dates (`2026-02-31`) and a time without an offset. `None` for anything
/// else.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some(SystemTime::from(ts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn rfc3339_formats_utc_with_z() {
        assert_eq!(rfc3339(at(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(at(1_795_308_497)), "2026-11-22T00:48:17.000Z");
        // Leap days.
        assert_eq!(rfc3339(at(1_709_251_199)), "2024-02-29T23:59:59.000Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00.000Z");
        // Before the epoch.
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_millis(500)),
            "1969-12-31T23:59:59.500Z"
        );
    }

    #[test]
    fn rfc3339_truncates_to_the_millisecond_never_rounding_into_the_next_second() {
        let t = at(1_795_308_497) + Duration::from_nanos(999_999_999);
        assert_eq!(rfc3339(t), "2026-11-22T00:48:17.999Z");
        let mut out = String::from("at ");
        rfc3339_to(at(0) + Duration::from_millis(250), &mut out);
        assert_eq!(out, "at 1970-01-01T00:00:00.250Z");
    }

    #[test]
    fn rfc3339_parses_what_it_prints_and_offsets() {
        let t = at(1_795_000_123);
        assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some(UNIX_EPOCH));
        assert_eq!(
            parse_rfc3339("1970-01-01T00:00:01.5Z"),
            Some(UNIX_EPOCH + Duration::from_millis(1500))
        );
        assert_eq!(parse_rfc3339("1970-01-01 00:00:00"), None);
        assert_eq!(parse_rfc3339("1970-13-01T00:00:00.000Z"), None);
        assert_eq!(parse_rfc3339("garbage"), None);
    }

    #[test]
    fn rfc3339_refuses_a_day_its_month_does_not_have() {
        assert_eq!(parse_rfc3339("2026-02-31T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-02-29T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2026-04-31T00:00:00Z"), None);
        assert!(parse_rfc3339("2028-02-29T00:00:00Z").is_some());
    }

    #[test]
    fn rfc1123z_has_weekday_and_month_names() {
        assert_eq!(rfc1123z(at(0)), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(
            rfc1123z(at(1_795_308_497)),
            "Sun, 22 Nov 2026 00:48:17 +0000"
        );
    }

    #[test]
    fn the_anchor_is_kept_through_the_gap_between_clock_reads_and_replaced_after_a_step() {
        let mono = Instant::now();
        // 12:00:00.0004: an instant 0.6 ms before a millisecond's end.
        let anchor = WallClock::new(mono, at(43_200) + Duration::from_micros(400));
        let started = mono;
        let later = mono + Duration::from_secs(30);
        // A reading 30 s on whose wall clock was read 700 us after the monotonic one: with it
        // as the anchor, the same instant would show as .001 instead of .000.
        let read_apart =
            WallClock::new(later, anchor.to_system(later) + Duration::from_micros(700));
        assert_eq!(read_apart.rfc3339(started), "1970-01-01T12:00:00.001Z");
        let kept = anchor.refreshed(read_apart);
        assert_eq!(kept.rfc3339(started), "1970-01-01T12:00:00.000Z");
        assert_eq!(kept.to_system(started), anchor.to_system(started));
        // Stepped 2 s back, or 5 ms forward: the fresh reading is taken.
        for step in [-2_000_000i64, 5_000] {
            let wall = if step < 0 {
                anchor.to_system(later) - Duration::from_micros(step.unsigned_abs())
            } else {
                anchor.to_system(later) + Duration::from_micros(step as u64)
            };
            let stepped = WallClock::new(later, wall);
            let now = anchor.refreshed(stepped);
            assert_eq!(now.to_system(later), wall, "step {step} us");
        }
        // Steps under the tolerance add up until they pass it.
        let mut clock = anchor;
        let mut wall = anchor.to_system(later);
        for _ in 0..3 {
            wall += Duration::from_micros(400);
            clock = clock.refreshed(WallClock::new(later, wall));
        }
        assert_eq!(clock.to_system(later), wall);
    }

    #[test]
    fn wall_clock_maps_instants_before_and_after_anchor() {
        let mono = Instant::now();
        let clock = WallClock::new(mono + Duration::from_secs(100), at(1000));
        assert_eq!(clock.to_system(mono), at(900));
        assert_eq!(clock.to_system(mono + Duration::from_secs(130)), at(1030));
        assert_eq!(clock.rfc3339(mono), "1970-01-01T00:15:00.000Z");
    }
}
