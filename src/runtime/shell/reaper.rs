//! The reaper: who each child pid belongs to, and collecting every child that has ended.
//!
//! Owns: the pid → owner table. A pid is added when it is spawned and leaves when it is
//! reaped; a cancelled exec probe stays until then (its owner's `seq` no longer matches, so the
//! exit is ignored). Orphans re-parented to vigil (subreaper, PID 1) are reaped and reported
//! with no owner.
//!
//! Must not: reap anywhere else (`waitpid(-1)` takes any child, so this is the only caller of
//! [`process::reap_all`] in a running supervisor), or decide what an exit means.

use std::collections::HashMap;

use crate::config::spec::ProbeKind;
use crate::core::{ContainerKey, Generation};
use crate::process::{self, Reaped};

/// Who a child pid belongs to.
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

/// One ended child: how, and whose.
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    pub owner: PidOwner,
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(Debug, Default)]
pub struct Reaper {
    pids: HashMap<u32, PidOwner>,
}

impl Reaper {
    pub fn track(&mut self, pid: u32, owner: PidOwner) {
        self.pids.insert(pid, owner);
    }

    /// Reaps every ended child; returns those with an owner, in reaping order.
    pub fn reap(&mut self) -> Vec<Ended> {
        let mut out = Vec::new();
        for reaped in process::reap_all() {
            let (pid, code, signal) = match reaped {
                Reaped::Exited { pid, code } => (pid, Some(code), None),
                Reaped::Signaled { pid, signal, .. } => (pid, None, Some(signal)),
            };
            match self.pids.remove(&pid) {
                Some(owner) => out.push(Ended {
                    owner,
                    code,
                    signal,
                }),
                None => log::debug!("reaped pid {pid} (not a container's main process)"),
            }
        }
        out
    }
}
