//! One client connection: its socket, who is on the other end, line framing of its input
//! (one line and one read chunk buffered at most) and its buffered non-blocking output.
//!
//! Owns nothing beyond its own buffers and stream. Must not: decide admission or fairness
//! (the server's `admission` and `turn`), or parse more than one request at a time.

use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::time::Instant;

use mio::net::UnixStream;
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use nix::sys::socket::{MsgFlags, send, sendmsg};

use super::{ConnId, KEEP_CAPACITY, OUTPUT_HIGH, PeerCred, READ_CHUNK};
use crate::control::protocol::{self, MAX_LINE, ProtoError, Request};

/// What the server knows about a reply being streamed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Stream {
    None,
    /// Pushed in chunks until [`super::Server::end_stream`]; `cut` closes the line if the client is
    /// cut off midway.
    Active {
        cut: Option<&'static str>,
    },
}

pub(super) struct Conn {
    pub(super) id: ConnId,
    /// Accept order, to evict the newest.
    pub(super) seq: u64,
    pub(super) stream: UnixStream,
    pub(super) peer: PeerCred,
    pub(super) groups: Vec<u32>,
    pub(super) admin: bool,
    pub(super) rbuf: Vec<u8>,
    pub(super) wbuf: Vec<u8>,
    /// Bytes of `wbuf` already written.
    pub(super) wpos: usize,
    /// What was written so far ends inside a line.
    pub(super) sent_open: bool,
    pub(super) writable_interest: bool,
    /// The kernel may hold more input: the last read did not reach `WouldBlock`/EOF.
    pub(super) more_input: bool,
    /// The peer closed its writing side.
    pub(super) eof: bool,
    /// The peer is gone entirely (`EPOLLHUP`/`EPOLLERR`): nothing more can be delivered, but
    /// what it sent before it went is still read to EOF, and the requests in it that change
    /// state are carried out (a fire-and-forget `restart`), their replies discarded.
    pub(super) hung_up: bool,
    /// An error line was queued: close once it is written (or after [`super::CLOSE_GRACE`]).
    pub(super) closing: bool,
    /// A request was handed out and not answered yet.
    pub(super) in_flight: bool,
    pub(super) reply: Stream,
    /// In the ready queue.
    pub(super) queued: bool,
    /// Last request taken or byte written.
    pub(super) last_active: Instant,
    /// Bytes of buffers accounted in [`super::Server::memory`].
    pub(super) footprint: usize,
}

