//! Without cgroups (`cgroup_root = "none"`, or no cgroup privileges): knowing which processes
//! are vigil's, across a `kill -9` of vigil and a restart, and killing a container's leftovers.
//!
//! Owns: the state file next to the control socket (`<socket>.state`, mode 0600), one line per
//! process vigil is responsible for — `PID STARTTIME LABEL`, where STARTTIME is field 22 of
//! `/proc/PID/stat` (proc(5): clock ticks since boot), so a recycled pid is never mistaken for
//! one of ours — and the scans that fill it: every [`SCAN_INTERVAL`] the process table is read
//! once and, for each running container, its descendants and the members of its session are
//! recorded (a `setsid` child leaves the session but stays a descendant until its parent dies);
//! processes re-parented to vigil (it is a child subreaper, prctl(2)) that no scan attributed
//! are recorded as orphans. Signals go through a pidfd opened *before* the start time is
//! checked (pidfd_open(2), pidfd_send_signal(2)): if the pid was recycled in between, the check
//! fails and nothing is sent; if not, the pidfd cannot reach any other process.
//!
//! What escapes without cgroups (said in the README): a process that left the container's
//! session and was never seen as its descendant by a scan — a double-forking daemon whose
//! middle process exits within the scan interval — is re-parented to vigil and recorded as an
//! unattributed orphan: it is killed when vigil shuts down, or by the next vigil after a
//! `kill -9`, but not when its container ends or restarts.
//!
//! Must not: signal a process whose start time it has not just verified, or block (the scan is
//! bounded by [`MAX_SCAN`] processes).

#![allow(unsafe_code)]

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use log::{info, warn};

use crate::core::ContainerKey;

/// How often running containers' process trees are recorded.
pub const SCAN_INTERVAL: Duration = Duration::from_secs(1);
/// Processes read per scan at most (a bound on the work of one loop turn).
pub const MAX_SCAN: usize = 65_536;

/// What `/proc/PID/stat` says about a process (proc(5), fields 3–6 and 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
    pub start: u64,
}

/// Parses the text of `/proc/PID/stat`. The command name (field 2) may hold spaces and
/// parentheses, so fields are counted after its last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field N is f[N - 3].
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

pub fn read_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process (not zombies), at most [`MAX_SCAN`].
pub fn scan() -> Vec<(u32, ProcStat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .take(MAX_SCAN)
        .filter_map(|pid| Some((pid, read_stat(pid)?)))
        .filter(|(_, s)| s.state != 'Z')
        .collect()
}

/// One process vigil is responsible for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub pid: u32,
    pub start: u64,
    /// `pod/container`, or `orphan`.
    pub label: String,
}

/// The state file's text.
pub fn format(entries: &[Entry]) -> String {
    let mut s =
        String::from("# vigil: processes to kill if this vigil is gone (PID STARTTIME LABEL)\n");
    for e in entries {
        s.push_str(&format!("{} {} {}\n", e.pid, e.start, e.label));
    }
    s
}

/// Reads the state file's text; lines that do not parse are skipped.
pub fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut it = l.splitn(3, ' ');
            Some(Entry {
                pid: it.next()?.parse().ok().filter(|p| *p > 1)?,
                start: it.next()?.parse().ok()?,
                label: it.next().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// The pids of `root`'s descendants and of its session's members, from one scan.
pub fn tree_of(root: u32, procs: &[(u32, ProcStat)]) -> Vec<(u32, u64)> {
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, (_, s)) in procs.iter().enumerate() {
        children.entry(s.ppid).or_default().push(i);
    }
    let mut out: Vec<(u32, u64)> = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(p) = stack.pop() {
        for &i in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            let (pid, s) = procs[i];
            if seen.insert(pid) {
                out.push((pid, s.start));
                stack.push(pid);
            }
        }
    }
    for (pid, s) in procs {
        if s.session == root && *pid != root && seen.insert(*pid) {
            out.push((*pid, s.start));
        }
    }
    out
}

/// SIGKILLs `pid` if it is still the process that started at `start`; true if it was.
pub fn kill_verified(pid: u32, start: u64) -> bool {
    if pid <= 1 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1; no
    // memory is passed.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return false;
    }
    // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if read_stat(pid).is_none_or(|s| s.start != start || s.state == 'Z') {
        return false;
    }
    // SAFETY: pidfd_send_signal(2) with a valid pidfd, a signal number, a null siginfo (as
    // kill(2) would fill it) and no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    rc == 0
}

