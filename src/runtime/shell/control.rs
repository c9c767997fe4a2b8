//! Control requests answered from the core's snapshot in the same loop turn: authorisation,
//! dispatch of each command, and the streams fed from the log rings and the event log
//! (`logs` replies, `logs -f`, `events -f`), one bounded chunk per connection with room per
//! turn (the server says which have room). Also the process-wide descriptor limit the socket's
//! share is derived from.
//!
//! Must not: build a reply whose size depends on a container's output (those are streamed), or
//! take more requests than the server hands out.

use super::*;
use crate::control::protocol::{RequestId, utf8_incomplete_tail};
use crate::control::server::{Access, Limits};
use crate::control::wire::{self, ErrorKind};

/// Raw log bytes read from a ring per chunk (at most six times that once JSON-escaped).
const LOG_CHUNK: usize = 16 * 1024;
/// A `logs -f` follower that fell behind resumes this close to the newest byte.
const CATCH_UP: usize = 16 * 1024;
/// Events pushed to one follower per chunk.
const EVENTS_PER_CHUNK: usize = 64;

/// The streams under way on control connections.
#[derive(Default)]
pub(super) struct Streams {
    jobs: HashMap<ConnId, Job>,
    /// Some stream had more to send when the turn's budget ran out.
    pub(super) more: bool,
}

enum Job {
    /// A `logs` reply: the ring's range `[pos, end)` at request time, sent in chunks.
    Reply {
        key: ContainerKey,
        pos: u64,
        end: u64,
        skipped: u64,
        carry: Vec<u8>,
    },
    /// `logs -f`: from `offset` on, for as long as the client stays.
    FollowLogs {
        id: RequestId,
        key: ContainerKey,
        offset: u64,
        carry: Vec<u8>,
        at_line_start: bool,
    },
    /// `events -f`.
    FollowEvents { id: RequestId, last_seq: u64 },
}

