//! Requests whose reply waits on the server for a state: `start`/`stop`/`restart` with
//! `wait_ms`, and `wait` (docs/interface.md §2; docs/behaviour.md §5.6): the list of them,
//! looked at once per turn.
//!
//! Each waiter is a request (for a command, already carried out), its connection, what it
//! waits for ([`Awaits`]) and until when. At every turn the control component hands the list a
//! view of the core: a waiter whose target reached its goal, can no longer reach it on its own,
//! or whose time is up is taken off the list with its outcome, for the control component to
//! send; a waiter whose connection closed, or whose client hung up, is dropped. The earliest
//! deadline is the list's share of the poll timeout, so a timed-out wait is answered when it
//! times out, not at the next event.
//!
//! Owns: the waiting requests. Must not: block or read the clock (it is handed the turn's
//! `now`), decide what "reached" means (control/wire/wait.rs does, on the status the socket
//! shows, or on the pods' health for `wait`), or look at more than
//! [`LOOKS_PER_TURN`] pods per turn across the waiters (the rest are looked at first in the
//! next turn, which follows at once).

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use crate::control::render;
use crate::control::server::ConnId;
use crate::control::time::WallClock;
use crate::control::wire::wait::{Goal, Progress, Target, WaitFor, progress, rollout_progress};
use crate::control::wire::{WaitOutcome, WaitReply};
use crate::core::{PodHealth, Supervisor};
use crate::format;

use super::control::Pending;

/// Pods looked at in one turn across every waiter (a `wait` may name up to 1,024).
pub(super) const LOOKS_PER_TURN: usize = 4096;

/// What a waiter waits for.
pub(super) enum Awaits {
    /// A command carried out at `since` (`wait_ms`): its target's state. `message` is what
    /// the request's own reply says (`stopping pod web`), sent with the outcome.
    Command {
        message: String,
        target: Target,
        since: SystemTime,
        /// The same moment on the monotonic clock (handed over at `vigil upgrade`).
        taken: Instant,
    },
    /// `wait`: every pod in `pods` meets `condition`.
    Pods {
        pods: Vec<String>,
        condition: WaitFor,
    },
}

impl Awaits {
    /// The pods one look at it renders: a command's on a pod with replicas, each replica.
    fn looks(&self, core: &Supervisor) -> usize {
        match self {
            Awaits::Command { target, .. } if target.goal != Goal::RolledOut => {
                core.replicas_of(&target.pod).len().max(1)
            }
            Awaits::Command { .. } => 1,
            Awaits::Pods { pods, .. } => pods.len().max(1),
        }
    }
}

/// How a wait ended.
pub(super) enum Done {
    /// A command's: its message and the outcome.
    Command {
        message: String,
        outcome: WaitOutcome,
    },
    /// A `wait`'s: the reply (met or timed out), or the name of a pod that was removed.
    Pods(Result<WaitReply, String>),
    /// Its client hung up: nobody to answer (the reply is sent only to end the request).
    Gone,
}

/// One request waiting for its target's state.
pub(super) struct Waiter {
    pub(super) pending: Pending,
    pub(super) awaits: Awaits,
    timeout: Duration,
    deadline: Instant,
}

