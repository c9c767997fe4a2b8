//! Operator commands (`start`, `stop`, `restart`, `shutdown`, `reload`): checked against the
//! pods' states, answered with a one-line summary or a typed error, and carried out on the
//! pods.
//!
//! Owns what a command means for the pods. Must not parse or authorise requests (the control
//! server does) nor wait for their effect (the client's `--wait`).

use super::*;
use crate::config::spec::UpdateStrategy;
use crate::core::rollout::{RolloutKind, Todo};

pub(super) fn not_found(message: String) -> CommandError {
    CommandError {
        kind: CommandErrorKind::NotFound,
        message,
    }
}

pub(super) fn invalid(message: String) -> CommandError {
    CommandError {
        kind: CommandErrorKind::NotApplicable,
        message,
    }
}

pub(super) fn shutting_down() -> CommandError {
    CommandError {
        kind: CommandErrorKind::ShuttingDown,
        message: "the supervisor is shutting down".to_string(),
    }
}

/// A set with `update = "rolling"` whose replicas a reload changed: its name, its
/// `max_unavailable` and progress deadline, and the changed replicas with their index.
type RollingSet = (String, (u32, Duration), Vec<(u32, Todo)>);

impl Supervisor {
    /// Apply an operator command; `Ok(message)` is a short human summary.
    pub fn command(&mut self, now: Time, command: Command) -> Result<String, CommandError> {
        let result = match command {
            Command::Start { pod, container } => {
                self.operate(now, Op::Start, &pod, container, false)
            }
            Command::StartIgnoringDependencies { pod } => {
                self.operate(now, Op::Start, &pod, None, true)
            }
            Command::Stop { pod, container } => self.operate(now, Op::Stop, &pod, container, false),
            Command::Restart { pod, container } => {
                self.operate(now, Op::Restart, &pod, container, false)
            }
            Command::Trigger { pod } => self.trigger(now, &pod),
            Command::RollingRestart {
                pod,
                max_unavailable,
            } => self.rolling_restart(now, &pod, max_unavailable),
            Command::Shutdown { force } => Ok(self.begin_shutdown(now, force)),
            Command::Reload(config) => self.reload(now, *config),
        };
        self.refresh(now);
        result
    }

    /// An operator command on the pod with replicas `set` (or a container of it): the same
    /// command on each of its `replicas`, lowest index first, all in this turn
    /// (docs/behaviour.md §14: `vigil restart web` restarts every replica at once; `--rolling`
    /// is the way without downtime). The answer is each replica's, joined; an error only when
    /// every replica refused (the first one's kind, every one's reason).
    fn operate_on_set(
        &mut self,
        now: Time,
        op: Op,
        set: &str,
        replicas: &[String],
        container: Option<String>,
        ignore_deps: bool,
    ) -> Result<String, CommandError> {
        let mut done = Vec::new();
        let mut errors = Vec::new();
        for name in replicas {
            match self.operate(now, op, name, container.clone(), ignore_deps) {
                Ok(message) => done.push(message),
                Err(e) => {
                    done.push(format!("{name}: {}", e.message));
                    errors.push(e);
                }
            }
        }
        if errors.len() == replicas.len()
            && let Some(first) = errors.into_iter().next()
        {
            return Err(CommandError {
                kind: first.kind,
                message: format!("pod {set}: {}", done.join("; ")),
            });
        }
        Ok(done.join("; "))
    }

