//! Start-up steps: the errors that stop vigil from starting, and the steps the shell takes
//! before its components exist — the loop and its signals, vigil's own process attributes
//! (subreaper, OOM score, CPU time slice), the cgroup subtree and the pods it cannot take,
//! and where forwarded output goes. A reload applies some of them again (`apply_supervisor`).
//! Then, once the initial starts are done, what waited for them ([`settle`]).
//!
//! Owns nothing once start-up is over. Must not: keep a descriptor (each step hands what it
//! opened to the component that owns it from then on).

use std::io;

use libc::SIGPWR;
use log::{debug, info, warn};
use mio::{Interest, Poll};
use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook_mio::v1_0::Signals;

use std::rc::Rc;
use std::time::{Instant, SystemTime};

use super::capture::{self, Capture};
use super::control::Control;
use super::journal::Journal;
use super::metrics;
use super::notifier::Notifier;
use super::runs::Runs;
use super::signals::SignalPipe;
use super::tokens;
use super::turnwatch::TurnWatch;
use super::upgrade::Resumed;
use super::{LastReload, Shell};
use crate::cgroup::{Controllers, Manager};
use crate::config::ConfigSource;
use crate::config::select::Selection;
use crate::config::spec::{Config, OnRestart};
use crate::core::Supervisor;
use crate::logs;
use crate::process;
use crate::runtime::fdstore::{FdStore, PipeName};
use crate::runtime::harden::HostCheck;
use crate::runtime::trim::IdleTrim;

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
    Metrics(#[from] metrics::MetricsError),
    #[error(transparent)]
    Harden(#[from] crate::runtime::harden::HardenError),
    #[error("containers set resource limits but vigil runs without cgroups")]
    NoCgroupsForLimits,
    /// A limit needs a controller this host's cgroup2 lacks (issue 14.10).
    #[error(
        "{pods}: {source}; no pod was started (remove those limits, or `vigil run \
         --allow-missing-controllers` or [supervisor] allow_missing_controllers = true to refuse \
         only those pods and start the others)"
    )]
    ControllersMissing {
        /// `pod big needs memory`, for each pod concerned.
        pods: String,
        source: crate::cgroup::CgroupError,
    },
    #[error("socket_group \"{0}\" is not a known group name or gid")]
    UnknownSocketGroup(String),
}

pub(super) fn socket_path(config: &Config) -> std::path::PathBuf {
    config
        .supervisor
        .socket
        .clone()
        .unwrap_or_else(crate::control::default_socket_path)
}

/// The poll and the signals it wakes up for (read from a self-pipe).
pub(super) fn open_loop() -> Result<(Poll, Signals), StartError> {
    let poll = Poll::new().map_err(StartError::Poll)?;
    let mut signals = Signals::new([SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGPWR, SIGUSR2])
        .map_err(StartError::Signals)?;
    poll.registry()
        .register(&mut signals, tokens::SIGNAL, Interest::READABLE)
        .map_err(StartError::Signals)?;
    // vigil's log lines stderr did not take are written when it can take more. The descriptor
    // is the logger's, open for vigil's lifetime: registered once, never deregistered.
    if let Some(fd) = crate::runtime::stderr_log::pollable_fd()
        && let Err(e) = poll.registry().register(
            &mut mio::unix::SourceFd(&fd),
            tokens::STDERR,
            Interest::WRITABLE,
        )
    {
        debug!("cannot watch stderr for writability: {e}; queued log lines wait for the next");
    }
    Ok((poll, signals))
}

/// vigil's own process attributes: child subreaper (unless PID 1, which reaps anyway), its
/// OOM score and its CPU time slice.
pub(super) fn protect_self(config: &Config) {
    if !crate::runtime::is_pid1() {
        // Orphans of our containers are re-parented to us, so nothing escapes reaping.
        if let Err(e) = process::set_child_subreaper() {
            warn!("cannot become a child subreaper: {e}");
        }
    }
    if let Some(adj) = config.supervisor.oom_score_adj {
        set_oom_score_adj(adj);
    }
    if let Some(micros) = config.supervisor.sched_slice_micros {
        set_sched_slice(micros);
    }
}

