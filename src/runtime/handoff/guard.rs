//! The upgrade's guardian: what keeps a supervisor when the new binary, once executed, dies
//! or hangs before its takeover is done (issue 43.8).
//!
//! Just before the old vigil executes the new binary it starts a guardian: its own binary
//! again (the descriptor of `/proc/self/exe`, as the output holder is started), as
//! `vigil-upgrade-guard --handoff-guard PID PIDFD READY STATE EXE -- ARGV…`, holding a pidfd of
//! the vigil process (pidfd_open(2)), the read end of a pipe whose write end the new instance
//! inherits ([`READY_FD_ENV`]), and the very descriptors handed over (the state file, the old
//! binary, the listening socket, the pipes, the cgroup files, the connections): it inherits
//! them, as the new instance does, because they are not close-on-exec at that moment. The
//! guardian then waits (poll(2), one process of its own, not vigil's loop) for one of:
//!
//! - a byte on the pipe: the new instance has taken everything over ([`report_ready`]); the
//!   guardian exits and vigil's reaper collects it;
//! - the pidfd readable: the vigil process ended (the new binary aborted or exited);
//! - [`TAKEOVER_TIMEOUT`] passed: the new binary hangs; it is killed (SIGKILL through the
//!   pidfd, never a recycled pid) and its end awaited for at most [`KILL_WAIT`].
//!
//! In the last two cases the guardian executes the old binary in its own process with the
//! handoff as the old vigil wrote it and the reason in [`super::ERROR_ENV`]: the same takeover
//! as when a new binary goes back by itself, except that the containers are not this
//! process's children. The takeover sees that ([`super::State::pid`] is another process) and
//! watches every main process through a pidfd, checked against its recorded start time, as
//! it does with runs adopted after a crash (docs/behaviour.md §11, §12).
//!
//! Must not: read or change the handoff, close or mark a handed-over descriptor (they are for
//! the fallback), take a signal meant for vigil (the signals vigil handles are blocked, as
//! across the exec, and are taken by the fallback vigil), or outlive a ready new instance.

#![allow(unsafe_code)]

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

use log::{error, info};

use super::{ERROR_ENV, EXE_FD_ENV, FD_ENV};

/// The guardian's first argument.
pub const ARG: &str = "--handoff-guard";
/// The new instance's end of the guardian's pipe, in its environment.
pub const READY_FD_ENV: &str = "VIGIL_HANDOFF_READY_FD";
/// How long the new binary has, from the exec, to say it has taken over.
pub const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a hung new binary, once SIGKILLed, is waited for before the fallback goes on.
pub const KILL_WAIT: Duration = Duration::from_secs(5);
/// The guardian's process name (argv[0]).
const NAME: &str = "vigil-upgrade-guard";

/// The old instance's side: the guardian started, and the pipe end to hand the new binary.
pub struct Guard {
    pub pid: u32,
    /// Inherited by the new instance (close-on-exec cleared by the exec, with the rest).
    pub ready: OwnedFd,
}