    /// An operator command on a pod or one of its containers; `ignore_deps` (a whole-pod
    /// start only) starts the pod now whatever its `depends_on` say.
    pub(super) fn operate(
        &mut self,
        now: Time,
        op: Op,
        pod_name: &str,
        container: Option<String>,
        ignore_deps: bool,
    ) -> Result<String, CommandError> {
        if self.shutdown.is_some() && op != Op::Stop {
            return Err(shutting_down());
        }
        let replicas = self.replicas_of(pod_name);
        if !replicas.is_empty() {
            return self.operate_on_set(now, op, pod_name, &replicas, container, ignore_deps);
        }
        let Some(p) = self
            .pods
            .iter()
            .position(|p| p.name() == pod_name && p.next != Next::Remove)
        else {
            return Err(not_found(format!("pod {pod_name:?} not found")));
        };
        // A whole-pod start also starts the pods it depends on that this run left out, as
        // `vigil run POD` would.
        let pulled = if op == Op::Start && container.is_none() && !ignore_deps {
            self.start_unstarted_dependencies(p)
        } else {
            Vec::new()
        };
        let unmet = self.unmet_dependencies(&self.pods[p]);
        if op != Op::Stop
            && let Some(why) = &self.pods[p].refused
        {
            return Err(invalid(format!(
                "pod {pod_name} was refused at start and cannot run: {why}"
            )));
        }
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[p];
        let request = |then_start| StopCause::Request {
            message: MSG_STOP_REQUEST.to_string(),
            then_start,
        };
        let Some(cname) = container else {
            // The whole pod.
            let name = pod.spec.name.clone();
            // A scheduled pod: `stop` also suspends its schedule, `start` resumes it (and
            // starts no run: a trigger does, or `trigger`).
            if let Some(state) = &mut pod.schedule {
                match op {
                    Op::Stop => state.suspended = true,
                    Op::Start if !ignore_deps => {
                        let was = std::mem::replace(&mut state.suspended, false);
                        return Ok(if was {
                            format!("resumed the schedule of pod {name}")
                        } else {
                            format!("the schedule of pod {name} is not suspended")
                        });
                    }
                    _ => {}
                }
            }
            let also = if pulled.is_empty() {
                String::new()
            } else {
                format!(" (and pod {}, which it depends on)", pulled.join(", pod "))
            };
            return Ok(match op {
                Op::Stop if pod.schedule.is_some() && pod.at_rest() => {
                    format!("suspended the schedule of pod {name}")
                }
                Op::Stop => {
                    pod.restart_pending = false;
                    pod.awaiting = false;
                    if pod.unstarted() {
                        return Ok(format!("pod {name} is not started"));
                    }
                    if pod.init.iter().chain(pod.main.iter()).all(|s| s.is_done()) {
                        return Ok(format!("pod {name} is already stopped"));
                    }
                    if pod.stage == Stage::Waiting {
                        pod.held = true;
                    }
                    pod.stop_all(request(false), false, &mut out);
                    format!("stopping pod {name}")
                }
                _ if pod.restart_pending => format!("pod {name} is already restarting"),
                Op::Restart if pod.stage != Stage::Waiting => {
                    // As a new pod would: everything stops, then the pod waits for its
                    // dependencies and runs its init containers again (`refresh_touched`).
                    pod.restart_pending = true;
                    pod.awaiting = false;
                    pod.held = false;
                    if !pod.at_rest() {
                        pod.stop_all(request(false), false, &mut out);
                    }
                    format!("restarting pod {name}")
                }
                Op::Start | Op::Restart => {
                    pod.held = false;
                    let verb = if op == Op::Start {
                        "starting"
                    } else {
                        "restarting"
                    };
                    if ignore_deps {
                        // Now, as if they were met: a pod not begun begins (init containers
                        // first), one at rest resumes at its stage.
                        pod.resume(&mut out);
                        if unmet.is_empty() {
                            format!("{verb} pod {name}{also}")
                        } else {
                            let what: Vec<&str> = unmet.iter().map(|(w, _)| w.as_str()).collect();
                            format!("{verb} pod {name} without waiting for {}", what.join(", "))
                        }
                    } else if pod.stage == Stage::Waiting || (pod.at_rest() && !unmet.is_empty()) {
                        // `start_ready_pods` begins or resumes it once its dependencies are met.
                        pod.await_deps();
                        if unmet.is_empty() {
                            format!("{verb} pod {name}{also}")
                        } else {
                            format!("{verb} pod {name}{also}: {}", waiting_for(&unmet))
                        }
                    } else {
                        pod.resume(&mut out);
                        format!("{verb} pod {name}{also}")
                    }
                }
            });
        };
        let name = pod.spec.name.clone();
        let stage = pod.stage;
        let (init, index) = if let Some(i) = pod.init.iter().position(|s| s.name() == cname) {
            (true, i)
        } else if let Some(i) = pod.main.iter().position(|s| s.name() == cname) {
            (false, i)
        } else {
            return Err(not_found(format!(
                "container {cname:?} not found in pod {pod_name:?}"
            )));
        };
        let sidecar = init && pod.init[index].sidecar();
        // A sidecar may run from its own step on; a plain init container only at its step.
        let may_start = if sidecar {
            matches!(stage, Stage::Init(i) if i >= index) || stage == Stage::Main
        } else if init {
            stage == Stage::Init(index)
        } else {
            stage == Stage::Main
        };
        let starts = op != Op::Stop
            && may_start
            && !(if init {
                &pod.init[index]
            } else {
                &pod.main[index]
            })
            .is_active();
        if starts {
            // What a container runs beside (the sidecars before it) runs again too.
            pod.revive_sidecars(if init { index } else { pod.init.len() }, &mut out);
        }
        let slot = if init {
            &mut pod.init[index]
        } else {
            &mut pod.main[index]
        };
        if op == Op::Stop {
            if slot.is_done() {
                return Ok(format!("{name}/{cname} is already stopped"));
            }
            slot.begin_stop(request(false), &name, &mut out);
            return Ok(format!("stopping {name}/{cname}"));
        }
        if op == Op::Restart && slot.is_active() {
            slot.begin_stop(request(true), &name, &mut out);
            return Ok(format!("restarting {name}/{cname}"));
        }
        if !may_start {
            return Err(invalid(if stage == Stage::Waiting {
                format!(
                    "{name}/{cname} cannot start before its pod has started (start the pod: \
                         it waits for its dependencies)"
                )
            } else if pod.restart_pending {
                format!("{name}/{cname} cannot start while its pod is restarting")
            } else if init && !matches!(stage, Stage::Init(i) if i < index) {
                format!("init container {name}/{cname} is not the pod's current step")
            } else {
                format!(
                    "{name}/{cname} cannot start before the pod's init containers have completed"
                )
            }));
        }
        if slot.start_fresh(&name, &mut out) {
            Ok(format!("starting {name}/{cname}"))
        } else {
            Ok(format!("{name}/{cname} is already running"))
        }
    }

