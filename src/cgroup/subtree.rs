//! The subtree vigil manages: `<root>/supervisor` (vigil itself), `<root>/<pod>/<container>`
//! (one fresh cgroup per run, [`super::container`]) and `<container>/probe-<kind>` (exec probes).
//!
//! Owns setting up and adopting the root, controller enabling, pod directories, the leftover
//! sweep at start and the teardown. It must not write outside that root except: moving vigil
//! back to the cgroup it came from at teardown, and (only when vigil's own cgroup is the
//! hierarchy root, i.e. a VM, a container with its own cgroup namespace or a bare host) enabling
//! controllers in that hierarchy root's `cgroup.subtree_control` so `<root>` can have them.
//! Nothing here waits on the event loop: the bounded waits (leftovers at start,
//! [`Manager::sweep_stale`]; teardown) are [`super::removal`]'s.

use std::io;
use std::path::{Path, PathBuf};

use log::{debug, info, warn};

use super::container::{LEFTOVER_WAIT, check_name, make_dir};
use super::discover::{self, MountEntry};
use super::files::{self, *};
use super::removal::*;
use super::{CgroupError, Controllers, missing_controllers_message};
use super::{ContainerCgroup, Limits, RootSetting};

/// The leaf vigil moves itself into (cgroup v2's no-internal-processes rule: `<root>` can only
/// enable controllers for its children if it holds no processes itself).
pub const SUPERVISOR_LEAF: &str = "supervisor";

/// vigil's cgroup subtree.
#[derive(Debug)]
pub struct Manager {
    root: PathBuf,
    /// The cgroup2 mount `root` is on (for messages).
    mount: PathBuf,
    /// Parsed mountinfo (to tell "bound to cgroup v1" from "not delegated").
    mounts: Vec<MountEntry>,
    /// vigil made `root` (or owns it as a child of the hierarchy root) and removes it at teardown.
    owns_root: bool,
    /// The cgroup vigil was in before it moved into `<root>/supervisor`.
    origin: Option<PathBuf>,
    /// Controllers vigil enables below `root` (and in every pod dir).
    enable: Controllers,
    /// `<root>/cgroup.subtree_control` as vigil left it: what a new pod directory can enable.
    /// Read at the first container start, forgotten by [`Manager::enable`].
    root_enabled: std::cell::Cell<Option<Controllers>>,
    /// vigil's move into `<root>/supervisor`, left for after its initial starts
    /// ([`Manager::finish_move`]): the leaf to write itself into.
    deferred_move: Option<PathBuf>,
}

/// What a manager knows of the subtree beyond its paths, handed over by `vigil upgrade`: a
/// new instance finds itself in `<root>/supervisor` already and cannot tell by looking that
/// `<root>` is vigil's to remove, or where vigil came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ownership {
    pub owns_root: bool,
    /// The cgroup vigil moved out of (into the supervisor leaf), to go back to at teardown.
    pub origin: Option<PathBuf>,
}

impl Manager {
    /// What to hand over ([`Ownership`]); a move still deferred is the new instance's to make.
    pub fn ownership(&self) -> Ownership {
        Ownership {
            owns_root: self.owns_root,
            origin: self.origin.clone().filter(|_| self.deferred_move.is_none()),
        }
    }

    /// The new instance of an upgrade: what the old one knew, so that a clean shutdown removes
    /// the leaf and `<root>` as the first instance would have.
    pub fn inherit(&mut self, o: Ownership) {
        self.owns_root |= o.owns_root;
        if self.origin.is_none() && self.deferred_move.is_none() {
            self.origin = o.origin;
        }
    }

