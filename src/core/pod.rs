//! One pod and the lifecycle of its container slots.
//!
//! Owns the per-container state machine (not started → creating → running → back-off or
//! terminated), the restart decision (policy, back-off, `max_restarts`), stopping with a grace
//! period, probe effects, the pod's stage (waiting for dependencies → init containers → main
//! containers), its phase and its conditions. Everything it wants done is pushed to [`Out`];
//! it never reads the clock or does I/O. Decisions that span pods (dependencies, shutdown
//! order, reload) belong to the supervisor.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::backoff::BackoffState;
use super::events::EventLog;
use super::probes::{PhaseSpread, Probe, Recorded};
use super::*;
use crate::config::spec::{ContainerSpec, Hook, PodSpec, ProbeKind, ProbeSpec, RestartPolicy};
use crate::format::{go_duration, quantity};
// A deadline beyond what `Instant` can hold is as good as never: it saturates far ahead.
use crate::instant::saturating_add as later;

/// Where slot transitions put their effects.
pub(super) struct Out<'a> {
    pub now: Time,
    pub actions: &'a mut VecDeque<Action>,
    pub events: &'a mut EventLog,
    pub probe_seq: &'a mut u64,
    /// Containers whose probes began within a millisecond (phase spreading, `probes.rs`).
    pub phase_spread: &'a mut PhaseSpread,
    /// No restarts and no new starts while the supervisor shuts down.
    pub shutting_down: bool,
    /// Set when a `Kill` was needed during shutdown (the exit code becomes 1).
    pub unclean: &'a mut bool,
}

impl Out<'_> {
    pub(super) fn event(
        &mut self,
        kind: EventType,
        reason: &str,
        pod: &str,
        container: &str,
        msg: String,
    ) {
        self.events
            .record(self.now, kind, reason, format!("{pod}/{container}"), msg);
    }
}

pub(super) const MSG_STOP_REQUEST: &str = "stopped by request";
/// A container an operator had stopped when an earlier vigil died, kept stopped at start.
pub(super) const MSG_KEPT_STOPPED: &str =
    "stopped by request, kept stopped across a restart of vigil";
pub(super) const MSG_DEFINITION_CHANGED: &str = "definition changed";
pub(super) const MSG_SHUTDOWN: &str = "supervisor shutting down";
pub(super) const MSG_MAIN_FINISHED: &str = "the pod's containers have finished";
/// Why `kill_now` SIGKILLs: a second stop signal, or the supervisor's shutdown timeout.
pub(super) const KILL_FORCED: &str = "forced shutdown";
/// The message of a run adopted from an earlier vigil that ended on its own.
pub(super) const MSG_STATUS_UNKNOWN: &str = "the container was adopted from an earlier vigil and is not its child: its exit status is unknown";
/// An init container of a pod whose containers were adopted: it completed under the earlier
/// vigil (the regular containers ran), so it is not run again.
pub(super) const MSG_COMPLETED_BEFORE: &str = "completed under an earlier vigil";
/// The exit code of such a run (kubelet `TerminatePod`: 137).
pub(super) const EXIT_CODE_UNKNOWN: i32 = 137;
/// The end of a run that was running when an earlier vigil died and was gone (or could not be
/// adopted) when the next one started.
pub(super) const MSG_GONE_UNSEEN: &str = "it was running when an earlier vigil died and had gone (or could not be adopted) when vigil started again: its exit status is unknown";
pub(super) const KILL_SHUTDOWN_TIMEOUT: &str = "still running at the shutdown timeout";
/// Why vigil restarts an adopted run whose output pipes were lost (`on_output_lost =
/// "restart"`).
pub(super) const MSG_OUTPUT_LOST: &str =
    "its output pipes were lost in a crash of vigil (on_output_lost = \"restart\")";

/// Why vigil is stopping a running container.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) enum StopCause {
    /// A liveness or startup probe failure was published; `message` has the last output.
    Probe { kind: ProbeKind, message: String },
    /// Operator or reload; `then_start` restarts it at once after it exits (`restart`).
    Request { message: String, then_start: bool },
    /// Supervisor shutdown.
    Shutdown,
    /// The `post_start` hook failed (kubelet: `FailedPostStartHook`, the container is killed).
    PostStartHook { message: String },
}

/// A lifecycle hook in progress (kubelet `lifecycle/handlers.go`; at most one at a time).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub(super) struct HookRun {
    pre_stop: bool,
    /// The `StartProbe` (kind `Hook`) attempt running an `exec`/`http_get` hook.
    seq: Option<u64>,
    /// When a `sleep` hook is done.
    #[serde(with = "crate::monotime::opt")]
    done_at: Option<Time>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub(super) struct Stopping {
    cause: StopCause,
    #[serde(with = "crate::monotime")]
    kill_at: Time,
    killed: bool,
    /// The grace period it was given (for the SIGKILL event and last-state message).
    grace: Duration,
    /// SIGKILLed because the grace period ran out (not a forced shutdown).
    grace_expired: bool,
}

