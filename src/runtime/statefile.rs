//! Knowing which processes are vigil's across a `kill -9` of vigil and a restart: which
//! container main processes run (with or without cgroups, for adoption: issue 17.4) and,
//! without cgroups (`cgroup_root = "none"`, or no cgroup privileges), every process a container
//! left, so that they can be killed.
//!
//! Owns: the state file next to the control socket (`<socket>.state`, mode 0600), one line per
//! process vigil is responsible for — `PID STARTTIME LABEL`, where STARTTIME is field 22 of
//! `/proc/PID/stat` (proc(5): clock ticks since boot), so a recycled pid is never mistaken for
//! one of ours; a container's main process has two more fields, `SPEC RESTARTS`: the hash of
//! its container definition ([`spec_hash`]) and its restart count, what a vigil restarted
//! after a crash needs to adopt it (an older file without them means "replace"). With cgroups
//! only the main processes are recorded (the cgroups hold the rest); without, the scans fill
//! in the rest: every [`SCAN_INTERVAL`] the process table is read
//! once and, for each running container, its descendants and the members of its session are
//! recorded (a `setsid` child leaves the session but stays a descendant until its parent dies);
//! processes re-parented to vigil (it is a child subreaper, prctl(2)) that no scan attributed
//! are recorded as orphans. Signals go through a pidfd opened *before* the start time is
//! checked (pidfd_open(2), pidfd_send_signal(2)): if the pid was recycled in between, the check
//! fails and nothing is sent; if not, the pidfd cannot reach any other process.
//!
//! What escapes without cgroups (docs/behaviour.md §1): a process that left the container's
//! session and was never seen as its descendant by a scan — a double-forking daemon whose
//! middle process exits within the scan interval — is re-parented to vigil and recorded as an
//! unattributed orphan: it is killed when vigil shuts down, or by the next vigil after a
//! `kill -9`, but not when its container ends or restarts.
//!
//! With `on_restart = "adopt"` the file also holds the core's record for a vigil restarted
//! after a crash (`record BOOT_ID JSON`, [`crate::core::recall`]), taken when the core changed
//! and at most once per [`RECORD_INTERVAL`] ([`Tracker::record_wanted`]), and a line per pod
//! with replicas that `vigil scale` left at another count than the file's (`scaled SET
//! REPLICAS FILE_REPLICAS`, written at once), which such a vigil runs again.
//!
//! The file is written at most once per loop turn ([`Tracker::flush`]), through a temporary
//! name created afresh (`O_EXCL`) and a rename, so a `kill -9` leaves either the old or the new
//! text. It is read at start only if vigil can trust it ([`read_trusted`]: vigil's own, not
//! writable by others; issue 43.12).
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

use crate::config::replicas::SetScale;
use crate::config::spec::ContainerSpec;
use crate::core::{ContainerKey, KeptEnd};

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

/// Reads and parses `/proc/PID/stat`: one open, one read into a stack buffer (the line is at
/// most a few hundred bytes: 52 numeric fields and a 16-byte name, proc(5)), one close — where
/// `read_to_string` would stat the file and read in growing steps (it is read once per
/// container start and per process scanned).
pub fn read_stat(pid: u32) -> Option<ProcStat> {
    use std::io::Read;
    let mut f = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut buf = [0u8; 1024];
    let mut len = 0;
    while len < buf.len() {
        match f.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        // The whole line is there (the kernel writes it in one go): no read for the EOF.
        if buf.get(len.wrapping_sub(1)) == Some(&b'\n') {
            break;
        }
    }
    parse_stat(std::str::from_utf8(buf.get(..len)?).ok()?)
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
    /// For a container's main process: what adopting it needs.
    pub main: Option<MainInfo>,
}

/// What the state file records about a container's main process beyond its identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MainInfo {
    /// [`spec_hash`] of the definition it was started from.
    pub spec: u64,
    pub restarts: u32,
}

/// A hash of a container's definition (FNV-1a over its debug form), to tell whether a
/// container found running after a crash of vigil was started from the definition in the
/// config now. Any change of any field changes it; so may a different build of vigil (the
/// container is then replaced, never wrongly adopted).
/// The debug form is hashed as it is written, piece by piece, not built as a string first (a
/// few KiB per container, made for every container a config starts); the bytes, and so the
/// hash, are the same.
pub fn spec_hash(spec: &ContainerSpec) -> u64 {
    use std::fmt::Write;
    let mut h = Fnv1a(FNV_OFFSET);
    // Fnv1a's write_str never fails, nor does a derived Debug.
    let _ = write!(h, "{spec:?}");
    h.0
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a over the bytes written to it.
struct Fnv1a(u64);

impl std::fmt::Write for Fnv1a {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 = s
            .bytes()
            .fold(self.0, |h, b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME));
        Ok(())
    }
}

