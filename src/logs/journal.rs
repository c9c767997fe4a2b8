//! Forwarding container output and vigil's own events to the systemd journal through its
//! native protocol ([`JournalSink`]), and the rule that decides when vigil does so
//! ([`journal_wanted`]).
//!
//! The protocol (systemd's "Journal Native Protocol", <https://systemd.io/JOURNAL_NATIVE_PROTOCOL/>):
//! one datagram per entry on the `AF_UNIX`/`SOCK_DGRAM` socket `/run/systemd/journal/socket`;
//! the payload is a list of fields, each `NAME=value\n`, or — when the value holds a newline —
//! `NAME\n`, the value's length as a 64-bit little-endian integer, the value, `\n`. An entry too
//! big for one datagram (`send` fails with `EMSGSIZE`) is written to a sealed memfd and that
//! descriptor is sent alone (`SCM_RIGHTS`) with an empty payload. Field names are upper case
//! letters, digits and `_`, not starting with `_` (those are journald's trusted fields).
//!
//! Each container line becomes one entry: `MESSAGE=` (the line without its newline),
//! `PRIORITY=` 3 (err) for stderr and 6 (info) for stdout, `SYSLOG_IDENTIFIER=pod/container`,
//! `VIGIL_POD=`, `VIGIL_CONTAINER=`, `VIGIL_RUN=` (the run's generation) and
//! `VIGIL_STREAM=stdout|stderr`. A lifecycle event becomes `MESSAGE=pod/container: Reason:
//! message`, `PRIORITY=` 3 for a Warning event and 6 for a Normal one,
//! `SYSLOG_IDENTIFIER=vigil`, `VIGIL_POD=`, `VIGIL_CONTAINER=` (when the event names one) and
//! `VIGIL_REASON=`.
//!
//! Owns: the (connected, close-on-exec) datagram socket, the bounded queue of encoded entries,
//! each source's unfinished line, and the count of what had to be dropped. Like the stdout
//! forwarder ([`super::forward`]), nothing is dropped unless the journal really does not take
//! it: a full queue is first sent as far as the socket takes it; what still does not fit is
//! dropped, whole entries, counted per container and reported as one entry
//! `[vigil: 1.2 MB dropped]` (PRIORITY 4, the container's fields) per container at most once a
//! second while the flood lasts, and at once when it has passed.
//!
//! Must not: block (every send is `MSG_DONTWAIT`), alter a line beyond splitting it, or grow
//! past its bound.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::socket::{self, MsgFlags};

use super::forward::{DropLedger, FORWARD_BUFFER_BYTES, FORWARD_MAX_LINE, SPLIT_MARKER};

/// journald's native protocol socket.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// Room a drop note may take beyond the queue's bound (notes are short and must not starve).
const NOTE_ALLOWANCE: usize = 4096;

/// Which of a container's output pipes a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    /// syslog priority of its lines: err for stderr, info for stdout.
    fn priority(self) -> Priority {
        match self {
            Stream::Stdout => Priority::Info,
            Stream::Stderr => Priority::Err,
        }
    }
}

/// syslog(3) priorities vigil uses (`PRIORITY=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    Err = 3,
    Warning = 4,
    Info = 6,
}

impl Priority {
    fn field(self) -> &'static [u8] {
        match self {
            Priority::Err => b"3",
            Priority::Warning => b"4",
            Priority::Info => b"6",
        }
    }
}

/// Where a chunk of output came from.
#[derive(Debug, Clone, Copy)]
pub struct Origin<'a> {
    /// `pod/container`.
    pub source: &'a str,
    pub stream: Stream,
    /// The run's generation (`VIGIL_RUN=`), when known.
    pub run: Option<u64>,
}

/// Appends one field in the native protocol's encoding: `NAME=value\n`, or the binary-safe
/// `NAME\n<u64 LE length><value>\n` when the value holds a newline.
pub fn put_field(entry: &mut Vec<u8>, name: &str, value: &[u8]) {
    debug_assert!(valid_field_name(name), "bad journal field name {name:?}");
    entry.extend_from_slice(name.as_bytes());
    if value.contains(&b'\n') {
        entry.push(b'\n');
        entry.extend_from_slice(&(value.len() as u64).to_le_bytes());
    } else {
        entry.push(b'=');
    }
    entry.extend_from_slice(value);
    entry.push(b'\n');
}

