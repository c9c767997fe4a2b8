//! Stopping: the stop signal, the grace period and the SIGKILL at its end (kubelet
//! `kuberuntime_container.go` killContainer, with its minimum grace), a `pre_stop` hook before
//! the signal, a whole pod's stop within one budget, and its sidecars stopped last, in reverse
//! order (`kuberuntime_termination_order.go`).
//!
//! Owns the `Stopping` state of a running slot and the pod's stop order. Must not decide what
//! follows the exit the stop causes (`exit.rs`, `restart.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Stopping {
    pub(super) fn status(&self) -> Terminating {
        let message = match &self.cause {
            StopCause::Probe { kind, message } => {
                format!("{} probe failed: {message}", kind.as_str())
            }
            StopCause::Request { message, .. } => message.clone(),
            StopCause::Shutdown => MSG_SHUTDOWN.to_string(),
            StopCause::PostStartHook { message } => format!("post_start hook failed: {message}"),
            StopCause::Deadline { message }
            | StopCause::Watchdog { message }
            | StopCause::StartTimeout { message } => message.clone(),
        };
        Terminating {
            since: self.kill_at.checked_sub(self.grace).unwrap_or(self.kill_at),
            grace: self.grace,
            message,
            killed: self.killed,
        }
    }

    /// The stop's cause as the last state reports it: a stop that needed the SIGKILL at the
    /// end of its grace period says so, not just "stopped by request".
    pub(super) fn cause_after_exit(self) -> StopCause {
        if !self.grace_expired {
            return self.cause;
        }
        let killed = format!(
            "did not stop within {}, killed with SIGKILL",
            go_duration(self.grace)
        );
        match self.cause {
            StopCause::Request {
                message,
                then_start,
            } => StopCause::Request {
                message: format!("{message}; {killed}"),
                then_start,
            },
            StopCause::Probe { kind, message } => StopCause::Probe {
                kind,
                message: format!("{message}; {killed}"),
            },
            StopCause::PostStartHook { message } => StopCause::PostStartHook {
                message: format!("{message}; {killed}"),
            },
            StopCause::Deadline { message } => StopCause::Deadline {
                message: format!("{message}; {killed}"),
            },
            StopCause::Watchdog { message } => StopCause::Watchdog {
                message: format!("{message}; {killed}"),
            },
            StopCause::StartTimeout { message } => StopCause::StartTimeout {
                message: format!("{message}; {killed}"),
            },
            StopCause::Shutdown => StopCause::Request {
                message: format!("{MSG_SHUTDOWN}; {killed}"),
                then_start: false,
            },
        }
    }
}

/// The grace of a stop that is part of a whole-pod stop ending at `deadline` (kubelet
/// `kuberuntime_container.go` killContainer: the pod's grace less the time already spent —
/// waiting for a sidecar's turn, `kuberuntime_termination_order.go` waitForTurn — raised to
/// `minimumGracePeriodInSeconds`). The container's own grace still bounds it, and the floor is
/// `min(2 s, own grace)`, so a grace of `0` stays an immediate SIGKILL.
pub(super) fn pod_capped_grace(own: Duration, deadline: Option<Time>, now: Time) -> Duration {
    match deadline {
        None => own,
        Some(d) => own.min(
            d.saturating_duration_since(now)
                .max(own.min(Duration::from_secs(2))),
        ),
    }
}

/// Kubelet `kuberuntime_container.go` killContainer: "always give containers a minimal shutdown
/// window to avoid unnecessary SIGKILLs" — a grace below `minimumGracePeriodInSeconds` (2 s) is
/// raised to it. vigil applies the floor to what a Kubernetes spec can express, whole seconds
/// (so `1` waits 2 s, as in a cluster), and keeps two vigil features: a grace of exactly `0`
/// SIGKILLs right after the stop signal (the kubelet would wait 2 s), and a fractional grace
/// (`0.5`) is honoured as written. docs/behaviour.md §9 lists both.
pub(super) fn effective_grace(grace: Duration) -> Duration {
    const MINIMUM: Duration = Duration::from_secs(2);
    if grace.is_zero() || grace >= MINIMUM || grace.subsec_nanos() != 0 {
        grace
    } else {
        MINIMUM
    }
}

impl Slot {
    /// Ask it to stop. Running: stop signal now, `Kill` after the grace period. Creating: the
    /// stop happens as soon as it is spawned. Back-off/not started: terminated `Stopped` now
    /// (except for a shutdown, which leaves never-started slots alone).
    pub(in crate::core) fn begin_stop(&mut self, cause: StopCause, pod: &str, out: &mut Out) {
        self.begin_stop_by(cause, None, pod, out);
    }

