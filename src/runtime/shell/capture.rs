//! Log capture: the read ends of container output pipes, and forwarding that output to vigil's
//! own stdout or to the journal (`log_forward`, `log_forward_to`).
//!
//! Owns: each pipe's descriptor and registration (edge-triggered: read until `WouldBlock`, at
//! most [`TURN_LOG_BYTES`] across all pipes per turn, the rest on the next turn so chatty
//! containers cannot starve the loop), the queue of pipes with more to read (each pipe in it at
//! most once, kept by a flag on the pipe: O(1) per event whatever the number of pipes), the scratch buffer reads land in, and the forwarding
//! destination — the non-blocking stdout descriptor of the forwarder, or the journal socket —
//! with its writability watch (only while something is queued, so a slow reader never blocks
//! the loop).
//!
//! A pipe whose share of a turn finds a whole default pipe's worth waiting (64 KiB, pipe(7)) is
//! grown to [`GROWN_PIPE_BYTES`] (fcntl(2) `F_SETPIPE_SZ`): with a default pipe a flooding
//! writer blocks every 64 KiB and waits for the loop's next read, and the two take turns; with
//! room for four reads they run at once (a reader of 64 KiB at a time, the producer of
//! `bench/logflood.c`: 0.7 GB/s through a default pipe on the host of the twelfth pass,
//! 3.1 GB/s through a 256 KiB one). Growth is bounded: at most [`MAX_GROWN_PIPES`] pipes at a
//! time, and only while vigil's own pipes, counted in pages as the kernel counts them against
//! the user's `pipe-user-pages-soft`, stay under half of that limit — past it the kernel gives
//! every new pipe of the same user without CAP_SYS_RESOURCE or CAP_SYS_ADMIN two pages instead
//! of sixteen (pipe(7)), and vigil must not shrink other programs' pipes for its logs' sake.
//!
//! It also matches each run's output against its `ready_log_line` ([`ReadyLine`], one matcher
//! per pipe, dropped from both of a run's pipes at the first match) and lists the runs whose
//! line matched for the shell to tell the core ([`Capture::take_ready_lines`]).
//!
//! Must not: decide anything about a container's lifecycle (EOF on its output is not its exit;
//! a matching line is only reported), or block on a read or a write.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

use log::{debug, warn};
use mio::{Interest, Registry, Token};
use nix::fcntl::FcntlArg;

use super::tokens::{self, Owner, Registration, TokenSpace, Watched};
use crate::config::spec::LinePattern;
use crate::core::{ContainerKey, Generation};
use crate::logs::{self, ContainerLog, Forwarder, JournalSink, Origin, ReadyLine, Stream};
use crate::runtime::slots::ContainerRuntime;

/// Bytes read from one pipe at once: the most one share of a turn can be, and what
/// [`Capture::drain_key`] takes before a termination message.
pub const PIPE_READ_CAP: usize = 256 * 1024;
/// Bytes read from all pipes together in one loop turn (the events' reads and
/// [`Capture::read_more`]): what a control request may have to wait behind, twice at most (the
/// rest of the turn it arrives in, and the next turn's share before it is served). One default
/// pipe's capacity: into time-stamped log files that is ~70 µs of work (about 1 s of the
/// loop's CPU per GB written, `bench/run.sh --only logs`); 256 KiB here made turns of
/// 0.3–0.5 ms and a status reply's p99 of 4–7 ms while one container flooded its log file.
pub const TURN_LOG_BYTES: usize = 64 * 1024;
/// Bytes asked for by one read(2): a default pipe's whole capacity (64 KiB, pipe(7)), so one
/// read usually empties it. The scratch buffer of this size is allocated at the first read
/// and kept (no allocation per read).
pub const READ_BYTES: usize = 64 * 1024;
/// The capacity a pipe whose writer outpaces the loop is grown to: room for four reads of
/// [`READ_BYTES`], and what [`PIPE_READ_CAP`] (a drain before a termination message) takes at
/// once. Within the default `pipe-max-size` (1 MiB), so no privilege is needed (pipe(7)).
pub const GROWN_PIPE_BYTES: usize = 256 * 1024;
/// Pipes grown to [`GROWN_PIPE_BYTES`] at most at one time (3 MiB of capacity over the
/// default; pages are taken only while output waits in them).
pub const MAX_GROWN_PIPES: usize = 16;
/// A default pipe's capacity in pages (pipe(7): 16 pages, 65,536 bytes).
const DEFAULT_PIPE_PAGES: usize = 16;
/// Where the kernel's per-user soft limit on pipe pages is read (pipe(7)).
const PIPE_USER_PAGES_SOFT: &str = "/proc/sys/fs/pipe-user-pages-soft";

/// Where captured output goes: each container's log (the container slots, in the shell).
pub trait Logs {
    fn log_mut(&mut self, key: ContainerKey) -> Option<&mut ContainerLog>;
}