    /// Sets vigil's cgroup subtree up from the configuration.
    ///
    /// - `RootSetting::None` → `Ok(None)`.
    /// - `Auto`: the cgroup2 mount from /proc/self/mountinfo and vigil's own cgroup from
    ///   /proc/self/cgroup. If that is the hierarchy root, `<mount>/<cgroup_name>` is created and
    ///   owned; otherwise (systemd `Delegate=yes`) the own cgroup itself is the root (systemd owns
    ///   it; vigil leaves it in place at teardown). If cgroup2 is not mounted or not writable
    ///   (EACCES/EPERM/EROFS), a warning is logged and `Ok(None)` returned — unless `needs` is
    ///   non-empty, then [`CgroupError::Unusable`].
    /// - `Path(p)`: `p` must be on cgroup2; it is created if missing (and then owned).
    ///
    /// Then vigil moves itself (and every other process already in `<root>`) into
    /// `<root>/supervisor`, if its own cgroup is `<root>` or above it, and enables in
    /// `<root>/cgroup.subtree_control` the available controllers among memory and pids (always:
    /// accounting for figures and OOM counters) plus cpu and io if `needs` has them. Missing
    /// controllers are not an error here: call [`Manager::check_controllers`]. Call
    /// [`Manager::sweep_stale`] next to clear a previous run's leftovers.
    pub fn setup(
        root: &RootSetting,
        cgroup_name: &str,
        needs: Controllers,
    ) -> Result<Option<Manager>, CgroupError> {
        let result = match root {
            RootSetting::None => return Ok(None),
            RootSetting::Auto => Self::setup_auto(cgroup_name, needs),
            RootSetting::Path(p) => return Self::setup_path(p, needs).map(Some),
        };
        match result {
            Ok(m) => Ok(Some(m)),
            Err(e) if e.is_unavailable() && needs.is_empty() => {
                warn!("running without cgroups: {e}");
                Ok(None)
            }
            Err(e) if e.is_unavailable() => Err(CgroupError::Unusable {
                needs: needs.names().join(", "),
                source: Box::new(e),
            }),
            Err(e) => Err(e),
        }
    }

    fn setup_auto(cgroup_name: &str, needs: Controllers) -> Result<Manager, CgroupError> {
        check_name(cgroup_name)?;
        let mounts = read_mountinfo()?;
        let mount =
            discover::find_cgroup2(&mounts)
                .cloned()
                .ok_or_else(|| CgroupError::NoCgroup2 {
                    path: discover::PROC_SELF_MOUNTINFO.into(),
                })?;
        let mut own_dir = own_cgroup_dir(&mount)?;
        // Already in a supervisor leaf (systemd DelegateSubgroup=supervisor, or a re-exec):
        // the root is its parent.
        if own_dir != mount.mount_point
            && own_dir.file_name().is_some_and(|n| n == SUPERVISOR_LEAF)
            && let Some(parent) = own_dir.parent()
        {
            own_dir = parent.to_path_buf();
        }
        if own_dir == mount.mount_point {
            let root = own_dir.join(cgroup_name);
            if make_dir(&root)? {
                info!("created cgroup {}", root.display());
            }
            // The hierarchy root is ours (VM, container namespace, bare host): give <root> the
            // controllers it needs from there. After vigil left it below, it holds no process
            // of ours; the true root is exempt from the no-internal-processes rule anyway.
            let m = Self::adopt(root, mount, mounts, true, Some(own_dir.clone()), needs)?;
            m.enable_in_parent(&own_dir);
            m.enable_controllers(&m.root.clone())?;
            Ok(m)
        } else {
            let m = Self::adopt(own_dir.clone(), mount, mounts, false, Some(own_dir), needs)?;
            m.enable_controllers(&m.root)?;
            Ok(m)
        }
    }

    /// The cgroup2 mount a `cgroup_root` path lies on, refusing a path elsewhere (a cgroup v1
    /// hierarchy on a hybrid host, a plain directory). Reads only.
    fn cgroup2_mount_of(path: &Path, mounts: &[MountEntry]) -> Result<MountEntry, CgroupError> {
        let mount = mounts
            .iter()
            .filter(|e| e.fstype == "cgroup2" && path.starts_with(&e.mount_point))
            .max_by_key(|e| e.mount_point.as_os_str().len())
            .cloned()
            .ok_or_else(|| CgroupError::NotCgroup2 {
                path: path.to_path_buf(),
            })?;
        let probe = if path.exists() {
            path
        } else {
            path.parent().unwrap_or(path)
        };
        let is_cg2 = nix::sys::statfs::statfs(probe)
            .map(|s| s.filesystem_type() == nix::sys::statfs::CGROUP2_SUPER_MAGIC)
            .unwrap_or(false);
        if !is_cg2 {
            return Err(CgroupError::NotCgroup2 {
                path: path.to_path_buf(),
            });
        }
        Ok(mount)
    }

    fn setup_path(path: &Path, needs: Controllers) -> Result<Manager, CgroupError> {
        let mounts = read_mountinfo()?;
        let mount = Self::cgroup2_mount_of(path, &mounts)?;
        let created = make_dir(path)?;
        let own_dir = own_cgroup_dir(&mount).ok();
        // Only move vigil if it sits in <root> or above it; a root elsewhere does not hold it.
        let origin = own_dir.filter(|o| path.starts_with(o));
        let m = Self::adopt(path.to_path_buf(), mount, mounts, created, origin, needs)?;
        m.enable_controllers(&m.root)?;
        Ok(m)
    }

