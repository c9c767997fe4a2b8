//! The event loop: the `Shell` that owns every descriptor, the loop turn, dispatch by token,
//! signals, reaping, reload and shutdown. Its other halves live beside it: `executor` (actions
//! → spawns, signals, kills, cgroup retirement, container output), `probes` (probe attempts on
//! the loop) and `control` (answering the socket from the core's snapshot).
//!
//! Tokens: fixed ones for the signal pipe, the control listener and vigil's own stdout; the
//! control server allocates connection tokens from [`CONN_TOKEN_BASE`]; everything else
//! (pipes, cgroup event files, probe sockets) gets a fresh token from [`DYN_TOKEN_BASE`] up,
//! recorded in `tokens` with its owner. An event for an unknown token is logged, not fatal.

mod control;
mod executor;
mod probes;

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use libc::SIGPWR;
use log::{debug, error, info, warn};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM};
use signal_hook_mio::v1_0::Signals;

use super::slots::{PidOwner, ProbeHow, ProbeRun, Probes, Run, Slot, TokenOwner};
use crate::cgroup::{ContainerCgroup, Controllers, Manager};
use crate::config::spec::{Config, ContainerSpec, ProbeAction, ProbeKind, ProbeSpec};
use crate::config::{self, ConfigSource};
use crate::control::protocol::{self, Request, RequestCmd};
use crate::control::render;
use crate::control::server::{ConnId, Incoming, Server};
use crate::control::time::WallClock;
use crate::core::{
    Action, Command, ContainerKey, ExitInfo, Generation, Input, ProbeOutcome, ReloadError,
    Supervisor, WaitingReason,
};
use crate::logs::{self, ContainerLog, Forwarder};
use crate::process::{self, Reaped, Stdio};

const SIGNAL_TOKEN: Token = Token(0);
const LISTENER_TOKEN: Token = Token(1);
const STDOUT_TOKEN: Token = Token(2);
/// Control connections: `CONN_TOKEN_BASE..DYN_TOKEN_BASE`.
pub const CONN_TOKEN_BASE: usize = 1 << 20;
const DYN_TOKEN_BASE: usize = 1 << 30;

/// Bytes read from one pipe per readiness event, so one chatty container cannot starve the
/// loop (the pipe is edge-triggered: we re-arm by reading until WouldBlock or the cap, and
/// keep a "more to read" list for the cap case).
const PIPE_READ_CAP: usize = 256 * 1024;

