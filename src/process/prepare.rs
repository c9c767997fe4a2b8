//! Resolving a launch before any fork: users and groups (passwd, group, getgrouplist(3)),
//! capability names, the child's environment, rlimits and working directory, all turned into a
//! [`Prepared`] plan whose strings and lists are allocated here, in the parent.
//!
//! Owns: every name lookup and every allocation a spawn needs. Must not: fork, touch a child,
//! open cgroup files, or change vigil's own state (it only reads: its uid, its capabilities,
//! `/proc/sys/kernel/cap_last_cap`).

use std::ffi::CString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use nix::unistd::{Gid, Group, Uid, User};

use super::SpawnError;
use super::access::{self, Denial, Want, Who};
use super::raw;
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

/// Resolved credentials applied in the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Creds {
    pub(super) uid: Option<libc::uid_t>,
    pub(super) gid: libc::gid_t,
    pub(super) groups: Vec<libc::gid_t>,
}

/// Everything a spawn needs, resolved and allocated before the fork.
///
/// Built by [`prepare`] from an argv (the container's command, or an exec probe's) and the
/// container's spec (user, group, env, working dir, rlimits, capabilities, no_new_privs).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub(super) argv: Vec<String>,
    pub(super) env: Vec<(String, String)>,
    pub(super) working_dir: Option<PathBuf>,
    pub(super) working_dir_c: Option<CString>,
    pub(super) creds: Option<Creds>,
    /// (resource, limit) pairs.
    pub(super) rlimits: Vec<(u32, libc::rlimit)>,
    /// Capability numbers to drop from the bounding set (empty: leave it alone).
    pub(super) cap_drop: Vec<libc::c_int>,
    /// Capability numbers raised into the ambient set after setuid (non-root users only).
    pub(super) ambient: Vec<libc::c_int>,
    pub(super) no_new_privs: bool,
    /// argv/envp and PATH candidates for the clone3 path (see `raw`).
    pub(super) exec: raw::ExecTarget,
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

    /// The plan with one more variable that vigil itself sets for the child (`NOTIFY_SOCKET`
    /// of a container with `notify = true`), which the reserved-name rule of the configured
    /// environment does not apply to; a configured variable of the same name is replaced.
    pub fn with_env(mut self, key: &str, value: &str) -> Result<Prepared, SpawnError> {
        check_nul("environment value", value)?;
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
        let pid_var = self.exec.pid_var;
        self.exec = raw::exec_target(&self.argv, &self.env)?;
        self.exec.pid_var = pid_var;
        Ok(self)
    }

    /// The plan with `WATCHDOG_PID` set to the child's own pid (sd_watchdog_enabled(3)), which
    /// only the child knows before its exec: it writes it in on the clone3 path. On the
    /// `Command` fallback (no usable clone3) the variable is left out, which
    /// sd_watchdog_enabled(3) takes as a watchdog meant for whoever reads `WATCHDOG_USEC`.
    pub fn with_own_pid_as_watchdog_pid(mut self) -> Result<Prepared, SpawnError> {
        self.env.retain(|(k, _)| k != "WATCHDOG_PID");
        self.exec = raw::exec_target(&self.argv, &self.env)?;
        self.exec.pid_var = true;
        Ok(self)
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

    /// The credentials the child will have: the configured ones, else vigil's own.
    pub fn who(&self) -> Who {
        let me = Who::this_process();
        match &self.creds {
            None => me,
            Some(c) => Who {
                uid: c.uid.unwrap_or(me.uid),
                gid: c.gid,
                groups: c.groups.clone(),
            },
        }
    }

    /// The child's `PATH`.
    fn path_variable(&self) -> &str {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }

    /// Where the child's relative paths start: its `working_dir`, else vigil's own directory.
    fn base(&self) -> PathBuf {
        self.working_dir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"))
    }

    /// Why the exec of this plan would fail (or failed), naming the path: for each candidate
    /// execve is tried on, the first component the child's user may not pass. `None` when
    /// every candidate looks usable (the cause is elsewhere: ACLs, a security module) or when
    /// vigil cannot look itself.
    pub(super) fn exec_denial(&self) -> Option<Denial> {
        let who = self.who();
        let base = self.base();
        if !self.argv0().contains('/') && self.exec.candidates().next().is_none() {
            return Some(Denial::NotInPath {
                path: self.path_variable().to_string(),
            });
        }
        let mut first = None;
        for c in self.exec.candidates() {
            match access::walk(c, &base, &who, Want::Program) {
                Ok(_) => return None,
                Err(d) if d.is_known() => {
                    first.get_or_insert(d);
                }
                Err(_) => return None,
            }
        }
        first
    }
}

