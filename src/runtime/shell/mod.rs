//! The runtime shell as a router: it owns the one `mio::Poll`, reads the clock, and sends every
//! ready event to the component that owns its token; components turn events into inputs for
//! the core, and the core's actions go back out through them.
//!
//! Each loop turn: poll with the earliest deadline anyone has (every [`Component`]'s and the
//! core's) → read the clock once → dispatch each event to its owner ([`tokens::Owner::of`],
//! then one [`Component::process`] call) → feed the inputs that come back to the core → run the
//! core's actions (`runs`) → the turn's bounded chores (pipes left with data, deferred spawns,
//! dying cgroups, followers, forwarding, notifications).
//!
//! Components, each owning its descriptors, tokens and clean-up (no component reaches into
//! another's state; what one needs of the core comes through a [`component::Link`]):
//! - `component`: the trait every descriptor owner implements, and the link to the core;
//! - `tokens`: the token space and RAII registrations; `kill`: the one process-tree kill;
//! - `runs`: the container slots' runs and what starts, watches and ends them — the core's
//!   actions are carried out there: `reaper` (pid → owner, the only `waitpid`), `execs` (exec
//!   reports), `janitor` (finished runs' cgroups until removed, and spawns waiting for them),
//!   `capture` (container output pipes and forwarding to stdout or the journal), `probes`
//!   (probe attempts in flight), the state file's tracker, `adopt` (runs taken over after a
//!   crash of vigil) and `journal` (the core's events as vigil's log lines);
//! - `notifier`: sd_notify READY/RELOADING/STOPPING, watchdog and STATUS;
//! - `notify`: the containers' own sd_notify sockets (`notify = true`), read into typed
//!   notifications for the core; lent to the runs through the link (a run's socket is made at
//!   its spawn and closed at its end);
//! - `signals`: vigil's own signals, read into what each asks of the router;
//! - `control`: the control socket server and the streams on it; answers what only reads from
//!   a view of the core and the slots, hands what changes state back to the router; `waiters`:
//!   the requests whose reply waits for a state (`wait_ms`);
//! - `metrics`: the `metrics_address` listener, its scrapers and the expositions being built;
//! - `event_hooks`: the `on_event` hooks' queues and deliveries (exec hooks, webhooks);
//! - `pod_dir`: the inotify watch of `[supervisor] pod_dir`, which makes a reload due;
//! - `upgrade`: `vigil upgrade`'s pre-flight, the handoff state written and taken over;
//! - `startup`: building the shell, and `READY=1` once the initial starts are done;
//! - `reload`: a reload and `vigil scale`, on the parts of the shell they change.
//! - `macros`: the borrows the router hands the components (`view!`, `link!`, `parts!`), the
//!   shell's fields named one by one.
//!
//! Must not: make lifecycle decisions (restart, back-off, reasons: the core's), block (every
//! wait is the poll timeout), or treat an event for an unknown token as more than a debug line.

#[macro_use]
mod macros;

mod adopt;
mod capture;
mod component;
mod control;
mod event_hooks;
mod execs;
mod janitor;
mod journal;
mod kill;
mod metrics;
mod notifier;
mod notify;
mod pod_dir;
mod probes;
mod reaper;
mod reload;
mod runs;
mod signals;
mod startup;
mod tokens;
mod turnwatch;
mod upgrade;
mod waiters;

use std::io;
use std::time::{Duration, Instant, SystemTime};

use log::{debug, error, info};
use mio::{Events, Poll};

use super::fdstore::PipeName;
use crate::config::ConfigSource;
use crate::config::select::Selection;
use crate::config::spec::Config;
use crate::control::wire::ErrorKind;
use crate::core::{Action, Command, ReloadError, Supervisor};
use component::{Component, Link, StderrLog};
use control::{Control, Mutation};
use notifier::Notifier;
use runs::Runs;
use signals::{Asked, SignalPipe, signal_name};
pub use startup::StartError;
use startup::resolve_group;
use tokens::Owner;
pub use tokens::{CONN_TOKEN_BASE, Watched};
use turnwatch::{Chore, Phase, TurnWatch};

/// The last reload's outcome, as the metrics show it (`vigil_config_last_reload_*`): the
/// config vigil started with counts as a successful load. Not carried across an upgrade (the
/// new vigil loads the config itself).
#[derive(Debug, Clone, Copy)]
pub(super) struct LastReload {
    pub(super) successful: bool,
    pub(super) success_at: SystemTime,
}

