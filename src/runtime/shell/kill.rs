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

/// SIGKILLs everything in `cgroup` (if given), else — or if that fails — every process in the
/// group `pgid` (if given).
pub fn kill_tree(cgroup: Option<&ContainerCgroup>, pgid: Option<u32>) {
    if let Some(cg) = cgroup {
        match cg.kill() {
            Ok(()) => return,
            Err(e) => warn!("{e}"),
        }
    }
    if let Some(pgid) = pgid
        && let Err(e) = process::signal_group(pgid, libc::SIGKILL)
    {
        debug!("{e}");
    }
}