/// What a start of a container's command would fail on, found by `vigil check` without
/// forking: everything [`prepare`] resolves (user, group, `env_file`, capabilities), then the
/// `working_dir` and the program, judged as the container's user
/// ([`access`](super::access)).
#[derive(Debug, thiserror::Error)]
pub enum StartProblem {
    #[error(transparent)]
    Prepare(SpawnError),
    #[error("working_dir {}: {denial}", path.display())]
    WorkingDir { path: PathBuf, denial: Denial },
    #[error(
        "{program:?} is not found in the container's PATH ({path}); give an absolute path, or \
         set PATH in env"
    )]
    NotInPath { program: String, path: String },
    #[error("{program:?} cannot be executed: {denial}")]
    Program { program: String, denial: Denial },
}

impl StartProblem {
    /// The container key the problem is written under.
    pub fn key(&self) -> &'static str {
        match self {
            StartProblem::Prepare(e) => match e {
                SpawnError::UnknownUser { .. }
                | SpawnError::LookupUser { .. }
                | SpawnError::GroupList { .. }
                | SpawnError::RunAsRoot { .. } => "user",
                SpawnError::UnknownGroup { .. } | SpawnError::LookupGroup { .. } => "group",
                SpawnError::EnvFile(_) => "env_file",
                SpawnError::UnknownCapability { .. } => "capabilities",
                _ => "command",
            },
            StartProblem::WorkingDir { .. } => "working_dir",
            StartProblem::NotInPath { .. } | StartProblem::Program { .. } => "command",
        }
    }

    /// Whether `run` would certainly fail the same way (else vigil could not look: the
    /// problem is a warning).
    pub fn is_certain(&self) -> bool {
        match self {
            StartProblem::WorkingDir { denial, .. } | StartProblem::Program { denial, .. } => {
                denial.is_known()
            }
            _ => true,
        }
    }
}

/// Checks that `spec`'s command could start on this host, without forking: as [`prepare`]
/// would resolve it, then the working directory and the program walked as the container's user
/// (its PATH searched as execvp(3) would). A relative program or working directory without a
/// `working_dir` depends on the directory `run` is started from and is not judged.
pub fn check_start(spec: &ContainerSpec) -> Vec<StartProblem> {
    let p = match prepare(&spec.command, spec) {
        Ok(p) => p,
        Err(e) => {
            let mut out = Vec::new();
            // prepare stops at the user or group; the env_file is read after them.
            let credentials = matches!(
                e,
                SpawnError::UnknownUser { .. }
                    | SpawnError::LookupUser { .. }
                    | SpawnError::GroupList { .. }
                    | SpawnError::UnknownGroup { .. }
                    | SpawnError::LookupGroup { .. }
            );
            out.push(StartProblem::Prepare(e));
            if credentials
                && let Some(path) = &spec.env_file
                && let Err(e) = super::env_file::read(path)
            {
                out.push(StartProblem::Prepare(e.into()));
            }
            return out;
        }
    };
    check_prepared(&p).err().into_iter().collect()
}

