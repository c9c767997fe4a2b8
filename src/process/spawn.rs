//! Forking a prepared child: [`spawn`] picks `clone3(CLONE_INTO_CGROUP)` (module `raw`) or
//! `std::process::Command` + `pre_exec`, both running the same `child_setup`; and the pipes a
//! child's output goes to.
//!
//! With a cgroup directory, `clone3` creates the child inside its cgroup (no migration, so no
//! wait for the kernel's cgroup write lock); otherwise, and as the fallback where clone3 is
//! unusable, `Command` + `pre_exec`, where the child writes "0" to `cgroup.procs`.
//!
//! Exec failures come back from std through its CLOEXEC error pipe as the `spawn()` error (the
//! clone3 path has its own pipe with the same meaning, see `raw`), so a missing binary is
//! reported synchronously by [`spawn`] (tests and tools; never the event loop).
//! [`spawn_pipelined`] (what the loop uses: a container's main process, an exec probe, an exec
//! hook) does not wait on the clone3 path: it returns a [`PendingExec`] whose error pipe the
//! event loop watches, so the next container is cloned while this one's child execs, and a
//! child that never reaches its exec (a frozen cgroup) blocks nothing. Failures of our own
//! setup steps use the same path; to
//! tell them apart the child also writes one step byte into a second CLOEXEC pipe before
//! failing, which the parent reads after `spawn()` returns.
//!
//! Owns: the choice of path, the error classification and the output pipes. Must not: resolve
//! names (that is [`prepare`](super::prepare)), keep any record of the child, or wait for it
//! beyond the exec handshake.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::fcntl::{FcntlArg, OFlag, fcntl};

use super::SpawnError;
use super::child::{Step, child_plan, child_setup};
use super::prepare::Prepared;
use super::raw;

/// Where a child's stdout and stderr go, and its stdin: /dev/null but with
/// [`Stdio::CombinedWithInput`].
#[derive(Debug)]
pub enum Stdio {
    /// Both to one fd (the usual case: one pipe per container keeps the two streams in order).
    Combined(OwnedFd),
    /// Each to its own fd.
    Separate { stdout: OwnedFd, stderr: OwnedFd },
    /// Both to /dev/null.
    Null,
    /// Both to `output`, and stdin from `input` (an `on_event` hook reads its event there:
    /// the read end of a pipe holding the whole event, its write end already closed).
    CombinedWithInput { output: OwnedFd, input: OwnedFd },
}

/// A pipe for child output: the read end is `O_NONBLOCK|O_CLOEXEC` (for the event loop), the
/// write end `O_CLOEXEC` only (std dup2s it onto the child's stdout/stderr, which clears
/// CLOEXEC there; the child gets a blocking pipe as programs expect).
pub fn pipe_nonblocking() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    let (r, w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|source| SpawnError::Pipe { source })?;
    // A fresh pipe's read end has no status flag but O_RDONLY (O_CLOEXEC is a descriptor
    // flag): set O_NONBLOCK without reading them first.
    fcntl(r.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK)).map_err(|source| {
        SpawnError::SetNonblocking {
            fd: r.as_raw_fd(),
            source,
        }
    })?;
    Ok((r, w))
}

/// Sets `O_NONBLOCK` on `fd`, keeping its other status flags.
pub fn set_nonblocking(fd: &impl std::os::fd::AsFd) -> Result<(), SpawnError> {
    let raw = fd.as_fd().as_raw_fd();
    let err = |source| SpawnError::SetNonblocking { fd: raw, source };
    let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFL).map_err(err)?;
    let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags)).map_err(err)?;
    Ok(())
}

/// The cgroup a child is started in: the cgroup2 directory (O_RDONLY|O_DIRECTORY, for
/// `clone3(CLONE_INTO_CGROUP)`) and its `cgroup.procs` opened for writing (for the `Command`
/// fallback, where the child writes "0" to it before exec).
#[derive(Debug, Clone, Copy)]
pub struct CgroupTarget<'a> {
    /// `None`: always use the `Command` path with `procs`.
    pub dir: Option<BorrowedFd<'a>>,
    pub procs: BorrowedFd<'a>,
}

