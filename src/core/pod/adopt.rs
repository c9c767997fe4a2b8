//! Adoption: taking over the runs an earlier vigil left running (`adopt`), the runs it knew to
//! have ended (`keep_ended`), runs whose output pipes were lost, and moving an adopted pod to
//! the stage its containers show.
//!
//! Owns turning what the runtime found at start into slot states. Must not read the state
//! file or look at processes (the runtime does), nor recall history (`recall.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Slot {
    /// How it ended for good, if a vigil restarted after a crash keeps that: an operator's stop
    /// (`Stopped` by request, not started since), or `Completed` without a restart to come.
    pub(in crate::core) fn kept_end(&self) -> Option<KeptEnd> {
        match &self.state {
            SlotState::Done(t)
                if t.reason == TerminationReason::Stopped
                    && t.message.starts_with(MSG_STOP_REQUEST) =>
            {
                Some(KeptEnd::Stopped)
            }
            SlotState::Done(t) if t.reason == TerminationReason::Completed => {
                Some(KeptEnd::Completed)
            }
            _ => None,
        }
    }

    /// Nothing of this slot has run under this vigil yet: its first run is queued or not
    /// begun, with no stop pending (what a recalled or kept end may replace).
    pub(super) fn untouched_here(&self) -> bool {
        self.runs <= 1
            && matches!(
                self.state,
                SlotState::NotStarted { .. }
                    | SlotState::Creating {
                        pending: None,
                        force_kill: false,
                    }
            )
    }

    /// At start (nothing of it has run here yet): stays ended as under an earlier vigil. Its
    /// queued first `Spawn` is the caller's to drop.
    pub(in crate::core) fn keep_ended(&mut self, now: Time, end: KeptEnd) -> bool {
        let untouched = self.untouched_here();
        if !untouched {
            return false;
        }
        self.runs = 0;
        self.state = SlotState::Done(match end {
            KeptEnd::Stopped => stopped(MSG_KEPT_STOPPED, now),
            KeptEnd::Completed => Terminated {
                exit_code: 0,
                signal: None,
                reason: TerminationReason::Completed,
                message: MSG_COMPLETED_BEFORE.to_string(),
                started_at: None,
                finished_at: now,
            },
        });
        true
    }

    /// Takes in a process an earlier vigil started and left running as this slot's run, as if
    /// it had just been spawned — but without a spawn, a `Started` event or a `post_start`
    /// hook (it ran back then): an `Adopted` event, its restart count as recorded, probes
    /// from now. Only a slot whose first run is about to start (its `Spawn` still queued, or
    /// not started yet) can adopt; the queued `Spawn` is the caller's to drop. Returns the
    /// run's generation.
    pub(in crate::core) fn adopt(
        &mut self,
        pid: u32,
        started_at: Time,
        restart_count: u32,
        pod: &str,
        out: &mut Out,
    ) -> Option<Generation> {
        match self.state {
            SlotState::Creating {
                pending: None,
                force_kill: false,
            } if self.runs == 1 => {}
            SlotState::NotStarted { .. } if self.runs == 0 => {
                self.generation += 1;
                self.runs = 1;
            }
            _ => return None,
        }
        self.restart_count = restart_count;
        self.state = SlotState::Running {
            pid,
            started_at,
            stopping: None,
        };
        let name = self.spec.name.clone();
        out.event(
            EventType::Normal,
            EventReason::Adopted,
            pod,
            &name,
            format!(
                "Adopted container {name} (pid {pid}) left running by an earlier vigil; its \
                 exit status will be unknown"
            ),
        );
        self.post_start_done(out);
        // A `notify = true` run said READY=1 to the earlier vigil, if it ever did, and will
        // not say it again; a `ready_log_line` run printed its line before (what it printed
        // while no vigil read is not matched): either is taken as ready (docs/behaviour.md
        // §4.4, §4.5), its probes still counting.
        self.notify = NotifyStatus {
            ready: self.spec.says_ready(),
            ..NotifyStatus::default()
        };
        // Its watchdog starts afresh: the pings it sent to the earlier vigil are not known.
        self.watchdog_at = self.spec.watchdog.map(|p| later(out.now, p));
        // Taken as ready: its start-up is over.
        self.start_deadline = None;
        Some(self.generation)
    }

    /// The running run `generation` (adopted) has lost its output pipes in a crash of vigil:
    /// marked so in its status, a Warning `OutputLost` event, and with `restart` stopped and
    /// started again at once, as an operator's `restart` would (the kubelet restarts a
    /// container whose state it cannot know rather than trust it). False when that run is not
    /// running (any more).
    pub(in crate::core) fn output_lost(
        &mut self,
        generation: Generation,
        restart: bool,
        pod: &str,
        out: &mut Out,
    ) -> bool {
        let pid = match &self.state {
            SlotState::Running { pid, .. } if self.generation == generation => *pid,
            _ => return false,
        };
        self.output_lost = true;
        let name = self.spec.name.clone();
        let then = if restart {
            "restarting it (on_output_lost = \"restart\")"
        } else {
            "it runs on, its writes to stdout and stderr fail (on_output_lost = \"keep\")"
        };
        out.event(
            EventType::Warning,
            EventReason::OutputLost,
            pod,
            &name,
            format!(
                "The output pipes of container {name} (pid {pid}) were lost in a crash of vigil: \
                 what it writes cannot be read; {then}"
            ),
        );
        if restart {
            self.begin_stop(
                StopCause::Request {
                    message: MSG_OUTPUT_LOST.to_string(),
                    then_start: true,
                },
                pod,
                out,
            );
        }
        true
    }
}