impl Logs for HashMap<ContainerKey, ContainerRuntime> {
    fn log_mut(&mut self, key: ContainerKey) -> Option<&mut ContainerLog> {
        self.get_mut(&key).map(|s| &mut s.log)
    }
}

struct Pipe {
    key: ContainerKey,
    /// The main pid of the run it is the output of (its name in the service manager's store).
    pid: u32,
    stream: Stream,
    run: Option<Generation>,
    fd: Watched<OwnedFd>,
    /// In [`Capture::more`] (so an event for it is not another read, and it is queued once).
    queued: bool,
    /// Whether this pipe's size has been settled: grown to [`GROWN_PIPE_BYTES`] (counted in
    /// [`Capture::grown`]), found that large already, or refused by the kernel — either way
    /// it is not asked again.
    sized: Sizing,
    /// The run's `ready_log_line` matcher of this stream, until a line of either stream
    /// matched.
    ready: Option<ReadyLine>,
}

/// Where a pipe given to [`Capture::add_output`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PipeFrom {
    /// Made for a child just spawned: a default pipe.
    Spawn,
    /// Handed over by the previous instance (`vigil upgrade`), perhaps grown by it.
    Handoff,
}

/// Where a pipe stands with [`GROWN_PIPE_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sizing {
    /// A default pipe, never found full.
    Default,
    /// Grown by vigil (this instance or the one before a `vigil upgrade`): counted.
    Grown,
    /// Already at least that large, or the kernel refused: left as it is, not counted.
    Settled,
}

/// Where forwarded output goes.
pub enum Destination {
    /// vigil's stdout (non-blocking), `pod/container | line`.
    Stdout(OwnedFd),
    /// journald's native socket; `output`: container output too (`log_forward`), not only
    /// vigil's own events.
    Journal { sink: JournalSink, output: bool },
}

enum Dest {
    Stdout {
        forwarder: Forwarder,
        stdout: OwnedFd,
    },
    Journal {
        sink: JournalSink,
        output: bool,
    },
}

/// The destination and its watch. Field order: the watch is dropped before the descriptor.
struct Forward {
    watch: Option<Registration>,
    /// The journal connection the watch is for (a reconnect replaces the descriptor).
    watched: u64,
    dest: Dest,
}

impl Forward {
    fn new(dest: Destination) -> Forward {
        Forward {
            watch: None,
            watched: 0,
            dest: match dest {
                // Writes a full queue to stdout before dropping: drops only where it blocks.
                Destination::Stdout(stdout) => Dest::Stdout {
                    forwarder: Forwarder::writing_to(stdout.as_fd()),
                    stdout,
                },
                Destination::Journal { sink, output } => Dest::Journal { sink, output },
            },
        }
    }
}

pub struct Capture {
    registry: Rc<Registry>,
    tokens: TokenSpace,
    pipes: HashMap<Token, Pipe>,
    /// Pipes that hit their share's cap (or were readable once the budget was spent) and still
    /// have data, oldest first; each at most once ([`Pipe::queued`]).
    more: VecDeque<Token>,
    /// What is left of this turn's [`TURN_LOG_BYTES`].
    budget: usize,
    /// Where each read lands ([`READ_BYTES`]), allocated at the first read.
    scratch: Option<Box<[u8]>>,
    forward: Option<Forward>,
    /// Containers whose rotated-out log file is being shrunk away, one step per turn in
    /// turn ([`logs::LogFile::shrink_step`]).
    shrinking: VecDeque<ContainerKey>,
    /// Pipes now at [`GROWN_PIPE_BYTES`] ([`Sizing::Grown`]).
    grown: usize,
    /// Half the kernel's `pipe-user-pages-soft` when it was read (`None`: no limit, 0).
    pipe_pages_budget: Option<usize>,
    /// Pipes closed since [`Capture::take_closed`] was last called: main pid and stream.
    closed: Vec<(u32, Stream)>,
    /// Runs whose `ready_log_line` matched since [`Capture::take_ready_lines`] was last called.
    ready_lines: Vec<(ContainerKey, Generation)>,
}

impl Capture {
    /// `dest`: where output is forwarded, if anywhere.
    pub fn new(registry: Rc<Registry>, dest: Option<Destination>) -> Capture {
        Capture {
            registry,
            tokens: TokenSpace::new(Owner::Capture),
            pipes: HashMap::new(),
            more: VecDeque::new(),
            budget: TURN_LOG_BYTES,
            scratch: None,
            forward: dest.map(Forward::new),
            shrinking: VecDeque::new(),
            grown: 0,
            pipe_pages_budget: pipe_pages_budget(
                std::fs::read_to_string(PIPE_USER_PAGES_SOFT).ok(),
            ),
            closed: Vec::new(),
            ready_lines: Vec::new(),
        }
    }

    /// Starts, changes or stops forwarding (reload of `log_forward`, `log_forward_to`); what
    /// was queued for the old destination is dropped with it.
    pub fn set_forwarding(&mut self, dest: Option<Destination>) {
        self.forward = dest.map(Forward::new);
    }

