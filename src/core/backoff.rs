//! Restart back-off bookkeeping and the formatting of durations and byte sizes in messages.
//!
//! The back-off follows client-go `util/flowcontrol/backoff.go` as the kubelet uses it
//! (`pkg/kubelet/kuberuntime`, `doBackOff`): the first restart of a container is immediate and
//! creates the entry with the initial delay; every later restart doubles it up to the cap; a
//! run that lasted more than `reset_after` (kubelet: 2 × max = 600 s) forgets the entry. The
//! delay counts from the moment the container finished. Pure arithmetic on caller-supplied
//! times; no clock reads.

use std::time::Duration;

use super::Time;
use crate::config::spec::Backoff;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The delay the next restart must wait (measured from the finish time).
    delay: Duration,
    /// When the last restart happened: the start of the run now ending.
    last_update: Time,
}

/// Per-container back-off history.
#[derive(Debug, Clone, Default)]
pub(super) struct BackoffState {
    entry: Option<Entry>,
}

impl BackoffState {
    fn expired(entry: &Entry, spec: &Backoff, finished: Time) -> bool {
        // Strictly more than reset_after, as `hasExpired` in client-go.
        finished.saturating_duration_since(entry.last_update) > spec.reset_after
    }

    /// How long after `finished` the next restart may happen.
    pub(super) fn delay_after(&self, spec: &Backoff, finished: Time) -> Duration {
        match &self.entry {
            None => Duration::ZERO,
            Some(e) if Self::expired(e, spec, finished) => Duration::ZERO,
            Some(e) => e.delay,
        }
    }

    /// Record a restart happening at `now` for a run that finished at `finished`
    /// (client-go `Backoff.Next`).
    pub(super) fn record_restart(&mut self, spec: &Backoff, finished: Time, now: Time) {
        let delay = match &self.entry {
            Some(e) if !Self::expired(e, spec, finished) => e.delay.saturating_mul(2).min(spec.max),
            _ => spec.initial.min(spec.max),
        };
        self.entry = Some(Entry {
            delay,
            last_update: now,
        });
    }

    /// Forget the history (operator start/restart).
    pub(super) fn reset(&mut self) {
        self.entry = None;
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn backoff_first_restart_immediate_then_doubles_to_cap() {
        let spec = Backoff::default();
        let mut b = BackoffState::default();
        let t0 = Time::now();
        let mut t = t0;
        let mut delays = Vec::new();
        for _ in 0..9 {
            let d = b.delay_after(&spec, t);
            delays.push(d.as_secs());
            t += d;
            b.record_restart(&spec, t - d, t);
        }
        assert_eq!(delays, [0, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn backoff_forgiven_only_after_more_than_reset_after() {
        let spec = Backoff::default();
        let mut b = BackoffState::default();
        let t0 = Time::now();
        b.record_restart(&spec, t0, t0);
        // exactly reset_after: not forgiven
        let f = t0 + Duration::from_secs(600);
        assert_eq!(b.delay_after(&spec, f), Duration::from_secs(10));
        let f = t0 + Duration::from_secs(601);
        assert_eq!(b.delay_after(&spec, f), Duration::ZERO);
        b.record_restart(&spec, f, f);
        assert_eq!(b.delay_after(&spec, f), Duration::from_secs(10));
    }
}