fn check_prepared(p: &Prepared) -> Result<(), StartProblem> {
    let who = p.who();
    if let Some(dir) = &p.working_dir {
        if !dir.is_absolute() {
            return Ok(());
        }
        access::walk(dir, Path::new("/"), &who, Want::Directory).map_err(|denial| {
            StartProblem::WorkingDir {
                path: dir.clone(),
                denial,
            }
        })?;
    }
    let program = p.argv0();
    let relative = !program.starts_with('/');
    if relative && p.working_dir.is_none() && program.contains('/') {
        return Ok(());
    }
    if !program.contains('/') && p.exec.candidates().next().is_none() {
        let path = p.path_variable().to_string();
        if path.split(':').any(|d| !d.starts_with('/')) {
            // A relative PATH entry depends on the working directory: not judged.
            return Ok(());
        }
        return Err(StartProblem::NotInPath {
            program: program.to_string(),
            path,
        });
    }
    match p.exec_denial() {
        Some(denial) => Err(StartProblem::Program {
            program: program.to_string(),
            denial,
        }),
        None => Ok(()),
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

/// HOME and USER for a container that runs as vigil's own user: its passwd entry (or vigil's
/// own `HOME`/`USER` without one). Looked up once and again only when `/etc/passwd` changed
/// (inode, size or mtime), not at every start: a lookup costs an NSS round (nscd socket,
/// nsswitch.conf, the file) per container start otherwise.
fn own_home_and_name() -> (Option<PathBuf>, Option<String>) {
    type Cached = (
        Option<(u64, u64, i64, i64)>,
        (Option<PathBuf>, Option<String>),
    );
    static OWN: std::sync::Mutex<Option<Cached>> = std::sync::Mutex::new(None);
    let stamp = std::fs::metadata("/etc/passwd").ok().map(|m| {
        use std::os::unix::fs::MetadataExt;
        (m.ino(), m.size(), m.mtime(), m.mtime_nsec())
    });
    let mut own = OWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((s, found)) = own.as_ref()
        && *s == stamp
        && stamp.is_some()
    {
        return found.clone();
    }
    let found = match User::from_uid(Uid::current()) {
        Ok(Some(me)) => (Some(me.dir), Some(me.name)),
        _ => (
            std::env::var_os("HOME").map(PathBuf::from),
            std::env::var("USER").ok(),
        ),
    };
    *own = Some((stamp, found.clone()));
    found
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
pub(super) fn cap_last_cap() -> u32 {
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
pub(super) fn can_drop_bounding() -> bool {
    caps::has_cap(None, caps::CapSet::Effective, caps::Capability::CAP_SETPCAP).unwrap_or(false)
}

/// Resolves everything a spawn of `argv` under `spec` needs, before any fork.
///
/// - user/group: names or numbers; a user's primary group and supplementary groups
///   (getgrouplist(3)) come from its passwd entry; a group alone changes only the gid (and the
///   supplementary list to just that gid). A numeric uid without a passwd entry and without a
///   configured group runs with gid = the same number.
/// - environment: empty, then `PATH` (default [`DEFAULT_PATH`]), `HOME`, `USER` (of the target
///   user, else of vigil's own uid), then the `env_file`'s variables (read now, see
///   [`super::env_file`]), then the configured env; each may override what came before.
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
    if spec.run_as_non_root && target_uid == 0 {
        return Err(SpawnError::RunAsRoot {
            configured: user.is_some(),
        });
    }

    // Environment.
    let (home, user_name) = match &user {
        Some(u) => (
            Some(u.home.clone().unwrap_or_else(|| PathBuf::from("/"))),
            u.name.clone(),
        ),
        None => own_home_and_name(),
    };
    let mut env: Vec<(String, String)> = vec![("PATH".into(), DEFAULT_PATH.into())];
    if let Some(h) = home {
        env.push(("HOME".into(), h.to_string_lossy().into_owned()));
    }
    if let Some(n) = user_name {
        env.push(("USER".into(), n));
    }
    // `env_file` first, so `env` in the config wins over it (like a pod's `envFrom` and `env`).
    let from_file = match &spec.env_file {
        Some(path) => super::env_file::read(path)?,
        None => Vec::new(),
    };
    for (k, v) in from_file.iter().chain(&spec.env) {
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
