//! The connection-limits core shared by vigil's two listeners, the control socket
//! (`control::server`) and the metrics endpoint (`runtime::shell::metrics`): what either of
//! them may hold of vigil's descriptors and memory, and the pieces of bookkeeping each needs to
//! keep one peer from denying the others.
//!
//! - [`fd_shares`]: descriptors are what is left, not a fixed share. vigil first reserves what
//!   its containers, probes, hooks and spawns need ([`FdNeeds`], counted from the config:
//!   containers × [`FDS_PER_CONTAINER`], probes and hooks × [`FDS_PER_PROBE`], plus
//!   [`FDS_BASE`]); what is left of `RLIMIT_NOFILE` is split between the metrics listener and
//!   the control socket, and both shares shrink as the config grows (recomputed on reload).
//! - [`TurnBudget`]: what one loop turn may take of a listener's clients (requests, reply
//!   bytes); the rest waits for the next turn.
//! - [`PeerCounts`]: connections per peer (a uid on the socket, a source address for metrics)
//!   against a cap.
//! - [`MemoryBudget`]: bytes of client buffers and replies, checked before any request is
//!   taken. The clients' memory is one budget in two slices, [`CONTROL_MEMORY`] for the
//!   control socket and [`METRICS_MEMORY`] for the metrics listener, each overshot by at most
//!   the replies of the requests taken while it was not full: 32 MiB in all.
//! - [`Quiet`]: how long a connection may make no progress (the idle deadline, and the shorter
//!   head deadline once a request has begun and is not complete).
//! - [`AcceptRetry`] and [`out_of_descriptors`]: `EMFILE` and its kin at `accept(2)` are retried
//!   on a deadline (never a busy loop), logged once per spell; [`Reserve`]: the descriptor kept
//!   to accept-and-refuse when none is left.
//!
//! Owns nothing but the reserve descriptor; pure bookkeeping otherwise. Must not: read the
//! clock (callers pass `now`), decide who is an admin, or touch a connection's socket.

use std::collections::HashMap;
use std::hash::Hash;
use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use crate::config::spec::Config;

/// Descriptors vigil holds whatever it runs: standard streams, the poller, signal and inotify
/// descriptors, the listeners, the journal and log files, the DNS helper's pipes, the state
/// file being written, the reserve descriptor, and margin for a reload reading files.
pub const FDS_BASE: usize = 64;
/// Descriptors one container holds while it runs, and more while it is spawned: the two output
/// pipes (or the output holder's), its pidfd, the cgroup directory with its `cgroup.procs` and
/// `cgroup.events` (measured: 5 per running container in cgroups at 100 containers), and the
/// exec-report pipe of a spawn under way.
pub const FDS_PER_CONTAINER: usize = 7;
/// Descriptors one probe or hook attempt in flight holds: for `exec`, its cgroup directory,
/// `cgroup.procs`, `cgroup.events`, the output pipe and the pidfd; for the network kinds one
/// socket (and a TLS or DNS descriptor). Every probe and hook may be in flight at once.
pub const FDS_PER_PROBE: usize = 5;
/// Control connections always allowed, however little is left (root and the admins get in
/// beyond it by eviction): a config that needs every descriptor still has a way in.
pub const MIN_CONTROL: usize = 16;
/// Metrics connections always allowed when the listener is on.
pub const MIN_METRICS: usize = 4;
/// Metrics connections at most, answered or told `503` (a scraper needs one; more than this is
/// a crowd, not a Prometheus).
pub const MAX_METRICS: usize = 80;

/// The control socket's slice of the clients' memory: buffers and replies of every connection
/// (`control::server`, `Limits::memory_budget`); overshot by one reply at most.
pub const CONTROL_MEMORY: usize = 20 * 1024 * 1024;
/// The metrics listener's slice: request buffers and the replies held for scrapers
/// (`runtime::shell::metrics`, an exposition shared by several scrapers counted once);
/// overshot by at most one exposition per format, those of the requests taken while it was
/// not full.
pub const METRICS_MEMORY: usize = 4 * 1024 * 1024;

/// What vigil's own work needs descriptors for, counted from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FdNeeds {
    /// Containers, init containers included.
    pub containers: usize,
    /// Probes and hooks (each may have one attempt in flight).
    pub probes: usize,
}

impl FdNeeds {
    /// Every container, probe and hook of `config`.
    pub fn of(config: &Config) -> FdNeeds {
        let mut needs = FdNeeds::default();
        for pod in &config.pods {
            for c in pod.init_containers.iter().chain(&pod.containers) {
                needs.containers += 1;
                needs.probes += [
                    c.startup_probe.is_some(),
                    c.liveness_probe.is_some(),
                    c.readiness_probe.is_some(),
                    c.lifecycle.post_start.is_some(),
                    c.lifecycle.pre_stop.is_some(),
                ]
                .iter()
                .filter(|&&b| b)
                .count();
            }
        }
        needs
    }

