//! The CLI client: `vigil status|describe|events|logs|start|stop|restart|reload|shutdown|version`.
//!
//! Owns one request/response exchange over the control socket and printing the answer. It must
//! not interpret pod state beyond display: all rendering comes from `render` on the JSON the
//! supervisor sent. Exit codes (interface.md): 0 success, 1 error reported by the supervisor or
//! bad usage, 2 supervisor unreachable.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::protocol::RequestCmd;
use super::render;
use crate::cli::{ClientOpts, Cmd, Output};

/// How long a one-shot request may wait for its answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach vigil at {}: {source}", path.display())]
    Connect { path: PathBuf, source: io::Error },
    #[error("lost the connection to vigil at {}: {source}", path.display())]
    Exchange { path: PathBuf, source: io::Error },
    #[error("vigil at {} closed the connection without answering", path.display())]
    NoReply { path: PathBuf },
    #[error("vigil at {} sent an unreadable reply: {source}", path.display())]
    BadReply {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl ClientError {
    fn exit_code(&self) -> i32 {
        match self {
            ClientError::Connect { .. } => 2,
            _ => 1,
        }
    }
}

/// Client commands: returns the exit code.
pub fn main(cmd: Cmd) -> i32 {
    let stdout = io::stdout();
    let stderr = io::stderr();
    run(cmd, &mut stdout.lock(), &mut stderr.lock())
}

/// What to do with the answer.
#[derive(Debug, Clone, PartialEq)]
enum Show {
    Status { wide: bool },
    Describe,
    Events,
    Logs,
    Done(String),
    Version,
}

/// `POD` or `POD/CONTAINER`.
pub fn parse_target(target: &str) -> Result<(String, Option<String>), String> {
    let mut parts = target.split('/');
    let pod = parts.next().unwrap_or("");
    let container = parts.next();
    if pod.is_empty() || parts.next().is_some() || container.is_some_and(str::is_empty) {
        return Err(format!(
            "invalid target {target:?}: expected POD or POD/CONTAINER"
        ));
    }
    Ok((pod.to_string(), container.map(str::to_string)))
}

/// Runs one client command, writing to `out` / `err`; returns the exit code.
pub fn run(cmd: Cmd, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let (request, client, output, show) = match plan(cmd) {
        Ok(p) => p,
        Err(message) => {
            let _ = writeln!(err, "error: {message}");
            return 1;
        }
    };
    let path = client
        .socket
        .clone()
        .unwrap_or_else(super::default_socket_path);
    if show == Show::Version {
        let _ = writeln!(out, "Client Version: {}", env!("CARGO_PKG_VERSION"));
    }
    match exchange(&path, &request, output, &show, out) {
        Ok(Outcome::Done) => 0,
        Ok(Outcome::Refused { kind, message }) => {
            log::debug!("request refused: {kind}");
            let _ = writeln!(err, "error: {message}");
            1
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            e.exit_code()
        }
    }
}

type Plan = (RequestCmd, ClientOpts, Output, Show);

fn plan(cmd: Cmd) -> Result<Plan, String> {
    let target = |t: &str| parse_target(t);
    Ok(match cmd {
        Cmd::Status {
            pod,
            output,
            client,
        } => (
            RequestCmd::Status { pod },
            client,
            output,
            Show::Status {
                wide: output == Output::Wide,
            },
        ),
        Cmd::Describe {
            pod,
            output,
            client,
        } => (RequestCmd::Describe { pod }, client, output, Show::Describe),
        Cmd::Events {
            follow,
            output,
            client,
        } => (RequestCmd::Events { follow }, client, output, Show::Events),
        Cmd::Logs {
            target: t,
            follow,
            tail,
            previous,
            client,
        } => {
            let (pod, container) = target(&t)?;
            (
                RequestCmd::Logs {
                    pod,
                    container,
                    follow,
                    tail,
                    previous,
                },
                client,
                Output::Table,
                Show::Logs,
            )
        }
        Cmd::Start { target: t, client } => {
            let (pod, container) = target(&t)?;
            (
                RequestCmd::Start { pod, container },
                client,
                Output::Table,
                Show::Done(format!("{t}: started")),
            )
        }
        Cmd::Stop { target: t, client } => {
            let (pod, container) = target(&t)?;
            (
                RequestCmd::Stop { pod, container },
                client,
                Output::Table,
                Show::Done(format!("{t}: stopped")),
            )
        }
        Cmd::Restart { target: t, client } => {
            let (pod, container) = target(&t)?;
            (
                RequestCmd::Restart { pod, container },
                client,
                Output::Table,
                Show::Done(format!("{t}: restarted")),
            )
        }
        Cmd::Reload { client } => (
            RequestCmd::Reload,
            client,
            Output::Table,
            Show::Done("config reloaded".to_string()),
        ),
        Cmd::Shutdown { client } => (
            RequestCmd::Shutdown,
            client,
            Output::Table,
            Show::Done("shutting down".to_string()),
        ),
        Cmd::Version { client } => (RequestCmd::Version, client, Output::Table, Show::Version),
        Cmd::Run { .. } | Cmd::Check { .. } | Cmd::Completions { .. } => {
            return Err("not a client command".to_string());
        }
    })
}

enum Outcome {
    Done,
    Refused { kind: String, message: String },
}

fn following(request: &RequestCmd) -> bool {
    matches!(
        request,
        RequestCmd::Events { follow: true } | RequestCmd::Logs { follow: true, .. }
    )
}

/// Writes to the terminal; a closed stdout (`vigil logs -f | head`) ends the command quietly.
struct Sink<'a> {
    out: &'a mut dyn Write,
    closed: bool,
}

