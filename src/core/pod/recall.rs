//! What a slot and a pod remember across a restart of vigil ([`crate::core::recall`]): the
//! memory written out, and reading it back onto a fresh pod (restart counts, last states,
//! back-off, the stage reached).
//!
//! Owns the mapping between slots and their memory. Must not decide the memory's format or
//! its matching of definitions (`core/recall.rs`), nor adopt runs (`adopt.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Slot {
    /// What the next vigil takes back of this container (`recall`).
    pub(in crate::core) fn memory(&self, spec: u64) -> crate::core::recall::SlotMemory {
        use crate::core::recall::Remembered;
        crate::core::recall::SlotMemory {
            name: self.spec.name.clone(),
            init: self.init,
            spec,
            restart_count: self.restart_count,
            auto_restarts: self.auto_restarts,
            runs: self.runs,
            backoff: self.backoff.clone(),
            last_state: self.last_state.clone(),
            state: match &self.state {
                SlotState::NotStarted { .. } => Remembered::Waiting,
                SlotState::Creating { .. } => Remembered::Active { started_at: None },
                SlotState::Running { started_at, .. } => Remembered::Active {
                    started_at: Some(*started_at),
                },
                SlotState::BackOff { until, delay } => Remembered::BackOff {
                    until: *until,
                    delay: *delay,
                },
                SlotState::Done(t) => Remembered::Done(t.clone()),
            },
        }
    }

    /// At start, after adoption, with the same definition as under the earlier vigil: takes
    /// back its history and, unless it was adopted, what its state was (`crate::core::recall`).
    /// `reached`: its pod is at or past its step (else it starts later, as usual). A queued
    /// first `Spawn` of a slot that is not `Creating` afterwards is the caller's to drop.
    pub(in crate::core) fn recall(
        &mut self,
        m: &crate::core::recall::SlotMemory,
        reached: bool,
        pod: &str,
        out: &mut Out,
    ) -> Option<crate::core::recall::Recalled> {
        use crate::core::recall::{Recalled, Remembered};
        let adopted = matches!(self.state, SlotState::Running { .. }) && self.runs <= 1;
        let first = self.untouched_here();
        // An init container recorded as completed by a skip to its pod's stage.
        let skipped = matches!(&self.state, SlotState::Done(t) if t.message == MSG_COMPLETED_BEFORE)
            && self.runs <= 1;
        if !(adopted || first || skipped) {
            return None;
        }
        self.restart_count = m.restart_count.max(self.restart_count);
        self.auto_restarts = m.auto_restarts;
        self.backoff = m.backoff.clone();
        if self.last_state.is_none() {
            self.last_state = m.last_state.clone();
        }
        if adopted {
            return Some(Recalled::History);
        }
        if skipped {
            if let Remembered::Done(t) = &m.state {
                self.state = SlotState::Done(t.clone());
                self.runs = m.runs;
            }
            return Some(Recalled::Ended(TerminationReason::Completed));
        }
        let creating = matches!(self.state, SlotState::Creating { .. });
        // Its first spawn here is a restart of the runs before.
        let as_restart = |slot: &mut Slot| {
            if creating && m.runs > 0 {
                slot.runs = m.runs + 1;
                slot.restart_count = m.restart_count + 1;
            } else {
                slot.runs = m.runs;
            }
        };
        match &m.state {
            Remembered::Waiting => {
                as_restart(self);
                Some(Recalled::History)
            }
            Remembered::Done(t)
                if t.reason != TerminationReason::Stopped
                    || t.message.starts_with(MSG_STOP_REQUEST) =>
            {
                if !reached {
                    return None;
                }
                self.runs = m.runs;
                self.state = SlotState::Done(t.clone());
                Some(Recalled::Ended(t.reason))
            }
            Remembered::Done(t) => {
                // Stopped by a shutdown that the crash cut short: it starts again.
                if t.started_at.is_some() {
                    self.last_state = Some(t.clone());
                }
                as_restart(self);
                Some(Recalled::History)
            }
            Remembered::BackOff { until, delay } => {
                if !reached {
                    return None;
                }
                self.runs = m.runs;
                self.state = SlotState::BackOff {
                    until: (*until).min(later(out.now, *delay)),
                    delay: *delay,
                };
                Some(Recalled::BackOff)
            }
            Remembered::Active { started_at } => {
                if !reached {
                    return None;
                }
                let term = Terminated {
                    exit_code: EXIT_CODE_UNKNOWN,
                    signal: None,
                    reason: TerminationReason::ContainerStatusUnknown,
                    message: MSG_GONE_UNSEEN.to_string(),
                    started_at: *started_at,
                    finished_at: out.now,
                };
                let name = self.spec.name.clone();
                out.event(
                    EventType::Warning,
                    EventReason::Exited,
                    pod,
                    &name,
                    format!(
                        "Container {name} exited: {}, {MSG_GONE_UNSEEN}",
                        term.reason.as_str()
                    ),
                );
                // As the end of an adopted run (`termination`): unknown is a failure.
                let restarts = self.sidecar() || self.spec.restart_policy != RestartPolicy::Never;
                if restarts && creating {
                    self.last_state = Some(term);
                    as_restart(self);
                    Some(Recalled::GoneRestarted)
                } else {
                    self.runs = m.runs;
                    self.state = SlotState::Done(term);
                    Some(Recalled::GoneEnded)
                }
            }
        }
    }
}

