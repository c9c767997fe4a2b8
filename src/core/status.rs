//! Snapshot types: the core's view of pods and containers, plus events.
//!
//! Plain data built by [`super::Supervisor`]; rendering (JSON, tables) lives in `control`.
//! Times are monotonic [`Time`]s; the renderer converts them to wall-clock with an anchor.

use std::sync::Arc;
use std::time::Duration;

use super::{ContainerKey, Time, WaitingReason};
use crate::config::spec::{ContainerSpec, ProbeKind, RestartPolicy};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionType {
    Initialized,
    ContainersReady,
    Ready,
}

impl ConditionType {
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Initialized => "Initialized",
            ConditionType::ContainersReady => "ContainersReady",
            ConditionType::Ready => "Ready",
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Condition {
    pub kind: ConditionType,
    pub status: bool,
    pub reason: String,
    pub message: String,
    #[serde(with = "crate::monotime")]
    pub last_transition: Time,
}

/// Why a run ended (docs/behaviour.md §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminationReason {
    Completed,
    Error,
    OomKilled,
    LivenessProbeFailed,
    StartupProbeFailed,
    StartError,
    Stopped,
    RestartLimitExceeded,
    /// The `post_start` hook failed and the container was killed (always a failure).
    FailedPostStartHook,
    /// A run adopted from an earlier vigil ended: it is not vigil's child, so its exit status
    /// cannot be known. Like the kubelet (`pkg/kubelet/status/status_manager.go`
    /// `TerminatePod`: "because we do not know whether the container was successful, always
    /// report an error"), exit code 137 and a failure for the restart policy.
    ContainerStatusUnknown,
    /// Stopped because its pod's `active_deadline_seconds` ran out (the pod reason the
    /// kubelet's `active_deadline.go` gives, carried by each container vigil stopped for it):
    /// a failure, never restarted.
    DeadlineExceeded,
    /// A `notify = true` container with `watchdog_seconds` sent no `WATCHDOG=1` in time, or
    /// sent `WATCHDOG=trigger` (systemd's `WatchdogSec=`, its result `watchdog`): a failure.
    WatchdogTimeout,
    /// A `notify = true` container sent no `READY=1` within `start_timeout_seconds` (systemd's
    /// `TimeoutStartSec=`, its result `timeout`): a failure.
    StartTimeout,
}

impl TerminationReason {
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationReason::Completed => "Completed",
            TerminationReason::Error => "Error",
            TerminationReason::OomKilled => "OOMKilled",
            TerminationReason::LivenessProbeFailed => "LivenessProbeFailed",
            TerminationReason::StartupProbeFailed => "StartupProbeFailed",
            TerminationReason::StartError => "StartError",
            TerminationReason::Stopped => "Stopped",
            TerminationReason::RestartLimitExceeded => "RestartLimitExceeded",
            TerminationReason::FailedPostStartHook => "FailedPostStartHook",
            TerminationReason::ContainerStatusUnknown => "ContainerStatusUnknown",
            TerminationReason::DeadlineExceeded => "DeadlineExceeded",
            TerminationReason::WatchdogTimeout => "WatchdogTimeout",
            TerminationReason::StartTimeout => "StartTimeout",
        }
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Terminated {
    /// Exit code; 128+signal when killed by a signal; for StartError 128.
    pub exit_code: i32,
    pub signal: Option<i32>,
    pub reason: TerminationReason,
    pub message: String,
    #[serde(with = "crate::monotime::opt")]
    pub started_at: Option<Time>,
    #[serde(with = "crate::monotime")]
    pub finished_at: Time,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub enum ContainerState {
    Waiting {
        reason: WaitingReason,
        message: String,
    },
    Running {
        #[serde(with = "crate::monotime")]
        started_at: Time,
        /// Set from the moment vigil begins to stop it (stop signal sent) until it exits:
        /// kubectl's `Terminating`.
        terminating: Option<Terminating>,
    },
    Terminated(Terminated),
}

/// A running container vigil is stopping.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Terminating {
    /// When the stop signal was sent.
    #[serde(with = "crate::monotime")]
    pub since: Time,
    /// The grace period before SIGKILL (zero when SIGKILL was sent at once).
    pub grace: Duration,
    /// Why: `stopped by request`, `definition changed`, `supervisor shutting down`, or the
    /// probe failure.
    pub message: String,
    /// The SIGKILL has been sent (grace period over, or a forced shutdown).
    pub killed: bool,
}