/// The waiting requests (see the module docs).
#[derive(Default)]
pub(super) struct Waiters {
    list: Vec<Waiter>,
    /// Waiters were left unlooked this turn: the next turn follows at once.
    more: bool,
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
        let awaits = Awaits::Command {
            message,
            target,
            since: clock.to_system(now),
            taken: now,
        };
        self.park_for(pending, awaits, timeout, now);
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
            awaits: Awaits::Command {
                message: w.message,
                target: w.target,
                since: clock.to_system(w.taken),
                taken: w.taken,
            },
            timeout: w.timeout,
            deadline: w.deadline,
        });
    }

    /// Every command's waiting request as the handoff carries it, by connection (`vigil
    /// upgrade`); nothing changes. A `wait` is not among them.
    pub(super) fn handover(&self) -> Vec<(ConnId, crate::runtime::handoff::WaitState)> {
        self.list
            .iter()
            .filter_map(|w| {
                let Awaits::Command {
                    message,
                    target,
                    taken,
                    ..
                } = &w.awaits
                else {
                    return None;
                };
                Some((
                    w.pending.conn(),
                    crate::runtime::handoff::WaitState {
                        id: w.pending.id().as_json().to_string(),
                        message: message.clone(),
                        target: target.clone(),
                        taken: *taken,
                        timeout: w.timeout,
                        deadline: w.deadline,
                    },
                ))
            })
            .collect()
    }

    /// Parks `pending` until `awaits` holds or `timeout` has passed from `now`.
    pub(super) fn park_for(
        &mut self,
        pending: Pending,
        awaits: Awaits,
        timeout: Duration,
        now: Instant,
    ) {
        self.list.push(Waiter {
            pending,
            awaits,
            timeout,
            deadline: crate::instant::saturating_add(now, timeout),
        });
    }

    /// When the earliest wait times out.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.list.iter().map(|w| w.deadline).min()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The request line of every `wait` under way, its timeout what is left of it at `now`:
    /// what `vigil upgrade` hands over for the next instance to answer (a `wait` changes
    /// nothing, so asking again is the same request). A command's wait is not replayed (its
    /// command was carried out: asked again it would be carried out twice).
    pub(super) fn replays(&self, now: Instant) -> Vec<(ConnId, String)> {
        use crate::control::protocol::{RequestCmd, Seconds};
        (self.list.iter())
            .filter_map(|w| {
                let Awaits::Pods { pods, condition } = &w.awaits else {
                    return None;
                };
                let request = RequestCmd::Wait {
                    pods: pods.clone(),
                    condition: *condition,
                    timeout_seconds: Some(Seconds(w.deadline.saturating_duration_since(now))),
                };
                let mut fields = request.to_json();
                let id = serde_json::from_str(w.pending.id().as_json()).ok()?;
                fields.insert("id".to_string(), id);
                Some((
                    w.pending.conn(),
                    serde_json::Value::Object(fields).to_string(),
                ))
            })
            .collect()
    }

    /// Waiters were left for the next turn by the turn's looks.
    pub(super) fn has_more(&self) -> bool {
        self.more
    }

    /// Looks at the waiters once, at most [`LOOKS_PER_TURN`] pods: those whose wait is over
    /// come back with their outcome; those for which `open` says the connection is closed are
    /// dropped, and those whose client `gone` says hung up come back [`Done::Gone`].
    pub(super) fn settle(
        &mut self,
        now: Instant,
        core: &Supervisor,
        clock: &WallClock,
        open: impl Fn(ConnId) -> bool,
        gone: impl Fn(ConnId) -> bool,
    ) -> Vec<(Waiter, Done)> {
        self.more = false;
        // One judgement of every pod per turn, for the `wait`s among them.
        let mut judged: Option<HashMap<String, PodHealth>> = None;
        let mut done = Vec::new();
        let mut looks = LOOKS_PER_TURN;
        let mut i = 0;
        while i < self.list.len() {
            if looks == 0 {
                // The rest first next turn.
                self.list.rotate_left(i);
                self.more = true;
                break;
            }
            let w = &self.list[i];
            looks = looks.saturating_sub(w.awaits.looks(core));
            if !open(w.pending.conn()) {
                self.list.swap_remove(i);
                continue;
            }
            if gone(w.pending.conn()) {
                done.push((self.list.swap_remove(i), Done::Gone));
                continue;
            }
            let ended = match &w.awaits {
                Awaits::Command {
                    message,
                    target,
                    since,
                    ..
                } => command_outcome(target, *since, w, now, core, clock).map(|outcome| {
                    Done::Command {
                        message: message.clone(),
                        outcome,
                    }
                }),
                Awaits::Pods { pods, condition } => {
                    let judged = judged.get_or_insert_with(|| {
                        (core.health().into_iter())
                            .map(|h| (h.name.clone(), h))
                            .collect()
                    });
                    pods_outcome(pods, *condition, judged, now >= w.deadline).map(Done::Pods)
                }
            };
            match ended {
                Some(d) => done.push((self.list.swap_remove(i), d)),
                None => i += 1,
            }
        }
        done
    }
}

