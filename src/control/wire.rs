//! The control socket's wire types: one set of `Serialize`/`Deserialize` structs for the
//! replies, which the server writes and the client reads, and for the requests ([`request`]),
//! which the client writes and the server reads (docs/interface.md §2 and §3).
//!
//! Owns the exact JSON shape of every reply. It must not know how a snapshot is taken or how a
//! reply is shown: `render` builds these from the core's snapshot (server side) and `format`
//! turns them into tables and text (client side). A field renamed here changes both ends at
//! once; a reply missing a field the client needs fails to deserialize instead of showing "".

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

pub mod commands;
pub mod request;
pub mod wait;
pub use request::{ArgError, RequestCmd};

use super::time;
use crate::config::spec::{ProbeKind, RestartPolicy};
use crate::core::{
    CommandErrorKind, ConditionType, EventType, HealthState, Phase, ProbeResultState, ReloadError,
    TerminationReason, WaitingReason,
};

/// Machine-readable error kinds of `{"ok": false, "error": {"kind": …}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The line is not a JSON object with a string `cmd` (or not UTF-8).
    BadRequest,
    /// `cmd` names no command.
    UnknownCommand,
    /// A field is missing, mistyped, empty or unknown, or the target does not accept the
    /// request now (e.g. starting an init container that is not the pod's current step).
    BadArgument,
    /// The request line is longer than the limit; the connection is closed.
    TooLarge,
    /// No pod or container of that name.
    NotFound,
    /// A mutating command from a peer that is not an admin.
    PermissionDenied,
    /// `reload` refused the new config; nothing changed.
    InvalidConfig,
    /// A shutdown is under way.
    ShuttingDown,
    /// vigil failed to answer (a bug); the message says what.
    Internal,
    /// The server refused the connection (connection limit reached).
    Busy,
}

impl ErrorKind {
    /// Every kind, in documentation order.
    pub const ALL: [ErrorKind; 10] = [
        ErrorKind::BadRequest,
        ErrorKind::UnknownCommand,
        ErrorKind::BadArgument,
        ErrorKind::NotFound,
        ErrorKind::PermissionDenied,
        ErrorKind::InvalidConfig,
        ErrorKind::ShuttingDown,
        ErrorKind::TooLarge,
        ErrorKind::Busy,
        ErrorKind::Internal,
    ];

    /// What the kind means, for the wire reference (docs/wire-reference.md).
    pub fn meaning(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => {
                "the line is not a JSON object with a string `cmd`, or not UTF-8"
            }
            ErrorKind::UnknownCommand => "`cmd` names no command",
            ErrorKind::BadArgument => {
                "a field is missing, mistyped, empty or unknown, or the target does not accept \
                 the request now (an init container that is not the pod's current step)"
            }
            ErrorKind::TooLarge => "the request line is over the limit; the connection is closed",
            ErrorKind::NotFound => "no pod or container of that name",
            ErrorKind::PermissionDenied => "a mutating command from a peer that is not an admin",
            ErrorKind::InvalidConfig => "`reload` refused the new config; nothing changed",
            ErrorKind::ShuttingDown => "a shutdown is under way (also for `reload`)",
            ErrorKind::Internal => "vigil failed to answer (a bug); the message says what",
            ErrorKind::Busy => "the connection was refused: too many connections",
        }
    }

    /// The wire spelling (`"not_found"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::UnknownCommand => "unknown_command",
            ErrorKind::BadArgument => "bad_argument",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::NotFound => "not_found",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::InvalidConfig => "invalid_config",
            ErrorKind::ShuttingDown => "shutting_down",
            ErrorKind::Internal => "internal",
            ErrorKind::Busy => "busy",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<CommandErrorKind> for ErrorKind {
    fn from(k: CommandErrorKind) -> ErrorKind {
        match k {
            CommandErrorKind::NotFound => ErrorKind::NotFound,
            CommandErrorKind::NotApplicable => ErrorKind::BadArgument,
            CommandErrorKind::ShuttingDown => ErrorKind::ShuttingDown,
        }
    }
}

impl From<&ReloadError> for ErrorKind {
    fn from(e: &ReloadError) -> ErrorKind {
        match e {
            ReloadError::InvalidConfig(_) => ErrorKind::InvalidConfig,
            ReloadError::Refused(c) => c.kind.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Names: enums that go on the wire as their kubectl spelling
// ---------------------------------------------------------------------------------------------

/// Implements `Serialize`/`Deserialize` for an enum as the given strings. The serializing match
/// is exhaustive, so a variant added to the enum without a wire name does not compile; an
/// unknown name in a reply is an error naming the names expected.
macro_rules! wire_names {
    ($t:ident { $($v:ident => $name:literal),+ $(,)? }) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(match self {
                    $($t::$v => $name),+
                })
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                match s.as_str() {
                    $($name => Ok($t::$v),)+
                    other => Err(serde::de::Error::unknown_variant(other, &[$($name),+])),
                }
            }
        }
    };
}