    /// [`Slot::begin_stop`] as part of a whole-pod stop that must be over by `deadline`
    /// ([`Pod::stop_all`]); a stop already in progress is pulled in to it too.
    pub(in crate::core) fn begin_stop_by(
        &mut self,
        cause: StopCause,
        deadline: Option<Time>,
        pod: &str,
        out: &mut Out,
    ) {
        let name = self.spec.name.clone();
        match &mut self.state {
            SlotState::Running { stopping, .. } => {
                if let Some(s) = stopping {
                    // A stop already under way (probe kill, restart) ends by the pod's
                    // deadline too, keeping its floor.
                    if let Some(d) = deadline
                        && !s.killed
                    {
                        let since = s.kill_at.checked_sub(s.grace).unwrap_or(s.kill_at);
                        let floor = later(since, s.grace.min(Duration::from_secs(2)));
                        s.kill_at = s.kill_at.min(d.max(floor));
                    }
                    // Operator intent and shutdown override a probe or hook kill in progress.
                    if !matches!(
                        cause,
                        StopCause::Probe { .. }
                            | StopCause::PostStartHook { .. }
                            | StopCause::Watchdog { .. }
                            | StopCause::StartTimeout { .. }
                    ) {
                        s.cause = cause;
                    }
                    return;
                }
                let grace = match &cause {
                    StopCause::Probe { kind, .. } => self
                        .probes
                        .iter()
                        .find(|p| p.kind == *kind)
                        .and_then(|p| p.spec.termination_grace)
                        .unwrap_or(self.spec.termination_grace),
                    _ => self.spec.termination_grace,
                };
                let message = match &cause {
                    // Kubelet `computePodActions`: ", will be restarted" only when the
                    // container is going to be restarted (restart policy other than Never).
                    StopCause::Probe { kind, .. } => {
                        let then = if self.spec.restart_policy == RestartPolicy::Never {
                            ""
                        } else {
                            ", will be restarted"
                        };
                        format!("Container {name} failed {} probe{then}", kind.as_str())
                    }
                    // The kubelet says only "Stopping container NAME"; vigil adds why.
                    StopCause::Request { message, .. } => {
                        format!("Stopping container {name}: {message}")
                    }
                    StopCause::Shutdown => format!("Stopping container {name}: {MSG_SHUTDOWN}"),
                    StopCause::PostStartHook { .. } => {
                        format!("FailedPostStartHook: stopping container {name}")
                    }
                    StopCause::Deadline { message } => {
                        format!("Stopping container {name}: {message}")
                    }
                    StopCause::Watchdog { .. } => {
                        let then = if self.spec.restart_policy == RestartPolicy::Never {
                            ""
                        } else {
                            ", will be restarted"
                        };
                        format!("Container {name} failed its watchdog{then}")
                    }
                    StopCause::StartTimeout { .. } => {
                        let then = if self.spec.restart_policy == RestartPolicy::Never {
                            ""
                        } else {
                            ", will be restarted"
                        };
                        format!("Container {name} failed to start in time{then}")
                    }
                };
                let grace = pod_capped_grace(effective_grace(grace), deadline, out.now);
                *stopping = Some(Stopping {
                    cause,
                    kill_at: later(out.now, grace),
                    killed: false,
                    grace,
                    grace_expired: false,
                });
                out.event(EventType::Normal, EventReason::Killing, pod, &name, message);
                self.hold_probes(out);
                // A post-start hook still running is abandoned; the pre-stop hook runs first,
                // within the grace period (kubelet killContainer → executePreStopHook).
                self.cancel_hook(out);
                match self.spec.lifecycle.pre_stop.clone() {
                    Some(hook) if !grace.is_zero() => {
                        self.start_hook(&hook, true, Some(grace), pod, out)
                    }
                    _ => out.actions.push_back(Action::Signal {
                        key: self.key,
                        generation: self.generation,
                        signal: self.spec.stop_signal,
                    }),
                }
            }
            SlotState::Creating { pending, .. } => {
                if !matches!(
                    pending,
                    Some(
                        StopCause::Request { .. }
                            | StopCause::Shutdown
                            | StopCause::Deadline { .. }
                    )
                ) {
                    *pending = Some(cause);
                }
            }
            SlotState::BackOff { .. } => {
                self.state = SlotState::Done(match &cause {
                    StopCause::Request { message, .. } => stopped(message, out.now),
                    StopCause::Shutdown => stopped(MSG_SHUTDOWN, out.now),
                    StopCause::Deadline { message } => deadline_exceeded(message, out.now),
                    StopCause::Probe { .. }
                    | StopCause::PostStartHook { .. }
                    | StopCause::Watchdog { .. }
                    | StopCause::StartTimeout { .. } => return,
                });
            }
            SlotState::NotStarted { .. } => match &cause {
                StopCause::Request { message, .. } => {
                    self.state = SlotState::Done(stopped(message, out.now));
                }
                StopCause::Deadline { message } => {
                    self.state = SlotState::Done(deadline_exceeded(message, out.now));
                }
                _ => {}
            },
            SlotState::Done(_) => {}
        }
    }