/// A field name journald accepts from a client: `[A-Z0-9_]`, not starting with `_`, at most 64.
pub fn valid_field_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('_')
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// How an entry left the queue.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    Yes,
    WouldBlock,
}

/// Sends container output and events to journald without ever blocking (see the module docs).
#[derive(Debug)]
pub struct JournalSink {
    socket: OwnedFd,
    path: PathBuf,
    queue: VecDeque<(String, Vec<u8>)>,
    queued_bytes: usize,
    max_pending: usize,
    max_line: usize,
    partial: HashMap<(String, Stream), Vec<u8>>,
    drops: DropLedger,
    dropped_since_flush: bool,
    total_dropped: u64,
    /// Counts reconnections: the socket (and its descriptor number) changed.
    connection: u64,
}

impl JournalSink {
    /// A sink sending to the socket at `path` (journald's: [`JOURNAL_SOCKET`]), default-sized.
    pub fn connect(path: &Path) -> io::Result<JournalSink> {
        JournalSink::with_limits(path, FORWARD_BUFFER_BYTES, FORWARD_MAX_LINE)
    }

    pub fn with_limits(path: &Path, max_pending: usize, max_line: usize) -> io::Result<Self> {
        let socket = connect_socket(path)?;
        Ok(JournalSink {
            socket,
            path: path.to_path_buf(),
            queue: VecDeque::new(),
            queued_bytes: 0,
            max_pending: max_pending.max(1),
            max_line: max_line.max(1),
            partial: HashMap::new(),
            drops: DropLedger::default(),
            dropped_since_flush: false,
            total_dropped: 0,
            connection: 0,
        })
    }

    /// The socket, for the runtime's writability watch.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// Which connection [`JournalSink::fd`] is: it changes when a restarted journald was
    /// reconnected, and a watch of the old descriptor must then be dropped and made again.
    pub fn connection(&self) -> u64 {
        self.connection
    }

