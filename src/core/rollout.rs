//! Rollouts: replacing the replicas of a pod with `replicas` a batch at a time, each batch
//! only after the previous one is Ready on its new run (docs/behaviour.md §14.2).
//!
//! Owns the bookkeeping of one rollout and its decisions — which replicas come next (the
//! highest index first, as a StatefulSet's RollingUpdate: `pkg/controller/statefulset`
//! `updateStatefulSet` deletes the largest ordinal not yet at the update revision), whether a
//! batch member is on its new run, Ready, or failed, and when a rollout has made no progress
//! for its `progress_deadline_seconds` (the Deployment controller's
//! `ProgressDeadlineExceeded`: `pkg/controller/deployment/progress.go` `syncRolloutStatus`,
//! `deploymentutil.DeploymentTimedOut`). It reads no clock and starts or stops nothing: the
//! supervisor (`supervisor/rollouts.rs`) carries out its [`Step`]s on the pods.

use std::time::Duration;

use super::pod::{Next, Pod, SlotState};
use super::{ContainerKey, Generation, Phase, Time};
use crate::config::spec::PodSpec;

/// What a rollout replaces each replica with.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutKind {
    /// `vigil restart --rolling`: a new run of the same definition.
    Restart,
    /// A reload that changed the definition of a pod with `update = "rolling"`.
    Update,
}

impl RolloutKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutKind::Restart => "restart",
            RolloutKind::Update => "update",
        }
    }
}

/// Why a rollout stopped before every replica was replaced. The replicas not reached yet keep
/// their old run; those of the batch are left as they are.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum HaltReason {
    /// A batch was not Ready within `progress_deadline_seconds` of the rollout's last
    /// progress (a Deployment's `Progressing=False` condition with this reason).
    ProgressDeadlineExceeded,
    /// A replacement failed: a container of it crashed (back-off) or the pod failed.
    ReplicaFailed,
}

impl HaltReason {
    pub fn as_str(self) -> &'static str {
        match self {
            HaltReason::ProgressDeadlineExceeded => "ProgressDeadlineExceeded",
            HaltReason::ReplicaFailed => "ReplicaFailed",
        }
    }
}

/// Where a rollout stands.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum RolloutState {
    /// A batch is being replaced.
    Progressing,
    /// Every replica was replaced and is Ready.
    Complete,
    /// Stopped for good: why, and what it says.
    Halted { reason: HaltReason, message: String },
}

/// What status shows of the last rollout of a pod with replicas.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct RolloutStatus {
    /// The pod with replicas (`web`).
    pub pod: String,
    pub kind: RolloutKind,
    pub state: RolloutState,
    /// Replicas on their new run and Ready, of `total`.
    pub replaced: u32,
    pub total: u32,
    /// The batch under way: the replicas not Ready on their new run yet.
    pub waiting_for: Vec<String>,
}

/// One replica of the batch under way.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) struct Member {
    pub pod: String,
    /// Its first container's run when the batch began: a different one is its new run.
    pub before: Option<(ContainerKey, Generation)>,
    /// Ready on its new run (counted in `replaced`).
    pub done: bool,
}

/// A replica the rollout has not reached yet, and what replaces it.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) struct Todo {
    pub pod: String,
    /// The new definition (an update), else `None` (a restart: a new run of the same one).
    pub spec: Option<Box<PodSpec>>,
}

/// One rollout of one pod with replicas.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) struct Rollout {
    pub set: String,
    pub kind: RolloutKind,
    pub max_unavailable: u32,
    pub progress_deadline: Duration,
    /// Not reached yet, next first.
    pub todo: Vec<Todo>,
    pub batch: Vec<Member>,
    pub replaced: u32,
    pub total: u32,
    /// The last progress: the rollout or a batch began, or a replica became Ready.
    #[serde(with = "crate::monotime")]
    pub progress_at: Time,
    pub state: RolloutState,
}

/// What the supervisor is to do next for a rollout.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// Nothing changed.
    Wait,
    /// Some replicas of the batch became Ready (the rollout made progress).
    Progress,
    /// Replace these replicas now (the next batch), with their new definitions if any.
    Replace(Vec<Todo>),
    /// Every replica is replaced.
    Complete,
    /// Stop here.
    Halt(HaltReason, String),
}

/// Where one batch member stands.
enum Standing {
    /// Still on its old run, or being stopped for its replacement.
    Going,
    /// On its new run, not Ready yet.
    Starting,
    Ready,
    /// Its new run failed: why.
    Failed(String),
}

