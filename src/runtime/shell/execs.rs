//! Containers whose main process has been cloned but whose exec is not confirmed yet: the error
//! pipe of each (a [`process::PendingExec`]), registered with the poll until it settles.
//!
//! Why: waiting for each child's exec before cloning the next one serialises every start on
//! the child's setup and execve (milliseconds each under load); with the pipe watched, the loop
//! clones the next container while this one's child execs on the other core. Meanwhile the core
//! keeps the container in `Creating` (status: waiting, `ContainerCreating`) until `runs` feeds
//! `Spawned` (EOF after the child's "alive" byte: it exec'd) or `SpawnFailed` (its report of
//! the failed step and errno, the same error text as a synchronous spawn gives).
//!
//! Owns: the pending pipes, one per container at most (a new run starts only after the previous
//! one ended, and an ending run is settled first, see `runs`' `on_main_exit`). Must not:
//! feed the core or touch a run (`runs` does, with what [`PendingExecs`] returns), or
//! block except in [`PendingExecs::settle`] (a child known to have exited: its report is
//! complete) and [`PendingExecs::settle_all`] (before an upgrade's handoff, until a deadline).

use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use log::debug;
use mio::{Interest, Registry, Token};

use super::tokens::{self, Watched};
use crate::core::{ContainerKey, Generation};
use crate::process::{PendingExec, SpawnError};

/// A settled exec: whose, which run, the pid, and whether it exec'd.
pub struct Settled {
    pub key: ContainerKey,
    pub generation: Generation,
    pub pid: u32,
    pub outcome: Result<(), SpawnError>,
}

struct Pending {
    generation: Generation,
    exec: Watched<PendingExec>,
}

pub struct PendingExecs {
    registry: Rc<Registry>,
    pending: HashMap<ContainerKey, Pending>,
}

impl PendingExecs {
    pub fn new(registry: Rc<Registry>) -> PendingExecs {
        PendingExecs {
            registry,
            pending: HashMap::new(),
        }
    }

    /// Watches `exec`, the child of `key`'s run `generation`. If its pipe cannot be registered,
    /// it is settled here, waiting, and returned settled.
    pub fn add(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        exec: PendingExec,
    ) -> Option<Settled> {
        let watched = Watched::new(
            &self.registry,
            exec,
            PendingExec::fd,
            tokens::exec_token(key),
            Interest::READABLE,
        );
        match watched {
            Ok(exec) => {
                if let Some(old) = self.pending.insert(key, Pending { generation, exec }) {
                    // Not expected (see the module doc); the old child is still reaped and
                    // its exit ignored as a stale generation.
                    debug!(
                        "{key:?}: run {} replaced while its exec was unconfirmed",
                        old.generation
                    );
                }
                None
            }
            Err((mut exec, e)) => {
                debug!("{key:?}: cannot watch the exec report: {e}; waiting for it");
                let outcome = exec.settle();
                Some(Settled {
                    key,
                    generation,
                    pid: exec.pid(),
                    outcome,
                })
            }
        }
    }

    /// The pipe of `token` is readable: the outcome if it has settled.
    pub fn on_readable(&mut self, token: Token) -> Option<Settled> {
        let key = tokens::exec_key(token);
        let pending = self.pending.get_mut(&key)?;
        let outcome = pending.exec.poll()?;
        let Pending { generation, exec } = self.pending.remove(&key)?;
        Some(Settled {
            key,
            generation,
            pid: exec.pid(),
            outcome,
        })
    }

    /// The outcome of `key`'s pending exec of run `generation`, if there is one and it has
    /// settled (read without waiting, as [`PendingExecs::on_readable`] reads it).
    pub fn poll(&mut self, key: ContainerKey, generation: Generation) -> Option<Settled> {
        if self.pending.get(&key)?.generation != generation {
            return None;
        }
        self.on_readable(tokens::exec_token(key))
    }

    /// Waits for the outcome of `key`'s pending exec of run `generation`, if there is one.
    pub fn settle(&mut self, key: ContainerKey, generation: Generation) -> Option<Settled> {
        if self.pending.get(&key)?.generation != generation {
            return None;
        }
        let Pending { generation, exec } = self.pending.remove(&key)?;
        let mut exec = exec.into_inner();
        let outcome = exec.settle();
        Some(Settled {
            key,
            generation,
            pid: exec.pid(),
            outcome,
        })
    }

    /// Waits for every pending exec (before a handoff), in key order, until `deadline` at
    /// most: a child that has not reached its exec by then (its cgroup frozen) stays pending.
    pub fn settle_all(&mut self, deadline: Instant) -> Vec<Settled> {
        let mut keys: Vec<(ContainerKey, Generation)> = self
            .pending
            .iter()
            .map(|(k, p)| (*k, p.generation))
            .collect();
        keys.sort();
        let mut out = Vec::new();
        for (key, _) in keys {
            let Some(pending) = self.pending.get_mut(&key) else {
                continue;
            };
            let Some(outcome) = pending.exec.settle_until(Some(deadline)) else {
                continue;
            };
            if let Some(Pending { generation, exec }) = self.pending.remove(&key) {
                out.push(Settled {
                    key,
                    generation,
                    pid: exec.pid(),
                    outcome,
                });
            }
        }
        out
    }

    /// Drops `key`'s pending exec unsettled (its slot is gone): the child is still the
    /// reaper's, and its exit is ignored.
    pub fn forget(&mut self, key: ContainerKey) {
        self.pending.remove(&key);
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}
