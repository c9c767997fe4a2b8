//! The child's side of a spawn: the body that runs between fork (or clone3) and exec, and the
//! [`ChildPlan`] it reads.
//!
//! Owns: the order of the setup steps — signal state → setsid → cgroup placement →
//! oom_score_adj → rlimits → bounding set → clear ambient set → keep-caps → setgroups → setgid →
//! setuid → raise kept capabilities (permitted, effective, inheritable, ambient) →
//! no_new_privs → chdir → mark stray fds CLOEXEC — and the one-byte [`Step`] report of which
//! step failed.
//!
//! Why one body and not `Command::uid/gid`: std runs its own uid/gid changes *before*
//! `pre_exec` closures, so the bounding-set drops (which need CAP_SETPCAP) and raising rlimits
//! would then run unprivileged and fail. Doing everything in one body keeps the order under our
//! control.
//!
//! Kept capabilities of a non-root container are made usable the way systemd's
//! `AmbientCapabilities=` does it: `PR_SET_KEEPCAPS` before setuid keeps the permitted set across
//! the uid change, then capset(2) narrows permitted/effective/inheritable to the kept ones and
//! `PR_CAP_AMBIENT_RAISE` puts them in the ambient set, which survives execve(2) of an ordinary
//! (non-setuid, no file capabilities) program (capabilities(7), "Ambient capability set").
//!
//! Must not, in [`child_setup`]: allocate, lock, log, touch the environment, or call anything
//! that is not async-signal-safe (signal-safety(7)) — everything it reads was allocated by the
//! parent in [`child_plan`]. Nor write any memory but its own stack: on the clone3 path the
//! child may share vigil's memory, thread-local `errno` included, while vigil goes on (see
//! `raw`), so every system call goes through [`sys::call`], which returns the error as a value
//! and never touches `errno`.

use std::ffi::CString;
use std::os::fd::RawFd;

use super::prepare::{Creds, Prepared};

/// Steps of the child setup, written as one byte to the step pipe when a step fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Step {
    SignalReset = 1,
    Setsid,
    Cgroup,
    Rlimit,
    CapBound,
    AmbientClear,
    Setgroups,
    Setgid,
    Setuid,
    NoNewPrivs,
    Chdir,
    KeepCaps,
    Capset,
    AmbientRaise,
    Stdio,
}

impl Step {
    const ALL: [Step; 15] = [
        Step::SignalReset,
        Step::Setsid,
        Step::Cgroup,
        Step::Rlimit,
        Step::CapBound,
        Step::AmbientClear,
        Step::Setgroups,
        Step::Setgid,
        Step::Setuid,
        Step::NoNewPrivs,
        Step::Chdir,
        Step::KeepCaps,
        Step::Capset,
        Step::AmbientRaise,
        Step::Stdio,
    ];

    pub(super) fn from_byte(b: u8) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u8 == b)
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Step::SignalReset => "reset signal mask",
            Step::Setsid => "setsid",
            Step::Cgroup => "write cgroup.procs",
            Step::Rlimit => "setrlimit",
            Step::CapBound => "drop bounding-set capabilities",
            Step::AmbientClear => "clear ambient capabilities",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setgid",
            Step::Setuid => "setuid",
            Step::NoNewPrivs => "set no_new_privs",
            Step::Chdir => "chdir",
            Step::KeepCaps => "keep capabilities across setuid",
            Step::Capset => "set kept capabilities (capset)",
            Step::AmbientRaise => "raise ambient capabilities",
            Step::Stdio => "redirect stdin/stdout/stderr",
        }
    }
}

/// What the child needs, all owned and allocated by the parent. Moved into the `pre_exec`
/// closure, which only reads it.
pub(super) struct ChildPlan {
    pub(super) cgroup_procs: Option<RawFd>,
    pub(super) step_fd: RawFd,
    pub(super) rlimits: Vec<(u32, libc::rlimit)>,
    pub(super) cap_drop: Vec<libc::c_int>,
    /// capset(2) payload for the kept capabilities (`None`: no ambient raise).
    pub(super) capset: Option<CapSet>,
    pub(super) ambient: Vec<libc::c_int>,
    pub(super) creds: Option<Creds>,
    pub(super) no_new_privs: bool,
    pub(super) working_dir: Option<CString>,
    /// Write 0 to the child's `oom_score_adj` (step 3b). Only a child that does not share
    /// vigil's memory may: see [`super::raw::own_oom_score_adj`].
    pub(super) reset_oom: bool,
}

/// `struct __user_cap_header_struct` (linux/capability.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(super) struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` (linux/capability.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets as two 32-bit data structs.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// A capset(2) call prepared in the parent.
#[derive(Debug, Clone, Copy)]
pub(super) struct CapSet {
    header: CapHeader,
    data: [CapData; 2],
}

