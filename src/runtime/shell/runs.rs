//! The runs: every container slot's live run and what it takes to start, watch and end one —
//! the slots (`runtime::slots`), the reaper, the exec reports (`execs`), the janitor and the
//! pods removed by reload, output capture and its holder, the probe runner, the state file's
//! tracker and the runs adopted from an earlier vigil (`adopt`). The router hands it the
//! core's actions ([`Runs::execute`]) and the events of its tokens ([`Component::process`]);
//! what happened goes straight back to the core as inputs, through the [`Link`].
//!
//! Owns: those components and the runs' descriptors (pid, cgroup and its `memory.events`
//! watch). Must not decide what runs (every outcome goes straight back to the core as an
//! input), or keep a descriptor outside a component or a run.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use log::{debug, warn};
use mio::event::Event;
use mio::{Interest, Registry, Token};

use super::adopt::Adopted;
use super::capture::{Capture, PipeFrom};
use super::component::{Component, Link, earliest};
use super::execs::{PendingExecs, Settled};
use super::janitor::{DEFER, GonePods, Janitor};
use super::journal::Journal;
use super::kill::kill_tree;
use super::notify::{self, NotifySockets};
use super::probes::{ProbeRequest, ProbeRunner};
use super::reaper::{Ended, PidOwner, Reaper};
use super::tokens::{self, Owner, Watched};
use super::turnwatch::Chore;
use crate::cgroup::{ContainerCgroup, Manager};
use crate::config::spec::{ContainerSpec, SupervisorSpec, TerminationMessagePolicy};
use crate::core::{
    Action, ContainerKey, ExitInfo, Generation, Input, Notification, ReadyWord, Supervisor,
};
use crate::logs::{self, ContainerLog};
use crate::process::{self, Stdio};
use crate::runtime::fdstore::{FdStore, PipeName};
use crate::runtime::holder::{self, Holder};
use crate::runtime::slots::{ContainerRuntime, Run};
use crate::runtime::statefile::{MainInfo, Tracker, spec_hash};

/// Containers one loop turn starts at most; the rest of the core's queue (in order) waits for
/// the next turn, which polls without waiting. Keeps a turn — and with it the control socket's
/// and the reaper's latency — bounded when a config or reload starts thousands of containers,
/// and lets the exec reports of the first ones (see `execs`) come in between.
pub(super) const SPAWNS_PER_TURN: u32 = 64;

/// The runs and the components that start, watch and end them (see the module doc).
pub(super) struct Runs {
    /// A handle on the poll's registry (shared with the other components).
    pub(super) registry: Rc<Registry>,
    /// vigil's cgroup subtree, or none.
    pub(super) cgroups: Option<Manager>,
    pub(super) slots: HashMap<ContainerKey, ContainerRuntime>,
    pub(super) reaper: Reaper,
    /// Main processes cloned whose exec is not confirmed yet.
    pub(super) execs: PendingExecs,
    /// Spawns this loop turn may still start (see [`SPAWNS_PER_TURN`]).
    pub(super) spawn_budget: u32,
    pub(super) janitor: Janitor,
    /// Cgroup directories of pods removed by reload, until removed.
    pub(super) gone_pods: GonePods,
    pub(super) capture: Capture,
    pub(super) probes: ProbeRunner,
    /// The state file of what vigil runs (`statefile`): main processes for adoption after a
    /// crash and, without cgroups, every process to kill.
    pub(super) tracker: Tracker,
    /// The output holder: keeps the pipes' read ends across a crash of vigil
    /// (`runtime::holder`).
    pub(super) holder: Holder,
    /// The service manager's file-descriptor store of the pipes' read ends, under systemd
    /// (`runtime::fdstore`).
    pub(super) fdstore: FdStore,
    /// Pipes an earlier vigil's holder handed over at start, by name, until their runs are
    /// adopted (the rest are closed once start-up has adopted what it could).
    pub(super) held: HashMap<String, OwnedFd>,
    /// Runs adopted from an earlier vigil (`adopt`): their pidfds.
    pub(super) adopted: Adopted,
    /// Pre-flights of `vigil upgrade` reaped and not yet told to the router: (attempt, exit
    /// code, signal).
    pub(super) checks_ended: Vec<(u64, Option<i32>, Option<i32>)>,
    /// `on_event` exec hooks reaped, for the router to hand to `event_hooks`.
    pub(super) hooks_ended: Vec<(u64, Option<i32>, Option<i32>)>,
    /// The core's events as vigil's log lines (`journal`).
    pub(super) journal: Journal,
}

