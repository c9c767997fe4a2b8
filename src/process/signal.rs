//! Sending signals to children: `kill(2)` to one process, `killpg(2)` to a container's process
//! group.
//!
//! Owns: the conversion of vigil's `u32` pids and `i32` signal numbers into what the syscalls
//! take, refusing pids that would mean "every process" or "my own group" (0, 1 for a group, and
//! anything that turns negative).
//!
//! Must not: decide what to kill (the runtime's tree kill picks `cgroup.kill` or the group), or
//! treat ESRCH as anything but an error the caller may ignore.

use nix::errno::Errno;
use nix::sys::signal::Signal;

use super::checked_pid;

/// Errors of signalling; each names the pid or group and the signal.
#[derive(Debug, thiserror::Error)]
pub enum SignalError {
    #[error("refusing to signal pid {pid}: not a single process or group id")]
    InvalidPid { pid: u32 },
    #[error("invalid signal number {signal}")]
    InvalidSignal { signal: i32 },
    #[error("send signal {signal} to pid {pid}: {source}")]
    Kill {
        pid: u32,
        signal: i32,
        source: Errno,
    },
    #[error("send signal {signal} to process group {pgid}: {source}")]
    KillGroup {
        pgid: u32,
        signal: i32,
        source: Errno,
    },
}

fn to_signal(sig: i32) -> Result<Option<Signal>, SignalError> {
    if sig == 0 {
        return Ok(None);
    }
    Signal::try_from(sig)
        .map(Some)
        .map_err(|_| SignalError::InvalidSignal { signal: sig })
}

/// `kill(pid, sig)`. `sig` 0 only checks existence. ESRCH comes back as an error: the caller
/// decides whether "already gone" matters.
pub fn signal(pid: u32, sig: i32) -> Result<(), SignalError> {
    let target = checked_pid(pid, 1).ok_or(SignalError::InvalidPid { pid })?;
    nix::sys::signal::kill(target, to_signal(sig)?).map_err(|source| SignalError::Kill {
        pid,
        signal: sig,
        source,
    })
}

/// `killpg(pgid, sig)`: every container is its own session and process group (setsid in the
/// child), so this reaches its whole tree when running without cgroups (unless a descendant
/// made its own group). pgid 1 is refused.
pub fn signal_group(pgid: u32, sig: i32) -> Result<(), SignalError> {
    let target = checked_pid(pgid, 2).ok_or(SignalError::InvalidPid { pid: pgid })?;
    nix::sys::signal::killpg(target, to_signal(sig)?).map_err(|source| SignalError::KillGroup {
        pgid,
        signal: sig,
        source,
    })
}
