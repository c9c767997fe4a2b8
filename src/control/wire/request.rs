//! The request side of the wire: one `Serialize`/`Deserialize` enum of commands and their
//! arguments, sent by the client and read by the server (docs/interface.md §2).
//!
//! A request line is `{"id": …, "cmd": "<command>", …arguments}`; the envelope (`id`, and that
//! `cmd` is a string) is checked by `protocol::parse_request`, which then hands the rest of the
//! object to [`RequestCmd::from_fields`]. Argument errors name the field ([`ArgError`]): a
//! serde error would say "invalid type: integer `5`, expected a string" and not where.
//!
//! Owns the JSON shape of every request. Must not: know how a request is answered, or accept a
//! field it does not know (a typo such as `"contaner"` must not silently widen an operator
//! action to a whole pod).
//!
//! A new command: its row in `commands::DEFS` (name, access, arguments, help, rendering), a
//! variant here (the row's arguments as fields, each read by one of the [`arg`] functions)
//! with its arm in `row()`, and a sample in the wire reference's `request_samples`; tests
//! fail when the variant's fields and the row's arguments disagree.

use serde::de::{self, Deserializer, IntoDeserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::commands::{self, Access, CommandDef};

/// A request's command and arguments. `null` for an optional field is the same as leaving it
/// out; an unknown field is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase", deny_unknown_fields)]
pub enum RequestCmd {
    /// All pods, or one.
    Status {
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::opt_pod"
        )]
        pod: Option<String>,
    },
    Describe {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
    },
    Events {
        #[serde(default, deserialize_with = "arg::follow")]
        follow: bool,
        /// Only events about this pod (its own and its containers').
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::opt_pod"
        )]
        pod: Option<String>,
        /// Only events with a `seq` after this one (of `history`, else of the current one).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::after"
        )]
        after: Option<u64>,
        /// The event history `after` belongs to: the `history` a stream's first line gave
        /// (docs/interface.md §2.4); needs `after`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::history"
        )]
        history: Option<String>,
    },
    Logs {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::container"
        )]
        container: Option<String>,
        #[serde(default, deserialize_with = "arg::follow")]
        follow: bool,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::tail"
        )]
        tail: Option<usize>,
        #[serde(default, deserialize_with = "arg::previous")]
        previous: bool,
        /// Each line prefixed with when it was read (the API's `timestamps`).
        #[serde(
            default,
            skip_serializing_if = "std::ops::Not::not",
            deserialize_with = "arg::timestamps"
        )]
        timestamps: bool,
        /// Only lines read in the last N seconds, N ≥ 1 (the API's `sinceSeconds`).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::since_seconds"
        )]
        since_seconds: Option<u64>,
        /// Only lines read at or after this RFC 3339 time (the API's `sinceTime`); at most one
        /// of `since_seconds` and `since_time`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::since_time"
        )]
        since_time: Option<String>,
        /// Resume a follow: the log ring a stream's lines named (`ring`) …
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::ring"
        )]
        ring: Option<String>,
        /// … and the ring offset of the first byte not received yet (their `next`); both
        /// or neither.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::offset"
        )]
        offset: Option<u64>,
    },
    Start {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::container"
        )]
        container: Option<String>,
        /// Start the whole pod now without waiting for its `depends_on` (behaviour.md §8).
        #[serde(
            default,
            skip_serializing_if = "std::ops::Not::not",
            deserialize_with = "arg::ignore_dependencies"
        )]
        ignore_dependencies: bool,
    },
    Stop {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::container"
        )]
        container: Option<String>,
    },
    Restart {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::container"
        )]
        container: Option<String>,
        /// The replicas of the pod with replicas `pod`, a batch at a time, each after the
        /// previous one is Ready (docs/behaviour.md §14.2); not with `container`.
        #[serde(
            default,
            skip_serializing_if = "std::ops::Not::not",
            deserialize_with = "arg::rolling"
        )]
        rolling: bool,
        /// With `rolling`: replicas replaced at once (1 to 1000), over the pod's own
        /// `max_unavailable`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::max_unavailable"
        )]
        max_unavailable: Option<u32>,
    },
    Reload,
    /// `vigil scale POD N`: the pod with replicas runs `replicas` of them from now on (new
    /// ones start, the highest-numbered stop; the others are left alone).
    Scale {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
        #[serde(deserialize_with = "arg::replicas")]
        replicas: u32,
    },
    Shutdown,
    Version,
    /// Re-execute vigil in place (`binary`, else the path it runs from), keeping every
    /// container; `check` only says whether it would work.
    Upgrade {
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::binary"
        )]
        binary: Option<String>,
        #[serde(default, deserialize_with = "arg::check")]
        check: bool,
    },
    /// The metrics exposition (docs/metrics.md), in the Prometheus text format or OpenMetrics.
    Metrics {
        #[serde(default, deserialize_with = "arg::format")]
        format: crate::metrics::Format,
    },
    /// Whether the pods named (default: every pod expected to run) are Ready or Completed
    /// (docs/behaviour.md §5.6).
    Health {
        #[serde(
            default,
            skip_serializing_if = "Vec::is_empty",
            deserialize_with = "arg::pods"
        )]
        pods: Vec<String>,
    },
    /// A new run of a pod at rest now, as a trigger of its schedule would start it (`kubectl
    /// create job --from=cronjob/…`; docs/behaviour.md §6.6); not a trigger of the schedule.
    Trigger {
        #[serde(deserialize_with = "arg::pod")]
        pod: String,
    },
    /// Answered once every pod named meets `for` (`vigil wait`, docs/behaviour.md §5.6), or
    /// once `timeout_seconds` (default 30) have passed; decided by the server at each loop
    /// turn, never by polling.
    Wait {
        #[serde(deserialize_with = "arg::some_pods")]
        pods: Vec<String>,
        #[serde(rename = "for", deserialize_with = "arg::wait_for")]
        condition: super::wait::WaitFor,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "arg::timeout_seconds"
        )]
        timeout_seconds: Option<Seconds>,
    },
}

