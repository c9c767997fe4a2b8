//! The exec of `vigil upgrade`, and the way back when it fails.
//!
//! Before `execve(2)`: the handed-over descriptors lose `FD_CLOEXEC` (fcntl(2)) — every other
//! descriptor of vigil is close-on-exec and goes — and the signals vigil handles are blocked
//! (sigprocmask(2)): across `execve` their handlers reset to the default action (SIGTERM would
//! kill, SIGCHLD be forgotten) but a blocked signal stays pending, and the mask is inherited,
//! so the new instance takes them once its own handlers are in place ([`unblock`]).
//! `execve` returns only on failure: then the mask and `FD_CLOEXEC` are put back and the old
//! process carries on with everything it had.
//!
//! Must not: close, move or otherwise change a descriptor; allocate between the point where
//! the mask is changed and `execve` beyond what was prepared.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};

use super::binary::Checked;
use super::guard::{self, READY_FD_ENV};
use super::{ERROR_ENV, EXE_FD_ENV, FD_ENV};

/// The signals vigil handles, held across the exec.
fn held() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGCHLD,
        Signal::SIGTERM,
        Signal::SIGINT,
        Signal::SIGHUP,
        Signal::SIGPWR,
        Signal::SIGUSR2,
    ] {
        set.add(s);
    }
    set
}

/// The upgrade's guardian holds the signals vigil handles, as the exec does: they are for the
/// vigil that takes over.
pub fn block_held() {
    if let Err(e) = sigprocmask(SigmaskHow::SIG_BLOCK, Some(&held()), None) {
        log::warn!("cannot block signals: {e}");
    }
}

/// The new instance's handlers are installed: take the signals that arrived during the exec.
pub fn unblock() {
    if let Err(e) = sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&held()), None) {
        log::warn!("cannot unblock signals after the upgrade: {e}");
    }
}

#[allow(unsafe_code)]
fn set_cloexec(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: `fd` is a descriptor the caller owns for the duration of this call (the handed
    // over ones are held by the shell's components); F_SETFD only changes its flag.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let flags = if on {
        FdFlag::FD_CLOEXEC
    } else {
        FdFlag::empty()
    };
    fcntl(fd, FcntlArg::F_SETFD(flags))
        .map(|_| ())
        .map_err(io::Error::from)
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::other("an argument or variable holds a NUL byte"))
}

/// Executes `binary` in this process from its checked descriptor (`fexecve(3)`: `execveat(2)`
/// with `AT_EMPTY_PATH`, so the file judged is the file run) with `argv` (argv[0] becomes its
/// path), handing over `state` (the handoff file), `exe` (this binary, to go back to) and
/// `fds`. With `guarded`, the upgrade's guardian ([`guard`]) is started first, holding the same
/// descriptors, and the new instance gets its pipe ([`READY_FD_ENV`]). Returns only on failure,
/// with everything as it was (the guardian killed).
pub fn exec(
    binary: &Checked,
    argv: &[String],
    state: &OwnedFd,
    exe: &OwnedFd,
    fds: &[RawFd],
    guarded: bool,
) -> io::Error {
    let path = match cstring(binary.path.as_os_str().as_bytes()) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let mut args = vec![path.clone()];
    for a in argv.iter().skip(1) {
        match cstring(a.as_bytes()) {
            Ok(c) => args.push(c),
            Err(e) => return e,
        }
    }
    // The VM suite's exec that fails (`VIGIL_FAULT_EXEC_FAIL_FILE`, fault injection only).
    args.extend(crate::runtime::fault::failing_exec_arg());
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k == FD_ENV || k == EXE_FD_ENV || k == ERROR_ENV || k == READY_FD_ENV {
            continue;
        }
        let mut kv = OsString::from(&k);
        kv.push("=");
        kv.push(&v);
        match cstring(kv.as_bytes()) {
            Ok(c) => env.push(c),
            Err(e) => return e,
        }
    }
    for (k, fd) in [(FD_ENV, state.as_raw_fd()), (EXE_FD_ENV, exe.as_raw_fd())] {
        match cstring(format!("{k}={fd}").as_bytes()) {
            Ok(c) => env.push(c),
            Err(e) => return e,
        }
    }
    let mut all: Vec<RawFd> = vec![state.as_raw_fd(), exe.as_raw_fd()];
    all.extend_from_slice(fds);
    let restore = |upto: usize| {
        for fd in &all[..upto] {
            let _ = set_cloexec(*fd, true);
        }
    };
    for (i, fd) in all.iter().enumerate() {
        if let Err(e) = set_cloexec(*fd, false) {
            restore(i);
            return io::Error::other(format!("clearing FD_CLOEXEC on fd {fd}: {e}"));
        }
    }
    // The guardian inherits what is inheritable now: the handed-over descriptors.
    let guard = if guarded {
        let g = guard::start(
            exe,
            state.as_raw_fd(),
            &std::env::args_os().collect::<Vec<_>>(),
        )
        .and_then(|g| {
            set_cloexec(g.ready.as_raw_fd(), false)?;
            let kv = cstring(format!("{READY_FD_ENV}={}", g.ready.as_raw_fd()).as_bytes())?;
            env.push(kv);
            Ok(g)
        });
        match g {
            Ok(g) => Some(g),
            Err(e) => {
                restore(all.len());
                return e;
            }
        }
    } else {
        None
    };
    let mut old = SigSet::empty();
    let err = match sigprocmask(SigmaskHow::SIG_BLOCK, Some(&held()), Some(&mut old)) {
        Err(e) => io::Error::other(format!("blocking signals: {e}")),
        Ok(()) => {
            let err = match nix::unistd::fexecve(&binary.fd, &args, &env) {
                Err(e) => io::Error::from(e),
                Ok(never) => match never {},
            };
            let _ = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
            err
        }
    };
    if let Some(g) = guard {
        // Our child, not reaped yet: the pid is its. The reaper collects it.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(g.pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    restore(all.len());
    err
}