/// Starts the guardian from `exe` (this binary's descriptor), handing it `state` and `exe`,
/// and this process's `argv` for the fallback. The descriptors to hand over must already be
/// inheritable (the exec clears `FD_CLOEXEC` first). Returns once the guardian is executing
/// (std's spawn waits for the exec), so it holds no copy of anything else of vigil's (a
/// metrics port the new instance binds again, a connection being closed).
pub fn start(exe: &OwnedFd, state: RawFd, argv: &[OsString]) -> io::Result<Guard> {
    // SAFETY: pidfd_open(2) of this process with no flags: a new close-on-exec descriptor or
    // -1; no memory is passed.
    let me = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if me < 0 {
        return Err(io::Error::other(format!(
            "pidfd_open of vigil itself: {}",
            io::Error::last_os_error()
        )));
    }
    // SAFETY: a fresh descriptor nothing else owns.
    let me = unsafe { OwnedFd::from_raw_fd(me as RawFd) };
    let (read, ready) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(|e| io::Error::other(format!("the guardian's pipe: {e}")))?;
    let (me_raw, read_raw, ready_raw) = (me.as_raw_fd(), read.as_raw_fd(), ready.as_raw_fd());
    let mut cmd = std::process::Command::new(super::binary::fd_path(exe));
    cmd.arg0(NAME)
        .arg(ARG)
        .arg(std::process::id().to_string())
        .args([me_raw, read_raw, state, exe.as_raw_fd()].map(|fd| fd.to_string()))
        .arg("--")
        .args(argv)
        .env_remove(FD_ENV)
        .env_remove(EXE_FD_ENV)
        .env_remove(ERROR_ENV)
        .env_remove(READY_FD_ENV)
        .stdin(std::process::Stdio::null());
    // SAFETY: between fork and exec only fcntl(2) and close(2) (async-signal-safe) on
    // descriptors this process owns: the guardian keeps the pidfd and the pipe's read end,
    // and not the write end (the new instance's).
    unsafe {
        cmd.pre_exec(move || {
            for fd in [me_raw, read_raw] {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            libc::close(ready_raw);
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| io::Error::other(format!("starting the upgrade's guardian: {e}")))?;
    Ok(Guard {
        pid: child.id(),
        ready,
    })
}

/// The new instance has taken everything over: the guardian may go.
pub fn report_ready(ready: OwnedFd) {
    if let Err(e) = nix::unistd::write(&ready, b"R") {
        log::warn!("upgrade: cannot tell the guardian the takeover is done: {e}");
    }
}

/// How the wait ended.
enum Outcome {
    Ready,
    Died,
    Hung,
}

/// `vigil --handoff-guard PID PIDFD READY STATE EXE -- ARGV…` (started by [`start`]): waits,
/// then exits 0 or executes the old binary; the exit code when it cannot.
pub fn main() -> i32 {
    super::exec::block_held();
    let args: Vec<OsString> = std::env::args_os().skip(2).collect();
    let number = |i: usize| -> Option<i32> { args.get(i)?.to_str()?.parse().ok() };
    let (Some(vigil), Some(pidfd), Some(ready), Some(state), Some(exe)) =
        (number(0), number(1), number(2), number(3), number(4))
    else {
        error!("{ARG}: started without its descriptors");
        return 2;
    };
    if args.get(5).is_none_or(|a| a != "--") || args.len() < 7 {
        error!("{ARG}: started without vigil's arguments");
        return 2;
    }
    let argv = &args[6..];
    // SAFETY: both were handed to this process to own (inherited at exec, named once).
    let (pidfd, ready) = unsafe { (OwnedFd::from_raw_fd(pidfd), OwnedFd::from_raw_fd(ready)) };
    // Not close-on-exec: the fallback would inherit them, and they are not its.
    for fd in [&pidfd, &ready] {
        let _ = nix::fcntl::fcntl(
            fd,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        );
    }
    let why = match wait(&pidfd, &ready, Instant::now() + TAKEOVER_TIMEOUT) {
        Outcome::Ready => return 0,
        Outcome::Died => {
            format!("the new vigil (pid {vigil}) ended during its takeover, before it was ready")
        }
        Outcome::Hung => {
            let _ = crate::runtime::statefile::pidfd_signal(&pidfd, libc::SIGKILL);
            let gone = poll_one(&pidfd, Instant::now() + KILL_WAIT);
            format!(
                "the new vigil (pid {vigil}) was not ready {} s after the exec (killed{})",
                TAKEOVER_TIMEOUT.as_secs(),
                if gone { "" } else { "; it has not ended yet" }
            )
        }
    };
    error!(
        "upgrade: {why}; the guardian (pid {}) executes the previous binary with the state as it was handed over",
        std::process::id()
    );
    drop((pidfd, ready));
    let e = exec_old(exe, state, argv, &why);
    error!(
        "upgrade: the guardian cannot execute the previous binary: {e}; the containers are left running unsupervised (start vigil again: on_restart = \"adopt\" takes them in)"
    );
    1
}

/// Waits for the ready byte, the vigil process's end, or `deadline`.
fn wait(pidfd: &OwnedFd, ready: &OwnedFd, deadline: Instant) -> Outcome {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let mut ready_open = true;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Outcome::Hung;
        }
        let ms = PollTimeout::from(u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX));
        let mut fds = vec![PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
        if ready_open {
            fds.push(PollFd::new(ready.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, ms) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
            Ok(_) => {}
            Err(e) => {
                error!("{ARG}: poll: {e}");
                return Outcome::Hung;
            }
        }
        let exited = fds[0].any().unwrap_or(false);
        let readable = ready_open && fds.get(1).and_then(PollFd::any).unwrap_or(false);
        drop(fds);
        if readable {
            let mut byte = [0u8; 1];
            match nix::unistd::read(ready, &mut byte) {
                Ok(1) => return Outcome::Ready,
                // Closed without a word: only the process's end or the deadline count now.
                Ok(_) => ready_open = false,
                Err(nix::errno::Errno::EINTR) => {}
                Err(_) => ready_open = false,
            }
            continue;
        }
        if exited {
            return Outcome::Died;
        }
    }
}

/// Whether `fd` became readable before `deadline`.
fn poll_one(fd: &OwnedFd, deadline: Instant) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let ms = PollTimeout::from(u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX));
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, ms) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => {}
            Ok(_) => return true,
            Err(_) => return false,
        }
    }
}

/// Executes the old binary (`exe`) with `argv`, the handoff (`state`) and `why`. Returns only
/// on failure.
fn exec_old(exe: RawFd, state: RawFd, argv: &[OsString], why: &str) -> io::Error {
    let cstring = |b: &[u8]| {
        CString::new(b).map_err(|_| io::Error::other("an argument or variable holds a NUL byte"))
    };
    let mut args = Vec::with_capacity(argv.len());
    for a in argv {
        match cstring(a.as_bytes()) {
            Ok(c) => args.push(c),
            Err(e) => return e,
        }
    }
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k == FD_ENV || k == EXE_FD_ENV || k == ERROR_ENV || k == READY_FD_ENV {
            continue;
        }
        let mut kv = k;
        kv.push("=");
        kv.push(&v);
        if let Ok(c) = cstring(kv.as_bytes()) {
            env.push(c);
        }
    }
    let why: String = why.chars().filter(|c| *c != '\0').collect();
    for kv in [
        format!("{FD_ENV}={state}"),
        format!("{EXE_FD_ENV}={exe}"),
        format!("{ERROR_ENV}={why}"),
    ] {
        match cstring(kv.as_bytes()) {
            Ok(c) => env.push(c),
            Err(e) => return e,
        }
    }
    // SAFETY: the number was handed to this process for this exec; only borrowed for the call.
    let exe = unsafe { std::os::fd::BorrowedFd::borrow_raw(exe) };
    info!("upgrade: the guardian executes the previous binary");
    match nix::unistd::fexecve(exe, &args, &env) {
        Err(e) => io::Error::from(e),
        Ok(never) => match never {},
    }
}
