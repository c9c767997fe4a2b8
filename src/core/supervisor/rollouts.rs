//! Rollouts across the supervisor (`core::rollout` decides per rollout): `restart --rolling`
//! and a reload of a pod with `update = "rolling"` begin one; each refresh carries out its
//! next step on the pods (a replica restarted as `restart POD` restarts it, or replaced by its
//! new definition as a reload replaces a pod) and records its events; the progress deadline
//! is among the supervisor's deadlines.

use super::commands::{invalid, not_found, shutting_down};
use super::*;
use crate::config::on_event::EventReason;
use crate::config::spec::DEFAULT_PROGRESS_DEADLINE;
use crate::core::rollout::{
    self, HaltReason, Rollout, RolloutKind, RolloutState, RolloutStatus, Step, Todo,
};

impl Supervisor {
    /// `restart POD --rolling [--max-unavailable N]`: a new run of every replica of the pod
    /// with replicas `set`, a batch at a time (docs/behaviour.md §14.2).
    pub(super) fn rolling_restart(
        &mut self,
        now: Time,
        set: &str,
        max_unavailable: Option<u32>,
    ) -> Result<String, CommandError> {
        if self.shutdown.is_some() {
            return Err(shutting_down());
        }
        let replicas = rollout::replicas_of(&self.pods, set);
        let Some(first) = replicas.first() else {
            return Err(if self.pods.iter().any(|p| p.name() == set) {
                invalid(format!(
                    "pod {set} has no replicas: --rolling restarts the replicas of a pod with \
                     `replicas`; restart it without --rolling"
                ))
            } else {
                not_found(format!("pod {set:?} not found"))
            });
        };
        if let Some(r) = self.rollout_under_way(set) {
            return Err(invalid(format!(
                "a rolling {} of pod {set} is under way ({}/{} replaced): wait for it to end",
                r.kind.as_str(),
                r.replaced,
                r.total
            )));
        }
        let keys = first.spec.replica.as_ref();
        let max_unavailable = max_unavailable
            .or(keys.map(|r| r.max_unavailable))
            .unwrap_or(1)
            .max(1);
        let deadline = keys.map_or(DEFAULT_PROGRESS_DEADLINE, |r| r.progress_deadline);
        let todo: Vec<Todo> = (replicas.iter())
            .map(|p| Todo {
                pod: p.name().to_string(),
                spec: None,
            })
            .collect();
        let total = todo.len();
        self.begin_rollout(
            now,
            set,
            RolloutKind::Restart,
            max_unavailable,
            deadline,
            todo,
        );
        Ok(format!(
            "rolling restart of pod {set}: {total} replicas, {max_unavailable} at a time"
        ))
    }

    /// The rollout of `set` under way, if any.
    fn rollout_under_way(&self, set: &str) -> Option<&Rollout> {
        (self.rollouts.iter()).find(|r| r.set == set && r.state == RolloutState::Progressing)
    }

    /// Begins a rollout of `set` over `todo` (in that order), in place of its last one; a
    /// batch still under way from that one stays this one's first batch.
    pub(super) fn begin_rollout(
        &mut self,
        now: Time,
        set: &str,
        kind: RolloutKind,
        max_unavailable: u32,
        progress_deadline: Duration,
        todo: Vec<Todo>,
    ) {
        let mut batch = Vec::new();
        if let Some(i) = self.rollouts.iter().position(|r| r.set == set) {
            let old = self.rollouts.remove(i);
            if old.state == RolloutState::Progressing {
                batch = old.batch.into_iter().filter(|m| !m.done).collect();
            }
        }
        let total = u32::try_from(todo.len() + batch.len()).unwrap_or(u32::MAX);
        let message = format!(
            "rolling {} of pod {set}: {total} replicas, {max_unavailable} at a time",
            kind.as_str()
        );
        self.events.record(
            now,
            EventType::Normal,
            EventReason::RollingUpdate,
            set.to_string(),
            message,
        );
        self.rollouts.push(Rollout {
            set: set.to_string(),
            kind,
            max_unavailable,
            progress_deadline,
            todo,
            batch,
            replaced: 0,
            total,
            progress_at: now,
            state: RolloutState::Progressing,
        });
    }

