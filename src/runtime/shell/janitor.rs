//! The cgroup janitor: finished runs' cgroups until the kernel lets them go, and the spawns
//! that wait for them.
//!
//! Owns: every cgroup no run holds any more ("dying": still populated, or `rmdir` refused),
//! each watched through its `cgroup.events` (`populated 0` wakes the loop; cgroup v2 docs,
//! "cgroup.events"), with a 200 ms fallback timer in case a notification is missed; and the
//! spawns deferred because their container's previous cgroup is still dying (a fresh cgroup
//! per run: a cgroup is never reused after `cgroup.kill`); and ([`GonePods`]) the pod
//! directories of pods removed by reload, until they can be removed.
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

    /// The dying cgroups' paths (handed over by `vigil upgrade`).
    pub fn dying_paths(&self) -> Vec<std::path::PathBuf> {
        self.dying
            .values()
            .map(|c| c.path().to_path_buf())
            .collect()
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

    /// The deferred actions and when each looks again (`vigil upgrade` hands them over).
    pub fn deferred(&self) -> impl Iterator<Item = &(Instant, Action)> {
        self.deferred.iter()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cgroup::{Limits, Manager, discover};
    use std::time::Instant;

    const DEADLINE: Duration = Duration::from_secs(10);

    fn cgroup2_mount() -> std::path::PathBuf {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root (it creates cgroups); run it as root or without --include-ignored"
        );
        let text = std::fs::read_to_string(discover::PROC_SELF_MOUNTINFO).unwrap();
        let mounts = discover::parse_mountinfo(&text);
        discover::find_cgroup2(&mounts)
            .map(|m| m.mount_point.clone())
            .expect("this test needs a cgroup2 mount and there is none")
    }

    /// Kills and removes the scratch tree even when an assertion failed.
    struct Scratch(std::path::PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
            let deadline = Instant::now() + DEADLINE;
            while self.0.exists() && Instant::now() < deadline {
                remove_tree(&self.0);
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn remove_tree(dir: &std::path::Path) {
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    remove_tree(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(dir);
    }

    #[test]
    #[ignore = "needs root and cgroup v2"]
    fn a_finished_cgroup_is_killed_held_while_it_exists_then_removed() {
        let root = cgroup2_mount().join(format!("vigil-janitor-test-{}", std::process::id()));
        let _scratch = Scratch(root.clone());
        let manager = Manager::with_root(&root).unwrap();
        let cg = manager
            .create_container("pod", "c", &Limits::default())
            .unwrap();
        let path = cg.path().to_path_buf();
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        std::fs::write(path.join("cgroup.procs"), child.id().to_string()).unwrap();

        let mut poll = mio::Poll::new().unwrap();
        let mut janitor = Janitor::new(Rc::new(poll.registry().try_clone().unwrap()));
        janitor.retire(cg);
        // Removed at once if the kernel emptied it in time, else held (and a new run at that
        // path has to wait): never let go of while it still exists.
        assert_eq!(janitor.holds(&path), path.exists());
        child.wait().unwrap();
        let deadline = Instant::now() + DEADLINE;
        let mut events = mio::Events::with_capacity(4);
        while janitor.has_dying() {
            assert!(
                Instant::now() < deadline,
                "{} was never removed",
                path.display()
            );
            crate::testutil::poll_once(&mut poll, &mut events, RECHECK);
            for e in events.iter() {
                assert_eq!(Owner::of(e.token()), Some(Owner::Janitor));
            }
            janitor.retry();
        }
        assert!(!path.exists(), "{} still exists", path.display());
        assert!(!janitor.holds(&path));
        manager.teardown().unwrap();
    }
}

/// How long a removed pod's directory is retried after the last of its containers was
/// forgotten while it stays busy (its container cgroups are the janitor's meanwhile).
const POD_DIR_PATIENCE: Duration = Duration::from_secs(30);

/// The `<root>/<pod>` directories of pods removed by reload, removed as soon as their container
/// cgroups are gone rather than at shutdown (issue 14.7). A pod of the same name that exists
/// again (a definition replaced by reload) keeps its directory.
#[derive(Debug, Default)]
pub struct GonePods {
    /// Pod name → give up (leave it to shutdown's teardown) after this instant.
    pending: HashMap<String, Instant>,
}

impl GonePods {
    /// A container slot of `pod` was forgotten (its pod is gone or replaced).
    pub fn forget(&mut self, pod: &str, now: Instant) {
        self.pending.insert(pod.to_string(), now + POD_DIR_PATIENCE);
    }

    /// The pods whose directories are pending.
    pub fn names(&self) -> Vec<String> {
        self.pending.keys().cloned().collect()
    }

    /// Tries each pending directory: `exists(pod)` says the pod is configured again.
    pub fn retry(
        &mut self,
        cgroups: Option<&crate::cgroup::Manager>,
        exists: impl Fn(&str) -> bool,
        now: Instant,
    ) {
        if self.pending.is_empty() {
            return;
        }
        let Some(m) = cgroups else {
            self.pending.clear();
            return;
        };
        self.pending.retain(|pod, give_up| {
            if exists(pod) {
                return false;
            }
            match m.remove_pod_dir(pod) {
                Ok(true) => {
                    log::info!("{pod}: pod cgroup removed (the pod was removed by reload)");
                    false
                }
                Ok(false) if now < *give_up => true,
                Ok(false) => {
                    log::warn!(
                        "{pod}: pod cgroup {} still busy {}s after the pod was removed; left for shutdown",
                        m.root().join(pod.as_str()).display(),
                        POD_DIR_PATIENCE.as_secs()
                    );
                    false
                }
                Err(e) => {
                    log::warn!("{e}");
                    false
                }
            }
        });
    }
}
