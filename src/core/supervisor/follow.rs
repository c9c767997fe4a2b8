//! Dependents that follow their dependency (docs/behaviour.md §8.2): `depends_on` entries with
//! `restart = true` (compose's `depends_on.restart`: the dependent restarts after its
//! dependency was restarted or replaced) or `stop = true` (systemd's `BindsTo=`: the
//! dependent stops while its dependency is stopped or has ended, and starts again when it is
//! back).
//!
//! Both are carried out as the operator's whole-pod `restart` would be: everything of the
//! dependent stops, then it waits for its dependencies again (`start_ready_pods`), so a
//! dependent of a stopped pod waits until that pod is back and meets the condition.
//!
//! Owns the record of which run of each followed dependency a dependent began beside, and
//! the decision to restart. Must not start anything itself (the dependency gate does) nor
//! follow a pod during shutdown (the shutdown order stops dependents first anyway).

use super::*;
use crate::config::on_event::EventReason;

/// Which runs a pod's regular containers are in: a new run of any (a restart, an operator
/// start) or a new pod (a reload replaced it: new keys) changes it.
pub(in crate::core) type RunSignature = Vec<(ContainerKey, Generation)>;

/// The event of a dependent restarted because of its dependency (interface.md §7).
const REASON: EventReason = EventReason::DependencyChanged;

/// The runs of a dependency: of the pod named, or of every replica of a pod with replicas.
fn signature(on: &[&Pod]) -> RunSignature {
    on.iter()
        .flat_map(|p| p.main.iter().map(|s| (s.key, s.generation)))
        .collect()
}

/// Why a dependency makes its dependent restart now, if it does.
enum Cause {
    Restarted,
    Down,
}

impl Supervisor {
    /// Restart every dependent whose followed dependency was restarted, replaced, or stopped
    /// (see the module docs). Runs in every refresh outside shutdown; returns whether a pod
    /// changed. Pods without `restart` or `stop` in their `depends_on` cost one scan of it.
    pub(super) fn follow_dependencies(&mut self, now: Time) -> bool {
        let mut decisions: Vec<(usize, String)> = Vec::new();
        let mut records: Vec<(usize, String, RunSignature)> = Vec::new();
        for (i, pod) in self.pods.iter().enumerate() {
            if !pod.spec.depends_on.iter().any(|d| d.restart || d.stop) {
                continue;
            }
            // Only a running dependent follows: one waiting, at rest (completed, stopped,
            // failed) or already on its way to a restart has nothing to restart.
            if pod.next != Next::Keep
                || pod.restart_pending
                || pod.awaiting
                || pod.stage == Stage::Waiting
                || pod.at_rest()
            {
                continue;
            }
            for d in pod.spec.depends_on.iter().filter(|d| d.restart || d.stop) {
                // The pod named, or every replica of a pod with replicas (§14).
                let on: Vec<&Pod> = (self.pods.iter())
                    .filter(|p| p.spec.answers_to(&d.pod) && p.next != Next::Remove)
                    .collect();
                if on.is_empty() {
                    continue;
                }
                let now_sig = signature(&on);
                // Down: every one of them at rest, none about to start over.
                let down = on
                    .iter()
                    .all(|p| p.next == Next::Keep && !p.restart_pending && p.at_rest());
                let cause = if d.stop && down {
                    Some(Cause::Down)
                } else if d.restart {
                    match pod.followed.get(&d.pod) {
                        None => {
                            records.push((i, d.pod.clone(), now_sig));
                            None
                        }
                        Some(seen) if *seen != now_sig => Some(Cause::Restarted),
                        Some(_) => None,
                    }
                } else {
                    None
                };
                if let Some(cause) = cause {
                    let message = match cause {
                        Cause::Restarted => format!("dependency {} was restarted", d.pod),
                        Cause::Down => format!(
                            "dependency {} {}",
                            d.pod,
                            if on.iter().any(|p| p.stopped_by_request()) {
                                "was stopped"
                            } else {
                                "has ended"
                            }
                        ),
                    };
                    decisions.push((i, message));
                    break;
                }
            }
        }
        for (i, name, sig) in records {
            self.pods[i].followed.insert(name, sig);
        }
        let changed = !decisions.is_empty();
        let (pods, mut out) = self.split(now);
        for (i, message) in decisions {
            let pod = &mut pods[i];
            let name = pod.spec.name.clone();
            pod.restart_pending = true;
            pod.awaiting = false;
            pod.held = false;
            pod.followed.clear();
            out.events.record(
                now,
                EventType::Normal,
                REASON,
                name,
                format!("Restarting: {message}"),
            );
            pod.stop_all(
                StopCause::Request {
                    message,
                    then_start: false,
                },
                false,
                &mut out,
            );
        }
        // A dependent at rest or waiting begins beside whatever runs when it starts again.
        for pod in pods.iter_mut().filter(|p| !p.followed.is_empty()) {
            if pod.stage == Stage::Waiting || pod.at_rest() {
                pod.followed.clear();
            }
        }
        changed
    }
}
