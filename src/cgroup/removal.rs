//! Killing and removing cgroups: `cgroup.kill` with the SIGKILL-each-pid fallback for kernels
//! before 5.14, waiting for a cgroup to empty (`cgroup.events` `populated 0`, woken by its
//! POLLPRI notification), and rmdir deepest first.
//!
//! Owns no state. On the event loop only [`kill_tree`] (one write) and [`remove_dir`] (one
//! rmdir) may run: the waits ([`wait_unpopulated_file`], [`kill_and_remove`]) are bounded and
//! used at start-up (leftovers), teardown and in tests; the runtime's janitor retries a busy
//! cgroup from the loop instead of waiting for it.

use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use log::debug;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::CgroupError;
use super::files::*;

/// Rounds of "list pids, SIGKILL each" in the kill fallback for kernels without cgroup.kill.
const KILL_FALLBACK_ROUNDS: usize = 200;

/// rmdir; EBUSY (processes or children left) becomes [`CgroupError::Busy`]; gone is fine.
pub(super) fn remove_dir(path: &Path) -> Result<(), CgroupError> {
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(CgroupError::Busy {
            path: path.to_path_buf(),
        }),
        Err(source) => Err(CgroupError::Remove {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Sub-directories (child cgroups) of `dir`.
pub(super) fn sub_dirs(dir: &Path) -> Result<Vec<PathBuf>, CgroupError> {
    let list_err = |source| CgroupError::List {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(list_err(e)),
    };
    for entry in rd {
        let entry = entry.map_err(list_err)?;
        if entry.file_type().map_err(list_err)?.is_dir() {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// rmdir `dir` after its child cgroups, deepest first.
pub(super) fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    for child in sub_dirs(dir)? {
        remove_tree(&child)?;
    }
    remove_dir(dir)
}

pub(super) fn read_procs(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    match read_optional(dir, CGROUP_PROCS)? {
        Some(t) => Ok(parse_procs(&t)),
        None => Ok(Vec::new()),
    }
}

/// `cgroup.kill` on `dir`, or the SIGKILL-each-pid fallback when the file does not exist.
pub(super) fn kill_tree(dir: &Path) -> Result<(), CgroupError> {
    match write_file(dir, CGROUP_KILL, "1") {
        Ok(()) => Ok(()),
        Err(CgroupError::Write { source, .. })
            if source.kind() == io::ErrorKind::NotFound && dir.exists() =>
        {
            kill_by_pids(dir)
        }
        Err(CgroupError::Write { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// The fallback for kernels before 5.14: SIGKILL every pid listed in `dir` and below, again
/// and again until no pid is listed (a process forking between our read and our kill can
/// otherwise escape), bounded. Exited processes leave cgroup.procs at once, zombies included
/// (cgroup-v2.rst), so an empty listing means nothing is left to kill.
pub(crate) fn kill_by_pids(dir: &Path) -> Result<(), CgroupError> {
    for _ in 0..KILL_FALLBACK_ROUNDS {
        let mut pids = Vec::new();
        collect_pids(dir, &mut pids)?;
        if pids.is_empty() {
            return Ok(());
        }
        for (pid, from) in pids {
            match kill(Pid::from_raw(pid), Signal::SIGKILL) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(source) => {
                    return Err(CgroupError::Signal {
                        path: from,
                        pid,
                        source,
                    });
                }
            }
        }
        std::thread::yield_now();
    }
    debug!(
        "{}: processes still listed after SIGKILL rounds",
        dir.display()
    );
    Ok(())
}

pub(super) fn collect_pids(dir: &Path, out: &mut Vec<(i32, PathBuf)>) -> Result<(), CgroupError> {
    out.extend(read_procs(dir)?.into_iter().map(|p| (p, dir.to_path_buf())));
    for child in sub_dirs(dir)? {
        collect_pids(&child, out)?;
    }
    Ok(())
}

/// Kill everything in `dir`, wait (bounded) for it to empty, then remove the tree.
pub(super) fn kill_and_remove(dir: &Path, wait: Duration) -> Result<(), CgroupError> {
    kill_tree(dir)?;
    let events = open_read(dir, CGROUP_EVENTS)?;
    if !wait_unpopulated_file(&events, dir, wait)? {
        return Err(CgroupError::Busy {
            path: dir.to_path_buf(),
        });
    }
    remove_tree(dir)
}

pub(super) fn wait_unpopulated_file(
    events: &File,
    dir: &Path,
    timeout: Duration,
) -> Result<bool, CgroupError> {
    let path = dir.join(CGROUP_EVENTS);
    let deadline = Instant::now() + timeout;
    loop {
        // Reading also re-arms the kernfs notification for this descriptor.
        if !parse_populated(&reread(events, &path)?, &path)? {
            return Ok(true);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        // Wake on the POLLPRI change notification; cap each wait so a missed one costs little.
        let ms = left.as_millis().min(50) as u16;
        let mut fds = [PollFd::new(events.as_fd(), PollFlags::POLLPRI)];
        match poll(&mut fds, PollTimeout::from(ms.max(1))) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(source) => return Err(CgroupError::Wait { path, source }),
        }
    }
}
