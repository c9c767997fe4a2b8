//! The event log: kubectl-style events with aggregation of repeats.
//!
//! Owns the bounded list of [`Event`]s. A repeat (same type, reason, object and message)
//! aggregates into the existing event like the API server's event correlator: `count + 1`,
//! `last = now`, and a fresh `seq` so that followers see it again. Pure data; no clock reads.
//!
//! Resuming a follower (`events -f` across an upgrade or a restart of vigil,
//! docs/interface.md §2.4): a `seq` means one event only within one *history*, named by an id
//! the runtime gives a fresh vigil ([`EventLog::begin_history`]). An upgrade hands the whole
//! log over, history id included, so a follower resumes after its last `seq` exactly. After a
//! crash the new vigil takes back the state file's record, which may end before the last
//! events the old vigil handed out (it is written at most every 250 ms): it keeps its own new
//! history id, and remembers the old one with the last `seq` the record holds
//! ([`EventLog::adopt_earlier`]), so that a follower of the old history gets what it did not
//! see of the record, then everything new, and learns which `seq`s were lost.

use std::collections::VecDeque;

use super::{Event, EventType, Time};
use crate::config::on_event::EventReason;

/// How many distinct events are kept; the oldest (by last update) is dropped first.
pub(super) const MAX_EVENTS: usize = 1000;

#[derive(serde::Serialize, serde::Deserialize, Debug, Default)]
pub(super) struct EventLog {
    /// Ordered by `seq` (an aggregated event moves to the back).
    events: VecDeque<Event>,
    last_seq: u64,
    /// This history's id (0: none given, as in tests).
    #[serde(default)]
    history: u64,
    /// Earlier histories whose events up to a `seq` this log holds (a crash's record), newest
    /// last: `(history id, last seq of it kept)`.
    #[serde(default)]
    earlier: Vec<(u64, u64)>,
}

/// Earlier histories remembered (one per crash of vigil in a row).
const MAX_EARLIER: usize = 8;

/// Where a follower resuming after `(history, seq)` goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// The same history, or an earlier one whose record holds the `seq`: exactly after it.
    After(u64),
    /// An earlier history whose record ends at `kept` before the follower's `seq`: the events
    /// `kept + 1 ..= seq` it saw are lost (not in this log); it goes on after `kept`, where
    /// this vigil's own events begin.
    Lost { kept: u64, seen: u64 },
    /// A history this log knows nothing of: from the start of what it holds.
    Unknown,
}

impl EventLog {
    pub(super) fn record(
        &mut self,
        now: Time,
        kind: EventType,
        reason: EventReason,
        object: String,
        message: String,
    ) {
        self.record_named(now, kind, reason.as_str(), object, message);
    }

    /// As [`EventLog::record`], by the reason's name: an event taken back from an earlier
    /// vigil's record, whose reasons were the same type's.
    pub(super) fn record_named(
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

    /// This history's id (see the module docs).
    pub(super) fn history(&self) -> u64 {
        self.history
    }

    /// A fresh vigil's log begins history `id` (unique per start of vigil: the runtime's
    /// wall-clock nanoseconds at start).
    pub(super) fn begin_history(&mut self, id: u64) {
        self.history = id;
    }

    /// At a start after a crash: `earlier` is the record's log, which takes this one's place
    /// (this one's events are recorded again after it by the caller). The history id stays
    /// this vigil's; the record's history is remembered up to the last `seq` it holds.
    pub(super) fn adopt_earlier(&mut self, mut earlier: EventLog) -> EventLog {
        earlier.earlier.push((earlier.history, earlier.last_seq));
        if earlier.earlier.len() > MAX_EARLIER {
            earlier.earlier.remove(0);
        }
        earlier.history = self.history;
        std::mem::replace(self, earlier)
    }

    /// Where a follower that last saw `seq` of history `history` resumes.
    pub(super) fn resume(&self, history: u64, seq: u64) -> Resume {
        if history == self.history {
            return Resume::After(seq);
        }
        match self.earlier.iter().rev().find(|(h, _)| *h == history) {
            Some(&(_, kept)) if seq <= kept => Resume::After(seq),
            Some(&(_, kept)) => Resume::Lost { kept, seen: seq },
            None => Resume::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn log_of(history: u64, reasons: &[&str]) -> EventLog {
        let mut log = EventLog::default();
        log.begin_history(history);
        for r in reasons {
            let now = Instant::now();
            log.record_named(now, EventType::Normal, r, "web/app".into(), "m".into());
        }
        log
    }

    #[test]
    fn a_follower_of_the_same_history_resumes_right_after_its_last_seq() {
        let log = log_of(7, &["A", "B", "C"]);
        assert_eq!(log.resume(7, 2), Resume::After(2));
        let rest: Vec<u64> = log.since(2).iter().map(|e| e.seq).collect();
        assert_eq!(rest, vec![3]);
    }

    #[test]
    fn after_a_crash_a_follower_of_the_old_history_loses_only_what_the_record_missed() {
        // The old vigil handed out seqs 1..=5; its record holds 1..=3 (a crash within the
        // record's write window).
        let record = log_of(7, &["A", "B", "C"]);
        let mut fresh = log_of(9, &["Adopted"]);
        let own = fresh.adopt_earlier(record);
        for e in own.since(0) {
            fresh.record_named(e.last, e.kind, &e.reason, e.object, e.message);
        }
        assert_eq!(fresh.history(), 9);
        // Saw 2: gets 3 (the record's) then 4 (the new vigil's), nothing twice.
        assert_eq!(fresh.resume(7, 2), Resume::After(2));
        let seqs: Vec<(u64, String)> = fresh
            .since(2)
            .into_iter()
            .map(|e| (e.seq, e.reason))
            .collect();
        assert_eq!(seqs, vec![(3, "C".into()), (4, "Adopted".into())]);
        // Saw 5: 4 and 5 are lost; it gets everything after the record, 4 included.
        assert_eq!(fresh.resume(7, 5), Resume::Lost { kept: 3, seen: 5 });
        // Never heard of: from the start.
        assert_eq!(fresh.resume(1, 5), Resume::Unknown);
    }
}