impl Runs {
    /// Tells the core of the runs whose `ready_log_line` matched (docs/behaviour.md §4.5): the
    /// same input as a `READY=1`, said another way.
    fn feed_ready_lines(&mut self, now: Instant, link: &mut Link<'_>) {
        for (key, generation) in self.capture.take_ready_lines() {
            // A line printed at once may be read before the run's exec report.
            self.before_notified(key, generation, link);
            link.feed(
                now,
                Input::Notified {
                    key,
                    generation,
                    notification: Notification {
                        via: ReadyWord::LogLine,
                        ready: true,
                        ..Notification::default()
                    },
                },
            );
        }
    }
}

impl Component for Runs {
    fn process(&mut self, event: &Event, now: Instant, link: &mut Link<'_>) {
        let token = event.token();
        match Owner::of(token) {
            Some(Owner::Capture) => {
                self.capture.on_readable(token, &mut self.slots);
                self.feed_ready_lines(now, link);
            }
            Some(Owner::Stdout) => self.capture.flush(),
            Some(Owner::Oom) => self.on_memory_events(token, now, link),
            Some(Owner::Janitor) => self.janitor.retry(),
            Some(Owner::Adopted) => self.on_adopted(token, now, link),
            Some(Owner::Exec) => self.on_exec_report(token, link),
            Some(Owner::Probes) => {
                if let Some(input) =
                    self.probes
                        .on_event(token, event, now, &mut self.reaper, &mut self.janitor)
                {
                    link.feed(now, input);
                }
            }
            _ => debug!("runs: event for another component's token {token:?}"),
        }
    }

    fn deadline(&self, now: Instant) -> Option<Instant> {
        earliest([
            self.janitor.deadline(now),
            self.tracker.deadline(),
            self.capture.has_more().then_some(now),
        ])
    }

    fn chore(&mut self, chore: Chore, now: Instant, link: &mut Link<'_>) {
        match chore {
            Chore::ProbeExpiry => {
                for input in self.probes.expire(now, &mut self.janitor) {
                    link.feed(now, input);
                }
            }
            Chore::DeferredStarts => self.retry_deferred(now, link),
            Chore::Janitor => self.janitor.retry(),
            Chore::GonePods => {
                let core = &*link.core;
                self.gone_pods
                    .retry(self.cgroups.as_ref(), |p| core.pod(p).is_some(), now);
            }
            // Container output with a backlog (queued by the capture) is read after the
            // requests of this turn are answered: under a log flood a request waits behind at
            // most the rest of the turn it came in, not one more turn's share of output too.
            Chore::Capture => {
                self.capture.read_more(&mut self.slots);
                self.feed_ready_lines(now, link);
                for (pid, stream) in self.capture.take_closed() {
                    self.fdstore.release(pid, stream == logs::Stream::Stderr);
                }
            }
            // vigil's events into the journal sink, then out with the forwarded output.
            Chore::Journal => {
                self.drain_journal(link.core, now);
                self.capture.flush();
            }
            Chore::StateFile => {
                self.remember(now, link.core, link.config);
                self.tracker.scan_if_due(now);
                self.tracker.set_scales(link.config.scales());
                if self.tracker.is_dirty() {
                    let ended = self.kept_ends(link.core, link.config);
                    self.tracker.set_ended(ended);
                }
                self.tracker.flush();
            }
            Chore::CoreTimeouts
            | Chore::Actions
            | Chore::Control
            | Chore::Metrics
            | Chore::EventHooks
            | Chore::Status
            | Chore::Startup => {}
        }
    }

    fn finish(&mut self, link: &mut Link<'_>) {
        self.finish_runs(link);
        self.drain_journal(link.core, Instant::now());
        self.capture.flush();
    }
}

impl Runs {
    pub(super) fn new(
        registry: Rc<Registry>,
        cgroups: Option<Manager>,
        capture: Capture,
        tracker: Tracker,
        holder: Holder,
        held: HashMap<String, OwnedFd>,
        fdstore: FdStore,
    ) -> Runs {
        Runs {
            cgroups,
            slots: HashMap::new(),
            reaper: Reaper::default(),
            execs: PendingExecs::new(Rc::clone(&registry)),
            spawn_budget: SPAWNS_PER_TURN,
            janitor: Janitor::new(Rc::clone(&registry)),
            gone_pods: GonePods::default(),
            capture,
            probes: ProbeRunner::new(Rc::clone(&registry)),
            tracker,
            holder,
            held,
            fdstore,
            adopted: Adopted::new(Rc::clone(&registry)),
            checks_ended: Vec::new(),
            hooks_ended: Vec::new(),
            journal: Journal::default(),
            registry,
        }
    }

