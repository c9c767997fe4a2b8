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
use super::child::{ChildPlan, Step, child_setup, sys};
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
    /// The child adds `WATCHDOG_PID=<its own pid>` to `env` (sd_watchdog_enabled(3)): only it
    /// knows the number before its exec. See [`PID_VAR`].
    pub(super) pid_var: bool,
}

/// The variable a child with [`ExecTarget::pid_var`] fills in with its pid.
const PID_VAR: &[u8] = b"WATCHDOG_PID=";
/// Its buffer: the name, up to 20 digits, the NUL.
const PID_VAR_LEN: usize = PID_VAR.len() + 21;

impl ExecTarget {
    /// The paths execve will be tried on, in order.
    pub(super) fn candidates(&self) -> impl Iterator<Item = &Path> {
        self.candidates
            .iter()
            .map(|c| Path::new(std::ffi::OsStr::from_bytes(c.as_bytes())))
    }
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
        pid_var: false,
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
    /// What a `CLONE_VM` child reads until it execs or exits; see [`Hold`].
    pub(super) hold: Hold,
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
    let mut started = start(p, plan, cgroup_dir, &stdio, false)?;
    // The parent's copies of the child's output ends go now, so the reader sees EOF at exit.
    drop(stdio);
    let mut report = Report::default();
    while !report.read_from(&started.report) {}
    let outcome = conclude(p, started.pid, report.bytes());
    started.hold.settled(&report, outcome.is_err());
    outcome
}

/// Clones the child of `p` and returns at once, without waiting for its exec: the caller
/// reads the report from [`Started::report`] (see [`Report`]), calls [`conclude`], and tells
/// [`Started::hold`] the outcome ([`Hold::settled`]). `stdio` is only borrowed; the caller drops
/// its descriptors once this returns, so that the child holds the only write ends of its output
/// pipes.
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
    let mut stdin = devnull;
    let (out, err) = match stdio {
        Stdio::Combined(fd) => {
            let fd = raw_above_stdio(fd, &mut keep).map_err(failed)?;
            (fd, fd)
        }
        Stdio::CombinedWithInput { output, input } => {
            stdin = raw_above_stdio(input, &mut keep).map_err(failed)?;
            let fd = raw_above_stdio(output, &mut keep).map_err(failed)?;
            (fd, fd)
        }
        Stdio::Separate { stdout, stderr } => (
            raw_above_stdio(stdout, &mut keep).map_err(failed)?,
            raw_above_stdio(stderr, &mut keep).map_err(failed)?,
        ),
        Stdio::Null => (devnull, devnull),
    };

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
    // The child inherits vigil's oom_score_adj; it resets a nonzero one, and then must not
    // share vigil's memory (see `own_oom_score_adj`).
    plan.reset_oom = own_oom_score_adj().is_some_and(|v| v != 0);
    let may_share_memory = !plan.reset_oom && crate::tricks::on(crate::tricks::Trick::CloneVm);
    let changes_creds = plan.creds.is_some() || plan.capset.is_some();
    let fds = ChildFds {
        err: err_w.as_raw_fd(),
        stdin,
        stdout: out,
        stderr: err,
    };

    let mut args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    if let Some(dir) = cgroup_dir {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = dir as u64;
    }

    // The child's data: on the heap in a `Hold` for a `CLONE_VM` child (it reads it while this
    // function has long returned), in this frame for a fork-like one (its own copy).
    let mut hold = Hold::new(p.exec.clone(), plan, fds);

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
    let vm = if may_share_memory {
        hold.vm_child(changes_creds)
    } else {
        None
    };
    let rc = match vm {
        Some((child, stack)) => {
            args.flags |= libc::CLONE_VM as u64;
            args.stack = stack.base as u64;
            args.stack_size = stack.len as u64;
            // SAFETY: see `clone3_vm`: `child` and everything it points to live on the heap in
            // `hold`, which is kept (or leaked) until the child no longer uses vigil's memory;
            // `stack` is this child's alone.
            unsafe { clone3_vm(&mut args, child) }
        }
        None => {
            let child = hold.fork_child();
            // SAFETY: clone3 without CLONE_VM gives the child a copy-on-write copy of the
            // address space and continues on (its copy of) this stack, exactly like fork(2). In
            // the child (return 0) only `RawChild::run` executes, which never returns (execve or
            // exit) and is async-signal-safe (see its doc).
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
            rc
        }
    };
    let clone_errno = Errno::last();
    // SAFETY: restores the mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
    drop(err_w);
    drop(keep);
    if rc < 0 {
        // No child: nothing uses the hold.
        hold.no_child();
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
        hold,
    })
}

