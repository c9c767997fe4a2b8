//! Spawning container processes and exec probes, signalling them, and reaping.
//!
//! Owns: turning a validated [`ContainerSpec`] plus an argv into a [`Prepared`] launch plan
//! (every name resolved, every string and list allocated *before* the fork), the single
//! async-signal-safe `pre_exec` body that runs between fork and exec, `kill(2)`/`killpg(2)`
//! wrappers, and the `waitpid(-1, WNOHANG)` reap loop.
//!
//! Must not: keep any state about children (the runtime's pid table does that), wait for a child
//! in a blocking way, open cgroup files (the caller passes the cgroup's already-open directory
//! and `cgroup.procs` fds, [`CgroupTarget`]), or allocate, lock, log or touch the environment
//! between fork and exec (see `child_setup`).
//!
//! Two spawn paths run the same `child_setup`: with a cgroup directory, `clone3` with
//! `CLONE_INTO_CGROUP` creates the child inside its cgroup (module `raw`; no migration, so no
//! wait for the kernel's cgroup write lock); otherwise, and as the fallback where clone3 is
//! unusable, `std::process::Command` + `pre_exec`, where the child writes "0" to `cgroup.procs`.
//!
//! Why `std::process::Command` with one `pre_exec` and not `Command::uid/gid`: std runs its own
//! uid/gid changes *before* `pre_exec` closures, so the bounding-set drops (which need
//! CAP_SETPCAP) and raising rlimits would then run unprivileged and fail. Doing everything in one
//! closure keeps the order under our control:
//! signal state → setsid → cgroup placement → oom_score_adj → rlimits → bounding set → clear
//! ambient set → keep-caps → setgroups → setgid → setuid → raise kept capabilities (permitted,
//! effective, inheritable, ambient) → no_new_privs → chdir → mark stray fds CLOEXEC.
//!
//! Kept capabilities of a non-root container are made usable the way systemd's
//! `AmbientCapabilities=` does it: `PR_SET_KEEPCAPS` before setuid keeps the permitted set across
//! the uid change, then capset(2) narrows permitted/effective/inheritable to the kept ones and
//! `PR_CAP_AMBIENT_RAISE` puts them in the ambient set, which survives execve(2) of an ordinary
//! (non-setuid, no file capabilities) program (capabilities(7), "Ambient capability set").
//!
//! Exec failures come back from std through its CLOEXEC error pipe as the `spawn()` error (the
//! clone3 path has its own pipe with the same meaning, see `raw`), so a missing binary is
//! reported synchronously by [`spawn`]. Failures of our own setup steps use the
//! same path; to tell them apart the child also writes one step byte into a second CLOEXEC pipe
//! before failing, which the parent reads after `spawn()` returns.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::str::FromStr;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Group, Pid, Uid, User};

use crate::config::spec::ContainerSpec;

/// `PATH` given to children unless their config sets one (systemd's default for services).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Where the kernel says which capability number is the highest it knows
/// (capabilities(7), "/proc/sys/kernel/cap_last_cap").
const CAP_LAST_CAP_PATH: &str = "/proc/sys/kernel/cap_last_cap";

/// Environment variables that belong to vigil's own service manager protocol (sd_notify(3),
/// sd_listen_fds(3)) and must never leak into children, even if configured.
fn is_reserved_env(key: &str) -> bool {
    key == "NOTIFY_SOCKET" || key.starts_with("WATCHDOG_") || key.starts_with("LISTEN_")
}

/// Errors of this module; each names the operation that failed and what it failed on.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("empty command")]
    EmptyCommand,
    #[error("{what} contains a NUL byte: {value:?}")]
    NulByte { what: &'static str, value: String },
    #[error("unknown user {name:?}")]
    UnknownUser { name: String },
    #[error("unknown group {name:?}")]
    UnknownGroup { name: String },
    #[error("look up user {name:?}: {source}")]
    LookupUser { name: String, source: Errno },
    #[error("look up group {name:?}: {source}")]
    LookupGroup { name: String, source: Errno },
    #[error("look up supplementary groups of {name:?}: {source}")]
    GroupList { name: String, source: Errno },
    #[error("unknown capability {name:?}")]
    UnknownCapability { name: String },
    #[error("create pipe: {source}")]
    Pipe { source: Errno },
    #[error("open /dev/null: {source}")]
    OpenDevNull { source: io::Error },
    #[error("duplicate output fd: {source}")]
    DupFd { source: io::Error },
    #[error("exec {argv0:?}: {source}")]
    CommandNotFound { argv0: String, source: io::Error },
    #[error("exec {argv0:?}: {source}")]
    NotExecutable { argv0: String, source: io::Error },
    #[error("exec {argv0:?}: {source}")]
    Exec { argv0: String, source: io::Error },
    #[error("place {argv0:?} in its cgroup (write cgroup.procs): {source}")]
    CgroupPlacement { argv0: String, source: io::Error },
    #[error("change to working directory {path:?}: {source}")]
    WorkingDir { path: PathBuf, source: io::Error },
    #[error("prepare {argv0:?} before exec ({step}): {source}")]
    ChildSetup {
        argv0: String,
        step: &'static str,
        source: io::Error,
    },
    #[error("refusing to signal pid {pid}: not a single process or group id")]
    InvalidPid { pid: u32 },
    #[error("invalid signal number {signal}")]
    InvalidSignal { signal: i32 },
    #[error("send signal {signal} to pid {pid}: {source}")]
    Kill {
        pid: u32,
        signal: i32,
        source: Errno,
    },
    #[error("send signal {signal} to process group {pgid}: {source}")]
    KillGroup {
        pgid: u32,
        signal: i32,
        source: Errno,
    },
    #[error("waitpid {pid}: {source}")]
    Wait { pid: i32, source: Errno },
    #[error("become child subreaper: {source}")]
    Subreaper { source: Errno },
    #[error("set O_NONBLOCK on fd {fd}: {source}")]
    SetNonblocking { fd: RawFd, source: Errno },
}

