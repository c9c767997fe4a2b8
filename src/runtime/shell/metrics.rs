//! The metrics endpoint's side of the shell: the TCP listener on `metrics_address` and its
//! connections, serving `GET /metrics` from the same loop as everything else.
//!
//! Owns the listener, every scraper's socket, their buffers and tokens (`Owner::Metrics`).
//! The same protections as the control socket, from the same core (`control::limits`), sized
//! for scrapers:
//! - at most its descriptor share of connections ([`MetricsListener::set_share`]: what is left
//!   after vigil's containers, probes and hooks, at most [`MAX_CLIENTS`] served and
//!   [`REFUSING`] more being told `503`, then closed at once), at most [`MAX_PER_PEER`] from one
//!   source address (the next is told `503`), at most [`ACCEPTS_PER_TURN`] accepted per turn;
//!   `EMFILE` and the like are retried after `AcceptRetry::AFTER`, never in a busy loop;
//! - a request head of at most 8 KiB (`metrics::http`), read only while no reply is under way;
//!   anything but `GET /metrics` or a health check (`/readyz`, `/healthz`, `/livez`) without a
//!   body gets one status line and is closed; a health check takes a reply place as a scrape
//!   does and is answered in the turn it completes, every check of a turn from one judgement
//!   of the pods (`metrics::health`);
//! - an exposition is built by [`Scrapes`] a bounded slice per turn (at most
//!   [`CONTAINERS_PER_TURN`] containers' readings and series, across every build under way;
//!   other events are served between slices), at most [`RENDERS_PER_TURN`] builds at once (one
//!   per format), each shared by every scraper that asked before it began (one `Rc` body, never a
//!   copy per connection), and at most [`WRITERS`] connections waiting for or taking a reply
//!   ([`WRITERS_PER_PEER`] of one source address), so replies held in memory are bounded and
//!   one address's slow readers cannot take every place; a scrape that waits [`IDLE_TIMEOUT`] for one of those
//!   places (readers that stall or trickle may hold them all) is told `503` and closed;
//! - the bytes every connection holds (its request buffer, its reply's head, each exposition
//!   held for a reply counted once however many share it) are the listener's slice of the
//!   clients' memory budget (`control::limits::METRICS_MEMORY`): while they fill it, a
//!   complete scrape waits as for a place (and is told `503` after [`IDLE_TIMEOUT`]);
//! - every deadline here, once due, makes progress or is moved (an idle connection is closed,
//!   a waiting scrape refused, an accept retried): the router's poll timeout is never zero
//!   again and again while nothing can move;
//! - at most [`WRITE_CHUNK`] bytes per write and [`TURN_OUTPUT`] bytes per turn across all
//!   connections; the rest goes next turn (the router polls with a zero timeout while
//!   [`MetricsListener::has_work`]);
//! - a connection that makes no progress (no complete request, nothing taken of its reply) for
//!   [`IDLE_TIMEOUT`] is closed, one whose request head has begun and is not complete after
//!   [`HEAD_TIMEOUT`]: slow heads and readers that stall cannot hold a slot. A
//!   connection waiting for its exposition is not idle (the wait is vigil's, however many slow
//!   turns the build takes), and the clock starts again when its reply is ready;
//! - a client that shuts its sending side after a complete request (`shutdown(SHUT_WR)`,
//!   `nc -N`; RFC 9112 §9.6 lets either side close its half) has not left: it may still read,
//!   so it is answered, and the connection closed after that reply. A connection is treated as
//!   gone only when the socket reports a hang-up or error (`EPOLLHUP`, `EPOLLERR`: both halves
//!   closed, a reset), a read fails, or a write fails; a client that closes entirely while it
//!   waits is therefore found out when its reply is written (its place in a build it shares
//!   costs nothing; at most [`WRITERS`] wait).
//!
//! Also here: [`Scrapes`], the expositions being built for scrapers and for `metrics` on the
//! control socket. Consistency (docs/metrics.md): every reading in a reply is taken after its
//! request arrived (a request waits for the next build rather than join one under way), and
//! each pod's series come from one reading in one turn (its status and its containers' cgroup
//! figures, the latter at most `cgroup::FIGURES_MAX_AGE` old); pods are read in turn order, so
//! a scraper's counters never go backwards from one of its scrapes to the next.
//!
//! Must not: block (every socket is non-blocking, registered edge-triggered: each source is
//! drained to `WouldBlock` or remembered as having more), do more per turn than the bounds
//! above, or read the clock.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};

use super::tokens::{Owner, TokenSpace};
use crate::control::limits::{
    AcceptRetry, METRICS_MEMORY, MemoryBudget, PeerCounts, Quiet, TurnBudget,
};
use crate::metrics::http::{self, MAX_REQUEST, Parsed, Status};
use crate::metrics::{Exposition, Format};

