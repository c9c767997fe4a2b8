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
//! parent in [`child_plan`].

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;

use nix::errno::Errno;

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

/// Records which step failed and returns the errno as an `io::Error` (no allocation:
/// `last_os_error` stores the raw code).
fn step_failed(step_fd: RawFd, step: Step) -> io::Error {
    let err = io::Error::last_os_error();
    let b = [step as u8];
    // SAFETY: write(2) is async-signal-safe; `b` is a live 1-byte buffer. The result is
    // ignored: if it fails, the parent reports the error as an exec failure.
    unsafe {
        libc::write(step_fd, b.as_ptr().cast(), 1);
    }
    err
}

/// The body run between fork and exec. Async-signal-safe only: raw syscalls on data prepared
/// by the parent; no allocation, no locks, no logging, no environment access
/// (signal-safety(7); std's `CommandExt::pre_exec` docs).
pub(super) fn child_setup(plan: &ChildPlan) -> io::Result<()> {
    let fail = |step| Err(step_failed(plan.step_fd, step));

    // 1. Signals. Dispositions first, so that unblocking cannot run one of vigil's handlers in
    // the child; std resets only SIGPIPE, and exec keeps SIG_IGN (signal(7)). All 64 signals,
    // including the two real-time ones glibc reserves (32, 33), which its sigaction() refuses,
    // hence the raw rt_sigaction(2). An all-zero kernel sigaction is {SIG_DFL, no flags, empty
    // mask} whatever the architecture's field order; the buffer is larger than any layout.
    // Errors (EINVAL for SIGKILL/SIGSTOP) are ignored: nothing to reset there.
    let dfl = [0u64; 8];
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: raw syscall; `dfl` is a valid zeroed buffer larger than struct
        // kernel_sigaction, and the old-action pointer is null.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                dfl.as_ptr(),
                std::ptr::null_mut::<libc::c_void>(),
                std::mem::size_of::<u64>(),
            );
        }
    }
    // SAFETY: sigset_t is plain data; sigemptyset initialises it; sigprocmask is
    // async-signal-safe and the child has a single thread.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return fail(Step::SignalReset);
    }

    // 2. Own session and process group, so killpg(pid) reaches the whole tree without cgroups
    // and terminal signals to vigil's group do not hit the child.
    // SAFETY: setsid(2) is async-signal-safe.
    if unsafe { libc::setsid() } < 0 {
        return fail(Step::Setsid);
    }

    // 3. Cgroup placement: "0" means the writing process (cgroup v2 docs, "cgroup.procs").
    // The fd was opened by the parent; since Linux 5.16 the permission check uses the opener's
    // credentials, so this works even after a later setuid.
    if let Some(fd) = plan.cgroup_procs {
        // SAFETY: write(2) on a caller-owned fd with a static 1-byte buffer.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return fail(Step::Cgroup);
        }
    }

    // 3b. Containers do not inherit vigil's own protection from the OOM killer
    // (`oom_score_adj` is inherited across fork and exec, proc(5)): back to the neutral 0.
    // Raising the value needs no privilege; failure (no /proc) is harmless and ignored.
    // SAFETY: open(2)/write(2)/close(2) are async-signal-safe; the path is a static C string.
    unsafe {
        let fd = libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }

    // 4. Resource limits, while still privileged (raising a hard limit needs
    // CAP_SYS_RESOURCE, setrlimit(2)).
    for (resource, lim) in &plan.rlimits {
        // SAFETY: `lim` points to a valid rlimit prepared by the parent.
        if unsafe { libc::setrlimit(*resource as _, lim) } != 0 {
            return fail(Step::Rlimit);
        }
    }

    // 5. Bounding set, before setuid: PR_CAPBSET_DROP needs CAP_SETPCAP (prctl(2)). EINVAL
    // means the kernel does not know that capability: nothing to drop.
    for &cap in &plan.cap_drop {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc != 0 && Errno::last_raw() != libc::EINVAL {
            return fail(Step::CapBound);
        }
    }

    // 6. Ambient set. EINVAL: kernel older than 4.3 has no ambient set.
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 && Errno::last_raw() != libc::EINVAL {
        return fail(Step::AmbientClear);
    }

    // 7-9. Credentials: groups and gid while we still may, uid last (setuid(2) drops the
    // permitted/effective/ambient capability sets when leaving uid 0 — unless keep-caps is set,
    // which keeps the permitted set; the flag itself is cleared again by execve).
    if plan.capset.is_some() {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            return fail(Step::KeepCaps);
        }
    }
    // Raw syscalls, not glibc's wrappers: those broadcast the change to every thread glibc
    // believes exists, which after a raw clone3 (no atfork handlers) are the parent's threads.
    // The kernel calls change only the calling thread, which is all a single-threaded child has.
    if let Some(c) = &plan.creds {
        // SAFETY: pointer and length describe the parent-allocated Vec.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_setgroups,
                c.groups.len() as libc::size_t,
                c.groups.as_ptr(),
            )
        };
        if rc != 0 {
            return fail(Step::Setgroups);
        }
        // SAFETY: raw syscall with an integer argument.
        if unsafe { libc::syscall(libc::SYS_setgid, c.gid) } != 0 {
            return fail(Step::Setgid);
        }
        if let Some(uid) = c.uid {
            // SAFETY: as above.
            if unsafe { libc::syscall(libc::SYS_setuid, uid) } != 0 {
                return fail(Step::Setuid);
            }
        }
    }

    // 9b. Kept capabilities of a non-root child: narrow permitted to them and put them in the
    // effective and inheritable sets (a subset of the kept permitted set, so allowed without
    // CAP_SETPCAP, capset(2)), then raise each into the ambient set, which needs it permitted
    // and inheritable (prctl(2), PR_CAP_AMBIENT_RAISE).
    if let Some(cs) = &plan.capset {
        // SAFETY: raw capset(2) with pointers to the plan's header and two data structs, the
        // layout _LINUX_CAPABILITY_VERSION_3 expects.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_capset,
                &cs.header as *const CapHeader,
                cs.data.as_ptr(),
            )
        };
        if rc != 0 {
            return fail(Step::Capset);
        }
        for &cap in &plan.ambient {
            // SAFETY: prctl with integer arguments only.
            let rc = unsafe {
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                    cap as libc::c_ulong,
                    0,
                    0,
                )
            };
            if rc != 0 {
                return fail(Step::AmbientRaise);
            }
        }
    }

    // 10. no_new_privs: after setuid, and inherited across exec (prctl(2)).
    if plan.no_new_privs {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            return fail(Step::NoNewPrivs);
        }
    }

    // 11. Working directory, as the target user (like systemd's WorkingDirectory=), and here
    // rather than via Command::current_dir so that its failure is reported as such instead of
    // looking like a missing binary.
    if let Some(dir) = &plan.working_dir {
        // SAFETY: `dir` is a valid NUL-terminated string owned by the plan.
        if unsafe { libc::chdir(dir.as_ptr()) } != 0 {
            return fail(Step::Chdir);
        }
    }

    // 12. Any fd vigil leaked without CLOEXEC must not reach the program. CLOSE_RANGE_CLOEXEC
    // only marks them, so std's error pipe still works until exec (close_range(2), Linux 5.11;
    // on older kernels this fails and is ignored: vigil opens everything CLOEXEC anyway).
    // SAFETY: raw syscall with integer arguments only.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
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
    }
}
