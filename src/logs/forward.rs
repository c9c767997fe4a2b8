//! Forwarding container output to vigil's own stdout (`log_forward`) as `pod/container | line`
//! lines ([`Forwarder`]), and the non-blocking descriptor it writes through
//! ([`nonblocking_stdout`]).
//!
//! Owns: the bounded queue of prefixed lines, each source's unfinished line, and the count of
//! what had to be dropped. Output is dropped only when the destination really blocks: when the
//! queue is full the forwarder first writes to its sink (a regular file or `/dev/null` never
//! blocks, so nothing is ever dropped there); only what a full pipe, terminal or socket will
//! not take is dropped, whole lines at a time, counted per container and reported as one
//! `pod/container | [vigil: 1.2 MB dropped]` line per container at most once a second while
//! the flood lasts, and at once when it has passed.
//!
//! Must not: block (every write is non-blocking or to a descriptor that cannot block), alter a
//! line beyond the prefix and the split marker, or grow past its bound.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use super::LogError;

/// Default bound of queued forwarder output.
pub const FORWARD_BUFFER_BYTES: usize = 256 * 1024;
/// Default longest partial line held before it is forwarded anyway.
pub const FORWARD_MAX_LINE: usize = 16 * 1024;
/// Appended to a line forwarded before its newline arrived because it grew too long.
pub const SPLIT_MARKER: &str = " [vigil: line split]";
/// While a container's output keeps being dropped, its drop notes come at most this often.
pub const NOTE_INTERVAL: Duration = Duration::from_secs(1);
/// Room a drop note may take beyond the queue's bound (notes are short and must not starve).
const NOTE_ALLOWANCE: usize = 4096;

/// What was dropped of one source since its last note.
#[derive(Debug, Default)]
struct Drops {
    bytes: u64,
    last_note: Option<Instant>,
}

/// Bytes dropped per source since its last drop note, and when that note went out. Both sinks
/// of container output (vigil's stdout here, the journal in `journal.rs`) coalesce their notes
/// through it: one per source per [`NOTE_INTERVAL`] while drops go on.
#[derive(Debug, Default)]
pub(super) struct DropLedger(BTreeMap<String, Drops>);

impl DropLedger {
    pub(super) fn add(&mut self, source: &str, n: usize) {
        self.0.entry(source.to_string()).or_default().bytes += n as u64;
    }

    /// Whether a drop is still to be noted.
    pub(super) fn outstanding(&self) -> bool {
        self.0.values().any(|d| d.bytes > 0)
    }

    /// Offers each due note (`all`: every one with something to report) to `queue` with its
    /// source and byte count; `queue` returns false when it has no room, and that note and
    /// the rest wait for a later call.
    pub(super) fn notes_due(
        &mut self,
        now: Instant,
        all: bool,
        mut queue: impl FnMut(&str, u64) -> bool,
    ) {
        for (source, d) in self.0.iter_mut() {
            if d.bytes == 0 {
                continue;
            }
            let due = all
                || d.last_note
                    .is_none_or(|t| now.duration_since(t) >= NOTE_INTERVAL);
            if !due {
                continue;
            }
            if !queue(source, d.bytes) {
                break;
            }
            d.bytes = 0;
            d.last_note = Some(now);
        }
        self.0.retain(|_, d| {
            d.bytes > 0
                || d.last_note
                    .is_some_and(|t| now.duration_since(t) < NOTE_INTERVAL)
        });
    }
}

/// Turns container output into `pod/container | line` lines for vigil's stdout, without ever
/// blocking: output is queued in a bounded buffer and written with non-blocking writes by
/// [`Forwarder::flush`]. When the queue is full it is first written to the sink (if one was
/// given, [`Forwarder::writing_to`]); what still does not fit is dropped, whole lines, counted
/// per source and noted as `source | [vigil: N dropped]` (see the module docs for when).
#[derive(Debug)]
pub struct Forwarder {
    out: VecDeque<u8>,
    max_pending: usize,
    max_line: usize,
    partial: HashMap<String, Vec<u8>>,
    /// Where a full queue is written before anything is dropped (a dup of the flush target).
    sink: Option<OwnedFd>,
    /// Per source, in name order.
    drops: DropLedger,
    /// Something was dropped since the last flush: the flood is still on.
    dropped_since_flush: bool,
    total_dropped: u64,
}

