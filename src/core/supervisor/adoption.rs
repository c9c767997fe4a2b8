//! What the supervisor takes over at start from an earlier vigil that died: the runs still
//! running (`adopt`), runs whose output pipes were lost, the ended containers kept ended, the
//! events and the memory (`recall`); and what it leaves for the next one (`recollection`,
//! `kept_ends`).
//!
//! Owns applying what the runtime found to the pods, before the first actions are drained.
//! Must not read the state file or look at processes (the runtime does).

use super::*;

impl Supervisor {
    /// Takes a container an earlier vigil left running (found by the runtime at start, its
    /// definition unchanged) in as Running with `pid`, started at `started_at`, with the
    /// restart count that vigil recorded; no spawn happens and the `Spawn` queued for it is
    /// dropped. Only before anything of its pod ran here (call it right after
    /// [`Supervisor::new`], before draining actions), only for a regular container or a
    /// sidecar, and not during a shutdown. Its pod had begun under the earlier vigil, so it
    /// goes straight to its regular containers (no dependency wait, init containers recorded
    /// as completed then: [`Pod::skip_to_main_for_adoption`]). Returns the run's generation,
    /// or `None` when it cannot be adopted (the caller then kills it; the container starts as
    /// usual).
    pub fn adopt(
        &mut self,
        now: Time,
        key: ContainerKey,
        pid: u32,
        started_at: Time,
        restart_count: u32,
    ) -> Option<Generation> {
        let loc = self.locate(key)?;
        let pod = &self.pods[loc.pod];
        if self.shutdown.is_some() || (loc.init && !pod.init[loc.index].sidecar()) {
            return None;
        }
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[loc.pod];
        let name = pod.spec.name.clone();
        let mut dropped = pod.skip_to_main_for_adoption(&mut out)?;
        // A pod this run's selection leaves out that ran under the earlier vigil (an operator
        // started it) runs on.
        pod.held &= !pod.unstarted();
        let slot = loc.slot_mut(pod);
        let adopted = slot.adopt(pid, started_at, restart_count, &name, &mut out);
        let generation = match adopted {
            Some(g) => {
                dropped.push(key);
                g
            }
            None => {
                self.actions
                    .retain(|a| !matches!(a, Action::Spawn { key: k, .. } if dropped.contains(k)));
                self.refresh_touched(now, Some(&[loc.pod]));
                return None;
            }
        };
        self.actions
            .retain(|a| !matches!(a, Action::Spawn { key: k, .. } if dropped.contains(k)));
        self.refresh_touched(now, Some(&[loc.pod]));
        self.adopted_runs += 1;
        Some(generation)
    }

    /// The adopted run `generation` of `key` lost its output pipes in the crash of the
    /// earlier vigil (no output holder had them): an `OutputLost` Warning event, the mark in
    /// its status, and with `restart` (`on_output_lost = "restart"`) a restart at once as an
    /// operator's would be. False when that run is not running.
    pub fn output_lost(
        &mut self,
        now: Time,
        key: ContainerKey,
        generation: Generation,
        restart: bool,
    ) -> bool {
        let Some(loc) = self.locate(key) else {
            return false;
        };
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[loc.pod];
        let name = pod.spec.name.clone();
        let slot = loc.slot_mut(pod);
        if !slot.output_lost(generation, restart, &name, &mut out) {
            return false;
        }
        self.output_lost_runs += 1;
        self.refresh_touched(now, Some(&[loc.pod]));
        true
    }

    /// Runs adopted from an earlier vigil, and runs whose output was lost in its crash.
    pub fn adoption_counts(&self) -> (u64, u64) {
        (self.adopted_runs, self.output_lost_runs)
    }

    /// What the next vigil takes back if this one dies without a shutdown ([`crate::core::recall`]):
    /// the runtime serialises it into its state file. `spec_of` hashes a container's
    /// definition as the runtime does.
    pub fn recollection(
        &self,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
    ) -> crate::core::recall::RecollectionRef<'_> {
        crate::core::recall::RecollectionRef {
            pods: self
                .pods
                .iter()
                .filter(|p| p.next == Next::Keep)
                .map(|p| p.memory(spec_of))
                .collect(),
            events: &self.events,
        }
    }

    /// At start, before anything else is recorded (right after [`Supervisor::new`]): the
    /// event list an earlier vigil left takes the place of this one's, and what this one
    /// recorded so far follows it. Returns the last `seq` of the earlier list (its events
    /// were logged by that vigil).
    pub fn recall_events(&mut self, memory: &mut crate::core::recall::Recollection) -> u64 {
        let fresh = self
            .events
            .adopt_earlier(std::mem::take(&mut memory.events));
        let last = self.events.last_seq();
        for e in fresh.since(0) {
            self.events
                .record_named(e.last, e.kind, &e.reason, e.object, e.message);
        }
        last
    }

    /// At start, after the runtime adopted what it could ([`Supervisor::adopt`]) and before
    /// draining actions: takes back what an earlier vigil that died knew
    /// ([`crate::core::recall`]). `spec_of` hashes a container's definition now (a container whose
    /// hash differs from the remembered one starts afresh). Returns what was done, per
    /// `pod/container`.
    pub fn recall(
        &mut self,
        now: Time,
        memory: &crate::core::recall::Recollection,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
    ) -> Vec<(String, crate::core::recall::Recalled)> {
        if self.shutdown.is_some() {
            return Vec::new();
        }
        let mut done = Vec::new();
        let (pods, mut out) = self.split(now);
        for pod in pods.iter_mut() {
            let Some(m) = memory.pods.iter().find(|m| m.name == pod.name()) else {
                continue;
            };
            if pod.unstarted() && m.stage != Stage::Waiting {
                // Left out by this run's selection, but an operator had started it.
                pod.held = false;
            }
            let name = pod.name().to_string();
            for (container, r) in pod.recall(m, spec_of, &mut out) {
                done.push((format!("{name}/{container}"), r));
            }
        }
        self.refresh(now);
        done
    }

    /// Every regular container that has ended for good in a way a vigil restarted after a
    /// crash keeps (stopped by an operator, or completed and not to be restarted), for the
    /// runtime to record.
    /// Each as `(key, pod, container, how)`.
    pub fn kept_ends(&self) -> Vec<(ContainerKey, &str, &str, KeptEnd)> {
        self.pods
            .iter()
            .flat_map(|p| {
                p.main
                    .iter()
                    .filter_map(|s| Some((s.key, p.name(), s.name(), s.kept_end()?)))
            })
            .collect()
    }

    /// At start (right after [`Supervisor::new`], before draining actions): the regular
    /// container `key` stays ended as it was under an earlier vigil that died — its queued
    /// first spawn is dropped and it shows `Stopped` or `Completed` (`start` starts it as
    /// usual). Only in a pod whose regular containers are starting now (not waiting for
    /// dependencies or init containers, which would start it later); `false` when it cannot
    /// be kept.
    pub fn keep_ended(&mut self, now: Time, key: ContainerKey, end: KeptEnd) -> bool {
        let Some(loc) = self.locate(key) else {
            return false;
        };
        let pod = &mut self.pods[loc.pod];
        if loc.init || self.shutdown.is_some() || pod.stage != Stage::Main {
            return false;
        }
        if !pod.main[loc.index].keep_ended(now, end) {
            return false;
        }
        self.actions
            .retain(|a| !matches!(a, Action::Spawn { key: k, .. } if *k == key));
        self.refresh_touched(now, Some(&[loc.pod]));
        true
    }
}
