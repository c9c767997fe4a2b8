//! Requests whose reply waits on the server for a state (`start`/`stop`/`restart` with
//! `wait_ms`, docs/interface.md §2): the list of them, looked at once per turn.
//!
//! Each waiter is a request already carried out, its connection, what it waits for
//! ([`Target`]) and until when. At every turn the control component hands the list a view of
//! the core: a waiter whose target reached its goal, can no longer reach it on its own, or
//! whose time is up is taken off the list with its outcome, for the control component to
//! send; a waiter whose connection closed is dropped. The earliest deadline is the list's
//! share of the poll timeout, so a timed-out wait is answered when it times out, not at the
//! next event.
//!
//! Owns: the waiting requests. Must not: block or read the clock (it is handed the turn's
//! `now`), decide what "reached" means (control/wire/wait.rs does, on the status the socket
//! shows), or look at more than one pod per waiter per turn (the waiters are bounded by the
//! connection cap).

use std::time::{Duration, Instant, SystemTime};

use crate::control::render;
use crate::control::server::ConnId;
use crate::control::time::WallClock;
use crate::control::wire::WaitOutcome;
use crate::control::wire::wait::{Progress, Target, progress};
use crate::core::Supervisor;
use crate::format;

use super::control::Pending;

/// One request waiting for its target's state.
pub(super) struct Waiter {
    pub(super) pending: Pending,
    /// What the request's own reply says (`stopping pod web`), sent with the outcome.
    pub(super) message: String,
    pub(super) target: Target,
    /// When the request was carried out (a run begun or ended before then is not its
    /// outcome), by the clock the status is rendered with.
    since: SystemTime,
    /// The same moment on the monotonic clock (handed over at `vigil upgrade`).
    taken: Instant,
    timeout: Duration,
    deadline: Instant,
}

/// The waiting requests (see the module docs).
#[derive(Default)]
pub(super) struct Waiters {
    list: Vec<Waiter>,
}

impl Waiters {
    /// Parks `pending` until `target` is reached or `timeout` has passed from `now`.
    pub(super) fn park(
        &mut self,
        pending: Pending,
        message: String,
        target: Target,
        timeout: Duration,
        now: Instant,
        clock: &WallClock,
    ) {
        self.list.push(Waiter {
            pending,
            message,
            target,
            since: clock.to_system(now),
            taken: now,
            timeout,
            deadline: crate::instant::saturating_add(now, timeout),
        });
    }

    /// Parks a request the previous instance had parked (`vigil upgrade`): it waits on with
    /// its own start and deadline.
    pub(super) fn resume(
        &mut self,
        pending: Pending,
        w: crate::runtime::handoff::WaitState,
        clock: &WallClock,
    ) {
        self.list.push(Waiter {
            pending,
            message: w.message,
            target: w.target,
            since: clock.to_system(w.taken),
            taken: w.taken,
            timeout: w.timeout,
            deadline: w.deadline,
        });
    }

    /// Every waiting request as the handoff carries it, by connection (`vigil upgrade`);
    /// nothing changes.
    pub(super) fn handover(&self) -> Vec<(ConnId, crate::runtime::handoff::WaitState)> {
        self.list
            .iter()
            .map(|w| {
                (
                    w.pending.conn(),
                    crate::runtime::handoff::WaitState {
                        id: w.pending.id().as_json().to_string(),
                        message: w.message.clone(),
                        target: w.target.clone(),
                        taken: w.taken,
                        timeout: w.timeout,
                        deadline: w.deadline,
                    },
                )
            })
            .collect()
    }

    /// When the earliest wait times out.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.list.iter().map(|w| w.deadline).min()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Looks at every waiter once: those whose wait is over come back with their outcome;
    /// those for which `open` says the connection is gone are dropped.
    pub(super) fn settle(
        &mut self,
        now: Instant,
        core: &Supervisor,
        clock: &WallClock,
        open: impl Fn(ConnId) -> bool,
    ) -> Vec<(Waiter, WaitOutcome)> {
        let mut done = Vec::new();
        let mut i = 0;
        while i < self.list.len() {
            let w = &self.list[i];
            if !open(w.pending.conn()) {
                self.list.swap_remove(i);
                continue;
            }
            match outcome(w, now, core, clock) {
                Some(outcome) => done.push((self.list.swap_remove(i), outcome)),
                None => i += 1,
            }
        }
        done
    }
}

/// The outcome of `w` at `now`, or `None` while it still waits.
fn outcome(w: &Waiter, now: Instant, core: &Supervisor, clock: &WallClock) -> Option<WaitOutcome> {
    let Some(status) = core.pod(&w.target.pod) else {
        return Some(WaitOutcome::Failed {
            why: format!("pod {:?} is gone", w.target.pod),
        });
    };
    // The containers' states only: no cgroup figures, nothing shown of the spec's secrets.
    let pod = render::pod(
        &status,
        &render::Observed::new(),
        clock,
        render::Secrets::Redacted,
    );
    match progress(&w.target, &pod, w.since) {
        Progress::Reached => Some(WaitOutcome::Reached),
        Progress::Failed(why) => Some(WaitOutcome::Failed { why }),
        Progress::Pending(why) if now >= w.deadline => Some(WaitOutcome::TimedOut {
            why: format!(
                "timed out after {} waiting {why}",
                format::go_duration(w.timeout)
            ),
        }),
        Progress::Pending(_) => None,
    }
}