impl CapSet {
    /// The same capabilities in the permitted, effective and inheritable sets.
    fn all_three(caps: &[libc::c_int]) -> CapSet {
        let mut data = [CapData::default(); 2];
        for &c in caps {
            let (i, bit) = ((c / 32) as usize, 1u32 << (c % 32));
            if let Some(d) = data.get_mut(i) {
                d.effective |= bit;
                d.permitted |= bit;
                d.inheritable |= bit;
            }
        }
        CapSet {
            header: CapHeader {
                version: LINUX_CAPABILITY_VERSION_3,
                pid: 0,
            },
            data,
        }
    }
}

/// Raw system calls for the child: the result or `-errno` comes back in a register and
/// `errno` is never written (glibc's wrappers and `libc::syscall` set it on failure, and on the
/// `CLONE_VM` path it is vigil's own, see `raw`).
pub(super) mod sys {
    /// `syscall(nr, a…)`: `Ok(result)` or `Err(errno)`.
    ///
    /// # Safety
    ///
    /// As the system call itself: pointer arguments must be valid for what `nr` reads or
    /// writes.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(in crate::process) unsafe fn call(nr: libc::c_long, a: [usize; 4]) -> Result<usize, i32> {
        let ret: isize;
        // SAFETY: the x86-64 Linux system call convention: number in rax, arguments in rdi, rsi,
        // rdx, r10, r8, r9 (the last two always 0 here: prctl(2) insists on zero unused
        // arguments); result in rax; rcx and r11 clobbered; no stack use. The caller vouches for
        // the arguments.
        unsafe {
            std::arch::asm!(
                "syscall",
                inlateout("rax") nr as isize => ret,
                in("rdi") a[0],
                in("rsi") a[1],
                in("rdx") a[2],
                in("r10") a[3],
                in("r8") 0usize,
                in("r9") 0usize,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        // The kernel returns -4095..-1 for errors.
        if (-4095..0).contains(&ret) {
            Err(-ret as i32)
        } else {
            Ok(ret as usize)
        }
    }

    /// Elsewhere through `libc::syscall`, which sets `errno`: used only by the fork-like clone
    /// and `Command`, whose child has its own copy of memory (see `raw`).
    ///
    /// # Safety
    ///
    /// As above.
    #[cfg(not(target_arch = "x86_64"))]
    pub(in crate::process) unsafe fn call(nr: libc::c_long, a: [usize; 4]) -> Result<usize, i32> {
        // SAFETY: the caller's contract.
        let rc = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], 0usize, 0usize) };
        if rc < 0 {
            Err(nix::errno::Errno::last_raw())
        } else {
            Ok(rc as usize)
        }
    }

    /// write(2) of `bytes` to `fd`; a short or failed write is ignored (it only loses a report).
    pub(in crate::process) fn write(fd: libc::c_int, bytes: &[u8]) {
        // SAFETY: write(2) reads `bytes.len()` bytes of a live slice.
        let _ = unsafe {
            call(
                libc::SYS_write,
                [fd as usize, bytes.as_ptr() as usize, bytes.len(), 0],
            )
        };
    }

    /// exit_group(2) with `code`: the child is a process of its own (no `CLONE_THREAD`), so
    /// this ends only the child; no atexit handler runs.
    pub(in crate::process) fn exit(code: libc::c_int) -> ! {
        loop {
            // SAFETY: integer argument only; exit_group does not return.
            let _ = unsafe { call(libc::SYS_exit_group, [code as usize, 0, 0, 0]) };
        }
    }
}

/// Records which step failed (one byte on the step pipe) and passes the errno on.
fn step_failed(step_fd: RawFd, step: Step, errno: i32) -> i32 {
    sys::write(step_fd, &[step as u8]);
    errno
}