impl Stopping {
    fn status(&self) -> Terminating {
        let message = match &self.cause {
            StopCause::Probe { kind, message } => {
                format!("{} probe failed: {message}", kind.as_str())
            }
            StopCause::Request { message, .. } => message.clone(),
            StopCause::Shutdown => MSG_SHUTDOWN.to_string(),
            StopCause::PostStartHook { message } => format!("post_start hook failed: {message}"),
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
    fn cause_after_exit(self) -> StopCause {
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
            StopCause::Shutdown => StopCause::Request {
                message: format!("{MSG_SHUTDOWN}; {killed}"),
                then_start: false,
            },
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub(super) enum SlotState {
    /// Not started in this pod's life yet (waiting for dependencies or init containers).
    NotStarted {
        reason: WaitingReason,
        message: String,
    },
    /// `Spawn` emitted, waiting for `Spawned`/`SpawnFailed`.
    Creating {
        pending: Option<StopCause>,
        force_kill: bool,
    },
    Running {
        pid: u32,
        #[serde(with = "crate::monotime")]
        started_at: Time,
        stopping: Option<Stopping>,
    },
    /// Crash-loop back-off: restart at `until`.
    BackOff {
        #[serde(with = "crate::monotime")]
        until: Time,
        delay: Duration,
    },
    /// Terminated and not going to restart on its own.
    Done(Terminated),
}

#[derive(serde::Serialize, serde::Deserialize, Debug)]
pub(super) struct Slot {
    pub key: ContainerKey,
    #[serde(with = "crate::config::intern::arc")]
    pub spec: Arc<ContainerSpec>,
    pub init: bool,
    pub generation: Generation,
    pub state: SlotState,
    pub last_state: Option<Terminated>,
    pub restart_count: u32,
    /// Automatic restarts since the last operator start (what `max_restarts` limits).
    auto_restarts: u32,
    runs: u32,
    backoff: BackoffState,
    probes: Vec<Probe>,
    /// Startup probe passed (or none) in this run.
    started: bool,
    pub oom_kills: u64,
    /// OOM kills already reported by `OomKills` during this run.
    run_oom_seen: u64,
    hook: Option<HookRun>,
    /// The current run's output pipes were lost in a crash of vigil (`output_lost`).
    #[serde(default)]
    output_lost: bool,
}

fn probe_spec(spec: &ContainerSpec, kind: ProbeKind) -> Option<&ProbeSpec> {
    match kind {
        ProbeKind::Startup => spec.startup_probe.as_ref(),
        ProbeKind::Liveness => spec.liveness_probe.as_ref(),
        ProbeKind::Readiness => spec.readiness_probe.as_ref(),
        ProbeKind::Hook => None,
    }
}

/// The grace of a stop that is part of a whole-pod stop ending at `deadline` (kubelet
/// `kuberuntime_container.go` killContainer: the pod's grace less the time already spent —
/// waiting for a sidecar's turn, `kuberuntime_termination_order.go` waitForTurn — raised to
/// `minimumGracePeriodInSeconds`). The container's own grace still bounds it, and the floor is
/// `min(2 s, own grace)`, so a grace of `0` stays an immediate SIGKILL.
fn pod_capped_grace(own: Duration, deadline: Option<Time>, now: Time) -> Duration {
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

fn exit_desc(code: i32, signal: Option<i32>) -> String {
    match signal {
        Some(s) => format!("signal {s}"),
        None => format!("exit code {code}"),
    }
}

fn stopped(message: &str, now: Time) -> Terminated {
    Terminated {
        exit_code: 0,
        signal: None,
        reason: TerminationReason::Stopped,
        message: message.to_string(),
        started_at: None,
        finished_at: now,
    }
}

/// What a main process that exited 0 left in its cgroup, and the likely cause: a service that
/// daemonized (forked into the background and let its first process exit), which a
/// supervisor must run in the foreground instead. `None` when it left nothing.
fn left_behind(n: u32) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "left {n} process{} in its cgroup (did it daemonize? run it in the foreground: \
             daemon off;, --daemonize no)",
            if n == 1 { "" } else { "es" }
        )
    })
}

/// A termination message as one line of an event: trailing line breaks dropped, inner ones
/// written `\n` (a message file usually ends in a newline; vigil's log is one line per event).
fn one_line(message: &str) -> String {
    message
        .trim_end_matches(['\n', '\r'])
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

/// Why the main process ended (docs/behaviour.md §3), given what vigil was doing to it.
fn termination(
    exit: &ExitInfo,
    cause: Option<&StopCause>,
    success_codes: &[i32],
    started_at: Option<Time>,
    now: Time,
) -> Terminated {
    let exit_code = match (exit.code, exit.signal) {
        _ if exit.status_unknown => EXIT_CODE_UNKNOWN,
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => -1,
    };
    let oom = exit.oom_group_kill_delta > 0 || (exit.signal == Some(9) && exit.oom_kill_delta > 0);
    let (reason, message) = match cause {
        Some(StopCause::Probe { kind, message }) => (
            match kind {
                ProbeKind::Startup => TerminationReason::StartupProbeFailed,
                _ => TerminationReason::LivenessProbeFailed,
            },
            message.clone(),
        ),
        Some(StopCause::Request { message, .. }) => (TerminationReason::Stopped, message.clone()),
        Some(StopCause::Shutdown) => (TerminationReason::Stopped, MSG_SHUTDOWN.to_string()),
        Some(StopCause::PostStartHook { message }) => {
            (TerminationReason::FailedPostStartHook, message.clone())
        }
        None if exit.status_unknown => (
            TerminationReason::ContainerStatusUnknown,
            MSG_STATUS_UNKNOWN.to_string(),
        ),
        None if oom => {
            let message = match (exit.memory_max, exit.memory_peak) {
                (Some(max), Some(peak)) => format!(
                    "memory.max={} reached (peak {})",
                    quantity(max),
                    quantity(peak)
                ),
                (Some(max), None) => format!("memory.max={} reached", quantity(max)),
                _ if exit.oom_group_kill_delta > 0 => {
                    "the container was OOM-killed as a group".to_string()
                }
                _ => "the main process was OOM-killed".to_string(),
            };
            (TerminationReason::OomKilled, message)
        }
        None if exit.code == Some(0) => (
            TerminationReason::Completed,
            left_behind(exit.left_behind).unwrap_or_default(),
        ),
        // `success_exit_codes` (systemd's SuccessExitStatus=): a success the program spells
        // otherwise.
        None if exit.code.is_some_and(|c| success_codes.contains(&c)) => (
            TerminationReason::Completed,
            format!("exited with code {exit_code}, a success (success_exit_codes)"),
        ),
        None => (
            TerminationReason::Error,
            match exit.signal {
                Some(s) => format!("killed by signal {s}"),
                None => format!("exited with code {exit_code}"),
            },
        ),
    };
    let message = match &exit.termination_message {
        Some(m) if !m.is_empty() => m.clone(),
        _ if exit.status_unknown && cause.is_some() => {
            format!("{message}; its exit status is unknown (adopted from an earlier vigil)")
        }
        _ => message,
    };
    Terminated {
        exit_code,
        signal: exit.signal,
        reason,
        message,
        started_at,
        finished_at: now,
    }
}

impl Slot {
    pub(super) fn new(
        key: ContainerKey,
        spec: Arc<ContainerSpec>,
        init: bool,
        reason: WaitingReason,
        message: String,
    ) -> Slot {
        let probes = ProbeKind::ALL
            .iter()
            .filter_map(|&k| probe_spec(&spec, k).map(|p| Probe::new(k, Arc::new(p.clone()))))
            .collect();
        Slot {
            key,
            spec,
            init,
            generation: 0,
            state: SlotState::NotStarted { reason, message },
            last_state: None,
            restart_count: 0,
            auto_restarts: 0,
            runs: 0,
            backoff: BackoffState::default(),
            probes,
            started: false,
            oom_kills: 0,
            run_oom_seen: 0,
            hook: None,
            output_lost: false,
        }
    }

    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    /// A process exists or is being created.
    pub(super) fn is_active(&self) -> bool {
        matches!(
            self.state,
            SlotState::Creating { .. } | SlotState::Running { .. }
        )
    }

    /// The run has ended and nothing will restart it on its own (stopped, completed, failed).
    pub(super) fn is_done(&self) -> bool {
        matches!(self.state, SlotState::Done(_))
    }

    pub(super) fn is_running_started(&self) -> bool {
        matches!(self.state, SlotState::Running { .. }) && self.started
    }

    /// A sidecar: an init container whose own `restart_policy` is `Always` (Kubernetes 1.29
    /// restartable init container, `podutil.IsRestartableInitContainer`).
    pub(super) fn sidecar(&self) -> bool {
        self.init && self.spec.restart_policy == RestartPolicy::Always
    }

    /// A stop was asked for and is under way (signal sent, or asked for while creating).
    pub(super) fn stop_requested(&self) -> bool {
        match &self.state {
            SlotState::Running { stopping, .. } => stopping.is_some(),
            SlotState::Creating { pending, .. } => matches!(
                pending,
                Some(StopCause::Request { .. } | StopCause::Shutdown)
            ),
            _ => false,
        }
    }

    /// Kubelet `prober/prober_manager.go` UpdatePodStatus: a regular container is ready when it runs,
    /// has started and its readiness probe (if any) published Success; an init container is
    /// ready once it has terminated with success, and not before; a sidecar is ready like a
    /// regular container.
    pub(super) fn ready(&self) -> bool {
        if self.init && !self.sidecar() {
            return self.done_completed();
        }
        // Not ready from the moment a stop begins (kubelet: a terminating pod is removed from
        // endpoints at once), not only once it has exited.
        if matches!(
            self.state,
            SlotState::Running {
                stopping: Some(_),
                ..
            }
        ) {
            return false;
        }
        self.is_running_started()
            && self
                .probes
                .iter()
                .filter(|p| p.kind == ProbeKind::Readiness)
                .all(|p| p.result == ProbeResultState::Success)
    }

    /// Whether a termination with this reason counts as a failure for the pod phase.
    fn phase_failure(reason: TerminationReason) -> bool {
        !matches!(
            reason,
            TerminationReason::Completed | TerminationReason::Stopped
        )
    }

    pub(super) fn done_failed(&self) -> Option<bool> {
        match &self.state {
            SlotState::Done(t) => Some(Self::phase_failure(t.reason)),
            _ => None,
        }
    }

    pub(super) fn done_completed(&self) -> bool {
        matches!(&self.state, SlotState::Done(t) if t.reason == TerminationReason::Completed)
    }

    pub(super) fn has_run(&self) -> bool {
        self.runs > 0
    }

    /// Whether it is in, or about to be in, another run (running, creating a restart, or
    /// backing off).
    pub(super) fn live_or_restarting(&self) -> bool {
        match self.state {
            SlotState::Running { .. } | SlotState::BackOff { .. } => true,
            SlotState::Creating { .. } => self.runs > 1,
            _ => false,
        }
    }

    pub(super) fn set_waiting(&mut self, reason: WaitingReason, message: String) {
        if let SlotState::NotStarted { .. } = self.state {
            self.state = SlotState::NotStarted { reason, message };
        }
    }

    /// Not started again until the pod gets to it (an operator start waiting for
    /// dependencies, a pod restart): a finished run becomes the last state. A slot that runs,
    /// is being created or backs off is left alone.
    pub(super) fn await_start(&mut self, reason: WaitingReason, message: String) {
        match &self.state {
            SlotState::Done(t) => {
                // A synthetic "stopped before it ran again" record is not a run worth keeping.
                if !(t.reason == TerminationReason::Stopped && t.started_at.is_none()) {
                    self.last_state = Some(t.clone());
                }
            }
            SlotState::NotStarted { .. } => {}
            _ => return,
        }
        self.state = SlotState::NotStarted { reason, message };
    }

    /// Forget back-off history and the restart budget (operator start/restart).
    pub(super) fn fresh(&mut self) {
        self.backoff.reset();
        self.auto_restarts = 0;
    }

    /// Begin a new run: bump the generation and ask the runtime to spawn.
    pub(super) fn spawn(&mut self, pod: &str, out: &mut Out) {
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
    fn activate_probes(&mut self, kinds: &[ProbeKind], out: &mut Out) {
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

    fn hold_probes(&mut self, out: &mut Out) {
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

    pub(super) fn on_spawned(&mut self, pid: u32, pod: &str, out: &mut Out) {
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
        let name = self.spec.name.clone();
        out.event(
            EventType::Normal,
            "Started",
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

    /// How it ended for good, if a vigil restarted after a crash keeps that: an operator's stop
    /// (`Stopped` by request, not started since), or `Completed` without a restart to come.
    pub(super) fn kept_end(&self) -> Option<KeptEnd> {
        match &self.state {
            SlotState::Done(t)
                if t.reason == TerminationReason::Stopped
                    && t.message.starts_with(MSG_STOP_REQUEST) =>
            {
                Some(KeptEnd::Stopped)
            }
            SlotState::Done(t) if t.reason == TerminationReason::Completed => {
                Some(KeptEnd::Completed)
            }
            _ => None,
        }
    }

    /// Nothing of this slot has run under this vigil yet: its first run is queued or not
    /// begun, with no stop pending (what a recalled or kept end may replace).
    fn untouched_here(&self) -> bool {
        self.runs <= 1
            && matches!(
                self.state,
                SlotState::NotStarted { .. }
                    | SlotState::Creating {
                        pending: None,
                        force_kill: false,
                    }
            )
    }

    /// At start (nothing of it has run here yet): stays ended as under an earlier vigil. Its
    /// queued first `Spawn` is the caller's to drop.
    pub(super) fn keep_ended(&mut self, now: Time, end: KeptEnd) -> bool {
        let untouched = self.untouched_here();
        if !untouched {
            return false;
        }
        self.runs = 0;
        self.state = SlotState::Done(match end {
            KeptEnd::Stopped => stopped(MSG_KEPT_STOPPED, now),
            KeptEnd::Completed => Terminated {
                exit_code: 0,
                signal: None,
                reason: TerminationReason::Completed,
                message: MSG_COMPLETED_BEFORE.to_string(),
                started_at: None,
                finished_at: now,
            },
        });
        true
    }

    /// Takes in a process an earlier vigil started and left running as this slot's run, as if
    /// it had just been spawned — but without a spawn, a `Started` event or a `post_start`
    /// hook (it ran back then): an `Adopted` event, its restart count as recorded, probes
    /// from now. Only a slot whose first run is about to start (its `Spawn` still queued, or
    /// not started yet) can adopt; the queued `Spawn` is the caller's to drop. Returns the
    /// run's generation.
    pub(super) fn adopt(
        &mut self,
        pid: u32,
        started_at: Time,
        restart_count: u32,
        pod: &str,
        out: &mut Out,
    ) -> Option<Generation> {
        match self.state {
            SlotState::Creating {
                pending: None,
                force_kill: false,
            } if self.runs == 1 => {}
            SlotState::NotStarted { .. } if self.runs == 0 => {
                self.generation += 1;
                self.runs = 1;
            }
            _ => return None,
        }
        self.restart_count = restart_count;
        self.state = SlotState::Running {
            pid,
            started_at,
            stopping: None,
        };
        let name = self.spec.name.clone();
        out.event(
            EventType::Normal,
            "Adopted",
            pod,
            &name,
            format!(
                "Adopted container {name} (pid {pid}) left running by an earlier vigil; its \
                 exit status will be unknown"
            ),
        );
        self.post_start_done(out);
        Some(self.generation)
    }

    /// The running run `generation` (adopted) has lost its output pipes in a crash of vigil:
    /// marked so in its status, a Warning `OutputLost` event, and with `restart` stopped and
    /// started again at once, as an operator's `restart` would (the kubelet restarts a
    /// container whose state it cannot know rather than trust it). False when that run is not
    /// running (any more).
    pub(super) fn output_lost(
        &mut self,
        generation: Generation,
        restart: bool,
        pod: &str,
        out: &mut Out,
    ) -> bool {
        let pid = match &self.state {
            SlotState::Running { pid, .. } if self.generation == generation => *pid,
            _ => return false,
        };
        self.output_lost = true;
        let name = self.spec.name.clone();
        let then = if restart {
            "restarting it (on_output_lost = \"restart\")"
        } else {
            "it runs on, its writes to stdout and stderr fail (on_output_lost = \"keep\")"
        };
        out.event(
            EventType::Warning,
            REASON_OUTPUT_LOST,
            pod,
            &name,
            format!(
                "The output pipes of container {name} (pid {pid}) were lost in a crash of vigil: \
                 what it writes cannot be read; {then}"
            ),
        );
        if restart {
            self.begin_stop(
                StopCause::Request {
                    message: MSG_OUTPUT_LOST.to_string(),
                    then_start: true,
                },
                pod,
                out,
            );
        }
        true
    }

    /// What the next vigil takes back of this container (`recall`).
    pub(super) fn memory(&self, spec: u64) -> super::recall::SlotMemory {
        use super::recall::Remembered;
        super::recall::SlotMemory {
            name: self.spec.name.clone(),
            init: self.init,
            spec,
            restart_count: self.restart_count,
            auto_restarts: self.auto_restarts,
            runs: self.runs,
            backoff: self.backoff.clone(),
            last_state: self.last_state.clone(),
            state: match &self.state {
                SlotState::NotStarted { .. } => Remembered::Waiting,
                SlotState::Creating { .. } => Remembered::Active { started_at: None },
                SlotState::Running { started_at, .. } => Remembered::Active {
                    started_at: Some(*started_at),
                },
                SlotState::BackOff { until, delay } => Remembered::BackOff {
                    until: *until,
                    delay: *delay,
                },
                SlotState::Done(t) => Remembered::Done(t.clone()),
            },
        }
    }

    /// At start, after adoption, with the same definition as under the earlier vigil: takes
    /// back its history and, unless it was adopted, what its state was (`super::recall`).
    /// `reached`: its pod is at or past its step (else it starts later, as usual). A queued
    /// first `Spawn` of a slot that is not `Creating` afterwards is the caller's to drop.
    pub(super) fn recall(
        &mut self,
        m: &super::recall::SlotMemory,
        reached: bool,
        pod: &str,
        out: &mut Out,
    ) -> Option<super::recall::Recalled> {
        use super::recall::{Recalled, Remembered};
        let adopted = matches!(self.state, SlotState::Running { .. }) && self.runs <= 1;
        let first = self.untouched_here();
        // An init container recorded as completed by a skip to its pod's stage.
        let skipped = matches!(&self.state, SlotState::Done(t) if t.message == MSG_COMPLETED_BEFORE)
            && self.runs <= 1;
        if !(adopted || first || skipped) {
            return None;
        }
        self.restart_count = m.restart_count.max(self.restart_count);
        self.auto_restarts = m.auto_restarts;
        self.backoff = m.backoff.clone();
        if self.last_state.is_none() {
            self.last_state = m.last_state.clone();
        }
        if adopted {
            return Some(Recalled::History);
        }
        if skipped {
            if let Remembered::Done(t) = &m.state {
                self.state = SlotState::Done(t.clone());
                self.runs = m.runs;
            }
            return Some(Recalled::Ended(TerminationReason::Completed));
        }
        let creating = matches!(self.state, SlotState::Creating { .. });
        // Its first spawn here is a restart of the runs before.
        let as_restart = |slot: &mut Slot| {
            if creating && m.runs > 0 {
                slot.runs = m.runs + 1;
                slot.restart_count = m.restart_count + 1;
            } else {
                slot.runs = m.runs;
            }
        };
        match &m.state {
            Remembered::Waiting => {
                as_restart(self);
                Some(Recalled::History)
            }
            Remembered::Done(t)
                if t.reason != TerminationReason::Stopped
                    || t.message.starts_with(MSG_STOP_REQUEST) =>
            {
                if !reached {
                    return None;
                }
                self.runs = m.runs;
                self.state = SlotState::Done(t.clone());
                Some(Recalled::Ended(t.reason))
            }
            Remembered::Done(t) => {
                // Stopped by a shutdown that the crash cut short: it starts again.
                if t.started_at.is_some() {
                    self.last_state = Some(t.clone());
                }
                as_restart(self);
                Some(Recalled::History)
            }
            Remembered::BackOff { until, delay } => {
                if !reached {
                    return None;
                }
                self.runs = m.runs;
                self.state = SlotState::BackOff {
                    until: (*until).min(later(out.now, *delay)),
                    delay: *delay,
                };
                Some(Recalled::BackOff)
            }
            Remembered::Active { started_at } => {
                if !reached {
                    return None;
                }
                let term = Terminated {
                    exit_code: EXIT_CODE_UNKNOWN,
                    signal: None,
                    reason: TerminationReason::ContainerStatusUnknown,
                    message: MSG_GONE_UNSEEN.to_string(),
                    started_at: *started_at,
                    finished_at: out.now,
                };
                let name = self.spec.name.clone();
                out.event(
                    EventType::Warning,
                    "Exited",
                    pod,
                    &name,
                    format!(
                        "Container {name} exited: {}, {MSG_GONE_UNSEEN}",
                        term.reason.as_str()
                    ),
                );
                // As the end of an adopted run (`termination`): unknown is a failure.
                let restarts = self.sidecar() || self.spec.restart_policy != RestartPolicy::Never;
                if restarts && creating {
                    self.last_state = Some(term);
                    as_restart(self);
                    Some(Recalled::GoneRestarted)
                } else {
                    self.runs = m.runs;
                    self.state = SlotState::Done(term);
                    Some(Recalled::GoneEnded)
                }
            }
        }
    }

    /// The run is under way (post-start hook returned, or none): probes begin.
    fn post_start_done(&mut self, out: &mut Out) {
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
    fn start_hook(
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
    fn cancel_hook(&mut self, out: &mut Out) {
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
    fn hook_done(&mut self, failure: Option<String>, pod: &str, out: &mut Out) {
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
                        "FailedPostStartHook",
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
            out.event(EventType::Warning, "FailedPreStopHook", pod, &name, message);
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

    pub(super) fn on_spawn_failed(&mut self, message: String, pod: &str, out: &mut Out) {
        let SlotState::Creating { pending, .. } = &mut self.state else {
            return;
        };
        let cause = pending.take();
        let name = self.spec.name.clone();
        out.event(
            EventType::Warning,
            "Failed",
            pod,
            &name,
            format!("Error: failed to start container {name}: {message}"),
        );
        let term = Terminated {
            exit_code: 128,
            signal: None,
            reason: TerminationReason::StartError,
            message,
            started_at: None,
            finished_at: out.now,
        };
        self.conclude(term, cause, pod, out);
    }

    pub(super) fn on_exited(&mut self, exit: &ExitInfo, pod: &str, out: &mut Out) {
        let (started_at, cause) = match &mut self.state {
            SlotState::Running {
                started_at,
                stopping,
                ..
            } => (
                Some(*started_at),
                stopping.take().map(|s| s.cause_after_exit()),
            ),
            SlotState::Creating { pending, .. } => (None, pending.take()),
            _ => return,
        };
        let term = termination(
            exit,
            cause.as_ref(),
            &self.spec.success_exit_codes,
            started_at,
            out.now,
        );
        // The reap-time counter covers the whole run; count only what `OomKills` did not.
        let mut extra = exit.oom_kill_delta.saturating_sub(self.run_oom_seen);
        if term.reason == TerminationReason::OomKilled && self.run_oom_seen + extra == 0 {
            extra = 1;
        }
        self.oom_kills += extra;
        self.run_oom_seen += extra;
        let left = (term.reason == TerminationReason::Completed)
            .then(|| left_behind(exit.left_behind))
            .flatten();
        self.conclude_with(term, cause, left, pod, out);
    }

    pub(super) fn on_oom_kills(
        &mut self,
        delta: u64,
        memory_max: Option<u64>,
        pod: &str,
        out: &mut Out,
    ) {
        if !matches!(self.state, SlotState::Running { .. }) || delta == 0 {
            return;
        }
        self.oom_kills += delta;
        self.run_oom_seen += delta;
        let procs = if delta == 1 { "process" } else { "processes" };
        let limit = memory_max
            .map(|m| format!(", memory.max={}", quantity(m)))
            .unwrap_or_default();
        let name = self.spec.name.clone();
        out.event(
            EventType::Warning,
            "OOMKilling",
            pod,
            &name,
            format!("{delta} {procs} OOM-killed in container={name} pod={pod}{limit}"),
        );
    }

    /// A run ended: decide between terminated, back-off and an immediate restart.
    fn conclude(&mut self, term: Terminated, cause: Option<StopCause>, pod: &str, out: &mut Out) {
        self.conclude_with(term, cause, None, pod, out);
    }

    /// [`Slot::conclude`], with what a `Completed` run left behind for its event.
    fn conclude_with(
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
            out.event(kind, "Exited", pod, &name, message);
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
            Some(StopCause::Request { .. }) | Some(StopCause::Shutdown) => {
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
                "RestartLimitExceeded",
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
                "BackOff",
                pod,
                &name,
                format!("Back-off restarting failed container {name} in pod {pod}"),
            );
            self.state = SlotState::BackOff { until, delay };
        }
    }

    /// The automatic restart (back-off elapsed or none needed).
    fn restart_now(&mut self, pod: &str, out: &mut Out) {
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
    pub(super) fn start_fresh(&mut self, pod: &str, out: &mut Out) -> bool {
        if self.is_active() {
            return false;
        }
        self.fresh();
        self.spawn(pod, out);
        true
    }

    /// Ask it to stop. Running: stop signal now, `Kill` after the grace period. Creating: the
    /// stop happens as soon as it is spawned. Back-off/not started: terminated `Stopped` now
    /// (except for a shutdown, which leaves never-started slots alone).
    pub(super) fn begin_stop(&mut self, cause: StopCause, pod: &str, out: &mut Out) {
        self.begin_stop_by(cause, None, pod, out);
    }

    /// [`Slot::begin_stop`] as part of a whole-pod stop that must be over by `deadline`
    /// ([`Pod::stop_all`]); a stop already in progress is pulled in to it too.
    pub(super) fn begin_stop_by(
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
                        StopCause::Probe { .. } | StopCause::PostStartHook { .. }
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
                };
                let grace = pod_capped_grace(effective_grace(grace), deadline, out.now);
                *stopping = Some(Stopping {
                    cause,
                    kill_at: later(out.now, grace),
                    killed: false,
                    grace,
                    grace_expired: false,
                });
                out.event(EventType::Normal, "Killing", pod, &name, message);
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
                    Some(StopCause::Request { .. } | StopCause::Shutdown)
                ) {
                    *pending = Some(cause);
                }
            }
            SlotState::BackOff { .. } => {
                let message = match &cause {
                    StopCause::Request { message, .. } => message.clone(),
                    StopCause::Shutdown => MSG_SHUTDOWN.to_string(),
                    StopCause::Probe { .. } | StopCause::PostStartHook { .. } => return,
                };
                self.state = SlotState::Done(stopped(&message, out.now));
            }
            SlotState::NotStarted { .. } => {
                if let StopCause::Request { message, .. } = &cause {
                    self.state = SlotState::Done(stopped(message, out.now));
                }
            }
            SlotState::Done(_) => {}
        }
    }

    /// SIGKILL it now (forced shutdown, global shutdown deadline); `why` ends up in the
    /// Warning `Killing` event ("Container app: {why}, sending SIGKILL").
    pub(super) fn kill_now(&mut self, cause: StopCause, why: &str, pod: &str, out: &mut Out) {
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
                    "Killing",
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
    pub(super) fn finish_for_shutdown(&mut self, out: &mut Out) {
        if let SlotState::BackOff { .. } = self.state {
            self.state = SlotState::Done(stopped(MSG_SHUTDOWN, out.now));
        }
    }

    /// After `vigil upgrade`: probe attempts that were in flight run again.
    pub(super) fn requeue_probes(&mut self) {
        for p in &mut self.probes {
            p.requeue_in_flight();
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Time> {
        let sleep = self.hook.as_ref().and_then(|h| h.done_at);
        let own = match &self.state {
            SlotState::BackOff { until, .. } => Some(*until),
            SlotState::Running {
                stopping: Some(s), ..
            } => (!s.killed).then_some(s.kill_at),
            SlotState::Running { stopping: None, .. } => {
                self.probes.iter().filter_map(|p| p.next_deadline()).min()
            }
            _ => None,
        };
        match (own, sleep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Act on every deadline of this slot at or before `out.now`. Returns whether the slot
    /// may have changed beyond its probes' bookkeeping: `false` when the deadlines were only
    /// probe attempts starting, or timing out without publishing a new result (the common
    /// case at a high probe rate), which move no condition, dependency or stop.
    pub(super) fn on_timeout(&mut self, pod: &str, out: &mut Out) -> bool {
        let mut changed = false;
        if self
            .hook
            .as_ref()
            .and_then(|h| h.done_at)
            .is_some_and(|t| t <= out.now)
        {
            self.hook_done(None, pod, out);
            changed = true;
        }
        match &mut self.state {
            SlotState::BackOff { until, .. } if *until <= out.now => {
                if out.shutting_down {
                    self.state = SlotState::Done(stopped(MSG_SHUTDOWN, out.now));
                } else {
                    self.restart_now(pod, out);
                }
                true
            }
            SlotState::Running {
                stopping: Some(s), ..
            } if !s.killed && s.kill_at <= out.now => {
                // SIGKILL after the grace period is the normal end of a stop (docs/behaviour.md §6.1):
                // it does not make a shutdown unclean; only the global deadline or a forced
                // shutdown does (see `kill_now`).
                s.killed = true;
                s.grace_expired = true;
                let grace = s.grace;
                out.actions.push_back(Action::Kill {
                    key: self.key,
                    generation: self.generation,
                });
                let name = self.spec.name.clone();
                out.event(
                    EventType::Warning,
                    "Killing",
                    pod,
                    &name,
                    format!(
                        "Container {name} did not stop within {}, sending SIGKILL",
                        go_duration(grace)
                    ),
                );
                // A pre-stop hook still running at the end of the grace is killed too.
                self.cancel_hook(out);
                true
            }
            SlotState::Running { stopping: None, .. } => self.tick_probes(pod, out) || changed,
            _ => changed,
        }
    }

    fn stopping(&self) -> bool {
        !matches!(self.state, SlotState::Running { stopping: None, .. })
    }

    /// Time out and start this slot's due probe attempts; `true` if a timed-out attempt
    /// published a new result (which may start a stop or change readiness).
    fn tick_probes(&mut self, pod: &str, out: &mut Out) -> bool {
        let mut published = false;
        for i in 0..self.probes.len() {
            if self.stopping() {
                return true;
            }
            let kind = self.probes[i].kind;
            if let Some(seq) = self.probes[i].timed_out(out.now) {
                out.actions.push_back(Action::CancelProbe {
                    key: self.key,
                    generation: self.generation,
                    kind,
                    seq,
                });
                if let Some(rec) = self.probes[i].record_timeout() {
                    published |= rec.published.is_some();
                    self.apply_recorded(kind, rec, pod, out);
                }
            }
            if self.stopping() {
                return true;
            }
            if let Some(seq) = self.probes[i].try_start(out.now, out.probe_seq) {
                out.actions.push_back(Action::StartProbe {
                    key: self.key,
                    generation: self.generation,
                    pod: pod.to_string(),
                    container: self.spec.clone(),
                    kind,
                    seq,
                    probe: self.probes[i].spec.clone(),
                });
            }
        }
        published
    }

    pub(super) fn on_probe_result(
        &mut self,
        kind: ProbeKind,
        seq: u64,
        outcome: ProbeOutcome,
        duration: Duration,
        pod: &str,
        out: &mut Out,
    ) -> bool {
        if kind == ProbeKind::Hook {
            if self.hook.as_ref().and_then(|h| h.seq) == Some(seq) {
                let failure = match outcome {
                    ProbeOutcome::Failure(m) => Some(m),
                    ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => None,
                };
                self.hook_done(failure, pod, out);
            }
            return true;
        }
        if self.stopping() {
            return false;
        }
        let Some(probe) = self.probes.iter_mut().find(|p| p.kind == kind) else {
            return false;
        };
        match probe.on_result(seq, outcome, duration) {
            Some(rec) => {
                let published = rec.published.is_some();
                self.apply_recorded(kind, rec, pod, out);
                published
            }
            None => false,
        }
    }

    fn apply_recorded(&mut self, kind: ProbeKind, rec: Recorded, pod: &str, out: &mut Out) {
        let name = self.spec.name.clone();
        if let Some(msg) = &rec.warning {
            out.event(
                EventType::Warning,
                "ProbeWarning",
                pod,
                &name,
                format!("{} probe warning: {msg}", kind.title()),
            );
        }
        if let Some(msg) = &rec.failure {
            out.event(
                EventType::Warning,
                "Unhealthy",
                pod,
                &name,
                format!("{} probe failed: {msg}", kind.title()),
            );
        }
        match (kind, rec.published) {
            (ProbeKind::Startup, Some(ProbeResultState::Success)) => {
                self.started = true;
                if let Some(p) = self.probes.iter_mut().find(|p| p.kind == kind) {
                    p.hold();
                }
                self.activate_probes(&[ProbeKind::Liveness, ProbeKind::Readiness], out);
            }
            (ProbeKind::Startup | ProbeKind::Liveness, Some(ProbeResultState::Failure)) => {
                let last = self
                    .probes
                    .iter()
                    .find(|p| p.kind == kind)
                    .map(|p| p.last_failure.clone())
                    .unwrap_or_default();
                let message = format!("{} probe failed: {last}", kind.title());
                self.begin_stop(StopCause::Probe { kind, message }, pod, out);
            }
            _ => {}
        }
    }

    pub(super) fn status(&self, pod: &str) -> ContainerStatus {
        let (state, pid) = match &self.state {
            SlotState::NotStarted { reason, message } => (
                ContainerState::Waiting {
                    reason: *reason,
                    message: message.clone(),
                },
                None,
            ),
            SlotState::Creating { .. } => (
                ContainerState::Waiting {
                    reason: WaitingReason::ContainerCreating,
                    message: String::new(),
                },
                None,
            ),
            SlotState::Running {
                pid,
                started_at,
                stopping,
            } => (
                ContainerState::Running {
                    started_at: *started_at,
                    terminating: stopping.as_ref().map(Stopping::status),
                },
                Some(*pid),
            ),
            SlotState::BackOff { delay, .. } => (
                ContainerState::Waiting {
                    reason: WaitingReason::CrashLoopBackOff,
                    message: format!(
                        "back-off {} restarting failed container={} pod={pod}",
                        go_duration(*delay),
                        self.spec.name
                    ),
                },
                None,
            ),
            SlotState::Done(t) => (ContainerState::Terminated(t.clone()), None),
        };
        ContainerStatus {
            key: self.key,
            name: self.spec.name.clone(),
            ready: self.ready(),
            started: self.is_running_started(),
            restart_count: self.restart_count,
            pid,
            state,
            last_state: self.last_state.clone(),
            probes: self.probes.iter().map(|p| p.status()).collect(),
            oom_kills: self.oom_kills,
            backoff_until: match &self.state {
                SlotState::BackOff { until, .. } => Some(*until),
                _ => None,
            },
            spec: self.spec.clone(),
            output_lost: self.output_lost && matches!(self.state, SlotState::Running { .. }),
        }
    }
}

/// Where a pod is in its start-up sequence.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Waiting for `depends_on` (or held by a stop before it began).
    Waiting,
    /// Running init container `i`.
    Init(usize),
    /// Init containers done; regular containers started.
    Main,
}

/// What reload decided for a pod that is still being stopped.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub(super) enum Next {
    Keep,
    /// Once stopped, replace with this definition (new keys).
    Replace(Box<PodSpec>),
    /// Once stopped, forget it.
    Remove,
}

#[derive(serde::Serialize, serde::Deserialize, Debug)]
pub(super) struct Pod {
    pub spec: PodSpec,
    #[serde(with = "crate::monotime")]
    pub created_at: Time,
    pub init: Vec<Slot>,
    pub main: Vec<Slot>,
    pub stage: Stage,
    /// Stopped by the operator before it began: do not auto-start on dependencies.
    pub held: bool,
    /// An operator `start` found the pod at rest with its dependencies unmet: it resumes at
    /// its stage (see [`Pod::resume`]) once they are met, and shows `WaitingForDependencies`
    /// until then.
    #[serde(default)]
    pub awaiting: bool,
    /// An operator `restart` of the whole pod: once nothing runs, the pod starts over as a new
    /// pod would — waiting for its dependencies, then its init containers
    /// ([`Pod::reset_for_restart`]).
    #[serde(default)]
    pub restart_pending: bool,
    /// Refused at start (limits this host cannot give, `--allow-missing-controllers`): never
    /// runs, `Failed`; why.
    #[serde(default)]
    pub refused: Option<String>,
    /// Waiting on a dependency that cannot meet its condition on its own (refused, failed for
    /// good): what its containers' `DependencyFailed` message and its conditions say. Set
    /// and cleared by the supervisor's dependency gate; a change emits a Warning event.
    #[serde(default)]
    pub blocked: Option<String>,
    pub next: Next,
    pub shutdown_initiated: bool,
    pub conditions: Vec<Condition>,
    /// Sidecars are being stopped for this cause, once the other containers have stopped,
    /// last sidecar first (see [`Pod::drive_sidecars`]).
    pub sidecar_stop: Option<StopCause>,
    /// When a whole-pod stop in progress must be over: every container's kill deadline,
    /// pre-stop hook and sidecars stopped later included, is capped at it
    /// ([`Pod::stop_budget`]).
    #[serde(with = "crate::monotime::opt")]
    pub stop_deadline: Option<Time>,
}

fn condition(kind: ConditionType, now: Time) -> Condition {
    Condition {
        kind,
        status: false,
        reason: String::new(),
        message: String::new(),
        last_transition: now,
    }
}

impl Pod {
    pub(super) fn new(spec: PodSpec, now: Time, next_key: &mut u32) -> Pod {
        let mut key = || {
            *next_key += 1;
            ContainerKey(*next_key)
        };
        let init = spec
            .init_containers
            .iter()
            .map(|c| {
                Slot::new(
                    key(),
                    c.clone(),
                    true,
                    WaitingReason::PodInitializing,
                    String::new(),
                )
            })
            .collect();
        let main = spec
            .containers
            .iter()
            .map(|c| {
                Slot::new(
                    key(),
                    c.clone(),
                    false,
                    WaitingReason::PodInitializing,
                    String::new(),
                )
            })
            .collect();
        let mut pod = Pod {
            spec,
            created_at: now,
            init,
            main,
            stage: Stage::Waiting,
            held: false,
            awaiting: false,
            restart_pending: false,
            refused: None,
            blocked: None,
            next: Next::Keep,
            shutdown_initiated: false,
            sidecar_stop: None,
            stop_deadline: None,
            conditions: vec![
                condition(ConditionType::Initialized, now),
                condition(ConditionType::ContainersReady, now),
                condition(ConditionType::Ready, now),
            ],
        };
        pod.update_conditions(now);
        pod
    }

    pub(super) fn name(&self) -> &str {
        &self.spec.name
    }

    /// What `shutdown_on` exits with: the exit code of the first container, init containers
    /// first, whose last run failed (128+signal for a signal; 1 for a failure that carries
    /// no code), else 0.
    pub(super) fn exit_code(&self) -> i32 {
        self.slots()
            .find_map(|s| match &s.state {
                SlotState::Done(t) if Slot::phase_failure(t.reason) => {
                    Some(if (1..=255).contains(&t.exit_code) {
                        t.exit_code
                    } else {
                        1
                    })
                }
                _ => None,
            })
            .unwrap_or(0)
    }

    /// Some container's last run was ended by vigil on request or at shutdown (`Stopped`).
    pub(super) fn stopped_by_request(&self) -> bool {
        self.slots().any(
            |s| matches!(&s.state, SlotState::Done(t) if t.reason == TerminationReason::Stopped),
        )
    }

    pub(super) fn slots(&self) -> impl Iterator<Item = &Slot> {
        self.init.iter().chain(self.main.iter())
    }

    pub(super) fn any_active(&self) -> bool {
        self.slots().any(Slot::is_active)
    }

    pub(super) fn keys(&self) -> Vec<ContainerKey> {
        self.slots().map(|s| s.key).collect()
    }

    /// Leave `Waiting`: first init container, or all regular containers.
    pub(super) fn begin(&mut self, out: &mut Out) {
        self.advance_to(0, out);
    }

    /// Refuse the pod before it began: every container terminates with `StartError` and `why`
    /// (a Warning `FailedCreatePodContainer` event each), and the pod is `Failed` for good.
    pub(super) fn refuse(&mut self, why: &str, out: &mut Out) {
        self.refused = Some(why.to_string());
        self.held = true;
        let name = self.spec.name.clone();
        for s in self.init.iter_mut().chain(self.main.iter_mut()) {
            let container = s.name().to_string();
            out.event(
                EventType::Warning,
                "FailedCreatePodContainer",
                &name,
                &container,
                format!("unable to give pod {name} its limits: {why}"),
            );
            s.state = SlotState::Done(Terminated {
                exit_code: 128,
                signal: None,
                reason: TerminationReason::StartError,
                message: why.to_string(),
                started_at: None,
                finished_at: out.now,
            });
        }
    }

    /// Nothing runs, is being created or waits in back-off: what an operator `start` of the
    /// whole pod gates on its dependencies.
    pub(super) fn at_rest(&self) -> bool {
        self.slots()
            .all(|s| matches!(s.state, SlotState::NotStarted { .. } | SlotState::Done(_)))
    }

    /// An operator `start` of a pod at rest whose dependencies are unmet: the containers
    /// [`Pod::resume`] would start show `WaitingForDependencies` (their last run kept as the
    /// last state) until the supervisor resumes the pod.
    pub(super) fn await_deps(&mut self) {
        let upto = match self.stage {
            Stage::Waiting => return,
            Stage::Init(i) => i,
            Stage::Main => self.init.len(),
        };
        self.awaiting = true;
        let reason = WaitingReason::WaitingForDependencies;
        for s in self.init.iter_mut().take(upto).filter(|s| s.sidecar()) {
            s.await_start(reason, String::new());
        }
        match self.stage {
            Stage::Init(i) => self.init[i].await_start(reason, String::new()),
            _ => {
                for s in self.main.iter_mut() {
                    s.await_start(reason, String::new());
                }
            }
        }
    }

    /// An operator `start` of a pod that has begun: the current step runs again — the init
    /// container at its step, or every regular container not running — with the stopped
    /// sidecars it runs beside (back-off history and restart budget reset).
    pub(super) fn resume(&mut self, out: &mut Out) {
        self.awaiting = false;
        let name = self.spec.name.clone();
        match self.stage {
            Stage::Waiting => self.begin(out),
            Stage::Init(i) => {
                self.revive_sidecars(i, out);
                self.init[i].start_fresh(&name, out);
            }
            Stage::Main => {
                self.revive_sidecars(self.init.len(), out);
                for slot in self.main.iter_mut() {
                    slot.start_fresh(&name, out);
                }
            }
        }
    }

    /// A pending whole-pod `restart` once nothing runs: back to `Waiting` with every container
    /// not started (its last run kept as the last state, back-off and budget reset), so the
    /// pod waits for its dependencies and runs its init containers again, as a new pod would.
    /// Keys, restart counts and logs are kept.
    pub(super) fn reset_for_restart(&mut self) {
        self.restart_pending = false;
        self.awaiting = false;
        self.held = false;
        self.sidecar_stop = None;
        self.stop_deadline = None;
        self.stage = Stage::Waiting;
        for s in self.init.iter_mut().chain(self.main.iter_mut()) {
            s.await_start(WaitingReason::PodInitializing, String::new());
            s.fresh();
        }
    }

    /// A container of this pod is being adopted from an earlier vigil (`Supervisor::adopt`):
    /// the pod had begun under that vigil — its dependencies were met and its init containers
    /// had completed, or regular containers would not run — so it moves straight to its
    /// regular containers: plain init containers are recorded as completed then (not run
    /// again), sidecars and the other regular containers start now unless adopted too.
    /// Only while nothing of the pod has run under this vigil yet; returns the keys whose
    /// queued `Spawn` the caller must drop, or `None` when it cannot be done.
    pub(super) fn skip_to_main_for_adoption(&mut self, out: &mut Out) -> Option<Vec<ContainerKey>> {
        self.skip_to_stage(Stage::Main, out)
    }

    /// [`Pod::skip_to_main_for_adoption`] to any stage it had reached under an earlier vigil:
    /// the plain init containers before `stage` are recorded as completed then (not run
    /// again), the sidecars before it start now unless adopted, and so does the step itself
    /// (init container `i`, or every regular container not adopted). Only while nothing of
    /// the pod has run under this vigil yet, and only forward; returns the keys whose queued
    /// `Spawn` the caller must drop, or `None` when it cannot be done.
    pub(super) fn skip_to_stage(
        &mut self,
        stage: Stage,
        out: &mut Out,
    ) -> Option<Vec<ContainerKey>> {
        let upto = match stage {
            Stage::Waiting => return Some(Vec::new()),
            Stage::Init(i) => i.min(self.init.len()),
            Stage::Main => self.init.len(),
        };
        let reached = match self.stage {
            Stage::Waiting => 0,
            Stage::Init(i) => i,
            Stage::Main => self.init.len() + 1,
        };
        let target = match stage {
            Stage::Main => self.init.len() + 1,
            _ => upto,
        };
        if reached >= target {
            return Some(Vec::new());
        }
        let untouched = |s: &Slot| {
            s.runs <= 1
                && matches!(
                    s.state,
                    SlotState::NotStarted { .. }
                        | SlotState::Creating {
                            pending: None,
                            force_kill: false,
                        }
                )
        };
        if out.shutting_down || !self.slots().all(untouched) {
            return None;
        }
        let name = self.spec.name.clone();
        let mut dropped = Vec::new();
        for slot in self.init.iter_mut().take(upto) {
            if slot.sidecar() {
                if !slot.is_active() {
                    slot.spawn(&name, out);
                }
                continue;
            }
            if slot.is_active() {
                dropped.push(slot.key);
            }
            slot.state = SlotState::Done(Terminated {
                exit_code: 0,
                signal: None,
                reason: TerminationReason::Completed,
                message: MSG_COMPLETED_BEFORE.to_string(),
                started_at: None,
                finished_at: out.now,
            });
        }
        if upto < self.init.len() {
            self.stage = Stage::Init(upto);
            if !self.init[upto].is_active() {
                self.init[upto].spawn(&name, out);
            }
            return Some(dropped);
        }
        self.stage = Stage::Main;
        for slot in self.main.iter_mut() {
            if !slot.is_active() {
                slot.spawn(&name, out);
            }
        }
        Some(dropped)
    }

    /// What the next vigil takes back of this pod (`recall`); `spec_of` hashes a container's
    /// definition as the runtime does.
    pub(super) fn memory(
        &self,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
    ) -> super::recall::PodMemory {
        super::recall::PodMemory {
            name: self.spec.name.clone(),
            created_at: self.created_at,
            stage: self.stage,
            containers: self
                .slots()
                .map(|s| s.memory(spec_of(s.key, &s.spec)))
                .collect(),
        }
    }

    /// At start, after adoption: takes back what an earlier vigil knew of this pod
    /// (`super::recall` says how). `spec_of` hashes a container's definition now. Returns
    /// what was done per container, and whether the pod went on to the stage it had reached
    /// (`false` also when it had not begun).
    pub(super) fn recall(
        &mut self,
        memory: &super::recall::PodMemory,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
        out: &mut Out,
    ) -> Vec<(String, super::recall::Recalled)> {
        use super::recall::SlotMemory;
        if self.refused.is_some() || self.held {
            return Vec::new();
        }
        if memory.created_at <= out.now {
            self.created_at = memory.created_at;
        }
        let same = |s: &Slot, m: &SlotMemory| {
            m.name == s.name() && m.init == s.init && m.spec == spec_of(s.key, &s.spec)
        };
        // The stage it had reached, if the containers before it are the same ones.
        let upto = match memory.stage {
            Stage::Waiting => 0,
            Stage::Init(i) => i,
            Stage::Main => self.init.len(),
        };
        let before_same = self
            .init
            .iter()
            .take(upto)
            .all(|s| memory.containers.iter().any(|m| same(s, m)))
            && (memory.stage != Stage::Main
                || memory.containers.iter().filter(|m| m.init).count() == self.init.len());
        let mut dropped = Vec::new();
        if before_same && let Some(d) = self.skip_to_stage(memory.stage, out) {
            dropped = d;
        }
        let name = self.spec.name.clone();
        let mut done = Vec::new();
        let stage = self.stage;
        for (i, slot) in self.init.iter_mut().enumerate() {
            let reached = match stage {
                Stage::Waiting => false,
                Stage::Init(j) => i <= j,
                Stage::Main => true,
            };
            if let Some(m) = memory.containers.iter().find(|m| same(slot, m))
                && let Some(r) = slot.recall(m, reached, &name, out)
            {
                done.push((slot.name().to_string(), r));
            }
        }
        for slot in self.main.iter_mut() {
            if let Some(m) = memory.containers.iter().find(|m| same(slot, m))
                && let Some(r) = slot.recall(m, stage == Stage::Main, &name, out)
            {
                done.push((slot.name().to_string(), r));
            }
        }
        // A queued first `Spawn` of a container that does not start now is dropped.
        for slot in self.slots() {
            if !matches!(slot.state, SlotState::Creating { .. }) {
                dropped.push(slot.key);
            }
        }
        out.actions
            .retain(|a| !matches!(a, Action::Spawn { key, .. } if dropped.contains(key)));
        done
    }

    /// Run init container `i`, or the regular containers once `i` is past the last init.
    pub(super) fn advance_to(&mut self, i: usize, out: &mut Out) {
        if out.shutting_down {
            return;
        }
        let name = self.spec.name.clone();
        if i < self.init.len() {
            self.stage = Stage::Init(i);
            for s in self.init.iter_mut().skip(i + 1).chain(self.main.iter_mut()) {
                s.set_waiting(WaitingReason::PodInitializing, String::new());
            }
            self.init[i].spawn(&name, out);
        } else {
            self.stage = Stage::Main;
            for s in self.main.iter_mut() {
                if !s.is_active() {
                    s.spawn(&name, out);
                }
            }
        }
    }

    /// After an init slot changed: move on once it completed or, for a sidecar, once it has
    /// started (kubelet `kuberuntime_manager.go` computePodActions: the next init container
    /// starts when a restartable one is started — startup probe passed, or running without
    /// one — and the sidecar keeps running).
    pub(super) fn after_init(&mut self, i: usize, out: &mut Out) {
        if self.stage != Stage::Init(i) || self.sidecar_stop.is_some() {
            return;
        }
        let slot = &self.init[i];
        let done = if slot.sidecar() {
            slot.is_running_started()
        } else {
            slot.done_completed()
        };
        if done {
            self.advance_to(i + 1, out);
        }
    }

    /// Stop the whole pod: the regular containers (and a running init container) now, the
    /// sidecars after them, last first (kubelet 1.29+ pod termination with sidecars). A
    /// sidecar that is not running is concluded at once.
    /// `live_only` leaves slots that are not running or backing off as they are (reload).
    /// Every container's kill deadline, pre-stop hook and the sidecars stopped after the others
    /// included, is capped at `now` + [`Pod::stop_budget`] (kubelet
    /// `kuberuntime_container.go` killContainersWithSyncResult: one grace for the pod).
    pub(super) fn stop_all(&mut self, cause: StopCause, live_only: bool, out: &mut Out) {
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

    /// The grace of a whole-pod stop (kubelet: `pod.Spec.TerminationGracePeriodSeconds`): the
    /// pod's `termination_grace_period_seconds` when written, else the longest grace of its
    /// containers — 30 s when none is written, as in a cluster (config resolves it). The 2 s
    /// floor applies as to a container ([`effective_grace`]).
    pub(super) fn stop_budget(&self) -> Duration {
        effective_grace(self.spec.termination_grace)
    }

    /// Sidecar bookkeeping after any change: when every regular container has finished for
    /// good, the sidecars are stopped (a pod with `Never`/`OnFailure` completes while its
    /// sidecars are stopped, kubelet `kubelet_pods.go` getPhase); a pending sidecar stop
    /// begins with the last sidecar once no other container is active, and each earlier one
    /// waits for the later ones to have stopped.
    pub(super) fn drive_sidecars(&mut self, out: &mut Out) {
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
    pub(super) fn revive_sidecars(&mut self, upto: usize, out: &mut Out) {
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

    pub(super) fn phase(&self) -> Phase {
        match self.stage {
            Stage::Waiting if self.refused.is_some() => Phase::Failed,
            Stage::Waiting => Phase::Pending,
            // An init container that will not run again (failed under Never, or was
            // stopped) means the pod cannot proceed.
            Stage::Init(i) => match self.init[i].done_failed() {
                Some(_) if !self.init[i].done_completed() => Phase::Failed,
                _ => Phase::Pending,
            },
            Stage::Main => {
                if self.main.iter().all(|s| s.done_failed().is_some()) {
                    if self.main.iter().any(|s| s.done_failed() == Some(true)) {
                        Phase::Failed
                    } else {
                        Phase::Succeeded
                    }
                } else if self
                    .main
                    .iter()
                    .any(|s| s.live_or_restarting() || (s.done_failed().is_some() && s.has_run()))
                {
                    Phase::Running
                } else {
                    Phase::Pending
                }
            }
        }
    }

    /// Why this pod cannot run again on its own, for its dependents' `DependencyFailed`
    /// message: refused at start, or `Failed` (a container failed and will not restart);
    /// `None` while it may still get there without an operator or a reload.
    pub(super) fn cannot_recover(&self) -> Option<String> {
        let name = self.name();
        if let Some(why) = &self.refused {
            return Some(format!("pod {name} was refused at start ({why})"));
        }
        if self.next != Next::Keep || self.phase() != Phase::Failed {
            return None;
        }
        let failed = self.slots().find_map(|s| match &s.state {
            SlotState::Done(t) if Slot::phase_failure(t.reason) => Some((s.name(), t)),
            _ => None,
        });
        Some(match failed {
            Some((c, t)) => format!(
                "pod {name} failed and will not run again (container {c}: {}, exit code {})",
                t.reason.as_str(),
                t.exit_code
            ),
            None => format!("pod {name} failed and will not run again"),
        })
    }

    /// Every regular container is running and started (dependency condition `started`).
    pub(super) fn all_started(&self) -> bool {
        self.main.iter().all(Slot::is_running_started)
    }

    pub(super) fn initialized(&self) -> bool {
        self.stage == Stage::Main || self.init.is_empty()
    }

    fn set_condition(
        &mut self,
        kind: ConditionType,
        status: bool,
        reason: &str,
        message: String,
        now: Time,
    ) {
        if let Some(c) = self.conditions.iter_mut().find(|c| c.kind == kind) {
            if c.status != status {
                c.last_transition = now;
            }
            c.status = status;
            c.reason = reason.to_string();
            c.message = message;
        }
    }

    /// Kubelet `status/generate.go`: GeneratePodInitializedCondition (a Succeeded pod's
    /// `Initialized` says `PodCompleted`), GenerateContainersReadyCondition and
    /// GeneratePodReadyCondition (a terminal phase makes both false with `PodCompleted` or
    /// `PodFailed`, whatever the containers say).
    pub(super) fn update_conditions(&mut self, now: Time) {
        let phase = self.phase();
        if phase == Phase::Succeeded {
            self.set_condition(
                ConditionType::Initialized,
                true,
                "PodCompleted",
                String::new(),
                now,
            );
        } else if self.initialized() {
            self.set_condition(ConditionType::Initialized, true, "", String::new(), now);
        } else {
            let incomplete: Vec<&str> = self
                .init
                .iter()
                .filter(|s| {
                    if s.sidecar() {
                        !s.is_running_started()
                    } else {
                        !s.done_completed()
                    }
                })
                .map(Slot::name)
                .collect();
            let message = format!(
                "containers with incomplete status: [{}]",
                incomplete.join(" ")
            );
            self.set_condition(
                ConditionType::Initialized,
                false,
                "ContainersNotInitialized",
                message,
                now,
            );
        }
        // Sidecars count for readiness (GenerateContainersReadyCondition), listed first.
        let unready: Vec<String> = self
            .init
            .iter()
            .filter(|s| s.sidecar())
            .chain(self.main.iter())
            .filter(|s| !s.ready())
            .map(|s| s.name().to_string())
            .collect();
        let (status, reason, message) = match phase {
            Phase::Succeeded => (false, "PodCompleted", String::new()),
            Phase::Failed => (false, "PodFailed", String::new()),
            _ if self.blocked.is_some() => (
                false,
                "DependencyFailed",
                self.blocked.clone().unwrap_or_default(),
            ),
            _ if unready.is_empty() => (true, "", String::new()),
            _ => (
                false,
                "ContainersNotReady",
                format!("containers with unready status: [{}]", unready.join(" ")),
            ),
        };
        self.set_condition(
            ConditionType::ContainersReady,
            status,
            reason,
            message.clone(),
            now,
        );
        self.set_condition(ConditionType::Ready, status, reason, message, now);
    }

    pub(super) fn ready(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.kind == ConditionType::Ready && c.status)
    }

    pub(super) fn status(&self) -> PodStatus {
        let name = self.name();
        PodStatus {
            name: name.to_string(),
            phase: self.phase(),
            restart_policy: self.spec.restart_policy,
            conditions: self.conditions.clone(),
            init_containers: self.init.iter().map(|s| s.status(name)).collect(),
            containers: self.main.iter().map(|s| s.status(name)).collect(),
            created_at: self.created_at,
        }
    }
}