/// vigil's own `oom_score_adj` now (`None` if /proc cannot tell), read through a descriptor
/// kept open for it (one pread(2) a spawn).
///
/// A child has to reset a nonzero value, and a child that shares vigil's memory must not: the
/// kernel gives the value written to every process sharing the writer's memory
/// (fs/proc/base.c, `__set_oom_adj`: once an mm has been shared with a process outside
/// the thread group, `MMF_MULTIPROCESS`, the write walks every process on the system and sets
/// each one that shares that mm, except vfork children and the global init). A `CLONE_VM`
/// child resetting its value would reset vigil's protection too. So a nonzero value means a
/// fork-like clone; a value of 0 means nothing to reset (the child inherits 0 at clone).
/// If /proc is missing the child's write would fail as well: nothing to reset.
pub(super) fn own_oom_score_adj() -> Option<i32> {
    use std::os::unix::fs::FileExt;
    static OWN: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();
    let file = match OWN.get() {
        Some(f) => f,
        // Not kept before it opens (vigil as PID 1 mounts /proc itself).
        None => {
            let f = std::fs::File::open("/proc/self/oom_score_adj").ok()?;
            OWN.get_or_init(|| f)
        }
    };
    let mut buf = [0u8; 16];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(buf.get(..n)?).ok()?.trim().parse().ok()
}

/// The descriptors the child puts in place: its report pipe and its stdio sources (all ≥ 3).
#[derive(Debug, Clone, Copy)]
struct ChildFds {
    err: RawFd,
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
}

/// What a child reads between clone and exec, built by the parent: the plan, the program
/// (strings and the pointer arrays into them) and the descriptors.
struct ChildData {
    exec: ExecTarget,
    plan: ChildPlan,
    fds: ChildFds,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    /// `/bin/sh`, a slot the child fills with the path (ENOEXEC fallback), then argv[1..].
    sh_argv: Vec<*const libc::c_char>,
    candidates: Vec<*const libc::c_char>,
    /// `WATCHDOG_PID=` and room for the pid the child writes (empty without `pid_var`).
    pid_var: Vec<u8>,
    /// The child's view of the above, pointing into this struct's heap buffers.
    child: Option<RawChild>,
}

impl ChildData {
    /// Fills the pointer arrays and `child`; the `CString` and `Vec` heap buffers they point
    /// into do not move when the struct does.
    fn link(&mut self) -> &RawChild {
        let t = &self.exec;
        self.argv = t.argv.iter().map(|a| a.as_ptr()).collect();
        self.argv.push(std::ptr::null());
        self.envp = t.env.iter().map(|e| e.as_ptr()).collect();
        if t.pid_var {
            self.pid_var = PID_VAR.to_vec();
            self.pid_var.resize(PID_VAR_LEN, 0);
            self.envp.push(self.pid_var.as_ptr().cast());
        }
        self.envp.push(std::ptr::null());
        self.sh_argv = Vec::with_capacity(t.argv.len() + 2);
        self.sh_argv.extend([c"/bin/sh".as_ptr(), std::ptr::null()]);
        self.sh_argv
            .extend(t.argv.iter().skip(1).map(|a| a.as_ptr()));
        self.sh_argv.push(std::ptr::null());
        self.candidates = t.candidates.iter().map(|c| c.as_ptr()).collect();
        self.child.insert(RawChild {
            plan: &self.plan,
            fds: self.fds,
            candidates: self.candidates.as_ptr(),
            candidates_len: self.candidates.len(),
            argv: self.argv.as_ptr(),
            envp: self.envp.as_ptr(),
            sh_argv: self.sh_argv.as_mut_ptr(),
            sh_argv_len: self.sh_argv.len(),
            pid_var: if self.pid_var.is_empty() {
                std::ptr::null_mut()
            } else {
                self.pid_var.as_mut_ptr()
            },
        })
    }
}