/// vigil's cgroup subtree, or none (then limits are refused: they could not be enforced); and
/// the pods refused for limits this host cannot give, each with why, when
/// `allow_missing_controllers` lets the others start.
pub(super) fn setup_cgroups(config: &Config, host: &HostCheck) -> Result<CgroupSetup, StartError> {
    let needs = needed_controllers(config);
    let mut refused = Vec::new();
    let cgroups = Manager::setup(
        &(&config.supervisor.cgroup_root).into(),
        &config.supervisor.cgroup_name,
        needs,
    )?;
    host.after_cgroup_setup(config, cgroups.is_some());
    if let Some(m) = &cgroups {
        // A limit whose controller is missing is an error at start, naming the controller,
        // the hierarchy path and what is available.
        if let Err(e) = m.check_controllers(needs) {
            let lacking: Vec<(String, crate::cgroup::CgroupError)> = config
                .pods
                .iter()
                .filter_map(|p| {
                    let e = m.check_controllers(crate::host::pod_controllers(p)).err()?;
                    Some((p.name.clone(), e))
                })
                .collect();
            if config.supervisor.allow_missing_controllers {
                for (pod, why) in &lacking {
                    warn!("{pod}: refused, the others start (allow_missing_controllers): {why}");
                    refused.push((pod.clone(), why.to_string()));
                }
            } else {
                // Leave nothing behind: undo the delegation dance before refusing to start.
                if let Err(t) = m.teardown() {
                    warn!("{t}");
                }
                let pods = lacking
                    .iter()
                    .map(|(p, _)| format!("pod {p}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(StartError::ControllersMissing { pods, source: e });
            }
        }
        info!("cgroups: containers go under {}", m.root().display());
        let usable = Controllers::MEMORY | Controllers::CPU | Controllers::PIDS;
        let available = std::fs::read_to_string(m.root().join("cgroup.controllers"))
            .map(|t| Controllers::from_names(t.split_whitespace()));
        if available.is_ok_and(|on| on.intersection(usable).is_empty()) {
            // A hybrid host (cgroup v1 holds the controllers): vigil still kills by cgroup,
            // but cannot limit or measure (issue 14.10).
            warn!(
                "no memory/cpu/pids controllers on this cgroup2 mount: limits and usage figures unavailable"
            );
        }
    } else if !needs.is_empty() {
        // Limits cannot be enforced without cgroups: refuse rather than run unconfined.
        return Err(crate::host::preflight(config)
            .err()
            .map(StartError::from)
            .unwrap_or(StartError::NoCgroupsForLimits));
    } else if config.supervisor.cgroup_root != crate::config::spec::CgroupRoot::None {
        warn!("running without cgroups: containers are tracked by process group only");
    }
    Ok((cgroups, refused))
}

/// What [`setup_cgroups`] gives: the subtree, and the pods refused with why.
pub(super) type CgroupSetup = (Option<Manager>, Vec<(String, String)>);

/// Where container output (`log_forward`) and, with the journal, vigil's events go: the journal
/// when `log_forward_to` says so ([`logs::journal::journal_wanted`]) and its socket takes a
/// connection, else vigil's stdout, non-blocking, when output is forwarded at all.
pub(super) fn forward_destination(config: &Config) -> Option<capture::Destination> {
    let sup = &config.supervisor;
    let path = std::path::Path::new(logs::journal::JOURNAL_SOCKET);
    if logs::journal::journal_wanted(sup.log_forward_to, path) {
        match logs::JournalSink::connect(path) {
            Ok(sink) => {
                return Some(capture::Destination::Journal {
                    sink,
                    output: sup.log_forward,
                });
            }
            Err(e) => warn!("not forwarding to the journal, stdout instead: {e}"),
        }
    }
    if !sup.log_forward {
        return None;
    }
    match logs::nonblocking_stdout() {
        Ok(fd) => Some(capture::Destination::Stdout(fd)),
        Err(e) => {
            warn!("not forwarding container output: {e}");
            None
        }
    }
}

pub(super) fn needed_controllers(config: &Config) -> Controllers {
    crate::host::needed_controllers(config)
}

pub(super) fn resolve_group(name: &str) -> Result<u32, StartError> {
    if let Ok(gid) = name.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(name) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        _ => Err(StartError::UnknownSocketGroup(name.to_string())),
    }
}

/// vigil protects itself from the kernel's global OOM killer (proc(5): oom_score_adj).
pub(super) fn set_oom_score_adj(adj: i32) {
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

/// vigil asks for a short CPU time slice, so that it is scheduled soon after it wakes on a busy
/// machine (`process::sched`). Best effort: vigil runs as started when the kernel cannot.
pub(super) fn set_sched_slice(micros: u32) {
    use process::sched::{Applied, Decision};
    match process::sched::apply(micros) {
        Ok(Applied::Slice { runtime_ns }) => {
            debug!(
                "CPU time slice {} µs (children start with the default)",
                runtime_ns / 1_000
            );
        }
        Ok(Applied::Left(Decision::AlreadySet | Decision::Set { .. })) => {}
        Ok(Applied::Left(Decision::OtherPolicy(policy))) => info!(
            "sched_slice_microseconds: not set, vigil runs under scheduling policy {policy} \
             as started (it applies to SCHED_OTHER)"
        ),
        Ok(Applied::Left(Decision::NegativeNice(nice))) => info!(
            "sched_slice_microseconds: not set, vigil runs at nice {nice}, which its containers \
             inherit and would lose with it"
        ),
        Ok(Applied::Unsupported) => debug!(
            "sched_slice_microseconds: this kernel has no per-task time slices (Linux 6.12+)"
        ),
        Err(e) => warn!("sched_slice_microseconds: {e}"),
    }
}

/// `config` with the sets an earlier vigil's state file records as scaled at their scaled
/// count, where the file's `replicas` is still the count they were scaled from (as a reload
/// keeps a scale: docs/behaviour.md §14); each one kept is logged.
fn keep_recorded_scales(config: Config, socket: &std::path::Path) -> Config {
    let recorded = crate::runtime::statefile::previous_scales(socket);
    if recorded.is_empty() {
        return config;
    }
    let config = config.keeping_scales(&recorded);
    for s in config.scales() {
        info!(
            "pod {}: {} replicas, as `vigil scale` left it before vigil restarted (the file \
             says {})",
            s.set, s.replicas, s.file_replicas
        );
    }
    config
}

/// Start-up, in order: host checks, the loop and its signals, vigil's own process attributes,
/// cgroups, the control socket, metrics, log forwarding; then the core and the components
/// (the shell's `new` and `resume`).
pub(super) fn build(
    config: Config,
    source: ConfigSource,
    selection: Selection,
    resumed: Option<Resumed>,
    stored: Vec<(PipeName, std::os::fd::OwnedFd)>,
) -> Result<Shell, StartError> {
    let socket_path = socket_path(&config);
    // After a crash, the counts `vigil scale` left (the file's, where it changed since), so
    // the pods are made as they ran; an upgrade's config already has them.
    let config = if resumed.is_none() && config.supervisor.on_restart == OnRestart::Adopt {
        keep_recorded_scales(config, &socket_path)
    } else {
        config
    };
    let host = crate::runtime::harden::check_startup(&source, &config)?;
    let (poll, signals) = open_loop()?;
    if resumed.is_some() {
        // Signals that came during the exec were held (handoff::exec): take them now.
        crate::runtime::handoff::exec::unblock();
    }
    let registry = Rc::new(poll.registry().try_clone().map_err(StartError::Poll)?);
    protect_self(&config);
    let (cgroups, refused) = setup_cgroups(&config, &host)?;
    let (control, core) = match resumed {
        None => (
            Control::bind(&config, &socket_path, Rc::clone(&registry))?,
            None,
        ),
        Some(r) => (
            Control::inherit(&config, &socket_path, Rc::clone(&registry), r.listener)?,
            Some(r.core),
        ),
    };
    if let Some(w) = config
        .supervisor
        .metrics_address
        .and_then(crate::host::metrics_exposure)
    {
        warn!("supervisor.metrics_address: {w}");
    }
    let metrics = match config.supervisor.metrics_address {
        None => None,
        Some(addr) => match metrics::MetricsListener::bind(Rc::clone(&registry), addr) {
            Ok(mut m) => {
                m.set_share(control.metrics_share());
                Some(m)
            }
            // After an upgrade the containers run on: a port taken meanwhile is not worth
            // giving up the handoff for.
            Err(e) if core.is_some() => {
                warn!("{e}; no metrics until the next restart");
                None
            }
            Err(e) => return Err(e.into()),
        },
    };
    let forward = forward_destination(&config);
    // What an earlier vigil left (kill -9) is found through its cgroups and state file,
    // once the core exists (`take_over_leftovers` below) — not after an upgrade: then it
    // is all ours.
    let tracker = crate::runtime::statefile::Tracker::new(&socket_path, cgroups.is_none());
    // The pipes an earlier vigil's holder kept (a crash, or the exec of an upgrade), then
    // this vigil's own holder.
    let mut held = crate::runtime::holder::take_previous(&socket_path);
    // The service manager's copies are preferred: the holder's duplicates of the same
    // pipes are closed as they are replaced.
    let mut fdstore = FdStore::from_env();
    fdstore.handed_back(stored.iter().map(|(p, _)| p));
    for (p, fd) in stored {
        held.insert(crate::runtime::holder::name(&p.label, p.pid, p.stderr), fd);
    }
    // As PID 1 a crash of vigil ends every process of the system or namespace: nothing
    // to hold for.
    let holder = if crate::runtime::is_pid1() {
        crate::runtime::holder::Holder::default()
    } else {
        crate::runtime::holder::Holder::start(&socket_path)
    };

    let now = Instant::now();
    let fresh = core.is_none();
    let core = core.unwrap_or_else(|| Supervisor::new_refusing(&config, now, &refused));
    // After an upgrade, the events the old instance saw were its hooks' to deliver.
    let event_hooks = super::event_hooks::EventHooks::new(
        Rc::clone(&registry),
        &config.supervisor.on_event,
        if fresh { 0 } else { core.last_event_seq() },
    );
    let pod_dir = super::pod_dir::PodDirWatch::new(
        Rc::clone(&registry),
        config.supervisor.pod_dir.as_deref(),
    );
    let mut shell = Shell {
        poll,
        signals: SignalPipe::new(signals),
        core,
        loaded: super::reload::Loaded {
            config,
            source,
            selection,
            refused_at_start: refused.iter().map(|(p, _)| p.clone()).collect(),
            last_reload: LastReload {
                successful: true,
                success_at: SystemTime::now(),
            },
        },
        control,
        runs: Runs::new(
            Rc::clone(&registry),
            cgroups,
            Capture::new(Rc::clone(&registry), forward),
            tracker,
            holder,
            held,
            fdstore,
        ),
        starting: true,
        idle_trim: Default::default(),
        notifier: Notifier::new(now),
        event_hooks,
        notify: super::notify::NotifySockets::new(Rc::clone(&registry)),
        metrics: metrics::Metrics::new(metrics),
        pod_dir,
        probe_stats: Default::default(),
        started_wall: SystemTime::now(),
        exit_code: None,
        panics: 0,
        started_at: now,
        upgrade: super::upgrade::Upgrade::new(
            std::env::current_exe().unwrap_or_default(),
            std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        ),
        watch: TurnWatch::new(now),
        #[cfg(feature = "fault-injection")]
        fault: crate::runtime::fault::Fault::from_env(now),
    };
    if fresh {
        // A name for this vigil's event history that no earlier start used (followers
        // resume by it: src/core/events.rs); taken before the leftovers' record is.
        let history = u64::try_from(crate::logs::unix_nanos_now()).unwrap_or(0);
        shell.core.begin_event_history(history);
        let (runs, mut link) = shell.runs_and_link();
        if let Some(seq) = runs.take_over_leftovers(now, &mut link) {
            // The earlier vigil's events come first (it logged them, and its hooks had them).
            shell.runs.journal = Journal::resume_after(seq);
            shell.event_hooks.skip_to(seq);
        }
    }
    Ok(shell)
}

/// Once the initial starts are done — nothing queued, every exec confirmed or failed (the
/// starts are pipelined over several turns, `runs::SPAWNS_PER_TURN` each) — tells systemd
/// `READY=1` ("the initial pods were started", docs/interface.md) and drops what only start-up
/// needed from the resident set (src/runtime/trim.rs). Once (`starting` is then false); and
/// once more [`crate::runtime::trim::IDLE_TRIM_AFTER`] later (the idle trim's deadline),
/// because the turns right after the last start (state file, first exits and probes, the first
/// status writes) fault code back in that idle running does not need.
pub(super) fn settle(
    now: Instant,
    starting: &mut bool,
    core: &Supervisor,
    runs: &mut Runs,
    notifier: &mut Notifier,
    idle_trim: &mut IdleTrim,
) {
    if !*starting || core.has_actions() || !runs.execs.is_empty() {
        return;
    }
    *starting = false;
    if let Some(m) = runs.cgroups.as_mut() {
        m.finish_move();
    }
    notifier.ready(now);
    crate::runtime::trim::give_back();
    idle_trim.activity(now);
}