/// Decodes `bytes` after `carry` as UTF-8 (invalid bytes replaced), keeping a character cut
/// at the end for the next chunk unless `last`.
fn decode(carry: &mut Vec<u8>, bytes: &[u8], last: bool) -> String {
    let mut buf = std::mem::take(carry);
    buf.extend_from_slice(bytes);
    if !last {
        let keep = utf8_incomplete_tail(&buf);
        carry.extend_from_slice(&buf[buf.len() - keep..]);
        buf.truncate(buf.len() - keep);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The socket's settings from the config: who is an admin, the file's mode and group.
pub(super) fn access_of(config: &Config) -> Result<Access, StartError> {
    let s = &config.supervisor;
    Ok(Access {
        mode: s.socket_mode,
        group: match &s.socket_group {
            Some(g) => Some(resolve_group(g)?),
            None => None,
        },
        admin_uids: s.admin_uids.clone(),
        admin_gids: s.admin_gids.clone(),
    })
}

/// The client limits from the config and the descriptor limit: clients together may hold
/// `client_fd_percent` of `RLIMIT_NOFILE`.
pub(super) fn limits_of(config: &Config, nofile: u64) -> Limits {
    let s = &config.supervisor;
    let share = nofile.saturating_mul(u64::from(s.client_fd_percent)) / 100;
    Limits {
        max_connections: usize::try_from(share).unwrap_or(usize::MAX).max(1),
        max_per_uid: s.max_connections_per_uid,
        idle_timeout: s.client_idle_timeout,
        ..Limits::default()
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (getrlimit(2)): descriptors are what a
/// supervisor spawns, probes and pipes with, and systemd's default soft limit is 1,024.
/// Returns the soft limit in force.
pub(super) fn raise_nofile_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => {
                info!("raised the open-file limit (RLIMIT_NOFILE) from {soft} to {hard}");
                hard
            }
            Err(e) => {
                warn!("cannot raise RLIMIT_NOFILE from {soft} to {hard}: {e}");
                soft
            }
        },
        Ok((soft, _)) => {
            info!("open-file limit (RLIMIT_NOFILE): {soft}");
            soft
        }
        Err(e) => {
            warn!("cannot read RLIMIT_NOFILE: {e}; assuming 1024");
            1024
        }
    }
}

impl Shell {
    pub(super) fn on_control(&mut self, event: &mio::event::Event, now: Instant) {
        self.server.on_event(self.poll.registry(), event, now);
    }

    /// Once per turn: requests within the turn's budget, then a chunk for every stream with
    /// room.
    pub(super) fn serve_control(&mut self, now: Instant) {
        self.server.begin_turn(self.poll.registry(), now);
        while let Some(inc) = self.server.next_request(self.poll.registry(), now) {
            self.answer(inc, now);
        }
        self.feed_streams();
    }

    /// Applies the socket settings of a reloaded config that can change live.
    pub(super) fn apply_socket_settings(&mut self, new: &Config) -> Result<(), String> {
        let access = access_of(new).map_err(|e| e.to_string())?;
        let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(1024, |(soft, _)| soft);
        let limits = limits_of(new, nofile);
        self.server
            .apply_settings(&access, limits)
            .map_err(|e| e.to_string())
    }

    /// Ends the `logs -f` streams of a container that is gone, with an error line.
    pub(super) fn end_log_streams(&mut self, gone: ContainerKey) {
        let conns: Vec<ConnId> = self
            .streams
            .jobs
            .iter()
            .filter(|(_, j)| matches!(j, Job::FollowLogs { key, .. } if *key == gone))
            .map(|(c, _)| *c)
            .collect();
        for conn in conns {
            if let Some(Job::FollowLogs { id, .. }) = self.streams.jobs.remove(&conn) {
                let line = protocol::reply_err(
                    &id,
                    ErrorKind::NotFound,
                    "the container was removed (by a reload or its pod's removal); log stream ended",
                );
                self.server
                    .end_with_error(self.poll.registry(), conn, &line);
            }
        }
    }

    fn feed_streams(&mut self) {
        for closed in self.server.take_closed() {
            self.streams.jobs.remove(&closed);
        }
        self.streams.more = false;
        if self.streams.jobs.is_empty() {
            return;
        }
        for conn in self.server.hungry_streams() {
            if self.server.output_budget() == 0 {
                self.streams.more = true;
                break;
            }
            let Some(mut job) = self.streams.jobs.remove(&conn) else {
                continue;
            };
            match self.feed_one(conn, &mut job) {
                Feed::Done => {}
                Feed::Idle => {
                    self.streams.jobs.insert(conn, job);
                }
                Feed::More => {
                    self.streams.more = true;
                    self.streams.jobs.insert(conn, job);
                }
            }
        }
        for closed in self.server.take_closed() {
            self.streams.jobs.remove(&closed);
        }
    }

    /// One chunk of `job` for `conn`.
    fn feed_one(&mut self, conn: ConnId, job: &mut Job) -> Feed {
        let registry = self.poll.registry();
        match job {
            Job::Reply {
                key,
                pos,
                end,
                skipped,
                carry,
            } => {
                let mut text = String::new();
                match self.slots.get(key) {
                    None => {
                        *skipped += *end - *pos;
                        *pos = *end;
                    }
                    Some(slot) => {
                        let r = slot
                            .log
                            .buffer
                            .read_range(*pos, (*end - *pos).min(LOG_CHUNK as u64) as usize);
                        let start = *pos + r.skipped;
                        if r.skipped > 0 {
                            text = decode(carry, &[], true);
                            let gap = r.skipped.min(*end - *pos);
                            *skipped += gap;
                            text.push_str(&format!("\n… {gap} bytes skipped …\n"));
                        }
                        if start >= *end {
                            *pos = *end;
                        } else {
                            let take = ((*end - start) as usize).min(r.bytes.len());
                            *pos = start + take as u64;
                            text.push_str(&decode(carry, &r.bytes[..take], *pos >= *end));
                        }
                    }
                }
                if *pos >= *end {
                    text.push_str(&decode(carry, &[], true));
                }
                let mut out = protocol::json_fragment(&text);
                if *pos < *end {
                    self.server.push(registry, conn, out.as_bytes());
                    return Feed::More;
                }
                out.push_str(&protocol::logs_reply_close(*skipped));
                self.server.push(registry, conn, out.as_bytes());
                self.server.end_stream(registry, conn);
                Feed::Done
            }
            Job::FollowLogs {
                id,
                key,
                offset,
                carry,
                at_line_start,
            } => {
                let Some(slot) = self.slots.get(key) else {
                    let line = protocol::reply_err(
                        id,
                        ErrorKind::NotFound,
                        "the container was removed; log stream ended",
                    );
                    self.server.end_with_error(registry, conn, &line);
                    return Feed::Done;
                };
                let buf = &slot.log.buffer;
                let r = buf.read_range(*offset, LOG_CHUNK);
                if r.skipped > 0 {
                    // Fell behind: say so, and go on from the live position, at a line start
                    // if one is near.
                    let total = buf.total_written();
                    let mut jump = (*offset + r.skipped).max(total.saturating_sub(CATCH_UP as u64));
                    let peek = buf.read_range(jump, CATCH_UP);
                    if peek.skipped == 0
                        && let Some(i) = peek.bytes.iter().position(|&b| b == b'\n')
                        && i + 1 < peek.bytes.len()
                    {
                        jump += i as u64 + 1;
                    }
                    carry.clear();
                    let line = protocol::reply_log_skipped(id, jump - *offset, *at_line_start);
                    *offset = jump;
                    *at_line_start = true;
                    self.server.push(registry, conn, line.as_bytes());
                    return Feed::More;
                }
                if r.bytes.is_empty() {
                    return Feed::Idle;
                }
                let text = decode(carry, &r.bytes, false);
                *at_line_start = r.bytes.last() == Some(&b'\n');
                *offset = r.next;
                let more = *offset < buf.total_written();
                let line = protocol::reply_log(id, text.as_bytes());
                self.server.push(registry, conn, line.as_bytes());
                if more { Feed::More } else { Feed::Idle }
            }
            Job::FollowEvents { id, last_seq } => {
                let events = self.core.events_since(*last_seq);
                if events.is_empty() {
                    return Feed::Idle;
                }
                let mut out = String::new();
                for e in events.iter().take(EVENTS_PER_CHUNK) {
                    *last_seq = (*last_seq).max(e.seq);
                    if let Some(line) = event_line(id, e, &self.clock) {
                        out.push_str(&line);
                    }
                }
                self.server.push(registry, conn, out.as_bytes());
                if events.len() > EVENTS_PER_CHUNK {
                    Feed::More
                } else {
                    Feed::Idle
                }
            }
        }
    }

    pub(super) fn answer(&mut self, inc: Incoming, now: Instant) {
        // Re-anchor wall-clock times at every answer, so a stepped system clock (NTP, a VM
        // resumed) shows up in what is reported; the core's timers never see it.
        self.clock = WallClock::now();
        let Incoming {
            conn,
            peer,
            admin,
            request,
        } = inc;
        let request: Request = match request {
            Ok(r) => r,
            Err(e) => {
                self.server.send(self.poll.registry(), conn, &e.reply());
                return;
            }
        };
        let id = request.id.clone();
        if request.cmd.is_mutating() && !admin {
            warn!(
                "control: refused {} from pid {} uid {}",
                request.cmd.name(),
                peer.pid,
                peer.uid
            );
            let line = protocol::reply_err(
                &id,
                ErrorKind::PermissionDenied,
                &format!(
                    "{} needs root, vigil's own uid, or a uid/gid in admin_uids/admin_gids (you are uid {})",
                    request.cmd.name(),
                    peer.uid
                ),
            );
            self.server.send(self.poll.registry(), conn, &line);
            return;
        }
        self.journal_request(&peer, &request.cmd);
        let secrets = if admin {
            render::Secrets::Shown
        } else {
            render::Secrets::Redacted
        };
        let reply = match request.cmd {
            RequestCmd::Version => wire_json(&render::version()),
            RequestCmd::Status { pod } => {
                let (pods, observed) = self.snapshot(now, pod.as_deref());
                match pod {
                    Some(name) if !pods.iter().any(|p| p.name == name) => {
                        Err((ErrorKind::NotFound, format!("no pod named \"{name}\"")))
                    }
                    _ => wire_json(&render::status(&pods, &observed, &self.clock, secrets)),
                }
            }
            RequestCmd::Describe { pod } => {
                let (pods, observed) = self.snapshot(now, Some(pod.as_str()));
                match pods.iter().find(|p| p.name == pod) {
                    Some(p) => wire_json(&render::describe(
                        p,
                        &observed,
                        &self.core.events_since(0),
                        &self.clock,
                        secrets,
                    )),
                    None => Err((ErrorKind::NotFound, format!("no pod named \"{pod}\""))),
                }
            }
            RequestCmd::Events { follow } => {
                if follow {
                    // The history, then new events, pushed as the client takes them.
                    self.server.start_stream(conn, None);
                    self.streams
                        .jobs
                        .insert(conn, Job::FollowEvents { id, last_seq: 0 });
                    return;
                }
                wire_json(&render::events(&self.core.events_since(0), &self.clock))
            }
            RequestCmd::Logs {
                pod,
                container,
                follow,
                tail,
                previous,
            } => match self.find_slot(&pod, container.as_deref()) {
                Err(e) => Err((ErrorKind::NotFound, e)),
                Ok(key) => {
                    let Some(slot) = self.slots.get(&key) else {
                        let line = protocol::reply_err(
                            &id,
                            ErrorKind::NotFound,
                            &format!("no logs for {pod}: the container is gone"),
                        );
                        self.server.send(self.poll.registry(), conn, &line);
                        return;
                    };
                    // Streamed from the ring, never copied whole: the reply is the range the
                    // ring held now; what is overwritten before it is sent is marked skipped.
                    let (start, end) = slot.log.buffer.tail_range(tail, previous);
                    let registry = self.poll.registry();
                    if follow {
                        self.server.start_stream(conn, None);
                        if start == end {
                            // The stream's first line, so the client knows it is on.
                            let line = protocol::reply_log(&id, b"");
                            self.server.push(registry, conn, line.as_bytes());
                        }
                        let job = Job::FollowLogs {
                            id,
                            key,
                            offset: start,
                            carry: Vec::new(),
                            at_line_start: true,
                        };
                        self.streams.jobs.insert(conn, job);
                        return;
                    }
                    let open = protocol::logs_reply_open(
                        &id,
                        &slot.pod,
                        &slot.name,
                        slot.log.buffer.dropped_bytes(),
                    );
                    self.server
                        .start_stream(conn, Some(protocol::LOGS_REPLY_CUT));
                    self.server.push(registry, conn, open.as_bytes());
                    let job = Job::Reply {
                        key,
                        pos: start,
                        end,
                        skipped: 0,
                        carry: Vec::new(),
                    };
                    self.streams.jobs.insert(conn, job);
                    return;
                }
            },
            RequestCmd::Start { pod, container } => {
                self.command(now, Command::Start { pod, container })
            }
            RequestCmd::Stop { pod, container } => {
                self.command(now, Command::Stop { pod, container })
            }
            RequestCmd::Restart { pod, container } => {
                self.command(now, Command::Restart { pod, container })
            }
            RequestCmd::Shutdown => {
                let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
                self.command(now, Command::Shutdown { force: false })
            }
            RequestCmd::Reload => match self.reload(now) {
                Ok(message) => wire_json(&wire::MessageReply { message }),
                Err(e) => Err((ErrorKind::from(&e), e.to_string())),
            },
        };
        let line = match reply {
            Ok(v) => protocol::reply_ok(&id, v),
            Err((kind, message)) => protocol::reply_err(&id, kind, &message),
        };
        self.server.send(self.poll.registry(), conn, &line);
        self.drain_actions(now);
    }

    pub(super) fn command(
        &mut self,
        now: Instant,
        command: Command,
    ) -> Result<serde_json::Value, (ErrorKind, String)> {
        match self.core.command(now, command) {
            Ok(message) => wire_json(&wire::MessageReply { message }),
            Err(e) => Err((e.kind.into(), e.message)),
        }
    }

    pub(super) fn find_slot(
        &self,
        pod: &str,
        container: Option<&str>,
    ) -> Result<ContainerKey, String> {
        let pods = self.core.pods(Instant::now());
        let Some(p) = pods.iter().find(|p| p.name == pod) else {
            return Err(format!("no pod named \"{pod}\""));
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
            Some(c) if self.slots.contains_key(&c.key) => Ok(c.key),
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

    /// Core snapshot, and beside it what only the shell knows: each running container's cgroup
    /// and its figures. With `only`, just that pod (reading cgroup figures costs a few file
    /// reads per container, so a query for one pod must not pay for all of them).
    pub(super) fn snapshot(
        &self,
        now: Instant,
        only: Option<&str>,
    ) -> (Vec<crate::core::PodStatus>, render::Observed) {
        let mut pods = self.core.pods(now);
        if let Some(name) = only {
            pods.retain(|p| p.name == name);
        }
        let mut observed = render::Observed::new();
        for c in pods
            .iter()
            .flat_map(|p| p.init_containers.iter().chain(p.containers.iter()))
        {
            if let Some(run) = self.slots.get(&c.key).and_then(|s| s.run.as_ref())
                && let Some(cg) = &run.cgroup
            {
                observed.insert(
                    c.key,
                    render::RunFacts {
                        cgroup: cg.path().to_path_buf(),
                        figures: cg.figures(),
                    },
                );
            }
        }
        (pods, observed)
    }
}

/// A reply value as JSON; a value that cannot be serialized (a bug) is an `internal` error.
fn wire_json<T: serde::Serialize>(v: &T) -> Result<serde_json::Value, (ErrorKind, String)> {
    wire::to_json(v).map_err(|e| (ErrorKind::Internal, format!("cannot encode the reply: {e}")))
}

/// One followed event's reply line; `None` (logged) if it cannot be encoded (a bug).
fn event_line(id: &RequestId, e: &crate::core::Event, clock: &WallClock) -> Option<String> {
    match wire::to_json(&render::event(e, clock)) {
        Ok(v) => Some(protocol::reply_event(id, v)),
        Err(err) => {
            error!("control: cannot encode event {}: {err}", e.seq);
            None
        }
    }
}

/// What feeding a stream left.
enum Feed {
    /// The stream is complete.
    Done,
    /// Waiting for new data.
    Idle,
    /// More is ready to send.
    More,
}