    /// Takes every rollout's next step (`refresh_touched`, after the pods' conditions are up
    /// to date); returns whether a pod was restarted or replaced.
    pub(super) fn drive_rollouts(&mut self, now: Time) -> bool {
        if self.rollouts.is_empty() || self.shutdown.is_some() {
            return false;
        }
        let mut rollouts = std::mem::take(&mut self.rollouts);
        let mut changed = false;
        for r in &mut rollouts {
            {
                match r.step(now, &self.pods) {
                    Step::Wait | Step::Progress => {}
                    Step::Complete => {
                        let message = format!(
                            "rolling {} of pod {} complete: {} replicas replaced",
                            r.kind.as_str(),
                            r.set,
                            r.replaced
                        );
                        log::info!("{message}");
                        self.events.record(
                            now,
                            EventType::Normal,
                            EventReason::RollingUpdate,
                            r.set.clone(),
                            message,
                        );
                    }
                    Step::Halt(reason, why) => {
                        let left = r.todo.iter().map(|t| t.pod.as_str()).collect::<Vec<_>>();
                        let rest = if left.is_empty() {
                            String::new()
                        } else {
                            format!("; {} left on their old run", left.join(", "))
                        };
                        let message = format!(
                            "rolling {} of pod {} halted after {}/{} replicas: {why}{rest}",
                            r.kind.as_str(),
                            r.set,
                            r.replaced,
                            r.total
                        );
                        log::warn!("{message}");
                        let event = match reason {
                            HaltReason::ProgressDeadlineExceeded => {
                                EventReason::ProgressDeadlineExceeded
                            }
                            HaltReason::ReplicaFailed => EventReason::ReplicaFailed,
                        };
                        self.events
                            .record(now, EventType::Warning, event, r.set.clone(), message);
                    }
                    Step::Replace(next) => {
                        let names: Vec<&str> = next.iter().map(|t| t.pod.as_str()).collect();
                        self.events.record(
                            now,
                            EventType::Normal,
                            EventReason::RollingUpdate,
                            r.set.clone(),
                            format!(
                                "replacing {} ({} of {} replaced)",
                                names.join(", "),
                                r.replaced,
                                r.total
                            ),
                        );
                        for t in next {
                            self.replace_replica(now, t);
                        }
                        changed = true;
                    }
                }
            }
        }
        self.rollouts = rollouts;
        changed
    }

    /// One replica of a batch: restarted as `restart POD` would, or stopped to be replaced by
    /// its new definition as a reload replaces a changed pod.
    fn replace_replica(&mut self, now: Time, t: Todo) {
        let Some(p) = (self.pods.iter()).position(|p| p.name() == t.pod && p.next == Next::Keep)
        else {
            return;
        };
        match t.spec {
            None => {
                // A refusal (the pod was refused at start) leaves it as it is.
                let _ = self.operate(now, Op::Restart, &t.pod, None, false);
            }
            Some(mut spec) => {
                let (pods, mut out) = self.split(now);
                let pod = &mut pods[p];
                spec.autostart |= !pod.unstarted();
                pod.next = Next::Replace(spec);
                let cause = StopCause::Request {
                    message: MSG_DEFINITION_CHANGED.to_string(),
                    then_start: false,
                };
                pod.stop_all(cause, true, &mut out);
            }
        }
    }

    /// When the earliest rollout under way runs out of its progress deadline.
    pub(super) fn next_rollout_deadline(&self) -> Option<Time> {
        self.rollouts.iter().filter_map(Rollout::wake).min()
    }

    /// The last rollout of each pod with replicas that had one, in the order they began
    /// (docs/behaviour.md §14.2).
    pub fn rollouts(&self) -> Vec<RolloutStatus> {
        self.rollouts.iter().map(Rollout::status).collect()
    }

    /// The last rollout of the pod with replicas `set`.
    pub fn rollout(&self, set: &str) -> Option<RolloutStatus> {
        (self.rollouts.iter())
            .find(|r| r.set == set)
            .map(Rollout::status)
    }
}