    /// The journal, when vigil's events go there.
    pub fn journal_mut(&mut self) -> Option<&mut JournalSink> {
        match self.forward.as_mut().map(|f| &mut f.dest) {
            Some(Dest::Journal { sink, .. }) => Some(sink),
            _ => None,
        }
    }

    /// Starts reading `fd`, run `run`'s `stream`, into `key`'s log. A pipe that cannot be
    /// watched is closed (with a warning naming `pid`): the child then gets EPIPE or SIGPIPE on
    /// output. A pipe handed over by `vigil upgrade` (`from`) is asked its size, so one the
    /// previous instance grew counts against [`MAX_GROWN_PIPES`] here too; a new one is a
    /// default pipe. `ready`: the run's `ready_log_line`, matched against this stream's lines
    /// until one of the run's lines matched (none for a run adopted after a crash, which is
    /// taken as ready, or one handed over that is ready already: docs/behaviour.md §4.5).
    #[allow(clippy::too_many_arguments)]
    pub fn add_output(
        &mut self,
        key: ContainerKey,
        pid: u32,
        fd: OwnedFd,
        stream: Stream,
        run: Option<Generation>,
        from: PipeFrom,
        ready: Option<&LinePattern>,
    ) {
        let sized = match from {
            PipeFrom::Spawn => Sizing::Default,
            PipeFrom::Handoff => match nix::fcntl::fcntl(fd.as_fd(), FcntlArg::F_GETPIPE_SZ) {
                Ok(size) if usize::try_from(size).is_ok_and(|s| s >= GROWN_PIPE_BYTES) => {
                    Sizing::Grown
                }
                _ => Sizing::Default,
            },
        };
        let token = self.tokens.next();
        match Watched::new(
            &self.registry,
            fd,
            |fd| fd.as_fd(),
            token,
            Interest::READABLE,
        ) {
            Ok(fd) => {
                self.pipes.insert(
                    token,
                    Pipe {
                        key,
                        pid,
                        stream,
                        run,
                        fd,
                        queued: false,
                        sized,
                        ready: ready.cloned().map(ReadyLine::new),
                    },
                );
                if sized == Sizing::Grown {
                    self.grown += 1;
                }
            }
            Err((_, e)) => warn!("cannot watch output of pid {pid}: {e}"),
        }
    }

    /// Every pipe's container and descriptor (handed over by `vigil upgrade`).
    pub fn pipe_fds(&self) -> Vec<(ContainerKey, Stream, Option<Generation>, std::os::fd::RawFd)> {
        use std::os::fd::AsRawFd;
        self.pipes
            .values()
            .map(|p| (p.key, p.stream, p.run, p.fd.as_raw_fd()))
            .collect()
    }

    /// Every pipe's container, stream, run and descriptor, borrowed (for the output holder).
    pub fn pipes(
        &self,
    ) -> impl Iterator<
        Item = (
            ContainerKey,
            Stream,
            Option<Generation>,
            std::os::fd::BorrowedFd<'_>,
        ),
    > {
        self.pipes
            .values()
            .map(|p| (p.key, p.stream, p.run, p.fd.as_fd()))
    }

    /// A pipe is readable (or hung up): read up to the cap into its container's log, one
    /// read of at most [`READ_BYTES`] at a time, each handed on straight from the scratch
    /// buffer (to the ring, the file, the forwarder or the journal) before the next.
    ///
    /// Every read counts against the turn's [`TURN_LOG_BYTES`]: a pipe that is readable when
    /// the budget is spent, or that already waits for its next share, is queued and read in
    /// [`Capture::read_more`] (one share per pipe per turn), so a control request never waits
    /// behind more than that much log handling.
    pub fn on_readable(&mut self, token: Token, logs: &mut impl Logs) {
        let Some(pipe) = self.pipes.get_mut(&token) else {
            return;
        };
        if pipe.queued {
            return;
        }
        if self.budget == 0 {
            pipe.queued = true;
            self.more.push_back(token);
            return;
        }
        let cap = PIPE_READ_CAP.min(self.budget);
        let read = self.read_pipe(token, logs, cap);
        self.budget -= read;
    }