wire_names!(Phase {
    Pending => "Pending",
    Running => "Running",
    Succeeded => "Succeeded",
    Failed => "Failed",
});
wire_names!(RestartPolicy {
    Always => "Always",
    OnFailure => "OnFailure",
    Never => "Never",
});
wire_names!(ConditionType {
    Initialized => "Initialized",
    ContainersReady => "ContainersReady",
    Ready => "Ready",
});
wire_names!(WaitingReason {
    ContainerCreating => "ContainerCreating",
    PodInitializing => "PodInitializing",
    CrashLoopBackOff => "CrashLoopBackOff",
    WaitingForDependencies => "WaitingForDependencies",
    DependencyFailed => "DependencyFailed",
    NotStarted => "NotStarted",
});
wire_names!(TerminationReason {
    Completed => "Completed",
    Error => "Error",
    OomKilled => "OOMKilled",
    LivenessProbeFailed => "LivenessProbeFailed",
    StartupProbeFailed => "StartupProbeFailed",
    StartError => "StartError",
    Stopped => "Stopped",
    RestartLimitExceeded => "RestartLimitExceeded",
    FailedPostStartHook => "FailedPostStartHook",
    ContainerStatusUnknown => "ContainerStatusUnknown",
    DeadlineExceeded => "DeadlineExceeded",
    WatchdogTimeout => "WatchdogTimeout",
    StartTimeout => "StartTimeout",
});
wire_names!(HealthState {
    Ready => "Ready",
    Completed => "Completed",
    NotStarted => "NotStarted",
    Stopped => "Stopped",
    Suspended => "Suspended",
    AwaitingSchedule => "AwaitingSchedule",
    ContainerCreating => "ContainerCreating",
    PodInitializing => "PodInitializing",
    CrashLoopBackOff => "CrashLoopBackOff",
    WaitingForDependencies => "WaitingForDependencies",
    DependencyFailed => "DependencyFailed",
    Starting => "Starting",
    NotReady => "NotReady",
    Terminating => "Terminating",
    Terminated => "Terminated",
    Failed => "Failed",
});
wire_names!(ProbeKind {
    Startup => "startup",
    Liveness => "liveness",
    Readiness => "readiness",
    Hook => "hook",
});
wire_names!(ProbeResultState {
    Unknown => "unknown",
    Success => "success",
    Failure => "failure",
});
wire_names!(EventType {
    Normal => "Normal",
    Warning => "Warning",
});

/// A wall-clock time, on the wire as RFC 3339 UTC with milliseconds
/// (`2026-11-22T00:48:17.250Z`); anything else in a reply is an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(pub SystemTime);

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&time::rfc3339(self.0))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        time::parse_rfc3339(&s)
            .map(Timestamp)
            .ok_or_else(|| serde::de::Error::custom(format!("{s:?} is not an RFC 3339 time")))
    }
}

/// A condition's status: `"True"` or `"False"` on the wire (kubectl's spelling).
mod true_false {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if *b { "True" } else { "False" })
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        match String::deserialize(d)?.as_str() {
            "True" => Ok(true),
            "False" => Ok(false),
            other => Err(serde::de::Error::unknown_variant(other, &["True", "False"])),
        }
    }
}

/// For `Option` fields that are always sent (as `null` when empty): a reply without the field
/// is an error, not `None`. (serde treats a missing `Option` field as `None` unless the field
/// has its own deserializer.)
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

/// `status`: every pod, or the one asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReply {
    pub pods: Vec<Pod>,
}

/// One pod (docs/interface.md §3.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    pub name: String,
    pub phase: Phase,
    pub restart_policy: RestartPolicy,
    /// When this definition of the pod was created (start, or the reload that added it).
    pub created_at: Timestamp,
    pub conditions: Vec<Condition>,
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    /// A scheduled pod's schedule (docs/behaviour.md §6.6); absent for other pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
    /// The ended runs the pod keeps (`history`), oldest first; absent when none is kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<Run>,
    /// A replica's: the last rollout of its pod with replicas (docs/behaviour.md §14.2);
    /// absent when it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
}

/// One ended run of a pod in a status reply (`history`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// The schedule's trigger that started it; null for a run started otherwise.
    pub scheduled_for: Option<Timestamp>,
    /// `Succeeded` or `Failed`.
    pub phase: Phase,
    /// For a failed run: the container that made it fail and how it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RunFailure>,
}

/// The container that made a run fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFailure {
    pub container: String,
    pub reason: TerminationReason,
    pub exit_code: i32,
}

/// `rollout` of a replica in a status reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    /// The pod with replicas (`web`).
    pub pod: String,
    /// `restart` (`restart --rolling`) or `update` (a reload with `update = "rolling"`).
    pub kind: String,
    /// `Progressing`, `Complete` or `Halted`.
    pub state: String,
    /// Why it halted (`ProgressDeadlineExceeded`, `ReplicaFailed`); null otherwise.
    pub reason: Option<String>,
    /// What the halt said; null otherwise.
    pub message: Option<String>,
    /// Replicas Ready on their new run, of `total`.
    pub replaced: u32,
    pub total: u32,
    /// The batch under way: the replicas not Ready on their new run yet.
    pub waiting_for: Vec<String>,
}