    /// A manager for `root` that does NOT move the calling process (the caller guarantees that
    /// `root` holds no processes, e.g. a fresh directory). `root` is created if missing and
    /// then removed by [`Manager::teardown`]. Used by tests and by embedders.
    pub fn with_root(root: &Path) -> Result<Manager, CgroupError> {
        let mounts = read_mountinfo().unwrap_or_default();
        Self::with_root_and_mounts(root, mounts)
    }

    pub(crate) fn with_root_and_mounts(
        root: &Path,
        mounts: Vec<MountEntry>,
    ) -> Result<Manager, CgroupError> {
        let created = make_dir(root)?;
        let mount = mounts
            .iter()
            .filter(|e| e.fstype == "cgroup2" && root.starts_with(&e.mount_point))
            .max_by_key(|e| e.mount_point.as_os_str().len())
            .map(|e| e.mount_point.clone())
            .unwrap_or_else(|| root.to_path_buf());
        let m = Manager {
            root: root.to_path_buf(),
            mount,
            mounts,
            owns_root: created,
            origin: None,
            enable: Controllers::MEMORY | Controllers::PIDS,
            root_enabled: std::cell::Cell::new(None),
            deferred_move: None,
        };
        m.enable_controllers(&m.root)?;
        Ok(m)
    }

