//! The client: one request over the control socket and printing the answer.
//!
//! Owns the exchange (connect, send, read reply lines until the answer or the end of a stream)
//! and choosing how to show each reply. It takes a [`ClientCommand`] the CLI built (it knows
//! nothing of argv or clap) and reads every reply into the [`wire`] types, so a reply missing a
//! field or carrying an unknown kind fails loudly as an unreadable reply instead of printing
//! blanks. It makes no lifecycle decision; tables and `describe` come from [`text`], and
//! `start`/`stop`/`restart --wait` is decided by the server (the request's `wait_ms`, judged
//! by [`wire::wait`] beside the status types): the client prints the verdict. Exit codes (docs/interface.md §1.3): 0 success, 1 error reported by the
//! supervisor or bad usage, 2 supervisor unreachable.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::follow;
use super::protocol::RequestCmd;
use super::text;
use super::wire;
use super::wire::commands::Render;
use crate::format;

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
    #[error(
        "no reply from vigil at {} within {} (is it stuck? {})",
        path.display(),
        format::seconds(after.as_secs_f64()),
        match pid { Some(p) => format!("its pid is {p}"), None => "its pid is unknown".to_string() }
    )]
    Stuck {
        path: PathBuf,
        pid: Option<i32>,
        after: Duration,
    },
    #[error(
        "vigil at {} closed the connection before the reply was whole ({bytes} bytes of a line); \
         vigil may have been upgraded (`vigil upgrade` closes connections): run the command again",
        path.display()
    )]
    CutShort { path: PathBuf, bytes: usize },
    #[error("vigil at {} sent an unreadable reply: {source}", path.display())]
    BadReply {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("vigil at {} sent a reply this client does not understand: {what}", path.display())]
    OddReply { path: PathBuf, what: String },
}

impl ClientError {
    fn exit_code(&self) -> i32 {
        match self {
            ClientError::Connect { .. } => 2,
            _ => 1,
        }
    }
}

/// How the answer is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// kubectl-style tables and text.
    #[default]
    Table,
    /// Tables with PID, MEMORY and CPU.
    Wide,
    /// The reply's JSON (`status`, `describe`: pretty; events: one object a line).
    Json,
}

/// Whether stdout is a terminal: container output is escaped for one (terminal control
/// sequences shown, not run) and passed through byte for byte otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    Yes,
    No,
}

/// One client command, as the CLI built it: where to connect, what to ask, how to show it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCommand {
    pub socket: PathBuf,
    pub request: RequestCmd,
    pub output: Output,
    /// For `start`/`stop`/`restart`: the reply waits up to this long for the target to reach
    /// the state asked for (sent as `wait_ms`; the server decides, see [`wire::wait`]).
    pub wait: Option<Duration>,
    /// For `logs`: the pods whose every container is shown, each line prefixed (`request`
    /// is then the template: its `pod` and `container` are replaced for each).
    pub several: Option<Several>,
}

/// `vigil logs --all` or `vigil logs POD POD…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Several {
    All,
    Pods(Vec<String>),
}

/// Runs one client command against stdout/stderr; returns the exit code.
pub fn main(cmd: ClientCommand) -> i32 {
    use std::io::IsTerminal as _;
    let stdout = io::stdout();
    let terminal = if stdout.is_terminal() {
        Terminal::Yes
    } else {
        Terminal::No
    };
    let stderr = io::stderr();
    run(&cmd, terminal, &mut stdout.lock(), &mut stderr.lock())
}

/// Runs one client command, writing to `out` / `err`; returns the exit code.
pub fn run(
    cmd: &ClientCommand,
    terminal: Terminal,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    if cmd.request == RequestCmd::Version {
        let _ = writeln!(out, "Client Version: {}", env!("CARGO_PKG_VERSION"));
    }
    if let Some(several) = &cmd.several {
        return report(logs_of_several(cmd, several, terminal, out, err), err);
    }
    if following(&cmd.request) {
        return report(follow_one(cmd, terminal, out, err), err);
    }
    if matches!(cmd.request, RequestCmd::Health { .. }) {
        return report(health(cmd, out, err), err);
    }
    if let RequestCmd::Wait {
        timeout_seconds, ..
    } = &cmd.request
    {
        let timeout = timeout_seconds.map_or(Duration::from_secs(30), |t| t.0);
        return report(wait_for(cmd, timeout, out, err), err);
    }
    report(exchange(cmd, terminal, out), err)
}

/// The exit code of an outcome, with its message on `err`.
fn report(result: Result<Outcome, ClientError>, err: &mut dyn Write) -> i32 {
    match result {
        Ok(Outcome::Done) => 0,
        Ok(Outcome::Unhealthy) => 1,
        Ok(Outcome::Failed(message)) => {
            let _ = writeln!(err, "error: {message}");
            1
        }
        Ok(Outcome::Refused(e)) => {
            log::debug!("request refused: {}", e.kind);
            let _ = writeln!(err, "error: {}", e.message);
            1
        }
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            e.exit_code()
        }
    }
}

enum Outcome {
    Done,
    /// Exit 1, what went wrong already written (`vigil health`: the pods that are not).
    Unhealthy,
    Refused(wire::ErrorBody),
    /// `--wait` ended without the state asked for (timed out, or the target failed).
    Failed(String),
}