    /// Reads up to `cap` bytes of the pipe into its log; queues it in `more` when the cap
    /// left data; returns the bytes read.
    fn read_pipe(&mut self, token: Token, logs: &mut impl Logs, cap: usize) -> usize {
        let Some(pipe) = self.pipes.get_mut(&token) else {
            return 0;
        };
        let (key, stream, run) = (pipe.key, pipe.stream, pipe.run);
        let Pipe {
            fd, ready: matcher, ..
        } = pipe;
        let mut matched = false;
        let scratch = self
            .scratch
            .get_or_insert_with(|| vec![0u8; READ_BYTES].into_boxed_slice());
        let mut log = logs.log_mut(key);
        let (mut fw, mut journal) = match self.forward.as_mut().map(|f| &mut f.dest) {
            Some(Dest::Stdout { forwarder, .. }) => (Some(forwarder), None),
            Some(Dest::Journal { sink, output: true }) => (None, Some(sink)),
            _ => (None, None),
        };
        let result = logs::drain_pipe_with(fd.as_fd(), scratch, cap, |chunk| {
            if !matched && let Some(m) = matcher.as_mut() {
                matched = m.feed(chunk);
            }
            let Some(log) = log.as_deref_mut() else {
                return;
            };
            log.ingest(chunk, fw.as_deref_mut());
            if let Some(sink) = journal.as_deref_mut() {
                let origin = Origin {
                    source: log.source(),
                    stream,
                    run,
                };
                sink.push(origin, chunk);
            }
        });
        if let Some(log) = log.as_deref()
            && log.file.as_ref().is_some_and(logs::LogFile::shrinking)
            && !self.shrinking.contains(&key)
        {
            self.shrinking.push_back(key);
        }
        let eof = matches!(result, Ok(ref r) if r.eof) || result.is_err();
        if eof
            && !matched
            && let Some(m) = matcher.as_mut()
        {
            matched = m.finish();
        }
        if matched && let Some(generation) = run {
            self.ready_lines.push((key, generation));
            for p in self.pipes.values_mut() {
                if p.key == key && p.run == run {
                    p.ready = None;
                }
            }
        }
        if eof && let Some(log) = log {
            log.eof(fw);
            if let Some(sink) = journal {
                sink.finish(Origin {
                    source: log.source(),
                    stream,
                    run,
                });
            }
        }
        match result {
            Ok(r) if r.eof => {
                self.close(token);
                r.bytes
            }
            Ok(r) => {
                if r.bytes >= READ_BYTES {
                    self.grow(token);
                }
                if r.bytes >= cap
                    && let Some(pipe) = self.pipes.get_mut(&token)
                    && !pipe.queued
                {
                    pipe.queued = true;
                    self.more.push_back(token);
                }
                r.bytes
            }
            Err(e) => {
                debug!("reading container output: {e}");
                self.close(token);
                0
            }
        }
    }

