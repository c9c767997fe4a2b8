//! The control socket server's mechanics: listening socket, connections, line framing,
//! buffered non-blocking output, streamed replies, and every limit that keeps clients from
//! hurting what vigil supervises.
//!
//! Owns the socket file, every connection fd and one reserve descriptor. It knows nothing about
//! the core: it hands parsed requests ([`Incoming`]) to the runtime one at a time and writes
//! whatever the runtime gives it back. It must never block: all fds are non-blocking and
//! registered edge-triggered with the runtime's `mio::Poll`; a source left with work because a
//! budget ran out is remembered (the ready queue), so nothing waits for another wake-up.
//!
//! Fair by construction (issue 12):
//! - one loop turn takes at most [`TURN_REQUESTS`] requests and produces at most
//!   [`TURN_OUTPUT`] bytes of replies across all connections, round-robin one request per
//!   connection at a time, admins' connections before the others; the rest waits for the next
//!   turn ([`Server::has_backlog`]);
//! - a connection with more than [`OUTPUT_HIGH`] bytes unread, or a streamed reply under way,
//!   gets no further request processed (its input stays in the kernel);
//! - big replies are streamed: the runtime pushes chunks only while the connection has room
//!   ([`Server::hungry_streams`]), so a `logs` reply never exists whole;
//! - buffers are bounded per connection (one line of input, [`OUTPUT_HIGH`] plus one reply of
//!   output), shrunk when drained or mostly worked off, and non-admin connections get no request
//!   taken, no stream fed and nothing read while all client buffers together — replies waiting
//!   unread in the kernel's send queues included (`SIOCOUTQ`, measured again every sweep while
//!   over) — are at [`Limits::memory_budget`] (checked before every request, so the budget is
//!   overshot by one reply at most);
//! - a peer that hung up (`EPOLLHUP`) is served to the end of what it sent — the requests that
//!   change state carried out (a fire-and-forget `restart`), the others dropped unanswered,
//!   at most [`TURN_SKIPS`] a turn — and then closed;
//! - a client that neither sends a request nor reads for [`Limits::idle_timeout`] is closed
//!   (a stalled one with an error line, cut at a line end);
//! - descriptors: at most [`Limits::max_connections`] connections (the runtime derives it from
//!   what `RLIMIT_NOFILE` leaves after the containers' and probes' needs, see
//!   [`crate::control::limits`], whose per-peer counts, memory budget, accept retry and reserve
//!   descriptor the server uses), at most [`Limits::max_per_uid`] per non-admin uid, and an admin always
//!   gets a slot (the newest non-admin connection is evicted). `EMFILE` at accept is handled
//!   with a reserve descriptor (close it, accept, answer, reopen it), so the listener never
//!   stays wedged;
//! - the socket file is watched ([`super::watch`], inotify on its directory and every
//!   ancestor): replaced, renamed away or deleted, it is re-bound. Only while connections are
//!   open (or when inotify cannot be had) does the server wake every [`SWEEP_EVERY`], so with
//!   no connection open the server causes no wake-ups.
//!
//! How the runtime drives it:
//! 1. `Server::bind(path, &access, conn_token_base)`, then
//!    `register(registry, listener_token, watch_token)`.
//! 2. For every poll event whose token [`Server::owns`], call [`Server::on_event`].
//! 3. Once per turn: [`Server::begin_turn`], then answer each [`Server::next_request`] with
//!    exactly one [`Server::send`] (or [`Server::start_stream`] and later pushes), then feed
//!    [`Server::hungry_streams`] with [`Server::push`] / [`Server::end_stream`] /
//!    [`Server::end_with_error`]; drain [`Server::take_closed`] to forget streams.
//! 4. Poll with a zero timeout while [`Server::has_backlog`]; otherwise no later than
//!    [`Server::next_deadline`] (none: no timer needed).
//! 5. Drop the server (or [`Server::shutdown`]) to remove the socket file.

//!
//! Its parts, each an `impl Server` over the one connection table:
//! - `conn`: one connection (line framing, buffered output);
//! - `admission`: accept, peer credentials, caps, eviction, the idle sweep;
//! - `handover`: open connections across `vigil upgrade` (handed over, taken over);
//! - `turn`: the turn's budgets, round-robin hand-out of requests, per-connection bookkeeping;
//! - `reply`: replies and streamed replies within the output budget;
//! - `socket_file`: binding, mode and group, re-binding a deleted or replaced file.