/// The memory a `CLONE_VM` child uses — its [`ChildData`] and its stack — from the clone until
/// it no longer uses vigil's memory: when it execs, `begin_new_exec` switches it to the new
/// program's mm (`exec_mmap`) before it closes the close-on-exec descriptors
/// (`do_close_on_exec`), and when it exits, `do_exit` releases the mm (`exit_mm`) before the
/// descriptors (`exit_files`). So EOF on its report pipe (whose only write end it holds,
/// close-on-exec) means it is done with it — as does having reaped it.
///
/// [`Hold::settled`] is told which; a hold dropped before that (a pending start forgotten or
/// abandoned) leaks its memory rather than free or reuse what a child may still read or run on.
/// For a fork-like child the data is its own copy: nothing to hold.
pub(super) struct Hold {
    data: Option<Box<ChildData>>,
    stack: Option<ChildStack>,
    /// The child no longer uses the memory (or there is no child).
    done: bool,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("vm", &self.stack.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl Hold {
    fn new(exec: ExecTarget, plan: ChildPlan, fds: ChildFds) -> Hold {
        Hold {
            data: Some(Box::new(ChildData {
                exec,
                plan,
                fds,
                argv: Vec::new(),
                envp: Vec::new(),
                sh_argv: Vec::new(),
                candidates: Vec::new(),
                pid_var: Vec::new(),
                child: None,
            })),
            stack: None,
            done: false,
        }
    }

    /// The child and a stack for a `CLONE_VM` clone, counted in flight; `None` where that
    /// clone is not used (another architecture, or no stack could be mapped).
    fn vm_child(&mut self, changes_creds: bool) -> Option<(*const RawChild, ChildStack)> {
        if !cfg!(target_arch = "x86_64") {
            return None;
        }
        let stack = vm_state().take_stack(changes_creds)?;
        self.stack = Some(stack);
        let child = self.data.as_mut()?.link() as *const RawChild;
        Some((child, stack))
    }

    /// The child for a fork-like clone (it reads its own copy of this memory).
    fn fork_child(&mut self) -> RawChild {
        self.done = true;
        match self.data.as_mut() {
            Some(d) => d.link().clone(),
            None => unreachable!("a hold has its data until it is dropped"),
        }
    }

    /// clone3 failed: no child reads anything.
    fn no_child(&mut self) {
        self.done = true;
    }

    /// The child's report was read as far as it goes and `conclude` gave its outcome: the
    /// memory is free again if the report reached EOF or the child was reaped (a failed
    /// outcome always reaps).
    pub(super) fn settled(&mut self, report: &Report, reaped: bool) {
        if report.eof || reaped {
            self.done = true;
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        let Some(stack) = self.stack.take() else {
            return;
        };
        if self.done {
            vm_state().give_back(stack);
        } else {
            // A child may still be running on this stack and reading this data: never free it.
            log::debug!("a pending start was dropped before its child execed: its stack is kept");
            std::mem::forget(self.data.take());
            vm_state().leaked();
        }
    }
}

/// A stack a `CLONE_VM` child runs on: [`ChildStack::SIZE`] bytes above one `PROT_NONE` guard
/// page, so an overflow faults instead of writing into other memory. The child uses a few KiB
/// of it (`child_setup` and the exec loop; no allocation, no recursion). Addresses as integers:
/// the mapping is owned by [`VmState`], which unmaps it.
#[derive(Debug, Clone, Copy)]
struct ChildStack {
    /// The start of the mapping (the guard page).
    map: usize,
    /// The lowest usable address (just above the guard page).
    base: usize,
    len: usize,
}

impl ChildStack {
    const SIZE: usize = 64 * 1024;

    fn map() -> Option<ChildStack> {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .unwrap_or(4096)
            .max(4096);
        let len = Self::SIZE + page;
        // SAFETY: a fresh private anonymous mapping with no access; nothing else refers to it.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return None;
        }
        let stack = ChildStack {
            map: addr as usize,
            base: addr as usize + page,
            len: Self::SIZE,
        };
        // SAFETY: everything above the lowest page of the mapping made above becomes usable.
        let rc = unsafe {
            libc::mprotect(
                stack.base as *mut libc::c_void,
                Self::SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            stack.unmap();
            return None;
        }
        Some(stack)
    }

    fn unmap(self) {
        // SAFETY: unmaps exactly a region mapped in `map`, which no child uses any more (its
        // hold was settled, or it was never used).
        unsafe {
            libc::munmap(
                self.map as *mut libc::c_void,
                self.len + (self.base - self.map),
            );
        }
    }
}

/// The `CLONE_VM` children of this process: free stacks, how many children may still use
/// vigil's memory, and vigil's dumpable flag (see [`VmState::give_back`]). Process-wide, since
/// the memory and the flag are.
struct VmState {
    free: Vec<ChildStack>,
    in_flight: usize,
    /// Holds dropped before their child was done (never given back).
    leaked: usize,
    /// vigil's `PR_GET_DUMPABLE` before its first `CLONE_VM` child that changes credentials.
    dumpable: Option<libc::c_int>,
    /// Such a child was cloned since the flag was last restored.
    creds_changed: bool,
}

/// Free stacks kept once no child is in flight (RSS: each holds the pages its child touched).
const KEEP_FREE_STACKS: usize = 4;

static VM_STATE: std::sync::Mutex<VmState> = std::sync::Mutex::new(VmState {
    free: Vec::new(),
    in_flight: 0,
    leaked: 0,
    dumpable: None,
    creds_changed: false,
});

fn vm_state() -> std::sync::MutexGuard<'static, VmState> {
    VM_STATE.lock().unwrap_or_else(|e| e.into_inner())
}

impl VmState {
    fn take_stack(&mut self, changes_creds: bool) -> Option<ChildStack> {
        let stack = match self.free.pop() {
            Some(s) => s,
            None => ChildStack::map()?,
        };
        if changes_creds {
            if self.dumpable.is_none() {
                // SAFETY: prctl with integer arguments only.
                let d = unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) };
                self.dumpable = Some(d);
            }
            self.creds_changed = true;
        }
        self.in_flight += 1;
        Some(stack)
    }