impl Sink<'_> {
    fn put(&mut self, text: &str) {
        if self.closed {
            return;
        }
        if self.out.write_all(text.as_bytes()).is_err() || self.out.flush().is_err() {
            self.closed = true;
        }
    }
}

fn exchange(
    path: &Path,
    request: &RequestCmd,
    output: Output,
    show: &Show,
    out: &mut dyn Write,
) -> Result<Outcome, ClientError> {
    let io_err = |source| ClientError::Exchange {
        path: path.to_path_buf(),
        source,
    };
    let mut stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    let follow = following(request);
    if !follow {
        stream
            .set_read_timeout(Some(REPLY_TIMEOUT))
            .map_err(io_err)?;
    }
    let mut obj = request.to_json();
    obj.insert("id".into(), Value::from(1));
    let mut line = Value::Object(obj).to_string();
    line.push('\n');
    stream.write_all(line.as_bytes()).map_err(io_err)?;

    let mut sink = Sink { out, closed: false };
    let json = output == Output::Json;
    if follow && !json && *show == Show::Events {
        sink.put(&render::event_follow_header());
    }
    let mut reader = BufReader::new(&stream);
    let mut answered = false;
    loop {
        let mut buf = String::new();
        let n = reader.read_line(&mut buf).map_err(io_err)?;
        if n == 0 {
            // EOF: the end of a stream, or no answer at all.
            return if answered {
                Ok(Outcome::Done)
            } else {
                Err(ClientError::NoReply {
                    path: path.to_path_buf(),
                })
            };
        }
        let reply: Value = serde_json::from_str(&buf).map_err(|source| ClientError::BadReply {
            path: path.to_path_buf(),
            source,
        })?;
        answered = true;
        if reply["ok"].as_bool() != Some(true) {
            let e = &reply["error"];
            return Ok(Outcome::Refused {
                kind: e["kind"].as_str().unwrap_or("unknown").to_string(),
                message: e["message"]
                    .as_str()
                    .unwrap_or("request failed")
                    .to_string(),
            });
        }
        let now = SystemTime::now();
        if let Some(ev) = reply.get("event") {
            if json {
                sink.put(&format!("{ev}\n"));
            } else {
                sink.put(&render::event_follow_line(ev, now));
            }
        } else if let Some(chunk) = reply.get("log").and_then(Value::as_str) {
            sink.put(chunk);
        } else if let Some(result) = reply.get("result") {
            show_result(&mut sink, result, output, show, follow, now);
        }
        if sink.closed || !follow {
            return Ok(Outcome::Done);
        }
    }
}

