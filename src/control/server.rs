//! The control socket server's mechanics: listening socket, connections, line framing,
//! buffered non-blocking output, followers.
//!
//! Owns the socket file and every connection fd. It knows nothing about the core: it hands
//! parsed requests ([`Incoming`]) to the runtime and writes whatever lines the runtime gives it
//! back. It must never block: all fds are non-blocking and registered edge-triggered with the
//! runtime's `mio::Poll`, so every source is drained until `WouldBlock` (mio docs, "Draining
//! readiness"), except where fairness caps the work per turn (see [`Server::has_backlog`]).
//!
//! Protection against misbehaving clients: a request line over [`MAX_LINE`] bytes gets a
//! `too_large` error and the connection is closed; a client that stops reading is cut once more
//! than [`MAX_PENDING_OUTPUT`] bytes wait for it; at most [`MAX_REQUESTS_PER_TURN`] requests are
//! taken from one connection per turn; beyond the connection limit new clients get a `busy`
//! error line and are closed at once.
//!
//! How the runtime drives it:
//! 1. `Server::bind(path, mode, group, conn_token_base)`, then `register(registry, token)`.
//! 2. For every poll event whose token [`Server::owns`], call [`Server::on_event`] and answer
//!    each returned [`Incoming`] in order with exactly one [`Server::send`] (an error reply for
//!    `Err`), or for a follow request [`Server::set_follow`] / [`Server::set_streaming`] and then
//!    push lines with `send` as they come.
//! 3. Each turn, if [`Server::has_backlog`], poll with a zero timeout and call
//!    [`Server::process_backlog`]; drain [`Server::take_closed`] to forget streams.
//! 4. Drop the server (or [`Server::shutdown`]) to remove the socket file.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mio::event::Event;
use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, getsockopt, send, sockopt};
use serde_json::Value;

use super::protocol::{self, MAX_LINE, ProtoError, Request};

/// Connections accepted at most at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Output allowed to wait for one client before it is cut off.
pub const MAX_PENDING_OUTPUT: usize = 1024 * 1024;
/// Requests taken from one connection per turn, so one chatty client cannot starve the loop.
pub const MAX_REQUESTS_PER_TURN: usize = 100;
/// Unparsed input buffered per connection before reading pauses (the rest stays in the kernel).
const READ_CAP: usize = 4 * MAX_LINE;
const READ_CHUNK: usize = 16 * 1024;

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
    pub request: Result<Request, ProtoError>,
}

struct Conn {
    id: ConnId,
    stream: UnixStream,
    peer: PeerCred,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    wpos: usize,
    writable_interest: bool,
    /// The last read hit `WouldBlock` or EOF; otherwise reading paused at [`READ_CAP`] and the
    /// kernel may hold more (no new edge will come for it).
    drained: bool,
    /// The peer closed its writing side.
    eof: bool,
    /// A too-large line was seen: nothing more is read; close once answered.
    oversized: bool,
    /// Requests handed out and not yet answered by a `send`.
    awaiting: usize,
    /// `events` follower: the request id to tag pushed events with.
    follow: Option<Value>,
    /// Streams pushed lines (events or logs follow): stays open after its requests are answered.
    streaming: bool,
}

