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

use std::time::Instant;

use mio::event::Event;

use super::notifier::Notifier;
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
}

/// What a component reaches of the rest while it handles an event or carries out an action.
pub(super) struct Link<'a> {
    pub core: &'a mut Supervisor,
    pub notifier: &'a mut Notifier,
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

// ---- the components whose events and deadlines need nothing of the rest --------------------

impl Component for super::control::Control {
    fn process(&mut self, event: &Event, now: Instant, _: &mut Link<'_>) {
        self.on_event(event, now);
    }

    fn deadline(&self, now: Instant) -> Option<Instant> {
        earliest([self.next_deadline(), self.has_backlog().then_some(now)])
    }
}

/// The metrics listener, when `metrics_address` is set.
impl Component for Option<super::metrics::MetricsListener> {
    fn process(&mut self, event: &Event, _: Instant, _: &mut Link<'_>) {
        if let Some(m) = self {
            m.on_event(event);
        }
    }

    fn deadline(&self, now: Instant) -> Option<Instant> {
        let m = self.as_ref()?;
        earliest([m.next_deadline(), m.has_work().then_some(now)])
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

/// The expositions asked for and being built, a slice per turn.
impl Component for super::metrics::Scrapes {
    fn deadline(&self, now: Instant) -> Option<Instant> {
        self.has_work().then_some(now)
    }
}

/// An upgrade waiting for its new binary (its child's exit comes through the reaper).
impl Component for Option<super::upgrade::Preflight> {
    fn deadline(&self, _: Instant) -> Option<Instant> {
        self.as_ref().map(super::upgrade::Preflight::deadline)
    }
}
