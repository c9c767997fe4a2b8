//! The token space of the one `mio::Poll`, and the registration of a descriptor that
//! deregisters itself when dropped.
//!
//! Owns: which component an event's token belongs to ([`Owner::of`]) — fixed tokens for the
//! signal pipe, the control listener and vigil's stdout, the control server's connection range,
//! and above that one range per component, told apart by the token's top byte — and
//! [`Registration`] / [`Watched`], the RAII registrations (as rust-vmm's event-manager lets a
//! subscriber own its descriptors: whoever holds the descriptor holds its registration, and
//! dropping them deregisters).
//!
//! Must not: know what an event means (the owner does), or hand out a registration that can
//! outlive its descriptor: [`Watched`] keeps both and drops the registration first.

use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use crate::config::spec::ProbeKind;
use crate::core::ContainerKey;

/// The signal self-pipe.
pub const SIGNAL: Token = Token(0);
/// The control socket's listener.
pub const LISTENER: Token = Token(1);
/// vigil's own stdout, watched for writability while forwarded output is queued.
pub const STDOUT: Token = Token(2);
/// The inotify watch of the control socket's path (owned by the control server).
pub const SOCKET_WATCH: Token = Token(3);
/// vigil's own stderr, watched for writability (its log lines queued, `stderr_log`).
pub const STDERR: Token = Token(4);
/// The inotify watch of `pod_dir` (`pod_dir`).
pub const POD_DIR_WATCH: Token = Token(5);
/// Control connections: `CONN_TOKEN_BASE..COMPONENT_BASE` (allocated by the control server).
pub const CONN_TOKEN_BASE: usize = 1 << 20;
const COMPONENT_BASE: usize = 1 << 30;

/// The component tag sits in the token's top byte; the rest is the component's own payload.
const TAG_SHIFT: u32 = usize::BITS - 8;
const PAYLOAD_MASK: usize = (1 << TAG_SHIFT) - 1;

/// Who an event is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Signals,
    /// The listener or a connection.
    Control,
    Stdout,
    /// vigil's own stderr (its log).
    Stderr,
    /// A container's output pipe (log capture).
    Capture,
    /// A running container cgroup's `memory.events`; the payload is the container key.
    Oom,
    /// A finished run's cgroup waiting to be removed (the janitor).
    Janitor,
    /// A probe attempt's socket or output pipe; the payload is (container key, probe kind).
    Probes,
    /// The pidfd of a run adopted from an earlier vigil; the payload is the container key.
    Adopted,
    /// The metrics listener or one of its connections.
    Metrics,
    /// The error pipe of a container whose exec is not confirmed yet (`execs`); the payload is
    /// the container key.
    Exec,
    /// An `on_event` hook's delivery: an exec hook's pipes, a webhook's socket.
    EventHooks,
    /// A run's sd_notify socket (`notify = true`, `notify`); the payload is the container key.
    Notify,
    /// The watch of `pod_dir`.
    PodDir,
}

impl Owner {
    const TAGGED: [Owner; 9] = [
        Owner::Capture,
        Owner::Oom,
        Owner::Janitor,
        Owner::Probes,
        Owner::Adopted,
        Owner::Metrics,
        Owner::Exec,
        Owner::EventHooks,
        Owner::Notify,
    ];

    fn tag(self) -> usize {
        match self {
            Owner::Capture => 1,
            Owner::Oom => 2,
            Owner::Janitor => 3,
            Owner::Probes => 4,
            Owner::Adopted => 5,
            Owner::Metrics => 6,
            Owner::Exec => 7,
            Owner::EventHooks => 8,
            Owner::Notify => 9,
            Owner::Signals | Owner::Control | Owner::Stdout | Owner::Stderr | Owner::PodDir => 0,
        }
    }

    /// The owner of `token`; `None` for a token nobody hands out (logged by the router).
    pub fn of(token: Token) -> Option<Owner> {
        match token {
            SIGNAL => Some(Owner::Signals),
            LISTENER => Some(Owner::Control),
            STDOUT => Some(Owner::Stdout),
            STDERR => Some(Owner::Stderr),
            POD_DIR_WATCH => Some(Owner::PodDir),
            SOCKET_WATCH => Some(Owner::Control),
            Token(t) if (CONN_TOKEN_BASE..COMPONENT_BASE).contains(&t) => Some(Owner::Control),
            Token(t) => {
                let tag = t >> TAG_SHIFT;
                Owner::TAGGED
                    .into_iter()
                    .find(|o| tag != 0 && o.tag() == tag)
            }
        }
    }