pub struct Shell {
    poll: Poll,
    signals: SignalPipe,
    core: Supervisor,
    /// What vigil runs from: the config, its source and selection, the pods refused at
    /// start, the last reload's outcome (`reload::Loaded`).
    loaded: reload::Loaded,
    control: Control,
    /// The runs and the components that start, watch and end them (`runs`).
    runs: Runs,
    /// The initial starts are still under way (queued, or their exec not confirmed): `READY=1`
    /// and the start-up trim wait for them ([`startup::settle`]).
    starting: bool,
    /// The trim after a burst of requests (src/runtime/trim.rs).
    idle_trim: super::trim::IdleTrim,
    notifier: Notifier,
    /// The `on_event` hooks.
    event_hooks: event_hooks::EventHooks,
    /// The containers' sd_notify sockets (`notify = true`).
    notify: notify::NotifySockets,
    /// The metrics endpoint (`metrics_address`) and the expositions being built.
    metrics: metrics::Metrics,
    /// The watch of `pod_dir`, and the reload it makes due.
    pod_dir: pod_dir::PodDirWatch,
    /// Probe result counters and duration histograms for the metrics.
    probe_stats: crate::metrics::probes::ProbeStats,
    /// When vigil started, by the wall clock (`process_start_time_seconds`).
    started_wall: SystemTime,
    exit_code: Option<i32>,
    /// Turns that panicked (see [`Shell::on_panic`]).
    panics: u32,
    started_at: Instant,
    /// `vigil upgrade`: the pre-flight under way, what the next exec is given.
    upgrade: upgrade::Upgrade,
    /// The self-watchdog: the current turn's phases (`turnwatch`).
    watch: TurnWatch,
    #[cfg(feature = "fault-injection")]
    fault: super::fault::Fault,
}

/// `poll` failures in a row after which vigil shuts down (with the pauses between them, about
/// 3 s of failing).
const POLL_ERRORS_BEFORE_SHUTDOWN: u32 = 8;
/// A run of `poll` failures is logged at its first and every this many.
const POLL_ERROR_LOG_EVERY: u32 = 100;

/// The exit code after a loop turn panicked (EX_SOFTWARE from sysexits.h).
const EXIT_PANIC: i32 = 70;

/// How long an upgrade waits for the exec of containers just started before handing over.
const HANDOFF_SETTLE: Duration = Duration::from_millis(250);

impl Shell {
    /// Start-up, in order: host checks, the loop and its signals, vigil's own process
    /// attributes, cgroups, the control socket, log forwarding; then the core.
    /// `stored`: the output pipes the service manager handed back (`runtime::fdstore`).
    pub fn new(
        config: Config,
        source: ConfigSource,
        stored: Vec<(PipeName, std::os::fd::OwnedFd)>,
        selection: Selection,
    ) -> Result<Shell, StartError> {
        startup::build(config, source, selection, None, stored)
    }

    /// The new instance of `vigil upgrade`: the same start-up as [`Shell::new`] on the
    /// handed-over config, then every component takes over its part ([`upgrade::resume`]).
    pub fn resume(
        state: super::handoff::State,
        blobs: &[u8],
        error: Option<&str>,
    ) -> Result<Shell, StartError> {
        upgrade::resume(state, blobs, error)
    }