/// Errors that stop vigil from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("creating the event loop: {0}")]
    Poll(io::Error),
    #[error("installing signal handlers: {0}")]
    Signals(io::Error),
    #[error(transparent)]
    Cgroup(#[from] crate::cgroup::CgroupError),
    #[error(transparent)]
    Control(#[from] crate::control::server::ControlError),
    #[error(transparent)]
    Harden(#[from] super::harden::HardenError),
    #[error("containers set resource limits but vigil runs without cgroups")]
    NoCgroupsForLimits,
    #[error("socket_group \"{0}\" is not a known group name or gid")]
    UnknownSocketGroup(String),
}

/// A follower of `events -f` or `logs -f` on a control connection.
enum Follower {
    Events {
        conn: ConnId,
        id: serde_json::Value,
        last_seq: u64,
    },
    Logs {
        conn: ConnId,
        id: serde_json::Value,
        key: ContainerKey,
        offset: u64,
    },
}

pub struct Shell {
    poll: Poll,
    signals: Signals,
    core: Supervisor,
    clock: WallClock,
    config: Config,
    source: ConfigSource,
    server: Server,
    cgroups: Option<Manager>,
    slots: HashMap<ContainerKey, Slot>,
    pids: HashMap<u32, PidOwner>,
    tokens: HashMap<Token, TokenOwner>,
    pipes: HashMap<Token, OwnedFd>,
    /// Pipes that hit the per-event read cap and still have data.
    pipes_more: Vec<Token>,
    next_token: usize,
    probes: Probes,
    /// Cgroups of finished runs, waiting for `populated 0` to be removed.
    dying: HashMap<u64, (ContainerCgroup, Token)>,
    next_dying: u64,
    /// Spawns waiting for the previous run's cgroup to disappear.
    deferred: Vec<(Instant, Action)>,
    /// Container output forwarded to vigil's stdout (`log_forward`), through a non-blocking
    /// descriptor of its own so a slow reader of stdout never blocks the loop.
    forwarder: Option<(Forwarder, OwnedFd)>,
    followers: Vec<Follower>,
    stdout_watched: bool,
    stop_signals: u32,
    exit_code: Option<i32>,
    /// Turns that panicked (see [`Shell::on_panic`]).
    panics: u32,
    watchdog: Option<Duration>,
    next_watchdog: Option<Instant>,
    last_status: String,
    next_status: Instant,
    started_at: Instant,
    #[cfg(feature = "fault-injection")]
    fault: super::fault::Fault,
}

/// The exit code after a loop turn panicked (EX_SOFTWARE from sysexits.h).
const EXIT_PANIC: i32 = 70;

impl Shell {
    pub fn new(config: Config, source: ConfigSource) -> Result<Shell, StartError> {
        let socket_path = config.supervisor.socket.clone();
        let socket_path = socket_path.unwrap_or_else(crate::control::default_socket_path);
        let host = super::harden::check_startup(&source, &socket_path)?;
        let poll = Poll::new().map_err(StartError::Poll)?;
        let mut signals = Signals::new([SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGPWR])
            .map_err(StartError::Signals)?;
        poll.registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)
            .map_err(StartError::Signals)?;

        if !super::pid1::is_pid1() {
            // Orphans of our containers are re-parented to us, so nothing escapes reaping.
            if let Err(e) = process::set_child_subreaper() {
                warn!("cannot become a child subreaper: {e}");
            }
        }
        if let Some(adj) = config.supervisor.oom_score_adj {
            set_oom_score_adj(adj);
        }

        let needs = needed_controllers(&config);
        let cgroups = Manager::setup(
            &(&config.supervisor.cgroup_root).into(),
            &config.supervisor.cgroup_name,
            needs,
        )?;
        host.after_cgroup_setup(&config, cgroups.is_some());
        if let Some(m) = &cgroups {
            // A limit whose controller is missing is an error at start, naming the controller,
            // the hierarchy path and what is available.
            if let Err(e) = m.check_controllers(needs) {
                // Leave nothing behind: undo the delegation dance before refusing to start.
                if let Err(t) = m.teardown() {
                    warn!("{t}");
                }
                return Err(e.into());
            }
            info!("cgroups: containers go under {}", m.root().display());
            for stale in m.sweep_stale() {
                warn!(
                    "cleaned up cgroup left by an earlier vigil: {}",
                    stale.display()
                );
            }
        } else if !needs.is_empty() {
            // Limits cannot be enforced without cgroups: refuse rather than run unconfined.
            return Err(crate::host::preflight(&config)
                .err()
                .map(StartError::from)
                .unwrap_or(StartError::NoCgroupsForLimits));
        } else if config.supervisor.cgroup_root != crate::config::spec::CgroupRoot::None {
            warn!("running without cgroups: containers are tracked by process group only");
        }

        let socket = config
            .supervisor
            .socket
            .clone()
            .unwrap_or_else(crate::control::default_socket_path);
        let group = match &config.supervisor.socket_group {
            Some(g) => Some(resolve_group(g)?),
            None => None,
        };
        let mut server = Server::bind(
            &socket,
            config.supervisor.socket_mode,
            group,
            CONN_TOKEN_BASE,
        )?;
        server.register(poll.registry(), LISTENER_TOKEN)?;
        info!("control socket listening on {}", socket.display());

        let now = Instant::now();
        let core = Supervisor::new(&config, now);
        let forwarder = if config.supervisor.log_forward {
            match logs::nonblocking_stdout() {
                Ok(fd) => Some((Forwarder::default(), fd)),
                Err(e) => {
                    warn!("not forwarding container output: {e}");
                    None
                }
            }
        } else {
            None
        };
        Ok(Shell {
            poll,
            signals,
            core,
            clock: WallClock::now(),
            config,
            source,
            server,
            cgroups,
            slots: HashMap::new(),
            pids: HashMap::new(),
            tokens: HashMap::new(),
            pipes: HashMap::new(),
            pipes_more: Vec::new(),
            next_token: DYN_TOKEN_BASE,
            probes: HashMap::new(),
            dying: HashMap::new(),
            next_dying: 0,
            deferred: Vec::new(),
            forwarder,
            followers: Vec::new(),
            stdout_watched: false,
            stop_signals: 0,
            exit_code: None,
            panics: 0,
            watchdog: sd_notify::watchdog_enabled(),
            next_watchdog: None,
            last_status: String::new(),
            next_status: now,
            started_at: now,
            #[cfg(feature = "fault-injection")]
            fault: super::fault::Fault::from_env(now),
        })
    }

    /// Run until the core says exit; returns the exit code.
    pub fn run(mut self) -> i32 {
        let mut events = Events::with_capacity(256);
        let now = Instant::now();
        self.drain_actions(now);
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        if let Some(w) = self.watchdog {
            self.next_watchdog = Some(now + w / 2);
        }
        self.update_status(now);
        loop {
            let timeout = self.next_timeout(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    error!("poll failed: {e}");
                }
                continue;
            }
            let now = Instant::now();
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

    /// Handle the ready events and everything due; `Some(code)` once vigil is to exit.
    fn one_turn(&mut self, events: &Events, now: Instant) -> Option<i32> {
        #[cfg(feature = "fault-injection")]
        self.fault.check(now);
        for event in events.iter() {
            self.dispatch(event, now);
        }
        self.turn(now);
        if let Some(code) = self.exit_code {
            let code = if self.panics > 0 { EXIT_PANIC } else { code };
            self.exit_code = Some(code);
            self.finish();
            return Some(code);
        }
        if self.server.has_backlog() {
            let backlog = self.server.process_backlog(self.poll.registry());
            for inc in backlog {
                self.answer(inc, now);
            }
        }
        None
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

    /// Everything after the ready sources of one turn have been handled.
    fn turn(&mut self, now: Instant) {
        self.read_more_pipes(now);
        self.expire_net_probes(now);
        self.core.handle_timeout(now);
        self.retry_deferred(now);
        self.retry_dying();
        self.drain_actions(now);
        self.push_followers();
        self.flush_forwarder();
        if let Some(at) = self.next_watchdog
            && now >= at
        {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Watchdog]);
            self.next_watchdog = self.watchdog.map(|w| now + w / 2);
        }
        if now >= self.next_status {
            self.update_status(now);
            self.ensure_socket();
        }
    }

    /// A control socket file deleted behind vigil's back is re-created on SIGHUP and, at most
    /// once a second, whenever the loop is awake (docs/bad-input.md).
    fn ensure_socket(&mut self) {
        if std::fs::symlink_metadata(self.server.path()).is_ok() {
            return;
        }
        let group = match &self.config.supervisor.socket_group {
            Some(g) => match resolve_group(g) {
                Ok(gid) => Some(gid),
                Err(e) => {
                    error!(
                        "control socket {} was deleted; {e}",
                        self.server.path().display()
                    );
                    return;
                }
            },
            None => None,
        };
        match self.server.recreate_if_missing(
            self.poll.registry(),
            self.config.supervisor.socket_mode,
            group,
        ) {
            Ok(true) => warn!(
                "control socket {} was deleted; re-created it",
                self.server.path().display()
            ),
            Ok(false) => {}
            Err(e) => error!("control socket was deleted and cannot be re-created: {e}"),
        }
    }

    fn next_timeout(&self, now: Instant) -> Option<Duration> {
        let mut deadline = self.core.poll_timeout();
        let mut consider = |t: Instant| {
            deadline = Some(deadline.map_or(t, |d| d.min(t)));
        };
        #[cfg(feature = "fault-injection")]
        if let Some(t) = self.fault.deadline() {
            consider(t);
        }
        if let Some(w) = self.next_watchdog {
            consider(w);
        }
        for (at, _) in &self.deferred {
            consider(*at);
        }
        if !self.dying.is_empty() {
            // Fallback in case a populated-0 notification is missed.
            consider(now + Duration::from_millis(200));
        }
        if !self.pipes_more.is_empty() {
            consider(now);
        }
        if self.watchdog.is_some() || !self.last_status.is_empty() {
            consider(self.next_status);
        }
        deadline.map(|d| wake_early_for_slack(d.saturating_duration_since(now)))
    }

    fn alloc_token(&mut self, owner: TokenOwner) -> Token {
        let t = Token(self.next_token);
        self.next_token += 1;
        self.tokens.insert(t, owner);
        t
    }

    // ---- dispatch -------------------------------------------------------------------------

    fn dispatch(&mut self, event: &mio::event::Event, now: Instant) {
        match event.token() {
            SIGNAL_TOKEN => self.on_signals(now),
            LISTENER_TOKEN => self.on_control(event, now),
            STDOUT_TOKEN => self.flush_forwarder(),
            t if t.0 >= CONN_TOKEN_BASE && t.0 < DYN_TOKEN_BASE => self.on_control(event, now),
            t => match self.tokens.get(&t).copied() {
                Some(TokenOwner::Pipe { key, .. }) => self.read_pipe(t, key),
                Some(TokenOwner::MemoryEvents { key, generation }) => {
                    self.on_memory_events(key, generation, now)
                }
                Some(TokenOwner::DyingCgroup { .. }) => self.retry_dying(),
                Some(TokenOwner::NetProbe { key, kind }) => {
                    self.on_net_probe(key, kind, event, now)
                }
                Some(TokenOwner::ProbePipe { key, kind }) => self.on_probe_pipe(key, kind),
                None => debug!("event for unknown token {t:?}"),
            },
        }
    }

    fn on_signals(&mut self, now: Instant) {
        let pending: Vec<i32> = self.signals.pending().collect();
        for sig in pending {
            match sig {
                SIGCHLD => self.reap(now),
                SIGTERM | SIGINT | SIGPWR => {
                    self.stop_signals += 1;
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
                    if !force {
                        let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
                    }
                    let _ = self.core.command(now, Command::Shutdown { force });
                }
                SIGHUP => {
                    self.ensure_socket();
                    match self.reload(now) {
                        Ok(msg) => info!("SIGHUP: {msg}"),
                        Err(e) => error!("SIGHUP: reload failed, nothing changed:\n{e}"),
                    }
                }
                _ => {}
            }
        }
        // Reaping may be due even without SIGCHLD coalescing issues; cheap to check.
        self.reap(now);
    }

    // ---- reaping --------------------------------------------------------------------------

    fn reap(&mut self, now: Instant) {
        for reaped in process::reap_all() {
            let (pid, code, signal) = match reaped {
                Reaped::Exited { pid, code } => (pid, Some(code), None),
                Reaped::Signaled { pid, signal, .. } => (pid, None, Some(signal)),
            };
            match self.pids.remove(&pid) {
                Some(PidOwner::Main { key, generation }) => {
                    self.on_main_exit(key, generation, code, signal, now)
                }
                Some(PidOwner::ExecProbe { key, kind, seq }) => {
                    self.on_exec_probe_exit(key, kind, seq, code, signal, now)
                }
                None => debug!("reaped pid {pid} (not a container's main process)"),
            }
        }
    }

    fn on_main_exit(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        code: Option<i32>,
        signal: Option<i32>,
        now: Instant,
    ) {
        let mut exit = ExitInfo {
            code,
            signal,
            ..ExitInfo::default()
        };
        let mut leftover_cgroup = None;
        let mut pgid = None;
        if let Some(slot) = self.slots.get_mut(&key)
            && let Some(run) = slot.run.as_mut()
            && run.generation == generation
        {
            run.exited = true;
            pgid = run.pid;
            if let Some(cg) = run.cgroup.take() {
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
                leftover_cgroup = Some(cg);
            }
        }
        // Whatever the main process left behind dies with it.
        match leftover_cgroup {
            Some(cg) => self.retire_cgroup(key, generation, cg),
            None => {
                if let Some(pgid) = pgid {
                    let _ = process::signal_group(pgid, libc::SIGKILL);
                }
            }
        }
        self.deregister_memory_events(key, generation);
        self.feed(
            now,
            Input::Exited {
                key,
                generation,
                exit,
            },
        );
    }

    /// Kill what is left in a finished run's cgroup and remove it once empty.
    fn retire_cgroup(&mut self, key: ContainerKey, generation: Generation, cg: ContainerCgroup) {
        if let Ok(true) = cg.populated() {
            if let Err(e) = cg.kill() {
                warn!("{e}");
            }
        }
        match cg.remove() {
            Ok(()) => {}
            Err(e) => {
                debug!("cgroup of {key:?}/{generation} not removable yet: {e}");
                let id = self.next_dying;
                self.next_dying += 1;
                let token = self.alloc_token(TokenOwner::DyingCgroup { id });
                let fd = cg.events_fd().as_raw_fd();
                if let Err(e) =
                    self.poll
                        .registry()
                        .register(&mut SourceFd(&fd), token, Interest::PRIORITY)
                {
                    debug!("cannot watch {}: {e}", cg.path().display());
                }
                self.dying.insert(id, (cg, token));
            }
        }
    }

    fn retry_dying(&mut self) {
        let ids: Vec<u64> = self.dying.keys().copied().collect();
        for id in ids {
            let Some((cg, token)) = self.dying.remove(&id) else {
                continue;
            };
            if let Ok(true) = cg.populated() {
                let _ = cg.kill();
                self.dying.insert(id, (cg, token));
                continue;
            }
            let fd = cg.events_fd().as_raw_fd();
            let _ = self.poll.registry().deregister(&mut SourceFd(&fd));
            match cg.remove() {
                Ok(()) => {
                    self.tokens.remove(&token);
                }
                Err(_) => {
                    let _ = self.poll.registry().register(
                        &mut SourceFd(&fd),
                        token,
                        Interest::PRIORITY,
                    );
                    self.dying.insert(id, (cg, token));
                }
            }
        }
    }

    // ---- reload, status, shutdown ---------------------------------------------------------

    fn reload(&mut self, now: Instant) -> Result<String, ReloadError> {
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Reloading,
            sd_notify::NotifyState::monotonic_usec_now()
                .unwrap_or(sd_notify::NotifyState::Custom("")),
        ]);
        let result = match config::load_source(&self.source) {
            Err(errors) => Err(ReloadError::InvalidConfig(errors.to_string())),
            Ok(new) => {
                if let Some(m) = &self.cgroups
                    && let Err(e) = m.check_controllers(needed_controllers(&new))
                {
                    Err(ReloadError::InvalidConfig(e.to_string()))
                } else {
                    self.config.supervisor.admin_uids = new.supervisor.admin_uids.clone();
                    self.config.supervisor.admin_gids = new.supervisor.admin_gids.clone();
                    let r = self
                        .core
                        .command(now, Command::Reload(Box::new(new.clone())))
                        .map_err(ReloadError::Refused);
                    if r.is_ok() {
                        self.config = new;
                    }
                    r
                }
            }
        };
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        self.drain_actions(now);
        result
    }

    fn update_status(&mut self, now: Instant) {
        self.next_status = now + Duration::from_secs(1);
        if std::env::var_os("NOTIFY_SOCKET").is_none() {
            return;
        }
        let pods = self.core.pods(now);
        let line = status_line(&pods);
        if line != self.last_status {
            let _ = sd_notify::notify(&[sd_notify::NotifyState::Status(&line)]);
            self.last_status = line;
        }
    }

    fn finish(&mut self) {
        // Kill anything a probe left, then remove every cgroup we made.
        let keys: Vec<_> = self.probes.keys().copied().collect();
        for (key, kind) in keys {
            self.cancel_probe_any(key, kind);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while !self.dying.is_empty() && Instant::now() < deadline {
            self.retry_dying();
            if !self.dying.is_empty() {
                // Shutdown path only: the loop has ended, a brief wait for the kernel to
                // empty the last cgroups is all that is left to do.
                std::thread::sleep(Duration::from_millis(5));
                self.reap(Instant::now());
            }
        }
        if let Some(m) = &self.cgroups
            && let Err(e) = m.teardown()
        {
            warn!("{e}");
        }
        self.flush_forwarder();
        // The server (and with it the socket file) goes when the shell is dropped.
        let uptime = self.started_at.elapsed();
        info!(
            "vigil stopped after {:.1}s (exit code {})",
            uptime.as_secs_f64(),
            self.exit_code.unwrap_or(0)
        );
    }
}

