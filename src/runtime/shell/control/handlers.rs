//! The server's handler of every socket command, one function each, in a table indexed by the
//! command's row of `control::wire::commands::DEFS` ([`HANDLERS`]): the row says what the
//! command is (its arguments, access, help, rendering), the handler here what the server does
//! with it. The table lives in the shell, not in the row, because a handler reads the core
//! and the container slots and starts streams on the shell's connections, and `control` must
//! not name `runtime` (tests/floors.rs); a test fails when the table and `DEFS` disagree.
//!
//! A handler answers from the [`View`] if the command only reads (a reply, or a stream started
//! on the connection), or returns a [`Mutation`] the router carries out if it changes state.
//! The caller ([`Control::answer`](super::Control)) has already authorised and journalled the
//! request.
//!
//! Owns: the handlers and what only they use (`logs`' start, `events`' resume point).
//! Must not: change the core or the slots (read-only here, as in the rest of the component),
//! or allocate per request beyond what the reply itself needs (`status` is on the hot path).

use std::time::Instant;

use super::{
    Answer, Control, Job, Mutation, Pending, StatusCache, View, no_pod, snapshot, wire_json,
};
use crate::control::protocol::{self, LogPosition, RequestCmd, RequestId};
use crate::control::render;
use crate::control::server::ConnId;
use crate::control::wire::commands::{self, DEFS};
use crate::control::wire::{self, ErrorKind};
use crate::core::{Command, ContainerKey, Supervisor};
use crate::logs;
use crate::runtime::shell::waiters::Awaits;
use crate::runtime::slots::ContainerRuntime;

/// What a handler is given beside the request: where it came from and what it may read.
pub(super) struct Call<'a> {
    pub(super) conn: ConnId,
    pub(super) id: &'a RequestId,
    /// Whether the peer sees environment values: exactly when it is an admin.
    pub(super) secrets: render::Secrets,
    pub(super) now: Instant,
    pub(super) view: &'a View<'a>,
}

