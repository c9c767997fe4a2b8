//! The deadline index of the supervisor: which container's deadline comes first.
//!
//! Owns a min-heap of `(deadline, key)` and each container's current deadline (the earliest
//! of its back-off, kill, probe schedule, probe timeout and hook deadlines, as
//! `Slot::next_deadline` derives it). It does not own or decide any deadline: the slots do,
//! and the supervisor tells the index after every change which slots may have moved
//! ([`Timers::set`]). Entries are deleted lazily: a heap entry whose time is not the key's
//! current deadline is stale and is dropped when it reaches the top, so the top is always
//! exact ([`Timers::next`]) and a change costs O(log n) instead of a scan of every slot per
//! loop turn (which was ~25 % of vigil's CPU at 500 probes/s, BENCHMARKS.md). The heap is
//! rebuilt when stale entries outnumber live ones, so it stays within twice the live count.
//! No I/O, no clock.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use super::{ContainerKey, Time};

#[derive(Debug, Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Time, u32)>>,
    current: HashMap<u32, Time>,
}

impl Timers {
    /// Records `key`'s deadline (`None`: it has none).
    pub(super) fn set(&mut self, key: ContainerKey, at: Option<Time>) {
        match at {
            Some(t) => {
                if self.current.insert(key.0, t) != Some(t) {
                    self.heap.push(Reverse((t, key.0)));
                }
            }
            None => {
                self.current.remove(&key.0);
            }
        }
    }

    /// Forgets every key `keep` says no to (containers that no longer exist).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(ContainerKey) -> bool) {
        self.current.retain(|k, _| keep(ContainerKey(*k)));
    }

    /// Removes and returns every key whose deadline is at or before `now`; the caller fires
    /// them and then [`Self::set`]s their new deadlines.
    pub(super) fn pop_due(&mut self, now: Time) -> Vec<ContainerKey> {
        let mut due = Vec::new();
        while let Some(&Reverse((t, k))) = self.heap.peek() {
            if t > now {
                break;
            }
            self.heap.pop();
            if self.current.get(&k) == Some(&t) {
                self.current.remove(&k);
                due.push(ContainerKey(k));
            }
        }
        self.tidy();
        due
    }

    /// Drops stale entries from the top (so [`Self::next`] is exact) and rebuilds the heap
    /// when stale entries have piled up.
    pub(super) fn tidy(&mut self) {
        while let Some(&Reverse((t, k))) = self.heap.peek() {
            if self.current.get(&k) == Some(&t) {
                break;
            }
            self.heap.pop();
        }
        if self.heap.len() > 2 * self.current.len() + 64 {
            self.heap = self
                .current
                .iter()
                .map(|(&k, &t)| Reverse((t, k)))
                .collect();
        }
    }

    /// The earliest deadline. Exact after [`Self::tidy`] (every change ends with it).
    pub(super) fn next(&self) -> Option<Time> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// `key`'s recorded deadline (for consistency checks).
    #[cfg(test)]
    pub(super) fn get(&self, key: ContainerKey) -> Option<Time> {
        self.current.get(&key.0).copied()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.current.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn at(base: Instant, ms: u64) -> Option<Time> {
        Some(base + Duration::from_millis(ms))
    }

    #[test]
    fn the_earliest_current_deadline_comes_first_and_moved_ones_are_not_reported() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.set(ContainerKey(1), at(t0, 30));
        t.set(ContainerKey(2), at(t0, 10));
        t.set(ContainerKey(3), at(t0, 20));
        t.tidy();
        assert_eq!(t.next(), at(t0, 10));
        // Key 2 moves later, key 3 goes away: the stale entries must not surface.
        t.set(ContainerKey(2), at(t0, 40));
        t.set(ContainerKey(3), None);
        t.tidy();
        assert_eq!(t.next(), at(t0, 30));
        assert_eq!(
            t.pop_due(t0 + Duration::from_millis(35)),
            vec![ContainerKey(1)]
        );
        assert_eq!(t.next(), at(t0, 40));
        assert_eq!(
            t.pop_due(t0 + Duration::from_millis(100)),
            vec![ContainerKey(2)]
        );
        assert_eq!(t.next(), None);
    }

    #[test]
    fn a_popped_key_set_again_to_the_same_time_is_scheduled_again() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.set(ContainerKey(7), at(t0, 5));
        assert_eq!(
            t.pop_due(t0 + Duration::from_millis(5)),
            vec![ContainerKey(7)]
        );
        t.set(ContainerKey(7), at(t0, 5));
        t.tidy();
        assert_eq!(t.next(), at(t0, 5));
    }

    #[test]
    fn stale_entries_do_not_pile_up() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        for i in 0..10_000u64 {
            t.set(ContainerKey(1), at(t0, 100_000 - i));
            t.tidy();
        }
        assert!(
            t.heap.len() <= 2 * t.current.len() + 64 + 1,
            "{}",
            t.heap.len()
        );
        assert_eq!(t.next(), at(t0, 100_000 - 9_999));
        t.retain(|_| false);
        t.tidy();
        assert_eq!(t.next(), None);
    }
}
