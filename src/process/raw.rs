//! The clone3(2) spawn path: the child is created directly inside its cgroup
//! (`CLONE_INTO_CGROUP`, Linux 5.7) instead of migrating itself there by writing `cgroup.procs`.
//!
//! Owns: the exec plan built in the parent (argv/envp pointer arrays, PATH candidates), the raw
//! child body (stdio → [`super::child::child_setup`] → execve) and the parent side (clone3, error-pipe
//! protocol, error mapping through [`super::spawn::classify_spawn_error`]).
//!
//! Why: a migration takes the kernel's `cgroup_threadgroup_rwsem` for writing, which on a
//! cgroup2 mount without `favordynmods` waits for an RCU grace period (~20 ms), and the parent
//! waits for the child's exec. A child born in the cgroup takes no write lock.
//!
//! Must not: allocate, lock, log, touch the environment or call glibc functions that rely on
//! thread state (`raise`, `abort`, `pthread_*`, the set*id wrappers) in the child. The child is a
//! raw clone: no atfork handlers ran, glibc's cached thread id is stale. A panic there would call
//! `abort`, so the child code uses no indexing or `unwrap` that could panic.
//!
//! Error pipe protocol (one O_CLOEXEC pipe, read to EOF by the parent):
//! - the child first writes [`ALIVE`]; EOF without it means the kernel killed the child before it
//!   ran (a cgroup killed earlier, see platform notes) — the caller falls back to `Command`;
//! - on failure it writes one step byte (0 = the exec itself) and the errno (4 bytes, native
//!   endian), then `_exit(127)`;
//! - EOF after just [`ALIVE`] means execve succeeded.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::OFlag;

use super::SpawnError;
use super::child::{ChildPlan, Step, child_setup};
use super::prepare::Prepared;
use super::spawn::{Stdio, classify_spawn_error};

/// `CLONE_INTO_CGROUP` (linux/sched.h). `libc::CLONE_INTO_CGROUP` is declared as a `c_int`
/// and evaluates to 0, so it is defined here.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// First byte the child writes: it runs.
const ALIVE: u8 = b'A';

/// `struct clone_args` up to `cgroup` (CLONE_ARGS_SIZE_VER2, linux/sched.h).
#[repr(C)]
#[derive(Debug, Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// The program to exec, resolved in the parent.
#[derive(Debug, Clone)]
pub(super) struct ExecTarget {
    /// Paths to try in order, as execvp(3) would: the program itself if it contains a `/`,
    /// else every `PATH` entry joined with it (absolute entries only where the file exists;
    /// relative entries are kept, they depend on the child's working directory). Empty: not
    /// found (the child reports ENOENT after its setup, like execvp).
    candidates: Vec<CString>,
    argv: Vec<CString>,
    env: Vec<CString>,
}

/// Builds the exec target of `argv` with the child environment `env` (whose `PATH` is used for
/// the search). Fails only on NUL bytes, which `prepare` has already excluded.
pub(super) fn exec_target(
    argv: &[String],
    env: &[(String, String)],
) -> Result<ExecTarget, SpawnError> {
    let nul = |what: &'static str, value: &str| SpawnError::NulByte {
        what,
        value: value.to_string(),
    };
    let cargv = argv
        .iter()
        .map(|a| CString::new(a.as_str()).map_err(|_| nul("argument", a)))
        .collect::<Result<Vec<_>, _>>()?;
    let cenv = env
        .iter()
        .map(|(k, v)| CString::new(format!("{k}={v}")).map_err(|_| nul("environment variable", k)))
        .collect::<Result<Vec<_>, _>>()?;
    let program = argv.first().map(String::as_str).unwrap_or_default();
    let mut candidates = Vec::new();
    if program.contains('/') {
        candidates.push(CString::new(program).map_err(|_| nul("argument", program))?);
    } else {
        // glibc's execvp default when PATH is unset; vigil always sets one.
        let path = env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or("/bin:/usr/bin");
        for dir in path.split(':') {
            let joined = if dir.is_empty() {
                Path::new(program).to_path_buf()
            } else {
                Path::new(dir).join(program)
            };
            if joined.is_absolute() && std::fs::symlink_metadata(&joined).is_err() {
                continue;
            }
            candidates.push(
                CString::new(joined.as_os_str().as_bytes()).map_err(|_| nul("argument", dir))?,
            );
        }
    }
    Ok(ExecTarget {
        candidates,
        argv: cargv,
        env: cenv,
    })
}

