//! The way back to the old binary for vigil as PID 1, kept by the new instance itself from the
//! start of its takeover until it is done (issue 43: a failed upgrade keeps a supervisor).
//!
//! Outside PID 1 the upgrade's guardian ([`super::guard`]) rescues a takeover that dies or
//! hangs, from a process of its own. As PID 1 there is no other process to do it: the end of
//! PID 1 is the kernel's panic (or its PID namespace's end), so the new instance must not end
//! at all before it is ready. So, as the first thing it does ([`arm`], before it reads the
//! state), it keeps:
//!
//! - the old binary's arguments and environment, built beforehand, one environment per way of
//!   failing, naming it (nothing is allocated once a fault has happened);
//! - a duplicate (close-on-exec, above the numbers in use) of the state file and of the old
//!   binary, and, once the state is read and before anything is done with them
//!   ([`Armed::keep`]), of every descriptor handed over — the socket, the pipes, the cgroup
//!   files, the pidfds, the connections — so that whatever the takeover did to a number (closed
//!   it, marked it close-on-exec, used it again) it can be put back with `dup2(2)`;
//! - handlers for the signals a failing program dies of (`SIGABRT` from `abort(3)`,
//!   `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE`, `SIGSYS`, `SIGTRAP`), on the alternate signal
//!   stack std keeps for a stack overflow; an `atexit(3)` handler for an exit (a `main` that
//!   returns, `std::process::exit`); `alarm(2)` at [`super::guard::TAKEOVER_TIMEOUT`] for a
//!   hang; and, from the PID-1 panic hook ([`on_panic`]), a panic — before it unwinds, so that
//!   no component's clean-up (the socket file's removal) runs.
//!
//! Each of those puts every kept number back, blocks the signals vigil handles (as the upgrade's
//! exec does) and executes the old binary from its descriptor (`fexecve(3)`) with the same state
//! and the reason in [`super::ERROR_ENV`]: the process stays PID 1, the containers stay its
//! children, and the old binary takes the state over as when a new binary goes back by itself
//! (docs/behaviour.md §12). In a handler only async-signal-safe calls are made (`getpid`,
//! `alarm`, `dup2`, `sigprocmask`, `fexecve`; signal-safety(7)) and atomics are read; a forked
//! child, which inherits handlers and `atexit` until it executes, never goes back (its pid is
//! not the one armed). Once the takeover is done ([`Armed::disarm`], also on drop) the handlers
//! are put back as they were, the alarm cancelled and the duplicates closed.
//!
//! What it cannot catch: `SIGKILL` and a failed `execve(2)` past its point of no return (the
//! kernel kills the process), a death before `main` (the dynamic loader, a binary that is not
//! this vigil — the pre-flight `--handoff-check` runs the same file first), a hang with
//! `SIGALRM` blocked.
//!
//! Must not: allocate, lock or log in a handler; fire in any process but the one armed; or fire
//! after the takeover is done.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use super::guard::TAKEOVER_TIMEOUT;

/// The signals a failing takeover dies of, each with its name for the reason.
const FATAL: [(libc::c_int, &str); 7] = [
    (libc::SIGABRT, "SIGABRT"),
    (libc::SIGSEGV, "SIGSEGV"),
    (libc::SIGBUS, "SIGBUS"),
    (libc::SIGILL, "SIGILL"),
    (libc::SIGFPE, "SIGFPE"),
    (libc::SIGSYS, "SIGSYS"),
    (libc::SIGTRAP, "SIGTRAP"),
];

/// How the takeover failed: an index into [`Prepared::envs`] (after the [`FATAL`] signals).
const EXITED: usize = FATAL.len();
const HUNG: usize = FATAL.len() + 1;
const PANICKED: usize = FATAL.len() + 2;

/// The reason the old binary reports for each way of failing, by index.
fn reasons() -> Vec<String> {
    FATAL
        .iter()
        .map(|(n, name)| {
            format!(
                "the new vigil was killed by signal {n} ({name}) during its takeover, before it was ready"
            )
        })
        .chain([
            "the new vigil exited during its takeover, before it was ready".to_string(),
            format!(
                "the new vigil was not ready {} s after the exec",
                TAKEOVER_TIMEOUT.as_secs()
            ),
            "the new vigil panicked during its takeover, before it was ready".to_string(),
        ])
        .collect()
}