/// `schedule` of a pod in a status reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub cron: String,
    /// The IANA zone as configured; null for the host's local zone.
    pub time_zone: Option<String>,
    /// `Forbid` or `Replace`.
    pub concurrency: String,
    pub suspended: bool,
    /// The trigger of the last run the schedule started; null before the first.
    pub last_schedule: Option<Timestamp>,
    /// The next trigger; null while suspended or when the pattern never matches again.
    pub next_run: Option<Timestamp>,
    /// A run of the pod is under way.
    pub active: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: ConditionType,
    #[serde(with = "true_false")]
    pub status: bool,
    pub reason: String,
    pub message: String,
    pub last_transition_time: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Container {
    pub name: String,
    pub ready: bool,
    pub started: bool,
    pub restart_count: u32,
    #[serde(deserialize_with = "present")]
    pub pid: Option<u32>,
    pub state: State,
    pub last_state: LastState,
    /// The container's cgroup directory, `null` without cgroups or when not running.
    #[serde(deserialize_with = "present")]
    pub cgroup: Option<String>,
    pub resources: Figures,
    pub probes: Vec<ProbeStatus>,
    pub spec: Spec,
    /// The current run's output pipes were lost in a crash of vigil: what it writes to stdout
    /// and stderr cannot be read (an adopted run, `[supervisor] on_output_lost`). Absent from
    /// a vigil before this field.
    #[serde(default)]
    pub output_lost: bool,
    /// What the run said over sd_notify, for a container with `notify = true`; `null`
    /// otherwise (absent from a vigil before this field).
    #[serde(default)]
    pub notify: Option<Notify>,
}

/// What a container with `notify = true` said in its current run (docs/behaviour.md §4.4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notify {
    /// It sent `READY=1`.
    pub ready: bool,
    /// Its last `STATUS=` line, as sent (`null` before one).
    #[serde(deserialize_with = "present")]
    pub status: Option<String>,
    /// It sent `STOPPING=1`.
    pub stopping: bool,
}

/// Exactly one of `waiting`, `running`, `terminated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Waiting(Waiting),
    Running(Running),
    Terminated(Terminated),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Waiting {
    pub reason: WaitingReason,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Running {
    pub started_at: Timestamp,
    /// `null`, or the stop under way (kubectl's `Terminating`).
    #[serde(deserialize_with = "present")]
    pub terminating: Option<Terminating>,
}

/// A running container vigil is stopping (docs/interface.md §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terminating {
    /// When the stop signal was sent.
    pub since: Timestamp,
    /// Grace period before SIGKILL, in seconds.
    pub grace_period_seconds: f64,
    /// Why it is being stopped.
    pub message: String,
    /// Whether the SIGKILL has been sent.
    pub killed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terminated {
    /// 128+signal when killed by a signal; 128 for `StartError`.
    pub exit_code: i32,
    #[serde(deserialize_with = "present")]
    pub signal: Option<i32>,
    pub reason: TerminationReason,
    pub message: String,
    /// `null` for a run that never started (`StartError`).
    #[serde(deserialize_with = "present")]
    pub started_at: Option<Timestamp>,
    pub finished_at: Timestamp,
}

/// `{}` before the first termination, else `{"terminated": {...}}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LastState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<Terminated>,
}

/// Figures from the container's cgroup (`null` where unknown: no cgroup, not running, no
/// controller) and the OOM kills vigil counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    #[serde(deserialize_with = "present")]
    pub memory_current: Option<u64>,
    #[serde(deserialize_with = "present")]
    pub memory_peak: Option<u64>,
    /// The cgroup's `memory.max`, else the configured limit.
    #[serde(deserialize_with = "present")]
    pub memory_max: Option<u64>,
    pub oom_kills: u64,
    #[serde(deserialize_with = "present")]
    pub cpu_usage_usec: Option<u64>,
    #[serde(deserialize_with = "present")]
    pub pids_current: Option<u64>,
    /// `memory.pressure` `some avg10`.
    #[serde(deserialize_with = "present")]
    pub memory_pressure_some_avg10: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeStatus {
    pub kind: ProbeKind,
    pub result: ProbeResultState,
    /// The current run's attempts are due at start + initial delay + `phase_ms` + k × period
    /// (phase spreading of containers whose probes began within a millisecond of each other;
    /// 0 for most).
    #[serde(default)]
    pub phase_ms: f64,
    /// Most recent last.
    pub recent: Vec<ProbeAttempt>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeAttempt {
    pub time: Timestamp,
    /// How long after its due time the attempt started (vigil's own lateness).
    #[serde(default)]
    pub late_ms: f64,
    pub duration_ms: f64,
    pub success: bool,
    pub message: String,
    /// The container's run the attempt probed (restart count then + 1); 0: unknown.
    #[serde(default)]
    pub run: u32,
}

/// What `describe` shows of the configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    pub command: Vec<String>,
    pub restart_policy: RestartPolicy,
    #[serde(deserialize_with = "present")]
    pub working_dir: Option<String>,
    #[serde(deserialize_with = "present")]
    pub user: Option<String>,
    #[serde(deserialize_with = "present")]
    pub group: Option<String>,
    /// Values are [`REDACTED`] unless the peer is an admin.
    pub env: BTreeMap<String, String>,
    /// `env_file`'s path; its values are never sent to anyone.
    #[serde(default)]
    pub env_file: Option<String>,
    pub stop_signal: String,
    pub termination_grace_period_seconds: f64,
    #[serde(deserialize_with = "present")]
    pub max_restarts: Option<u32>,
    pub limits: Limits,
    #[serde(deserialize_with = "present")]
    pub startup_probe: Option<ProbeSpec>,
    #[serde(deserialize_with = "present")]
    pub liveness_probe: Option<ProbeSpec>,
    #[serde(deserialize_with = "present")]
    pub readiness_probe: Option<ProbeSpec>,
}