    /// Every pipe read now, given to the holder (after an upgrade: a new holder); the service
    /// manager's store has them already (the old instance stored them under the same names).
    pub(super) fn hold_all_output(&mut self) {
        for (key, stream, run, fd) in self.capture.pipes() {
            let Some(slot) = self.slots.get(&key) else {
                continue;
            };
            let Some(pid) = slot
                .run
                .as_ref()
                .filter(|r| Some(r.generation) == run)
                .and_then(|r| r.pid)
            else {
                continue;
            };
            let label = format!("{}/{}", slot.pod, slot.name);
            let stderr = stream == logs::Stream::Stderr;
            self.holder.keep(&holder::name(&label, pid, stderr), fd);
            self.fdstore
                .kept_before(&PipeName::new(&label, pid, stderr));
        }
    }

    /// A new run's pipes, given to the holder and, under systemd, to the service manager's
    /// file-descriptor store.
    fn hold_output(&mut self, label: &str, pid: u32, out: &OwnedFd, err: &OwnedFd) {
        self.holder
            .keep(&holder::name(label, pid, false), out.as_fd());
        self.holder
            .keep(&holder::name(label, pid, true), err.as_fd());
        self.fdstore
            .keep(&PipeName::new(label, pid, false), out.as_fd());
        self.fdstore
            .keep(&PipeName::new(label, pid, true), err.as_fd());
    }

    /// A pending exec's report pipe is readable.
    fn on_exec_report(&mut self, token: mio::Token, link: &mut Link<'_>) {
        if let Some(settled) = self.execs.on_readable(token) {
            self.exec_settled(settled, link);
        }
    }

    /// A run's own process spoke (over its notify socket, or printed its `ready_log_line`):
    /// if the run's exec report has not been read yet, it is read now (without waiting: the
    /// program runs, so its exec closed the pipe), so that the core knows the run started
    /// before it hears what the run said. Otherwise a `READY=1` read before the report would
    /// reach a run the core still holds as `Creating`, and be lost.
    pub(super) fn before_notified(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        link: &mut Link<'_>,
    ) {
        if let Some(settled) = self.execs.poll(key, generation) {
            self.exec_settled(settled, link);
        }
    }

    /// Feeds the outcome of a pending exec: `Spawned` (the run starts now, when its program
    /// does), or `SpawnFailed` with the error — the child is already reaped, so the run ends
    /// here: the reaper forgets it, its cgroup goes to the janitor.
    pub(super) fn exec_settled(&mut self, settled: Settled, link: &mut Link<'_>) {
        let Settled {
            key,
            generation,
            pid,
            outcome,
        } = settled;
        let input = match outcome {
            Ok(()) => Input::Spawned {
                key,
                generation,
                pid,
            },
            Err(e) => {
                self.reaper.untrack(pid);
                self.tracker.ended(key);
                link.notify.close(key);
                if let Some(run) = self
                    .slots
                    .get_mut(&key)
                    .and_then(|s| s.run.as_mut())
                    .filter(|r| r.generation == generation)
                {
                    run.exited = true;
                    if let Some(cg) = run.cgroup.take() {
                        self.janitor.retire(cg.into_inner());
                    }
                }
                Input::SpawnFailed {
                    key,
                    generation,
                    message: e.to_string(),
                }
            }
        };
        link.feed(Instant::now(), input);
    }

