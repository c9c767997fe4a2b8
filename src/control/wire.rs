//! The control socket's reply types: one set of `Serialize`/`Deserialize` structs that the
//! server writes and the client reads (README, "Control socket" and "Status JSON").
//!
//! Owns the exact JSON shape of every reply. It must not know how a snapshot is taken or how a
//! reply is shown: `render` builds these from the core's snapshot (server side) and `format`
//! turns them into tables and text (client side). A field renamed here changes both ends at
//! once; a reply missing a field the client needs fails to deserialize instead of showing "".

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::time;
use crate::config::spec::{ProbeKind, RestartPolicy};
use crate::core::{
    CommandErrorKind, ConditionType, EventType, Phase, ProbeResultState, ReloadError,
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
});
wire_names!(ProbeKind {
    Startup => "startup",
    Liveness => "liveness",
    Readiness => "readiness",
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

/// One pod (README, "Status JSON").
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
    /// Most recent last.
    pub recent: Vec<ProbeAttempt>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeAttempt {
    pub time: Timestamp,
    pub duration_ms: f64,
    pub success: bool,
    pub message: String,
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
}

/// `start`, `stop`, `restart`, `reload`, `shutdown`: what was done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageReply {
    pub message: String,
}

/// The `error` of a refused request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub message: String,
}

/// One reply line as the client reads it: `ok` with exactly one of `result` (the answer),
/// `event` (a followed event) or `log` (a chunk of followed output); or not `ok` with `error`.
/// `result` stays JSON until the client knows which reply type to expect.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ReplyLine {
    #[serde(default)]
    pub id: serde_json::Value,
    pub ok: bool,
    #[serde(default)]
    pub result: Option<serde_json::Value>,
    #[serde(default)]
    pub event: Option<Event>,
    #[serde(default)]
    pub log: Option<String>,
    #[serde(default)]
    pub error: Option<ErrorBody>,
}

/// A reply value as JSON for the reply line.
pub fn to_json<T: Serialize>(v: &T) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::to_value(v)
}

#[cfg(test)]
mod tests {
    use super::*;

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
