//! Driving the supervisor: the inputs the runtime observed (`handle`), the due deadlines
//! (`handle_timeout`), and what it hands back — the actions to carry out and the next time it
//! wants to be woken.
//!
//! Owns routing an input or a deadline to its slot (dropping stale generations) and the action
//! queue's outlets. Must not make decisions that span pods (`refresh.rs` does, at the end of
//! every call here).

use super::*;

impl Supervisor {
    /// Feed one input. Inputs for unknown keys or stale generations are dropped.
    pub fn handle(&mut self, now: Time, input: Input) {
        let (key, generation) = match &input {
            Input::Spawned {
                key, generation, ..
            }
            | Input::SpawnFailed {
                key, generation, ..
            }
            | Input::Exited {
                key, generation, ..
            }
            | Input::ProbeResult {
                key, generation, ..
            }
            | Input::OomKills {
                key, generation, ..
            }
            | Input::Notified {
                key, generation, ..
            } => (*key, *generation),
        };
        let Some(loc) = self.locate(key) else {
            return;
        };
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[loc.pod];
        let name = pod.spec.name.clone();
        let slot = loc.slot_mut(pod);
        if slot.generation != generation {
            return;
        }
        // Whether the slot's state may have changed beyond its probe bookkeeping.
        let changed = match input {
            Input::Spawned { pid, .. } => {
                slot.on_spawned(pid, &name, &mut out);
                true
            }
            Input::SpawnFailed { message, .. } => {
                slot.on_spawn_failed(message, &name, &mut out);
                true
            }
            Input::Exited { exit, .. } => {
                slot.on_exited(&exit, &name, &mut out);
                true
            }
            Input::ProbeResult {
                kind,
                seq,
                outcome,
                duration,
                ..
            } => slot.on_probe_result(kind, seq, outcome, duration, &name, &mut out),
            Input::OomKills {
                delta, memory_max, ..
            } => {
                slot.on_oom_kills(delta, memory_max, &name, &mut out);
                true
            }
            Input::Notified { notification, .. } => slot.on_notified(notification, &name, &mut out),
        };
        if loc.init {
            pod.after_init(loc.index, &mut out);
        }
        pod.drive_sidecars(&mut out);
        if changed || self.shutdown.is_some() {
            self.refresh_touched(now, Some(&[loc.pod]));
        } else {
            // A probe result that published nothing (the common case: the same result again)
            // moves no condition, dependency or stop: only the probe's next deadline, so the
            // passes over every pod in `refresh_touched` are skipped (at 5,000 probes/s over
            // 1,000 pods they were a third of vigil's own CPU).
            self.reschedule(Some(&[loc.pod]));
        }
    }

    /// Fire every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        if let Some(sd) = &mut self.shutdown
            && !sd.deadline_fired
            && sd.deadline <= now
        {
            sd.deadline_fired = true;
            let (pods, mut out) = self.split(now);
            for pod in pods.iter_mut() {
                let name = &pod.spec.name;
                for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                    slot.kill_now(StopCause::Shutdown, KILL_SHUTDOWN_TIMEOUT, name, &mut out);
                }
            }
        }
        let mut all = self.shutdown.as_ref().is_some_and(|sd| sd.deadline <= now);
        // A schedule's look is due: `refresh_touched` takes it (and may start any pod).
        if self.schedule_wake.is_some_and(|t| t <= now) {
            all = true;
        }
        // A rollout's progress deadline: `refresh_touched` halts it.
        if self.next_rollout_deadline().is_some_and(|t| t <= now) {
            all = true;
        }
        // Pods whose `active_deadline_seconds` ran out (a shutdown stops them anyway).
        let expired: Vec<usize> = match self.shutdown {
            Some(_) => Vec::new(),
            None => (self.timed.iter().copied())
                .filter(|&p| self.pods[p].active_deadline().is_some_and(|t| t <= now))
                .collect(),
        };
        // The pods with a slot due, in config order (the order a scan would fire them in).
        let mut touched: Vec<usize> = (self.timers.pop_due(now).into_iter())
            .filter_map(|k| self.locate(k).map(|l| l.pod))
            .chain(expired.iter().copied())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let (pods, mut out) = self.split(now);
        let mut changed = !expired.is_empty();
        for &p in &expired {
            pods[p].exceed_deadline(&mut out);
        }
        for &p in &touched {
            let pod = &mut pods[p];
            let due = |s: &Slot| s.next_deadline().is_some_and(|t| t <= now);
            let name = pod.spec.name.clone();
            for i in 0..pod.init.len() {
                if due(&pod.init[i]) {
                    changed |= pod.init[i].on_timeout(&name, &mut out);
                    pod.after_init(i, &mut out);
                }
            }
            for slot in pod.main.iter_mut() {
                if due(slot) {
                    changed |= slot.on_timeout(&name, &mut out);
                }
            }
            pod.drive_sidecars(&mut out);
        }
        if changed || all || self.shutdown.is_some() {
            self.refresh_touched(now, (!all).then_some(&touched[..]));
        } else {
            // Only probe attempts started or timed out without a new result (as for an
            // unchanged probe result in `handle`): nothing but their deadlines moved, so the
            // passes over every pod in `refresh_touched` are skipped (at 5,000 probes/s over
            // 1,000 pods they were a fifth of vigil's own CPU).
            self.reschedule(Some(&touched));
        }
    }

    /// The earliest pending deadline, if any.
    pub fn poll_timeout(&self) -> Option<Time> {
        let shutdown = self
            .shutdown
            .as_ref()
            .filter(|s| !s.deadline_fired && !self.exit_emitted)
            .map(|s| s.deadline);
        (self.timers.next().into_iter())
            .chain(shutdown)
            .chain(self.next_pod_deadline())
            .chain(self.schedule_wake)
            .chain(self.next_rollout_deadline())
            .min()
    }

    /// Next action to execute.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next action, left queued: a runtime that executes only so many spawns per loop turn
    /// stops before the next one and takes the rest, in order, in the next turn. Nothing in the
    /// core depends on how soon an action runs: a container stays `Creating` from its `Spawn`
    /// until `Spawned`/`SpawnFailed`, whenever those come.
    pub fn peek_action(&self) -> Option<&Action> {
        self.actions.front()
    }

    /// Whether actions are queued (the runtime then polls without waiting).
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }
}