/// Resolved credentials applied in the child.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Creds {
    uid: Option<libc::uid_t>,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

/// Everything a spawn needs, resolved and allocated before the fork.
///
/// Built by [`prepare`] from an argv (the container's command, or an exec probe's) and the
/// container's spec (user, group, env, working dir, rlimits, capabilities, no_new_privs).
#[derive(Debug, Clone)]
pub struct Prepared {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    working_dir: Option<PathBuf>,
    working_dir_c: Option<CString>,
    creds: Option<Creds>,
    /// (resource, limit) pairs.
    rlimits: Vec<(u32, libc::rlimit)>,
    /// Capability numbers to drop from the bounding set (empty: leave it alone).
    cap_drop: Vec<libc::c_int>,
    /// Capability numbers raised into the ambient set after setuid (non-root users only).
    ambient: Vec<libc::c_int>,
    no_new_privs: bool,
    /// argv/envp and PATH candidates for the clone3 path (see `raw`).
    exec: raw::ExecTarget,
}

impl Prepared {
    /// The program as configured, for messages.
    pub fn argv0(&self) -> &str {
        &self.argv[0]
    }

    /// The full argv.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The complete environment the child gets, in the order it is applied.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// The uid the child runs as, if vigil changes it.
    pub fn uid(&self) -> Option<u32> {
        self.creds.as_ref().and_then(|c| c.uid)
    }

    /// The gid the child runs as, if vigil changes it.
    pub fn gid(&self) -> Option<u32> {
        self.creds.as_ref().map(|c| c.gid)
    }

    /// The capability numbers dropped from the bounding set.
    pub fn dropped_capabilities(&self) -> &[libc::c_int] {
        &self.cap_drop
    }

    /// The capability numbers a non-root child gets in its ambient (and effective) set.
    pub fn ambient_capabilities(&self) -> &[libc::c_int] {
        &self.ambient
    }
}

fn check_nul(what: &'static str, value: &str) -> Result<(), SpawnError> {
    if value.as_bytes().contains(&0) {
        return Err(SpawnError::NulByte {
            what,
            value: value.to_string(),
        });
    }
    Ok(())
}

/// A resolved user: uid, primary gid, name and home if a passwd entry exists.
struct ResolvedUser {
    uid: u32,
    gid: Option<u32>,
    name: Option<String>,
    home: Option<PathBuf>,
}

fn resolve_user(spec: &str) -> Result<ResolvedUser, SpawnError> {
    let lookup_err = |source| SpawnError::LookupUser {
        name: spec.to_string(),
        source,
    };
    if let Ok(uid) = spec.parse::<u32>() {
        // A numeric uid need not have a passwd entry (common in containers).
        let entry = User::from_uid(Uid::from_raw(uid)).map_err(lookup_err)?;
        return Ok(match entry {
            Some(u) => ResolvedUser {
                uid,
                gid: Some(u.gid.as_raw()),
                name: Some(u.name),
                home: Some(u.dir),
            },
            None => ResolvedUser {
                uid,
                gid: None,
                name: None,
                home: None,
            },
        });
    }
    match User::from_name(spec).map_err(lookup_err)? {
        Some(u) => Ok(ResolvedUser {
            uid: u.uid.as_raw(),
            gid: Some(u.gid.as_raw()),
            name: Some(u.name),
            home: Some(u.dir),
        }),
        None => Err(SpawnError::UnknownUser {
            name: spec.to_string(),
        }),
    }
}

fn resolve_group(spec: &str) -> Result<u32, SpawnError> {
    if let Ok(gid) = spec.parse::<u32>() {
        return Ok(gid);
    }
    match Group::from_name(spec) {
        Ok(Some(g)) => Ok(g.gid.as_raw()),
        Ok(None) => Err(SpawnError::UnknownGroup {
            name: spec.to_string(),
        }),
        Err(source) => Err(SpawnError::LookupGroup {
            name: spec.to_string(),
            source,
        }),
    }
}

/// Highest capability number the running kernel knows. Falls back to the newest one the caps
/// crate knows when /proc is unavailable (then capabilities newer than that are not dropped).
fn cap_last_cap() -> u32 {
    let fallback = caps::all()
        .iter()
        .map(|c| c.index() as u32)
        .max()
        .unwrap_or(40);
    match std::fs::read_to_string(CAP_LAST_CAP_PATH) {
        Ok(s) => match s.trim().parse::<u32>() {
            Ok(n) => n,
            Err(_) => {
                log::warn!("{CAP_LAST_CAP_PATH}: unparsable {s:?}; assuming {fallback}");
                fallback
            }
        },
        Err(e) => {
            log::warn!("read {CAP_LAST_CAP_PATH}: {e}; assuming {fallback}");
            fallback
        }
    }
}