    /// Carries out one of the core's actions on the runs (the router keeps `Exit`, and tells
    /// the control server of a `Forget`).
    pub(super) fn execute(&mut self, action: Action, now: Instant, link: &mut Link<'_>) {
        match action {
            Action::Spawn { .. } => {
                if let Some(input) = self.spawn(&action, now, link) {
                    // The run starts when its process does, not when the turn began: a turn
                    // spawning hundreds of containers lasts a second, and `started_at` — the
                    // base of the probe schedule — must not predate the process by that much
                    // (nor put every probe of the batch on the same instant).
                    link.feed(Instant::now(), input);
                }
            }
            Action::Signal {
                key,
                generation,
                signal,
            } => {
                if let Some(sent) = self.adopted.signal(key, generation, signal) {
                    if let Err(e) = sent {
                        debug!("signal {signal} to an adopted run of {key:?}: {e}");
                    }
                } else if let Some(pid) = self.live_pid(key, generation)
                    && let Err(e) = process::signal(pid, signal)
                {
                    debug!("{e}");
                }
            }
            Action::Kill { key, generation } => self.kill_run(key, Some(generation)),
            Action::StartProbe {
                key,
                generation,
                container,
                kind,
                seq,
                probe,
                ..
            } => {
                let cgroup = self
                    .slots
                    .get(&key)
                    .and_then(|s| s.run.as_ref())
                    .and_then(|r| r.cgroup.as_deref());
                let req = ProbeRequest {
                    key,
                    generation,
                    container: &container,
                    kind,
                    seq,
                    probe: &probe,
                };
                if let Some(input) =
                    self.probes
                        .start(req, cgroup, now, &mut self.reaper, &mut self.janitor)
                {
                    link.feed(now, input);
                }
            }
            Action::CancelProbe {
                key,
                generation,
                kind,
                seq,
            } => self
                .probes
                .cancel(key, generation, kind, seq, &mut self.janitor),
            Action::Forget { key } => {
                link.notify.close(key);
                self.kill_run(key, None);
                self.execs.forget(key);
                self.adopted.forget(key);
                if let Some(mut slot) = self.slots.remove(&key) {
                    // A run still holding its cgroup goes to the janitor like any finished
                    // run's; the pod's own directory follows once it is empty (issue 14.7).
                    if let Some(cg) = slot.run.as_mut().and_then(|r| r.cgroup.take()) {
                        self.janitor.retire(cg.into_inner());
                    }
                    self.gone_pods.forget(&slot.pod, now);
                }
            }
            Action::Exit { .. } => {}
        }
    }

    /// The pid of `key`'s run `generation` while its main process has not been reaped.
    fn live_pid(&self, key: ContainerKey, generation: Generation) -> Option<u32> {
        let run = self.slots.get(&key)?.run.as_ref()?;
        (run.generation == generation && !run.exited)
            .then_some(run.pid)
            .flatten()
    }

    /// Kills the tree of `key`'s live run (of `generation`, or whichever it is).
    pub(super) fn kill_run(&mut self, key: ContainerKey, generation: Option<Generation>) {
        let Some(run) = self.slots.get(&key).and_then(|s| s.run.as_ref()) else {
            return;
        };
        if generation.is_some_and(|g| g != run.generation) || run.exited {
            return;
        }
        kill_tree(run.cgroup.as_deref(), run.pid);
    }

    /// Executes a Spawn action; returns the input to feed back, or `None` when deferred.
    fn spawn(&mut self, action: &Action, now: Instant, link: &mut Link<'_>) -> Option<Input> {
        let Action::Spawn {
            key,
            generation,
            pod,
            container,
            ..
        } = action
        else {
            return None;
        };
        let (key, generation) = (*key, *generation);
        self.ensure_slot(key, pod, container, &link.config.supervisor);
        let failed = |message: String| {
            Some(Input::SpawnFailed {
                key,
                generation,
                message,
            })
        };

        // A fresh cgroup per run (platform-notes: never reuse a cgroup after cgroup.kill).
        let cgroup = match &self.cgroups {
            Some(m) => {
                if self
                    .janitor
                    .holds(&m.root().join(pod).join(&container.name))
                {
                    // The previous run's cgroup still holds dying processes: retry shortly
                    // rather than block the loop waiting for the kernel to empty it.
                    self.janitor.defer(now + DEFER, action.clone());
                    return None;
                }
                match m.create_container(pod, &container.name, &(&container.resources).into()) {
                    Ok(cg) => Some(cg),
                    Err(e) => return failed(format!("cgroup placement failed: {e}")),
                }
            }
            None => None,
        };
        // Before the child exists: whatever it writes afterwards changes the stamp.
        let message_stamp = container
            .termination_message_path
            .as_deref()
            .and_then(message_stamp);
        // `notify = true`: the run's own socket, made before the child exists.
        let label = format!("{pod}/{}", container.name);
        let notify_socket = match container.notify {
            true => {
                let dir = notify_dir(link.config);
                let cg_dir = cgroup.as_ref().map(|c| c.path());
                match link.notify.open(key, generation, &dir, &label, cg_dir) {
                    Ok(path) => Some(path),
                    Err(message) => {
                        if let Some(cg) = cgroup {
                            self.janitor.retire(cg);
                        }
                        return failed(message);
                    }
                }
            }
            false => None,
        };
        let started = start_main(container, cgroup.as_ref(), notify_socket.as_deref());
        let (launched, out_r, err_r) = match started {
            Ok(started) => started,
            Err(message) => {
                link.notify.close(key);
                if let Some(cg) = cgroup {
                    self.janitor.retire(cg);
                }
                return failed(message);
            }
        };
        let (pid, pending) = match launched {
            process::Launched::Running(pid) => (pid, None),
            process::Launched::Pending(exec) => (exec.pid(), Some(exec)),
        };
        // Without cgroups the run's session speaks for it from now on, before its exec is
        // confirmed: its program may say READY=1 before vigil reads the exec report.
        link.notify.started(key, generation, pid);
        self.reaper.track(pid, PidOwner::Main { key, generation });
        let main = MainInfo {
            spec: self.slots.get(&key).map_or(0, |s| s.spec_hash),
            restarts: link.core.restart_count(key).unwrap_or(0),
        };
        self.tracker
            .started(key, &format!("{pod}/{}", container.name), pid, main);
        let run = Some(generation);
        self.hold_output(&format!("{pod}/{}", container.name), pid, &out_r, &err_r);
        let ready = container.ready_log_line.as_ref();
        self.capture.add_output(
            key,
            pid,
            out_r,
            logs::Stream::Stdout,
            run,
            PipeFrom::Spawn,
            ready,
        );
        self.capture.add_output(
            key,
            pid,
            err_r,
            logs::Stream::Stderr,
            run,
            PipeFrom::Spawn,
            ready,
        );
        let oom_seen = cgroup
            .as_ref()
            .map(|c| c.oom_baseline())
            .unwrap_or_default();
        let cgroup = cgroup.map(|cg| self.watch_memory_events(key, cg));
        let slot = self.slots.get_mut(&key)?;
        slot.log.new_run();
        slot.run = Some(Run {
            generation,
            pid: Some(pid),
            oom_seen,
            cgroup,
            exited: false,
            message_stamp,
        });
        debug!(
            "spawned {}/{} pid {pid} (generation {generation})",
            slot.pod, slot.name
        );
        let Some(exec) = pending else {
            return Some(Input::Spawned {
                key,
                generation,
                pid,
            });
        };
        // Its exec is confirmed later (`on_exec_report`); the core keeps it `Creating`.
        let settled = self.execs.add(key, generation, exec)?;
        self.exec_settled(settled, link);
        None
    }

