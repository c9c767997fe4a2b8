//! Per-container output capture: the in-memory ring ([`LogBuffer`]) behind `vigil logs`, the
//! optional rotated file ([`LogFile`]), the line-prefixing forwarder to vigil's own stdout
//! ([`Forwarder`]), and the fair non-blocking pipe reader ([`drain_pipe`]).
//!
//! The runtime owns the pipes and the poll registration; on each readable event it calls
//! [`drain_pipe`] and hands the bytes to the buffer, the file and the forwarder.
//!
//! Must not: block the event loop (the only blocking writes are to local log files), parse or
//! alter container output beyond splitting lines for the forwarder, or fail a container because
//! its log file cannot be written (errors are logged, capture in memory continues).

use std::collections::{HashMap, VecDeque};
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Errors of this module; each names the operation and the path or fd it failed on.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("create log directory {path:?}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("open log file {path:?}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("write log file {path:?}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("rotate log file {from:?} to {to:?}: {source}")]
    Rotate {
        from: PathBuf,
        to: PathBuf,
        source: io::Error,
    },
    #[error("prepare stdout for non-blocking forwarding: {source}")]
    Stdout { source: io::Error },
}

// ---------------------------------------------------------------------------------------------
// LogBuffer
// ---------------------------------------------------------------------------------------------

/// What [`LogBuffer::read_since`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReadSince {
    pub bytes: Vec<u8>,
    /// Offset to pass next time.
    pub next: u64,
    /// Bytes between the requested offset and the first returned byte that are no longer held
    /// (overwritten in the ring): a follower that fell behind.
    pub skipped: u64,
}

/// A byte ring holding the current run's output, plus the tail of the previous run.
///
/// Offsets are global across runs (`total_written` never goes back), so a `logs -f` follower
/// keeps one offset and sees a restart as just more output.
#[derive(Debug, Clone)]
pub struct LogBuffer {
    capacity: usize,
    current: VecDeque<u8>,
    /// Global offset of the first byte of the current run.
    run_start: u64,
    previous: Vec<u8>,
    /// Global offset of `previous[0]`.
    previous_start: u64,
    has_previous: bool,
    total: u64,
    dropped: u64,
}

impl LogBuffer {
    /// `capacity` bytes for the current run (and as much again for the previous run's tail).
    /// A capacity of 0 is treated as 1.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        LogBuffer {
            capacity,
            current: VecDeque::new(),
            run_start: 0,
            previous: Vec::new(),
            previous_start: 0,
            has_previous: false,
            total: 0,
            dropped: 0,
        }
    }

    /// Appends output, overwriting the oldest bytes when full.
    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if data.len() >= self.capacity {
            self.dropped += (self.current.len() + data.len() - self.capacity) as u64;
            self.current.clear();
            self.current.extend(&data[data.len() - self.capacity..]);
            return;
        }
        let overflow = (self.current.len() + data.len()).saturating_sub(self.capacity);
        if overflow > 0 {
            self.current.drain(..overflow);
            self.dropped += overflow as u64;
        }
        self.current.extend(data);
    }

    /// Starts a new run: the current contents become the previous run (`--previous`).
    pub fn new_run(&mut self) {
        self.previous_start = self.total - self.current.len() as u64;
        self.previous = self.current.drain(..).collect();
        self.has_previous = true;
        self.run_start = self.total;
    }

    /// Bytes ever pushed (the offset one past the newest byte).
    pub fn total_written(&self) -> u64 {
        self.total
    }

    /// Bytes overwritten before anyone could read them, over the buffer's life.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped
    }

    /// Whether a previous run exists.
    pub fn has_previous(&self) -> bool {
        self.has_previous
    }

    /// The last `n` lines (all held output when `None`) of the current or the previous run.
    /// A final line without a newline counts as a line.
    pub fn tail_lines(&self, n: Option<usize>, previous: bool) -> Vec<u8> {
        let bytes: Vec<u8> = if previous {
            self.previous.clone()
        } else {
            self.current.iter().copied().collect()
        };
        match n {
            None => bytes,
            Some(n) => tail_of(&bytes, n).to_vec(),
        }
    }

    /// Output from `offset` on (up to the newest byte). If `offset` is older than anything
    /// still held, starts at the oldest held byte and reports the gap in `skipped`. Bytes of
    /// the previous run still held are returned first (a follower that was behind at restart
    /// finishes the old run before the new one). An offset past the end returns nothing.
    pub fn read_since(&self, offset: u64) -> ReadSince {
        let offset = offset.min(self.total);
        let current_oldest = self.total - self.current.len() as u64;
        if self.has_previous && offset < self.run_start {
            let start = offset.max(self.previous_start);
            let skipped = start - offset;
            let bytes = self.previous[(start - self.previous_start) as usize..].to_vec();
            // `previous` always ends where the current run starts.
            let next = self.run_start;
            return ReadSince {
                bytes,
                next,
                skipped,
            };
        }
        let start = offset.max(current_oldest);
        let skipped = start - offset;
        let from = (start - current_oldest) as usize;
        let bytes = self.current.range(from..).copied().collect();
        ReadSince {
            bytes,
            next: self.total,
            skipped,
        }
    }
}

