//! Health: whether a pod is where it should be — Ready, or Completed — and if not, why, in one
//! word and one sentence (docs/behaviour.md §5.6). What `vigil health`, `vigil wait` and the
//! metrics listener's `/readyz` and `/healthz` answer from.
//!
//! Owns the verdict of one pod ([`judge`]) and which pods are expected to run (left out by the
//! selection, stopped by the operator, a schedule suspended or waiting for its first trigger
//! are not). It reads a pod's slots in place: a healthy pod costs a look at its phase and its
//! `Ready` condition, no status snapshot. Must not change anything or read the clock.

use super::pod::{Pod, SlotState};
use super::{ConditionType, Phase, TerminationReason, WaitingReason};

/// Where a pod stands for a health check. `Ready` and `Completed` are healthy; the rest say
/// what it is waiting for or what went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthState {
    /// Its `Ready` condition is true.
    Ready,
    /// It ran to completion (phase `Succeeded`, not by an operator's stop).
    Completed,
    /// Left out of this run by the selection (`autostart`, `profiles`, the pods named at run).
    NotStarted,
    /// Stopped by the operator (`vigil stop`).
    Stopped,
    /// A schedule suspended (`suspend = true`, or `vigil stop`).
    Suspended,
    /// A scheduled pod whose first trigger has not come yet.
    AwaitingSchedule,
    /// A container waits for its process to exist.
    ContainerCreating,
    /// Init containers are running.
    PodInitializing,
    /// A container waits out its restart back-off.
    CrashLoopBackOff,
    /// The pod waits for its `depends_on`.
    WaitingForDependencies,
    /// The pod waits on a dependency that cannot get there on its own.
    DependencyFailed,
    /// A container runs and its startup probe has not passed yet.
    Starting,
    /// A container runs and its readiness probe has not passed.
    NotReady,
    /// A container is being stopped.
    Terminating,
    /// A container has ended and its pod runs on without it.
    Terminated,
    /// The pod failed (phase `Failed`): it will not run again on its own.
    Failed,
}

impl HealthState {
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Ready => "Ready",
            HealthState::Completed => "Completed",
            HealthState::NotStarted => "NotStarted",
            HealthState::Stopped => "Stopped",
            HealthState::Suspended => "Suspended",
            HealthState::AwaitingSchedule => "AwaitingSchedule",
            HealthState::ContainerCreating => "ContainerCreating",
            HealthState::PodInitializing => "PodInitializing",
            HealthState::CrashLoopBackOff => "CrashLoopBackOff",
            HealthState::WaitingForDependencies => "WaitingForDependencies",
            HealthState::DependencyFailed => "DependencyFailed",
            HealthState::Starting => "Starting",
            HealthState::NotReady => "NotReady",
            HealthState::Terminating => "Terminating",
            HealthState::Terminated => "Terminated",
            HealthState::Failed => "Failed",
        }
    }

    /// Ready or Completed.
    pub fn healthy(self) -> bool {
        matches!(self, HealthState::Ready | HealthState::Completed)
    }

    /// The pod will not get better by waiting (`/healthz`'s liveness): it failed, crash-loops,
    /// or waits on a dependency that failed.
    pub fn broken(self) -> bool {
        matches!(
            self,
            HealthState::Failed | HealthState::CrashLoopBackOff | HealthState::DependencyFailed
        )
    }

    fn of_waiting(reason: WaitingReason) -> HealthState {
        match reason {
            WaitingReason::ContainerCreating => HealthState::ContainerCreating,
            WaitingReason::PodInitializing => HealthState::PodInitializing,
            WaitingReason::CrashLoopBackOff => HealthState::CrashLoopBackOff,
            WaitingReason::WaitingForDependencies => HealthState::WaitingForDependencies,
            WaitingReason::DependencyFailed => HealthState::DependencyFailed,
            WaitingReason::NotStarted => HealthState::NotStarted,
        }
    }
}

/// One pod's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodHealth {
    pub name: String,
    /// The pod should be running: not left out by the selection, not stopped by the operator,
    /// its schedule (if any) neither suspended nor waiting for its first trigger. `vigil
    /// health` without names judges only these.
    pub expected: bool,
    pub state: HealthState,
    /// What `state` is about: `pod/container`, or the pod.
    pub object: String,
    /// Why, in one line (empty when healthy).
    pub message: String,
    /// Nothing of the pod runs, is being created or waits in back-off (`vigil wait
    /// --for=stopped`).
    pub at_rest: bool,
}

