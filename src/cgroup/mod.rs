//! vigil's own thin cgroup v2 layer.
//!
//! Owns everything vigil does with cgroup v2: finding the hierarchy and vigil's place in it
//! ([`discover`]), the kernel file vocabulary and parsers ([`files`]), resource limits
//! ([`limits`]), and the subtree vigil manages ([`Manager`], [`ContainerCgroup`]): the
//! delegation dance (a `supervisor` leaf for vigil itself, controllers enabled in
//! `cgroup.subtree_control`), one fresh `<root>/<pod>/<container>` cgroup per run, kill,
//! OOM counters, resource figures and removal.
//!
//! Wiring into the event loop (mio): register [`ContainerCgroup::events_fd`] and, if present,
//! [`ContainerCgroup::memory_events_fd`] with `mio::unix::SourceFd` and `Interest::PRIORITY`
//! (kernfs reports a changed interface file as EPOLLPRI|EPOLLERR; verified for cgroup.events
//! on the dev host, and memory.events is notified the same way by the kernel, also for every
//! ancestor). On each event re-read through the handle — `populated()` / `oom_counters()` —
//! which also re-arms the descriptor; events can coalesce, so always compare values, never
//! count events. Deregister before dropping the handle.
//!
//! Every operation is parameterised by a root directory, so tests point it at a temp dir; it
//! never writes outside that root, with one documented exception (see [`Manager::setup`]).
//! Kernel behaviour cited from Documentation/admin-guide/cgroup-v2.rst unless said otherwise.
//! It must not decide lifecycle policy (when to kill, restart, report OOM): the runtime and the
//! core do; this layer only performs and reports. It speaks its own types ([`Limits`],
//! [`RootSetting`], [`Figures`]) and imports neither the config nor the core: `crate::host`
//! builds the first two from the config, and `control::render` puts the figures on the wire.

pub mod container;
pub mod discover;
pub mod files;
pub mod limits;
pub mod removal;
pub mod subtree;

use std::io;
use std::path::PathBuf;

pub use container::{CgroupFds, ContainerCgroup};
pub use subtree::{Manager, Ownership};

/// The limits of one container cgroup, in cgroup v2 terms; `None` (or `false`) leaves the
/// file alone. See [`limits`] for the value formats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    /// `memory.max`, bytes.
    pub memory_max: Option<u64>,
    /// `memory.high`, bytes.
    pub memory_high: Option<u64>,
    /// `memory.swap.max`, bytes.
    pub swap_max: Option<u64>,
    /// `pids.max`.
    pub pids_max: Option<u64>,
    /// `cpu.max` in cores (1.5 → `150000 100000`).
    pub cpu_max: Option<f64>,
    /// `cpu.weight`, 1..=10000.
    pub cpu_weight: Option<u32>,
    /// `memory.oom.group` = 1.
    pub oom_group: bool,
}

/// Where vigil's cgroup subtree goes (see [`Manager::setup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootSetting {
    /// Found from vigil's own cgroup on the cgroup2 mount ([`discover`]).
    Auto,
    /// No cgroups: the runtime tracks process groups instead.
    None,
    /// An explicit directory on a cgroup2 mount that vigil owns.
    Path(PathBuf),
}

/// Figures read from a container cgroup for status; whatever cannot be read is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// `memory.current`.
    pub memory_current: Option<u64>,
    /// `memory.peak` (Linux 5.19).
    pub memory_peak: Option<u64>,
    /// `memory.max` (`None` for `max`).
    pub memory_max: Option<u64>,
    /// `usage_usec` of `cpu.stat`.
    pub cpu_usage_usec: Option<u64>,
    /// `pids.current`.
    pub pids_current: Option<u64>,
    /// `memory.pressure` `some avg10`.
    pub memory_pressure_some_avg10: Option<f64>,
}

/// Everything that can go wrong in the cgroup layer; each variant names the failed operation
/// and carries the path (or pid) it failed on.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("writing {value:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("opening {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("listing {path}: {source}")]
    List { path: PathBuf, source: io::Error },
    #[error("creating cgroup {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("removing cgroup {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
    /// rmdir refused because processes are still in the cgroup: retry after the next
    /// `populated 0` notification.
    #[error("cgroup {path} still has processes")]
    Busy { path: PathBuf },
    #[error("parsing {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("sending SIGKILL to pid {pid} in {path}: {source}")]
    Signal {
        path: PathBuf,
        pid: i32,
        source: nix::Error,
    },
    #[error("waiting for {path} to empty: {source}")]
    Wait { path: PathBuf, source: nix::Error },
    #[error("no cgroup2 file system is mounted (per {path})")]
    NoCgroup2 { path: PathBuf },
    #[error("no cgroup v2 membership (`0::` line) in {path}")]
    NoOwnCgroup { path: PathBuf },
    #[error("{path} is not on a cgroup2 file system")]
    NotCgroup2 { path: PathBuf },
    #[error("{path} is not usable for vigil's cgroup: {reason}")]
    BadRoot { path: PathBuf, reason: String },
    /// `cgroup_root = "none"` and containers that set limits: the message names each.
    #[error("{0}")]
    LimitsWithoutCgroups(String),
    /// Needed controllers are not enabled for vigil's subtree; the message explains why.
    #[error("{message}")]
    ControllersMissing { message: String },
    /// cgroup v2 is unusable but the configuration sets resource limits.
    #[error("resource limits need the {needs} controller(s) but cgroup v2 is not usable: {source}")]
    Unusable {
        needs: String,
        #[source]
        source: Box<CgroupError>,
    },
}