    /// Descriptors reserved for vigil's own work.
    pub fn reserve(&self) -> usize {
        FDS_BASE
            .saturating_add(self.containers.saturating_mul(FDS_PER_CONTAINER))
            .saturating_add(self.probes.saturating_mul(FDS_PER_PROBE))
    }
}

/// How many connections each listener may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdShares {
    /// Descriptors reserved for containers, probes, hooks and spawns.
    pub reserved: usize,
    /// Control connections at once (admins may go beyond it by evicting non-admins).
    pub control: usize,
    /// Metrics connections at once, those being told `503` included (0: no listener).
    pub metrics: usize,
}

/// The clients' shares of `nofile` descriptors: what is left after `needs`' reserve, the
/// metrics listener's part first (a quarter of what is left, at most [`MAX_METRICS`]), the
/// control socket the rest, capped at `control_percent` of `nofile`
/// (`client_fd_percent`). Neither falls below its minimum ([`MIN_CONTROL`], [`MIN_METRICS`]).
pub fn fd_shares(nofile: u64, needs: FdNeeds, control_percent: u32, metrics: bool) -> FdShares {
    let nofile = usize::try_from(nofile).unwrap_or(usize::MAX);
    let reserved = needs.reserve();
    let left = nofile.saturating_sub(reserved);
    let metrics = if metrics {
        (left / 4).clamp(MIN_METRICS, MAX_METRICS)
    } else {
        0
    };
    let cap = nofile.saturating_mul(control_percent as usize) / 100;
    let control = left.saturating_sub(metrics).min(cap).max(MIN_CONTROL);
    FdShares {
        reserved,
        control,
        metrics,
    }
}

/// One loop turn's allowance for a listener: requests taken and reply bytes written across all
/// its connections. Checked before each request or write, so one reply may overshoot the output
/// once; renewed at the start of every turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnBudget {
    requests: usize,
    output: usize,
    per_turn: (usize, usize),
}

impl TurnBudget {
    pub fn new(requests: usize, output: usize) -> TurnBudget {
        TurnBudget {
            requests,
            output,
            per_turn: (requests, output),
        }
    }

    /// A new turn: the whole allowance again.
    pub fn renew(&mut self) {
        (self.requests, self.output) = self.per_turn;
    }

    /// Whether a further request may be taken this turn.
    pub fn can_take(&self) -> bool {
        self.requests > 0 && self.output > 0
    }

    /// One request taken.
    pub fn take_request(&mut self) {
        self.requests = self.requests.saturating_sub(1);
    }

    /// `bytes` of replies written (or queued).
    pub fn spend(&mut self, bytes: usize) {
        self.output = self.output.saturating_sub(bytes);
    }

    /// Reply bytes left this turn.
    pub fn output_left(&self) -> usize {
        self.output
    }
}

/// Connections per peer (a uid, a source address), against a cap given at each admission.
#[derive(Debug)]
pub struct PeerCounts<K> {
    counts: HashMap<K, usize>,
}

impl<K> Default for PeerCounts<K> {
    fn default() -> Self {
        PeerCounts {
            counts: HashMap::new(),
        }
    }
}

impl<K: Eq + Hash + Copy> PeerCounts<K> {
    /// Connections `peer` holds.
    pub fn of(&self, peer: K) -> usize {
        self.counts.get(&peer).copied().unwrap_or(0)
    }

    /// Counts one more connection of `peer` if it holds fewer than `cap`; else returns how
    /// many it holds (the refusal names it).
    pub fn admit(&mut self, peer: K, cap: usize) -> Result<(), usize> {
        let n = self.counts.entry(peer).or_insert(0);
        if *n >= cap {
            let held = *n;
            if held == 0 {
                self.counts.remove(&peer);
            }
            return Err(held);
        }
        *n += 1;
        Ok(())
    }

    /// Counts one more connection of `peer` whatever it holds (an admin's).
    pub fn add(&mut self, peer: K) {
        *self.counts.entry(peer).or_insert(0) += 1;
    }

    /// One connection of `peer` fewer; a peer with none is forgotten.
    pub fn release(&mut self, peer: K) {
        if let Some(n) = self.counts.get_mut(&peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.counts.remove(&peer);
            }
        }
    }

    /// Peers holding at least one connection.
    pub fn peers(&self) -> usize {
        self.counts.len()
    }
}

