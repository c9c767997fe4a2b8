//! Whether a path root acts on can be steered by someone else — the whole path, like sshd's
//! `StrictModes` (sshd_config(5); OpenSSH's `safe_path()` walks every ancestor the same way).
//!
//! Owns: walking a path component by component from `/` (following symlinks by hand, at most
//! [`MAX_SYMLINKS`] like the kernel's `ELOOP` limit in path_resolution(7)) and judging every
//! directory it passes through and the path's final object by owner and mode. Trusted owners
//! are root and vigil's own uid. A directory someone else may write to (group or other `w`
//! bit, or owned by another uid) lets that someone rename what is below it and put their own
//! file in its place, so it is refused — except a sticky, trusted-owned directory (`/tmp`),
//! where others may add names but never rename or remove a trusted owner's entry
//! (inode(7), "S_ISVTX"): that is fine wherever the next component belongs to a trusted owner
//! (checked as the walk reaches it) or does not exist yet and vigil creates it.
//!
//! Must not: change anything (no chmod, chown, mkdir), or decide whether a check applies (the
//! callers check only when vigil runs as root). Every refusal names the path checked, the
//! component that made it unsafe, its owner and mode.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed in one walk before giving up (the kernel's limit, path_resolution(7)).
pub const MAX_SYMLINKS: u32 = 40;

/// What the path names, which decides how its last component is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A file vigil reads and obeys (the config, an `env_file`): owned by a trusted uid, not
    /// writable by group or others, and it must exist.
    File,
    /// A directory in which vigil creates names others must not be able to pre-empt (the
    /// control socket's directory): trusted owner, not writable by group or others, sticky or
    /// not. A missing one is fine when what exists of its ancestors is (vigil creates it).
    PrivateDir,
    /// A directory in which vigil creates its own subdirectories and refuses foreign ones
    /// (`log_dir`): as [`Target::PrivateDir`], but a sticky trusted-owned one is accepted.
    SharedDir,
}

/// Why a path component is unsafe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Problem {
    /// Owned by a uid other than root or vigil's.
    ForeignOwner,
    /// Writable by its group.
    GroupWritable,
    /// Writable by others.
    WorldWritable,
    /// A file expected, a directory (or the reverse) found.
    WrongType,
}

impl Problem {
    pub fn as_str(self) -> &'static str {
        match self {
            Problem::ForeignOwner => "owned by a user other than root or vigil's own",
            Problem::GroupWritable => "writable by its group",
            Problem::WorldWritable => "writable by others",
            Problem::WrongType => "not the expected kind of file",
        }
    }
}

/// A refused or uncheckable path.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "{what} {}: {} is {} (owner uid {uid}, mode {mode:04o}); whoever can write there could \
         make vigil act on their own file as root — chown root and chmod go-w {}",
        path.display(), at_text(path, at, *on_the_way), problem.as_str(), at.display()
    )]
    Unsafe {
        what: &'static str,
        /// The path checked, as configured.
        path: PathBuf,
        /// The component found unsafe (the path itself, or a directory on the way).
        at: PathBuf,
        /// `at` is a directory (or symlink) on the way, not the object the path names.
        on_the_way: bool,
        problem: Problem,
        uid: u32,
        mode: u32,
    },
    #[error("{what} {}: cannot check {}: {source}", path.display(), at.display())]
    Stat {
        what: &'static str,
        path: PathBuf,
        at: PathBuf,
        source: io::Error,
    },
    #[error("{what} {}: more than {MAX_SYMLINKS} symbolic links on the way", path.display())]
    Loop { what: &'static str, path: PathBuf },
}

fn at_text(path: &Path, at: &Path, on_the_way: bool) -> String {
    if on_the_way {
        format!(
            "{} {}",
            if at.is_symlink() {
                "symlink"
            } else {
                "directory"
            },
            at.display()
        )
    } else if path == at {
        "it".to_string()
    } else {
        format!("what it names, {},", at.display())
    }
}

impl TrustError {
    /// The component the refusal is about.
    pub fn at(&self) -> Option<&Path> {
        match self {
            TrustError::Unsafe { at, .. } | TrustError::Stat { at, .. } => Some(at),
            TrustError::Loop { .. } => None,
        }
    }
}