/// A duration on the wire as a number of seconds (fractions allowed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub std::time::Duration);

impl Serialize for Seconds {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0.as_secs_f64())
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Seconds, D::Error> {
        let n = f64::deserialize(d)?;
        std::time::Duration::try_from_secs_f64(n)
            .map(Seconds)
            .map_err(de::Error::custom)
    }
}

impl RequestCmd {
    /// Who may send this request: its command's class in [`commands::DEFS`], raised to
    /// [`Access::Root`] by `upgrade`'s `binary`.
    pub fn access(&self) -> Access {
        match self {
            RequestCmd::Upgrade {
                binary: Some(_), ..
            } => Access::Root,
            _ => self.def().access,
        }
    }

    /// Whether the command changes something (and so needs an admin peer).
    pub fn is_mutating(&self) -> bool {
        self.access() >= Access::Admin
    }

    /// The index of the command's row in [`commands::DEFS`] (tables in the rows' order, such
    /// as the server's handlers, are indexed by it).
    pub fn row(&self) -> usize {
        use commands::row_of;
        match self {
            RequestCmd::Status { .. } => const { row_of(&commands::STATUS) },
            RequestCmd::Describe { .. } => const { row_of(&commands::DESCRIBE) },
            RequestCmd::Events { .. } => const { row_of(&commands::EVENTS) },
            RequestCmd::Logs { .. } => const { row_of(&commands::LOGS) },
            RequestCmd::Start { .. } => const { row_of(&commands::START) },
            RequestCmd::Stop { .. } => const { row_of(&commands::STOP) },
            RequestCmd::Restart { .. } => const { row_of(&commands::RESTART) },
            RequestCmd::Reload => const { row_of(&commands::RELOAD) },
            RequestCmd::Scale { .. } => const { row_of(&commands::SCALE) },
            RequestCmd::Shutdown => const { row_of(&commands::SHUTDOWN) },
            RequestCmd::Version => const { row_of(&commands::VERSION) },
            RequestCmd::Upgrade { .. } => const { row_of(&commands::UPGRADE) },
            RequestCmd::Metrics { .. } => const { row_of(&commands::METRICS) },
            RequestCmd::Health { .. } => const { row_of(&commands::HEALTH) },
            RequestCmd::Wait { .. } => const { row_of(&commands::WAIT) },
            RequestCmd::Trigger { .. } => const { row_of(&commands::TRIGGER) },
        }
    }