impl Conn {
    pub(super) fn pending_output(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    pub(super) fn has_line(&self) -> bool {
        self.rbuf.contains(&b'\n')
            || self.rbuf.len() > MAX_LINE
            || (self.eof && !self.rbuf.is_empty())
    }

    /// May a request be taken now?
    pub(super) fn can_take(&self) -> bool {
        !self.closing
            && !self.in_flight
            && self.reply == Stream::None
            && self.pending_output() <= OUTPUT_HIGH
    }

    /// Could a request be taken without a new readiness event?
    pub(super) fn has_work(&self) -> bool {
        self.has_line() || (self.more_input && !self.eof)
    }

    /// What this connection holds of vigil's memory: its buffers, and the replies written to
    /// the kernel that the peer has not read yet ([`Conn::kernel_queued`]). A client that never
    /// reads fills its socket's send buffer (`net.core.wmem_default`, about 208 KiB) before
    /// anything waits in `wbuf`; that memory is charged to vigil's memory cgroup, so the
    /// clients' budget counts it.
    pub(super) fn measure(&self) -> usize {
        (self.rbuf.capacity() + self.wbuf.capacity() + self.groups.capacity() * 4)
            .saturating_add(self.kernel_queued())
    }

    /// Bytes written to this socket and not yet read by the peer, as the kernel charges them
    /// (`SIOCOUTQ`, unix(7): the send queue's allocation, overhead included). 0 when the
    /// kernel does not say.
    #[allow(unsafe_code)] // one ioctl(2); nix has no SIOCOUTQ wrapper
    pub(super) fn kernel_queued(&self) -> usize {
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one int through the pointer, which points at a
        // live c_int; the descriptor is this connection's open socket.
        let r = unsafe { libc::ioctl(self.stream.as_raw_fd(), libc::TIOCOUTQ, &mut queued) };
        if r == 0 {
            usize::try_from(queued).unwrap_or(0)
        } else {
            0
        }
    }

    /// Reads until the buffer holds a complete line, `WouldBlock`, EOF or more than one line's
    /// worth; at most one line and one chunk are ever buffered.
    pub(super) fn read_line(&mut self) -> io::Result<()> {
        let mut buf = [0u8; READ_CHUNK];
        while !self.has_line() {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    self.more_input = false;
                    return Ok(());
                }
                Ok(n) => {
                    self.rbuf.extend_from_slice(&buf[..n]);
                    self.more_input = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.more_input = false;
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Takes the next non-blank line off the input, if a complete one is there.
    pub(super) fn take_line(&mut self) -> Option<Result<Request, ProtoError>> {
        loop {
            let (line_len, consumed) = match self.rbuf.iter().position(|&b| b == b'\n') {
                Some(i) => (i, i + 1),
                None if self.rbuf.len() > MAX_LINE => (self.rbuf.len(), self.rbuf.len()),
                None if self.eof && !self.rbuf.is_empty() => (self.rbuf.len(), self.rbuf.len()),
                None => return None,
            };
            if line_len > MAX_LINE {
                log::warn!(
                    "control: request line of {} bytes or more from pid {} uid {}; closing",
                    line_len,
                    self.peer.pid,
                    self.peer.uid
                );
                // Whatever follows belongs to the oversized line or comes after it.
                self.rbuf = Vec::new();
                self.closing = true;
                return Some(Err(ProtoError::too_large(line_len)));
            }
            let parsed = {
                let line = &self.rbuf[..line_len];
                if line.iter().all(u8::is_ascii_whitespace) {
                    None
                } else {
                    Some(protocol::parse_request(line))
                }
            };
            self.rbuf.drain(..consumed);
            self.shrink_input();
            if parsed.is_some() {
                return parsed;
            }
        }
    }

    /// Gives back the input buffer's room once most of a read is worked off: what is left (a
    /// few requests, or the start of the next one) need not hold a whole read's buffer while
    /// it waits for its turn or for client memory.
    fn shrink_input(&mut self) {
        if self.rbuf.capacity() <= KEEP_CAPACITY {
            return;
        }
        if self.rbuf.is_empty() {
            self.rbuf = Vec::new();
        } else if self.rbuf.len() <= self.rbuf.capacity() / 4 {
            self.rbuf.shrink_to(self.rbuf.len().max(KEEP_CAPACITY));
        }
    }

    /// For a peer that is gone: drops up to `max` complete lines at the front of the input that
    /// cannot be a request that changes state, without parsing them, and returns how many.
    /// A line can name a command only by its letters or by `\u` escapes in a JSON string
    /// (RFC 8259 §7), so a line with neither any state-changing command's name nor a `\u` is
    /// such a line. Parsing every request a dead client pipelined costs far more than this.
    pub(super) fn drop_read_only_lines(&mut self, max: usize) -> usize {
        let mut start = 0;
        let mut dropped = 0;
        while dropped < max {
            let rest = &self.rbuf[start..];
            let Some(end) = rest.iter().position(|&b| b == b'\n') else {
                break;
            };
            let line = &rest[..end];
            if line.len() > MAX_LINE || may_change_state(line) {
                break;
            }
            start += end + 1;
            dropped += 1;
        }
        self.rbuf.drain(..start);
        self.shrink_input();
        dropped
    }

    /// Writes until done or `WouldBlock`. `MSG_NOSIGNAL` so a vanished client yields `EPIPE`
    /// instead of a `SIGPIPE` that would kill the supervisor (send(2)). Returns whether
    /// anything was written.
    pub(super) fn flush(&mut self) -> Result<bool, Errno> {
        let mut progress = false;
        while self.wpos < self.wbuf.len() {
            match send(
                self.stream.as_raw_fd(),
                &self.wbuf[self.wpos..],
                MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(n) => {
                    self.wpos += n;
                    if n > 0 {
                        progress = true;
                        self.sent_open = self.wbuf[self.wpos - 1] != b'\n';
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            if self.wbuf.capacity() > KEEP_CAPACITY {
                self.wbuf = Vec::new();
            }
        } else if self.wpos > READ_CHUNK && self.wpos * 2 > self.wbuf.len() {
            self.wbuf.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(progress)
    }

    /// `parts`, in order, after whatever is queued: written straight from the caller's buffers
    /// while nothing is queued before them (one sendmsg(2) of all the parts), and only what the
    /// socket does not take now copied into `wbuf`. A reply of 134 KB (a status of 100 pods)
    /// then costs no copy and no buffer of its size here, and the parts need not be joined
    /// into one line first (BENCHMARKS.md, ninth pass: musl's allocator maps every such
    /// buffer afresh).
    /// Returns the length of `parts` together.
    pub(super) fn write_parts<const N: usize>(
        &mut self,
        parts: &[&[u8]; N],
    ) -> Result<usize, Errno> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        if self.pending_output() == 0 {
            while done < total {
                let iov = unsent_slices(parts, done);
                match sendmsg::<()>(
                    self.stream.as_raw_fd(),
                    &iov,
                    &[],
                    MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                    None,
                ) {
                    Ok(0) => break,
                    Ok(n) => done += n,
                    Err(Errno::EAGAIN) => break,
                    Err(Errno::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
            if done > 0 {
                self.sent_open = last_byte(parts, done) != Some(b'\n');
            }
        }
        for slice in unsent_slices(parts, done) {
            self.wbuf.extend_from_slice(&slice);
        }
        self.flush().map(|_| total)
    }

    /// Asks for `WRITABLE` only while output is pending (so idle connections cause no wakeups).
    pub(super) fn update_interest(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
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
    pub(super) fn finished(&self) -> bool {
        if self.in_flight {
            return false;
        }
        if self.closing {
            return self.pending_output() == 0 || self.hung_up;
        }
        if self.hung_up {
            // Served to the end of what it sent; a stream has nobody to go to.
            return self.reply != Stream::None || (self.eof && !self.has_line());
        }
        self.eof && self.reply == Stream::None && self.pending_output() == 0 && !self.has_line()
    }

    /// Stops at the end of the line being written (never half a line), appends `line` and
    /// marks the connection closing. A streamed line left open is closed with its `cut`.
    pub(super) fn cut_with(&mut self, line: &str) {
        let keep = self.line_end();
        let open = self.open_after(keep);
        self.wbuf.truncate(keep);
        if open {
            self.wbuf.extend_from_slice(self.closer());
        }
        self.wbuf.extend_from_slice(line.as_bytes());
        self.reply = Stream::None;
        self.closing = true;
    }

    /// What [`Conn::cut_with`] would leave unsent, computed on a copy (the connection is not
    /// changed): the rest of the line being written, its closer if it stays open, and `line`.
    pub(super) fn unsent_if_cut_with(&self, line: &str) -> Vec<u8> {
        let keep = self.line_end();
        let mut out = self.wbuf[self.wpos..keep].to_vec();
        if self.open_after(keep) {
            out.extend_from_slice(self.closer());
        }
        out.extend_from_slice(line.as_bytes());
        out
    }

    /// Where the output ends if it stops at the end of the line being written.
    fn line_end(&self) -> usize {
        if !self.sent_open {
            return self.wpos;
        }
        match self.wbuf[self.wpos..].iter().position(|&b| b == b'\n') {
            Some(i) => self.wpos + i + 1,
            None => self.wbuf.len(),
        }
    }

    /// Whether the output cut at `keep` ends inside a line.
    fn open_after(&self, keep: usize) -> bool {
        if keep > self.wpos {
            self.wbuf[keep - 1] != b'\n'
        } else {
            self.sent_open
        }
    }

    /// What closes a line left open: a streamed reply's `cut`, else a line end.
    fn closer(&self) -> &'static [u8] {
        match &self.reply {
            Stream::Active { cut: Some(close) } => close.as_bytes(),
            _ => b"\n",
        }
    }
}

/// Whether a request line could name a command that changes state (see
/// [`Conn::drop_read_only_lines`]).
fn may_change_state(line: &[u8]) -> bool {
    const NAMES: [&[u8]; 6] = [
        b"start",
        b"stop",
        b"shutdown",
        b"reload",
        b"upgrade",
        b"\\u",
    ];
    NAMES
        .iter()
        .any(|name| line.windows(name.len()).any(|w| w == *name))
}

/// What of `parts` (read as one run of bytes) comes after its first `skip` bytes, part by
/// part (a part sent whole is empty). An array, not a vector: no allocation per write.
fn unsent_slices<'a, const N: usize>(
    parts: &[&'a [u8]; N],
    mut skip: usize,
) -> [io::IoSlice<'a>; N] {
    parts.map(|part| {
        let from = skip.min(part.len());
        skip -= from;
        io::IoSlice::new(&part[from..])
    })
}

/// The byte at position `n - 1` of `parts` read as one run of bytes.
fn last_byte(parts: &[&[u8]], n: usize) -> Option<u8> {
    let mut left = n;
    for part in parts {
        if left <= part.len() {
            return left.checked_sub(1).map(|i| part[i]);
        }
        left -= part.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lines_that_cannot_change_state_are_dropped_unparsed() {
        assert!(!may_change_state(br#"{"cmd":"events","id":7}"#));
        assert!(!may_change_state(br#"{"cmd":"status","pod":"web"}"#));
        for line in [
            &br#"{"cmd":"restart","pod":"web"}"#[..],
            br#"{"cmd":"stop","pod":"web"}"#,
            br#"{"cmd":"start","pod":"web"}"#,
            br#"{"cmd":"shutdown"}"#,
            br#"{"cmd":"reload"}"#,
            br#"{"cmd":"upgrade","check":true}"#,
            br#"{"cmd":"\u0073hutdown"}"#,
        ] {
            assert!(may_change_state(line), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn what_is_unsent_of_parts_starts_after_the_bytes_written_across_part_boundaries() {
        let parts: [&[u8]; 3] = [b"ab", b"", b"cde"];
        let rest = |skip| {
            unsent_slices(&parts, skip)
                .iter()
                .flat_map(|s| s.to_vec())
                .collect::<Vec<u8>>()
        };
        assert_eq!(rest(0), b"abcde");
        assert_eq!(rest(1), b"bcde");
        assert_eq!(rest(2), b"cde");
        assert_eq!(rest(4), b"e");
        assert_eq!(rest(5), b"");
        assert_eq!(last_byte(&parts, 0), None);
        assert_eq!(last_byte(&parts, 2), Some(b'b'));
        assert_eq!(last_byte(&parts, 3), Some(b'c'));
        assert_eq!(last_byte(&parts, 5), Some(b'e'));
    }
}
