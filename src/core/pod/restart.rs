//! The restart decision: after a run ended, whether the container runs again (`restart`
//! policy, `max_restarts`, an operator's restart, shutdown), at once or after the crash-loop
//! back-off (`core/backoff.rs`; kubelet `kuberuntime_manager.go` computePodActions,
//! doBackOff).
//!
//! Owns the step from a concluded run to `BackOff`, `Creating` or `Done`. Must not name the
//! end's reason (`exit.rs`) nor stop a running container (`stop.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Slot {
    /// A run ended: decide between terminated, back-off and an immediate restart.
    pub(super) fn conclude(
        &mut self,
        term: Terminated,
        cause: Option<StopCause>,
        pod: &str,
        out: &mut Out,
    ) {
        self.conclude_with(term, cause, None, pod, out);
    }

    /// [`Slot::conclude`], with what a `Completed` run left behind for its event.
    pub(super) fn conclude_with(
        &mut self,
        term: Terminated,
        cause: Option<StopCause>,
        left: Option<String>,
        pod: &str,
        out: &mut Out,
    ) {
        self.hold_probes(out);
        self.cancel_hook(out);
        self.started = false;
        if term.started_at.is_some() {
            let name = self.spec.name.clone();
            // One event per run that ended, before any restart's `Started` (docs/behaviour.md
            // §5.4): Normal for a clean exit or a stop vigil asked for, Warning otherwise.
            let kind = match term.reason {
                _ if left.is_some() => EventType::Warning,
                TerminationReason::Completed | TerminationReason::Stopped => EventType::Normal,
                _ => EventType::Warning,
            };
            let mut message = match &left {
                Some(left) => format!("Container {name} exited: Completed, but {left}"),
                None => format!(
                    "Container {name} exited: {}, {}",
                    term.reason.as_str(),
                    exit_desc(term.exit_code, term.signal)
                ),
            };
            let plain = term.message.starts_with("exited with code ")
                || term.message.starts_with("killed by signal ");
            let shown = one_line(&term.message);
            if left.is_none() && !shown.is_empty() && !plain && shown.len() <= 200 {
                message.push_str(&format!(" ({shown})"));
            }
            out.event(kind, EventReason::Exited, pod, &name, message);
        }
        match &cause {
            Some(StopCause::Request {
                then_start: true, ..
            }) if !out.shutting_down => {
                self.last_state = Some(term);
                self.fresh();
                self.spawn(pod, out);
                return;
            }
            Some(StopCause::Request { .. } | StopCause::Shutdown | StopCause::Deadline { .. }) => {
                self.state = SlotState::Done(term);
                return;
            }
            _ => {}
        }
        if out.shutting_down {
            self.state = SlotState::Done(term);
            return;
        }
        let failure = term.reason != TerminationReason::Completed;
        let restart = if self.init && !self.sidecar() {
            failure && self.spec.restart_policy != RestartPolicy::Never
        } else {
            match self.spec.restart_policy {
                RestartPolicy::Always => true,
                RestartPolicy::OnFailure => failure,
                RestartPolicy::Never => false,
            }
        };
        if !restart {
            self.state = SlotState::Done(term);
            return;
        }
        let name = self.spec.name.clone();
        if let Some(limit) = self.spec.max_restarts
            && self.auto_restarts >= limit
        {
            out.event(
                EventType::Warning,
                EventReason::RestartLimitExceeded,
                pod,
                &name,
                format!("Container {name} reached its restart limit ({limit}); not restarting"),
            );
            let message = format!(
                "restart limit {limit} reached; last exit: {} {}",
                term.reason.as_str(),
                exit_desc(term.exit_code, term.signal)
            );
            self.state = SlotState::Done(Terminated {
                reason: TerminationReason::RestartLimitExceeded,
                message,
                ..term
            });
            return;
        }
        let delay = self
            .backoff
            .delay_after(&self.spec.backoff, term.finished_at);
        let until = later(term.finished_at, delay);
        self.last_state = Some(term);
        if until <= out.now {
            self.restart_now(pod, out);
        } else {
            out.event(
                EventType::Warning,
                EventReason::BackOff,
                pod,
                &name,
                format!("Back-off restarting failed container {name} in pod {pod}"),
            );
            self.state = SlotState::BackOff { until, delay };
        }
    }

    /// The automatic restart (back-off elapsed or none needed).
    pub(super) fn restart_now(&mut self, pod: &str, out: &mut Out) {
        let finished = self
            .last_state
            .as_ref()
            .map(|t| t.finished_at)
            .unwrap_or(out.now);
        self.backoff
            .record_restart(&self.spec.backoff, finished, out.now);
        self.auto_restarts += 1;
        self.spawn(pod, out);
    }

    /// Start now from a non-active state with fresh back-off (operator start).
    /// Returns false when it is already active.
    pub(in crate::core) fn start_fresh(&mut self, pod: &str, out: &mut Out) -> bool {
        if self.is_active() {
            return false;
        }
        self.fresh();
        self.spawn(pod, out);
        true
    }
}
