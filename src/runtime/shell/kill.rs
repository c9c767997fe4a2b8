//! Killing a run's whole process tree — the one place that knows how.
//!
//! With a cgroup: `cgroup.kill` (cgroup v2 docs, "cgroup.kill"; the cgroup layer falls back to a
//! bounded SIGKILL loop over `cgroup.procs` on kernels before 5.14). Without one, or when that
//! fails: SIGKILL to the process group, which every child leads (setsid in the child setup,
//! so pgid = the main pid and a session leader cannot leave its group).
//!
//! Must not: wait for anything to die, or signal a pid that may have been reused: the group is
//! only signalled by id, and callers pass it only while the run is theirs.

use log::{debug, warn};

use crate::cgroup::ContainerCgroup;
use crate::process;

/// What [`kill_tree`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Killed {
    /// `cgroup.kill` (or its fallback loop) took the whole cgroup.
    Cgroup,
    /// SIGKILL was sent to the process group.
    Group,
    /// Nothing was left to signal: no cgroup and no group given, or the group has no member
    /// left (ESRCH) — not an error: a tree that is already gone is what was asked for.
    Nothing,
}

/// SIGKILLs everything in `cgroup` (if given), else — or if that fails — every process in the
/// group `pgid` (if given).
pub fn kill_tree(cgroup: Option<&ContainerCgroup>, pgid: Option<u32>) -> Killed {
    if let Some(cg) = cgroup {
        match cg.kill() {
            Ok(()) => return Killed::Cgroup,
            Err(e) => warn!("{e}"),
        }
    }
    let Some(pgid) = pgid else {
        return Killed::Nothing;
    };
    match process::signal_group(pgid, libc::SIGKILL) {
        Ok(()) => Killed::Group,
        Err(e) => {
            debug!("{e}");
            Killed::Nothing
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::time::{Duration, Instant};

    /// Whether `pid` is a live (not zombie) `sleep`.
    fn sleep_alive(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat.contains("(sleep)") && !stat.contains(") Z "),
            Err(_) => false,
        }
    }

    #[test]
    fn without_a_cgroup_the_whole_process_group_dies() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 300 & echo $!; wait"])
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        // `$!` is printed as soon as the shell has forked, possibly before the child has
        // exec'd sleep: wait until it is one.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !sleep_alive(grandchild) {
            assert!(Instant::now() < deadline, "{grandchild} never became sleep");
            std::thread::sleep(Duration::from_millis(5));
        }

        kill_tree(None, Some(child.id()));

        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        let deadline = Instant::now() + Duration::from_secs(20);
        while sleep_alive(grandchild) {
            assert!(
                Instant::now() < deadline,
                "grandchild {grandchild} survived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn nothing_to_kill_is_not_an_error() {
        assert_eq!(kill_tree(None, None), Killed::Nothing);
        // A group whose only member has exited and been reaped: nothing is signalled, and
        // nothing panics or errs.
        let mut child = std::process::Command::new("/bin/true")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        child.wait().unwrap();
        assert_eq!(kill_tree(None, Some(pgid)), Killed::Nothing);
    }

    #[test]
    fn a_live_group_is_signalled() {
        let mut child = std::process::Command::new("/bin/sleep")
            .arg("300")
            .process_group(0)
            .spawn()
            .unwrap();
        assert_eq!(kill_tree(None, Some(child.id())), Killed::Group);
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
