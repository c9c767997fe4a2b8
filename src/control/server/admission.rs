//! Who gets a connection and who loses one: accepting within the turn's budget, peer
//! credentials (`SO_PEERCRED`, `SO_PEERGROUPS`) and the admin judgement, the per-uid and total
//! caps, evicting the newest non-admin for an admin, the `EMFILE` reserve descriptor, and the
//! sweep that closes idle and stalled connections. Refusals are counted and logged once per
//! sweep, so an attack does not flood the log.
//!
//! Must not: block on a refused client (one best-effort line, then close), or let a
//! non-admin's connection push out an admin's.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use mio::net::UnixStream;
use mio::{Interest, Registry, Token};
use nix::sys::socket::{MsgFlags, getsockopt, send, sockopt};

use super::conn::{Conn, Stream};
use super::{ADMIN_EXTRA, Access, CLOSE_GRACE, ConnId, PeerCred, Server, TURN_ACCEPTS};
use crate::control::limits::out_of_descriptors;
use crate::control::protocol::{self, RequestId};
use crate::control::wire::ErrorKind;

/// `SO_PEERGROUPS` (socket(7), Linux ≥ 4.13): the peer's supplementary groups at `connect`.
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_PEERGROUPS: libc::c_int = 0x3d;
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_PEERGROUPS: libc::c_int = 59;

/// Counts of refusals between two log lines (so an attack does not flood the log).
#[derive(Debug, Default)]
pub(super) struct Refusals {
    per_uid: usize,
    full: usize,
    emfile: usize,
    evicted: usize,
    idle: usize,
    stalled: usize,
}

impl Server {
    /// Closes idle connections (no request for the idle timeout, nothing unread) and stalled
    /// ones (output unread and nothing taken for the idle timeout: cut with an error line).
    pub(super) fn sweep(&mut self, registry: &Registry, now: Instant) {
        let idle = self.limits.idle_timeout;
        let mut idle_close = Vec::new();
        let mut stalled = Vec::new();
        let mut expired = Vec::new();
        for c in self.conns.iter().flatten() {
            let quiet = now.saturating_duration_since(c.last_active);
            if c.closing {
                if quiet >= CLOSE_GRACE {
                    expired.push(c.id);
                }
            } else if c.in_flight {
                // Answered in this turn; nothing to judge.
            } else if c.pending_output() > 0 {
                if quiet >= idle {
                    stalled.push(c.id);
                }
            } else if c.reply == Stream::None && !c.has_line() && quiet >= idle {
                idle_close.push(c.id);
            }
        }
        for id in expired {
            self.close(registry, id);
        }
        let secs = idle.as_secs_f64();
        for id in stalled {
            self.refusals.stalled += 1;
            let line = protocol::reply_err(
                &RequestId::null(),
                ErrorKind::Busy,
                &format!("client read nothing for {secs}s with output pending; disconnecting"),
            );
            // The rest of the line being written and the error stay queued for
            // CLOSE_GRACE, in case the client reads again; then it is closed.
            if let Some(c) = self.conn_mut(id) {
                c.last_active = now;
            }
            self.end_with_error(registry, id, &line);
        }
        for id in idle_close {
            self.refusals.idle += 1;
            let line = protocol::reply_err(
                &RequestId::null(),
                ErrorKind::Busy,
                &format!("no request for {secs}s (client_idle_timeout_seconds); closing"),
            );
            if let Some(c) = self.conn_mut(id) {
                let _ = send(
                    c.stream.as_raw_fd(),
                    line.as_bytes(),
                    MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
                );
            }
            self.close(registry, id);
        }
        let r = std::mem::take(&mut self.refusals);
        if r.per_uid + r.full + r.emfile + r.evicted + r.idle + r.stalled > 0 {
            log::warn!(
                "control: in the last second refused {} connection(s) over the per-uid cap, {} \
                 over the connection cap, {} at EMFILE; evicted {} for admins; closed {} idle \
                 and {} not reading ({} open)",
                r.per_uid,
                r.full,
                r.emfile,
                r.evicted,
                r.idle,
                r.stalled,
                self.open
            );
        }
    }

