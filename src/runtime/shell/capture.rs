//! Log capture: the read ends of container output pipes, and forwarding that output to vigil's
//! own stdout or to the journal (`log_forward`, `log_forward_to`).
//!
//! Owns: each pipe's descriptor and registration (edge-triggered: read until `WouldBlock`, at
//! most [`PIPE_READ_CAP`] bytes per event, the rest on the next turn so one chatty container
//! cannot starve the loop), the list of pipes with more to read, and the forwarding
//! destination — the non-blocking stdout descriptor of the forwarder, or the journal socket —
//! with its writability watch (only while something is queued, so a slow reader never blocks
//! the loop).
//!
//! Must not: decide anything about a container's lifecycle (EOF on its output is not its exit),
//! or block on a read or a write.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

use log::{debug, warn};
use mio::{Interest, Registry, Token};

use super::tokens::{self, Owner, Registration, TokenSpace, Watched};
use crate::core::{ContainerKey, Generation};
use crate::logs::{self, ContainerLog, Forwarder, JournalSink, Origin, Stream};
use crate::runtime::slots::ContainerRuntime;

/// Bytes read from one pipe per readiness event.
pub const PIPE_READ_CAP: usize = 256 * 1024;

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
    stream: Stream,
    run: Option<Generation>,
    fd: Watched<OwnedFd>,
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
    /// Pipes that hit the per-event read cap and still have data.
    more: Vec<Token>,
    forward: Option<Forward>,
}

impl Capture {
    /// `dest`: where output is forwarded, if anywhere.
    pub fn new(registry: Rc<Registry>, dest: Option<Destination>) -> Capture {
        Capture {
            registry,
            tokens: TokenSpace::new(Owner::Capture),
            pipes: HashMap::new(),
            more: Vec::new(),
            forward: dest.map(Forward::new),
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
    /// output.
    pub fn add_output(
        &mut self,
        key: ContainerKey,
        pid: u32,
        fd: OwnedFd,
        stream: Stream,
        run: Option<Generation>,
    ) {
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
                        stream,
                        run,
                        fd,
                    },
                );
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

    /// A pipe is readable (or hung up): read up to the cap into its container's log.
    pub fn on_readable(&mut self, token: Token, logs: &mut impl Logs) {
        let Some(pipe) = self.pipes.get(&token) else {
            return;
        };
        let (key, stream, run) = (pipe.key, pipe.stream, pipe.run);
        let mut buf = Vec::new();
        let result = logs::drain_pipe(pipe.fd.as_fd(), &mut buf, PIPE_READ_CAP);
        let eof = matches!(result, Ok(ref r) if r.eof) || result.is_err();
        if let Some(log) = logs.log_mut(key) {
            let (mut fw, journal) = match self.forward.as_mut().map(|f| &mut f.dest) {
                Some(Dest::Stdout { forwarder, .. }) => (Some(forwarder), None),
                Some(Dest::Journal { sink, output: true }) => (None, Some(sink)),
                _ => (None, None),
            };
            if !buf.is_empty() {
                log.ingest(&buf, fw.as_deref_mut());
            }
            if eof {
                log.eof(fw);
            }
            if let Some(sink) = journal {
                let origin = Origin {
                    source: log.source(),
                    stream,
                    run,
                };
                sink.push(origin, &buf);
                if eof {
                    sink.finish(origin);
                }
            }
        }
        match result {
            Ok(r) if r.eof => self.close(token),
            Ok(r) => {
                if r.bytes >= PIPE_READ_CAP && !self.more.contains(&token) {
                    self.more.push(token);
                }
            }
            Err(e) => {
                debug!("reading container output: {e}");
                self.close(token);
            }
        }
    }

    /// Reads what `key`'s pipes hold now (one capped share each): before its log tail is
    /// taken as a termination message, so output written just before the exit is in it.
    pub fn drain_key(&mut self, key: ContainerKey, logs: &mut impl Logs) {
        let tokens: Vec<Token> = self
            .pipes
            .iter()
            .filter(|(_, p)| p.key == key)
            .map(|(t, _)| *t)
            .collect();
        for token in tokens {
            self.on_readable(token, logs);
        }
    }

    /// Pipes left with data by the read cap get their next share.
    pub fn read_more(&mut self, logs: &mut impl Logs) {
        for token in std::mem::take(&mut self.more) {
            self.on_readable(token, logs);
        }
    }

    /// Whether some pipe still has data to read (the loop must not sleep).
    pub fn has_more(&self) -> bool {
        !self.more.is_empty()
    }

    fn close(&mut self, token: Token) {
        self.pipes.remove(&token);
        self.more.retain(|t| *t != token);
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
        poll.poll(&mut events, Some(Duration::from_secs(5)))
            .unwrap();
        let mut n = 0;
        for e in events.iter() {
            assert_eq!(Owner::of(e.token()), Some(Owner::Capture));
            capture.on_readable(e.token(), logs);
            n += 1;
        }
        n
    }

    #[test]
    fn output_reaches_the_log_and_eof_closes_and_deregisters_the_pipe() {
        let mut poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        let mut capture = Capture::new(registry, None);
        let key = ContainerKey(3);
        let mut logs = HashMap::new();
        logs.insert(
            key,
            ContainerLog::new("p", "c", &SupervisorSpec::default()).0,
        );
        let (r, w) = crate::process::pipe_nonblocking().unwrap();
        capture.add_output(key, 1, r, Stream::Stdout, Some(1));
        let mut w = std::fs::File::from(w);
        w.write_all(b"hello\n").unwrap();
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        assert_eq!(logs[&key].buffer.tail_lines(None, false), b"hello\n");
        drop(w);
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        assert!(capture.pipes.is_empty(), "the pipe is closed at EOF");
        // Nothing is registered any more: the poll times out with no event.
        let mut events = mio::Events::with_capacity(4);
        poll.poll(&mut events, Some(Duration::from_millis(20)))
            .unwrap();
        assert!(events.is_empty());
    }

    #[test]
    fn a_pipe_over_the_read_cap_is_finished_on_the_next_turn() {
        let mut poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        let mut capture = Capture::new(registry, None);
        let key = ContainerKey(1);
        let mut logs = HashMap::new();
        logs.insert(
            key,
            ContainerLog::new("p", "c", &SupervisorSpec::default()).0,
        );
        let (r, w) = crate::process::pipe_nonblocking().unwrap();
        // A pipe holds 64 KiB by default; make room for more than one read cap (within the
        // default pipe-max-size of 1 MiB, allowed unprivileged: pipe(7)).
        nix::fcntl::fcntl(
            &w,
            nix::fcntl::FcntlArg::F_SETPIPE_SZ((2 * PIPE_READ_CAP) as libc::c_int),
        )
        .unwrap();
        capture.add_output(key, 1, r, Stream::Stdout, Some(1));
        let mut w = std::fs::File::from(w);
        w.write_all(&vec![b'x'; PIPE_READ_CAP + 100]).unwrap();
        assert_eq!(turn(&mut poll, &mut capture, &mut logs), 1);
        assert!(capture.has_more(), "the cap left data for the next turn");
        capture.read_more(&mut logs);
        assert!(!capture.has_more());
        assert_eq!(
            logs[&key].buffer.total_written(),
            (PIPE_READ_CAP + 100) as u64
        );
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
        capture.add_output(key, 1, r, Stream::Stderr, Some(7));
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