/// What a non-admin peer sees instead of an environment value.
pub const REDACTED: &str = "***";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    #[serde(deserialize_with = "present")]
    pub memory_max: Option<u64>,
    #[serde(deserialize_with = "present")]
    pub memory_high: Option<u64>,
    #[serde(deserialize_with = "present")]
    pub swap_max: Option<u64>,
    #[serde(deserialize_with = "present")]
    pub pids_max: Option<u64>,
    /// Cores.
    #[serde(deserialize_with = "present")]
    pub cpu_max: Option<f64>,
    #[serde(deserialize_with = "present")]
    pub cpu_weight: Option<u32>,
    pub oom_group: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// kubectl's handler text: `http-get http://127.0.0.1:8080/healthz`.
    pub action: String,
    pub initial_delay_seconds: f64,
    pub timeout_seconds: f64,
    pub period_seconds: f64,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

/// One event; `seq` lets a follower resume after the last one it saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub seq: u64,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub reason: String,
    /// `pod/container`, or `pod` for pod-level events.
    pub object: String,
    pub message: String,
    pub count: u32,
    pub first_timestamp: Timestamp,
    pub last_timestamp: Timestamp,
}

/// `events` (without `follow`): oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsReply {
    pub events: Vec<Event>,
}

/// `describe`: the pod and its own events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DescribeReply {
    pub pod: Pod,
    pub events: Vec<Event>,
}

/// `logs` (without `follow`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogsReply {
    pub pod: String,
    pub container: String,
    /// The captured output; bytes that are not UTF-8 are replaced by U+FFFD.
    pub log: String,
    /// Bytes overwritten in the ring before anyone read them.
    pub dropped_bytes: u64,
}

/// `version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VersionReply {
    pub version: String,
    /// Whether the asking peer may start, stop, restart, reload and shut down (root, vigil's
    /// own uid, or in `admin_uids`/`admin_gids`); absent from servers before it (`vigil top`
    /// then offers the actions and lets the server decide).
    #[serde(default)]
    pub admin: Option<bool>,
}

/// `metrics`: the exposition, exactly as `GET /metrics` would serve it in that format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsReply {
    /// `text/plain; version=0.0.4; charset=utf-8` or the OpenMetrics content type.
    pub content_type: String,
    pub text: String,
}

/// `health`: whether every pod judged (those named, else every pod expected to run) is Ready
/// or Completed, and why each other one is not (docs/behaviour.md §5.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthReply {
    pub healthy: bool,
    /// Pods judged Ready.
    pub ready: usize,
    /// Pods judged Completed.
    pub completed: usize,
    /// The pods judged that are neither, in config order.
    pub unhealthy: Vec<PodHealth>,
}

/// One pod that is not Ready or Completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodHealth {
    pub pod: String,
    pub state: HealthState,
    /// What the state is about: `pod/container`, or the pod.
    pub object: String,
    pub message: String,
}

/// `wait`: whether every pod named met the condition (`met`), or the timeout passed first;
/// each pod as it stood then.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitReply {
    pub met: bool,
    /// `ready`, `completed` or `stopped`.
    #[serde(rename = "for")]
    pub condition: wait::WaitFor,
    pub pods: Vec<WaitPod>,
}

/// One pod of a `wait` reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitPod {
    pub pod: String,
    pub met: bool,
    pub state: HealthState,
    /// What the state is about: `pod/container`, or the pod.
    pub object: String,
    pub message: String,
}

/// `start`, `stop`, `restart`, `reload`, `shutdown`: what was done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageReply {
    pub message: String,
    /// With `wait_ms` (`start`, `stop`, `restart`): how the wait ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitOutcome>,
}

/// How a request's `wait_ms` ended (the server decides it: control/wire/wait.rs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case", deny_unknown_fields)]
pub enum WaitOutcome {
    /// Every target is in the state asked for.
    Reached,
    /// A target will not get there on its own (back-off, `DependencyFailed`, terminated with
    /// an error), or its pod is gone: why.
    Failed { why: String },
    /// `wait_ms` passed first: `timed out after 30s waiting for …`.
    TimedOut { why: String },
}

/// The `error` of a refused request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub message: String,
}

/// One reply line as the client reads it: `ok` with exactly one of `result` (the answer),
/// `event` (a followed event) or `log` (a chunk of followed output); or not `ok` with `error`.
/// `result` and `event` stay JSON text, borrowed from the line, until the client knows which
/// type to read them as: one pass over the line into the reply type, not a tree of values
/// built and then read again (issue 20). `id` and any other field are not read.
#[derive(Debug, Deserialize)]
pub struct ReplyLine<'a> {
    pub ok: bool,
    #[serde(default, borrow)]
    pub result: Option<&'a serde_json::value::RawValue>,
    #[serde(default, borrow)]
    pub event: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    pub log: Option<String>,
    #[serde(default)]
    pub error: Option<ErrorBody>,
    /// A `logs -f` line: the ring read and the offset of the next byte (what a follower
    /// resumes by, with `next`).
    #[serde(default)]
    pub ring: Option<String>,
    #[serde(default)]
    pub next: Option<u64>,
    /// An `events -f` stream's first line: the event history's id …
    #[serde(default)]
    pub history: Option<String>,
    /// … and, resuming an earlier vigil's history after a crash, the events it lost.
    #[serde(default)]
    pub lost: Option<LostEvents>,
    /// … or that the history resumed is unknown to this vigil (it starts from its first).
    #[serde(default)]
    pub new_history: bool,
}