/// Bytes of client buffers and replies against a limit. A listener checks [`full`] before it
/// takes any request (not only before it reads: one read may hold hundreds of pipelined
/// requests, each a reply), so all clients together stay within the limit plus one reply.
///
/// [`full`]: MemoryBudget::full
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    used: usize,
    limit: usize,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> MemoryBudget {
        MemoryBudget { used: 0, limit }
    }

    /// A holder's bytes went from `before` to `after`.
    pub fn resize(&mut self, before: usize, after: usize) {
        self.used = self.used.saturating_sub(before).saturating_add(after);
    }

    /// Whether no further request may be taken (nor input read, nor stream chunk produced)
    /// for a client that is held to the budget.
    pub fn full(&self) -> bool {
        self.used >= self.limit
    }

    pub fn used(&self) -> usize {
        self.used
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }
}

/// How long a connection may go without progress before it is closed: `idle` in general,
/// `head` once a request has begun and is not complete (a slowloris head is cut early).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet {
    pub idle: Duration,
    pub head: Duration,
}

impl Quiet {
    /// The limit for a connection whose request has begun (`head_begun`) or not.
    pub fn limit(&self, head_begun: bool) -> Duration {
        if head_begun {
            self.head.min(self.idle)
        } else {
            self.idle
        }
    }

    /// When a connection quiet since `since` is due to be closed.
    pub fn due(&self, since: Instant, head_begun: bool) -> Instant {
        since + self.limit(head_begun)
    }

    /// Whether a connection quiet since `since` is due at `now`.
    pub fn expired(&self, since: Instant, now: Instant, head_begun: bool) -> bool {
        now.saturating_duration_since(since) >= self.limit(head_begun)
    }
}

/// Whether an `accept(2)` error means descriptors or kernel memory ran out (`EMFILE`,
/// `ENFILE`, `ENOBUFS`, `ENOMEM`): the connection stays in the backlog, to be retried.
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

/// Retrying a failed `accept` after [`AcceptRetry::AFTER`], never in a busy loop (the listener
/// is edge-triggered: nothing wakes the loop for a connection left in the backlog), with one
/// log line per spell of failures rather than one per retry.
#[derive(Debug, Default)]
pub struct AcceptRetry {
    at: Option<Instant>,
    failing: bool,
}

impl AcceptRetry {
    /// How long after a failed accept it is tried again.
    pub const AFTER: Duration = Duration::from_millis(100);

    /// Accepting failed at `now`: retried at `now + AFTER`. Returns whether this begins a spell
    /// of failures (log it then, and only then).
    pub fn failed(&mut self, now: Instant) -> bool {
        self.at = Some(now + Self::AFTER);
        !std::mem::replace(&mut self.failing, true)
    }

    /// An accept succeeded: the spell is over.
    pub fn succeeded(&mut self) {
        self.failing = false;
    }

    /// Whether accepting must wait (a retry is set and not due at `now`). A due retry is
    /// cleared.
    pub fn waiting(&mut self, now: Instant) -> bool {
        match self.at {
            Some(t) if now < t => true,
            Some(_) => {
                self.at = None;
                false
            }
            None => false,
        }
    }

    /// When to wake for the retry.
    pub fn deadline(&self) -> Option<Instant> {
        self.at
    }
}

/// One descriptor kept in reserve (`/dev/null`) so that, with every descriptor taken, a
/// waiting connection can still be accepted and told why it is refused (or kept, for an
/// admin) instead of wedging the listener.
#[derive(Debug)]
pub struct Reserve(Option<OwnedFd>);

impl Reserve {
    pub fn open() -> Reserve {
        match std::fs::File::open("/dev/null") {
            Ok(f) => Reserve(Some(f.into())),
            Err(e) => {
                log::debug!("no reserve descriptor (/dev/null: {e})");
                Reserve(None)
            }
        }
    }