impl Default for Forwarder {
    fn default() -> Self {
        Forwarder::new(FORWARD_BUFFER_BYTES, FORWARD_MAX_LINE)
    }
}

impl Forwarder {
    pub fn new(max_pending: usize, max_line: usize) -> Self {
        Forwarder {
            out: VecDeque::new(),
            max_pending: max_pending.max(1),
            max_line: max_line.max(1),
            partial: HashMap::new(),
            sink: None,
            drops: DropLedger::default(),
            dropped_since_flush: false,
            total_dropped: 0,
        }
    }

    /// A default-sized forwarder that writes a full queue to `fd` (a dup of it) before it
    /// drops anything: give it the descriptor [`Forwarder::flush`] is called with.
    pub fn writing_to(fd: BorrowedFd<'_>) -> Self {
        Forwarder {
            sink: fd.try_clone_to_owned().ok(),
            ..Forwarder::default()
        }
    }

    /// Queues the complete lines of `chunk` from `source` (`pod/container`); an unfinished last
    /// line is held until its newline arrives, [`Forwarder::finish`] is called, or it passes
    /// `max_line` bytes (then it is forwarded with [`SPLIT_MARKER`]).
    pub fn push(&mut self, source: &str, chunk: &[u8]) {
        let mut held = self.partial.remove(source).unwrap_or_default();
        let mut rest = chunk;
        while let Some(i) = rest.iter().position(|b| *b == b'\n') {
            held.extend_from_slice(&rest[..i]);
            self.emit(source, &held, "");
            held.clear();
            rest = &rest[i + 1..];
        }
        held.extend_from_slice(rest);
        while held.len() >= self.max_line {
            let tail = held.split_off(self.max_line);
            self.emit(source, &held, SPLIT_MARKER);
            held = tail;
        }
        if !held.is_empty() {
            self.partial.insert(source.to_string(), held);
        }
    }

    /// The source's output ended (EOF): forward any held partial line.
    pub fn finish(&mut self, source: &str) {
        if let Some(held) = self.partial.remove(source)
            && !held.is_empty()
        {
            self.emit(source, &held, "");
        }
    }

    fn emit(&mut self, source: &str, line: &[u8], marker: &str) {
        let len = source.len() + 3 + line.len() + marker.len() + 1;
        if self.out.len() + len > self.max_pending {
            self.spill();
        }
        if self.out.len() + len > self.max_pending {
            self.drop_bytes(source, len);
            return;
        }
        self.out.extend(source.as_bytes());
        self.out.extend(b" | ");
        self.out.extend(line);
        self.out.extend(marker.as_bytes());
        self.out.push_back(b'\n');
    }

    /// Writes the queue to the sink until it is empty or the sink would block. A sink that
    /// fails otherwise (EPIPE: stdout went away) is given up; [`Forwarder::flush`] reports it.
    fn spill(&mut self) {
        let Some(sink) = self.sink.take() else {
            return;
        };
        match write_queue(&mut self.out, sink.as_fd()) {
            Ok(()) => self.sink = Some(sink),
            Err(e) => log::debug!("forwarding container output: {e}"),
        }
    }

    fn drop_bytes(&mut self, source: &str, n: usize) {
        self.drops.add(source, n);
        self.dropped_since_flush = true;
        self.total_dropped += n as u64;
    }

    /// Queues the drop notes that are due (`all`: every one with something to report).
    fn queue_notes(&mut self, now: Instant, all: bool) {
        let (out, room) = (&mut self.out, self.max_pending + NOTE_ALLOWANCE);
        self.drops.notes_due(now, all, |source, bytes| {
            let note = format!("{source} | [vigil: {} dropped]\n", si_bytes(bytes));
            if out.len() + note.len() > room {
                return false;
            }
            out.extend(note.as_bytes());
            true
        });
    }

    /// Whether output is queued or a drop is still to be noted: the runtime then watches stdout
    /// for WRITABLE.
    pub fn pending(&self) -> bool {
        !self.out.is_empty() || self.drops.outstanding()
    }

    /// Bytes dropped because the destination blocked, over the forwarder's life.
    pub fn dropped_bytes(&self) -> u64 {
        self.total_dropped
    }

    /// [`Forwarder::flush_at`] now.
    pub fn flush(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        self.flush_at(fd, Instant::now())
    }

