//! Supervisor hardening checks made at startup and again at every reload.
//!
//! Owns: refusing to run as root from a config file, with a socket directory, a `log_dir` or
//! an `on_event` hook program run as root that someone other than root or vigil's uid could
//! change — the path whole, every ancestor
//! directory included (see [`crate::trust`], like sshd's StrictModes) — and warning when vigil
//! runs as root under systemd without cgroup delegation (`Delegate=yes`), where systemd
//! considers the unit's cgroup its own and vigil's containers cannot be isolated or accounted
//! reliably.
//!
//! Must not: change anything (no chmod, no chown, no cgroup writes), or fail startup for the
//! delegation check (that is a warning: vigil still works with process groups). The decisions
//! are pure functions over what was read, so they are tested without root or systemd.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use log::warn;

use crate::cgroup::discover;
use crate::config::ConfigSource;
use crate::config::spec::{CgroupRoot, Config};
use crate::trust::{self, Target};

/// Extended attributes systemd sets on a cgroup it delegated (`Delegate=yes`): `trusted.`
/// since systemd 251, `user.` since 252 (systemd's docs, "Control Group APIs and Delegation").
const DELEGATE_XATTRS: [&str; 2] = ["trusted.delegate", "user.delegate"];

/// Why vigil refuses to start (or a reload is refused).
#[derive(Debug, thiserror::Error)]
pub enum HardenError {
    #[error("{0}")]
    Untrusted(#[from] trust::TrustError),
    #[error(
        "on_event hook {hook}: {program:?} runs as root and is not an absolute path: name the \
         program by its absolute path, or set the hook's user"
    )]
    RelativeHookProgram {
        hook: String,
        program: std::path::PathBuf,
    },
}

/// Checks the config file before it is read (start and reload): nothing when vigil is not
/// root, a [`Target::File`] check of the whole path otherwise (for `run -f`, of the manifest
/// and of the `-c` file beside it).
pub fn check_config_source(source: &ConfigSource) -> Result<(), HardenError> {
    if !nix::unistd::Uid::effective().is_root() {
        return Ok(());
    }
    match source {
        ConfigSource::File(path) => trust::check("config file", path, Target::File)?,
        ConfigSource::Layers(paths) => {
            for path in paths {
                trust::check("config file", path, Target::File)?;
            }
        }
        // `run -f`: the manifest is a config file too, and so is the `-c` beside it.
        ConfigSource::Manifest { manifest, config } => {
            // `-f -`: standard input, what the invoker piped in; there is no path to trust.
            if manifest.as_os_str() != "-" {
                trust::check("manifest", manifest, Target::File)?;
            }
            if let Some(path) = config {
                trust::check("config file", path, Target::File)?;
            }
        }
        ConfigSource::Bundled => {}
    }
    Ok(())
}

/// Checks the paths a (new) config makes root act on: the control socket's directory and every
/// ancestor, and `log_dir` and every ancestor. Nothing when vigil is not root.
pub fn check_config_paths(config: &Config) -> Result<(), HardenError> {
    if !nix::unistd::Uid::effective().is_root() {
        return Ok(());
    }
    let socket = config
        .supervisor
        .socket
        .clone()
        .unwrap_or_else(crate::control::default_socket_path);
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        trust::check("socket directory", dir, Target::PrivateDir)?;
    }
    if let Some(dir) = &config.supervisor.log_dir {
        trust::check("log_dir", dir, Target::SharedDir)?;
    }
    // An on_event exec hook run as root executes its program with root's rights: the program
    // must be one no one else can change, named by its absolute path (a PATH search would
    // let the first writable directory on it decide).
    for hook in &config.supervisor.on_event {
        let Some(program) = hook.program_run_as_root() else {
            continue;
        };
        if !program.is_absolute() {
            return Err(HardenError::RelativeHookProgram {
                hook: hook.name.clone(),
                program,
            });
        }
        trust::check("on_event hook program", &program, Target::File)?;
    }
    Ok(())
}

/// What the startup checks found out about the host, for [`HostCheck::after_cgroup_setup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCheck {
    root: bool,
    /// The systemd unit vigil runs in (`None`: not under systemd).
    systemd_unit: Option<String>,
    /// vigil's own cgroup v2 directory, read before vigil moved itself anywhere.
    own_cgroup: Option<PathBuf>,
    /// Whether that cgroup is delegated: `Some(false)` when it demonstrably is not.
    delegated: Option<bool>,
}

/// The checks made before anything is created: refuses an unsafe config file, socket
/// directory or log directory when running as root, and reads what the delegation warning
/// needs later.
pub fn check_startup(source: &ConfigSource, config: &Config) -> Result<HostCheck, HardenError> {
    let root = nix::unistd::Uid::effective().is_root();
    check_config_source(source)?;
    check_config_paths(config)?;
    let own_cgroup = own_cgroup_dir();
    let own_path = std::fs::read_to_string(discover::PROC_SELF_CGROUP)
        .ok()
        .and_then(|t| discover::parse_own_cgroup(&t));
    let systemd_unit = systemd_unit(
        std::env::var_os("INVOCATION_ID").is_some(),
        own_path.as_deref(),
    );
    let delegated = match (&systemd_unit, &own_cgroup) {
        (Some(_), Some(dir)) => Some(is_delegated(dir)),
        _ => None,
    };
    Ok(HostCheck {
        root,
        systemd_unit,
        own_cgroup,
        delegated,
    })
}

