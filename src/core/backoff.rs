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

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy)]
struct Entry {
    /// The delay the next restart must wait (measured from the finish time).
    delay: Duration,
    /// When the last restart happened: the start of the run now ending.
    #[serde(with = "crate::monotime")]
    last_update: Time,
}

/// Per-container back-off history.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default)]
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

#[cfg(test)]
mod tests {
    use super::*;

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
