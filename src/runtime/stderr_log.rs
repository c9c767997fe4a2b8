//! vigil's own log on stderr, written without ever blocking: env_logger formats each record
//! and hands it to [`Sink`], which writes it at once if stderr takes it, else queues it.
//!
//! Why: stderr is often a pipe (a pager, `| tee`, a journal stream) whose reader can stop (a
//! paused pager, Ctrl-S on a terminal, a stuck journal). A blocking write there stopped the
//! loop once the pipe's 64 KiB were full (issue 43.11).
//!
//! How each kind of stderr is written without waiting, and without setting `O_NONBLOCK` on the
//! open file description vigil shares with whoever started it:
//! - a regular file or /dev/null: written as is (such writes do not wait for a reader);
//! - a socket (journald's stream under systemd): `send(MSG_DONTWAIT)`;
//! - a pipe, FIFO or terminal: a private description opened through `/proc/self/fd/2` with
//!   `O_NONBLOCK` (as the stdout forwarder does, `logs::forward`);
//! - where that open fails (no /proc yet as PID 1, a pipe of another user): `poll(POLLOUT)`
//!   without waiting, then at most `PIPE_BUF` bytes, which a pipe with room takes without
//!   waiting (pipe(7)).
//!
//! What stderr does not take is queued, up to [`QUEUE_BYTES`]; past that the newest lines are
//! dropped and counted. The loop registers stderr for writability ([`pollable_fd`]) and calls
//! [`flush`] when it can take more, and [`take_dropped_report`] every turn: once the queue has
//! drained, the count is logged at `WARN` (`N lines of vigil's log dropped: …`); the total since
//! vigil started is `vigil_log_lines_dropped_total` ([`dropped_total`]).
//!
//! Owns: the queue, its descriptor and the counts. Must not: block, log from inside a write
//! (env_logger holds its own lock around it), or grow past its bound.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most bytes of log lines kept while stderr does not take them.
pub const QUEUE_BYTES: usize = 256 * 1024;

/// How vigil's stderr is written.
enum Out {
    /// Not set up yet (the first write does).
    Unknown,
    /// Regular file, /dev/null, or a descriptor that cannot be examined: plain writes.
    Plain(OwnedFd),
    /// A socket: `send(MSG_DONTWAIT)`.
    Socket(OwnedFd),
    /// A private non-blocking description of a pipe, FIFO or terminal.
    Private(OwnedFd),
    /// A pipe or terminal that could not be reopened: `poll` then at most `PIPE_BUF` bytes.
    Polled(OwnedFd),
    /// No stderr at all (closed): lines are discarded.
    None,
}

struct State {
    out: Out,
    queue: VecDeque<Vec<u8>>,
    /// Bytes in `queue`.
    bytes: usize,
    /// Lines dropped since the last report.
    dropped: u64,
}

static STATE: Mutex<State> = Mutex::new(State {
    out: Out::Unknown,
    queue: VecDeque::new(),
    bytes: 0,
    dropped: 0,
});

/// Lines dropped and not yet reported (set once the queue has drained).
static TO_REPORT: AtomicU64 = AtomicU64::new(0);
/// Lines dropped since vigil started (`vigil_log_lines_dropped_total`).
static DROPPED_TOTAL: AtomicU64 = AtomicU64::new(0);

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writer env_logger is given (`Target::Pipe`).
pub struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut st = state();
        if matches!(st.out, Out::Unknown) {
            st.out = open_out();
        }
        st.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl State {
    /// Writes what is queued, then `line` (or queues it, or drops it past the bound).
    fn push(&mut self, line: &[u8]) {
        self.drain();
        if self.queue.is_empty() {
            let n = self.write_some(line);
            if n == line.len() {
                return;
            }
            let rest = line.get(n..).unwrap_or_default().to_vec();
            self.bytes += rest.len();
            self.queue.push_back(rest);
            return;
        }
        if self.bytes + line.len() > QUEUE_BYTES {
            self.dropped += 1;
            DROPPED_TOTAL.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.bytes += line.len();
        self.queue.push_back(line.to_vec());
    }

    /// Writes as much of the queue as stderr takes; once it is empty, hands the count of
    /// dropped lines on to be reported.
    fn drain(&mut self) {
        while let Some(front) = self.queue.front_mut() {
            let n = write_out(&self.out, front);
            self.bytes -= n;
            if n < front.len() {
                front.drain(..n);
                return;
            }
            self.queue.pop_front();
        }
        if self.dropped > 0 {
            TO_REPORT.fetch_add(self.dropped, Ordering::Relaxed);
            self.dropped = 0;
        }
    }

    fn write_some(&self, buf: &[u8]) -> usize {
        write_out(&self.out, buf)
    }
}

/// Writes what `out` takes of `buf` now; the count written (all of it for a lost stderr).
fn write_out(out: &Out, buf: &[u8]) -> usize {
    let mut done = 0;
    while done < buf.len() {
        let rest = buf.get(done..).unwrap_or_default();
        let r = match out {
            Out::Unknown | Out::None => return buf.len(),
            Out::Plain(fd) | Out::Private(fd) => nix::unistd::write(fd, rest),
            Out::Socket(fd) => nix::sys::socket::send(
                fd.as_raw_fd(),
                rest,
                nix::sys::socket::MsgFlags::MSG_DONTWAIT | nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            ),
            Out::Polled(fd) => {
                if !writable_now(fd) {
                    return done;
                }
                let chunk = rest.get(..rest.len().min(libc::PIPE_BUF)).unwrap_or(rest);
                nix::unistd::write(fd, chunk)
            }
        };
        match r {
            Ok(0) => return done,
            Ok(n) => done += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => return done,
            // A reader gone (EPIPE), a closed descriptor: nothing will take it, ever.
            Err(_) => return buf.len(),
        }
    }
    done
}

/// `poll(POLLOUT)` without waiting.
fn writable_now(fd: &OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut pfd = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
    matches!(poll(&mut pfd, PollTimeout::ZERO), Ok(1))
        && pfd[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLOUT))
}