    /// The command's row in [`commands::DEFS`].
    pub fn def(&self) -> &'static CommandDef {
        // In range: `row_of` returns an index of `DEFS` or fails the build.
        &commands::DEFS[self.row()]
    }

    /// The wire name (`"status"`).
    pub fn name(&self) -> &'static str {
        self.def().name
    }

    /// The request as a JSON object (what the client sends), without `id`.
    pub fn to_json(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            // A tagged enum of strings, numbers and booleans always serializes to an object.
            other => unreachable!("a request serialized to {other:?}"),
        }
    }

    /// Reads a request object's fields (`cmd` and the arguments, without `id`).
    pub fn from_fields(fields: Map<String, Value>) -> Result<RequestCmd, ArgError> {
        // A command without arguments is a unit variant, which serde lets take any field:
        // refuse them here as every other command does.
        let extra = fields.keys().find(|k| *k != "cmd").cloned();
        let de = de::value::MapDeserializer::new(fields.into_iter().map(|(k, v)| (k, Json(v))));
        let cmd = RequestCmd::deserialize(de)?;
        match (!cmd.def().args.is_empty(), extra) {
            (false, Some(field)) => Err(ArgError::UnknownField(field)),
            _ => match cmd {
                RequestCmd::Logs {
                    since_seconds: Some(_),
                    since_time: Some(_),
                    ..
                } => Err(ArgError::BadValue(
                    "at most one of \"since_seconds\" and \"since_time\" may be given".to_string(),
                )),
                RequestCmd::Logs { ring, offset, .. } if ring.is_some() != offset.is_some() => {
                    Err(ArgError::BadValue(
                        "\"ring\" and \"offset\" go together: give both or neither".to_string(),
                    ))
                }
                RequestCmd::Events {
                    after: None,
                    history: Some(_),
                    ..
                } => Err(ArgError::BadValue(
                    "\"history\" needs \"after\" (the last seq seen of it)".to_string(),
                )),
                cmd => Ok(cmd),
            },
        }
    }

    /// A `logs` request's `since_time` as Unix nanoseconds (validated when it was read).
    pub fn since_time_nanos(text: &str) -> Option<i64> {
        let t: jiff::Timestamp = text.parse().ok()?;
        i64::try_from(t.as_nanosecond()).ok()
    }
}

/// Pod names one request may list (`health`, `wait`): a request line is at most 64 KiB anyway.
pub const MAX_PODS: usize = 1024;

/// Why a request's fields were refused; `protocol` turns it into the error reply, naming the
/// command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// `cmd` names no command.
    #[error("unknown command {0:?}")]
    UnknownCommand(String),
    /// A required field is absent (or `null`).
    #[error("missing field {0:?}")]
    MissingField(&'static str),
    /// A field the command does not take.
    #[error("unknown field {0:?}")]
    UnknownField(String),
    /// A field's value is wrong; the message names the field.
    #[error("{0}")]
    BadValue(String),
}

impl de::Error for ArgError {
    fn custom<T: std::fmt::Display>(msg: T) -> ArgError {
        ArgError::BadValue(msg.to_string())
    }

    fn missing_field(field: &'static str) -> ArgError {
        ArgError::MissingField(field)
    }

    fn unknown_field(field: &str, _expected: &'static [&'static str]) -> ArgError {
        ArgError::UnknownField(field.to_string())
    }

    fn unknown_variant(variant: &str, _expected: &'static [&'static str]) -> ArgError {
        ArgError::UnknownCommand(variant.to_string())
    }
}

/// A JSON value as a deserializer whose errors are [`ArgError`]s, so that serde's own
/// missing / unknown field and unknown variant reports arrive typed.
struct Json(Value);

impl<'de> Deserializer<'de> for Json {
    type Error = ArgError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ArgError> {
        // Scalars are visited here, so that what the visitor refuses (an unknown `cmd`) comes
        // back as an `ArgError`; numbers and containers go through serde_json.
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(b),
            Value::String(s) => visitor.visit_string(s),
            other => other
                .deserialize_any(visitor)
                .map_err(|e| ArgError::BadValue(e.to_string())),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl IntoDeserializer<'_, ArgError> for Json {
    type Deserializer = Json;

    fn into_deserializer(self) -> Json {
        self
    }
}

/// The JSON type of `v`, for messages.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The argument readers: one function per field, so each error names its field.
mod arg {
    use serde::de::{Deserialize, Deserializer, Error};
    use serde_json::Value;