/// Scrapers connected at once, at most (fewer when the descriptor share is smaller).
pub const MAX_CLIENTS: usize = 64;
/// Connections accepted per loop turn.
pub const ACCEPTS_PER_TURN: usize = 16;
/// Expositions being built at once (one per format: every request that arrived before a
/// build began shares it).
pub const RENDERS_PER_TURN: usize = 2;
/// Containers read and written into expositions per loop turn, across every build under way
/// (a pod is added whole, so a turn may go over by the rest of one pod's containers).
pub const CONTAINERS_PER_TURN: usize = 64;
/// Connections with a reply under way.
pub const WRITERS: usize = 8;
/// Bytes per write(2).
pub const WRITE_CHUNK: usize = 64 * 1024;
/// Reply bytes written per loop turn across all connections.
pub const TURN_OUTPUT: usize = 1024 * 1024;
/// A connection without progress this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections of one peer address at once: one scraper (or attacker) cannot take every place
/// ([`MAX_CLIENTS`]) from the others.
pub const MAX_PER_PEER: usize = 16;
/// Reply places ([`WRITERS`]) one peer address may hold at once; its further scrapes wait.
pub const WRITERS_PER_PEER: usize = 4;
/// A request head must be complete this long after the connection's last progress once its
/// first byte has come (a slowloris head is cut well before [`IDLE_TIMEOUT`]).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections over a limit kept just long enough to be told `503`, at most (fewer when the
/// descriptor share is smaller).
pub const REFUSING: usize = 16;
/// How long a connection may make no progress.
const QUIET: Quiet = Quiet {
    idle: IDLE_TIMEOUT,
    head: HEAD_TIMEOUT,
};
/// After a reply that closes the connection, what the client still sends is read and dropped
/// for at most this long before the socket is closed: closing with unread input makes the
/// kernel send a reset, which can destroy the reply before the client reads it (RFC 9112
/// §9.6, "tear-down").
const LINGER: Duration = Duration::from_secs(2);
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
    /// The peer's address, for the per-peer limits.
    peer: std::net::IpAddr,
    input: Vec<u8>,
    reply: Option<Reply>,
    /// The kernel may hold input not read yet (edge-triggered: until a read says WouldBlock).
    readable: bool,
    /// The kernel may take more output.
    writable: bool,
    /// The peer shut its sending side (read returned 0): no more requests, but it may still
    /// read a reply to one it sent.
    eof: bool,
    /// The socket hung up or failed (`EPOLLHUP`/`EPOLLERR`, a read error): the peer is gone.
    broken: bool,
    /// The last progress: accepted, a request completed, reply bytes taken.
    since: Instant,
    /// The reply is sent and the write side shut: input is dropped until EOF or this time.
    lingering: Option<Instant>,
    /// Accepted over a limit to be told `503` (not counted for its address).
    over_limit: bool,
    /// Its complete request waits for one of the [`WRITERS`] places (since `since`).
    queued: bool,
    /// A scrape asked for and not answered yet: its format and whether to keep the connection.
    awaiting: Option<(Format, bool)>,
}

impl Conn {
    fn new(stream: TcpStream, peer: std::net::IpAddr, now: Instant) -> Conn {
        Conn {
            stream,
            peer,
            input: Vec::new(),
            reply: None,
            readable: true,
            writable: true,
            eof: false,
            broken: false,
            since: now,
            lingering: None,
            over_limit: false,
            queued: false,
            awaiting: None,
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

    /// When the connection is closed if nothing happens; none while its exposition is built.
    fn deadline(&self) -> Option<Instant> {
        match (self.lingering, &self.awaiting) {
            (Some(until), _) => Some(until),
            (None, Some(_)) => None,
            (None, None) => Some(QUIET.due(self.since, self.head_begun())),
        }
    }

    /// A request head has begun and is not complete: [`HEAD_TIMEOUT`] applies.
    fn head_begun(&self) -> bool {
        self.reply.is_none() && !self.input.is_empty() && !self.queued
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
    /// Connections per peer address (those over a limit, being told `503`, not counted).
    per_peer: PeerCounts<std::net::IpAddr>,
    /// Connections served at once (the descriptor share less [`MetricsListener::refusing`]).
    max_clients: usize,
    /// Connections over a limit kept to be told `503` at once.
    refusing: usize,
    accept_pending: bool,
    accept_retry: AcceptRetry,
    /// Something was left for the next turn.
    more: bool,
    /// Connections that went while awaiting an exposition, for [`Scrapes::forget`].
    left: Vec<Token>,
    /// What the connections hold ([`MetricsListener::held`]) against the listener's slice of
    /// the clients' memory, as of the end of the last turn or delivery.
    memory: MemoryBudget,
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
            per_peer: PeerCounts::default(),
            max_clients: MAX_CLIENTS,
            refusing: REFUSING,
            accept_pending: true,
            accept_retry: AcceptRetry::default(),
            more: true,
            left: Vec::new(),
            memory: MemoryBudget::new(METRICS_MEMORY),
        })
    }

