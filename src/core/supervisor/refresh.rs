//! What spans pods, re-derived at the end of every call that may have changed a slot: pods a
//! reload replaces or removes, whole-pod restarts, conditions, the dependency gate
//! (`depends_on`), `shutdown_on`, the shutdown order (dependents first) and the exit.
//!
//! Owns the decisions between pods. Must not handle a slot's own transitions (the pod code)
//! nor leave the deadline index stale (it ends with `reschedule`).

use super::*;
use crate::config::on_event::EventReason;

impl Supervisor {
    /// Re-evaluate everything that depends on more than one slot: reload replacements,
    /// dependency gates, shutdown order, the exit, and pod conditions.
    pub(super) fn refresh(&mut self, now: Time) {
        self.refresh_touched(now, None);
    }

    /// [`Self::refresh`] after a change confined to the pods at `touched` (indices into
    /// `pods`; `None`: any pod may have changed). A pod's conditions depend on its own slots
    /// only, so the others' are left alone unless a reload replacement, a dependency start or
    /// the shutdown order moves them. This runs after every input: with hundreds of pods
    /// probed every second, re-deriving every pod's conditions each time was most of
    /// vigil's CPU and delayed the next probe starts.
    pub(super) fn refresh_touched(&mut self, now: Time, touched: Option<&[usize]>) {
        let mut all = touched.is_none();
        all |= self.replace_stopped(now);

        // A run that has ended is recorded before anything below starts the next one.
        match touched {
            Some(touched) if !all => {
                for &p in touched {
                    if let Some(pod) = self.pods.get_mut(p) {
                        pod.record_ended_run(now);
                    }
                }
            }
            _ => self.pods.iter_mut().for_each(|p| p.record_ended_run(now)),
        }

        // Schedules: a trigger due starts a run (or stops the active one first), one held
        // back starts once the run it waited for has ended.
        if self.drive_schedules(now) {
            all = true;
        }
        all |= self.restart_at_rest();

        // Conditions feed the `ready` dependency: bring them up to date first.
        if all {
            for pod in &mut self.pods {
                pod.update_conditions(now);
            }
        } else {
            for &p in touched.unwrap_or_default() {
                if let Some(pod) = self.pods.get_mut(p) {
                    pod.update_conditions(now);
                }
            }
        }
        // Rollouts, on the conditions just brought up to date: a replica they restart or
        // replace at rest starts over in this same call.
        if self.drive_rollouts(now) {
            self.replace_stopped(now);
            self.restart_at_rest();
            all = true;
            for pod in &mut self.pods {
                pod.update_conditions(now);
            }
        }
        let moved = if self.shutdown.is_none() {
            // Following after the gate: a dependency it started is a new run to follow.
            self.start_ready_pods(now) | self.follow_dependencies(now) | self.check_shutdown_on(now)
        } else {
            self.drive_shutdown(now);
            true
        };
        // Without a start or a stop since the pass above, it would change nothing.
        if all || moved {
            for pod in &mut self.pods {
                pod.update_conditions(now);
                pod.record_ended_run(now);
            }
            self.reschedule(None);
        } else {
            for &p in touched.unwrap_or_default() {
                if let Some(pod) = self.pods.get_mut(p) {
                    pod.record_ended_run(now);
                }
            }
            self.reschedule(touched);
        }
    }

    /// Pods a reload (or a rollout) replaces or removes that have finished stopping: replaced
    /// by their new definition, or forgotten. Returns whether the list changed shape.
    fn replace_stopped(&mut self, now: Time) -> bool {
        let mut reshaped = false;
        let mut i = 0;
        while i < self.pods.len() {
            let pod = &self.pods[i];
            if pod.next == Next::Keep || pod.any_active() {
                i += 1;
                continue;
            }
            reshaped = true;
            for key in pod.keys() {
                self.actions.push_back(Action::Forget { key });
            }
            match std::mem::replace(&mut self.pods[i].next, Next::Keep) {
                Next::Replace(spec) => {
                    // The runs kept go on with the new definition, within its limits.
                    let mut history = std::mem::take(&mut self.pods[i].history);
                    history.trim(spec.history);
                    self.pods[i] = Pod::new(*spec, now, &mut self.next_key);
                    self.pods[i].history = history;
                    i += 1;
                }
                _ => {
                    self.pods.remove(i);
                }
            }
        }
        if reshaped {
            self.reindex();
        }
        reshaped
    }

    /// A whole-pod restart starts over once nothing of the pod runs. Returns whether one did.
    fn restart_at_rest(&mut self) -> bool {
        let mut any = false;
        if self.shutdown.is_none() {
            for pod in &mut self.pods {
                if pod.restart_pending && pod.next == Next::Keep && !pod.any_active() {
                    pod.reset_for_restart();
                    any = true;
                }
            }
        }
        any
    }

