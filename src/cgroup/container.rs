//! One run's cgroup: the handle the runtime keeps for a container (or exec probe) while it
//! runs — the directory and interface-file descriptors clone3, the kill and the OOM watch
//! need, and its figures for status and metrics — created fresh per run in its pod directory.
//!
//! Owns those descriptors (closed when the handle drops). Must not: block (the one bounded
//! wait, [`ContainerCgroup::wait_unpopulated`], is for start-up leftovers and tests), or
//! remove anything but its own directory.

use std::cell::Cell;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use log::{debug, warn};
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use super::files::{self, *};
use super::removal::*;
use super::{CgroupError, OomCounters, limits};
use super::{Figures, Limits};

/// How long startup waits for a leftover cgroup to empty after it was killed.
pub(super) const LEFTOVER_WAIT: Duration = Duration::from_secs(2);

/// The descriptors of a [`ContainerCgroup`], by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CgroupFds {
    pub dir: std::os::fd::RawFd,
    pub procs: std::os::fd::RawFd,
    pub events: std::os::fd::RawFd,
    pub memory_events: Option<std::os::fd::RawFd>,
}

/// One container's (or exec probe's) cgroup and the descriptors the runtime needs.
#[derive(Debug)]
pub struct ContainerCgroup {
    path: PathBuf,
    /// The directory itself, O_RDONLY|O_DIRECTORY|O_CLOEXEC: for `clone3(CLONE_INTO_CGROUP)`.
    dir: File,
    /// `cgroup.procs`, O_WRONLY|O_CLOEXEC: where clone3 is unusable, the child writes "0" to it
    /// in pre_exec.
    procs: File,
    /// `cgroup.events`, O_RDONLY: kernfs signals changes as EPOLLPRI.
    events: File,
    /// `memory.events`, if the memory controller is enabled for this cgroup.
    memory_events: Option<File>,
    baseline: OomCounters,
    /// The last [`ContainerCgroup::figures`] and when they were read, for
    /// [`ContainerCgroup::figures_at`].
    figures_cache: Cell<Option<(Instant, Figures)>>,
    /// Figure files found absent ([`FigureFile`] bits): not looked up again for this cgroup's
    /// life, which is one run. The memory and pids controllers, where the host has them, are
    /// enabled before any container cgroup is created ([`Manager::setup`]); a reload only adds
    /// cpu, whose `cpu.stat` exists without it; `memory.peak` and PSI files depend on the
    /// kernel. On a host without the memory and pids controllers this saves four failed
    /// lookups per container per reading.
    absent: Cell<u8>,
}

/// The interface files [`ContainerCgroup::figures`] reads, as bits of `absent`.
#[derive(Clone, Copy)]
enum FigureFile {
    MemoryCurrent = 1,
    MemoryPeak = 2,
    MemoryMax = 4,
    CpuStat = 8,
    PidsCurrent = 16,
    MemoryPressure = 32,
}

impl FigureFile {
    fn name(self) -> &'static str {
        match self {
            FigureFile::MemoryCurrent => MEMORY_CURRENT,
            FigureFile::MemoryPeak => MEMORY_PEAK,
            FigureFile::MemoryMax => MEMORY_MAX,
            FigureFile::CpuStat => CPU_STAT,
            FigureFile::PidsCurrent => PIDS_CURRENT,
            FigureFile::MemoryPressure => MEMORY_PRESSURE,
        }
    }
}

/// How old the figures a status reply shows may be. Reading them costs six file opens per
/// container (more than the rest of a status reply): clients asking many times a second
/// share a reading. Short enough that a client sampling once a second (`vigil top`'s CPU %
/// from `cpu_usage_usec` deltas) always gets its own fresh reading, and two clients sharing
/// one skew such a rate by at most a tenth.
pub const FIGURES_MAX_AGE: Duration = Duration::from_millis(100);

impl ContainerCgroup {
    pub(super) fn create_fresh(
        path: &Path,
        res: Option<&Limits>,
    ) -> Result<ContainerCgroup, CgroupError> {
        // mkdir first: EEXIST is the rare case, no stat(2) on every spawn to look for it.
        if !make_dir(path)? {
            warn!(
                "cgroup {} exists from an earlier run; replacing it",
                path.display()
            );
            kill_and_remove(path, LEFTOVER_WAIT)?;
            make_dir(path)?;
        }
        match Self::open(path, res) {
            Ok(c) => Ok(c),
            Err(e) => {
                // Do not leave a half-configured cgroup behind.
                let _ = std::fs::remove_dir(path);
                Err(e)
            }
        }
    }

    pub(super) fn open(path: &Path, res: Option<&Limits>) -> Result<ContainerCgroup, CgroupError> {
        if let Some(res) = res {
            limits::apply(path, res)?;
        }
        let mut c = Self::open_files(path, OomCounters::default())?;
        c.baseline = c.oom_counters()?;
        Ok(c)
    }

