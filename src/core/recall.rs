//! What a vigil that dies without a shutdown (`kill -9`, a crash, the OOM killer) leaves for
//! the next one, and taking it back (issue 36.2): the lifecycle history an upgrade hands over
//! in the core's state, reduced to what a fresh core cannot learn from the processes it finds
//! — each pod's creation time and stage, each container's restart count, automatic restarts,
//! back-off history, last state and its state when it is not running (ended for good, or
//! waiting out a back-off) — and the event list.
//!
//! Owns the [`Recollection`] type (written by the runtime into the state file, serde) and the
//! rules of [`super::Supervisor::recall`]: what a container's remembered state becomes at the
//! next start. Must not: read the clock or do I/O (the runtime serialises it and decides when);
//! take back a container whose definition changed (the runtime says which match).
//!
//! The rules, per container whose definition is the same (docs/behaviour.md, "After a crash of
//! vigil"):
//! - running then and adopted now: its history (restart count, last state, back-off);
//! - ended for good then (completed, stopped by an operator, failed and not restarted by its
//!   policy): it stays so — a completed job never runs again because vigil crashed;
//! - waiting out a back-off then: it waits for the rest of it;
//! - running then and gone now (it ended while no vigil watched it, or could not be adopted):
//!   its end is `ContainerStatusUnknown`, a failure as for an adopted run that ends (kubelet
//!   `status_manager.go` TerminatePod): it starts again now (a restart) unless its
//!   `restart_policy` is `Never`;
//! - not started then: it starts as usual.
//!
//! A scheduled pod's schedule is taken back whole when its pattern and zone are the same:
//! the last trigger decided (so a trigger missed while no vigil ran runs late, within its
//! starting deadline, as after an upgrade), the last one run (`LAST SCHEDULE`), and whether it
//! is suspended.
//!
//! The ended runs a pod kept (`history`) are taken back, within the limits it has now.
//!
//! A pod whose containers had begun (its init containers completed, its dependencies met)
//! goes on from the stage it had reached, as for an adoption ([`super::pod::Pod`]
//! `skip_to_stage`), without waiting for its dependencies again.

use std::time::Duration;

use super::backoff::BackoffState;
use super::events::EventLog;
use super::pod::Stage;
use super::pod::{MSG_COMPLETED_BEFORE, MSG_KEPT_STOPPED};
use super::status::{Terminated, TerminationReason};
use super::{KeptEnd, Time};

/// What the next vigil takes back (see the module docs). Instants are `CLOCK_MONOTONIC`
/// nanoseconds (valid within one boot: the runtime records the boot with it).
#[derive(serde::Serialize, serde::Deserialize, Debug, Default)]
pub struct Recollection {
    pub pods: Vec<PodMemory>,
    pub(super) events: EventLog,
}

impl Recollection {
    /// The container `pod/container` (definition hash `spec`) ended for good after this
    /// record was taken: the runtime writes such ends at once (the state file's `completed` and
    /// `stopped` lines) and the record at most every 250 ms, so a crash in between leaves the
    /// record behind them. Its remembered state becomes that end (unless the record has one).
    pub fn ended_since(&mut self, pod: &str, container: &str, spec: u64, end: KeptEnd, now: Time) {
        let Some(slot) = self
            .pods
            .iter_mut()
            .filter(|p| p.name == pod)
            .flat_map(|p| p.containers.iter_mut())
            .find(|c| c.name == container && !c.init && c.spec == spec)
        else {
            return;
        };
        if matches!(slot.state, Remembered::Done(_)) {
            return;
        }
        let (reason, message) = match end {
            KeptEnd::Completed => (TerminationReason::Completed, MSG_COMPLETED_BEFORE),
            KeptEnd::Stopped => (TerminationReason::Stopped, MSG_KEPT_STOPPED),
        };
        slot.state = Remembered::Done(Terminated {
            exit_code: 0,
            signal: None,
            reason,
            message: message.to_string(),
            started_at: None,
            finished_at: now,
        });
        slot.runs = slot.runs.max(1);
    }
}

/// [`Recollection`] as written, borrowing the event list.
#[derive(serde::Serialize, Debug)]
pub struct RecollectionRef<'a> {
    pub pods: Vec<PodMemory>,
    pub(super) events: &'a EventLog,
}

/// One pod.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct PodMemory {
    pub name: String,
    #[serde(with = "crate::monotime")]
    pub created_at: Time,
    pub(super) stage: Stage,
    /// When its run under way began (`active_deadline_seconds` counts from it, and `history`
    /// records the run by it); absent from a record written before this field.
    #[serde(default, with = "crate::monotime::opt")]
    pub(super) active_since: Option<Time>,
    pub containers: Vec<SlotMemory>,
    /// A scheduled pod's schedule: the triggers decided, the last one run, suspended or not
    /// (absent from a record written before this field, and for a pod without a schedule).
    #[serde(default)]
    pub(super) schedule: Option<ScheduleMemory>,
    /// The ended runs it kept (`history`; absent from a record written before this field).
    #[serde(default)]
    pub(super) history: super::history::RunHistory,
}

/// A schedule as the next vigil takes it back: its state, and the pattern and zone it is of
/// (a schedule changed since is taken on afresh).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub(super) struct ScheduleMemory {
    pub cron: String,
    pub time_zone: Option<String>,
    pub state: super::schedule::ScheduleState,
}

/// One container.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub struct SlotMemory {
    pub name: String,
    pub init: bool,
    /// The runtime's hash of its definition (the definition now must hash the same).
    pub spec: u64,
    pub restart_count: u32,
    pub(super) auto_restarts: u32,
    pub(super) runs: u32,
    pub(super) backoff: BackoffState,
    pub last_state: Option<Terminated>,
    pub(super) state: Remembered,
}

/// A container's state, as far as the next vigil cares.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
pub(super) enum Remembered {
    /// Not started in its pod's life yet.
    Waiting,
    /// Running or being created (the next vigil adopts it, or learns it has gone).
    Active {
        #[serde(with = "crate::monotime::opt")]
        started_at: Option<Time>,
    },
    /// Waiting out a back-off until `until`.
    BackOff {
        #[serde(with = "crate::monotime")]
        until: Time,
        delay: Duration,
    },
    /// Ended, and nothing restarts it on its own.
    Done(Terminated),
}

/// What [`super::Supervisor::recall`] did with one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recalled {
    /// Its history only (it was adopted, or starts as usual).
    History,
    /// Kept ended, as it was (why it had ended).
    Ended(TerminationReason),
    /// Waits out the rest of its back-off.
    BackOff,
    /// It had gone while no vigil watched it (status unknown) and starts again now.
    GoneRestarted,
    /// It had gone while no vigil watched it (status unknown) and stays ended
    /// (`restart_policy = "Never"`).
    GoneEnded,
}

impl Recalled {
    /// A phrase for vigil's log.
    pub fn describe(&self) -> String {
        match self {
            Recalled::History => "restart count and last state kept".to_string(),
            Recalled::Ended(TerminationReason::Completed) => {
                "kept completed, as it was".to_string()
            }
            Recalled::Ended(TerminationReason::Stopped) => {
                "kept stopped, as an operator left it".to_string()
            }
            Recalled::Ended(r) => format!("kept ended ({}), as it was", r.as_str()),
            Recalled::BackOff => "waits out the rest of its back-off".to_string(),
            Recalled::GoneRestarted => {
                "ended while no vigil watched it (exit status unknown); starts again".to_string()
            }
            Recalled::GoneEnded => "ended while no vigil watched it (exit status unknown); not \
                                    restarted (restart_policy Never)"
                .to_string(),
        }
    }
}