    /// SIGKILL it now (forced shutdown, global shutdown deadline); `why` ends up in the
    /// Warning `Killing` event ("Container app: {why}, sending SIGKILL").
    pub(in crate::core) fn kill_now(
        &mut self,
        cause: StopCause,
        why: &str,
        pod: &str,
        out: &mut Out,
    ) {
        let name = self.spec.name.clone();
        if self.is_active() {
            self.cancel_hook(out);
        }
        match &mut self.state {
            SlotState::Running { stopping, .. } => {
                match stopping {
                    Some(s) if s.killed => return,
                    Some(s) => s.killed = true,
                    None => {
                        *stopping = Some(Stopping {
                            cause,
                            kill_at: out.now,
                            killed: true,
                            grace: Duration::ZERO,
                            grace_expired: false,
                        })
                    }
                }
                out.actions.push_back(Action::Kill {
                    key: self.key,
                    generation: self.generation,
                });
                out.event(
                    EventType::Warning,
                    EventReason::Killing,
                    pod,
                    &name,
                    format!("Container {name}: {why}, sending SIGKILL"),
                );
                if out.shutting_down {
                    *out.unclean = true;
                }
                self.hold_probes(out);
            }
            SlotState::Creating {
                pending,
                force_kill,
            } => {
                *force_kill = true;
                if pending.is_none() {
                    *pending = Some(cause);
                }
            }
            _ => {}
        }
    }

    /// Shutdown reached a slot that is not running: it will not restart.
    pub(in crate::core) fn finish_for_shutdown(&mut self, out: &mut Out) {
        if let SlotState::BackOff { .. } = self.state {
            self.state = SlotState::Done(stopped(MSG_SHUTDOWN, out.now));
        }
    }
}

impl Pod {
    /// Stop the whole pod: the regular containers (and a running init container) now, the
    /// sidecars after them, last first (kubelet 1.29+ pod termination with sidecars). A
    /// sidecar that is not running is concluded at once.
    /// `live_only` leaves slots that are not running or backing off as they are (reload).
    /// Every container's kill deadline, pre-stop hook and the sidecars stopped after the others
    /// included, is capped at `now` + [`Pod::stop_budget`] (kubelet
    /// `kuberuntime_container.go` killContainersWithSyncResult: one grace for the pod).
    pub(in crate::core) fn stop_all(&mut self, cause: StopCause, live_only: bool, out: &mut Out) {
        let name = self.spec.name.clone();
        let mut deadline = later(out.now, self.stop_budget());
        if self.sidecar_stop.is_some()
            && let Some(earlier) = self.stop_deadline
        {
            deadline = deadline.min(earlier);
        }
        self.stop_deadline = Some(deadline);
        let touch =
            |s: &Slot| !live_only || s.is_active() || matches!(s.state, SlotState::BackOff { .. });
        for slot in self.main.iter_mut() {
            if touch(slot) {
                slot.begin_stop_by(cause.clone(), Some(deadline), &name, out);
            }
        }
        for slot in self.init.iter_mut() {
            if touch(slot) && !(slot.sidecar() && slot.is_active()) {
                slot.begin_stop_by(cause.clone(), Some(deadline), &name, out);
            }
        }
        // A shutdown is never downgraded to a request.
        if !matches!(self.sidecar_stop, Some(StopCause::Shutdown)) {
            self.sidecar_stop = Some(cause);
        }
        self.drive_sidecars(out);
    }

