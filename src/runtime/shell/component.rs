//! What every owner of descriptors on the loop is to the router: a [`Component`], in the
//! manner of rust-vmm event-manager's `MutEventSubscriber` (`init` is the component's
//! constructor, which registers its sources with the shared registry; `process` takes a ready
//! event for one of its tokens). Beside its events a component tells the router when it next
//! needs a turn ([`Component::deadline`]: the router's poll timeout is the earliest of them
//! and the core's), and does its share of the turn's chores ([`Component::chore`]).
//!
//! Owns: the trait, and [`Link`], what a component reaches of the rest while it works (the
//! core, to which every input goes at once, in the order things happened; the config). Must
//! not: allocate, or add a dynamic call per event beyond the one `process` call.

use std::time::{Duration, Instant};

use mio::event::Event;

use super::notifier::Notifier;
use super::notify::NotifySockets;
use super::turnwatch::Chore;
use crate::config::spec::{Config, ProbeKind};
use crate::core::{Input, ProbeOutcome, Supervisor};
use crate::metrics::probes::{ProbeResult, ProbeStats};

/// An owner of descriptors on the loop (its tokens: [`super::tokens::Owner`]).
pub(super) trait Component {
    /// A ready event for a token this component handed out, at the turn's `now`. (A
    /// component with only a deadline hands out no token.)
    fn process(&mut self, event: &Event, now: Instant, link: &mut Link<'_>) {
        let _ = (now, link);
        log::debug!("event for a component without tokens: {:?}", event.token());
    }

    /// When this component next needs a turn without an event: its earliest deadline, or
    /// `now` while it has bounded work left over from this turn. `None`: only events.
    fn deadline(&self, now: Instant) -> Option<Instant>;

    /// Its bounded share of `chore`, a part of the turn after the events (the router runs
    /// them in [`Chore::TURN`] order). Nothing by default.
    fn chore(&mut self, chore: Chore, now: Instant, link: &mut Link<'_>) {
        let _ = (chore, now, link);
    }

    /// Its clean-up when vigil stops, after the loop's last turn: what it started killed,
    /// what it made removed, what it holds written out. Nothing by default (its descriptors
    /// close when it is dropped).
    fn finish(&mut self, link: &mut Link<'_>) {
        let _ = link;
    }
}

/// What a component reaches of the rest while it handles an event, carries out an action or
/// cleans up.
pub(super) struct Link<'a> {
    pub core: &'a mut Supervisor,
    pub notifier: &'a mut Notifier,
    /// The containers' sd_notify sockets: the runs make a run's at its spawn and close it at
    /// its end.
    pub notify: &'a mut NotifySockets,
    pub probe_stats: &'a mut ProbeStats,
    pub config: &'a Config,
}

impl Link<'_> {
    /// Hands `input` to the core (counted for the metrics when it is a probe result, hooks
    /// are not probes; the status line is due again).
    pub fn feed(&mut self, now: Instant, input: Input) {
        if let Input::ProbeResult {
            key,
            kind,
            outcome,
            duration,
            ..
        } = &input
            && *kind != ProbeKind::Hook
        {
            let result = match outcome {
                ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => ProbeResult::Success,
                ProbeOutcome::Failure(_) => ProbeResult::Failure,
            };
            self.probe_stats.record(*key, *kind, result, *duration);
        }
        self.notifier.changed();
        self.core.handle(now, input);
    }
}

/// The earliest of `deadlines`.
pub(super) fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

/// The poll timeout for a deadline `remaining` away. epoll_wait lets the kernel fire up to
/// 0.1 % of the timeout late (timer slack: 1 ms on a 1 s sleep, 10 ms on a 10 s probe period,
/// and mio has already rounded up to the millisecond), so a long sleep ends early by twice
/// that; the next turn finds nothing due and sleeps the few milliseconds left, with a slack of
/// microseconds. Short timeouts are left alone.
pub(super) fn wake_early_for_slack(remaining: Duration) -> Duration {
    if remaining < Duration::from_millis(50) {
        remaining
    } else {
        remaining - remaining / 500
    }
}

// ---- the components whose events and deadlines need nothing of the rest --------------------

impl Component for super::control::Control {
    fn process(&mut self, event: &Event, now: Instant, _: &mut Link<'_>) {
        self.on_event(event, now);
    }

    fn deadline(&self, now: Instant) -> Option<Instant> {
        earliest([self.next_deadline(), self.has_backlog().then_some(now)])
    }
}

/// vigil's own stderr: its log lines queued while stderr was full (`runtime::stderr_log`, which
/// owns the descriptor for vigil's lifetime).
pub(super) struct StderrLog;

impl Component for StderrLog {
    fn process(&mut self, _: &Event, _: Instant, _: &mut Link<'_>) {
        crate::runtime::stderr_log::flush();
    }

    fn deadline(&self, _: Instant) -> Option<Instant> {
        None
    }

    /// With the state file: vigil's log lines its stderr did not take since the last turn,
    /// said once.
    fn chore(&mut self, chore: Chore, _: Instant, _: &mut Link<'_>) {
        if chore != Chore::StateFile {
            return;
        }
        let dropped = crate::runtime::stderr_log::take_dropped_report();
        if dropped > 0 {
            log::warn!(
                "{dropped} lines of vigil's log dropped: its stderr was not read (at most {} \
                 KiB are kept)",
                crate::runtime::stderr_log::QUEUE_BYTES / 1024
            );
        }
    }
}

/// The sd_notify notifier: its watchdog and status deadlines (its socket is not polled).
impl Component for super::notifier::Notifier {
    fn deadline(&self, _: Instant) -> Option<Instant> {
        Notifier::deadline(self)
    }
}

/// The trim after a burst of requests.
impl Component for crate::runtime::trim::IdleTrim {
    fn deadline(&self, _: Instant) -> Option<Instant> {
        crate::runtime::trim::IdleTrim::deadline(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_poll_timeouts_end_early_enough_to_absorb_the_kernels_timer_slack() {
        for us in [
            50_000,
            100_000,
            999_700,
            1_000_000,
            10_000_000,
            10_000_400,
            3_600_000_000,
        ] {
            let d = Duration::from_micros(us);
            let t = wake_early_for_slack(d);
            // mio rounds up to the next millisecond, then the kernel may add 0.1 %.
            let rounded = Duration::from_millis(t.as_nanos().div_ceil(1_000_000) as u64);
            let latest = rounded + rounded / 1000;
            assert!(
                latest <= d + Duration::from_micros(100),
                "{us} us: may wake at {latest:?}"
            );
            assert!(t >= d - d / 100, "{us} us: wakes far too early ({t:?})");
        }
    }

    #[test]
    fn short_poll_timeouts_are_kept() {
        for ms in [0, 1, 2, 49] {
            let d = Duration::from_millis(ms);
            assert_eq!(wake_early_for_slack(d), d);
        }
    }
}
