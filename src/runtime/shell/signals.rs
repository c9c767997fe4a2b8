//! vigil's own signals as one component: signal-hook's self-pipe (its token is
//! `Owner::Signals`), read into what each signal asks of the supervisor as a whole.
//!
//! SIGCHLD: reap; SIGTERM, SIGINT, SIGPWR: shut down (a second one forces it, unless it comes
//! within [`REPEATED_STOP_WINDOW`] of the first: that is the same request again); SIGUSR2:
//! upgrade (re-execute); SIGHUP: check the socket file, reload the config.
//!
//! Owns: the self-pipe and the count of stop signals. Must not: carry out what a signal asks
//! (the router does: they are commands to the whole supervisor), or block.

use std::time::{Duration, Instant};

use libc::SIGPWR;
use log::info;
use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook_mio::v1_0::Signals;

/// A stop signal this soon after the one that began the shutdown is that request again, not an
/// operator asking to force it: timeout(1) signals both its child and the child's process group
/// (coreutils, `cleanup`), so vigil run under it receives SIGTERM twice within microseconds.
const REPEATED_STOP_WINDOW: Duration = Duration::from_millis(250);

/// What a signal asks of the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Asked {
    /// A child changed state (SIGCHLD).
    Reap,
    /// Shut down; `force` from the second stop signal on.
    Shutdown { force: bool },
    /// Re-execute vigil (SIGUSR2).
    Upgrade,
    /// Check the socket file, reload the config (SIGHUP).
    Reload,
}

/// The signals component (see the module docs).
pub(super) struct SignalPipe {
    signals: Signals,
    /// Stop signals so far (carried across an upgrade).
    pub(super) stop_signals: u32,
    /// When the first stop signal came (this vigil's clock; not handed over by an upgrade).
    first_stop_at: Option<Instant>,
}

impl SignalPipe {
    pub(super) fn new(signals: Signals) -> SignalPipe {
        SignalPipe {
            signals,
            stop_signals: 0,
            first_stop_at: None,
        }
    }

    /// The signals that came, in order, as what they ask (logged here).
    pub(super) fn take(&mut self, now: Instant) -> Vec<Asked> {
        let pending: Vec<i32> = self.signals.pending().collect();
        let mut asked = Vec::with_capacity(pending.len());
        for sig in pending {
            match sig {
                SIGCHLD => asked.push(Asked::Reap),
                SIGTERM | SIGINT | SIGPWR => {
                    if self
                        .first_stop_at
                        .is_some_and(|t| now.saturating_duration_since(t) < REPEATED_STOP_WINDOW)
                    {
                        info!(
                            "received {} again within {} ms: the same request, the shutdown goes \
                             on (send it again to force it)",
                            signal_name(sig),
                            REPEATED_STOP_WINDOW.as_millis()
                        );
                        continue;
                    }
                    self.stop_signals += 1;
                    self.first_stop_at.get_or_insert(now);
                    let force = self.stop_signals > 1;
                    info!(
                        "received {}: {}",
                        signal_name(sig),
                        if force {
                            "forcing shutdown"
                        } else {
                            "shutting down"
                        }
                    );
                    asked.push(Asked::Shutdown { force });
                }
                SIGUSR2 => asked.push(Asked::Upgrade),
                SIGHUP => asked.push(Asked::Reload),
                _ => {}
            }
        }
        asked
    }
}

pub(super) fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}