/// The body run between fork (or clone3) and exec. Async-signal-safe only: raw syscalls on
/// data prepared by the parent; no allocation, no locks, no logging, no environment access
/// (signal-safety(7); std's `CommandExt::pre_exec` docs), no `errno`. On failure the step byte
/// is written to `plan.step_fd` and the errno returned.
pub(super) fn child_setup(plan: &ChildPlan) -> Result<(), i32> {
    let fd = plan.step_fd;
    // Every `sys::call` below passes integers, or pointers to data of the plan or of this
    // frame that live across the call, of the size the system call reads.

    // 1. Signals. Dispositions first, so that unblocking cannot run one of vigil's handlers in
    // the child (which, sharing vigil's memory, would write vigil's state); std resets only
    // SIGPIPE, and exec keeps SIG_IGN (signal(7)). All 64 signals, including the two real-time
    // ones glibc reserves (32, 33), which its sigaction() refuses, hence the raw
    // rt_sigaction(2). An all-zero kernel sigaction is {SIG_DFL, no flags, empty mask} whatever
    // the architecture's field order; the buffer is larger than any layout. Errors (EINVAL for
    // SIGKILL/SIGSTOP) are ignored: nothing to reset there.
    let dfl = [0u64; 8];
    for sig in 1..=64usize {
        if sig == libc::SIGKILL as usize || sig == libc::SIGSTOP as usize {
            continue;
        }
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        let _ = unsafe {
            sys::call(
                libc::SYS_rt_sigaction,
                [sig, dfl.as_ptr() as usize, 0, std::mem::size_of::<u64>()],
            )
        };
    }
    // The kernel's sigset is 64 bits: an all-zero one unblocks everything.
    let empty = 0u64;
    let how = libc::SIG_SETMASK as usize;
    let set = &empty as *const u64 as usize;
    let size = std::mem::size_of::<u64>();
    // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
    if let Err(e) = unsafe { sys::call(libc::SYS_rt_sigprocmask, [how, set, 0, size]) } {
        return Err(step_failed(fd, Step::SignalReset, e));
    }

    // 2. Own session and process group, so killpg(pid) reaches the whole tree without cgroups
    // and terminal signals to vigil's group do not hit the child.
    // SAFETY: no arguments.
    if let Err(e) = unsafe { sys::call(libc::SYS_setsid, [0; 4]) } {
        return Err(step_failed(fd, Step::Setsid, e));
    }

    // 3. Cgroup placement: "0" means the writing process (cgroup v2 docs, "cgroup.procs").
    // The fd was opened by the parent; since Linux 5.16 the permission check uses the opener's
    // credentials, so this works even after a later setuid.
    if let Some(procs) = plan.cgroup_procs {
        let buf = b"0";
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        let rc = unsafe {
            sys::call(
                libc::SYS_write,
                [procs as usize, buf.as_ptr() as usize, 1, 0],
            )
        };
        match rc {
            Ok(1) => {}
            Ok(_) => return Err(step_failed(fd, Step::Cgroup, libc::EIO)),
            Err(e) => return Err(step_failed(fd, Step::Cgroup, e)),
        }
    }

    // 3b. Containers do not inherit vigil's own protection from the OOM killer
    // (`oom_score_adj` is inherited across fork and exec, proc(5)): back to the neutral 0.
    // Raising the value needs no privilege; failure (no /proc) is harmless and ignored. Only
    // when the plan says so: a child cloned with vigil's value already 0 has nothing to reset,
    // and one that shares vigil's memory must not (the write would reach vigil too).
    if plan.reset_oom {
        let path = c"/proc/self/oom_score_adj";
        let flags = (libc::O_WRONLY | libc::O_CLOEXEC) as usize;
        let at = libc::AT_FDCWD as usize;
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        let opened = unsafe { sys::call(libc::SYS_openat, [at, path.as_ptr() as usize, flags, 0]) };
        if let Ok(adj) = opened {
            sys::write(adj as libc::c_int, b"0");
            // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
            let _ = unsafe { sys::call(libc::SYS_close, [adj, 0, 0, 0]) };
        }
    }

    // 4. Resource limits, while still privileged (raising a hard limit needs
    // CAP_SYS_RESOURCE, setrlimit(2)); prlimit64 on ourselves (pid 0) is setrlimit.
    for (resource, lim) in &plan.rlimits {
        let lim = lim as *const libc::rlimit as usize;
        if let Err(e) =
            // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
            unsafe { sys::call(libc::SYS_prlimit64, [0, *resource as usize, lim, 0]) }
        {
            return Err(step_failed(fd, Step::Rlimit, e));
        }
    }

    // 5. Bounding set, before setuid: PR_CAPBSET_DROP needs CAP_SETPCAP (prctl(2)). EINVAL
    // means the kernel does not know that capability: nothing to drop.
    for &cap in &plan.cap_drop {
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        let rc = unsafe {
            sys::call(
                libc::SYS_prctl,
                [libc::PR_CAPBSET_DROP as usize, cap as usize, 0, 0],
            )
        };
        match rc {
            Ok(_) | Err(libc::EINVAL) => {}
            Err(e) => return Err(step_failed(fd, Step::CapBound, e)),
        }
    }

    // 6. Ambient set. EINVAL: kernel older than 4.3 has no ambient set.
    let clear = [
        libc::PR_CAP_AMBIENT as usize,
        libc::PR_CAP_AMBIENT_CLEAR_ALL as usize,
        0,
        0,
    ];
    // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
    match unsafe { sys::call(libc::SYS_prctl, clear) } {
        Ok(_) | Err(libc::EINVAL) => {}
        Err(e) => return Err(step_failed(fd, Step::AmbientClear, e)),
    }

    // 7-9. Credentials: groups and gid while we still may, uid last (setuid(2) drops the
    // permitted/effective/ambient capability sets when leaving uid 0 — unless keep-caps is set,
    // which keeps the permitted set; the flag itself is cleared again by execve).
    if plan.capset.is_some() {
        let keep = [libc::PR_SET_KEEPCAPS as usize, 1, 0, 0];
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        if let Err(e) = unsafe { sys::call(libc::SYS_prctl, keep) } {
            return Err(step_failed(fd, Step::KeepCaps, e));
        }
    }
    // System calls, not glibc's wrappers: those broadcast the change to every thread glibc
    // believes exists, which after a raw clone3 (no atfork handlers) are the parent's threads.
    // The kernel calls change only the calling thread, which is all a single-threaded child has.
    if let Some(c) = &plan.creds {
        let groups = [c.groups.len(), c.groups.as_ptr() as usize, 0, 0];
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        if let Err(e) = unsafe { sys::call(libc::SYS_setgroups, groups) } {
            return Err(step_failed(fd, Step::Setgroups, e));
        }
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        if let Err(e) = unsafe { sys::call(libc::SYS_setgid, [c.gid as usize, 0, 0, 0]) } {
            return Err(step_failed(fd, Step::Setgid, e));
        }
        if let Some(uid) = c.uid
            // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
            && let Err(e) = unsafe { sys::call(libc::SYS_setuid, [uid as usize, 0, 0, 0]) }
        {
            return Err(step_failed(fd, Step::Setuid, e));
        }
    }

    // 9b. Kept capabilities of a non-root child: narrow permitted to them and put them in the
    // effective and inheritable sets (a subset of the kept permitted set, so allowed without
    // CAP_SETPCAP, capset(2)), then raise each into the ambient set, which needs it permitted
    // and inheritable (prctl(2), PR_CAP_AMBIENT_RAISE).
    if let Some(cs) = &plan.capset {
        // capset(2) with the plan's header and two data structs, the layout
        // _LINUX_CAPABILITY_VERSION_3 expects.
        let header = &cs.header as *const CapHeader as usize;
        let data = cs.data.as_ptr() as usize;
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        if let Err(e) = unsafe { sys::call(libc::SYS_capset, [header, data, 0, 0]) } {
            return Err(step_failed(fd, Step::Capset, e));
        }
        for &cap in &plan.ambient {
            let raise = [
                libc::PR_CAP_AMBIENT as usize,
                libc::PR_CAP_AMBIENT_RAISE as usize,
                cap as usize,
                0,
            ];
            // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
            if let Err(e) = unsafe { sys::call(libc::SYS_prctl, raise) } {
                return Err(step_failed(fd, Step::AmbientRaise, e));
            }
        }
    }

    // 10. no_new_privs: after setuid, and inherited across exec (prctl(2)).
    if plan.no_new_privs {
        let nnp = [libc::PR_SET_NO_NEW_PRIVS as usize, 1, 0, 0];
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        if let Err(e) = unsafe { sys::call(libc::SYS_prctl, nnp) } {
            return Err(step_failed(fd, Step::NoNewPrivs, e));
        }
    }

    // 11. Working directory, as the target user (like systemd's WorkingDirectory=), and here
    // rather than via Command::current_dir so that its failure is reported as such instead of
    // looking like a missing binary.
    if let Some(dir) = &plan.working_dir
        // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
        && let Err(e) = unsafe { sys::call(libc::SYS_chdir, [dir.as_ptr() as usize, 0, 0, 0]) }
    {
        return Err(step_failed(fd, Step::Chdir, e));
    }

    // 12. Any fd vigil leaked without CLOEXEC must not reach the program. CLOSE_RANGE_CLOEXEC
    // only marks them, so std's error pipe still works until exec (close_range(2), Linux 5.11;
    // on older kernels this fails and is ignored: vigil opens everything CLOEXEC anyway).
    let range = [
        3,
        libc::c_uint::MAX as usize,
        libc::CLOSE_RANGE_CLOEXEC as usize,
        0,
    ];
    // SAFETY: a system call with integer arguments or pointers to live plan/frame data.
    let _ = unsafe { sys::call(libc::SYS_close_range, range) };
    Ok(())
}

/// The child's setup plan (the step fd is filled in by each path).
pub(super) fn child_plan(p: &Prepared, cgroup_procs: Option<RawFd>) -> ChildPlan {
    ChildPlan {
        cgroup_procs,
        step_fd: -1,
        rlimits: p.rlimits.clone(),
        cap_drop: p.cap_drop.clone(),
        capset: (!p.ambient.is_empty()).then(|| CapSet::all_three(&p.ambient)),
        ambient: p.ambient.clone(),
        creds: p.creds.clone(),
        no_new_privs: p.no_new_privs,
        working_dir: p.working_dir_c.clone(),
        reset_oom: true,
    }
}
