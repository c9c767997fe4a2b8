//! Status projection (kubelet `status/generate.go`, `kubelet_pods.go` getPhase): a slot's
//! `ContainerStatus`, the pod's phase, its conditions (`PodScheduled`, `Initialized`,
//! `ContainersReady`, `Ready`) and its `PodStatus`.
//!
//! Owns reading slots into the status types of `core/status.rs`. Must not change a slot
//! (conditions are the one thing it records, with their transition times) nor push actions.

use super::*;

impl Slot {
    pub(in crate::core) fn status(&self, pod: &str) -> ContainerStatus {
        let (state, pid) = match &self.state {
            SlotState::NotStarted { reason, message } => (
                ContainerState::Waiting {
                    reason: *reason,
                    message: message.clone(),
                },
                None,
            ),
            SlotState::Creating { .. } => (
                ContainerState::Waiting {
                    reason: WaitingReason::ContainerCreating,
                    message: String::new(),
                },
                None,
            ),
            SlotState::Running {
                pid,
                started_at,
                stopping,
            } => (
                ContainerState::Running {
                    started_at: *started_at,
                    terminating: stopping.as_ref().map(Stopping::status),
                },
                Some(*pid),
            ),
            SlotState::BackOff { delay, .. } => (
                ContainerState::Waiting {
                    reason: WaitingReason::CrashLoopBackOff,
                    message: format!(
                        "back-off {} restarting failed container={} pod={pod}",
                        go_duration(*delay),
                        self.spec.name
                    ),
                },
                None,
            ),
            SlotState::Done(t) => (ContainerState::Terminated(t.clone()), None),
        };
        ContainerStatus {
            key: self.key,
            name: self.spec.name.clone(),
            ready: self.ready(),
            started: self.is_running_started(),
            restart_count: self.restart_count,
            pid,
            state,
            last_state: self.last_state.clone(),
            probes: self.probes.iter().map(|p| p.status()).collect(),
            oom_kills: self.oom_kills,
            backoff_until: match &self.state {
                SlotState::BackOff { until, .. } => Some(*until),
                _ => None,
            },
            spec: self.spec.clone(),
            output_lost: self.output_lost && matches!(self.state, SlotState::Running { .. }),
            notify: self.spec.notify.then(|| self.notify.clone()),
        }
    }
}

impl Pod {
    pub(in crate::core) fn phase(&self) -> Phase {
        match self.stage {
            Stage::Waiting if self.refused.is_some() => Phase::Failed,
            Stage::Waiting => Phase::Pending,
            // An init container that will not run again (failed under Never, or was
            // stopped) means the pod cannot proceed.
            Stage::Init(i) => match self.init[i].done_failed() {
                Some(_) if !self.init[i].done_completed() => Phase::Failed,
                _ => Phase::Pending,
            },
            Stage::Main => {
                if self.main.iter().all(|s| s.done_failed().is_some()) {
                    if self.main.iter().any(|s| s.done_failed() == Some(true)) {
                        Phase::Failed
                    } else {
                        Phase::Succeeded
                    }
                } else if self
                    .main
                    .iter()
                    .any(|s| s.live_or_restarting() || (s.done_failed().is_some() && s.has_run()))
                {
                    Phase::Running
                } else {
                    Phase::Pending
                }
            }
        }
    }

    /// Why this pod cannot run again on its own, for its dependents' `DependencyFailed`
    /// message: refused at start, or `Failed` (a container failed and will not restart);
    /// `None` while it may still get there without an operator or a reload.
    pub(in crate::core) fn cannot_recover(&self) -> Option<String> {
        let name = self.name();
        if let Some(why) = &self.refused {
            return Some(format!("pod {name} was refused at start ({why})"));
        }
        if self.next != Next::Keep || self.phase() != Phase::Failed {
            return None;
        }
        let failed = self.slots().find_map(|s| match &s.state {
            SlotState::Done(t) if Slot::phase_failure(t.reason) => Some((s.name(), t)),
            _ => None,
        });
        Some(match failed {
            Some((c, t)) => format!(
                "pod {name} failed and will not run again (container {c}: {}, exit code {})",
                t.reason.as_str(),
                t.exit_code
            ),
            None => format!("pod {name} failed and will not run again"),
        })
    }

