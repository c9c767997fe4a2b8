//! The control socket's wire format: JSON lines (docs/interface.md §2).
//!
//! Owns request parsing and reply building, as pure functions on bytes and strings. It must not
//! touch sockets, the core or the clock: the server splits lines and the runtime decides the
//! answers. Every reply is exactly one `\n`-terminated line; `serde_json` escapes newlines inside
//! strings, so a reply can never be split.
//!
//! Requests: `{"id": <number|string|null>, "cmd": "<command>", ...arguments}`. The `id` is echoed
//! in every reply to that request (absent means `null`). This module reads the envelope (`id`,
//! `cmd`); the command and its arguments are the wire's typed [`RequestCmd`], which refuses
//! unknown fields so a typo (`"contaner"`) is reported instead of silently widening an operator
//! action to a whole pod.

use serde_json::{Value, json};

pub use super::wire::RequestCmd;
pub use super::wire::request::Seconds;
use super::wire::request::type_name;
use super::wire::{ArgError, ErrorKind};

/// Longest request line accepted, newline excluded.
pub const MAX_LINE: usize = 64 * 1024;

/// Every command name, for messages (derived from the one table of commands).
pub use super::wire::commands::COMMANDS;

#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Echoed back exactly: a number, a string or null.
    pub id: RequestId,
    pub cmd: RequestCmd,
    /// `wait_ms` (the commands whose definition says `waits`): answer once the target is in
    /// the state asked for, or this long has passed (docs/interface.md §2).
    pub wait: Option<std::time::Duration>,
}

/// A request's `id` as JSON text (null, a number or a string), echoed in every reply. A number
/// is kept as the client wrote it: `123456789012345678901234567890` comes back unchanged, where
/// a parsed `f64` would answer `1.2345678901234568e29`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId(String);

impl RequestId {
    /// `null`: a request without an id, or one whose id could not be read.
    pub fn null() -> RequestId {
        RequestId("null".to_string())
    }

    /// The JSON text.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// Bytes held (for memory accounting).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: even `null` is four bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Default for RequestId {
    fn default() -> RequestId {
        RequestId::null()
    }
}

/// From a parsed value; anything but null, a number or a string becomes `null`.
impl From<Value> for RequestId {
    fn from(v: Value) -> RequestId {
        match v {
            Value::Number(_) | Value::String(_) => RequestId(v.to_string()),
            _ => RequestId::null(),
        }
    }
}

impl PartialEq<Value> for RequestId {
    fn eq(&self, other: &Value) -> bool {
        serde_json::from_str::<Value>(&self.0).is_ok_and(|v| &v == other)
    }
}

/// Just the `id` of a request line, unparsed (serde_json's `RawValue`).
#[derive(serde::Deserialize)]
struct RawId<'a> {
    #[serde(borrow)]
    id: Option<&'a serde_json::value::RawValue>,
}

/// The id of an already parsed request: numbers that are not exact 64-bit integers are taken
/// from the text itself so they are echoed exactly.
fn request_id(text: &str, id: Value) -> RequestId {
    if let Value::Number(n) = &id
        && n.is_f64()
        && let Ok(RawId { id: Some(raw) }) = serde_json::from_str::<RawId>(text)
    {
        return RequestId(raw.get().to_string());
    }
    RequestId::from(id)
}

/// A request that could not be parsed; answered with `reply_err(id, kind, message)`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct ProtoError {
    /// The request's id if it could be read, else null.
    pub id: RequestId,
    /// One of the protocol's own kinds: bad request, unknown command, bad argument, too large.
    pub kind: ErrorKind,
    pub message: String,
}

impl ProtoError {
    fn new(id: &RequestId, kind: ErrorKind, message: impl Into<String>) -> ProtoError {
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
            id: RequestId::null(),
            kind: ErrorKind::TooLarge,
            message: format!(
                "request line too large: {len} bytes or more without a newline (limit {MAX_LINE})"
            ),
        }
    }
}