/// Set once clone3 turned out unusable on this system, so the fallback is logged once and
/// later spawns skip the attempt.
pub(super) static CLONE3_UNUSABLE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Starts `p`, returning the child's pid. The child is a session leader (pid = pgid = sid),
/// runs with stdin on /dev/null and its output on `stdio`, and is in `cgroup` (if given) before
/// it runs any of the program's code.
///
/// With a cgroup directory the child is created directly in it with
/// `clone3(CLONE_INTO_CGROUP)` (see `raw`: no migration, so no wait for the kernel's cgroup
/// write lock); without one, or when clone3 is unusable (ENOSYS, E2BIG, EINVAL, EBADF, EPERM,
/// or a child killed at birth), it uses `std::process::Command` whose child writes "0" to
/// `cgroup.procs`. Both run the same `child_setup` and report errors the same way.
///
/// The caller reaps it (see [`reap_all`]). Exec and setup failures are reported here,
/// synchronously: this waits for the child's exec, for as long as that takes (a child in a
/// frozen cgroup: until the thaw), so the event loop uses [`spawn_pipelined`] instead.
pub fn spawn(
    p: &Prepared,
    cgroup: Option<CgroupTarget<'_>>,
    stdio: Stdio,
) -> Result<u32, SpawnError> {
    let dir = cgroup.and_then(|c| c.dir);
    match dir {
        Some(dir) if !CLONE3_UNUSABLE.load(std::sync::atomic::Ordering::Relaxed) => {
            // The raw path only borrows `stdio`: a fallback below still has it.
            match raw::start(p, child_plan(p, None), Some(dir.as_raw_fd()), &stdio, false) {
                Ok(mut started) => {
                    // `stdio` stays open here until the report is in: harmless (the child's
                    // output reaches EOF only at its exit, long after), and a child killed at
                    // birth leaves it for the fallback.
                    let mut report = raw::Report::default();
                    while !report.read_from(&started.report) {}
                    let outcome = raw::conclude(p, started.pid, report.bytes());
                    started.hold.settled(&report, outcome.is_err());
                    drop(started);
                    match outcome {
                        Ok(pid) => Ok(pid),
                        Err(e) => fall_back(p, cgroup, Some(stdio), e),
                    }
                }
                Err(e) => fall_back(p, cgroup, Some(stdio), e),
            }
        }
        _ => spawn_command(p, cgroup.map(|c| c.procs), stdio),
    }
}

/// How [`spawn_pipelined`] left a child: running (its exec already confirmed, on the `Command`
/// path), or cloned with its exec still to be confirmed.
#[derive(Debug)]
pub enum Launched {
    Running(u32),
    Pending(PendingExec),
}

/// A container's main process whose exec is not confirmed yet ([`spawn_pipelined`]): the read
/// end of its error pipe (`O_NONBLOCK`, for the event loop) and what names it in an error.
///
/// The pipe reaches EOF when the child execs (the write end is `O_CLOEXEC`) or exits; what it
/// wrote before tells the two apart (see `raw`). [`PendingExec::poll`] reads without waiting;
/// [`PendingExec::settle`] waits (a child's setup and exec: milliseconds).
#[derive(Debug)]
pub struct PendingExec {
    /// Boxed: moved along with the pending exec, read only if it fails.
    prepared: Box<Prepared>,
    pid: u32,
    pipe: OwnedFd,
    report: raw::Report,
    /// The memory the child may share with vigil until it execs (see `raw::Hold`).
    hold: raw::Hold,
}

