//! The supervisor state machine: all pods of one `vigil run`.
//!
//! Owns the decisions that span pods — dependency gating, shutdown order and the exit code,
//! reload (which pods changed, were added or removed) and operator commands — plus the action
//! queue and the event log. Per-container lifecycle lives in `pod`. Every slot knows its own
//! deadlines (back-off, kill, probe schedule and timeouts); the supervisor keeps an index of
//! them (`timers`: a heap, so a loop turn does not scan every slot) and re-reads the deadlines
//! of every slot an input, timeout or command may have changed at the end of that call
//! (`refresh_touched`, which every `&mut self` entry point that changes a slot must end
//! with; a probe result that published nothing only re-reads its pod's deadlines). Tests check after every call that the index equals a scan of all slots. No I/O, no
//! clock.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::events::EventLog;
use super::pod::{
    KILL_FORCED, KILL_SHUTDOWN_TIMEOUT, MSG_DEFINITION_CHANGED, MSG_STOP_REQUEST, Next, Out, Pod,
    Slot, Stage, StopCause,
};
use super::probes::PhaseSpread;
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
    /// The pods with a deadline of their own (`active_deadline_seconds`), by index into
    /// `pods` (rebuilt with `where_is`): only these are asked for one, so a config without
    /// such pods costs nothing per loop turn.
    #[serde(skip)]
    timed: Vec<usize>,
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
}

fn not_found(message: String) -> CommandError {
    CommandError {
        kind: CommandErrorKind::NotFound,
        message,
    }
}

fn invalid(message: String) -> CommandError {
    CommandError {
        kind: CommandErrorKind::NotApplicable,
        message,
    }
}