/// `vigil health`: one small request; exit 0 when every pod judged is Ready or Completed
/// (a summary on stdout), else 1 with one line per other pod on stderr (`web: CrashLoopBackOff
/// (web/app): back-off 40s restarting failed container`). With `-o json`, the reply on
/// stdout, and the same exit code.
fn health(
    cmd: &ClientCommand,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Outcome, ClientError> {
    let path = cmd.socket.as_path();
    let raw = match one_result_raw(cmd, REPLY_TIMEOUT)? {
        Ok(raw) => raw,
        Err(e) => return Ok(Outcome::Refused(e)),
    };
    let reply: wire::HealthReply = read_json(path, raw.get())?;
    if cmd.output == Output::Json {
        let text = serde_json::to_string_pretty(&reply).unwrap_or_default();
        let _ = writeln!(out, "{text}");
    } else if reply.healthy {
        let _ = writeln!(
            out,
            "healthy: {} ready, {} completed",
            plural(reply.ready, "pod"),
            reply.completed
        );
    } else {
        for p in &reply.unhealthy {
            verdict_line(err, &p.pod, &p.object, p.state.as_str(), &p.message);
        }
        let _ = writeln!(
            err,
            "unhealthy: {} of {} not ready or completed",
            reply.unhealthy.len(),
            plural(reply.ready + reply.completed + reply.unhealthy.len(), "pod")
        );
    }
    Ok(if reply.healthy {
        Outcome::Done
    } else {
        Outcome::Unhealthy
    })
}

/// `vigil wait`: one request the server answers once every pod meets the condition or the
/// timeout has passed (the reply may take that long: the client waits a minute more). Met:
/// `pod/web condition met` per pod (kubectl wait's words), exit 0; else exit 1 with what each
/// pod not there yet is waiting for.
fn wait_for(
    cmd: &ClientCommand,
    timeout: Duration,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Outcome, ClientError> {
    let path = cmd.socket.as_path();
    let raw = match one_result_raw(cmd, timeout.saturating_add(REPLY_TIMEOUT))? {
        Ok(raw) => raw,
        Err(e) => return Ok(Outcome::Refused(e)),
    };
    let reply: wire::WaitReply = read_json(path, raw.get())?;
    if cmd.output == Output::Json {
        let text = serde_json::to_string_pretty(&reply).unwrap_or_default();
        let _ = writeln!(out, "{text}");
    } else if reply.met {
        for p in &reply.pods {
            let _ = writeln!(out, "pod/{} condition met", format::cell(&p.pod));
        }
    } else {
        let waiting: Vec<&wire::WaitPod> = reply.pods.iter().filter(|p| !p.met).collect();
        let names: Vec<String> = waiting
            .iter()
            .map(|p| format!("pods/{}", format::cell(&p.pod)))
            .collect();
        let _ = writeln!(
            err,
            "error: timed out after {} waiting for the condition ({}) on {}",
            format::go_duration(timeout),
            reply.condition.as_str(),
            names.join(", ")
        );
        for p in waiting {
            verdict_line(err, &p.pod, &p.object, p.state.as_str(), &p.message);
        }
    }
    Ok(if reply.met {
        Outcome::Done
    } else {
        Outcome::Unhealthy
    })
}

/// `1 pod`, `3 pods`.
/// One pod's verdict on stderr (`vigil health`, a `vigil wait` that timed out): `web:
/// CrashLoopBackOff (web/app): why`, the container only when it is not the pod itself.
fn verdict_line(err: &mut dyn Write, pod: &str, object: &str, state: &str, message: &str) {
    let about = if object == pod {
        String::new()
    } else {
        format!(" ({})", format::cell(object))
    };
    let _ = writeln!(
        err,
        "{}: {state}{about}: {}",
        format::cell(pod),
        format::cell(message)
    );
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("{n} {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Sends `cmd.request` and reads the one reply: its `result`, or the refusal.
pub(crate) fn one_result(
    cmd: &ClientCommand,
) -> Result<Result<Value, wire::ErrorBody>, ClientError> {
    let path = cmd.socket.as_path();
    match one_result_raw(cmd, REPLY_TIMEOUT)? {
        Ok(raw) => Ok(Ok(read_json(path, raw.get())?)),
        Err(e) => Ok(Err(e)),
    }
}

/// [`one_result`] with the result still as JSON text (read into its type by the caller).
fn one_result_raw(
    cmd: &ClientCommand,
    timeout: Duration,
) -> Result<Result<Box<RawValue>, wire::ErrorBody>, ClientError> {
    let path = cmd.socket.as_path();
    let io_err = |source| ClientError::Exchange {
        path: path.to_path_buf(),
        source,
    };
    let stream = UnixStream::connect(path).map_err(|source| ClientError::Connect {
        path: path.to_path_buf(),
        source,
    })?;
    stream.set_read_timeout(Some(timeout)).map_err(io_err)?;
    (&stream)
        .write_all(request_line(&cmd.request, cmd.wait).as_bytes())
        .map_err(io_err)?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut buf = String::new();
    let n = BufReader::new(&stream)
        .read_line(&mut buf)
        .map_err(|source| match source.kind() {
            // SO_RCVTIMEO ran out (socket(7): EAGAIN, or EWOULDBLOCK).
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => ClientError::Stuck {
                path: path.to_path_buf(),
                pid: peer_pid(&stream),
                after: timeout,
            },
            _ => io_err(source),
        })?;
    if n == 0 {
        return Err(ClientError::NoReply {
            path: path.to_path_buf(),
        });
    }
    whole_line(path, &buf)?;
    let reply: wire::ReplyLine = read_json(path, &buf)?;
    match (reply.ok, reply.result, reply.error) {
        (true, Some(v), _) => Ok(Ok(v.to_owned())),
        (false, _, Some(e)) => Ok(Err(e)),
        (true, None, _) => Err(ClientError::OddReply {
            path: path.to_path_buf(),
            what: "\"ok\": true without a \"result\"".to_string(),
        }),
        (false, _, None) => Err(ClientError::OddReply {
            path: path.to_path_buf(),
            what: "\"ok\": false without an \"error\"".to_string(),
        }),
    }
}

/// The pid of the process at the other end of `stream`, as the kernel recorded it at
/// `connect` (`SO_PEERCRED`, unix(7)): the supervisor that does not answer.
fn peer_pid(stream: &UnixStream) -> Option<i32> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    getsockopt(stream, PeerCredentials)
        .ok()
        .map(|c| c.pid())
        .filter(|&p| p > 0)
}

/// `events -f` or `logs -f` of one container: printed as it comes, across reconnections.
fn follow_one(
    cmd: &ClientCommand,
    terminal: Terminal,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Outcome, ClientError> {
    let mut sink = Sink { out, closed: false };
    let events_as = if cmd.output == Output::Json {
        follow::EventsAs::Json
    } else {
        follow::EventsAs::Rows
    };
    if events_as == follow::EventsAs::Rows && matches!(cmd.request, RequestCmd::Events { .. }) {
        sink.put(&text::event_follow_header());
    }
    let end = follow::follow(
        &cmd.socket,
        &cmd.request,
        events_as,
        terminal,
        false,
        &mut |item| {
            match item {
                follow::Item::Text(t) => sink.put(&t),
                follow::Item::Note(n) => {
                    let _ = writeln!(err, "vigil: {n}");
                }
            }
            !sink.closed
        },
    )?;
    Ok(match end {
        follow::End::Done => Outcome::Done,
        follow::End::Refused(e) => Outcome::Refused(e),
    })
}

/// `vigil logs --all` / `vigil logs POD POD…` (with or without `-f`): every container of
/// those pods, each line prefixed with its `pod/container` ([`follow::Prefixer`]). Followed,
/// one stream a container on a thread each, printed here as lines come; without `-f`, one
/// container after the other.
fn logs_of_several(
    cmd: &ClientCommand,
    several: &Several,
    terminal: Terminal,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<Outcome, ClientError> {
    let path = cmd.socket.as_path();
    let status = ClientCommand {
        socket: cmd.socket.clone(),
        request: RequestCmd::Status { pod: None },
        output: Output::Json,
        wait: None,
        several: None,
    };
    let reply = match one_result(&status)? {
        Ok(v) => typed::<wire::StatusReply>(path, &v)?,
        Err(e) => return Ok(Outcome::Refused(e)),
    };
    let pods: Vec<&wire::Pod> = match several {
        Several::All => reply.pods.iter().collect(),
        Several::Pods(names) => {
            let mut chosen = Vec::new();
            for name in names {
                match reply.pods.iter().find(|p| &p.name == name) {
                    Some(p) => chosen.push(p),
                    None => {
                        let near = crate::config::values::closest_name(
                            name,
                            reply.pods.iter().map(|p| p.name.as_str()),
                        );
                        return Ok(Outcome::Failed(match near {
                            Some(n) => format!("no pod named \"{name}\" (did you mean \"{n}\"?)"),
                            None => format!("no pod named \"{name}\""),
                        }));
                    }
                }
            }
            chosen
        }
    };
    let targets: Vec<(String, String)> = pods
        .iter()
        .flat_map(|p| {
            p.init_containers
                .iter()
                .chain(&p.containers)
                .map(|c| (p.name.clone(), c.name.clone()))
        })
        .collect();
    if targets.is_empty() {
        return Ok(Outcome::Failed("no containers to show".to_string()));
    }
    let names: Vec<String> = targets.iter().map(|(p, c)| format!("{p}/{c}")).collect();
    let mut prefixer = follow::Prefixer::new(&names, follow::use_colour(terminal));
    let request_for = |pod: &str, container: &str| {
        let mut r = cmd.request.clone();
        if let RequestCmd::Logs {
            pod: p,
            container: c,
            ..
        } = &mut r
        {
            *p = pod.to_string();
            *c = Some(container.to_string());
        }
        r
    };
    let mut sink = Sink { out, closed: false };
    if !following(&cmd.request) {
        for (i, (pod, container)) in targets.iter().enumerate() {
            let one = ClientCommand {
                socket: cmd.socket.clone(),
                request: request_for(pod, container),
                output: Output::Table,
                wait: None,
                several: None,
            };
            match one_result(&one)? {
                Ok(v) => {
                    let reply = typed::<wire::LogsReply>(path, &v)?;
                    let text = match terminal {
                        Terminal::Yes => format::escape_controls(&reply.log, "\n\t").into_owned(),
                        Terminal::No => reply.log,
                    };
                    let mut lines = prefixer.push(i, &text);
                    lines.push_str(&prefixer.finish(i));
                    sink.put(&lines);
                }
                // A container that has not run has nothing to show.
                Err(e) if e.kind == wire::ErrorKind::NotFound => {}
                Err(e) => return Ok(Outcome::Refused(e)),
            }
        }
        return Ok(Outcome::Done);
    }
    let (tx, rx) = std::sync::mpsc::channel::<(usize, Option<follow::Item>, Option<String>)>();
    for (i, (pod, container)) in targets.iter().enumerate() {
        let tx = tx.clone();
        let socket = cmd.socket.clone();
        let request = request_for(pod, container);
        std::thread::spawn(move || {
            let mut emit = |item| tx.send((i, Some(item), None)).is_ok();
            let end = follow::follow(
                &socket,
                &request,
                follow::EventsAs::Rows,
                terminal,
                true,
                &mut emit,
            );
            let why = match end {
                Ok(follow::End::Done) => None,
                Ok(follow::End::Refused(e)) => Some(e.message),
                Err(e) => Some(e.to_string()),
            };
            let _ = tx.send((i, None, why));
        });
    }
    drop(tx);
    let mut last_note = String::new();
    let mut failed = None;
    for (i, item, ended) in rx {
        match item {
            Some(follow::Item::Text(t)) => sink.put(&prefixer.push(i, &t)),
            // Every stream notices vigil going away: say it once.
            Some(follow::Item::Note(n)) if n != last_note => {
                let _ = writeln!(err, "vigil: {n}");
                last_note = n;
            }
            Some(follow::Item::Note(_)) => {}
            None => {
                sink.put(&prefixer.finish(i));
                if let Some(why) = ended {
                    let _ = writeln!(err, "{}: {why}", names[i]);
                    failed = Some(why);
                }
            }
        }
        if sink.closed {
            return Ok(Outcome::Done);
        }
    }
    Ok(match failed {
        Some(why) => Outcome::Failed(format!("a log stream ended: {why}")),
        None => Outcome::Done,
    })
}

fn following(request: &RequestCmd) -> bool {
    matches!(
        request,
        RequestCmd::Events { follow: true, .. } | RequestCmd::Logs { follow: true, .. }
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

    /// Container output: escaped for a terminal, verbatim otherwise.
    fn put_log(&mut self, chunk: &str, terminal: Terminal) {
        match terminal {
            Terminal::Yes => self.put(&format::escape_controls(chunk, "\n\t")),
            Terminal::No => self.put(chunk),
        }
    }

    /// One JSON value on one line.
    fn put_json_line(&mut self, v: &Value) {
        self.put(&format!("{v}\n"));
    }
}

/// Reads `v` as the reply type `T`; a missing or mistyped field is an unreadable reply.
pub(crate) fn typed<T: DeserializeOwned>(path: &Path, v: &Value) -> Result<T, ClientError> {
    T::deserialize(v).map_err(|source| ClientError::BadReply {
        path: path.to_path_buf(),
        source,
    })
}

/// [`typed`] for JSON still as text (a reply line, or a `result` in it): read straight into
/// `T`, no tree of values first.
fn read_json<'a, T: serde::Deserialize<'a>>(path: &Path, text: &'a str) -> Result<T, ClientError> {
    serde_json::from_str(text).map_err(|source| ClientError::BadReply {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes the request line; for a one-shot request, then closes the writing side: the
/// supervisor sees the end of requests with the request itself and closes its side in the
/// turn that answers it, instead of being woken once more by this process's exit to do it
/// (docs/interface.md §2.1). A follow request keeps it open (§2.4: the stream lasts as long
/// as the connection). A failed `shutdown` only loses that: the reply still decides.
pub(super) fn send_request(
    mut stream: &UnixStream,
    request: &RequestCmd,
    follow: bool,
) -> io::Result<()> {
    stream.write_all(request_line(request, None).as_bytes())?;
    if !follow {
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    Ok(())
}

/// The request line: `id` 1, the request's fields and `wait_ms`, serialized straight to text.
fn request_line(request: &RequestCmd, wait: Option<Duration>) -> String {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        id: u32,
        #[serde(flatten)]
        request: &'a RequestCmd,
        #[serde(skip_serializing_if = "Option::is_none")]
        wait_ms: Option<u64>,
    }
    let wait_ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
    match serde_json::to_string(&Line {
        id: 1,
        request,
        wait_ms,
    }) {
        Ok(mut line) => {
            line.push('\n');
            line
        }
        // A struct of strings, numbers and booleans always serializes.
        Err(e) => unreachable!("a request did not serialize: {e}"),
    }
}

/// A reply line read up to EOF without its newline was cut short (the connection closed
/// mid-reply, as `vigil upgrade` does to a reply it could not finish sending).
fn whole_line(path: &Path, line: &str) -> Result<(), ClientError> {
    if line.ends_with('\n') {
        Ok(())
    } else {
        Err(ClientError::CutShort {
            path: path.to_path_buf(),
            bytes: line.len(),
        })
    }
}

fn exchange(
    cmd: &ClientCommand,
    terminal: Terminal,
    out: &mut dyn Write,
) -> Result<Outcome, ClientError> {
    let path = cmd.socket.as_path();
    // With `wait_ms` the server answers once the wait is over.
    let timeout = REPLY_TIMEOUT.saturating_add(cmd.wait.unwrap_or_default());
    let result = match one_result_raw(cmd, timeout)? {
        Ok(result) => result,
        Err(e) => return Ok(Outcome::Refused(e)),
    };
    let mut sink = Sink { out, closed: false };
    show_result(&mut sink, path, cmd, terminal, &result, SystemTime::now())?;
    if cmd.wait.is_none() || wire::wait::Target::of(&cmd.request).is_none() {
        return Ok(Outcome::Done);
    }
    // The server decided the wait (control/wire/wait.rs); this prints its verdict.
    let reply: wire::MessageReply = read_json(path, result.get())?;
    match reply.wait {
        Some(wire::WaitOutcome::Reached) => {
            sink.put(&format!("{}: done\n", cmd.request.name()));
            Ok(Outcome::Done)
        }
        Some(wire::WaitOutcome::Failed { why } | wire::WaitOutcome::TimedOut { why }) => Ok(
            Outcome::Failed(format::escape_controls(&why, "").into_owned()),
        ),
        None => Ok(Outcome::Failed(
            "vigil answered without waiting for the state asked for".to_string(),
        )),
    }
}

/// Shows a `result`: it is read into the reply type the request expects first, so `-o json`
/// too fails loudly on a reply this client cannot read.
fn show_result(
    sink: &mut Sink,
    path: &Path,
    cmd: &ClientCommand,
    terminal: Terminal,
    result: &RawValue,
    now: SystemTime,
) -> Result<(), ClientError> {
    let json = cmd.output == Output::Json;
    let pretty = |sink: &mut Sink| -> Result<(), ClientError> {
        let text = serde_json::to_string_pretty(&read_json::<Value>(path, result.get())?)
            .unwrap_or_default();
        sink.put(&format!("{text}\n"));
        Ok(())
    };
    match cmd.request.def().render {
        Render::Status => {
            let reply: wire::StatusReply = read_json(path, result.get())?;
            if json {
                pretty(sink)?;
            } else {
                sink.put(&text::status_table(&reply, cmd.output == Output::Wide, now));
            }
        }
        Render::Describe => {
            let reply: wire::DescribeReply = read_json(path, result.get())?;
            if json {
                pretty(sink)?;
            } else {
                sink.put(&text::describe_text(&reply, now));
            }
        }
        Render::Events => {
            let reply: wire::EventsReply = read_json(path, result.get())?;
            if json {
                // One object a line, what `jq` and log shippers read.
                let all = read_json::<Value>(path, result.get())?;
                for ev in all["events"].as_array().into_iter().flatten() {
                    sink.put_json_line(ev);
                }
            } else if following(&cmd.request) {
                for ev in &reply.events {
                    sink.put(&text::event_follow_line(ev, now));
                }
            } else {
                sink.put(&text::events_table(&reply.events, now));
            }
        }
        Render::Logs => {
            let reply: wire::LogsReply = read_json(path, result.get())?;
            sink.put_log(&reply.log, terminal);
        }
        Render::Version => {
            let reply: wire::VersionReply = read_json(path, result.get())?;
            sink.put(&format!(
                "Server Version: {}\n",
                format::cell(&reply.version)
            ));
        }
        Render::Metrics => {
            let reply: wire::MetricsReply = read_json(path, result.get())?;
            if json {
                pretty(sink)?;
            } else {
                // Written by vigil, but shown on a terminal: control characters other than
                // line feeds are escaped (label values escape line feeds themselves).
                sink.put(&format::escape_controls(&reply.text, "\n"));
            }
        }
        Render::Wait => {
            let reply: wire::WaitReply = read_json(path, result.get())?;
            let text = serde_json::to_string_pretty(&reply).unwrap_or_default();
            sink.put(&format!("{text}\n"));
        }
        Render::Health => {
            let reply: wire::HealthReply = read_json(path, result.get())?;
            let text = serde_json::to_string_pretty(&reply).unwrap_or_default();
            sink.put(&format!("{text}\n"));
        }
        Render::Message => {
            let reply: wire::MessageReply = read_json(path, result.get())?;
            sink.put(&format!(
                "{}\n",
                format::escape_controls(&reply.message, "\n\t")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::thread::JoinHandle;
    use std::time::Instant;

    use serde_json::json;

    use crate::control::render::{self, Secrets, fixtures::*};
    use crate::control::wire::wait::{Progress, reached};

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

    fn command(path: &Path, request: RequestCmd, output: Output) -> ClientCommand {
        ClientCommand {
            socket: path.to_path_buf(),
            request,
            output,
            wait: None,
            several: None,
        }
    }

    fn run_in(cmd: ClientCommand, terminal: Terminal) -> (i32, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = run(&cmd, terminal, &mut out, &mut err);
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    fn run_cmd(cmd: ClientCommand) -> (i32, String, String) {
        run_in(cmd, Terminal::No)
    }

    /// A complete `status` result as the server renders it.
    fn status_result() -> Value {
        let mono = Instant::now();
        wire::to_json(&render::status(
            &[sample_pod(mono)],
            &observed(),
            &clock(mono),
            Secrets::Shown,
        ))
        .unwrap()
    }

    fn ok(result: Value) -> Value {
        json!({"id": 1, "ok": true, "result": result})
    }

    #[test]
    fn unreachable_supervisor_exits_2_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sock");
        let (code, out, err) = run_cmd(command(
            &path,
            RequestCmd::Status { pod: None },
            Output::Table,
        ));
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
    fn a_reply_cut_short_by_a_closed_connection_is_a_clear_error_not_an_unreadable_reply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            // Half a line, then the connection closes (as at `vigil upgrade`).
            (&stream)
                .write_all(br#"{"id":1,"ok":true,"result":{"pods":[{"na"#)
                .unwrap();
        });
        let (code, out, err) = run_cmd(command(
            &path,
            RequestCmd::Status { pod: None },
            Output::Table,
        ));
        assert_eq!(code, 1);
        assert!(out.is_empty(), "{out}");
        assert!(
            err.contains("closed the connection before the reply was whole")
                && err.contains("vigil may have been upgraded"),
            "{err}"
        );
        server.join().unwrap();
    }

    #[test]
    fn status_prints_a_table_from_the_reply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let server = fake(&path, vec![ok(status_result())]);
        let (code, out, err) = run_cmd(command(
            &path,
            RequestCmd::Status {
                pod: Some("web".into()),
            },
            Output::Table,
        ));
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(
            out.starts_with("NAME   READY   STATUS             RESTARTS")
                && out.contains("\nweb    1/2     CrashLoopBackOff   3 ("),
            "{out}"
        );
        assert_eq!(
            server.join().unwrap(),
            json!({"id": 1, "cmd": "status", "pod": "web"})
        );
    }

    #[test]
    fn a_reply_missing_or_renaming_a_field_fails_loudly() {
        let dir = tempfile::tempdir().unwrap();
        // Each case: a path to a field of the first container, removed or renamed.
        let cases: [(&[&str], Option<&str>); 6] = [
            (&["restart_count"], None),
            (&["restart_count"], Some("restarts")),
            (&["state", "waiting", "reason"], Some("why")),
            (&["pid"], None),
            (&["resources", "memory_current"], None),
            (&["spec", "env"], Some("environment")),
        ];
        for (i, (field, rename)) in cases.iter().enumerate() {
            let mut result = status_result();
            let (last, parents) = field.split_last().unwrap();
            let mut obj = &mut result["pods"][0]["containers"][0];
            for p in parents {
                obj = &mut obj[*p];
            }
            let map = obj.as_object_mut().unwrap();
            let value = map.remove(*last).unwrap();
            if let Some(new) = rename {
                map.insert(new.to_string(), value);
            }
            for output in [Output::Table, Output::Json] {
                let path = dir.path().join(format!("s{i}{output:?}.sock"));
                let _server = fake(&path, vec![ok(result.clone())]);
                let (code, out, err) =
                    run_cmd(command(&path, RequestCmd::Status { pod: None }, output));
                assert_eq!(code, 1, "{field:?} {rename:?}: {out}");
                assert!(out.is_empty(), "{field:?}: printed {out}");
                assert!(
                    err.contains("sent an unreadable reply") && err.contains(*last),
                    "{field:?} {rename:?}: {err}"
                );
            }
        }
    }

    #[test]
    fn an_unknown_state_or_error_kind_fails_loudly() {
        let dir = tempfile::tempdir().unwrap();
        let mut result = status_result();
        result["pods"][0]["containers"][0]["state"] = json!({"sleeping": {}});
        let path = dir.path().join("a.sock");
        let _server = fake(&path, vec![ok(result)]);
        let (code, _, err) = run_cmd(command(
            &path,
            RequestCmd::Status { pod: None },
            Output::Table,
        ));
        assert_eq!(code, 1);
        assert!(err.contains("sleeping"), "{err}");

        let path = dir.path().join("b.sock");
        let _server = fake(
            &path,
            vec![json!({"id": 1, "ok": false, "error": {"kind": "nope", "message": "m"}})],
        );
        let (code, _, err) = run_cmd(command(&path, RequestCmd::Reload, Output::Table));
        assert_eq!(code, 1);
        assert!(
            err.contains("unreadable reply") && err.contains("nope"),
            "{err}"
        );

        let path = dir.path().join("c.sock");
        let _server = fake(&path, vec![json!({"id": 1, "ok": true})]);
        let (code, _, err) = run_cmd(command(&path, RequestCmd::Reload, Output::Table));
        assert_eq!(code, 1);
        assert!(err.contains("does not understand"), "{err}");
    }

    #[test]
    fn json_output_prints_the_result_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(&path, vec![ok(json!({"pods": []}))]);
        let (code, out, _) = run_cmd(command(
            &path,
            RequestCmd::Status { pod: None },
            Output::Json,
        ));
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
        let (code, out, err) = run_cmd(command(
            &path,
            RequestCmd::Stop {
                pod: "web".into(),
                container: Some("app".into()),
            },
            Output::Table,
        ));
        assert_eq!(code, 1);
        assert!(out.is_empty());
        assert_eq!(err, "error: uid 1000 may not stop pods\n");
        assert_eq!(
            server.join().unwrap(),
            json!({"id": 1, "cmd": "stop", "pod": "web", "container": "app"})
        );
    }

    fn event(reason: &str) -> Value {
        json!({"seq": 1, "type": "Normal", "reason": reason, "object": "web/app",
               "message": "m", "count": 1, "first_timestamp": "2000-01-01T00:00:00Z",
               "last_timestamp": "2000-01-01T00:00:00Z"})
    }

    /// A fake supervisor serving one connection per entry of `sessions` in turn: records
    /// each request, sends that session's replies, then closes.
    fn fake_sessions(path: &Path, sessions: Vec<Vec<Value>>) -> JoinHandle<Vec<Value>> {
        let listener = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let mut requests = Vec::new();
            for replies in sessions {
                let (stream, _) = listener.accept().unwrap();
                let mut line = String::new();
                BufReader::new(&stream).read_line(&mut line).unwrap();
                let mut w = &stream;
                for r in replies {
                    w.write_all(format!("{r}\n").as_bytes()).unwrap();
                }
                requests.push(serde_json::from_str(&line).unwrap());
            }
            requests
        })
    }

    fn event_seq(reason: &str, seq: u64) -> Value {
        let mut e = event(reason);
        e["seq"] = json!(seq);
        json!({"id": 1, "ok": true, "event": e})
    }

    fn gone() -> Value {
        json!({"id": 1, "ok": false, "error": {"kind": "not_found", "message": "gone"}})
    }

    #[test]
    fn events_follow_reconnects_when_vigil_goes_away_and_resumes_after_the_last_seq() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let upgrade_notice = json!({"id": null, "ok": false, "error": {"kind": "busy",
            "message": "vigil re-executed itself (upgrade): this connection is closed; connect again"}});
        let server = fake_sessions(
            &path,
            vec![
                // The stream, then the upgrade's notice.
                vec![
                    json!({"id": 1, "ok": true, "history": "77"}),
                    event_seq("Started", 3),
                    event_seq("Killing", 4),
                    upgrade_notice,
                ],
                // The new vigil: the connection just ends (a crash).
                vec![
                    json!({"id": 1, "ok": true, "history": "77"}),
                    event_seq("Pulled", 5),
                ],
                // Then a refusal ends the command.
                vec![gone()],
            ],
        );
        let (code, out, err) = run_cmd(command(
            &path,
            RequestCmd::Events {
                follow: true,
                pod: None,
                after: None,
                history: None,
            },
            Output::Json,
        ));
        assert_eq!(code, 1, "{err}");
        let seqs: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].clone())
            .collect();
        assert_eq!(seqs, vec![json!(3), json!(4), json!(5)]);
        assert_eq!(
            server.join().unwrap(),
            vec![
                json!({"id": 1, "cmd": "events", "follow": true}),
                json!({"id": 1, "cmd": "events", "follow": true, "after": 4, "history": "77"}),
                json!({"id": 1, "cmd": "events", "follow": true, "after": 5, "history": "77"}),
            ]
        );
        assert!(
            err.contains("vigil went away (vigil re-executed itself (upgrade)")
                && err.contains("reconnecting for up to 1m0s")
                && err.contains("vigil is back: going on after event 4")
                && err.ends_with("error: gone\n"),
            "{err}"
        );
    }

    #[test]
    fn a_follower_says_which_events_a_crash_of_vigil_lost() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake_sessions(
            &path,
            vec![
                vec![
                    json!({"id": 1, "ok": true, "history": "7"}),
                    event_seq("A", 5),
                ],
                vec![
                    json!({"id": 1, "ok": true, "history": "9",
                           "lost": {"after": 3, "through": 5}}),
                    event_seq("Adopted", 4),
                    gone(),
                ],
            ],
        );
        let (code, out, err) = run_cmd(command(
            &path,
            RequestCmd::Events {
                follow: true,
                pod: None,
                after: None,
                history: None,
            },
            Output::Json,
        ));
        assert_eq!(code, 1);
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(
            err.contains("events 4…5 it had sent are not in its record"),
            "{err}"
        );
    }

    #[test]
    fn events_as_json_are_one_object_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(
            &path,
            vec![ok(json!({"events": [event("Started"), event("Killing")]}))],
        );
        let (code, out, _) = run_cmd(command(
            &path,
            RequestCmd::Events {
                follow: false,
                pod: None,
                after: None,
                history: None,
            },
            Output::Json,
        ));
        assert_eq!(code, 0);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(
            serde_json::from_str::<Value>(lines[1]).unwrap(),
            event("Killing")
        );
    }

    fn logs(follow: bool) -> RequestCmd {
        RequestCmd::Logs {
            pod: "web".into(),
            container: None,
            follow,
            tail: Some(5),
            previous: false,
            timestamps: false,
            since_seconds: None,
            since_time: None,
            ring: None,
            offset: None,
        }
    }

    #[test]
    fn logs_print_chunks_verbatim() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let server = fake_sessions(
            &path,
            vec![
                vec![
                    json!({"id": 1, "ok": true, "log": "one\n", "ring": "7", "next": 4}),
                    json!({"id": 1, "ok": true, "log": "two\x1b[31m\n", "ring": "7", "next": 13}),
                ],
                vec![
                    json!({"id": 1, "ok": true, "log": "three\n", "ring": "7", "next": 19}),
                    gone(),
                ],
            ],
        );
        let (code, out, _) = run_cmd(command(&path, logs(true), Output::Table));
        assert_eq!((code, out.as_str()), (1, "one\ntwo\x1b[31m\nthree\n"));
        assert_eq!(
            server.join().unwrap(),
            vec![
                json!({"id": 1, "cmd": "logs", "pod": "web", "follow": true, "tail": 5,
                       "previous": false}),
                // Resumed where it stood.
                json!({"id": 1, "cmd": "logs", "pod": "web", "follow": true, "tail": 5,
                       "previous": false, "ring": "7", "offset": 13}),
            ]
        );
    }

    #[test]
    fn logs_to_a_terminal_escape_control_sequences() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(
            &path,
            vec![ok(json!({"pod": "web", "container": "app",
                           "log": "title\x1b]0;owned\x07\n\tred\x1b[31m\n",
                           "dropped_bytes": 0}))],
        );
        let (code, out, _) = run_in(command(&path, logs(false), Output::Table), Terminal::Yes);
        assert_eq!(code, 0);
        assert_eq!(out, "title\\x1b]0;owned\\x07\n\tred\\x1b[31m\n");
    }

    #[test]
    fn version_prints_client_and_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(&path, vec![ok(json!({"version": "9.9.9"}))]);
        let (code, out, _) = run_cmd(command(&path, RequestCmd::Version, Output::Table));
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
    fn wait_targets_reach_their_state_or_fail_with_why() {
        let status: wire::StatusReply = serde_json::from_value(status_result()).unwrap();
        let pod = &status.pods[0];
        let target = |c: &str| (String::from("web"), Some(c.to_string()));
        let sent = SystemTime::now();
        let (p, sidecar) = target("sidecar");
        let start = RequestCmd::Start {
            pod: p.clone(),
            container: sidecar.clone(),
            ignore_dependencies: false,
        };
        assert_eq!(reached(&start, pod, sent), Progress::Reached);
        // The running sidecar started long before the request: not the restarted run yet.
        let restart = RequestCmd::Restart {
            pod: p.clone(),
            container: sidecar.clone(),
            rolling: false,
            max_unavailable: None,
        };
        assert!(matches!(reached(&restart, pod, sent), Progress::Pending(_)));
        let restart_long_ago = SystemTime::UNIX_EPOCH;
        assert_eq!(reached(&restart, pod, restart_long_ago), Progress::Reached);
        let stop = RequestCmd::Stop {
            pod: p.clone(),
            container: sidecar,
        };
        assert_eq!(
            reached(&stop, pod, sent),
            Progress::Pending("for web/sidecar to stop (it is still running)".into())
        );
        let (_, app) = target("app");
        let start_app = RequestCmd::Start {
            pod: p,
            container: app,
            ignore_dependencies: false,
        };
        match reached(&start_app, pod, sent) {
            Progress::Failed(why) => {
                assert!(why.contains("web/app is in CrashLoopBackOff"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_one_shot_request_ends_its_input_and_a_follow_request_keeps_it_open() {
        use std::io::Read as _;
        for follow in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("s.sock");
            let listener = UnixListener::bind(&path).unwrap();
            let server = std::thread::spawn(move || {
                let (stream, _) = listener.accept().unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_millis(300)))
                    .unwrap();
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                // Ok(0): the client closed its writing side; a timeout: it is still open.
                let ended = matches!(reader.read(&mut [0u8; 1]), Ok(0));
                let reply = if follow {
                    format!(
                        "{}\n{}\n",
                        json!({"id": 1, "ok": true, "event": event("Started")}),
                        gone()
                    )
                } else {
                    format!("{}\n", ok(json!({"pods": []})))
                };
                (&stream).write_all(reply.as_bytes()).unwrap();
                ended
            });
            let request = if follow {
                RequestCmd::Events {
                    follow: true,
                    pod: None,
                    after: None,
                    history: None,
                }
            } else {
                RequestCmd::Status { pod: None }
            };
            let (code, _, err) = run_cmd(command(&path, request, Output::Json));
            let expected = if follow {
                (1, "error: gone\n")
            } else {
                (0, "")
            };
            assert_eq!((code, err.as_str()), expected, "follow: {follow}");
            assert_eq!(server.join().unwrap(), !follow, "follow: {follow}");
        }
    }

    #[test]
    fn a_supervisor_that_does_not_answer_is_named_with_its_pid_not_an_os_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        // Accepts and reads, never answers (a loop stuck elsewhere: the kernel accepts for it).
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            std::thread::sleep(Duration::from_millis(800));
        });
        let cmd = command(&path, RequestCmd::Status { pod: None }, Output::Table);
        let e = one_result_raw(&cmd, Duration::from_millis(200)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "no reply from vigil at {} within 200ms (is it stuck? its pid is {})",
                path.display(),
                std::process::id()
            )
        );
        server.join().unwrap();
    }

    #[test]
    fn closing_without_an_answer_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _server = fake(&path, vec![]);
        let (code, _, err) = run_cmd(command(&path, RequestCmd::Reload, Output::Table));
        assert_eq!(code, 1);
        assert!(err.contains("without answering"), "{err}");
    }
}