    /// A child is done with vigil's memory. Once none is left in flight: the pool shrinks to
    /// [`KEEP_FREE_STACKS`], and vigil's dumpable flag is restored if a child changed its
    /// credentials meanwhile. (The kernel's `commit_creds` sets the **mm**'s dumpable flag to
    /// `suid_dumpable`, normally 0, when a task changes its uid or gid; a `CLONE_VM` child
    /// shares vigil's mm, so its setuid makes vigil non-dumpable: no core dump of vigil.
    /// That flag is also what keeps the container's uid from ptracing, or opening
    /// `/proc/PID/mem` of, a child that already runs as that uid while it still shares
    /// vigil's memory (`ptrace_may_access`), so it is restored only when no such child exists:
    /// never while one is in flight, and never after a leaked one.)
    fn give_back(&mut self, stack: ChildStack) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.free.push(stack);
        if self.in_flight > 0 {
            return;
        }
        while self.free.len() > KEEP_FREE_STACKS {
            if let Some(s) = self.free.pop() {
                s.unmap();
            }
        }
        if self.creds_changed && self.leaked == 0 {
            self.creds_changed = false;
            if let Some(d @ (0 | 1)) = self.dumpable {
                // SAFETY: prctl with integer arguments only.
                unsafe {
                    libc::prctl(libc::PR_SET_DUMPABLE, d as libc::c_ulong, 0, 0, 0);
                }
            }
        }
    }

    fn leaked(&mut self) {
        self.leaked += 1;
    }
}