/// The replacement's first container run, what [`Member::before`] compares.
pub(super) fn first_run(pod: &Pod) -> Option<(ContainerKey, Generation)> {
    pod.main.first().map(|s| (s.key, s.generation))
}

fn standing(member: &Member, pod: &Pod) -> Standing {
    if pod.next != Next::Keep || pod.restart_pending || first_run(pod) == member.before {
        return Standing::Going;
    }
    if pod.ready() {
        return Standing::Ready;
    }
    let name = pod.name();
    if let Some(s) = pod
        .main
        .iter()
        .find(|s| matches!(s.state, SlotState::BackOff { .. }))
    {
        return Standing::Failed(format!(
            "replica {name} failed on its new run: container {} is in CrashLoopBackOff",
            s.name()
        ));
    }
    if pod.phase() == Phase::Failed {
        return Standing::Failed(format!("replica {name} failed on its new run"));
    }
    Standing::Starting
}

impl Rollout {
    /// The next step at `now`, the batch's standing updated; `pods` are the supervisor's.
    pub(super) fn step(&mut self, now: Time, pods: &[Pod]) -> Step {
        if self.state != RolloutState::Progressing {
            return Step::Wait;
        }
        let mut progressed = false;
        let mut pending: Vec<String> = Vec::new();
        for m in self.batch.iter_mut().filter(|m| !m.done) {
            // A replica a scale or a reload removed is no longer the rollout's to wait for.
            let Some(pod) = pods
                .iter()
                .find(|p| p.name() == m.pod && p.next != Next::Remove)
            else {
                m.done = true;
                continue;
            };
            match standing(m, pod) {
                Standing::Ready => {
                    m.done = true;
                    self.replaced += 1;
                    progressed = true;
                }
                Standing::Failed(why) => {
                    return self.halt(HaltReason::ReplicaFailed, why);
                }
                Standing::Going | Standing::Starting => pending.push(m.pod.clone()),
            }
        }
        if progressed {
            self.progress_at = now;
        }
        if !pending.is_empty() {
            if now >= self.deadline() {
                let why = format!(
                    "no progress in {}: {} not Ready on its new run",
                    crate::format::go_duration(self.progress_deadline),
                    pending.join(", ")
                );
                return self.halt(HaltReason::ProgressDeadlineExceeded, why);
            }
            return if progressed {
                Step::Progress
            } else {
                Step::Wait
            };
        }
        self.batch.clear();
        // The next batch: replicas still there, at most `max_unavailable` of them.
        let mut next = Vec::new();
        while next.len() < self.max_unavailable as usize && !self.todo.is_empty() {
            let t = self.todo.remove(0);
            if let Some(pod) = pods
                .iter()
                .find(|p| p.name() == t.pod && p.next != Next::Remove)
            {
                self.batch.push(Member {
                    pod: t.pod.clone(),
                    before: first_run(pod),
                    done: false,
                });
                next.push(t);
            }
        }
        if next.is_empty() {
            self.state = RolloutState::Complete;
            return Step::Complete;
        }
        self.progress_at = now;
        Step::Replace(next)
    }

    fn halt(&mut self, reason: HaltReason, message: String) -> Step {
        self.state = RolloutState::Halted {
            reason,
            message: message.clone(),
        };
        Step::Halt(reason, message)
    }

    /// When the batch under way must have made progress by.
    pub(super) fn deadline(&self) -> Time {
        crate::instant::saturating_add(self.progress_at, self.progress_deadline)
    }

    /// The deadline, while under way.
    pub(super) fn wake(&self) -> Option<Time> {
        (self.state == RolloutState::Progressing).then(|| self.deadline())
    }

    pub(super) fn status(&self) -> RolloutStatus {
        RolloutStatus {
            pod: self.set.clone(),
            kind: self.kind,
            state: self.state.clone(),
            replaced: self.replaced,
            total: self.total,
            waiting_for: (self.batch.iter())
                .filter(|m| !m.done)
                .map(|m| m.pod.clone())
                .collect(),
        }
    }
}

/// The replicas of `set` among `pods`, by index, highest first (the order a rollout replaces
/// them in), with their index.
pub(super) fn replicas_of<'a>(pods: &'a [Pod], set: &str) -> Vec<&'a Pod> {
    let mut of: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.next != Next::Remove && p.spec.replica.as_ref().is_some_and(|r| r.set == set))
        .collect();
    of.sort_by_key(|p| std::cmp::Reverse(p.spec.replica.as_ref().map_or(0, |r| r.index)));
    of
}