fn show_result(
    sink: &mut Sink,
    result: &Value,
    output: Output,
    show: &Show,
    follow: bool,
    now: SystemTime,
) {
    if output == Output::Json {
        if follow {
            // A follow stream may open with the backlog as a result: one event per line.
            for ev in result["events"].as_array().into_iter().flatten() {
                sink.put(&format!("{ev}\n"));
            }
        } else {
            let pretty = serde_json::to_string_pretty(result).unwrap_or_default();
            sink.put(&format!("{pretty}\n"));
        }
        return;
    }
    match show {
        Show::Status { wide } => sink.put(&render::status_table(result, *wide, now)),
        Show::Describe => sink.put(&render::describe_text(
            &result["pod"],
            &result["events"],
            now,
        )),
        Show::Events if follow => {
            for ev in result["events"].as_array().into_iter().flatten() {
                sink.put(&render::event_follow_line(ev, now));
            }
        }
        Show::Events => sink.put(&render::events_table(result, now)),
        Show::Logs => {
            if let Some(text) = result["log"].as_str() {
                sink.put(text);
            }
        }
        Show::Done(default) => {
            let message = result["message"].as_str().unwrap_or(default);
            sink.put(&format!("{message}\n"));
        }
        Show::Version => {
            let v = result["version"].as_str().unwrap_or("unknown");
            sink.put(&format!("Server Version: {v}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::thread::JoinHandle;

    use serde_json::json;

    /// A one-connection fake supervisor: records the request, sends `replies`, then closes.
    fn fake(path: &Path, replies: Vec<Value>) -> JoinHandle<Value> {
        let listener = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut w = &stream;
            for r in replies {
                w.write_all(format!("{r}\n").as_bytes()).unwrap();
            }
            serde_json::from_str(&line).unwrap()
        })
    }

    fn opts(path: &Path) -> ClientOpts {
        ClientOpts {
            socket: Some(path.to_path_buf()),
        }
    }

    fn run_cmd(cmd: Cmd) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run(cmd, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn targets_parse_pod_and_container() {
        assert_eq!(parse_target("web"), Ok(("web".into(), None)));
        assert_eq!(
            parse_target("web/app"),
            Ok(("web".into(), Some("app".into())))
        );
        for bad in ["", "/app", "web/", "a/b/c"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unreachable_supervisor_exits_2_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sock");
        let (code, out, err) = run_cmd(Cmd::Status {
            pod: None,
            output: Output::Table,
            client: opts(&path),
        });
        assert_eq!(code, 2);
        assert!(out.is_empty());
        assert!(
            err.starts_with(&format!(
                "error: cannot reach vigil at {}: ",
                path.display()
            )),
            "{err}"
        );
    }

    #[test]
    fn status_prints_a_table_from_the_reply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let server = fake(
            &path,
            vec![json!({"id": 1, "ok": true, "result": {"pods": [{
                "name": "web", "phase": "Running", "created_at": "2000-01-01T00:00:00Z",
                "conditions": [], "init_containers": [],
                "containers": [{"name": "app", "ready": true, "restart_count": 0,
                                "state": {"running": {"started_at": "2000-01-01T00:00:00Z"}},
                                "last_state": {}}]}]}})],
        );
        let (code, out, err) = run_cmd(Cmd::Status {
            pod: Some("web".into()),
            output: Output::Table,
            client: opts(&path),
        });
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(
            out.starts_with("NAME   READY   STATUS    RESTARTS   AGE\nweb    1/1     Running   0"),
            "{out}"
        );
        assert_eq!(
            server.join().unwrap(),
            json!({"id": 1, "cmd": "status", "pod": "web"})
        );
    }

    #[test]
    fn json_output_prints_the_result_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(
            &path,
            vec![json!({"id": 1, "ok": true, "result": {"pods": []}})],
        );
        let (code, out, _) = run_cmd(Cmd::Status {
            pod: None,
            output: Output::Json,
            client: opts(&path),
        });
        assert_eq!(code, 0);
        assert_eq!(
            serde_json::from_str::<Value>(&out).unwrap(),
            json!({"pods": []})
        );
    }

    #[test]
    fn refused_request_exits_1_with_the_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let server = fake(
            &path,
            vec![
                json!({"id": 1, "ok": false, "error": {"kind": "permission_denied",
                        "message": "uid 1000 may not stop pods"}}),
            ],
        );
        let (code, out, err) = run_cmd(Cmd::Stop {
            target: "web/app".into(),
            client: opts(&path),
        });
        assert_eq!(code, 1);
        assert!(out.is_empty());
        assert_eq!(err, "error: uid 1000 may not stop pods\n");
        assert_eq!(
            server.join().unwrap(),
            json!({"id": 1, "cmd": "stop", "pod": "web", "container": "app"})
        );
    }

    #[test]
    fn bad_target_is_a_usage_error() {
        let (code, _, err) = run_cmd(Cmd::Restart {
            target: "a/b/c".into(),
            client: ClientOpts { socket: None },
        });
        assert_eq!(code, 1);
        assert!(err.contains("POD or POD/CONTAINER"), "{err}");
    }

    #[test]
    fn events_follow_streams_until_eof() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let ev = |reason: &str| {
            json!({"id": 1, "ok": true, "event": {"type": "Normal", "reason": reason,
                   "object": "web/app", "message": "m", "count": 1,
                   "first_timestamp": "2000-01-01T00:00:00Z",
                   "last_timestamp": "2000-01-01T00:00:00Z"}})
        };
        let server = fake(&path, vec![ev("Started"), ev("Killing")]);
        let (code, out, _) = run_cmd(Cmd::Events {
            follow: true,
            output: Output::Json,
            client: opts(&path),
        });
        assert_eq!(code, 0);
        let reasons: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["reason"].clone())
            .collect();
        assert_eq!(reasons, vec![json!("Started"), json!("Killing")]);
        assert_eq!(
            server.join().unwrap(),
            json!({"id": 1, "cmd": "events", "follow": true})
        );
    }

    #[test]
    fn logs_print_chunks_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let server = fake(
            &path,
            vec![
                json!({"id": 1, "ok": true, "log": "one\n"}),
                json!({"id": 1, "ok": true, "log": "two\n"}),
            ],
        );
        let (code, out, _) = run_cmd(Cmd::Logs {
            target: "web".into(),
            follow: true,
            tail: Some(5),
            previous: false,
            client: opts(&path),
        });
        assert_eq!((code, out.as_str()), (0, "one\ntwo\n"));
        assert_eq!(
            server.join().unwrap(),
            json!({"id": 1, "cmd": "logs", "pod": "web", "follow": true, "tail": 5,
                   "previous": false})
        );
    }

    #[test]
    fn version_prints_client_and_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(
            &path,
            vec![json!({"id": 1, "ok": true, "result": {"version": "9.9.9"}})],
        );
        let (code, out, _) = run_cmd(Cmd::Version {
            client: opts(&path),
        });
        assert_eq!(code, 0);
        assert_eq!(
            out,
            format!(
                "Client Version: {}\nServer Version: 9.9.9\n",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn closing_without_an_answer_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(&path, vec![]);
        let (code, _, err) = run_cmd(Cmd::Reload {
            client: opts(&path),
        });
        assert_eq!(code, 1);
        assert!(err.contains("without answering"), "{err}");
    }
}