    use super::type_name;

    /// A non-empty string; `None` for `null` (serde's default covers an absent field).
    fn opt_text<'de, D: Deserializer<'de>>(
        d: D,
        field: &'static str,
    ) -> Result<Option<String>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::String(s) if s.is_empty() => Err(D::Error::custom(format!(
                "field \"{field}\" must not be empty"
            ))),
            Value::String(s) => Ok(Some(s)),
            other => Err(D::Error::custom(format!(
                "field \"{field}\" must be a string, got {}",
                type_name(&other)
            ))),
        }
    }

    /// A required non-empty string: `null` counts as missing.
    fn text<'de, D: Deserializer<'de>>(d: D, field: &'static str) -> Result<String, D::Error> {
        opt_text(d, field)?.ok_or_else(|| D::Error::missing_field(field))
    }

    /// A boolean; `null` is false.
    fn flag<'de, D: Deserializer<'de>>(d: D, field: &'static str) -> Result<bool, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(false),
            Value::Bool(b) => Ok(b),
            other => Err(D::Error::custom(format!(
                "field \"{field}\" must be a boolean, got {}",
                type_name(&other)
            ))),
        }
    }

    /// A non-negative integer; `null` is none.
    fn count<'de, D: Deserializer<'de>>(
        d: D,
        field: &'static str,
    ) -> Result<Option<usize>, D::Error> {
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::Number(n) => match n.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => Ok(Some(n)),
                None => Err(D::Error::custom(format!(
                    "field \"{field}\" must be a non-negative integer, got {n}"
                ))),
            },
            other => Err(D::Error::custom(format!(
                "field \"{field}\" must be a non-negative integer, got {}",
                type_name(&other)
            ))),
        }
    }

    pub fn pod<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        text(d, "pod")
    }

    pub fn opt_pod<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        opt_text(d, "pod")
    }

    /// [`pods`], at least one.
    pub fn some_pods<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let pods = pods(d)?;
        if pods.is_empty() {
            return Err(D::Error::custom(
                "field \"pods\" must name at least one pod",
            ));
        }
        Ok(pods)
    }

    /// `"ready"`, `"completed"` or `"stopped"`.
    pub fn wait_for<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<super::super::wait::WaitFor, D::Error> {
        use super::super::wait::WaitFor;
        match text(d, "for")?.as_str() {
            "ready" => Ok(WaitFor::Ready),
            "completed" => Ok(WaitFor::Completed),
            "stopped" => Ok(WaitFor::Stopped),
            other => Err(D::Error::custom(format!(
                "field \"for\" must be \"ready\", \"completed\" or \"stopped\", got {}",
                Value::from(other)
            ))),
        }
    }

    /// A number of seconds ≥ 0, at most ten years (as every duration of the config); `null`
    /// is none.
    pub fn timeout_seconds<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<super::Seconds>, D::Error> {
        const MAX: f64 = 315_360_000.0;
        match Value::deserialize(d)? {
            Value::Null => Ok(None),
            Value::Number(n) => match n.as_f64() {
                Some(x) if (0.0..=MAX).contains(&x) => {
                    Ok(Some(super::Seconds(std::time::Duration::from_secs_f64(x))))
                }
                _ => Err(D::Error::custom(format!(
                    "field \"timeout_seconds\" must be a number of seconds from 0 to {MAX}, got {n}"
                ))),
            },
            other => Err(D::Error::custom(format!(
                "field \"timeout_seconds\" must be a number, got {}",
                type_name(&other)
            ))),
        }
    }

    /// An array of non-empty pod names, at most [`super::MAX_PODS`]; `null` is none.
    pub fn pods<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        let bad = |what: &str| D::Error::custom(format!("field \"pods\" must be {what}"));
        match Value::deserialize(d)? {
            Value::Null => Ok(Vec::new()),
            Value::Array(items) if items.len() > super::MAX_PODS => Err(bad(&format!(
                "at most {} names, got {}",
                super::MAX_PODS,
                items.len()
            ))),
            Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::String(s) if !s.is_empty() => Ok(s),
                    other => Err(bad(&format!(
                        "an array of non-empty strings, got {} in it",
                        match &other {
                            Value::String(_) => "an empty string",
                            v => type_name(v),
                        }
                    ))),
                })
                .collect(),
            other => Err(bad(&format!(
                "an array of strings, got {}",
                type_name(&other)
            ))),
        }
    }

    pub fn container<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        opt_text(d, "container")
    }

    pub fn follow<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "follow")
    }

    pub fn previous<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "previous")
    }

    pub fn binary<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        opt_text(d, "binary")
    }

    pub fn rolling<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "rolling")
    }

    /// `restart`'s batch size: 1 to 1000 (a pod's replicas at most).
    pub fn max_unavailable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        match count(d, "max_unavailable")? {
            None => Ok(None),
            Some(n) if (1..=crate::config::spec::MAX_REPLICAS as usize).contains(&n) => {
                Ok(u32::try_from(n).ok())
            }
            Some(n) => Err(D::Error::custom(format!(
                "field \"max_unavailable\" must be between 1 and {}, got {n}",
                crate::config::spec::MAX_REPLICAS
            ))),
        }
    }

    pub fn check<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "check")
    }

    pub fn tail<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        count(d, "tail")
    }

    pub fn timestamps<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "timestamps")
    }

    /// `scale`'s count: required, and within what a `u32` holds (the range is the config's
    /// rule, checked where it is applied).
    pub fn replicas<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let n = count(d, "replicas")?.ok_or_else(|| D::Error::missing_field("replicas"))?;
        u32::try_from(n).map_err(|_| {
            D::Error::custom(format!(
                "field \"replicas\" must be at most {}, got {n}",
                u32::MAX
            ))
        })
    }

    /// An id the supervisor handed out as a string of decimal digits (a `history`, a `ring`).
    fn id_text<'de, D: Deserializer<'de>>(
        d: D,
        field: &'static str,
    ) -> Result<Option<String>, D::Error> {
        match opt_text(d, field)? {
            Some(s) if !s.bytes().all(|b| b.is_ascii_digit()) || s.parse::<u64>().is_err() => {
                Err(D::Error::custom(format!(
                    "field \"{field}\" must be an id as a stream gave it (decimal digits), got {}",
                    Value::from(s)
                )))
            }
            other => Ok(other),
        }
    }

    pub fn after<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(count(d, "after")?.map(|n| n as u64))
    }

    pub fn history<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        id_text(d, "history")
    }

    pub fn ring<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        id_text(d, "ring")
    }

    pub fn offset<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(count(d, "offset")?.map(|n| n as u64))
    }

    pub fn ignore_dependencies<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "ignore_dependencies")
    }

    pub fn since_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match count(d, "since_seconds")? {
            Some(0) => Err(D::Error::custom(
                "field \"since_seconds\" must be greater than 0",
            )),
            n => Ok(n.map(|n| n as u64)),
        }
    }

    pub fn since_time<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
        let Some(text) = opt_text(d, "since_time")? else {
            return Ok(None);
        };
        match super::RequestCmd::since_time_nanos(&text) {
            Some(_) => Ok(Some(text)),
            None => Err(D::Error::custom(format!(
                "field \"since_time\" must be an RFC 3339 time such as 2026-11-23T13:40:47Z, \
                 got {}",
                Value::from(text)
            ))),
        }
    }

    /// `"prometheus"` (also for `null`) or `"openmetrics"`.
    pub fn format<'de, D: Deserializer<'de>>(d: D) -> Result<crate::metrics::Format, D::Error> {
        use crate::metrics::Format;
        match opt_text(d, "format")?.as_deref() {
            None | Some("prometheus") => Ok(Format::Prometheus),
            Some("openmetrics") => Ok(Format::OpenMetrics),
            Some(other) => Err(D::Error::custom(format!(
                "field \"format\" must be \"prometheus\" or \"openmetrics\", got {}",
                Value::from(other)
            ))),
        }
    }
}
