//! The `--wait` predicate (`start`/`stop`/`restart --wait`): whether a pod's status, as the
//! socket reports it (the wire's projection of the core's status types), shows what the
//! request asked for — stopped; running and ready, or completed; and for a restart, a run that
//! began after the request — or can no longer get there on its own (back-off,
//! `DependencyFailed`, a terminated error).
//!
//! Owns that decision, beside the status types it reads; the server asks it at every turn for
//! each request that waits (runtime/shell/waiters.rs) and the client only prints the verdict.
//! Must not do I/O or read the clock: the caller passes when the request was taken.
//!
//! Also here: the conditions of `vigil wait --for=…` ([`WaitFor`]), decided by the server from
//! each pod's health ([`WaitFor::met`]; docs/behaviour.md §5.6).

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::RequestCmd;
use crate::control::wire;
use crate::format;

/// What `vigil wait --for=…` waits for (kubectl wait's `--for=condition=Ready`, and the two a
/// supervisor adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitFor {
    /// The pod's `Ready` condition is true.
    Ready,
    /// The pod ran to completion (phase `Succeeded`, not by an operator's stop).
    Completed,
    /// None of the pod's containers runs, is being created or waits in back-off.
    Stopped,
}

impl WaitFor {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitFor::Ready => "ready",
            WaitFor::Completed => "completed",
            WaitFor::Stopped => "stopped",
        }
    }

    /// Whether a pod with this health meets the condition.
    pub fn met(self, health: &crate::core::PodHealth) -> bool {
        use crate::core::HealthState;
        match self {
            WaitFor::Ready => health.state == HealthState::Ready,
            WaitFor::Completed => health.state == HealthState::Completed,
            WaitFor::Stopped => health.at_rest,
        }
    }
}

/// Where a `--wait` stands after one look at the pod.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every target is where the request asked.
    Reached,
    /// Not yet: what is still awaited (`for web/app to stop (it is still running)`).
    Pending(String),
    /// It will not get there on its own: why.
    Failed(String),
}

/// What a wait is for (carried across `vigil upgrade` with the request that waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Goal {
    /// `stop`: none of the targets runs or is being created.
    Stopped,
    /// `start`: each target runs and is ready, or has completed.
    Started,
    /// `restart`: as `Started`, with a run begun after the request.
    Restarted,
    /// `restart --rolling`: the rollout of the pod with replicas `pod` has completed (it is
    /// decided on the rollout's status, not a pod's: [`rollout_progress`]).
    RolledOut,
}

/// The containers a wait is about, and what for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub pod: String,
    /// One container, else the pod's (for [`Goal::Stopped`] its init containers too).
    pub container: Option<String>,
    pub goal: Goal,
}

impl Target {
    /// What `request` waits for, when it is a command that can wait.
    pub fn of(request: &RequestCmd) -> Option<Target> {
        let (pod, container, goal) = match request {
            RequestCmd::Stop { pod, container } => (pod, container, Goal::Stopped),
            RequestCmd::Start { pod, container, .. } => (pod, container, Goal::Started),
            RequestCmd::Restart {
                pod, rolling: true, ..
            } => (pod, &None, Goal::RolledOut),
            RequestCmd::Restart { pod, container, .. } => (pod, container, Goal::Restarted),
            _ => return None,
        };
        Some(Target {
            pod: pod.clone(),
            container: container.clone(),
            goal,
        })
    }
}

/// Whether the containers `request` targets in `pod` have reached what it asked for
/// ([`progress`] of its [`Target`]); a request that cannot wait has nothing to reach.
pub fn reached(request: &RequestCmd, pod: &wire::Pod, sent: SystemTime) -> Progress {
    match Target::of(request) {
        Some(target) => progress(&target, pod, sent),
        None => Progress::Reached,
    }
}