/// Stacks and children counted by [`VmState`], for tests: (free stacks, children in flight,
/// leaked holds).
#[cfg(test)]
pub(super) fn vm_counts() -> (usize, usize, usize) {
    let s = vm_state();
    (s.free.len(), s.in_flight, s.leaked)
}

/// The child's first and only frame on its [`ChildStack`].
extern "C" fn vm_child_entry(child: *const RawChild) -> ! {
    // SAFETY: `clone3_vm` passes a pointer to a `RawChild` in a `Hold` the parent keeps alive
    // and unchanged until this child has exec'd or exited.
    let child = unsafe { &*child };
    child.run()
}

/// clone3(2) with `args` (which must ask for `CLONE_VM` and give a stack, and not for
/// `CLONE_VFORK`: the parent goes on at once) whose child calls [`vm_child_entry`]`(child)` on
/// that stack. Returns clone3's result in the parent: the child's pid, or -1 with errno set.
///
/// In assembly because no libc wrapper exists for clone3 and a child on a new stack cannot
/// return through the `syscall` wrapper's frame: after the `syscall` instruction the child has
/// only its new stack (the kernel sets the stack pointer to `stack + stack_size`, 16-byte
/// aligned here, as the x86-64 ABI wants at a call) and calls the entry, which never returns.
/// The `syscall` instruction changes only rax, rcx and r11 (x86-64 Linux syscall convention), so
/// the parent continues with every other register as it was.
///
/// # Safety
///
/// `args.stack`/`args.stack_size` describe memory no one else uses while the child runs on it,
/// and `child` with everything it points to stays alive and unchanged until the child has
/// exec'd or exited (see [`Hold`]).
#[cfg(target_arch = "x86_64")]
unsafe fn clone3_vm(args: &mut CloneArgs, child: *const RawChild) -> libc::c_long {
    let entry: extern "C" fn(*const RawChild) -> ! = vm_child_entry;
    let ret: libc::c_long;
    // SAFETY: the caller's contract; the child path never returns to Rust code of this frame
    // (it calls the entry with the `RawChild` pointer as first argument, and traps should the
    // entry ever return). The `syscall` instruction follows its calling convention: number in
    // rax, arguments in rdi and rsi, result in rax, rcx and r11 clobbered.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov rdi, r13",
            "call r12",
            "ud2",
            "2:",
            inlateout("rax") libc::SYS_clone3 => ret,
            in("rdi") args as *mut CloneArgs,
            in("rsi") std::mem::size_of::<CloneArgs>(),
            in("r12") entry,
            in("r13") child,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        Errno::set_raw(-ret as i32);
        return -1;
    }
    ret
}

/// Elsewhere [`Hold::vm_child`] is always `None`, so this is never called.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn clone3_vm(_args: &mut CloneArgs, _child: *const RawChild) -> libc::c_long {
    Errno::set_raw(libc::ENOSYS);
    -1
}

/// The error pipe's report as read so far (at most [`Report::MAX`] bytes are meaningful).
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Report {
    buf: [u8; 8],
    len: usize,
    /// The read reached EOF (not a read error): the child closed its end (exec or exit).
    eof: bool,
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
                Ok(0) => {
                    self.eof = true;
                    return true;
                }
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

/// Writes `pid`'s decimal digits and a NUL after the `WATCHDOG_PID=` at `buf`. Async-signal-safe
/// (no allocation; the digits are made on the stack).
///
/// # Safety
/// `buf` points to [`PID_VAR_LEN`] writable bytes no one else reads or writes meanwhile.
unsafe fn fill_pid_var(buf: *mut u8, pid: usize) {
    let mut digits = [0u8; 20];
    let mut n = pid;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 || len == digits.len() {
            break;
        }
    }
    for i in 0..len {
        // SAFETY: PID_VAR.len() + len + 1 <= PID_VAR_LEN (len <= 20); see the function's.
        unsafe { *buf.add(PID_VAR.len() + i) = digits[len - 1 - i] };
    }
    // SAFETY: as above.
    unsafe { *buf.add(PID_VAR.len() + len) = 0 };
}

