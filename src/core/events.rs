//! The event log: kubectl-style events with aggregation of repeats.
//!
//! Owns the bounded list of [`Event`]s. A repeat (same type, reason, object and message)
//! aggregates into the existing event like the API server's event correlator: `count + 1`,
//! `last = now`, and a fresh `seq` so that followers see it again. Pure data; no clock reads.

use std::collections::VecDeque;

use super::{Event, EventType, Time};

/// How many distinct events are kept; the oldest (by last update) is dropped first.
pub(super) const MAX_EVENTS: usize = 1000;

#[derive(serde::Serialize, serde::Deserialize, Debug, Default)]
pub(super) struct EventLog {
    /// Ordered by `seq` (an aggregated event moves to the back).
    events: VecDeque<Event>,
    last_seq: u64,
}

impl EventLog {
    pub(super) fn record(
        &mut self,
        now: Time,
        kind: EventType,
        reason: &str,
        object: String,
        message: String,
    ) {
        self.last_seq += 1;
        let seq = self.last_seq;
        let same = |e: &Event| {
            e.kind == kind && e.reason == reason && e.object == object && e.message == message
        };
        if let Some(pos) = self.events.iter().rposition(same)
            && let Some(mut e) = self.events.remove(pos)
        {
            e.count = e.count.saturating_add(1);
            e.last = now;
            e.seq = seq;
            self.events.push_back(e);
            return;
        }
        self.events.push_back(Event {
            seq,
            kind,
            reason: reason.to_string(),
            object,
            message,
            count: 1,
            first: now,
            last: now,
        });
        while self.events.len() > MAX_EVENTS {
            self.events.pop_front();
        }
    }

    /// Events with `seq > after`, in `seq` order.
    pub(super) fn since(&self, after: u64) -> Vec<Event> {
        self.events
            .iter()
            .filter(|e| e.seq > after)
            .cloned()
            .collect()
    }

    /// The newest `seq` handed out (0 before any event).
    pub(super) fn last_seq(&self) -> u64 {
        self.last_seq
    }
}