/// The suffix of `bytes` holding its last `n` lines.
fn tail_of(bytes: &[u8], n: usize) -> &[u8] {
    if n == 0 {
        return &[];
    }
    // Ignore a trailing newline: it ends the last line, it does not start a new one.
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return &bytes[i + 1..];
            }
        }
    }
    bytes
}

// ---------------------------------------------------------------------------------------------
// ContainerLog
// ---------------------------------------------------------------------------------------------

/// One container's capture: its ring buffer, its optional file, and its forwarder prefix.
/// Convenience for the runtime; every part is usable on its own.
#[derive(Debug)]
pub struct ContainerLog {
    pub buffer: LogBuffer,
    pub file: Option<LogFile>,
    source: String,
}

impl ContainerLog {
    /// Sized and placed by `[supervisor]` (`log_buffer_bytes`, `log_dir`, `log_max_file_bytes`,
    /// `log_max_files`). A log file that cannot be opened is returned as the error alongside a
    /// capture without a file (the runtime logs it; capture goes on in memory).
    pub fn new(
        pod: &str,
        container: &str,
        sup: &crate::config::spec::SupervisorSpec,
    ) -> (ContainerLog, Option<LogError>) {
        let (file, err) = match &sup.log_dir {
            Some(dir) => match LogFile::open(
                dir,
                pod,
                container,
                sup.log_max_file_bytes,
                sup.log_max_files,
            ) {
                Ok(f) => (Some(f), None),
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let log = ContainerLog {
            buffer: LogBuffer::new(sup.log_buffer_bytes),
            file,
            source: format!("{pod}/{container}"),
        };
        (log, err)
    }

    /// `pod/container`, the forwarder prefix.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Records one chunk read from the container's output pipe.
    pub fn ingest(&mut self, chunk: &[u8], forwarder: Option<&mut Forwarder>) {
        self.buffer.push(chunk);
        if let Some(f) = &mut self.file {
            f.write(chunk);
        }
        if let Some(fw) = forwarder {
            fw.push(&self.source, chunk);
        }
    }

    /// The output pipe reached EOF: forward any unfinished last line.
    pub fn eof(&mut self, forwarder: Option<&mut Forwarder>) {
        if let Some(fw) = forwarder {
            fw.finish(&self.source);
        }
    }

    /// A new run of the container starts: the current output becomes `--previous`.
    pub fn new_run(&mut self) {
        self.buffer.new_run();
    }
}

// ---------------------------------------------------------------------------------------------
// LogFile
// ---------------------------------------------------------------------------------------------

/// `log_dir/<pod>/<container>.log`, rotated by size to `.1` (newest) … `.N` (oldest).
///
/// Errors never stop capture: each failure is logged once (until a write succeeds again) and the
/// next write retries opening the file.
#[derive(Debug)]
pub struct LogFile {
    path: PathBuf,
    max_bytes: u64,
    max_files: u32,
    file: Option<File>,
    size: u64,
    failing: bool,
}

impl LogFile {
    /// Creates the directories (mode 0750) and opens (appends to) the file (mode 0640).
    /// An error here is returned so the runtime can report it; [`LogFile::write`] keeps trying.
    pub fn open(
        log_dir: &Path,
        pod: &str,
        container: &str,
        max_bytes: u64,
        max_files: u32,
    ) -> Result<LogFile, LogError> {
        let path = log_dir.join(pod).join(format!("{container}.log"));
        let mut f = LogFile {
            path,
            max_bytes: max_bytes.max(1),
            max_files,
            file: None,
            size: 0,
            failing: false,
        };
        f.reopen()?;
        Ok(f)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn reopen(&mut self) -> Result<(), LogError> {
        if let Some(dir) = self.path.parent() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o750)
                .create(dir)
                .map_err(|source| LogError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
        }
        let open_err = |source| LogError::Open {
            path: self.path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o640)
            .custom_flags(libc::O_CLOEXEC)
            .open(&self.path)
            .map_err(open_err)?;
        self.size = file.metadata().map_err(open_err)?.len();
        self.file = Some(file);
        Ok(())
    }

    fn rotated(&self, n: u32) -> PathBuf {
        let mut s = self.path.clone().into_os_string();
        s.push(format!(".{n}"));
        PathBuf::from(s)
    }

    /// Shifts `.log` → `.1` → … → `.N` (the oldest falls off), then opens a fresh file.
    /// With `max_files` 0 the file is simply truncated.
    fn rotate(&mut self) -> Result<(), LogError> {
        self.file = None;
        if self.max_files == 0 {
            OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&self.path)
                .map_err(|source| LogError::Open {
                    path: self.path.clone(),
                    source,
                })?;
        } else {
            for n in (1..self.max_files).rev() {
                let from = self.rotated(n);
                let to = self.rotated(n + 1);
                match std::fs::rename(&from, &to) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(source) => return Err(LogError::Rotate { from, to, source }),
                }
            }
            let to = self.rotated(1);
            std::fs::rename(&self.path, &to).map_err(|source| LogError::Rotate {
                from: self.path.clone(),
                to,
                source,
            })?;
        }
        self.reopen()
    }