    /// Opens the cgroup's directory and files, with `baseline` as the OOM counters its run
    /// started from (not read here).
    fn open_files(path: &Path, baseline: OomCounters) -> Result<ContainerCgroup, CgroupError> {
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(path)
            .map_err(|source| CgroupError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        // The files relative to the directory just opened: no walk of the whole path again
        // for each (a container is started into a fresh cgroup, so this runs per start).
        let procs = open_in(&dir, path, CGROUP_PROCS, OFlag::O_WRONLY)?;
        let events = open_in(&dir, path, CGROUP_EVENTS, OFlag::O_RDONLY)?;
        let memory_events = match open_in(&dir, path, MEMORY_EVENTS, OFlag::O_RDONLY) {
            Ok(f) => Some(f),
            Err(CgroupError::Open { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                None
            }
            Err(e) => return Err(e),
        };
        Ok(ContainerCgroup {
            path: path.to_path_buf(),
            dir,
            procs,
            events,
            memory_events,
            baseline,
            figures_cache: Cell::new(None),
            absent: Cell::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens an existing container cgroup again (`vigil upgrade`: the new instance takes over
    /// a running container's cgroup), with the OOM baseline its run started from. The baseline
    /// travels in the handoff state, so `memory.events` is not read here (the take-over opens
    /// every running container's cgroup while the loop is away).
    pub fn reopen(path: &Path, baseline: OomCounters) -> Result<ContainerCgroup, CgroupError> {
        Self::open_files(path, baseline)
    }

    /// The descriptor numbers of the open files (`vigil upgrade` hands them over, so that the
    /// new instance does not look every path up again: [`ContainerCgroup::from_fds`]).
    pub fn raw_fds(&self) -> CgroupFds {
        use std::os::fd::AsRawFd;
        CgroupFds {
            dir: self.dir.as_raw_fd(),
            procs: self.procs.as_raw_fd(),
            events: self.events.as_raw_fd(),
            memory_events: self.memory_events.as_ref().map(|f| f.as_raw_fd()),
        }
    }

    /// The cgroup at `path` from descriptors handed over by `vigil upgrade` (opened by the
    /// old instance as [`ContainerCgroup::reopen`] does), with its run's OOM baseline.
    pub fn from_fds(
        path: PathBuf,
        dir: std::os::fd::OwnedFd,
        procs: std::os::fd::OwnedFd,
        events: std::os::fd::OwnedFd,
        memory_events: Option<std::os::fd::OwnedFd>,
        baseline: OomCounters,
    ) -> ContainerCgroup {
        ContainerCgroup {
            path,
            dir: File::from(dir),
            procs: File::from(procs),
            events: File::from(events),
            memory_events: memory_events.map(File::from),
            baseline,
            figures_cache: Cell::new(None),
            absent: Cell::new(0),
        }
    }

    /// The cgroup directory opened O_RDONLY|O_DIRECTORY (CLOEXEC): the fd
    /// `clone3(CLONE_INTO_CGROUP)` creates a child in.
    pub fn dir_fd(&self) -> BorrowedFd<'_> {
        self.dir.as_fd()
    }

    /// `cgroup.procs` opened for writing (CLOEXEC). In the child's pre_exec:
    /// `write(fd, "0")` places the child before exec. Since Linux 5.16 the permission check
    /// uses the opener's credentials, so it still works after dropping privileges.
    pub fn procs_fd(&self) -> BorrowedFd<'_> {
        self.procs.as_fd()
    }

    /// `cgroup.events`, for `mio::unix::SourceFd` with `Interest::PRIORITY`. Each event means
    /// "re-read": call [`ContainerCgroup::populated`] (which reads through this descriptor and so
    /// also re-arms it).
    pub fn events_fd(&self) -> BorrowedFd<'_> {
        self.events.as_fd()
    }

    /// `memory.events`, for mio the same way (`Interest::PRIORITY`); `None` without the memory
    /// controller. Re-read with [`ContainerCgroup::oom_counters`] after each event.
    pub fn memory_events_fd(&self) -> Option<BorrowedFd<'_>> {
        self.memory_events.as_ref().map(|f| f.as_fd())
    }

    /// Whether any process is in this cgroup or below (`cgroup.events` `populated`).
    pub fn populated(&self) -> Result<bool, CgroupError> {
        let path = self.path.join(CGROUP_EVENTS);
        let text = reread(&self.events, &path)?;
        parse_populated(&text, &path)
    }

    /// PIDs directly in this cgroup.
    pub fn pids(&self) -> Result<Vec<i32>, CgroupError> {
        read_procs(&self.path)
    }

    /// SIGKILLs every process in this cgroup and below: `cgroup.kill` (Linux 5.14+), else a
    /// bounded loop of SIGKILL to each listed pid until none is left. Does not wait.
    pub fn kill(&self) -> Result<(), CgroupError> {
        kill_tree(&self.path)
    }

    /// Current `memory.events` counters (all 0 without the memory controller).
    pub fn oom_counters(&self) -> Result<OomCounters, CgroupError> {
        match &self.memory_events {
            Some(f) => Ok(OomCounters::parse(&reread(
                f,
                &self.path.join(MEMORY_EVENTS),
            )?)),
            None => Ok(OomCounters::default()),
        }
    }

    /// The counters when this cgroup was created.
    pub fn oom_baseline(&self) -> OomCounters {
        self.baseline
    }

    /// How much the counters rose during this run. Read it when the main process is reaped,
    /// before [`ContainerCgroup::remove`].
    pub fn oom_delta_since_baseline(&self) -> Result<OomCounters, CgroupError> {
        Ok(self.oom_counters()?.since(self.baseline))
    }

    /// `memory.max` (`None` for `max` or without the memory controller).
    pub fn memory_max(&self) -> Option<u64> {
        self.read_figure(FigureFile::MemoryMax)
            .and_then(|t| parse_max_value(&t))
            .and_then(|v| v.limit())
    }

    /// [`Self::figures`], re-read only when the last reading is older than
    /// [`FIGURES_MAX_AGE`] at `now`.
    pub fn figures_at(&self, now: Instant) -> Figures {
        if let Some((at, f)) = self.figures_cache.get()
            && now.saturating_duration_since(at) < FIGURES_MAX_AGE
            && at <= now
        {
            return f;
        }
        let f = self.figures();
        self.figures_cache.set(Some((now, f)));
        f
    }

    /// Figures for status, read now; whatever cannot be read is `None`. Each file is opened
    /// relative to the cgroup's directory descriptor ([`files::read_in_dir`]); files found
    /// absent once are not looked up again.
    pub fn figures(&self) -> Figures {
        Figures {
            memory_current: self
                .read_figure(FigureFile::MemoryCurrent)
                .and_then(|t| parse_u64(&t)),
            memory_peak: self
                .read_figure(FigureFile::MemoryPeak)
                .and_then(|t| parse_u64(&t)),
            memory_max: self.memory_max(),
            cpu_usage_usec: self
                .read_figure(FigureFile::CpuStat)
                .and_then(|t| parse_cpu_usage_usec(&t)),
            pids_current: self
                .read_figure(FigureFile::PidsCurrent)
                .and_then(|t| parse_u64(&t)),
            memory_pressure_some_avg10: self
                .read_figure(FigureFile::MemoryPressure)
                .and_then(|t| parse_pressure_some_avg10(&t)),
        }
    }

    fn read_figure(&self, file: FigureFile) -> Option<String> {
        let bit = file as u8;
        if self.absent.get() & bit != 0 {
            return None;
        }
        match files::read_in_dir(&self.dir, &self.path, file.name()) {
            Ok(Some(t)) => Some(t),
            Ok(None) => {
                self.absent.set(self.absent.get() | bit);
                None
            }
            Err(e) => {
                debug!("{e}");
                None
            }
        }
    }

    /// A fresh child cgroup `<this>/<name>` (e.g. `probe-liveness` for an exec probe), without
    /// limits. Allowed while this cgroup holds processes because it enables no controllers for
    /// its children (no-internal-processes applies only to cgroups with enabled controllers).
    pub fn create_child(&self, name: &str) -> Result<ContainerCgroup, CgroupError> {
        check_name(name)?;
        Self::create_fresh(&self.path.join(name), None)
    }

    /// Removes this cgroup (and any empty child cgroups, deepest first). [`CgroupError::Busy`]
    /// while processes remain: retry after the next `populated 0` event.
    pub fn remove(&self) -> Result<(), CgroupError> {
        remove_tree(&self.path)
    }

    /// Blocks up to `timeout` until `populated` is 0 (poll(2) on `cgroup.events` for POLLPRI):
    /// `Ok(true)` once empty. Not for the event loop: startup, leftovers and tests only.
    pub fn wait_unpopulated(&self, timeout: Duration) -> Result<bool, CgroupError> {
        wait_unpopulated_file(&self.events, &self.path, timeout)
    }
}

/// mkdir; `Ok(true)` if created, `Ok(false)` if it existed.
pub(super) fn make_dir(path: &Path) -> Result<bool, CgroupError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(source) => Err(CgroupError::Create {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `name` in the cgroup directory `dir` (at `path`, for the error), opened with `flags` and
/// `O_CLOEXEC` relative to the directory's descriptor (openat(2)).
pub(super) fn open_in(
    dir: &File,
    path: &Path,
    name: &str,
    flags: OFlag,
) -> Result<File, CgroupError> {
    nix::fcntl::openat(dir, name, flags | OFlag::O_CLOEXEC, Mode::empty())
        .map(File::from)
        .map_err(|e| CgroupError::Open {
            path: path.join(name),
            source: io::Error::from(e),
        })
}

/// A cgroup name: one non-empty path component.
pub(super) fn check_name(name: &str) -> Result<(), CgroupError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(CgroupError::BadRoot {
            path: PathBuf::from(name),
            reason: "not a valid cgroup name (one path component)".to_string(),
        });
    }
    Ok(())
}