/// The events a crash lost to a follower: `after + 1 ..= through` (docs/interface.md §2.4).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
pub struct LostEvents {
    pub after: u64,
    pub through: u64,
}

/// `v` as JSON appended to `out`.
///
/// serde_json writes in pieces of a few bytes (punctuation, keys, numbers, the runs of a
/// string between escapes): a full status of 100 pods is ~7,400 of them, 88 % of 16 bytes or
/// fewer. Each short one is copied here by fixed-size moves rather than a `memcpy` call, whose
/// set-up costs more than such a copy (musl's `memcpy` most: BENCHMARKS.md, eleventh pass).
/// `VIGIL_PLAIN=json-pieces` writes every piece with `extend_from_slice` (src/tricks.rs).
pub fn write_json<T: Serialize>(out: &mut Vec<u8>, v: &T) -> Result<(), serde_json::Error> {
    if crate::tricks::on(crate::tricks::Trick::JsonPieces) {
        serde_json::to_writer(Pieces(out), v)
    } else {
        serde_json::to_writer(out, v)
    }
}

/// Pieces up to this long are copied eight bytes at a time and then byte by byte (fixed-size
/// moves, no call), longer ones by `memcpy`.
const SMALL_PIECE: usize = 64;

/// A `Vec<u8>` written to piece by piece (see [`write_json`]).
struct Pieces<'a>(&'a mut Vec<u8>);

