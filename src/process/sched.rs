//! vigil's own CPU time slice: a short one, asked of the kernel's EEVDF scheduler through
//! `sched_attr.sched_runtime` (sched_setattr(2); honoured for SCHED_OTHER since Linux 6.12,
//! clamped there to 0.1–100 ms), and not passed on to the children.
//!
//! Why: vigil's work comes in short bursts that someone waits on — a status reply, a reap and
//! restart, a probe at its deadline. Under a busy CPU (its own containers flooding their output,
//! starting, computing) a woken vigil with the default slice waits for the running task's slice
//! or the next tick; a task that asks for a shorter slice gets an earlier virtual deadline and
//! is picked, or preempts, sooner. Its share of the CPU does not change: that is the weight
//! (nice), which this leaves alone. The kernel's scheduler documentation ("EEVDF Scheduler",
//! sched-eevdf.rst) names this use: latency-sensitive tasks request shorter slices. The commit
//! that added the request (857b158dc5e8, "Use sched_attr::sched_runtime to set request/slice
//! suggestion") advises a slice near the task's usual burst, since a shorter one brings undue
//! preemptions; vigil's bursts are tens to hundreds of µs (a 64 KiB copy of output, a reply, a
//! spawn), hence 100 µs by default (BENCHMARKS.md, issue 20's thirteenth pass, for what it
//! changed and cost).
//!
//! Owns: reading vigil's scheduling attributes ([`current`]), the decision what to ask for
//! ([`decide`], pure) and the one `sched_setattr` that asks ([`apply`]). The slice goes with
//! `SCHED_FLAG_RESET_ON_FORK`, so every child — container, init container, exec probe — starts
//! with the kernel's default slice. That flag also resets a negative nice to 0 in the
//! children, so a vigil started with a negative nice is left as it is (its containers keep
//! inheriting that nice, as they always did).
//!
//! Must not: change vigil's policy, priority or nice; touch any other task; or fail startup (a
//! kernel that refuses is logged by the caller and vigil runs as started).

use std::io;

/// `SCHED_FLAG_RESET_ON_FORK` (linux/sched.h).
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// `SCHED_OTHER` (a.k.a. SCHED_NORMAL).
const SCHED_OTHER: u32 = 0;

/// The kernel's bounds for a custom fair slice, owned by the config that validates it.
pub use crate::config::spec::SLICE_MICROS;

/// `struct sched_attr` up to the utilisation clamps (SCHED_ATTR_SIZE_VER1, linux/sched/types.h).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// What vigil runs with now, as far as the decision needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    /// `SCHED_OTHER` is 0; anything else was chosen by whoever started vigil.
    pub policy: u32,
    pub nice: i32,
    /// The slice the kernel reports, ns (0 on kernels without custom fair slices, and for a
    /// task that never asked for one on some versions).
    pub runtime_ns: u64,
    pub reset_on_fork: bool,
}

/// The outcome of [`decide`]: ask for the slice, or leave vigil as started and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// `sched_setattr` with this slice, the same policy and nice, and RESET_ON_FORK.
    Set { runtime_ns: u64 },
    /// Already running with this slice and RESET_ON_FORK (e.g. after `vigil upgrade`).
    AlreadySet,
    /// Started under another policy (SCHED_BATCH, SCHED_IDLE, a real-time one): someone chose
    /// vigil's scheduling, and it stays theirs.
    OtherPolicy(u32),
    /// Started with a negative nice: RESET_ON_FORK would give the containers nice 0 instead.
    NegativeNice(i32),
}

/// Pure: what to do about a wanted slice of `micros` given `now`.
pub fn decide(now: Current, micros: u32) -> Decision {
    let runtime_ns = u64::from(micros.clamp(*SLICE_MICROS.start(), *SLICE_MICROS.end())) * 1_000;
    if now.policy != SCHED_OTHER {
        Decision::OtherPolicy(now.policy)
    } else if now.nice < 0 {
        Decision::NegativeNice(now.nice)
    } else if now.runtime_ns == runtime_ns && now.reset_on_fork {
        Decision::AlreadySet
    } else {
        Decision::Set { runtime_ns }
    }
}

/// sched_getattr(2) of the calling thread; the error names the call.
fn get_attr() -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as libc::c_long;
    // SAFETY: sched_getattr(0, &attr, size, 0) writes at most `size` bytes into `attr`, a
    // properly aligned `#[repr(C)]` struct of exactly that size that we own.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0 as libc::c_long,
            &mut attr as *mut SchedAttr,
            size,
            0 as libc::c_long,
        )
    };
    if r == 0 {
        Ok(attr)
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("sched_getattr: {e}")))
    }
}

impl From<&SchedAttr> for Current {
    fn from(a: &SchedAttr) -> Current {
        Current {
            policy: a.sched_policy,
            nice: a.sched_nice,
            runtime_ns: a.sched_runtime,
            reset_on_fork: a.sched_flags & SCHED_FLAG_RESET_ON_FORK != 0,
        }
    }
}

