//! PID 1 duties: what vigil must do itself when it is the first process of a system.
//!
//! Owns: detecting PID 1, mounting the API filesystems an image may lack (`/proc`, `/sys`,
//! `/dev`, the cgroup2 mount), the final sweep (SIGKILL every remaining process, reap, sync) and
//! the power-off. Must not make lifecycle decisions: the core decides what stops when.
//!
//! As PID 1 no signal has a default action (kill(2): "the only signals that can be sent to
//! process ID 1 … are those for which init has explicitly installed signal handlers"), so every
//! signal vigil acts on has a handler (SIGTERM, SIGINT, SIGPWR, SIGHUP, SIGCHLD).

use std::path::Path;

use log::{info, warn};
use nix::mount::{MsFlags, mount};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Whether this process is PID 1 (of the whole system or of a PID namespace).
pub fn is_pid1() -> bool {
    std::process::id() == 1
}

/// Mount what a minimal image may be missing. Each mount is tried only when the target is not
/// already a mount of that type; failures are logged (a container may forbid mounting).
pub fn mount_api_filesystems() {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mounted = |target: &str, fstype: &str| {
        mounts.lines().any(|l| {
            let (left, right) = l.split_once(" - ").unwrap_or((l, ""));
            left.split(' ').nth(4) == Some(target) && right.split(' ').next() == Some(fstype)
        })
    };
    let nosuid = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let table: [(&str, &str, &str, MsFlags, Option<&str>); 5] = [
        ("proc", "/proc", "proc", nosuid, None),
        ("sysfs", "/sys", "sysfs", nosuid, None),
        (
            "devtmpfs",
            "/dev",
            "devtmpfs",
            MsFlags::MS_NOSUID,
            Some("mode=0755"),
        ),
        (
            "cgroup2",
            "/sys/fs/cgroup",
            "cgroup2",
            nosuid,
            Some("nsdelegate"),
        ),
        (
            "tmpfs",
            "/run",
            "tmpfs",
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0755"),
        ),
    ];
    for (source, target, fstype, flags, data) in table {
        // /proc itself may be missing, so re-check mountinfo once /proc is up.
        let mounts_now = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let already = if mounts_now.is_empty() {
            mounted(target, fstype)
        } else {
            mounts_now.lines().any(|l| {
                let (left, right) = l.split_once(" - ").unwrap_or((l, ""));
                left.split(' ').nth(4) == Some(target) && right.split(' ').next() == Some(fstype)
            })
        };
        if already {
            continue;
        }
        if fstype == "cgroup2" && has_any_cgroup2(&mounts_now) {
            continue;
        }
        if let Err(e) = std::fs::create_dir_all(target) {
            warn!("pid1: cannot create {target}: {e}");
            continue;
        }
        // cgroup2 with `favordynmods` (Linux 6.0+, Documentation/admin-guide/cgroup-v2.rst):
        // moving a process between cgroups then no longer waits for an RCU grace period, and
        // vigil moves every container's first process. Older kernels refuse the option.
        if fstype == "cgroup2"
            && mount(
                Some(source),
                Path::new(target),
                Some(fstype),
                flags,
                Some("nsdelegate,favordynmods"),
            )
            .is_ok()
        {
            info!("pid1: mounted cgroup2 on {target} (nsdelegate,favordynmods)");
            continue;
        }
        match mount(Some(source), Path::new(target), Some(fstype), flags, data) {
            Ok(()) => info!("pid1: mounted {fstype} on {target}"),
            Err(e) => warn!("pid1: mounting {fstype} on {target} failed: {e}"),
        }
    }
}

fn has_any_cgroup2(mountinfo: &str) -> bool {
    mountinfo
        .lines()
        .any(|l| l.split_once(" - ").map(|(_, r)| r.starts_with("cgroup2 ")) == Some(true))
}

/// Final sweep: SIGKILL every process left (kill(-1) spares PID 1 itself), then reap until
/// none is left or `deadline` passes, then sync. Runs after the event loop has ended, so a
/// short sleep between reaping rounds is acceptable here.
pub fn sweep_and_sync(deadline: std::time::Instant) {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    // Say what is left: nothing after an orderly stop (zombies only wait to be reaped here).
    let left = leftover_processes();
    if left.is_empty() {
        info!("pid1: final sweep: no process left");
    } else {
        warn!(
            "pid1: final sweep: killing {} process(es) left over: {}",
            left.len(),
            left.join(", ")
        );
    }
    let _ = kill(Pid::from_raw(-1), Signal::SIGKILL);
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if std::time::Instant::now() > deadline {
                    warn!("pid1: processes still alive at the sweep deadline");
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break, // ECHILD: nothing left
        }
    }
    nix::unistd::sync();
}

/// Live processes other than this one and kernel threads, as `pid (comm)`, from `/proc`
/// (zombies and kernel threads — children of kthreadd, PID 2 — are not counted).
fn leftover_processes() -> Vec<String> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut left = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me || pid == 2 {
            continue;
        }
        // /proc/PID/stat: "pid (comm) state ppid …"; comm may contain spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let comm = head.split_once('(').map_or("?", |(_, c)| c);
        let mut fields = tail.split_whitespace();
        let state = fields.next().unwrap_or("");
        let ppid = fields.next().unwrap_or("");
        if state == "Z" || ppid == "2" || ppid == "0" {
            continue;
        }
        left.push(format!("{pid} ({comm})"));
    }
    left
}

/// Whether this is the initial PID namespace (a whole machine or VM) rather than a
/// container's: the initial namespace's inode is `PROC_PID_INIT_INO` (include/linux/proc_ns.h).
pub fn in_initial_pid_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    const PROC_PID_INIT_INO: u64 = 0xEFFF_FFFC;
    std::fs::metadata("/proc/self/ns/pid")
        .map(|m| m.ino() == PROC_PID_INIT_INO)
        .unwrap_or(false)
}

/// Bring the machine down (only called in the initial PID namespace; in a container's PID
/// namespace reboot(2) would make vigil look killed by SIGINT, so there it just exits).
pub fn power_off() {
    info!("pid1: powering off");
    nix::unistd::sync();
    let Err(e) = nix::sys::reboot::reboot(nix::sys::reboot::RebootMode::RB_POWER_OFF);
    warn!("pid1: reboot(RB_POWER_OFF) failed: {e}; exiting instead");
}