impl PendingExec {
    /// The child's pid (valid from the clone on: signals and the reaper may use it).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The error pipe, to register for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.pipe.as_fd()
    }

    /// Reads what the child reported so far. `None`: not settled yet. `Some(Ok(()))`: it
    /// exec'd. `Some(Err(e))`: it did not (exec or setup failure, with the same error as
    /// [`spawn`] gives; or killed before it ran, which here is an error too, the output pipes
    /// being gone), and it has been reaped — the caller's reaper must forget its pid.
    pub fn poll(&mut self) -> Option<Result<(), SpawnError>> {
        if !self.report.read_from(&self.pipe) {
            return None;
        }
        let outcome = raw::conclude(&self.prepared, self.pid, self.report.bytes());
        self.hold.settled(&self.report, outcome.is_err());
        Some(
            outcome
                .map(|_| ())
                .or_else(|e| fall_back(&self.prepared, None, None, e).map(|_| ())),
        )
    }

    /// Waits for the outcome (see [`PendingExec::poll`]): for a child known to have exited
    /// (its report is complete), or one whose report pipe cannot be watched.
    pub fn settle(&mut self) -> Result<(), SpawnError> {
        loop {
            if let Some(outcome) = self.settle_until(None) {
                return outcome;
            }
        }
    }

    /// Waits for the outcome until `deadline` at most (`None`: no limit); `None` if the child
    /// has not settled by then (it has not reached its exec: a frozen cgroup, a stopped child).
    pub fn settle_until(
        &mut self,
        deadline: Option<std::time::Instant>,
    ) -> Option<Result<(), SpawnError>> {
        loop {
            if let Some(outcome) = self.poll() {
                return Some(outcome);
            }
            let timeout = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return None;
                    }
                    // Rounded up, so a wait never ends just before the deadline and spins.
                    i32::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX)
                }
            };
            let mut pfd = libc::pollfd {
                fd: self.pipe.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: poll(2) on one valid pollfd; EINTR and errors just loop to the read,
            // which reports a broken pipe as complete.
            unsafe {
                libc::poll(&mut pfd, 1, timeout);
            }
        }
    }
}

/// Like [`spawn`], but without waiting for the child's exec on the clone3 path: the loop goes on
/// (another container can be cloned while this one's child execs, and a child that never gets
/// to its exec — its cgroup frozen, the process stopped — holds nothing up) and confirms it
/// later through [`PendingExec`]. The clone3 path is taken with a cgroup directory and without
/// any cgroup (then the child stays in vigil's); the `Command` path (a cgroup known only by
/// its `cgroup.procs`, or where clone3 is unusable) runs as in [`spawn`], waiting for the
/// exec, and the result is already [`Launched::Running`].
pub fn spawn_pipelined(
    p: Prepared,
    cgroup: Option<CgroupTarget<'_>>,
    stdio: Stdio,
) -> Result<Launched, SpawnError> {
    let raw_dir = match cgroup {
        None => Some(None),
        Some(CgroupTarget { dir: Some(dir), .. }) => Some(Some(dir.as_raw_fd())),
        Some(CgroupTarget { dir: None, .. }) => None,
    };
    match raw_dir {
        Some(dir) if !CLONE3_UNUSABLE.load(std::sync::atomic::Ordering::Relaxed) => {
            match raw::start(&p, child_plan(&p, None), dir, &stdio, true) {
                Ok(started) => {
                    // The child holds the only write ends of its output pipes from now on.
                    drop(stdio);
                    Ok(Launched::Pending(PendingExec {
                        prepared: Box::new(p),
                        pid: started.pid,
                        pipe: started.report,
                        report: raw::Report::default(),
                        hold: started.hold,
                    }))
                }
                Err(e) => fall_back(&p, cgroup, Some(stdio), e).map(Launched::Running),
            }
        }
        _ => spawn_command(&p, cgroup.map(|c| c.procs), stdio).map(Launched::Running),
    }
}

/// After the raw path did not produce a running child: the error as is, or the `Command` path
/// when clone3 is unusable (with the descriptors still here) or the child was killed at birth.
fn fall_back(
    p: &Prepared,
    cgroup: Option<CgroupTarget<'_>>,
    stdio: Option<Stdio>,
    e: raw::RawError,
) -> Result<u32, SpawnError> {
    let procs = cgroup.map(|c| c.procs);
    match (e, stdio) {
        (raw::RawError::Failed(e), _) => Err(e),
        (raw::RawError::Unsupported(errno), Some(stdio)) => {
            if !CLONE3_UNUSABLE.swap(true, std::sync::atomic::Ordering::Relaxed) {
                log::debug!(
                    "clone3 into a cgroup is unusable here ({errno}); spawning through \
                     cgroup.procs from now on"
                );
            }
            spawn_command(p, procs, stdio)
        }
        (raw::RawError::KilledAtBirth, Some(stdio)) => {
            log::debug!(
                "{:?}: clone3 child was killed at birth (its cgroup saw cgroup.kill); \
                 spawning through cgroup.procs",
                p.argv0()
            );
            spawn_command(p, procs, stdio)
        }
        (raw::RawError::Unsupported(_) | raw::RawError::KilledAtBirth, None) => {
            Err(SpawnError::KilledAtBirth {
                argv0: p.argv[0].clone(),
            })
        }
    }
}

