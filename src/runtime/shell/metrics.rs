//! The metrics endpoint's side of the shell: the TCP listener on `metrics_address` and its
//! connections, serving `GET /metrics` from the same loop as everything else.
//!
//! Owns the listener, every scraper's socket, their buffers and tokens (`Owner::Metrics`).
//! The same protections as the control socket, sized for scrapers:
//! - at most [`MAX_CLIENTS`] connections (one more is answered `503` and closed), at most
//!   [`ACCEPTS_PER_TURN`] accepted per turn; `EMFILE` and the like are retried after
//!   [`ACCEPT_RETRY`], never in a busy loop;
//! - a request head of at most 8 KiB (`metrics::http`), read only while no reply is under way;
//!   anything but `GET /metrics` without a body gets one status line and is closed;
//! - at most [`RENDERS_PER_TURN`] expositions built per turn, shared by every scraper answered in
//!   that turn (one `Rc` body, never a copy per connection), and at most [`WRITERS`]
//!   connections with a reply under way, so replies held in memory are bounded;
//! - at most [`WRITE_CHUNK`] bytes per write and [`TURN_OUTPUT`] bytes per turn across all
//!   connections; the rest goes next turn (the router polls with a zero timeout while
//!   [`MetricsListener::has_work`]);
//! - a connection that makes no progress (no complete request, nothing taken of its reply) for
//!   [`IDLE_TIMEOUT`] is closed: slow heads and readers that stall cannot hold a slot.
//!
//! Must not: block (every socket is non-blocking, registered edge-triggered: each source is
//! drained to `WouldBlock` or remembered as having more), build the exposition itself (the
//! router passes a function that does), or read the clock.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};

use super::tokens::{Owner, TokenSpace};
use crate::metrics::Format;
use crate::metrics::http::{self, MAX_REQUEST, Parsed, Status};

/// Scrapers connected at once.
pub const MAX_CLIENTS: usize = 64;
/// Connections accepted per loop turn.
pub const ACCEPTS_PER_TURN: usize = 16;
/// Expositions built per loop turn (one per format at most: scrapers answered in the same
/// turn share it).
pub const RENDERS_PER_TURN: usize = 2;
/// Connections with a reply under way.
pub const WRITERS: usize = 8;
/// Bytes per write(2).
pub const WRITE_CHUNK: usize = 64 * 1024;
/// Reply bytes written per loop turn across all connections.
pub const TURN_OUTPUT: usize = 1024 * 1024;
/// A connection without progress this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections over [`MAX_CLIENTS`] kept just long enough to be told `503`.
pub const REFUSING: usize = 16;
/// After a reply that closes the connection, what the client still sends is read and dropped
/// for at most this long before the socket is closed: closing with unread input makes the
/// kernel send a reset, which can destroy the reply before the client reads it (RFC 9112
/// §9.6, "tear-down").
const LINGER: Duration = Duration::from_secs(2);
/// Retry of an accept that failed for another reason than `WouldBlock` (e.g. `EMFILE`).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);
const READ_CHUNK: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("metrics_address {addr}: cannot listen: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    #[error("metrics_address {addr}: cannot register with the poller: {source}")]
    Register { addr: SocketAddr, source: io::Error },
}

/// A reply being written: the head, then a body shared with other connections.
struct Reply {
    head: Vec<u8>,
    body: Rc<[u8]>,
    pos: usize,
    close_after: bool,
}

impl Reply {
    fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// The next bytes to write, at most [`WRITE_CHUNK`].
    fn next(&self) -> &[u8] {
        let bytes = if self.pos < self.head.len() {
            &self.head[self.pos..]
        } else {
            &self.body[self.pos - self.head.len()..]
        };
        &bytes[..bytes.len().min(WRITE_CHUNK)]
    }
}

struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
    reply: Option<Reply>,
    /// The kernel may hold input not read yet (edge-triggered: until a read says WouldBlock).
    readable: bool,
    /// The kernel may take more output.
    writable: bool,
    /// The peer closed its side (or the socket failed).
    eof: bool,
    /// The last progress: accepted, a request completed, reply bytes taken.
    since: Instant,
    /// The reply is sent and the write side shut: input is dropped until EOF or this time.
    lingering: Option<Instant>,
    /// Accepted over [`MAX_CLIENTS`] to be told `503`.
    over_limit: bool,
}