    /// Sets the descriptors the listener's connections may hold together (the clients' budget,
    /// `control::limits::fd_shares`): a fifth of them at most (and at most [`REFUSING`]) for
    /// connections being told `503`, the rest (at most [`MAX_CLIENTS`]) served. Open
    /// connections stay; new ones are judged against it.
    pub fn set_share(&mut self, share: usize) {
        let share = share.max(2);
        self.refusing = (share / 5).clamp(1, REFUSING);
        self.max_clients = (share - self.refusing).min(MAX_CLIENTS);
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
        // A half-close by the peer is only `is_read_closed` (EPOLLRDHUP); a hang-up of both
        // halves or a reset also closes our writing side.
        if event.is_write_closed() || event.is_error() {
            conn.broken = true;
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
            .filter_map(Conn::deadline)
            .chain(self.accept_retry.deadline())
            .min()
    }

    /// One turn: accept, read, pass complete scrape requests to `asks` (answered later with
    /// [`MetricsListener::deliver`]), answer health checks at once with `health` (their status
    /// and body, from the check and its query string), write, close what is finished or idle.
    pub fn serve(
        &mut self,
        now: Instant,
        asks: &mut Vec<(Token, Format)>,
        health: &dyn Fn(http::Check, &str) -> (Status, String),
    ) {
        self.more = false;
        self.accept(now);
        let mut writers = 0;
        let mut peer_writers: HashMap<std::net::IpAddr, usize> = HashMap::new();
        for c in self.conns.values() {
            if c.reply.is_some() || c.awaiting.is_some() {
                writers += 1;
                *peer_writers.entry(c.peer).or_default() += 1;
            }
        }
        let mut budget = TurnBudget::new(usize::MAX, TURN_OUTPUT);
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
            if conn.awaiting.is_some() && conn.readable && !conn.eof {
                // While its exposition is built: what the client sends next is kept for after
                // the reply; a shut sending side (EOF) is not leaving (module docs).
                if conn.input.len() < MAX_REQUEST {
                    read_some(conn);
                } else {
                    conn.readable = false;
                }
            }
            if conn.broken && conn.lingering.is_none() {
                if conn.awaiting.is_some() {
                    debug!("metrics: a scraper left before its reply");
                } else {
                    debug!("metrics: a scraper's connection hung up or failed");
                }
                gone.push(token);
                continue;
            }
            if conn.reply.is_none() && conn.awaiting.is_none() {
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
                    Parsed::Scrape(_) | Parsed::Health(_)
                        if writers >= WRITERS
                            || peer_writers.get(&conn.peer).copied().unwrap_or(0)
                                >= WRITERS_PER_PEER
                            || self.memory.full() =>
                    {
                        // Its request is complete (progress: the clock starts then), but every
                        // place is taken. Picked up when a reply finishes or a connection goes,
                        // not by polling (a stalled writer would make that a busy loop); after
                        // IDLE_TIMEOUT of waiting it is told `503` and closed, so its deadline
                        // never stays due without progress (readers that trickle could hold
                        // every place for as long as they like).
                        if !conn.queued {
                            conn.queued = true;
                            conn.since = now;
                        }
                        if now.saturating_duration_since(conn.since) < IDLE_TIMEOUT {
                            waiting = true;
                            continue;
                        }
                        debug!("metrics: a scrape waited {IDLE_TIMEOUT:?} for a place; 503");
                        let why = if self.memory.full() {
                            "replies held for slow readers fill the metrics memory; try again"
                        } else {
                            "every reply place is taken by slow readers; try again"
                        };
                        conn.refuse(Status::Unavailable, why, now);
                        writers += 1;
                    }
                    // Answered now: one judgement of the pods a turn (the router's `health`
                    // keeps it), a body of a line a pod, a reply place like a scrape's.
                    Parsed::Health(h) => {
                        conn.queued = false;
                        let (status, body) = health(h.check, h.query(&conn.input));
                        conn.input.drain(..h.len);
                        let keep_alive = h.keep_alive && !conn.eof;
                        conn.reply = Some(Reply {
                            head: http::head(
                                status,
                                "text/plain; charset=utf-8",
                                body.len(),
                                keep_alive,
                            )
                            .into_bytes(),
                            body: Rc::from(body.into_bytes()),
                            pos: 0,
                            close_after: !keep_alive,
                        });
                        conn.writable = true;
                        conn.since = now;
                        writers += 1;
                        *peer_writers.entry(conn.peer).or_default() += 1;
                    }
                    Parsed::Scrape(s) => {
                        conn.queued = false;
                        conn.input.drain(..s.len);
                        conn.awaiting = Some((s.format, s.keep_alive));
                        conn.since = now;
                        asks.push((token, s.format));
                        writers += 1;
                        *peer_writers.entry(conn.peer).or_default() += 1;
                    }
                }
            }
            if conn.reply.is_some() && conn.writable {
                if budget.output_left() == 0 {
                    self.more = true;
                    continue;
                }
                match write_some(conn, &mut budget, now) {
                    Ok(true) => {
                        let reply = conn.reply.take();
                        writers = writers.saturating_sub(1);
                        freed = true;
                        // A client that shut its sending side sends no further request.
                        if conn.eof || reply.is_some_and(|r| r.close_after) {
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
            if conn.reply.is_none()
                && conn.awaiting.is_none()
                && conn.readable
                && conn.input.len() < MAX_REQUEST
            {
                self.more = true;
            }
            if conn.awaiting.is_none() && QUIET.expired(conn.since, now, conn.head_begun()) {
                debug!(
                    "metrics: closing a connection without progress for {:?}",
                    QUIET.limit(conn.head_begun())
                );
                gone.push(token);
            }
        }
        for token in gone {
            if let Some(mut conn) = self.conns.remove(&token) {
                let _ = self.registry.deregister(&mut conn.stream);
                if !conn.over_limit {
                    self.per_peer.release(conn.peer);
                }
                if conn.awaiting.is_some() {
                    self.left.push(token);
                }
                freed = true;
            }
        }
        if waiting && freed {
            self.more = true;
        }
        // Waiting out an accept retry (`EMFILE`…) is a deadline ([`Self::next_deadline`]),
        // not work: polling without a timeout meanwhile would spin until it is due.
        if self.accept_pending && self.accept_retry.deadline().is_none() {
            self.more = true;
        }
        self.account();
    }

    /// Bytes the connections hold: request buffers, reply heads, and each exposition held
    /// for a reply once (a build's body is one `Rc` shared by its scrapers).
    pub fn held(&self) -> usize {
        let mut bodies: Vec<*const u8> = Vec::new();
        let mut held = 0usize;
        for conn in self.conns.values() {
            held = held.saturating_add(conn.input.capacity());
            if let Some(reply) = &conn.reply {
                held = held.saturating_add(reply.head.capacity());
                let body = reply.body.as_ptr();
                if !reply.body.is_empty() && !bodies.contains(&body) {
                    bodies.push(body);
                    held = held.saturating_add(reply.body.len());
                }
            }
        }
        held
    }

    /// Brings the memory budget up to date with what the connections hold.
    fn account(&mut self) {
        let held = self.held();
        self.memory.resize(self.memory.used(), held);
    }

    /// Answers the scrape `token` awaits with `body` (a connection gone meanwhile is skipped).
    pub fn deliver(&mut self, token: Token, body: Rc<[u8]>, now: Instant) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let Some((format, keep_alive)) = conn.awaiting.take() else {
            return;
        };
        debug!("metrics: scrape answered in {}", format.as_str());
        // A client that shut its sending side sends no further request: close after this one.
        let keep_alive = keep_alive && !conn.eof;
        conn.reply = Some(Reply {
            head: http::head(Status::Ok, format.content_type(), body.len(), keep_alive)
                .into_bytes(),
            body,
            pos: 0,
            close_after: !keep_alive,
        });
        conn.writable = true;
        conn.since = now;
        self.more = true;
        self.account();
    }

    /// Connections that went while awaiting an exposition since the last call.
    pub fn take_left(&mut self) -> Vec<Token> {
        std::mem::take(&mut self.left)
    }

    fn accept(&mut self, now: Instant) {
        if self.accept_retry.waiting(now) {
            return;
        }
        if !self.accept_pending {
            return;
        }
        for _ in 0..ACCEPTS_PER_TURN {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    self.accept_retry.succeeded();
                    let served = self.conns.values().filter(|c| !c.over_limit).count();
                    let why = if served >= self.max_clients {
                        debug!(
                            "metrics: {peer} refused: {} scrapers connected",
                            self.max_clients
                        );
                        Some("too many scrapers connected")
                    } else if let Err(held) = self.per_peer.admit(peer.ip(), MAX_PER_PEER) {
                        debug!(
                            "metrics: {peer} refused: {held} connections from {} already",
                            peer.ip()
                        );
                        Some("too many connections from your address")
                    } else {
                        None
                    };
                    if why.is_some() {
                        let refusing = self.conns.values().filter(|c| c.over_limit).count();
                        if refusing >= self.refusing {
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
                        if why.is_none() {
                            self.per_peer.release(peer.ip());
                        }
                        continue;
                    }
                    let mut conn = Conn::new(stream, peer.ip(), now);
                    if let Some(why) = why {
                        conn.over_limit = true;
                        conn.refuse(Status::Unavailable, why, now);
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
                    if self.accept_retry.failed(now) {
                        warn!(
                            "metrics: accepting on {}: {e}; retrying every {:?}",
                            self.addr,
                            AcceptRetry::AFTER
                        );
                    } else {
                        debug!("metrics: accepting on {}: {e}", self.addr);
                    }
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
                conn.broken = true;
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
fn write_some(conn: &mut Conn, budget: &mut TurnBudget, now: Instant) -> io::Result<bool> {
    let Some(reply) = conn.reply.as_mut() else {
        return Ok(true);
    };
    while reply.pos < reply.len() {
        if budget.output_left() == 0 {
            return Ok(false);
        }
        let chunk = reply.next();
        let chunk = &chunk[..chunk.len().min(budget.output_left())];
        match conn.stream.write(chunk) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                reply.pos += n;
                budget.spend(n);
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

// ---- the expositions being built ------------------------------------------------------------

/// Who waits for an exposition.
pub(super) enum Asker {
    /// A scraper's connection on the listener.
    Http(Token),
    /// A `metrics` request on the control socket.
    Control(super::control::Pending),
}

/// One exposition being built, a slice of pods per turn.
struct Build {
    format: Format,
    exposition: Exposition,
    /// The pods to add, as the core listed them when the build began.
    pods: Vec<String>,
    /// The next of `pods` to add.
    next: usize,
    askers: Vec<Asker>,
}

/// A finished exposition and who asked for it.
pub(super) struct Built {
    pub(super) format: Format,
    pub(super) text: Rc<str>,
    pub(super) askers: Vec<Asker>,
}

/// The expositions asked for and being built (see the module docs for the consistency rule).
#[derive(Default)]
pub(super) struct Scrapes {
    /// Requests that arrived since the build of their format began (or with none under way),
    /// per format ([`slot`]).
    waiting: [Vec<Asker>; RENDERS_PER_TURN],
    building: [Option<Build>; RENDERS_PER_TURN],
    /// Which build takes the turn's slice first (alternates, so neither format waits on the other).
    first: usize,
}

fn slot(format: Format) -> usize {
    match format {
        Format::Prometheus => 0,
        Format::OpenMetrics => 1,
    }
}

impl Scrapes {
    /// Queues a request for the next build of `format`.
    pub(super) fn ask(&mut self, format: Format, asker: Asker) {
        self.waiting[slot(format)].push(asker);
    }

    /// The control connections waiting for an exposition and the format each asked for
    /// (`vigil upgrade` hands their requests to the next instance to answer).
    pub(super) fn control_askers(&self) -> Vec<(&super::control::Pending, Format)> {
        let mut out = Vec::new();
        for format in [Format::Prometheus, Format::OpenMetrics] {
            let i = slot(format);
            let building = self.building[i].iter().flat_map(|b| &b.askers);
            for a in self.waiting[i].iter().chain(building) {
                if let Asker::Control(p) = a {
                    out.push((p, format));
                }
            }
        }
        out
    }

    /// Whether a build is under way or asked for: the router polls again without waiting.
    pub(super) fn has_work(&self) -> bool {
        self.waiting.iter().any(|w| !w.is_empty()) || self.building.iter().any(Option::is_some)
    }

    /// A scraper's connection went: its place goes, and a build nobody waits for any more is
    /// dropped with everything it held.
    pub(super) fn forget(&mut self, token: Token) {
        let gone = |a: &Asker| matches!(a, Asker::Http(t) if *t == token);
        for w in &mut self.waiting {
            w.retain(|a| !gone(a));
        }
        for b in &mut self.building {
            if let Some(build) = b {
                build.askers.retain(|a| !gone(a));
                if build.askers.is_empty() {
                    *b = None;
                }
            }
        }
    }

    /// One turn's slice: drops control requests whose connection closed (`open`), begins the
    /// build of each format asked for, adds pods to the builds under way up to
    /// [`CONTAINERS_PER_TURN`] containers, and returns the builds that finished.
    pub(super) fn step(
        &mut self,
        view: &super::control::View,
        now: Instant,
        open: &dyn Fn(crate::control::server::ConnId) -> bool,
    ) -> Vec<Built> {
        let alive = |a: &Asker| match a {
            Asker::Http(_) => true,
            Asker::Control(p) => open(p.conn()),
        };
        for i in 0..RENDERS_PER_TURN {
            self.waiting[i].retain(alive);
            if let Some(build) = &mut self.building[i] {
                build.askers.retain(alive);
                if build.askers.is_empty() {
                    self.building[i] = None;
                }
            }
            if self.building[i].is_none() && !self.waiting[i].is_empty() {
                let pods = view.core.pod_names();
                let format = if i == 0 {
                    Format::Prometheus
                } else {
                    Format::OpenMetrics
                };
                self.building[i] = Some(Build {
                    format,
                    exposition: Exposition::new(format, pods.len()),
                    pods,
                    next: 0,
                    askers: std::mem::take(&mut self.waiting[i]),
                });
            }
        }
        let mut budget = CONTAINERS_PER_TURN;
        let mut done = Vec::new();
        let first = self.first;
        self.first = (self.first + 1) % RENDERS_PER_TURN;
        for k in 0..RENDERS_PER_TURN {
            let i = (first + k) % RENDERS_PER_TURN;
            let Some(build) = &mut self.building[i] else {
                continue;
            };
            while budget > 0 && build.next < build.pods.len() {
                let index = build.next;
                build.next += 1;
                // A pod removed since the build began is left out.
                let Some(pod) = view.core.pod_at(index, &build.pods[index]) else {
                    continue;
                };
                let containers = pod.init_containers.len() + pod.containers.len();
                budget = budget.saturating_sub(containers.max(1));
                build.exposition.add_pod(
                    &pod,
                    &|key| {
                        let run = view.slots.get(&key)?.run.as_ref()?;
                        Some(run.cgroup.as_ref()?.figures_at(now))
                    },
                    view.probe_stats,
                    now,
                );
            }
            if build.next >= build.pods.len()
                && let Some(build) = self.building[i].take()
            {
                let process = crate::metrics::process::read_self(view.started_wall);
                let (adopted_runs, output_lost_runs) = view.core.adoption_counts();
                let counters = crate::metrics::Counters {
                    adopted_runs,
                    output_lost_runs,
                    log_lines_dropped: crate::runtime::stderr_log::dropped_total(),
                    last_reload_successful: view.last_reload.successful,
                    last_reload_success_unix_ms: view
                        .last_reload
                        .success_at
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                    event_hooks: super::event_hooks::figures(),
                };
                done.push(Built {
                    format: build.format,
                    text: Rc::from(build.exposition.finish(&process, counters)),
                    askers: build.askers,
                });
            }
        }
        done
    }
}

/// The metrics component: the listener on `metrics_address` (when set) and the expositions
/// being built for it and for `metrics` requests on the control socket.
#[derive(Default)]
pub(super) struct Metrics {
    /// `None` without `metrics_address`.
    pub(super) listener: Option<MetricsListener>,
    scrapes: Scrapes,
}

impl Metrics {
    pub(super) fn new(listener: Option<MetricsListener>) -> Metrics {
        Metrics {
            listener,
            scrapes: Scrapes::default(),
        }
    }

    /// The control connections waiting for an exposition ([`Scrapes::control_askers`]).
    pub(super) fn control_askers(&self) -> Vec<(&super::control::Pending, Format)> {
        self.scrapes.control_askers()
    }

    /// A `metrics` request on the control socket: answered when the next build is done.
    pub(super) fn ask(&mut self, format: Format, pending: super::control::Pending) {
        self.scrapes.ask(format, Asker::Control(pending));
    }

    /// Once per turn: a slice of the expositions under way (finished ones go to who asked:
    /// a scraper here, a control request through `control`), then the listener's work (new
    /// scrapes are queued for the next slice).
    pub(super) fn serve(
        &mut self,
        now: Instant,
        view: &super::control::View,
        control: &mut super::control::Control,
    ) {
        if let Some(listener) = &mut self.listener {
            for token in listener.take_left() {
                self.scrapes.forget(token);
            }
        }
        if self.scrapes.has_work() {
            let built = {
                let open = |conn| control.is_open(conn);
                self.scrapes.step(view, now, &open)
            };
            for b in built {
                for asker in b.askers {
                    match asker {
                        Asker::Http(token) => {
                            if let Some(listener) = &mut self.listener {
                                listener.deliver(token, Rc::<[u8]>::from(b.text.clone()), now);
                            }
                        }
                        Asker::Control(pending) => {
                            control.finish_metrics(pending, b.format, &b.text);
                        }
                    }
                }
            }
        }
        if let Some(listener) = &mut self.listener {
            let mut asks = Vec::new();
            // Health checks of this turn share one judgement of the pods, made on the first.
            let judged: std::cell::OnceCell<Vec<crate::core::PodHealth>> = Default::default();
            let core = view.core;
            let health = |check: crate::metrics::http::Check, query: &str| {
                let (pods, verbose) = crate::metrics::http::health_query(query);
                let all = judged.get_or_init(|| core.health());
                crate::metrics::health::answer(check, all, &pods, verbose)
            };
            listener.serve(now, &mut asks, &health);
            for (token, format) in asks {
                self.scrapes.ask(format, Asker::Http(token));
            }
        }
    }
}

impl super::component::Component for Metrics {
    fn process(
        &mut self,
        event: &mio::event::Event,
        _: Instant,
        _: &mut super::component::Link<'_>,
    ) {
        if let Some(m) = &mut self.listener {
            m.on_event(event);
        }
    }

    fn deadline(&self, now: Instant) -> Option<Instant> {
        let listener = self.listener.as_ref();
        super::component::earliest([
            listener.and_then(MetricsListener::next_deadline),
            (listener.is_some_and(MetricsListener::has_work) || self.scrapes.has_work())
                .then_some(now),
        ])
    }
}

/// After a reload: the probe figures of containers that are gone go too.
pub(super) fn prune_probe_stats(
    stats: &mut crate::metrics::probes::ProbeStats,
    core: &crate::core::Supervisor,
) {
    let live: std::collections::HashSet<_> = core
        .pods()
        .iter()
        .flat_map(|p| p.init_containers.iter().chain(p.containers.iter()))
        .map(|c| c.key)
        .collect();
    stats.retain(|k| live.contains(&k));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Shutdown, TcpStream as StdStream};

    /// A listener driven by hand: real sockets, the time each turn says.
    struct Rig {
        poll: mio::Poll,
        events: mio::Events,
        listener: MetricsListener,
        /// Connections made so far: each comes from its own loopback address (127.0.1.N), so
        /// the per-address limits do not get in the way of tests about the others.
        made: u8,
    }

    impl Rig {
        fn new() -> Rig {
            let poll = mio::Poll::new().expect("poll");
            let registry = Rc::new(poll.registry().try_clone().expect("registry"));
            let listener =
                MetricsListener::bind(registry, "127.0.0.1:0".parse().unwrap()).expect("bind");
            Rig {
                poll,
                events: mio::Events::with_capacity(64),
                listener,
                made: 0,
            }
        }

        fn connect(&mut self) -> StdStream {
            self.made = self.made.wrapping_add(1);
            self.connect_from(std::net::Ipv4Addr::new(127, 0, 1, self.made))
        }

        /// A connection from `source` (a loopback address).
        fn connect_from(&self, source: std::net::Ipv4Addr) -> StdStream {
            use nix::sys::socket::{
                AddressFamily, SockFlag, SockType, SockaddrIn, bind, connect, socket,
            };
            use std::os::fd::AsRawFd;
            let fd = socket(
                AddressFamily::Inet,
                SockType::Stream,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
            .expect("socket");
            bind(
                fd.as_raw_fd(),
                &SockaddrIn::from(std::net::SocketAddrV4::new(source, 0)),
            )
            .expect("bind the source address");
            let SocketAddr::V4(to) = self.listener.addr else {
                panic!("an IPv4 listener");
            };
            connect(fd.as_raw_fd(), &SockaddrIn::from(to)).expect("connect");
            let s = StdStream::from(fd);
            // A guard against a hang only: every reply here is in the kernel's buffer before
            // the test reads it.
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            s
        }

        /// The readiness events so far, then one turn at `now`; the scrapes asked for.
        fn turn(&mut self, now: Instant) -> Vec<(Token, Format)> {
            self.poll
                .poll(&mut self.events, Some(Duration::from_millis(20)))
                .expect("poll");
            for e in self.events.iter() {
                self.listener.on_event(e);
            }
            let mut asks = Vec::new();
            self.listener
                .serve(now, &mut asks, &|_, _| (Status::Ok, String::new()));
            // Every test checks this: a turn leaves work for a zero-timeout poll, or a
            // deadline still ahead; never one already due that the next turn would not move.
            assert!(
                self.listener.has_work() || self.listener.next_deadline().is_none_or(|d| d > now),
                "a deadline due without progress"
            );
            asks
        }

        /// Turns at `now` until a scrape is asked for (the client wrote it whole already).
        fn ask(&mut self, now: Instant) -> Token {
            for _ in 0..500 {
                if let Some(&(token, _)) = self.turn(now).first() {
                    return token;
                }
            }
            panic!("no scrape asked for");
        }
    }

    fn body() -> Rc<[u8]> {
        Rc::from(&b"vigil_up 1\n"[..])
    }

    /// Turns until `s` reads to EOF; what it read.
    fn reply(rig: &mut Rig, s: &mut StdStream, now: Instant) -> String {
        for _ in 0..50 {
            rig.turn(now);
        }
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("read the reply");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_scraper_whose_exposition_takes_longer_than_the_idle_timeout_is_answered_whole() {
        let mut rig = Rig::new();
        let mut s = rig.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let t0 = Instant::now();
        let token = rig.ask(t0);
        assert_eq!(
            rig.listener.next_deadline(),
            None,
            "no idle deadline while the exposition is built"
        );
        // The build takes many slow turns, far past the idle timeout.
        let late = t0 + IDLE_TIMEOUT * 3;
        for _ in 0..5 {
            rig.turn(late);
        }
        assert!(
            rig.listener.take_left().is_empty(),
            "the scraper kept its place"
        );
        rig.listener.deliver(token, body(), late);
        let text = reply(&mut rig, &mut s, late);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nvigil_up 1\n"), "{text}");
    }

    #[test]
    fn beyond_the_limit_sixteen_connections_at_a_time_are_told_503_and_the_rest_closed_at_once() {
        let mut rig = Rig::new();
        let now = Instant::now();
        let held: Vec<StdStream> = (0..MAX_CLIENTS).map(|_| rig.connect()).collect();
        for _ in 0..10 {
            rig.turn(now);
        }
        assert_eq!(rig.listener.conns.len(), MAX_CLIENTS);
        let mut extra: Vec<StdStream> = (0..REFUSING + 4).map(|_| rig.connect()).collect();
        for _ in 0..10 {
            rig.turn(now);
        }
        let mut told = 0;
        let mut closed = 0;
        for s in &mut extra {
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            if out.is_empty() {
                closed += 1;
            } else {
                assert!(out.starts_with(b"HTTP/1.1 503 "), "{out:?}");
                told += 1;
            }
        }
        assert_eq!((told, closed), (REFUSING, 4));
        // The scrapers held open keep their places.
        assert_eq!(
            rig.listener
                .conns
                .values()
                .filter(|c| !c.over_limit)
                .count(),
            held.len()
        );
    }

    #[test]
    fn one_address_gets_sixteen_connections_and_four_reply_places_and_another_is_still_served() {
        let mut rig = Rig::new();
        let now = Instant::now();
        let crowd = std::net::Ipv4Addr::new(127, 0, 2, 1);
        // Sixteen connections of one address, each with a scrape asked for and not answered.
        let mut held = Vec::new();
        for _ in 0..MAX_PER_PEER {
            let mut s = rig.connect_from(crowd);
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
            held.push(s);
        }
        let mut asked = 0;
        for _ in 0..20 {
            asked += rig.turn(now).len();
        }
        assert_eq!(
            asked, WRITERS_PER_PEER,
            "one address holds four reply places"
        );
        // The seventeenth of that address is told 503 and closed.
        let mut over = rig.connect_from(crowd);
        for _ in 0..10 {
            rig.turn(now);
        }
        let mut out = Vec::new();
        over.read_to_end(&mut out).expect("refused, then closed");
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
        assert!(text.contains("from your address"), "{text}");
        // Another address connects and is given a place at once.
        let mut other = rig.connect();
        other
            .write_all(b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")
            .unwrap();
        let token = rig.ask(now);
        rig.listener.deliver(token, body(), now);
        let text = reply(&mut rig, &mut other, now);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    }

    #[test]
    fn a_small_descriptor_share_serves_fewer_and_refuses_the_rest() {
        let mut rig = Rig::new();
        rig.listener.set_share(10);
        let now = Instant::now();
        let held: Vec<StdStream> = (0..8).map(|_| rig.connect()).collect();
        for _ in 0..10 {
            rig.turn(now);
        }
        let mut extra: Vec<StdStream> = (0..4).map(|_| rig.connect()).collect();
        for _ in 0..10 {
            rig.turn(now);
        }
        let mut told = 0;
        for s in &mut extra {
            let mut out = Vec::new();
            let _ = s.read_to_end(&mut out);
            if out.starts_with(b"HTTP/1.1 503 ") {
                told += 1;
            }
        }
        // 10 descriptors: 8 served, 2 being told 503, the rest closed at once.
        assert_eq!(told, 2);
        assert_eq!(rig.listener.conns.len(), held.len() + told);
    }

    #[test]
    fn one_turn_writes_at_most_its_output_budget_across_scrapers() {
        let mut rig = Rig::new();
        let now = Instant::now();
        let body: Rc<[u8]> = Rc::from(vec![b'x'; 4 << 20]);
        let mut clients = Vec::new();
        for _ in 0..3 {
            let mut s = rig.connect();
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
            let token = rig.ask(now);
            clients.push((s, token));
        }
        for (_, token) in &clients {
            rig.listener.deliver(*token, body.clone(), now);
        }
        rig.turn(now);
        // What reached the clients in that one turn (loopback delivers within the write).
        let mut taken = 0;
        let mut buf = vec![0u8; 1 << 20];
        for (s, _) in &mut clients {
            s.set_nonblocking(true).unwrap();
            loop {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => taken += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => panic!("read: {e}"),
                }
            }
        }
        assert!(
            taken > 0 && taken <= TURN_OUTPUT,
            "{taken} bytes in one turn"
        );
        assert!(
            rig.listener.has_work(),
            "the rest is left for the next turn"
        );
    }

    #[test]
    fn replies_held_for_scrapers_that_never_read_count_against_the_memory_slice() {
        let mut rig = Rig::new();
        let t0 = Instant::now();
        // Two scrapers in one build share its exposition: counted once.
        let big: Rc<[u8]> = Rc::from(vec![b'x'; 2 * METRICS_MEMORY]);
        let mut sharing = Vec::new();
        let mut tokens = Vec::new();
        for _ in 0..2 {
            let mut s = rig.connect();
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
            tokens.push(rig.ask(t0));
            sharing.push(s);
        }
        for token in tokens {
            rig.listener.deliver(token, big.clone(), t0);
        }
        rig.turn(t0);
        let held = rig.listener.held();
        assert!(
            (big.len()..big.len() + 64 * 1024).contains(&held),
            "{held} bytes held for one shared exposition"
        );
        // Over the slice: a further scrape waits, then is told why.
        let mut s = rig.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        for _ in 0..5 {
            assert!(
                rig.turn(t0).is_empty(),
                "no scrape taken over the memory slice"
            );
        }
        let late = t0 + IDLE_TIMEOUT;
        let mut out = Vec::new();
        for _ in 0..50 {
            rig.turn(late);
        }
        s.read_to_end(&mut out).expect("refused, then closed");
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 503 ") && text.contains("fill the metrics memory"),
            "{text}"
        );
        // Once the readers that never read go, the memory is free and scrapes are taken.
        for s in &sharing {
            s.shutdown(Shutdown::Both).unwrap();
        }
        drop(sharing);
        let mut s = rig.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        rig.ask(late);
        assert!(rig.listener.held() < 64 * 1024, "{}", rig.listener.held());
    }

    #[test]
    fn a_scrape_waiting_for_a_place_past_the_idle_timeout_gets_503_and_no_deadline_stays_due() {
        let mut rig = Rig::new();
        let t0 = Instant::now();
        // Every place taken by scrapes whose expositions are still being built.
        let mut holders = Vec::new();
        for _ in 0..WRITERS {
            let mut s = rig.connect();
            s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
            rig.ask(t0);
            holders.push(s);
        }
        let mut s = rig.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        for _ in 0..5 {
            assert!(rig.turn(t0).is_empty(), "no place for a ninth scrape");
        }
        // Its deadline comes due with the places still taken: each turn from then on either
        // has work to do or waits for a deadline still ahead (never one already past).
        let late = t0 + IDLE_TIMEOUT;
        for _ in 0..50 {
            rig.turn(late);
            if !rig.listener.has_work() {
                assert!(
                    rig.listener.next_deadline().is_none_or(|d| d > late),
                    "a deadline due without progress"
                );
            }
        }
        let mut out = Vec::new();
        s.read_to_end(&mut out).expect("refused, then closed");
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    }

    #[test]
    fn a_scraper_that_shuts_its_sending_side_after_the_request_is_answered_then_closed() {
        let mut rig = Rig::new();
        let mut s = rig.connect();
        // Keep-alive asked for, then `shutdown(SHUT_WR)` while the exposition is built.
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let now = Instant::now();
        let token = rig.ask(now);
        s.shutdown(Shutdown::Write).unwrap();
        for _ in 0..20 {
            rig.turn(now);
        }
        assert!(
            rig.listener.take_left().is_empty(),
            "a half-close is not leaving"
        );
        rig.listener.deliver(token, body(), now);
        let text = reply(&mut rig, &mut s, now);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.contains("Connection: close\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nvigil_up 1\n"), "{text}");
        for _ in 0..5 {
            rig.turn(now);
        }
        assert!(rig.listener.conns.is_empty(), "closed after the reply");
    }

    #[test]
    fn a_scraper_that_resets_its_connection_while_waiting_gives_up_its_place() {
        let mut rig = Rig::new();
        let mut s = rig.connect();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let now = Instant::now();
        let token = rig.ask(now);
        // SO_LINGER 0: close(2) sends a reset (RFC 9293 §3.6, "abort").
        nix::sys::socket::setsockopt(
            &s,
            nix::sys::socket::sockopt::Linger,
            &libc::linger {
                l_onoff: 1,
                l_linger: 0,
            },
        )
        .unwrap();
        drop(s);
        let mut left = Vec::new();
        for _ in 0..50 {
            rig.turn(now);
            left.extend(rig.listener.take_left());
        }
        assert_eq!(left, vec![token]);
        assert!(rig.listener.conns.is_empty());
    }
}