/// The exec of the way back, built before it is armed; read by the handlers through
/// [`PREPARED`], never changed or freed while armed.
struct Prepared {
    exe: RawFd,
    /// Kept alive for the pointer arrays.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    /// One environment per way of failing ([`FATAL`], then [`EXITED`], [`HUNG`], [`PANICKED`]).
    envs: Vec<Vec<*const libc::c_char>>,
    held: libc::sigset_t,
}

/// (duplicate, the number handed over): replaced whole ([`Armed::keep`]), never changed in place.
type Pairs = Vec<(RawFd, RawFd)>;

static PREPARED: AtomicPtr<Prepared> = AtomicPtr::new(std::ptr::null_mut());
static PAIRS: AtomicPtr<Pairs> = AtomicPtr::new(std::ptr::null_mut());
static ARMED: AtomicBool = AtomicBool::new(false);
/// The process that armed it: a forked child inherits the handlers, never the way back.
static ARMED_PID: AtomicI32 = AtomicI32::new(0);
/// `atexit(3)` handlers cannot be removed: registered once per process, it does nothing
/// unless armed.
static AT_EXIT: std::sync::Once = std::sync::Once::new();

/// The armed way back (see the module docs); [`Armed::disarm`] once the takeover is done.
pub struct Armed {
    shadows: Vec<OwnedFd>,
    old_actions: Vec<(libc::c_int, libc::sigaction)>,
    done: bool,
}

/// Arms the way back to the old binary `exe` with the handoff `state`. `None` (logged) when
/// it cannot be armed; the takeover goes on without it.
pub fn arm(exe: &OwnedFd, state: &OwnedFd) -> Option<Armed> {
    match try_arm(exe, state) {
        Ok(a) => Some(a),
        Err(e) => {
            log::warn!(
                "upgrade: cannot keep the way back to the previous binary as PID 1 (a takeover that dies or hangs ends the system): {e}"
            );
            None
        }
    }
}

/// Close-on-exec duplicates of `numbers` (> 2, open), at or above `above`, with their pairs.
fn shadow(numbers: &[RawFd], above: RawFd) -> (Vec<OwnedFd>, Pairs) {
    let mut shadows = Vec::with_capacity(numbers.len());
    let mut pairs = Vec::with_capacity(numbers.len());
    let mut missed = 0usize;
    for &fd in numbers.iter().filter(|fd| **fd > 2) {
        // SAFETY: F_DUPFD_CLOEXEC on a number only duplicates it (EBADF if it is not open: a
        // descriptor the old instance could not hand over is skipped).
        let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above) };
        if dup < 0 {
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EBADF) {
                missed += 1;
            }
            continue;
        }
        // SAFETY: `dup` was just made by this process and nothing else owns it.
        shadows.push(unsafe { OwnedFd::from_raw_fd(dup) });
        pairs.push((dup, fd));
    }
    if missed > 0 {
        log::warn!(
            "upgrade: {missed} handed-over descriptors could not be duplicated for the way back (descriptor limit?): should the takeover fail, the previous binary misses those it closed"
        );
    }
    (shadows, pairs)
}