/// The unit name when vigil runs under systemd: `INVOCATION_ID` is set by systemd for every
/// service it starts (systemd.exec(5)), and a service's cgroup ends in `.service`.
pub fn systemd_unit(invocation_id: bool, own_cgroup: Option<&str>) -> Option<String> {
    let last = own_cgroup
        .and_then(|p| p.trim_end_matches('/').rsplit('/').next())
        .filter(|s| !s.is_empty());
    match last {
        Some(name) if name.ends_with(".service") => Some(name.to_string()),
        _ if invocation_id => Some(last.unwrap_or("unknown unit").to_string()),
        _ => None,
    }
}

fn own_cgroup_dir() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string(discover::PROC_SELF_MOUNTINFO).ok()?;
    let mounts = discover::parse_mountinfo(&mounts);
    let mount = discover::find_cgroup2(&mounts)?;
    let own = std::fs::read_to_string(discover::PROC_SELF_CGROUP).ok()?;
    let own = discover::parse_own_cgroup(&own)?;
    discover::cgroup_dir(mount, &own)
}

/// A cgroup is delegated to us when systemd marked it so, or when it is the root of what we
/// see (VM, container with its own cgroup namespace: everything below is ours). Without the
/// mark, it is not, unless its `cgroup.subtree_control` is ours to write (older systemd that
/// set no mark but chowned the subtree for an unprivileged delegate).
fn is_delegated(dir: &Path) -> bool {
    if DELEGATE_XATTRS.iter().any(|name| has_xattr(dir, name)) {
        return true;
    }
    if own_is_hierarchy_root(dir) {
        return true;
    }
    let control = dir.join("cgroup.subtree_control");
    let euid = nix::unistd::Uid::effective().as_raw();
    euid != 0
        && std::fs::metadata(&control).is_ok_and(|m| m.uid() == euid)
        && nix::unistd::access(&control, nix::unistd::AccessFlags::W_OK).is_ok()
}

fn own_is_hierarchy_root(dir: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string(discover::PROC_SELF_MOUNTINFO) else {
        return false;
    };
    let mounts = discover::parse_mountinfo(&mounts);
    discover::find_cgroup2(&mounts).is_some_and(|m| m.mount_point == dir)
}

/// Whether `path` has the extended attribute `name` (any value).
fn has_xattr(path: &Path, name: &str) -> bool {
    let (Ok(p), Ok(n)) = (
        CString::new(path.as_os_str().as_bytes()),
        CString::new(name),
    ) else {
        return false;
    };
    // SAFETY: both pointers are valid NUL-terminated strings owned above; a null buffer with
    // size 0 asks only for the value's length (getxattr(2)), so nothing is written.
    let rc = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    rc >= 0
}

impl HostCheck {
    /// The warning to give once the cgroup manager was set up (`cgroups_ok`: it returned a
    /// manager), or `None`. Only for a root vigil under systemd that wanted cgroups.
    pub fn delegation_warning(&self, cgroup_root: &CgroupRoot, cgroups_ok: bool) -> Option<String> {
        if !self.root || *cgroup_root == CgroupRoot::None {
            return None;
        }
        let unit = self.systemd_unit.as_deref()?;
        let why = if !cgroups_ok {
            "vigil could not set up its cgroups".to_string()
        } else if self.delegated == Some(false) {
            format!(
                "its cgroup {} is not delegated",
                self.own_cgroup
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            )
        } else {
            return None;
        };
        Some(format!(
            "running as root under systemd ({unit}) without cgroup delegation: {why}; systemd \
             may move or kill container processes behind vigil's back. Add Delegate=yes to the \
             unit (see systemd/vigil.service)"
        ))
    }

    /// Logs [`Self::delegation_warning`], if any.
    pub fn after_cgroup_setup(&self, config: &Config, cgroups_ok: bool) {
        if let Some(w) = self.delegation_warning(&config.supervisor.cgroup_root, cgroups_ok) {
            warn!("{w}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(root: bool, unit: Option<&str>, delegated: Option<bool>) -> HostCheck {
        HostCheck {
            root,
            systemd_unit: unit.map(str::to_string),
            own_cgroup: Some(PathBuf::from("/sys/fs/cgroup/system.slice/vigil.service")),
            delegated,
        }
    }

    #[test]
    fn systemd_is_detected_by_invocation_id_or_service_cgroup() {
        assert_eq!(
            systemd_unit(false, Some("/system.slice/vigil.service")),
            Some("vigil.service".into())
        );
        assert_eq!(
            systemd_unit(false, Some("/system.slice/vigil.service/supervisor")),
            None
        );
        assert_eq!(
            systemd_unit(true, Some("/system.slice/vigil.service/supervisor")),
            Some("supervisor".into())
        );
        assert_eq!(systemd_unit(true, Some("/")), Some("unknown unit".into()));
        assert_eq!(
            systemd_unit(false, Some("/user.slice/session-1.scope")),
            None
        );
        assert_eq!(systemd_unit(false, None), None);
    }

    #[test]
    fn warns_only_for_root_under_systemd_without_delegation() {
        let auto = CgroupRoot::Auto;
        let w = host(true, Some("vigil.service"), Some(false)).delegation_warning(&auto, true);
        let w = w.expect("warning");
        assert!(
            w.contains("vigil.service") && w.contains("Delegate=yes"),
            "{w}"
        );
        assert!(
            host(true, Some("vigil.service"), Some(true))
                .delegation_warning(&auto, false)
                .is_some_and(|w| w.contains("could not set up"))
        );
        assert_eq!(
            host(true, Some("vigil.service"), Some(true)).delegation_warning(&auto, true),
            None
        );
        assert_eq!(
            host(false, Some("vigil.service"), Some(false)).delegation_warning(&auto, true),
            None
        );
        assert_eq!(
            host(true, None, None).delegation_warning(&auto, false),
            None
        );
        assert_eq!(
            host(true, Some("vigil.service"), Some(false))
                .delegation_warning(&CgroupRoot::None, false),
            None
        );
    }
}