/// Parses one request line (without or with its trailing `\n` / `\r\n`).
pub fn parse_request(line: &[u8]) -> Result<Request, ProtoError> {
    let null = RequestId::null();
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
        None => RequestId::null(),
        Some(v @ (Value::Null | Value::Number(_) | Value::String(_))) => request_id(text, v),
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
    let cmd = match obj.get("cmd") {
        Some(Value::String(s)) => s.clone(),
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
                format!("field \"cmd\" must be a string, got {}", type_name(other)),
            ));
        }
    };
    let wait = obj.remove(WAIT_FIELD);
    let parsed = RequestCmd::from_fields(obj).map_err(|e| {
        let (kind, message) = match e {
            ArgError::UnknownCommand(other) => (
                ErrorKind::UnknownCommand,
                format!(
                    "unknown command {}; known commands: {}",
                    Value::from(other),
                    COMMANDS.join(", ")
                ),
            ),
            ArgError::MissingField(field) => (
                ErrorKind::BadArgument,
                format!("command \"{cmd}\" needs field \"{field}\""),
            ),
            ArgError::UnknownField(field) => (
                ErrorKind::BadArgument,
                format!("unknown field {} for command \"{cmd}\"", Value::from(field)),
            ),
            ArgError::BadValue(message) => (ErrorKind::BadArgument, message),
        };
        ProtoError::new(&id, kind, message)
    })?;
    let wait = match wait {
        None | Some(Value::Null) => None,
        Some(_) if !parsed.def().waits => {
            return Err(ProtoError::new(
                &id,
                ErrorKind::BadArgument,
                format!("unknown field \"{WAIT_FIELD}\" for command \"{cmd}\""),
            ));
        }
        Some(v) => match v.as_u64() {
            Some(ms) => Some(std::time::Duration::from_millis(ms)),
            None => {
                let got = match &v {
                    Value::Number(n) => n.to_string(),
                    other => type_name(other).to_string(),
                };
                return Err(ProtoError::new(
                    &id,
                    ErrorKind::BadArgument,
                    format!("field \"{WAIT_FIELD}\" must be a non-negative integer, got {got}"),
                ));
            }
        },
    };
    Ok(Request {
        id,
        cmd: parsed,
        wait,
    })
}

/// The request field that asks for the reply to wait for the target's state (in milliseconds).
pub const WAIT_FIELD: &str = "wait_ms";

/// serde_json's message ends with " at line L column C"; the column is reported separately.
fn strip_position(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg,
    }
}

/// `{"id":ID,` — the start of every reply line.
fn head(id: &RequestId) -> String {
    let mut s = String::with_capacity(id.len() + 64);
    s.push_str("{\"id\":");
    s.push_str(id.as_json());
    s.push(',');
    s
}

/// `head` + `"ok":true,"KEY":VALUE}` + newline.
fn ok_line(id: &RequestId, key: &str, value: &Value) -> String {
    let mut s = head(id);
    s.push_str("\"ok\":true,\"");
    s.push_str(key);
    s.push_str("\":");
    s.push_str(&value.to_string());
    s.push_str("}\n");
    s
}

/// `{"id": …, "ok": true, "result": …}\n`.
pub fn reply_ok(id: &RequestId, result: Value) -> String {
    ok_line(id, "result", &result)
}

/// What comes before and after the result in [`reply_ok`]'s line, for a result already
/// rendered as JSON text by vigil itself (a cached `status`) and sent from where it is kept,
/// not copied into a line (`Server::send_parts`).
pub fn reply_ok_around(id: &RequestId) -> (String, &'static str) {
    let mut s = head(id);
    s.push_str("\"ok\":true,\"result\":");
    (s, "}\n")
}

/// `{"id": …, "ok": false, "error": {"kind": …, "message": …}}\n`.
pub fn reply_err(id: &RequestId, kind: ErrorKind, message: &str) -> String {
    let mut s = head(id);
    s.push_str("\"ok\":false,\"error\":");
    s.push_str(&json!({"kind": kind, "message": message}).to_string());
    s.push_str("}\n");
    s
}

/// One followed event: `{"id": …, "ok": true, "event": {…}}\n`.
pub fn reply_event(id: &RequestId, event: Value) -> String {
    ok_line(id, "event", &event)
}

/// Where a `logs -f` stream stands after a line: the ring it reads (`ring`, as a string of
/// digits) and the offset of the first byte not sent yet (`next`); a follower that comes back
/// after its connection ended resumes by both (docs/interface.md §2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPosition {
    pub ring: u64,
    pub next: u64,
}

impl LogPosition {
    fn push_to(&self, s: &mut String) {
        s.push_str(&format!(
            ",\"ring\":\"{}\",\"next\":{}",
            self.ring, self.next
        ));
    }
}

/// One chunk of followed log output: `{"id": …, "ok": true, "log": "…", "ring": "R", "next":
/// N}\n`. Invalid UTF-8 is replaced (U+FFFD); a character split between two chunks is held
/// back with [`utf8_incomplete_tail`] by the caller (and not counted in `next`).
pub fn reply_log(id: &RequestId, chunk: &[u8], at: LogPosition) -> String {
    let mut s = head(id);
    s.push_str("\"ok\":true,\"log\":");
    s.push_str(&Value::from(String::from_utf8_lossy(chunk)).to_string());
    at.push_to(&mut s);
    s.push_str("}\n");
    s
}