/// One probe attempt, kept for `describe`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ProbeRecord {
    #[serde(with = "crate::monotime")]
    pub at: Time,
    /// How long after its due time the attempt started (the loop's own lateness).
    #[serde(default)]
    pub late: Duration,
    pub duration: Duration,
    pub success: bool,
    pub message: String,
    /// The container's run the attempt probed: its restart count then, plus one (0 from a
    /// vigil before this field: unknown).
    #[serde(default)]
    pub run: u32,
}

/// Published result of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResultState {
    Unknown,
    Success,
    Failure,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ProbeStatus {
    pub kind: ProbeKind,
    pub result: ProbeResultState,
    /// The run's schedule begins this long after start + initial delay (phase spreading of
    /// containers whose probes began within a millisecond of each other; zero for most).
    #[serde(default)]
    pub phase: Duration,
    /// Most recent last, at most a handful.
    pub recent: Vec<ProbeRecord>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ContainerStatus {
    pub key: ContainerKey,
    pub name: String,
    pub ready: bool,
    pub started: bool,
    pub restart_count: u32,
    pub pid: Option<u32>,
    pub state: ContainerState,
    pub last_state: Option<Terminated>,
    pub probes: Vec<ProbeStatus>,
    /// OOM kills seen in this container over its life (main or not).
    pub oom_kills: u64,
    /// While waiting out the restart back-off: when the next run starts.
    #[serde(default, with = "crate::monotime::opt")]
    pub backoff_until: Option<Time>,
    pub spec: Arc<ContainerSpec>,
    /// The current run's output pipes were lost in a crash of vigil (an adopted run kept
    /// running with `on_output_lost = "keep"`, or until its restart ends it).
    #[serde(default)]
    pub output_lost: bool,
    /// What the run said over sd_notify (`notify = true`), else `None`.
    #[serde(default)]
    pub notify: Option<NotifyStatus>,
}

/// What a container with `notify = true` said in its current run (docs/behaviour.md §4.4).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Default, PartialEq)]
pub struct NotifyStatus {
    /// It sent `READY=1` in this run.
    pub ready: bool,
    /// Its last `STATUS=` line, as sent.
    pub status: Option<String>,
    /// It sent `STOPPING=1` in this run.
    pub stopping: bool,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct PodStatus {
    pub name: String,
    pub phase: Phase,
    pub restart_policy: RestartPolicy,
    pub conditions: Vec<Condition>,
    pub init_containers: Vec<ContainerStatus>,
    pub containers: Vec<ContainerStatus>,
    /// When the pod (this definition of it) was created.
    #[serde(with = "crate::monotime")]
    pub created_at: Time,
    /// A scheduled pod's schedule (`schedule`), else `None`.
    #[serde(default)]
    pub schedule: Option<ScheduleStatus>,
    /// The ended runs kept by `history` (`core::history`), oldest first.
    #[serde(default)]
    pub runs: Vec<crate::core::history::RunRecord>,
    /// A replica's: the last rollout of its pod with replicas (docs/behaviour.md §14.2).
    #[serde(default)]
    pub rollout: Option<super::RolloutStatus>,
}

/// What status shows of a pod's `schedule` (docs/behaviour.md §6.6).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ScheduleStatus {
    pub cron: String,
    /// The IANA zone as written; `None`: the host's local zone.
    pub time_zone: Option<String>,
    pub concurrency: crate::config::spec::Concurrency,
    /// Suspended (`suspend = true`, or `vigil stop`): no trigger starts a run.
    pub suspended: bool,
    /// The trigger of the last run the schedule started (`LAST SCHEDULE`).
    pub last_schedule: Option<std::time::SystemTime>,
    /// The next trigger (none while suspended, or when the pattern never matches again).
    pub next_run: Option<std::time::SystemTime>,
    /// A run of the pod is under way.
    pub active: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// A kubectl-style event; repeats (same type, reason, object, message) aggregate into `count`.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Event {
    /// Bumped (to a fresh, globally increasing value) every time the event is recorded or
    /// aggregated, so followers can ask for everything after the last `seq` they saw.
    pub seq: u64,
    pub kind: EventType,
    pub reason: String,
    /// `pod/container`, or `pod` for pod-level events.
    pub object: String,
    pub message: String,
    pub count: u32,
    #[serde(with = "crate::monotime")]
    pub first: Time,
    #[serde(with = "crate::monotime")]
    pub last: Time,
}