    pub(super) fn ensure_slot(
        &mut self,
        key: ContainerKey,
        pod: &str,
        container: &Arc<ContainerSpec>,
        sup: &SupervisorSpec,
    ) {
        let slot = self.slots.entry(key).or_insert_with(|| {
            let (log, err) = ContainerLog::new(pod, &container.name, sup);
            if let Some(e) = err {
                warn!("{e}");
            }
            ContainerRuntime {
                pod: pod.to_string(),
                name: container.name.clone(),
                spec_hash: spec_hash(container),
                spec: container.clone(),
                log,
                run: None,
            }
        });
        if !Arc::ptr_eq(&slot.spec, container) {
            slot.spec = container.clone();
            slot.spec_hash = spec_hash(container);
        }
    }

    /// Registers a new run's `memory.events` (OOM kills while it runs), when it has one.
    pub(super) fn watch_memory_events(
        &self,
        key: ContainerKey,
        cg: ContainerCgroup,
    ) -> Watched<ContainerCgroup> {
        if cg.memory_events_fd().is_none() {
            return Watched::unwatched(cg);
        }
        match Watched::new(
            &self.registry,
            cg,
            memory_events_fd,
            tokens::oom_token(key),
            Interest::PRIORITY,
        ) {
            Ok(w) => w,
            Err((cg, e)) => {
                debug!("cannot watch memory.events of {}: {e}", cg.path().display());
                Watched::unwatched(cg)
            }
        }
    }

    /// Spawns that waited for a dying cgroup, once due.
    pub(super) fn retry_deferred(&mut self, now: Instant, link: &mut Link<'_>) {
        for action in self.janitor.take_due(now) {
            if let Some(input) = self.spawn(&action, now, link) {
                link.feed(now, input);
            }
        }
    }

    /// Everything the reaper collects goes to its owner (an upgrade's pre-flight to
    /// [`Runs::checks_ended`], for the router).
    pub(super) fn reap(&mut self, now: Instant, link: &mut Link<'_>) {
        for ended in self.reaper.reap() {
            self.on_ended(ended, now, link);
        }
    }

