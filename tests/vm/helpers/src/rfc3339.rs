//! RFC 3339 timestamps (as vigil's JSON writes them) to seconds since the Unix epoch, so that
//! shell scripts can subtract them with awk. Parsing only; no time zones database needed.

/// `2024-01-02T03:04:05.25Z` or `…+02:00` → seconds since 1970-01-01T00:00:00Z.
pub fn to_epoch(ts: &str) -> Option<f64> {
    let b = ts.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = ts.get(from..from + len)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let (hour, min, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        frac = format!("0.{}", &ts[start..i]).parse().ok()?;
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let m = num(i + 1, 2)? * 60 + num(i + 4, 2)?;
            if *sign == b'+' { m * 60 } else { -m * 60 }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + min * 60 + sec - offset;
    Some(secs as f64 + frac)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_and_known_dates() {
        assert_eq!(to_epoch("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(to_epoch("2000-03-01T00:00:00Z"), Some(951_868_800.0));
        assert_eq!(to_epoch("2024-02-29T12:00:00Z"), Some(1_709_208_000.0));
    }

    #[test]
    fn fractions_and_offsets() {
        assert_eq!(to_epoch("1970-01-01T00:00:01.250Z"), Some(1.25));
        assert_eq!(to_epoch("1970-01-01T01:00:00+01:00"), Some(0.0));
        assert_eq!(to_epoch("1969-12-31T23:00:00-01:00"), Some(0.0));
    }

    #[test]
    fn malformed_timestamps_are_rejected() {
        for bad in [
            "",
            "1970-01-01",
            "1970-01-01T00:00:00",
            "1970-13-01T00:00:00Z",
            "1970-01-01T00:00:00.Z",
            "x970-01-01T00:00:00Z",
        ] {
            assert_eq!(to_epoch(bad), None, "{bad}");
        }
    }
}