/// The health of `pod`.
pub(super) fn judge(pod: &Pod) -> PodHealth {
    let name = pod.name().to_string();
    let at_rest = pod.at_rest() && !pod.restart_pending;
    let verdict = |state: HealthState, object: String, message: String, expected: bool| PodHealth {
        name: name.clone(),
        expected,
        state,
        object,
        message,
        at_rest,
    };
    let phase = pod.phase();
    let schedule = pod.spec.schedule.as_ref().map(|_| pod.schedule.as_ref());
    // Not expected to run: left out, stopped by the operator, a schedule at rest.
    if pod.refused.is_none() {
        if pod.unstarted() {
            return verdict(
                HealthState::NotStarted,
                name.clone(),
                "not started in this run (autostart, profiles or the pods named at run)".into(),
                false,
            );
        }
        if let Some(state) = schedule
            && at_rest
            && !pod.awaiting
        {
            if state.is_some_and(|s| s.suspended) {
                return verdict(
                    HealthState::Suspended,
                    name.clone(),
                    "its schedule is suspended".into(),
                    false,
                );
            }
            if state.is_none_or(|s| s.last_schedule.is_none()) && !pod.slots().any(|s| s.has_run())
            {
                return verdict(
                    HealthState::AwaitingSchedule,
                    name.clone(),
                    "waiting for its first scheduled run".into(),
                    false,
                );
            }
        }
        if at_rest && !pod.awaiting && (pod.held || pod.stopped_by_request()) {
            return verdict(
                HealthState::Stopped,
                name.clone(),
                "stopped by request".into(),
                false,
            );
        }
    }
    if phase == Phase::Succeeded {
        return verdict(HealthState::Completed, name.clone(), String::new(), true);
    }
    if pod.ready() {
        return verdict(HealthState::Ready, name.clone(), String::new(), true);
    }
    if let Some(why) = &pod.refused {
        return verdict(
            HealthState::Failed,
            name.clone(),
            format!("refused at start: {why}"),
            true,
        );
    }
    if phase == Phase::Failed {
        let failed = pod.slots().find_map(|s| match &s.state {
            SlotState::Done(t) if t.reason != TerminationReason::Completed => Some((s.name(), t)),
            _ => None,
        });
        return match failed {
            Some((c, t)) => verdict(
                HealthState::Failed,
                format!("{name}/{c}"),
                terminated_message(t),
                true,
            ),
            None => verdict(HealthState::Failed, name.clone(), "failed".into(), true),
        };
    }
    if let Some(why) = &pod.blocked {
        return verdict(
            HealthState::DependencyFailed,
            name.clone(),
            why.clone(),
            true,
        );
    }
    // The first container that keeps the pod from being ready, in the order it starts.
    for s in pod
        .slots()
        .filter(|s| !s.init || s.sidecar() || !s.done_completed())
    {
        if s.ready() {
            continue;
        }
        let object = format!("{name}/{}", s.name());
        let (state, message) = match &s.state {
            SlotState::NotStarted { reason, message } => {
                (HealthState::of_waiting(*reason), message.clone())
            }
            SlotState::Creating { .. } => (
                HealthState::ContainerCreating,
                "its process is being started".to_string(),
            ),
            SlotState::BackOff { delay, .. } => (
                HealthState::CrashLoopBackOff,
                format!(
                    "back-off {} restarting failed container",
                    crate::format::go_duration(*delay)
                ),
            ),
            SlotState::Running {
                stopping: Some(_), ..
            } => (HealthState::Terminating, "it is being stopped".to_string()),
            SlotState::Running { .. } if s.init && !s.sidecar() => (
                HealthState::PodInitializing,
                "init container running".to_string(),
            ),
            SlotState::Running { .. } if !s.is_running_started() => (
                HealthState::Starting,
                "its startup probe has not passed yet".to_string(),
            ),
            SlotState::Running { .. } => (
                HealthState::NotReady,
                "its readiness probe has not passed".to_string(),
            ),
            SlotState::Done(t) => (HealthState::Terminated, terminated_message(t)),
        };
        return verdict(state, object, message, true);
    }
    // Not reached while a container is unready; the condition says why otherwise.
    let message = pod
        .conditions
        .iter()
        .find(|c| c.kind == ConditionType::Ready)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    verdict(HealthState::NotReady, name.clone(), message, true)
}

/// `Error, exit code 3: …` for a terminated run.
fn terminated_message(t: &super::Terminated) -> String {
    let mut m = match t.signal {
        Some(sig) => format!("{}, signal {sig}", t.reason.as_str()),
        None => format!("{}, exit code {}", t.reason.as_str(), t.exit_code),
    };
    let detail = t.message.lines().next().unwrap_or("").trim();
    if !detail.is_empty() {
        m.push_str(": ");
        m.push_str(detail);
    }
    m
}
