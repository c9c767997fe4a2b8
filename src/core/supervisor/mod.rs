//! The supervisor state machine: all pods of one `vigil run`.
//!
//! Owns the decisions that span pods — dependency gating, shutdown order and the exit code,
//! reload (which pods changed, were added or removed) and operator commands — plus the action
//! queue and the event log. Per-container lifecycle lives in `pod`. Every slot knows its own
//! deadlines (back-off, kill, probe schedule and timeouts); the supervisor keeps an index of
//! them (`timers`: a heap, so a loop turn does not scan every slot) and re-reads the deadlines
//! of every slot an input, timeout or command may have changed at the end of that call
//! (`refresh_touched`, which every `&mut self` entry point that changes a slot must end
//! with; a probe result that published nothing only re-reads its pod's deadlines). Tests
//! check after every call that the index equals a scan of all slots. No I/O, no clock.
//!
//! This file holds the state and its construction; each family of methods (listed on
//! [`Supervisor`]) is an `impl Supervisor` in its own file.

mod adoption;
mod commands;
mod drive;
mod follow;
mod index;
mod query;
mod refresh;
mod rollouts;
mod schedules;

use refresh::waiting_for;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::events::EventLog;
use super::pod::{
    KILL_FORCED, KILL_SHUTDOWN_TIMEOUT, MSG_DEFINITION_CHANGED, MSG_STOP_REQUEST, Next, Out, Pod,
    Slot, Stage, StopCause,
};
use super::probes::PhaseSpread;
use super::schedule::{self, WallClock};
use super::timers::Timers;
use super::*;
use crate::config::spec::{Config, ContainerSpec, DependencyCondition, PodSpec, ShutdownOn};

#[derive(serde::Serialize, serde::Deserialize, Debug)]
struct Shutdown {
    /// After this, everything still running is killed.
    #[serde(with = "crate::monotime")]
    deadline: Time,
    deadline_fired: bool,
    /// A `Kill` was needed: exit code 1.
    unclean: bool,
}

/// All pods of one `vigil run`, driven by the runtime.
///
/// # How it is driven
///
/// The runtime owns the clock and the I/O; this type owns the decisions. Its methods come in
/// families, one file each:
///
/// - **Creation** (this file): [`Supervisor::new`] or [`Supervisor::new_refusing`] queue the
///   first spawns; a supervisor handed over by an upgrade is deserialised and then
///   [`Supervisor::after_handoff`] is called before anything else.
/// - **Taking over at start** (`adoption.rs`): after creation and before the first action is
///   drained, in this order: [`Supervisor::begin_event_history`] and
///   [`Supervisor::recall_events`], [`Supervisor::adopt`] and [`Supervisor::output_lost`] for
///   each run found running, [`Supervisor::recall`], then [`Supervisor::keep_ended`]. While
///   running, [`Supervisor::recollection`] and [`Supervisor::kept_ends`] say what the next
///   vigil would take back.
/// - **Driving** (`drive.rs`, `commands.rs`): [`Supervisor::handle`] for each input the
///   runtime observed, [`Supervisor::handle_timeout`] once the time
///   [`Supervisor::poll_timeout`] returned has come, [`Supervisor::command`] for an
///   operator's command. Each takes the loop turn's `now`, which must not go backwards from
///   one call to the next.
/// - **Collecting** (`drive.rs`): after any call of the family above, the runtime takes
///   the actions with [`Supervisor::poll_action`] until `None` (or stops early after
///   [`Supervisor::peek_action`] and takes the rest, in order, in a later turn: a container
///   stays `Creating` until its `Spawned` or `SpawnFailed`, whenever that comes), then asks
///   [`Supervisor::poll_timeout`] when to wake it. Neither answer changes except through a
///   `&mut self` call.
/// - **Reading** (`query.rs`): [`Supervisor::pods`], [`Supervisor::pod`] and the others take
///   `&self` and may be called at any time; they read no clock and need no `now`.
///
/// Every `&mut self` entry point that may change a slot ends by re-deriving what spans pods
/// and re-reading the deadlines it touched (`refresh.rs`; the indexes are in `index.rs`), so
/// `poll_timeout` is right after each call.
#[derive(serde::Serialize, serde::Deserialize, Debug)]
pub struct Supervisor {
    /// In config order; pods being removed by a reload come last until they have stopped.
    pods: Vec<Pod>,
    #[serde(skip)]
    actions: VecDeque<Action>,
    events: EventLog,
    next_key: u32,
    probe_seq: u64,
    shutdown_timeout: Duration,
    shutdown: Option<Shutdown>,
    /// A pod's `shutdown_on` began the shutdown: vigil exits with this code (the pod's).
    #[serde(default)]
    exit_with: Option<i32>,
    exit_emitted: bool,
    /// Target for `Out::unclean` while not shutting down (ignored).
    scratch_unclean: bool,
    /// Every slot's next deadline, earliest first (derived from `pods`: not handed over,
    /// rebuilt by [`Supervisor::after_handoff`]).
    #[serde(skip)]
    timers: Timers,
    /// Where each container key lives in `pods` (rebuilt when `pods` changes shape).
    #[serde(skip)]
    where_is: HashMap<ContainerKey, Loc>,
    /// The pods with a deadline of their own (`active_deadline_seconds`, `schedule`), by
    /// index into `pods` (rebuilt with `where_is`): only these are asked for one, so a config
    /// without such pods costs nothing per loop turn.
    #[serde(skip)]
    timed: Vec<usize>,
    /// The wall clock, as the shell last read it ([`Supervisor::set_wall_clock`]).
    #[serde(skip)]
    wall: WallClock,
    /// When the schedules want a look next (`core::schedule`): the earliest trigger or
    /// held-back deadline, and at least once a minute while a schedule runs, so a wall clock
    /// set forward is seen.
    #[serde(skip)]
    schedule_wake: Option<Time>,
    /// Containers whose probes began within the last millisecond or so (transient).
    #[serde(skip)]
    phase_spread: PhaseSpread,
    /// Runs adopted from an earlier vigil, and those of them whose output was lost, since
    /// this vigil started (an upgrade carries them on: `vigil_adopted_runs_total`,
    /// `vigil_output_lost_runs_total`).
    #[serde(default)]
    adopted_runs: u64,
    #[serde(default)]
    output_lost_runs: u64,
    /// The last rollout of each pod with replicas that had one (`core::rollout`).
    #[serde(default)]
    rollouts: Vec<super::rollout::Rollout>,
}

