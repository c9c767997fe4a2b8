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
//! nothing changed.

use std::time::{Duration, Instant};

use sd_notify::NotifyState;

use crate::core::{ContainerState, Phase, PodStatus, WaitingReason};

/// The least time between two computations of the STATUS line.
const STATUS_EVERY: Duration = Duration::from_secs(1);

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
}

impl Notifier {
    pub fn new(now: Instant) -> Notifier {
        Notifier {
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
        let _ = sd_notify::notify(&[NotifyState::Ready]);
        self.ready = true;
        self.dirty = true;
        if let Some(w) = self.watchdog {
            self.next_watchdog = Some(now + w / 2);
        }
    }

    pub fn stopping(&self) {
        let _ = sd_notify::notify(&[NotifyState::Stopping]);
    }

    /// RELOADING with the monotonic timestamp systemd wants with it.
    pub fn reloading(&self) {
        let _ = sd_notify::notify(&[
            NotifyState::Reloading,
            NotifyState::monotonic_usec_now().unwrap_or(NotifyState::Custom("")),
        ]);
    }

    /// A reload is over (whether it changed anything or not).
    pub fn reloaded(&mut self) {
        self.dirty = true;
        let _ = sd_notify::notify(&[NotifyState::Ready]);
    }

    /// Pings the watchdog when due.
    pub fn tick_watchdog(&mut self, now: Instant) {
        if let Some(at) = self.next_watchdog
            && now >= at
        {
            let _ = sd_notify::notify(&[NotifyState::Watchdog]);
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
            let _ = sd_notify::notify(&[NotifyState::Status(&line)]);
            self.last_status = line;
        }
    }

    /// When the loop must wake up for the notifier: the watchdog ping, and a STATUS line held
    /// back by the once-a-second limit.
    pub fn deadline(&self) -> Option<Instant> {
        let status = (self.enabled && self.ready && self.dirty).then_some(self.next_status);
        match (self.next_watchdog, status) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
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
