//! Fairness across clients within one loop turn: the turn's budgets, the round-robin ready
//! queue of connections that may have a request, handing requests out one at a time, and the
//! bookkeeping after any change to a connection (`settle`: close when done, write interest,
//! re-queue, buffer accounting; `close`).
//!
//! Must not: read more than one line of a connection ahead, or hand out a request past the
//! turn's budget (the rest waits for the next turn, see [`Server::has_backlog`]).

use std::time::Instant;

use mio::{Registry, Token};

use super::conn::Stream;
use super::{ConnId, Incoming, Server};

impl Server {
    /// The next request to answer, round-robin over connections, within the turn's budget.
    /// Answer it (exactly one [`send`](Server::send) or [`start_stream`](Server::start_stream))
    /// before asking for the next.
    pub fn next_request(&mut self, registry: &Registry, now: Instant) -> Option<Incoming> {
        while self.budget.can_take() {
            let index = match self.ready_admin.pop_front() {
                Some(i) => i,
                None => self.ready.pop_front()?,
            };
            let memory_full = self.memory.full();
            let Some(conn) = self.conns.get_mut(index).and_then(Option::as_mut) else {
                continue;
            };
            conn.queued = false;
            if !conn.can_take() {
                // Re-queued when it can (output drained, stream ended).
                continue;
            }
            let id = conn.id;
            // Client memory is checked before every request a non-admin gets, not only before
            // reading: one read holds hundreds of requests, each a reply that may wait in this
            // connection's buffer. So all clients together stay within the budget plus one
            // reply. A peer that is gone is let through: its replies are discarded, and
            // working off what it sent is what closes it and frees its buffers.
            if memory_full && !conn.admin && !conn.hung_up {
                self.starved.push(index);
                continue;
            }
            if !conn.has_line() {
                if !conn.more_input || conn.eof {
                    continue;
                }
                if memory_full && !conn.admin && !conn.hung_up {
                    self.starved.push(index);
                    continue;
                }
                if let Err(e) = conn.read_line() {
                    log::debug!("control: read from pid {} failed: {e}", conn.peer.pid);
                    self.close(registry, id);
                    continue;
                }
            }
            if conn.hung_up {
                let dropped = conn.drop_read_only_lines(self.skips);
                self.skips -= dropped;
                if !conn.has_line() || self.skips == 0 {
                    self.settle(registry, id);
                    if self.skips == 0 {
                        return None;
                    }
                    continue;
                }
            }
            let taken = conn.take_line();
            if conn.hung_up
                && taken
                    .as_ref()
                    .is_some_and(|r| !r.as_ref().is_ok_and(|r| r.cmd.is_mutating()))
            {
                // The peer is gone: a request that only reads (or a malformed one) would be
                // answered to nobody. Dropping it costs a parse; a turn drops at most
                // TURN_SKIPS, so a dead client's backlog is worked off in bounded slices.
                self.skips = self.skips.saturating_sub(1);
                self.settle(registry, id);
                if self.skips == 0 {
                    return None;
                }
                continue;
            }
            if let Some(request) = taken {
                conn.in_flight = true;
                conn.last_active = now;
                self.budget.take_request();
                let inc = Incoming {
                    conn: id,
                    peer: conn.peer,
                    admin: conn.admin,
                    request,
                };
                self.account(index);
                return Some(inc);
            }
            self.settle(registry, id);
        }
        None
    }

    /// Whether work is left that no readiness event will announce: requests beyond the turn's
    /// budget, connections not accepted yet, or memory freed for waiting connections. The
    /// runtime then polls with a zero timeout.
    pub fn has_backlog(&self) -> bool {
        self.accept_pending
            || !self.ready.is_empty()
            || !self.ready_admin.is_empty()
            || (!self.starved.is_empty() && !self.memory.full())
    }

    pub(super) fn enqueue(&mut self, index: usize) {
        if let Some(c) = self.conns.get_mut(index).and_then(Option::as_mut)
            && !c.queued
        {
            c.queued = true;
            if c.admin {
                self.ready_admin.push_back(index);
            } else {
                self.ready.push_back(index);
            }
        }
    }

    pub(super) fn account(&mut self, index: usize) {
        if let Some(c) = self.conns.get_mut(index).and_then(Option::as_mut) {
            let now = c.measure();
            self.memory.resize(c.footprint, now);
            c.footprint = now;
        }
    }

    /// Measures every open connection again (see [`Server::begin_turn`]).
    pub(super) fn reaccount_all(&mut self) {
        for index in 0..self.conns.len() {
            self.account(index);
        }
    }

    /// After any change: close the connection if it is done, fix write interest, queue it if
    /// it has requests to give, account its buffers. Returns whether it is still open.
    pub(super) fn settle(&mut self, registry: &Registry, id: ConnId) -> bool {
        let token = Token(self.conn_token_base + id.index);
        let Some(c) = self.conn_mut(id) else {
            return false;
        };
        if c.finished() {
            self.close(registry, id);
            return false;
        }
        if let Err(e) = c.update_interest(registry, token) {
            log::warn!("control: cannot update poll interest: {e}");
            self.close(registry, id);
            return false;
        }
        let queue = c.can_take() && c.has_work();
        if queue {
            self.enqueue(id.index);
        }
        self.account(id.index);
        true
    }

    pub(super) fn close(&mut self, registry: &Registry, id: ConnId) {
        let Some(slot) = self.conns.get_mut(id.index) else {
            return;
        };
        if slot.as_ref().is_none_or(|c| c.id != id) {
            return;
        }
        if let Some(mut c) = slot.take() {
            // Deregistering can only fail if it was never registered; closing the fd below
            // removes it from the epoll set anyway (epoll(7)).
            let _ = registry.deregister(&mut c.stream);
            self.freed.push(id.index);
            self.open -= 1;
            self.memory.resize(c.footprint, 0);
            if c.reply != Stream::None {
                self.streams -= 1;
            }
            self.per_uid.release(c.peer.uid);
            self.closed.push(id);
        }
    }
}
