//! One pod and the lifecycle of its container slots: the types, and one file per concern.
//!
//! Owns the per-container state machine (not started → creating → running → back-off or
//! terminated), the restart decision (policy, back-off, `max_restarts`), stopping with a grace
//! period, probe effects, the pod's stage (waiting for dependencies → init containers → main
//! containers), its phase and its conditions. Everything it wants done is pushed to [`Out`];
//! it never reads the clock or does I/O. Decisions that span pods (dependencies, shutdown
//! order, reload) belong to the supervisor.
//!
//! This file holds the types (the slot states, [`Slot`], [`Pod`], [`Out`]) and the messages
//! they share; each concern is an `impl` in its own file, split as the kubelet splits them:
//!
//! | file | owns |
//! |---|---|
//! | `slot.rs` | a slot's state read and set in place |
//! | `stage.rs` | a pod's stage: dependencies → init containers → regular containers |
//! | `start.rs` | starting a run, the lifecycle hooks (`kuberuntime_container.go`) |
//! | `exit.rs` | the end of a run and its termination reason |
//! | `restart.rs` | the restart decision and the crash-loop back-off |
//! | `stop.rs` | stop, grace, kill; the pod's stop budget and sidecar order (`kuberuntime_termination_order.go`) |
//! | `probing.rs` | a slot's deadlines and the probes' effects (`prober/`) |
//! | `notify.rs` | what a run says over sd_notify (`READY=1`, `STATUS=`, `STOPPING=1`) |
//! | `adopt.rs` | runs taken over from an earlier vigil |
//! | `recall.rs` | what a pod remembers across a restart of vigil |
//! | `status.rs` | status projection, phase and conditions (`status/generate.go`) |

mod adopt;
mod exit;
mod notify;
mod probing;
mod recall;
mod restart;
mod slot;
mod stage;
mod start;
mod status;
mod stop;

// The helpers more than one concern uses.
use crate::config::on_event::EventReason;
use exit::{deadline_exceeded, exit_desc, one_line, stopped};
use stop::effective_grace;

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
        reason: EventReason,
        pod: &str,
        container: &str,
        msg: String,
    ) {
        self.events
            .record(self.now, kind, reason, format!("{pod}/{container}"), msg);
    }
}

/// The waiting message of a scheduled pod's containers before its first run.
pub(in crate::core) const MSG_AWAITING_SCHEDULE: &str = "waiting for its schedule";
pub(super) const MSG_STOP_REQUEST: &str = "stopped by request";
/// A container an operator had stopped when an earlier vigil died, kept stopped at start.
pub(super) const MSG_KEPT_STOPPED: &str =
    "stopped by request, kept stopped across a restart of vigil";
pub(super) const MSG_DEFINITION_CHANGED: &str = "definition changed";
/// Why a pod the selection left out waits (`WaitingReason::NotStarted`).
pub(super) const MSG_NOT_STARTED: &str =
    "not started in this run (autostart, profiles or the pods named at run): vigil start starts it";
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
    /// The pod's `active_deadline_seconds` ran out (kubelet `active_deadline.go`): the run
    /// ends `DeadlineExceeded` and is not restarted.
    Deadline { message: String },
    /// No `WATCHDOG=1` within `watchdog_seconds` (systemd's `WatchdogSec=`): a failure, the
    /// run ends `WatchdogTimeout` and is restarted as its policy says.
    Watchdog { message: String },
    /// No `READY=1` within `start_timeout_seconds` (systemd's `TimeoutStartSec=`): a failure,
    /// the run ends `StartTimeout` and is restarted as its policy says.
    StartTimeout { message: String },
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
    /// What the current run said over sd_notify (`notify = true`; `notify.rs`).
    #[serde(default)]
    notify: NotifyStatus,
    /// When the current run's watchdog runs out (`watchdog_seconds`; `notify.rs`): armed by
    /// its `READY=1` and moved on by each `WATCHDOG=1`.
    #[serde(default, with = "crate::monotime::opt")]
    watchdog_at: Option<Time>,
    /// When the current run's start budget runs out (`start_timeout_seconds`; `notify.rs`):
    /// set at its start, moved on by `EXTEND_TIMEOUT_USEC=`, gone at its `READY=1`.
    #[serde(default, with = "crate::monotime::opt")]
    start_deadline: Option<Time>,
}

fn probe_spec(spec: &ContainerSpec, kind: ProbeKind) -> Option<&ProbeSpec> {
    match kind {
        ProbeKind::Startup => spec.startup_probe.as_ref(),
        ProbeKind::Liveness => spec.liveness_probe.as_ref(),
        ProbeKind::Readiness => spec.readiness_probe.as_ref(),
        ProbeKind::Hook => None,
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
    /// When the pod's current run began (it began, or an operator or a trigger started the
    /// whole pod): `active_deadline_seconds` counts from here, init containers included
    /// (kubelet `active_deadline.go` pastActiveDeadline: from `pod.Status.StartTime`).
    #[serde(default, with = "crate::monotime::opt")]
    pub active_since: Option<Time>,
    /// `active_deadline_seconds` ran out in this run: it is being stopped, or has failed.
    #[serde(default)]
    pub deadline_exceeded: bool,
    /// A scheduled pod's schedule (`core::schedule`), from the first wall-clock reading on.
    #[serde(default)]
    pub schedule: Option<super::schedule::ScheduleState>,
    /// The pod's ended runs that status keeps (`history`, `core::history`).
    #[serde(default)]
    pub history: super::history::RunHistory,
    /// For each `depends_on` entry with `restart = true`: the runs of that dependency this
    /// pod began beside (`supervisor/follow.rs`); a different one restarts this pod.
    #[serde(default)]
    pub followed: std::collections::BTreeMap<String, Vec<(ContainerKey, Generation)>>,
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