/// The in-band notice a `logs -f` follower that fell behind gets: its `log` text says how many
/// bytes it missed (`… 4096 bytes skipped …`) and `skipped_bytes` counts them; the stream then
/// continues from the live position.
pub fn reply_log_skipped(
    id: &RequestId,
    skipped: u64,
    at_line_start: bool,
    at: LogPosition,
) -> String {
    let lead = if at_line_start { "" } else { "\n" };
    let mut s = head(id);
    s.push_str("\"ok\":true,\"log\":");
    s.push_str(&Value::from(format!("{lead}… {skipped} bytes skipped …\n")).to_string());
    s.push_str(&format!(",\"skipped_bytes\":{skipped}"));
    at.push_to(&mut s);
    s.push_str("}\n");
    s
}

/// The first line of an `events -f` stream: `{"id": …, "ok": true, "history": "H"}` and, for a
/// resumed stream, how it goes on (`"lost": {"after": K, "through": S}` or `"new_history":
/// true`: docs/interface.md §2.4).
pub fn reply_event_stream(id: &RequestId, history: u64, resumed: Option<&Value>) -> String {
    let mut s = head(id);
    s.push_str(&format!("\"ok\":true,\"history\":\"{history}\""));
    if let Some(Value::Object(fields)) = resumed {
        for (k, v) in fields {
            s.push_str(&format!(",{}:{v}", Value::from(k.as_str())));
        }
    }
    s.push_str("}\n");
    s
}

/// A `logs` reply is streamed in pieces, never built whole: this opening, then the text in
/// [`json_fragment`]s, then [`logs_reply_close`]. Together they are one line:
/// `{"id":…,"ok":true,"result":{"pod":…,"container":…,"dropped_bytes":…,"log":"…","skipped_bytes":…}}`.
pub fn logs_reply_open(id: &RequestId, pod: &str, container: &str, dropped: u64) -> String {
    let mut s = head(id);
    s.push_str("\"ok\":true,\"result\":{\"pod\":");
    s.push_str(&Value::from(pod).to_string());
    s.push_str(",\"container\":");
    s.push_str(&Value::from(container).to_string());
    s.push_str(&format!(",\"dropped_bytes\":{dropped},\"log\":\""));
    s
}

/// Ends a streamed `logs` reply; `skipped` counts bytes overwritten in the ring before they
/// could be sent (each such gap is also marked in the text).
pub fn logs_reply_close(skipped: u64) -> String {
    format!("\",\"skipped_bytes\":{skipped}}}}}\n")
}

/// What closes a streamed `logs` reply that is cut off (its client stopped reading): the line
/// stays valid JSON, marked `truncated`.
pub const LOGS_REPLY_CUT: &str = "\",\"truncated\":true}}\n";

