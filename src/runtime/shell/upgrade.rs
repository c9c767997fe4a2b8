//! `vigil upgrade` in the shell, as one component ([`Upgrade`]): collecting every component's
//! part of the handoff state and executing the next vigil (old side), and taking it all over
//! again (new side, [`resume`]: the loop, cgroups and control server rebuilt the way a fresh
//! start does). What it reads and fills in of the other components comes
//! as [`Parts`], their fields borrowed one by one; the router hands it the pre-flight's exit
//! (from the reaper) and settles the runs before the exec ([`Ready`]).
//!
//! Owns the pre-flight under way (its child, its deadline: the component's deadline), what the
//! next exec is given (path, arguments, the count of upgrades), and the order of an upgrade:
//! refusals first (shutting down, an `http_get` lifecycle hook in flight — nothing changed;
//! exec hooks and spawns waiting for a cgroup are handed over); then the binary is opened,
//! checked and asked for its handoff version; then its pre-flight (both [`Preflight`]: a child
//! while the loop goes on, its exit reaped, its deadline the poll timeout; in the pre-flight the
//! binary reads the real state); then, once it exited 0, the state is written again; systemd
//! hears `RELOADING=1`; exec. A failed exec leaves every component as it was (nothing was taken
//! out of them: the state is a copy, the descriptors are only marked inheritable for the call)
//! and the caller gets the error; systemd hears `READY=1` again.
//!
//! Must not: change the core's state on the way out (the old process must be able to go on),
//! or make lifecycle decisions on the way in (the core continues from its own state; only
//! probe attempts lost with the old process are run again, see `Supervisor::after_handoff`);
//! run the core's actions (the router's `drain_actions`, before the exec).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use log::{debug, error, info, warn};

use super::capture::PipeFrom;
use super::component::{Component, Link};
use super::control::{Control, Pending};
use super::kill::kill_tree;
use super::metrics::Metrics;
use super::notifier::Notifier;
use super::notify::NotifySockets;
use super::reaper::PidOwner;
use super::reload::Loaded;
use super::runs::Runs;
use super::signals::SignalPipe;
use super::{Shell, StartError};
use crate::cgroup::ContainerCgroup;
use crate::control::protocol::{self, RequestId};
use crate::control::server::{ConnId, Handover, Inherited};
use crate::control::wire::ErrorKind;
use crate::core::Supervisor;
use crate::logs::{ContainerLog, LogBuffer};
use crate::metrics::probes::ProbeStats;
use crate::runtime::handoff::{
    self, AdoptedRun, Blobs, ConnState, DeferredSpawn, HookAttempt, MainPid, PipeState, ProbePid,
    Requester, RunState, SlotState, State, binary, mono,
};
use crate::runtime::slots::{ContainerRuntime, Run};

/// Why an upgrade did not happen; nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum UpgradeError {
    #[error(transparent)]
    Binary(#[from] binary::BinaryError),
    #[error("the supervisor is shutting down")]
    ShuttingDown,
    #[error("{0}: try again in a moment")]
    Busy(&'static str),
    #[error("no binary to execute: {0}; name one with --binary")]
    NoExe(String),
    #[error("cannot write the handoff state: {0}")]
    State(std::io::Error),
    #[error("exec of {} failed: {source}; vigil continues unchanged", path.display())]
    Exec {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl UpgradeError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            UpgradeError::ShuttingDown => ErrorKind::ShuttingDown,
            UpgradeError::State(_) => ErrorKind::Internal,
            _ => ErrorKind::BadArgument,
        }
    }
}

/// Who asked: answered by the new instance.
pub struct Asker<'a> {
    pub conn: ConnId,
    pub id: &'a RequestId,
}

/// How long the new binary may take to read the handoff and say it can take over.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Which run of the new binary an upgrade waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// `BINARY --handoff-version`: which formats it reads (at most
    /// [`binary::VERSION_TIMEOUT`]).
    Version,
    /// The pre-flight, `BINARY --handoff-check` (at most [`CHECK_TIMEOUT`]).
    Check,
}

/// An upgrade waiting for its new binary: first `BINARY --handoff-version` (its answer names
/// the formats it reads), then the pre-flight, `BINARY --handoff-check` with the real handoff
/// state (written then) on `VIGIL_HANDOFF_FD` and nothing else handed over; it reads the state
/// as its takeover would and exits 0, printing its `--handoff-version` line. Each is a child;
/// the loop goes on meanwhile: its exit comes through the reaper ([`PidOwner::UpgradeCheck`])
/// and its deadline through the poll timeout.
pub(super) struct Preflight {
    seq: u64,
    stage: Stage,
    pid: u32,
    binary: binary::Checked,
    check: bool,
    asker: Option<Pending>,
    /// The read end of its stdout (non-blocking).
    out: OwnedFd,
    deadline: Instant,
}

/// A pre-flight that passed (not a `--check`): the upgrade goes on with
/// [`Upgrade::hand_over`] once the router has settled the runs for the handoff.
pub(super) struct Ready {
    binary: binary::Checked,
    info: handoff::VersionInfo,
    asker: Option<Pending>,
    /// When the loop left for the handoff: the figure `vigil upgrade` reports.
    taken: Instant,
}

/// The upgrade component (see the module docs): the pre-flight under way, and what the next
/// exec is given.
pub(super) struct Upgrade {
    /// An upgrade waiting for its new binary.
    preflight: Option<Preflight>,
    /// The last pre-flight's number.
    seq: u64,
    /// What `vigil upgrade` executes without `--binary`, and the arguments it passes.
    pub(super) exe_path: PathBuf,
    pub(super) argv: Vec<String>,
    /// Upgrades this process has been through.
    upgrades: u32,
}