impl Pod {
    /// What the next vigil takes back of this pod (`recall`); `spec_of` hashes a container's
    /// definition as the runtime does.
    pub(in crate::core) fn memory(
        &self,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
    ) -> crate::core::recall::PodMemory {
        crate::core::recall::PodMemory {
            name: self.spec.name.clone(),
            created_at: self.created_at,
            stage: self.stage,
            active_since: self.active_since,
            containers: self
                .slots()
                .map(|s| s.memory(spec_of(s.key, &s.spec)))
                .collect(),
            schedule: (self.spec.schedule.as_ref().zip(self.schedule.as_ref())).map(
                |(spec, state)| crate::core::recall::ScheduleMemory {
                    cron: spec.cron.as_str().to_string(),
                    time_zone: spec.time_zone.name().map(str::to_string),
                    state: state.clone(),
                },
            ),
            history: self.history.clone(),
        }
    }

    /// At start, after adoption: takes back what an earlier vigil knew of this pod
    /// (`crate::core::recall` says how). `spec_of` hashes a container's definition now. Returns
    /// what was done per container, and whether the pod went on to the stage it had reached
    /// (`false` also when it had not begun).
    pub(in crate::core) fn recall(
        &mut self,
        memory: &crate::core::recall::PodMemory,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
        out: &mut Out,
    ) -> Vec<(String, crate::core::recall::Recalled)> {
        use crate::core::recall::SlotMemory;
        // The schedule of a scheduled pod (held until a trigger) whatever its containers.
        if let (Some(spec), Some(kept)) = (&self.spec.schedule, &memory.schedule)
            && kept.cron == spec.cron.as_str()
            && kept.time_zone.as_deref() == spec.time_zone.name()
        {
            self.schedule = Some(kept.state.clone());
        }
        self.history.recall(&memory.history, self.spec.history);
        if self.refused.is_some() || self.held {
            return Vec::new();
        }
        if memory.created_at <= out.now {
            self.created_at = memory.created_at;
        }
        let same = |s: &Slot, m: &SlotMemory| {
            m.name == s.name() && m.init == s.init && m.spec == spec_of(s.key, &s.spec)
        };
        // The stage it had reached, if the containers before it are the same ones.
        let upto = match memory.stage {
            Stage::Waiting => 0,
            Stage::Init(i) => i,
            Stage::Main => self.init.len(),
        };
        let before_same = self
            .init
            .iter()
            .take(upto)
            .all(|s| memory.containers.iter().any(|m| same(s, m)))
            && (memory.stage != Stage::Main
                || memory.containers.iter().filter(|m| m.init).count() == self.init.len());
        let mut dropped = Vec::new();
        if before_same && let Some(d) = self.skip_to_stage(memory.stage, out) {
            dropped = d;
            // The run goes on: it began when it began.
            self.active_since = memory.active_since.filter(|t| *t <= out.now);
        }
        let name = self.spec.name.clone();
        let mut done = Vec::new();
        let stage = self.stage;
        for (i, slot) in self.init.iter_mut().enumerate() {
            let reached = match stage {
                Stage::Waiting => false,
                Stage::Init(j) => i <= j,
                Stage::Main => true,
            };
            if let Some(m) = memory.containers.iter().find(|m| same(slot, m))
                && let Some(r) = slot.recall(m, reached, &name, out)
            {
                done.push((slot.name().to_string(), r));
            }
        }
        for slot in self.main.iter_mut() {
            if let Some(m) = memory.containers.iter().find(|m| same(slot, m))
                && let Some(r) = slot.recall(m, stage == Stage::Main, &name, out)
            {
                done.push((slot.name().to_string(), r));
            }
        }
        // A queued first `Spawn` of a container that does not start now is dropped.
        for slot in self.slots() {
            if !matches!(slot.state, SlotState::Creating { .. }) {
                dropped.push(slot.key);
            }
        }
        out.actions
            .retain(|a| !matches!(a, Action::Spawn { key, .. } if dropped.contains(key)));
        done
    }
}