    fn try_write(&mut self, data: &[u8]) -> Result<(), LogError> {
        if self.file.is_none() {
            self.reopen()?;
        }
        if self.size > 0 && self.size + data.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        if let Err(source) = file.write_all(data) {
            self.file = None;
            return Err(LogError::Write {
                path: self.path.clone(),
                source,
            });
        }
        self.size += data.len() as u64;
        Ok(())
    }

    /// Appends `data`, rotating first when it would push the file past `max_bytes` (a single
    /// chunk larger than the limit goes into a fresh file whole). Errors are logged, not
    /// returned; the return value says whether the bytes reached the file.
    pub fn write(&mut self, data: &[u8]) -> bool {
        match self.try_write(data) {
            Ok(()) => {
                self.failing = false;
                true
            }
            Err(e) => {
                if !self.failing {
                    log::warn!("{e}; container output is kept in memory only until this recovers");
                    self.failing = true;
                }
                false
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Forwarder
// ---------------------------------------------------------------------------------------------

/// Default bound of queued forwarder output.
pub const FORWARD_BUFFER_BYTES: usize = 256 * 1024;
/// Default longest partial line held before it is forwarded anyway.
pub const FORWARD_MAX_LINE: usize = 16 * 1024;
/// Appended to a line forwarded before its newline arrived because it grew too long.
pub const SPLIT_MARKER: &str = " [vigil: line split]";

/// Turns container output into `pod/container | line` lines for vigil's stdout, without ever
/// blocking: output is queued in a bounded buffer and written with non-blocking writes by
/// [`Forwarder::flush`]. When the queue is full, whole lines are dropped and counted, and one
/// `[vigil: N bytes dropped]` line is queued as soon as there is room again.
#[derive(Debug)]
pub struct Forwarder {
    out: VecDeque<u8>,
    max_pending: usize,
    max_line: usize,
    partial: HashMap<String, Vec<u8>>,
    /// Dropped since the last note.
    dropped: u64,
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
            dropped: 0,
            total_dropped: 0,
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
        if self.dropped > 0 && !self.queue_drop_note() {
            self.drop_bytes(len);
            return;
        }
        if self.out.len() + len > self.max_pending {
            self.drop_bytes(len);
            return;
        }
        self.out.extend(source.as_bytes());
        self.out.extend(b" | ");
        self.out.extend(line);
        self.out.extend(marker.as_bytes());
        self.out.push_back(b'\n');
    }

    fn drop_bytes(&mut self, n: usize) {
        self.dropped += n as u64;
        self.total_dropped += n as u64;
    }

    /// Queues the drop note if it fits; true if queued (or nothing to report).
    fn queue_drop_note(&mut self) -> bool {
        if self.dropped == 0 {
            return true;
        }
        let note = format!("[vigil: {} bytes dropped]\n", self.dropped);
        if self.out.len() + note.len() > self.max_pending {
            return false;
        }
        self.out.extend(note.as_bytes());
        self.dropped = 0;
        true
    }

    /// Whether output is queued: the runtime then registers stdout for WRITABLE.
    pub fn pending(&self) -> bool {
        !self.out.is_empty() || self.dropped > 0
    }

    /// Bytes dropped because the queue was full, over the forwarder's life.
    pub fn dropped_bytes(&self) -> u64 {
        self.total_dropped
    }

    /// Writes queued output to `fd` until it would block or the queue is empty. Only
    /// WouldBlock stops quietly; other errors (EPIPE when stdout went away) are returned and
    /// the queue is kept: the runtime decides whether to stop forwarding.
    ///
    /// Sockets are written with `send(MSG_DONTWAIT | MSG_NOSIGNAL)`, which is non-blocking per
    /// call without touching the socket's shared flags (send(2)); other fds need `O_NONBLOCK`
    /// (see [`nonblocking_stdout`]).
    pub fn flush(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        use nix::errno::Errno;
        use nix::sys::socket::MsgFlags;
        let mut socket = true;
        loop {
            if self.out.is_empty() && !self.queue_drop_note() {
                // Only when even an empty queue cannot hold the note (a tiny max_pending).
                self.dropped = 0;
            }
            let (front, _) = self.out.as_slices();
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
                    self.out.drain(..n);
                }
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return Ok(()),
                Err(e) => return Err(io::Error::from(e)),
            }
        }
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
fn reopen_stdout_nonblocking() -> Option<OwnedFd> {
    OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open("/proc/self/fd/1")
        .ok()
        .map(OwnedFd::from)
}

fn is_dev_null(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/dev/null").is_ok_and(|n| n.rdev() == meta.rdev())
}

// ---------------------------------------------------------------------------------------------
// drain_pipe
// ---------------------------------------------------------------------------------------------

/// What [`drain_pipe`] read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainResult {
    /// Bytes appended to the buffer.
    pub bytes: usize,
    /// The write end is closed (every writer exited); deregister and close the read end.
    pub eof: bool,
}

/// Reads a non-blocking pipe into `buf` until it would block, reaches EOF, or `max_bytes` were
/// read (a fairness cap so one chatty container cannot starve the loop; with an edge-triggered
/// registration the caller must come back to a capped pipe on the next turn by itself).
pub fn drain_pipe(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    max_bytes: usize,
) -> io::Result<DrainResult> {
    let mut read = 0usize;
    let mut chunk = [0u8; 16 * 1024];
    while read < max_bytes {
        let want = chunk.len().min(max_bytes - read);
        match nix::unistd::read(fd, &mut chunk[..want]) {
            Ok(0) => {
                return Ok(DrainResult {
                    bytes: read,
                    eof: true,
                });
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                read += n;
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(nix::errno::Errno::EAGAIN) => break,
            Err(e) => return Err(io::Error::from(e)),
        }
    }
    Ok(DrainResult {
        bytes: read,
        eof: false,
    })
}

#[cfg(test)]
mod tests;