    /// Frees the reserve descriptor for `use_it`, then takes it back. Returns `None` when
    /// there was no reserve to spend.
    pub fn spend<T>(&mut self, use_it: impl FnOnce() -> T) -> Option<T> {
        let fd = self.0.take()?;
        drop(fd);
        let out = use_it();
        *self = Reserve::open();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clients_share_is_what_is_left_and_shrinks_as_the_config_grows() {
        let small = fd_shares(1024, FdNeeds::default(), 50, true);
        // 1024 - 64 = 960 left: metrics takes at most 80, control the rest capped at 50 %.
        assert_eq!(small.metrics, MAX_METRICS);
        assert_eq!(small.control, 512);
        let needs = |containers, probes| FdNeeds { containers, probes };
        let mut last = small.control + small.metrics;
        for n in [10, 40, 80, 100] {
            let s = fd_shares(1024, needs(n, n / 2), 50, true);
            assert!(s.control + s.metrics <= last, "{n} containers: {s:?}");
            // What vigil needs and what clients may hold fit in the limit (or the clients are
            // down to their minimum).
            assert!(
                s.reserved + s.control + s.metrics <= 1024
                    || (s.control == MIN_CONTROL && s.metrics == MIN_METRICS),
                "{n}: {s:?}"
            );
            last = s.control + s.metrics;
        }
    }

    #[test]
    fn a_hundred_probed_containers_at_1024_leave_clients_only_their_minimum() {
        let s = fd_shares(
            1024,
            FdNeeds {
                containers: 100,
                probes: 100,
            },
            50,
            true,
        );
        assert_eq!(s.reserved, 64 + 700 + 500);
        assert_eq!((s.control, s.metrics), (MIN_CONTROL, MIN_METRICS));
    }

    #[test]
    fn metrics_take_nothing_when_the_listener_is_off() {
        let ten = FdNeeds {
            containers: 10,
            probes: 0,
        };
        let s = fd_shares(1024, ten, 90, false);
        assert_eq!(s.metrics, 0);
        assert_eq!(
            s.control,
            1024 - 64 - 70,
            "all that is left, under a 90 % cap"
        );
        let s = fd_shares(4096, FdNeeds::default(), 50, false);
        assert_eq!(s.control, 2048, "client_fd_percent caps the control share");
    }

    #[test]
    fn a_peer_at_its_cap_is_refused_with_what_it_holds_and_let_in_after_a_release() {
        let mut p = PeerCounts::default();
        assert_eq!(p.admit(7u32, 2), Ok(()));
        assert_eq!(p.admit(7, 2), Ok(()));
        assert_eq!(p.admit(7, 2), Err(2));
        assert_eq!(p.admit(8, 2), Ok(()));
        p.release(7);
        assert_eq!(p.admit(7, 2), Ok(()));
        p.release(8);
        assert_eq!(p.peers(), 1);
        assert_eq!(p.admit(9, 0), Err(0));
        assert_eq!(
            p.peers(),
            1,
            "a refused peer holding nothing is not remembered"
        );
        p.add(7);
        assert_eq!(p.of(7), 3);
    }

    #[test]
    fn a_turn_takes_no_request_past_either_allowance_and_a_new_turn_renews_both() {
        let mut t = TurnBudget::new(2, 100);
        assert!(t.can_take());
        t.take_request();
        t.take_request();
        assert!(!t.can_take(), "two requests a turn");
        t.renew();
        t.spend(150);
        assert_eq!(t.output_left(), 0);
        assert!(
            !t.can_take(),
            "the output is spent (one reply may overshoot it)"
        );
        t.renew();
        assert!(t.can_take());
        assert_eq!(t.output_left(), 100);
    }

    #[test]
    fn memory_is_full_at_the_limit_and_freed_by_resizing() {
        let mut m = MemoryBudget::new(100);
        m.resize(0, 60);
        assert!(!m.full());
        m.resize(0, 40);
        assert!(m.full());
        m.resize(60, 0);
        assert!(!m.full());
        assert_eq!(m.used(), 40);
        m.resize(500, 0);
        assert_eq!(m.used(), 0, "never below zero");
    }

    #[test]
    fn a_begun_head_gets_the_shorter_deadline() {
        let q = Quiet {
            idle: Duration::from_secs(10),
            head: Duration::from_secs(5),
        };
        let t = Instant::now();
        assert!(!q.expired(t, t + Duration::from_secs(6), false));
        assert!(q.expired(t, t + Duration::from_secs(6), true));
        assert_eq!(q.due(t, true), t + Duration::from_secs(5));
        let short_idle = Quiet {
            idle: Duration::from_secs(2),
            head: Duration::from_secs(5),
        };
        assert_eq!(short_idle.limit(true), Duration::from_secs(2));
    }

    #[test]
    fn a_failed_accept_waits_for_its_retry_and_is_logged_once_per_spell() {
        let mut r = AcceptRetry::default();
        let t = Instant::now();
        assert!(!r.waiting(t));
        assert!(r.failed(t), "the first failure is logged");
        assert!(r.waiting(t + Duration::from_millis(50)));
        assert!(!r.waiting(t + AcceptRetry::AFTER));
        assert_eq!(r.deadline(), None, "a due retry is cleared");
        assert!(!r.failed(t), "the same spell is not logged again");
        r.succeeded();
        assert!(r.failed(t));
        assert!(out_of_descriptors(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(!out_of_descriptors(&io::Error::from_raw_os_error(
            libc::ECONNABORTED
        )));
    }

    #[test]
    fn the_reserve_descriptor_is_freed_for_the_accept_and_taken_back() {
        let mut r = Reserve::open();
        assert!(r.0.is_some());
        assert_eq!(r.spend(|| 5), Some(5));
        assert!(r.0.is_some());
        let mut none = Reserve(None);
        assert_eq!(none.spend(|| 5), None);
    }
}