/// The uids whose files vigil trusts: root and its own effective uid.
pub fn trusted_uids() -> [u32; 2] {
    [0, nix::unistd::Uid::effective().as_raw()]
}

/// The judgement on one object, from its owner, mode (with type bits) and role. Pure.
///
/// - `last`: the object the path names ([`Target`] applies); otherwise a directory on the way.
/// - `sticky_ok`: a sticky trusted-owned directory is accepted (an ancestor whose next entry
///   is checked in turn, or a [`Target::SharedDir`]).
pub fn judge(
    uid: u32,
    mode: u32,
    trusted: &[u32],
    want_dir: bool,
    sticky_ok: bool,
) -> Option<Problem> {
    let is_dir = mode & libc::S_IFMT == libc::S_IFDIR;
    if want_dir != is_dir {
        return Some(Problem::WrongType);
    }
    if !trusted.contains(&uid) {
        return Some(Problem::ForeignOwner);
    }
    let sticky = is_dir && mode & libc::S_ISVTX != 0;
    if sticky && sticky_ok {
        return None;
    }
    if mode & 0o002 != 0 {
        Some(Problem::WorldWritable)
    } else if mode & 0o020 != 0 {
        Some(Problem::GroupWritable)
    } else {
        None
    }
}

/// Checks `path` whole: every directory from `/` to it, every symlink's directory and target,
/// and the object itself as `target`. A relative path is taken from vigil's working directory.
pub fn check(what: &'static str, path: &Path, target: Target) -> Result<(), TrustError> {
    check_with(what, path, target, &trusted_uids())
}

/// [`check`] with the trusted uids given (tests).
pub fn check_with(
    what: &'static str,
    path: &Path,
    target: Target,
    trusted: &[u32],
) -> Result<(), TrustError> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(|source| TrustError::Stat {
                what,
                path: path.to_path_buf(),
                at: PathBuf::from("."),
                source,
            })?
            .join(path)
    };
    let mut queue: VecDeque<OsString> = components(&absolute);
    let mut cur = PathBuf::from("/");
    let mut links = 0;
    let unsafe_at = |at: &Path, on_the_way, problem, meta: &std::fs::Metadata| TrustError::Unsafe {
        what,
        path: path.to_path_buf(),
        at: at.to_path_buf(),
        on_the_way,
        problem,
        uid: meta.uid(),
        mode: meta.mode() & 0o7777,
    };
    let stat = |at: &Path| {
        std::fs::symlink_metadata(at).map_err(|source| TrustError::Stat {
            what,
            path: path.to_path_buf(),
            at: at.to_path_buf(),
            source,
        })
    };
    // `/` itself, as a directory on the way (or the target when the path is `/`).
    let root_meta = stat(&cur)?;
    let sticky_ok = !queue.is_empty() || target == Target::SharedDir;
    if let Some(p) = judge(root_meta.uid(), root_meta.mode(), trusted, true, sticky_ok) {
        return Err(unsafe_at(&cur, !queue.is_empty(), p, &root_meta));
    }
    while let Some(name) = queue.pop_front() {
        if name == ".." {
            // `cur` has no symlinks left in it, so its parent is the real parent.
            cur.pop();
            continue;
        }
        let next = cur.join(&name);
        let meta = match std::fs::symlink_metadata(&next) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound && target != Target::File => {
                // vigil creates the rest: what exists was judged; `cur` must not be a
                // world-writable directory unless the sticky bit keeps others from taking
                // over what vigil creates there (checked above as an ancestor).
                return Ok(());
            }
            Err(source) => {
                return Err(TrustError::Stat {
                    what,
                    path: path.to_path_buf(),
                    at: next,
                    source,
                });
            }
        };
        if meta.file_type().is_symlink() {
            // The link lives in `cur` (judged); in a sticky directory it must be a trusted
            // owner's, or its owner could replace it.
            if !trusted.contains(&meta.uid()) {
                return Err(unsafe_at(&next, true, Problem::ForeignOwner, &meta));
            }
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(TrustError::Loop {
                    what,
                    path: path.to_path_buf(),
                });
            }
            let dest = std::fs::read_link(&next).map_err(|source| TrustError::Stat {
                what,
                path: path.to_path_buf(),
                at: next.clone(),
                source,
            })?;
            if dest.is_absolute() {
                cur = PathBuf::from("/");
            }
            for c in components(&dest).into_iter().rev() {
                queue.push_front(c);
            }
            continue;
        }
        let last = queue.is_empty();
        let (want_dir, sticky_ok) = if last {
            match target {
                Target::File => (false, false),
                Target::PrivateDir => (true, false),
                Target::SharedDir => (true, true),
            }
        } else {
            (true, true)
        };
        if let Some(p) = judge(meta.uid(), meta.mode(), trusted, want_dir, sticky_ok) {
            // The object itself, reached without a symlink: name it as configured.
            let at = if last && links == 0 {
                path
            } else {
                next.as_path()
            };
            return Err(unsafe_at(at, !last, p, &meta));
        }
        cur = next;
    }
    Ok(())
}