    /// Reads what `key`'s pipes hold now (one capped share each, outside the turn's budget):
    /// before its log tail is taken as a termination message, so output written just before
    /// the exit is in it.
    pub fn drain_key(&mut self, key: ContainerKey, logs: &mut impl Logs) {
        let tokens: Vec<Token> = self
            .pipes
            .iter()
            .filter(|(_, p)| p.key == key)
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            self.unqueue(token);
            self.read_pipe(token, logs, PIPE_READ_CAP);
        }
    }

    /// Once per turn, after the ready events and the control requests they brought: the
    /// queued pipes (capped, or readable after the budget ran out) get their share, oldest
    /// first, while the turn's budget lasts; the rest keep their place for the next turn. Then
    /// the budget is renewed, and one step of deleting a rotated-out log file is taken
    /// ([`Capture::shrink_step`]).
    pub fn read_more(&mut self, logs: &mut impl Logs) {
        // The pipes queued before this turn's reads; one a read re-queues goes behind them.
        for _ in 0..self.more.len() {
            if self.budget == 0 {
                break;
            }
            let Some(token) = self.more.pop_front() else {
                break;
            };
            if let Some(pipe) = self.pipes.get_mut(&token) {
                pipe.queued = false;
            }
            let cap = PIPE_READ_CAP.min(self.budget);
            self.budget -= self.read_pipe(token, logs, cap);
        }
        self.budget = TURN_LOG_BYTES;
        self.shrink_step(logs);
    }

    /// A share of `token`'s pipe found a whole default pipe's worth waiting: its writer is
    /// ahead of the loop, so the pipe is grown to [`GROWN_PIPE_BYTES`] if the bounds allow
    /// (module docs). One `F_GETPIPE_SZ` and one `F_SETPIPE_SZ` per pipe at most, ever.
    fn grow(&mut self, token: Token) {
        if !crate::tricks::on(crate::tricks::Trick::PipeGrowth) {
            return;
        }
        let pipes = self.pipes.len();
        let grown = self.grown;
        let budget = self.pipe_pages_budget;
        let Some(pipe) = self.pipes.get_mut(&token) else {
            return;
        };
        if pipe.sized != Sizing::Default || !may_grow(pipes, grown, budget) {
            return;
        }
        let fd = pipe.fd.as_fd();
        let size = nix::fcntl::fcntl(fd, FcntlArg::F_GETPIPE_SZ)
            .ok()
            .and_then(|s| usize::try_from(s).ok());
        if size.is_some_and(|s| s >= GROWN_PIPE_BYTES) {
            pipe.sized = Sizing::Settled;
            return;
        }
        // GROWN_PIPE_BYTES fits a c_int.
        let want = GROWN_PIPE_BYTES as libc::c_int;
        match nix::fcntl::fcntl(fd, FcntlArg::F_SETPIPE_SZ(want)) {
            Ok(_) => {
                pipe.sized = Sizing::Grown;
                self.grown += 1;
            }
            Err(e) => {
                debug!(
                    "cannot grow the output pipe of {:?} to {GROWN_PIPE_BYTES} bytes: {e}",
                    pipe.key
                );
                pipe.sized = Sizing::Settled;
            }
        }
    }

    /// Takes `token` out of the queue of pipes with more to read.
    fn unqueue(&mut self, token: Token) {
        if let Some(pipe) = self.pipes.get_mut(&token)
            && pipe.queued
        {
            pipe.queued = false;
            self.more.retain(|t| *t != token);
        }
    }

    /// One bounded step (one ftruncate(2) of [`logs::file::SHRINK_STEP`], or the final
    /// unlink) for the first container in the queue, which then goes to the back if more is
    /// due: a turn never pays for deleting a whole file, and deletion runs ahead of any flood
    /// (a turn writes at most [`TURN_LOG_BYTES`]).
    fn shrink_step(&mut self, logs: &mut impl Logs) {
        let Some(key) = self.shrinking.pop_front() else {
            return;
        };
        let more = logs
            .log_mut(key)
            .and_then(|l| l.file.as_mut())
            .is_some_and(logs::LogFile::shrink_step);
        if more {
            self.shrinking.push_back(key);
        }
    }

    /// Whether some pipe still has data to read, or a rotated-out file is still being
    /// deleted (the loop must not sleep).
    pub fn has_more(&self) -> bool {
        !self.more.is_empty() || !self.shrinking.is_empty()
    }

    fn close(&mut self, token: Token) {
        self.unqueue(token);
        if let Some(pipe) = self.pipes.remove(&token) {
            if pipe.sized == Sizing::Grown {
                self.grown -= 1;
            }
            self.closed.push((pipe.pid, pipe.stream));
        }
    }

    /// The pipes closed since the last call, by their run's main pid and stream (their
    /// entries leave the service manager's store: `runtime::fdstore`).
    pub fn take_closed(&mut self) -> Vec<(u32, Stream)> {
        std::mem::take(&mut self.closed)
    }

    /// The runs whose `ready_log_line` matched since the last call (each run once).
    pub fn take_ready_lines(&mut self) -> Vec<(ContainerKey, Generation)> {
        std::mem::take(&mut self.ready_lines)
    }

    /// Pipes grown to [`GROWN_PIPE_BYTES`] now.
    #[cfg(test)]
    fn grown_pipes(&self) -> usize {
        self.grown
    }

    /// Writes what the forwarder holds to stdout (or the journal), as far as it takes it;
    /// watches the destination for writability only while something is left.
    pub fn flush(&mut self) {
        let Some(f) = self.forward.as_mut() else {
            return;
        };
        let (result, want) = match &mut f.dest {
            Dest::Stdout { forwarder, stdout } => {
                (forwarder.flush(stdout.as_fd()), forwarder.pending())
            }
            Dest::Journal { sink, .. } => (sink.flush(), sink.pending()),
        };
        let fd = match &f.dest {
            Dest::Stdout { stdout, .. } => stdout.as_fd(),
            Dest::Journal { sink, .. } => {
                if sink.connection() != f.watched {
                    // The old socket is closed (which left the epoll set by itself).
                    f.watch = None;
                    f.watched = sink.connection();
                }
                sink.fd()
            }
        };
        if let Err(e) = result {
            debug!("forwarding container output: {e}");
        }
        if want && f.watch.is_none() {
            f.watch =
                Registration::new(&self.registry, fd, tokens::STDOUT, Interest::WRITABLE).ok();
        } else if !want {
            f.watch = None;
        }
    }
}

/// Half of `pipe-user-pages-soft` as read from /proc (`None` when it is 0, no limit); the
/// kernel's default of 16,384 pages when it cannot be read.
fn pipe_pages_budget(soft: Option<String>) -> Option<usize> {
    let soft = soft
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(16_384);
    (soft != 0).then_some(soft / 2)
}

