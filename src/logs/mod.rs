//! Per-container output capture: the in-memory ring behind `vigil logs` ([`ring`]), the
//! optional rotated file under `log_dir` ([`file`]), the line-prefixing forwarder to vigil's
//! own stdout ([`forward`]), and the fair non-blocking pipe reader ([`drain_pipe`]).
//!
//! The runtime owns the pipes and the poll registration; on each readable event it calls
//! [`drain_pipe`] and hands the bytes to the buffer, the file and the forwarder
//! ([`ContainerLog`] bundles the three).
//!
//! Must not: block the event loop (the only blocking writes are to local log files), parse or
//! alter container output beyond splitting lines for the forwarder and matching them against a
//! `ready_log_line` ([`ready_line`]), or fail a container because
//! its log file cannot be written (errors are logged and noted, capture in memory continues).

pub mod file;
pub mod forward;
pub mod journal;
pub mod ready_line;
pub mod ring;

use std::io;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

pub use file::{LogFile, Refusal};
pub use forward::{
    FORWARD_BUFFER_BYTES, FORWARD_MAX_LINE, Forwarder, SPLIT_MARKER, nonblocking_stdout,
};
pub use journal::{JournalSink, Origin, Stream};
pub use ready_line::ReadyLine;
pub use ring::{LogBuffer, ReadSince, STAMP_BYTES, STAMP_COALESCE_NS};

/// Errors of this module; each names the operation and the path or fd it failed on.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("create log directory {path:?}: {source}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("open log file {path:?}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("refusing {path:?} under log_dir: {why}")]
    Refused { path: PathBuf, why: Refusal },
    #[error("write log file {path:?}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("rotate log file {from:?} to {to:?}: {source}")]
    Rotate {
        from: PathBuf,
        to: PathBuf,
        source: io::Error,
    },
    #[error("remove oldest log file {path:?} before rotating: {source}")]
    RemoveOldest { path: PathBuf, source: io::Error },
    #[error("prepare stdout for non-blocking forwarding: {source}")]
    Stdout { source: io::Error },
}

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
                Ok(mut f) => {
                    f.set_timestamps(sup.log_timestamps);
                    (Some(f), None)
                }
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let log = ContainerLog {
            buffer: LogBuffer::new(sup.log_buffer_bytes).with_id(next_ring_id()),
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
        let now = unix_nanos_now();
        self.buffer.push_at(chunk, now);
        if let Some(f) = &mut self.file {
            f.write_output(chunk, now);
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
        if let Some(f) = &mut self.file {
            f.mark_run(unix_nanos_now());
        }
    }

    /// A reload changed `[supervisor]`: the ring's size applies from the next run on, the
    /// file's rotation limits from the next write on (`log_dir` itself needs a restart).
    pub fn set_limits(&mut self, sup: &crate::config::spec::SupervisorSpec) {
        self.buffer.set_capacity_next_run(sup.log_buffer_bytes);
        if let Some(f) = &mut self.file {
            f.set_limits(sup.log_max_file_bytes, sup.log_max_files);
            f.set_timestamps(sup.log_timestamps);
        }
    }
}

/// A new log ring's id: the wall clock in nanoseconds, above every id this process gave before
/// (so unique across rings of this vigil, and across vigils of one host unless the clock is
/// set back between them).
pub fn next_ring_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = u64::try_from(unix_nanos_now()).unwrap_or(0);
    let id = now.max(LAST.load(Ordering::Relaxed) + 1);
    LAST.store(id, Ordering::Relaxed);
    id
}

/// Now, as the Unix time in nanoseconds that [`LogBuffer::push_at`] and the log file's line
/// stamps take (the wall clock: these are for people and `--since`, not for timers).
pub fn unix_nanos_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// `2026-11-23T13:40:47.123456789Z`: RFC 3339 in UTC with as many fractional digits as
/// needed, as Go's `time.RFC3339Nano` (what kubectl `--timestamps` prints).
pub fn rfc3339_nano(unix_nanos: i64) -> String {
    match jiff::Timestamp::from_nanosecond(i128::from(unix_nanos)) {
        Ok(t) => t.to_string(),
        Err(_) => "0001-01-01T00:00:00Z".to_string(),
    }
}

/// `bytes` read from the ring at global offset `start`, with each line that begins in them
/// prefixed by its time and a space (`--timestamps`); `at_line_start` says whether `start`
/// begins a line. A line without a stamp (nothing held was stamped) gets none.
pub fn stamp_lines(buffer: &LogBuffer, start: u64, bytes: &[u8], at_line_start: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 32);
    let mut line_start = at_line_start;
    for (i, &b) in bytes.iter().enumerate() {
        if line_start && let Some(t) = buffer.stamp_at(start + i as u64) {
            out.extend_from_slice(rfc3339_nano(t).as_bytes());
            out.push(b' ');
        }
        out.push(b);
        line_start = b == b'\n';
    }
    out
}

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
    let mut chunk = [0u8; 16 * 1024];
    drain_pipe_with(fd, &mut chunk, max_bytes, |bytes| {
        buf.extend_from_slice(bytes)
    })
}

/// [`drain_pipe`] without collecting: each read (at most `scratch.len()` bytes) is handed to
/// `each` as it comes, straight from `scratch`, so a caller that keeps one scratch buffer
/// reads any amount with no allocation and no copy of its own. On an error, what was read
/// before it has been handed over.
pub fn drain_pipe_with(
    fd: BorrowedFd<'_>,
    scratch: &mut [u8],
    max_bytes: usize,
    mut each: impl FnMut(&[u8]),
) -> io::Result<DrainResult> {
    let mut read = 0usize;
    while read < max_bytes {
        let want = scratch.len().min(max_bytes - read);
        match nix::unistd::read(fd, &mut scratch[..want]) {
            Ok(0) => {
                return Ok(DrainResult {
                    bytes: read,
                    eof: true,
                });
            }
            Ok(n) => {
                each(&scratch[..n]);
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
