//! Durations, sizes and untrusted text for people: every human-readable figure vigil prints is
//! formatted here, so `AGE`, back-off messages, memory figures and limits read the same
//! everywhere.
//!
//! Pure functions of their arguments (`now` included); no I/O, no clock — so the core uses it
//! too (`go_duration` and `quantity` in kubelet's messages). Where a format comes from
//! Kubernetes or Go the function says which, so the output matches what operators know.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration): `45s`, `3m12s` under
/// ten minutes, `42m` under three hours, `5h30m` under eight hours, `30h` under two days, `3d4h`
/// under eight days, `300d` under two years, then `2y30d` / `9y`.
pub fn human_duration(d: Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{}h", hours / 24, h)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{}d", hours / 24 / 365, dy)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of `t` at `now` in kubectl style. Like kubectl, a time slightly in the future (clock
/// skew) reads `0s`, and more than a second ahead reads `<invalid>`.
pub fn age(now: SystemTime, t: SystemTime) -> String {
    match now.duration_since(t) {
        Ok(d) => human_duration(d),
        Err(e) if e.duration() < Duration::from_secs(2) => "0s".to_string(),
        Err(_) => "<invalid>".to_string(),
    }
}

/// The `Age` cell of an event: `4m52s`, or `4m52s (x79 over 28m)` when it repeated.
pub fn event_age(now: SystemTime, first: SystemTime, last: SystemTime, count: u64) -> String {
    if count > 1 {
        format!("{} (x{} over {})", age(now, last), count, age(now, first))
    } else {
        age(now, last)
    }
}

/// Formats a duration like Go's `time.Duration.String()`: `10s`, `1m20s`, `5m0s`, `1h0m0s`,
/// `100ms`, `1.5s`, `0s` — the form kubelet messages use.
pub fn go_duration(d: Duration) -> String {
    const US: u128 = 1_000;
    const MS: u128 = 1_000_000;
    const S: u128 = 1_000_000_000;
    const M: u128 = 60 * S;
    const H: u128 = 60 * M;
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_string();
    }
    if ns < US {
        return format!("{ns}ns");
    }
    if ns < MS {
        return format!("{}µs", decimal(ns, US, 3));
    }
    if ns < S {
        return format!("{}ms", decimal(ns, MS, 6));
    }
    let mut out = String::new();
    let hours = ns / H;
    let minutes = (ns % H) / M;
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{}s", decimal(ns % M, S, 9)));
    out
}

/// `value / unit` with the fraction written out and trailing zeros trimmed.
fn decimal(value: u128, unit: u128, digits: usize) -> String {
    let whole = value / unit;
    let frac = value % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let frac = format!("{frac:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// Formats bytes like a Kubernetes quantity: `20Mi`, `1Gi`, `512Ki`; sizes that are not a
/// whole number of units get one decimal (`19.5Mi`); small sizes are plain bytes.
pub fn quantity(bytes: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, unit) in UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    for (suffix, unit) in UNITS {
        if bytes >= unit {
            return format!("{:.1}{suffix}", bytes as f64 / unit as f64);
        }
    }
    bytes.to_string()
}

/// Bytes the way `kubectl top` shows memory: `512Ki`, `12Mi`, `1.5Gi` (whole units below 1 Gi,
/// one decimal below 10 Gi).
pub fn human_bytes(b: u64) -> String {
    const KI: u64 = 1024;
    const MI: u64 = KI * 1024;
    const GI: u64 = MI * 1024;
    if b >= GI {
        let g = b as f64 / GI as f64;
        if g < 10.0 {
            format!("{:.1}Gi", g)
        } else {
            format!("{}Gi", b / GI)
        }
    } else if b >= MI {
        format!("{}Mi", b / MI)
    } else if b >= KI {
        format!("{}Ki", b / KI)
    } else {
        format!("{b}")
    }
}

/// Accumulated CPU time: `0.42s`, `12.3s`, then kubectl-style `5m12s`.
pub fn human_cpu(usec: u64) -> String {
    let secs = usec as f64 / 1e6;
    if secs < 10.0 {
        format!("{secs:.2}s")
    } else if secs < 120.0 {
        format!("{secs:.1}s")
    } else {
        human_duration(Duration::from_micros(usec))
    }
}

/// A duration given in (possibly fractional) seconds, as `kubectl describe` shows probe
/// timings: `5s`, `500ms`, `1.5s`.
pub fn seconds(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else if s < 1.0 {
        format!("{}ms", (s * 1000.0).round() as u64)
    } else {
        format!("{s}s")
    }
}

/// Text from outside (container output, messages, names) made safe for a terminal: C0 and C1
/// control characters and DEL become visible escapes (`\x1b`, `\u{9b}`), so output cannot move
/// the cursor, retitle the window or hide what came before; so do the invisible bidirectional
/// formatting characters ([`is_bidi_control`]), so output cannot reorder what a line appears
/// to say (CVE-2021-42574, "Trojan Source"). `keep` lists the controls passed through
/// (`"\n\t"` for log output; nothing for a table cell).
pub fn escape_controls<'a>(text: &'a str, keep: &str) -> Cow<'a, str> {
    let needs = |c: char| (c.is_control() || is_bidi_control(c)) && !keep.contains(c);
    if !text.chars().any(needs) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs(c) {
            out.push(c);
        } else if (c as u32) < 0x80 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    Cow::Owned(out)
}