    /// Run until the core says exit; returns the exit code.
    pub fn run(mut self) -> i32 {
        let mut events = Events::with_capacity(256);
        let now = Instant::now();
        // The wall clock enters the core once per turn, beside `now` (schedules compute in it).
        self.core.set_wall_clock(now, jiff::Timestamp::now());
        self.drain_actions(now);
        self.runs.tracker.flush();
        self.update_status(now);
        self.settle_startup(now);
        let mut poll_errors: u32 = 0;
        loop {
            let timeout = self.next_timeout(Instant::now());
            let polled = match self.injected_poll_error() {
                Some(e) => {
                    events.clear();
                    Err(e)
                }
                None => self.poll.poll(&mut events, timeout),
            };
            match polled {
                Ok(()) => poll_errors = 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    poll_errors += 1;
                    if !self.on_poll_error(&e, poll_errors) {
                        continue;
                    }
                    // Polling is broken for good: turns without events (reaping by hand) so
                    // the shutdown begun in `on_poll_error` stops every pod and ends.
                    events.clear();
                    self.reap(Instant::now());
                }
            }
            let now = Instant::now();
            self.core.set_wall_clock(now, jiff::Timestamp::now());
            // A panic must not take the supervisor (or, as PID 1, the system) down without
            // stopping the pods: the hook has logged it; stop everything in an orderly way.
            let turn = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.one_turn(&events, now)
            }));
            let done = match turn {
                Ok(done) => done,
                Err(_) => self.on_panic(now),
            };
            if let Some(code) = done {
                return code;
            }
        }
    }

    /// `poll` failed (not EINTR) `count` times in a row: logged (the first time, then every
    /// [`POLL_ERROR_LOG_EVERY`]th), a pause that doubles up to a second instead of a spin, and
    /// past [`POLL_ERRORS_BEFORE_SHUTDOWN`] an orderly shutdown. True once that shutdown is
    /// under way: the caller runs a turn without events.
    fn on_poll_error(&mut self, e: &io::Error, count: u32) -> bool {
        if count == 1 || count % POLL_ERROR_LOG_EVERY == 0 {
            error!("poll failed ({count} in a row): {e}");
        }
        let pause = Duration::from_millis(10).saturating_mul(1 << count.min(7));
        // The loop cannot wait on anything without a working poll: this pause is all it has.
        std::thread::sleep(pause.min(Duration::from_secs(1)));
        if count == POLL_ERRORS_BEFORE_SHUTDOWN {
            error!("poll keeps failing: stopping every pod and exiting");
            self.notifier.stopping();
            let _ = self
                .core
                .command(Instant::now(), Command::Shutdown { force: false });
        }
        count >= POLL_ERRORS_BEFORE_SHUTDOWN
    }

    /// Handle the ready events and everything due; `Some(code)` once vigil is to exit.
    fn one_turn(&mut self, events: &Events, now: Instant) -> Option<i32> {
        #[cfg(feature = "fault-injection")]
        self.fault.check(now);
        self.runs.spawn_budget = runs::SPAWNS_PER_TURN;
        self.watch.begin(now);
        for event in events.iter() {
            self.dispatch(event, now);
            if let Some(owner) = Owner::of(event.token()) {
                self.watch.mark(Phase::Dispatch(owner));
            }
        }
        self.turn(now);
        if self.pod_dir.take_due(now) {
            let _ = self.reload_from("pod_dir", now);
        }
        self.settle_startup(now);
        // Requests still being worked off (a crowd that pipelined them and left: no new event
        // comes) are activity too, so the trim comes after what they held is freed.
        if self.control.has_backlog() {
            self.idle_trim.activity(now);
        }
        // During start-up the start-up trim comes later anyway.
        if self.idle_trim.take_due(now) && !self.starting {
            self.control.release_memory();
            super::trim::give_back();
        }
        self.watch.mark(Phase::Chore(Chore::Startup));
        let slots = &self.runs.slots;
        self.watch
            .report_if_slow(|key| slots.get(&key).map(|s| format!("{}/{}", s.pod, s.name)));
        if let Some(code) = self.exit_code {
            let code = if self.panics > 0 { EXIT_PANIC } else { code };
            self.exit_code = Some(code);
            self.finish();
            return Some(code);
        }
        None
    }

    /// `READY=1` and the start-up trim once the initial starts are done
    /// ([`startup::settle`]).
    fn settle_startup(&mut self, now: Instant) {
        startup::settle(
            now,
            &mut self.starting,
            &self.core,
            &mut self.runs,
            &mut self.notifier,
            &mut self.idle_trim,
        );
    }

    /// A loop turn panicked. The first time: shut down as on SIGTERM and keep looping so that
    /// every pod is stopped and every cgroup removed, then exit with [`EXIT_PANIC`]. A second
    /// panic means the state cannot be trusted to finish that: give up and exit now (as PID 1,
    /// the final sweep then kills what is left and powers off).
    fn on_panic(&mut self, now: Instant) -> Option<i32> {
        self.panics += 1;
        if self.panics == 1 {
            error!("a loop turn panicked: stopping every pod and exiting");
            let stop = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let _ = self.core.command(now, Command::Shutdown { force: false });
                self.drain_actions(now);
            }));
            if stop.is_ok() {
                return None;
            }
            self.panics += 1;
        }
        error!("panicked again while shutting down: giving up, exiting now");
        Some(EXIT_PANIC)
    }

    /// Sends one ready event to the component that owns its token (the signals are the
    /// router's own: they are commands to the whole supervisor).
    fn dispatch(&mut self, event: &mio::event::Event, now: Instant) {
        let token = event.token();
        let Some(owner) = Owner::of(token) else {
            debug!("event for unknown token {token:?}");
            return;
        };
        if owner == Owner::Signals {
            self.on_signals(now);
            return;
        }
        if matches!(owner, Owner::Control | Owner::Metrics) {
            self.idle_trim.activity(now);
        }
        if owner == Owner::EventHooks {
            self.event_hooks
                .on_event(event, now, &mut self.runs.reaper, &mut self.core);
            return;
        }
        if owner == Owner::Notify {
            let mut said = Vec::new();
            self.notify.on_readable(token, &mut said);
            notify::feed(said, now, &mut self.runs, &mut link!(self));
            return;
        }
        let mut link = link!(self);
        let component: &mut dyn Component = match owner {
            Owner::Control => &mut self.control,
            Owner::Metrics => &mut self.metrics,
            Owner::Stderr => &mut StderrLog,
            Owner::PodDir => &mut self.pod_dir,
            Owner::Signals
            | Owner::Stdout
            | Owner::Capture
            | Owner::Oom
            | Owner::Janitor
            | Owner::Adopted
            | Owner::Exec
            | Owner::Probes
            | Owner::EventHooks
            | Owner::Notify => &mut self.runs,
        };
        component.process(event, now, &mut link);
    }

    /// The runs, and the link through which they feed the core.
    fn runs_and_link(&mut self) -> (&mut Runs, Link<'_>) {
        (&mut self.runs, link!(self))
    }

    /// Runs the actions the core has queued (including those its inputs from here queue), up to
    /// this turn's spawn budget: the queue stops before a `Spawn` beyond it.
    fn drain_actions(&mut self, now: Instant) {
        loop {
            let spawn = matches!(self.core.peek_action(), Some(Action::Spawn { .. }));
            if spawn && self.runs.spawn_budget == 0 {
                break;
            }
            let Some(action) = self.core.poll_action() else {
                break;
            };
            if spawn {
                self.runs.spawn_budget -= 1;
            }
            let (kind, key) = turnwatch::ActionKind::of(&action);
            match action {
                Action::Exit { code } => self.exit_code = Some(code),
                Action::Forget { key } => {
                    let (runs, mut link) = self.runs_and_link();
                    runs.execute(action, now, &mut link);
                    self.control.end_log_streams(key);
                }
                action => {
                    let (runs, mut link) = self.runs_and_link();
                    runs.execute(action, now, &mut link);
                }
            }
            self.watch.mark(Phase::Action(kind, key));
        }
    }

    /// Before a handoff (`vigil upgrade`): every queued action done and every pending exec
    /// settled, since the next instance knows runs only by pid, not by error pipe. False when a
    /// start is still unconfirmed after a few rounds (a start failing and restarting at once).
    fn settle_for_handoff(&mut self, now: Instant) -> bool {
        // A child's setup and exec take milliseconds; one that has not exec'd by then (its
        // cgroup frozen) refuses the upgrade rather than holding the loop.
        let deadline = Instant::now() + HANDOFF_SETTLE;
        for _ in 0..4 {
            self.runs.spawn_budget = u32::MAX;
            self.drain_actions(now);
            if self.runs.execs.is_empty() {
                return true;
            }
            let (runs, mut link) = self.runs_and_link();
            for settled in runs.execs.settle_all(deadline) {
                runs.exec_settled(settled, &mut link);
            }
        }
        self.drain_actions(now);
        self.runs.execs.is_empty()
    }

    /// Everything the reaper collects goes to its owner.
    fn reap(&mut self, now: Instant) {
        let (runs, mut link) = self.runs_and_link();
        runs.reap(now, &mut link);
        for (id, code, signal) in std::mem::take(&mut self.runs.hooks_ended) {
            self.event_hooks.ended(id, code, signal);
        }
        // Pre-flights of an upgrade (rare): after the runs' ends of the same reap are fed.
        while !self.runs.checks_ended.is_empty() {
            let (seq, code, signal) = self.runs.checks_ended.remove(0);
            let passed = self
                .upgrade
                .on_check_exit(seq, code, signal, now, &mut parts!(self));
            if let Some(ready) = passed {
                let settled = self.settle_for_handoff(now);
                self.upgrade
                    .hand_over(ready, settled, now, &mut parts!(self));
            }
        }
    }

    /// Everything after the ready sources of one turn have been handled: each chore in its
    /// order, by its owner (the core's timeouts and actions, the requests and expositions,
    /// which need a view of the core and the runs, and the status line are the router's).
    fn turn(&mut self, now: Instant) {
        self.upgrade.expire(now, &mut self.control);
        for chore in Chore::TURN {
            match chore {
                Chore::CoreTimeouts => {
                    if self.core.poll_timeout().is_some_and(|t| t <= now) {
                        self.notifier.changed();
                    }
                    self.core.handle_timeout(now);
                }
                Chore::Actions => self.drain_actions(now),
                Chore::Control => self.serve_control(now),
                Chore::Metrics => {
                    let view = view!(self);
                    self.metrics.serve(now, &view, &mut self.control);
                }
                Chore::Capture => {
                    // The sockets left with datagrams last turn, before the output's share.
                    let mut said = Vec::new();
                    self.notify.read_backlog(&mut said);
                    notify::feed(said, now, &mut self.runs, &mut link!(self));
                    self.chore_all(chore, now);
                }
                Chore::EventHooks => {
                    self.event_hooks
                        .turn(now, &mut self.runs.reaper, &mut self.core);
                }
                Chore::StateFile => {
                    self.notifier.tick_watchdog(now);
                    self.chore_all(chore, now);
                }
                Chore::Status => {
                    if self.notifier.status_due(now) {
                        self.update_status(now);
                    }
                }
                Chore::Janitor => {
                    self.chore_all(chore, now);
                    // A slow chore for the VM suite (`VIGIL_FAULT_SLOW_TURN_FILE`).
                    #[cfg(feature = "fault-injection")]
                    self.fault.slow_chore();
                }
                _ => self.chore_all(chore, now),
            }
            self.watch.mark(Phase::Chore(chore));
        }
    }

    /// Every component's share of `chore` (the notifier, which the link lends to the others,
    /// is the router's to drive).
    fn chore_all(&mut self, chore: Chore, now: Instant) {
        let mut stderr = StderrLog;
        let components: [&mut dyn Component; 6] = [
            &mut self.runs,
            &mut self.control,
            &mut self.metrics,
            &mut stderr,
            &mut self.idle_trim,
            &mut self.upgrade,
        ];
        let mut link = link!(self);
        for c in components {
            c.chore(chore, now, &mut link);
        }
    }

    /// Every component, for what the router asks of all alike (their deadlines).
    fn components(&self) -> [&dyn Component; 10] {
        [
            &self.runs,
            &self.pod_dir,
            &self.event_hooks,
            &self.notify,
            &self.control,
            &self.metrics,
            &StderrLog,
            &self.idle_trim,
            &self.upgrade,
            &self.notifier,
        ]
    }

    /// The poll timeout: the earliest deadline of the core and of every component, `now` when
    /// one has bounded work left over.
    fn next_timeout(&self, now: Instant) -> Option<Duration> {
        let deadline = component::earliest(
            self.components()
                .into_iter()
                .map(|c| c.deadline(now))
                .chain([
                    self.core.poll_timeout(),
                    self.core.has_actions().then_some(now),
                    self.fault_deadline(),
                ]),
        );
        deadline.map(|d| component::wake_early_for_slack(d.saturating_duration_since(now)))
    }

    /// The `poll` error injected for the VM suite (`VIGIL_FAULT_POLL_ERROR_FILE`).
    #[cfg(feature = "fault-injection")]
    fn injected_poll_error(&self) -> Option<io::Error> {
        self.fault.poll_error()
    }

    #[cfg(not(feature = "fault-injection"))]
    fn injected_poll_error(&self) -> Option<io::Error> {
        None
    }

    #[cfg(feature = "fault-injection")]
    fn fault_deadline(&self) -> Option<Instant> {
        self.fault.deadline()
    }

    #[cfg(not(feature = "fault-injection"))]
    fn fault_deadline(&self) -> Option<Instant> {
        None
    }

    /// What vigil's own signals ask, carried out in the order they came.
    fn on_signals(&mut self, now: Instant) {
        for asked in self.signals.take(now) {
            match asked {
                Asked::Reap => self.reap(now),
                Asked::Shutdown { force } => {
                    if !force {
                        self.notifier.stopping();
                    }
                    let _ = self.core.command(now, Command::Shutdown { force });
                }
                Asked::Upgrade => {
                    info!(
                        "received SIGUSR2: upgrading (re-executing {})",
                        self.upgrade.exe_path.display()
                    );
                    let (core, runs) = (&self.core, &mut self.runs);
                    self.upgrade
                        .ask(None, false, None, now, core, runs, &mut self.control);
                }
                Asked::Reload => {
                    // A deleted or replaced socket file is bound again (the server also
                    // watches the socket's path with inotify).
                    if let Err(e) = self.control.check_socket_file() {
                        error!("{e}");
                    }
                    info!("received SIGHUP: reloading the config");
                    let _ = self.reload_from("SIGHUP", now);
                }
            }
        }
        // Reaping may be due even without SIGCHLD coalescing issues; cheap to check.
        self.reap(now);
    }

    /// Once per turn: the control requests within the turn's budget (a request that changes
    /// state is carried out here, then its reply sent), then a chunk for every stream with
    /// room.
    fn serve_control(&mut self, now: Instant) {
        self.control.begin_turn(now);
        loop {
            let view = view!(self);
            let Some((pending, mutation)) = self.control.next_change(now, &view) else {
                break;
            };
            let outcome = match mutation {
                Mutation::Command(command) => {
                    if matches!(command, Command::Shutdown { .. }) {
                        self.notifier.stopping();
                    }
                    // A stop or start changes what the state file keeps ended.
                    self.runs.tracker.touch();
                    self.notifier.changed();
                    self.core
                        .command(now, command)
                        .map_err(|e| (e.kind.into(), e.message))
                }
                Mutation::Reload => self
                    .reload_from("control socket", now)
                    .map_err(|e| (ErrorKind::from(&e), e.to_string())),
                Mutation::Scale { pod, replicas } => {
                    self.runs.tracker.touch();
                    self.notifier.changed();
                    self.scale(now, &pod, replicas)
                }
                Mutation::Metrics(format) => {
                    // Answered when its exposition is built (`Metrics::serve`, later turns).
                    self.metrics.ask(format, pending);
                    continue;
                }
                Mutation::Upgrade { binary, check } => {
                    // Answered once the new binary's pre-flight is over (later turns).
                    let (core, runs) = (&self.core, &mut self.runs);
                    let control = &mut self.control;
                    self.upgrade
                        .ask(binary, check, Some(pending), now, core, runs, control);
                    continue;
                }
            };
            self.control.finish_command(pending, outcome, now);
            self.drain_actions(now);
        }
        let view = view!(self);
        self.control.settle_waiters(now, &view);
        self.control.feed_streams(&view);
    }

    /// Reloads the config ([`reload::reload`]), runs what the core made of it, and logs the
    /// outcome.
    fn reload_from(&mut self, origin: &str, now: Instant) -> Result<String, ReloadError> {
        let result = reload::reload(now, &mut self.reload_parts());
        self.drain_actions(now);
        reload::log(origin, &result);
        result
    }

    /// `vigil scale POD N` ([`reload::scale`]), then what the core made of it.
    fn scale(
        &mut self,
        now: Instant,
        pod: &str,
        replicas: u32,
    ) -> Result<String, (ErrorKind, String)> {
        let before = reload::scale(now, pod, replicas, &mut self.reload_parts())?;
        self.drain_actions(now);
        Ok(reload::scaled(pod, before, replicas))
    }

    /// What a reload or a scale reads and changes.
    fn reload_parts(&mut self) -> reload::Parts<'_> {
        reload::Parts {
            core: &mut self.core,
            loaded: &mut self.loaded,
            argv: &self.upgrade.argv,
            runs: &mut self.runs,
            control: &mut self.control,
            metrics: &mut self.metrics.listener,
            event_hooks: &mut self.event_hooks,
            probe_stats: &mut self.probe_stats,
            notifier: &mut self.notifier,
            pod_dir: &mut self.pod_dir,
        }
    }

    fn update_status(&mut self, now: Instant) {
        let core = &self.core;
        self.notifier.update_status(now, || core.pods());
    }

    /// When vigil stops, after the loop's last turn: followers are told vigil is gone for good
    /// (they would wait for it to come back), then every component's own clean-up
    /// ([`Component::finish`]: the hooks' processes killed, the runs' probes, cgroups, holder,
    /// journal and output). The server (and with it the socket file) goes when the shell is
    /// dropped.
    fn finish(&mut self) {
        let view = view!(self);
        self.control.farewell(&view);
        let components: [&mut dyn Component; 2] = [&mut self.event_hooks, &mut self.runs];
        let mut link = link!(self);
        for c in components {
            c.finish(&mut link);
        }
        let uptime = self.started_at.elapsed();
        info!(
            "vigil stopped after {:.1}s (exit code {})",
            uptime.as_secs_f64(),
            self.exit_code.unwrap_or(0)
        );
    }
}
