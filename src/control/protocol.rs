//! The control socket's wire format: JSON lines (docs/interface.md §2).
//!
//! Owns request parsing and reply building, as pure functions on bytes and strings. It must not
//! touch sockets, the core or the clock: the server splits lines and the runtime decides the
//! answers. Every reply is exactly one `\n`-terminated line; `serde_json` escapes newlines inside
//! strings, so a reply can never be split.
//!
//! Requests: `{"id": <number|string|null>, "cmd": "<command>", ...arguments}`. The `id` is echoed
//! in every reply to that request (absent means `null`). Unknown fields are refused so a typo
//! (`"contaner"`) is reported instead of silently widening an operator action to a whole pod.

use serde_json::{Map, Value, json};

use super::wire::ErrorKind;

/// Longest request line accepted, newline excluded.
pub const MAX_LINE: usize = 64 * 1024;

/// Every command name, for messages.
pub const COMMANDS: [&str; 10] = [
    "status", "describe", "events", "logs", "start", "stop", "restart", "reload", "shutdown",
    "version",
];

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Echoed back: a number, a string or null.
    pub id: Value,
    pub cmd: RequestCmd,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestCmd {
    /// All pods, or one.
    Status {
        pod: Option<String>,
    },
    Describe {
        pod: String,
    },
    Events {
        follow: bool,
    },
    Logs {
        pod: String,
        container: Option<String>,
        follow: bool,
        tail: Option<usize>,
        previous: bool,
    },
    Start {
        pod: String,
        container: Option<String>,
    },
    Stop {
        pod: String,
        container: Option<String>,
    },
    Restart {
        pod: String,
        container: Option<String>,
    },
    Reload,
    Shutdown,
    Version,
}

impl RequestCmd {
    /// Whether the command changes something (and so needs an admin peer).
    pub fn is_mutating(&self) -> bool {
        matches!(
            self,
            RequestCmd::Start { .. }
                | RequestCmd::Stop { .. }
                | RequestCmd::Restart { .. }
                | RequestCmd::Reload
                | RequestCmd::Shutdown
        )
    }

    /// The wire name (`"status"`).
    pub fn name(&self) -> &'static str {
        match self {
            RequestCmd::Status { .. } => "status",
            RequestCmd::Describe { .. } => "describe",
            RequestCmd::Events { .. } => "events",
            RequestCmd::Logs { .. } => "logs",
            RequestCmd::Start { .. } => "start",
            RequestCmd::Stop { .. } => "stop",
            RequestCmd::Restart { .. } => "restart",
            RequestCmd::Reload => "reload",
            RequestCmd::Shutdown => "shutdown",
            RequestCmd::Version => "version",
        }
    }

    /// The request as a JSON object (what the client sends), without `id`.
    pub fn to_json(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("cmd".into(), Value::from(self.name()));
        let target = |m: &mut Map<String, Value>, pod: &str, container: &Option<String>| {
            m.insert("pod".into(), Value::from(pod));
            if let Some(c) = container {
                m.insert("container".into(), Value::from(c.as_str()));
            }
        };
        match self {
            RequestCmd::Status { pod } => {
                if let Some(p) = pod {
                    m.insert("pod".into(), Value::from(p.as_str()));
                }
            }
            RequestCmd::Describe { pod } => {
                m.insert("pod".into(), Value::from(pod.as_str()));
            }
            RequestCmd::Events { follow } => {
                m.insert("follow".into(), Value::from(*follow));
            }
            RequestCmd::Logs {
                pod,
                container,
                follow,
                tail,
                previous,
            } => {
                target(&mut m, pod, container);
                m.insert("follow".into(), Value::from(*follow));
                if let Some(n) = tail {
                    m.insert("tail".into(), Value::from(*n));
                }
                m.insert("previous".into(), Value::from(*previous));
            }
            RequestCmd::Start { pod, container }
            | RequestCmd::Stop { pod, container }
            | RequestCmd::Restart { pod, container } => target(&mut m, pod, container),
            RequestCmd::Reload | RequestCmd::Shutdown | RequestCmd::Version => {}
        }
        m
    }
}