/// What an upgrade reads of the rest of the shell to write the handoff state (old side) and
/// fills in when it takes the state over (new side): the fields borrowed one by one.
pub(super) struct Parts<'a> {
    pub core: &'a mut Supervisor,
    /// The config, its source and selection (handed over; the new instance starts from them).
    pub loaded: &'a Loaded,
    pub runs: &'a mut Runs,
    pub control: &'a mut Control,
    pub metrics: &'a Metrics,
    pub notifier: &'a mut Notifier,
    pub notify: &'a mut NotifySockets,
    pub probe_stats: &'a mut ProbeStats,
    pub signals: &'a mut SignalPipe,
    pub started_at: &'a mut Instant,
}

impl Parts<'_> {
    /// The runs, and the link through which they feed the core.
    fn runs_and_link(&mut self) -> (&mut Runs, Link<'_>) {
        (
            &mut *self.runs,
            Link {
                core: &mut *self.core,
                notifier: &mut *self.notifier,
                notify: &mut *self.notify,
                probe_stats: &mut *self.probe_stats,
                config: &self.loaded.config,
            },
        )
    }

    /// Hands `input` to the core.
    fn feed(&mut self, now: Instant, input: crate::core::Input) {
        self.runs_and_link().1.feed(now, input);
    }

    /// An adopted run's process is gone (its status unknown).
    fn adopted_exit(&mut self, key: crate::core::ContainerKey, generation: u64, now: Instant) {
        let (runs, mut link) = self.runs_and_link();
        runs.on_adopted_exit(key, generation, now, &mut link);
    }
}

/// What a new instance takes from the old one before the components are built (the rest:
/// [`Upgrade::take_over`]).
pub(super) struct Resumed {
    pub(super) listener: OwnedFd,
    pub(super) core: Supervisor,
}

/// The new instance of `vigil upgrade` (`Shell::resume`): the same start-up as a fresh start
/// on the handed-over config, but with the inherited control socket, the core's state, and no
/// search for what "an earlier vigil" left (it is all still ours); then every component takes
/// over its part ([`Upgrade::take_over`]).
pub(super) fn resume(state: State, blobs: &[u8], error: Option<&str>) -> Result<Shell, StartError> {
    // A duplicate: the inherited number stays open (for the way back to the old binary)
    // until this start has succeeded.
    let listener = handoff::dup_fd(state.listener_fd).ok_or_else(|| {
        StartError::Poll(std::io::Error::other(format!(
            "the control socket (fd {}) was not handed over",
            state.listener_fd
        )))
    })?;
    let t0 = Instant::now();
    let (mut core, state) = state.split_core();
    core.after_handoff();
    let t1 = Instant::now();
    let resumed = Resumed { listener, core };
    let mut shell = super::startup::build(
        state.config.clone(),
        state.source.clone(),
        state.selection.clone(),
        Some(resumed),
        Vec::new(),
    )?;
    debug!(
        "upgrade: core indexed in {:.1} ms, components started in {:.1} ms",
        (t1 - t0).as_secs_f64() * 1e3,
        t1.elapsed().as_secs_f64() * 1e3
    );
    drop(handoff::own_fd(state.listener_fd));
    let now = Instant::now();
    shell
        .upgrade
        .take_over(state, blobs, error, now, &mut parts!(shell));
    shell.reap(now);
    // The old instance's holder handed its duplicates over at start (dropped: the pipes
    // came with the handoff); this instance's holder gets every pipe it reads.
    shell.runs.held.clear();
    shell.runs.hold_all_output();
    Ok(shell)
}

/// A pre-flight's deadline (its child's exit comes through the reaper).
impl Component for Upgrade {
    fn deadline(&self, _: Instant) -> Option<Instant> {
        self.preflight.as_ref().map(|p| p.deadline)
    }
}

impl Upgrade {
    pub(super) fn new(exe_path: PathBuf, argv: Vec<String>) -> Upgrade {
        Upgrade {
            preflight: None,
            seq: 0,
            exe_path,
            argv,
            upgrades: 0,
        }
    }