impl Conn {
    fn new(stream: TcpStream, now: Instant) -> Conn {
        Conn {
            stream,
            input: Vec::new(),
            reply: None,
            readable: true,
            writable: true,
            eof: false,
            since: now,
            lingering: None,
            over_limit: false,
        }
    }

    fn refuse(&mut self, status: Status, why: &str, now: Instant) {
        self.input.clear();
        self.reply = Some(Reply {
            head: http::refusal(status, why).into_bytes(),
            body: Rc::from(&[][..]),
            pos: 0,
            close_after: true,
        });
        self.writable = true;
        self.since = now;
    }

    fn deadline(&self) -> Instant {
        self.lingering.unwrap_or(self.since + IDLE_TIMEOUT)
    }
}

/// The listener and its connections.
pub(super) struct MetricsListener {
    registry: Rc<Registry>,
    listener: TcpListener,
    addr: SocketAddr,
    token: Token,
    tokens: TokenSpace,
    conns: HashMap<Token, Conn>,
    accept_pending: bool,
    accept_retry: Option<Instant>,
    /// Something was left for the next turn.
    more: bool,
}

impl MetricsListener {
    /// Listens on `addr` (mio sets `SO_REUSEADDR` and `SOCK_CLOEXEC`: a restarted vigil can
    /// bind at once, and no container inherits the socket).
    pub fn bind(registry: Rc<Registry>, addr: SocketAddr) -> Result<MetricsListener, MetricsError> {
        let mut listener =
            TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
        let bound = listener.local_addr().unwrap_or(addr);
        let mut tokens = TokenSpace::new(Owner::Metrics);
        let token = tokens.next();
        registry
            .register(&mut listener, token, Interest::READABLE)
            .map_err(|source| MetricsError::Register { addr, source })?;
        info!("metrics: serving http://{bound}/metrics");
        Ok(MetricsListener {
            registry,
            listener,
            addr: bound,
            token,
            tokens,
            conns: HashMap::new(),
            accept_pending: true,
            accept_retry: None,
            more: true,
        })
    }

    pub fn on_event(&mut self, event: &mio::event::Event) {
        let token = event.token();
        if token == self.token {
            self.accept_pending = true;
            return;
        }
        let Some(conn) = self.conns.get_mut(&token) else {
            debug!("metrics: event for a closed connection {token:?}");
            return;
        };
        if event.is_readable() || event.is_read_closed() || event.is_error() {
            conn.readable = true;
        }
        if event.is_writable() || event.is_write_closed() || event.is_error() {
            conn.writable = true;
        }
    }

    /// Whether the router should poll again without waiting.
    pub fn has_work(&self) -> bool {
        self.more
    }

