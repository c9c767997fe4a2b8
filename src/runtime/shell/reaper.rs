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
    /// The new binary of `vigil upgrade`, run to prove it can take the state over before the
    /// exec (the pre-flight, `shell::upgrade`): its `seq` names the attempt.
    UpgradeCheck { seq: u64 },
    /// An `on_event` exec hook's process (`shell::event_hooks`): `id` names the delivery.
    EventHook { id: u64 },
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

    /// Forgets `pid` (reaped elsewhere: a child whose exec failed, see `execs`).
    pub fn untrack(&mut self, pid: u32) {
        self.pids.remove(&pid);
    }

    /// Every tracked pid and its owner (for the handoff of `vigil upgrade`).
    pub fn tracked(&self) -> impl Iterator<Item = (u32, PidOwner)> + '_ {
        self.pids.iter().map(|(p, o)| (*p, *o))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    const ISOLATED_ENV: &str = "VIGIL_ISOLATED_TEST";

    /// `waitpid(-1)` would take other tests' children (cargo runs tests as threads of one
    /// process): run the test body alone in a re-executed test binary. True in that child.
    fn isolated(name: &str) -> bool {
        if std::env::var(ISOLATED_ENV).as_deref() == Ok(name) {
            return true;
        }
        let full = format!("runtime::shell::reaper::tests::{name}");
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                full.as_str(),
                "--exact",
                "--include-ignored",
                "--test-threads=1",
            ])
            .env(ISOLATED_ENV, name)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "isolated {name} failed:\n{text}");
        assert!(
            text.contains("1 passed"),
            "isolated {name} did not run:\n{text}"
        );
        false
    }

    fn sh(script: &str) -> u32 {
        Command::new("/bin/sh")
            .args(["-c", script])
            .spawn()
            .unwrap()
            .id()
    }

    #[test]
    fn every_ended_child_is_reaped_and_only_owned_ones_are_reported_with_their_owner() {
        if !isolated(
            "every_ended_child_is_reaped_and_only_owned_ones_are_reported_with_their_owner",
        ) {
            return;
        }
        let mut reaper = Reaper::default();
        let main = PidOwner::Main {
            key: ContainerKey(1),
            generation: 7,
        };
        let probe = PidOwner::ExecProbe {
            key: ContainerKey(1),
            kind: ProbeKind::Liveness,
            seq: 3,
        };
        reaper.track(sh("exit 3"), main);
        reaper.track(sh("kill -TERM $$"), probe);
        let untracked = sh("exit 0");

        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while got.len() < 2 {
            got.extend(reaper.reap());
            assert!(Instant::now() < deadline, "reaped only {got:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
        // The untracked child is collected too, without a report (kill(2) finds a zombie,
        // so ESRCH means it was reaped).
        let deadline = Instant::now() + Duration::from_secs(20);
        while crate::process::signal(untracked, 0).is_ok() {
            assert!(reaper.reap().is_empty(), "an untracked child was reported");
            assert!(Instant::now() < deadline, "{untracked} left unreaped");
            std::thread::sleep(Duration::from_millis(5));
        }
        let main_exit = got.iter().find(|e| e.owner == main).unwrap();
        assert_eq!((main_exit.code, main_exit.signal), (Some(3), None));
        let probe_exit = got.iter().find(|e| e.owner == probe).unwrap();
        assert_eq!(
            (probe_exit.code, probe_exit.signal),
            (None, Some(libc::SIGTERM))
        );
        assert!(reaper.pids.is_empty(), "reaped pids leave the table");
    }
}
