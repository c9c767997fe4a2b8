//! Per-container runtime state: what the shell holds for each container slot of the core
//! (its log buffer, log file, and the live run's pid and cgroup).
//!
//! Pure bookkeeping; the shell's components do the syscalls. Must not hold descriptors other
//! than the run's cgroup (whose `memory.events` watch lives with it, see [`Run::cgroup`]).

use std::sync::Arc;

use crate::cgroup::ContainerCgroup;
use crate::config::spec::ContainerSpec;
use crate::core::Generation;
use crate::logs::ContainerLog;
use crate::runtime::shell::Watched;

/// What the shell holds for one container of the core (the core keeps its lifecycle in its own
/// per-container `pod::Slot`): identity, log, and the live run.
pub struct ContainerRuntime {
    pub pod: String,
    pub name: String,
    pub spec: Arc<ContainerSpec>,
    /// `statefile::spec_hash` of `spec` (recorded at each spawn, for adoption after a crash).
    pub spec_hash: u64,
    /// Ring buffer (current and previous run), optional log file, forwarder source name.
    pub log: ContainerLog,
    pub run: Option<Run>,
}

/// One run (generation) of a container.
pub struct Run {
    pub generation: Generation,
    pub pid: Option<u32>,
    /// The run's cgroup, its `memory.events` registered for OOM kills while it runs (taken
    /// out, and so deregistered, when the main process is reaped).
    pub cgroup: Option<Watched<ContainerCgroup>>,
    /// `memory.events` counters last seen, to turn notifications into new OOM kills.
    pub oom_seen: crate::cgroup::OomCounters,
    /// The main process has been reaped.
    pub exited: bool,
    /// The termination message file as it was at spawn (inode, mtime, size), if it existed:
    /// unchanged at exit, it is an earlier run's message and is not taken.
    pub message_stamp: Option<(u64, i64, i64, u64)>,
}