/// Whether the containers `target` names in `pod` have reached its goal: `Stopped`: none runs
/// or is being created (each terminated, or never started); `Started`: each runs and is
/// ready, or has completed; `Restarted`: the same, with a run that started after the request
/// was `sent`. A container in back-off or terminated with an error after the request fails
/// the wait at once.
pub fn progress(target: &Target, pod: &wire::Pod, sent: SystemTime) -> Progress {
    use crate::core::{TerminationReason, WaitingReason};
    use wire::State;
    let container = &target.container;
    let stop = target.goal == Goal::Stopped;
    let restart = target.goal == Goal::Restarted;
    let targets: Vec<&wire::Container> = match container {
        Some(name) => pod
            .init_containers
            .iter()
            .chain(&pod.containers)
            .filter(|c| &c.name == name)
            .collect(),
        None if stop => pod.init_containers.iter().chain(&pod.containers).collect(),
        None => pod.containers.iter().collect(),
    };
    // A run that ended before the request cannot be this request's outcome (ms precision).
    let since = sent.checked_sub(Duration::from_millis(1)).unwrap_or(sent);
    for c in targets {
        let name = format!("{}/{}", pod.name, c.name);
        match &c.state {
            State::Terminated(_) if stop => {}
            State::Waiting(w)
                if stop
                    && matches!(
                        w.reason,
                        WaitingReason::PodInitializing
                            | WaitingReason::WaitingForDependencies
                            | WaitingReason::DependencyFailed
                            | WaitingReason::NotStarted
                    ) => {}
            _ if stop => {
                return Progress::Pending(format!("for {name} to stop (it is still running)"));
            }
            State::Running(r) if c.ready && (!restart || r.started_at.0 >= since) => {}
            State::Terminated(t)
                if t.reason == TerminationReason::Completed && t.finished_at.0 >= since => {}
            // A pod restart stops every container before the pod starts over.
            State::Terminated(t) if restart && t.reason == TerminationReason::Stopped => {
                return Progress::Pending(format!(
                    "for {name} to start again (its pod is restarting)"
                ));
            }
            State::Terminated(t) if t.finished_at.0 >= since => {
                return Progress::Failed(format!(
                    "{name} terminated: {} {}",
                    t.reason.as_str(),
                    format::cell(&t.message)
                ));
            }
            // Neither gets there without something else changing first (behaviour.md §2.2, §8).
            State::Waiting(w)
                if matches!(
                    w.reason,
                    WaitingReason::CrashLoopBackOff | WaitingReason::DependencyFailed
                ) =>
            {
                return Progress::Failed(format!(
                    "{name} is in {}: {}",
                    w.reason,
                    format::cell(&w.message)
                ));
            }
            State::Running(r) if restart && r.started_at.0 < since => {
                return Progress::Pending(format!(
                    "for {name} to restart (its run from before the request is still running)"
                ));
            }
            State::Running(_) => {
                return Progress::Pending(format!(
                    "for {name} to be ready (it runs; its readiness probe has not passed yet)"
                ));
            }
            _ => return Progress::Pending(format!("for {name} to start (it has not started yet)")),
        }
    }
    Progress::Reached
}

/// Where a `restart --rolling --wait` stands: the rollout of the pod with replicas `set` has
/// completed, is still under way, or halted (or there is none: it was never begun).
pub fn rollout_progress(set: &str, rollout: Option<&crate::core::RolloutStatus>) -> Progress {
    use crate::core::RolloutState;
    let Some(r) = rollout else {
        return Progress::Failed(format!("pod {set} has no rollout"));
    };
    match &r.state {
        RolloutState::Complete => Progress::Reached,
        RolloutState::Halted { reason, message } => {
            Progress::Failed(format!("{}: {message}", reason.as_str()))
        }
        RolloutState::Progressing => Progress::Pending(format!(
            "for the rolling {} of pod {set} ({}/{} replaced; waiting for {} to be Ready on \
             its new run)",
            r.kind.as_str(),
            r.replaced,
            r.total,
            if r.waiting_for.is_empty() {
                "the next batch".to_string()
            } else {
                r.waiting_for.join(", ")
            }
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{HaltReason, RolloutKind, RolloutState, RolloutStatus};

    #[test]
    fn a_rolling_restart_wait_is_reached_on_completion_and_failed_on_a_halt() {
        let status = |state| RolloutStatus {
            pod: "web".into(),
            kind: RolloutKind::Restart,
            state,
            replaced: 1,
            total: 3,
            waiting_for: vec!["web-1".into()],
        };
        let progressing = status(RolloutState::Progressing);
        assert_eq!(
            rollout_progress("web", Some(&progressing)),
            Progress::Pending(
                "for the rolling restart of pod web (1/3 replaced; waiting for web-1 to be \
                 Ready on its new run)"
                    .into()
            )
        );
        let done = status(RolloutState::Complete);
        assert_eq!(rollout_progress("web", Some(&done)), Progress::Reached);
        let halted = status(RolloutState::Halted {
            reason: HaltReason::ProgressDeadlineExceeded,
            message: "no progress".into(),
        });
        assert_eq!(
            rollout_progress("web", Some(&halted)),
            Progress::Failed("ProgressDeadlineExceeded: no progress".into())
        );
        assert!(matches!(rollout_progress("web", None), Progress::Failed(_)));
    }
}
