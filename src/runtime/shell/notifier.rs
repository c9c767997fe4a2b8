//! The notifier: what vigil tells its service manager over `NOTIFY_SOCKET` (sd_notify(3)) —
//! READY, RELOADING, STOPPING, the watchdog keep-alive and a one-line STATUS.
//!
//! Owns: the watchdog interval (`WATCHDOG_USEC`, pinged at half of it, as sd_watchdog_enabled(3)
//! advises), the STATUS line last sent, and whether the pods may have changed since
//! ([`Notifier::changed`], told by the router when the core took an input, a command or a
//! timeout). The line is computed only then, at most once a second, and sent only when it
//! differs: an idle vigil wakes for nothing but the watchdog ping (none without
//! `WATCHDOG_USEC`). Without `NOTIFY_SOCKET` every call is a no-op.
//!
//! Must not: block, fail vigil (a lost notification is ignored), or schedule a wake-up while
//! nothing changed. Every message is sent without waiting (`MSG_DONTWAIT`): a service manager
//! that does not read (a datagram queue holds `net.unix.max_dgram_qlen` messages, 10 by
//! default, and vigil's fd-store messages share it) must not stop the loop; a message the full
//! queue refused is kept (up to [`MAX_PENDING`], in order) and sent again at the next turn, at
//! most every [`RETRY_EVERY`].

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use nix::sys::socket::UnixAddr;

use sd_notify::NotifyState;

use crate::core::{ContainerState, Phase, PodStatus, WaitingReason};

/// The least time between two computations of the STATUS line.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// The most messages kept while the service manager's queue is full (the oldest go first).
const MAX_PENDING: usize = 16;

/// How soon a message the full queue refused is tried again.
const RETRY_EVERY: Duration = Duration::from_millis(50);

pub struct Notifier {
    /// `NOTIFY_SOCKET` was set at start.
    enabled: bool,
    watchdog: Option<Duration>,
    next_watchdog: Option<Instant>,
    last_status: String,
    /// The earliest the line may be computed again.
    next_status: Instant,
    /// The pods may have changed since the line was last computed.
    dirty: bool,
    /// READY=1 was sent: STATUS lines follow it, never precede it (the first line a service
    /// manager shows is the state after start-up, as it was before STATUS became event-driven).
    ready: bool,
    /// An unbound non-blocking datagram socket and `NOTIFY_SOCKET`'s address.
    socket: Option<(OwnedFd, UnixAddr)>,
    /// Messages the full queue refused, oldest first, and when to try again.
    pending: VecDeque<String>,
    retry_at: Option<Instant>,
}

impl Notifier {
    pub fn new(now: Instant) -> Notifier {
        let socket = std::env::var_os("NOTIFY_SOCKET").and_then(|path| {
            crate::runtime::fdstore::open(&path)
                .map_err(|e| log::warn!("NOTIFY_SOCKET {}: {e}", path.to_string_lossy()))
                .ok()
        });
        Notifier {
            socket,
            pending: VecDeque::new(),
            retry_at: None,
            enabled: std::env::var_os("NOTIFY_SOCKET").is_some(),
            watchdog: sd_notify::watchdog_enabled(),
            next_watchdog: None,
            last_status: String::new(),
            next_status: now,
            dirty: true,
            ready: false,
        }
    }

    /// Start-up is done: READY, and the watchdog starts.
    pub fn ready(&mut self, now: Instant) {
        self.send(&[NotifyState::Ready]);
        self.ready = true;
        self.dirty = true;
        if let Some(w) = self.watchdog {
            self.next_watchdog = Some(now + w / 2);
        }
    }

    pub fn stopping(&mut self) {
        self.send(&[NotifyState::Stopping]);
    }

    /// RELOADING with the monotonic timestamp systemd wants with it.
    pub fn reloading(&mut self) {
        self.send(&[
            NotifyState::Reloading,
            NotifyState::monotonic_usec_now().unwrap_or(NotifyState::Custom("")),
        ]);
    }

    /// A reload is over (whether it changed anything or not).
    pub fn reloaded(&mut self) {
        self.dirty = true;
        self.send(&[NotifyState::Ready]);
    }

