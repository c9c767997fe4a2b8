//! Counters of probe results and a histogram of probe durations, per (container, probe).
//!
//! Owns the figures behind `vigil_probe_results_total` and `vigil_probe_duration_seconds`.
//! Recording one result is a map lookup and a few additions: fixed buckets, no allocation
//! (except the first result of a (container, probe), which adds its entry). The runtime records
//! every probe result it hands to the core; entries of containers that are gone are dropped
//! with [`ProbeStats::retain`].
//!
//! Must not: decide anything about a probe (the core does) or read the clock.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::spec::ProbeKind;
use crate::core::ContainerKey;

/// Upper bounds of the duration buckets, in seconds (the kubelet's probe timeouts are whole
/// seconds, 1 s by default; exec probes of a few milliseconds are common).
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// What a probe attempt came to, as counted (kubelet `prober_probe_total` counts a warning as
/// a success too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure,
}

/// One (container, probe)'s figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeCounters {
    pub successes: u64,
    pub failures: u64,
    /// Attempts that took at most `BUCKETS[i]` (not cumulative; the writer sums).
    pub buckets: [u64; BUCKETS.len()],
    pub count: u64,
    pub sum_seconds: f64,
}

/// Every (container, probe)'s figures.
#[derive(Debug, Default)]
pub struct ProbeStats {
    by: HashMap<(ContainerKey, ProbeKind), ProbeCounters>,
}

impl ProbeStats {
    /// Counts one finished attempt.
    pub fn record(
        &mut self,
        key: ContainerKey,
        kind: ProbeKind,
        result: ProbeResult,
        took: Duration,
    ) {
        let c = self.by.entry((key, kind)).or_default();
        match result {
            ProbeResult::Success => c.successes += 1,
            ProbeResult::Failure => c.failures += 1,
        }
        let secs = took.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| secs <= b) {
            c.buckets[i] += 1;
        }
        c.count += 1;
        c.sum_seconds += secs;
    }

    pub fn get(&self, key: ContainerKey, kind: ProbeKind) -> Option<&ProbeCounters> {
        self.by.get(&(key, kind))
    }

    /// Keeps the entries of containers `live` says still exist.
    pub fn retain(&mut self, live: impl Fn(ContainerKey) -> bool) {
        self.by.retain(|(k, _), _| live(*k));
    }

    /// Every (container, probe)'s figures (for the handoff of `vigil upgrade`).
    pub fn entries(&self) -> impl Iterator<Item = (ContainerKey, ProbeKind, &ProbeCounters)> {
        self.by.iter().map(|((k, p), c)| (*k, *p, c))
    }

    /// Puts back figures handed over by an earlier instance (`vigil upgrade`).
    pub fn restore(&mut self, key: ContainerKey, kind: ProbeKind, counters: ProbeCounters) {
        self.by.insert((key, kind), counters);
    }

    pub fn len(&self) -> usize {
        self.by.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_the_first_bucket_that_holds_them_and_beyond_the_last_only_in_count() {
        let mut s = ProbeStats::default();
        let k = ContainerKey(1);
        for ms in [1, 5, 6, 1000, 60_000] {
            s.record(
                k,
                ProbeKind::Liveness,
                ProbeResult::Success,
                Duration::from_millis(ms),
            );
        }
        s.record(k, ProbeKind::Liveness, ProbeResult::Failure, Duration::ZERO);
        let c = s.get(k, ProbeKind::Liveness).unwrap();
        assert_eq!(c.buckets[0], 3, "1 ms, 5 ms (bounds are inclusive) and 0");
        assert_eq!(c.buckets[1], 1, "6 ms");
        assert_eq!(c.buckets[7], 1, "1 s");
        assert_eq!(c.buckets.iter().sum::<u64>(), 5, "60 s is only in +Inf");
        assert_eq!((c.count, c.successes, c.failures), (6, 5, 1));
        assert!((c.sum_seconds - 61.012).abs() < 1e-9);
        assert!(s.get(k, ProbeKind::Readiness).is_none());
    }

    #[test]
    fn retain_drops_the_figures_of_containers_that_are_gone() {
        let mut s = ProbeStats::default();
        for k in 1..=3 {
            s.record(
                ContainerKey(k),
                ProbeKind::Startup,
                ProbeResult::Success,
                Duration::ZERO,
            );
        }
        s.retain(|k| k != ContainerKey(2));
        assert_eq!(s.len(), 2);
        assert!(s.get(ContainerKey(2), ProbeKind::Startup).is_none());
    }
}