/// What the raw child reads: pointers into a [`ChildData`] the parent keeps alive until the
/// child no longer needs it (its own copy on the fork-like path, a [`Hold`] on the `CLONE_VM`
/// one).
#[derive(Clone)]
struct RawChild {
    plan: *const ChildPlan,
    fds: ChildFds,
    candidates: *const *const libc::c_char,
    candidates_len: usize,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    sh_argv: *mut *const libc::c_char,
    sh_argv_len: usize,
    /// `WATCHDOG_PID=` and room for the pid, pointed to by `envp` (null: none; see
    /// [`ExecTarget::pid_var`]).
    pid_var: *mut u8,
}

impl RawChild {
    /// Reports `errno` for `step` (0: the exec) and exits 127.
    fn die(&self, step: u8, errno: i32) -> ! {
        let e = errno.to_ne_bytes();
        sys::write(self.fds.err, &[step, e[0], e[1], e[2], e[3]]);
        sys::exit(127)
    }

    /// The child: stdio, the shared setup, then execve over the candidates like execvp(3).
    /// Async-signal-safe and `errno`-free: system calls through [`sys::call`] on data the
    /// parent prepared; writes nothing but its own stack and `sh_argv` slot 1; never returns.
    fn run(&self) -> ! {
        sys::write(self.fds.err, &[ALIVE]);
        let f = self.fds;
        for (src, dst) in [(f.stdin, 0), (f.stdout, 1), (f.stderr, 2)] {
            // dup3 (dup2 is not on every architecture): `src` ≥ 3 never equals `dst`, which
            // is where dup3 and dup2 differ. It clears CLOEXEC on `dst`.
            // SAFETY: integer arguments only; descriptors the parent keeps open until after
            // the clone (the child has its own copy of the table).
            if let Err(e) = unsafe { sys::call(libc::SYS_dup3, [src as usize, dst, 0, 0]) } {
                self.die(Step::Stdio as u8, e);
            }
        }
        // SAFETY: `plan` points into the parent's `ChildData`, alive until this child is done.
        let plan = unsafe { &*self.plan };
        if let Err(errno) = child_setup(plan) {
            // child_setup already wrote its step byte; complete the report with the errno.
            sys::write(self.fds.err, &errno.to_ne_bytes());
            sys::exit(127)
        }
        if !self.pid_var.is_null() {
            // SAFETY: getpid(2) takes no argument and cannot fail.
            let pid = unsafe { sys::call(libc::SYS_getpid, [0, 0, 0, 0]) }.unwrap_or(0);
            // SAFETY: `pid_var` is a buffer of PID_VAR_LEN bytes that belongs to this child's
            // start alone (like `sh_argv` slot 1), alive as above; `envp` points to it.
            unsafe { fill_pid_var(self.pid_var, pid) };
        }
        // SAFETY: pointer and length of the parent-built candidate array, alive as above.
        let candidates =
            unsafe { std::slice::from_raw_parts(self.candidates, self.candidates_len) };
        let mut saw_eacces = false;
        let mut last = libc::ENOENT;
        for &path in candidates {
            let (argv, envp) = (self.argv as usize, self.envp as usize);
            // SAFETY: NUL-terminated path and NULL-terminated pointer arrays built by the
            // parent. It returns only on failure.
            let Err(errno) =
                (unsafe { sys::call(libc::SYS_execve, [path as usize, argv, envp, 0]) })
            else {
                continue;
            };
            if errno == libc::ENOEXEC && self.sh_argv_len > 1 {
                // Like execvp(3): a file without a recognised format is run by /bin/sh.
                // SAFETY: slot 1 exists (len > 1) and belongs to this child's start alone; the
                // arrays are NULL-terminated as above.
                let sh = unsafe {
                    *self.sh_argv.add(1) = path;
                    let sh_argv = self.sh_argv as usize;
                    sys::call(
                        libc::SYS_execve,
                        [c"/bin/sh".as_ptr() as usize, sh_argv, envp, 0],
                    )
                };
                if let Err(e) = sh {
                    last = e;
                }
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
