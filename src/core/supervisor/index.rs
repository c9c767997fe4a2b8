//! The supervisor's derived indexes: where each container key lives (`where_is`) and every
//! slot's next deadline (`timers`), and the split borrow that hands a pod list and an [`Out`]
//! to the pod code.
//!
//! Owns keeping both indexes equal to what the pods say (checked after every call in tests).
//! Must not decide anything: no event, no action.

use super::*;

impl Supervisor {
    pub(super) fn split(&mut self, now: Time) -> (&mut Vec<Pod>, Out<'_>) {
        let shutting_down = self.shutdown.is_some();
        let unclean = match &mut self.shutdown {
            Some(s) => &mut s.unclean,
            None => &mut self.scratch_unclean,
        };
        (
            &mut self.pods,
            Out {
                now,
                actions: &mut self.actions,
                events: &mut self.events,
                probe_seq: &mut self.probe_seq,
                phase_spread: &mut self.phase_spread,
                shutting_down,
                unclean,
            },
        )
    }

    pub(super) fn locate(&self, key: ContainerKey) -> Option<Loc> {
        self.where_is.get(&key).copied()
    }

    /// Rebuilds `where_is` after `pods` changed shape (a reload, a pod replaced or removed)
    /// and forgets the deadlines of containers that are gone.
    pub(super) fn reindex(&mut self) {
        self.where_is.clear();
        for (p, pod) in self.pods.iter().enumerate() {
            for (i, s) in pod.init.iter().enumerate() {
                let loc = Loc {
                    pod: p,
                    init: true,
                    index: i,
                };
                self.where_is.insert(s.key, loc);
            }
            for (i, s) in pod.main.iter().enumerate() {
                let loc = Loc {
                    pod: p,
                    init: false,
                    index: i,
                };
                self.where_is.insert(s.key, loc);
            }
        }
        let where_is = &self.where_is;
        self.timers.retain(|k| where_is.contains_key(&k));
        self.timed = (self.pods.iter().enumerate())
            .filter(|(_, p)| p.spec.active_deadline.is_some() || p.spec.schedule.is_some())
            .map(|(i, _)| i)
            .collect();
    }

    /// The earliest deadline of a pod's own (`active_deadline_seconds`), if any.
    pub(super) fn next_pod_deadline(&self) -> Option<Time> {
        (self.timed.iter())
            .filter_map(|&p| self.pods.get(p)?.active_deadline())
            .min()
    }

    /// Re-reads the deadlines of the slots of `pods` (`None`: of every pod) into the index.
    pub(super) fn reschedule(&mut self, pods: Option<&[usize]>) {
        let timers = &mut self.timers;
        let mut one = |pod: &Pod| {
            for s in pod.slots() {
                timers.set(s.key, s.next_deadline());
            }
        };
        match pods {
            None => self.pods.iter().for_each(&mut one),
            Some(ps) => ps.iter().filter_map(|&p| self.pods.get(p)).for_each(one),
        }
        self.timers.tidy();
        #[cfg(test)]
        self.check_timers();
    }

    /// The index holds exactly every slot's deadline (tests only: a scan of every slot).
    #[cfg(test)]
    pub(super) fn check_timers(&self) {
        let mut n = 0;
        for pod in &self.pods {
            for s in pod.slots() {
                let want = s.next_deadline();
                assert_eq!(
                    self.timers.get(s.key),
                    want,
                    "deadline index out of date for {}/{}",
                    pod.name(),
                    s.name()
                );
                n += usize::from(want.is_some());
                assert!(matches!(self.locate(s.key), Some(l) if l.pod < self.pods.len()));
            }
        }
        assert_eq!(
            self.timers.len(),
            n,
            "deadline index holds containers that are gone"
        );
        let scan = self
            .pods
            .iter()
            .flat_map(|p| p.slots())
            .filter_map(|s| s.next_deadline())
            .min();
        assert_eq!(
            self.timers.next(),
            scan,
            "deadline index disagrees with a scan"
        );
    }
}