/// Parses `CAP_NET_BIND_SERVICE`, `cap_net_bind_service` or `NET_BIND_SERVICE`.
fn parse_capability(name: &str) -> Result<caps::Capability, SpawnError> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    caps::Capability::from_str(&full).map_err(|_| SpawnError::UnknownCapability {
        name: name.to_string(),
    })
}

/// Whether this process may drop bounding-set capabilities (needs CAP_SETPCAP, capabilities(7)).
fn can_drop_bounding() -> bool {
    caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false)
}

/// Resolves everything a spawn of `argv` under `spec` needs, before any fork.
///
/// - user/group: names or numbers; a user's primary group and supplementary groups
///   (getgrouplist(3)) come from its passwd entry; a group alone changes only the gid (and the
///   supplementary list to just that gid). A numeric uid without a passwd entry and without a
///   configured group runs with gid = the same number.
/// - environment: empty, then `PATH` (default [`DEFAULT_PATH`]), `HOME`, `USER` (of the target
///   user, else of vigil's own uid), then the configured env, which may override those three.
///   `NOTIFY_SOCKET`, `WATCHDOG_*` and `LISTEN_*` are never passed, even if configured.
/// - capabilities: every capability `0..=cap_last_cap` not listed in `spec.capabilities` is
///   dropped from the bounding set when the child runs as a non-root user, or when a root
///   child has an explicit capability list (interface: "kept in the bounding set; all others
///   dropped for non-root users"). A root child without a list keeps the full set, like any
///   root service. Drops are skipped when vigil itself lacks CAP_SETPCAP. A root vigil starting
///   a non-root child also raises the kept capabilities into the child's permitted, effective,
///   inheritable and ambient sets, so they are usable by the program it execs (like systemd's
///   `AmbientCapabilities=`); a kept capability vigil does not hold itself is skipped with a
///   warning.
pub fn prepare(argv: &[String], spec: &ContainerSpec) -> Result<Prepared, SpawnError> {
    if argv.is_empty() || argv[0].is_empty() {
        return Err(SpawnError::EmptyCommand);
    }
    for a in argv {
        check_nul("argument", a)?;
    }

    // Credentials.
    let user = spec.user.as_deref().map(resolve_user).transpose()?;
    let group = spec.group.as_deref().map(resolve_group).transpose()?;
    let euid = Uid::effective().as_raw();
    let egid = Gid::effective().as_raw();
    let creds = match (&user, group) {
        (None, None) => None,
        (None, Some(gid)) => Some(Creds {
            uid: None,
            gid,
            groups: vec![gid],
        }),
        (Some(u), g) => {
            let gid = g.or(u.gid).unwrap_or(u.uid);
            let groups = match &u.name {
                Some(name) => {
                    let cname = CString::new(name.as_str()).map_err(|_| SpawnError::NulByte {
                        what: "user name",
                        value: name.clone(),
                    })?;
                    nix::unistd::getgrouplist(&cname, Gid::from_raw(gid))
                        .map_err(|source| SpawnError::GroupList {
                            name: name.clone(),
                            source,
                        })?
                        .into_iter()
                        .map(|g| g.as_raw())
                        .collect()
                }
                None => vec![gid],
            };
            Some(Creds {
                uid: Some(u.uid),
                gid,
                groups,
            })
        }
    };
    // Changing to what we already are is a no-op; skip it so an unprivileged vigil can still
    // name its own user (setgroups would fail with EPERM).
    let creds = creds.filter(|c| !(euid != 0 && c.uid.unwrap_or(euid) == euid && c.gid == egid));
    let target_uid = user.as_ref().map(|u| u.uid).unwrap_or(euid);

    // Environment.
    let (home, user_name) = match &user {
        Some(u) => (
            Some(u.home.clone().unwrap_or_else(|| PathBuf::from("/"))),
            u.name.clone(),
        ),
        None => match User::from_uid(Uid::current()) {
            Ok(Some(me)) => (Some(me.dir), Some(me.name)),
            _ => (
                std::env::var_os("HOME").map(PathBuf::from),
                std::env::var("USER").ok(),
            ),
        },
    };
    let mut env: Vec<(String, String)> = vec![("PATH".into(), DEFAULT_PATH.into())];
    if let Some(h) = home {
        env.push(("HOME".into(), h.to_string_lossy().into_owned()));
    }
    if let Some(n) = user_name {
        env.push(("USER".into(), n));
    }
    for (k, v) in &spec.env {
        if is_reserved_env(k) {
            log::warn!(
                "container {}: not passing reserved environment variable {k}",
                spec.name
            );
            continue;
        }
        check_nul("environment variable", k)?;
        check_nul("environment value", v)?;
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }

    // Capabilities.
    let mut keep = Vec::new();
    for name in &spec.capabilities {
        keep.push(parse_capability(name)?.index() as u32);
    }
    let want_drop = target_uid != 0 || !spec.capabilities.is_empty();
    let cap_drop = if want_drop && can_drop_bounding() {
        (0..=cap_last_cap())
            .filter(|c| !keep.contains(c))
            .map(|c| c as libc::c_int)
            .collect()
    } else {
        if want_drop {
            log::debug!(
                "container {}: vigil lacks CAP_SETPCAP; bounding set left as is",
                spec.name
            );
        }
        Vec::new()
    };
    let changes_to_non_root = creds.as_ref().and_then(|c| c.uid).is_some_and(|u| u != 0);
    let ambient = if euid == 0 && changes_to_non_root {
        let mut out = Vec::new();
        for name in &spec.capabilities {
            let cap = parse_capability(name)?;
            if caps::has_cap(None, caps::CapSet::Permitted, cap).unwrap_or(false) {
                out.push(cap.index() as libc::c_int);
            } else {
                log::warn!(
                    "container {}: vigil does not hold {cap} itself; not passing it on",
                    spec.name
                );
            }
        }
        out
    } else {
        Vec::new()
    };

    let rlimits = spec
        .rlimits
        .iter()
        .map(|r| {
            (
                r.resource,
                libc::rlimit {
                    rlim_cur: r.soft as libc::rlim_t,
                    rlim_max: r.hard as libc::rlim_t,
                },
            )
        })
        .collect();

    let working_dir_c = match &spec.working_dir {
        Some(p) => Some(
            CString::new(p.clone().into_os_string().into_vec()).map_err(|_| {
                SpawnError::NulByte {
                    what: "working_dir",
                    value: p.to_string_lossy().into_owned(),
                }
            })?,
        ),
        None => None,
    };

    let exec = raw::exec_target(argv, &env)?;
    Ok(Prepared {
        exec,
        argv: argv.to_vec(),
        env,
        working_dir: spec.working_dir.clone(),
        working_dir_c,
        creds,
        rlimits,
        cap_drop,
        ambient,
        no_new_privs: spec.no_new_privs,
    })
}

