//! The pure lifecycle core: pods, containers, restart back-off, probes bookkeeping, events.
//!
//! Owns every decision about what should run, when, and why it stopped. It must not do I/O,
//! read the clock, or touch libc/nix/mio: the runtime shell passes `now` in and turns the
//! [`Action`]s it polls out into syscalls, then feeds the outcomes back as [`Input`]s. Modelled
//! on quinn-proto: `handle(now, input)`, `handle_timeout(now)`, `poll_timeout()`,
//! `poll_action()`. Every input is total: nothing here returns an error for a stale or odd
//! input, it is dropped (stale generation) or recorded.
//!
//! Every spawn bumps the container's [`Generation`]; inputs and actions carry
//! `(ContainerKey, Generation)` so a late exit or probe result of an earlier run is ignored.

mod backoff;
mod events;
pub use events::Resume as EventResume;
mod health;
pub mod history;
pub use health::{HealthState, PodHealth};
mod pod;
mod probes;
pub mod recall;
mod rollout;
pub use rollout::{HaltReason, RolloutKind, RolloutState, RolloutStatus};
mod schedule;
pub mod status;
mod supervisor;
#[cfg(test)]
mod tests;
mod timers;

pub use crate::format::{go_duration, quantity};

pub use status::*;
pub use supervisor::Supervisor;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::spec::{Config, ContainerSpec, ProbeKind, ProbeSpec};

/// The reason of the Warning event of an adopted run whose output pipes were lost in a crash
/// of vigil ([`Supervisor::output_lost`]).
pub const REASON_OUTPUT_LOST: &str = crate::config::on_event::EventReason::OutputLost.as_str();

/// The core's notion of time: a monotonic instant supplied by the caller.
pub type Time = Instant;

/// Identifies one container slot (init or regular) for as long as its pod definition lives.
/// A pod replaced by reload gets new keys.
#[derive(
    serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
)]
pub struct ContainerKey(pub u32);

/// Bumped on every spawn of a container; 0 means "never spawned".
pub type Generation = u64;

/// How a main process ended, as the runtime saw it at reap time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExitInfo {
    /// Exit code if it exited.
    pub code: Option<i32>,
    /// Signal number if it was killed by a signal.
    pub signal: Option<i32>,
    /// How much `memory.events` `oom_kill` rose during this run (read synchronously at reap).
    pub oom_kill_delta: u64,
    /// How much `memory.events` `oom_group_kill` rose during this run.
    pub oom_group_kill_delta: u64,
    /// `memory.max` of the container's cgroup, if limited (for the OOMKilled message).
    pub memory_max: Option<u64>,
    /// `memory.peak` at reap, if known.
    pub memory_peak: Option<u64>,
    /// What the container left as its termination message (its `termination_message_path`
    /// file, or its log tail under `FallbackToLogsOnError`), read by the runtime at reap.
    /// When present and not empty it is `terminated.message` (kubelet
    /// `kuberuntime_container.go` getTerminationMessage), in place of vigil's explanation.
    pub termination_message: Option<String>,
    /// The process was not vigil's child (a run adopted from an earlier vigil): `code` and
    /// `signal` are unknown, and the run ends as `ContainerStatusUnknown`.
    pub status_unknown: bool,
    /// Processes still in the container's cgroup when a main process that exited 0 was reaped
    /// (read from `cgroup.procs` before they are killed; 0 without cgroups): a service that
    /// daemonized, whose `Completed` is not what its author meant.
    pub left_behind: u32,
}

/// Outcome of one probe attempt. Target failures are outcomes, not errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    Success(String),
    Failure(String),
    /// A success that deserves a look (kubelet `probe.Warning`, e.g. an HTTP redirect to
    /// another host that was not followed): counts as a success and records a `ProbeWarning`
    /// Warning event with this message (kubelet `prober/prober.go` runProbeWithRetries
    /// caller, `"%s probe warning: %s"`).
    Warning(String),
}