impl Conn {
    fn pending_output(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Reads until `WouldBlock`, EOF or [`READ_CAP`].
    fn read_some(&mut self) -> io::Result<()> {
        if self.oversized || self.eof {
            self.drained = true;
            return Ok(());
        }
        let mut buf = [0u8; READ_CHUNK];
        loop {
            if self.rbuf.len() >= READ_CAP {
                self.drained = false;
                return Ok(());
            }
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    self.drained = true;
                    return Ok(());
                }
                Ok(n) => self.rbuf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Splits up to [`MAX_REQUESTS_PER_TURN`] complete lines off the input.
    fn take_requests(&mut self, out: &mut Vec<Incoming>) {
        let mut taken = 0;
        let mut start = 0;
        while taken < MAX_REQUESTS_PER_TURN && !self.oversized {
            let rest = &self.rbuf[start..];
            let (line_len, consumed) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (i, i + 1),
                // Without a newline: too long already, or the last line before EOF.
                None if rest.len() > MAX_LINE => (rest.len(), rest.len()),
                None if self.eof && !rest.is_empty() => (rest.len(), rest.len()),
                None => break,
            };
            let line_start = start;
            start += consumed;
            if line_len > MAX_LINE {
                log::warn!(
                    "control: request line of {} bytes or more from pid {} uid {}; closing",
                    line_len,
                    self.peer.pid,
                    self.peer.uid
                );
                self.oversized = true;
                // Whatever follows belongs to the oversized line or comes after it.
                self.rbuf.clear();
                self.follow = None;
                self.streaming = false;
                self.awaiting += 1;
                out.push(Incoming {
                    conn: self.id,
                    peer: self.peer,
                    request: Err(ProtoError::too_large(line_len)),
                });
                return;
            }
            let line = &self.rbuf[line_start..line_start + line_len];
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.awaiting += 1;
            taken += 1;
            out.push(Incoming {
                conn: self.id,
                peer: self.peer,
                request: protocol::parse_request(line),
            });
        }
        self.rbuf.drain(..start);
    }

    /// More requests can be taken without a new readiness event.
    fn has_backlog(&self) -> bool {
        if self.oversized {
            return false;
        }
        !self.drained
            || self.rbuf.contains(&b'\n')
            || self.rbuf.len() > MAX_LINE
            || (self.eof && !self.rbuf.is_empty())
    }

    /// Writes until done or `WouldBlock`. `MSG_NOSIGNAL` so a vanished client yields `EPIPE`
    /// instead of a `SIGPIPE` that would kill the supervisor (send(2)).
    fn flush(&mut self) -> Result<(), Errno> {
        while self.wpos < self.wbuf.len() {
            match send(
                self.stream.as_raw_fd(),
                &self.wbuf[self.wpos..],
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(n) => self.wpos += n,
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        } else if self.wpos > READ_CHUNK && self.wpos * 2 > self.wbuf.len() {
            self.wbuf.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(())
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
        let answered = self.awaiting == 0 && self.pending_output() == 0;
        if self.oversized {
            return answered;
        }
        self.eof && !self.streaming && answered && !self.has_backlog()
    }
}

/// The control socket server. See the module docs for how the runtime drives it.
pub struct Server {
    path: PathBuf,
    /// (dev, ino) of the socket file we bound, so drop never removes a successor's socket.
    file_id: Option<(u64, u64)>,
    listener: UnixListener,
    listener_token: Option<Token>,
    conn_token_base: usize,
    max_connections: usize,
    conns: Vec<Option<Conn>>,
    /// Per slot, the generation the next connection in it gets.
    generations: Vec<u64>,
    free: Vec<usize>,
    open: usize,
    closed: Vec<ConnId>,
}

impl Server {
    /// Creates the listening socket at `path`. An existing socket file is replaced only if no
    /// process answers on it (`ECONNREFUSED`: a stale file from a crashed run); a live one is an
    /// error. The parent directory is created (0755) if missing; the socket gets `mode` and,
    /// if given, group `group`. Connections use tokens `conn_token_base ..
    /// conn_token_base + DEFAULT_MAX_CONNECTIONS`.
    pub fn bind(
        path: &Path,
        mode: u32,
        group: Option<u32>,
        conn_token_base: usize,
    ) -> Result<Server, ControlError> {
        let owned = || path.to_path_buf();
        match std::fs::symlink_metadata(path) {
            Ok(meta) => {
                if !meta.file_type().is_socket() {
                    return Err(ControlError::NotASocket { path: owned() });
                }
                match std::os::unix::net::UnixStream::connect(path) {
                    Ok(_) => return Err(ControlError::AlreadyListening { path: owned() }),
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        log::info!("control: removing stale socket {}", path.display());
                        std::fs::remove_file(path).map_err(|source| ControlError::RemoveStale {
                            path: owned(),
                            source,
                        })?;
                    }
                    Err(source) => {
                        return Err(ControlError::ProbeExisting {
                            path: owned(),
                            source,
                        });
                    }
                }
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
        let mut server = Server {
            path: owned(),
            file_id: None,
            listener,
            listener_token: None,
            conn_token_base,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            conns: Vec::new(),
            generations: Vec::new(),
            free: Vec::new(),
            open: 0,
            closed: Vec::new(),
        };
        server.file_id = std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(
            |source| ControlError::Chmod {
                path: owned(),
                mode,
                source,
            },
        )?;
        if let Some(gid) = group {
            nix::unistd::chown(path, None, Some(nix::unistd::Gid::from_raw(gid))).map_err(
                |source| ControlError::Chown {
                    path: owned(),
                    gid,
                    source,
                },
            )?;
        }
        Ok(server)
    }

    /// Lowers (or raises) the connection limit; tokens stay within
    /// `conn_token_base .. conn_token_base + max`.
    pub fn set_max_connections(&mut self, max: usize) {
        self.max_connections = max.max(1);
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Registers the listening socket with `listener_token`.
    pub fn register(
        &mut self,
        registry: &Registry,
        listener_token: Token,
    ) -> Result<(), ControlError> {
        registry
            .register(&mut self.listener, listener_token, Interest::READABLE)
            .map_err(|source| ControlError::Register {
                path: self.path.clone(),
                source,
            })?;
        self.listener_token = Some(listener_token);
        Ok(())
    }

    /// Re-creates the socket file if it was deleted behind vigil's back (e.g. by a cleanup of
    /// `/run`): binds a fresh listener at the same path with `mode` and `group`, registers it
    /// under the old listener's token and closes the old one. Open connections are kept.
    /// Returns whether it re-created the socket; a file that exists (ours, or someone else's)
    /// is left alone.
    pub fn recreate_if_missing(
        &mut self,
        registry: &Registry,
        mode: u32,
        group: Option<u32>,
    ) -> Result<bool, ControlError> {
        match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            _ => return Ok(false),
        }
        let mut fresh = Server::bind(&self.path, mode, group, self.conn_token_base)?;
        std::mem::swap(&mut self.listener, &mut fresh.listener);
        self.file_id = fresh.file_id.take();
        if let Some(token) = self.listener_token {
            // The old listener (now in `fresh`) leaves the poll before it is closed.
            let _ = registry.deregister(&mut fresh.listener);
            registry
                .register(&mut self.listener, token, Interest::READABLE)
                .map_err(|source| ControlError::Register {
                    path: self.path.clone(),
                    source,
                })?;
        }
        Ok(true)
    }

    /// Whether `token` is the listener's or one of the connection tokens.
    pub fn owns(&self, token: Token) -> bool {
        Some(token) == self.listener_token
            || (token.0 >= self.conn_token_base
                && token.0 - self.conn_token_base < self.max_connections)
    }

    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.open
    }

    /// Handles one readiness event for a token this server [`owns`](Server::owns); returns the
    /// requests that arrived, in order.
    pub fn on_event(&mut self, registry: &Registry, event: &Event) -> Vec<Incoming> {
        let token = event.token();
        let mut out = Vec::new();
        if Some(token) == self.listener_token {
            self.accept_all(registry);
            return out;
        }
        let Some(index) = token.0.checked_sub(self.conn_token_base) else {
            return out;
        };
        let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
            // A late event for a connection closed earlier in this turn.
            return out;
        };
        let id = conn.id;
        if event.is_writable() {
            if let Err(e) = conn.flush() {
                log::debug!("control: write to pid {} failed: {e}", conn.peer.pid);
                self.close(registry, id);
                return out;
            }
        }
        if event.is_readable() || event.is_read_closed() {
            if let Err(e) = conn.read_some() {
                log::debug!("control: read from pid {} failed: {e}", conn.peer.pid);
                self.close(registry, id);
                return out;
            }
        }
        // The peer is gone entirely (EPOLLHUP/EPOLLERR): requests already read are still handed
        // out (a fire-and-forget `shutdown` must work), but nothing more can be delivered.
        let hung_up = event.is_write_closed() || event.is_error();
        conn.take_requests(&mut out);
        if hung_up {
            conn.eof = true;
            conn.streaming = false;
            conn.follow = None;
        }
        self.settle(registry, id);
        out
    }

    /// Whether some connection has requests left over from the per-turn cap (or paused
    /// reading): the runtime should poll with a zero timeout and call
    /// [`process_backlog`](Server::process_backlog).
    pub fn has_backlog(&self) -> bool {
        self.conns.iter().flatten().any(Conn::has_backlog)
    }

    /// Takes more requests from connections with a backlog (at most the per-turn cap each).
    pub fn process_backlog(&mut self, registry: &Registry) -> Vec<Incoming> {
        let mut out = Vec::new();
        let mut ids = Vec::new();
        for conn in self.conns.iter_mut().flatten() {
            if !conn.has_backlog() {
                continue;
            }
            if !conn.drained && conn.rbuf.len() < READ_CAP {
                if let Err(e) = conn.read_some() {
                    log::debug!("control: read from pid {} failed: {e}", conn.peer.pid);
                    ids.push(conn.id);
                    continue;
                }
            }
            conn.take_requests(&mut out);
            ids.push(conn.id);
        }
        for id in ids {
            self.settle(registry, id);
        }
        out
    }

    /// Queues `line` (one `\n`-terminated reply) for `conn` and writes what the socket takes
    /// now. Each call counts as the answer to one request handed out. Returns false if the
    /// connection is gone (closed earlier, or cut now because its client stopped reading and
    /// more than [`MAX_PENDING_OUTPUT`] was already waiting).
    pub fn send(&mut self, registry: &Registry, conn: ConnId, line: &str) -> bool {
        let Some(c) = self.conn_mut(conn) else {
            return false;
        };
        c.awaiting = c.awaiting.saturating_sub(1);
        // The bound is on what the client has left unread *before* this reply: any single
        // reply is accepted (a status of 1,000 pods or a 1 MiB log can exceed the bound on its
        // own), but a client that leaves more than the bound unread is cut.
        if c.pending_output() > MAX_PENDING_OUTPUT {
            log::warn!(
                "control: client pid {} uid {} is not reading ({} bytes pending); disconnecting",
                c.peer.pid,
                c.peer.uid,
                c.pending_output()
            );
            self.close(registry, conn);
            return false;
        }
        c.wbuf.extend_from_slice(line.as_bytes());
        if let Err(e) = c.flush() {
            log::debug!("control: write to pid {} failed: {e}", c.peer.pid);
            self.close(registry, conn);
            return false;
        }
        self.settle(registry, conn)
    }

    /// Marks `conn` as following events, tagged with request `id`; this answers the request.
    /// Push events with [`send_event`](Server::send_event) or [`send`](Server::send).
    pub fn set_follow(&mut self, conn: ConnId, id: Value) {
        if let Some(c) = self.conn_mut(conn) {
            c.awaiting = c.awaiting.saturating_sub(1);
            c.follow = Some(id);
            c.streaming = true;
        }
    }

    /// Marks `conn` as a stream the runtime pushes to (e.g. `logs -f`); this answers the
    /// request. It stays open until the client goes away; watch [`take_closed`](Server::take_closed).
    pub fn set_streaming(&mut self, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn) {
            c.awaiting = c.awaiting.saturating_sub(1);
            c.streaming = true;
        }
    }

    /// Event followers and the request id of each.
    pub fn followers(&self) -> impl Iterator<Item = (ConnId, &Value)> {
        self.conns
            .iter()
            .flatten()
            .filter_map(|c| c.follow.as_ref().map(|id| (c.id, id)))
    }

    /// Pushes one event (already encoded, see `render::event` and `wire::Event`) to every follower.
    pub fn send_event(&mut self, registry: &Registry, event: &Value) {
        let targets: Vec<(ConnId, String)> = self
            .followers()
            .map(|(conn, id)| (conn, protocol::reply_event(id, event.clone())))
            .collect();
        for (conn, line) in targets {
            // A follower's pushes are not answers to requests: keep its count.
            if let Some(c) = self.conn_mut(conn) {
                c.awaiting += 1;
            }
            self.send(registry, conn, &line);
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

    /// After any change: fix write interest and close the connection if it is done.
    /// Returns whether it is still open.
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
            self.closed.push(id);
        }
    }

    fn accept_all(&mut self, registry: &Registry) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: the client stays in the backlog; the next connection
                    // attempt brings another event.
                    log::warn!("control: accept on {} failed: {e}", self.path.display());
                    return;
                }
            };
            if self.open >= self.max_connections {
                log::warn!(
                    "control: {} connections open; refusing a new one",
                    self.open
                );
                let line = protocol::reply_err(
                    &Value::Null,
                    super::wire::ErrorKind::Busy,
                    &format!("too many connections ({} open)", self.open),
                );
                // Best effort: a fresh socket's buffer takes one short line.
                let _ = send(
                    stream.as_raw_fd(),
                    line.as_bytes(),
                    MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                );
                continue;
            }
            let peer = match getsockopt(&stream, sockopt::PeerCredentials) {
                Ok(c) => PeerCred {
                    pid: c.pid(),
                    uid: c.uid(),
                    gid: c.gid(),
                },
                Err(e) => {
                    log::warn!("control: SO_PEERCRED failed: {e}; dropping connection");
                    continue;
                }
            };
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
                continue;
            }
            log::debug!(
                "control: connection from pid {} uid {} gid {}",
                peer.pid,
                peer.uid,
                peer.gid
            );
            self.conns[index] = Some(Conn {
                id: ConnId { index, generation },
                stream,
                peer,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                wpos: 0,
                writable_interest: false,
                // Registering an fd that is already readable reports it (epoll_ctl(2)), so
                // nothing is missed by waiting for the first event.
                drained: true,
                eof: false,
                oversized: false,
                awaiting: 0,
                follow: None,
                streaming: false,
            });
            self.open += 1;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Remove the socket file only if it is still the one we created.
        let ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if ours.is_some() && ours == self.file_id {
            if let Err(e) = std::fs::remove_file(&self.path) {
                log::warn!("control: cannot remove {}: {e}", self.path.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream as StdStream;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use mio::{Events, Poll};
    use serde_json::json;

    const LISTENER: Token = Token(1);
    const CONN_BASE: usize = 100;

    struct Harness {
        poll: Poll,
        events: Events,
        server: Server,
        path: PathBuf,
        _dir: tempfile::TempDir,
    }

    type Handler<'a> = &'a mut dyn FnMut(&mut Server, &Registry, Incoming);

    impl Harness {
        fn new() -> Harness {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("run").join("vigil.sock");
            let poll = Poll::new().unwrap();
            let mut server = Server::bind(&path, 0o600, None, CONN_BASE).unwrap();
            server.register(poll.registry(), LISTENER).unwrap();
            Harness {
                poll,
                events: Events::with_capacity(256),
                server,
                path,
                _dir: dir,
            }
        }

        /// One loop turn, like the runtime's.
        fn turn(&mut self, handler: Handler) {
            let timeout = if self.server.has_backlog() {
                Duration::ZERO
            } else {
                Duration::from_millis(20)
            };
            match self.poll.poll(&mut self.events, Some(timeout)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return,
                Err(e) => panic!("poll: {e}"),
            }
            let registry = self.poll.registry();
            let mut incoming = Vec::new();
            for ev in self.events.iter() {
                assert!(
                    self.server.owns(ev.token()),
                    "foreign token {:?}",
                    ev.token()
                );
                incoming.extend(self.server.on_event(registry, ev));
            }
            if self.server.has_backlog() {
                incoming.extend(self.server.process_backlog(registry));
            }
            for inc in incoming {
                handler(&mut self.server, registry, inc);
            }
        }

        fn run_until(&mut self, mut done: impl FnMut(&Server) -> bool, handler: Handler) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !done(&self.server) {
                assert!(Instant::now() < deadline, "deadline passed");
                self.turn(handler);
            }
        }
    }

    fn echo(server: &mut Server, registry: &Registry, inc: Incoming) {
        let line = match inc.request {
            Ok(r) => protocol::reply_ok(&r.id, json!({"cmd": r.cmd.name()})),
            Err(e) => e.reply(),
        };
        server.send(registry, inc.conn, &line);
    }

    fn connect(path: &Path) -> StdStream {
        let s = StdStream::connect(path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    }

    fn read_lines(stream: &StdStream, n: usize) -> Vec<Value> {
        let mut reader = BufReader::new(stream);
        (0..n)
            .map(|_| {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                serde_json::from_str(&line).unwrap()
            })
            .collect()
    }

    #[test]
    fn several_requests_on_one_connection_are_answered_in_order() {
        let mut h = Harness::new();
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = connect(&path);
            s.write_all(
                b"{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"statsu\"}\n\n{\"id\":\"three\",\"cmd\":\"version\"}\n",
            )
            .unwrap();
            tx.send(read_lines(&s, 3)).unwrap();
        });
        let mut got = None;
        h.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut echo,
        );
        let lines = got.unwrap();
        assert_eq!(
            lines[0],
            json!({"id": 1, "ok": true, "result": {"cmd": "status"}})
        );
        assert_eq!(lines[1]["id"], json!(2));
        assert_eq!(lines[1]["error"]["kind"], json!("unknown_command"));
        assert_eq!(lines[2]["id"], json!("three"));
        assert_eq!(lines[2]["result"]["cmd"], json!("version"));
    }

    #[test]
    fn more_requests_than_the_turn_cap_are_all_answered_in_order() {
        let mut h = Harness::new();
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = connect(&path);
            let mut batch = String::new();
            for i in 0..250 {
                batch.push_str(&format!("{{\"id\":{i},\"cmd\":\"version\"}}\n"));
            }
            s.write_all(batch.as_bytes()).unwrap();
            tx.send(read_lines(&s, 250)).unwrap();
        });
        let mut got = None;
        h.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut echo,
        );
        let ids: Vec<u64> = got
            .unwrap()
            .iter()
            .map(|v| v["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, (0..250).collect::<Vec<_>>());
    }

    #[test]
    fn turn_cap_leaves_a_backlog_for_the_next_turn() {
        let mut h = Harness::new();
        let mut s = connect(&h.path);
        let mut batch = String::new();
        for i in 0..150 {
            batch.push_str(&format!("{{\"id\":{i},\"cmd\":\"version\"}}\n"));
        }
        s.write_all(batch.as_bytes()).unwrap();
        let mut first = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while first.is_empty() {
            assert!(Instant::now() < deadline);
            h.poll
                .poll(&mut h.events, Some(Duration::from_millis(20)))
                .unwrap();
            for ev in h.events.iter() {
                first.extend(h.server.on_event(h.poll.registry(), ev));
            }
        }
        assert_eq!(first.len(), MAX_REQUESTS_PER_TURN);
        assert!(h.server.has_backlog());
        let rest = h.server.process_backlog(h.poll.registry());
        assert_eq!(rest.len(), 50);
        assert!(!h.server.has_backlog());
    }

    #[test]
    fn oversized_line_gets_too_large_then_close() {
        let mut h = Harness::new();
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let s = connect(&path);
            let mut w = s.try_clone().unwrap();
            // The server stops reading; the write fails once it closes.
            std::thread::spawn(move || {
                let _ = w.write_all(&vec![b'x'; 1 << 20]);
            });
            let mut reader = BufReader::new(&s);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            // After the reply: EOF, or ECONNRESET since unread input was discarded (unix(7)).
            let mut rest = String::new();
            let end = reader.read_line(&mut rest);
            tx.send((line, end.map_err(|e| e.kind()), rest)).unwrap();
        });
        let mut got = None;
        h.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut echo,
        );
        let (line, end, rest) = got.unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ok"], json!(false));
        assert_eq!(v["error"]["kind"], json!("too_large"));
        assert!(
            matches!(end, Ok(0) | Err(io::ErrorKind::ConnectionReset)),
            "{end:?} {rest:?}"
        );
        assert_eq!(h.server.connection_count(), 0);
    }

    #[test]
    fn a_client_that_never_reads_is_cut_while_others_are_answered() {
        let mut h = Harness::new();
        // The slow client asks for far more than MAX_PENDING_OUTPUT and never reads.
        let mut slow = connect(&h.path);
        let mut batch = String::new();
        for i in 0..40 {
            batch.push_str(&format!(
                "{{\"id\":{i},\"cmd\":\"logs\",\"pod\":\"big\"}}\n"
            ));
        }
        slow.write_all(batch.as_bytes()).unwrap();
        let big = "y".repeat(64 * 1024);
        let mut handler = |server: &mut Server, registry: &Registry, inc: Incoming| {
            let line = match inc.request {
                Ok(r) if r.cmd.name() == "logs" => protocol::reply_ok(&r.id, json!({"log": big})),
                Ok(r) => protocol::reply_ok(&r.id, json!({"cmd": r.cmd.name()})),
                Err(e) => e.reply(),
            };
            server.send(registry, inc.conn, &line);
        };
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut fast = connect(&path);
            for i in 0..20 {
                fast.write_all(format!("{{\"id\":{i},\"cmd\":\"version\"}}\n").as_bytes())
                    .unwrap();
                let v = read_lines(&fast, 1).remove(0);
                assert_eq!(v["id"], json!(i));
            }
            tx.send(fast).unwrap();
        });
        let mut fast = None;
        h.run_until(
            |s| {
                fast = fast.take().or_else(|| rx.try_recv().ok());
                // The fast client (still connected) is the only one left: the slow one was cut.
                fast.is_some() && s.connection_count() == 1
            },
            &mut handler,
        );
        let mut fast = fast.unwrap();
        fast.write_all(b"{\"id\":99,\"cmd\":\"version\"}\n")
            .unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(read_lines(&fast, 1).remove(0)).unwrap());
        let mut last = None;
        h.run_until(
            |_| {
                last = last.take().or_else(|| rx.try_recv().ok());
                last.is_some()
            },
            &mut handler,
        );
        assert_eq!(last.unwrap()["id"], json!(99));
        drop(slow);
    }

    #[test]
    fn one_reply_larger_than_the_pending_cap_reaches_a_reading_client() {
        let mut h = Harness::new();
        let big = "z".repeat(MAX_PENDING_OUTPUT + 4096);
        let mut handler = |server: &mut Server, registry: &Registry, inc: Incoming| {
            let line = match inc.request {
                Ok(r) => protocol::reply_ok(&r.id, json!({"status": big})),
                Err(e) => e.reply(),
            };
            server.send(registry, inc.conn, &line);
        };
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut c = connect(&path);
            c.write_all(b"{\"id\":7,\"cmd\":\"status\"}\n").unwrap();
            tx.send(read_lines(&c, 1).remove(0)).unwrap();
        });
        let mut got = None;
        h.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut handler,
        );
        let v = got.unwrap();
        assert_eq!(v["id"], json!(7));
        assert_eq!(
            v["result"]["status"].as_str().map(str::len),
            Some(MAX_PENDING_OUTPUT + 4096)
        );
    }

    #[test]
    fn two_hundred_concurrent_connections_are_served() {
        let mut h = Harness::new();
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut clients: Vec<StdStream> = (0..200).map(|_| connect(&path)).collect();
            for (i, c) in clients.iter_mut().enumerate() {
                c.write_all(format!("{{\"id\":{i},\"cmd\":\"status\"}}\n").as_bytes())
                    .unwrap();
            }
            for (i, c) in clients.iter().enumerate() {
                assert_eq!(read_lines(c, 1)[0]["id"], json!(i));
            }
            tx.send(clients.len()).unwrap();
        });
        let mut got = None;
        let mut peak = 0;
        h.run_until(
            |s| {
                peak = peak.max(s.connection_count());
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut echo,
        );
        assert_eq!(got, Some(200));
        assert_eq!(peak, 200);
    }

    #[test]
    fn connections_beyond_the_limit_get_busy_and_are_closed() {
        let mut h = Harness::new();
        h.server.set_max_connections(2);
        let a = connect(&h.path);
        let b = connect(&h.path);
        h.run_until(|s| s.connection_count() == 2, &mut echo);
        let c = connect(&h.path);
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(&c);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let mut rest = String::new();
            let n = reader.read_line(&mut rest).unwrap();
            tx.send((line, n)).unwrap();
            drop(path);
        });
        let mut got = None;
        h.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut echo,
        );
        let (line, n) = got.unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["error"]["kind"], json!("busy"));
        assert_eq!(n, 0, "closed after the error line");
        drop((a, b));
    }

    #[test]
    fn half_closed_client_gets_its_answers_then_the_connection_closes() {
        let mut h = Harness::new();
        let path = h.path.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut s = connect(&path);
            // No trailing newline: the last line before EOF still counts.
            s.write_all(b"{\"id\":1,\"cmd\":\"status\"}\n{\"id\":2,\"cmd\":\"version\"}")
                .unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut all = String::new();
            let _ = std::io::Read::read_to_string(&mut s, &mut all);
            tx.send(all).unwrap();
        });
        let mut got = None;
        h.run_until(
            |_| {
                got = got.take().or_else(|| rx.try_recv().ok());
                got.is_some()
            },
            &mut echo,
        );
        let all = got.unwrap();
        let ids: Vec<Value> = all
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone())
            .collect();
        assert_eq!(ids, vec![json!(1), json!(2)]);
        assert_eq!(h.server.connection_count(), 0);
    }

    #[test]
    fn followers_receive_pushed_events_until_they_leave() {
        let mut h = Harness::new();
        let follower = connect(&h.path);
        (&follower)
            .write_all(b"{\"id\":7,\"cmd\":\"events\",\"follow\":true}\n")
            .unwrap();
        let mut follow_conn = None;
        while follow_conn.is_none() {
            h.turn(&mut |server, _registry, inc| {
                let req = inc.request.unwrap();
                server.set_follow(inc.conn, req.id);
                follow_conn = Some(inc.conn);
            });
        }
        let conn = follow_conn.unwrap();
        assert_eq!(h.server.followers().count(), 1);
        h.server
            .send_event(h.poll.registry(), &json!({"reason": "Started"}));
        h.server
            .send_event(h.poll.registry(), &json!({"reason": "Killing"}));
        let lines = read_lines(&follower, 2);
        assert_eq!(
            lines[0],
            json!({"id": 7, "ok": true, "event": {"reason": "Started"}})
        );
        assert_eq!(lines[1]["event"]["reason"], json!("Killing"));
        drop(follower);
        h.run_until(|s| !s.is_open(conn), &mut echo);
        assert_eq!(h.server.take_closed(), vec![conn]);
        assert_eq!(h.server.followers().count(), 0);
        // A line for a closed connection is dropped.
        assert!(!h.server.send(h.poll.registry(), conn, "{}\n"));
    }

    #[test]
    fn peer_credentials_are_reported() {
        let mut h = Harness::new();
        let mut s = connect(&h.path);
        s.write_all(b"{\"cmd\":\"version\"}\n").unwrap();
        let mut peer = None;
        while peer.is_none() {
            h.turn(&mut |_, _, inc| peer = Some(inc.peer));
        }
        let peer = peer.unwrap();
        assert_eq!(peer.pid, std::process::id() as i32);
        assert_eq!(peer.uid, nix::unistd::geteuid().as_raw());
        assert_eq!(peer.gid, nix::unistd::getegid().as_raw());
    }

    #[test]
    fn socket_mode_is_applied_and_parent_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("b").join("s.sock");
        let server = Server::bind(&path, 0o600, None, CONN_BASE).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        let parent = std::fs::metadata(path.parent().unwrap()).unwrap();
        assert_eq!(parent.permissions().mode() & 0o777, 0o755);
        drop(server);
        let path2 = dir.path().join("g.sock");
        let _s = Server::bind(&path2, 0o660, None, CONN_BASE).unwrap();
        assert_eq!(
            std::fs::metadata(&path2).unwrap().permissions().mode() & 0o7777,
            0o660
        );
    }

    #[test]
    #[ignore = "needs root (chown to another group)"]
    fn socket_group_is_applied() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root (chown to another group); run it as root or without \
             --include-ignored"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let gid = nix::unistd::getegid().as_raw() + 4321;
        let _s = Server::bind(&path, 0o660, Some(gid), CONN_BASE).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().gid(), gid);
    }

    #[test]
    fn stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists(), "a dropped listener leaves its file");
        let server = Server::bind(&path, 0o600, None, CONN_BASE).unwrap();
        assert!(StdStream::connect(&path).is_ok());
        drop(server);
    }

    #[test]
    fn live_socket_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _live = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let err = Server::bind(&path, 0o600, None, CONN_BASE).err().unwrap();
        assert!(matches!(err, ControlError::AlreadyListening { .. }));
        assert_eq!(
            err.to_string(),
            format!("another vigil is already listening on {}", path.display())
        );
        assert!(StdStream::connect(&path).is_ok());
    }

    #[test]
    fn a_regular_file_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        std::fs::write(&path, "keep").unwrap();
        let err = Server::bind(&path, 0o600, None, CONN_BASE).err().unwrap();
        assert!(matches!(err, ControlError::NotASocket { .. }));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
    }

    #[test]
    fn drop_removes_the_socket_file_but_not_a_successors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let server = Server::bind(&path, 0o600, None, CONN_BASE).unwrap();
        server.shutdown();
        assert!(!path.exists());
        let first = Server::bind(&path, 0o600, None, CONN_BASE).unwrap();
        std::fs::remove_file(&path).unwrap();
        let _second = std::os::unix::net::UnixListener::bind(&path).unwrap();
        drop(first);
        assert!(path.exists(), "someone else's socket must survive");
    }

    #[test]
    fn owns_covers_listener_and_connection_tokens_only() {
        let h = Harness::new();
        assert!(h.server.owns(LISTENER));
        assert!(h.server.owns(Token(CONN_BASE)));
        assert!(
            h.server
                .owns(Token(CONN_BASE + DEFAULT_MAX_CONNECTIONS - 1))
        );
        assert!(!h.server.owns(Token(CONN_BASE + DEFAULT_MAX_CONNECTIONS)));
        assert!(!h.server.owns(Token(0)));
    }
}