    /// Writes queued output to `fd` until it would block or the queue is empty, with the drop
    /// notes that are due at `now`: one per container per [`NOTE_INTERVAL`] while drops go on,
    /// and every outstanding one once the queue is empty with nothing dropped since the last
    /// flush (the flood has passed). Only WouldBlock stops quietly; other errors (EPIPE when
    /// stdout went away) are returned and the queue is kept: the runtime decides whether to
    /// stop forwarding.
    ///
    /// Sockets are written with `send(MSG_DONTWAIT | MSG_NOSIGNAL)`, which is non-blocking per
    /// call without touching the socket's shared flags (send(2)); other fds need `O_NONBLOCK`
    /// (see [`nonblocking_stdout`]) or must be regular files.
    pub fn flush_at(&mut self, fd: BorrowedFd<'_>, now: Instant) -> io::Result<()> {
        self.queue_notes(now, false);
        write_queue(&mut self.out, fd)?;
        if self.out.is_empty() && !self.dropped_since_flush {
            self.queue_notes(now, true);
            write_queue(&mut self.out, fd)?;
        }
        self.dropped_since_flush = false;
        Ok(())
    }
}

/// Writes `out` to `fd` until it is empty or the fd would block.
fn write_queue(out: &mut VecDeque<u8>, fd: BorrowedFd<'_>) -> io::Result<()> {
    use nix::errno::Errno;
    use nix::sys::socket::MsgFlags;
    let mut socket = true;
    loop {
        let (front, _) = out.as_slices();
        if front.is_empty() {
            return Ok(());
        }
        let result = if socket {
            match nix::sys::socket::send(
                fd.as_raw_fd(),
                front,
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            ) {
                Err(Errno::ENOTSOCK) => {
                    socket = false;
                    continue;
                }
                r => r,
            }
        } else {
            nix::unistd::write(fd, front)
        };
        match result {
            Ok(n) => {
                out.drain(..n);
            }
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => return Ok(()),
            Err(e) => return Err(io::Error::from(e)),
        }
    }
}

/// `1.2 MB`, `512 bytes`: SI units, one decimal.
pub fn si_bytes(n: u64) -> String {
    const UNITS: [(&str, f64); 3] = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    for (unit, size) in UNITS {
        if n as f64 >= size {
            return format!("{:.1} {unit}", n as f64 / size);
        }
    }
    if n == 1 {
        "1 byte".to_string()
    } else {
        format!("{n} bytes")
    }
}

/// Returns an fd for writing to vigil's stdout that never blocks [`Forwarder::flush`].
///
/// Side effects, in order of preference:
/// - a regular file or /dev/null: a `dup` of fd 1 (such writes do not block).
/// - a socket (e.g. journald's stdout stream): a `dup` of fd 1, unchanged; `flush` uses
///   `send(MSG_DONTWAIT)` on it.
/// - a pipe, FIFO or terminal: reopened through `/proc/self/fd/1` with `O_NONBLOCK`, which
///   gives a *new* open file description, so fd 1 itself (shared with the shell that started
///   vigil, and with stderr when both are the same terminal) stays blocking.
/// - if that reopen fails (no /proc, or a pipe created by another user): a `dup` of fd 1 with
///   `O_NONBLOCK` set, which **changes the shared open file description**: writes through fd 1
///   (`println!`) may then fail with WouldBlock, and so may writes by other processes sharing
///   it. vigil itself must then not print to stdout directly (it logs to stderr).
pub fn nonblocking_stdout() -> Result<OwnedFd, LogError> {
    let err = |source| LogError::Stdout { source };
    let dup = io::stdout().as_fd().try_clone_to_owned().map_err(err)?;
    let meta = File::from(dup.try_clone().map_err(err)?)
        .metadata()
        .map_err(err)?;
    let ft = meta.file_type();
    if ft.is_file() || ft.is_socket() || (ft.is_char_device() && is_dev_null(&meta)) {
        return Ok(dup);
    }
    if let Some(f) = reopen_stdout_nonblocking() {
        return Ok(f);
    }
    crate::process::set_nonblocking(&dup).map_err(|e| err(io::Error::other(e.to_string())))?;
    Ok(dup)
}

/// A private non-blocking open file description for fd 1 (pipes, FIFOs, terminals).
pub(super) fn reopen_stdout_nonblocking() -> Option<OwnedFd> {
    OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open("/proc/self/fd/1")
        .ok()
        .map(OwnedFd::from)
}

pub(super) fn is_dev_null(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/dev/null").is_ok_and(|n| n.rdev() == meta.rdev())
}
