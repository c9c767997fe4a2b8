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
//!   connection at a time; the rest waits for the next turn ([`Server::has_backlog`]);
//! - a connection with more than [`OUTPUT_HIGH`] bytes unread, or a streamed reply under way,
//!   gets no further request processed (its input stays in the kernel);
//! - big replies are streamed: the runtime pushes chunks only while the connection has room
//!   ([`Server::hungry_streams`]), so a `logs` reply never exists whole;
//! - buffers are bounded per connection (one line of input, [`OUTPUT_HIGH`] plus one reply of
//!   output), shrunk when drained, and non-admin connections stop reading once all client
//!   buffers together pass [`Limits::memory_budget`];
//! - a client that neither sends a request nor reads for [`Limits::idle_timeout`] is closed
//!   (a stalled one with an error line, cut at a line end);
//! - descriptors: at most [`Limits::max_connections`] connections (the runtime derives it from
//!   `RLIMIT_NOFILE`), at most [`Limits::max_per_uid`] per non-admin uid, and an admin always
//!   gets a slot (the newest non-admin connection is evicted). `EMFILE` at accept is handled
//!   with a reserve descriptor (close it, accept, answer, reopen it), so the listener never
//!   stays wedged;
//! - the socket file is watched ([`super::watch`], inotify on its directory and every
//!   ancestor): replaced, renamed away or deleted, it is re-bound. Only while connections are
//!   open (or when inotify cannot be had) does the server wake every [`SWEEP_EVERY`], so an idle
//!   vigil makes no wake-ups at all.
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

#![allow(unsafe_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::net::{UnixListener, UnixStream};
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, getsockopt, send, sockopt};

use super::protocol::{self, MAX_LINE, ProtoError, Request, RequestId};
use super::watch::SocketWatch;
use super::wire::ErrorKind;

/// Requests taken across all connections in one loop turn.
pub const TURN_REQUESTS: usize = 64;
/// Reply bytes produced across all connections in one loop turn (a budget, checked before
/// each request or chunk, so one reply may overshoot it once).
pub const TURN_OUTPUT: usize = 512 * 1024;
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
/// Client buffers above which non-admin connections stop reading; with one turn's overshoot
/// (at most [`TURN_REQUESTS`] replies) all clients together stay within 32 MiB.
pub const DEFAULT_MEMORY_BUDGET: usize = 24 * 1024 * 1024;
/// How often idle connections and the socket file are checked.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// A connection closing after an error line gets this long to take it.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Admin connections allowed beyond `max_connections` when no non-admin can be evicted.
const ADMIN_EXTRA: usize = 16;
const READ_CHUNK: usize = 16 * 1024;
/// Drained buffers larger than this are released.
const KEEP_CAPACITY: usize = 4 * 1024;
/// Retry of a failed accept (EMFILE without a reserve).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// `SO_PEERGROUPS` (socket(7), Linux ≥ 4.13): the peer's supplementary groups at `connect`.
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_PEERGROUPS: libc::c_int = 0x3d;
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_PEERGROUPS: libc::c_int = 59;

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
    #[error("cannot register control socket {} with the poller: {source}", path.display())]
    Register { path: PathBuf, source: io::Error },
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

/// What the server knows about a reply being streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stream {
    None,
    /// Pushed in chunks until [`Server::end_stream`]; `cut` closes the line if the client is
    /// cut off midway.
    Active {
        cut: Option<&'static str>,
    },
}

struct Conn {
    id: ConnId,
    /// Accept order, to evict the newest.
    seq: u64,
    stream: UnixStream,
    peer: PeerCred,
    groups: Vec<u32>,
    admin: bool,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    wpos: usize,
    /// What was written so far ends inside a line.
    sent_open: bool,
    writable_interest: bool,
    /// The kernel may hold more input: the last read did not reach `WouldBlock`/EOF.
    more_input: bool,
    /// The peer closed its writing side.
    eof: bool,
    /// The peer is gone entirely: nothing more can be delivered.
    hung_up: bool,
    /// An error line was queued: close once it is written (or after [`CLOSE_GRACE`]).
    closing: bool,
    /// A request was handed out and not answered yet.
    in_flight: bool,
    reply: Stream,
    /// In the ready queue.
    queued: bool,
    /// Last request taken or byte written.
    last_active: Instant,
    /// Bytes of buffers accounted in [`Server::memory`].
    footprint: usize,
}