/// Why the raw path did not produce a child, for the caller's fallback decision.
pub(super) enum RawError {
    /// clone3 or CLONE_INTO_CGROUP is unusable on this system (ENOSYS, E2BIG, EINVAL, EBADF,
    /// EPERM): use the `Command` path from now on.
    Unsupported(Errno),
    /// The kernel killed the child before it ran (a cgroup that saw `cgroup.kill`, itself or
    /// an ancestor): use the `Command` path for this spawn.
    KilledAtBirth,
    /// A real spawn failure, already mapped like the `Command` path maps it.
    Failed(SpawnError),
}

/// Moves `fd` above the standard descriptors (F_DUPFD_CLOEXEC ≥ 3) so the child's dup2 onto
/// 0/1/2 can never clobber a source it still needs.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SpawnError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on an fd we own; the result is a new fd we then own.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(SpawnError::DupFd {
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: `new` is a fresh descriptor returned by fcntl above.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// The open /dev/null every child gets as stdin (and as stdout/stderr with [`Stdio::Null`]):
/// opened once, above the standard descriptors, `O_CLOEXEC`, and kept for vigil's lifetime, so
/// a spawn costs no open(2)/close(2) for it.
static DEV_NULL: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();

fn dev_null() -> Result<RawFd, SpawnError> {
    if let Some(fd) = DEV_NULL.get() {
        return Ok(fd.as_raw_fd());
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|source| SpawnError::OpenDevNull { source })?;
    let fd = above_stdio(OwnedFd::from(f))?;
    // Another thread (tests) may have won the race: then ours is dropped here.
    let _ = DEV_NULL.set(fd);
    Ok(DEV_NULL.get().map_or(-1, |fd| fd.as_raw_fd()))
}

/// `fd` as a raw descriptor above the standard ones: itself, or a CLOEXEC duplicate ≥ 3 kept
/// in `keep` until after the clone (see [`above_stdio`]).
fn raw_above_stdio(fd: &OwnedFd, keep: &mut Vec<OwnedFd>) -> Result<RawFd, SpawnError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd.as_raw_fd());
    }
    let dup = fd
        .try_clone()
        .map_err(|source| SpawnError::DupFd { source })?;
    let dup = above_stdio(dup)?;
    let raw = dup.as_raw_fd();
    keep.push(dup);
    Ok(raw)
}

/// A child cloned by [`start`] whose report (the error pipe) has not been read yet.
#[derive(Debug)]
pub(super) struct Started {
    pub(super) pid: u32,
    /// The read end of the error pipe (`O_CLOEXEC`, and `O_NONBLOCK` when asked for).
    pub(super) report: OwnedFd,
}

/// Spawns `p` with clone3 and waits for its report. `cgroup_dir`: an O_RDONLY|O_DIRECTORY fd
/// of a cgroup2 directory the child is born in (`None`: no cgroup flag; used by tests to run the
/// raw path anywhere). The production entries are [`super::spawn()`] and
/// [`super::spawn_pipelined`], which use [`start`] and [`conclude`] themselves.
#[cfg(test)]
pub(super) fn spawn(
    p: &Prepared,
    plan: ChildPlan,
    cgroup_dir: Option<RawFd>,
    stdio: Stdio,
) -> Result<u32, RawError> {
    let started = start(p, plan, cgroup_dir, &stdio, false)?;
    // The parent's copies of the child's output ends go now, so the reader sees EOF at exit.
    drop(stdio);
    let mut report = Report::default();
    while !report.read_from(&started.report) {}
    conclude(p, started.pid, report.bytes())
}