    /// The earliest idle timeout or accept retry.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.conns
            .values()
            .map(Conn::deadline)
            .chain(self.accept_retry)
            .min()
    }

    /// One turn: accept, read, answer complete requests (`render` builds an exposition), write,
    /// close what is finished or idle.
    pub fn serve(&mut self, now: Instant, render: &mut dyn FnMut(Format) -> String) {
        self.more = false;
        self.accept(now);
        let mut rendered: [Option<Rc<[u8]>>; 2] = [None, None];
        let mut renders = 0;
        let mut writers = self.conns.values().filter(|c| c.reply.is_some()).count();
        let mut budget = TURN_OUTPUT;
        let mut gone = Vec::new();
        let mut waiting = false;
        let mut freed = false;
        for (&token, conn) in self.conns.iter_mut() {
            if let Some(until) = conn.lingering {
                if conn.readable {
                    discard_input(conn);
                }
                if conn.eof || now >= until {
                    gone.push(token);
                }
                continue;
            }
            if conn.reply.is_none() {
                if conn.readable && conn.input.len() < MAX_REQUEST {
                    read_some(conn);
                }
                match http::parse(&conn.input) {
                    Parsed::Partial => {
                        if conn.eof {
                            gone.push(token);
                            continue;
                        }
                    }
                    Parsed::Refuse(status, why) => {
                        debug!("metrics: refused a request: {} {why}", status.code());
                        conn.refuse(status, why, now);
                        writers += 1;
                    }
                    Parsed::Scrape(s) => {
                        let slot = match s.format {
                            Format::Prometheus => 0,
                            Format::OpenMetrics => 1,
                        };
                        if writers >= WRITERS {
                            // Picked up when a reply finishes or a connection goes (not by
                            // polling: a stalled writer would make that a busy loop).
                            waiting = true;
                            continue;
                        }
                        if rendered[slot].is_none() && renders >= RENDERS_PER_TURN {
                            self.more = true;
                            continue;
                        }
                        let body = rendered[slot]
                            .get_or_insert_with(|| {
                                renders += 1;
                                Rc::from(render(s.format).into_bytes())
                            })
                            .clone();
                        conn.input.drain(..s.len);
                        debug!("metrics: scrape answered in {}", s.format.as_str());
                        conn.reply = Some(Reply {
                            head: http::head(
                                Status::Ok,
                                s.format.content_type(),
                                body.len(),
                                s.keep_alive,
                            )
                            .into_bytes(),
                            body,
                            pos: 0,
                            close_after: !s.keep_alive,
                        });
                        conn.writable = true;
                        conn.since = now;
                        writers += 1;
                    }
                }
            }
            if conn.reply.is_some() && conn.writable {
                if budget == 0 {
                    self.more = true;
                    continue;
                }
                match write_some(conn, &mut budget, now) {
                    Ok(true) => {
                        let reply = conn.reply.take();
                        writers = writers.saturating_sub(1);
                        freed = true;
                        if reply.is_some_and(|r| r.close_after) {
                            let _ = conn.stream.shutdown(std::net::Shutdown::Write);
                            conn.lingering = Some(now + LINGER);
                            conn.readable = true;
                            self.more = true;
                            continue;
                        }
                        // Keep-alive: a next request may already be waiting (read or not).
                        conn.readable = true;
                        self.more = true;
                    }
                    Ok(false) => {
                        if conn.writable {
                            self.more = true;
                        }
                    }
                    Err(e) => {
                        debug!("metrics: writing to a scraper: {e}");
                        gone.push(token);
                        continue;
                    }
                }
            }
            if conn.reply.is_none() && conn.readable && conn.input.len() < MAX_REQUEST {
                self.more = true;
            }
            if now.saturating_duration_since(conn.since) >= IDLE_TIMEOUT {
                debug!("metrics: closing a connection idle for {IDLE_TIMEOUT:?}");
                gone.push(token);
            }
        }
        for token in gone {
            if let Some(mut conn) = self.conns.remove(&token) {
                let _ = self.registry.deregister(&mut conn.stream);
                freed = true;
            }
        }
        if waiting && freed {
            self.more = true;
        }
        if self.accept_pending {
            self.more = true;
        }
    }

    fn accept(&mut self, now: Instant) {
        if self.accept_retry.is_some_and(|t| now < t) {
            return;
        }
        self.accept_retry = None;
        if !self.accept_pending {
            return;
        }
        for _ in 0..ACCEPTS_PER_TURN {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let over = self.conns.len() >= MAX_CLIENTS;
                    if over {
                        debug!("metrics: {peer} refused: {MAX_CLIENTS} scrapers connected");
                        let refusing = self.conns.values().filter(|c| c.over_limit).count();
                        if refusing >= REFUSING {
                            continue;
                        }
                    }
                    let token = self.tokens.next();
                    if let Err(e) = self.registry.register(
                        &mut stream,
                        token,
                        Interest::READABLE | Interest::WRITABLE,
                    ) {
                        warn!("metrics: cannot register a connection from {peer}: {e}");
                        continue;
                    }
                    let mut conn = Conn::new(stream, now);
                    if over {
                        conn.over_limit = true;
                        conn.refuse(Status::Unavailable, "too many scrapers connected", now);
                    }
                    self.conns.insert(token, conn);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // EMFILE, ENFILE, ENOBUFS…: the pending connection stays in the backlog;
                    // try again shortly instead of spinning.
                    warn!("metrics: accepting on {}: {e}", self.addr);
                    self.accept_retry = Some(now + ACCEPT_RETRY);
                    return;
                }
            }
        }
    }
}