/// Opens the file at `path` (absolute) for reading without following a symbolic link on any
/// component, so that whoever owns a directory on the way cannot point vigil, reading as root,
/// at someone else's file by swapping a directory for a link (`O_NOFOLLOW` guards only the
/// last component). openat2(2) with `RESOLVE_NO_SYMLINKS` (Linux 5.6); where that call is
/// missing (`ENOSYS`, or `EPERM` from a seccomp filter) the same walk by hand: each directory
/// opened with `O_PATH | O_NOFOLLOW` relative to the one before and checked to be a directory,
/// the file with `O_NOFOLLOW`. Always `O_NONBLOCK` (a FIFO cannot block the open or a read)
/// and `O_CLOEXEC`. A link on the way is `ELOOP`, with a message saying so.
pub fn open_without_links(path: &Path) -> io::Result<std::fs::File> {
    use nix::errno::Errno;
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = match nix::fcntl::openat2(nix::fcntl::AT_FDCWD, path, how) {
        Err(Errno::ENOSYS | Errno::EPERM) => walk_without_links(path, flags),
        other => other,
    };
    match fd {
        Ok(fd) => Ok(std::fs::File::from(fd)),
        Err(Errno::ELOOP) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a symbolic link is on the path (none is followed here)",
        )),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// [`open_without_links`] without openat2(2).
fn walk_without_links(path: &Path, flags: nix::fcntl::OFlag) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::errno::Errno;
    use nix::fcntl::OFlag;
    use nix::sys::stat::{Mode, SFlag, fstat};
    if !path.is_absolute() {
        return Err(Errno::EINVAL);
    }
    let mut parts = components(path);
    let Some(last) = parts.pop_back() else {
        return Err(Errno::EISDIR);
    };
    let dir_flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut dir = nix::fcntl::open("/", dir_flags | OFlag::O_DIRECTORY, Mode::empty())?;
    for part in parts {
        let next = nix::fcntl::openat(&dir, part.as_os_str(), dir_flags, Mode::empty())?;
        let kind = SFlag::from_bits_truncate(fstat(&next)?.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFLNK {
            return Err(Errno::ELOOP);
        }
        if kind != SFlag::S_IFDIR {
            return Err(Errno::ENOTDIR);
        }
        dir = next;
    }
    nix::fcntl::openat(&dir, last.as_os_str(), flags, Mode::empty())
}