/// Clones the child of `p` and returns at once, without waiting for its exec: the caller
/// reads the report from [`Started::report`] (see [`Report`]) and then calls [`conclude`].
/// `stdio` is only borrowed; the caller drops its descriptors once this returns, so that the
/// child holds the only write ends of its output pipes.
pub(super) fn start(
    p: &Prepared,
    mut plan: ChildPlan,
    cgroup_dir: Option<RawFd>,
    stdio: &Stdio,
    nonblocking: bool,
) -> Result<Started, RawError> {
    let failed = RawError::Failed;
    let devnull = dev_null().map_err(failed)?;
    // Duplicates of fds ≤ 2 stay alive in `keep` until after clone3.
    let mut keep = Vec::new();
    let (out, err) = match stdio {
        Stdio::Combined(fd) => {
            let fd = raw_above_stdio(fd, &mut keep).map_err(failed)?;
            (fd, fd)
        }
        Stdio::Separate { stdout, stderr } => (
            raw_above_stdio(stdout, &mut keep).map_err(failed)?,
            raw_above_stdio(stderr, &mut keep).map_err(failed)?,
        ),
        Stdio::Null => (devnull, devnull),
    };
    let target = &p.exec;

    // Pointer arrays into the parent-owned CStrings; the child only reads them (its copy of
    // `sh_argv` slot 1 is written, which touches only the child's own copy-on-write page).
    let mut argv: Vec<*const libc::c_char> = Vec::with_capacity(target.argv.len() + 1);
    argv.extend(target.argv.iter().map(|a| a.as_ptr()));
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = Vec::with_capacity(target.env.len() + 1);
    envp.extend(target.env.iter().map(|e| e.as_ptr()));
    envp.push(std::ptr::null());
    let mut sh_argv: Vec<*const libc::c_char> = Vec::with_capacity(target.argv.len() + 2);
    sh_argv.extend([c"/bin/sh".as_ptr(), std::ptr::null()]);
    sh_argv.extend(target.argv.iter().skip(1).map(|a| a.as_ptr()));
    sh_argv.push(std::ptr::null());
    let candidates: Vec<*const libc::c_char> =
        target.candidates.iter().map(|c| c.as_ptr()).collect();

    let flags = if nonblocking {
        OFlag::O_CLOEXEC | OFlag::O_NONBLOCK
    } else {
        OFlag::O_CLOEXEC
    };
    let (err_r, err_w) =
        nix::unistd::pipe2(flags).map_err(|source| failed(SpawnError::Pipe { source }))?;
    // (The child's end is non-blocking too then: harmless, its report is at most a few bytes
    // into an empty pipe, which never fills.)
    plan.step_fd = err_w.as_raw_fd();
    plan.cgroup_procs = None;

    let child = RawChild {
        plan: &plan,
        err_fd: err_w.as_raw_fd(),
        stdin: devnull,
        stdout: out,
        stderr: err,
        candidates: &candidates,
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        sh_argv: sh_argv.as_mut_ptr(),
        sh_argv_len: sh_argv.len(),
    };

    let mut args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    if let Some(dir) = cgroup_dir {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = dir as u64;
    }

    // Block every signal around the clone so that none of vigil's handlers can run in the child
    // before `child_setup` resets dispositions and then the mask.
    // SAFETY: sigset_t is plain data initialised by sigfillset; pthread_sigmask only changes
    // this thread's mask and is restored right after the clone below.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: clone3 without CLONE_VM gives the child a copy-on-write copy of the address
    // space and continues on (its copy of) this stack, exactly like fork(2). In the child
    // (return 0) only `RawChild::run` executes, which never returns (execve or _exit) and is
    // async-signal-safe (see its doc).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if rc == 0 {
        child.run();
    }
    let clone_errno = Errno::last();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    drop(err_w);
    drop(keep);
    if rc < 0 {
        return Err(match clone_errno {
            Errno::ENOSYS | Errno::E2BIG | Errno::EINVAL | Errno::EBADF | Errno::EPERM => {
                RawError::Unsupported(clone_errno)
            }
            e => failed(classify_spawn_error(
                p,
                None,
                io::Error::from_raw_os_error(e as i32),
            )),
        });
    }
    Ok(Started {
        pid: rc as u32,
        report: err_r,
    })
}

/// The error pipe's report as read so far (at most [`Report::MAX`] bytes are meaningful).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Report {
    buf: [u8; 8],
    len: usize,
}

impl Report {
    /// Reads what `pipe` holds; true once it is complete (EOF, or a read error, which leaves
    /// it torn). False: nothing more yet (`EAGAIN` on a non-blocking pipe).
    pub(super) fn read_from(&mut self, pipe: &OwnedFd) -> bool {
        loop {
            let mut scratch = [0u8; 8];
            let (into, counted): (&mut [u8], bool) = match self.buf.get_mut(self.len..) {
                Some(rest) if !rest.is_empty() => (rest, true),
                // More than any report (so torn): read on to EOF, keep the first bytes.
                _ => (&mut scratch, false),
            };
            match nix::unistd::read(pipe, into) {
                Ok(0) => return true,
                Ok(n) if counted => self.len += n,
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(Errno::EAGAIN) => return false,
                Err(_) => return true,
            }
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&self.buf)
    }
}