/// Where a container key lives.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy)]
struct Loc {
    pod: usize,
    init: bool,
    index: usize,
}

impl Loc {
    /// The slot this location names in its pod (`pod` is `pods[self.pod]`).
    fn slot(self, pod: &Pod) -> &Slot {
        let list = if self.init { &pod.init } else { &pod.main };
        &list[self.index]
    }

    fn slot_mut(self, pod: &mut Pod) -> &mut Slot {
        let list = if self.init {
            &mut pod.init
        } else {
            &mut pod.main
        };
        &mut list[self.index]
    }
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Start,
    Stop,
    Restart,
}

impl Supervisor {
    /// A supervisor for `config`, starting its pods at `now` (actions queue up).
    pub fn new(config: &Config, now: Time) -> Self {
        Self::new_refusing(config, now, &[])
    }

    /// [`Supervisor::new`] with some pods refused at start, each with why (`--allow-missing-
    /// controllers`: limits this host cannot give): they never start and are `Failed`, with a
    /// Warning `FailedCreatePodContainer` event per container (kubelet `kubelet.go` SyncPod,
    /// when the pod's cgroup cannot be made); the others start as usual.
    pub fn new_refusing(config: &Config, now: Time, refused: &[(String, String)]) -> Self {
        let mut sup = Supervisor {
            pods: Vec::new(),
            actions: VecDeque::new(),
            events: EventLog::default(),
            next_key: 0,
            probe_seq: 0,
            shutdown_timeout: config.supervisor.shutdown_timeout,
            shutdown: None,
            exit_with: None,
            exit_emitted: false,
            scratch_unclean: false,
            timers: Timers::default(),
            where_is: HashMap::new(),
            timed: Vec::new(),
            wall: WallClock::default(),
            schedule_wake: None,
            phase_spread: PhaseSpread::default(),
            adopted_runs: 0,
            output_lost_runs: 0,
            rollouts: Vec::new(),
        };
        for spec in &config.pods {
            let pod = Pod::new(spec.clone(), now, &mut sup.next_key);
            sup.pods.push(pod);
        }
        for (name, why) in refused {
            let (pods, mut out) = sup.split(now);
            if let Some(pod) = pods.iter_mut().find(|p| p.name() == name) {
                pod.refuse(why, &mut out);
            }
        }
        sup.reindex();
        sup.refresh(now);
        sup
    }

    /// A supervisor carried across `vigil upgrade` (deserialised from the handoff state) is
    /// ready to go on: the probe attempts that were in flight in the old process (whose
    /// results will never come) are run again. Everything else — phases, restart counts,
    /// back-off deadlines, probe schedules, events — continues as it was.
    pub fn after_handoff(&mut self) {
        for pod in &mut self.pods {
            for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                slot.requeue_probes();
            }
        }
        // The deadline index and the key map are derived state, not handed over.
        self.reindex();
        self.reschedule(None);
    }
}