/// The record of a vigil without cgroups (see the module docs).
#[derive(Debug)]
pub struct Tracker {
    path: PathBuf,
    me: u32,
    mains: HashMap<ContainerKey, Entry>,
    seen: HashMap<ContainerKey, Vec<Entry>>,
    orphans: Vec<Entry>,
    next_scan: Option<Instant>,
    /// The text last written (nothing is written again while it is the same).
    written: Option<String>,
    failing: bool,
}

impl Tracker {
    /// The state file for the control socket at `socket`.
    pub fn path_for(socket: &Path) -> PathBuf {
        let mut s = socket.as_os_str().to_os_string();
        s.push(".state");
        PathBuf::from(s)
    }

    pub fn new(socket: &Path) -> Tracker {
        Tracker {
            path: Self::path_for(socket),
            me: std::process::id(),
            mains: HashMap::new(),
            seen: HashMap::new(),
            orphans: Vec::new(),
            next_scan: None,
            written: None,
            failing: false,
        }
    }

    /// Kills what an earlier vigil recorded and is still alive (verified by start time), and
    /// for each container main process every member of its session; logs each one.
    pub fn recover(&mut self) {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return;
        };
        let entries = parse(&text);
        let procs = scan();
        let mut killed = 0;
        for e in &entries {
            let alive = procs.iter().any(|(p, s)| *p == e.pid && s.start == e.start);
            if !alive {
                continue;
            }
            // The session of a main process that is still the same process.
            let members: Vec<(u32, u64)> = procs
                .iter()
                .filter(|(p, s)| s.session == e.pid && *p != e.pid)
                .map(|(p, s)| (*p, s.start))
                .collect();
            if kill_verified(e.pid, e.start) {
                killed += 1;
                warn!(
                    "killed pid {} ({}) left running by an earlier vigil",
                    e.pid, e.label
                );
            }
            for (p, start) in members {
                if kill_verified(p, start) {
                    killed += 1;
                }
            }
        }
        if killed > 0 {
            info!(
                "{killed} process(es) left by an earlier vigil killed (state file {})",
                self.path.display()
            );
        }
        self.save();
    }

    /// A container's main process started.
    pub fn started(&mut self, key: ContainerKey, label: &str, pid: u32) {
        let Some(st) = read_stat(pid) else {
            return;
        };
        self.mains.insert(
            key,
            Entry {
                pid,
                start: st.start,
                label: label.to_string(),
            },
        );
        self.seen.remove(&key);
        self.save();
    }

    /// A container's main process was reaped: kill what scans saw of its tree and the rest of
    /// its session (the process group is killed by the caller).
    pub fn ended(&mut self, key: ContainerKey) {
        let main = self.mains.remove(&key);
        let mut victims: Vec<(u32, u64)> = self
            .seen
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.pid, e.start))
            .collect();
        if let Some(m) = &main {
            // The session id stays in use (no recycling) while any member is alive.
            victims.extend(
                scan()
                    .into_iter()
                    .filter(|(p, s)| s.session == m.pid && *p != m.pid)
                    .map(|(p, s)| (p, s.start)),
            );
        }
        let mut n = 0;
        for (pid, start) in victims {
            if kill_verified(pid, start) {
                n += 1;
            }
        }
        if n > 0
            && let Some(m) = main
        {
            info!(
                "{}: killed {n} leftover process(es) of pid {}",
                m.label, m.pid
            );
        }
        self.orphans
            .retain(|o| read_stat(o.pid).is_some_and(|s| s.start == o.start));
        self.save();
    }

    /// When the next scan is due (`None`: nothing to scan).
    pub fn deadline(&self) -> Option<Instant> {
        if self.mains.is_empty() {
            None
        } else {
            self.next_scan
        }
    }

    /// Records the running containers' trees and vigil's unattributed orphans, if due (an
    /// exec probe running at that moment is recorded as an orphan too: it is vigil's).
    pub fn scan_if_due(&mut self, now: Instant) {
        if self.mains.is_empty() {
            return;
        }
        if self.next_scan.is_some_and(|t| now < t) {
            return;
        }
        self.next_scan = Some(now + SCAN_INTERVAL);
        let procs = scan();
        let mut attributed = HashSet::new();
        for (key, main) in &self.mains {
            let tree = tree_of(main.pid, &procs);
            let seen = self.seen.entry(*key).or_default();
            for (pid, start) in tree {
                attributed.insert(pid);
                if !seen.iter().any(|e| e.pid == pid && e.start == start) {
                    seen.push(Entry {
                        pid,
                        start,
                        label: main.label.clone(),
                    });
                }
            }
            // Forget what has gone (or was recycled).
            seen.retain(|e| procs.iter().any(|(p, s)| *p == e.pid && s.start == e.start));
        }
        self.orphans = procs
            .iter()
            .filter(|(p, s)| {
                s.ppid == self.me
                    && !attributed.contains(p)
                    && !self.mains.values().any(|m| m.pid == *p)
            })
            .map(|(p, s)| Entry {
                pid: *p,
                start: s.start,
                label: "orphan".to_string(),
            })
            .collect();
        self.save();
    }

    /// vigil is stopping: kill whatever is still recorded and every process re-parented to
    /// vigil now (all of them are what its containers left: vigil's only children are
    /// containers and probes), then remove the state file.
    pub fn finish(&mut self) {
        let mut all: Vec<Entry> = self.entries();
        all.extend(
            scan()
                .into_iter()
                .filter(|(_, s)| s.ppid == self.me)
                .map(|(pid, s)| Entry {
                    pid,
                    start: s.start,
                    label: "orphan".to_string(),
                }),
        );
        for e in all {
            if kill_verified(e.pid, e.start) {
                info!("killed pid {} ({}) at shutdown", e.pid, e.label);
            }
        }
        if let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            warn!("cannot remove {}: {e}", self.path.display());
        }
    }

    fn entries(&self) -> Vec<Entry> {
        let mut all: Vec<Entry> = self.mains.values().cloned().collect();
        all.extend(self.seen.values().flatten().cloned());
        all.extend(self.orphans.iter().cloned());
        all.sort_by_key(|e| e.pid);
        all.dedup_by_key(|e| e.pid);
        all
    }

    /// Writes the file (through a temporary name and a rename) when its text changed.
    fn save(&mut self) {
        let text = format(&self.entries());
        if self.written.as_deref() == Some(text.as_str()) {
            return;
        }
        let tmp = {
            let mut s = self.path.as_os_str().to_os_string();
            s.push(".tmp");
            PathBuf::from(s)
        };
        let result = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        match result {
            Ok(()) => {
                self.written = Some(text);
                self.failing = false;
            }
            Err(e) => {
                if !self.failing {
                    warn!(
                        "cannot write {}: {e}; a vigil restarted after a crash may not find \
                         what this one left",
                        self.path.display()
                    );
                }
                self.failing = true;
                self.written = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let text = "4242 (my (odd) prog) S 1 4242 4242 0 -1 4194560 99 0 0 0 1 2 0 0 20 0 1 0 123456 1000 100 18446744073709551615";
        assert_eq!(
            parse_stat(text),
            Some(ProcStat {
                state: 'S',
                ppid: 1,
                pgrp: 4242,
                session: 4242,
                start: 123456
            })
        );
        assert_eq!(parse_stat("1 (x) S 0"), None);
    }

    #[test]
    fn the_state_file_round_trips_and_skips_junk() {
        let entries = vec![
            Entry {
                pid: 100,
                start: 5,
                label: "web/app".into(),
            },
            Entry {
                pid: 200,
                start: 6,
                label: "orphan".into(),
            },
        ];
        let text = format(&entries);
        assert_eq!(parse(&text), entries);
        assert_eq!(parse("x y z\n1 5 init\n0 1 bad\n300 nope\n"), vec![]);
    }

    #[test]
    fn a_tree_holds_descendants_and_session_members_but_not_strangers() {
        let s = |ppid, session, start| ProcStat {
            state: 'S',
            ppid,
            pgrp: session,
            session,
            start,
        };
        let procs = vec![
            (10, s(1, 10, 100)),  // the main process
            (11, s(10, 10, 101)), // its child
            (12, s(11, 12, 102)), // a setsid grandchild: its own session, still a descendant
            (13, s(1, 10, 103)),  // re-parented away, still in the session
            (20, s(1, 20, 104)),  // a stranger
        ];
        let mut t = tree_of(10, &procs);
        t.sort();
        assert_eq!(t, vec![(11, 101), (12, 102), (13, 103)]);
    }

    #[test]
    fn a_recycled_pid_is_not_killed() {
        let me = std::process::id();
        let st = read_stat(me).unwrap();
        // A start time that is not this process's: nothing is sent (we are still alive).
        assert!(!kill_verified(me, st.start + 1));
        assert!(!kill_verified(1, 0));
    }

    #[test]
    fn a_verified_process_is_killed() {
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        let st = read_stat(child.id()).unwrap();
        assert!(kill_verified(child.id(), st.start));
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }
}
