//! The `--wait` predicate (`start`/`stop`/`restart --wait`): whether a pod's status, as the
//! socket reports it (the wire's projection of the core's status types), shows what the
//! request asked for — stopped; running and ready, or completed; and for a restart, a run that
//! began after the request — or can no longer get there on its own (back-off,
//! `DependencyFailed`, a terminated error).
//!
//! Owns that decision, beside the status types it reads, so the client only asks for the
//! status and prints the verdict. Must not do I/O or read the clock: the caller passes when
//! the request was sent.

use std::time::{Duration, SystemTime};

use super::RequestCmd;
use crate::control::wire;
use crate::format;

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

/// Whether the containers `request` targets in `pod` have reached what it asked for:
/// `stop`: none runs or is being created (each terminated, or never started); `start`: each
/// runs and is ready, or has completed; `restart`: the same, with a run that started after the
/// request was `sent`. A container in back-off or terminated with an error after the request
/// fails the wait at once.
pub fn reached(request: &RequestCmd, pod: &wire::Pod, sent: SystemTime) -> Progress {
    use crate::core::{TerminationReason, WaitingReason};
    use wire::State;
    let (container, stop, restart) = match request {
        RequestCmd::Stop { container, .. } => (container, true, false),
        RequestCmd::Start { container, .. } => (container, false, false),
        RequestCmd::Restart { container, .. } => (container, false, true),
        _ => return Progress::Reached,
    };
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