fn try_arm(exe: &OwnedFd, state: &OwnedFd) -> std::io::Result<Armed> {
    let mut strings = Vec::new();
    let mut argv_at = Vec::new();
    let mut env_at = Vec::new();
    for (i, why) in reasons().iter().enumerate() {
        let (args, env) =
            super::exec::back_args_and_env(exe.as_raw_fd(), state.as_raw_fd(), None, why)?;
        if i == 0 {
            argv_at = (strings.len()..strings.len() + args.len()).collect();
            strings.extend(args);
        }
        env_at.push((strings.len()..strings.len() + env.len()).collect::<Vec<usize>>());
        strings.extend(env);
    }
    let ptrs = |at: &[usize]| -> Vec<*const libc::c_char> {
        at.iter()
            .filter_map(|i| strings.get(*i))
            .map(|s| s.as_ptr())
            .chain([std::ptr::null()])
            .collect()
    };
    let argv = ptrs(&argv_at);
    let envs: Vec<_> = env_at.iter().map(|at| ptrs(at)).collect();
    // SAFETY: sigemptyset/sigaddset only write the set they are given.
    let held = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [
            libc::SIGCHLD,
            libc::SIGTERM,
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGPWR,
            libc::SIGUSR2,
        ] {
            libc::sigaddset(&mut set, s);
        }
        set
    };
    let numbers = [exe.as_raw_fd(), state.as_raw_fd()];
    let (shadows, pairs) = shadow(&numbers, numbers.iter().copied().max().unwrap_or(2) + 1);
    let prepared = Box::into_raw(Box::new(Prepared {
        exe: exe.as_raw_fd(),
        _strings: strings,
        argv,
        envs,
        held,
    }));
    PAIRS.store(Box::into_raw(Box::new(pairs)), Ordering::SeqCst);
    PREPARED.store(prepared, Ordering::SeqCst);
    // SAFETY: getpid(2) cannot fail.
    ARMED_PID.store(unsafe { libc::getpid() }, Ordering::SeqCst);
    ARMED.store(true, Ordering::SeqCst);
    AT_EXIT.call_once(|| {
        // SAFETY: registers a function of this program that only reads the prepared state.
        if unsafe { libc::atexit(on_exit) } != 0 {
            log::warn!("upgrade: atexit failed: an exit during the takeover is not caught");
        }
    });
    let mut armed = Armed {
        shadows,
        old_actions: Vec::new(),
        done: false,
    };
    for (sig, _) in FATAL.iter().copied().chain([(libc::SIGALRM, "SIGALRM")]) {
        // SAFETY: installs `on_signal`, which is async-signal-safe (module docs); the old
        // action is kept to be put back. SA_NODEFER: the signal is not left blocked in the old
        // binary (the mask survives the exec); SA_RESETHAND: should the way back fail, the
        // signal's default action follows; SA_ONSTACK: a stack overflow's SIGSEGV runs on
        // std's alternate stack.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            act.sa_flags = libc::SA_NODEFER | libc::SA_RESETHAND | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &act, &mut old) == 0 {
                armed.old_actions.push((sig, old));
            }
        }
    }
    // SAFETY: alarm(2) only sets this process's timer.
    unsafe {
        libc::alarm(TAKEOVER_TIMEOUT.as_secs() as libc::c_uint);
    }
    Ok(armed)
}

impl Armed {
    /// The state is read: keeps a duplicate of every descriptor it hands over (`handed`),
    /// before anything is done with them.
    pub fn keep(&mut self, handed: &[RawFd]) {
        let highest = self.shadows.iter().map(AsRawFd::as_raw_fd);
        let above = handed.iter().copied().chain(highest).max().unwrap_or(2) + 1;
        let mut numbers = handed.to_vec();
        numbers.sort_unstable();
        numbers.dedup();
        let (shadows, mut pairs) = shadow(&numbers, above);
        // SAFETY: PAIRS was set by `try_arm` and is replaced only here, on this thread.
        if let Some(before) = unsafe { PAIRS.load(Ordering::SeqCst).as_ref() } {
            pairs.extend(before.iter().copied());
        }
        let old = PAIRS.swap(Box::into_raw(Box::new(pairs)), Ordering::SeqCst);
        if !old.is_null() {
            // SAFETY: made by Box::into_raw; a handler that read it ran on this thread and
            // never returns (it executes), so nothing reads it any more.
            drop(unsafe { Box::from_raw(old) });
        }
        self.shadows.extend(shadows);
        log::debug!(
            "upgrade: as PID 1 the way back to the previous binary is kept until the takeover is done ({} descriptors)",
            self.shadows.len()
        );
    }

    /// Puts every kept number back as it was handed over and cancels the alarm (for the way
    /// back the new instance takes by itself, with a reason of its own; should that fail, an
    /// exit still goes back from here).
    pub fn restore(&self) {
        restore_numbers();
        // SAFETY: alarm(2) only sets this process's timer.
        unsafe {
            libc::alarm(0);
        }
    }

    /// The takeover is done: the handlers are put back as they were, the alarm cancelled, and
    /// the duplicates closed.
    pub fn disarm(mut self) {
        self.give_up();
    }