    /// Creates the supervisor leaf and moves vigil (and whatever else is in `<root>`) into it
    /// if `origin` (vigil's own cgroup) is `<root>` or an ancestor.
    fn adopt(
        root: PathBuf,
        mount: MountEntry,
        mounts: Vec<MountEntry>,
        owns_root: bool,
        origin: Option<PathBuf>,
        needs: Controllers,
    ) -> Result<Manager, CgroupError> {
        let leaf = root.join(SUPERVISOR_LEAF);
        make_dir(&leaf)?;
        let members = read_procs(&leaf)?;
        let me = std::process::id() as i32;
        // After a re-exec (`vigil upgrade`) vigil is in the leaf already.
        let inside = members.contains(&me);
        let others: Vec<i32> = members.into_iter().filter(|p| *p != me).collect();
        // Inside already, the others are the earlier instance's helpers (its output holder,
        // the upgrade's guardian, in whose process a failed upgrade's fallback runs).
        if let Some(pid) = others.first().filter(|_| !inside) {
            return Err(CgroupError::BadRoot {
                path: root,
                reason: format!(
                    "pid {pid} is already in {}: is another vigil using it?",
                    leaf.display()
                ),
            });
        }
        let moved = origin.is_some();
        let mut deferred_move = None;
        if moved {
            // Writing "0" moves the writing process (all its threads) (cgroup-v2.rst). Not
            // when it is there already: a migration waits for an RCU grace period (the
            // threadgroup lock, kernel/cgroup/cgroup.c, ~10 ms), which an upgrade would spend.
            // Nor yet when vigil sits above `<root>` (the hierarchy root: PID 1 of a VM or
            // container, a bare host): there it does not keep `<root>` from enabling
            // controllers (no-internal-processes applies to `<root>` itself), so the move waits
            // until the initial starts are done ([`Manager::finish_move`]) instead of delaying
            // them. Under systemd's `Delegate=yes` vigil is in `<root>` and moves now.
            if !inside && origin.as_deref() != Some(root.as_path()) {
                deferred_move = Some(leaf.clone());
            } else if !inside {
                write_file(&leaf, CGROUP_PROCS, "0")?;
                debug!("moved vigil into {}", leaf.display());
            }
            // Under Delegate=yes other processes of the unit may share <root>; they must leave
            // it too, or <root> cannot enable controllers.
            for pid in read_procs(&root)? {
                match write_file(&leaf, CGROUP_PROCS, &pid.to_string()) {
                    Ok(()) => info!(
                        "moved pid {pid} from {} into {}",
                        root.display(),
                        leaf.display()
                    ),
                    Err(e)
                        if e.io_error().and_then(io::Error::raw_os_error) == Some(libc::ESRCH) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(Manager {
            root,
            mount: mount.mount_point,
            mounts,
            owns_root,
            origin: if moved { origin } else { None },
            enable: Controllers::MEMORY | Controllers::PIDS | needs,
            root_enabled: std::cell::Cell::new(None),
            deferred_move,
        })
    }

    /// The hierarchy-root exception (see the module docs): best effort, logged.
    fn enable_in_parent(&self, parent: &Path) {
        let available = read_controllers(parent, CGROUP_CONTROLLERS).unwrap_or_default();
        let enabled = read_controllers(parent, CGROUP_SUBTREE_CONTROL).unwrap_or_default();
        for name in self
            .enable
            .intersection(available)
            .difference(enabled)
            .names()
        {
            match write_file(parent, CGROUP_SUBTREE_CONTROL, &format!("+{name}")) {
                Ok(()) => info!("enabled {name} controller in {}", parent.display()),
                Err(e) => warn!("{e}"),
            }
        }
    }

    /// Enables `self.enable ∩ available` in `dir/cgroup.subtree_control`, one controller per
    /// write so a failure names the controller.
    fn enable_controllers(&self, dir: &Path) -> Result<(), CgroupError> {
        // Nothing asked for: nothing to read either (two file reads saved on every spawn).
        if self.enable.is_empty() {
            return Ok(());
        }
        let available = read_controllers(dir, CGROUP_CONTROLLERS)?;
        let enabled = read_controllers(dir, CGROUP_SUBTREE_CONTROL)?;
        for name in self
            .enable
            .intersection(available)
            .difference(enabled)
            .names()
        {
            write_file(dir, CGROUP_SUBTREE_CONTROL, &format!("+{name}"))?;
        }
        Ok(())
    }

    /// Also enable `extra` (e.g. after a reload asks for cpu limits) in `<root>` and the
    /// existing pod dirs. Missing ones are left to [`Manager::check_controllers`].
    pub fn enable(&mut self, extra: Controllers) -> Result<(), CgroupError> {
        self.enable |= extra;
        self.root_enabled.set(None);
        self.enable_controllers(&self.root.clone())?;
        for pod in self.pod_dirs()? {
            self.enable_controllers(&pod)?;
        }
        Ok(())
    }

    /// Moves vigil into `<root>/supervisor` if [`Manager::setup`] left that for after the
    /// initial starts (vigil's cgroup is above `<root>`); once. A failure is logged: vigil
    /// then stays where it was, which costs it nothing but the leaf's marker.
    pub fn finish_move(&mut self) {
        let Some(leaf) = self.deferred_move.take() else {
            return;
        };
        match write_file(&leaf, CGROUP_PROCS, "0") {
            Ok(()) => debug!("moved vigil into {}", leaf.display()),
            Err(e) => {
                warn!("{e}");
                // Still where it came from: nothing to move back at teardown.
                self.origin = None;
            }
        }
    }

    /// vigil's root cgroup directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The controllers children of `<root>` get (`<root>/cgroup.subtree_control`).
    pub fn enabled(&self) -> Result<Controllers, CgroupError> {
        read_controllers(&self.root, CGROUP_SUBTREE_CONTROL)
    }

    /// `Err(ControllersMissing)` with an explanation if some of `needs` is not enabled for
    /// vigil's containers.
    pub fn check_controllers(&self, needs: Controllers) -> Result<(), CgroupError> {
        let missing = needs.difference(self.enabled()?);
        if missing.is_empty() {
            return Ok(());
        }
        let v1_bound = |c: &str| discover::v1_mount_of(&self.mounts, c).is_some();
        // When a controller is held by cgroup v1, the mount root shows that best; otherwise
        // show what <root> itself was given.
        let at = if missing.names().iter().any(|c| v1_bound(c)) {
            self.mount.as_path()
        } else {
            self.root.as_path()
        };
        let available = files::read_file(at, CGROUP_CONTROLLERS)
            .map(|t| parse_controller_list(&t))
            .unwrap_or_default();
        Err(CgroupError::ControllersMissing {
            message: missing_controllers_message(missing, at, &available, v1_bound),
        })
    }

    /// Read-only pre-flight for `vigil check`: would `needs` be satisfiable under `root`?
    /// Looks at the cgroup2 mount and the cgroup vigil would use, writes nothing. `Ok(())` also
    /// when `root` is `none` and nothing is needed.
    pub fn preflight(root: &RootSetting, needs: Controllers) -> Result<(), CgroupError> {
        // A path root must be on cgroup2 whatever the limits (`run` refuses it at start).
        if let RootSetting::Path(p) = root {
            Self::cgroup2_mount_of(p, &read_mountinfo()?)?;
        }
        if needs.is_empty() {
            return Ok(());
        }
        let mounts = read_mountinfo()?;
        let Some(mount) = discover::find_cgroup2(&mounts).cloned() else {
            return Err(CgroupError::Unusable {
                needs: needs.names().join(", "),
                source: Box::new(CgroupError::NoCgroup2 {
                    path: discover::PROC_SELF_MOUNTINFO.into(),
                }),
            });
        };
        // Where the controllers would come from: the parent of vigil's subtree.
        let at = match root {
            RootSetting::None => {
                return Err(CgroupError::BadRoot {
                    path: PathBuf::from("none"),
                    reason: format!(
                        "cgroup_root = \"none\" but a container sets limits that need the {} \
                         controller(s)",
                        needs.names().join(", ")
                    ),
                });
            }
            RootSetting::Path(p) => p.parent().unwrap_or(p).to_path_buf(),
            RootSetting::Auto => own_cgroup_dir(&mount)?,
        };
        let available_list = files::read_file(&at, CGROUP_CONTROLLERS)
            .map(|t| parse_controller_list(&t))
            .unwrap_or_default();
        let available = Controllers::from_names(available_list.iter().map(String::as_str));
        let missing = needs.difference(available);
        if missing.is_empty() {
            return Ok(());
        }
        let v1_bound = |c: &str| discover::v1_mount_of(&mounts, c).is_some();
        Err(CgroupError::ControllersMissing {
            message: missing_controllers_message(missing, &at, &available_list, v1_bound),
        })
    }

    /// Kills and removes every cgroup under `<root>` except `supervisor`: leftovers of a
    /// previous vigil. Waits (bounded) for each to empty. Returns what was removed; failures
    /// are logged and the path is left.
    pub fn sweep_stale(&self) -> Vec<PathBuf> {
        self.sweep_stale_except(&[])
    }

    /// [`Manager::sweep_stale`], except the container cgroups in `keep` (adopted from an
    /// earlier vigil): their pod directories stay, and only what is below them (an exec
    /// probe's cgroup left in flight) goes.
    pub fn sweep_stale_except(&self, keep: &[PathBuf]) -> Vec<PathBuf> {
        let mut cleaned = Vec::new();
        let dirs = match self.pod_dirs() {
            Ok(d) => d,
            Err(e) => {
                warn!("{e}");
                return cleaned;
            }
        };
        let mut sweep = |dir: PathBuf| match kill_and_remove(&dir, LEFTOVER_WAIT) {
            Ok(()) => cleaned.push(dir),
            Err(e) => warn!("leftover cgroup not cleaned: {e}"),
        };
        for dir in dirs {
            if !keep.iter().any(|k| k.starts_with(&dir)) {
                sweep(dir);
                continue;
            }
            for child in sub_dirs(&dir).unwrap_or_default() {
                if keep.contains(&child) {
                    for below in sub_dirs(&child).unwrap_or_default() {
                        sweep(below);
                    }
                } else {
                    sweep(child);
                }
            }
        }
        cleaned
    }

    /// The container cgroups an earlier vigil left with processes in them:
    /// `(pod, container, path, pids directly in it)`, for adoption at start.
    pub fn populated_containers(&self) -> Vec<(String, String, PathBuf, Vec<i32>)> {
        let mut out = Vec::new();
        for pod_dir in self.pod_dirs().unwrap_or_default() {
            let Some(pod) = pod_dir.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            for dir in sub_dirs(&pod_dir).unwrap_or_default() {
                let Some(container) = dir.file_name().and_then(|n| n.to_str()) else {
                    continue;
                };
                let pids = read_procs(&dir).unwrap_or_default();
                if !pids.is_empty() {
                    out.push((pod.to_string(), container.to_string(), dir.clone(), pids));
                }
            }
        }
        out
    }

    /// Opens the existing cgroup of `pod/container` (left by an earlier vigil, adopted) as a
    /// run's: nothing is created, killed or limited (the definition is unchanged, so are its
    /// limits); the OOM baseline is the counters now.
    pub fn open_container(
        &self,
        pod: &str,
        container: &str,
    ) -> Result<ContainerCgroup, CgroupError> {
        check_name(pod)?;
        check_name(container)?;
        ContainerCgroup::open(&self.root.join(pod).join(container), None)
    }

    /// Creates `<root>/<pod>` (if needed, with controllers enabled) and a fresh
    /// `<root>/<pod>/<container>`: a leftover of the same name is killed and removed first,
    /// because reusing a cgroup after `cgroup.kill` breaks later clone3(CLONE_INTO_CGROUP)
    /// children (kernel 6.x quirk). Applies `res`, opens `cgroup.procs` for the child's
    /// pre_exec and baselines `memory.events`.
    pub fn create_container(
        &self,
        pod: &str,
        container: &str,
        res: &Limits,
    ) -> Result<ContainerCgroup, CgroupError> {
        check_name(pod)?;
        check_name(container)?;
        if pod == SUPERVISOR_LEAF {
            return Err(CgroupError::BadRoot {
                path: self.root.join(pod),
                reason: format!("a pod may not be called {SUPERVISOR_LEAF:?} (vigil's own leaf)"),
            });
        }
        let pod_dir = self.root.join(pod);
        let created = make_dir(&pod_dir)?;
        let root_enabled = match self.root_enabled.get() {
            Some(c) => c,
            None => {
                let c = read_controllers(&self.root, CGROUP_SUBTREE_CONTROL)?;
                self.root_enabled.set(Some(c));
                c
            }
        };
        let want = self.enable.intersection(root_enabled);
        if created {
            // A new directory's `cgroup.controllers` is what `<root>` enabled and its own
            // `cgroup.subtree_control` is empty (cgroup-v2.rst): nothing to read first.
            for name in want.names() {
                write_file(&pod_dir, CGROUP_SUBTREE_CONTROL, &format!("+{name}"))?;
            }
        } else if !want.is_empty() {
            self.enable_controllers(&pod_dir)?;
        }
        ContainerCgroup::create_fresh(&pod_dir.join(container), Some(res))
    }

    /// Removes `<root>/<pod>` if it has no containers left: `Ok(true)` if it is gone.
    pub fn remove_pod_dir(&self, pod: &str) -> Result<bool, CgroupError> {
        check_name(pod)?;
        let dir = self.root.join(pod);
        match std::fs::remove_dir(&dir) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Ok(false),
            Err(source) => Err(CgroupError::Remove { path: dir, source }),
        }
    }

    /// After a clean shutdown: removes every pod cgroup (those still populated are logged and
    /// left). If vigil owns `<root>` and moved itself, it moves back to where it came from and
    /// removes `supervisor` and `<root>`. Under Delegate=yes `<root>` is systemd's: vigil stays
    /// in `<root>/supervisor` (it cannot rmdir the cgroup it is in) and leaves both.
    pub fn teardown(&self) -> Result<(), CgroupError> {
        for dir in self.pod_dirs()? {
            if let Err(e) = remove_tree(&dir) {
                warn!("at teardown: {e}");
            }
        }
        if !self.owns_root {
            return Ok(());
        }
        if let Some(origin) = self
            .origin
            .as_ref()
            .filter(|_| self.deferred_move.is_none())
        {
            write_file(origin, CGROUP_PROCS, "0")?;
            remove_dir(&self.root.join(SUPERVISOR_LEAF))?;
        } else if let Err(e) = remove_dir(&self.root.join(SUPERVISOR_LEAF)) {
            debug!("{e}");
        }
        remove_dir(&self.root)
    }

    /// Every directory under `<root>` but the supervisor leaf.
    fn pod_dirs(&self) -> Result<Vec<PathBuf>, CgroupError> {
        Ok(sub_dirs(&self.root)?
            .into_iter()
            .filter(|p| p.file_name().is_some_and(|n| n != SUPERVISOR_LEAF))
            .collect())
    }
}

pub(super) fn read_mountinfo() -> Result<Vec<MountEntry>, CgroupError> {
    let text = files::read_path(Path::new(discover::PROC_SELF_MOUNTINFO))?;
    Ok(discover::parse_mountinfo(&text))
}

pub(super) fn own_cgroup_dir(mount: &MountEntry) -> Result<PathBuf, CgroupError> {
    let path = Path::new(discover::PROC_SELF_CGROUP);
    let text = files::read_path(path)?;
    let own = discover::parse_own_cgroup(&text).ok_or_else(|| CgroupError::NoOwnCgroup {
        path: path.to_path_buf(),
    })?;
    discover::cgroup_dir(mount, &own).ok_or_else(|| CgroupError::BadRoot {
        path: PathBuf::from(&own),
        reason: format!(
            "vigil's cgroup is not visible under the cgroup2 mount {}",
            mount.mount_point.display()
        ),
    })
}

pub(super) fn read_controllers(dir: &Path, file: &str) -> Result<Controllers, CgroupError> {
    let text = files::read_file(dir, file)?;
    Ok(Controllers::from_names(text.split_whitespace()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake cgroup directory with the given interface files.
    fn fake_cgroup(dir: &Path, controllers: &str, subtree: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(CGROUP_CONTROLLERS), controllers).unwrap();
        std::fs::write(dir.join(CGROUP_SUBTREE_CONTROL), subtree).unwrap();
    }

    #[test]
    fn check_controllers_on_hybrid_names_the_v1_binding() {
        let t = tempfile::tempdir().unwrap();
        let mount = t.path().join("unified");
        fake_cgroup(&mount, "hugetlb\n", "");
        let root = mount.join("vigil");
        fake_cgroup(&root, "", "");
        let mountinfo = format!(
            "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
             41 31 0:38 / {} rw - cgroup2 cgroup2 rw\n",
            mount.display()
        );
        let m =
            Manager::with_root_and_mounts(&root, discover::parse_mountinfo(&mountinfo)).unwrap();
        assert!(m.check_controllers(Controllers::NONE).is_ok());
        let err = m.check_controllers(Controllers::MEMORY).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "memory controller not available in cgroup2 at {} (available: hugetlb); \
                 it is bound to cgroup v1 on this host (cgroup2 gets it when the host \
                 boots with systemd.unified_cgroup_hierarchy=1)",
                mount.display()
            )
        );
    }

    #[test]
    fn check_controllers_passes_when_enabled_in_subtree_control() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        fake_cgroup(&root, "cpu memory pids", "memory pids cpu");
        let m = Manager::with_root_and_mounts(&root, Vec::new()).unwrap();
        assert!(
            m.check_controllers(Controllers::MEMORY | Controllers::PIDS | Controllers::CPU)
                .is_ok()
        );
        let err = m.check_controllers(Controllers::IO).unwrap_err();
        assert!(
            err.to_string().contains("io controller not available"),
            "{err}"
        );
        assert!(err.to_string().contains("not delegated"), "{err}");
    }