    /// The token of `payload` in this owner's range.
    fn token(self, payload: usize) -> Token {
        Token((self.tag() << TAG_SHIFT) | (payload & PAYLOAD_MASK))
    }
}

/// Fresh tokens for one component whose descriptors come and go (a counter; a token is reused
/// only after 2^56 allocations on a 64-bit system).
#[derive(Debug)]
pub struct TokenSpace {
    owner: Owner,
    next: usize,
}

impl TokenSpace {
    pub fn new(owner: Owner) -> TokenSpace {
        TokenSpace { owner, next: 0 }
    }

    pub fn next(&mut self) -> Token {
        let t = self.owner.token(self.next);
        self.next = self.next.wrapping_add(1) & PAYLOAD_MASK;
        t
    }
}

/// The token of a container cgroup's `memory.events` (one per container: the previous run's
/// is deregistered when its main process is reaped).
pub fn oom_token(key: ContainerKey) -> Token {
    Owner::Oom.token(key.0 as usize)
}

/// The container whose `memory.events` `token` watches.
pub fn oom_key(token: Token) -> ContainerKey {
    ContainerKey((token.0 & PAYLOAD_MASK) as u32)
}

/// The token of an adopted run's pidfd (one per container at most).
pub fn adopted_token(key: ContainerKey) -> Token {
    Owner::Adopted.token(key.0 as usize)
}

/// The container whose adopted run's pidfd `token` watches.
pub fn adopted_key(token: Token) -> ContainerKey {
    ContainerKey((token.0 & PAYLOAD_MASK) as u32)
}

/// The token of a container's exec report pipe (one per container at most).
pub fn exec_token(key: ContainerKey) -> Token {
    Owner::Exec.token(key.0 as usize)
}

/// The container whose exec report pipe `token` watches.
pub fn exec_key(token: Token) -> ContainerKey {
    ContainerKey((token.0 & PAYLOAD_MASK) as u32)
}

/// The token of a container's sd_notify socket (one per container at most).
pub fn notify_token(key: ContainerKey) -> Token {
    Owner::Notify.token(key.0 as usize)
}

/// The container whose sd_notify socket `token` watches.
pub fn notify_key(token: Token) -> ContainerKey {
    ContainerKey((token.0 & PAYLOAD_MASK) as u32)
}

/// Bits of an attempt's sequence number carried in its probe token (above the 32-bit
/// container key and the 2-bit kind, within the 56-bit payload).
const PROBE_SEQ_BITS: u32 = 22;
/// Where they start: above the key (32 bits) and the kind (2 bits).
const PROBE_SEQ_SHIFT: u32 = 34;

/// The token of probe attempt `seq` of (container, kind): at most one is in flight per pair,
/// and consecutive attempts get different tokens, so an event still queued for an earlier
/// attempt's socket (a socket closed without `EPOLL_CTL_DEL`: its registration lives on while
/// a child cloned in the meantime still holds the descriptor, epoll(7) "Q6") never reaches
/// the next one. The sequence number wraps after 2^22 attempts of one pair.
pub fn probe_token(key: ContainerKey, kind: ProbeKind, seq: u64) -> Token {
    let seq = probe_seq_tag(seq) as usize;
    Owner::Probes.token((seq << PROBE_SEQ_SHIFT) | ((key.0 as usize) << 2) | kind_index(kind))
}

/// The (container, kind) of a probe token, and the low bits of its attempt's sequence number
/// (compare with [`probe_seq_tag`]).
pub fn probe_of(token: Token) -> Option<(ContainerKey, ProbeKind, u64)> {
    let payload = token.0 & PAYLOAD_MASK;
    let kind = ProbeKind::ALL
        .into_iter()
        .chain([ProbeKind::Hook])
        .find(|k| kind_index(*k) == payload & 3)?;
    Some((
        ContainerKey((payload >> 2) as u32),
        kind,
        (payload >> PROBE_SEQ_SHIFT) as u64,
    ))
}

/// The part of `seq` a probe token carries.
pub fn probe_seq_tag(seq: u64) -> u64 {
    seq & ((1 << PROBE_SEQ_BITS) - 1)
}

fn kind_index(kind: ProbeKind) -> usize {
    match kind {
        ProbeKind::Startup => 0,
        ProbeKind::Liveness => 1,
        ProbeKind::Readiness => 2,
        ProbeKind::Hook => 3,
    }
}