    pub(super) fn accept_some(&mut self, registry: &Registry, now: Instant) {
        for _ in 0..TURN_ACCEPTS {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    self.accept_retry.succeeded();
                    self.admit(registry, stream, now, false);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_pending = false;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) if out_of_descriptors(&e) => {
                    if !self.accept_with_reserve(registry, now) {
                        // No reserve to spend: try again shortly rather than wait for an
                        // unrelated wake-up (the listener is edge-triggered).
                        self.accept_pending = false;
                        if self.accept_retry.failed(now) {
                            log::warn!(
                                "control: accept on {} failed: {e}; retrying every {:?}",
                                self.path.display(),
                                crate::control::limits::AcceptRetry::AFTER
                            );
                        }
                        return;
                    }
                }
                Err(e) => {
                    if self.accept_retry.failed(now) {
                        log::warn!("control: accept on {} failed: {e}", self.path.display());
                    }
                    self.accept_pending = false;
                    return;
                }
            }
        }
        // Budget spent: the rest next turn.
        self.accept_pending = true;
    }

    /// Out of descriptors: frees the reserve to accept one connection, keeps it if it is an
    /// admin's and a non-admin can be evicted for it, else refuses it with a line; then takes
    /// the reserve back. Returns false if there was no reserve.
    pub(super) fn accept_with_reserve(&mut self, registry: &Registry, now: Instant) -> bool {
        let listener = &self.listener;
        let Some(accepted) = self.reserve.spend(|| listener.accept()) else {
            return false;
        };
        match accepted {
            Ok((stream, _)) => self.admit(registry, stream, now, true),
            Err(e) => log::debug!("control: accept with the reserve descriptor failed: {e}"),
        }
        true
    }

    /// Decides on a fresh connection: per-uid cap, connection cap, admin eviction.
    /// `out_of_fds`: accepted on the reserve descriptor, kept only by evicting someone.
    pub(super) fn admit(
        &mut self,
        registry: &Registry,
        stream: UnixStream,
        now: Instant,
        out_of_fds: bool,
    ) {
        let (peer, groups) = match Self::credentials(&stream) {
            Ok(c) => c,
            Err(e) => {
                log::warn!("control: SO_PEERCRED failed: {e}; dropping connection");
                return;
            }
        };
        let admin = self.judge(&peer, &groups);
        if !admin {
            let mine = self.per_uid.of(peer.uid);
            if mine >= self.limits.max_per_uid {
                self.refusals.per_uid += 1;
                refuse(
                    &stream,
                    &format!(
                        "uid {} already has {mine} connections open (max_connections_per_uid = {})",
                        peer.uid, self.limits.max_per_uid
                    ),
                );
                return;
            }
            if out_of_fds || self.open >= self.limits.max_connections {
                if out_of_fds {
                    self.refusals.emfile += 1;
                } else {
                    self.refusals.full += 1;
                }
                refuse(
                    &stream,
                    &format!(
                        "too many connections ({} open{})",
                        self.open,
                        if out_of_fds {
                            ", vigil is out of file descriptors"
                        } else {
                            ""
                        }
                    ),
                );
                return;
            }
        } else if out_of_fds || self.open >= self.limits.max_connections {
            match self.newest_non_admin() {
                Some(victim) => {
                    self.refusals.evicted += 1;
                    if let Some(c) = self.conn_mut(victim) {
                        refuse(
                            &c.stream,
                            "closed to make room for an administrator's connection",
                        );
                    }
                    self.close(registry, victim);
                }
                None if out_of_fds || self.open >= self.limits.max_connections + ADMIN_EXTRA => {
                    self.refusals.full += 1;
                    refuse(
                        &stream,
                        &format!("too many connections ({} open)", self.open),
                    );
                    return;
                }
                None => {}
            }
        }
        self.install(registry, stream, peer, groups, admin, now);
    }

    /// Puts an admitted connection into the table and registers it (`READABLE`); returns its
    /// id (`None`: the poller refused it, and it is dropped).
    pub(super) fn install(
        &mut self,
        registry: &Registry,
        mut stream: UnixStream,
        peer: PeerCred,
        groups: Vec<u32>,
        admin: bool,
        now: Instant,
    ) -> Option<ConnId> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.conns.push(None);
                self.generations.push(0);
                self.conns.len() - 1
            }
        };
        let generation = self.generations[index];
        self.generations[index] += 1;
        let token = Token(self.conn_token_base + index);
        if let Err(e) = registry.register(&mut stream, token, Interest::READABLE) {
            log::warn!("control: cannot register a connection: {e}");
            self.free.push(index);
            return None;
        }
        log::debug!(
            "control: connection from pid {} uid {} gid {}{}",
            peer.pid,
            peer.uid,
            peer.gid,
            if admin { " (admin)" } else { "" }
        );
        self.next_seq += 1;
        let id = ConnId { index, generation };
        let conn = Conn {
            id,
            seq: self.next_seq,
            stream,
            peer,
            groups,
            admin,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            wpos: 0,
            sent_open: false,
            writable_interest: false,
            // Registering an fd that is already readable reports it (epoll_ctl(2)), so
            // nothing is missed by waiting for the first event.
            more_input: false,
            eof: false,
            hung_up: false,
            closing: false,
            in_flight: false,
            reply: Stream::None,
            queued: false,
            last_active: now,
            footprint: 0,
        };
        self.conns[index] = Some(conn);
        self.open += 1;
        self.per_uid.add(peer.uid);
        self.account(index);
        Some(id)
    }

    /// The peer's credentials and groups at `connect` (`SO_PEERCRED`, `SO_PEERGROUPS`).
    pub(super) fn credentials(stream: &UnixStream) -> nix::Result<(PeerCred, Vec<u32>)> {
        let c = getsockopt(stream, sockopt::PeerCredentials)?;
        let peer = PeerCred {
            pid: c.pid(),
            uid: c.uid(),
            gid: c.gid(),
        };
        let groups = peer_groups(stream).unwrap_or_else(|e| {
            log::debug!("control: SO_PEERGROUPS failed for pid {}: {e}", peer.pid);
            Vec::new()
        });
        Ok((peer, groups))
    }

    pub(super) fn judge(&self, peer: &PeerCred, groups: &[u32]) -> bool {
        #[cfg(test)]
        if self.strangers {
            return false;
        }
        is_admin(&self.access, self.euid, peer, groups)
    }

    pub(super) fn newest_non_admin(&self) -> Option<ConnId> {
        self.conns
            .iter()
            .flatten()
            .filter(|c| !c.admin)
            .max_by_key(|c| c.seq)
            .map(|c| c.id)
    }
}

pub(super) fn is_admin(access: &Access, euid: u32, peer: &PeerCred, groups: &[u32]) -> bool {
    peer.uid == 0
        || peer.uid == euid
        || access.admin_uids.contains(&peer.uid)
        || access.admin_gids.contains(&peer.gid)
        || groups.iter().any(|g| access.admin_gids.contains(g))
}

/// Best effort: one `busy` error line on a fresh socket (its buffer takes one short line).
pub(super) fn refuse(stream: &UnixStream, message: &str) {
    let line = protocol::reply_err(&RequestId::null(), ErrorKind::Busy, message);
    let _ = send(
        stream.as_raw_fd(),
        line.as_bytes(),
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
    );
}

/// The peer's supplementary groups at `connect` time, from `SO_PEERGROUPS` (socket(7),
/// Linux ≥ 4.13; the kernel answers `ERANGE` with the needed size when the buffer is short).
pub(super) fn peer_groups(stream: &UnixStream) -> io::Result<Vec<u32>> {
    let fd = stream.as_raw_fd();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` is a live buffer of `len` bytes; the kernel writes at most `len`
        // bytes into it and stores the size it needs (or wrote) in `len`.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65536 {
            groups.resize(n, 0);
            continue;
        }
        return Err(err);
    }
}