    /// `upgrade` (control socket, `asker` the request) or SIGUSR2 (`asker` `None`): check
    /// `binary` (else the path vigil runs from), start its pre-flight, and answer when it is
    /// over ([`Upgrade::on_check_exit`]) — at once when it is refused.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ask(
        &mut self,
        binary: Option<PathBuf>,
        check: bool,
        mut asker: Option<Pending>,
        now: Instant,
        core: &Supervisor,
        runs: &mut Runs,
        control: &mut Control,
    ) {
        if let Err(e) = self.start_check(binary, check, &mut asker, now, core, runs) {
            answer(asker, Err(e), control);
        }
    }

    /// The refusals, the binary's checks and its `--handoff-version`, then the pre-flight
    /// child; `asker` is taken only when the pre-flight started.
    fn start_check(
        &mut self,
        binary: Option<PathBuf>,
        check: bool,
        asker: &mut Option<Pending>,
        now: Instant,
        core: &Supervisor,
        runs: &mut Runs,
    ) -> Result<(), UpgradeError> {
        if core.is_shutting_down() {
            return Err(UpgradeError::ShuttingDown);
        }
        if self.preflight.is_some() {
            return Err(UpgradeError::Busy("another upgrade is checking its binary"));
        }
        if runs.probes.net_hook_running() {
            return Err(UpgradeError::Busy(
                "an http_get lifecycle hook is in flight",
            ));
        }
        let binary = match binary {
            Some(b) => b,
            None if self.exe_path.as_os_str().is_empty() => {
                return Err(UpgradeError::NoExe(
                    "the path vigil was started from is unknown".to_string(),
                ));
            }
            None => self.exe_path.clone(),
        };
        // Opened once; asked and executed from that descriptor.
        let binary = binary::open(&binary)?;
        let (pid, out) = binary::start_version(&binary)?;
        info!(
            "upgrade: asking {} which handoff formats it reads (pid {pid})",
            binary.path.display()
        );
        self.wait_for_binary(
            Preflight {
                seq: 0,
                stage: Stage::Version,
                pid,
                binary,
                check,
                asker: asker.take(),
                out,
                deadline: now + binary::VERSION_TIMEOUT,
            },
            &mut runs.reaper,
        );
        Ok(())
    }

    /// `preflight` is the upgrade under way, under the next number; the reaper hands its
    /// child's exit back under that number.
    fn wait_for_binary(&mut self, mut preflight: Preflight, reaper: &mut super::reaper::Reaper) {
        self.seq += 1;
        preflight.seq = self.seq;
        reaper.track(preflight.pid, PidOwner::UpgradeCheck { seq: self.seq });
        self.preflight = Some(preflight);
    }

    /// The binary said which formats it reads (`info`): the pre-flight starts, with the state
    /// as it is now (the exec writes it again).
    fn start_preflight(
        &mut self,
        binary: binary::Checked,
        info: handoff::VersionInfo,
        check: bool,
        asker: &mut Option<Pending>,
        now: Instant,
        parts: &mut Parts<'_>,
    ) -> Result<(), UpgradeError> {
        if parts.core.is_shutting_down() {
            return Err(UpgradeError::ShuttingDown);
        }
        let pid1 = crate::runtime::is_pid1();
        if !info.check || !info.guarded || (pid1 && !info.pid1_way_back) {
            let lacks = if !info.check {
                "cannot check a handoff before taking it over (no --handoff-check)"
            } else if !info.guarded {
                "cannot say when its takeover is done (for the upgrade's guardian)"
            } else {
                "cannot go back to this binary by itself as PID 1 should its takeover fail"
            };
            return Err(UpgradeError::Binary(binary::BinaryError::NoVersion {
                path: binary.path.clone(),
                reason: format!(
                    "vigil {} {lacks}; to change to it, stop vigil and start it (on_restart = \
                     \"adopt\" keeps the containers)",
                    info.vigil
                ),
            }));
        }
        let (state, blobs, _) = self.handoff_state(parts, &binary.path, None, &[], now);
        let memfd = handoff::write(&state, blobs).map_err(UpgradeError::State)?;
        let (pid, out) = binary::start_check(&binary, &memfd)?;
        info!(
            "upgrade: {} (vigil {}) is checking the handoff (pid {pid})",
            binary.path.display(),
            info.vigil
        );
        self.wait_for_binary(
            Preflight {
                seq: 0,
                stage: Stage::Check,
                pid,
                binary,
                check,
                asker: asker.take(),
                out,
                deadline: now + CHECK_TIMEOUT,
            },
            &mut parts.runs.reaper,
        );
        Ok(())
    }

    /// The pre-flight's process ended: on success the upgrade goes on (`Some`: the router
    /// settles the runs, then [`Upgrade::hand_over`]) or, for `--check`, is reported;
    /// otherwise it is refused and nothing changed.
    pub(super) fn on_check_exit(
        &mut self,
        seq: u64,
        code: Option<i32>,
        signal: Option<i32>,
        now: Instant,
        parts: &mut Parts<'_>,
    ) -> Option<Ready> {
        if self.preflight.as_ref().is_none_or(|p| p.seq != seq) {
            return None; // One given up on at its deadline.
        }
        let p = self.preflight.take()?;
        if p.stage == Stage::Version {
            let mut asker = p.asker;
            let outcome = binary::version_answer(&p.binary.path, &p.out, code, signal)
                .map_err(UpgradeError::from)
                .and_then(|info| {
                    self.start_preflight(p.binary, info, p.check, &mut asker, now, parts)
                });
            if let Err(e) = outcome {
                answer(asker, Err(e), parts.control);
            }
            return None;
        }
        let read = binary::read_answer(&p.out);
        let outcome = match (code, signal) {
            (Some(0), _) => match read {
                Ok(info) => Ok(info),
                Err(reason) => Err(reason),
            },
            (Some(c), _) => Err(format!(
                "it exited with code {c} (its messages are in vigil's log)"
            )),
            (_, Some(s)) => Err(format!(
                "it was killed by signal {s} (its messages are in vigil's log)"
            )),
            _ => Err("it ended without a status".to_string()),
        };
        let info = match outcome {
            Err(reason) => {
                let e = UpgradeError::Binary(binary::BinaryError::CannotTakeOver {
                    path: p.binary.path.clone(),
                    reason,
                });
                answer(p.asker, Err(e), parts.control);
                return None;
            }
            Ok(info) => info,
        };
        // The binary proved it can take over. The loop is away from here until the new
        // instance is ready: the figure `vigil upgrade` reports.
        let taken = Instant::now();
        if parts.core.is_shutting_down() {
            answer(p.asker, Err(UpgradeError::ShuttingDown), parts.control);
            return None;
        }
        if p.check {
            let m = format!(
                "{} is vigil {} and read this vigil's handoff (format {}): an upgrade would keep every container",
                p.binary.path.display(),
                info.vigil,
                handoff::FORMAT_VERSION
            );
            answer(p.asker, Ok(m), parts.control);
            return None;
        }
        Some(Ready {
            binary: p.binary,
            info,
            asker: p.asker,
            taken,
        })
    }

    /// A pre-flight past its deadline is killed (reaped later, then ignored); the upgrade is
    /// refused.
    pub(super) fn expire(&mut self, now: Instant, control: &mut Control) {
        if self.preflight.as_ref().is_none_or(|p| now < p.deadline) {
            return;
        }
        let Some(p) = self.preflight.take() else {
            return;
        };
        // Our child, not reaped yet (the reaper still tracks it): the pid is its.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(p.pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        let path = p.binary.path.clone();
        let e = UpgradeError::Binary(match p.stage {
            Stage::Version => binary::BinaryError::NoVersion {
                path,
                reason: format!(
                    "no answer within {} s (killed)",
                    binary::VERSION_TIMEOUT.as_secs()
                ),
            },
            Stage::Check => binary::BinaryError::CannotTakeOver {
                path,
                reason: format!("no answer within {} s (killed)", CHECK_TIMEOUT.as_secs()),
            },
        });
        answer(p.asker, Err(e), control);
    }

    /// After a pre-flight passed and the router settled the runs for the handoff (`settled`:
    /// every queued action done and every pending exec confirmed): the state is written again
    /// and the binary executed in this process. Returns only when nothing was done (a refusal,
    /// a failed exec), after answering.
    pub(super) fn hand_over(
        &mut self,
        ready: Ready,
        settled: bool,
        now: Instant,
        parts: &mut Parts<'_>,
    ) {
        let Ready {
            binary,
            info,
            asker: pending,
            taken,
        } = ready;
        let result = self.exec(binary, info, pending.as_ref(), settled, now, taken, parts);
        answer(pending, result, parts.control);
    }

    #[allow(clippy::too_many_arguments)]
    fn exec(
        &mut self,
        binary: binary::Checked,
        info: handoff::VersionInfo,
        asker: Option<&Pending>,
        settled: bool,
        now: Instant,
        taken: Instant,
        parts: &mut Parts<'_>,
    ) -> Result<String, UpgradeError> {
        let asker = asker.map(|p| Asker {
            conn: p.conn(),
            id: p.id(),
        });
        // Whatever the core asked for in this turn is done by this process (the core's action
        // queue is not part of the state): a SIGUSR2 handled after a reap in the same turn.
        // Pending execs are settled too (waiting a few ms at most): the next instance takes over
        // runs by pid, not by error pipe.
        if !settled {
            return Err(UpgradeError::Busy(
                "a container start is waiting for its exec to be confirmed",
            ));
        }
        // Exec hooks and starts waiting for a cgroup's removal are handed over; an HTTP hook's
        // request in flight is not (its socket and parser state stay with this process).
        if parts.runs.probes.net_hook_running() {
            return Err(UpgradeError::Busy(
                "an http_get lifecycle hook is in flight",
            ));
        }
        // What is queued for vigil's stdout and the journal goes out with this process.
        parts.runs.capture.flush();
        parts.runs.drain_journal(parts.core, now);
        // Every other open connection is handed over with what is unread and unsent of it;
        // a `metrics` request whose exposition is being built is given back as its line, for
        // the next instance to answer.
        let replays: std::collections::HashMap<ConnId, String> = parts
            .metrics
            .control_askers()
            .into_iter()
            .map(|(p, format)| {
                let line = format!(
                    r#"{{"cmd":"metrics","format":"{}","id":{}}}"#,
                    format.as_str(),
                    p.id().as_json()
                );
                (p.conn(), line)
            })
            // A `wait` under way is asked again, with the time it has left.
            .chain(parts.control.wait_replays(now))
            .collect();
        if !replays.is_empty() {
            debug!(
                "upgrade: {} metrics request(s) waiting for their exposition handed over to be \
                 answered again",
                replays.len()
            );
        }
        let conns = parts
            .control
            .handover(asker.as_ref().map(|a| a.conn), &|c| {
                replays.get(&c).cloned()
            });
        let (state, blobs, fds) = self.handoff_state(parts, &binary.path, asker, &conns, taken);
        let memfd = handoff::write(&state, blobs).map_err(UpgradeError::State)?;
        debug!(
            "upgrade: state written in {:.1} ms",
            taken.elapsed().as_secs_f64() * 1e3
        );
        let exe = std::fs::File::open("/proc/self/exe")
            .map(OwnedFd::from)
            .map_err(UpgradeError::State)?;
        // As PID 1 nothing can take over if this process dies or is killed (its end is the
        // system's): no guardian.
        let guarded = !crate::runtime::is_pid1();
        info!(
            "upgrade: executing {} (vigil {}), keeping {} running containers{}",
            binary.path.display(),
            info.vigil,
            state.mains.len() + state.adopted.len(),
            if guarded {
                format!(
                    "; a guardian goes back to this binary if it is not ready within {} s",
                    handoff::guard::TAKEOVER_TIMEOUT.as_secs()
                )
            } else {
                String::new()
            }
        );
        parts.notifier.reloading();
        let source = handoff::exec::exec(&binary, &self.argv, &memfd, &exe, &fds, guarded);
        parts.notifier.reloaded();
        let e = UpgradeError::Exec {
            path: binary.path,
            source,
        };
        error!("upgrade: {e}");
        Err(e)
    }

    /// A copy of everything the next instance needs, and the descriptors to hand over.
    fn handoff_state<'a>(
        &'a self,
        parts: &'a Parts<'_>,
        binary: &std::path::Path,
        asker: Option<Asker<'_>>,
        conns: &[Handover],
        taken: Instant,
    ) -> (
        State<&'a crate::core::Supervisor, &'a crate::config::spec::Config>,
        Blobs,
        Vec<RawFd>,
    ) {
        let mut blobs = Blobs::default();
        let mut slots: Vec<SlotState> = Vec::with_capacity(parts.runs.slots.len());
        let mut cgroup_fds = Vec::new();
        for (key, slot) in &parts.runs.slots {
            let (mut ring, (a, b), previous) = slot.log.buffer.parts();
            let current = blobs.push(&[a, b]);
            let previous = blobs.push(&[previous]);
            // Raw bytes, not JSON numbers.
            let stamps = handoff::stamps_blob(&mut blobs, &std::mem::take(&mut ring.stamps));
            let previous_stamps =
                handoff::stamps_blob(&mut blobs, &std::mem::take(&mut ring.previous_stamps));
            let fds_of = |r: &Run| {
                let fds = r.cgroup.as_deref()?.raw_fds();
                cgroup_fds.extend([fds.dir, fds.procs, fds.events]);
                cgroup_fds.extend(fds.memory_events);
                Some(fds)
            };
            let run_fds = slot.run.as_ref().and_then(fds_of);
            slots.push(SlotState {
                key: *key,
                pod: slot.pod.clone(),
                name: slot.name.clone(),
                spec: slot.spec.clone(),
                spec_hash: slot.spec_hash,
                ring,
                current,
                previous,
                stamps,
                previous_stamps,
                run: slot.run.as_ref().map(|r| RunState {
                    generation: r.generation,
                    pid: r.pid,
                    cgroup: r.cgroup.as_deref().map(|c| c.path().to_path_buf()),
                    oom_baseline: r
                        .cgroup
                        .as_deref()
                        .map(|c| c.oom_baseline())
                        .unwrap_or_default(),
                    oom_seen: r.oom_seen,
                    exited: r.exited,
                    message_stamp: r.message_stamp,
                    cgroup_fds: run_fds,
                    proc_start: r.pid.and_then(|pid| parts.runs.tracker.start_of(*key, pid)),
                    notify_fd: parts.notify.raw_fd(*key, r.generation),
                }),
            });
        }
        slots.sort_by_key(|s| s.key);
        let mut fds = vec![parts.control.listener_fd()];
        fds.extend(cgroup_fds);
        fds.extend(slots.iter().filter_map(|s| s.run.as_ref()?.notify_fd));
        let pipes: Vec<PipeState> = parts
            .runs
            .capture
            .pipe_fds()
            .into_iter()
            .map(|(key, stream, run, fd)| PipeState {
                key,
                stderr: stream == crate::logs::Stream::Stderr,
                run,
                pid: parts
                    .runs
                    .slots
                    .get(&key)
                    .and_then(|s| s.run.as_ref())
                    .and_then(|r| r.pid)
                    .unwrap_or(0),
                fd,
            })
            .collect();
        fds.extend(pipes.iter().map(|p| p.fd));
        let mains: Vec<MainPid> = parts
            .runs
            .reaper
            .tracked()
            .filter_map(|(pid, owner)| match owner {
                PidOwner::Main { key, generation } => Some(MainPid {
                    pid,
                    key,
                    generation,
                }),
                PidOwner::ExecProbe { .. }
                | PidOwner::UpgradeCheck { .. }
                | PidOwner::EventHook { .. } => None,
            })
            .collect();
        let adopted: Vec<AdoptedRun> = parts
            .runs
            .adopted
            .fds()
            .into_iter()
            .map(|(key, generation, pidfd)| AdoptedRun {
                key,
                generation,
                pidfd,
            })
            .collect();
        fds.extend(adopted.iter().map(|a| a.pidfd));
        let probe_pids = parts
            .runs
            .probes
            .exec_attempts()
            .into_iter()
            .map(|(pid, cgroup)| ProbePid { pid, cgroup })
            .collect();
        let mut hooks = Vec::new();
        for h in parts.runs.probes.exec_hooks() {
            let output = blobs.push(&[h.output]);
            let cgroup_fds = h.cgroup.map(|c| c.raw_fds());
            if let Some(c) = cgroup_fds {
                fds.extend([c.dir, c.procs, c.events]);
                fds.extend(c.memory_events);
            }
            fds.extend(h.pipe);
            hooks.push(HookAttempt {
                key: h.key,
                generation: h.generation,
                seq: h.seq,
                pid: h.pid,
                pipe_fd: h.pipe,
                output,
                cgroup: h.cgroup.map(|c| c.path().to_path_buf()),
                cgroup_fds,
                started: h.started,
            });
        }
        let deferred_spawns = parts
            .runs
            .janitor
            .deferred()
            .filter_map(|(at, action)| match action {
                crate::core::Action::Spawn {
                    key,
                    generation,
                    pod,
                    container,
                    init,
                } => Some(DeferredSpawn {
                    key: *key,
                    generation: *generation,
                    pod: pod.clone(),
                    container: container.clone(),
                    init: *init,
                    at: *at,
                }),
                _ => None,
            })
            .collect();
        let requester = asker.and_then(|a| {
            parts.control.answerable_fd(a.conn).map(|fd| Requester {
                fd,
                id: a.id.as_json().to_string(),
            })
        });
        fds.extend(requester.iter().map(|r| r.fd));
        let mut waits: std::collections::HashMap<ConnId, handoff::WaitState> =
            parts.control.waits().into_iter().collect();
        let conns: Vec<ConnState> = conns
            .iter()
            .map(|h| ConnState {
                fd: h.fd,
                input: blobs.push(&[&h.input]),
                output: blobs.push(&[&h.output]),
                sent_open: h.sent_open,
                closing: h.closing,
                eof: h.eof,
                wait: if h.in_flight {
                    waits.remove(&h.conn)
                } else {
                    None
                },
            })
            .collect();
        // Listed in `clients` too: a previous binary that reads only those (the guardian's
        // way back to an earlier vigil) tells them and closes them instead of leaking them.
        let clients: Vec<RawFd> = conns.iter().map(|c| c.fd).collect();
        fds.extend(&clients);
        let state = State {
            version: handoff::FORMAT_VERSION,
            written_by: env!("CARGO_PKG_VERSION").to_string(),
            loop_left_at: mono::to_nanos(taken),
            source: parts.loaded.source.clone(),
            config: &parts.loaded.config,
            exe_path: binary.to_path_buf(),
            previous_exe_path: Some(self.exe_path.clone()),
            argv: self.argv.clone(),
            core: &*parts.core,
            slots,
            pipes,
            mains,
            adopted,
            probe_pids,
            dying_cgroups: parts.runs.janitor.dying_paths(),
            gone_pods: parts.runs.gone_pods.names(),
            listener_fd: parts.control.listener_fd(),
            requester,
            clients,
            journal_seq: parts.runs.journal.last_seq(),
            stop_signals: parts.signals.stop_signals,
            started_at: *parts.started_at,
            upgrades: self.upgrades + 1,
            statefile_text: parts.runs.tracker.written().map(str::to_string),
            hooks,
            deferred_spawns,
            probe_stats: parts
                .probe_stats
                .entries()
                .map(|(key, kind, c)| handoff::ProbeFigures {
                    key,
                    kind: kind.as_str().to_string(),
                    successes: c.successes,
                    failures: c.failures,
                    buckets: c.buckets.to_vec(),
                    count: c.count,
                    sum_seconds: c.sum_seconds,
                })
                .collect(),
            pid: Some(std::process::id()),
            cgroup_subtree: parts.runs.cgroups.as_ref().map(|m| m.ownership()),
            selection: parts.loaded.selection.clone(),
            conns,
        };
        (state, blobs, fds)
    }

    /// The new instance: takes over the components' parts of `state` (the loop, cgroups,
    /// control server and core were rebuilt by [`resume`]), answers the asker and
    /// tells the other clients; the router then reaps what ended during the exec.
    pub(super) fn take_over(
        &mut self,
        state: State<()>,
        blobs: &[u8],
        error: Option<&str>,
        now: Instant,
        parts: &mut Parts<'_>,
    ) {
        // Children and runs adopted after a crash alike.
        let kept = state.mains.len() + state.adopted.len();
        // The upgrade's guardian took the state back in a process of its own (the new binary
        // died or hung): no container is this process's child.
        let orphaned = state.pid.filter(|p| *p != std::process::id());
        let sup = parts.loaded.config.supervisor.clone();
        if let (Some(m), Some(o)) = (parts.runs.cgroups.as_mut(), state.cgroup_subtree) {
            m.inherit(o);
        }
        let mut starts = std::collections::HashMap::new();
        for s in state.slots {
            let (mut log, err) = ContainerLog::new(&s.pod, &s.name, &sup);
            if let Some(e) = err {
                warn!("{e}");
            }
            let current = handoff::blob(blobs, s.current).unwrap_or_default().to_vec();
            let previous = handoff::blob(blobs, s.previous)
                .unwrap_or_default()
                .to_vec();
            let mut ring = s.ring;
            // Format 1 kept the stamps in the ring's bookkeeping; format 2 in the blob area.
            if s.stamps.len > 0 || s.previous_stamps.len > 0 {
                ring.stamps = handoff::stamps_of(blobs, s.stamps).unwrap_or_default();
                ring.previous_stamps =
                    handoff::stamps_of(blobs, s.previous_stamps).unwrap_or_default();
            }
            match LogBuffer::from_parts(ring, current, previous) {
                Some(b) => log.buffer = b,
                None => warn!(
                    "{}/{}: the log ring handed over does not add up; starting it empty",
                    s.pod, s.name
                ),
            }
            let mut notify_fd = None;
            let run = s.run.map(|r| {
                notify_fd = r
                    .notify_fd
                    .filter(|_| !r.exited)
                    .map(|fd| (r.generation, fd));
                if let (Some(pid), Some(start)) = (r.pid, r.proc_start) {
                    starts.insert(s.key, (pid, start));
                }
                let cgroup = r.cgroup.and_then(|p| {
                    let cg = match r
                        .cgroup_fds
                        .and_then(|fds| inherited_cgroup(&p, fds, r.oom_baseline))
                    {
                        Some(cg) => Ok(cg),
                        None => ContainerCgroup::reopen(&p, r.oom_baseline),
                    };
                    match cg {
                        Ok(cg) => Some(parts.runs.watch_memory_events(s.key, cg)),
                        Err(e) => {
                            warn!("{}/{}: {e}", s.pod, s.name);
                            None
                        }
                    }
                });
                Run {
                    generation: r.generation,
                    pid: r.pid,
                    cgroup,
                    oom_seen: r.oom_seen,
                    exited: r.exited,
                    message_stamp: r.message_stamp,
                }
            });
            parts.runs.slots.insert(
                s.key,
                ContainerRuntime {
                    pod: s.pod,
                    name: s.name,
                    spec_hash: s.spec_hash,
                    spec: s.spec,
                    log,
                    run,
                },
            );
            let inherited = notify_fd.and_then(|(g, fd)| handoff::own_fd(fd).map(|fd| (g, fd)));
            parts
                .runs
                .reopen_notify(s.key, &parts.loaded.config, parts.notify, inherited);
        }
        for p in state.pipes {
            match handoff::own_fd(p.fd) {
                Some(fd) => {
                    let stream = if p.stderr {
                        crate::logs::Stream::Stderr
                    } else {
                        crate::logs::Stream::Stdout
                    };
                    // A run not ready yet goes on being matched here (what a line cut by
                    // the hand-over began with is lost: its rest is matched as a line).
                    let ready = p
                        .run
                        .filter(|g| parts.core.awaits_ready_line(p.key, *g))
                        .and_then(|_| parts.runs.slots.get(&p.key))
                        .and_then(|s| s.spec.ready_log_line.clone());
                    parts.runs.capture.add_output(
                        p.key,
                        p.pid,
                        fd,
                        stream,
                        p.run,
                        PipeFrom::Handoff,
                        ready.as_ref(),
                    );
                }
                None => warn!(
                    "the output pipe of pid {} (fd {}) was not handed over",
                    p.pid, p.fd
                ),
            }
        }
        for m in state.mains.iter().filter(|_| orphaned.is_none()) {
            parts.runs.reaper.track(
                m.pid,
                PidOwner::Main {
                    key: m.key,
                    generation: m.generation,
                },
            );
        }
        // The state file lists what runs now (children and adopted runs alike), for an
        // adoption after a crash of this instance.
        for (key, slot) in &parts.runs.slots {
            if let Some(pid) = slot.run.as_ref().filter(|r| !r.exited).and_then(|r| r.pid) {
                let main = crate::runtime::statefile::MainInfo {
                    spec: slot.spec_hash,
                    restarts: parts.core.restart_count(*key).unwrap_or(0),
                };
                let label = format!("{}/{}", slot.pod, slot.name);
                match starts.get(key) {
                    Some((p, start)) if *p == pid => parts
                        .runs
                        .tracker
                        .started_known(*key, &label, pid, *start, main),
                    _ => parts.runs.tracker.started(*key, &label, pid, main),
                }
            }
        }
        parts.runs.tracker.resume_written(state.statefile_text);
        for a in state.adopted {
            match handoff::own_fd(a.pidfd) {
                Some(fd) => {
                    if !parts.runs.adopted.watch(a.key, a.generation, fd) {
                        parts.runs.kill_run(a.key, Some(a.generation));
                        parts.adopted_exit(a.key, a.generation, now);
                    }
                }
                None => parts.adopted_exit(a.key, a.generation, now),
            }
        }
        // Not our children after a guardian's fallback: watched through pidfds, as runs
        // adopted after a crash are, each checked against its recorded start (a pid that ended
        // and was used again is not it); one gone meanwhile ended with its status unknown.
        for m in state.mains.iter().filter(|_| orphaned.is_some()) {
            let start = match starts.get(&m.key) {
                Some((pid, start)) if *pid == m.pid => Some(*start),
                _ => crate::runtime::statefile::read_stat(m.pid).map(|s| s.start),
            };
            match start.and_then(|s| crate::runtime::statefile::pidfd_verified(m.pid, s)) {
                Some(fd) => {
                    if !parts.runs.adopted.watch(m.key, m.generation, fd) {
                        parts.runs.kill_run(m.key, Some(m.generation));
                        parts.adopted_exit(m.key, m.generation, now);
                    }
                }
                None => parts.adopted_exit(m.key, m.generation, now),
            }
        }
        // Exec probes of the old process: their results would have nowhere to go; the core
        // runs those probes again.
        for p in state.probe_pids {
            let cg = p
                .cgroup
                .and_then(|path| ContainerCgroup::reopen(&path, Default::default()).ok());
            kill_tree(cg.as_ref(), Some(p.pid));
            if let Some(cg) = cg {
                parts.runs.janitor.remove_or_watch(cg);
            }
        }
        // Exec hooks go on: their processes are still vigil's children; the result goes to
        // the core under the same sequence number, within the core's (carried) time limit.
        for h in state.hooks {
            let output = handoff::blob(blobs, h.output).unwrap_or_default().to_vec();
            let pipe = h.pipe_fd.and_then(handoff::own_fd);
            let cgroup = h.cgroup.and_then(|p| {
                h.cgroup_fds
                    .and_then(|fds| inherited_cgroup(&p, fds, Default::default()))
                    .or_else(|| ContainerCgroup::reopen(&p, Default::default()).ok())
            });
            if orphaned.is_none() {
                parts.runs.reaper.track(
                    h.pid,
                    PidOwner::ExecProbe {
                        key: h.key,
                        kind: crate::config::spec::ProbeKind::Hook,
                        seq: h.seq,
                    },
                );
            }
            let lost = orphaned.is_some().then(|| {
                // Not our child: it cannot be reaped for its result. It is killed and counts
                // as failed (killed by SIGKILL), as a hook whose process is lost.
                kill_tree(cgroup.as_ref(), Some(h.pid));
                (h.key, h.seq)
            });
            parts.runs.probes.resume_exec_hook(
                h.key,
                h.generation,
                h.seq,
                h.started,
                h.pid,
                pipe,
                output,
                cgroup,
            );
            if let Some((key, seq)) = lost {
                let kind = crate::config::spec::ProbeKind::Hook;
                if let Some(input) = parts.runs.probes.on_exit(
                    key,
                    kind,
                    seq,
                    None,
                    Some(libc::SIGKILL),
                    now,
                    &mut parts.runs.janitor,
                ) {
                    parts.feed(now, input);
                }
            }
        }
        // Starts that wait for a cgroup's removal: retried when due, as before the exec.
        // The metrics' probe counters go on from where they were (docs/behaviour.md §12).
        for f in state.probe_stats {
            let kind = crate::config::spec::ProbeKind::ALL
                .into_iter()
                .chain([crate::config::spec::ProbeKind::Hook])
                .find(|k| k.as_str() == f.kind);
            let mut buckets = [0u64; crate::metrics::probes::BUCKETS.len()];
            if let Some(kind) = kind
                && f.buckets.len() == buckets.len()
            {
                buckets.copy_from_slice(&f.buckets);
                parts.probe_stats.restore(
                    f.key,
                    kind,
                    crate::metrics::probes::ProbeCounters {
                        successes: f.successes,
                        failures: f.failures,
                        buckets,
                        count: f.count,
                        sum_seconds: f.sum_seconds,
                    },
                );
            } else {
                warn!(
                    "upgrade: probe figures of kind {:?} with {} buckets not taken over",
                    f.kind,
                    f.buckets.len()
                );
            }
        }
        for d in state.deferred_spawns {
            parts.runs.janitor.defer(
                d.at,
                crate::core::Action::Spawn {
                    key: d.key,
                    generation: d.generation,
                    pod: d.pod,
                    container: d.container,
                    init: d.init,
                },
            );
        }
        for path in state.dying_cgroups {
            if let Ok(cg) = ContainerCgroup::reopen(&path, Default::default()) {
                parts.runs.janitor.remove_or_watch(cg);
            }
        }
        for pod in state.gone_pods {
            parts.runs.gone_pods.forget(&pod, now);
        }
        parts.runs.journal = super::journal::Journal::resume_after(state.journal_seq);
        parts.signals.stop_signals = state.stop_signals;
        *parts.started_at = state.started_at;
        self.exe_path = match (error, state.previous_exe_path) {
            (Some(_), Some(previous)) => previous,
            _ => state.exe_path,
        };
        self.argv = state.argv;
        self.upgrades = state.upgrades;

        let away_ms = (mono::raw_now() - i128::from(state.loop_left_at)) as f64 / 1e6;
        debug!(
            "upgrade: taken over in {:.1} ms",
            now.elapsed().as_secs_f64() * 1e3
        );
        let message = match error {
            None => {
                let m = format!(
                    "upgraded from vigil {} to vigil {} (pid {}): {} containers kept, the loop was away {away_ms:.1} ms",
                    state.written_by,
                    env!("CARGO_PKG_VERSION"),
                    std::process::id(),
                    kept
                );
                info!("upgrade: {m}");
                Ok(m)
            }
            Some(why) if orphaned.is_some() => {
                let m = format!(
                    "upgrade failed: {why}; vigil {} took the state back as pid {} (was {}): every container is still supervised, watched through pidfds as after a crash (an exit status is not known to it)",
                    env!("CARGO_PKG_VERSION"),
                    std::process::id(),
                    orphaned.unwrap_or_default(),
                );
                error!("upgrade: {m}");
                Err(m)
            }
            Some(why) => {
                let m = format!(
                    "upgrade failed, vigil continues unchanged: the new vigil could not take over: {why}"
                );
                error!("upgrade: {m}");
                Err(m)
            }
        };
        // The VM suite's takeover that dies or hangs half-way (PID 1's way back, `fallback`).
        crate::runtime::fault::abort_takeover(error.is_some());
        crate::runtime::fault::hang_takeover(error.is_some());
        if let Some(r) = state.requester
            && let Some(fd) = handoff::own_fd(r.fd)
        {
            let id = RequestId::from(
                serde_json::from_str::<serde_json::Value>(&r.id).unwrap_or(serde_json::Value::Null),
            );
            let line = match &message {
                Ok(m) => protocol::reply_ok(&id, serde_json::json!({ "message": m })),
                Err(m) => protocol::reply_err(&id, ErrorKind::BadArgument, m),
            };
            send_and_close(fd, &line);
        }
        // The other connections: served on by this instance's control server.
        let handed: std::collections::HashSet<RawFd> = state.conns.iter().map(|c| c.fd).collect();
        let (inherited, waits): (Vec<Inherited>, Vec<Option<handoff::WaitState>>) = state
            .conns
            .into_iter()
            .filter_map(|c| {
                let inherited = Inherited {
                    fd: handoff::own_fd(c.fd)?,
                    input: handoff::blob(blobs, c.input).unwrap_or_default().to_vec(),
                    output: handoff::blob(blobs, c.output).unwrap_or_default().to_vec(),
                    sent_open: c.sent_open,
                    closing: c.closing,
                    eof: c.eof,
                    in_flight: c.wait.is_some(),
                };
                Some((inherited, c.wait))
            })
            .unzip();
        let taken = parts.control.take_over(inherited, waits, now);
        debug!(
            "upgrade: {} client connection(s) taken over, {} closed",
            taken.kept, taken.closed
        );
        // A state written by a vigil before connections were handed over: those it listed
        // are told and closed, as it would have.
        let notice = protocol::reply_err(
            &RequestId::null(),
            ErrorKind::Busy,
            "vigil re-executed itself (upgrade): this connection is closed; connect again",
        );
        for fd in state.clients.into_iter().filter(|fd| !handed.contains(fd)) {
            if let Some(fd) = handoff::own_fd(fd) {
                send_and_close(fd, &notice);
            }
        }
    }
}