/// A request that could not be parsed; answered with `reply_err(id, kind, message)`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ProtoError {
    /// The request's id if it could be read, else null.
    pub id: Value,
    /// One of the protocol's own kinds: bad request, unknown command, bad argument, too large.
    pub kind: ErrorKind,
    pub message: String,
}

impl ProtoError {
    fn new(id: &Value, kind: ErrorKind, message: impl Into<String>) -> ProtoError {
        ProtoError {
            id: id.clone(),
            kind,
            message: message.into(),
        }
    }

    /// The error reply line for this error.
    pub fn reply(&self) -> String {
        reply_err(&self.id, self.kind, &self.message)
    }

    /// The error for a line longer than [`MAX_LINE`].
    pub fn too_large(len: usize) -> ProtoError {
        ProtoError {
            id: Value::Null,
            kind: ErrorKind::TooLarge,
            message: format!(
                "request line too large: {len} bytes or more without a newline (limit {MAX_LINE})"
            ),
        }
    }
}

/// Parses one request line (without or with its trailing `\n` / `\r\n`).
pub fn parse_request(line: &[u8]) -> Result<Request, ProtoError> {
    let null = Value::Null;
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_LINE {
        return Err(ProtoError::too_large(line.len()));
    }
    let text = std::str::from_utf8(line).map_err(|e| {
        ProtoError::new(
            &null,
            ErrorKind::BadRequest,
            format!(
                "request is not UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ProtoError::new(
            &null,
            ErrorKind::BadRequest,
            format!(
                "malformed JSON at column {}: {}",
                e.column(),
                strip_position(&e)
            ),
        )
    })?;
    let Value::Object(mut obj) = value else {
        return Err(ProtoError::new(
            &null,
            ErrorKind::BadRequest,
            format!("request must be a JSON object, got {}", type_name(&value)),
        ));
    };
    let id = match obj.remove("id") {
        None => Value::Null,
        Some(v @ (Value::Null | Value::Number(_) | Value::String(_))) => v,
        Some(other) => {
            return Err(ProtoError::new(
                &null,
                ErrorKind::BadRequest,
                format!(
                    "field \"id\" must be a number, a string or null, got {}",
                    type_name(&other)
                ),
            ));
        }
    };
    let cmd = match obj.remove("cmd") {
        Some(Value::String(s)) => s,
        None => {
            return Err(ProtoError::new(
                &id,
                ErrorKind::BadRequest,
                "missing field \"cmd\"",
            ));
        }
        Some(other) => {
            return Err(ProtoError::new(
                &id,
                ErrorKind::BadRequest,
                format!("field \"cmd\" must be a string, got {}", type_name(&other)),
            ));
        }
    };
    let mut args = Args {
        id: &id,
        cmd: &cmd,
        obj,
    };
    let parsed = match cmd.as_str() {
        "status" => RequestCmd::Status {
            pod: args.opt_str("pod")?,
        },
        "describe" => RequestCmd::Describe {
            pod: args.req_str("pod")?,
        },
        "events" => RequestCmd::Events {
            follow: args.bool("follow")?,
        },
        "logs" => RequestCmd::Logs {
            pod: args.req_str("pod")?,
            container: args.opt_str("container")?,
            follow: args.bool("follow")?,
            tail: args.opt_usize("tail")?,
            previous: args.bool("previous")?,
        },
        "start" | "stop" | "restart" => {
            let pod = args.req_str("pod")?;
            let container = args.opt_str("container")?;
            match cmd.as_str() {
                "start" => RequestCmd::Start { pod, container },
                "stop" => RequestCmd::Stop { pod, container },
                _ => RequestCmd::Restart { pod, container },
            }
        }
        "reload" => RequestCmd::Reload,
        "shutdown" => RequestCmd::Shutdown,
        "version" => RequestCmd::Version,
        other => {
            return Err(ProtoError::new(
                &id,
                ErrorKind::UnknownCommand,
                format!(
                    "unknown command {}; known commands: {}",
                    Value::from(other),
                    COMMANDS.join(", ")
                ),
            ));
        }
    };
    args.finish()?;
    Ok(Request { id, cmd: parsed })
}

/// serde_json's message ends with " at line L column C"; the column is reported separately.
fn strip_position(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A request's arguments, consumed field by field; leftovers are errors.
struct Args<'a> {
    id: &'a Value,
    cmd: &'a str,
    obj: Map<String, Value>,
}

impl Args<'_> {
    fn bad(&self, message: String) -> ProtoError {
        ProtoError::new(self.id, ErrorKind::BadArgument, message)
    }

    fn opt_str(&mut self, field: &str) -> Result<Option<String>, ProtoError> {
        match self.obj.remove(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => {
                Err(self.bad(format!("field \"{field}\" must not be empty")))
            }
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.bad(format!(
                "field \"{field}\" must be a string, got {}",
                type_name(&other)
            ))),
        }
    }

    fn req_str(&mut self, field: &str) -> Result<String, ProtoError> {
        match self.opt_str(field)? {
            Some(s) => Ok(s),
            None => Err(self.bad(format!("command \"{}\" needs field \"{field}\"", self.cmd))),
        }
    }

    fn bool(&mut self, field: &str) -> Result<bool, ProtoError> {
        match self.obj.remove(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(b),
            Some(other) => Err(self.bad(format!(
                "field \"{field}\" must be a boolean, got {}",
                type_name(&other)
            ))),
        }
    }

    fn opt_usize(&mut self, field: &str) -> Result<Option<usize>, ProtoError> {
        match self.obj.remove(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => Ok(Some(n)),
                None => Err(self.bad(format!(
                    "field \"{field}\" must be a non-negative integer, got {n}"
                ))),
            },
            Some(other) => Err(self.bad(format!(
                "field \"{field}\" must be a non-negative integer, got {}",
                type_name(&other)
            ))),
        }
    }

    fn finish(self) -> Result<(), ProtoError> {
        match self.obj.keys().next() {
            None => Ok(()),
            Some(k) => Err(self.bad(format!(
                "unknown field {} for command \"{}\"",
                Value::from(k.as_str()),
                self.cmd
            ))),
        }
    }
}