impl CgroupError {
    /// The underlying OS error, if any.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            CgroupError::Read { source, .. }
            | CgroupError::Write { source, .. }
            | CgroupError::Open { source, .. }
            | CgroupError::List { source, .. }
            | CgroupError::Create { source, .. }
            | CgroupError::Remove { source, .. } => Some(source),
            _ => None,
        }
    }

    /// Whether this says "cgroup v2 is not available to us here" (not mounted, no permission,
    /// read-only) rather than a real fault: vigil then runs without cgroups if nothing needs
    /// them.
    pub fn is_unavailable(&self) -> bool {
        match self {
            CgroupError::NoCgroup2 { .. } | CgroupError::NoOwnCgroup { .. } => true,
            _ => self
                .io_error()
                .and_then(io::Error::raw_os_error)
                .is_some_and(|e| e == libc::EACCES || e == libc::EPERM || e == libc::EROFS),
        }
    }
}

bitflags::bitflags! {
    /// A set of cgroup v2 controllers vigil uses.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
    pub struct Controllers: u8 {
        const MEMORY = 1;
        const PIDS = 2;
        const CPU = 4;
        const IO = 8;
    }
}

impl Controllers {
    pub const NONE: Controllers = Controllers::empty();
    /// Every controller vigil knows, in the order they are named in messages.
    const ALL: [(Controllers, &'static str); 4] = [
        (Controllers::MEMORY, "memory"),
        (Controllers::PIDS, "pids"),
        (Controllers::CPU, "cpu"),
        (Controllers::IO, "io"),
    ];

    /// The controllers the limits in `res` need.
    pub fn from_limits(res: &Limits) -> Controllers {
        let mut c = Controllers::NONE;
        if res.memory_max.is_some()
            || res.memory_high.is_some()
            || res.swap_max.is_some()
            || res.oom_group
        {
            c |= Controllers::MEMORY;
        }
        if res.pids_max.is_some() {
            c |= Controllers::PIDS;
        }
        if res.cpu_max.is_some() || res.cpu_weight.is_some() {
            c |= Controllers::CPU;
        }
        c
    }

    /// Parses controller names (unknown names such as `hugetlb` are ignored).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Controllers {
        let mut c = Controllers::NONE;
        for n in names {
            if let Some((k, _)) = Self::ALL.iter().find(|(_, name)| *name == n) {
                c |= *k;
            }
        }
        c
    }

    /// Names in the fixed order memory, pids, cpu, io.
    pub fn names(self) -> Vec<&'static str> {
        Self::ALL
            .iter()
            .filter(|(k, _)| self.contains(*k))
            .map(|(_, n)| *n)
            .collect()
    }
}

/// Counters from `memory.events` (hierarchical: they include descendants). Missing keys
/// (`oom_group_kill` needs Linux 5.17) read as 0.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OomCounters {
    /// The cgroup hit its limit and the OOM killer was invoked (or allocation failed).
    pub oom: u64,
    /// Processes in the cgroup killed by any OOM killer.
    pub oom_kill: u64,
    /// Times the whole group was killed (`memory.oom.group`).
    pub oom_group_kill: u64,
}

impl OomCounters {
    /// Parses `memory.events` text.
    pub fn parse(text: &str) -> OomCounters {
        let get = |k| files::flat_keyed_u64(text, k).unwrap_or(0);
        OomCounters {
            oom: get("oom"),
            oom_kill: get("oom_kill"),
            oom_group_kill: get("oom_group_kill"),
        }
    }

    /// How much each counter rose since `base` (never negative).
    pub fn since(self, base: OomCounters) -> OomCounters {
        OomCounters {
            oom: self.oom.saturating_sub(base.oom),
            oom_kill: self.oom_kill.saturating_sub(base.oom_kill),
            oom_group_kill: self.oom_group_kill.saturating_sub(base.oom_group_kill),
        }
    }
}