    /// What `pod` still waits for (`pod db to be ready`), in its `depends_on` order, and, for
    /// each, why it cannot happen on its own when that is so ([`Pod::cannot_recover`], or the
    /// dependency is itself blocked on such a pod).
    pub(super) fn unmet_dependencies(&self, pod: &Pod) -> Vec<Unmet> {
        pod.spec
            .depends_on
            .iter()
            .filter_map(|d| {
                // The pod named, or every replica of a pod with replicas (not those a
                // reload or a scale is removing).
                let on: Vec<&Pod> = self
                    .pods
                    .iter()
                    .filter(|p| p.spec.answers_to(&d.pod) && p.next != Next::Remove)
                    .collect();
                let meets = |p: &Pod| match d.condition {
                    DependencyCondition::Started => p.all_started(),
                    DependencyCondition::Ready => p.ready(),
                    DependencyCondition::Completed => p.phase() == Phase::Succeeded,
                };
                // `min_ready` relaxes a condition on a set to that many of its replicas.
                let needed = on
                    .iter()
                    .find_map(|p| p.spec.replica.as_ref().and_then(|r| r.min_ready))
                    .map_or(on.len(), |k| (k as usize).min(on.len()));
                let meeting = on.iter().filter(|p| meets(p)).count();
                if !on.is_empty() && meeting >= needed {
                    return None;
                }
                let what = match d.condition {
                    DependencyCondition::Started => "started",
                    DependencyCondition::Ready => "ready",
                    DependencyCondition::Completed => "completed",
                };
                // Blocked when too few of them can still get there on their own.
                let stuck: Vec<String> = on
                    .iter()
                    .filter(|p| !meets(p))
                    .filter_map(|p| {
                        p.cannot_recover().or_else(|| {
                            p.blocked.as_ref().map(|_| {
                                format!("pod {} waits on a dependency that cannot start", p.name())
                            })
                        })
                    })
                    .collect();
                let blocked = (!stuck.is_empty() && on.len() - stuck.len() < needed)
                    .then(|| stuck.join("; "));
                let subject = match on.first().and_then(|p| p.spec.replica.as_ref()) {
                    Some(_) if needed < on.len() => {
                        format!("{needed} of the {} replicas of pod {}", on.len(), d.pod)
                    }
                    Some(_) => format!("every replica of pod {} ({meeting}/{})", d.pod, on.len()),
                    None => format!("pod {}", d.pod),
                };
                Some((format!("{subject} to be {what}"), blocked))
            })
            .collect()
    }