    /// Queues one entry per complete line of `chunk`; an unfinished last line is held until
    /// its newline arrives, [`JournalSink::finish`] is called, or it passes `max_line` bytes
    /// (then it is sent with [`SPLIT_MARKER`]).
    pub fn push(&mut self, origin: Origin<'_>, chunk: &[u8]) {
        let key = (origin.source.to_string(), origin.stream);
        let mut held = self.partial.remove(&key).unwrap_or_default();
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            held.extend_from_slice(&rest[..i]);
            self.line(origin, &held, "");
            held.clear();
            rest = &rest[i + 1..];
        }
        held.extend_from_slice(rest);
        while held.len() >= self.max_line {
            let tail = held.split_off(self.max_line);
            self.line(origin, &held, SPLIT_MARKER);
            held = tail;
        }
        if !held.is_empty() {
            self.partial.insert(key, held);
        }
    }

    /// The pipe reached EOF: send any held partial line.
    pub fn finish(&mut self, origin: Origin<'_>) {
        if let Some(held) = self
            .partial
            .remove(&(origin.source.to_string(), origin.stream))
            && !held.is_empty()
        {
            self.line(origin, &held, "");
        }
    }

    fn line(&mut self, origin: Origin<'_>, line: &[u8], marker: &str) {
        let (pod, container) = split_source(origin.source);
        let mut entry = Vec::with_capacity(line.len() + marker.len() + 160);
        let mut message = Vec::with_capacity(line.len() + marker.len());
        message.extend_from_slice(line);
        message.extend_from_slice(marker.as_bytes());
        put_field(&mut entry, "MESSAGE", &message);
        put_field(&mut entry, "PRIORITY", origin.stream.priority().field());
        put_field(&mut entry, "SYSLOG_IDENTIFIER", origin.source.as_bytes());
        put_field(&mut entry, "VIGIL_POD", pod.as_bytes());
        if let Some(c) = container {
            put_field(&mut entry, "VIGIL_CONTAINER", c.as_bytes());
        }
        if let Some(run) = origin.run {
            put_field(&mut entry, "VIGIL_RUN", run.to_string().as_bytes());
        }
        put_field(
            &mut entry,
            "VIGIL_STREAM",
            origin.stream.as_str().as_bytes(),
        );
        self.enqueue(origin.source, entry);
    }

    /// Queues a lifecycle event of `object` (`pod` or `pod/container`): `message` is the whole
    /// line vigil would log (`pod/container: Reason: message`).
    pub fn event(&mut self, object: &str, reason: &str, warning: bool, message: &str) {
        let (pod, container) = split_source(object);
        let mut entry = Vec::with_capacity(message.len() + 160);
        put_field(&mut entry, "MESSAGE", message.as_bytes());
        let priority = if warning {
            Priority::Err
        } else {
            Priority::Info
        };
        put_field(&mut entry, "PRIORITY", priority.field());
        put_field(&mut entry, "SYSLOG_IDENTIFIER", b"vigil");
        put_field(&mut entry, "VIGIL_POD", pod.as_bytes());
        if let Some(c) = container {
            put_field(&mut entry, "VIGIL_CONTAINER", c.as_bytes());
        }
        put_field(&mut entry, "VIGIL_REASON", reason.as_bytes());
        self.enqueue(object, entry);
    }

    fn enqueue(&mut self, source: &str, entry: Vec<u8>) {
        if self.queued_bytes + entry.len() > self.max_pending
            && let Err(e) = self.send_queue()
        {
            log::debug!("forwarding to the journal: {e}");
        }
        if self.queued_bytes + entry.len() > self.max_pending {
            self.drop_bytes(source, entry.len());
            return;
        }
        self.queued_bytes += entry.len();
        self.queue.push_back((source.to_string(), entry));
    }

    fn drop_bytes(&mut self, source: &str, n: usize) {
        self.drops.add(source, n);
        self.dropped_since_flush = true;
        self.total_dropped += n as u64;
    }

    /// Sends queued entries until the queue is empty or the socket would block. An entry the
    /// journal refuses otherwise (journald gone, even after one reconnect) is dropped and
    /// counted, so a dead journal cannot hold the queue; the last such error is returned.
    fn send_queue(&mut self) -> io::Result<()> {
        let mut failed = Ok(());
        while let Some((source, entry)) = self.queue.pop_front() {
            match self.send(&entry) {
                Ok(Sent::Yes) => self.queued_bytes -= entry.len(),
                Ok(Sent::WouldBlock) => {
                    self.queue.push_front((source, entry));
                    break;
                }
                Err(e) => {
                    self.queued_bytes -= entry.len();
                    self.drop_bytes(&source, entry.len());
                    failed = Err(e);
                }
            }
        }
        failed
    }

    /// One entry: a datagram, or a sealed memfd when it is too big for one. A refused
    /// connection (journald restarted: the old socket is gone) is reconnected once.
    fn send(&mut self, entry: &[u8]) -> io::Result<Sent> {
        let mut reconnected = false;
        loop {
            let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
            let result = match socket::send(self.socket.as_raw_fd(), entry, flags) {
                Err(Errno::EMSGSIZE) => send_memfd(self.socket.as_fd(), entry),
                r => r.map(|_| ()),
            };
            match result {
                Ok(()) => return Ok(Sent::Yes),
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(Sent::WouldBlock),
                Err(Errno::ECONNREFUSED | Errno::ENOTCONN | Errno::ENOENT) if !reconnected => {
                    reconnected = true;
                    self.socket = connect_socket(&self.path)?;
                    self.connection += 1;
                }
                Err(e) => {
                    return Err(io::Error::new(
                        io::Error::from(e).kind(),
                        format!("send to journal socket {}: {e}", self.path.display()),
                    ));
                }
            }
        }
    }

    /// Queues the drop notes that are due (`all`: every one with something to report).
    fn queue_notes(&mut self, now: Instant, all: bool) {
        let mut notes = Vec::new();
        let room = self.max_pending + NOTE_ALLOWANCE;
        let queued = &mut self.queued_bytes;
        self.drops.notes_due(now, all, |source, bytes| {
            let (pod, container) = split_source(source);
            let mut entry = Vec::with_capacity(160);
            let text = format!("[vigil: {} dropped]", super::forward::si_bytes(bytes));
            put_field(&mut entry, "MESSAGE", text.as_bytes());
            put_field(&mut entry, "PRIORITY", Priority::Warning.field());
            put_field(&mut entry, "SYSLOG_IDENTIFIER", source.as_bytes());
            put_field(&mut entry, "VIGIL_POD", pod.as_bytes());
            if let Some(c) = container {
                put_field(&mut entry, "VIGIL_CONTAINER", c.as_bytes());
            }
            if *queued + entry.len() > room {
                return false;
            }
            *queued += entry.len();
            notes.push((source.to_string(), entry));
            true
        });
        self.queue.extend(notes);
    }

    /// Whether entries are queued or a drop is still to be noted: the runtime then watches the
    /// socket for WRITABLE.
    pub fn pending(&self) -> bool {
        !self.queue.is_empty() || self.drops.outstanding()
    }

    /// Bytes (of encoded entries) dropped over the sink's life.
    pub fn dropped_bytes(&self) -> u64 {
        self.total_dropped
    }

    /// [`JournalSink::flush_at`] now.
    pub fn flush(&mut self) -> io::Result<()> {
        self.flush_at(Instant::now())
    }

    /// Sends queued entries until the socket would block or the queue is empty, with the drop
    /// notes due at `now` (as [`super::Forwarder::flush_at`]: one per container per
    /// [`NOTE_INTERVAL`](super::forward::NOTE_INTERVAL) while drops go on, every outstanding one once the flood has passed).
    pub fn flush_at(&mut self, now: Instant) -> io::Result<()> {
        self.queue_notes(now, false);
        let mut result = self.send_queue();
        if self.queue.is_empty() && !self.dropped_since_flush {
            self.queue_notes(now, true);
            result = result.and(self.send_queue());
        }
        self.dropped_since_flush = false;
        result
    }
}