/// Whether one more pipe may grow, with `pipes` pipes open of which `grown` are grown, under
/// `budget` pages (see [`pipe_pages_budget`]).
fn may_grow(pipes: usize, grown: usize, budget: Option<usize>) -> bool {
    // In 4 KiB pages (x86_64, arm64's default); where pages are larger a default pipe of 16
    // pages already holds GROWN_PIPE_BYTES, and `grow` finds it so and leaves it.
    const GROWN_PAGES: usize = GROWN_PIPE_BYTES / 4096;
    if grown >= MAX_GROWN_PIPES {
        return false;
    }
    let Some(budget) = budget else {
        return true;
    };
    let pages = pipes * DEFAULT_PIPE_PAGES + (grown + 1) * (GROWN_PAGES - DEFAULT_PIPE_PAGES);
    pages <= budget
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::spec::SupervisorSpec;
    use std::io::Write;
    use std::time::Duration;

    impl Logs for HashMap<ContainerKey, ContainerLog> {
        fn log_mut(&mut self, key: ContainerKey) -> Option<&mut ContainerLog> {
            self.get_mut(&key)
        }
    }

    /// Polls once and hands every event to the capture, as the router does.
    fn turn(
        poll: &mut mio::Poll,
        capture: &mut Capture,
        logs: &mut HashMap<ContainerKey, ContainerLog>,
    ) -> usize {
        let mut events = mio::Events::with_capacity(16);
        crate::testutil::poll_once(poll, &mut events, Duration::from_secs(5));
        let mut n = 0;
        for e in events.iter() {
            assert_eq!(Owner::of(e.token()), Some(Owner::Capture));
            capture.on_readable(e.token(), logs);
            n += 1;
        }
        n
    }

    /// Gives `key` (container `name`) a log and a stdout pipe of run 1 in `capture`, the pipe
    /// enlarged to `pipe_size` bytes if given (within the default pipe-max-size of 1 MiB,
    /// allowed unprivileged: pipe(7)); returns the writing end.
    fn stdout_pipe(
        capture: &mut Capture,
        logs: &mut HashMap<ContainerKey, ContainerLog>,
        key: ContainerKey,
        name: &str,
        pipe_size: Option<usize>,
    ) -> std::fs::File {
        logs.insert(
            key,
            ContainerLog::new("p", name, &SupervisorSpec::default()).0,
        );
        let (r, w) = crate::process::pipe_nonblocking().unwrap();
        if let Some(size) = pipe_size {
            nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETPIPE_SZ(size as libc::c_int)).unwrap();
        }
        capture.add_output(key, 1, r, Stream::Stdout, Some(1), PipeFrom::Spawn, None);
        std::fs::File::from(w)
    }

    /// A poll, a capture that forwards nothing, and the logs it writes into.
    fn bare_capture() -> (mio::Poll, Capture, HashMap<ContainerKey, ContainerLog>) {
        let poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        (poll, Capture::new(registry, None), HashMap::new())
    }

    fn pipe_size(w: &std::fs::File) -> usize {
        nix::fcntl::fcntl(w, nix::fcntl::FcntlArg::F_GETPIPE_SZ).unwrap() as usize
    }

    #[test]
    fn a_pipe_found_full_is_grown_once_and_uncounted_when_it_closes() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let key = ContainerKey(1);
        let mut w = stdout_pipe(&mut capture, &mut logs, key, "c", None);
        assert_eq!(pipe_size(&w), 64 * 1024, "a fresh pipe is a default one");
        // Less than a full default pipe: the writer is not ahead, nothing grows.
        w.write_all(&[b'x'; 1000]).unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        capture.read_more(&mut logs); // the turn's end: its budget renewed
        assert_eq!(pipe_size(&w), 64 * 1024);
        assert_eq!(capture.grown_pipes(), 0);
        // A full default pipe: grown, and counted once however often it is found full again.
        w.write_all(&vec![b'x'; 64 * 1024]).unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        assert_eq!(pipe_size(&w), GROWN_PIPE_BYTES);
        assert_eq!(capture.grown_pipes(), 1);
        w.write_all(&vec![b'x'; 3 * 64 * 1024]).unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        capture.read_more(&mut logs);
        while capture.has_more() {
            capture.read_more(&mut logs);
        }
        assert_eq!(
            logs[&key].buffer.total_written(),
            1000 + 4 * 64 * 1024,
            "three default pipes' worth waited in the grown one"
        );
        assert_eq!(capture.grown_pipes(), 1);
        drop(w);
        turn(&mut poll, &mut capture, &mut logs);
        assert!(capture.pipes.is_empty(), "EOF closes the pipe");
        assert_eq!(capture.grown_pipes(), 0);
    }

    #[test]
    fn a_pipe_already_larger_is_left_as_it_is_and_not_counted() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let key = ContainerKey(1);
        let mut w = stdout_pipe(
            &mut capture,
            &mut logs,
            key,
            "c",
            Some(2 * GROWN_PIPE_BYTES),
        );
        w.write_all(&vec![b'x'; 64 * 1024]).unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        assert_eq!(pipe_size(&w), 2 * GROWN_PIPE_BYTES, "never shrunk");
        assert_eq!(capture.grown_pipes(), 0);
    }

    #[test]
    fn pipes_grow_at_most_sixteen_at_once_and_within_half_the_users_soft_pipe_pages() {
        // The kernel's default soft limit, 16,384 pages: half of it for vigil's own pipes.
        let budget = pipe_pages_budget(Some("16384\n".to_string()));
        assert_eq!(budget, Some(8192));
        assert!(may_grow(1, 0, budget));
        assert!(
            may_grow(200, 15, budget),
            "200 pipes, 16 of them grown: 3,200 + 768 pages"
        );
        assert!(!may_grow(200, MAX_GROWN_PIPES, budget), "the cap");
        // 509 default pipes are 8,144 pages and one grown makes 8,192, the budget; 510 pass it.
        assert!(may_grow(509, 0, budget));
        assert!(!may_grow(510, 0, budget));
        assert!(!may_grow(2000, 0, budget));
        // No soft limit (0): only the cap.
        assert_eq!(pipe_pages_budget(Some("0".to_string())), None);
        assert!(may_grow(100_000, 15, None));
        assert!(!may_grow(1, MAX_GROWN_PIPES, None));
        // Unreadable: the kernel's default.
        assert_eq!(pipe_pages_budget(None), Some(8192));
        assert_eq!(pipe_pages_budget(Some("junk".to_string())), Some(8192));
    }

    #[test]
    fn a_ready_log_line_on_either_stream_is_reported_once_for_its_run_and_matching_stops() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let key = ContainerKey(4);
        logs.insert(
            key,
            ContainerLog::new("p", "c", &SupervisorSpec::default()).0,
        );
        let pattern = LinePattern::new("^listening on [0-9]+$").unwrap();
        let mut pipe = |stream| {
            let (r, w) = crate::process::pipe_nonblocking().unwrap();
            capture.add_output(key, 1, r, stream, Some(9), PipeFrom::Spawn, Some(&pattern));
            std::fs::File::from(w)
        };
        let mut out = pipe(Stream::Stdout);
        let mut err = pipe(Stream::Stderr);
        // Not a line of its own yet, and a line that does not match.
        out.write_all(b"starting\nlistening on ").unwrap();
        err.write_all(b"warning: listening on 80 soon\n").unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        assert_eq!(capture.take_ready_lines(), vec![]);
        // The line ends on stdout, where it began.
        out.write_all(b"8080\n").unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        assert_eq!(capture.take_ready_lines(), vec![(key, 9)]);
        assert!(
            capture.pipes.values().all(|p| p.ready.is_none()),
            "both of the run's streams stop matching"
        );
        err.write_all(b"listening on 8080\n").unwrap();
        out.write_all(b"listening on 8080\n").unwrap();
        turn(&mut poll, &mut capture, &mut logs);
        assert_eq!(capture.take_ready_lines(), vec![], "reported once per run");
        assert!(
            logs[&key]
                .buffer
                .tail_lines(None, false)
                .ends_with(b"listening on 8080\n"),
            "matching takes nothing from the log"
        );
    }

    #[test]
    fn a_ready_log_line_on_stderr_counts_and_an_unfinished_one_at_eof_too() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let pattern = LinePattern::new("ready").unwrap();
        for (key, stream, text, eof) in [
            (ContainerKey(5), Stream::Stderr, &b"ready\n"[..], false),
            (ContainerKey(6), Stream::Stdout, &b"ready"[..], true),
        ] {
            logs.insert(
                key,
                ContainerLog::new("p", "c", &SupervisorSpec::default()).0,
            );
            let (r, w) = crate::process::pipe_nonblocking().unwrap();
            capture.add_output(key, 1, r, stream, Some(2), PipeFrom::Spawn, Some(&pattern));
            let mut w = std::fs::File::from(w);
            w.write_all(text).unwrap();
            if eof {
                drop(w);
                turn(&mut poll, &mut capture, &mut logs);
            } else {
                turn(&mut poll, &mut capture, &mut logs);
                drop(w);
            }
            assert_eq!(capture.take_ready_lines(), vec![(key, 2)], "{stream:?}");
        }
    }

    #[test]
    fn output_reaches_the_log_and_eof_closes_and_deregisters_the_pipe() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let key = ContainerKey(3);
        let mut w = stdout_pipe(&mut capture, &mut logs, key, "c", None);
        w.write_all(b"hello\n").unwrap();
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        assert_eq!(logs[&key].buffer.tail_lines(None, false), b"hello\n");
        drop(w);
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        assert!(capture.pipes.is_empty(), "the pipe is closed at EOF");
        // Nothing is registered any more: the poll times out with no event.
        let mut events = mio::Events::with_capacity(4);
        crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(20));
        assert!(events.is_empty());
    }

    #[test]
    fn a_pipe_over_the_read_cap_is_finished_on_the_next_turn() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let key = ContainerKey(1);
        // A pipe holds 64 KiB by default; make room for more than one read cap.
        let mut w = stdout_pipe(&mut capture, &mut logs, key, "c", Some(2 * PIPE_READ_CAP));
        w.write_all(&vec![b'x'; PIPE_READ_CAP + 100]).unwrap();
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        assert_eq!(
            logs[&key].buffer.total_written(),
            TURN_LOG_BYTES as u64,
            "one turn's share"
        );
        assert!(capture.has_more(), "the cap left data for the next turn");
        // This turn's budget went to the event's read; each later turn reads one more share,
        // with no new event (edge-triggered: none would come).
        capture.read_more(&mut logs);
        let mut turns = 0;
        while capture.has_more() {
            let before = logs[&key].buffer.total_written();
            capture.read_more(&mut logs);
            assert!(logs[&key].buffer.total_written() - before <= TURN_LOG_BYTES as u64);
            turns += 1;
            assert!(turns < 100, "the queued pipe is served");
        }
        assert_eq!(
            logs[&key].buffer.total_written(),
            (PIPE_READ_CAP + 100) as u64
        );
    }

    #[test]
    fn a_queued_pipe_is_queued_once_and_an_event_for_it_reads_nothing_more() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let key = ContainerKey(1);
        let mut w = stdout_pipe(&mut capture, &mut logs, key, "c", Some(1 << 20));
        w.write_all(&vec![b'x'; 4 * TURN_LOG_BYTES]).unwrap();
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        let token = *capture.pipes.keys().next().unwrap();
        assert_eq!(capture.more.len(), 1);
        // More events for the queued pipe (as after more writes): no read beyond the turn's
        // share, and no second place in the queue.
        for _ in 0..3 {
            capture.on_readable(token, &mut logs);
        }
        assert_eq!(capture.more.len(), 1);
        assert_eq!(logs[&key].buffer.total_written(), TURN_LOG_BYTES as u64);
        capture.read_more(&mut logs);
        capture.on_readable(token, &mut logs);
        assert_eq!(capture.more.len(), 1, "{:?}", capture.more);
        // Closing the pipe (EOF) takes it out of the queue.
        drop(w);
        while capture.has_more() {
            capture.read_more(&mut logs);
        }
        assert!(capture.pipes.is_empty());
        assert!(capture.more.is_empty());
        assert_eq!(logs[&key].buffer.total_written(), 4 * TURN_LOG_BYTES as u64);
    }

    #[test]
    fn pipes_share_one_read_budget_per_turn_and_none_is_left_behind() {
        let (mut poll, mut capture, mut logs) = bare_capture();
        let mut writers = Vec::new();
        let each = 3 * TURN_LOG_BYTES / 2;
        for k in 0..3u32 {
            let key = ContainerKey(k);
            let name = format!("c{k}");
            let mut w = stdout_pipe(&mut capture, &mut logs, key, &name, Some(1 << 20));
            w.write_all(&vec![b'a' + k as u8; each]).unwrap();
            writers.push(w);
        }
        let total = |logs: &HashMap<ContainerKey, ContainerLog>| -> u64 {
            logs.values().map(|l| l.buffer.total_written()).sum()
        };
        // Every pipe is ready at once: the events and the turn's queued reads together take
        // at most one turn's budget, however many pipes have data.
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 3);
        capture.read_more(&mut logs);
        assert!(total(&logs) <= TURN_LOG_BYTES as u64, "{}", total(&logs));
        let mut turns = 1;
        while capture.has_more() {
            let before = total(&logs);
            capture.read_more(&mut logs);
            assert!(total(&logs) - before <= TURN_LOG_BYTES as u64);
            turns += 1;
            assert!(turns < 100, "the queued pipes are served");
        }
        for (k, log) in &logs {
            assert_eq!(log.buffer.total_written(), each as u64, "container {k:?}");
        }
    }

    #[test]
    fn with_the_journal_as_destination_stderr_lines_go_there_at_err_priority_with_the_run() {
        use std::os::unix::net::UnixDatagram;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let journal = UnixDatagram::bind(&path).unwrap();
        let mut poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        let sink = JournalSink::connect(&path).unwrap();
        let mut capture = Capture::new(registry, Some(Destination::Journal { sink, output: true }));
        let key = ContainerKey(2);
        let mut logs = HashMap::new();
        logs.insert(
            key,
            ContainerLog::new("web", "app", &SupervisorSpec::default()).0,
        );
        let (r, w) = crate::process::pipe_nonblocking().unwrap();
        capture.add_output(key, 1, r, Stream::Stderr, Some(7), PipeFrom::Spawn, None);
        let mut w = std::fs::File::from(w);
        w.write_all(b"it broke\n").unwrap();
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        capture.flush();
        assert_eq!(
            logs[&key].buffer.tail_lines(None, false),
            b"it broke\n",
            "the ring still gets it"
        );
        let mut buf = [0u8; 4096];
        let n = journal.recv(&mut buf).unwrap();
        let entry = String::from_utf8_lossy(&buf[..n]).into_owned();
        for f in [
            "MESSAGE=it broke\n",
            "PRIORITY=3\n",
            "VIGIL_POD=web\n",
            "VIGIL_CONTAINER=app\n",
            "VIGIL_RUN=7\n",
            "VIGIL_STREAM=stderr\n",
        ] {
            assert!(entry.contains(f), "{f:?} in {entry:?}");
        }
    }
}
