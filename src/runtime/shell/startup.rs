//! Start-up steps: the errors that stop vigil from starting, and the steps the shell takes
//! before its components exist — the loop and its signals, vigil's own process attributes
//! (subreaper, OOM score, CPU time slice), the cgroup subtree and the pods it cannot take,
//! and where forwarded output goes. A reload applies some of them again (`apply_supervisor`).
//!
//! Owns nothing once start-up is over. Must not: keep a descriptor (each step hands what it
//! opened to the component that owns it from then on).

use std::io;

use libc::SIGPWR;
use log::{debug, info, warn};
use mio::{Interest, Poll};
use signal_hook::consts::signal::{SIGCHLD, SIGHUP, SIGINT, SIGTERM, SIGUSR2};
use signal_hook_mio::v1_0::Signals;

use super::capture;
use super::metrics;
use super::tokens;
use crate::cgroup::{Controllers, Manager};
use crate::config::spec::Config;
use crate::logs;
use crate::process;
use crate::runtime::harden::HostCheck;

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
