//! Open connections across `vigil upgrade`: what this instance holds of each (input read and
//! not yet taken, output not yet sent) for the handoff, and taking them over in the next
//! instance, whose loop then answers them as if nothing happened (docs/behaviour.md §12).
//!
//! Owns nothing beyond the connection table's entries it reads or adds. Must not: change a
//! connection while handing it over (until the exec succeeds the old instance goes on with
//! every connection as it was), or take over more connections or bytes than the limits allow
//! (the rest are closed: their clients see the connection end).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use mio::Registry;
use mio::net::UnixStream;

use super::conn::Stream;
use super::{ADMIN_EXTRA, ConnId, READ_CHUNK, Server};
use crate::control::protocol::MAX_LINE;

/// What becomes of a request handed out and not answered yet (in flight) when its connection
/// is handed over; the runtime knows what the request was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// Put back in front of the input as this line, for the next instance to answer (a
    /// `metrics` request whose exposition was being built).
    Replay(String),
    /// Its answer is handed over beside the connection and the next instance sends it (a
    /// request waiting for its target's state): the connection stays in flight.
    Owed,
    /// Neither: the connection ends with the notice after the line being written.
    Cut,
}

/// One open connection as this instance hands it to the next (its descriptor stays open
/// across the exec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    pub conn: ConnId,
    pub fd: RawFd,
    /// Read and not yet taken: the next requests (a request being answered over several
    /// turns, given back by the runtime, first).
    pub input: Vec<u8>,
    /// Not yet sent: the rest of a reply, which the next instance sends first. A streamed
    /// reply (`logs`, `logs -f`, `events -f`) cannot go on there: it ends after the line being
    /// written with the notice, and the connection is closed once that is sent.
    pub output: Vec<u8>,
    /// What was sent so far ends inside a line.
    pub sent_open: bool,
    /// Close once `output` is sent.
    pub closing: bool,
    /// The peer closed its writing side.
    pub eof: bool,
    /// A request of it stays in flight: its answer comes from what the runtime hands over
    /// ([`Resume::Owed`]).
    pub in_flight: bool,
}

/// A handed-over connection, as the next instance receives it.
#[derive(Debug)]
pub struct Inherited {
    pub fd: OwnedFd,
    pub input: Vec<u8>,
    pub output: Vec<u8>,
    pub sent_open: bool,
    pub closing: bool,
    pub eof: bool,
    /// A request of it is still owed an answer, which the runtime sends ([`Resume::Owed`]).
    pub in_flight: bool,
}

/// How many handed-over connections were taken over, and how many closed over the limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakenOver {
    pub kept: usize,
    pub closed: usize,
    /// Each handed-over connection's id here, in the order given (`None`: closed).
    pub ids: Vec<Option<ConnId>>,
}

impl Server {
    /// Every open connection with what this instance holds of it, for `vigil upgrade`; nothing
    /// is changed. A request handed out and not answered yet (in flight) becomes what `resume`
    /// says (the runtime knows what it was): put back in front of the input, still owed, or
    /// cut — ended with `notice` after the line being written, as every streamed reply is.
    pub fn handover(&self, notice: &str, resume: &dyn Fn(ConnId) -> Resume) -> Vec<Handover> {
        self.conns
            .iter()
            .flatten()
            .map(|c| {
                let how = if c.in_flight {
                    resume(c.id)
                } else {
                    Resume::Cut
                };
                let owed = c.in_flight && how == Resume::Owed;
                let again = match how {
                    Resume::Replay(line) if c.in_flight => Some(line),
                    _ => None,
                };
                let cut = c.reply != Stream::None || (c.in_flight && again.is_none() && !owed);
                let mut input = Vec::new();
                if let Some(line) = again {
                    input.extend_from_slice(line.trim_end().as_bytes());
                    input.push(b'\n');
                }
                input.extend_from_slice(&c.rbuf);
                let output = if cut {
                    c.unsent_if_cut_with(notice)
                } else {
                    c.wbuf[c.wpos..].to_vec()
                };
                Handover {
                    conn: c.id,
                    fd: c.stream.as_raw_fd(),
                    input,
                    sent_open: c.sent_open,
                    closing: c.closing || cut,
                    eof: c.eof,
                    in_flight: owed && !cut,
                    output,
                }
            })
            .collect()
    }