/// vigil's (the calling thread's; vigil has one) scheduling attributes.
pub fn current() -> io::Result<Current> {
    get_attr().map(|a| Current::from(&a))
}

/// What [`apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The kernel holds the slice now (read back).
    Slice { runtime_ns: u64 },
    /// Nothing to do or nothing done, see [`Decision`] (never `Set`).
    Left(Decision),
    /// The call succeeded but the kernel reports no custom slice: a kernel before 6.12, which
    /// ignores `sched_runtime` for SCHED_OTHER.
    Unsupported,
}

/// Asks for a slice of `micros` µs for vigil's thread, per [`decide`]. Errors name the call.
pub fn apply(micros: u32) -> io::Result<Applied> {
    let mut attr = get_attr()?;
    let runtime_ns = match decide(Current::from(&attr), micros) {
        Decision::Set { runtime_ns } => runtime_ns,
        other => return Ok(Applied::Left(other)),
    };
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.sched_flags = SCHED_FLAG_RESET_ON_FORK;
    attr.sched_runtime = runtime_ns;
    // SAFETY: sched_setattr(0, &attr, 0) only reads `attr` (a `#[repr(C)]` struct whose
    // `size` field says how many bytes) and changes the calling thread's scheduling.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            0 as libc::c_long,
            &attr as *const SchedAttr,
            0 as libc::c_long,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("sched_setattr (slice {runtime_ns} ns): {e}"),
        ));
    }
    let after = current()?;
    Ok(if after.runtime_ns == runtime_ns {
        Applied::Slice { runtime_ns }
    } else {
        Applied::Unsupported
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn normal(nice: i32) -> Current {
        Current {
            policy: SCHED_OTHER,
            nice,
            runtime_ns: 2_800_000,
            reset_on_fork: false,
        }
    }

    #[test]
    fn a_default_vigil_asks_for_the_slice_in_nanoseconds() {
        assert_eq!(
            decide(normal(0), 100),
            Decision::Set {
                runtime_ns: 100_000
            }
        );
        assert_eq!(
            decide(normal(10), 250),
            Decision::Set {
                runtime_ns: 250_000
            }
        );
    }

    #[test]
    fn the_slice_is_kept_within_the_kernels_bounds() {
        assert_eq!(
            decide(normal(0), 1),
            Decision::Set {
                runtime_ns: 100_000
            }
        );
        assert_eq!(
            decide(normal(0), u32::MAX),
            Decision::Set {
                runtime_ns: 100_000_000
            }
        );
    }

    #[test]
    fn another_policy_or_a_negative_nice_is_left_as_started() {
        let batch = Current {
            policy: 3,
            ..normal(0)
        };
        assert_eq!(decide(batch, 100), Decision::OtherPolicy(3));
        assert_eq!(decide(normal(-5), 100), Decision::NegativeNice(-5));
    }

    #[test]
    fn a_slice_already_held_with_reset_on_fork_is_not_asked_again() {
        let held = Current {
            runtime_ns: 100_000,
            reset_on_fork: true,
            ..normal(0)
        };
        assert_eq!(decide(held, 100), Decision::AlreadySet);
        let without_flag = Current {
            reset_on_fork: false,
            ..held
        };
        assert_eq!(
            decide(without_flag, 100),
            Decision::Set {
                runtime_ns: 100_000
            }
        );
    }

    /// The real calls, in a thread of the test binary (sched_setattr(0) acts on the calling
    /// thread only): the slice is read back, and a thread it spawns starts with the default.
    #[test]
    fn the_kernel_holds_the_slice_and_a_child_thread_of_it_does_not_inherit_it() {
        let r = std::thread::spawn(|| {
            let before = current().expect("sched_getattr");
            let applied = apply(150).expect("sched_setattr");
            let child = std::thread::spawn(|| current().expect("sched_getattr in the child"))
                .join()
                .expect("join");
            (before, applied, child)
        })
        .join()
        .expect("join");
        let (before, applied, child) = r;
        let expected = if before.policy != SCHED_OTHER || before.nice < 0 {
            Applied::Left(decide(before, 150))
        } else if kernel_at_least(6, 12) {
            Applied::Slice {
                runtime_ns: 150_000,
            }
        } else {
            Applied::Unsupported
        };
        assert_eq!(applied, expected, "{before:?}");
        if let Applied::Slice { .. } = applied {
            assert!(!child.reset_on_fork, "{child:?}");
            assert_ne!(child.runtime_ns, 150_000, "{child:?}");
            assert_eq!(child.nice, before.nice);
        }
    }

    fn kernel_at_least(major: u32, minor: u32) -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
        let mut parts = release
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|p| p.parse::<u32>().ok());
        let (a, b) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        (a, b) >= (major, minor)
    }
}