mod admission;
mod conn;
mod handover;
mod reply;
mod socket_file;
mod turn;

use std::collections::VecDeque;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::UnixListener;
use mio::{Interest, Registry, Token};

use super::limits::{AcceptRetry, MemoryBudget, PeerCounts, Reserve, TurnBudget};
use super::protocol::{ProtoError, Request};
use super::watch::SocketWatch;
use admission::Refusals;
use conn::Conn;
pub use handover::{Handover, Inherited, Resume, TakenOver};
use socket_file::{bind_listener, file_id, set_mode_and_group};

/// Requests taken across all connections in one loop turn.
pub const TURN_REQUESTS: usize = 64;
/// Reply bytes produced across all connections in one loop turn (a budget, checked before
/// each request or chunk, so one reply may overshoot it once).
pub const TURN_OUTPUT: usize = 512 * 1024;
/// Requests of clients that are gone dropped unanswered in one loop turn (only a request that
/// changes state is carried out for a peer that hung up; the others are dropped, most without
/// being parsed).
pub const TURN_SKIPS: usize = 4096;
/// Connections accepted in one loop turn.
pub const TURN_ACCEPTS: usize = 64;
/// Above this much unread output a connection gets no further request processed.
pub const OUTPUT_HIGH: usize = 64 * 1024;
/// A streamed reply gets its next chunk once less than this is unread.
pub const STREAM_LOW: usize = 32 * 1024;
/// Default cap on one non-admin uid's connections.
pub const DEFAULT_MAX_PER_UID: usize = 32;
/// Default idle timeout.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default cap on connections (the runtime lowers it to its share of `RLIMIT_NOFILE`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Client buffers at which non-admin connections get no further request, stream chunk or read;
/// checked before every request, so with one reply's overshoot, and the metrics listener's
/// slice beside it, all clients together stay within 32 MiB (`control::limits`).
pub const DEFAULT_MEMORY_BUDGET: usize = super::limits::CONTROL_MEMORY;
/// How often idle connections and the socket file are checked.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// A connection closing after an error line gets this long to take it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Admin connections allowed beyond `max_connections` when no non-admin can be evicted.
const ADMIN_EXTRA: usize = 16;
const READ_CHUNK: usize = 16 * 1024;
/// Drained buffers larger than this are released.
const KEEP_CAPACITY: usize = 4 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("another vigil is already listening on {}", path.display())]
    AlreadyListening { path: PathBuf },
    #[error("{} exists and is not a socket; refusing to replace it", path.display())]
    NotASocket { path: PathBuf },
    #[error("cannot check existing socket {}: {source}", path.display())]
    ProbeExisting { path: PathBuf, source: io::Error },
    #[error("cannot remove stale socket {}: {source}", path.display())]
    RemoveStale { path: PathBuf, source: io::Error },
    #[error("cannot create socket directory {}: {source}", path.display())]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot bind control socket {}: {source}", path.display())]
    Bind { path: PathBuf, source: io::Error },
    #[error("cannot set mode {mode:04o} on {}: {source}", path.display())]
    Chmod {
        path: PathBuf,
        mode: u32,
        source: io::Error,
    },
    #[error("cannot give {} to group {gid}: {source}", path.display())]
    Chown {
        path: PathBuf,
        gid: u32,
        source: nix::Error,
    },
    /// The file at the socket path is no longer the socket vigil bound (deleted, or replaced
    /// by something else, maybe a symlink): its mode and group are not touched.
    #[error(
        "{} is not the socket vigil bound (deleted or replaced); its mode and group were left alone",
        path.display()
    )]
    NotOurs { path: PathBuf },
    #[error("cannot register control socket {} with the poller: {source}", path.display())]
    Register { path: PathBuf, source: io::Error },
    /// The socket's directory changed hands between the start-up check and its creation
    /// (someone made it first in a sticky directory).
    #[error(transparent)]
    Untrusted(#[from] crate::trust::TrustError),
}

/// Who may do what on the socket; everything here can change on reload
/// ([`Server::apply_settings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// Socket file mode.
    pub mode: u32,
    /// Group owning the socket file.
    pub group: Option<u32>,
    pub admin_uids: Vec<u32>,
    /// A peer is an admin if its primary group or any supplementary group is listed.
    pub admin_gids: Vec<u32>,
}