impl Conn {
    fn pending_output(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    fn has_line(&self) -> bool {
        self.rbuf.contains(&b'\n')
            || self.rbuf.len() > MAX_LINE
            || (self.eof && !self.rbuf.is_empty())
    }

    /// May a request be taken now?
    fn can_take(&self) -> bool {
        !self.closing
            && !self.hung_up
            && !self.in_flight
            && self.reply == Stream::None
            && self.pending_output() <= OUTPUT_HIGH
    }

    /// Could a request be taken without a new readiness event?
    fn has_work(&self) -> bool {
        self.has_line() || (self.more_input && !self.eof)
    }

    fn measure(&self) -> usize {
        self.rbuf.capacity() + self.wbuf.capacity() + self.groups.capacity() * 4
    }

    /// Reads until the buffer holds a complete line, `WouldBlock`, EOF or more than one line's
    /// worth; at most one line and one chunk are ever buffered.
    fn read_line(&mut self) -> io::Result<()> {
        let mut buf = [0u8; READ_CHUNK];
        while !self.has_line() {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    self.more_input = false;
                    return Ok(());
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&buf[..n]);
                    self.more_input = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.more_input = false;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Takes the next non-blank line off the input, if a complete one is there.
    fn take_line(&mut self) -> Option<Result<Request, ProtoError>> {
        loop {
            let (line_len, consumed) = match self.rbuf.iter().position(|&b| b == b'\n') {
                Some(i) => (i, i + 1),
                None if self.rbuf.len() > MAX_LINE => (self.rbuf.len(), self.rbuf.len()),
                None if self.eof && !self.rbuf.is_empty() => (self.rbuf.len(), self.rbuf.len()),
                None => return None,
            };
            if line_len > MAX_LINE {
                log::warn!(
                    "control: request line of {} bytes or more from pid {} uid {}; closing",
                    line_len,
                    self.peer.pid,
                    self.peer.uid
                );
                // Whatever follows belongs to the oversized line or comes after it.
                self.rbuf = Vec::new();
                self.closing = true;
                return Some(Err(ProtoError::too_large(line_len)));
            }
            let parsed = {
                let line = &self.rbuf[..line_len];
                if line.iter().all(u8::is_ascii_whitespace) {
                    None
                } else {
                    Some(protocol::parse_request(line))
                }
            };
            self.rbuf.drain(..consumed);
            if self.rbuf.is_empty() && self.rbuf.capacity() > KEEP_CAPACITY {
                self.rbuf = Vec::new();
            }
            if parsed.is_some() {
                return parsed;
            }
        }
    }

    /// Writes until done or `WouldBlock`. `MSG_NOSIGNAL` so a vanished client yields `EPIPE`
    /// instead of a `SIGPIPE` that would kill the supervisor (send(2)). Returns whether
    /// anything was written.
    fn flush(&mut self) -> Result<bool, Errno> {
        let mut progress = false;
        while self.wpos < self.wbuf.len() {
            match send(
                self.stream.as_raw_fd(),
                &self.wbuf[self.wpos..],
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(n) => {
                    self.wpos += n;
                    if n > 0 {
                        progress = true;
                        self.sent_open = self.wbuf[self.wpos - 1] != b'\n';
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            if self.wbuf.capacity() > KEEP_CAPACITY {
                self.wbuf = Vec::new();
            }
        } else if self.wpos > READ_CHUNK && self.wpos * 2 > self.wbuf.len() {
            self.wbuf.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(progress)
    }

    /// Asks for `WRITABLE` only while output is pending (so idle connections cause no wakeups).
    fn update_interest(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        let want = self.pending_output() > 0;
        if want != self.writable_interest {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            registry.reregister(&mut self.stream, token, interest)?;
            self.writable_interest = want;
        }
        Ok(())
    }

    /// Whether the connection has nothing left to do.
    fn finished(&self) -> bool {
        if self.in_flight {
            return false;
        }
        if self.closing {
            return self.pending_output() == 0 || self.hung_up;
        }
        if self.hung_up {
            return self.reply != Stream::None || !self.has_line();
        }
        self.eof && self.reply == Stream::None && self.pending_output() == 0 && !self.has_line()
    }

    /// Stops at the end of the line being written (never half a line), appends `line` and
    /// marks the connection closing. A streamed line left open is closed with its `cut`.
    fn cut_with(&mut self, line: &str) {
        let unsent = &self.wbuf[self.wpos..];
        let keep = if !self.sent_open {
            self.wpos
        } else {
            match unsent.iter().position(|&b| b == b'\n') {
                Some(i) => self.wpos + i + 1,
                None => self.wbuf.len(),
            }
        };
        let open = if keep > self.wpos {
            self.wbuf[keep - 1] != b'\n'
        } else {
            self.sent_open
        };
        self.wbuf.truncate(keep);
        if open {
            match &self.reply {
                Stream::Active { cut: Some(close) } => {
                    self.wbuf.extend_from_slice(close.as_bytes())
                }
                _ => self.wbuf.push(b'\n'),
            }
        }
        self.wbuf.extend_from_slice(line.as_bytes());
        self.reply = Stream::None;
        self.closing = true;
    }
}

/// Turn budgets, reset by [`Server::begin_turn`].
#[derive(Debug, Clone, Copy)]
struct Budget {
    requests: usize,
    output: usize,
}

/// Counts of refusals between two log lines (so an attack does not flood the log).
#[derive(Debug, Default)]
struct Refusals {
    per_uid: usize,
    full: usize,
    emfile: usize,
    evicted: usize,
    idle: usize,
    stalled: usize,
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
    conn_token_base: usize,
    access: Access,
    limits: Limits,
    euid: u32,
    conns: Vec<Option<Conn>>,
    /// Per slot, the generation the next connection in it gets.
    generations: Vec<u64>,
    free: Vec<usize>,
    open: usize,
    per_uid: HashMap<u32, usize>,
    /// Connections that may have a request to take, round-robin.
    ready: VecDeque<usize>,
    /// Non-admin connections that wait for client memory to be freed.
    starved: Vec<usize>,
    closed: Vec<ConnId>,
    /// Bytes of all connection buffers.
    memory: usize,
    next_seq: u64,
    streams: usize,
    stream_cursor: usize,
    /// The listener may hold connections not accepted yet (the accept budget ran out).
    accept_pending: bool,
    accept_retry: Option<Instant>,
    /// Opened at bind, closed to accept-and-refuse at `EMFILE`.
    reserve: Option<OwnedFd>,
    budget: Budget,
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
        let file_id = file_id(path);
        let now = Instant::now();
        Ok(Server {
            path: path.to_path_buf(),
            file_id,
            listener,
            listener_token: None,
            watch: None,
            conn_token_base,
            access: access.clone(),
            limits: Limits::default(),
            euid: nix::unistd::geteuid().as_raw(),
            conns: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            open: 0,
            per_uid: HashMap::new(),
            ready: VecDeque::new(),
            starved: Vec::new(),
            closed: Vec::new(),
            memory: 0,
            next_seq: 0,
            streams: 0,
            stream_cursor: 0,
            accept_pending: false,
            accept_retry: None,
            reserve: open_reserve(),
            budget: Budget {
                requests: TURN_REQUESTS,
                output: TURN_OUTPUT,
            },
            next_sweep: now + SWEEP_EVERY,
            refusals: Refusals::default(),
            #[cfg(test)]
            strangers: false,
        })
    }

    /// Replaces the limits (at start and on reload).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = Limits {
            max_connections: limits.max_connections.max(1),
            max_per_uid: limits.max_per_uid.max(1),
            ..limits
        };
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Applies what may change while running (reload): the socket file's mode and group, the
    /// admin lists (open connections are re-judged) and the limits. The socket path cannot
    /// change here.
    pub fn apply_settings(&mut self, access: &Access, limits: Limits) -> Result<(), ControlError> {
        set_mode_and_group(&self.path, access)?;
        self.access = access.clone();
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

    /// Sets up (again) the inotify watch of the socket's path under `token`. A failure is
    /// logged and leaves the timer check in place of the watch.
    fn arm_watch(&mut self, registry: &Registry, token: Token) {
        if let Some((old, _)) = self.watch.take() {
            let _ = registry.deregister(&mut SourceFd(&old.as_raw_fd()));
        }
        let watch = match SocketWatch::new(&self.path) {
            Ok(w) => w,
            Err(e) => {
                log::warn!("{e}; checking the socket file every second instead");
                return;
            }
        };
        match registry.register(&mut SourceFd(&watch.as_raw_fd()), token, Interest::READABLE) {
            Ok(()) => self.watch = Some((watch, token)),
            Err(e) => log::warn!(
                "registering the watch of {}: {e}; checking the socket file every second instead",
                self.path.display()
            ),
        }
    }

    /// An inotify event on the socket's path: look again, re-bind if the file is not ours,
    /// and watch the path afresh (it may now run through other directories).
    fn on_watch_event(&mut self, registry: &Registry) {
        let Some((watch, token)) = &self.watch else {
            return;
        };
        let token = *token;
        match watch.drain() {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => log::warn!("reading the watch of {}: {e}", self.path.display()),
        }
        if let Err(e) = self.check_socket_file(registry) {
            log::error!("{e}");
        }
        self.arm_watch(registry, token);
    }

    /// Whether the file at the socket path is not the one vigil bound (tests).
    #[cfg(test)]
    pub fn check_socket_file_is_needed(&self) -> bool {
        let now_id = file_id(&self.path);
        now_id.is_none() || now_id != self.file_id
    }

    /// Checks that the file at the socket path is still the one vigil bound; if it was deleted
    /// or replaced (someone renamed a directory on the path and put their own socket there),
    /// logs an error and binds afresh, removing an impostor socket. A replacement that is not
    /// a socket is left alone (and reported). Open connections are kept. Returns whether it
    /// re-bound.
    pub fn check_socket_file(&mut self, registry: &Registry) -> Result<bool, ControlError> {
        let now_id = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => Some((m.dev(), m.ino())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(ControlError::ProbeExisting {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        if now_id.is_some() && now_id == self.file_id {
            return Ok(false);
        }
        match now_id {
            None => log::warn!(
                "control socket {} was deleted; re-created it",
                self.path.display()
            ),
            Some(_) => log::error!(
                "control socket {} was replaced by another file (not the inode vigil bound): \
                 clients may have talked to an impostor; binding it again",
                self.path.display()
            ),
        }
        let mut fresh = bind_listener(&self.path, &self.access, true)?;
        std::mem::swap(&mut self.listener, &mut fresh);
        self.file_id = file_id(&self.path);
        if let Some(token) = self.listener_token {
            // The old listener (now in `fresh`) leaves the poll before it is closed.
            let _ = registry.deregister(&mut fresh);
            registry
                .register(&mut self.listener, token, Interest::READABLE)
                .map_err(|source| ControlError::Register {
                    path: self.path.clone(),
                    source,
                })?;
        }
        self.accept_pending = true;
        Ok(true)
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
        self.memory
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
        // The peer is gone entirely (EPOLLHUP/EPOLLERR): requests already read are still handed
        // out (a fire-and-forget `shutdown` must work), but nothing more can be delivered.
        if event.is_write_closed() || event.is_error() {
            conn.hung_up = true;
            conn.eof = true;
            conn.wbuf = Vec::new();
            conn.wpos = 0;
        }
        self.settle(registry, id);
    }

    /// Starts a loop turn: resets the budgets, accepts what the last turn left, re-admits
    /// connections that waited for memory, and (every [`SWEEP_EVERY`]) closes idle and stalled
    /// connections and checks the socket file.
    pub fn begin_turn(&mut self, registry: &Registry, now: Instant) {
        self.budget = Budget {
            requests: TURN_REQUESTS,
            output: TURN_OUTPUT,
        };
        if self.accept_pending || self.accept_retry.is_some_and(|t| now >= t) {
            self.accept_retry = None;
            self.accept_some(registry, now);
        }
        if !self.starved.is_empty() && self.memory < self.limits.memory_budget {
            for index in std::mem::take(&mut self.starved) {
                self.enqueue(index);
            }
        }
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY;
            self.sweep(registry, now);
            if let Err(e) = self.check_socket_file(registry) {
                log::error!("{e}");
            }
        }
    }

    /// The next request to answer, round-robin over connections, within the turn's budget.
    /// Answer it (exactly one [`send`](Server::send) or [`start_stream`](Server::start_stream))
    /// before asking for the next.
    pub fn next_request(&mut self, registry: &Registry, now: Instant) -> Option<Incoming> {
        while self.budget.requests > 0 && self.budget.output > 0 {
            let index = self.ready.pop_front()?;
            let memory_full = self.memory >= self.limits.memory_budget;
            let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            conn.queued = false;
            if !conn.can_take() {
                // Re-queued when it can (output drained, stream ended).
                continue;
            }
            let id = conn.id;
            if !conn.has_line() {
                if !conn.more_input || conn.eof {
                    continue;
                }
                if memory_full && !conn.admin {
                    self.starved.push(index);
                    continue;
                }
                if let Err(e) = conn.read_line() {
                    log::debug!("control: read from pid {} failed: {e}", conn.peer.pid);
                    self.close(registry, id);
                    continue;
                }
            }
            let taken = conn.take_line();
            if let Some(request) = taken {
                conn.in_flight = true;
                conn.last_active = now;
                self.budget.requests -= 1;
                let inc = Incoming {
                    conn: id,
                    peer: conn.peer,
                    admin: conn.admin,
                    request,
                };
                self.account(index);
                return Some(inc);
            }
            self.settle(registry, id);
        }
        None
    }

    /// Queues `line` (one `\n`-terminated reply) for `conn` and writes what the socket takes
    /// now; this answers the request handed out. Returns false if the connection is gone.
    pub fn send(&mut self, registry: &Registry, conn: ConnId, line: &str) -> bool {
        let Some(c) = self.conn_mut(conn) else {
            return false;
        };
        c.in_flight = false;
        self.write(registry, conn, line.as_bytes())
    }

    /// Answers the request handed out on `conn` with a stream: no further request is taken
    /// from it until [`end_stream`](Server::end_stream). `cut` is what closes a partly pushed
    /// line if the client has to be cut off (`None` when every push is whole lines).
    pub fn start_stream(&mut self, conn: ConnId, cut: Option<&'static str>) {
        if let Some(c) = self.conn_mut(conn) {
            c.in_flight = false;
            if c.reply == Stream::None {
                c.reply = Stream::Active { cut };
                self.streams += 1;
            }
        }
    }

    /// Pushes part of a stream (need not end a line) and writes what the socket takes now.
    pub fn push(&mut self, registry: &Registry, conn: ConnId, bytes: &[u8]) -> bool {
        self.write(registry, conn, bytes)
    }

    /// The stream on `conn` is complete; requests are taken again.
    pub fn end_stream(&mut self, registry: &Registry, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn)
            && c.reply != Stream::None
        {
            c.reply = Stream::None;
            self.streams -= 1;
            self.settle(registry, conn);
        }
    }

    /// Ends whatever `conn` is doing with the error `line` (after the line being written, never
    /// inside it) and closes it once that is written.
    pub fn end_with_error(&mut self, registry: &Registry, conn: ConnId, line: &str) {
        let Some(c) = self.conn_mut(conn) else {
            return;
        };
        let had_stream = c.reply != Stream::None;
        c.in_flight = false;
        c.cut_with(line);
        if had_stream {
            self.streams -= 1;
        }
        if let Some(c) = self.conn_mut(conn)
            && let Err(e) = c.flush()
        {
            log::debug!("control: write to pid {} failed: {e}", c.peer.pid);
            self.close(registry, conn);
            return;
        }
        self.settle(registry, conn);
    }

    /// Streams that have room for another chunk, rotating so that each gets its turn when the
    /// output budget is short. Empty once the turn's output budget is spent.
    pub fn hungry_streams(&mut self) -> Vec<ConnId> {
        if self.streams == 0 || self.budget.output == 0 {
            return Vec::new();
        }
        let n = self.conns.len();
        let start = self.stream_cursor % n.max(1);
        self.stream_cursor = self.stream_cursor.wrapping_add(1);
        (0..n)
            .map(|i| (start + i) % n)
            .filter_map(|i| self.conns[i].as_ref())
            .filter(|c| {
                matches!(c.reply, Stream::Active { .. })
                    && !c.closing
                    && !c.hung_up
                    && c.pending_output() < STREAM_LOW
            })
            .map(|c| c.id)
            .collect()
    }

    /// What is left of this turn's output budget.
    pub fn output_budget(&self) -> usize {
        self.budget.output
    }

    /// Whether work is left that no readiness event will announce: requests beyond the turn's
    /// budget, connections not accepted yet, or memory freed for waiting connections. The
    /// runtime then polls with a zero timeout.
    pub fn has_backlog(&self) -> bool {
        self.accept_pending
            || !self.ready.is_empty()
            || (!self.starved.is_empty() && self.memory < self.limits.memory_budget)
    }

    /// The latest time the runtime must wake for the server (accept retry; the sweep while
    /// connections are open or the socket path is not watched); `None` when nothing is due,
    /// so an idle vigil sleeps until something happens.
    pub fn next_deadline(&self) -> Option<Instant> {
        let sweep = (self.open > 0 || self.watch.is_none()).then_some(self.next_sweep);
        match (self.accept_retry, sweep) {
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

    fn write(&mut self, registry: &Registry, conn: ConnId, bytes: &[u8]) -> bool {
        let Some(c) = self.conn_mut(conn) else {
            return false;
        };
        if c.hung_up {
            return self.settle(registry, conn);
        }
        c.wbuf.extend_from_slice(bytes);
        if let Err(e) = c.flush() {
            log::debug!("control: write to pid {} failed: {e}", c.peer.pid);
            self.close(registry, conn);
            return false;
        }
        self.budget.output = self.budget.output.saturating_sub(bytes.len());
        self.settle(registry, conn)
    }

    fn enqueue(&mut self, index: usize) {
        if let Some(c) = self.conns.get_mut(index).and_then(Option::as_mut)
            && !c.queued
        {
            c.queued = true;
            self.ready.push_back(index);
        }
    }

    fn account(&mut self, index: usize) {
        if let Some(c) = self.conns.get_mut(index).and_then(Option::as_mut) {
            let now = c.measure();
            self.memory = self.memory - c.footprint + now;
            c.footprint = now;
        }
    }

    /// After any change: close the connection if it is done, fix write interest, queue it if
    /// it has requests to give, account its buffers. Returns whether it is still open.
    fn settle(&mut self, registry: &Registry, id: ConnId) -> bool {
        let token = Token(self.conn_token_base + id.index);
        let Some(c) = self.conn_mut(id) else {
            return false;
        };
        if c.finished() {
            self.close(registry, id);
            return false;
        }
        if let Err(e) = c.update_interest(registry, token) {
            log::warn!("control: cannot update poll interest: {e}");
            self.close(registry, id);
            return false;
        }
        let queue = c.can_take() && c.has_work();
        if queue {
            self.enqueue(id.index);
        }
        self.account(id.index);
        true
    }

    fn close(&mut self, registry: &Registry, id: ConnId) {
        let Some(slot) = self.conns.get_mut(id.index) else {
            return;
        };
        if slot.as_ref().is_none_or(|c| c.id != id) {
            return;
        }
        if let Some(mut c) = slot.take() {
            // Deregistering can only fail if it was never registered; closing the fd below
            // removes it from the epoll set anyway (epoll(7)).
            let _ = registry.deregister(&mut c.stream);
            self.free.push(id.index);
            self.open -= 1;
            self.memory -= c.footprint;
            if c.reply != Stream::None {
                self.streams -= 1;
            }
            if let Some(n) = self.per_uid.get_mut(&c.peer.uid) {
                *n -= 1;
                if *n == 0 {
                    self.per_uid.remove(&c.peer.uid);
                }
            }
            self.closed.push(id);
        }
    }

    /// Closes idle connections (no request for the idle timeout, nothing unread) and stalled
    /// ones (output unread and nothing taken for the idle timeout: cut with an error line).
    fn sweep(&mut self, registry: &Registry, now: Instant) {
        let idle = self.limits.idle_timeout;
        let mut idle_close = Vec::new();
        let mut stalled = Vec::new();
        let mut expired = Vec::new();
        for c in self.conns.iter().flatten() {
            let quiet = now.saturating_duration_since(c.last_active);
            if c.closing {
                if quiet >= CLOSE_GRACE {
                    expired.push(c.id);
                }
            } else if c.in_flight {
                // Answered in this turn; nothing to judge.
            } else if c.pending_output() > 0 {
                if quiet >= idle {
                    stalled.push(c.id);
                }
            } else if c.reply == Stream::None && !c.has_line() && quiet >= idle {
                idle_close.push(c.id);
            }
        }
        for id in expired {
            self.close(registry, id);
        }
        let secs = idle.as_secs_f64();
        for id in stalled {
            self.refusals.stalled += 1;
            let line = protocol::reply_err(
                &RequestId::null(),
                ErrorKind::Busy,
                &format!("client read nothing for {secs}s with output pending; disconnecting"),
            );
            // The rest of the line being written and the error stay queued for
            // CLOSE_GRACE, in case the client reads again; then it is closed.
            if let Some(c) = self.conn_mut(id) {
                c.last_active = now;
            }
            self.end_with_error(registry, id, &line);
        }
        for id in idle_close {
            self.refusals.idle += 1;
            let line = protocol::reply_err(
                &RequestId::null(),
                ErrorKind::Busy,
                &format!("no request for {secs}s (client_idle_timeout_seconds); closing"),
            );
            if let Some(c) = self.conn_mut(id) {
                let _ = send(
                    c.stream.as_raw_fd(),
                    line.as_bytes(),
                    MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                );
            }
            self.close(registry, id);
        }
        let r = std::mem::take(&mut self.refusals);
        if r.per_uid + r.full + r.emfile + r.evicted + r.idle + r.stalled > 0 {
            log::warn!(
                "control: in the last second refused {} connection(s) over the per-uid cap, {} \
                 over the connection cap, {} at EMFILE; evicted {} for admins; closed {} idle \
                 and {} not reading ({} open)",
                r.per_uid,
                r.full,
                r.emfile,
                r.evicted,
                r.idle,
                r.stalled,
                self.open
            );
        }
    }

    fn accept_some(&mut self, registry: &Registry, now: Instant) {
        for _ in 0..TURN_ACCEPTS {
            match self.listener.accept() {
                Ok((stream, _)) => self.admit(registry, stream, now, false),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE)
                            | Some(libc::ENFILE)
                            | Some(libc::ENOBUFS)
                            | Some(libc::ENOMEM)
                    ) =>
                {
                    if !self.accept_with_reserve(registry, now) {
                        // No reserve to spend: try again shortly rather than wait for an
                        // unrelated wake-up (the listener is edge-triggered).
                        self.accept_pending = false;
                        self.accept_retry = Some(now + ACCEPT_RETRY);
                        return;
                    }
                }
                Err(e) => {
                    log::warn!("control: accept on {} failed: {e}", self.path.display());
                    self.accept_pending = false;
                    self.accept_retry = Some(now + ACCEPT_RETRY);
                    return;
                }
            }
        }
        // Budget spent: the rest next turn.
        self.accept_pending = true;
    }

    /// Out of descriptors: frees the reserve to accept one connection, keeps it if it is an
    /// admin's and a non-admin can be evicted for it, else refuses it with a line; then takes
    /// the reserve back. Returns false if there was no reserve.
    fn accept_with_reserve(&mut self, registry: &Registry, now: Instant) -> bool {
        let Some(reserve) = self.reserve.take() else {
            return false;
        };
        drop(reserve);
        match self.listener.accept() {
            Ok((stream, _)) => self.admit(registry, stream, now, true),
            Err(e) => log::debug!("control: accept with the reserve descriptor failed: {e}"),
        }
        self.reserve = open_reserve();
        true
    }

    /// Decides on a fresh connection: per-uid cap, connection cap, admin eviction.
    /// `out_of_fds`: accepted on the reserve descriptor, kept only by evicting someone.
    fn admit(
        &mut self,
        registry: &Registry,
        mut stream: UnixStream,
        now: Instant,
        out_of_fds: bool,
    ) {
        let peer = match getsockopt(&stream, sockopt::PeerCredentials) {
            Ok(c) => PeerCred {
                pid: c.pid(),
                uid: c.uid(),
                gid: c.gid(),
            },
            Err(e) => {
                log::warn!("control: SO_PEERCRED failed: {e}; dropping connection");
                return;
            }
        };
        let groups = peer_groups(&stream).unwrap_or_else(|e| {
            log::debug!("control: SO_PEERGROUPS failed for pid {}: {e}", peer.pid);
            Vec::new()
        });
        let admin = self.judge(&peer, &groups);
        if !admin {
            let mine = self.per_uid.get(&peer.uid).copied().unwrap_or(0);
            if mine >= self.limits.max_per_uid {
                self.refusals.per_uid += 1;
                refuse(
                    &stream,
                    &format!(
                        "uid {} already has {mine} connections open (max_connections_per_uid = {})",
                        peer.uid, self.limits.max_per_uid
                    ),
                );
                return;
            }
            if out_of_fds || self.open >= self.limits.max_connections {
                if out_of_fds {
                    self.refusals.emfile += 1;
                } else {
                    self.refusals.full += 1;
                }
                refuse(
                    &stream,
                    &format!(
                        "too many connections ({} open{})",
                        self.open,
                        if out_of_fds {
                            ", vigil is out of file descriptors"
                        } else {
                            ""
                        }
                    ),
                );
                return;
            }
        } else if out_of_fds || self.open >= self.limits.max_connections {
            match self.newest_non_admin() {
                Some(victim) => {
                    self.refusals.evicted += 1;
                    if let Some(c) = self.conn_mut(victim) {
                        refuse(
                            &c.stream,
                            "closed to make room for an administrator's connection",
                        );
                    }
                    self.close(registry, victim);
                }
                None if out_of_fds || self.open >= self.limits.max_connections + ADMIN_EXTRA => {
                    self.refusals.full += 1;
                    refuse(
                        &stream,
                        &format!("too many connections ({} open)", self.open),
                    );
                    return;
                }
                None => {}
            }
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.generations.push(0);
                self.conns.len() - 1
            }
        };
        let generation = self.generations[index];
        self.generations[index] += 1;
        let token = Token(self.conn_token_base + index);
        if let Err(e) = registry.register(&mut stream, token, Interest::READABLE) {
            log::warn!("control: cannot register a connection: {e}");
            self.free.push(index);
            return;
        }
        log::debug!(
            "control: connection from pid {} uid {} gid {}{}",
            peer.pid,
            peer.uid,
            peer.gid,
            if admin { " (admin)" } else { "" }
        );
        self.next_seq += 1;
        let conn = Conn {
            id: ConnId { index, generation },
            seq: self.next_seq,
            stream,
            peer,
            groups,
            admin,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            wpos: 0,
            sent_open: false,
            writable_interest: false,
            // Registering an fd that is already readable reports it (epoll_ctl(2)), so
            // nothing is missed by waiting for the first event.
            more_input: false,
            eof: false,
            hung_up: false,
            closing: false,
            in_flight: false,
            reply: Stream::None,
            queued: false,
            last_active: now,
            footprint: 0,
        };
        self.conns[index] = Some(conn);
        self.open += 1;
        *self.per_uid.entry(peer.uid).or_insert(0) += 1;
        self.account(index);
    }

    fn judge(&self, peer: &PeerCred, groups: &[u32]) -> bool {
        #[cfg(test)]
        if self.strangers {
            return false;
        }
        is_admin(&self.access, self.euid, peer, groups)
    }

    fn newest_non_admin(&self) -> Option<ConnId> {
        self.conns
            .iter()
            .flatten()
            .filter(|c| !c.admin)
            .max_by_key(|c| c.seq)
            .map(|c| c.id)
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

fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Binds a listener at `path`. `replace`: a socket file there is removed even if something
/// answers on it (it is not ours: vigil's own was replaced); otherwise only a stale one is.
fn bind_listener(
    path: &Path,
    access: &Access,
    replace: bool,
) -> Result<UnixListener, ControlError> {
    let owned = || path.to_path_buf();
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(ControlError::NotASocket { path: owned() });
            }
            if !replace {
                match std::os::unix::net::UnixStream::connect(path) {
                    Ok(_) => return Err(ControlError::AlreadyListening { path: owned() }),
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        log::info!("control: removing stale socket {}", path.display());
                    }
                    Err(source) => {
                        return Err(ControlError::ProbeExisting {
                            path: owned(),
                            source,
                        });
                    }
                }
            }
            std::fs::remove_file(path).map_err(|source| ControlError::RemoveStale {
                path: owned(),
                source,
            })?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .map_err(|source| ControlError::CreateDir {
                        path: dir.to_path_buf(),
                        source,
                    })?;
            }
        }
        Err(source) => {
            return Err(ControlError::ProbeExisting {
                path: owned(),
                source,
            });
        }
    }
    let listener = UnixListener::bind(path).map_err(|source| ControlError::Bind {
        path: owned(),
        source,
    })?;
    // The file is created with the umask's mode; it is tightened right away. A client
    // connecting in between gains nothing: mutating commands are checked by SO_PEERCRED.
    set_mode_and_group(path, access)?;
    Ok(listener)
}

fn set_mode_and_group(path: &Path, access: &Access) -> Result<(), ControlError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(access.mode)).map_err(
        |source| ControlError::Chmod {
            path: path.to_path_buf(),
            mode: access.mode,
            source,
        },
    )?;
    if let Some(gid) = access.group {
        nix::unistd::chown(path, None, Some(nix::unistd::Gid::from_raw(gid))).map_err(
            |source| ControlError::Chown {
                path: path.to_path_buf(),
                gid,
                source,
            },
        )?;
    }
    Ok(())
}