/// "4 pods: 3 running, 1 in back-off; 5/6 containers ready"
fn status_line(pods: &[crate::core::PodStatus]) -> String {
    use crate::core::{ContainerState, Phase};
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

fn needed_controllers(config: &Config) -> Controllers {
    crate::host::needed_controllers(config)
}

fn resolve_group(name: &str) -> Result<u32, StartError> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => Err(StartError::UnknownSocketGroup(name.to_string())),
    }
}

/// vigil protects itself from the kernel's global OOM killer (proc(5): oom_score_adj).
fn set_oom_score_adj(adj: i32) {
    let path = "/proc/self/oom_score_adj";
    if let Err(e) = std::fs::write(path, adj.to_string()) {
        // As root this is a real loss of protection (no CAP_SYS_RESOURCE?); unprivileged it is
        // expected for a negative value.
        if nix::unistd::Uid::effective().is_root() {
            warn!("cannot write {adj} to {path}: {e}");
        } else {
            debug!("cannot write {adj} to {path}: {e}");
        }
    }
}

fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// The poll timeout for a deadline `remaining` away. epoll_wait lets the kernel fire up to
/// 0.1 % of the timeout late (timer slack: 1 ms on a 1 s sleep, 10 ms on a 10 s probe period,
/// and mio has already rounded up to the millisecond), so a long sleep ends early by twice
/// that; the next turn finds nothing due and sleeps the few milliseconds left, with a slack of
/// microseconds. Short timeouts are left alone.
fn wake_early_for_slack(remaining: Duration) -> Duration {
    if remaining < Duration::from_millis(50) {
        remaining
    } else {
        remaining - remaining / 500
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_poll_timeouts_end_early_enough_to_absorb_the_kernels_timer_slack() {
        for us in [
            50_000,
            100_000,
            999_700,
            1_000_000,
            10_000_000,
            10_000_400,
            3_600_000_000,
        ] {
            let d = Duration::from_micros(us);
            let t = wake_early_for_slack(d);
            // mio rounds up to the next millisecond, then the kernel may add 0.1 %.
            let rounded = Duration::from_millis(t.as_nanos().div_ceil(1_000_000) as u64);
            let latest = rounded + rounded / 1000;
            assert!(
                latest <= d + Duration::from_micros(100),
                "{us} us: may wake at {latest:?}"
            );
            assert!(t >= d - d / 100, "{us} us: wakes far too early ({t:?})");
        }
    }

    #[test]
    fn short_poll_timeouts_are_kept() {
        for ms in [0, 1, 2, 49] {
            let d = Duration::from_millis(ms);
            assert_eq!(wake_early_for_slack(d), d);
        }
    }
}