fn shutting_down() -> CommandError {
    CommandError {
        kind: CommandErrorKind::ShuttingDown,
        message: "the supervisor is shutting down".to_string(),
    }
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
            phase_spread: PhaseSpread::default(),
            adopted_runs: 0,
            output_lost_runs: 0,
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

    fn split(&mut self, now: Time) -> (&mut Vec<Pod>, Out<'_>) {
        let shutting_down = self.shutdown.is_some();
        let unclean = match &mut self.shutdown {
            Some(s) => &mut s.unclean,
            None => &mut self.scratch_unclean,
        };
        (
            &mut self.pods,
            Out {
                now,
                actions: &mut self.actions,
                events: &mut self.events,
                probe_seq: &mut self.probe_seq,
                phase_spread: &mut self.phase_spread,
                shutting_down,
                unclean,
            },
        )
    }

    fn locate(&self, key: ContainerKey) -> Option<Loc> {
        self.where_is.get(&key).copied()
    }

    /// Rebuilds `where_is` after `pods` changed shape (a reload, a pod replaced or removed)
    /// and forgets the deadlines of containers that are gone.
    fn reindex(&mut self) {
        self.where_is.clear();
        for (p, pod) in self.pods.iter().enumerate() {
            for (i, s) in pod.init.iter().enumerate() {
                let loc = Loc {
                    pod: p,
                    init: true,
                    index: i,
                };
                self.where_is.insert(s.key, loc);
            }
            for (i, s) in pod.main.iter().enumerate() {
                let loc = Loc {
                    pod: p,
                    init: false,
                    index: i,
                };
                self.where_is.insert(s.key, loc);
            }
        }
        let where_is = &self.where_is;
        self.timers.retain(|k| where_is.contains_key(&k));
        self.timed = (self.pods.iter().enumerate())
            .filter(|(_, p)| p.spec.active_deadline.is_some())
            .map(|(i, _)| i)
            .collect();
    }

    /// The earliest deadline of a pod's own (`active_deadline_seconds`), if any.
    fn next_pod_deadline(&self) -> Option<Time> {
        (self.timed.iter())
            .filter_map(|&p| self.pods.get(p)?.active_deadline())
            .min()
    }

    /// Re-reads the deadlines of the slots of `pods` (`None`: of every pod) into the index.
    fn reschedule(&mut self, pods: Option<&[usize]>) {
        let timers = &mut self.timers;
        let mut one = |pod: &Pod| {
            for s in pod.slots() {
                timers.set(s.key, s.next_deadline());
            }
        };
        match pods {
            None => self.pods.iter().for_each(&mut one),
            Some(ps) => ps.iter().filter_map(|&p| self.pods.get(p)).for_each(one),
        }
        self.timers.tidy();
        #[cfg(test)]
        self.check_timers();
    }

    /// The index holds exactly every slot's deadline (tests only: a scan of every slot).
    #[cfg(test)]
    fn check_timers(&self) {
        let mut n = 0;
        for pod in &self.pods {
            for s in pod.slots() {
                let want = s.next_deadline();
                assert_eq!(
                    self.timers.get(s.key),
                    want,
                    "deadline index out of date for {}/{}",
                    pod.name(),
                    s.name()
                );
                n += usize::from(want.is_some());
                assert!(matches!(self.locate(s.key), Some(l) if l.pod < self.pods.len()));
            }
        }
        assert_eq!(
            self.timers.len(),
            n,
            "deadline index holds containers that are gone"
        );
        let scan = self
            .pods
            .iter()
            .flat_map(|p| p.slots())
            .filter_map(|s| s.next_deadline())
            .min();
        assert_eq!(
            self.timers.next(),
            scan,
            "deadline index disagrees with a scan"
        );
    }

    /// Feed one input. Inputs for unknown keys or stale generations are dropped.
    pub fn handle(&mut self, now: Time, input: Input) {
        let (key, generation) = match &input {
            Input::Spawned {
                key, generation, ..
            }
            | Input::SpawnFailed {
                key, generation, ..
            }
            | Input::Exited {
                key, generation, ..
            }
            | Input::ProbeResult {
                key, generation, ..
            }
            | Input::OomKills {
                key, generation, ..
            } => (*key, *generation),
        };
        let Some(loc) = self.locate(key) else {
            return;
        };
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[loc.pod];
        let name = pod.spec.name.clone();
        let slot = loc.slot_mut(pod);
        if slot.generation != generation {
            return;
        }
        // Whether the slot's state may have changed beyond its probe bookkeeping.
        let changed = match input {
            Input::Spawned { pid, .. } => {
                slot.on_spawned(pid, &name, &mut out);
                true
            }
            Input::SpawnFailed { message, .. } => {
                slot.on_spawn_failed(message, &name, &mut out);
                true
            }
            Input::Exited { exit, .. } => {
                slot.on_exited(&exit, &name, &mut out);
                true
            }
            Input::ProbeResult {
                kind,
                seq,
                outcome,
                duration,
                ..
            } => slot.on_probe_result(kind, seq, outcome, duration, &name, &mut out),
            Input::OomKills {
                delta, memory_max, ..
            } => {
                slot.on_oom_kills(delta, memory_max, &name, &mut out);
                true
            }
        };
        if loc.init {
            pod.after_init(loc.index, &mut out);
        }
        pod.drive_sidecars(&mut out);
        if changed || self.shutdown.is_some() {
            self.refresh_touched(now, Some(&[loc.pod]));
        } else {
            // A probe result that published nothing (the common case: the same result again)
            // moves no condition, dependency or stop: only the probe's next deadline, so the
            // passes over every pod in `refresh_touched` are skipped (at 5,000 probes/s over
            // 1,000 pods they were a third of vigil's own CPU).
            self.reschedule(Some(&[loc.pod]));
        }
    }

    /// Fire every deadline at or before `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        if let Some(sd) = &mut self.shutdown
            && !sd.deadline_fired
            && sd.deadline <= now
        {
            sd.deadline_fired = true;
            let (pods, mut out) = self.split(now);
            for pod in pods.iter_mut() {
                let name = &pod.spec.name;
                for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                    slot.kill_now(StopCause::Shutdown, KILL_SHUTDOWN_TIMEOUT, name, &mut out);
                }
            }
        }
        let all = self.shutdown.as_ref().is_some_and(|sd| sd.deadline <= now);
        // Pods whose `active_deadline_seconds` ran out (a shutdown stops them anyway).
        let expired: Vec<usize> = match self.shutdown {
            Some(_) => Vec::new(),
            None => (self.timed.iter().copied())
                .filter(|&p| self.pods[p].active_deadline().is_some_and(|t| t <= now))
                .collect(),
        };
        // The pods with a slot due, in config order (the order a scan would fire them in).
        let mut touched: Vec<usize> = (self.timers.pop_due(now).into_iter())
            .filter_map(|k| self.locate(k).map(|l| l.pod))
            .chain(expired.iter().copied())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let (pods, mut out) = self.split(now);
        let mut changed = !expired.is_empty();
        for &p in &expired {
            pods[p].exceed_deadline(&mut out);
        }
        for &p in &touched {
            let pod = &mut pods[p];
            let due = |s: &Slot| s.next_deadline().is_some_and(|t| t <= now);
            let name = pod.spec.name.clone();
            for i in 0..pod.init.len() {
                if due(&pod.init[i]) {
                    changed |= pod.init[i].on_timeout(&name, &mut out);
                    pod.after_init(i, &mut out);
                }
            }
            for slot in pod.main.iter_mut() {
                if due(slot) {
                    changed |= slot.on_timeout(&name, &mut out);
                }
            }
            pod.drive_sidecars(&mut out);
        }
        if changed || all || self.shutdown.is_some() {
            self.refresh_touched(now, (!all).then_some(&touched[..]));
        } else {
            // Only probe attempts started or timed out without a new result (as for an
            // unchanged probe result in `handle`): nothing but their deadlines moved, so the
            // passes over every pod in `refresh_touched` are skipped (at 5,000 probes/s over
            // 1,000 pods they were a fifth of vigil's own CPU).
            self.reschedule(Some(&touched));
        }
    }

    /// The earliest pending deadline, if any.
    pub fn poll_timeout(&self) -> Option<Time> {
        let shutdown = self
            .shutdown
            .as_ref()
            .filter(|s| !s.deadline_fired && !self.exit_emitted)
            .map(|s| s.deadline);
        (self.timers.next().into_iter())
            .chain(shutdown)
            .chain(self.next_pod_deadline())
            .min()
    }

    /// Next action to execute.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next action, left queued: a runtime that executes only so many spawns per loop turn
    /// stops before the next one and takes the rest, in order, in the next turn. Nothing in the
    /// core depends on how soon an action runs: a container stays `Creating` from its `Spawn`
    /// until `Spawned`/`SpawnFailed`, whenever those come.
    pub fn peek_action(&self) -> Option<&Action> {
        self.actions.front()
    }

    /// Whether actions are queued (the runtime then polls without waiting).
    pub fn has_actions(&self) -> bool {
        !self.actions.is_empty()
    }

    /// Snapshot of every pod, in config order (pods still stopping after a reload removed
    /// them come last).
    pub fn pods(&self, now: Time) -> Vec<PodStatus> {
        let _ = now;
        self.pods.iter().map(Pod::status).collect()
    }

    /// The names of every pod, in [`Supervisor::pods`]' order (a metrics scrape built over
    /// several turns walks them with [`Supervisor::pod_at`]).
    pub fn pod_names(&self) -> Vec<String> {
        self.pods.iter().map(|p| p.name().to_string()).collect()
    }

    /// Snapshot of the pod at `index` in [`Supervisor::pods`]' order, if it is named `name`
    /// (pods may come and go between turns: a reload), else of the pod named `name`.
    pub fn pod_at(&self, index: usize, name: &str, now: Time) -> Option<PodStatus> {
        match self.pods.get(index) {
            Some(p) if p.name() == name => Some(p.status()),
            _ => self.pod(name, now),
        }
    }

    /// Snapshot of one pod.
    pub fn pod(&self, name: &str, now: Time) -> Option<PodStatus> {
        let _ = now;
        self.pods.iter().find(|p| p.name() == name).map(Pod::status)
    }

    /// Events with `seq > after`, oldest first.
    pub fn events_since(&self, after: u64) -> Vec<Event> {
        self.events.since(after)
    }

    /// The newest event `seq` (0 before any event): a follower starts from here.
    pub fn last_event_seq(&self) -> u64 {
        self.events.last_seq()
    }

    /// A fresh vigil's event history begins, named `id` (unique per start of vigil): what
    /// a follower resumes by, with a `seq` (see `events.rs`). An upgrade's core keeps its own.
    pub fn begin_event_history(&mut self, id: u64) {
        self.events.begin_history(id);
    }

    /// The event history's id (0 when none was begun).
    pub fn event_history(&self) -> u64 {
        self.events.history()
    }

    /// Where a follower that last saw `seq` of history `history` resumes.
    pub fn resume_events(&self, history: u64, seq: u64) -> super::events::Resume {
        self.events.resume(history, seq)
    }

    /// Whether a shutdown has begun (new starts and restarts are refused).
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_some()
    }

    /// `(pod, container)` names of a key, for logs and messages.
    pub fn container_name(&self, key: ContainerKey) -> Option<(String, String)> {
        let loc = self.locate(key)?;
        let pod = &self.pods[loc.pod];
        let slot = loc.slot(pod);
        Some((pod.name().to_string(), slot.name().to_string()))
    }

    /// The key of `pod/container` (init or regular), if it exists.
    pub fn container_key(&self, pod: &str, container: &str) -> Option<ContainerKey> {
        self.pods
            .iter()
            .find(|p| p.name() == pod)?
            .slots()
            .find(|s| s.name() == container)
            .map(|s| s.key)
    }

    /// The restart count of `key`'s container (recorded by the runtime so that a vigil
    /// restarted after a crash can adopt the container with it).
    pub fn restart_count(&self, key: ContainerKey) -> Option<u32> {
        let loc = self.locate(key)?;
        let pod = &self.pods[loc.pod];
        let slot = loc.slot(pod);
        Some(slot.restart_count)
    }

    /// Takes a container an earlier vigil left running (found by the runtime at start, its
    /// definition unchanged) in as Running with `pid`, started at `started_at`, with the
    /// restart count that vigil recorded; no spawn happens and the `Spawn` queued for it is
    /// dropped. Only before anything of its pod ran here (call it right after
    /// [`Supervisor::new`], before draining actions), only for a regular container or a
    /// sidecar, and not during a shutdown. Its pod had begun under the earlier vigil, so it
    /// goes straight to its regular containers (no dependency wait, init containers recorded
    /// as completed then: [`Pod::skip_to_main_for_adoption`]). Returns the run's generation,
    /// or `None` when it cannot be adopted (the caller then kills it; the container starts as
    /// usual).
    pub fn adopt(
        &mut self,
        now: Time,
        key: ContainerKey,
        pid: u32,
        started_at: Time,
        restart_count: u32,
    ) -> Option<Generation> {
        let loc = self.locate(key)?;
        let pod = &self.pods[loc.pod];
        if self.shutdown.is_some() || (loc.init && !pod.init[loc.index].sidecar()) {
            return None;
        }
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[loc.pod];
        let name = pod.spec.name.clone();
        let mut dropped = pod.skip_to_main_for_adoption(&mut out)?;
        let slot = loc.slot_mut(pod);
        let adopted = slot.adopt(pid, started_at, restart_count, &name, &mut out);
        let generation = match adopted {
            Some(g) => {
                dropped.push(key);
                g
            }
            None => {
                self.actions
                    .retain(|a| !matches!(a, Action::Spawn { key: k, .. } if dropped.contains(k)));
                self.refresh_touched(now, Some(&[loc.pod]));
                return None;
            }
        };
        self.actions
            .retain(|a| !matches!(a, Action::Spawn { key: k, .. } if dropped.contains(k)));
        self.refresh_touched(now, Some(&[loc.pod]));
        self.adopted_runs += 1;
        Some(generation)
    }

    /// The adopted run `generation` of `key` lost its output pipes in the crash of the
    /// earlier vigil (no output holder had them): an `OutputLost` Warning event, the mark in
    /// its status, and with `restart` (`on_output_lost = "restart"`) a restart at once as an
    /// operator's would be. False when that run is not running.
    pub fn output_lost(
        &mut self,
        now: Time,
        key: ContainerKey,
        generation: Generation,
        restart: bool,
    ) -> bool {
        let Some(loc) = self.locate(key) else {
            return false;
        };
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[loc.pod];
        let name = pod.spec.name.clone();
        let slot = loc.slot_mut(pod);
        if !slot.output_lost(generation, restart, &name, &mut out) {
            return false;
        }
        self.output_lost_runs += 1;
        self.refresh_touched(now, Some(&[loc.pod]));
        true
    }

    /// Runs adopted from an earlier vigil, and runs whose output was lost in its crash.
    pub fn adoption_counts(&self) -> (u64, u64) {
        (self.adopted_runs, self.output_lost_runs)
    }

    /// What the next vigil takes back if this one dies without a shutdown ([`super::recall`]):
    /// the runtime serialises it into its state file. `spec_of` hashes a container's
    /// definition as the runtime does.
    pub fn recollection(
        &self,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
    ) -> super::recall::RecollectionRef<'_> {
        super::recall::RecollectionRef {
            pods: self
                .pods
                .iter()
                .filter(|p| p.next == Next::Keep)
                .map(|p| p.memory(spec_of))
                .collect(),
            events: &self.events,
        }
    }

    /// At start, before anything else is recorded (right after [`Supervisor::new`]): the
    /// event list an earlier vigil left takes the place of this one's, and what this one
    /// recorded so far follows it. Returns the last `seq` of the earlier list (its events
    /// were logged by that vigil).
    pub fn recall_events(&mut self, memory: &mut super::recall::Recollection) -> u64 {
        let fresh = self
            .events
            .adopt_earlier(std::mem::take(&mut memory.events));
        let last = self.events.last_seq();
        for e in fresh.since(0) {
            self.events
                .record(e.last, e.kind, &e.reason, e.object, e.message);
        }
        last
    }

    /// At start, after the runtime adopted what it could ([`Supervisor::adopt`]) and before
    /// draining actions: takes back what an earlier vigil that died knew
    /// ([`super::recall`]). `spec_of` hashes a container's definition now (a container whose
    /// hash differs from the remembered one starts afresh). Returns what was done, per
    /// `pod/container`.
    pub fn recall(
        &mut self,
        now: Time,
        memory: &super::recall::Recollection,
        spec_of: &dyn Fn(ContainerKey, &ContainerSpec) -> u64,
    ) -> Vec<(String, super::recall::Recalled)> {
        if self.shutdown.is_some() {
            return Vec::new();
        }
        let mut done = Vec::new();
        let (pods, mut out) = self.split(now);
        for pod in pods.iter_mut() {
            let Some(m) = memory.pods.iter().find(|m| m.name == pod.name()) else {
                continue;
            };
            let name = pod.name().to_string();
            for (container, r) in pod.recall(m, spec_of, &mut out) {
                done.push((format!("{name}/{container}"), r));
            }
        }
        self.refresh(now);
        done
    }

    /// Every regular container that has ended for good in a way a vigil restarted after a
    /// crash keeps (stopped by an operator, or completed and not to be restarted), for the
    /// runtime to record.
    /// Each as `(key, pod, container, how)`.
    pub fn kept_ends(&self) -> Vec<(ContainerKey, &str, &str, KeptEnd)> {
        self.pods
            .iter()
            .flat_map(|p| {
                p.main
                    .iter()
                    .filter_map(|s| Some((s.key, p.name(), s.name(), s.kept_end()?)))
            })
            .collect()
    }

    /// At start (right after [`Supervisor::new`], before draining actions): the regular
    /// container `key` stays ended as it was under an earlier vigil that died — its queued
    /// first spawn is dropped and it shows `Stopped` or `Completed` (`start` starts it as
    /// usual). Only in a pod whose regular containers are starting now (not waiting for
    /// dependencies or init containers, which would start it later); `false` when it cannot
    /// be kept.
    pub fn keep_ended(&mut self, now: Time, key: ContainerKey, end: KeptEnd) -> bool {
        let Some(loc) = self.locate(key) else {
            return false;
        };
        let pod = &mut self.pods[loc.pod];
        if loc.init || self.shutdown.is_some() || pod.stage != Stage::Main {
            return false;
        }
        if !pod.main[loc.index].keep_ended(now, end) {
            return false;
        }
        self.actions
            .retain(|a| !matches!(a, Action::Spawn { key: k, .. } if *k == key));
        self.refresh_touched(now, Some(&[loc.pod]));
        true
    }

    /// Apply an operator command; `Ok(message)` is a short human summary.
    pub fn command(&mut self, now: Time, command: Command) -> Result<String, CommandError> {
        let result = match command {
            Command::Start { pod, container } => {
                self.operate(now, Op::Start, &pod, container, false)
            }
            Command::StartIgnoringDependencies { pod } => {
                self.operate(now, Op::Start, &pod, None, true)
            }
            Command::Stop { pod, container } => self.operate(now, Op::Stop, &pod, container, false),
            Command::Restart { pod, container } => {
                self.operate(now, Op::Restart, &pod, container, false)
            }
            Command::Shutdown { force } => Ok(self.begin_shutdown(now, force)),
            Command::Reload(config) => self.reload(now, *config),
        };
        self.refresh(now);
        result
    }

    /// An operator command on a pod or one of its containers; `ignore_deps` (a whole-pod
    /// start only) starts the pod now whatever its `depends_on` say.
    fn operate(
        &mut self,
        now: Time,
        op: Op,
        pod_name: &str,
        container: Option<String>,
        ignore_deps: bool,
    ) -> Result<String, CommandError> {
        if self.shutdown.is_some() && op != Op::Stop {
            return Err(shutting_down());
        }
        let Some(p) = self
            .pods
            .iter()
            .position(|p| p.name() == pod_name && p.next != Next::Remove)
        else {
            return Err(not_found(format!("pod {pod_name:?} not found")));
        };
        let unmet = self.unmet_dependencies(&self.pods[p]);
        if op != Op::Stop
            && let Some(why) = &self.pods[p].refused
        {
            return Err(invalid(format!(
                "pod {pod_name} was refused at start and cannot run: {why}"
            )));
        }
        let (pods, mut out) = self.split(now);
        let pod = &mut pods[p];
        let request = |then_start| StopCause::Request {
            message: MSG_STOP_REQUEST.to_string(),
            then_start,
        };
        let Some(cname) = container else {
            // The whole pod.
            let name = pod.spec.name.clone();
            return Ok(match op {
                Op::Stop => {
                    pod.restart_pending = false;
                    pod.awaiting = false;
                    if pod.init.iter().chain(pod.main.iter()).all(|s| s.is_done()) {
                        return Ok(format!("pod {name} is already stopped"));
                    }
                    if pod.stage == Stage::Waiting {
                        pod.held = true;
                    }
                    pod.stop_all(request(false), false, &mut out);
                    format!("stopping pod {name}")
                }
                _ if pod.restart_pending => format!("pod {name} is already restarting"),
                Op::Restart if pod.stage != Stage::Waiting => {
                    // As a new pod would: everything stops, then the pod waits for its
                    // dependencies and runs its init containers again (`refresh_touched`).
                    pod.restart_pending = true;
                    pod.awaiting = false;
                    pod.held = false;
                    if !pod.at_rest() {
                        pod.stop_all(request(false), false, &mut out);
                    }
                    format!("restarting pod {name}")
                }
                Op::Start | Op::Restart => {
                    pod.held = false;
                    let verb = if op == Op::Start {
                        "starting"
                    } else {
                        "restarting"
                    };
                    if ignore_deps {
                        // Now, as if they were met: a pod not begun begins (init containers
                        // first), one at rest resumes at its stage.
                        pod.resume(&mut out);
                        if unmet.is_empty() {
                            format!("{verb} pod {name}")
                        } else {
                            let what: Vec<&str> = unmet.iter().map(|(w, _)| w.as_str()).collect();
                            format!("{verb} pod {name} without waiting for {}", what.join(", "))
                        }
                    } else if pod.stage == Stage::Waiting || (pod.at_rest() && !unmet.is_empty()) {
                        // `start_ready_pods` begins or resumes it once its dependencies are met.
                        pod.await_deps();
                        if unmet.is_empty() {
                            format!("{verb} pod {name}")
                        } else {
                            format!("{verb} pod {name}: {}", waiting_for(&unmet))
                        }
                    } else {
                        pod.resume(&mut out);
                        format!("{verb} pod {name}")
                    }
                }
            });
        };
        let name = pod.spec.name.clone();
        let stage = pod.stage;
        let (init, index) = if let Some(i) = pod.init.iter().position(|s| s.name() == cname) {
            (true, i)
        } else if let Some(i) = pod.main.iter().position(|s| s.name() == cname) {
            (false, i)
        } else {
            return Err(not_found(format!(
                "container {cname:?} not found in pod {pod_name:?}"
            )));
        };
        let sidecar = init && pod.init[index].sidecar();
        // A sidecar may run from its own step on; a plain init container only at its step.
        let may_start = if sidecar {
            matches!(stage, Stage::Init(i) if i >= index) || stage == Stage::Main
        } else if init {
            stage == Stage::Init(index)
        } else {
            stage == Stage::Main
        };
        let starts = op != Op::Stop
            && may_start
            && !(if init {
                &pod.init[index]
            } else {
                &pod.main[index]
            })
            .is_active();
        if starts {
            // What a container runs beside (the sidecars before it) runs again too.
            pod.revive_sidecars(if init { index } else { pod.init.len() }, &mut out);
        }
        let slot = if init {
            &mut pod.init[index]
        } else {
            &mut pod.main[index]
        };
        if op == Op::Stop {
            if slot.is_done() {
                return Ok(format!("{name}/{cname} is already stopped"));
            }
            slot.begin_stop(request(false), &name, &mut out);
            return Ok(format!("stopping {name}/{cname}"));
        }
        if op == Op::Restart && slot.is_active() {
            slot.begin_stop(request(true), &name, &mut out);
            return Ok(format!("restarting {name}/{cname}"));
        }
        if !may_start {
            return Err(invalid(if stage == Stage::Waiting {
                format!(
                    "{name}/{cname} cannot start before its pod has started (start the pod: \
                         it waits for its dependencies)"
                )
            } else if pod.restart_pending {
                format!("{name}/{cname} cannot start while its pod is restarting")
            } else if init && !matches!(stage, Stage::Init(i) if i < index) {
                format!("init container {name}/{cname} is not the pod's current step")
            } else {
                format!(
                    "{name}/{cname} cannot start before the pod's init containers have completed"
                )
            }));
        }
        if slot.start_fresh(&name, &mut out) {
            Ok(format!("starting {name}/{cname}"))
        } else {
            Ok(format!("{name}/{cname} is already running"))
        }
    }

    fn begin_shutdown(&mut self, now: Time, force: bool) -> String {
        if self.shutdown.is_none() {
            self.shutdown = Some(Shutdown {
                deadline: crate::instant::saturating_add(now, self.shutdown_timeout),
                deadline_fired: false,
                unclean: false,
            });
        }
        if force {
            let (pods, mut out) = self.split(now);
            for pod in pods.iter_mut() {
                pod.shutdown_initiated = true;
                let name = &pod.spec.name;
                for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                    slot.finish_for_shutdown(&mut out);
                    slot.kill_now(StopCause::Shutdown, KILL_FORCED, name, &mut out);
                }
            }
            "killing everything".to_string()
        } else {
            "shutting down".to_string()
        }
    }

    fn reload(&mut self, now: Time, config: Config) -> Result<String, CommandError> {
        if self.shutdown.is_some() {
            return Err(shutting_down());
        }
        self.shutdown_timeout = config.supervisor.shutdown_timeout;
        let mut old: Vec<Option<Pod>> = std::mem::take(&mut self.pods)
            .into_iter()
            .map(Some)
            .collect();
        let (mut changed, mut added, mut removed, mut unchanged) = (0, 0, 0, 0);
        let mut list = Vec::new();
        for spec in config.pods {
            let found = old
                .iter()
                .position(|p| p.as_ref().is_some_and(|p| p.name() == spec.name));
            match found.and_then(|i| old[i].take()) {
                Some(mut pod) => {
                    let target: Option<&PodSpec> = match &pod.next {
                        Next::Keep => Some(&pod.spec),
                        Next::Replace(s) => Some(s),
                        Next::Remove => None,
                    };
                    if target == Some(&spec) {
                        unchanged += 1;
                    } else {
                        if pod.next == Next::Remove {
                            added += 1;
                        } else {
                            changed += 1;
                        }
                        pod.next = Next::Replace(Box::new(spec));
                        self.stop_for_reload(&mut pod, now);
                    }
                    list.push(pod);
                }
                None => {
                    added += 1;
                    list.push(Pod::new(spec, now, &mut self.next_key));
                }
            }
        }
        for mut pod in old.into_iter().flatten() {
            if pod.next != Next::Remove {
                removed += 1;
            }
            pod.next = Next::Remove;
            self.stop_for_reload(&mut pod, now);
            list.push(pod);
        }
        self.pods = list;
        self.reindex();
        Ok(format!(
            "reloaded: {changed} changed, {added} added, {removed} removed, {unchanged} unchanged"
        ))
    }

    fn stop_for_reload(&mut self, pod: &mut Pod, now: Time) {
        let (_, mut out) = self.split(now);
        let cause = StopCause::Request {
            message: MSG_DEFINITION_CHANGED.to_string(),
            then_start: false,
        };
        pod.stop_all(cause, true, &mut out);
    }

    /// Re-evaluate everything that depends on more than one slot: reload replacements,
    /// dependency gates, shutdown order, the exit, and pod conditions.
    fn refresh(&mut self, now: Time) {
        self.refresh_touched(now, None);
    }

    /// [`Self::refresh`] after a change confined to the pods at `touched` (indices into
    /// `pods`; `None`: any pod may have changed). A pod's conditions depend on its own slots
    /// only, so the others' are left alone unless a reload replacement, a dependency start or
    /// the shutdown order moves them. This runs after every input: with hundreds of pods
    /// probed every second, re-deriving every pod's conditions each time was most of
    /// vigil's CPU and delayed the next probe starts.
    fn refresh_touched(&mut self, now: Time, touched: Option<&[usize]>) {
        let mut all = touched.is_none();
        let mut reshaped = false;
        // Reload: pods that finished stopping are replaced or forgotten.
        let mut i = 0;
        while i < self.pods.len() {
            let pod = &self.pods[i];
            if pod.next == Next::Keep || pod.any_active() {
                i += 1;
                continue;
            }
            all = true; // indices move
            reshaped = true;
            for key in pod.keys() {
                self.actions.push_back(Action::Forget { key });
            }
            match std::mem::replace(&mut self.pods[i].next, Next::Keep) {
                Next::Replace(spec) => {
                    self.pods[i] = Pod::new(*spec, now, &mut self.next_key);
                    i += 1;
                }
                _ => {
                    self.pods.remove(i);
                }
            }
        }
        if reshaped {
            self.reindex();
        }

        // A whole-pod restart starts over once nothing of the pod runs.
        if self.shutdown.is_none() {
            for pod in &mut self.pods {
                if pod.restart_pending && pod.next == Next::Keep && !pod.any_active() {
                    pod.reset_for_restart();
                    all = true;
                }
            }
        }

        // Conditions feed the `ready` dependency: bring them up to date first.
        if all {
            for pod in &mut self.pods {
                pod.update_conditions(now);
            }
        } else {
            for &p in touched.unwrap_or_default() {
                if let Some(pod) = self.pods.get_mut(p) {
                    pod.update_conditions(now);
                }
            }
        }
        let moved = if self.shutdown.is_none() {
            self.start_ready_pods(now) | self.check_shutdown_on(now)
        } else {
            self.drive_shutdown(now);
            true
        };
        // Without a start or a stop since the pass above, it would change nothing.
        if all || moved {
            for pod in &mut self.pods {
                pod.update_conditions(now);
            }
            self.reschedule(None);
        } else {
            self.reschedule(touched);
        }
    }

    /// What `pod` still waits for (`pod db to be ready`), in its `depends_on` order, and, for
    /// each, why it cannot happen on its own when that is so ([`Pod::cannot_recover`], or the
    /// dependency is itself blocked on such a pod).
    fn unmet_dependencies(&self, pod: &Pod) -> Vec<Unmet> {
        pod.spec
            .depends_on
            .iter()
            .filter_map(|d| {
                let on = self.pods.iter().find(|p| p.name() == d.pod);
                let met = on.is_some_and(|p| match d.condition {
                    DependencyCondition::Started => p.all_started(),
                    DependencyCondition::Ready => p.ready(),
                    DependencyCondition::Completed => p.phase() == Phase::Succeeded,
                });
                if met {
                    return None;
                }
                let what = match d.condition {
                    DependencyCondition::Started => "started",
                    DependencyCondition::Ready => "ready",
                    DependencyCondition::Completed => "completed",
                };
                let blocked = on.and_then(|p| {
                    p.cannot_recover().or_else(|| {
                        p.blocked.as_ref().map(|_| {
                            format!("pod {} waits on a dependency that cannot start", p.name())
                        })
                    })
                });
                Some((format!("pod {} to be {what}", d.pod), blocked))
            })
            .collect()
    }

    /// Start every waiting pod whose dependencies are met — a pod not begun yet, or one an
    /// operator `start` left awaiting them — and name the unmet ones otherwise. A pod whose
    /// dependency cannot get there on its own (refused at start, failed for good, or itself
    /// blocked so) still waits, shown as `DependencyFailed` with the dependency and why, and
    /// a Warning `DependencyFailed` event per container when that first becomes so; it starts
    /// once an operator start or a reload brings the dependency back. Returns whether any pod
    /// was waiting (and so may have changed).
    fn start_ready_pods(&mut self, now: Time) -> bool {
        let waits = |p: &Pod| {
            p.next == Next::Keep && ((p.stage == Stage::Waiting && !p.held) || p.awaiting)
        };
        // The steady state (nothing waiting) skips the facts: an allocation per pod.
        if !self.pods.iter().any(waits) {
            for pod in self.pods.iter_mut().filter(|p| p.blocked.is_some()) {
                pod.blocked = None; // stopped or replaced while it waited
            }
            return false;
        }
        let before: Vec<Option<String>> = self.pods.iter().map(|p| p.blocked.clone()).collect();
        // Facts taken before any start (a start changes no fact). Being blocked passes down a
        // chain of dependents, so repeat until it settles (dependencies have no cycles: at
        // most one pass per pod).
        let mut unmet: Vec<Option<Vec<Unmet>>> = Vec::new();
        for _ in 0..=self.pods.len() {
            unmet = self
                .pods
                .iter()
                .map(|p| waits(p).then(|| self.unmet_dependencies(p)))
                .collect();
            let mut settled = true;
            for (pod, unmet) in self.pods.iter_mut().zip(&unmet) {
                let blocked = unmet
                    .as_ref()
                    .filter(|u| u.iter().any(|(_, b)| b.is_some()))
                    .map(|u| waiting_for(u));
                if pod.blocked != blocked {
                    pod.blocked = blocked;
                    settled = false;
                }
            }
            if settled {
                break;
            }
        }
        let (pods, mut out) = self.split(now);
        for ((pod, unmet), before) in pods.iter_mut().zip(unmet).zip(before) {
            let Some(unmet) = unmet else {
                continue;
            };
            if unmet.is_empty() {
                pod.resume(&mut out);
                continue;
            }
            let (reason, message) = match &pod.blocked {
                Some(why) => (WaitingReason::DependencyFailed, why.clone()),
                None => (WaitingReason::WaitingForDependencies, waiting_for(&unmet)),
            };
            let name = pod.spec.name.clone();
            for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                slot.set_waiting(reason, message.clone());
                if pod.blocked.is_some() && pod.blocked != before {
                    let container = slot.name().to_string();
                    out.event(
                        EventType::Warning,
                        "DependencyFailed",
                        &name,
                        &container,
                        message.clone(),
                    );
                }
            }
        }
        true
    }

    /// `shutdown_on` (docs/behaviour.md §6.4): the first pod, in config order, that has come
    /// to the end its key names begins the usual shutdown, and vigil will exit with the pod's
    /// exit code; an event says so. An end the operator caused (`vigil stop`) does not count,
    /// nor does a pod a reload is replacing. Returns whether the shutdown began.
    fn check_shutdown_on(&mut self, now: Time) -> bool {
        if self.shutdown.is_some() {
            return false;
        }
        let hit = self.pods.iter().find_map(|p| {
            let on = p.spec.shutdown_on?;
            if p.next != Next::Keep {
                return None;
            }
            let phase = p.phase();
            let by_operator = p.stopped_by_request();
            let (ended, what) = match on {
                ShutdownOn::Completed => (phase == Phase::Succeeded && !by_operator, "completed"),
                ShutdownOn::Failed => (phase == Phase::Failed, "failed"),
                ShutdownOn::Ended => (
                    !by_operator && matches!(phase, Phase::Succeeded | Phase::Failed),
                    if phase == Phase::Failed {
                        "failed"
                    } else {
                        "completed"
                    },
                ),
                ShutdownOn::DependencyFailed => (p.blocked.is_some(), "cannot start"),
            };
            if !ended {
                return None;
            }
            // A pod that never ran because of a dependency ends vigil with 1.
            let code = match on {
                ShutdownOn::DependencyFailed => 1,
                _ => p.exit_code(),
            };
            let why = match (on, &p.blocked) {
                (ShutdownOn::DependencyFailed, Some(b)) => format!(" ({b})"),
                _ => String::new(),
            };
            let kind = if code == 0 {
                EventType::Normal
            } else {
                EventType::Warning
            };
            let message = format!(
                "pod {} {what}{why}, exit code {code}: stopping everything (shutdown_on = \"{}\")",
                p.name(),
                on.as_str()
            );
            Some((p.name().to_string(), code, kind, message))
        });
        let Some((pod, code, kind, message)) = hit else {
            return false;
        };
        self.events
            .record(now, kind, "ShutdownOn", pod, message.clone());
        log::info!("{message}");
        self.exit_with = Some(code);
        self.begin_shutdown(now, false);
        self.drive_shutdown(now);
        true
    }

    /// Stop pods whose dependents have all stopped; emit `Exit` when nothing is left.
    fn drive_shutdown(&mut self, now: Time) {
        loop {
            let mut progressed = false;
            for i in 0..self.pods.len() {
                if self.pods[i].shutdown_initiated {
                    continue;
                }
                let name = self.pods[i].name().to_string();
                let dependents_stopped = self.pods.iter().all(|p| {
                    !p.spec.depends_on.iter().any(|d| d.pod == name)
                        || (p.shutdown_initiated && !p.any_active())
                });
                if !dependents_stopped {
                    continue;
                }
                let (pods, mut out) = self.split(now);
                let pod = &mut pods[i];
                pod.shutdown_initiated = true;
                for slot in pod.init.iter_mut().chain(pod.main.iter_mut()) {
                    slot.finish_for_shutdown(&mut out);
                }
                pod.stop_all(StopCause::Shutdown, false, &mut out);
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        if !self.exit_emitted && !self.pods.iter().any(Pod::any_active) {
            self.exit_emitted = true;
            let code = match (&self.shutdown, self.exit_with) {
                // The pod's result is what `shutdown_on` asked for, however the rest stopped.
                (_, Some(code)) => code,
                (Some(s), None) if s.unclean => 1,
                _ => 0,
            };
            self.actions.push_back(Action::Exit { code });
        }
    }
}

/// An unmet dependency (`pod db to be ready`), and why it cannot be met on its own when so.
type Unmet = (String, Option<String>);

/// `waiting for pod db to be ready, pod job to be completed: pod job failed and will not run
/// again (…)`: each unmet dependency, with why it cannot happen on its own where it cannot.
fn waiting_for(unmet: &[Unmet]) -> String {
    let each: Vec<String> = unmet
        .iter()
        .map(|(what, blocked)| match blocked {
            Some(why) => format!("{what}: {why}"),
            None => what.clone(),
        })
        .collect();
    format!("waiting for {}", each.join(", "))
}