impl Drop for MetricsListener {
    fn drop(&mut self) {
        for conn in self.conns.values_mut() {
            let _ = self.registry.deregister(&mut conn.stream);
        }
        let _ = self.registry.deregister(&mut self.listener);
    }
}

/// Reads what the kernel holds, up to the request limit.
fn read_some(conn: &mut Conn) {
    let mut buf = [0u8; READ_CHUNK];
    while conn.input.len() < MAX_REQUEST {
        let room = (MAX_REQUEST - conn.input.len()).min(READ_CHUNK);
        match conn.stream.read(&mut buf[..room]) {
            Ok(0) => {
                conn.eof = true;
                conn.readable = false;
                return;
            }
            Ok(n) => conn.input.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                conn.readable = false;
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                conn.eof = true;
                conn.readable = false;
                return;
            }
        }
    }
}

/// Reads and drops what a lingering connection sends (at most 64 KiB a turn).
fn discard_input(conn: &mut Conn) {
    let mut buf = [0u8; READ_CHUNK];
    for _ in 0..16 {
        match conn.stream.read(&mut buf) {
            Ok(0) => {
                conn.eof = true;
                return;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                conn.readable = false;
                return;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                conn.eof = true;
                return;
            }
        }
    }
}

/// Writes the reply within `budget`; `Ok(true)` once it is all written.
fn write_some(conn: &mut Conn, budget: &mut usize, now: Instant) -> io::Result<bool> {
    let Some(reply) = conn.reply.as_mut() else {
        return Ok(true);
    };
    while reply.pos < reply.len() {
        if *budget == 0 {
            return Ok(false);
        }
        let chunk = reply.next();
        let chunk = &chunk[..chunk.len().min(*budget)];
        match conn.stream.write(chunk) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                reply.pos += n;
                *budget -= n;
                conn.since = now;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                conn.writable = false;
                return Ok(false);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

// ---- the router's side: what a scrape is answered with --------------------------------------

/// The exposition now, from the same snapshot and cgroup figures `status` answers with (also
/// the control socket's `metrics` reply).
pub(super) fn exposition(view: &super::control::View, now: Instant, format: Format) -> String {
    let (pods, observed) = super::control::snapshot(view, now, None);
    let process = crate::metrics::process::read_self(view.started_wall);
    crate::metrics::render(
        format,
        &crate::metrics::Snapshot {
            pods: &pods,
            observed: &observed,
            probes: view.probe_stats,
            process: &process,
            now,
        },
    )
}

impl super::Shell {
    /// Once per turn: the metrics listener's work, with the exposition built on demand.
    pub(super) fn serve_metrics(&mut self, now: Instant) {
        if let Some(listener) = &mut self.metrics {
            let view = super::control::View {
                core: &self.core,
                slots: &self.slots,
                probe_stats: &self.probe_stats,
                started_wall: self.started_wall,
            };
            listener.serve(now, &mut |format| exposition(&view, now, format));
        }
    }

    /// After a reload: the probe figures of containers that are gone go too.
    pub(super) fn prune_probe_stats(&mut self, now: Instant) {
        let live: std::collections::HashSet<_> = self
            .core
            .pods(now)
            .iter()
            .flat_map(|p| p.init_containers.iter().chain(p.containers.iter()))
            .map(|c| c.key)
            .collect();
        self.probe_stats.retain(|k| live.contains(&k));
    }

    /// Counts a probe result on its way to the core (hooks are not probes).
    pub(super) fn count_probe(&mut self, input: &crate::core::Input) {
        use crate::core::{Input, ProbeOutcome};
        use crate::metrics::probes::ProbeResult;
        if let Input::ProbeResult {
            key,
            kind,
            outcome,
            duration,
            ..
        } = input
            && *kind != crate::config::spec::ProbeKind::Hook
        {
            let result = match outcome {
                ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => ProbeResult::Success,
                ProbeOutcome::Failure(_) => ProbeResult::Failure,
            };
            self.probe_stats.record(*key, *kind, result, *duration);
        }
    }
}