/// A descriptor registered with the poll; dropping it deregisters the descriptor. Holds the
/// raw fd number only: keep it beside the descriptor and drop it first (see [`Watched`]).
#[derive(Debug)]
pub struct Registration {
    registry: Rc<Registry>,
    fd: RawFd,
}

impl Registration {
    pub fn new(
        registry: &Rc<Registry>,
        fd: BorrowedFd<'_>,
        token: Token,
        interest: Interest,
    ) -> io::Result<Registration> {
        let raw = fd.as_raw_fd();
        registry.register(&mut SourceFd(&raw), token, interest)?;
        Ok(Registration {
            registry: Rc::clone(registry),
            fd: raw,
        })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Nothing to do on failure: the descriptor is about to be closed, which removes it from
        // the epoll set anyway (epoll(7)).
        let _ = self.registry.deregister(&mut SourceFd(&self.fd));
    }
}

/// A value holding a descriptor, together with that descriptor's registration (if registering
/// worked). Field order matters: the registration is dropped before the value closes the fd.
#[derive(Debug)]
pub struct Watched<T> {
    registration: Option<Registration>,
    inner: T,
}

impl<T> Watched<T> {
    /// Registers the descriptor `fd` picks out of `inner`.
    pub fn new(
        registry: &Rc<Registry>,
        inner: T,
        fd: impl FnOnce(&T) -> BorrowedFd<'_>,
        token: Token,
        interest: Interest,
    ) -> Result<Watched<T>, (T, io::Error)> {
        let registration = Registration::new(registry, fd(&inner), token, interest);
        match registration {
            Ok(r) => Ok(Watched {
                registration: Some(r),
                inner,
            }),
            Err(e) => Err((inner, e)),
        }
    }

    /// `inner` without a registration (nothing to watch, or registering failed).
    pub fn unwatched(inner: T) -> Watched<T> {
        Watched {
            registration: None,
            inner,
        }
    }

    /// Deregisters and gives the value back.
    pub fn into_inner(self) -> T {
        let Watched {
            registration,
            inner,
        } = self;
        drop(registration);
        inner
    }
}

impl<T> Deref for Watched<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> DerefMut for Watched<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_component_token_routes_back_to_its_owner() {
        let mut space = TokenSpace::new(Owner::Capture);
        for _ in 0..3 {
            assert_eq!(Owner::of(space.next()), Some(Owner::Capture));
        }
        let key = ContainerKey(u32::MAX);
        assert_eq!(Owner::of(oom_token(key)), Some(Owner::Oom));
        assert_eq!(oom_key(oom_token(key)), key);
        assert_eq!(Owner::of(adopted_token(key)), Some(Owner::Adopted));
        assert_eq!(adopted_key(adopted_token(key)), key);
        assert_eq!(Owner::of(exec_token(key)), Some(Owner::Exec));
        assert_eq!(exec_key(exec_token(key)), key);
        for kind in ProbeKind::ALL.into_iter().chain([ProbeKind::Hook]) {
            for seq in [0, 1, (1 << 22) - 1, 1 << 22, u64::MAX] {
                let t = probe_token(key, kind, seq);
                assert_eq!(Owner::of(t), Some(Owner::Probes));
                assert_eq!(probe_of(t), Some((key, kind, probe_seq_tag(seq))));
            }
            assert_ne!(probe_token(key, kind, 7), probe_token(key, kind, 8));
        }
        assert_eq!(
            Owner::of(TokenSpace::new(Owner::Janitor).next()),
            Some(Owner::Janitor)
        );
        assert_eq!(
            Owner::of(TokenSpace::new(Owner::Metrics).next()),
            Some(Owner::Metrics)
        );
        assert_eq!(Owner::of(Token(CONN_TOKEN_BASE + 5)), Some(Owner::Control));
        assert_eq!(Owner::of(Token(COMPONENT_BASE)), None);
    }

    #[test]
    fn dropping_a_registration_deregisters_its_descriptor() {
        let poll = mio::Poll::new().unwrap();
        let registry = Rc::new(poll.registry().try_clone().unwrap());
        let (r, _w) = crate::process::pipe_nonblocking().unwrap();
        let watched = Watched::new(
            &registry,
            r,
            std::os::fd::AsFd::as_fd,
            Token(7),
            Interest::READABLE,
        )
        .unwrap();
        let r = watched.into_inner();
        // Registered again under the same fd: only possible once the first one is gone.
        let again = Registration::new(
            &registry,
            std::os::fd::AsFd::as_fd(&r),
            Token(8),
            Interest::READABLE,
        );
        assert!(again.is_ok());
    }
}