impl Default for Access {
    fn default() -> Access {
        Access {
            mode: 0o600,
            group: None,
            admin_uids: Vec::new(),
            admin_gids: Vec::new(),
        }
    }
}

/// Resource limits for clients; can change on reload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Connections at once (admins may exceed it slightly when nobody can be evicted).
    pub max_connections: usize,
    /// Connections of one non-admin uid.
    pub max_per_uid: usize,
    /// Closed after this long without a request (and without unread output being read).
    pub idle_timeout: Duration,
    /// Bytes of client buffers above which non-admin connections stop reading.
    pub memory_budget: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_per_uid: DEFAULT_MAX_PER_UID,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            memory_budget: DEFAULT_MEMORY_BUDGET,
        }
    }
}

/// Identifies one connection for its whole life; a later connection reusing the slot gets a
/// different id, so lines meant for a closed client are dropped, not misdelivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId {
    index: usize,
    generation: u64,
}

#[cfg(test)]
impl ConnId {
    /// An id no connection has: for tests of what answers requests without a client.
    pub fn unused() -> ConnId {
        ConnId {
            index: usize::MAX,
            generation: u64::MAX,
        }
    }
}

/// The connecting process, from `SO_PEERCRED` at accept time (unix(7)): the credentials of
/// the peer when it called `connect`, not affected by later setuid or fd passing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCred {
    pub pid: i32,
    pub uid: u32,
    pub gid: u32,
}

/// One request line from a client.
#[derive(Debug, Clone, PartialEq)]
pub struct Incoming {
    pub conn: ConnId,
    pub peer: PeerCred,
    /// Root, vigil's own uid, a listed uid, or a member (primary or supplementary, from
    /// `SO_PEERGROUPS`) of a listed group.
    pub admin: bool,
    pub request: Result<Request, ProtoError>,
}

/// The control socket server. See the module docs for how the runtime drives it.
pub struct Server {
    path: PathBuf,
    /// (dev, ino) of the socket file we bound: drop never removes a successor's socket, and a
    /// replaced file is noticed.
    file_id: Option<(u64, u64)>,
    listener: UnixListener,
    listener_token: Option<Token>,
    /// The socket path's inotify watch and its token (`None`: not registered, or inotify could
    /// not be had — then the sweep checks the file on a timer).
    watch: Option<(SocketWatch, Token)>,
    /// The last check of the socket file failed (e.g. an impostor bound the path between our
    /// look and our bind): the sweep's timer checks again until one succeeds, watch or not.
    socket_unsure: bool,
    conn_token_base: usize,
    access: Access,
    limits: Limits,
    euid: u32,
    conns: Vec<Option<Conn>>,
    /// Per slot, the generation the next connection in it gets.
    generations: Vec<u64>,
    free: Vec<usize>,
    /// Slots closed this turn: free again from the next turn on, so that a late event of this
    /// turn's batch for the connection closed (a hang-up) never reaches a new connection
    /// accepted into the same slot (the token is the slot).
    freed: Vec<usize>,
    open: usize,
    per_uid: PeerCounts<u32>,
    /// Connections that may have a request to take, round-robin.
    ready: VecDeque<usize>,
    /// Admins' connections that may have a request to take: served before [`Server::ready`],
    /// so however many clients share the turns, an admin's request waits for none of them.
    ready_admin: VecDeque<usize>,
    /// Non-admin connections that wait for client memory to be freed.
    starved: Vec<usize>,
    closed: Vec<ConnId>,
    /// Bytes of all connection buffers, against [`Limits::memory_budget`].
    memory: MemoryBudget,
    next_seq: u64,
    streams: usize,
    stream_cursor: usize,
    /// The listener may hold connections not accepted yet (the accept budget ran out).
    accept_pending: bool,
    accept_retry: AcceptRetry,
    /// Opened at bind, closed to accept-and-refuse at `EMFILE`.
    reserve: Reserve,
    /// This turn's requests and reply bytes.
    budget: TurnBudget,
    /// Requests of hung-up peers that may still be dropped unanswered this turn.
    skips: usize,
    next_sweep: Instant,
    refusals: Refusals,
    /// Tests: judge every peer a non-admin (the tests run as the server's own uid).
    #[cfg(test)]
    strangers: bool,
}