    fn give_up(&mut self) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        ARMED.store(false, Ordering::SeqCst);
        // SAFETY: alarm(0) cancels the timer; sigaction puts back the actions saved at arming.
        unsafe {
            libc::alarm(0);
            for (sig, old) in &self.old_actions {
                libc::sigaction(*sig, old, std::ptr::null_mut());
            }
        }
        let prepared = PREPARED.swap(std::ptr::null_mut(), Ordering::SeqCst);
        let pairs = PAIRS.swap(std::ptr::null_mut(), Ordering::SeqCst);
        // SAFETY: both made by Box::into_raw; no handler reads them any more (not armed,
        // handlers put back, the pointers cleared).
        unsafe {
            if !prepared.is_null() {
                drop(Box::from_raw(prepared));
            }
            if !pairs.is_null() {
                drop(Box::from_raw(pairs));
            }
        }
        self.shadows.clear();
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.give_up();
    }
}

fn restore_numbers() {
    // SAFETY: PAIRS is null or a live Pairs (module docs).
    let Some(pairs) = (unsafe { PAIRS.load(Ordering::SeqCst).as_ref() }) else {
        return;
    };
    for &(dup, fd) in pairs {
        // SAFETY: dup2(2) is async-signal-safe; it makes `fd` the handed-over file again
        // (close-on-exec cleared), closing whatever the number held meanwhile.
        unsafe {
            libc::dup2(dup, fd);
        }
    }
}

/// The way back: every number back, the held signals blocked, and the old binary executed.
/// Returns only when not armed in this process, or when the exec fails (then the process dies
/// or goes on as it would have). Async-signal-safe.
fn go_back(way: usize) {
    // SAFETY: getpid(2) is async-signal-safe and cannot fail.
    if unsafe { libc::getpid() } != ARMED_PID.load(Ordering::SeqCst) {
        return;
    }
    if !ARMED.swap(false, Ordering::SeqCst) {
        return;
    }
    // SAFETY: set before arming and freed only after disarming (not armed any more then).
    let Some(p) = (unsafe { PREPARED.load(Ordering::SeqCst).as_ref() }) else {
        return;
    };
    let Some(env) = p.envs.get(way) else {
        return;
    };
    // SAFETY: alarm, dup2, sigprocmask and fexecve are async-signal-safe (signal-safety(7));
    // the argument and environment arrays are null-terminated arrays of live C strings.
    unsafe {
        libc::alarm(0);
        restore_numbers();
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigprocmask(libc::SIG_BLOCK, &p.held, &mut mask);
        libc::fexecve(p.exe, p.argv.as_ptr(), env.as_ptr());
        libc::sigprocmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
    }
}