    /// A child the reaper collected: a main process's exit or an exec probe's result.
    fn on_ended(&mut self, ended: Ended, now: Instant, link: &mut Link<'_>) {
        let Ended {
            owner,
            code,
            signal,
        } = ended;
        match owner {
            PidOwner::Main { key, generation } => {
                let exit = ExitInfo {
                    code,
                    signal,
                    ..ExitInfo::default()
                };
                self.on_main_exit(key, generation, exit, now, link)
            }
            PidOwner::UpgradeCheck { seq } => self.checks_ended.push((seq, code, signal)),
            PidOwner::EventHook { id } => self.hooks_ended.push((id, code, signal)),
            PidOwner::ExecProbe { key, kind, seq } => {
                let input =
                    self.probes
                        .on_exit(key, kind, seq, code, signal, now, &mut self.janitor);
                for (key, session) in self.probes.take_hook_sessions() {
                    self.tracker.attribute_session(key, session);
                }
                if let Some(input) = input {
                    link.feed(now, input);
                }
            }
        }
    }

    /// vigil's log lines (or journal entries) for the core's events since the last.
    pub(super) fn drain_journal(&mut self, core: &Supervisor, now: Instant) {
        self.journal.drain(core, now, self.capture.journal_mut());
    }

    /// At shutdown, after the loop: kills what probes left, removes every cgroup made (a
    /// brief wait for the kernel to empty the last ones, reaping meanwhile), lets the output
    /// holder go (it lives in vigil's cgroup, which goes next), gives the service manager's
    /// copies of the pipes back, removes the subtree and writes the state file a last time;
    /// then the last events and output are written out.
    fn finish_runs(&mut self, link: &mut Link<'_>) {
        self.probes.cancel_all(&mut self.janitor);
        let deadline = Instant::now() + std::time::Duration::from_secs(2);
        while self.janitor.has_dying() && Instant::now() < deadline {
            self.janitor.retry();
            if self.janitor.has_dying() {
                // Shutdown path only: the loop has ended, a brief wait for the kernel to
                // empty the last cgroups is all that is left to do.
                std::thread::sleep(std::time::Duration::from_millis(5));
                self.reap(Instant::now(), link);
            }
        }
        self.holder.bye();
        self.fdstore.release_all();
        if let Some(m) = &self.cgroups
            && let Err(e) = m.teardown()
        {
            warn!("{e}");
        }
        self.tracker.finish();
    }

    /// An adopted run's process exited (`adopt`): not a child, so its status is unknown.
    pub(super) fn on_adopted_exit(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        now: Instant,
        link: &mut Link<'_>,
    ) {
        let exit = ExitInfo {
            status_unknown: true,
            ..ExitInfo::default()
        };
        self.on_main_exit(key, generation, exit, now, link);
    }

    fn on_main_exit(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        mut exit: ExitInfo,
        now: Instant,
        link: &mut Link<'_>,
    ) {
        // Reaped before its exec report was read: the report is complete now (the child is
        // gone); whether it exec'd decides between `Spawned` then `Exited`, and `SpawnFailed`.
        if let Some(settled) = self.execs.settle(key, generation) {
            let failed = settled.outcome.is_err();
            self.exec_settled(settled, link);
            if failed {
                return;
            }
        }
        let mut leftover_cgroup = None;
        let mut pgid = None;
        if let Some(slot) = self.slots.get_mut(&key)
            && let Some(run) = slot.run.as_mut()
            && run.generation == generation
        {
            run.exited = true;
            pgid = run.pid;
            link.notify.close(key);
            // Taking it out of the run deregisters its memory.events.
            if let Some(cg) = run.cgroup.take().map(Watched::into_inner) {
                // Read the OOM counters synchronously, before anything else happens to the
                // cgroup, so an OOM kill can never be mistaken for a plain SIGKILL.
                match cg.oom_delta_since_baseline() {
                    Ok(d) => {
                        // Kills already reported while it ran (OomKills) are not reported
                        // again; the core only needs to know whether any happened.
                        exit.oom_kill_delta = d.oom_kill;
                        exit.oom_group_kill_delta = d.oom_group_kill;
                    }
                    Err(e) => debug!("{e}"),
                }
                exit.memory_max = cg.memory_max();
                exit.memory_peak = cg.figures().memory_peak;
                if exit.code == Some(0) {
                    // What a clean exit left behind (a daemon that forked away), before the
                    // janitor kills it: said in the `Exited` event.
                    exit.left_behind = cg.pids().map_or(0, |p| p.len() as u32);
                }
                leftover_cgroup = Some(cg);
            }
        }
        // Whatever the main process left behind dies with it.
        match leftover_cgroup {
            Some(cg) => self.janitor.retire(cg),
            None => {
                kill_tree(None, pgid);
            }
        }
        // An adopted run's message must be newer than the run (its start time as recorded).
        let not_before = pgid
            .filter(|_| exit.status_unknown)
            .and_then(|pid| self.tracker.start_of(key, pid))
            .and_then(crate::runtime::statefile::started_wall);
        if pgid.is_some() {
            self.tracker.ended(key);
        }
        exit.termination_message = self.termination_message(key, generation, &exit, not_before);
        link.feed(
            now,
            Input::Exited {
                key,
                generation,
                exit,
            },
        );
    }

