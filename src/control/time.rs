//! Time for the control surface: monotonic → wall-clock anchoring, RFC 3339 (JSON) and
//! RFC 1123Z (`describe`). kubectl's human durations (`AGE`) are in [`crate::format`].
//!
//! Owns only pure conversions. It must not read the clock itself except in
//! [`WallClock::now`], the one convenience constructor the runtime calls; everything else takes
//! `now` as an argument so renderers are testable on fixed values. Calendar arithmetic is
//! Howard Hinnant's `civil_from_days` / `days_from_civil` (proleptic Gregorian, UTC only).

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

/// Seconds since the Unix epoch, negative before it (sub-second part truncated toward -∞).
fn unix_seconds(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => {
            let d = e.duration();
            let s = d.as_secs() as i64;
            if d.subsec_nanos() > 0 { -s - 1 } else { -s }
        }
    }
}

/// (year, month 1..=12, day 1..=31) of the day `z` days after 1970-01-01.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March-based
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a civil date (inverse of [`civil_from_days`]).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: i64,
    minute: i64,
    second: i64,
    /// 0 = Sunday.
    weekday: usize,
}

fn civil(t: SystemTime) -> Civil {
    let secs = unix_seconds(t);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: rem / 3600,
        minute: rem % 3600 / 60,
        second: rem % 60,
        // 1970-01-01 was a Thursday.
        weekday: (days + 4).rem_euclid(7) as usize,
    }
}

/// RFC 3339 UTC with milliseconds: `2026-11-22T00:48:17.250Z`. Sub-second precision lets a
/// script measure back-off delays and probe timing from status alone.
pub fn rfc3339(t: SystemTime) -> String {
    let mut buf = [0u8; RFC3339_LEN];
    match rfc3339_into(t, &mut buf) {
        Some(s) => s.to_string(),
        None => rfc3339_general(t),
    }
}

/// The milliseconds of `t` past its second (0 before 1970: the text shows whole seconds then).
fn subsec_millis(t: SystemTime) -> u32 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_millis())
        .unwrap_or(0)
}

/// Bytes of [`rfc3339`]'s text for the years 0 to 9999.
pub const RFC3339_LEN: usize = 24;

/// [`rfc3339`] written into `buf`, without allocating or going through `fmt` (a full status
/// carries several times per container: formatting them was ~40 % of its cost). `None` for a
/// year outside 0 to 9999, which [`rfc3339`] formats the general way.
pub fn rfc3339_into(t: SystemTime, buf: &mut [u8; RFC3339_LEN]) -> Option<&str> {
    let c = civil(t);
    let year = u32::try_from(c.year).ok().filter(|y| *y <= 9999)?;
    let millis = subsec_millis(t);
    fn digits(out: &mut [u8], mut v: u32) {
        for b in out.iter_mut().rev() {
            *b = b'0' + (v % 10) as u8;
            v /= 10;
        }
    }
    // Each field is in range by construction (civil() and subsec_millis()).
    let fields: [(usize, usize, u32); 7] = [
        (0, 4, year),
        (5, 2, c.month),
        (8, 2, c.day),
        (11, 2, c.hour as u32),
        (14, 2, c.minute as u32),
        (17, 2, c.second as u32),
        (20, 3, millis),
    ];
    for (at, len, v) in fields {
        digits(&mut buf[at..at + len], v);
    }
    for (at, sep) in [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ] {
        buf[at] = sep;
    }
    std::str::from_utf8(buf).ok()
}

/// [`rfc3339`] through `fmt`, for any year.
pub fn rfc3339_general(t: SystemTime) -> String {
    let c = civil(t);
    let millis = subsec_millis(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// RFC 1123 with numeric zone, as `kubectl describe` prints times: `Sun, 22 Nov 2026 00:48:17 +0000`.
pub fn rfc1123z(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let c = civil(t);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} +0000",
        DAYS[c.weekday],
        c.day,
        MONTHS[(c.month - 1) as usize],
        c.year,
        c.hour,
        c.minute,
        c.second
    )
}

/// Parses the RFC 3339 forms vigil emits and common variants: `YYYY-MM-DDTHH:MM:SS`, optional
/// fraction, then `Z` or `±HH:MM`. `None` for anything else.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = &s[start..i.min(start + 9)];
        let padded = format!("{frac:0<9}");
        nanos = padded.parse().ok()?;
    }
    let offset: i64 = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let h = num(i + 1..i + 3)?;
            let m = num(i + 4..i + 6)?;
            let off = h * 3600 + m * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month as u32, day as u32);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset;
    let base = if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))?
    };
    Some(base + Duration::from_nanos(u64::from(nanos)))
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
        // 2026-11-22T00:48:17Z
        let t = days_from_civil(2026, 11, 22) * 86_400 + 48 * 60 + 17;
        assert_eq!(rfc3339(at(t as u64)), "2026-11-22T00:48:17.000Z");
        // Leap day.
        let t = days_from_civil(2024, 2, 29) * 86_400 + 23 * 3600 + 59 * 60 + 59;
        assert_eq!(rfc3339(at(t as u64)), "2024-02-29T23:59:59.000Z");
        assert_eq!(rfc3339(at(951_782_400)), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn rfc3339_without_fmt_is_the_general_text_for_every_year_it_covers() {
        // Days across 0000..=9999 (pre-1970 included), with varied times of day and
        // milliseconds; then the edges of the range.
        let first = days_from_civil(0, 1, 1);
        let last = days_from_civil(9999, 12, 31);
        let mut n = 0u64;
        for days in (first..=last).step_by(997).chain([first, -1, 0, last]) {
            n += 1;
            let secs = days * 86_400 + (n * 7_919 % 86_400) as i64;
            let nanos = (n * 104_729 % 1_000_000_000) as u32;
            let t = if secs >= 0 {
                UNIX_EPOCH + Duration::new(secs as u64, nanos)
            } else {
                UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
                    + Duration::from_nanos(nanos.into())
            };
            let mut buf = [0u8; RFC3339_LEN];
            let fast = rfc3339_into(t, &mut buf).map(str::to_string);
            assert_eq!(
                fast.as_deref(),
                Some(rfc3339_general(t).as_str()),
                "{secs}.{nanos}"
            );
        }
        // Outside 0..=9999 only the general path formats it.
        let late = UNIX_EPOCH + Duration::from_secs((last + 1) as u64 * 86_400);
        assert_eq!(rfc3339_into(late, &mut [0u8; RFC3339_LEN]), None);
        assert_eq!(rfc3339(late), "10000-01-01T00:00:00.000Z");
    }

    #[test]
    fn civil_round_trips_over_centuries() {
        for days in (-800_000..800_000).step_by(37) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
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
    fn rfc1123z_has_weekday_and_month_names() {
        assert_eq!(rfc1123z(at(0)), "Thu, 01 Jan 1970 00:00:00 +0000");
        let t = days_from_civil(2026, 11, 22) * 86_400 + 48 * 60 + 17;
        assert_eq!(rfc1123z(at(t as u64)), "Sun, 22 Nov 2026 00:48:17 +0000");
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