/// From the PID-1 panic hook, before the panic unwinds: goes back when armed (the panic is
/// logged first by the hook).
pub fn on_panic() {
    if ARMED.load(Ordering::SeqCst) {
        log::error!(
            "upgrade: the new vigil panicked during its takeover: going back to the previous binary"
        );
        crate::runtime::stderr_log::flush();
        go_back(PANICKED);
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    let way = if sig == libc::SIGALRM {
        HUNG
    } else {
        FATAL.iter().position(|(s, _)| *s == sig).unwrap_or(0)
    };
    go_back(way);
}

extern "C" fn on_exit() {
    go_back(EXITED);
}

#[cfg(test)]
mod tests {
    //! Each way of failing runs in a re-executed copy of this test binary (only this test),
    //! armed as the new instance would be; the "old binary" is a shell script, executed from
    //! its descriptor, that writes down the reason and which numbers it got.
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    const WAY_ENV: &str = "VIGIL_TEST_FALLBACK_WAY";
    const SCRIPT_ENV: &str = "VIGIL_TEST_FALLBACK_SCRIPT";
    const NAME: &str = "runtime::handoff::fallback::tests::a_takeover_that_dies_executes_the_old_binary_with_every_number_back_and_says_why";

    /// The armed child: a "takeover" that closes a handed-over pipe, then fails as `way` says.
    fn child(way: &str, script: &str) {
        let exe = OwnedFd::from(std::fs::File::open(script).unwrap());
        let state = OwnedFd::from(tempfile::tempfile().unwrap());
        let (r, w) = nix::unistd::pipe().unwrap();
        let handed = [r.as_raw_fd(), w.as_raw_fd()];
        let mut armed = arm(&exe, &state).unwrap();
        armed.keep(&handed);
        println!("HANDED {} {}", handed[0], handed[1]);
        drop(r);
        drop(w);
        match way {
            "abort" => std::process::abort(),
            "exit" => std::process::exit(3),
            "segv" => {
                // SAFETY: raising a signal in this process (the test child).
                unsafe { libc::raise(libc::SIGSEGV) };
            }
            "alarm" => {
                // SAFETY: as above; SIGALRM is what alarm(2) sends after the timeout.
                unsafe { libc::raise(libc::SIGALRM) };
                std::thread::sleep(std::time::Duration::from_secs(5));
            }
            "fork-then-done" => {
                // SAFETY: the child only calls exit(3) (its atexit handler must not go back).
                let pid = unsafe { libc::fork() };
                match pid {
                    0 => {
                        // SAFETY: as above.
                        unsafe { libc::exit(0) }
                    }
                    pid => {
                        let mut status = 0;
                        // SAFETY: waits for the child just forked.
                        unsafe { libc::waitpid(pid, &mut status, 0) };
                        println!("FORKED-CHILD-EXITED {}", libc::WEXITSTATUS(status));
                    }
                }
                armed.disarm();
                std::process::exit(0);
            }
            _ => unreachable!("{way}"),
        }
        unreachable!("the way back did not execute the old binary");
    }

    #[test]
    fn a_takeover_that_dies_executes_the_old_binary_with_every_number_back_and_says_why() {
        if let (Ok(way), Ok(script)) = (std::env::var(WAY_ENV), std::env::var(SCRIPT_ENV)) {
            child(&way, &script);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("old-vigil");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n\
                 echo \"OLD-BINARY: ${ERROR_ENV}\"\n\
                 echo \"STATE ${FD_ENV} EXE ${EXE_FD_ENV}\"\n\
                 for fd in /proc/$$/fd/*; do echo \"OPEN ${{fd##*/}}\"; done\n\
                 exit 0\n",
                ERROR_ENV = super::super::ERROR_ENV,
                FD_ENV = super::super::FD_ENV,
                EXE_FD_ENV = super::super::EXE_FD_ENV,
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let run = |way: &str| {
            let out = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--nocapture", "--test-threads=1"])
                .env(WAY_ENV, way)
                .env(SCRIPT_ENV, &script)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            (out.status, text)
        };
        for (way, why) in [
            (
                "abort",
                "was killed by signal 6 (SIGABRT) during its takeover",
            ),
            ("exit", "exited during its takeover"),
            (
                "segv",
                "was killed by signal 11 (SIGSEGV) during its takeover",
            ),
            ("alarm", "was not ready 10 s after the exec"),
        ] {
            let (status, text) = run(way);
            assert!(status.success(), "{way}: {status}\n{text}");
            assert!(
                text.contains(&format!("OLD-BINARY: the new vigil {why}")),
                "{way}\n{text}"
            );
            let numbers = |prefix: &str| -> Vec<String> {
                text.lines()
                    .find_map(|l| l.split_once(prefix).map(|(_, rest)| rest))
                    .unwrap_or_else(|| panic!("{way}: no {prefix:?}\n{text}"))
                    .split(' ')
                    .filter(|w| w.parse::<u32>().is_ok())
                    .map(str::to_string)
                    .collect()
            };
            // The state, the old binary, and both pipe ends the takeover had closed.
            let mut expected = numbers("HANDED ");
            expected.extend(numbers("STATE "));
            assert_eq!(expected.len(), 4, "{way}\n{text}");
            for fd in expected {
                assert!(
                    text.contains(&format!("OPEN {fd}\n")),
                    "{way}: {fd}\n{text}"
                );
            }
        }
        // A forked child inherits the atexit handler but never goes back; once disarmed,
        // the exit is an exit.
        let (status, text) = run("fork-then-done");
        assert!(status.success(), "{status}\n{text}");
        assert!(text.contains("FORKED-CHILD-EXITED 0"), "{text}");
        assert!(!text.contains("OLD-BINARY"), "{text}");
    }
}