/// The invisible characters that change the display order of text around them (Unicode
/// UAX #9, "Explicit Directional Formatting Characters" and "Implicit Directional Marks"):
/// LRE, RLE, PDF, LRO, RLO (U+202A–U+202E), LRI, RLI, FSI, PDI (U+2066–U+2069), LRM, RLM
/// (U+200E, U+200F) and the Arabic letter mark (U+061C).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

/// One table cell or `describe` value: newlines become spaces (a cell is one line), every
/// other control character is escaped.
pub fn cell(text: &str) -> String {
    escape_controls(&text.replace('\n', " "), "").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn human_duration_follows_kubectl_rules() {
        let s = Duration::from_secs;
        let cases = [
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (312, "5m12s"),
            (599, "9m59s"),
            (600, "10m"),
            (42 * 60 + 30, "42m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (8 * 3600 + 59, "8h"),
            (47 * 3600, "47h"),
            (48 * 3600, "2d"),
            (3 * 86_400 + 4 * 3600, "3d4h"),
            (8 * 86_400, "8d"),
            (400 * 86_400, "400d"),
            (2 * 365 * 86_400 + 30 * 86_400, "2y30d"),
            (9 * 365 * 86_400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(s(secs)), want, "{secs}s");
        }
    }

    #[test]
    fn age_tolerates_small_skew_and_flags_future() {
        assert_eq!(age(at(100), at(58)), "42s");
        assert_eq!(age(at(100), at(101)), "0s");
        assert_eq!(age(at(100), at(110)), "<invalid>");
    }

    #[test]
    fn event_age_shows_repeats_like_describe() {
        let now = at(10_000);
        assert_eq!(
            event_age(now, at(10_000 - 28 * 60), at(10_000 - 292), 79),
            "4m52s (x79 over 28m)"
        );
        assert_eq!(event_age(now, at(9_990), at(9_990), 1), "10s");
    }

    #[test]
    fn go_duration_matches_go_formatting() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(10), "10s"),
            (Duration::from_secs(40), "40s"),
            (Duration::from_secs(80), "1m20s"),
            (Duration::from_secs(300), "5m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(3723), "1h2m3s"),
            (Duration::from_millis(100), "100ms"),
            (Duration::from_millis(50), "50ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::from_micros(5), "5µs"),
            (Duration::from_nanos(7), "7ns"),
            (Duration::from_millis(61_250), "1m1.25s"),
        ];
        for (d, want) in cases {
            assert_eq!(go_duration(d), want, "{d:?}");
        }
    }

    #[test]
    fn quantity_uses_binary_suffixes() {
        assert_eq!(quantity(20 * 1024 * 1024), "20Mi");
        assert_eq!(quantity(1 << 30), "1Gi");
        assert_eq!(quantity(512 * 1024), "512Ki");
        assert_eq!(quantity(20 * 1024 * 1024 - 512 * 1024), "19968Ki");
        assert_eq!(quantity(20 * 1024 * 1024 + 1), "20.0Mi");
        assert_eq!(quantity(100), "100");
    }

    #[test]
    fn human_figures_are_compact() {
        assert_eq!(human_bytes(512), "512");
        assert_eq!(human_bytes(512 * 1024), "512Ki");
        assert_eq!(human_bytes(20 * 1024 * 1024), "20Mi");
        assert_eq!(human_bytes(3 * 1024 * 1024 * 1024 / 2), "1.5Gi");
        assert_eq!(human_cpu(1_234_567), "1.23s");
        assert_eq!(human_cpu(42_000_000), "42.0s");
        assert_eq!(human_cpu(312_000_000), "5m12s");
        assert_eq!(seconds(0.5), "500ms");
        assert_eq!(seconds(1.5), "1.5s");
        assert_eq!(seconds(10.0), "10s");
    }

    #[test]
    fn terminal_controls_are_escaped_and_plain_text_is_untouched() {
        assert!(matches!(
            escape_controls("plain text", ""),
            Cow::Borrowed(_)
        ));
        assert_eq!(
            escape_controls("a\x1b]0;pwned\x07b\r\n\tc\u{9b}2J\x7f", "\n\t"),
            "a\\x1b]0;pwned\\x07b\\x0d\n\tc\\u{9b}2J\\x7f"
        );
        assert_eq!(cell("two\nlines\tand tab"), "two lines\\x09and tab");
    }

    #[test]
    fn bidirectional_overrides_and_marks_are_escaped_like_controls() {
        // "Trojan Source": RLO makes `exit 0 # ok` read backwards on a terminal.
        assert_eq!(
            escape_controls("ok\u{202e}0 tixe\u{202c} done\n", "\n\t"),
            "ok\\u{202e}0 tixe\\u{202c} done\n"
        );
        for c in [
            '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}', '\u{202e}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200e}', '\u{200f}', '\u{61c}',
        ] {
            let text = format!("a{c}b");
            assert_eq!(
                escape_controls(&text, "\n"),
                format!("a\\u{{{:x}}}b", c as u32),
                "U+{:04X}",
                c as u32
            );
        }
        // Letters of right-to-left scripts, and joiners in emoji, are text: left alone.
        for text in ["שלום", "مرحبا", "👩\u{200d}💻"] {
            assert!(
                matches!(escape_controls(text, ""), Cow::Borrowed(_)),
                "{text}"
            );
        }
    }
}
