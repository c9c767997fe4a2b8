//! Starting container processes and exec probes, signalling them, and reaping them.
//!
//! The jobs live in their own modules, in the order a child's life goes:
//! - [`prepare`]: a validated [`ContainerSpec`](crate::config::spec::ContainerSpec) plus an argv
//!   become a [`Prepared`] launch plan — users, groups, capabilities, environment, rlimits — with
//!   every name resolved and every string and list allocated *before* the fork;
//! - `child`: the single async-signal-safe body that runs between fork and exec
//!   (`child_setup`) and the plan it reads;
//! - [`spawn`](mod@spawn): the two ways to fork — `clone3(CLONE_INTO_CGROUP)` (module `raw`) and
//!   `std::process::Command` + `pre_exec` — and the output pipes;
//! - [`signal`](mod@signal): `kill(2)`/`killpg(2)` wrappers that refuse pids meaning "everyone";
//! - [`reap`](mod@reap): the `waitpid(-1, WNOHANG)` reap loop and the subreaper flag;
//! - [`sched`]: vigil's own short CPU time slice, not passed on to the children.
//!
//! Must not: keep any state about children (the runtime's pid table does that), wait for a child
//! in a blocking way, open cgroup files (the caller passes the cgroup's already-open directory
//! and `cgroup.procs` fds, [`CgroupTarget`]), or allocate, lock, log or touch the environment
//! between fork and exec (see `child`).

#![allow(unsafe_code)]

pub mod access;
mod child;
pub mod env_file;
mod prepare;
mod raw;
mod reap;
pub mod sched;
mod signal;
mod spawn;

use std::io;
use std::os::fd::RawFd;
use std::path::PathBuf;

use nix::errno::Errno;
use nix::unistd::Pid;

pub use prepare::{DEFAULT_PATH, Prepared, StartProblem, check_start, prepare};
pub use reap::{ReapError, Reaped, reap_all, set_child_subreaper, try_reap};
pub use signal::{SignalError, signal, signal_group};
pub use spawn::{
    CgroupTarget, Launched, PendingExec, Stdio, pipe_nonblocking, set_nonblocking, spawn,
    spawn_pipelined,
};

/// Errors of preparing and starting a child ([`prepare`], [`spawn`], the pipes); each names the
/// operation that failed and what it failed on. Signalling and reaping have their own
/// ([`SignalError`], [`ReapError`]).
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("empty command")]
    EmptyCommand,
    #[error("{what} contains a NUL byte: {value:?}")]
    NulByte { what: &'static str, value: String },
    #[error(
        "unknown user {name:?}: no such name in this host's user database (create it, or give a numeric uid)"
    )]
    UnknownUser { name: String },
    #[error(
        "unknown group {name:?}: no such name in this host's group database (create it, or give a numeric gid)"
    )]
    UnknownGroup { name: String },
    #[error("look up user {name:?}: {source}")]
    LookupUser { name: String, source: Errno },
    #[error("look up group {name:?}: {source}")]
    LookupGroup { name: String, source: Errno },
    #[error("look up supplementary groups of {name:?}: {source}")]
    GroupList { name: String, source: Errno },
    /// `run_as_non_root` and the container would run as uid 0 (kubelet verifyRunAsNonRoot).
    #[error(
        "run_as_non_root is set but the container would run as root (uid 0{}); set user to a \
         non-root user or uid",
        if *configured { ", its user" } else { ", vigil's own user: no user is set" }
    )]
    RunAsRoot { configured: bool },
    #[error("unknown capability {name:?}")]
    UnknownCapability { name: String },
    #[error("create pipe: {source}")]
    Pipe { source: Errno },
    #[error("open /dev/null: {source}")]
    OpenDevNull { source: io::Error },
    #[error("duplicate output fd: {source}")]
    DupFd { source: io::Error },
    /// ENOENT or ENOTDIR from execve; `denied` names the component that is missing when
    /// [`access::walk`] finds it.
    #[error("exec {argv0:?}: {source}{}", because(denied.as_ref()))]
    CommandNotFound {
        argv0: String,
        source: io::Error,
        denied: Option<access::Denial>,
    },
    /// EACCES, ENOEXEC or EPERM from execve; `denied` names the path the container's user may
    /// not pass (the directory or the target of a symlink, not the name configured).
    #[error("exec {argv0:?}: {source}{}", because(denied.as_ref()))]
    NotExecutable {
        argv0: String,
        source: io::Error,
        denied: Option<access::Denial>,
    },
    #[error("exec {argv0:?}: {source}")]
    Exec { argv0: String, source: io::Error },
    #[error(
        "start {argv0:?}: the kernel killed the child before it ran (its cgroup was being \
         killed)"
    )]
    KilledAtBirth { argv0: String },
    #[error("place {argv0:?} in its cgroup (write cgroup.procs): {source}")]
    CgroupPlacement { argv0: String, source: io::Error },
    #[error("change to working directory {path:?}: {source}")]
    WorkingDir { path: PathBuf, source: io::Error },
    #[error("prepare {argv0:?} before exec ({step}): {source}")]
    ChildSetup {
        argv0: String,
        step: &'static str,
        source: io::Error,
    },
    #[error("set O_NONBLOCK on fd {fd}: {source}")]
    SetNonblocking { fd: RawFd, source: Errno },
    #[error(transparent)]
    EnvFile(#[from] env_file::EnvFileError),
}

/// `: DENIAL` after an exec error when the path that was denied is known, else nothing.
fn because(denied: Option<&access::Denial>) -> String {
    denied.map(|d| format!(": {d}")).unwrap_or_default()
}

/// Converts a pid for kill(2)/waitpid(2), refusing values below `min` and values that would turn
/// negative (meaning "every process" or a group) — a bug there must not signal the world.
fn checked_pid(pid: u32, min: u32) -> Option<Pid> {
    if pid < min || pid > i32::MAX as u32 {
        return None;
    }
    Some(Pid::from_raw(pid as i32))
}

#[cfg(test)]
mod tests;