/// The `Command` path: std forks, `pre_exec` runs `child_setup` (with the
/// `cgroup.procs` write), execvp.
fn spawn_command(
    p: &Prepared,
    cgroup_procs: Option<BorrowedFd<'_>>,
    stdio: Stdio,
) -> Result<u32, SpawnError> {
    let mut input = std::process::Stdio::null();
    let (out, err) = match stdio {
        Stdio::Combined(fd) => {
            let dup = fd
                .try_clone()
                .map_err(|source| SpawnError::DupFd { source })?;
            (
                std::process::Stdio::from(fd),
                std::process::Stdio::from(dup),
            )
        }
        Stdio::CombinedWithInput { output, input: i } => {
            let dup = output
                .try_clone()
                .map_err(|source| SpawnError::DupFd { source })?;
            input = std::process::Stdio::from(i);
            (
                std::process::Stdio::from(output),
                std::process::Stdio::from(dup),
            )
        }
        Stdio::Separate { stdout, stderr } => (stdout.into(), stderr.into()),
        Stdio::Null => (std::process::Stdio::null(), std::process::Stdio::null()),
    };

    let (step_r, step_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
        .map_err(|source| SpawnError::Pipe { source })?;

    let mut cmd = Command::new(&p.argv[0]);
    cmd.args(&p.argv[1..])
        .env_clear()
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdin(input)
        .stdout(out)
        .stderr(err);

    let mut plan = child_plan(p, cgroup_procs.map(|fd| fd.as_raw_fd()));
    plan.step_fd = step_w.as_raw_fd();
    // SAFETY: `child_setup` is async-signal-safe (see its doc): it only reads `plan`, which was
    // fully allocated here in the parent, and makes raw syscalls. The raw fds in `plan` stay
    // open until after `spawn()` returns: `step_w` is dropped below and `cgroup_procs` is
    // borrowed for this whole call.
    unsafe {
        cmd.pre_exec(move || child_setup(&plan).map_err(io::Error::from_raw_os_error));
    }

    let result = cmd.spawn();
    drop(cmd);
    drop(step_w);
    match result {
        Ok(child) => {
            // We reap via waitpid ourselves; dropping `Child` neither waits nor kills.
            Ok(child.id())
        }
        Err(source) => {
            let mut b = [0u8; 1];
            let step = match File::from(step_r).read(&mut b) {
                Ok(1) => Step::from_byte(b[0]),
                _ => None,
            };
            Err(classify_spawn_error(p, step, source))
        }
    }
}

pub(super) fn classify_spawn_error(
    p: &Prepared,
    step: Option<Step>,
    source: io::Error,
) -> SpawnError {
    let argv0 = p.argv[0].clone();
    match step {
        Some(Step::Cgroup) => SpawnError::CgroupPlacement { argv0, source },
        Some(Step::Chdir) => SpawnError::WorkingDir {
            path: p.working_dir.clone().unwrap_or_default(),
            source,
        },
        Some(step) => SpawnError::ChildSetup {
            argv0,
            step: step.name(),
            source,
        },
        None => match source.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => SpawnError::CommandNotFound {
                argv0,
                source,
                denied: p.exec_denial(),
            },
            Some(libc::EACCES) | Some(libc::EPERM) => SpawnError::NotExecutable {
                argv0,
                source,
                denied: p.exec_denial(),
            },
            Some(libc::ENOEXEC) => SpawnError::NotExecutable {
                argv0,
                source,
                denied: None,
            },
            _ => SpawnError::Exec { argv0, source },
        },
    }
}
