//! The control server's side of the shell, as one component: it owns the control socket
//! server (listener, connections, their tokens), the streams under way on connections
//! (`logs` replies, `logs -f`, `events -f`) and the wall clock replies are rendered against.
//!
//! Interface (the router in `mod.rs` drives it):
//! - [`Control::on_event`] for every event on a token the server owns;
//! - once per turn [`Control::begin_turn`], then [`Control::next_change`] until `None`: every
//!   request that only reads (status, describe, events, logs, version) is answered inside from
//!   a [`View`] of the core and the container slots; a request that changes state comes back
//!   as a [`Mutation`] for the router to carry out (the core's command, a reload), whose outcome
//!   goes back through [`Control::finish`]; then [`Control::feed_streams`];
//! - [`Control::end_log_streams`] when a container is forgotten, [`Control::apply_settings`]
//!   on reload, [`Control::check_socket_file`] on SIGHUP.
//!
//! A new socket command: its row in `control::wire::commands::DEFS` and its handler in the
//! table of `control/handlers.rs`, indexed by the row: answered there from the [`View`] if it
//! only reads, or a new [`Mutation`] the router carries out if it changes state.
//!
//! Owns: the [`Server`] and every connection descriptor, the stream jobs, the reply clock.
//! Must not: change the core or the slots (it gets them read-only; changes go through the
//! router), build a reply whose size depends on a container's output (those are streamed),
//! or take more requests than the server hands out. Also here: the process-wide descriptor
//! limit the socket's share is derived from.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::Instant;

use log::{error, info, warn};
use mio::Registry;
use mio::event::Event;

mod handlers;

use super::waiters::{Done, Waiters};
use super::{CONN_TOKEN_BASE, StartError, resolve_group, tokens};
use crate::config::spec::Config;
use crate::control::limits::{FdNeeds, FdShares, fd_shares};
use crate::control::protocol::{self, Request, RequestCmd, RequestId, utf8_incomplete_tail};
use crate::control::render;
use crate::control::server::{
    Access, ConnId, ControlError, Handover, Incoming, Inherited, Limits, PeerCred, Resume, Server,
    TakenOver,
};
use crate::control::time::WallClock;
use crate::control::wire::wait::Target;
use crate::control::wire::{self, ErrorKind};
use crate::core::{Command, ContainerKey, Event as CoreEvent, PodStatus, Supervisor};
use crate::logs;
use crate::runtime::slots::ContainerRuntime;

/// Raw log bytes read from a ring per chunk (at most six times that once JSON-escaped).
const LOG_CHUNK: usize = 16 * 1024;
/// A `logs -f` follower that fell behind resumes this close to the newest byte.
const CATCH_UP: usize = 16 * 1024;
/// What a streamed reply (`logs`, `logs -f`, `events -f`) open at `vigil upgrade` ends with,
/// after the line being written (a `busy` line; followers connect again and go on where they
/// were, interface.md §1.5).
const UPGRADE_NOTICE: &str =
    "vigil re-executed itself (upgrade): this stream ends here; connect again";
/// Turns' worth of output the streams get at a clean shutdown before the final line.
const FAREWELL_ROUNDS: usize = 8;
/// The final line's message to every stream at a clean shutdown (interface.md §1.5).
pub(super) const SHUT_DOWN: &str = "vigil shut down";
/// Events pushed to one follower per chunk.
const EVENTS_PER_CHUNK: usize = 64;

/// The control component (see the module docs).
pub(super) struct Control {
    server: Server,
    /// The poll's registry, for the server's registrations.
    registry: Rc<Registry>,
    /// The streams under way on control connections.
    jobs: HashMap<ConnId, Job>,
    /// Some stream had more to send when the turn's budget ran out.
    more: bool,
    /// Wall-clock anchor of the times in replies, re-read at every answer.
    clock: WallClock,
    /// The last `status` result rendered in this turn, for further `status` requests of the
    /// same turn (see [`StatusCache`]).
    status_cache: Option<StatusCache>,
    /// The buffer of the last status result once it is no longer current, rendered into
    /// again by the next `status` (no fresh buffer of a full status's size per turn: with
    /// musl's allocator that was a new mapping, faulted in and unmapped, every turn).
    /// Released when the shell trims at idle ([`Control::release_memory`]).
    status_spare: String,
    /// Bytes of the last full `status` result: the next one's buffer is grown to that size.
    full_status_bytes: usize,
    /// The clients' descriptor shares (control and metrics) from the config and
    /// `RLIMIT_NOFILE`, recomputed on reload.
    shares: FdShares,
    /// Requests whose reply waits for a state (`wait_ms`, `wait`).
    waiters: Waiters,
}