/// `("web", Some("app"))` of `web/app`; `("web", None)` of a pod-level object.
fn split_source(source: &str) -> (&str, Option<&str>) {
    match source.split_once('/') {
        Some((pod, container)) => (pod, Some(container)),
        None => (source, None),
    }
}

/// A close-on-exec datagram socket connected to `path` (connected, so a full journal queue
/// shows as the socket not being writable: unix(7), and a send never needs the address).
fn connect_socket(path: &Path) -> io::Result<OwnedFd> {
    use socket::{AddressFamily, SockFlag, SockType, UnixAddr};
    let err = |what: &str, e: Errno| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("{what} journal socket {}: {e}", path.display()),
        )
    };
    let fd = socket::socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )
    .map_err(|e| err("create", e))?;
    let addr = UnixAddr::new(path).map_err(|e| err("address", e))?;
    socket::connect(fd.as_raw_fd(), &addr).map_err(|e| err("connect", e))?;
    Ok(fd)
}

/// The large-entry path of the native protocol: the entry in a memfd sealed against any
/// change (F_SEAL_SHRINK, GROW, WRITE, SEAL — journald maps it), sent as the only content of
/// an empty datagram (`SCM_RIGHTS`, unix(7)).
fn send_memfd(socket: BorrowedFd<'_>, entry: &[u8]) -> Result<(), Errno> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let memfd = memfd_create(
        c"vigil-journal-entry",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let mut rest = entry;
    while !rest.is_empty() {
        match nix::unistd::write(&memfd, rest) {
            Ok(n) => rest = &rest[n..],
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
    fcntl(
        &memfd,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    let fds = [memfd.as_raw_fd()];
    let cmsg = [socket::ControlMessage::ScmRights(&fds)];
    let iov: [io::IoSlice<'_>; 0] = [];
    socket::sendmsg::<()>(
        socket.as_raw_fd(),
        &iov,
        &cmsg,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    Ok(())
}

/// `[supervisor] log_forward_to`: where forwarded output goes.
pub use crate::config::spec::ForwardTo;

/// Whether output goes to the journal: `journal` always, `stdout` never, and `auto` when vigil
/// runs as a systemd service — `$JOURNAL_STREAM` (`device:inode`, set by systemd for a unit
/// whose stdout or stderr is the journal: systemd.exec(5)) names vigil's own stdout or stderr,
/// and journald's native socket exists. The socket's presence alone does not count: a vigil
/// started from a terminal on a systemd host keeps forwarding to the terminal, and a child of
/// a service with its output redirected no longer matches `$JOURNAL_STREAM`.
pub fn journal_wanted(setting: ForwardTo, socket: &Path) -> bool {
    match setting {
        ForwardTo::Stdout => false,
        ForwardTo::Journal => true,
        ForwardTo::Auto => {
            let stream = std::env::var("JOURNAL_STREAM").unwrap_or_default();
            socket.exists()
                && (stream_matches(&stream, io::stdout().as_fd())
                    || stream_matches(&stream, io::stderr().as_fd()))
        }
    }
}

/// Whether `journal_stream` (`$JOURNAL_STREAM`: `device:inode` in decimal) is `fd`.
pub fn stream_matches(journal_stream: &str, fd: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = journal_stream.split_once(':') else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let Ok(dup) = fd.try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(dup)
        .metadata()
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
