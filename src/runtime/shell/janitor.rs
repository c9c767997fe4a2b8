//! The cgroup janitor: finished runs' cgroups until the kernel lets them go, and the spawns
//! that wait for them.
//!
//! Owns: every cgroup no run holds any more ("dying": still populated, or `rmdir` refused),
//! each watched through its `cgroup.events` (`populated 0` wakes the loop; cgroup v2 docs,
//! "cgroup.events"), with a 200 ms fallback timer in case a notification is missed; and the
//! spawns deferred because their container's previous cgroup is still dying (a fresh cgroup
//! per run: a cgroup is never reused after `cgroup.kill`).
//!
//! Must not: block waiting for a cgroup to empty (at exit the router polls [`Janitor::retry`]),
//! or touch a cgroup a run still holds.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, Instant};

use log::debug;
use mio::{Interest, Registry, Token};

use super::kill::kill_tree;
use super::tokens::{Owner, TokenSpace, Watched};
use crate::cgroup::ContainerCgroup;
use crate::core::Action;

/// How long a deferred spawn waits before it looks again.
pub const DEFER: Duration = Duration::from_millis(5);
/// Fallback re-check of dying cgroups when no `populated 0` notification came.
const RECHECK: Duration = Duration::from_millis(200);

pub struct Janitor {
    registry: Rc<Registry>,
    tokens: TokenSpace,
    dying: HashMap<Token, Watched<ContainerCgroup>>,
    deferred: Vec<(Instant, Action)>,
}

impl Janitor {
    pub fn new(registry: Rc<Registry>) -> Janitor {
        Janitor {
            registry,
            tokens: TokenSpace::new(Owner::Janitor),
            dying: HashMap::new(),
            deferred: Vec::new(),
        }
    }

    /// Kills what is left in a finished run's cgroup and removes it, now or once it is empty.
    pub fn retire(&mut self, cg: ContainerCgroup) {
        if let Ok(true) = cg.populated() {
            kill_tree(Some(&cg), None);
        }
        self.remove_or_watch(cg);
    }

    /// Removes a cgroup whose processes were already killed, or keeps it until it can be.
    pub fn remove_or_watch(&mut self, cg: ContainerCgroup) {
        if let Err(e) = cg.remove() {
            debug!("{} not removable yet: {e}", cg.path().display());
            let token = self.tokens.next();
            self.watch(token, cg);
        }
    }

    fn watch(&mut self, token: Token, cg: ContainerCgroup) {
        let watched = match Watched::new(
            &self.registry,
            cg,
            |cg| cg.events_fd(),
            token,
            Interest::PRIORITY,
        ) {
            Ok(w) => w,
            Err((cg, e)) => {
                debug!("cannot watch {}: {e}", cg.path().display());
                Watched::unwatched(cg)
            }
        };
        self.dying.insert(token, watched);
    }

    /// Whether the cgroup at `path` is still dying (a new run there must wait).
    pub fn holds(&self, path: &Path) -> bool {
        self.dying.values().any(|cg| cg.path() == path)
    }

    pub fn has_dying(&self) -> bool {
        !self.dying.is_empty()
    }

    /// Looks at every dying cgroup again: kill what is still in it, remove what is empty.
    pub fn retry(&mut self) {
        let tokens: Vec<Token> = self.dying.keys().copied().collect();
        for token in tokens {
            let Some(cg) = self.dying.remove(&token) else {
                continue;
            };
            if let Ok(true) = cg.populated() {
                kill_tree(Some(&cg), None);
                self.dying.insert(token, cg);
                continue;
            }
            let cg = cg.into_inner();
            if cg.remove().is_err() {
                self.watch(token, cg);
            }
        }
    }

    /// Retries a spawn at `at`.
    pub fn defer(&mut self, at: Instant, action: Action) {
        self.deferred.push((at, action));
    }

    /// The deferred spawns due at `now`, in the order they were deferred.
    pub fn take_due(&mut self, now: Instant) -> Vec<Action> {
        if self.deferred.is_empty() {
            return Vec::new();
        }
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.deferred)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.deferred = keep;
        due.into_iter().map(|(_, a)| a).collect()
    }

    /// When the loop must wake up for the janitor.
    pub fn deadline(&self, now: Instant) -> Option<Instant> {
        let mut next = self.deferred.iter().map(|(at, _)| *at).min();
        if self.has_dying() {
            let t = now + RECHECK;
            next = Some(next.map_or(t, |n| n.min(t)));
        }
        next
    }
}