impl Pod {
    /// A container of this pod is being adopted from an earlier vigil (`Supervisor::adopt`):
    /// the pod had begun under that vigil — its dependencies were met and its init containers
    /// had completed, or regular containers would not run — so it moves straight to its
    /// regular containers: plain init containers are recorded as completed then (not run
    /// again), sidecars and the other regular containers start now unless adopted too.
    /// Only while nothing of the pod has run under this vigil yet; returns the keys whose
    /// queued `Spawn` the caller must drop, or `None` when it cannot be done.
    pub(in crate::core) fn skip_to_main_for_adoption(
        &mut self,
        out: &mut Out,
    ) -> Option<Vec<ContainerKey>> {
        self.skip_to_stage(Stage::Main, out)
    }

    /// [`Pod::skip_to_main_for_adoption`] to any stage it had reached under an earlier vigil:
    /// the plain init containers before `stage` are recorded as completed then (not run
    /// again), the sidecars before it start now unless adopted, and so does the step itself
    /// (init container `i`, or every regular container not adopted). Only while nothing of
    /// the pod has run under this vigil yet, and only forward; returns the keys whose queued
    /// `Spawn` the caller must drop, or `None` when it cannot be done.
    pub(in crate::core) fn skip_to_stage(
        &mut self,
        stage: Stage,
        out: &mut Out,
    ) -> Option<Vec<ContainerKey>> {
        let upto = match stage {
            Stage::Waiting => return Some(Vec::new()),
            Stage::Init(i) => i.min(self.init.len()),
            Stage::Main => self.init.len(),
        };
        let reached = match self.stage {
            Stage::Waiting => 0,
            Stage::Init(i) => i,
            Stage::Main => self.init.len() + 1,
        };
        let target = match stage {
            Stage::Main => self.init.len() + 1,
            _ => upto,
        };
        if reached >= target {
            return Some(Vec::new());
        }
        let untouched = |s: &Slot| {
            s.runs <= 1
                && matches!(
                    s.state,
                    SlotState::NotStarted { .. }
                        | SlotState::Creating {
                            pending: None,
                            force_kill: false,
                        }
                )
        };
        if out.shutting_down || !self.slots().all(untouched) {
            return None;
        }
        let name = self.spec.name.clone();
        let mut dropped = Vec::new();
        for slot in self.init.iter_mut().take(upto) {
            if slot.sidecar() {
                if !slot.is_active() {
                    slot.spawn(&name, out);
                }
                continue;
            }
            if slot.is_active() {
                dropped.push(slot.key);
            }
            slot.state = SlotState::Done(Terminated {
                exit_code: 0,
                signal: None,
                reason: TerminationReason::Completed,
                message: MSG_COMPLETED_BEFORE.to_string(),
                started_at: None,
                finished_at: out.now,
            });
        }
        if upto < self.init.len() {
            self.stage = Stage::Init(upto);
            if !self.init[upto].is_active() {
                self.init[upto].spawn(&name, out);
            }
            return Some(dropped);
        }
        self.stage = Stage::Main;
        for slot in self.main.iter_mut() {
            if !slot.is_active() {
                slot.spawn(&name, out);
            }
        }
        Some(dropped)
    }
}