/// The message for needed controllers that vigil's subtree does not have, e.g. "memory
/// controller not available in cgroup2 at /sys/fs/cgroup/unified (available: hugetlb); it is
/// bound to cgroup v1 on this host". `v1_bound(name)` says whether a v1 hierarchy has it.
pub fn missing_controllers_message(
    missing: Controllers,
    at: &std::path::Path,
    available: &[String],
    v1_bound: impl Fn(&str) -> bool,
) -> String {
    let avail = if available.is_empty() {
        "none".to_string()
    } else {
        available.join(" ")
    };
    let (v1, undelegated): (Vec<&str>, Vec<&str>) =
        missing.names().into_iter().partition(|n| v1_bound(n));
    let mut parts = Vec::new();
    for (names, v1) in [(v1, true), (undelegated, false)] {
        let (list, it_is, it) = match names.as_slice() {
            [] => continue,
            [one] => (format!("{one} controller"), "it is", "it"),
            [head @ .., last] => (
                format!("{} and {last} controllers", head.join(", ")),
                "they are",
                "them",
            ),
        };
        let why = if v1 {
            format!(
                "{it_is} bound to cgroup v1 on this host (cgroup2 gets {it} when the host boots \
                 with systemd.unified_cgroup_hierarchy=1)"
            )
        } else {
            format!(
                "{it_is} not delegated to this cgroup (enable {it} in the parent's \
                 cgroup.subtree_control, e.g. with systemd Delegate=yes)"
            )
        };
        parts.push(format!(
            "{list} not available in cgroup2 at {} (available: {avail}); {why}",
            at.display()
        ));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn controllers_from_resources_follow_the_limits() {
        assert!(Controllers::from_limits(&Limits::default()).is_empty());
        let r = Limits {
            memory_max: Some(1),
            cpu_weight: Some(100),
            ..Limits::default()
        };
        assert_eq!(Controllers::from_limits(&r).names(), vec!["memory", "cpu"]);
        let r = Limits {
            oom_group: true,
            pids_max: Some(3),
            ..Limits::default()
        };
        assert_eq!(
            Controllers::from_limits(&r),
            Controllers::MEMORY | Controllers::PIDS
        );
    }

    #[test]
    fn controller_names_ignore_unknown_ones() {
        let c = Controllers::from_names("cpuset cpu io memory hugetlb pids".split(' '));
        assert!(c.contains(Controllers::MEMORY | Controllers::PIDS | Controllers::CPU));
        assert!(Controllers::from_names(["hugetlb"]).is_empty());
    }

    #[test]
    fn oom_counters_parse_and_delta() {
        let base = OomCounters::parse("low 0\nhigh 0\nmax 4\noom 2\noom_kill 1\n");
        assert_eq!(
            base,
            OomCounters {
                oom: 2,
                oom_kill: 1,
                oom_group_kill: 0
            }
        );
        let now = OomCounters::parse("oom 5\noom_kill 3\noom_group_kill 1\n");
        assert_eq!(
            now.since(base),
            OomCounters {
                oom: 3,
                oom_kill: 2,
                oom_group_kill: 1
            }
        );
        assert_eq!(base.since(now), OomCounters::default());
    }

    #[test]
    fn missing_memory_message_names_v1_binding_on_hybrid_hosts() {
        let msg = missing_controllers_message(
            Controllers::MEMORY,
            Path::new("/sys/fs/cgroup/unified"),
            &["hugetlb".to_string()],
            |c| c == "memory",
        );
        assert_eq!(
            msg,
            "memory controller not available in cgroup2 at /sys/fs/cgroup/unified \
             (available: hugetlb); it is bound to cgroup v1 on this host (cgroup2 gets it \
             when the host boots with systemd.unified_cgroup_hierarchy=1)"
        );
    }

    #[test]
    fn missing_controller_message_without_v1_points_at_delegation() {
        let msg = missing_controllers_message(
            Controllers::PIDS | Controllers::CPU,
            Path::new("/sys/fs/cgroup/system.slice/vigil.service"),
            &[],
            |_| false,
        );
        // Said once for both, not once per controller.
        assert_eq!(
            msg,
            "pids and cpu controllers not available in cgroup2 at \
             /sys/fs/cgroup/system.slice/vigil.service (available: none); they are not \
             delegated to this cgroup (enable them in the parent's cgroup.subtree_control, e.g. \
             with systemd Delegate=yes)"
        );
    }

    #[test]
    fn unavailable_errors_are_recognised() {
        let e = CgroupError::Create {
            path: "/x".into(),
            source: io::Error::from_raw_os_error(libc::EROFS),
        };
        assert!(e.is_unavailable());
        let e = CgroupError::Create {
            path: "/x".into(),
            source: io::Error::from_raw_os_error(libc::ENOSPC),
        };
        assert!(!e.is_unavailable());
    }
}

#[cfg(test)]
mod native_tests;