    /// Sends `states` as one message, after any held back, without waiting.
    fn send(&mut self, states: &[NotifyState<'_>]) {
        if self.socket.is_none() {
            return;
        }
        let msg = (states.iter())
            .map(ToString::to_string)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("\n");
        if self.pending.len() == MAX_PENDING {
            let lost = self.pending.pop_front();
            log::warn!("sd_notify: the service manager reads nothing; dropped {lost:?}");
        }
        self.pending.push_back(msg);
        self.flush(None);
    }

    /// Sends what is held back, in order, until the queue refuses one (then again at the next
    /// turn at or after `RETRY_EVERY`, when `now` is known).
    fn flush(&mut self, now: Option<Instant>) {
        let Some((sock, addr)) = &self.socket else {
            self.pending.clear();
            return;
        };
        while let Some(msg) = self.pending.front() {
            match crate::runtime::fdstore::send(sock, addr, msg, &[]) {
                Ok(()) => {
                    self.pending.pop_front();
                }
                Err(nix::errno::Errno::EAGAIN) => {
                    self.retry_at = Some(now.unwrap_or_else(Instant::now) + RETRY_EVERY);
                    return;
                }
                Err(e) => {
                    log::debug!("sd_notify {msg:?} not sent: {e}");
                    self.pending.pop_front();
                }
            }
        }
        self.retry_at = None;
    }

    /// Pings the watchdog when due, and sends again what the full queue refused.
    pub fn tick_watchdog(&mut self, now: Instant) {
        if self.retry_at.is_some_and(|at| now >= at) {
            self.flush(Some(now));
        }
        if let Some(at) = self.next_watchdog
            && now >= at
        {
            self.send(&[NotifyState::Watchdog]);
            self.next_watchdog = self.watchdog.map(|w| now + w / 2);
        }
    }

    /// The pods may have changed (the core took an input, a command or a timeout).
    pub fn changed(&mut self) {
        self.dirty = true;
    }

    /// Whether the STATUS line is to be computed now.
    pub fn status_due(&self, now: Instant) -> bool {
        self.enabled && self.ready && self.dirty && now >= self.next_status
    }

    /// Sends STATUS if the line `pods` gives differs from the last one sent.
    pub fn update_status(&mut self, now: Instant, pods: impl FnOnce() -> Vec<PodStatus>) {
        if !self.enabled || !self.ready {
            return;
        }
        self.dirty = false;
        self.next_status = now + STATUS_EVERY;
        let line = status_line(&pods());
        if line != self.last_status {
            self.send(&[NotifyState::Status(&line)]);
            self.last_status = line;
        }
    }

    /// When the loop must wake up for the notifier: the watchdog ping, and a STATUS line held
    /// back by the once-a-second limit.
    pub fn deadline(&self) -> Option<Instant> {
        let status = (self.enabled && self.ready && self.dirty).then_some(self.next_status);
        [self.next_watchdog, status, self.retry_at]
            .into_iter()
            .flatten()
            .min()
    }
}

/// "4 pods: 3 running, 1 in back-off; 5/6 containers ready"
fn status_line(pods: &[PodStatus]) -> String {
    let mut running = 0;
    let mut backoff = 0;
    let mut other = 0;
    let (mut ready, mut total) = (0, 0);
    for p in pods {
        let in_backoff = p.containers.iter().any(|c| {
            matches!(
                &c.state,
                ContainerState::Waiting {
                    reason: WaitingReason::CrashLoopBackOff,
                    ..
                }
            )
        });
        if in_backoff {
            backoff += 1;
        } else if p.phase == Phase::Running {
            running += 1;
        } else {
            other += 1;
        }
        total += p.containers.len();
        ready += p.containers.iter().filter(|c| c.ready).count();
    }
    let mut parts = vec![format!("{running} running")];
    if backoff > 0 {
        parts.push(format!("{backoff} in back-off"));
    }
    if other > 0 {
        parts.push(format!("{other} other"));
    }
    format!(
        "{} pods: {}; {ready}/{total} containers ready",
        pods.len(),
        parts.join(", ")
    )
}