/// Where a child's stdout and stderr go. stdin is always /dev/null.
#[derive(Debug)]
pub enum Stdio {
    /// Both to one fd (the usual case: one pipe per container keeps the two streams in order).
    Combined(OwnedFd),
    /// Each to its own fd.
    Separate { stdout: OwnedFd, stderr: OwnedFd },
    /// Both to /dev/null.
    Null,
}

/// A pipe for child output: the read end is `O_NONBLOCK|O_CLOEXEC` (for the event loop), the
/// write end `O_CLOEXEC` only (std dup2s it onto the child's stdout/stderr, which clears
/// CLOEXEC there; the child gets a blocking pipe as programs expect).
pub fn pipe_nonblocking() -> Result<(OwnedFd, OwnedFd), SpawnError> {
    let (r, w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|source| SpawnError::Pipe { source })?;
    set_nonblocking(&r)?;
    Ok((r, w))
}

/// Sets `O_NONBLOCK` on `fd`, keeping its other status flags.
pub fn set_nonblocking(fd: &impl std::os::fd::AsFd) -> Result<(), SpawnError> {
    let raw = fd.as_fd().as_raw_fd();
    let err = |source| SpawnError::SetNonblocking { fd: raw, source };
    let flags = fcntl(fd.as_fd(), FcntlArg::F_GETFL).map_err(err)?;
    let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
    fcntl(fd.as_fd(), FcntlArg::F_SETFL(flags)).map_err(err)?;
    Ok(())
}

/// Steps of the child setup, written as one byte to the step pipe when a step fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Step {
    SignalReset = 1,
    Setsid,
    Cgroup,
    Rlimit,
    CapBound,
    AmbientClear,
    Setgroups,
    Setgid,
    Setuid,
    NoNewPrivs,
    Chdir,
    KeepCaps,
    Capset,
    AmbientRaise,
    Stdio,
}

impl Step {
    const ALL: [Step; 15] = [
        Step::SignalReset,
        Step::Setsid,
        Step::Cgroup,
        Step::Rlimit,
        Step::CapBound,
        Step::AmbientClear,
        Step::Setgroups,
        Step::Setgid,
        Step::Setuid,
        Step::NoNewPrivs,
        Step::Chdir,
        Step::KeepCaps,
        Step::Capset,
        Step::AmbientRaise,
        Step::Stdio,
    ];

    fn from_byte(b: u8) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u8 == b)
    }

    fn name(self) -> &'static str {
        match self {
            Step::SignalReset => "reset signal mask",
            Step::Setsid => "setsid",
            Step::Cgroup => "write cgroup.procs",
            Step::Rlimit => "setrlimit",
            Step::CapBound => "drop bounding-set capabilities",
            Step::AmbientClear => "clear ambient capabilities",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setgid",
            Step::Setuid => "setuid",
            Step::NoNewPrivs => "set no_new_privs",
            Step::Chdir => "chdir",
            Step::KeepCaps => "keep capabilities across setuid",
            Step::Capset => "set kept capabilities (capset)",
            Step::AmbientRaise => "raise ambient capabilities",
            Step::Stdio => "redirect stdin/stdout/stderr",
        }
    }
}