/// What a run said of itself: one sd_notify(3) datagram of a container's, parsed by the
/// runtime from its `KEY=VALUE` lines (docs/behaviour.md §4.4; lines vigil does not act on are
/// left out), or a line of its output that matched its `ready_log_line` (§4.5: `ready` alone,
/// [`ReadyWord::LogLine`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Notification {
    /// How it was said; a container is heard only in the way its spec says it speaks.
    pub via: ReadyWord,
    /// `READY=1`: the start-up is complete (systemd.service(5) `Type=notify`).
    pub ready: bool,
    /// `STOPPING=1`: the service is shutting down by itself.
    pub stopping: bool,
    /// `STATUS=…`: a free-form status line, shown as it is (escaped on display).
    pub status: Option<String>,
    /// `WATCHDOG=1`: the keep-alive of `watchdog_seconds` (sd_watchdog_enabled(3)).
    pub watchdog: bool,
    /// `WATCHDOG=trigger`: the service asks to be treated as if its watchdog ran out.
    pub watchdog_trigger: bool,
    /// `EXTEND_TIMEOUT_USEC=N`: more time for the start-up (`start_timeout_seconds`).
    pub extend_timeout: Option<Duration>,
}

/// The ways a run says it is ready (docs/behaviour.md §4.4, §4.5).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ReadyWord {
    /// A datagram on its sd_notify socket (`notify = true`).
    #[default]
    SdNotify,
    /// A line of its output matched `ready_log_line`.
    LogLine,
}

/// Something that happened outside the core.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The runtime started the process asked for by [`Action::Spawn`].
    Spawned {
        key: ContainerKey,
        generation: Generation,
        pid: u32,
    },
    /// The process could not be started (reason `StartError`); `message` carries the OS error.
    SpawnFailed {
        key: ContainerKey,
        generation: Generation,
        message: String,
    },
    /// The main process was reaped.
    Exited {
        key: ContainerKey,
        generation: Generation,
        exit: ExitInfo,
    },
    /// A probe started by [`Action::StartProbe`] finished.
    ProbeResult {
        key: ContainerKey,
        generation: Generation,
        kind: ProbeKind,
        seq: u64,
        outcome: ProbeOutcome,
        duration: Duration,
    },
    /// A process of the run's own cgroup (or, without cgroups, its session) sent a datagram
    /// to the run's `NOTIFY_SOCKET` (`notify = true`).
    Notified {
        key: ContainerKey,
        generation: Generation,
        notification: Notification,
    },
    /// `memory.events` `oom_kill` rose while the main process lives: `delta` more kills.
    OomKills {
        key: ContainerKey,
        generation: Generation,
        delta: u64,
        memory_max: Option<u64>,
    },
}

/// How a container ended for good that a vigil restarted after a crash of the earlier one
/// keeps ended rather than starting it again ([`Supervisor::keep_ended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptEnd {
    /// Stopped by an operator.
    Stopped,
    /// Completed, and its restart policy does not restart it.
    Completed,
}

/// Operator requests (control socket, signals, reload).
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Start {
        pod: String,
        container: Option<String>,
    },
    /// `start POD --ignore-dependencies`: the whole pod starts now, its `depends_on` not
    /// waited for (systemd's `--job-mode=ignore-dependencies`, compose's `up --no-deps`).
    StartIgnoringDependencies { pod: String },
    Stop {
        pod: String,
        container: Option<String>,
    },
    Restart {
        pod: String,
        container: Option<String>,
    },
    /// `restart POD --rolling`: every replica of the pod with replicas `pod` gets a new run,
    /// `max_unavailable` at a time (else the pod's own `max_unavailable`), each batch after
    /// the previous one is Ready (docs/behaviour.md §14.2).
    RollingRestart {
        pod: String,
        max_unavailable: Option<u32>,
    },
    /// `trigger POD`: a new run of a pod at rest now, as a trigger of its schedule would start
    /// it (`kubectl create job --from=cronjob/…`); it does not count as a trigger.
    Trigger { pod: String },
    /// Graceful shutdown; `force` kills everything at once (second SIGTERM).
    Shutdown { force: bool },
    /// Apply a new, already validated config.
    Reload(Box<Config>),
}