    /// When this run's `active_deadline_seconds` runs out, while that is still to come: the
    /// pod has begun, has not ended (kubelet: the deadline applies to a pod not yet in a
    /// terminal phase) and has not been stopped for it already.
    pub(in crate::core) fn active_deadline(&self) -> Option<Time> {
        let limit = self.spec.active_deadline?;
        let since = self.active_since?;
        if self.deadline_exceeded
            || self.stage == Stage::Waiting
            || self.at_rest()
            || matches!(self.phase(), Phase::Succeeded | Phase::Failed)
        {
            return None;
        }
        Some(later(since, limit))
    }

    /// `active_deadline_seconds` ran out (kubelet `active_deadline.go`: the pod fails with
    /// reason `DeadlineExceeded`, "Pod was active on the node longer than the specified
    /// deadline"): a Warning event, and the whole pod is stopped as an operator stop would
    /// stop it, each container ending `DeadlineExceeded` and none restarted.
    pub(in crate::core) fn exceed_deadline(&mut self, out: &mut Out) {
        let Some(limit) = self.spec.active_deadline else {
            return;
        };
        self.deadline_exceeded = true;
        let message = format!(
            "the pod was active longer than its active_deadline_seconds ({})",
            go_duration(limit)
        );
        let name = self.spec.name.clone();
        out.events.record(
            out.now,
            EventType::Warning,
            EventReason::DeadlineExceeded,
            name.clone(),
            format!(
                "Pod {name} was active longer than the specified deadline ({}); stopping it",
                go_duration(limit)
            ),
        );
        self.stop_all(StopCause::Deadline { message }, false, out);
    }

    /// The grace of a whole-pod stop (kubelet: `pod.Spec.TerminationGracePeriodSeconds`): the
    /// pod's `termination_grace_period_seconds` when written, else the longest grace of its
    /// containers — 30 s when none is written, as in a cluster (config resolves it). The 2 s
    /// floor applies as to a container ([`effective_grace`]).
    pub(in crate::core) fn stop_budget(&self) -> Duration {
        effective_grace(self.spec.termination_grace)
    }

    /// Sidecar bookkeeping after any change: when every regular container has finished for
    /// good, the sidecars are stopped (a pod with `Never`/`OnFailure` completes while its
    /// sidecars are stopped, kubelet `kubelet_pods.go` getPhase); a pending sidecar stop
    /// begins with the last sidecar once no other container is active, and each earlier one
    /// waits for the later ones to have stopped.
    pub(in crate::core) fn drive_sidecars(&mut self, out: &mut Out) {
        let has_live_sidecar = |p: &Pod| {
            p.init.iter().any(|s| {
                s.sidecar() && (s.is_active() || matches!(s.state, SlotState::BackOff { .. }))
            })
        };
        if self.sidecar_stop.is_none()
            && self.stage == Stage::Main
            && !self.main.is_empty()
            && self
                .main
                .iter()
                .all(|s| matches!(s.state, SlotState::Done(_)))
            && has_live_sidecar(self)
        {
            self.sidecar_stop = Some(StopCause::Request {
                message: MSG_MAIN_FINISHED.to_string(),
                then_start: false,
            });
            self.stop_deadline = Some(later(out.now, self.stop_budget()));
        }
        let Some(cause) = self.sidecar_stop.clone() else {
            return;
        };
        let others_active = self.main.iter().any(Slot::is_active)
            || self.init.iter().any(|s| !s.sidecar() && s.is_active());
        if others_active {
            return;
        }
        let name = self.spec.name.clone();
        let deadline = self.stop_deadline;
        for slot in self.init.iter_mut().rev().filter(|s| s.sidecar()) {
            if slot.is_active() {
                if !slot.stop_requested() {
                    slot.begin_stop_by(cause.clone(), deadline, &name, out);
                }
                if slot.is_active() {
                    return;
                }
            } else {
                slot.begin_stop_by(cause.clone(), deadline, &name, out);
            }
        }
        if !has_live_sidecar(self) {
            self.sidecar_stop = None;
            self.stop_deadline = None;
        }
    }

    /// Before an operator start: sidecars before init container `upto` (or all, for the
    /// regular containers) that were stopped run again, and a pending sidecar stop is dropped.
    pub(in crate::core) fn revive_sidecars(&mut self, upto: usize, out: &mut Out) {
        self.sidecar_stop = None;
        self.stop_deadline = None;
        let name = self.spec.name.clone();
        for slot in self.init.iter_mut().take(upto) {
            if slot.sidecar()
                && !slot.is_active()
                && !matches!(slot.state, SlotState::BackOff { .. })
            {
                slot.start_fresh(&name, out);
            }
        }
    }
}