/// The outcome of a complete `report` of child `pid`: its pid when it exec'd; else the child is
/// reaped here (it has exited or is about to, its report being complete) and the error
/// returned.
pub(super) fn conclude(p: &Prepared, pid: u32, report: &[u8]) -> Result<u32, RawError> {
    match report {
        [ALIVE] => Ok(pid),
        [ALIVE, step, e0, e1, e2, e3] => {
            reap_blocking(pid as i32);
            let errno = i32::from_ne_bytes([*e0, *e1, *e2, *e3]);
            let step = Step::from_byte(*step);
            Err(RawError::Failed(classify_spawn_error(
                p,
                step,
                io::Error::from_raw_os_error(errno),
            )))
        }
        _ => {
            // Killed before it ran its first instruction (or a torn report): reap it and let
            // the caller decide (the synchronous path uses `Command`).
            reap_blocking(pid as i32);
            Err(RawError::KilledAtBirth)
        }
    }
}

/// Waits for `pid`, which has exited or is about to (its report is complete).
fn reap_blocking(pid: i32) {
    loop {
        match nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None) {
            Err(Errno::EINTR) => continue,
            _ => return,
        }
    }
}

/// What the raw child reads; every pointer refers to memory the parent allocated before the
/// clone and keeps alive until after it.
struct RawChild<'a> {
    plan: &'a ChildPlan,
    err_fd: RawFd,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    candidates: &'a [*const libc::c_char],
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    sh_argv: *mut *const libc::c_char,
    sh_argv_len: usize,
}

impl RawChild<'_> {
    fn write_all(&self, bytes: &[u8]) {
        // SAFETY: write(2) of a live buffer; a short or failed write only loses the report.
        unsafe {
            libc::write(self.err_fd, bytes.as_ptr().cast(), bytes.len());
        }
    }

    /// Reports `errno` for `step` (0: the exec) and exits 127.
    fn die(&self, step: u8, errno: i32) -> ! {
        let e = errno.to_ne_bytes();
        self.write_all(&[step, e[0], e[1], e[2], e[3]]);
        // SAFETY: _exit(2) is async-signal-safe and does not run atexit handlers.
        unsafe { libc::_exit(127) }
    }

    /// The child: stdio, the shared setup, then execve over the candidates like execvp(3).
    /// Async-signal-safe: raw syscalls on parent-prepared data only; never returns.
    fn run(&self) -> ! {
        self.write_all(&[ALIVE]);
        for (src, dst) in [(self.stdin, 0), (self.stdout, 1), (self.stderr, 2)] {
            // SAFETY: dup2(2) on descriptors ≥ 3 kept open by the parent; clears CLOEXEC on dst.
            if unsafe { libc::dup2(src, dst) } < 0 {
                self.die(Step::Stdio as u8, Errno::last_raw());
            }
        }
        if let Err(e) = child_setup(self.plan) {
            // child_setup already wrote its step byte; complete the report with the errno.
            let errno = e.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes();
            self.write_all(&errno);
            // SAFETY: as in `die`.
            unsafe { libc::_exit(127) }
        }
        let mut saw_eacces = false;
        let mut last = libc::ENOENT;
        for &path in self.candidates {
            // SAFETY: NUL-terminated path and NULL-terminated pointer arrays built by the parent.
            unsafe { libc::execve(path, self.argv, self.envp) };
            let errno = Errno::last_raw();
            if errno == libc::ENOEXEC && self.sh_argv_len > 1 {
                // Like execvp(3): a file without a recognised format is run by /bin/sh.
                // SAFETY: slot 1 exists (len > 1) and belongs to the child's own copy.
                unsafe {
                    *self.sh_argv.add(1) = path;
                    libc::execve(c"/bin/sh".as_ptr(), self.sh_argv.cast_const(), self.envp);
                }
                last = Errno::last_raw();
                break;
            }
            match errno {
                libc::EACCES => saw_eacces = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                other => {
                    last = other;
                    break;
                }
            }
            last = errno;
        }
        if saw_eacces && (last == libc::ENOENT || last == libc::ENOTDIR) {
            last = libc::EACCES;
        }
        self.die(0, last)
    }
}