/// Why a [`Command`] was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandError {
    pub kind: CommandErrorKind,
    pub message: String,
}

/// The kinds of refusal the core can give. The control surface maps each to one of the wire's
/// error kinds (docs/interface.md §2.3); the core itself knows nothing of the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandErrorKind {
    /// No pod or container of that name (`not_found`).
    NotFound,
    /// The target exists but the request does not apply to it now, e.g. starting an init
    /// container that is not the pod's current step (`bad_argument`).
    NotApplicable,
    /// A shutdown is under way; only `stop` is still accepted (`shutting_down`).
    ShuttingDown,
}

/// Why a reload (SIGHUP or the `reload` request) changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadError {
    /// The new config could not be read, parsed or validated, or this host cannot apply it.
    /// The message names the file and each problem.
    #[error("{0}")]
    InvalidConfig(String),
    /// The config is fine but the core refused to apply it (a shutdown is under way).
    #[error("{}", .0.message)]
    Refused(CommandError),
}

/// Why a container waits (kubelet's `ContainerStateWaiting.Reason` values vigil uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitingReason {
    /// `Spawn` was emitted and the process is not running yet.
    ContainerCreating,
    /// The pod's init containers have not all completed.
    PodInitializing,
    /// Waiting out the restart back-off after a failed run.
    CrashLoopBackOff,
    /// A pod named in `depends_on` is not ready yet.
    WaitingForDependencies,
    /// A pod named in `depends_on` cannot meet its condition on its own: it was refused at
    /// start, or failed and will not run again (or waits on such a pod itself). The pod still
    /// waits, and starts once an operator `start` or a reload brings the dependency back
    /// (docs/behaviour.md, "Dependencies").
    DependencyFailed,
    /// The pod is not started in this run: `autostart = false`, a profile not active, or not
    /// named on `vigil run POD…` (`config::select`). An operator `start` starts it.
    NotStarted,
}

impl WaitingReason {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitingReason::ContainerCreating => "ContainerCreating",
            WaitingReason::PodInitializing => "PodInitializing",
            WaitingReason::CrashLoopBackOff => "CrashLoopBackOff",
            WaitingReason::WaitingForDependencies => "WaitingForDependencies",
            WaitingReason::DependencyFailed => "DependencyFailed",
            WaitingReason::NotStarted => "NotStarted",
        }
    }
}

impl std::fmt::Display for WaitingReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the core wants done. The runtime executes these in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Start a fresh run: new cgroup, spawn `container.command`; answer with
    /// [`Input::Spawned`] or [`Input::SpawnFailed`].
    Spawn {
        key: ContainerKey,
        generation: Generation,
        pod: String,
        container: Arc<ContainerSpec>,
        init: bool,
    },
    /// Send `signal` to the main process of this run (the stop signal).
    Signal {
        key: ContainerKey,
        generation: Generation,
        signal: i32,
    },
    /// SIGKILL every process of this run (its cgroup, or process group without cgroups).
    Kill {
        key: ContainerKey,
        generation: Generation,
    },
    /// Run one probe attempt; answer with [`Input::ProbeResult`] carrying the same `seq`.
    /// The core enforces the timeout itself (it emits [`Action::CancelProbe`]).
    StartProbe {
        key: ContainerKey,
        generation: Generation,
        pod: String,
        container: Arc<ContainerSpec>,
        kind: ProbeKind,
        seq: u64,
        probe: Arc<ProbeSpec>,
    },
    /// Abandon a probe attempt (timed out, or its container stopped); kill an exec probe's tree.
    CancelProbe {
        key: ContainerKey,
        generation: Generation,
        kind: ProbeKind,
        seq: u64,
    },
    /// The container slot is gone for good (pod removed by reload); free its resources.
    Forget { key: ContainerKey },
    /// Everything has stopped after a shutdown: exit the supervisor with this code.
    Exit { code: i32 },
}