fn is_admin(access: &Access, euid: u32, peer: &PeerCred, groups: &[u32]) -> bool {
    peer.uid == 0
        || peer.uid == euid
        || access.admin_uids.contains(&peer.uid)
        || access.admin_gids.contains(&peer.gid)
        || groups.iter().any(|g| access.admin_gids.contains(g))
}

/// Best effort: one `busy` error line on a fresh socket (its buffer takes one short line).
fn refuse(stream: &UnixStream, message: &str) {
    let line = protocol::reply_err(&RequestId::null(), ErrorKind::Busy, message);
    let _ = send(
        stream.as_raw_fd(),
        line.as_bytes(),
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
    );
}

/// The descriptor kept in reserve for `EMFILE` at accept.
fn open_reserve() -> Option<OwnedFd> {
    match std::fs::File::open("/dev/null") {
        Ok(f) => Some(f.into()),
        Err(e) => {
            log::debug!("control: no reserve descriptor (/dev/null: {e})");
            None
        }
    }
}

/// The peer's supplementary groups at `connect` time, from `SO_PEERGROUPS` (socket(7),
/// Linux ≥ 4.13; the kernel answers `ERANGE` with the needed size when the buffer is short).
fn peer_groups(stream: &UnixStream) -> io::Result<Vec<u32>> {
    let fd = stream.as_raw_fd();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` is a live buffer of `len` bytes; the kernel writes at most `len`
        // bytes into it and stores the size it needs (or wrote) in `len`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65536 {
            groups.resize(n, 0);
            continue;
        }
        return Err(err);
    }
}

#[cfg(test)]
mod tests;
