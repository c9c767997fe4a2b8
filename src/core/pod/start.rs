//! Starting a run and its lifecycle hooks (kubelet `kuberuntime_container.go` startContainer,
//! `lifecycle/handlers.go`): the `Spawn` action, the run becoming `Running`, its probes
//! activated or held, and the `post_start` / `pre_stop` hook runs.
//!
//! Owns the way from `Creating` to `Running` and the hook bookkeeping. Must not decide what
//! follows the end of a run (`exit.rs`, `restart.rs`) nor the stop's grace (`stop.rs`).

use super::*;
use crate::config::on_event::EventReason;

impl Slot {
    /// Begin a new run: bump the generation and ask the runtime to spawn.
    pub(in crate::core) fn spawn(&mut self, pod: &str, out: &mut Out) {
        let prev = std::mem::replace(
            &mut self.state,
            SlotState::Creating {
                pending: None,
                force_kill: false,
            },
        );
        if let SlotState::Done(t) = prev {
            // A synthetic "stopped before it ran again" record is not a run worth keeping.
            if !(t.reason == TerminationReason::Stopped && t.started_at.is_none()) {
                self.last_state = Some(t);
            }
        }
        self.generation += 1;
        if self.runs > 0 {
            self.restart_count += 1;
        }
        self.runs += 1;
        self.started = false;
        self.run_oom_seen = 0;
        self.output_lost = false;
        self.notify = NotifyStatus::default();
        self.watchdog_at = None;
        self.start_deadline = None;
        for p in &mut self.probes {
            p.reset_for_run(self.restart_count.saturating_add(1));
        }
        out.actions.push_back(Action::Spawn {
            key: self.key,
            generation: self.generation,
            pod: pod.to_string(),
            container: self.spec.clone(),
            init: self.init,
        });
    }

    /// Starts the schedules of this container's probes of `kinds`, all with the same phase:
    /// that of the next container whose probes begin in the current group (`PhaseSpread`).
    pub(super) fn activate_probes(&mut self, kinds: &[ProbeKind], out: &mut Out) {
        if !self.probes.iter().any(|p| kinds.contains(&p.kind)) {
            return;
        }
        let member = out.phase_spread.member(out.now);
        for p in &mut self.probes {
            if kinds.contains(&p.kind) {
                p.activate(out.now, member);
            }
        }
    }

    pub(super) fn hold_probes(&mut self, out: &mut Out) {
        for p in &mut self.probes {
            if let Some(seq) = p.hold() {
                out.actions.push_back(Action::CancelProbe {
                    key: self.key,
                    generation: self.generation,
                    kind: p.kind,
                    seq,
                });
            }
        }
    }

    pub(in crate::core) fn on_spawned(&mut self, pid: u32, pod: &str, out: &mut Out) {
        let SlotState::Creating {
            pending,
            force_kill,
        } = &mut self.state
        else {
            return;
        };
        let pending = pending.take();
        let force_kill = *force_kill;
        self.state = SlotState::Running {
            pid,
            started_at: out.now,
            stopping: None,
        };
        // systemd's TimeoutStartSec= runs from the start until READY=1.
        self.start_deadline = (self.spec.start_timeout)
            .filter(|_| self.spec.notify)
            .map(|t| later(out.now, t));
        let name = self.spec.name.clone();
        out.event(
            EventType::Normal,
            EventReason::Started,
            pod,
            &name,
            format!("Started container {name}"),
        );
        // Kubelet startContainer: the post-start hook runs right after the start, and the
        // container is not started (no probes) until it returns.
        match self.spec.lifecycle.post_start.clone() {
            Some(hook) => self.start_hook(&hook, false, None, pod, out),
            None => self.post_start_done(out),
        }
        if force_kill {
            self.kill_now(
                pending.unwrap_or(StopCause::Shutdown),
                KILL_FORCED,
                pod,
                out,
            );
        } else if let Some(cause) = pending {
            self.begin_stop(cause, pod, out);
        }
    }