fn line(v: Value) -> String {
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// `{"id": …, "ok": true, "result": …}\n`.
pub fn reply_ok(id: &Value, result: Value) -> String {
    line(json!({"id": id, "ok": true, "result": result}))
}

/// `{"id": …, "ok": false, "error": {"kind": …, "message": …}}\n`.
pub fn reply_err(id: &Value, kind: ErrorKind, message: &str) -> String {
    line(json!({"id": id, "ok": false, "error": {"kind": kind, "message": message}}))
}

/// One followed event: `{"id": …, "ok": true, "event": {…}}\n`.
pub fn reply_event(id: &Value, event: Value) -> String {
    line(json!({"id": id, "ok": true, "event": event}))
}

/// One chunk of followed log output: `{"id": …, "ok": true, "log": "…"}\n`. Invalid UTF-8 is
/// replaced (U+FFFD); callers should cut chunks at line ends so characters are not split.
pub fn reply_log(id: &Value, chunk: &[u8]) -> String {
    line(json!({"id": id, "ok": true, "log": String::from_utf8_lossy(chunk)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Request, ProtoError> {
        parse_request(s.as_bytes())
    }

    fn err(s: &str) -> ProtoError {
        parse(s).expect_err(s)
    }

    #[test]
    fn parses_every_command() {
        let cases: Vec<(&str, RequestCmd)> = vec![
            (r#"{"cmd":"status"}"#, RequestCmd::Status { pod: None }),
            (
                r#"{"cmd":"status","pod":"web"}"#,
                RequestCmd::Status {
                    pod: Some("web".into()),
                },
            ),
            (
                r#"{"cmd":"describe","pod":"web"}"#,
                RequestCmd::Describe { pod: "web".into() },
            ),
            (
                r#"{"cmd":"events","follow":true}"#,
                RequestCmd::Events { follow: true },
            ),
            (r#"{"cmd":"events"}"#, RequestCmd::Events { follow: false }),
            (
                r#"{"cmd":"logs","pod":"web","container":"app","follow":true,"tail":10,"previous":false}"#,
                RequestCmd::Logs {
                    pod: "web".into(),
                    container: Some("app".into()),
                    follow: true,
                    tail: Some(10),
                    previous: false,
                },
            ),
            (
                r#"{"cmd":"start","pod":"web"}"#,
                RequestCmd::Start {
                    pod: "web".into(),
                    container: None,
                },
            ),
            (
                r#"{"cmd":"stop","pod":"web","container":"app"}"#,
                RequestCmd::Stop {
                    pod: "web".into(),
                    container: Some("app".into()),
                },
            ),
            (
                r#"{"cmd":"restart","pod":"web","container":null}"#,
                RequestCmd::Restart {
                    pod: "web".into(),
                    container: None,
                },
            ),
            (r#"{"cmd":"reload"}"#, RequestCmd::Reload),
            (r#"{"cmd":"shutdown"}"#, RequestCmd::Shutdown),
            (r#"{"cmd":"version"}"#, RequestCmd::Version),
        ];
        for (text, want) in cases {
            let req = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(req.cmd, want, "{text}");
            assert_eq!(req.id, Value::Null);
            // What the client would send parses back to the same command.
            let again = Value::Object(want.to_json()).to_string();
            assert_eq!(parse(&again).expect(&again).cmd, want);
        }
    }

    #[test]
    fn id_is_echoed_as_number_string_or_null() {
        assert_eq!(parse(r#"{"id":7,"cmd":"version"}"#).unwrap().id, json!(7));
        assert_eq!(
            parse(r#"{"id":"a","cmd":"version"}"#).unwrap().id,
            json!("a")
        );
        assert_eq!(
            parse(r#"{"id":null,"cmd":"version"}"#).unwrap().id,
            Value::Null
        );
        // Errors after the id was read still carry it.
        let e = err(r#"{"id":9,"cmd":"statsu"}"#);
        assert_eq!(e.id, json!(9));
        let reply: Value = serde_json::from_str(&e.reply()).unwrap();
        assert_eq!(reply["id"], json!(9));
        assert_eq!(reply["ok"], json!(false));
        assert_eq!(reply["error"]["kind"], json!("unknown_command"));
    }

    #[test]
    fn trailing_newline_and_crlf_are_accepted() {
        assert!(parse("{\"cmd\":\"version\"}\n").is_ok());
        assert!(parse("{\"cmd\":\"version\"}\r\n").is_ok());
    }

    #[test]
    fn malformed_json_is_bad_request_with_column() {
        let e = err(r#"{"cmd" "status"}"#);
        assert_eq!(e.kind, ErrorKind::BadRequest);
        assert!(
            e.message.starts_with("malformed JSON at column 8: "),
            "{}",
            e.message
        );
        assert_eq!(e.id, Value::Null);
        assert_eq!(err("[1,2]").kind, ErrorKind::BadRequest);
        assert!(err("[1,2]").message.contains("an array"));
        assert_eq!(
            err(&String::from_utf8_lossy(b"\xff")).kind,
            ErrorKind::BadRequest
        );
        let e = parse_request(b"{\"cmd\":\"\xff\"}").unwrap_err();
        assert!(e.message.contains("not UTF-8"), "{}", e.message);
    }

    #[test]
    fn missing_or_mistyped_cmd_and_id_are_bad_request() {
        let e = err(r#"{"id":1}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::BadRequest, "missing field \"cmd\"")
        );
        assert_eq!(e.id, json!(1));
        let e = err(r#"{"cmd":3}"#);
        assert_eq!(e.kind, ErrorKind::BadRequest);
        assert!(e.message.contains("\"cmd\" must be a string"));
        let e = err(r#"{"id":[1],"cmd":"status"}"#);
        assert_eq!(e.kind, ErrorKind::BadRequest);
        assert!(e.message.contains("\"id\""));
    }

    #[test]
    fn unknown_command_names_it() {
        let e = err(r#"{"cmd":"statsu"}"#);
        assert_eq!(e.kind, ErrorKind::UnknownCommand);
        assert!(
            e.message.starts_with("unknown command \"statsu\""),
            "{}",
            e.message
        );
    }

    #[test]
    fn bad_arguments_name_the_field() {
        let e = err(r#"{"cmd":"describe","pod":5}"#);
        assert_eq!(e.kind, ErrorKind::BadArgument);
        assert_eq!(e.message, "field \"pod\" must be a string, got a number");
        let e = err(r#"{"cmd":"describe"}"#);
        assert_eq!(e.message, "command \"describe\" needs field \"pod\"");
        let e = err(r#"{"cmd":"logs","pod":"w","tail":-1}"#);
        assert_eq!(e.kind, ErrorKind::BadArgument);
        assert!(e.message.contains("\"tail\""));
        let e = err(r#"{"cmd":"events","follow":"yes"}"#);
        assert!(e.message.contains("\"follow\" must be a boolean"));
        let e = err(r#"{"cmd":"stop","pod":"web","contaner":"app"}"#);
        assert_eq!(e.kind, ErrorKind::BadArgument);
        assert_eq!(e.message, "unknown field \"contaner\" for command \"stop\"");
        let e = err(r#"{"cmd":"stop","pod":""}"#);
        assert!(e.message.contains("must not be empty"));
    }

    #[test]
    fn oversized_line_is_too_large() {
        let big = format!(
            "{{\"cmd\":\"status\",\"pod\":\"{}\"}}",
            "x".repeat(MAX_LINE)
        );
        assert_eq!(err(&big).kind, ErrorKind::TooLarge);
    }

    #[test]
    fn several_lines_parse_independently() {
        let input = "{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"nope\"}\n{\"id\":3,\"cmd\":\"version\"}\n";
        let results: Vec<_> = input.lines().map(parse).collect();
        assert_eq!(results[0].as_ref().unwrap().id, json!(1));
        assert_eq!(results[1].as_ref().unwrap_err().id, json!(2));
        assert_eq!(results[2].as_ref().unwrap().cmd, RequestCmd::Version);
    }

    #[test]
    fn mutating_commands_are_flagged() {
        assert!(RequestCmd::Reload.is_mutating());
        assert!(RequestCmd::Shutdown.is_mutating());
        assert!(
            RequestCmd::Stop {
                pod: "a".into(),
                container: None
            }
            .is_mutating()
        );
        assert!(!RequestCmd::Version.is_mutating());
        assert!(!RequestCmd::Events { follow: true }.is_mutating());
    }

    #[test]
    fn replies_are_single_lines() {
        let r = reply_ok(&json!(1), json!({"text": "a\nb"}));
        assert!(r.ends_with('\n'));
        assert_eq!(r.matches('\n').count(), 1);
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap(),
            json!({"id": 1, "ok": true, "result": {"text": "a\nb"}})
        );
        let r = reply_err(&json!("x"), ErrorKind::NotFound, "pod \"a\" not found");
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap(),
            json!({"id": "x", "ok": false, "error": {"kind": "not_found", "message": "pod \"a\" not found"}})
        );
        let r = reply_event(&json!(3), json!({"reason": "Started"}));
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap()["event"]["reason"],
            "Started"
        );
        let r = reply_log(&json!(4), b"line 1\nline \xff\n");
        assert_eq!(r.matches('\n').count(), 1);
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap()["log"],
            json!("line 1\nline \u{fffd}\n")
        );
    }
}