/// `text` escaped as the inside of a JSON string (no quotes), for streamed replies.
pub fn json_fragment(text: &str) -> String {
    let quoted = Value::from(text).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

/// How many bytes at the end of `bytes` are the start of a UTF-8 character whose remaining
/// bytes have not arrived yet (0 to 3): hold them back for the next chunk so a character split
/// between chunks is not replaced by U+FFFD.
pub fn utf8_incomplete_tail(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=3.min(n) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            // A continuation byte: keep looking for the lead byte.
            continue;
        }
        let width = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if back < width { back } else { 0 };
    }
    0
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
                RequestCmd::Events {
                    follow: true,
                    pod: None,
                    after: None,
                    history: None,
                },
            ),
            (
                r#"{"cmd":"events"}"#,
                RequestCmd::Events {
                    follow: false,
                    pod: None,
                    after: None,
                    history: None,
                },
            ),
            (
                r#"{"cmd":"logs","pod":"web","container":"app","follow":true,"tail":10,"previous":false}"#,
                RequestCmd::Logs {
                    pod: "web".into(),
                    container: Some("app".into()),
                    follow: true,
                    tail: Some(10),
                    previous: false,
                    timestamps: false,
                    since_seconds: None,
                    since_time: None,
                    ring: None,
                    offset: None,
                },
            ),
            (
                r#"{"cmd":"start","pod":"web"}"#,
                RequestCmd::Start {
                    pod: "web".into(),
                    container: None,
                    ignore_dependencies: false,
                },
            ),
            (
                r#"{"cmd":"start","pod":"web","ignore_dependencies":true}"#,
                RequestCmd::Start {
                    pod: "web".into(),
                    container: None,
                    ignore_dependencies: true,
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
                    rolling: false,
                    max_unavailable: None,
                },
            ),
            (
                r#"{"cmd":"restart","pod":"web","rolling":true,"max_unavailable":2}"#,
                RequestCmd::Restart {
                    pod: "web".into(),
                    container: None,
                    rolling: true,
                    max_unavailable: Some(2),
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
    fn resume_fields_are_checked() {
        for (line, says) in [
            (
                r#"{"cmd":"logs","pod":"w","follow":true,"ring":"5"}"#,
                "go together",
            ),
            (
                r#"{"cmd":"logs","pod":"w","follow":true,"offset":5}"#,
                "go together",
            ),
            (
                r#"{"cmd":"logs","pod":"w","ring":"x1","offset":5}"#,
                "\"ring\" must be an id",
            ),
            (r#"{"cmd":"events","history":"5"}"#, "needs \"after\""),
            (
                r#"{"cmd":"events","after":-1}"#,
                "\"after\" must be a non-negative",
            ),
        ] {
            let e = err(line);
            assert_eq!(e.kind, ErrorKind::BadArgument, "{line}");
            assert!(e.message.contains(says), "{line}: {}", e.message);
        }
        let ok = parse(r#"{"cmd":"events","follow":true,"pod":"web","after":4,"history":"9"}"#);
        assert_eq!(
            ok.unwrap().cmd,
            RequestCmd::Events {
                follow: true,
                pod: Some("web".into()),
                after: Some(4),
                history: Some("9".into()),
            }
        );
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
    fn wait_names_its_pods_condition_and_timeout() {
        use crate::control::wire::wait::WaitFor;
        let req = parse_request(
            br#"{"cmd":"wait","pods":["web"],"for":"stopped","timeout_seconds":1.5}"#,
        )
        .unwrap();
        assert_eq!(
            req.cmd,
            RequestCmd::Wait {
                pods: vec!["web".into()],
                condition: WaitFor::Stopped,
                timeout_seconds: Some(Seconds(std::time::Duration::from_millis(1500))),
            }
        );
        let again = serde_json::Value::Object(req.cmd.to_json()).to_string();
        assert_eq!(parse_request(again.as_bytes()).unwrap().cmd, req.cmd);
        for (line, says) in [
            (r#"{"cmd":"wait","for":"ready"}"#, "needs field \"pods\""),
            (
                r#"{"cmd":"wait","pods":[],"for":"ready"}"#,
                "at least one pod",
            ),
            (r#"{"cmd":"wait","pods":["web"]}"#, "\"for\""),
            (
                r#"{"cmd":"wait","pods":["web"],"for":"running"}"#,
                "\"completed\"",
            ),
            (
                r#"{"cmd":"wait","pods":["web"],"for":"ready","timeout_seconds":-1}"#,
                "timeout_seconds",
            ),
            (
                r#"{"cmd":"wait","pods":["web"],"for":"ready","timeout_seconds":"30s"}"#,
                "must be a number",
            ),
        ] {
            let e = err(line);
            assert_eq!(e.kind, ErrorKind::BadArgument, "{line}");
            assert!(e.message.contains(says), "{line}: {e}");
        }
    }

    #[test]
    fn health_takes_an_optional_list_of_pod_names() {
        for (line, want) in [
            (r#"{"cmd":"health"}"#, vec![]),
            (r#"{"cmd":"health","pods":null}"#, vec![]),
            (r#"{"cmd":"health","pods":[]}"#, vec![]),
            (
                r#"{"cmd":"health","pods":["web","db"]}"#,
                vec!["web".to_string(), "db".to_string()],
            ),
        ] {
            let req = parse_request(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(req.cmd, RequestCmd::Health { pods: want }, "{line}");
            assert!(!req.cmd.is_mutating(), "health is read access");
        }
        for (line, says) in [
            (r#"{"cmd":"health","pods":"web"}"#, "an array of strings"),
            (r#"{"cmd":"health","pods":[""]}"#, "an empty string"),
            (r#"{"cmd":"health","pods":[1]}"#, "a number"),
            (r#"{"cmd":"health","pod":"web"}"#, "unknown field"),
        ] {
            let e = err(line);
            assert_eq!(e.kind, ErrorKind::BadArgument, "{line}");
            assert!(e.message.contains(says), "{line}: {e}");
        }
        let many: Vec<String> = (0..=1024).map(|i| format!("\"p{i}\"")).collect();
        let line = format!(r#"{{"cmd":"health","pods":[{}]}}"#, many.join(","));
        let e = err(&line);
        assert!(e.message.contains("at most 1024 names"), "{e}");
    }

    #[test]
    fn metrics_takes_an_optional_format_and_refuses_others_naming_both() {
        use crate::metrics::Format;
        for (line, want) in [
            (r#"{"cmd":"metrics"}"#, Format::Prometheus),
            (r#"{"cmd":"metrics","format":null}"#, Format::Prometheus),
            (
                r#"{"cmd":"metrics","format":"prometheus"}"#,
                Format::Prometheus,
            ),
            (
                r#"{"cmd":"metrics","format":"openmetrics"}"#,
                Format::OpenMetrics,
            ),
        ] {
            let req = parse_request(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(req.cmd, RequestCmd::Metrics { format: want }, "{line}");
            let again = serde_json::Value::Object(req.cmd.to_json()).to_string();
            assert_eq!(parse_request(again.as_bytes()).unwrap().cmd, req.cmd);
        }
        let e = err(r#"{"cmd":"metrics","format":"json"}"#);
        assert_eq!(e.kind, ErrorKind::BadArgument);
        assert!(
            e.message.contains("\"prometheus\" or \"openmetrics\"")
                && e.message.contains("\"json\""),
            "{e}"
        );
        let e = err(r#"{"cmd":"metrics","fromat":"openmetrics"}"#);
        assert_eq!(e.kind, ErrorKind::BadArgument);
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
    fn logs_since_fields_are_one_or_the_other_and_well_formed() {
        let e = err(
            r#"{"cmd":"logs","pod":"w","since_seconds":5,"since_time":"2026-01-01T00:00:00Z"}"#,
        );
        assert_eq!(e.kind, ErrorKind::BadArgument);
        assert!(
            e.message
                .contains("at most one of \"since_seconds\" and \"since_time\" may be given"),
            "{}",
            e.message
        );
        let e = err(r#"{"cmd":"logs","pod":"w","since_seconds":0}"#);
        assert!(
            e.message
                .contains("field \"since_seconds\" must be greater than 0"),
            "{}",
            e.message
        );
        let e = err(r#"{"cmd":"logs","pod":"w","since_time":"yesterday"}"#);
        assert!(
            e.message.contains(
                "field \"since_time\" must be an RFC 3339 time such as 2026-11-23T13:40:47Z, got \"yesterday\""
            ),
            "{}",
            e.message
        );
        let e = err(r#"{"cmd":"logs","pod":"w","timestamps":1}"#);
        assert!(e.message.contains("\"timestamps\" must be a boolean"));
        // An offset is the same instant as UTC.
        let ok = parse(r#"{"cmd":"logs","pod":"w","since_time":"2026-11-23T14:40:47+01:00"}"#);
        let Ok(Request {
            cmd:
                RequestCmd::Logs {
                    since_time: Some(t),
                    ..
                },
            ..
        }) = ok
        else {
            panic!("{ok:?}");
        };
        assert_eq!(
            RequestCmd::since_time_nanos(&t),
            Some(1_795_441_247_000_000_000)
        );
    }

    #[test]
    fn commands_without_arguments_refuse_any_field() {
        for cmd in ["reload", "shutdown", "version"] {
            let e = err(&format!(r#"{{"cmd":"{cmd}","pod":"web"}}"#));
            assert_eq!(e.kind, ErrorKind::BadArgument);
            assert_eq!(
                e.message,
                format!("unknown field \"pod\" for command \"{cmd}\"")
            );
        }
        let e = err(r#"{"cmd":"version","pod":null}"#);
        assert_eq!(e.message, "unknown field \"pod\" for command \"version\"");
    }

    #[test]
    fn wait_ms_is_read_for_start_stop_and_restart_and_refused_for_every_other_command() {
        for cmd in ["start", "stop", "restart"] {
            let r = parse(&format!(r#"{{"cmd":"{cmd}","pod":"web","wait_ms":1500}}"#)).expect(cmd);
            assert_eq!(
                r.wait,
                Some(std::time::Duration::from_millis(1500)),
                "{cmd}"
            );
            let r = parse(&format!(r#"{{"cmd":"{cmd}","pod":"web","wait_ms":null}}"#)).expect(cmd);
            assert_eq!(r.wait, None, "{cmd}");
            let e = err(&format!(r#"{{"cmd":"{cmd}","pod":"web","wait_ms":-1}}"#));
            assert_eq!(
                (e.kind, e.message.as_str()),
                (
                    ErrorKind::BadArgument,
                    "field \"wait_ms\" must be a non-negative integer, got -1"
                )
            );
            let e = err(&format!(r#"{{"cmd":"{cmd}","pod":"web","wait_ms":"30s"}}"#));
            assert_eq!(
                e.message,
                "field \"wait_ms\" must be a non-negative integer, got a string"
            );
        }
        for cmd in ["status", "reload", "version"] {
            let e = err(&format!(r#"{{"cmd":"{cmd}","wait_ms":1000}}"#));
            assert_eq!(
                (e.kind, e.message),
                (
                    ErrorKind::BadArgument,
                    format!("unknown field \"wait_ms\" for command \"{cmd}\"")
                )
            );
        }
        // An unknown command is still that, whatever else the request carries.
        assert_eq!(
            err(r#"{"cmd":"wiat","wait_ms":1}"#).kind,
            ErrorKind::UnknownCommand
        );
    }

    #[test]
    fn null_is_an_absent_field_and_so_missing_when_required() {
        let e = err(r#"{"cmd":"logs","pod":null}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (
                ErrorKind::BadArgument,
                "command \"logs\" needs field \"pod\""
            )
        );
        let req = parse(r#"{"cmd":"logs","pod":"w","follow":null,"tail":null}"#).unwrap();
        assert_eq!(
            req.cmd,
            RequestCmd::Logs {
                pod: "w".into(),
                container: None,
                follow: false,
                tail: None,
                previous: false,
                timestamps: false,
                since_seconds: None,
                since_time: None,
                ring: None,
                offset: None,
            }
        );
        let e = err(r#"{"cmd":"logs","pod":"w","tail":1.5}"#);
        assert_eq!(
            e.message,
            "field \"tail\" must be a non-negative integer, got 1.5"
        );
        let e = err(r#"{"cmd":"logs","pod":"w","tail":"3"}"#);
        assert_eq!(
            e.message,
            "field \"tail\" must be a non-negative integer, got a string"
        );
        let e = err(r#"{"cmd":"logs","pod":"w","previous":1}"#);
        assert_eq!(
            e.message,
            "field \"previous\" must be a boolean, got a number"
        );
    }

    #[test]
    fn what_the_client_sends_keeps_its_shape() {
        let cases = [
            (RequestCmd::Status { pod: None }, r#"{"cmd":"status"}"#),
            (
                RequestCmd::Events {
                    follow: false,
                    pod: None,
                    after: None,
                    history: None,
                },
                r#"{"cmd":"events","follow":false}"#,
            ),
            (
                RequestCmd::Logs {
                    pod: "web".into(),
                    container: Some("app".into()),
                    follow: true,
                    tail: Some(10),
                    previous: false,
                    timestamps: false,
                    since_seconds: None,
                    since_time: None,
                    ring: None,
                    offset: None,
                },
                r#"{"cmd":"logs","container":"app","follow":true,"pod":"web","previous":false,"tail":10}"#,
            ),
            (
                RequestCmd::Stop {
                    pod: "web".into(),
                    container: None,
                },
                r#"{"cmd":"stop","pod":"web"}"#,
            ),
            (RequestCmd::Shutdown, r#"{"cmd":"shutdown"}"#),
        ];
        for (cmd, want) in cases {
            assert_eq!(Value::Object(cmd.to_json()).to_string(), want);
        }
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
        assert!(
            !RequestCmd::Events {
                follow: true,
                pod: None,
                after: None,
                history: None
            }
            .is_mutating()
        );
    }

    #[test]
    fn each_command_has_one_definition_with_its_access_class() {
        use crate::control::wire::commands::{Access, DEFS, find};
        let pod = || "a".to_string();
        let every = [
            (RequestCmd::Status { pod: None }, Access::Read),
            (RequestCmd::Describe { pod: pod() }, Access::Read),
            (
                RequestCmd::Events {
                    follow: true,
                    pod: None,
                    after: None,
                    history: None,
                },
                Access::Read,
            ),
            (
                RequestCmd::from_fields(
                    json!({"cmd": "logs", "pod": "a"})
                        .as_object()
                        .unwrap()
                        .clone(),
                )
                .unwrap(),
                Access::Read,
            ),
            (
                RequestCmd::Start {
                    pod: pod(),
                    container: None,
                    ignore_dependencies: false,
                },
                Access::Admin,
            ),
            (
                RequestCmd::Stop {
                    pod: pod(),
                    container: None,
                },
                Access::Admin,
            ),
            (
                RequestCmd::Restart {
                    pod: pod(),
                    container: Some("c".into()),
                    rolling: false,
                    max_unavailable: None,
                },
                Access::Admin,
            ),
            (RequestCmd::Reload, Access::Admin),
            (
                RequestCmd::Scale {
                    pod: pod(),
                    replicas: 3,
                },
                Access::Admin,
            ),
            (RequestCmd::Shutdown, Access::Admin),
            (RequestCmd::Version, Access::Read),
            (
                RequestCmd::Upgrade {
                    binary: None,
                    check: true,
                },
                Access::Admin,
            ),
            (
                RequestCmd::Upgrade {
                    binary: Some("/x".into()),
                    check: false,
                },
                Access::Root,
            ),
            (
                RequestCmd::from_fields(json!({"cmd": "metrics"}).as_object().unwrap().clone())
                    .unwrap(),
                Access::Read,
            ),
            (RequestCmd::Health { pods: vec![] }, Access::Read),
            (
                RequestCmd::Trigger {
                    pod: "nightly".into(),
                },
                Access::Admin,
            ),
            (
                RequestCmd::from_fields(
                    json!({"cmd": "wait", "pods": ["web"], "for": "ready"})
                        .as_object()
                        .unwrap()
                        .clone(),
                )
                .unwrap(),
                Access::Read,
            ),
        ];
        for (cmd, access) in &every {
            assert!(find(cmd.name()).is_some(), "{} has a row", cmd.name());
            assert_eq!(cmd.access(), *access, "{cmd:?}");
            assert_eq!(cmd.is_mutating(), *access != Access::Read, "{cmd:?}");
        }
        let mut names: Vec<&str> = DEFS.iter().map(|d| d.name).collect();
        assert_eq!(names, COMMANDS, "COMMANDS is the table's names, in order");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DEFS.len(), "one row per command");
        let mut named: Vec<&str> = every.iter().map(|(c, _)| c.name()).collect();
        named.dedup();
        assert_eq!(named.len(), DEFS.len(), "every row is a command");
    }

    #[test]
    fn scale_takes_a_pod_and_a_count_and_refuses_anything_else() {
        let parse = |v: Value| RequestCmd::from_fields(v.as_object().unwrap().clone());
        assert_eq!(
            parse(json!({"cmd": "scale", "pod": "web", "replicas": 5})),
            Ok(RequestCmd::Scale {
                pod: "web".into(),
                replicas: 5
            })
        );
        for bad in [
            json!({"cmd": "scale", "pod": "web"}),
            json!({"cmd": "scale", "replicas": 2}),
            json!({"cmd": "scale", "pod": "web", "replicas": -1}),
            json!({"cmd": "scale", "pod": "web", "replicas": "3"}),
            json!({"cmd": "scale", "pod": "web", "replicas": 5_000_000_000u64}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rolling_restart_takes_a_batch_size_and_refuses_a_bad_one() {
        let parse = |v: Value| RequestCmd::from_fields(v.as_object().unwrap().clone());
        assert_eq!(
            parse(json!({"cmd": "restart", "pod": "web", "rolling": true, "max_unavailable": 2})),
            Ok(RequestCmd::Restart {
                pod: "web".into(),
                container: None,
                rolling: true,
                max_unavailable: Some(2),
            })
        );
        for bad in [
            json!({"cmd": "restart", "pod": "web", "rolling": "yes"}),
            json!({"cmd": "restart", "pod": "web", "rolling": true, "max_unavailable": 0}),
            json!({"cmd": "restart", "pod": "web", "rolling": true, "max_unavailable": 1001}),
            json!({"cmd": "restart", "pod": "web", "rolling": true, "max_unavailable": -1}),
            json!({"cmd": "restart", "pod": "web", "rolling": true, "max_unavailable": "2"}),
        ] {
            assert!(parse(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_status_sent_around_its_cached_text_is_the_value_reply() {
        use crate::control::render::{self, Secrets, fixtures};
        let mono = std::time::Instant::now();
        let pods = vec![fixtures::sample_pod(mono)];
        let status = render::status(
            &pods,
            &fixtures::observed(),
            &fixtures::clock(mono),
            Secrets::Redacted,
        );
        let id = RequestId::from(json!("a\"b"));
        let (before, after) = reply_ok_around(&id);
        let direct = before + &serde_json::to_string(&status).unwrap() + after;
        let via_value = reply_ok(&id, serde_json::to_value(&status).unwrap());
        assert!(direct.ends_with('\n') && direct.matches('\n').count() == 1);
        assert_eq!(
            serde_json::from_str::<Value>(&direct).unwrap(),
            serde_json::from_str::<Value>(&via_value).unwrap()
        );
    }

    #[test]
    fn replies_are_single_lines() {
        let r = reply_ok(&RequestId::from(json!(1)), json!({"text": "a\nb"}));
        assert!(r.ends_with('\n'));
        assert_eq!(r.matches('\n').count(), 1);
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap(),
            json!({"id": 1, "ok": true, "result": {"text": "a\nb"}})
        );
        let r = reply_err(
            &RequestId::from(json!("x")),
            ErrorKind::NotFound,
            "pod \"a\" not found",
        );
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap(),
            json!({"id": "x", "ok": false, "error": {"kind": "not_found", "message": "pod \"a\" not found"}})
        );
        let r = reply_event(&RequestId::from(json!(3)), json!({"reason": "Started"}));
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap()["event"]["reason"],
            "Started"
        );
        let at = LogPosition { ring: 7, next: 12 };
        let r = reply_log(&RequestId::from(json!(4)), b"line 1\nline \xff\n", at);
        assert_eq!(r.matches('\n').count(), 1);
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap()["log"],
            json!("line 1\nline \u{fffd}\n")
        );
        let v = serde_json::from_str::<Value>(&r).unwrap();
        assert_eq!((&v["ring"], &v["next"]), (&json!("7"), &json!(12)));
        let r = reply_event_stream(
            &RequestId::from(json!(5)),
            9,
            Some(&json!({"lost": {"after": 3, "through": 5}})),
        );
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap(),
            json!({"id": 5, "ok": true, "history": "9", "lost": {"after": 3, "through": 5}})
        );
    }

    #[test]
    fn big_integer_and_odd_ids_come_back_exactly() {
        for id in [
            "123456789012345678901234567890",
            "-98765432109876543210",
            "1.5",
            "2e-3",
            "7",
            "\"x\"",
            "null",
        ] {
            let line = format!("{{\"id\":{id},\"cmd\":\"version\"}}");
            let req = parse(&line).unwrap();
            let reply = reply_ok(&req.id, json!({}));
            assert!(reply.starts_with(&format!("{{\"id\":{id},")), "{reply}");
            let e = parse(&format!("{{\"id\":{id},\"cmd\":\"nope\"}}")).unwrap_err();
            assert!(e.reply().starts_with(&format!("{{\"id\":{id},")));
        }
    }

    #[test]
    fn a_streamed_logs_reply_is_one_valid_line() {
        let id = RequestId::from(json!(5));
        let mut line = logs_reply_open(&id, "web", "app", 3);
        let text = "a\"b\n\u{0}é";
        line.push_str(&json_fragment(&text[..3]));
        line.push_str(&json_fragment(&text[3..]));
        line.push_str(&logs_reply_close(9));
        assert_eq!(line.matches('\n').count(), 1);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"id": 5, "ok": true, "result": {"pod": "web", "container": "app",
                "dropped_bytes": 3, "log": text, "skipped_bytes": 9}})
        );
        let cut = format!("{}abc{LOGS_REPLY_CUT}", logs_reply_open(&id, "w", "a", 0));
        let v: Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(v["result"]["truncated"], json!(true));
        let n = reply_log_skipped(&id, 42, false, LogPosition { ring: 1, next: 50 });
        let v: Value = serde_json::from_str(&n).unwrap();
        assert_eq!(v["log"], json!("\n… 42 bytes skipped …\n"));
        assert_eq!(v["skipped_bytes"], json!(42));
    }

    #[test]
    fn a_character_split_between_chunks_is_held_back() {
        let e = "é".as_bytes();
        let euro = "€".as_bytes();
        let crab = "🦀".as_bytes();
        assert_eq!(utf8_incomplete_tail(b"abc"), 0);
        assert_eq!(utf8_incomplete_tail(b""), 0);
        assert_eq!(utf8_incomplete_tail(&[b'a', e[0]]), 1);
        assert_eq!(utf8_incomplete_tail(e), 0);
        assert_eq!(utf8_incomplete_tail(&euro[..2]), 2);
        assert_eq!(utf8_incomplete_tail(&crab[..3]), 3);
        assert_eq!(utf8_incomplete_tail(crab), 0);
        assert_eq!(utf8_incomplete_tail(b"a\xff"), 0);
    }
}