/// What the child needs, all owned and allocated by the parent. Moved into the `pre_exec`
/// closure, which only reads it.
struct ChildPlan {
    cgroup_procs: Option<RawFd>,
    step_fd: RawFd,
    rlimits: Vec<(u32, libc::rlimit)>,
    cap_drop: Vec<libc::c_int>,
    /// capset(2) payload for the kept capabilities (`None`: no ambient raise).
    capset: Option<CapSet>,
    ambient: Vec<libc::c_int>,
    creds: Option<Creds>,
    no_new_privs: bool,
    working_dir: Option<CString>,
}

/// `struct __user_cap_header_struct` (linux/capability.h).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` (linux/capability.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: 64-bit sets as two 32-bit data structs.
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// A capset(2) call prepared in the parent.
#[derive(Debug, Clone, Copy)]
struct CapSet {
    header: CapHeader,
    data: [CapData; 2],
}

impl CapSet {
    /// The same capabilities in the permitted, effective and inheritable sets.
    fn all_three(caps: &[libc::c_int]) -> CapSet {
        let mut data = [CapData::default(); 2];
        for &c in caps {
            let (i, bit) = ((c / 32) as usize, 1u32 << (c % 32));
            if let Some(d) = data.get_mut(i) {
                d.effective |= bit;
                d.permitted |= bit;
                d.inheritable |= bit;
            }
        }
        CapSet {
            header: CapHeader {
                version: LINUX_CAPABILITY_VERSION_3,
                pid: 0,
            },
            data,
        }
    }
}

/// Records which step failed and returns the errno as an `io::Error` (no allocation:
/// `last_os_error` stores the raw code).
fn step_failed(step_fd: RawFd, step: Step) -> io::Error {
    let err = io::Error::last_os_error();
    let b = [step as u8];
    // SAFETY: write(2) is async-signal-safe; `b` is a live 1-byte buffer. The result is
    // ignored: if it fails, the parent reports the error as an exec failure.
    unsafe {
        libc::write(step_fd, b.as_ptr().cast(), 1);
    }
    err
}