/// A command's handler: the reply, a stream started on the connection, or the change the
/// router is to carry out. Given only requests of its own row (`dispatch`).
pub(super) type Handler = fn(&mut Control, &Call<'_>, RequestCmd) -> Answer;

/// Every command's handler, in the order of [`DEFS`]: `HANDLERS[i]` answers `DEFS[i]`
/// (`RequestCmd::row`). Its length is `DEFS`' (a row without a handler does not build), and
/// `the_handler_table_has_a_handler_for_each_row_in_its_order` fails on one out of place.
pub(super) const HANDLERS: [(&commands::CommandDef, Handler); DEFS.len()] = [
    (&commands::STATUS, status),
    (&commands::DESCRIBE, describe),
    (&commands::EVENTS, events),
    (&commands::LOGS, logs),
    (&commands::START, start),
    (&commands::STOP, stop),
    (&commands::RESTART, restart),
    (&commands::RELOAD, reload),
    (&commands::SCALE, scale),
    (&commands::SHUTDOWN, shutdown),
    (&commands::VERSION, version),
    (&commands::UPGRADE, upgrade),
    (&commands::METRICS, metrics),
    (&commands::HEALTH, health),
    (&commands::WAIT, wait),
    (&commands::TRIGGER, trigger),
];

/// Hands `cmd` to its row's handler.
pub(super) fn dispatch(control: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    match HANDLERS.get(cmd.row()) {
        Some((_, handler)) => handler(control, call, cmd),
        None => misrouted(&cmd),
    }
}

/// A request given to a handler not of its row: not reached while [`HANDLERS`] is in the rows'
/// order (tested), and answered as vigil's own fault rather than with a panic.
fn misrouted(cmd: &RequestCmd) -> Answer {
    Answer::Reply(Err((
        ErrorKind::Internal,
        format!("no handler for {}", cmd.name()),
    )))
}

/// `vigil wait` when the server first looks and the pods are not there yet: how long it waits
/// without `timeout_seconds` (kubectl wait's default).
const DEFAULT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

fn version(_: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Version = cmd else {
        return misrouted(&cmd);
    };
    // Secrets are shown exactly to admins (the caller decides both from the peer).
    Answer::Reply(wire_json(&render::version(matches!(
        call.secrets,
        render::Secrets::Shown
    ))))
}

fn metrics(_: &mut Control, _: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Metrics { format } = cmd else {
        return misrouted(&cmd);
    };
    Answer::Change(Mutation::Metrics(format))
}

/// One look at each pod's phase and `Ready` condition, no status snapshot: the reply names
/// only what is not Ready or Completed (a Docker HEALTHCHECK's cost).
fn health(_: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Health { pods } = cmd else {
        return misrouted(&cmd);
    };
    Answer::Reply(match call.view.core.health_of(&pods) {
        Ok(judged) => wire_json(&render::health(&judged)),
        Err(name) => Err((ErrorKind::NotFound, no_pod(call.view, &name))),
    })
}

/// Answered now when met (or with a zero timeout: kubectl wait's "check once"), else by
/// `settle_waiters` in a later turn.
fn wait(control: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Wait {
        pods,
        condition,
        timeout_seconds,
    } = cmd
    else {
        return misrouted(&cmd);
    };
    Answer::Reply(match call.view.core.health_of(&pods) {
        Err(name) => Err((ErrorKind::NotFound, no_pod(call.view, &name))),
        Ok(judged) => {
            let timeout = timeout_seconds.map_or(DEFAULT_WAIT, |t| t.0);
            if timeout.is_zero() || judged.iter().all(|h| condition.met(h)) {
                wire_json(&render::wait(condition, &judged))
            } else {
                let pending = Pending {
                    conn: call.conn,
                    id: call.id.clone(),
                    wait: None,
                };
                let awaits = Awaits::Pods { pods, condition };
                control.waiters.park_for(pending, awaits, timeout, call.now);
                return Answer::Sent;
            }
        }
    })
}

fn status(control: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Status { pod } = cmd else {
        return misrouted(&cmd);
    };
    let view = call.view;
    let shown = matches!(call.secrets, render::Secrets::Shown);
    if let Some(c) = &control.status_cache
        && c.pod == pod
        && c.shown == shown
    {
        return Answer::CachedStatus;
    }
    let (pods, observed) = snapshot(view, call.now, pod.as_deref());
    match pod {
        Some(name) if !pods.iter().any(|p| p.name == name) => {
            Answer::Reply(Err((ErrorKind::NotFound, no_pod(view, &name))))
        }
        _ => {
            // Serialised without a `Value` tree between (for a full status of hundreds of
            // pods that tree was most of the reply's cost), into the last status's buffer, at
            // least the size of the last full status (no regrowth and copy on the way up),
            // kept as the cache and sent from there, around the reply's head and tail,
            // without a copy into a line (BENCHMARKS.md).
            let status = render::status(&pods, &observed, &control.clock, call.secrets);
            let hint = if pod.is_none() {
                control.full_status_bytes
            } else {
                0
            };
            let mut json = std::mem::take(&mut control.status_spare).into_bytes();
            json.clear();
            json.reserve(hint + 1024);
            let rendered = wire::write_json(&mut json, &status)
                .map_err(|e| e.to_string())
                .and_then(|()| String::from_utf8(json).map_err(|e| e.to_string()));
            match rendered {
                Ok(result) => {
                    if pod.is_none() {
                        control.full_status_bytes = result.len();
                    }
                    control.status_cache = Some(StatusCache { pod, shown, result });
                    Answer::CachedStatus
                }
                Err(e) => Answer::Reply(Err((
                    ErrorKind::Internal,
                    format!("cannot encode the reply: {e}"),
                ))),
            }
        }
    }
}

fn describe(control: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Describe { pod } = cmd else {
        return misrouted(&cmd);
    };
    let view = call.view;
    let (pods, observed) = snapshot(view, call.now, Some(pod.as_str()));
    Answer::Reply(match pods.iter().find(|p| p.name == pod) {
        Some(p) => wire_json(&render::describe(
            p,
            &observed,
            &view.core.events_since(0),
            &control.clock,
            call.secrets,
        )),
        None => Err((ErrorKind::NotFound, no_pod(view, &pod))),
    })
}

fn events(control: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Events {
        follow,
        pod,
        after,
        history,
    } = cmd
    else {
        return misrouted(&cmd);
    };
    let view = call.view;
    if let Some(name) = &pod
        && view.core.pod(name).is_none()
    {
        return Answer::Reply(Err((ErrorKind::NotFound, no_pod(view, name))));
    }
    let (after, resumed) = events_resume(view.core, after, history.as_deref());
    if follow {
        // Its history's id, then the events, then new ones, pushed as the client takes them.
        control.server.start_stream(call.conn, None);
        let first =
            protocol::reply_event_stream(call.id, view.core.event_history(), resumed.as_ref());
        control
            .server
            .push(&control.registry, call.conn, first.as_bytes());
        let job = Job::FollowEvents {
            id: call.id.clone(),
            last_seq: after,
            pod,
        };
        control.jobs.insert(call.conn, job);
        return Answer::Sent;
    }
    let mut events = view.core.events_since(after);
    events.retain(|e| super::about_pod(e, pod.as_deref()));
    Answer::Reply(wire_json(&render::events(&events, &control.clock)))
}

fn logs(control: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Logs {
        pod,
        container,
        follow,
        tail,
        previous,
        timestamps,
        since_seconds,
        since_time,
        ring,
        offset,
    } = cmd
    else {
        return misrouted(&cmd);
    };
    let view = call.view;
    let key = match find_slot(view, &pod, container.as_deref()) {
        Err(e) => return Answer::Reply(Err((ErrorKind::NotFound, e))),
        Ok(key) => key,
    };
    let Some(slot) = view.slots.get(&key) else {
        return Answer::Reply(Err((
            ErrorKind::NotFound,
            format!("no logs for {pod}: the container is gone"),
        )));
    };
    if previous && !slot.log.buffer.has_previous() {
        // kubelet `kubelet_pods.go` validateContainerLogStatus: the same refusal.
        return Answer::Reply(Err((
            ErrorKind::BadArgument,
            format!(
                "previous terminated container {:?} in pod {:?} not found",
                slot.name, slot.pod
            ),
        )));
    }
    let since = match (since_seconds, since_time.as_deref()) {
        (Some(n), _) => Some(LogsSince::Seconds(n)),
        (None, Some(t)) => RequestCmd::since_time_nanos(t).map(LogsSince::Time),
        (None, None) => None,
    };
    let resume = match (ring.and_then(|r| r.parse().ok()), offset) {
        (Some(ring), Some(offset)) => Some(LogPosition { ring, next: offset }),
        _ => None,
    };
    let want = LogsWanted {
        tail,
        previous,
        follow,
        timestamps,
        since,
        resume,
    };
    control.start_logs(call.conn, call.id, key, slot, &want);
    Answer::Sent
}

/// `trigger` of a name that names no pod.
fn unknown_pod(view: &View, pod: &str) -> Option<Answer> {
    view.core
        .pod(pod)
        .is_none()
        .then(|| Answer::Reply(Err((ErrorKind::NotFound, no_pod(view, pod)))))
}

/// `start`, `stop` and `restart` (not rolling) of a name that names neither a pod nor a pod
/// with replicas (whose every replica they act on: docs/behaviour.md §14).
fn unknown_target(view: &View, pod: &str) -> Option<Answer> {
    if view.core.pod(pod).is_some() || !view.core.replicas_of(pod).is_empty() {
        return None;
    }
    Some(Answer::Reply(Err((ErrorKind::NotFound, no_pod(view, pod)))))
}

fn start(_: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Start {
        pod,
        container,
        ignore_dependencies,
    } = cmd
    else {
        return misrouted(&cmd);
    };
    if let Some(refused) = unknown_target(call.view, &pod) {
        return refused;
    }
    match (container, ignore_dependencies) {
        (None, true) => Answer::Change(Mutation::Command(Command::StartIgnoringDependencies {
            pod,
        })),
        (Some(container), true) => Answer::Reply(Err((
            ErrorKind::BadArgument,
            format!(
                "ignore_dependencies starts a whole pod, not {pod}/{container}: a container \
                 starts only once its pod has begun"
            ),
        ))),
        (container, false) => Answer::Change(Mutation::Command(Command::Start { pod, container })),
    }
}

fn stop(_: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Stop { pod, container } = cmd else {
        return misrouted(&cmd);
    };
    if let Some(refused) = unknown_target(call.view, &pod) {
        return refused;
    }
    Answer::Change(Mutation::Command(Command::Stop { pod, container }))
}

fn restart(_: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Restart {
        pod,
        container,
        rolling,
        max_unavailable,
    } = cmd
    else {
        return misrouted(&cmd);
    };
    if rolling {
        if let Some(container) = container {
            return Answer::Reply(Err((
                ErrorKind::BadArgument,
                format!(
                    "rolling restarts the replicas of a pod, not one container ({pod}/{container})"
                ),
            )));
        }
        // A pod that is not one with replicas (or none) is the core's to refuse.
        return Answer::Change(Mutation::Command(Command::RollingRestart {
            pod,
            max_unavailable,
        }));
    }
    if max_unavailable.is_some() {
        return Answer::Reply(Err((
            ErrorKind::BadArgument,
            "max_unavailable goes with rolling".to_string(),
        )));
    }
    if let Some(refused) = unknown_target(call.view, &pod) {
        return refused;
    }
    Answer::Change(Mutation::Command(Command::Restart { pod, container }))
}

fn trigger(_: &mut Control, call: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Trigger { pod } = cmd else {
        return misrouted(&cmd);
    };
    if let Some(refused) = unknown_pod(call.view, &pod) {
        return refused;
    }
    Answer::Change(Mutation::Command(Command::Trigger { pod }))
}

fn shutdown(_: &mut Control, _: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Shutdown = cmd else {
        return misrouted(&cmd);
    };
    Answer::Change(Mutation::Command(Command::Shutdown { force: false }))
}

fn reload(_: &mut Control, _: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Reload = cmd else {
        return misrouted(&cmd);
    };
    Answer::Change(Mutation::Reload)
}

fn scale(_: &mut Control, _: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Scale { pod, replicas } = cmd else {
        return misrouted(&cmd);
    };
    Answer::Change(Mutation::Scale { pod, replicas })
}

fn upgrade(_: &mut Control, _: &Call<'_>, cmd: RequestCmd) -> Answer {
    let RequestCmd::Upgrade { binary, check } = cmd else {
        return misrouted(&cmd);
    };
    Answer::Change(Mutation::Upgrade {
        binary: binary.map(Into::into),
        check,
    })
}

impl Control {
    /// Starts a `logs` reply or a `logs -f` stream on `conn` from `slot`'s ring. Streamed from
    /// the ring, never copied whole: the reply is the range the ring held now; what is
    /// overwritten before it is sent is marked skipped.
    fn start_logs(
        &mut self,
        conn: ConnId,
        id: &RequestId,
        key: ContainerKey,
        slot: &ContainerRuntime,
        want: &LogsWanted,
    ) {
        let LogsWanted {
            tail,
            previous,
            follow,
            timestamps,
            since,
            resume,
        } = *want;
        let buffer = &slot.log.buffer;
        let (mut start, end) = buffer.tail_range(tail, previous);
        // kubelet `kuberuntime_logs.go` ReadLogs: `since` and `tail` together keep the last
        // lines of those since then.
        if let Some(since) = since {
            let from = match since {
                LogsSince::Seconds(n) => {
                    let back = i64::try_from(n).unwrap_or(i64::MAX);
                    logs::unix_nanos_now().saturating_sub(back.saturating_mul(1_000_000_000))
                }
                LogsSince::Time(t) => t,
            };
            start = start.max(buffer.since_offset(from, previous));
        }
        let mut at_line_start = true;
        if let Some(at) = resume.filter(|_| follow) {
            // A follower back after its connection ended (an upgrade, a restart of vigil):
            // exactly where it was in the same ring; from the oldest byte held in another (a
            // vigil that started afresh, or a container created again, has a new ring).
            start = if at.ring == buffer.id() {
                at.next.min(buffer.total_written())
            } else {
                buffer.read_range(0, 0).skipped
            };
            at_line_start = !buffer.mid_line_at(start);
        }
        let registry = &*self.registry;
        if follow {
            self.server.start_stream(conn, None);
            if start == buffer.total_written() {
                // The stream's first line when there is nothing to send yet, so the client
                // knows it is on and where it stands.
                let at = LogPosition {
                    ring: buffer.id(),
                    next: start,
                };
                let line = protocol::reply_log(id, b"", at);
                self.server.push(registry, conn, line.as_bytes());
            }
            let job = Job::FollowLogs {
                id: id.clone(),
                key,
                offset: start,
                carry: Vec::new(),
                at_line_start,
                stamps: timestamps,
            };
            self.jobs.insert(conn, job);
            return;
        }
        let open =
            protocol::logs_reply_open(id, &slot.pod, &slot.name, slot.log.buffer.dropped_bytes());
        self.server
            .start_stream(conn, Some(protocol::LOGS_REPLY_CUT));
        self.server.push(registry, conn, open.as_bytes());
        let job = Job::Reply {
            key,
            pos: start,
            end,
            skipped: 0,
            carry: Vec::new(),
            stamps: timestamps,
            at_line_start: true,
        };
        self.jobs.insert(conn, job);
    }
}

/// Where `logs` begins in time (the request's `since_seconds` or `since_time`).
#[derive(Debug, Clone, Copy)]
enum LogsSince {
    /// The last N seconds, by the supervisor's clock.
    Seconds(u64),
    /// From this Unix time, in nanoseconds.
    Time(i64),
}

/// What a `logs` request asks for beyond its target.
#[derive(Debug, Clone, Copy)]
struct LogsWanted {
    tail: Option<usize>,
    previous: bool,
    follow: bool,
    timestamps: bool,
    since: Option<LogsSince>,
    /// Resume a follow at this position (`ring`, `offset`).
    resume: Option<LogPosition>,
}

/// The container whose logs `pod` (and `container`, else the first app container) names.
fn find_slot(view: &View, pod: &str, container: Option<&str>) -> Result<ContainerKey, String> {
    let pods = view.core.pods();
    let Some(p) = pods.iter().find(|p| p.name == pod) else {
        return Err(no_pod(view, pod));
    };
    let all: Vec<_> = p
        .init_containers
        .iter()
        .chain(p.containers.iter())
        .collect();
    let c = match container {
        Some(name) => all.iter().find(|c| c.name == name).copied(),
        None => p.containers.first(),
    };
    match c {
        Some(c) if view.slots.contains_key(&c.key) => Ok(c.key),
        Some(c) => Err(format!(
            "container {pod}/{} has not run yet: no logs",
            c.name
        )),
        None => Err(format!(
            "pod \"{pod}\" has no container named \"{}\"",
            container.unwrap_or("")
        )),
    }
}

/// Where an `events` request begins (events with a `seq` after it) and, for a follower
/// resuming a history ([`crate::core::EventResume`]), what its stream's first line says of it.
fn events_resume(
    core: &Supervisor,
    after: Option<u64>,
    history: Option<&str>,
) -> (u64, Option<serde_json::Value>) {
    use crate::core::EventResume;
    use serde_json::json;
    let Some(after) = after else {
        return (0, None);
    };
    let Some(history) = history.and_then(|h| h.parse::<u64>().ok()) else {
        return (after, None);
    };
    match core.resume_events(history, after) {
        EventResume::After(seq) => (seq, None),
        EventResume::Lost { kept, seen } => (
            kept,
            Some(json!({"lost": {"after": kept, "through": seen}})),
        ),
        EventResume::Unknown => (0, Some(json!({"new_history": true}))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;
    use std::rc::Rc;

    use serde_json::{Map, Value, json};

    use super::*;
    use crate::control::wire::commands::ArgKind;

    #[test]
    fn the_handler_table_has_a_handler_for_each_row_in_its_order() {
        assert_eq!(HANDLERS.len(), DEFS.len());
        for (i, (def, _)) in HANDLERS.iter().enumerate() {
            assert_eq!(
                def.name, DEFS[i].name,
                "HANDLERS[{i}] is not of DEFS[{i}]'s row"
            );
        }
    }

    /// A request of `def`'s row with its required arguments, naming a pod that does not
    /// exist: every handler answers it without touching a connection.
    fn sample(def: &commands::CommandDef) -> RequestCmd {
        let mut fields = Map::new();
        fields.insert("cmd".into(), json!(def.name));
        for arg in def.args.iter().filter(|a| a.required) {
            let v: Value = match arg.kind {
                ArgKind::Choice(choices) => json!(choices[0]),
                ArgKind::Names => json!(["nosuch"]),
                ArgKind::Count => json!(2),
                _ => json!("nosuch"),
            };
            fields.insert(arg.name.into(), v);
        }
        RequestCmd::from_fields(fields).unwrap()
    }

    fn misrouted(answer: &Answer) -> bool {
        matches!(answer, Answer::Reply(Err((ErrorKind::Internal, m))) if m.starts_with("no handler"))
    }

    /// The table's order is checked above; this checks that each handler takes the requests
    /// of its own row (and refuses the others' as vigil's fault, never with a panic).
    #[test]
    fn each_rows_handler_answers_its_rows_request_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let config = crate::config::load_str(
            "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"/bin/true\"]\n",
            Path::new("/etc/vigil/vigil.toml"),
        )
        .unwrap();
        let poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        let mut control = Control::bind(&config, &dir.path().join("vigil.sock"), registry).unwrap();
        let now = Instant::now();
        let core = Supervisor::new(&config, now);
        let slots = HashMap::new();
        let probe_stats = crate::metrics::probes::ProbeStats::default();
        let view = View {
            core: &core,
            slots: &slots,
            probe_stats: &probe_stats,
            started_wall: std::time::SystemTime::now(),
            last_reload: crate::runtime::shell::LastReload {
                successful: true,
                success_at: std::time::SystemTime::now(),
            },
        };
        let id = RequestId::null();
        let call = Call {
            conn: ConnId::unused(),
            id: &id,
            secrets: render::Secrets::Redacted,
            now,
            view: &view,
        };
        for (i, (def, handler)) in HANDLERS.iter().enumerate() {
            for (j, other) in DEFS.iter().enumerate() {
                let answer = handler(&mut control, &call, sample(other));
                assert_eq!(
                    misrouted(&answer),
                    i != j,
                    "the handler of {:?} given a {:?} request",
                    def.name,
                    other.name
                );
            }
        }
    }
}