/// How to write fd 2 (see the module doc).
fn open_out() -> Out {
    let Ok(dup) = io::stderr().as_fd().try_clone_to_owned() else {
        return Out::None;
    };
    let Ok(meta) = dup
        .try_clone()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
    else {
        return Out::Plain(dup);
    };
    let ft = meta.file_type();
    if ft.is_file() || ft.is_block_device() || is_dev_null(&meta) {
        return Out::Plain(dup);
    }
    if ft.is_socket() {
        return Out::Socket(dup);
    }
    match std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open("/proc/self/fd/2")
    {
        Ok(f) => Out::Private(OwnedFd::from(f)),
        Err(_) => Out::Polled(dup),
    }
}

fn is_dev_null(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    meta.file_type().is_char_device()
        && std::fs::metadata("/dev/null").is_ok_and(|n| n.rdev() == meta.rdev())
}

/// Looks at stderr again (after /proc was mounted, as PID 1) and returns the descriptor the
/// loop should watch for writability: `None` for a regular file or no stderr.
pub fn pollable_fd() -> Option<RawFd> {
    let mut st = state();
    if matches!(st.out, Out::Unknown | Out::Polled(_)) {
        st.out = open_out();
    }
    match &st.out {
        Out::Socket(fd) | Out::Private(fd) | Out::Polled(fd) => Some(fd.as_raw_fd()),
        Out::Unknown | Out::Plain(_) | Out::None => None,
    }
}

/// Writes what is queued as far as stderr takes it (stderr became writable).
pub fn flush() {
    state().drain();
}

/// Lines dropped since vigil started, reported or not (for the metrics).
pub fn dropped_total() -> u64 {
    DROPPED_TOTAL.load(Ordering::Relaxed)
}

/// Lines dropped whose queue has drained since the last call, to be logged by the caller.
pub fn take_dropped_report() -> u64 {
    if TO_REPORT.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    TO_REPORT.swap(0, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipe_of(size: i32) -> (OwnedFd, OwnedFd) {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size)).unwrap();
        crate::process::set_nonblocking(&r).unwrap();
        (r, w)
    }

    fn read_all(r: &OwnedFd) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = nix::unistd::read(r, &mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
        out
    }

    fn state_for(out: Out) -> State {
        State {
            out,
            queue: VecDeque::new(),
            bytes: 0,
            dropped: 0,
        }
    }

    #[test]
    fn lines_a_full_pipe_does_not_take_are_queued_then_dropped_past_the_bound_and_counted() {
        let (r, w) = pipe_of(4096);
        // A blocking write end, as a shell's pipe is: `Polled` must still never wait.
        let mut st = state_for(Out::Polled(w));
        let line = vec![b'x'; 99];
        let total = 5000;
        let t = std::time::Instant::now();
        for _ in 0..total {
            st.push(&[line.as_slice(), b"\n"].concat());
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "it waited");
        assert!(st.bytes <= QUEUE_BYTES);
        assert!(st.dropped > 0, "{} bytes queued", st.bytes);
        let queued = st.queue.len() as u64;
        let written = read_all(&r);
        assert_eq!(
            written.len() as u64 / 100 + queued + st.dropped,
            total,
            "every line written, queued or counted"
        );
        let before = TO_REPORT.load(Ordering::Relaxed);
        // The reader catches up: the queue drains in order and the drops are handed on.
        let mut got = written;
        while !st.queue.is_empty() {
            st.drain();
            got.extend(read_all(&r));
        }
        assert!(
            got.chunks(100)
                .all(|l| l == [line.as_slice(), b"\n"].concat())
        );
        assert_eq!(st.dropped, 0);
        assert!(TO_REPORT.load(Ordering::Relaxed) > before);
    }

    #[test]
    fn a_socket_nobody_reads_never_blocks_a_write() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut st = state_for(Out::Socket(OwnedFd::from(a)));
        let t = std::time::Instant::now();
        for _ in 0..20_000 {
            st.push(&[b'y'; 100]);
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "it waited");
        assert!(st.dropped > 0);
    }

    #[test]
    fn the_total_of_dropped_lines_only_grows_and_counts_every_drop_reported_or_not() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut st = state_for(Out::Socket(OwnedFd::from(a)));
        let before = dropped_total();
        for _ in 0..20_000 {
            st.push(&[b'y'; 100]);
        }
        // Other tests may drop lines meanwhile: at least this one's drops.
        let after = dropped_total();
        assert!(after >= before + st.dropped, "{before} → {after}");
        // Reporting the drops (the queue drains) does not take them off the total.
        let _ = take_dropped_report();
        assert!(dropped_total() >= after);
    }
}
