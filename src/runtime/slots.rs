//! Per-container runtime state: what the shell holds for each container slot of the core
//! (its log buffer, log file, the live run's pid, pipes and cgroup).
//!
//! Pure bookkeeping; the shell does the syscalls.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use mio::Token;

use crate::cgroup::ContainerCgroup;
use crate::config::spec::{ContainerSpec, ProbeKind};
use crate::core::{ContainerKey, Generation};
use crate::logs::ContainerLog;

/// One container slot.
pub struct Slot {
    pub pod: String,
    pub name: String,
    pub spec: Arc<ContainerSpec>,
    /// Ring buffer (current and previous run), optional log file, forwarder source name.
    pub log: ContainerLog,
    pub run: Option<Run>,
}

/// One run (generation) of a container.
pub struct Run {
    pub generation: Generation,
    pub pid: Option<u32>,
    pub cgroup: Option<ContainerCgroup>,
    /// `memory.events` counters last seen, to turn notifications into new OOM kills.
    pub oom_seen: crate::cgroup::OomCounters,
    /// Output pipes (read ends) still open, by token.
    pub pipes: Vec<Token>,
    /// The main process has been reaped.
    pub exited: bool,
}

/// Who a token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenOwner {
    /// A container's stdout/stderr read end.
    Pipe {
        key: ContainerKey,
        generation: Generation,
    },
    /// A container cgroup's `memory.events` (OOM kills while it runs).
    MemoryEvents {
        key: ContainerKey,
        generation: Generation,
    },
    /// A cgroup left by a finished run, waiting to be empty so it can be removed.
    DyingCgroup { id: u64 },
    /// A network probe's socket.
    NetProbe { key: ContainerKey, kind: ProbeKind },
    /// An exec probe's output pipe.
    ProbePipe { key: ContainerKey, kind: ProbeKind },
}

/// Who a child pid belongs to (the reaper's table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PidOwner {
    Main {
        key: ContainerKey,
        generation: Generation,
    },
    ExecProbe {
        key: ContainerKey,
        kind: ProbeKind,
        seq: u64,
    },
}

/// An in-flight probe attempt.
pub struct ProbeRun {
    pub generation: Generation,
    pub seq: u64,
    pub started: Instant,
    pub how: ProbeHow,
}

pub enum ProbeHow {
    Net {
        probe: crate::probe::NetProbe,
        token: Token,
    },
    Exec {
        pid: u32,
        pipe: Option<(OwnedFd, Token)>,
        output: Vec<u8>,
        cgroup: Option<ContainerCgroup>,
    },
}

/// Per (container, probe kind): at most one attempt in flight.
pub type Probes = HashMap<(ContainerKey, ProbeKind), ProbeRun>;
