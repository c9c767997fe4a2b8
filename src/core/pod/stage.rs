//! A pod's stage: made from its definition, held until its dependencies are met, its init
//! containers one after another, then its regular containers (kubelet
//! `kuberuntime_manager.go` computePodActions); refused at start, resumed, or started over by
//! an operator's restart.
//!
//! Owns the `Stage` and the steps between stages. Must not decide whether dependencies are met
//! (the supervisor's gate) nor what a slot does once started (`start.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Pod {
    pub(in crate::core) fn new(spec: PodSpec, now: Time, next_key: &mut u32) -> Pod {
        let mut key = || {
            *next_key += 1;
            ContainerKey(*next_key)
        };
        let init = spec
            .init_containers
            .iter()
            .map(|c| {
                Slot::new(
                    key(),
                    c.clone(),
                    true,
                    WaitingReason::PodInitializing,
                    String::new(),
                )
            })
            .collect();
        // A scheduled pod waits for its first trigger (`core::schedule`).
        let scheduled = spec.schedule.is_some();
        let waits = || match scheduled {
            true => MSG_AWAITING_SCHEDULE.to_string(),
            false => String::new(),
        };
        let main = spec
            .containers
            .iter()
            .map(|c| {
                Slot::new(
                    key(),
                    c.clone(),
                    false,
                    WaitingReason::PodInitializing,
                    waits(),
                )
            })
            .collect();
        let mut pod = Pod {
            spec,
            created_at: now,
            init,
            main,
            stage: Stage::Waiting,
            held: scheduled,
            awaiting: false,
            restart_pending: false,
            refused: None,
            blocked: None,
            next: Next::Keep,
            shutdown_initiated: false,
            sidecar_stop: None,
            stop_deadline: None,
            active_since: None,
            deadline_exceeded: false,
            schedule: None,
            history: Default::default(),
            followed: Default::default(),
            conditions: vec![
                condition(ConditionType::Initialized, now),
                condition(ConditionType::ContainersReady, now),
                condition(ConditionType::Ready, now),
            ],
        };
        if !pod.spec.autostart {
            pod.leave_unstarted();
        }
        pod.update_conditions(now);
        pod
    }

    /// The selection leaves this pod out (`autostart` false after `config::select`): it is
    /// held before it begins, its containers `NotStarted` until an operator `start`.
    fn leave_unstarted(&mut self) {
        self.held = true;
        for s in self.init.iter_mut().chain(self.main.iter_mut()) {
            s.set_waiting(WaitingReason::NotStarted, MSG_NOT_STARTED.to_string());
        }
    }

    /// Left out by the selection and not started since (see [`Pod::leave_unstarted`]).
    pub(in crate::core) fn unstarted(&self) -> bool {
        self.held
            && self.stage == Stage::Waiting
            && self.slots().all(|s| {
                matches!(
                    s.state,
                    SlotState::NotStarted {
                        reason: WaitingReason::NotStarted,
                        ..
                    }
                )
            })
    }

    pub(in crate::core) fn name(&self) -> &str {
        &self.spec.name
    }

    /// What `shutdown_on` exits with: the exit code of the first container, init containers
    /// first, whose last run failed (128+signal for a signal; 1 for a failure that carries
    /// no code), else 0.
    pub(in crate::core) fn exit_code(&self) -> i32 {
        self.slots()
            .find_map(|s| match &s.state {
                SlotState::Done(t) if Slot::phase_failure(t.reason) => {
                    Some(if (1..=255).contains(&t.exit_code) {
                        t.exit_code
                    } else {
                        1
                    })
                }
                _ => None,
            })
            .unwrap_or(0)
    }

    /// When this run has ended (the phase is `Succeeded` or `Failed`) and the pod keeps
    /// runs (`history`): records it once (`core::history`), with the container that made it
    /// fail, if one did.
    pub(in crate::core) fn record_ended_run(&mut self, now: Time) {
        let limits = self.spec.history;
        if limits.successful == 0 && limits.failed == 0 {
            return;
        }
        if !self.history.wants() || !matches!(self.phase(), Phase::Succeeded | Phase::Failed) {
            return;
        }
        let failure = self.slots().find_map(|s| match &s.state {
            SlotState::Done(t) if Slot::phase_failure(t.reason) => {
                Some(crate::core::history::RunFailure {
                    container: s.name().to_string(),
                    reason: t.reason,
                    exit_code: t.exit_code,
                })
            }
            _ => None,
        });
        self.history.record(now, failure, limits);
    }

    /// Some container's last run was ended by vigil on request or at shutdown (`Stopped`).
    pub(in crate::core) fn stopped_by_request(&self) -> bool {
        self.slots().any(
            |s| matches!(&s.state, SlotState::Done(t) if t.reason == TerminationReason::Stopped),
        )
    }

    pub(in crate::core) fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.init.iter().chain(self.main.iter())
    }

    pub(in crate::core) fn any_active(&self) -> bool {
        self.slots().any(Slot::is_active)
    }

    pub(in crate::core) fn keys(&self) -> Vec<ContainerKey> {
        self.slots().map(|s| s.key).collect()
    }

    /// Leave `Waiting`: first init container, or all regular containers.
    pub(in crate::core) fn begin(&mut self, out: &mut Out) {
        self.advance_to(0, out);
    }

    /// Refuse the pod before it began: every container terminates with `StartError` and `why`
    /// (a Warning `FailedCreatePodContainer` event each), and the pod is `Failed` for good.
    pub(in crate::core) fn refuse(&mut self, why: &str, out: &mut Out) {
        self.refused = Some(why.to_string());
        self.held = true;
        let name = self.spec.name.clone();
        for s in self.init.iter_mut().chain(self.main.iter_mut()) {
            let container = s.name().to_string();
            out.event(
                EventType::Warning,
                EventReason::FailedCreatePodContainer,
                &name,
                &container,
                format!("unable to give pod {name} its limits: {why}"),
            );
            s.state = SlotState::Done(Terminated {
                exit_code: 128,
                signal: None,
                reason: TerminationReason::StartError,
                message: why.to_string(),
                started_at: None,
                finished_at: out.now,
            });
        }
    }

    /// Nothing runs, is being created or waits in back-off: what an operator `start` of the
    /// whole pod gates on its dependencies.
    pub(in crate::core) fn at_rest(&self) -> bool {
        self.slots()
            .all(|s| matches!(s.state, SlotState::NotStarted { .. } | SlotState::Done(_)))
    }

    /// An operator `start` of a pod at rest whose dependencies are unmet: the containers
    /// [`Pod::resume`] would start show `WaitingForDependencies` (their last run kept as the
    /// last state) until the supervisor resumes the pod.
    pub(in crate::core) fn await_deps(&mut self) {
        let upto = match self.stage {
            Stage::Waiting => return,
            Stage::Init(i) => i,
            Stage::Main => self.init.len(),
        };
        self.awaiting = true;
        let reason = WaitingReason::WaitingForDependencies;
        for s in self.init.iter_mut().take(upto).filter(|s| s.sidecar()) {
            s.await_start(reason, String::new());
        }
        match self.stage {
            Stage::Init(i) => self.init[i].await_start(reason, String::new()),
            _ => {
                for s in self.main.iter_mut() {
                    s.await_start(reason, String::new());
                }
            }
        }
    }

    /// An operator `start` of a pod that has begun: the current step runs again — the init
    /// container at its step, or every regular container not running — with the stopped
    /// sidecars it runs beside (back-off history and restart budget reset).
    pub(in crate::core) fn resume(&mut self, out: &mut Out) {
        self.awaiting = false;
        self.active_since = Some(out.now);
        self.history.begun(out.now);
        self.deadline_exceeded = false;
        let name = self.spec.name.clone();
        match self.stage {
            Stage::Waiting => self.begin(out),
            Stage::Init(i) => {
                self.revive_sidecars(i, out);
                self.init[i].start_fresh(&name, out);
            }
            Stage::Main => {
                self.revive_sidecars(self.init.len(), out);
                for slot in self.main.iter_mut() {
                    slot.start_fresh(&name, out);
                }
            }
        }
    }

    /// A pending whole-pod `restart` once nothing runs: back to `Waiting` with every container
    /// not started (its last run kept as the last state, back-off and budget reset), so the
    /// pod waits for its dependencies and runs its init containers again, as a new pod would.
    /// Keys, restart counts and logs are kept.
    pub(in crate::core) fn reset_for_restart(&mut self) {
        self.restart_pending = false;
        self.awaiting = false;
        self.held = false;
        self.sidecar_stop = None;
        self.stop_deadline = None;
        self.active_since = None;
        self.deadline_exceeded = false;
        self.stage = Stage::Waiting;
        for s in self.init.iter_mut().chain(self.main.iter_mut()) {
            s.await_start(WaitingReason::PodInitializing, String::new());
            s.fresh();
        }
    }

    /// Run init container `i`, or the regular containers once `i` is past the last init.
    pub(in crate::core) fn advance_to(&mut self, i: usize, out: &mut Out) {
        if out.shutting_down {
            return;
        }
        let name = self.spec.name.clone();
        if i < self.init.len() {
            self.stage = Stage::Init(i);
            for s in self.init.iter_mut().skip(i + 1).chain(self.main.iter_mut()) {
                s.set_waiting(WaitingReason::PodInitializing, String::new());
            }
            self.init[i].spawn(&name, out);
        } else {
            self.stage = Stage::Main;
            for s in self.main.iter_mut() {
                if !s.is_active() {
                    s.spawn(&name, out);
                }
            }
        }
    }

    /// After an init slot changed: move on once it completed or, for a sidecar, once it has
    /// started (kubelet `kuberuntime_manager.go` computePodActions: the next init container
    /// starts when a restartable one is started — startup probe passed, or running without
    /// one — and the sidecar keeps running).
    pub(in crate::core) fn after_init(&mut self, i: usize, out: &mut Out) {
        if self.stage != Stage::Init(i) || self.sidecar_stop.is_some() {
            return;
        }
        let slot = &self.init[i];
        let done = if slot.sidecar() {
            slot.is_running_started()
        } else {
            slot.done_completed()
        };
        if done {
            self.advance_to(i + 1, out);
        }
    }
}