    /// Start every waiting pod whose dependencies are met — a pod not begun yet, or one an
    /// operator `start` left awaiting them — and name the unmet ones otherwise. A pod whose
    /// dependency cannot get there on its own (refused at start, failed for good, or itself
    /// blocked so) still waits, shown as `DependencyFailed` with the dependency and why, and
    /// a Warning `DependencyFailed` event per container when that first becomes so; it starts
    /// once an operator start or a reload brings the dependency back. Returns whether any pod
    /// was waiting (and so may have changed).
    pub(super) fn start_ready_pods(&mut self, now: Time) -> bool {
        let waits = |p: &Pod| {
            p.next == Next::Keep && ((p.stage == Stage::Waiting && !p.held) || p.awaiting)
        };
        // The steady state (nothing waiting) skips the facts: an allocation per pod.
        if !self.pods.iter().any(waits) {
            for pod in self.pods.iter_mut().filter(|p| p.blocked.is_some()) {
                pod.blocked = None; // stopped or replaced while it waited
            }
            return false;
        }
        let before: Vec<Option<String>> = self.pods.iter().map(|p| p.blocked.clone()).collect();
        // Facts taken before any start (a start changes no fact). Being blocked passes down a
        // chain of dependents, so repeat until it settles (dependencies have no cycles: at
        // most one pass per pod).
        let mut unmet: Vec<Option<Vec<Unmet>>> = Vec::new();
        for _ in 0..=self.pods.len() {
            unmet = self
                .pods
                .iter()
                .map(|p| waits(p).then(|| self.unmet_dependencies(p)))
                .collect();
            let mut settled = true;
            for (pod, unmet) in self.pods.iter_mut().zip(&unmet) {
                let blocked = unmet
                    .as_ref()
                    .filter(|u| u.iter().any(|(_, b)| b.is_some()))
                    .map(|u| waiting_for(u));
                if pod.blocked != blocked {
                    pod.blocked = blocked;
                    settled = false;
                }
            }
            if settled {
                break;
            }
        }
        let (pods, mut out) = self.split(now);
        for ((pod, unmet), before) in pods.iter_mut().zip(unmet).zip(before) {
            let Some(unmet) = unmet else {
                continue;
            };
            if unmet.is_empty() {
                pod.resume(&mut out);
                continue;
            }
            let (reason, message) = match &pod.blocked {
                Some(why) => (WaitingReason::DependencyFailed, why.clone()),
                None => (WaitingReason::WaitingForDependencies, waiting_for(&unmet)),
            };
            let name = pod.spec.name.clone();
            for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                slot.set_waiting(reason, message.clone());
                if pod.blocked.is_some() && pod.blocked != before {
                    let container = slot.name().to_string();
                    out.event(
                        EventType::Warning,
                        EventReason::DependencyFailed,
                        &name,
                        &container,
                        message.clone(),
                    );
                }
            }
        }
        true
    }

    /// `shutdown_on` (docs/behaviour.md §6.4): the first pod, in config order, that has come
    /// to the end its key names begins the usual shutdown, and vigil will exit with the pod's
    /// exit code; an event says so. An end the operator caused (`vigil stop`) does not count,
    /// nor does a pod a reload is replacing. Returns whether the shutdown began.
    pub(super) fn check_shutdown_on(&mut self, now: Time) -> bool {
        if self.shutdown.is_some() {
            return false;
        }
        let hit = self.pods.iter().find_map(|p| {
            let on = p.spec.shutdown_on?;
            if p.next != Next::Keep {
                return None;
            }
            let phase = p.phase();
            let by_operator = p.stopped_by_request();
            let (ended, what) = match on {
                ShutdownOn::Completed => (phase == Phase::Succeeded && !by_operator, "completed"),
                ShutdownOn::Failed => (phase == Phase::Failed, "failed"),
                ShutdownOn::Ended => (
                    !by_operator && matches!(phase, Phase::Succeeded | Phase::Failed),
                    if phase == Phase::Failed {
                        "failed"
                    } else {
                        "completed"
                    },
                ),
                ShutdownOn::DependencyFailed => (p.blocked.is_some(), "cannot start"),
            };
            if !ended {
                return None;
            }
            // A pod that never ran because of a dependency ends vigil with 1.
            let code = match on {
                ShutdownOn::DependencyFailed => 1,
                _ => p.exit_code(),
            };
            let why = match (on, &p.blocked) {
                (ShutdownOn::DependencyFailed, Some(b)) => format!(" ({b})"),
                _ => String::new(),
            };
            let kind = if code == 0 {
                EventType::Normal
            } else {
                EventType::Warning
            };
            let message = format!(
                "pod {} {what}{why}, exit code {code}: stopping everything (shutdown_on = \"{}\")",
                p.name(),
                on.as_str()
            );
            Some((p.name().to_string(), code, kind, message))
        });
        let Some((pod, code, kind, message)) = hit else {
            return false;
        };
        self.events
            .record(now, kind, EventReason::ShutdownOn, pod, message.clone());
        log::info!("{message}");
        self.exit_with = Some(code);
        self.begin_shutdown(now, false);
        self.drive_shutdown(now);
        true
    }

    /// Stop pods whose dependents have all stopped; emit `Exit` when nothing is left.
    pub(super) fn drive_shutdown(&mut self, now: Time) {
        loop {
            let mut progressed = false;
            for i in 0..self.pods.len() {
                if self.pods[i].shutdown_initiated {
                    continue;
                }
                let target = &self.pods[i].spec;
                let dependents_stopped = self.pods.iter().all(|p| {
                    !p.spec.depends_on.iter().any(|d| target.answers_to(&d.pod))
                        || (p.shutdown_initiated && !p.any_active())
                });
                if !dependents_stopped {
                    continue;
                }
                let (pods, mut out) = self.split(now);
                let pod = &mut pods[i];
                pod.shutdown_initiated = true;
                for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                    slot.finish_for_shutdown(&mut out);
                }
                pod.stop_all(StopCause::Shutdown, false, &mut out);
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        if !self.exit_emitted && !self.pods.iter().any(Pod::any_active) {
            self.exit_emitted = true;
            let code = match (&self.shutdown, self.exit_with) {
                // The pod's result is what `shutdown_on` asked for, however the rest stopped.
                (_, Some(code)) => code,
                (Some(s), None) if s.unclean => 1,
                _ => 0,
            };
            self.actions.push_back(Action::Exit { code });
        }
    }
}

/// An unmet dependency (`pod db to be ready`), and why it cannot be met on its own when so.
type Unmet = (String, Option<String>);

/// `waiting for pod db to be ready, pod job to be completed: pod job failed and will not run
/// again (…)`: each unmet dependency, with why it cannot happen on its own where it cannot.
pub(super) fn waiting_for(unmet: &[Unmet]) -> String {
    let each: Vec<String> = unmet
        .iter()
        .map(|(what, blocked)| match blocked {
            Some(why) => format!("{what}: {why}"),
            None => what.clone(),
        })
        .collect();
    format!("waiting for {}", each.join(", "))
}