    /// The container's termination message, as the kubelet takes it
    /// (`kuberuntime_container.go` getTerminationMessage, readLastStringFromContainerLogs):
    /// its `termination_message_path` file if it wrote one during this run (at most 4 KiB);
    /// else, under `FallbackToLogsOnError` and when it failed (exit code not 0), the last 80
    /// lines of its output, at most the last 2 KiB. One bounded read on the loop, like the
    /// `memory.events` read above. `not_before`: the run's start, for a run that has no stamp
    /// of the file from its spawn (an adopted one): a file last changed before it is an
    /// earlier run's message.
    fn termination_message(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        exit: &ExitInfo,
        not_before: Option<std::time::SystemTime>,
    ) -> Option<String> {
        let slot = self.slots.get(&key)?;
        let spec = slot.spec.clone();
        let before = slot
            .run
            .as_ref()
            .filter(|r| r.generation == generation)
            .map(|r| r.message_stamp);
        if let (Some(path), Some(before)) = (&spec.termination_message_path, before) {
            match read_termination_file(path, before, not_before, spec.user.as_deref()) {
                Ok(m) if !m.is_empty() => return Some(m),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    debug!("termination message {}: {e}", path.display())
                }
                Err(e) => warn!("termination message {} not read: {e}", path.display()),
            }
        }
        let failed = exit.code != Some(0);
        if spec.termination_message_policy != TerminationMessagePolicy::FallbackToLogsOnError
            || !failed
        {
            return None;
        }
        self.capture.drain_key(key, &mut self.slots);
        let tail = self.slots.get(&key)?.log.buffer.tail_lines(Some(80), false);
        let start = tail.len().saturating_sub(2048);
        let text = String::from_utf8_lossy(&tail[start..]).into_owned();
        (!text.is_empty()).then_some(text)
    }

    /// A running container's `memory.events` changed: report new OOM kills.
    fn on_memory_events(&mut self, token: Token, now: Instant, link: &mut Link<'_>) {
        let key = tokens::oom_key(token);
        let Some(run) = self.slots.get_mut(&key).and_then(|s| s.run.as_mut()) else {
            return;
        };
        if run.exited {
            return;
        }
        let generation = run.generation;
        let Some(cg) = run.cgroup.as_deref() else {
            return;
        };
        let Ok(now_counters) = cg.oom_counters() else {
            return;
        };
        // Events merge: compare values, never count wake-ups.
        let delta = now_counters.oom_kill.saturating_sub(run.oom_seen.oom_kill);
        run.oom_seen = now_counters;
        if delta > 0 {
            let memory_max = cg.memory_max();
            link.feed(
                now,
                Input::OomKills {
                    key,
                    generation,
                    delta,
                    memory_max,
                },
            );
        }
    }
}

/// The `memory.events` descriptor of a cgroup known to have one.
fn memory_events_fd(cg: &ContainerCgroup) -> BorrowedFd<'_> {
    cg.memory_events_fd().unwrap_or_else(|| cg.events_fd())
}

impl Runs {
    /// `key`'s live run taken over from an earlier instance gets its sd_notify socket again:
    /// after an upgrade the very socket (`inherited`: its generation and descriptor), so that
    /// a sender holding it connected is still heard; after a crash of vigil (adopted) a new
    /// one at the path its `NOTIFY_SOCKET` names (the same for every run of the container),
    /// which senders that send to the path each time reach. Datagrams sent while no vigil had
    /// the socket are lost.
    pub(super) fn reopen_notify(
        &self,
        key: ContainerKey,
        config: &crate::config::spec::Config,
        sockets: &mut NotifySockets,
        inherited: Option<(Generation, OwnedFd)>,
    ) {
        let Some(slot) = self.slots.get(&key) else {
            return;
        };
        let Some(run) = slot.run.as_ref().filter(|r| !r.exited) else {
            return;
        };
        if !slot.spec.notify {
            return;
        }
        let label = format!("{}/{}", slot.pod, slot.name);
        let cg_dir = run.cgroup.as_ref().map(|c| c.path().to_path_buf());
        let (generation, pid) = (run.generation, run.pid);
        let dir = notify_dir(config);
        if let Some((g, fd)) = inherited.filter(|(g, _)| *g == generation) {
            match sockets.inherit(key, g, &dir, &label, cg_dir.as_deref(), fd) {
                Ok(()) => {
                    if let Some(pid) = pid {
                        sockets.started(key, generation, pid);
                    }
                    return;
                }
                Err(e) => warn!("{label}: {e}; making its socket again"),
            }
        }
        let spec = &slot.spec;
        match sockets.open(key, generation, &dir, &label, cg_dir.as_deref()) {
            Ok(path) => {
                if let Some(pid) = pid {
                    sockets.started(key, generation, pid);
                }
                // The run's user, as at its spawn (resolved again).
                let ids = spec
                    .user
                    .as_ref()
                    .and_then(|_| process::prepare(&spec.command, spec).ok());
                if let Some(p) = ids
                    && let Err(e) = notify::grant(&path, p.uid(), p.gid())
                {
                    warn!("{label}: {e}");
                }
            }
            Err(e) => warn!("{label}: {e}; what it sends over sd_notify is not heard"),
        }
    }
}

