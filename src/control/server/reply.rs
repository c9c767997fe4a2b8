//! Replies and streamed replies: one whole line per request, or a stream the runtime feeds
//! chunk by chunk while the connection has room ([`Server::hungry_streams`]), within the
//! turn's output budget.
//!
//! Must not: buffer a stream beyond [`super::STREAM_LOW`] of unread output, or cut a client
//! off inside a line (an error ends a stream after the line being written).

use mio::Registry;

use super::conn::Stream;
use super::{ConnId, STREAM_LOW, Server};

impl Server {
    /// Queues `line` (one `\n`-terminated reply) for `conn` and writes what the socket takes
    /// now; this answers the request handed out. Returns false if the connection is gone.
    pub fn send(&mut self, registry: &Registry, conn: ConnId, line: &str) -> bool {
        self.send_parts(registry, conn, &[line.as_bytes()])
    }

    /// [`send`](Server::send) of a line given in pieces (e.g. a reply's head, a cached
    /// result and the closing brace), written without joining them first.
    pub fn send_parts<const N: usize>(
        &mut self,
        registry: &Registry,
        conn: ConnId,
        parts: &[&[u8]; N],
    ) -> bool {
        let Some(c) = self.conn_mut(conn) else {
            return false;
        };
        c.in_flight = false;
        self.write_parts(registry, conn, parts)
    }

    /// Answers the request handed out on `conn` with a stream: no further request is taken
    /// from it until [`end_stream`](Server::end_stream). `cut` is what closes a partly pushed
    /// line if the client has to be cut off (`None` when every push is whole lines).
    pub fn start_stream(&mut self, conn: ConnId, cut: Option<&'static str>) {
        if let Some(c) = self.conn_mut(conn) {
            c.in_flight = false;
            if c.reply == Stream::None {
                c.reply = Stream::Active { cut };
                self.streams += 1;
            }
        }
    }

    /// Pushes part of a stream (need not end a line) and writes what the socket takes now.
    pub fn push(&mut self, registry: &Registry, conn: ConnId, bytes: &[u8]) -> bool {
        self.write(registry, conn, bytes)
    }

    /// The stream on `conn` is complete; requests are taken again.
    pub fn end_stream(&mut self, registry: &Registry, conn: ConnId) {
        if let Some(c) = self.conn_mut(conn)
            && c.reply != Stream::None
        {
            c.reply = Stream::None;
            self.streams -= 1;
            self.settle(registry, conn);
        }
    }

    /// Ends whatever `conn` is doing with the error `line` (after the line being written, never
    /// inside it) and closes it once that is written.
    pub fn end_with_error(&mut self, registry: &Registry, conn: ConnId, line: &str) {
        let Some(c) = self.conn_mut(conn) else {
            return;
        };
        let had_stream = c.reply != Stream::None;
        c.in_flight = false;
        c.cut_with(line);
        if had_stream {
            self.streams -= 1;
        }
        if let Some(c) = self.conn_mut(conn)
            && let Err(e) = c.flush()
        {
            log::debug!("control: write to pid {} failed: {e}", c.peer.pid);
            self.close(registry, conn);
            return;
        }
        self.settle(registry, conn);
    }

    /// Streams that have room for another chunk, rotating so that each gets its turn when the
    /// output budget is short. Empty once the turn's output budget is spent.
    pub fn hungry_streams(&mut self) -> Vec<ConnId> {
        if self.streams == 0 || self.budget.output_left() == 0 {
            return Vec::new();
        }
        // Over the client memory budget only admins' streams are fed (as only admins' requests
        // are taken); the others resume once memory is freed.
        let memory_full = self.memory.full();
        let n = self.conns.len();
        let start = self.stream_cursor % n.max(1);
        self.stream_cursor = self.stream_cursor.wrapping_add(1);
        (0..n)
            .map(|i| (start + i) % n)
            .filter_map(|i| self.conns[i].as_ref())
            .filter(|c| {
                matches!(c.reply, Stream::Active { .. })
                    && (c.admin || !memory_full)
                    && !c.closing
                    && !c.hung_up
                    && c.pending_output() < STREAM_LOW
            })
            .map(|c| c.id)
            .collect()
    }

    /// What is left of this turn's output budget.
    pub fn output_budget(&self) -> usize {
        self.budget.output_left()
    }

    pub(super) fn write(&mut self, registry: &Registry, conn: ConnId, bytes: &[u8]) -> bool {
        self.write_parts(registry, conn, &[bytes])
    }

    /// `parts` written in order as one run of bytes ([`Conn::write_parts`]).
    fn write_parts<const N: usize>(
        &mut self,
        registry: &Registry,
        conn: ConnId,
        parts: &[&[u8]; N],
    ) -> bool {
        let Some(c) = self.conn_mut(conn) else {
            return false;
        };
        if c.hung_up {
            return self.settle(registry, conn);
        }
        let total = match c.write_parts(parts) {
            Ok(total) => total,
            Err(e) => {
                log::debug!("control: write to pid {} failed: {e}", c.peer.pid);
                self.close(registry, conn);
                return false;
            }
        };
        self.budget.spend(total);
        self.settle(registry, conn)
    }
}