/// A container that ended for good (stopped by an operator, or completed without a restart
/// to come): a vigil that adopts after a crash keeps it so (`stopped LABEL SPEC`,
/// `completed LABEL SPEC`; a completed one only while its definition is the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub label: String,
    pub end: KeptEnd,
    /// [`spec_hash`] of its definition (0: unknown).
    pub spec: u64,
}

/// The state file's text: a line per set `vigil scale` left at another count than the
/// file's (`scaled SET REPLICAS FILE_REPLICAS`), a line per container in `ended`, then
/// `entries`, then the core's [`Recollection`](crate::core::recall::Recollection) line
/// (`record BOOT_ID JSON`), if any.
pub fn format(
    entries: &[Entry],
    ended: &[Ended],
    scales: &[SetScale],
    record: Option<&str>,
) -> String {
    let mut s = String::from(
        "# vigil: processes to kill or adopt if this vigil is gone (PID STARTTIME LABEL [SPEC RESTARTS]), containers that ended for good (stopped|completed LABEL SPEC), sets scaled (scaled SET REPLICAS FILE_REPLICAS)\n",
    );
    for sc in scales {
        s.push_str(&format!(
            "scaled {} {} {}\n",
            sc.set, sc.replicas, sc.file_replicas
        ));
    }
    for e in ended {
        let kind = match e.end {
            KeptEnd::Stopped => "stopped",
            KeptEnd::Completed => "completed",
        };
        s.push_str(&format!("{kind} {} {:016x}\n", e.label, e.spec));
    }
    for e in entries {
        match e.main {
            Some(m) => s.push_str(&format!(
                "{} {} {} {:016x} {}\n",
                e.pid, e.start, e.label, m.spec, m.restarts
            )),
            None => s.push_str(&format!("{} {} {}\n", e.pid, e.start, e.label)),
        }
    }
    if let Some(r) = record {
        s.push_str("record ");
        s.push_str(r);
        s.push('\n');
    }
    s
}