    #[test]
    fn cgroup_root_none_means_no_manager() {
        let m = Manager::setup(&RootSetting::None, "vigil", Controllers::MEMORY).unwrap();
        assert!(m.is_none());
    }

    #[test]
    fn path_root_off_cgroup2_is_refused_with_the_path() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("vigil");
        let err =
            Manager::setup(&RootSetting::Path(p.clone()), "vigil", Controllers::NONE).unwrap_err();
        assert!(matches!(err, CgroupError::NotCgroup2 { .. }), "{err}");
        assert!(err.to_string().contains(&*p.to_string_lossy()), "{err}");
        assert!(!p.exists());
    }

    #[test]
    fn pod_may_not_be_named_like_the_supervisor_leaf() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        fake_cgroup(&root, "", "");
        let m = Manager::with_root_and_mounts(&root, Vec::new()).unwrap();
        let err = m
            .create_container(SUPERVISOR_LEAF, "c", &Limits::default())
            .unwrap_err();
        assert!(err.to_string().contains("supervisor"), "{err}");
    }

    #[test]
    fn bad_names_are_refused_with_the_name() {
        for bad in ["", ".", "..", "a/b"] {
            let err = check_name(bad).unwrap_err();
            assert!(err.to_string().contains("not a valid cgroup name"), "{err}");
        }
        assert!(check_name("web-1").is_ok());
    }

    #[test]
    fn sub_dirs_and_remove_tree_go_deepest_first() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("r");
        std::fs::create_dir_all(root.join("pod/ctr/probe-liveness")).unwrap();
        std::fs::create_dir_all(root.join("supervisor")).unwrap();
        assert_eq!(sub_dirs(&root).unwrap().len(), 2);
        remove_tree(&root.join("pod")).unwrap();
        assert!(!root.join("pod").exists());
        // Already gone is fine.
        remove_tree(&root.join("pod")).unwrap();
    }

    #[test]
    fn create_dir_errors_carry_the_path() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("missing/parent/x");
        let err = make_dir(&p).unwrap_err();
        assert!(err.to_string().contains(&*p.to_string_lossy()), "{err}");
    }
}