/// The upgrade's outcome to whoever asked (the log for SIGUSR2).
fn answer(asker: Option<Pending>, outcome: Result<String, UpgradeError>, control: &mut Control) {
    match asker {
        Some(p) => {
            if let Err(e) = &outcome {
                warn!("upgrade refused, nothing changed: {e}");
            }
            control.finish(p, outcome.map_err(|e| (e.kind(), e.to_string())));
        }
        None => match outcome {
            Ok(m) => info!("SIGUSR2: {m}"),
            Err(e) => error!("SIGUSR2: upgrade refused, nothing changed: {e}"),
        },
    }
}

/// A running container's cgroup from the descriptors the old instance handed over (`None`
/// when one of them was not: then it is opened again by path).
fn inherited_cgroup(
    path: &std::path::Path,
    fds: crate::cgroup::CgroupFds,
    baseline: crate::cgroup::OomCounters,
) -> Option<ContainerCgroup> {
    let dir = handoff::own_fd(fds.dir);
    let procs = handoff::own_fd(fds.procs);
    let events = handoff::own_fd(fds.events);
    let memory_events = fds.memory_events.map(handoff::own_fd);
    if memory_events.as_ref().is_some_and(Option::is_none) {
        return None;
    }
    Some(ContainerCgroup::from_fds(
        path.to_path_buf(),
        dir?,
        procs?,
        events?,
        memory_events.flatten(),
        baseline,
    ))
}

/// Best effort, never blocking: a short line to a client that is waiting for it.
fn send_and_close(fd: OwnedFd, line: &str) {
    let mut rest = line.as_bytes();
    while !rest.is_empty() {
        match nix::unistd::write(&fd, rest) {
            Ok(0) | Err(_) => break,
            Ok(n) => rest = &rest[n..],
        }
    }
    let _ = nix::sys::socket::shutdown(fd.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}