/// The new instance marks every descriptor handed over close-on-exec as soon as it has read
/// the state (`on`), so that nothing it starts before taking them over (the output holder, a
/// container) inherits them; the way back to the old binary clears the mark again. Numbers
/// that are not open are skipped.
pub fn mark_handed(fds: &[RawFd], on: bool) {
    for &fd in fds {
        if fd > 2 {
            let _ = set_cloexec(fd, on);
        }
    }
}

/// The new instance cannot take over: go back to the old binary (`exe`, opened from
/// `/proc/self/exe` before the exec, so even a deleted or replaced file works) with the same
/// handoff and `why` in its environment, and the guardian's pipe (`ready`) when there is one.
/// Returns only on failure.
pub fn back_to_old(
    exe: &OwnedFd,
    state: RawFd,
    ready: Option<RawFd>,
    handed: &[RawFd],
    why: &str,
) -> io::Error {
    let (args, env) = match back_args_and_env(exe.as_raw_fd(), state, ready, why) {
        Ok(both) => both,
        Err(e) => return e,
    };
    for fd in [state, exe.as_raw_fd()].into_iter().chain(ready) {
        if let Err(e) = set_cloexec(fd, false) {
            return e;
        }
    }
    // Handed over again as they came (marked close-on-exec at the takeover's start); one
    // closed meanwhile is the old binary's to miss, as at any takeover.
    mark_handed(handed, false);
    match nix::unistd::fexecve(exe, &args, &env) {
        Err(e) => io::Error::from(e),
        Ok(never) => match never {},
    }
}

/// This process's arguments, and its environment with the handoff's variables for the way
/// back to the old binary (`exe`): the same `state`, the guardian's pipe `ready` if any, and
/// `why` the new instance could not take over.
pub fn back_args_and_env(
    exe: RawFd,
    state: RawFd,
    ready: Option<RawFd>,
    why: &str,
) -> io::Result<(Vec<CString>, Vec<CString>)> {
    let mut args = Vec::new();
    for a in std::env::args_os() {
        args.push(cstring(a.as_bytes())?);
    }
    let mut env = Vec::new();
    for (k, v) in std::env::vars_os() {
        if k == FD_ENV || k == EXE_FD_ENV || k == ERROR_ENV || k == READY_FD_ENV {
            continue;
        }
        let mut kv = OsString::from(&k);
        kv.push("=");
        kv.push(&v);
        if let Ok(c) = cstring(kv.as_bytes()) {
            env.push(c);
        }
    }
    let why: String = why.chars().filter(|c| *c != '\0').collect();
    let mut vars = vec![
        format!("{FD_ENV}={state}"),
        format!("{EXE_FD_ENV}={exe}"),
        format!("{ERROR_ENV}={why}"),
    ];
    vars.extend(ready.map(|fd| format!("{READY_FD_ENV}={fd}")));
    for kv in vars {
        env.push(cstring(kv.as_bytes())?);
    }
    Ok((args, env))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn cloexec(fd: RawFd) -> bool {
        #[allow(unsafe_code)]
        // SAFETY: the test owns `fd` for the whole call.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let flags = fcntl(fd, FcntlArg::F_GETFD).unwrap();
        FdFlag::from_bits_truncate(flags).contains(FdFlag::FD_CLOEXEC)
    }

    fn blocked() -> SigSet {
        let mut now = SigSet::empty();
        sigprocmask(SigmaskHow::SIG_BLOCK, None, Some(&mut now)).unwrap();
        now
    }

    #[test]
    fn a_failed_exec_leaves_every_descriptor_close_on_exec_and_the_signal_mask_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let not_elf = dir.path().join("not-elf");
        std::fs::write(&not_elf, "no interpreter line, no ELF header\n").unwrap();
        std::fs::set_permissions(&not_elf, std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = OwnedFd::from(tempfile::tempfile().unwrap());
        let exe = OwnedFd::from(std::fs::File::open("/proc/self/exe").unwrap());
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let mask = blocked();
        for (path, errno) in [
            (not_elf, libc::ENOEXEC),
            (dir.path().to_path_buf(), libc::EACCES),
        ] {
            let binary = Checked {
                fd: OwnedFd::from(std::fs::File::open(&path).unwrap()),
                path: path.clone(),
            };
            let e = exec(
                &binary,
                &["vigil".to_string(), "run".to_string()],
                &state,
                &exe,
                &[r.as_raw_fd(), w.as_raw_fd()],
                false,
            );
            assert_eq!(e.raw_os_error(), Some(errno), "{}: {e}", path.display());
            for fd in [
                state.as_raw_fd(),
                exe.as_raw_fd(),
                r.as_raw_fd(),
                w.as_raw_fd(),
            ] {
                assert!(
                    cloexec(fd),
                    "fd {fd} left inheritable after {}",
                    path.display()
                );
            }
            let after = blocked();
            for s in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGUSR2] {
                assert_eq!(after.contains(s), mask.contains(s), "{s:?}");
            }
        }
    }
}