    /// `conn`'s descriptor if a line written to it now comes out whole and next: nothing of
    /// it is unsent and what was sent does not end inside a line.
    pub fn quiet_fd(&self, conn: ConnId) -> Option<RawFd> {
        self.conns
            .get(conn.index)
            .and_then(Option::as_ref)
            .filter(|c| c.id == conn && c.pending_output() == 0 && !c.sent_open)
            .map(|c| c.stream.as_raw_fd())
    }

    /// The next instance: takes over connections the previous one handed over, within the
    /// limits — the connection caps (per uid for non-admins, an admin's extra room), at most one
    /// line and one read of input each, and the client memory budget for all their bytes
    /// together (those past it are closed). Peers are judged again from the socket
    /// (`SO_PEERCRED`, `SO_PEERGROUPS`: as they were at `connect`) and this instance's admin
    /// lists. Each is then served as a connection accepted here: its output sent first, its
    /// input's requests answered in turn.
    pub fn take_over(
        &mut self,
        registry: &Registry,
        handed: Vec<Inherited>,
        now: Instant,
    ) -> TakenOver {
        let mut counts = TakenOver::default();
        let mut bytes = 0usize;
        for h in handed {
            let stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(h.fd));
            let admitted = (|| {
                let (peer, groups) = Self::credentials(&stream).ok()?;
                let admin = self.judge(&peer, &groups);
                let room = if admin {
                    self.open < self.limits.max_connections + ADMIN_EXTRA
                } else {
                    self.open < self.limits.max_connections
                        && self.per_uid.of(peer.uid) < self.limits.max_per_uid
                };
                let size = h.input.len() + h.output.len();
                let fits = h.input.len() <= MAX_LINE + READ_CHUNK
                    && bytes.saturating_add(size) <= self.limits.memory_budget;
                (room && fits).then_some((peer, groups, admin, size))
            })();
            let Some((peer, groups, admin, size)) = admitted else {
                counts.closed += 1;
                counts.ids.push(None);
                continue;
            };
            // O_NONBLOCK is the open file's and survives the exec; set again all the same.
            if let Err(e) = stream_nonblocking(&stream) {
                log::debug!("control: a handed-over connection: {e}");
                counts.closed += 1;
                counts.ids.push(None);
                continue;
            }
            let Some(id) = self.install(registry, stream, peer, groups, admin, now) else {
                counts.closed += 1;
                counts.ids.push(None);
                continue;
            };
            bytes += size;
            counts.kept += 1;
            if let Some(c) = self.conn_mut(id) {
                c.rbuf = h.input;
                c.wbuf = h.output;
                c.wpos = 0;
                c.sent_open = h.sent_open;
                c.closing = h.closing;
                c.eof = h.eof;
                c.in_flight = h.in_flight;
                // What is in the kernel's buffer was not read yet: look, without an event.
                c.more_input = !h.eof;
                if let Err(e) = c.flush() {
                    log::debug!("control: write to pid {} failed: {e}", c.peer.pid);
                    self.close(registry, id);
                    counts.ids.push(None);
                    continue;
                }
            }
            self.settle(registry, id);
            counts.ids.push(Some(id));
        }
        if counts.closed > 0 {
            log::warn!(
                "control: {} connection(s) handed over by the previous vigil were closed: over \
                 the connection caps or the client memory budget",
                counts.closed
            );
        }
        counts
    }
}

fn stream_nonblocking(stream: &UnixStream) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(stream, FcntlArg::F_GETFL)?);
    fcntl(stream, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map(|_| ())
}