/// The body run between fork and exec. Async-signal-safe only: raw syscalls on data prepared
/// by the parent; no allocation, no locks, no logging, no environment access
/// (signal-safety(7); std's `CommandExt::pre_exec` docs).
fn child_setup(plan: &ChildPlan) -> io::Result<()> {
    let fail = |step| Err(step_failed(plan.step_fd, step));

    // 1. Signals. Dispositions first, so that unblocking cannot run one of vigil's handlers in
    // the child; std resets only SIGPIPE, and exec keeps SIG_IGN (signal(7)). All 64 signals,
    // including the two real-time ones glibc reserves (32, 33), which its sigaction() refuses,
    // hence the raw rt_sigaction(2). An all-zero kernel sigaction is {SIG_DFL, no flags, empty
    // mask} whatever the architecture's field order; the buffer is larger than any layout.
    // Errors (EINVAL for SIGKILL/SIGSTOP) are ignored: nothing to reset there.
    let dfl = [0u64; 8];
    for sig in 1..=64 {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: raw syscall; `dfl` is a valid zeroed buffer larger than struct
        // kernel_sigaction, and the old-action pointer is null.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                dfl.as_ptr(),
                std::ptr::null_mut::<libc::c_void>(),
                std::mem::size_of::<u64>(),
            );
        }
    }
    // SAFETY: sigset_t is plain data; sigemptyset initialises it; sigprocmask is
    // async-signal-safe and the child has a single thread.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return fail(Step::SignalReset);
    }

    // 2. Own session and process group, so killpg(pid) reaches the whole tree without cgroups
    // and terminal signals to vigil's group do not hit the child.
    // SAFETY: setsid(2) is async-signal-safe.
    if unsafe { libc::setsid() } < 0 {
        return fail(Step::Setsid);
    }

    // 3. Cgroup placement: "0" means the writing process (cgroup v2 docs, "cgroup.procs").
    // The fd was opened by the parent; since Linux 5.16 the permission check uses the opener's
    // credentials, so this works even after a later setuid.
    if let Some(fd) = plan.cgroup_procs {
        // SAFETY: write(2) on a caller-owned fd with a static 1-byte buffer.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return fail(Step::Cgroup);
        }
    }

    // 3b. Containers do not inherit vigil's own protection from the OOM killer
    // (`oom_score_adj` is inherited across fork and exec, proc(5)): back to the neutral 0.
    // Raising the value needs no privilege; failure (no /proc) is harmless and ignored.
    // SAFETY: open(2)/write(2)/close(2) are async-signal-safe; the path is a static C string.
    unsafe {
        let fd = libc::open(
            c"/proc/self/oom_score_adj".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }

    // 4. Resource limits, while still privileged (raising a hard limit needs
    // CAP_SYS_RESOURCE, setrlimit(2)).
    for (resource, lim) in &plan.rlimits {
        // SAFETY: `lim` points to a valid rlimit prepared by the parent.
        if unsafe { libc::setrlimit(*resource as _, lim) } != 0 {
            return fail(Step::Rlimit);
        }
    }

    // 5. Bounding set, before setuid: PR_CAPBSET_DROP needs CAP_SETPCAP (prctl(2)). EINVAL
    // means the kernel does not know that capability: nothing to drop.
    for &cap in &plan.cap_drop {
        // SAFETY: prctl with integer arguments only.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc != 0 && Errno::last_raw() != libc::EINVAL {
            return fail(Step::CapBound);
        }
    }

    // 6. Ambient set. EINVAL: kernel older than 4.3 has no ambient set.
    // SAFETY: prctl with integer arguments only.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    if rc != 0 && Errno::last_raw() != libc::EINVAL {
        return fail(Step::AmbientClear);
    }

    // 7-9. Credentials: groups and gid while we still may, uid last (setuid(2) drops the
    // permitted/effective/ambient capability sets when leaving uid 0 — unless keep-caps is set,
    // which keeps the permitted set; the flag itself is cleared again by execve).
    if plan.capset.is_some() {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            return fail(Step::KeepCaps);
        }
    }
    // Raw syscalls, not glibc's wrappers: those broadcast the change to every thread glibc
    // believes exists, which after a raw clone3 (no atfork handlers) are the parent's threads.
    // The kernel calls change only the calling thread, which is all a single-threaded child has.
    if let Some(c) = &plan.creds {
        // SAFETY: pointer and length describe the parent-allocated Vec.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_setgroups,
                c.groups.len() as libc::size_t,
                c.groups.as_ptr(),
            )
        };
        if rc != 0 {
            return fail(Step::Setgroups);
        }
        // SAFETY: raw syscall with an integer argument.
        if unsafe { libc::syscall(libc::SYS_setgid, c.gid) } != 0 {
            return fail(Step::Setgid);
        }
        if let Some(uid) = c.uid {
            // SAFETY: as above.
            if unsafe { libc::syscall(libc::SYS_setuid, uid) } != 0 {
                return fail(Step::Setuid);
            }
        }
    }

    // 9b. Kept capabilities of a non-root child: narrow permitted to them and put them in the
    // effective and inheritable sets (a subset of the kept permitted set, so allowed without
    // CAP_SETPCAP, capset(2)), then raise each into the ambient set, which needs it permitted
    // and inheritable (prctl(2), PR_CAP_AMBIENT_RAISE).
    if let Some(cs) = &plan.capset {
        // SAFETY: raw capset(2) with pointers to the plan's header and two data structs, the
        // layout _LINUX_CAPABILITY_VERSION_3 expects.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_capset,
                &cs.header as *const CapHeader,
                cs.data.as_ptr(),
            )
        };
        if rc != 0 {
            return fail(Step::Capset);
        }
        for &cap in &plan.ambient {
            // SAFETY: prctl with integer arguments only.
            let rc = unsafe {
                libc::prctl(
                    libc::PR_CAP_AMBIENT,
                    libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                    cap as libc::c_ulong,
                    0,
                    0,
                )
            };
            if rc != 0 {
                return fail(Step::AmbientRaise);
            }
        }
    }

    // 10. no_new_privs: after setuid, and inherited across exec (prctl(2)).
    if plan.no_new_privs {
        // SAFETY: prctl with integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) } != 0 {
            return fail(Step::NoNewPrivs);
        }
    }

    // 11. Working directory, as the target user (like systemd's WorkingDirectory=), and here
    // rather than via Command::current_dir so that its failure is reported as such instead of
    // looking like a missing binary.
    if let Some(dir) = &plan.working_dir {
        // SAFETY: `dir` is a valid NUL-terminated string owned by the plan.
        if unsafe { libc::chdir(dir.as_ptr()) } != 0 {
            return fail(Step::Chdir);
        }
    }

    // 12. Any fd vigil leaked without CLOEXEC must not reach the program. CLOSE_RANGE_CLOEXEC
    // only marks them, so std's error pipe still works until exec (close_range(2), Linux 5.11;
    // on older kernels this fails and is ignored: vigil opens everything CLOEXEC anyway).
    // SAFETY: raw syscall with integer arguments only.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    Ok(())
}

/// The cgroup a child is started in: the cgroup2 directory (O_RDONLY|O_DIRECTORY, for
/// `clone3(CLONE_INTO_CGROUP)`) and its `cgroup.procs` opened for writing (for the `Command`
/// fallback, where the child writes "0" to it before exec).
#[derive(Debug, Clone, Copy)]
pub struct CgroupTarget<'a> {
    /// `None`: always use the `Command` path with `procs`.
    pub dir: Option<BorrowedFd<'a>>,
    pub procs: BorrowedFd<'a>,
}