impl std::io::Write for Pieces<'_> {
    #[inline]
    fn write(&mut self, piece: &[u8]) -> std::io::Result<usize> {
        self.write_all(piece)?;
        Ok(piece.len())
    }

    #[inline]
    fn write_all(&mut self, piece: &[u8]) -> std::io::Result<()> {
        if piece.len() <= SMALL_PIECE {
            self.0.reserve(piece.len());
            let mut words = piece.chunks_exact(8);
            for word in &mut words {
                if let Ok(word) = <&[u8; 8]>::try_from(word) {
                    self.0.extend_from_slice(word);
                }
            }
            for &byte in words.remainder() {
                self.0.push(byte);
            }
        } else {
            self.0.extend_from_slice(piece);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A reply value as JSON for the reply line.
pub fn to_json<T: Serialize>(v: &T) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::to_value(v)
}

/// docs/wire-reference.md is generated from these types: field lists and examples come from
/// serializing sample replies, so the document cannot drift from what vigil sends.
/// `VIGIL_UPDATE_WIRE_REFERENCE=1 cargo test --lib wire_reference` rewrites it.
#[cfg(test)]
mod reference {
    use std::fmt::Write as _;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use serde_json::{Value, json};

    use super::*;
    use crate::control::render::{self, Secrets, fixtures::*};

    const PATH: &str = "docs/wire-reference.md";

    fn type_name(v: &Value) -> &'static str {
        match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        }
    }

    /// Every field path seen in `v` with the JSON types seen there, in first-seen order.
    fn walk(v: &Value, path: &str, out: &mut Vec<(String, Vec<&'static str>)>) {
        let mut note = |path: &str, t: &'static str| match out.iter_mut().find(|(p, _)| p == path) {
            Some((_, types)) if !types.contains(&t) => types.push(t),
            Some(_) => {}
            None => out.push((path.to_string(), vec![t])),
        };
        if !path.is_empty() {
            note(path, type_name(v));
        }
        match v {
            // A map of names to values, not fields.
            Value::Object(_) if path.ends_with(".env") => {}
            Value::Object(m) => {
                for (k, child) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if path.is_empty() && k == "pod" && child.is_object() {
                        out.push((p, vec!["object (like `status`'s `pods[]`)"]));
                        continue;
                    }
                    if k == "init_containers" {
                        // Same fields as `containers`: listed once, under `containers[]`.
                        out.push((p, vec!["array (of objects like `containers[]`)"]));
                        for item in child.as_array().into_iter().flatten() {
                            walk(item, &format!("{path}.containers[]"), out);
                        }
                        continue;
                    }
                    walk(child, &p, out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    walk(item, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }

    fn section(out: &mut String, title: &str, intro: &str, value: &Value, example: bool) {
        let _ = writeln!(out, "## {title}\n\n{intro}\n");
        let mut fields = Vec::new();
        walk(value, "", &mut fields);
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        let _ = writeln!(out, "| field | JSON type |\n| --- | --- |");
        for (path, types) in fields {
            let _ = writeln!(out, "| `{path}` | {} |", types.join(" or "));
        }
        if example {
            let pretty = serde_json::to_string_pretty(value).unwrap();
            let _ = writeln!(out, "\nExample:\n\n```json\n{pretty}\n```\n");
        } else {
            out.push('\n');
        }
    }

    /// Sample replies with every optional field both present and absent somewhere, and every
    /// container state.
    fn status_sample(mono: Instant) -> StatusReply {
        let mut status = render::status(
            &[sample_pod(mono)],
            &observed(),
            &clock(mono),
            Secrets::Shown,
        );
        let pod = &mut status.pods[0];
        let app = &mut pod.containers[0];
        app.resources.memory_pressure_some_avg10 = Some(0.25);
        app.spec.working_dir = Some("/srv/app".into());
        app.spec.user = Some("app".into());
        app.spec.group = Some("app".into());
        app.spec.max_restarts = Some(10);
        app.spec.limits.memory_high = Some(16 << 20);
        app.spec.limits.swap_max = Some(0);
        app.spec.limits.pids_max = Some(64);
        app.spec.limits.cpu_weight = Some(100);
        app.spec.startup_probe = app.spec.liveness_probe.clone();
        app.spec.readiness_probe = app.spec.liveness_probe.clone();
        let started = sidecar_started(&pod.containers[1].state);
        let sidecar = &mut pod.containers[1];
        sidecar.spec.limits = Limits::default();
        sidecar.spec.liveness_probe = None;
        sidecar.resources.memory_max = None;
        sidecar.last_state.terminated = Some(Terminated {
            exit_code: 128,
            signal: None,
            reason: TerminationReason::StartError,
            message: "exec /usr/bin/sidecar: No such file or directory (os error 2)".into(),
            started_at: None,
            finished_at: started,
        });
        let mut init = pod.containers[1].clone();
        init.name = "migrate".into();
        init.pid = None;
        let finished = Timestamp(clock(mono).to_system(mono - Duration::from_secs(3500)));
        init.state = State::Terminated(Terminated {
            exit_code: 0,
            signal: None,
            reason: TerminationReason::Completed,
            message: String::new(),
            started_at: Some(pod.created_at),
            finished_at: finished,
        });
        pod.init_containers.push(init);
        status
    }

    fn sidecar_started(state: &State) -> Timestamp {
        match state {
            State::Running(r) => r.started_at,
            _ => panic!("the sample sidecar runs"),
        }
    }

    fn generate() -> String {
        let mono = Instant::now();
        let status = status_sample(mono);
        let events = render::events([&sample_event(mono)], &clock(mono));
        let describe = DescribeReply {
            pod: status.pods[0].clone(),
            events: events.events.clone(),
        };
        let mut out = String::from(
            "# vigil control socket: wire reference\n\n\
             Generated from `src/control/wire.rs` and `src/control/wire/request.rs` (the types \
             the client and the server both use) by the test `control::wire::reference`; do \
             not edit by hand. After changing a request or reply type run \
             `VIGIL_UPDATE_WIRE_REFERENCE=1 cargo test --lib wire_reference` and commit the \
             result. The rules (ids, limits, who may do what) are in docs/interface.md, §2.\n\n\
             Every reply is one line: `{\"id\": …, \"ok\": true, \"result\": {…}}`, a followed \
             event `{\"id\": …, \"ok\": true, \"event\": {…}}` (after the stream's first line \
             `{\"id\": …, \"ok\": true, \"history\": \"…\"}`), a chunk of followed output \
             `{\"id\": …, \"ok\": true, \"log\": \"…\", \"ring\": \"…\", \"next\": N}`, or an error \
             `{\"id\": …, \"ok\": false, \"error\": {\"kind\": …, \"message\": …}}`. Times are \
             RFC 3339 UTC with milliseconds. A field typed `… or null` is always present; the \
             client refuses a reply missing any field listed here. `state` holds exactly one of \
             `waiting`, `running`, `terminated`; `last_state` is `{}` before the first \
             termination. `spec.env` maps names to values; a peer that is not an admin gets \
             `\"***\"` for every value.\n\n",
        );
        requests(&mut out);
        let _ = writeln!(out, "## Error kinds\n\n| kind | meaning |\n| --- | --- |");
        for k in ErrorKind::ALL {
            let _ = writeln!(out, "| `{}` | {} |", k.as_str(), k.meaning());
        }
        out.push('\n');
        let j = |v: &dyn erased::Ser| v.json();
        section(
            &mut out,
            "`status`",
            "Every pod, or the one named by `pod`, in config order.",
            &j(&status),
            true,
        );
        section(
            &mut out,
            "`describe`",
            "The pod (as in `status`) and its own events (as in `events`), oldest first.",
            &j(&describe),
            false,
        );
        section(
            &mut out,
            "`events`",
            "Every event kept, oldest first; with `follow` the same objects come one per \
             `event` line, and `seq` only grows.",
            &j(&events),
            true,
        );
        section(
            &mut out,
            "`logs`",
            "The captured output (without `follow`); bytes that are not UTF-8 become U+FFFD.",
            &j(&LogsReply {
                pod: "web".into(),
                container: "app".into(),
                log: "listening on :8080\n".into(),
                dropped_bytes: 0,
            }),
            true,
        );
        section(
            &mut out,
            "`version`",
            "The supervisor's version, and whether the asking peer is an admin (may start, stop, restart, reload, shut down).",
            &j(&VersionReply {
                version: "0.1.0".into(),
                admin: Some(true),
            }),
            true,
        );
        section(
            &mut out,
            "`metrics`",
            "The metrics exposition (docs/metrics.md) in the format asked for (`\"format\": \
             \"prometheus\"` (default) or `\"openmetrics\"`), as `GET /metrics` serves it.",
            &j(&MetricsReply {
                content_type: crate::metrics::Format::Prometheus.content_type().into(),
                text: "# HELP vigil_build_info vigil's version; always 1.\n\
                       # TYPE vigil_build_info gauge\nvigil_build_info{version=\"0.1.0\"} 1\n"
                    .into(),
            }),
            true,
        );
        section(
            &mut out,
            "`health`",
            "Whether every pod judged — those named in `pods`, else every pod expected to \
             run — is Ready or Completed; each other one with its state and why.",
            &j(&HealthReply {
                healthy: false,
                ready: 3,
                completed: 1,
                unhealthy: vec![PodHealth {
                    pod: "web".into(),
                    state: HealthState::CrashLoopBackOff,
                    object: "web/app".into(),
                    message: "back-off 40s restarting failed container".into(),
                }],
            }),
            true,
        );
        section(
            &mut out,
            "`wait`",
            "Sent once every pod named meets `for` (`met`: true), or once `timeout_seconds` \
             have passed (`met`: false); each pod as it stood then.",
            &j(&WaitReply {
                met: false,
                condition: wait::WaitFor::Ready,
                pods: vec![WaitPod {
                    pod: "web".into(),
                    met: false,
                    state: HealthState::NotReady,
                    object: "web/app".into(),
                    message: "its readiness probe has not passed".into(),
                }],
            }),
            true,
        );
        section(
            &mut out,
            "`start`, `stop`, `restart`, `reload`, `shutdown`",
            "What was done, in one sentence.",
            &j(&MessageReply {
                message: "stopping web/app".into(),
                wait: None,
            }),
            true,
        );
        section(
            &mut out,
            "`start`, `stop`, `restart` with `wait_ms`",
            "Sent once the target is in the state asked for (`\"outcome\": \"reached\"`), \
             will not get there on its own (`\"failed\"`), or `wait_ms` passed \
             (`\"timed_out\"`); `why` says what happened or what it was still waiting for.",
            &j(&MessageReply {
                message: "restarting web/app".into(),
                wait: Some(WaitOutcome::TimedOut {
                    why: "timed out after 30s waiting for web/app to be ready (it runs; its \
                          readiness probe has not passed yet)"
                        .into(),
                }),
            }),
            true,
        );
        section(
            &mut out,
            "Errors",
            "The `error` of a refused request.",
            &json!({"kind": ErrorKind::NotFound, "message": "no pod named \"wbe\""}),
            true,
        );
        out.trim_end().to_string() + "\n"
    }

    /// Every command with every argument set, as the client sends it.
    fn request_samples() -> Vec<RequestCmd> {
        let pod = || "web".to_string();
        let container = || Some("app".to_string());
        vec![
            RequestCmd::Status { pod: Some(pod()) },
            RequestCmd::Describe { pod: pod() },
            RequestCmd::Events {
                follow: true,
                pod: Some(pod()),
                after: Some(812),
                history: Some("1795840966112396766".to_string()),
            },
            RequestCmd::Logs {
                pod: pod(),
                container: container(),
                follow: true,
                tail: Some(100),
                previous: false,
                timestamps: true,
                since_seconds: Some(300),
                since_time: Some("2026-11-23T13:40:47Z".to_string()),
                ring: Some("1795840966112396801".to_string()),
                offset: Some(40960),
            },
            RequestCmd::Start {
                pod: pod(),
                container: container(),
                ignore_dependencies: true,
            },
            RequestCmd::Stop {
                pod: pod(),
                container: container(),
            },
            RequestCmd::Restart {
                pod: pod(),
                container: container(),
                rolling: true,
                max_unavailable: Some(2),
            },
            RequestCmd::Reload,
            RequestCmd::Scale {
                pod: pod(),
                replicas: 5,
            },
            RequestCmd::Shutdown,
            RequestCmd::Version,
            RequestCmd::Upgrade {
                binary: Some("/usr/local/bin/vigil".to_string()),
                check: true,
            },
            RequestCmd::Metrics {
                format: crate::metrics::Format::OpenMetrics,
            },
            RequestCmd::Health {
                pods: vec![pod(), "db".to_string()],
            },
            RequestCmd::Wait {
                pods: vec![pod()],
                condition: wait::WaitFor::Ready,
                timeout_seconds: Some(request::Seconds(Duration::from_secs(30))),
            },
            RequestCmd::Trigger { pod: pod() },
        ]
    }

    /// Fields a sample carries (so the table lists them) that the server refuses beside another
    /// of the sample's fields: (command, field left out of the example, what the table says).
    const COMBINATIONS: &[(&str, &str, &str)] = &[
        (
            "start",
            "container",
            "not with `ignore_dependencies`, which starts the whole pod",
        ),
        ("logs", "since_time", "not with `since_seconds`"),
        (
            "restart",
            "container",
            "not with `rolling`, which restarts the replicas of a pod",
        ),
    ];

    /// Fields that go with another: a sample without the first is not a request the server
    /// takes unless the second goes too (command, field, the field that goes with it).
    const GO_WITH: &[(&str, &str, &str)] = &[
        ("events", "after", "history"),
        ("logs", "ring", "offset"),
        ("logs", "offset", "ring"),
    ];

    /// The request table, a row per command of `commands::DEFS` with the row's arguments;
    /// the samples check the row against the parser: every field a sample sets is an
    /// argument of the row, of the row's JSON type, and needed by the server exactly when the
    /// row says it is required (found by leaving it out of the example and asking the parser).
    fn requests(out: &mut String) {
        let _ = writeln!(
            out,
            "## Requests\n\n\
             One line each: `{{\"id\": …, \"cmd\": …, …arguments}}`. `id` (a number, a string \
             or null) is echoed in the reply. An argument set to `null` is the same as one left \
             out; a field the command does not take is refused (`bad_argument`). Booleans \
             default to `false`.\n\n\
             | `cmd` | arguments | example |\n| --- | --- | --- |"
        );
        let samples = request_samples();
        let names: Vec<&str> = samples.iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            crate::control::protocol::COMMANDS,
            "a sample per command"
        );
        for (def, cmd) in commands::DEFS.iter().zip(samples) {
            let fields = cmd.to_json();
            for name in fields.keys().filter(|k| *k != "cmd") {
                assert!(
                    def.args.iter().any(|a| a.name == name),
                    "{}: the sample's field {name:?} is no argument of the row",
                    def.name
                );
            }
            // A sample carries every field so that each is checked; the example line leaves
            // out what the server refuses in combination (a request the server refuses is no
            // example).
            let combination = COMBINATIONS.iter().find(|(c, ..)| *c == def.name);
            let mut example = fields.clone();
            if let Some((_, field, _)) = combination {
                example.remove(*field);
            }
            assert!(
                RequestCmd::from_fields(example.clone()).is_ok(),
                "the example of {} parses",
                def.name
            );
            let mut args = Vec::new();
            for arg in def.args {
                let value = fields.get(arg.name).unwrap_or_else(|| {
                    panic!("{}: the sample sets the row's {:?}", def.name, arg.name)
                });
                assert_eq!(
                    type_name(value),
                    arg.kind.json_type(),
                    "{}: {}",
                    def.name,
                    arg.name
                );
                let needed = example.contains_key(arg.name) && {
                    let mut without = example.clone();
                    without.remove(arg.name);
                    for (_, _, with) in GO_WITH
                        .iter()
                        .filter(|(c, f, _)| *c == def.name && *f == arg.name)
                    {
                        without.remove(*with);
                    }
                    RequestCmd::from_fields(without).is_err()
                };
                assert_eq!(
                    needed, arg.required,
                    "{}: whether {:?} is required",
                    def.name, arg.name
                );
                let note = match combination {
                    Some((_, field, note)) if *field == arg.name => format!("; {note}"),
                    _ => String::new(),
                };
                let kind = match arg.kind {
                    commands::ArgKind::Choice([first @ .., last]) => format!(
                        "{}: `{}` or `{last}`",
                        arg.kind.json_type(),
                        first.join("`, `")
                    ),
                    kind => kind.json_type().to_string(),
                };
                args.push(format!(
                    "`{}` ({kind}{}{note})",
                    arg.name,
                    if arg.required { ", required" } else { "" }
                ));
            }
            let line = Value::Object(example).to_string();
            let _ = writeln!(
                out,
                "| `{}` | {} | `{line}` |",
                def.name,
                if args.is_empty() {
                    "none".to_string()
                } else {
                    args.join(", ")
                }
            );
        }
        out.push('\n');
    }

    /// Serializing without naming each type (the sections take any reply).
    mod erased {
        pub trait Ser {
            fn json(&self) -> serde_json::Value;
        }
        impl<T: serde::Serialize> Ser for T {
            fn json(&self) -> serde_json::Value {
                serde_json::to_value(self).unwrap()
            }
        }
    }

    #[test]
    fn wire_reference_is_up_to_date() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(PATH);
        let want = generate();
        if std::env::var_os("VIGIL_UPDATE_WIRE_REFERENCE").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{PATH} is out of date with src/control/wire.rs: run \
             `VIGIL_UPDATE_WIRE_REFERENCE=1 cargo test --lib wire_reference` and commit it"
        );
    }

    #[test]
    fn the_samples_read_back_as_what_was_written() {
        let status = status_sample(Instant::now());
        let json = to_json(&status).unwrap();
        assert_eq!(serde_json::from_value::<StatusReply>(json).unwrap(), status);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_written_piece_by_piece_is_byte_for_byte_serde_json_s() {
        let long = "x".repeat(40);
        let value = serde_json::json!({
            "": "",
            "a": 1,
            "sixteen bytes ok": "exactly sixteen!",
            "seventeen bytes..": [u64::MAX, -1, 0.5, null, true],
            "escapes": "tab\tquote\"nul\u{0}é🦀",
            "long": long,
            "nested": {"k": [{"deeper": [long, "short"]}]},
        });
        let mut out = b"kept:".to_vec();
        write_json(&mut out, &value).unwrap();
        let mut expected = b"kept:".to_vec();
        expected.extend(serde_json::to_vec(&value).unwrap());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            String::from_utf8(expected).unwrap()
        );
    }

    #[test]
    fn error_kinds_serialize_as_their_documented_names() {
        for k in ErrorKind::ALL {
            let json = serde_json::to_value(k).unwrap();
            assert_eq!(json, serde_json::Value::from(k.as_str()));
            assert_eq!(serde_json::from_value::<ErrorKind>(json).unwrap(), k);
        }
    }

    #[test]
    fn a_reload_refused_during_shutdown_is_shutting_down() {
        let e = ReloadError::Refused(crate::core::CommandError {
            kind: CommandErrorKind::ShuttingDown,
            message: "the supervisor is shutting down".into(),
        });
        assert_eq!(ErrorKind::from(&e), ErrorKind::ShuttingDown);
        let e = ReloadError::InvalidConfig("vigil.toml:3:1: unknown key".into());
        assert_eq!(ErrorKind::from(&e), ErrorKind::InvalidConfig);
    }
}