/// The normal components of `path` (and `..`), without the root and `.`.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_without_links_refuses_a_link_on_any_component_in_both_ways() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("msg"), "hello").unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink(real.join("msg"), real.join("msg-link")).unwrap();
        let flags = nix::fcntl::OFlag::O_RDONLY
            | nix::fcntl::OFlag::O_NOFOLLOW
            | nix::fcntl::OFlag::O_CLOEXEC;
        let read = |p: &Path| std::io::read_to_string(open_without_links(p)?);
        assert_eq!(read(&real.join("msg")).unwrap(), "hello");
        assert!(walk_without_links(&real.join("msg"), flags).is_ok());
        for through in [dir.path().join("link/msg"), real.join("msg-link")] {
            let e = read(&through).unwrap_err();
            assert!(e.to_string().contains("symbolic link"), "{through:?}: {e}");
            assert_eq!(
                walk_without_links(&through, flags).unwrap_err(),
                nix::errno::Errno::ELOOP,
                "{through:?}"
            );
        }
        // A file where a directory should be.
        assert_eq!(
            walk_without_links(&real.join("msg/x"), flags).unwrap_err(),
            nix::errno::Errno::ENOTDIR
        );
    }

    const DIR: u32 = libc::S_IFDIR;
    const REG: u32 = libc::S_IFREG;

    #[test]
    fn files_must_be_trusted_and_not_writable_by_group_or_others() {
        let t = [0, 0];
        assert_eq!(judge(0, REG | 0o644, &t, false, false), None);
        assert_eq!(
            judge(0, REG | 0o664, &t, false, false),
            Some(Problem::GroupWritable)
        );
        assert_eq!(
            judge(0, REG | 0o666, &t, false, false),
            Some(Problem::WorldWritable)
        );
        assert_eq!(
            judge(65534, REG | 0o600, &t, false, false),
            Some(Problem::ForeignOwner)
        );
        assert_eq!(
            judge(0, DIR | 0o755, &t, false, false),
            Some(Problem::WrongType)
        );
    }

    #[test]
    fn a_sticky_directory_is_fine_only_where_its_entries_are_checked() {
        let t = [0, 0];
        assert_eq!(judge(0, DIR | 0o1777, &t, true, true), None);
        assert_eq!(
            judge(0, DIR | 0o1777, &t, true, false),
            Some(Problem::WorldWritable)
        );
        assert_eq!(
            judge(65534, DIR | 0o1777, &t, true, true),
            Some(Problem::ForeignOwner)
        );
        assert_eq!(
            judge(0, DIR | 0o777, &t, true, true),
            Some(Problem::WorldWritable)
        );
        assert_eq!(
            judge(0, DIR | 0o775, &t, true, true),
            Some(Problem::GroupWritable)
        );
    }

    #[test]
    fn vigils_own_uid_is_trusted_besides_root() {
        assert_eq!(judge(1000, REG | 0o600, &[0, 1000], false, false), None);
    }

    #[test]
    fn the_error_names_the_path_the_component_its_owner_and_mode() {
        let e = TrustError::Unsafe {
            what: "config file",
            path: PathBuf::from("/srv/u/vigil.toml"),
            at: PathBuf::from("/srv/u"),
            on_the_way: true,
            problem: Problem::ForeignOwner,
            uid: 65534,
            mode: 0o755,
        };
        let m = e.to_string();
        for want in [
            "config file /srv/u/vigil.toml",
            "directory /srv/u",
            "owner uid 65534",
            "mode 0755",
            "other than root",
        ] {
            assert!(m.contains(want), "{want:?} missing in {m}");
        }
    }

    #[test]
    fn a_path_under_a_private_temp_dir_passes_and_a_missing_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let me = nix::unistd::Uid::effective().as_raw();
        let f = dir.path().join("vigil.toml");
        std::fs::write(&f, "").unwrap();
        let trusted = [0, me];
        // The temp dir's ancestors (/tmp is sticky) must pass for the caller's own files.
        check_with("config file", &f, Target::File, &trusted).unwrap();
        let e = check_with(
            "config file",
            &dir.path().join("nope"),
            Target::File,
            &trusted,
        );
        assert!(matches!(e, Err(TrustError::Stat { .. })), "{e:?}");
        // A directory vigil would create is fine when its existing ancestors are.
        check_with(
            "socket directory",
            &dir.path().join("run/sub"),
            Target::PrivateDir,
            &trusted,
        )
        .unwrap();
    }

    #[test]
    fn symlinks_are_followed_and_their_targets_checked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let me = nix::unistd::Uid::effective().as_raw();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(open.join("f"), "").unwrap();
        std::fs::set_permissions(open.join("f"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(open.join("f"), &link).unwrap();
        let e = check_with("config file", &link, Target::File, &[0, me]).unwrap_err();
        assert_eq!(e.at(), Some(open.as_path()), "{e}");
        assert!(e.to_string().contains("writable by others"), "{e}");
        let lp = dir.path().join("loop");
        std::os::unix::fs::symlink(&lp, &lp).unwrap();
        let e = check_with("config file", &lp, Target::File, &[0, me]).unwrap_err();
        assert!(matches!(e, TrustError::Loop { .. }), "{e}");
    }
}