    /// Every regular container is running and started (dependency condition `started`).
    pub(in crate::core) fn all_started(&self) -> bool {
        self.main.iter().all(Slot::is_running_started)
    }

    pub(in crate::core) fn initialized(&self) -> bool {
        self.stage == Stage::Main || self.init.is_empty()
    }

    pub(super) fn set_condition(
        &mut self,
        kind: ConditionType,
        status: bool,
        reason: &str,
        message: String,
        now: Time,
    ) {
        if let Some(c) = self.conditions.iter_mut().find(|c| c.kind == kind) {
            if c.status != status {
                c.last_transition = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message;
        }
    }

    /// Kubelet `status/generate.go`: GeneratePodInitializedCondition (a Succeeded pod's
    /// `Initialized` says `PodCompleted`), GenerateContainersReadyCondition and
    /// GeneratePodReadyCondition (a terminal phase makes both false with `PodCompleted` or
    /// `PodFailed`, whatever the containers say).
    pub(in crate::core) fn update_conditions(&mut self, now: Time) {
        let phase = self.phase();
        if phase == Phase::Succeeded {
            self.set_condition(
                ConditionType::Initialized,
                true,
                "PodCompleted",
                String::new(),
                now,
            );
        } else if self.initialized() {
            self.set_condition(ConditionType::Initialized, true, "", String::new(), now);
        } else {
            let incomplete: Vec<&str> = self
                .init
                .iter()
                .filter(|s| {
                    if s.sidecar() {
                        !s.is_running_started()
                    } else {
                        !s.done_completed()
                    }
                })
                .map(Slot::name)
                .collect();
            let message = format!(
                "containers with incomplete status: [{}]",
                incomplete.join(" ")
            );
            self.set_condition(
                ConditionType::Initialized,
                false,
                "ContainersNotInitialized",
                message,
                now,
            );
        }
        // Sidecars count for readiness (GenerateContainersReadyCondition), listed first.
        let unready: Vec<String> = self
            .init
            .iter()
            .filter(|s| s.sidecar())
            .chain(self.main.iter())
            .filter(|s| !s.ready())
            .map(|s| s.name().to_string())
            .collect();
        let (status, reason, message) = match phase {
            Phase::Succeeded => (false, "PodCompleted", String::new()),
            Phase::Failed => (false, "PodFailed", String::new()),
            _ if self.blocked.is_some() => (
                false,
                "DependencyFailed",
                self.blocked.clone().unwrap_or_default(),
            ),
            _ if unready.is_empty() => (true, "", String::new()),
            _ => (
                false,
                "ContainersNotReady",
                format!("containers with unready status: [{}]", unready.join(" ")),
            ),
        };
        self.set_condition(
            ConditionType::ContainersReady,
            status,
            reason,
            message.clone(),
            now,
        );
        self.set_condition(ConditionType::Ready, status, reason, message, now);
    }

    pub(in crate::core) fn ready(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.kind == ConditionType::Ready && c.status)
    }

    pub(in crate::core) fn status(&self) -> PodStatus {
        let name = self.name();
        PodStatus {
            name: name.to_string(),
            phase: self.phase(),
            restart_policy: self.spec.restart_policy,
            conditions: self.conditions.clone(),
            init_containers: self.init.iter().map(|s| s.status(name)).collect(),
            containers: self.main.iter().map(|s| s.status(name)).collect(),
            created_at: self.created_at,
            schedule: None,
            runs: self.history.runs().cloned().collect(),
            rollout: None,
        }
    }
}