/// Where the runs' sd_notify sockets are: `<socket>.notify`, beside the control socket in
/// vigil's runtime directory.
fn notify_dir(config: &crate::config::spec::Config) -> std::path::PathBuf {
    let mut s = super::startup::socket_path(config).into_os_string();
    s.push(".notify");
    s.into()
}

/// Prepares and starts a container's main process with its stdout and stderr on two fresh
/// pipes, without waiting for its exec (see `execs`); returns it and the pipes' read ends, or
/// the message of a failed spawn.
fn start_main(
    container: &ContainerSpec,
    cgroup: Option<&ContainerCgroup>,
    notify_socket: Option<&std::path::Path>,
) -> Result<(process::Launched, OwnedFd, OwnedFd), String> {
    let mut prepared =
        process::prepare(&container.command, container).map_err(|e| e.to_string())?;
    if let Some(path) = notify_socket {
        notify::grant(path, prepared.uid(), prepared.gid())?;
        let value = path
            .to_str()
            .ok_or_else(|| format!("notify socket {}: not UTF-8", path.display()))?;
        prepared = prepared
            .with_env("NOTIFY_SOCKET", value)
            .map_err(|e| e.to_string())?;
        // sd_watchdog_enabled(3): the period in microseconds, and the pid it is meant for.
        if let Some(period) = container.watchdog {
            prepared = prepared
                .with_env("WATCHDOG_USEC", &period.as_micros().max(1).to_string())
                .and_then(|p| p.with_own_pid_as_watchdog_pid())
                .map_err(|e| e.to_string())?;
        }
    }
    let ((out_r, out_w), (err_r, err_w)) = process::pipe_nonblocking()
        .and_then(|out| process::pipe_nonblocking().map(|err| (out, err)))
        .map_err(|e| e.to_string())?;
    let launched = process::spawn_pipelined(
        prepared,
        cgroup.map(|c| process::CgroupTarget {
            dir: Some(c.dir_fd()),
            procs: c.procs_fd(),
        }),
        Stdio::Separate {
            stdout: out_w,
            stderr: err_w,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok((launched, out_r, err_r))
}

/// Inode, mtime and size of a termination message file (not following a final symlink).
fn message_stamp(path: &std::path::Path) -> Option<(u64, i64, i64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
}

/// Reads a termination message file the way a container cannot abuse: no component may be a
/// symlink ([`crate::trust::open_without_links`]: a directory on the way swapped for a link
/// into another user's files is refused, not followed), it must be a regular file changed since the spawn (not an
/// earlier run's message; for an adopted run, changed at or after its start, `not_before`), and when the container runs as a user other than root it must not
/// be owned by root (a hard link to a root-only file is not the container's message). At most
/// 4 KiB (kubelet `MaxContainerTerminationMessageLength`).
fn read_termination_file(
    path: &std::path::Path,
    before: Option<(u64, i64, i64, u64)>,
    not_before: Option<std::time::SystemTime>,
    user: Option<&str>,
) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let file = crate::trust::open_without_links(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    if before == Some((meta.ino(), meta.mtime(), meta.mtime_nsec(), meta.size())) {
        return Ok(String::new());
    }
    if let (Some(start), Ok(mtime)) = (not_before, meta.modified())
        && mtime < start
    {
        return Ok(String::new());
    }
    let as_root = user.is_none_or(|u| u == "0" || u == "root");
    if !as_root && meta.uid() == 0 {
        return Err(std::io::Error::other(
            "owned by root while the container runs as another user",
        ));
    }
    let mut buf = Vec::with_capacity(4096);
    file.take(4096).read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}