/// The outcome of a command's wait at `now`, or `None` while it still waits.
fn command_outcome(
    target: &Target,
    since: SystemTime,
    w: &Waiter,
    now: Instant,
    core: &Supervisor,
    clock: &WallClock,
) -> Option<WaitOutcome> {
    if target.goal == Goal::RolledOut {
        let progress = rollout_progress(&target.pod, core.rollout(&target.pod).as_ref());
        return outcome(progress, w, now);
    }
    if core.pod(&target.pod).is_none() {
        // A pod with replicas: every replica's (docs/behaviour.md §14), the first not there
        // yet said.
        let replicas = core.replicas_of(&target.pod);
        if !replicas.is_empty() {
            let mut progress = Progress::Reached;
            for name in replicas {
                let one = Target {
                    pod: name,
                    ..target.clone()
                };
                match pod_progress(&one, since, core, clock) {
                    Progress::Reached => {}
                    failed @ Progress::Failed(_) => return outcome(failed, w, now),
                    pending @ Progress::Pending(_) => {
                        if progress == Progress::Reached {
                            progress = pending;
                        }
                    }
                }
            }
            return outcome(progress, w, now);
        }
    }
    outcome(pod_progress(target, since, core, clock), w, now)
}

/// Where `target`'s pod stands now (failed when it is gone).
fn pod_progress(
    target: &Target,
    since: SystemTime,
    core: &Supervisor,
    clock: &WallClock,
) -> Progress {
    let Some(status) = core.pod(&target.pod) else {
        return Progress::Failed(format!("pod {:?} is gone", target.pod));
    };
    // The containers' states only: no cgroup figures, nothing shown of the spec's secrets.
    let pod = render::pod(
        &status,
        &render::Observed::new(),
        clock,
        render::Secrets::Redacted,
    );
    progress(target, &pod, since)
}

/// The wait's outcome for `progress` at `now`, or `None` while it still waits.
fn outcome(progress: Progress, w: &Waiter, now: Instant) -> Option<WaitOutcome> {
    match progress {
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

/// A `wait`'s reply once every pod meets `condition` or it has `expired`; a pod that is gone
/// (a reload removed it) ends it with its name; `None` while it still waits.
fn pods_outcome(
    pods: &[String],
    condition: WaitFor,
    judged: &HashMap<String, PodHealth>,
    expired: bool,
) -> Option<Result<WaitReply, String>> {
    let mut now = Vec::with_capacity(pods.len());
    for name in pods {
        match judged.get(name) {
            Some(h) => now.push(h.clone()),
            None => return Some(Err(name.clone())),
        }
    }
    if expired || now.iter().all(|h| condition.met(h)) {
        Some(Ok(render::wait(condition, &now)))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `--wait` on a pod with replicas renders each replica at every look, so it takes that
    /// many of the turn's [`LOOKS_PER_TURN`].
    #[test]
    fn a_commands_wait_on_a_pod_with_replicas_takes_a_look_per_replica() {
        let text = "[pods.web]\nreplicas = 3\n[[pods.web.containers]]\nname = \"a\"\n\
                    command = [\"/bin/a\"]\n";
        let config = match crate::config::load_str(text, std::path::Path::new("w.toml")) {
            Ok(c) => c,
            Err(e) => panic!("{e}"),
        };
        let core = Supervisor::new(&config, Instant::now());
        let on = |pod: &str, goal: Goal| Awaits::Command {
            message: String::new(),
            target: Target {
                pod: pod.to_string(),
                container: None,
                goal,
            },
            since: SystemTime::now(),
            taken: Instant::now(),
        };
        assert_eq!(on("web", Goal::Stopped).looks(&core), 3);
        assert_eq!(on("web-1", Goal::Stopped).looks(&core), 1);
        assert_eq!(on("web", Goal::RolledOut).looks(&core), 1);
    }
}