    /// The run is under way (post-start hook returned, or none): probes begin.
    pub(super) fn post_start_done(&mut self, out: &mut Out) {
        if self.probes.iter().any(|p| p.kind == ProbeKind::Startup) {
            self.activate_probes(&[ProbeKind::Startup], out);
        } else {
            self.started = true;
            self.activate_probes(&[ProbeKind::Liveness, ProbeKind::Readiness], out);
        }
    }

    /// Run a hook: `sleep` is a deadline of the core's; `exec`/`http_get` is a `StartProbe`
    /// of kind `Hook` (run by the runtime like a probe, in the container's cgroup as its
    /// user), with `timeout` (pre-stop: the grace period) or none.
    pub(super) fn start_hook(
        &mut self,
        hook: &Hook,
        pre_stop: bool,
        timeout: Option<Duration>,
        pod: &str,
        out: &mut Out,
    ) {
        self.hook = Some(match hook {
            Hook::Sleep(d) => HookRun {
                pre_stop,
                seq: None,
                done_at: Some(later(out.now, *d)),
            },
            Hook::Action(action) => {
                *out.probe_seq += 1;
                let seq = *out.probe_seq;
                let probe = ProbeSpec {
                    action: action.clone(),
                    initial_delay: Duration::ZERO,
                    period: Duration::from_secs(1),
                    timeout: timeout.unwrap_or(Duration::from_secs(100 * 365 * 24 * 3600)),
                    success_threshold: 1,
                    failure_threshold: 1,
                    termination_grace: None,
                };
                out.actions.push_back(Action::StartProbe {
                    key: self.key,
                    generation: self.generation,
                    pod: pod.to_string(),
                    container: self.spec.clone(),
                    kind: ProbeKind::Hook,
                    seq,
                    probe: Arc::new(probe),
                });
                HookRun {
                    pre_stop,
                    seq: Some(seq),
                    done_at: None,
                }
            }
        });
    }

    /// Abandon a running hook (the container stopped, or the grace ran out).
    pub(super) fn cancel_hook(&mut self, out: &mut Out) {
        if let Some(HookRun { seq: Some(seq), .. }) = self.hook.take() {
            out.actions.push_back(Action::CancelProbe {
                key: self.key,
                generation: self.generation,
                kind: ProbeKind::Hook,
                seq,
            });
        }
    }

    /// A hook returned. Post-start: success starts the run, failure kills it
    /// (`FailedPostStartHook`). Pre-stop: either way the stop signal follows (a failure is a
    /// `FailedPreStopHook` event), and the kill waits at least `min(2 s, grace)` after it.
    pub(super) fn hook_done(&mut self, failure: Option<String>, pod: &str, out: &mut Out) {
        let Some(run) = self.hook.take() else {
            return;
        };
        let name = self.spec.name.clone();
        if !run.pre_stop {
            match failure {
                None => self.post_start_done(out),
                Some(message) => {
                    out.event(
                        EventType::Warning,
                        EventReason::FailedPostStartHook,
                        pod,
                        &name,
                        message.clone(),
                    );
                    self.begin_stop(StopCause::PostStartHook { message }, pod, out);
                }
            }
            return;
        }
        if let Some(message) = failure {
            out.event(
                EventType::Warning,
                EventReason::FailedPreStopHook,
                pod,
                &name,
                message,
            );
        }
        let grace = effective_grace(self.spec.termination_grace);
        if let SlotState::Running {
            stopping: Some(s), ..
        } = &mut self.state
            && !s.killed
        {
            s.kill_at = s
                .kill_at
                .max(later(out.now, grace.min(Duration::from_secs(2))));
            out.actions.push_back(Action::Signal {
                key: self.key,
                generation: self.generation,
                signal: self.spec.stop_signal,
            });
        }
    }
}
