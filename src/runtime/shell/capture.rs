//! Log capture: the read ends of container output pipes, and forwarding that output to vigil's
//! own stdout (`log_forward`).
//!
//! Owns: each pipe's descriptor and registration (edge-triggered: read until `WouldBlock`, at
//! most [`PIPE_READ_CAP`] bytes per event, the rest on the next turn so one chatty container
//! cannot starve the loop), the list of pipes with more to read, and the non-blocking stdout
//! descriptor of the forwarder with its writability watch (only while something is queued, so a
//! slow reader of stdout never blocks the loop).
//!
//! Must not: decide anything about a container's lifecycle (EOF on its output is not its exit),
//! or block on a read or a write.

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::rc::Rc;

use log::{debug, warn};
use mio::{Interest, Registry, Token};

use super::tokens::{self, Owner, Registration, TokenSpace, Watched};
use crate::core::ContainerKey;
use crate::logs::{self, ContainerLog, Forwarder};
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
    fd: Watched<OwnedFd>,
}

/// The forwarder and vigil's stdout. Field order: the watch is dropped before the descriptor.
struct Forward {
    watch: Option<Registration>,
    forwarder: Forwarder,
    stdout: OwnedFd,
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
    /// `stdout`: vigil's own stdout (non-blocking) when container output is forwarded there.
    pub fn new(registry: Rc<Registry>, stdout: Option<OwnedFd>) -> Capture {
        Capture {
            registry,
            tokens: TokenSpace::new(Owner::Capture),
            pipes: HashMap::new(),
            more: Vec::new(),
            forward: stdout.map(|stdout| Forward {
                watch: None,
                // Writes a full queue to stdout before dropping: drops only where it blocks.
                forwarder: Forwarder::writing_to(stdout.as_fd()),
                stdout,
            }),
        }
    }

    /// Starts (`Some`: vigil's non-blocking stdout) or stops forwarding (reload of
    /// `log_forward`); what was queued for the old descriptor is dropped with it.
    pub fn set_forwarding(&mut self, stdout: Option<OwnedFd>) {
        self.forward = stdout.map(|stdout| Forward {
            watch: None,
            forwarder: Forwarder::writing_to(stdout.as_fd()),
            stdout,
        });
    }

    /// Starts reading `fd` into `key`'s log. A pipe that cannot be watched is closed (with a
    /// warning naming `pid`): the child then gets EPIPE or SIGPIPE on output.
    pub fn add(&mut self, key: ContainerKey, pid: u32, fd: OwnedFd) {
        let token = self.tokens.next();
        match Watched::new(
            &self.registry,
            fd,
            |fd| fd.as_fd(),
            token,
            Interest::READABLE,
        ) {
            Ok(fd) => {
                self.pipes.insert(token, Pipe { key, fd });
            }
            Err((_, e)) => warn!("cannot watch output of pid {pid}: {e}"),
        }
    }

    /// A pipe is readable (or hung up): read up to the cap into its container's log.
    pub fn on_readable(&mut self, token: Token, logs: &mut impl Logs) {
        let Some(pipe) = self.pipes.get(&token) else {
            return;
        };
        let key = pipe.key;
        let mut buf = Vec::new();
        let result = logs::drain_pipe(pipe.fd.as_fd(), &mut buf, PIPE_READ_CAP);
        let eof = matches!(result, Ok(ref r) if r.eof) || result.is_err();
        if let Some(log) = logs.log_mut(key) {
            let mut fw = self.forward.as_mut().map(|f| &mut f.forwarder);
            if !buf.is_empty() {
                log.ingest(&buf, fw.as_deref_mut());
            }
            if eof {
                log.eof(fw);
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

    /// Writes what the forwarder holds to stdout, as far as it takes it; watches stdout for
    /// writability only while something is left.
    pub fn flush(&mut self) {
        let Some(f) = self.forward.as_mut() else {
            return;
        };
        if let Err(e) = f.forwarder.flush(f.stdout.as_fd()) {
            debug!("forwarding container output: {e}");
        }
        let want = f.forwarder.pending();
        if want && f.watch.is_none() {
            f.watch = Registration::new(
                &self.registry,
                f.stdout.as_fd(),
                tokens::STDOUT,
                Interest::WRITABLE,
            )
            .ok();
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
        capture.add(key, 1, r);
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
        capture.add(key, 1, r);
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
}