/// One rendered `status` result (the JSON after `"result":`), reused for the same request
/// (pod filter, secrets shown or not) until the turn ends or a request changes state: within
/// that span nothing it shows can change (the turn's `now` is the same, the core is not fed),
/// so concurrent clients asking for a full status of hundreds of pods cost one rendering per
/// turn, not one each.
struct StatusCache {
    pod: Option<String>,
    shown: bool,
    /// JSON text, rendered by vigil, so it is sent unparsed between a reply's head and tail,
    /// straight from here (`Server::send_parts`).
    result: String,
}

/// What the control component reads of the rest of the shell to answer: the router lends it
/// for one call.
pub(super) struct View<'a> {
    pub(super) core: &'a Supervisor,
    pub(super) slots: &'a HashMap<ContainerKey, ContainerRuntime>,
    /// Probe counters and vigil's start (wall clock), for `metrics`.
    pub(super) probe_stats: &'a crate::metrics::probes::ProbeStats,
    pub(super) started_wall: std::time::SystemTime,
    /// The last reload's outcome, for `metrics` ([`crate::metrics::Counters`]).
    pub(super) last_reload: super::LastReload,
}

/// A request that changes state, authorised and journalled, whose reply waits for the router
/// to carry out its [`Mutation`]; the outcome goes back through [`Control::finish`].
pub(super) struct Pending {
    conn: ConnId,
    id: RequestId,
    /// `wait_ms`: once carried out, the reply waits for this target, at most this long
    /// ([`Waiters`]).
    wait: Option<(Target, std::time::Duration)>,
}

/// What a state-changing request asks the router for.
pub(super) enum Mutation {
    /// A command for the core (start, stop, restart, shutdown).
    Command(Command),
    /// Reload the config.
    Reload,
    /// `vigil scale`: the pod with replicas runs this many.
    Scale { pod: String, replicas: u32 },
    /// Re-execute vigil (`vigil upgrade`).
    Upgrade {
        binary: Option<std::path::PathBuf>,
        check: bool,
    },
    /// Not a change: `metrics`, whose exposition the metrics component builds over several
    /// turns; answered with [`Control::finish_metrics`].
    Metrics(crate::metrics::Format),
}

impl Pending {
    pub(super) fn conn(&self) -> ConnId {
        self.conn
    }

    pub(super) fn id(&self) -> &RequestId {
        &self.id
    }
}

/// The outcome of a [`Mutation`]: the message for the client, or the error kind and text.
pub(super) type Outcome = Result<String, (ErrorKind, String)>;