/// Set once clone3 turned out unusable on this system, so the fallback is logged once and
/// later spawns skip the attempt.
static CLONE3_UNUSABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Starts `p`, returning the child's pid. The child is a session leader (pid = pgid = sid),
/// runs with stdin on /dev/null and its output on `stdio`, and is in `cgroup` (if given) before
/// it runs any of the program's code.
///
/// With a cgroup directory the child is created directly in it with
/// `clone3(CLONE_INTO_CGROUP)` (see `raw`: no migration, so no wait for the kernel's cgroup
/// write lock); without one, or when clone3 is unusable (ENOSYS, E2BIG, EINVAL, EBADF, EPERM,
/// or a child killed at birth), it uses `std::process::Command` whose child writes "0" to
/// `cgroup.procs`. Both run the same `child_setup` and report errors the same way.
///
/// The caller reaps it (see [`reap_all`]). Exec and setup failures are reported here,
/// synchronously.
pub fn spawn(
    p: &Prepared,
    cgroup: Option<CgroupTarget<'_>>,
    stdio: Stdio,
) -> Result<u32, SpawnError> {
    let dir = cgroup.and_then(|c| c.dir);
    match dir {
        Some(dir) if !CLONE3_UNUSABLE.load(std::sync::atomic::Ordering::Relaxed) => {
            // The raw path consumes `stdio`; keep duplicates for a possible fallback.
            let spare = dup_stdio(&stdio)?;
            match raw::spawn(p, child_plan(p, None), Some(dir.as_raw_fd()), stdio) {
                Ok(pid) => Ok(pid),
                Err(raw::RawError::Failed(e)) => Err(e),
                Err(raw::RawError::Unsupported(errno)) => {
                    if !CLONE3_UNUSABLE.swap(true, std::sync::atomic::Ordering::Relaxed) {
                        log::debug!(
                            "clone3 into a cgroup is unusable here ({errno}); spawning through \
                             cgroup.procs from now on"
                        );
                    }
                    spawn_command(p, cgroup.map(|c| c.procs), spare)
                }
                Err(raw::RawError::KilledAtBirth) => {
                    log::debug!(
                        "{:?}: clone3 child was killed at birth (its cgroup saw cgroup.kill); \
                         spawning through cgroup.procs",
                        p.argv0()
                    );
                    spawn_command(p, cgroup.map(|c| c.procs), spare)
                }
            }
        }
        _ => spawn_command(p, cgroup.map(|c| c.procs), stdio),
    }
}

/// Duplicates (CLOEXEC) the descriptors of `stdio`.
fn dup_stdio(stdio: &Stdio) -> Result<Stdio, SpawnError> {
    let dup = |fd: &OwnedFd| {
        fd.try_clone()
            .map_err(|source| SpawnError::DupFd { source })
    };
    Ok(match stdio {
        Stdio::Combined(fd) => Stdio::Combined(dup(fd)?),
        Stdio::Separate { stdout, stderr } => Stdio::Separate {
            stdout: dup(stdout)?,
            stderr: dup(stderr)?,
        },
        Stdio::Null => Stdio::Null,
    })
}

/// The child's setup plan (the step fd is filled in by each path).
fn child_plan(p: &Prepared, cgroup_procs: Option<RawFd>) -> ChildPlan {
    ChildPlan {
        cgroup_procs,
        step_fd: -1,
        rlimits: p.rlimits.clone(),
        cap_drop: p.cap_drop.clone(),
        capset: (!p.ambient.is_empty()).then(|| CapSet::all_three(&p.ambient)),
        ambient: p.ambient.clone(),
        creds: p.creds.clone(),
        no_new_privs: p.no_new_privs,
        working_dir: p.working_dir_c.clone(),
    }
}

/// The `std::process::Command` path: fork, [`child_setup`] in `pre_exec` (including the
/// `cgroup.procs` write), execvp.
fn spawn_command(
    p: &Prepared,
    cgroup_procs: Option<BorrowedFd<'_>>,
    stdio: Stdio,
) -> Result<u32, SpawnError> {
    let (out, err) = match stdio {
        Stdio::Combined(fd) => {
            let dup = fd
                .try_clone()
                .map_err(|source| SpawnError::DupFd { source })?;
            (
                std::process::Stdio::from(fd),
                std::process::Stdio::from(dup),
            )
        }
        Stdio::Separate { stdout, stderr } => (stdout.into(), stderr.into()),
        Stdio::Null => (std::process::Stdio::null(), std::process::Stdio::null()),
    };

    let (step_r, step_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
        .map_err(|source| SpawnError::Pipe { source })?;

    let mut cmd = Command::new(&p.argv[0]);
    cmd.args(&p.argv[1..])
        .env_clear()
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err);

    let mut plan = child_plan(p, cgroup_procs.map(|fd| fd.as_raw_fd()));
    plan.step_fd = step_w.as_raw_fd();
    // SAFETY: `child_setup` is async-signal-safe (see its doc): it only reads `plan`, which was
    // fully allocated here in the parent, and makes raw syscalls. The raw fds in `plan` stay
    // open until after `spawn()` returns: `step_w` is dropped below and `cgroup_procs` is
    // borrowed for this whole call.
    unsafe {
        cmd.pre_exec(move || child_setup(&plan));
    }

    let result = cmd.spawn();
    drop(cmd);
    drop(step_w);
    match result {
        Ok(child) => {
            // We reap via waitpid ourselves; dropping `Child` neither waits nor kills.
            Ok(child.id())
        }
        Err(source) => {
            let mut b = [0u8; 1];
            let step = match File::from(step_r).read(&mut b) {
                Ok(1) => Step::from_byte(b[0]),
                _ => None,
            };
            Err(classify_spawn_error(p, step, source))
        }
    }
}

