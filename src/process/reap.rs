//! Collecting terminated children: the `waitpid(-1, WNOHANG)` loop that must be the only
//! reaping path of the process, `waitpid(pid, WNOHANG)` for one child, and the subreaper flag.
//!
//! Owns: turning wait statuses into [`Reaped`] values. Must not: know who a pid belongs to (the
//! runtime's reaper table does), or block: every call here is `WNOHANG`.

use nix::errno::Errno;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::checked_pid;

/// Errors of reaping; each names the pid.
#[derive(Debug, thiserror::Error)]
pub enum ReapError {
    #[error("refusing to wait for pid {pid}: not a single process id")]
    InvalidPid { pid: u32 },
    #[error("waitpid {pid}: {source}")]
    Wait { pid: i32, source: Errno },
    #[error("become child subreaper: {source}")]
    Subreaper { source: Errno },
}

/// One reaped child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    Exited {
        pid: u32,
        code: i32,
    },
    Signaled {
        pid: u32,
        signal: i32,
        core_dumped: bool,
    },
}

impl Reaped {
    pub fn pid(&self) -> u32 {
        match *self {
            Reaped::Exited { pid, .. } | Reaped::Signaled { pid, .. } => pid,
        }
    }
}

fn to_reaped(status: WaitStatus) -> Option<Reaped> {
    match status {
        WaitStatus::Exited(pid, code) => Some(Reaped::Exited {
            pid: pid.as_raw() as u32,
            code,
        }),
        WaitStatus::Signaled(pid, sig, core_dumped) => Some(Reaped::Signaled {
            pid: pid.as_raw() as u32,
            signal: sig as i32,
            core_dumped,
        }),
        _ => None,
    }
}

/// Reaps every child that has terminated: `waitpid(-1, WNOHANG)` until it reports none left
/// (0) or no children at all (ECHILD); EINTR loops. SIGCHLD coalesces, so the runtime calls
/// this on every SIGCHLD wakeup and must not assume one child per signal. As PID 1 or a
/// subreaper this also collects orphans the runtime never spawned (returned like any other).
///
/// Must be the only reaping path in the process (waitpid(-1) takes any child).
pub fn reap_all() -> Vec<Reaped> {
    let mut out = Vec::new();
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => break,
            Ok(status) => {
                if let Some(r) = to_reaped(status) {
                    out.push(r);
                }
            }
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break,
            Err(e) => {
                log::error!("waitpid(-1): {e}");
                break;
            }
        }
    }
    out
}

/// Reaps `pid` if it has terminated (`waitpid(pid, WNOHANG)`); `Ok(None)` while it runs.
pub fn try_reap(pid: u32) -> Result<Option<Reaped>, ReapError> {
    let target = checked_pid(pid, 1).ok_or(ReapError::InvalidPid { pid })?;
    loop {
        match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(status) => {
                if let Some(r) = to_reaped(status) {
                    return Ok(Some(r));
                }
            }
            Err(Errno::EINTR) => continue,
            Err(source) => {
                return Err(ReapError::Wait {
                    pid: pid as i32,
                    source,
                });
            }
        }
    }
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are re-parented to vigil instead of
/// PID 1, so [`reap_all`] collects them (prctl(2)).
pub fn set_child_subreaper() -> Result<(), ReapError> {
    nix::sys::prctl::set_child_subreaper(true).map_err(|source| ReapError::Subreaper { source })
}