enum Job {
    /// A `logs` reply: the ring's range `[pos, end)` at request time, sent in chunks.
    Reply {
        key: ContainerKey,
        pos: u64,
        end: u64,
        skipped: u64,
        carry: Vec<u8>,
        /// `--timestamps`: each line prefixed with when it was read.
        stamps: bool,
        at_line_start: bool,
    },
    /// `logs -f`: from `offset` on, for as long as the client stays.
    FollowLogs {
        id: RequestId,
        key: ContainerKey,
        offset: u64,
        carry: Vec<u8>,
        at_line_start: bool,
        stamps: bool,
    },
    /// `events -f` (of one pod's events, with `pod`).
    FollowEvents {
        id: RequestId,
        last_seq: u64,
        pod: Option<String>,
    },
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

/// The clients' descriptor shares: what `RLIMIT_NOFILE` leaves after what the config's
/// containers, probes and hooks need ([`fd_shares`]), the control socket's capped at
/// `client_fd_percent`; logged when they change.
fn shares_of(config: &Config, nofile: u64, before: Option<FdShares>) -> FdShares {
    let s = &config.supervisor;
    let needs = FdNeeds::of(config);
    let shares = fd_shares(
        nofile,
        needs,
        s.client_fd_percent,
        s.metrics_address.is_some(),
    );
    if before != Some(shares) {
        info!(
            "descriptors: {} of RLIMIT_NOFILE {nofile} kept for {} containers and {} probes \
             and hooks; clients may hold {} control connections{}",
            shares.reserved,
            needs.containers,
            needs.probes,
            shares.control,
            if shares.metrics > 0 {
                format!(" and {} metrics connections", shares.metrics)
            } else {
                String::new()
            }
        );
    }
    shares
}

/// The control socket's limits from the config and its descriptor share.
fn limits_of(config: &Config, shares: FdShares) -> Limits {
    let s = &config.supervisor;
    Limits {
        max_connections: shares.control,
        max_per_uid: s.max_connections_per_uid,
        idle_timeout: s.client_idle_timeout,
        ..Limits::default()
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (getrlimit(2)): descriptors are what a
/// supervisor spawns, probes and pipes with, and systemd's default soft limit is 1,024.
/// Returns the soft limit in force.
fn raise_nofile_limit() -> u64 {
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

impl Control {
    /// Binds the control socket and registers it (start-up). The descriptor limit is raised
    /// first: the clients' share is derived from it.
    pub(super) fn bind(
        config: &Config,
        socket: &Path,
        registry: Rc<Registry>,
    ) -> Result<Control, StartError> {
        let nofile = raise_nofile_limit();
        let access = access_of(config)?;
        let mut server = Server::bind(socket, &access, CONN_TOKEN_BASE)?;
        let shares = shares_of(config, nofile, None);
        server.set_limits(limits_of(config, shares));
        server.register(&registry, tokens::LISTENER, tokens::SOCKET_WATCH)?;
        info!("control socket listening on {}", socket.display());
        Ok(Control {
            server,
            registry,
            jobs: HashMap::new(),
            more: false,
            clock: WallClock::now(),
            status_cache: None,
            status_spare: String::new(),
            full_status_bytes: 0,
            shares,
            waiters: Waiters::default(),
        })
    }

    /// The control socket inherited across `vigil upgrade` (start-up of the new instance):
    /// still listening, never closed.
    pub(super) fn inherit(
        config: &Config,
        socket: &Path,
        registry: Rc<Registry>,
        listener: std::os::fd::OwnedFd,
    ) -> Result<Control, StartError> {
        let nofile = raise_nofile_limit();
        let access = access_of(config)?;
        let mut server = Server::inherit(socket, listener, &access, CONN_TOKEN_BASE);
        let shares = shares_of(config, nofile, None);
        server.set_limits(limits_of(config, shares));
        server.register(&registry, tokens::LISTENER, tokens::SOCKET_WATCH)?;
        Ok(Control {
            server,
            registry,
            jobs: HashMap::new(),
            more: false,
            clock: WallClock::now(),
            status_cache: None,
            status_spare: String::new(),
            full_status_bytes: 0,
            shares,
            waiters: Waiters::default(),
        })
    }

    /// The listening descriptor (handed over by `vigil upgrade`).
    pub(super) fn listener_fd(&self) -> std::os::fd::RawFd {
        self.server.listener_fd()
    }

    /// Every open connection but `except` (the one that asked for the upgrade) with what this
    /// instance holds of it, for the handoff; nothing changes (see
    /// [`crate::control::server::Server::handover`]). `replay`: the request line of a
    /// connection whose answer takes several turns (a `metrics` exposition being built), put
    /// back for the next instance to answer.
    pub(super) fn handover(
        &self,
        except: Option<ConnId>,
        replay: &dyn Fn(ConnId) -> Option<String>,
    ) -> Vec<Handover> {
        let notice = protocol::reply_err(&RequestId::null(), ErrorKind::Busy, UPGRADE_NOTICE);
        let waiting: std::collections::HashSet<ConnId> = self
            .waiters
            .handover()
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        let resume = |c: ConnId| match replay(c) {
            Some(line) => Resume::Replay(line),
            None if waiting.contains(&c) => Resume::Owed,
            None => Resume::Cut,
        };
        let mut all = self.server.handover(&notice, &resume);
        all.retain(|h| Some(h.conn) != except);
        all
    }

    /// The requests waiting for their target's state, by connection, for the handoff.
    pub(super) fn waits(&self) -> Vec<(ConnId, crate::runtime::handoff::WaitState)> {
        self.waiters.handover()
    }

    /// The request lines of the `wait`s under way, for `vigil upgrade` to hand over (see
    /// [`Waiters::replays`]).
    pub(super) fn wait_replays(&self, now: Instant) -> Vec<(ConnId, String)> {
        self.waiters.replays(now)
    }

    /// The descriptor of `conn` if a reply line written to it now comes out whole (nothing
    /// unsent, nothing sent ends inside a line): the one that asked for an upgrade, answered
    /// by the next instance.
    pub(super) fn answerable_fd(&self, conn: ConnId) -> Option<std::os::fd::RawFd> {
        self.server.quiet_fd(conn)
    }

    /// The next instance: the connections the previous one handed over, served from now on
    /// as if accepted here.
    /// `waits`: beside each, the request the previous instance had waiting on it for its
    /// target's state, which waits on here.
    pub(super) fn take_over(
        &mut self,
        handed: Vec<Inherited>,
        waits: Vec<Option<crate::runtime::handoff::WaitState>>,
        now: Instant,
    ) -> TakenOver {
        let taken = self.server.take_over(&self.registry, handed, now);
        for (conn, wait) in taken.ids.iter().zip(waits) {
            if let (Some(conn), Some(w)) = (conn, wait) {
                let id = RequestId::from(
                    serde_json::from_str::<serde_json::Value>(&w.id)
                        .unwrap_or(serde_json::Value::Null),
                );
                let pending = Pending {
                    conn: *conn,
                    id,
                    wait: None,
                };
                self.waiters.resume(pending, w, &self.clock);
            }
        }
        taken
    }

    /// A readiness event on a token the server owns.
    pub(super) fn on_event(&mut self, event: &Event, now: Instant) {
        self.server.on_event(&self.registry, event, now);
    }

    /// Starts the turn's work on the socket (budgets, pending accepts, the sweep).
    pub(super) fn begin_turn(&mut self, now: Instant) {
        self.retire_status_cache();
        self.server.begin_turn(&self.registry, now);
    }

    /// The status cache is no longer current: its buffer is kept for the next rendering.
    fn retire_status_cache(&mut self) {
        if let Some(c) = self.status_cache.take() {
            self.status_spare = c.result;
        }
    }

    /// Gives back the memory kept between requests (the status buffer); the shell calls it
    /// when it trims at idle (src/runtime/trim.rs), so a burst of requests leaves the idle
    /// resident set where it was.
    pub(super) fn release_memory(&mut self) {
        self.status_cache = None;
        self.status_spare = String::new();
    }

    /// Answers requests within the turn's budget until one changes state (returned for the
    /// router to carry out) or none is left.
    pub(super) fn next_change(&mut self, now: Instant, view: &View) -> Option<(Pending, Mutation)> {
        while let Some(inc) = self.server.next_request(&self.registry, now) {
            if let Some(change) = self.answer(inc, now, view) {
                // The router changes state before the next request is answered.
                self.retire_status_cache();
                return Some(change);
            }
        }
        None
    }

    /// Sends the reply to a request whose [`Mutation`] the router carried out.
    pub(super) fn finish(&mut self, pending: Pending, outcome: Outcome) {
        let reply = outcome.and_then(|message| {
            wire_json(&wire::MessageReply {
                message,
                wait: None,
            })
        });
        self.send_reply(pending.conn, &pending.id, reply);
    }

    /// [`Control::finish`] for a command carried out at `now`: with `wait_ms`, its reply
    /// waits for the target's state first ([`Control::settle_waiters`]).
    pub(super) fn finish_command(&mut self, mut pending: Pending, outcome: Outcome, now: Instant) {
        match (outcome, pending.wait.take()) {
            (Ok(message), Some((target, timeout))) => {
                self.waiters
                    .park(pending, message, target, timeout, now, &self.clock);
            }
            (outcome, _) => self.finish(pending, outcome),
        }
    }

    /// Answers every waiting request whose wait is over (once per turn, after the turn's
    /// changes to the core).
    pub(super) fn settle_waiters(&mut self, now: Instant, view: &View) {
        if self.waiters.is_empty() {
            return;
        }
        let server = &self.server;
        let done = self.waiters.settle(
            now,
            view.core,
            &self.clock,
            |conn| server.is_open(conn),
            |conn| server.peer_gone(conn),
        );
        for (w, done) in done {
            let reply = match done {
                Done::Command { message, outcome } => wire_json(&wire::MessageReply {
                    message,
                    wait: Some(outcome),
                }),
                Done::Pods(Ok(reply)) => wire_json(&reply),
                Done::Pods(Err(pod)) => Err((
                    ErrorKind::NotFound,
                    format!("pod {pod:?} was removed while waiting for it"),
                )),
                // Its client hung up: the reply goes nowhere, and the connection closes.
                Done::Gone => Err((ErrorKind::Busy, "the client went away".to_string())),
            };
            self.send_reply(w.pending.conn, &w.pending.id, reply);
        }
    }

    /// Answers a `metrics` request ([`Mutation::Metrics`]) with its exposition.
    pub(super) fn finish_metrics(
        &mut self,
        pending: Pending,
        format: crate::metrics::Format,
        text: &str,
    ) {
        let reply = wire_json(&wire::MetricsReply {
            content_type: format.content_type().to_string(),
            text: text.to_string(),
        });
        self.send_reply(pending.conn, &pending.id, reply);
    }

    /// Whether the connection of a request still waiting for its reply is open.
    pub(super) fn is_open(&self, conn: ConnId) -> bool {
        self.server.is_open(conn)
    }

    /// Whether the socket, a stream or a waiter has work that no readiness event will
    /// announce.
    pub(super) fn has_backlog(&self) -> bool {
        self.server.has_backlog() || self.more || self.waiters.has_more()
    }

    /// The latest time the loop must wake for the socket or a waiting request.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        super::component::earliest([self.server.next_deadline(), self.waiters.deadline()])
    }

    /// Binds the socket file again if it was deleted or replaced (SIGHUP).
    pub(super) fn check_socket_file(&mut self) -> Result<bool, ControlError> {
        self.server.check_socket_file(&self.registry)
    }

    /// Applies the socket settings of a reloaded config that can change live.
    pub(super) fn apply_settings(&mut self, new: &Config) -> Result<(), String> {
        let access = access_of(new).map_err(|e| e.to_string())?;
        let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(1024, |(soft, _)| soft);
        self.shares = shares_of(new, nofile, Some(self.shares));
        let limits = limits_of(new, self.shares);
        self.server
            .apply_settings(&access, limits)
            .map_err(|e| e.to_string())
    }

    /// The metrics listener's descriptor share (its connections count inside the clients'
    /// budget, see [`fd_shares`]).
    pub(super) fn metrics_share(&self) -> usize {
        self.shares.metrics
    }

    /// Ends the `logs -f` streams of a container that is gone, with an error line.
    pub(super) fn end_log_streams(&mut self, gone: ContainerKey) {
        let conns: Vec<ConnId> = self
            .jobs
            .iter()
            .filter(|(_, j)| matches!(j, Job::FollowLogs { key, .. } if *key == gone))
            .map(|(c, _)| *c)
            .collect();
        for conn in conns {
            if let Some(Job::FollowLogs { id, .. }) = self.jobs.remove(&conn) {
                let line = protocol::reply_err(
                    &id,
                    ErrorKind::NotFound,
                    "the container was removed (by a reload or its pod's removal); log stream ended",
                );
                self.server.end_with_error(&self.registry, conn, &line);
            }
        }
    }

    /// vigil is ending after a clean shutdown (not an upgrade): every stream gets what is left
    /// of it within [`FAREWELL_ROUNDS`] turns' output budgets (the shutdown's last events), then
    /// the final line `shutting_down` "vigil shut down" after the line being written, and one
    /// non-blocking try at sending it; a follower ends at once instead of waiting for a vigil
    /// that is not coming back (docs/interface.md §1.5). What a client does not take now is
    /// lost with the connection when the server is dropped.
    pub(super) fn farewell(&mut self, view: &View) {
        for _ in 0..FAREWELL_ROUNDS {
            if self.jobs.is_empty() {
                break;
            }
            self.server.renew_output_budget();
            self.feed_streams(view);
            if !self.more {
                break;
            }
        }
        let mut conns: Vec<ConnId> = self.jobs.keys().copied().collect();
        conns.sort();
        for conn in conns {
            let id = match self.jobs.remove(&conn) {
                Some(Job::FollowLogs { id, .. } | Job::FollowEvents { id, .. }) => id,
                Some(Job::Reply { .. }) | None => RequestId::null(),
            };
            let line = protocol::reply_err(&id, ErrorKind::ShuttingDown, SHUT_DOWN);
            self.server.end_with_error(&self.registry, conn, &line);
        }
    }

    /// A chunk for every stream with room, within the turn's output budget.
    pub(super) fn feed_streams(&mut self, view: &View) {
        for closed in self.server.take_closed() {
            self.jobs.remove(&closed);
        }
        self.more = false;
        if self.jobs.is_empty() {
            return;
        }
        for conn in self.server.hungry_streams() {
            if self.server.output_budget() == 0 {
                self.more = true;
                break;
            }
            let Some(mut job) = self.jobs.remove(&conn) else {
                continue;
            };
            match self.feed_one(conn, &mut job, view) {
                Feed::Done => {}
                Feed::Idle => {
                    self.jobs.insert(conn, job);
                }
                Feed::More => {
                    self.more = true;
                    self.jobs.insert(conn, job);
                }
            }
        }
        for closed in self.server.take_closed() {
            self.jobs.remove(&closed);
        }
    }

    /// One chunk of `job` for `conn`.
    fn feed_one(&mut self, conn: ConnId, job: &mut Job, view: &View) -> Feed {
        let registry = &*self.registry;
        match job {
            Job::Reply {
                key,
                pos,
                end,
                skipped,
                carry,
                stamps,
                at_line_start,
            } => {
                let mut text = String::new();
                match view.slots.get(key) {
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
                            *at_line_start = true;
                        }
                        if start >= *end {
                            *pos = *end;
                        } else {
                            let take = ((*end - start) as usize).min(r.bytes.len());
                            *pos = start + take as u64;
                            let bytes = &r.bytes[..take];
                            let stamped;
                            let bytes = if *stamps {
                                let buf = &slot.log.buffer;
                                stamped = logs::stamp_lines(buf, start, bytes, *at_line_start);
                                &stamped[..]
                            } else {
                                bytes
                            };
                            *at_line_start = r.bytes[..take].last() == Some(&b'\n');
                            text.push_str(&decode(carry, bytes, *pos >= *end));
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
                stamps,
            } => {
                let Some(slot) = view.slots.get(key) else {
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
                    let at = protocol::LogPosition {
                        ring: buf.id(),
                        next: jump,
                    };
                    let line = protocol::reply_log_skipped(id, jump - *offset, *at_line_start, at);
                    *offset = jump;
                    *at_line_start = true;
                    self.server.push(registry, conn, line.as_bytes());
                    return Feed::More;
                }
                if r.bytes.is_empty() {
                    return Feed::Idle;
                }
                let text = if *stamps {
                    let stamped = logs::stamp_lines(buf, *offset, &r.bytes, *at_line_start);
                    decode(carry, &stamped, false)
                } else {
                    decode(carry, &r.bytes, false)
                };
                *at_line_start = r.bytes.last() == Some(&b'\n');
                *offset = r.next;
                let more = *offset < buf.total_written();
                // Bytes of a character cut at the chunk's end wait in `carry`: not sent yet.
                let at = protocol::LogPosition {
                    ring: buf.id(),
                    next: *offset - carry.len() as u64,
                };
                let line = protocol::reply_log(id, text.as_bytes(), at);
                self.server.push(registry, conn, line.as_bytes());
                if more { Feed::More } else { Feed::Idle }
            }
            Job::FollowEvents { id, last_seq, pod } => {
                let events = view.core.events_since(*last_seq);
                if events.is_empty() {
                    return Feed::Idle;
                }
                let mut out = String::new();
                for e in events.iter().take(EVENTS_PER_CHUNK) {
                    *last_seq = (*last_seq).max(e.seq);
                    if !about_pod(e, pod.as_deref()) {
                        continue;
                    }
                    if let Some(line) = event_line(id, e, &self.clock) {
                        out.push_str(&line);
                    }
                }
                if out.is_empty() {
                    return if events.len() > EVENTS_PER_CHUNK {
                        Feed::More
                    } else {
                        Feed::Idle
                    };
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

    /// Authorises and journals one request, then hands it to its command's handler
    /// (`handlers.rs`); a request that changes state is returned for the router.
    fn answer(&mut self, inc: Incoming, now: Instant, view: &View) -> Option<(Pending, Mutation)> {
        // Check the wall-clock anchor at every answer, so a stepped system clock (NTP, a VM
        // resumed) shows up in what is reported; the core's timers never see it. Kept while
        // the clock agrees with it, so the same instant reads the same in every answer.
        self.clock = self.clock.refreshed(WallClock::now());
        let Incoming {
            conn,
            peer,
            admin,
            request,
        } = inc;
        let request: Request = match request {
            Ok(r) => r,
            Err(e) => {
                self.server.send(&self.registry, conn, &e.reply());
                return None;
            }
        };
        if request.cmd.is_mutating() && !admin {
            warn!(
                "control: refused {} from pid {} uid {}",
                request.cmd.name(),
                peer.pid,
                peer.uid
            );
            let line = protocol::reply_err(
                &request.id,
                ErrorKind::PermissionDenied,
                &format!(
                    "{} needs root, vigil's own uid, or a uid/gid in admin_uids/admin_gids (you are uid {})",
                    request.cmd.name(),
                    peer.uid
                ),
            );
            self.server.send(&self.registry, conn, &line);
            return None;
        }
        // `upgrade --binary` runs a file of the asker's choosing as vigil's user: root's and
        // vigil's own uid's alone, whatever admin_uids/admin_gids say (issue 43: an admin uid
        // must never mean running code as root). Decided from SO_PEERCRED, as `admin` is.
        if matches!(
            request.cmd,
            RequestCmd::Upgrade {
                binary: Some(_),
                ..
            }
        ) && !crate::trust::trusted_uids().contains(&peer.uid)
        {
            warn!(
                "control: refused upgrade --binary from pid {} uid {}",
                peer.pid, peer.uid
            );
            let line = protocol::reply_err(
                &request.id,
                ErrorKind::PermissionDenied,
                &format!(
                    "upgrade --binary needs root or vigil's own uid (you are uid {}); admin_uids \
                     and admin_gids allow `upgrade` to the binary vigil runs from only",
                    peer.uid
                ),
            );
            self.server.send(&self.registry, conn, &line);
            return None;
        }
        journal_request(&peer, &request.cmd);
        let wait = request
            .wait
            .and_then(|timeout| Some((Target::of(&request.cmd)?, timeout)));
        let secrets = if admin {
            render::Secrets::Shown
        } else {
            render::Secrets::Redacted
        };
        let id = request.id;
        let call = handlers::Call {
            conn,
            id: &id,
            secrets,
            now,
            view,
        };
        match handlers::dispatch(self, &call, request.cmd) {
            Answer::Reply(reply) => {
                self.send_reply(conn, &id, reply);
                None
            }
            Answer::CachedStatus => {
                if let Some(c) = &self.status_cache {
                    let (before, after) = protocol::reply_ok_around(&id);
                    let parts = [before.as_bytes(), c.result.as_bytes(), after.as_bytes()];
                    self.server.send_parts(&self.registry, conn, &parts);
                } else {
                    // Not reached: `dispatch` answers so only with the cache filled.
                    let line = protocol::reply_err(&id, ErrorKind::Internal, "no status to send");
                    self.server.send(&self.registry, conn, &line);
                }
                None
            }
            Answer::Sent => None,
            Answer::Change(what) => Some((Pending { conn, id, wait }, what)),
        }
    }

    /// Sends the one reply line of request `id`.
    fn send_reply(&mut self, conn: ConnId, id: &RequestId, reply: Reply) {
        let line = match reply {
            Ok(v) => protocol::reply_ok(id, v),
            Err((kind, message)) => protocol::reply_err(id, kind, &message),
        };
        self.server.send(&self.registry, conn, &line);
    }
}

/// A reply's value, or its error kind and message.
type Reply = Result<serde_json::Value, (ErrorKind, String)>;

/// What a command's handler (`handlers.rs`) made of a request.
enum Answer {
    /// The one reply line to send.
    Reply(Reply),
    /// The reply is the result in `status_cache`, sent from there.
    CachedStatus,
    /// Already answered (a stream started).
    Sent,
    /// For the router to carry out.
    Change(Mutation),
}

/// The journal line for a state change asked for over the control socket, before it is
/// carried out: `web/app: stop requested over the control socket by uid 1000 (pid 4242)`.
fn journal_request(peer: &PeerCred, cmd: &RequestCmd) {
    let (what, target) = match cmd {
        RequestCmd::Start { pod, container, .. } => ("start", Some((pod, container))),
        RequestCmd::Stop { pod, container } => ("stop", Some((pod, container))),
        RequestCmd::Restart {
            pod,
            container,
            rolling,
            ..
        } => (
            if *rolling {
                "rolling restart"
            } else {
                "restart"
            },
            Some((pod, container)),
        ),
        RequestCmd::Trigger { pod } => ("trigger", Some((pod, &None))),
        RequestCmd::Shutdown => ("shutdown", None),
        RequestCmd::Reload => ("reload", None),
        RequestCmd::Scale { pod, replicas } => {
            info!(
                "{pod}: scale to {replicas} replicas requested over the control socket by uid {} \
                 (pid {})",
                peer.uid, peer.pid
            );
            return;
        }
        RequestCmd::Upgrade { check: false, .. } => ("upgrade", None),
        _ => return,
    };
    let by = format!(
        "over the control socket by uid {} (pid {})",
        peer.uid, peer.pid
    );
    match target {
        Some((pod, Some(c))) => info!("{pod}/{c}: {what} requested {by}"),
        Some((pod, None)) => info!("{pod}: {what} requested {by}"),
        None => info!("{what} requested {by}"),
    }
}

/// Core snapshot, and beside it what only the shell knows: each running container's cgroup
/// and its figures. With `only`, just that pod (reading cgroup figures costs a few file
/// reads per container, so a query for one pod must not pay for all of them).
pub(super) fn snapshot(
    view: &View,
    now: Instant,
    only: Option<&str>,
) -> (Vec<PodStatus>, render::Observed) {
    let mut pods = view.core.pods();
    if let Some(name) = only {
        pods.retain(|p| p.name == name);
    }
    let mut observed = render::Observed::new();
    for c in pods
        .iter()
        .flat_map(|p| p.init_containers.iter().chain(p.containers.iter()))
    {
        if let Some(run) = view.slots.get(&c.key).and_then(|s| s.run.as_ref())
            && let Some(cg) = &run.cgroup
        {
            observed.insert(
                c.key,
                render::RunFacts {
                    cgroup: cg.path().to_path_buf(),
                    figures: cg.figures_at(now),
                },
            );
        }
    }
    (pods, observed)
}

/// A reply value as JSON; a value that cannot be serialized (a bug) is an `internal` error.
fn wire_json<T: serde::Serialize>(v: &T) -> Reply {
    wire::to_json(v).map_err(|e| (ErrorKind::Internal, format!("cannot encode the reply: {e}")))
}

/// Whether event `e` is about pod `pod` (its own or one of its containers'); every event is
/// without a pod.
fn about_pod(e: &CoreEvent, pod: Option<&str>) -> bool {
    match pod {
        None => true,
        Some(p) => {
            e.object == p
                || e.object
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with('/'))
        }
    }
}

/// The `not_found` message for a pod name that names none, with the closest name when one is
/// near (as the config checker suggests).
fn no_pod(view: &View, name: &str) -> String {
    let names: Vec<String> = view.core.pods().into_iter().map(|p| p.name).collect();
    match crate::config::values::closest_name(name, names.iter().map(String::as_str)) {
        Some(near) => format!("no pod named \"{name}\" (did you mean \"{near}\"?)"),
        None => format!("no pod named \"{name}\""),
    }
}

/// One followed event's reply line; `None` (logged) if it cannot be encoded (a bug).
fn event_line(id: &RequestId, e: &CoreEvent, clock: &WallClock) -> Option<String> {
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