    /// The pods pod `p` depends on, transitively, that this run's selection left out and that
    /// have not started since: they are started (their hold lifted; the dependency gate
    /// starts each when its own dependencies are met). Their names, in config order.
    fn start_unstarted_dependencies(&mut self, p: usize) -> Vec<String> {
        let mut wanted: Vec<usize> = vec![p];
        let mut i = 0;
        while let Some(&at) = wanted.get(i) {
            for d in &self.pods[at].spec.depends_on {
                // The pod named, or every replica of a pod with replicas.
                for (q, x) in self.pods.iter().enumerate() {
                    if x.spec.answers_to(&d.pod) && x.next != Next::Remove && !wanted.contains(&q) {
                        wanted.push(q);
                    }
                }
            }
            i += 1;
        }
        wanted.sort_unstable();
        let mut names = Vec::new();
        for q in wanted {
            let pod = &mut self.pods[q];
            if q != p && pod.unstarted() {
                pod.held = false;
                names.push(pod.name().to_string());
            }
        }
        names
    }

    pub(super) fn begin_shutdown(&mut self, now: Time, force: bool) -> String {
        if self.shutdown.is_none() {
            self.shutdown = Some(Shutdown {
                deadline: crate::instant::saturating_add(now, self.shutdown_timeout),
                deadline_fired: false,
                unclean: false,
            });
        }
        if force {
            let (pods, mut out) = self.split(now);
            for pod in pods.iter_mut() {
                pod.shutdown_initiated = true;
                let name = &pod.spec.name;
                for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                    slot.finish_for_shutdown(&mut out);
                    slot.kill_now(StopCause::Shutdown, KILL_FORCED, name, &mut out);
                }
            }
            "killing everything".to_string()
        } else {
            "shutting down".to_string()
        }
    }

    pub(super) fn reload(&mut self, now: Time, config: Config) -> Result<String, CommandError> {
        if self.shutdown.is_some() {
            return Err(shutting_down());
        }
        self.shutdown_timeout = config.supervisor.shutdown_timeout;
        let mut old: Vec<Option<Pod>> = std::mem::take(&mut self.pods)
            .into_iter()
            .map(Some)
            .collect();
        let (mut changed, mut added, mut removed, mut unchanged) = (0, 0, 0, 0);
        let mut list = Vec::new();
        // The sets with `update = "rolling"` whose replicas changed: their `max_unavailable`
        // and the replicas, by index.
        let mut rolling: Vec<RollingSet> = Vec::new();
        for spec in config.pods {
            let found = old
                .iter()
                .position(|p| p.as_ref().is_some_and(|p| p.name() == spec.name));
            match found.and_then(|i| old[i].take()) {
                Some(mut pod) => {
                    let target: Option<&PodSpec> = match &pod.next {
                        Next::Keep => Some(&pod.spec),
                        Next::Replace(s) => Some(s),
                        Next::Remove => None,
                    };
                    if let Some(target) = target
                        && target.same_definition(&spec)
                    {
                        unchanged += 1;
                        // Only whether it starts may have changed: a pod left out that the
                        // selection now starts begins; one that runs runs on.
                        if spec.autostart && pod.unstarted() {
                            pod.held = false;
                        }
                        match &mut pod.next {
                            Next::Replace(s) => **s = spec,
                            _ => {
                                // A new `history` applies at once.
                                pod.history.trim(spec.history);
                                pod.spec = spec;
                            }
                        }
                    } else if pod.next == Next::Keep
                        && !pod.unstarted()
                        && let Some(r) =
                            (spec.replica.as_ref()).filter(|r| r.update == UpdateStrategy::Rolling)
                    {
                        // `update = "rolling"`: replaced by a rollout, a batch at a time.
                        changed += 1;
                        let at = match rolling.iter().position(|(s, _, _)| *s == r.set) {
                            Some(at) => at,
                            None => {
                                rolling.push((
                                    r.set.clone(),
                                    (r.max_unavailable, r.progress_deadline),
                                    Vec::new(),
                                ));
                                rolling.len() - 1
                            }
                        };
                        rolling[at].2.push((
                            r.index,
                            Todo {
                                pod: spec.name.clone(),
                                spec: Some(Box::new(spec)),
                            },
                        ));
                    } else {
                        if pod.next == Next::Remove {
                            added += 1;
                        } else {
                            changed += 1;
                        }
                        let mut spec = spec;
                        // A pod that has started (by the selection or an operator) is
                        // replaced by one that starts.
                        spec.autostart |= !pod.unstarted();
                        pod.next = Next::Replace(Box::new(spec));
                        self.stop_for_reload(&mut pod, now);
                    }
                    list.push(pod);
                }
                None => {
                    added += 1;
                    list.push(Pod::new(spec, now, &mut self.next_key));
                }
            }
        }
        for mut pod in old.into_iter().flatten() {
            if pod.next != Next::Remove {
                removed += 1;
            }
            pod.next = Next::Remove;
            self.stop_for_reload(&mut pod, now);
            list.push(pod);
        }
        self.pods = list;
        self.reindex();
        let mut rolls = String::new();
        for (set, (max_unavailable, deadline), mut todo) in rolling {
            // Highest index first (`core::rollout`).
            todo.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
            let todo = todo.into_iter().map(|(_, t)| t).collect();
            let kind = RolloutKind::Update;
            self.begin_rollout(now, &set, kind, max_unavailable, deadline, todo);
            rolls.push_str(&format!("; rolling update of pod {set}"));
        }
        Ok(format!(
            "reloaded: {changed} changed, {added} added, {removed} removed, {unchanged} \
             unchanged{rolls}"
        ))
    }

    pub(super) fn stop_for_reload(&mut self, pod: &mut Pod, now: Time) {
        let (_, mut out) = self.split(now);
        let cause = StopCause::Request {
            message: MSG_DEFINITION_CHANGED.to_string(),
            then_start: false,
        };
        pod.stop_all(cause, true, &mut out);
    }
}

impl Supervisor {
    /// A reload refused a file of `pod_dir`: a Warning `PodFileRefused` on the object
    /// `supervisor`, `message` the located problem (it names the file).
    pub fn record_pod_file_refused(&mut self, now: Time, message: String) {
        self.events.record(
            now,
            EventType::Warning,
            crate::config::on_event::EventReason::PodFileRefused,
            "supervisor".to_string(),
            message,
        );
    }

    /// An `on_event` hook could not deliver an event: a Warning `EventHookFailed` on the object
    /// `supervisor` (a name no pod may have). No hook ever receives it (`config::on_event`).
    pub fn record_hook_failure(&mut self, now: Time, message: String) {
        self.events.record(
            now,
            EventType::Warning,
            crate::config::on_event::EventReason::EventHookFailed,
            "supervisor".to_string(),
            message,
        );
    }
}