impl Server {
    /// Creates the listening socket at `path`. An existing socket file is replaced only if no
    /// process answers on it (`ECONNREFUSED`: a stale file from a crashed run); a live one is an
    /// error. The parent directory is created (0755) if missing; the socket gets the access's
    /// mode and group. Connections use tokens from `conn_token_base` up.
    pub fn bind(
        path: &Path,
        access: &Access,
        conn_token_base: usize,
    ) -> Result<Server, ControlError> {
        let listener = bind_listener(path, access, false)?;
        Ok(Self::with_listener(path, listener, access, conn_token_base))
    }

    /// A server on a listening socket inherited across `vigil upgrade` (the socket file at
    /// `path` is already bound to it): it keeps accepting where the old process left off.
    pub fn inherit(
        path: &Path,
        listener: OwnedFd,
        access: &Access,
        conn_token_base: usize,
    ) -> Server {
        let listener = UnixListener::from_std(std::os::unix::net::UnixListener::from(listener));
        Self::with_listener(path, listener, access, conn_token_base)
    }

    /// The listening descriptor (handed over by `vigil upgrade`).
    pub fn listener_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.listener.as_raw_fd()
    }

    fn with_listener(
        path: &Path,
        listener: UnixListener,
        access: &Access,
        conn_token_base: usize,
    ) -> Server {
        let file_id = file_id(path);
        let now = Instant::now();
        Server {
            path: path.to_path_buf(),
            file_id,
            listener,
            listener_token: None,
            watch: None,
            socket_unsure: false,
            conn_token_base,
            access: access.clone(),
            limits: Limits::default(),
            euid: nix::unistd::geteuid().as_raw(),
            conns: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            freed: Vec::new(),
            open: 0,
            per_uid: PeerCounts::default(),
            ready: VecDeque::new(),
            ready_admin: VecDeque::new(),
            starved: Vec::new(),
            closed: Vec::new(),
            memory: MemoryBudget::new(DEFAULT_MEMORY_BUDGET),
            next_seq: 0,
            streams: 0,
            stream_cursor: 0,
            accept_pending: false,
            accept_retry: AcceptRetry::default(),
            reserve: Reserve::open(),
            budget: TurnBudget::new(TURN_REQUESTS, TURN_OUTPUT),
            skips: TURN_SKIPS,
            next_sweep: now + SWEEP_EVERY,
            refusals: Refusals::default(),
            #[cfg(test)]
            strangers: false,
        }
    }

    /// Replaces the limits (at start and on reload).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = Limits {
            max_connections: limits.max_connections.max(1),
            max_per_uid: limits.max_per_uid.max(1),
            ..limits
        };
        self.memory.set_limit(self.limits.memory_budget);
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Applies what may change while running (reload): the socket file's mode and group, the
    /// admin lists (open connections are re-judged) and the limits. The socket path cannot
    /// change here. A socket file that is no longer vigil's is left alone (it is bound afresh,
    /// with the new mode and group, once the sweep or the watch looks at it).
    pub fn apply_settings(&mut self, access: &Access, limits: Limits) -> Result<(), ControlError> {
        self.access = access.clone();
        match set_mode_and_group(&self.path, self.file_id, access) {
            Ok(()) => {}
            Err(e @ ControlError::NotOurs { .. }) => {
                log::warn!("{e}");
                self.socket_unsure = true;
            }
            Err(e) => return Err(e),
        }
        for i in 0..self.conns.len() {
            if let Some(c) = &self.conns[i] {
                let admin = self.judge(&c.peer, &c.groups);
                if let Some(c) = self.conns[i].as_mut() {
                    c.admin = admin;
                }
            }
        }
        self.set_limits(limits);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Registers the listening socket with `listener_token`.
    pub fn register(
        &mut self,
        registry: &Registry,
        listener_token: Token,
        watch_token: Token,
    ) -> Result<(), ControlError> {
        registry
            .register(&mut self.listener, listener_token, Interest::READABLE)
            .map_err(|source| ControlError::Register {
                path: self.path.clone(),
                source,
            })?;
        self.listener_token = Some(listener_token);
        self.arm_watch(registry, watch_token);
        Ok(())
    }

    /// Whether `token` is the listener's or one of the connection tokens.
    pub fn owns(&self, token: Token) -> bool {
        Some(token) == self.listener_token
            || self.watch.as_ref().is_some_and(|(_, t)| *t == token)
            || (token.0 >= self.conn_token_base
                && token.0 - self.conn_token_base < self.conns.len())
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.open
    }

    /// Bytes held in connection buffers.
    pub fn memory(&self) -> usize {
        self.memory.used()
    }

    /// Handles one readiness event for a token this server [`owns`](Server::owns): accepts
    /// (within the turn's budget), writes pending output, notes readable input. Requests are
    /// taken later, fairly, by [`next_request`](Server::next_request).
    pub fn on_event(&mut self, registry: &Registry, event: &Event, now: Instant) {
        let token = event.token();
        if Some(token) == self.listener_token {
            self.accept_some(registry, now);
            return;
        }
        if self.watch.as_ref().is_some_and(|(_, t)| *t == token) {
            self.on_watch_event(registry);
            return;
        }
        let Some(index) = token.0.checked_sub(self.conn_token_base) else {
            return;
        };
        let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
            // A late event for a connection closed earlier in this turn.
            return;
        };
        let id = conn.id;
        if event.is_writable() {
            match conn.flush() {
                Ok(true) => conn.last_active = now,
                Ok(false) => {}
                Err(e) => {
                    log::debug!("control: write to pid {} failed: {e}", conn.peer.pid);
                    self.close(registry, id);
                    return;
                }
            }
        }
        if event.is_readable() || event.is_read_closed() {
            conn.more_input = true;
        }
        // The peer is gone entirely (EPOLLHUP/EPOLLERR): nothing more can be delivered, but what
        // it sent is still read, to EOF (the kernel keeps it after the peer closes, unix(7)), and
        // the state changes in it are handed out: a fire-and-forget `shutdown` must work.
        if event.is_write_closed() || event.is_error() {
            conn.hung_up = true;
            conn.more_input = true;
            conn.wbuf = Vec::new();
            conn.wpos = 0;
        }
        self.settle(registry, id);
    }

    /// Starts a loop turn: resets the budgets, accepts what the last turn left, re-admits
    /// connections that waited for memory, and (every [`SWEEP_EVERY`]) closes idle and stalled
    /// connections and checks the socket file.
    pub fn begin_turn(&mut self, registry: &Registry, now: Instant) {
        self.budget.renew();
        self.skips = TURN_SKIPS;
        self.free.append(&mut self.freed);
        let retry_due = self.accept_retry.deadline().is_some() && !self.accept_retry.waiting(now);
        if self.accept_pending || retry_due {
            self.accept_some(registry, now);
        }
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY;
            self.sweep(registry, now);
            self.check_socket_file_logged(registry);
            if self.memory.full() {
                // A connection's kernel bytes shrink when its peer reads, which no event
                // announces while vigil has nothing more to write to it: over the budget,
                // every connection is measured again (once a sweep), so waiting clients are
                // let back in once the others have read their replies.
                self.reaccount_all();
            }
        }
        if !self.starved.is_empty() && !self.memory.full() {
            for index in std::mem::take(&mut self.starved) {
                self.enqueue(index);
            }
        }
    }

    /// A fresh output budget outside a loop turn: vigil's last words to its streams at a
    /// clean shutdown ([`crate::control`]'s runtime side), bounded like a turn's.
    pub fn renew_output_budget(&mut self) {
        self.budget.renew();
    }

    /// The latest time the runtime must wake for the server (accept retry; the sweep while
    /// connections are open or the socket path is not watched); `None` when nothing is due,
    /// so an idle vigil sleeps until something happens.
    pub fn next_deadline(&self) -> Option<Instant> {
        let sweep = (self.open > 0 || self.watch.is_none() || self.socket_unsure)
            .then_some(self.next_sweep);
        match (self.accept_retry.deadline(), sweep) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether `conn` is still open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.conns
            .get(conn.index)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.id == conn)
    }

    /// Whether the peer of an open connection has gone (hung up, reset): a reply would reach
    /// nobody.
    pub fn peer_gone(&self, conn: ConnId) -> bool {
        self.conns
            .get(conn.index)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.id == conn && c.hung_up)
    }

    /// Connections closed since the last call (so the runtime can drop stream state).
    pub fn take_closed(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.closed)
    }

    /// Closes every connection and removes the socket file.
    pub fn shutdown(self) {
        drop(self);
    }

    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn> {
        self.conns
            .get_mut(id.index)
            .and_then(Option::as_mut)
            .filter(|c| c.id == id)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Remove the socket file only if it is still the one we created.
        let ours = file_id(&self.path);
        if ours.is_some() && ours == self.file_id {
            if let Err(e) = std::fs::remove_file(&self.path) {
                log::warn!("control: cannot remove {}: {e}", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests;