fn classify_spawn_error(p: &Prepared, step: Option<Step>, source: io::Error) -> SpawnError {
    let argv0 = p.argv[0].clone();
    match step {
        Some(Step::Cgroup) => SpawnError::CgroupPlacement { argv0, source },
        Some(Step::Chdir) => SpawnError::WorkingDir {
            path: p.working_dir.clone().unwrap_or_default(),
            source,
        },
        Some(step) => SpawnError::ChildSetup {
            argv0,
            step: step.name(),
            source,
        },
        None => match source.raw_os_error() {
            Some(libc::ENOENT) | Some(libc::ENOTDIR) => {
                SpawnError::CommandNotFound { argv0, source }
            }
            Some(libc::EACCES) | Some(libc::ENOEXEC) | Some(libc::EPERM) => {
                SpawnError::NotExecutable { argv0, source }
            }
            _ => SpawnError::Exec { argv0, source },
        },
    }
}

fn to_signal(sig: i32) -> Result<Option<Signal>, SpawnError> {
    if sig == 0 {
        return Ok(None);
    }
    Signal::try_from(sig)
        .map(Some)
        .map_err(|_| SpawnError::InvalidSignal { signal: sig })
}

/// Converts a pid for kill(2), refusing 0 and values that would mean "every process" or a
/// group (0, negative after conversion) — a bug there must not signal the world.
fn checked_pid(pid: u32, min: u32) -> Result<Pid, SpawnError> {
    if pid < min || pid > i32::MAX as u32 {
        return Err(SpawnError::InvalidPid { pid });
    }
    Ok(Pid::from_raw(pid as i32))
}

/// `kill(pid, sig)`. `sig` 0 only checks existence. ESRCH comes back as an error: the caller
/// decides whether "already gone" matters.
pub fn signal(pid: u32, sig: i32) -> Result<(), SpawnError> {
    let target = checked_pid(pid, 1)?;
    nix::sys::signal::kill(target, to_signal(sig)?).map_err(|source| SpawnError::Kill {
        pid,
        signal: sig,
        source,
    })
}

/// `killpg(pgid, sig)`: every container is its own session and process group (setsid in the
/// child), so this reaches its whole tree when running without cgroups (unless a descendant
/// made its own group). pgid 1 is refused.
pub fn signal_group(pgid: u32, sig: i32) -> Result<(), SpawnError> {
    let target = checked_pid(pgid, 2)?;
    nix::sys::signal::killpg(target, to_signal(sig)?).map_err(|source| SpawnError::KillGroup {
        pgid,
        signal: sig,
        source,
    })
}

/// One reaped child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaped {
    Exited {
        pid: u32,
        code: i32,
    },
    Signaled {
        pid: u32,
        signal: i32,
        core_dumped: bool,
    },
}

impl Reaped {
    pub fn pid(&self) -> u32 {
        match *self {
            Reaped::Exited { pid, .. } | Reaped::Signaled { pid, .. } => pid,
        }
    }
}

fn to_reaped(status: WaitStatus) -> Option<Reaped> {
    match status {
        WaitStatus::Exited(pid, code) => Some(Reaped::Exited {
            pid: pid.as_raw() as u32,
            code,
        }),
        WaitStatus::Signaled(pid, sig, core_dumped) => Some(Reaped::Signaled {
            pid: pid.as_raw() as u32,
            signal: sig as i32,
            core_dumped,
        }),
        _ => None,
    }
}

/// Reaps every child that has terminated: `waitpid(-1, WNOHANG)` until it reports none left
/// (0) or no children at all (ECHILD); EINTR loops. SIGCHLD coalesces, so the runtime calls
/// this on every SIGCHLD wakeup and must not assume one child per signal. As PID 1 or a
/// subreaper this also collects orphans the runtime never spawned (returned like any other).
///
/// Must be the only reaping path in the process (waitpid(-1) takes any child).
pub fn reap_all() -> Vec<Reaped> {
    let mut out = Vec::new();
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => break,
            Ok(status) => {
                if let Some(r) = to_reaped(status) {
                    out.push(r);
                }
            }
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => break,
            Err(e) => {
                log::error!("waitpid(-1): {e}");
                break;
            }
        }
    }
    out
}

/// Reaps `pid` if it has terminated (`waitpid(pid, WNOHANG)`); `Ok(None)` while it runs.
pub fn try_reap(pid: u32) -> Result<Option<Reaped>, SpawnError> {
    let target = checked_pid(pid, 1)?;
    loop {
        match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => return Ok(None),
            Ok(status) => {
                if let Some(r) = to_reaped(status) {
                    return Ok(Some(r));
                }
            }
            Err(Errno::EINTR) => continue,
            Err(source) => {
                return Err(SpawnError::Wait {
                    pid: pid as i32,
                    source,
                });
            }
        }
    }
}

/// `prctl(PR_SET_CHILD_SUBREAPER, 1)`: orphaned descendants are re-parented to vigil instead of
/// PID 1, so [`reap_all`] collects them (prctl(2)).
pub fn set_child_subreaper() -> Result<(), SpawnError> {
    nix::sys::prctl::set_child_subreaper(true).map_err(|source| SpawnError::Subreaper { source })
}

mod raw;

#[cfg(test)]
mod tests;
