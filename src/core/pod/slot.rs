//! A slot's state read and set in place: what it is (active, done, ready, sidecar), whether
//! it failed for the pod's phase, and the waiting states it is put in before a run.
//!
//! Owns the small questions the pod and the supervisor ask of a slot. Must not start, stop or
//! conclude a run (`start.rs`, `stop.rs`, `exit.rs`): nothing here pushes an action.

use super::*;

impl Slot {
    pub(in crate::core) fn new(
        key: ContainerKey,
        spec: Arc<ContainerSpec>,
        init: bool,
        reason: WaitingReason,
        message: String,
    ) -> Slot {
        let probes = ProbeKind::ALL
            .iter()
            .filter_map(|&k| probe_spec(&spec, k).map(|p| Probe::new(k, Arc::new(p.clone()))))
            .collect();
        Slot {
            key,
            spec,
            init,
            generation: 0,
            state: SlotState::NotStarted { reason, message },
            last_state: None,
            restart_count: 0,
            auto_restarts: 0,
            runs: 0,
            backoff: BackoffState::default(),
            probes,
            started: false,
            oom_kills: 0,
            run_oom_seen: 0,
            hook: None,
            output_lost: false,
            notify: NotifyStatus::default(),
            watchdog_at: None,
            start_deadline: None,
        }
    }

    pub(in crate::core) fn name(&self) -> &str {
        &self.spec.name
    }

    /// A process exists or is being created.
    pub(in crate::core) fn is_active(&self) -> bool {
        matches!(
            self.state,
            SlotState::Creating { .. } | SlotState::Running { .. }
        )
    }

    /// The run has ended and nothing will restart it on its own (stopped, completed, failed).
    pub(in crate::core) fn is_done(&self) -> bool {
        matches!(self.state, SlotState::Done(_))
    }

    pub(in crate::core) fn is_running_started(&self) -> bool {
        matches!(self.state, SlotState::Running { .. }) && self.started
    }

    /// A sidecar: an init container whose own `restart_policy` is `Always` (Kubernetes 1.29
    /// restartable init container, `podutil.IsRestartableInitContainer`).
    pub(in crate::core) fn sidecar(&self) -> bool {
        self.init && self.spec.restart_policy == RestartPolicy::Always
    }

    /// A stop was asked for and is under way (signal sent, or asked for while creating).
    pub(in crate::core) fn stop_requested(&self) -> bool {
        match &self.state {
            SlotState::Running { stopping, .. } => stopping.is_some(),
            SlotState::Creating { pending, .. } => matches!(
                pending,
                Some(StopCause::Request { .. } | StopCause::Shutdown | StopCause::Deadline { .. })
            ),
            _ => false,
        }
    }

    /// Kubelet `prober/prober_manager.go` UpdatePodStatus: a regular container is ready when it runs,
    /// has started and its readiness probe (if any) published Success; an init container is
    /// ready once it has terminated with success, and not before; a sidecar is ready like a
    /// regular container.
    pub(in crate::core) fn ready(&self) -> bool {
        if self.init && !self.sidecar() {
            return self.done_completed();
        }
        // Not ready from the moment a stop begins (kubelet: a terminating pod is removed from
        // endpoints at once), not only once it has exited.
        if matches!(
            self.state,
            SlotState::Running {
                stopping: Some(_),
                ..
            }
        ) {
            return false;
        }
        self.is_running_started()
            && self
                .probes
                .iter()
                .filter(|p| p.kind == ProbeKind::Readiness)
                .all(|p| p.result == ProbeResultState::Success)
            && self.notified_ready()
    }

    /// Whether a termination with this reason counts as a failure for the pod phase.
    pub(super) fn phase_failure(reason: TerminationReason) -> bool {
        !matches!(
            reason,
            TerminationReason::Completed | TerminationReason::Stopped
        )
    }

    pub(in crate::core) fn done_failed(&self) -> Option<bool> {
        match &self.state {
            SlotState::Done(t) => Some(Self::phase_failure(t.reason)),
            _ => None,
        }
    }

    pub(in crate::core) fn done_completed(&self) -> bool {
        matches!(&self.state, SlotState::Done(t) if t.reason == TerminationReason::Completed)
    }

    pub(in crate::core) fn has_run(&self) -> bool {
        self.runs > 0
    }

    /// Whether it is in, or about to be in, another run (running, creating a restart, or
    /// backing off).
    pub(in crate::core) fn live_or_restarting(&self) -> bool {
        match self.state {
            SlotState::Running { .. } | SlotState::BackOff { .. } => true,
            SlotState::Creating { .. } => self.runs > 1,
            _ => false,
        }
    }

    pub(in crate::core) fn set_waiting(&mut self, reason: WaitingReason, message: String) {
        if let SlotState::NotStarted { .. } = self.state {
            self.state = SlotState::NotStarted { reason, message };
        }
    }

    /// Not started again until the pod gets to it (an operator start waiting for
    /// dependencies, a pod restart): a finished run becomes the last state. A slot that runs,
    /// is being created or backs off is left alone.
    pub(in crate::core) fn await_start(&mut self, reason: WaitingReason, message: String) {
        match &self.state {
            SlotState::Done(t) => {
                // A synthetic "stopped before it ran again" record is not a run worth keeping.
                if !(t.reason == TerminationReason::Stopped && t.started_at.is_none()) {
                    self.last_state = Some(t.clone());
                }
            }
            SlotState::NotStarted { .. } => {}
            _ => return,
        }
        self.state = SlotState::NotStarted { reason, message };
    }

    /// Forget back-off history and the restart budget (operator start/restart).
    pub(in crate::core) fn fresh(&mut self) {
        self.backoff.reset();
        self.auto_restarts = 0;
    }
}