/// The JSON of the `record` line, if it was written during the boot `boot_id` (its instants
/// are `CLOCK_MONOTONIC`, meaningless after a reboot).
pub fn parse_record<'a>(text: &'a str, boot_id: &str) -> Option<&'a str> {
    let line = text.lines().find_map(|l| l.strip_prefix("record "))?;
    let (boot, json) = line.split_once(' ')?;
    (!boot_id.is_empty() && boot == boot_id).then_some(json)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`, random(4)); empty when unknown.
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// The largest state file read (a longer one is refused: vigil writes far less — a line per
/// process and the record, whose event list is bounded).
pub const MAX_FILE: u64 = 64 << 20;

/// Why a state file found at start is not trusted (issue 43.12: a forged one would have vigil
/// kill or adopt processes that are not its own).
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    #[error("cannot open it: {0}")]
    Open(std::io::Error),
    #[error("not a regular file")]
    NotAFile,
    #[error("owned by uid {owner}, not by vigil's uid {me}")]
    Owner { owner: u32, me: u32 },
    #[error("writable by its group or others (mode {0:o})")]
    Writable(u32),
    #[error("larger than {MAX_FILE} bytes")]
    TooLarge,
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
}

/// Reads the state file at `path` if vigil can trust it: a regular file (the last component
/// not a symlink), owned by vigil's effective uid, not writable by its group or others, at
/// most [`MAX_FILE`] bytes. `Ok(None)` when there is none.
pub fn read_trusted(path: &Path) -> Result<Option<String>, Untrusted> {
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Untrusted::Open(e)),
    };
    let meta = file.metadata().map_err(Untrusted::Read)?;
    if !meta.file_type().is_file() {
        return Err(Untrusted::NotAFile);
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(Untrusted::Owner {
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Untrusted::Writable(meta.mode() & 0o7777));
    }
    if meta.len() > MAX_FILE {
        return Err(Untrusted::TooLarge);
    }
    let mut text = String::new();
    file.take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(Untrusted::Read)?;
    Ok(Some(text))
}

/// What an earlier vigil's state file says.
#[derive(Debug, Default)]
pub struct Previous {
    pub entries: Vec<Entry>,
    pub ended: Vec<Ended>,
    /// The core's record (JSON), when written in this boot.
    pub record: Option<String>,
}

/// The containers a state file's text records as ended for good (a missing or bad SPEC is 0).
pub fn parse_ended(text: &str) -> Vec<Ended> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split(' ');
            let end = match it.next()? {
                "stopped" => KeptEnd::Stopped,
                "completed" => KeptEnd::Completed,
                _ => return None,
            };
            let label = it.next().filter(|l| l.contains('/'))?.to_string();
            let spec = it
                .next()
                .and_then(|s| u64::from_str_radix(s, 16).ok())
                .unwrap_or(0);
            it.next().is_none().then_some(Ended { label, end, spec })
        })
        .collect()
}

/// The sets a state file's text records as scaled (`scaled SET REPLICAS FILE_REPLICAS`); a
/// line that does not parse is skipped.
pub fn parse_scales(text: &str) -> Vec<SetScale> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.strip_prefix("scaled ")?.split(' ');
            let set = it.next().filter(|s| !s.is_empty())?.to_string();
            let replicas = it.next()?.parse().ok()?;
            let file_replicas = it.next()?.parse().ok()?;
            it.next().is_none().then_some(SetScale {
                set,
                replicas,
                file_replicas,
            })
        })
        .collect()
}

/// The sets scaled in the state file an earlier vigil left for the control socket `socket`
/// (none when there is no file, or vigil cannot trust it: [`Tracker::previous`] says why):
/// read at start, before the pods are made, so that a vigil started again after a crash runs
/// the count `vigil scale` left (docs/behaviour.md §14).
pub fn previous_scales(socket: &Path) -> Vec<SetScale> {
    match read_trusted(&Tracker::path_for(socket)) {
        Ok(Some(text)) => parse_scales(&text),
        _ => Vec::new(),
    }
}

/// Reads the state file's text; lines that do not parse are skipped (a main process whose
/// extra fields do not parse is kept without them: it will be replaced, not adopted).
pub fn parse(text: &str) -> Vec<Entry> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split(' ');
            let pid = it.next()?.parse().ok().filter(|p| *p > 1)?;
            let start = it.next()?.parse().ok()?;
            let label = it.next().unwrap_or("").to_string();
            let main = match (it.next(), it.next(), it.next()) {
                (Some(spec), Some(restarts), None) => {
                    match (u64::from_str_radix(spec, 16), restarts.parse()) {
                        (Ok(spec), Ok(restarts)) if label.contains('/') => {
                            Some(MainInfo { spec, restarts })
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            Some(Entry {
                pid,
                start,
                label,
                main,
            })
        })
        .collect()
}

/// How long ago a process that started `start` clock ticks after boot did so (proc(5): field
/// 22 of `/proc/PID/stat` against the first field of `/proc/uptime`); `None` if unknown.
pub fn age_of(start: u64) -> Option<Duration> {
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    // SAFETY: sysconf(3) takes a constant and returns a value; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    let started = start as f64 / ticks as f64;
    Some(Duration::from_secs_f64((uptime - started).max(0.0)))
}

/// The wall-clock time a process that started `start` clock ticks after boot did so: proc(5)
/// field 22 counts from boot in `CLOCK_BOOTTIME` (the kernel's `start_boottime`), read here
/// against that clock, not `/proc/uptime`'s 10 ms. The tick is rounded down, so the result
/// is at or before the true start (within one tick).
pub fn started_wall(start: u64) -> Option<std::time::SystemTime> {
    let boot = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME).ok()?;
    let since_boot = Duration::new(
        u64::try_from(boot.tv_sec()).ok()?,
        u32::try_from(boot.tv_nsec()).ok()?,
    );
    // SAFETY: sysconf(3) takes a constant and returns a value; no memory is passed.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks = u64::try_from(ticks).ok().filter(|t| *t > 0)?;
    let started = Duration::from_secs(start / ticks)
        + Duration::from_nanos((start % ticks) * 1_000_000_000 / ticks);
    let ago = since_boot.checked_sub(started)?;
    std::time::SystemTime::now().checked_sub(ago)
}

/// The pids of `root`'s descendants and of its session's members, from one scan.
pub fn tree_of(root: u32, procs: &[(u32, ProcStat)]) -> Vec<(u32, u64)> {
    ProcIndex::new(procs).tree_of(root)
}

/// One scan indexed by parent and by session, built once for all the trees asked of it: a
/// scan of 500 containers' trees walked each from a map of its own built over every process
/// of the host (O(containers × processes)) took seconds of a debug build's loop turn.
pub struct ProcIndex<'a> {
    procs: &'a [(u32, ProcStat)],
    children: HashMap<u32, Vec<usize>>,
    sessions: HashMap<u32, Vec<usize>>,
    starts: HashMap<u32, u64>,
}

impl<'a> ProcIndex<'a> {
    pub fn new(procs: &'a [(u32, ProcStat)]) -> ProcIndex<'a> {
        let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
        let mut sessions: HashMap<u32, Vec<usize>> = HashMap::new();
        let mut starts = HashMap::with_capacity(procs.len());
        for (i, (pid, s)) in procs.iter().enumerate() {
            children.entry(s.ppid).or_default().push(i);
            sessions.entry(s.session).or_default().push(i);
            starts.insert(*pid, s.start);
        }
        ProcIndex {
            procs,
            children,
            sessions,
            starts,
        }
    }

    /// Whether the scan saw `pid` started at `start` (not gone, not recycled).
    pub fn alive(&self, pid: u32, start: u64) -> bool {
        self.starts.get(&pid) == Some(&start)
    }

    /// [`tree_of`] from the index.
    pub fn tree_of(&self, root: u32) -> Vec<(u32, u64)> {
        let mut out: Vec<(u32, u64)> = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            for &i in self.children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
                let (pid, s) = self.procs[i];
                if seen.insert(pid) {
                    out.push((pid, s.start));
                    stack.push(pid);
                }
            }
        }
        for &i in self.sessions.get(&root).map(Vec::as_slice).unwrap_or(&[]) {
            let (pid, s) = self.procs[i];
            if pid != root && seen.insert(pid) {
                out.push((pid, s.start));
            }
        }
        out
    }
}

/// A pidfd (pidfd_open(2)) on `pid` if it is still the live process that started at `start`:
/// opened before the start time is checked, so it cannot refer to a process that recycled the
/// pid. It becomes readable when that process exits (child or not), and signals sent through
/// it ([`pidfd_signal`]) reach that process or none.
pub fn pidfd_verified(pid: u32, start: u64) -> Option<OwnedFd> {
    if pid <= 1 || pid > i32::MAX as u32 {
        return None;
    }
    // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor or -1; no
    // memory is passed. PIDFD_NONBLOCK is not needed: the descriptor is only polled.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    if read_stat(pid).is_none_or(|s| s.start != start || s.state == 'Z') {
        return None;
    }
    Some(fd)
}

/// pidfd_send_signal(2): `sig` to the process `fd` refers to.
pub fn pidfd_signal(fd: &OwnedFd, sig: i32) -> std::io::Result<()> {
    // SAFETY: pidfd_send_signal(2) with a valid pidfd, a signal number, a null siginfo (as
    // kill(2) would fill it) and no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// SIGKILLs `pid` if it is still the process that started at `start`; true if it was.
pub fn kill_verified(pid: u32, start: u64) -> bool {
    pidfd_verified(pid, start).is_some_and(|fd| pidfd_signal(&fd, libc::SIGKILL).is_ok())
}

/// The record of what vigil runs (see the module docs).
#[derive(Debug)]
pub struct Tracker {
    path: PathBuf,
    me: u32,
    /// Without cgroups: scan process trees and kill leftovers. With cgroups: main processes
    /// only, never a kill (the cgroups do that).
    scans: bool,
    /// Changed since the file was last written.
    dirty: bool,
    mains: HashMap<ContainerKey, Entry>,
    seen: HashMap<ContainerKey, Vec<Entry>>,
    orphans: Vec<Entry>,
    /// Containers that ended for good, sorted by label.
    ended: Vec<Ended>,
    next_scan: Option<Instant>,
    /// The text last written (nothing is written again while it is the same).
    written: Option<String>,
    failing: bool,
    /// This boot's id (the record is valid within it only).
    boot_id: String,
    /// The sets scaled away from the file's count ([`Tracker::set_scales`]).
    scales: Vec<SetScale>,
    /// The core's record line (`BOOT_ID JSON`), as last set.
    record: Option<String>,
    /// The event `seq` the record was taken at.
    record_seq: u64,
    /// The record is not taken again before this ([`RECORD_INTERVAL`]).
    record_after: Option<Instant>,
    /// The core changed while the record could not be taken: take it then.
    record_due: Option<Instant>,
}

/// The record of the core is taken at most this often (a burst of changes is written once,
/// at the end of the interval): what a crash within it loses (docs/behaviour.md).
pub const RECORD_INTERVAL: Duration = Duration::from_millis(250);

impl Tracker {
    /// The state file for the control socket at `socket`.
    pub fn path_for(socket: &Path) -> PathBuf {
        let mut s = socket.as_os_str().to_os_string();
        s.push(".state");
        PathBuf::from(s)
    }

    /// `scans`: vigil runs without cgroups (see [`Tracker::scans`]).
    pub fn new(socket: &Path, scans: bool) -> Tracker {
        Tracker {
            path: Self::path_for(socket),
            me: std::process::id(),
            scans,
            dirty: false,
            mains: HashMap::new(),
            seen: HashMap::new(),
            orphans: Vec::new(),
            ended: Vec::new(),
            next_scan: None,
            written: None,
            failing: false,
            boot_id: boot_id(),
            scales: Vec::new(),
            record: None,
            record_seq: 0,
            record_after: None,
            record_due: None,
        }
    }

    /// What an earlier vigil recorded (nothing if there is no file): its processes, and the
    /// containers that had ended for good.
    /// A file vigil cannot trust ([`read_trusted`]) is refused, said at warn: what is found
    /// is then judged from the cgroups alone (with cgroups, every container found is replaced;
    /// without, nothing is killed).
    pub fn previous(&self) -> Previous {
        let text = match read_trusted(&self.path) {
            Ok(Some(t)) => t,
            Ok(None) => return Previous::default(),
            Err(e) => {
                warn!(
                    "state file {} refused: {e}; what an earlier vigil left is judged from its \
                     cgroups alone (nothing it names is killed or adopted)",
                    self.path.display()
                );
                return Previous::default();
            }
        };
        Previous {
            entries: parse(&text),
            ended: parse_ended(&text),
            record: parse_record(&text, &self.boot_id).map(str::to_string),
        }
    }

    /// Whether the core's record is to be taken now: it changed (its last event `seq` is not
    /// the one recorded) and the last one was taken [`RECORD_INTERVAL`] ago or more; else,
    /// when it changed, [`Tracker::deadline`] wakes the loop for it.
    pub fn record_wanted(&mut self, seq: u64, now: Instant) -> bool {
        if seq == self.record_seq {
            self.record_due = None;
            return false;
        }
        match self.record_after {
            Some(t) if now < t => {
                self.record_due = Some(t);
                false
            }
            _ => true,
        }
    }

    /// The core's record as of event `seq` (its JSON), to be written at the end of the turn.
    pub fn set_record(&mut self, seq: u64, json: &str, now: Instant) {
        self.record = Some(format!("{} {json}", self.boot_id));
        self.record_seq = seq;
        self.record_after = Some(now + RECORD_INTERVAL);
        self.record_due = None;
        self.dirty = true;
    }

    /// Something the file records may have changed (an operator command): write it at the
    /// end of the turn.
    pub fn touch(&mut self) {
        self.dirty = true;
    }

    /// The file is to be written at the end of this turn (the caller refreshes
    /// [`Tracker::set_ended`] first).
    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// The sets scaled away from the file's count now (`vigil scale`, a reload).
    pub fn set_scales(&mut self, scales: Vec<SetScale>) {
        if scales != self.scales {
            self.scales = scales;
            self.dirty = true;
        }
    }

    /// The containers that have ended for good now.
    pub fn set_ended(&mut self, mut ended: Vec<Ended>) {
        ended.sort_by(|a, b| a.label.cmp(&b.label));
        if ended != self.ended {
            self.ended = ended;
            self.dirty = true;
        }
    }

    /// Without cgroups: kills what an earlier vigil recorded and is still alive (verified by
    /// start time), and for each container main process every member of its session — except
    /// the adopted containers in `kept` (label → main pid): that main process and what it
    /// started (the entries of its label that are not main processes); logs each one.
    pub fn kill_leftovers(&mut self, entries: &[Entry], kept: &HashMap<String, u32>) {
        let procs = scan();
        let mut killed = 0;
        for e in entries {
            let alive = procs.iter().any(|(p, s)| *p == e.pid && s.start == e.start);
            let adopted = match (kept.get(&e.label), e.main) {
                (Some(pid), Some(_)) => *pid == e.pid,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if !alive || adopted {
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
        self.dirty = true;
    }

    /// A container's main process started (or was adopted): `main` is what a restarted vigil
    /// needs to adopt it.
    pub fn started(&mut self, key: ContainerKey, label: &str, pid: u32, main: MainInfo) {
        let Some(st) = read_stat(pid) else {
            return;
        };
        self.mains.insert(
            key,
            Entry {
                pid,
                start: st.start,
                label: label.to_string(),
                main: Some(main),
            },
        );
        self.seen.remove(&key);
        self.dirty = true;
    }

    /// [`Tracker::started`] with the process's start time already known (`vigil upgrade`:
    /// recorded by the old instance, so `/proc` is not read for every container again).
    pub fn started_known(
        &mut self,
        key: ContainerKey,
        label: &str,
        pid: u32,
        start: u64,
        main: MainInfo,
    ) {
        self.mains.insert(
            key,
            Entry {
                pid,
                start,
                label: label.to_string(),
                main: Some(main),
            },
        );
        self.seen.remove(&key);
        self.dirty = true;
    }

    /// The start time recorded for `key`'s main process `pid`.
    pub fn start_of(&self, key: ContainerKey, pid: u32) -> Option<u64> {
        self.mains
            .get(&key)
            .filter(|e| e.pid == pid)
            .map(|e| e.start)
    }

    /// The file's text as last written (`vigil upgrade` hands it over: the new instance does
    /// not write the same text again).
    pub fn written(&self) -> Option<&str> {
        self.written.as_deref()
    }

    /// The text the file holds, as the previous instance wrote it.
    pub fn resume_written(&mut self, text: Option<String>) {
        self.written = text;
    }

    /// A container's main process was reaped: kill what scans saw of its tree and the rest of
    /// its session (the process group is killed by the caller). With cgroups: forget it.
    pub fn ended(&mut self, key: ContainerKey) {
        let main = self.mains.remove(&key);
        self.dirty = true;
        if !self.scans {
            return;
        }
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
    }

    /// Without cgroups: the members of session `sid` (an exec hook's, which has just been
    /// reaped) and their descendants are `key`'s: they die with its main process
    /// ([`Tracker::ended`]), or now if it has ended already. A process that left the session
    /// first escapes, as a container's own double-forking daemon does (module docs).
    pub fn attribute_session(&mut self, key: ContainerKey, sid: u32) {
        if !self.scans {
            return;
        }
        let procs = scan();
        let mut members: Vec<(u32, u64)> = procs
            .iter()
            .filter(|(p, s)| s.session == sid && *p != sid)
            .map(|(p, s)| (*p, s.start))
            .collect();
        for (pid, _) in members.clone() {
            for found in tree_of(pid, &procs) {
                if !members.contains(&found) {
                    members.push(found);
                }
            }
        }
        let Some(main) = self.mains.get(&key) else {
            for (pid, start) in members {
                kill_verified(pid, start);
            }
            return;
        };
        let label = main.label.clone();
        let seen = self.seen.entry(key).or_default();
        for (pid, start) in members {
            if !seen.iter().any(|e| e.pid == pid && e.start == start) {
                seen.push(Entry {
                    pid,
                    start,
                    label: label.clone(),
                    main: None,
                });
                self.dirty = true;
            }
        }
    }

    /// When the next scan is due (`None`: nothing to scan).
    pub fn deadline(&self) -> Option<Instant> {
        let scan = if self.mains.is_empty() || !self.scans {
            None
        } else {
            self.next_scan
        };
        match (scan, self.record_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Records the running containers' trees and vigil's unattributed orphans, if due (an
    /// exec probe running at that moment is recorded as an orphan too: it is vigil's).
    pub fn scan_if_due(&mut self, now: Instant) {
        if self.mains.is_empty() || !self.scans {
            return;
        }
        if self.next_scan.is_some_and(|t| now < t) {
            return;
        }
        self.next_scan = Some(now + SCAN_INTERVAL);
        let procs = scan();
        let index = ProcIndex::new(&procs);
        let mut attributed = HashSet::new();
        for (key, main) in &self.mains {
            let tree = index.tree_of(main.pid);
            let seen = self.seen.entry(*key).or_default();
            for (pid, start) in tree {
                attributed.insert(pid);
                if !seen.iter().any(|e| e.pid == pid && e.start == start) {
                    seen.push(Entry {
                        pid,
                        start,
                        label: main.label.clone(),
                        main: None,
                    });
                }
            }
            // Forget what has gone (or was recycled).
            seen.retain(|e| index.alive(e.pid, e.start));
        }
        let mains: HashSet<u32> = self.mains.values().map(|m| m.pid).collect();
        self.orphans = procs
            .iter()
            .filter(|(p, s)| s.ppid == self.me && !attributed.contains(p) && !mains.contains(p))
            .map(|(p, s)| Entry {
                pid: *p,
                start: s.start,
                label: "orphan".to_string(),
                main: None,
            })
            .collect();
        self.dirty = true;
    }

    /// vigil is stopping: kill whatever is still recorded and every process re-parented to
    /// vigil now (all of them are what its containers left: vigil's only children are
    /// containers and probes), then remove the state file.
    pub fn finish(&mut self) {
        if !self.scans {
            self.remove_file();
            return;
        }
        let mut all: Vec<Entry> = self.entries();
        all.extend(
            scan()
                .into_iter()
                .filter(|(_, s)| s.ppid == self.me)
                .map(|(pid, s)| Entry {
                    pid,
                    start: s.start,
                    label: "orphan".to_string(),
                    main: None,
                }),
        );
        for e in all {
            if kill_verified(e.pid, e.start) {
                info!("killed pid {} ({}) at shutdown", e.pid, e.label);
            }
        }
        self.remove_file();
    }

    fn remove_file(&mut self) {
        self.dirty = false;
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

    /// Writes the file (through a temporary name and a rename) if anything changed since it
    /// was last written: once per loop turn at most.
    pub fn flush(&mut self) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let text = format(
            &self.entries(),
            &self.ended,
            &self.scales,
            self.record.as_deref(),
        );
        if self.written.as_deref() == Some(text.as_str()) {
            return;
        }
        let tmp = {
            let mut s = self.path.as_os_str().to_os_string();
            s.push(".tmp");
            PathBuf::from(s)
        };
        let result = create_new(&tmp)
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

/// Creates `tmp` afresh (`O_EXCL`, mode 0600: never opens what someone else put there); a
/// stale one (a crash between create and rename) is unlinked first — unlink(2) removes a
/// symlink itself, never its target.
fn create_new(tmp: &Path) -> std::io::Result<std::fs::File> {
    let open = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(tmp)
    };
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(tmp)?;
            open()
        }
        other => other,
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
                main: Some(MainInfo {
                    spec: 0xdead_beef_0000_0001,
                    restarts: 7,
                }),
            },
            Entry {
                pid: 101,
                start: 5,
                label: "web/app".into(),
                main: None,
            },
            Entry {
                pid: 200,
                start: 6,
                label: "orphan".into(),
                main: None,
            },
        ];
        let ended = vec![
            Ended {
                label: "web/side".into(),
                end: KeptEnd::Stopped,
                spec: 3,
            },
            Ended {
                label: "job/run".into(),
                end: KeptEnd::Completed,
                spec: 0xfeed,
            },
        ];
        let scales = vec![SetScale {
            set: "web".into(),
            replicas: 5,
            file_replicas: 2,
        }];
        let text = format(&entries, &ended, &scales, Some("boot-1 {\"pods\":[]}"));
        assert_eq!(parse_scales(&text), scales);
        assert_eq!(
            parse_scales("scaled web 5\nscaled web x 2\nscaled  5 2\nscaled web 5 2 1\n"),
            vec![]
        );
        assert_eq!(parse_record(&text, "boot-1"), Some("{\"pods\":[]}"));
        assert_eq!(parse_record(&text, "boot-2"), None, "another boot's record");
        assert_eq!(parse_record(&text, ""), None, "an unknown boot");
        assert_eq!(parse(&text), entries);
        assert_eq!(parse_ended(&text), ended);
        assert_eq!(
            parse_ended("stopped x 1\nstopped a/b c d\n1 2 stopped/x\ndone a/b 1\n"),
            vec![]
        );
        let no_spec = parse_ended("completed a/b\nstopped a/c zz\n");
        assert_eq!(no_spec.len(), 2);
        assert!(no_spec.iter().all(|e| e.spec == 0));
        assert_eq!(parse("x y z\n1 5 init\n0 1 bad\n300 nope\n"), vec![]);
    }

    #[test]
    fn a_main_line_of_an_older_vigil_or_with_bad_extra_fields_is_kept_without_adoption_data() {
        let got =
            parse("100 5 web/app\n101 5 web/app zz 1\n102 5 orphan 00ff 1\n103 5 a/b 1 2 3\n");
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(got.iter().all(|e| e.main.is_none()), "{got:?}");
    }

    #[test]
    fn any_text_parses_without_panicking_and_only_well_formed_lines_count() {
        // A state file is written only by vigil, but a crash can leave anything (a torn disk
        // block, an edit): pseudo-random lines from a small alphabet never panic.
        let alphabet: &[u8] = b"0123456789abcdef /\n#stopped -xyz\xff";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let len = (x % 120) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            for e in parse(&text) {
                assert!(e.pid > 1);
                assert!(e.main.is_none() || e.label.contains('/'));
            }
            for e in parse_ended(&text) {
                assert!(e.label.contains('/') && !e.label.contains(' '));
            }
        }
    }

    #[test]
    fn the_spec_hash_changes_with_any_field_and_not_otherwise() {
        let cfg = crate::config::load_str(
            "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"sleep\", \"1\"]\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let a = ContainerSpec::clone(&cfg.pods[0].containers[0]);
        let mut b = a.clone();
        assert_eq!(spec_hash(&a), spec_hash(&b));
        b.command[1] = "2".into();
        assert_ne!(spec_hash(&a), spec_hash(&b));
        let mut c = a.clone();
        c.stop_signal = 2;
        assert_ne!(spec_hash(&a), spec_hash(&c));
    }

    /// The hash written piece by piece is FNV-1a of the whole debug string, as state files
    /// written before recorded it: a vigil upgraded across the change still adopts its
    /// containers after a crash.
    #[test]
    fn the_spec_hash_is_fnv1a_of_the_whole_debug_form_as_before() {
        let cfg = crate::config::load_str(
            "[pods.web]\n[[pods.web.containers]]\nname = \"app\"\ncommand = [\"sleep\", \"1\"]\n\
             env = { A = \"b\" }\n[pods.web.containers.liveness_probe]\ntcp_socket = { port = 80 }\n",
            Path::new("t.toml"),
        )
        .unwrap();
        let spec = &cfg.pods[0].containers[0];
        let whole = format!("{spec:?}")
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
        assert_eq!(spec_hash(spec), whole);
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
    fn a_state_file_that_is_a_symlink_or_writable_by_others_is_not_trusted() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock.state");
        assert!(matches!(read_trusted(&p), Ok(None)));
        std::fs::write(&p, "1234 5 orphan\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            read_trusted(&p).unwrap().as_deref(),
            Some("1234 5 orphan\n")
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(read_trusted(&p), Err(Untrusted::Writable(0o666))));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(matches!(read_trusted(&p), Err(Untrusted::Writable(_))));
        let link = dir.path().join("l.state");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(matches!(read_trusted(&link), Err(Untrusted::Open(_))));
        if nix::unistd::geteuid().is_root() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
            assert!(matches!(
                read_trusted(&p),
                Err(Untrusted::Owner { owner: 65534, .. })
            ));
        }
        // A tracker at that path hears nothing of an untrusted file.
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let t = Tracker::new(&dir.path().join("s.sock"), true);
        assert!(t.previous().entries.is_empty());
    }

    #[test]
    fn the_temporary_file_is_created_afresh_and_a_stale_symlink_there_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let tmp = dir.path().join("s.sock.state.tmp");
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let mut t = Tracker::new(&dir.path().join("s.sock"), false);
        t.touch();
        t.set_ended(vec![Ended {
            label: "a/b".into(),
            end: KeptEnd::Completed,
            spec: 1,
        }]);
        t.flush();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let text = std::fs::read_to_string(dir.path().join("s.sock.state")).unwrap();
        assert!(text.contains("completed a/b"), "{text}");
        assert!(!tmp.exists());
    }

    #[test]
    fn the_record_is_taken_at_most_once_per_interval_and_only_after_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tracker::new(&dir.path().join("s.sock"), false);
        let t0 = Instant::now();
        assert!(!t.record_wanted(0, t0), "nothing changed");
        assert!(t.record_wanted(1, t0));
        t.set_record(1, "{}", t0);
        assert!(!t.record_wanted(1, t0));
        assert_eq!(t.deadline(), None, "idle: no wake-up");
        let soon = t0 + RECORD_INTERVAL / 2;
        assert!(!t.record_wanted(2, soon), "within the interval");
        assert_eq!(t.deadline(), Some(t0 + RECORD_INTERVAL), "taken at its end");
        assert!(t.record_wanted(3, t0 + RECORD_INTERVAL));
    }

    #[test]
    fn a_process_start_in_wall_clock_time_is_at_or_just_before_its_spawn() {
        let before = std::time::SystemTime::now();
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let after = std::time::SystemTime::now();
        let start = read_stat(child.id()).unwrap().start;
        let wall = started_wall(start).unwrap();
        let _ = (child.kill(), child.wait());
        assert!(wall <= after, "{wall:?} after {after:?}");
        // Rounded down to a clock tick (10 ms at USER_HZ 100), plus the clocks' reading gap.
        assert!(
            wall + Duration::from_millis(50) >= before,
            "{wall:?} long before {before:?}"
        );
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
    fn leftovers_are_killed_but_an_adopted_main_and_its_tree_are_kept() {
        use std::os::unix::process::ExitStatusExt;
        let sleep = || {
            std::process::Command::new("sleep")
                .arg("300")
                .spawn()
                .unwrap()
        };
        let (mut adopted, mut child, mut stale, mut other) = (sleep(), sleep(), sleep(), sleep());
        let entry = |c: &std::process::Child, label: &str, main: bool| Entry {
            pid: c.id(),
            start: read_stat(c.id()).unwrap().start,
            label: label.into(),
            main: main.then_some(MainInfo {
                spec: 1,
                restarts: 0,
            }),
        };
        let entries = vec![
            entry(&adopted, "web/app", true),
            entry(&child, "web/app", false),
            // A second main of the same label (not the adopted one) and another container's.
            entry(&stale, "web/app", true),
            entry(&other, "db/pg", true),
        ];
        let dir = tempfile::tempdir().unwrap();
        let mut t = Tracker::new(&dir.path().join("s.sock"), true);
        let kept = HashMap::from([("web/app".to_string(), adopted.id())]);
        t.kill_leftovers(&entries, &kept);
        assert_eq!(stale.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(other.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(adopted.try_wait().unwrap(), None, "the adopted main lives");
        assert_eq!(child.try_wait().unwrap(), None, "its tree lives");
        adopted.kill().unwrap();
        child.kill().unwrap();
        let _ = (adopted.wait(), child.wait());
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
