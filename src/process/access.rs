//! Which path stops a user from running a program: the program's path walked one component at
//! a time as the kernel resolves it (path_resolution(7)), symbolic links followed, each
//! directory on the way judged for search permission and the file for execute permission by
//! the mode bits and the credentials the container will have. `vigil check` uses it to refuse a
//! `command[0]` or a `working_dir` that `run` could not use, and a failed start uses it to name
//! the path that was denied — the directory under which the target is unreadable, not the
//! symlink or the name that led there.
//!
//! Owns nothing and changes nothing: it reads metadata only (lstat, readlink, statvfs). Must
//! not open the program or run anything. Mode bits only: ACLs and security modules are not
//! read, so a denial they cause is not found here (the caller then shows the kernel's error
//! alone).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

/// The most symbolic links followed in one walk (the kernel's limit, path_resolution(7)).
const MAX_LINKS: u32 = 40;

/// The credentials a process will have: what the kernel compares with the mode bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

impl Who {
    /// This process's own effective credentials.
    pub fn this_process() -> Who {
        Who {
            uid: nix::unistd::Uid::effective().as_raw(),
            gid: nix::unistd::Gid::effective().as_raw(),
            groups: nix::unistd::getgroups()
                .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
                .unwrap_or_default(),
        }
    }

    /// Whether the mode bits grant `bit` (4 read, 2 write, 1 execute/search) of a file with
    /// this owner and mode: the owner's bits for the owner, else the group's for a member, else
    /// the others' (not a union: an owner without the bit is denied, as by the kernel).
    fn granted(&self, owner: u32, group: u32, mode: u32, bit: u32) -> bool {
        let shift = if owner == self.uid {
            6
        } else if group == self.gid || self.groups.contains(&group) {
            3
        } else {
            0
        };
        (mode >> shift) & bit != 0
    }

    fn describe(&self) -> String {
        format!("uid {}", self.uid)
    }
}

/// Why a user cannot use a path: the component that says no.
#[derive(Debug, thiserror::Error)]
pub enum Denial {
    #[error("{} does not exist", path.display())]
    Missing { path: PathBuf },
    #[error("{} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error(
        "{who} may not enter {} (mode {mode:04o}, owner uid {owner}, group {group})",
        dir.display()
    )]
    NotSearchable {
        dir: PathBuf,
        who: String,
        mode: u32,
        owner: u32,
        group: u32,
    },
    #[error(
        "{who} may not execute {} (mode {mode:04o}, owner uid {owner}, group {group})",
        file.display()
    )]
    NotExecutable {
        file: PathBuf,
        who: String,
        mode: u32,
        owner: u32,
        group: u32,
    },
    #[error("{} is a directory, not a program", path.display())]
    IsADirectory { path: PathBuf },
    #[error("{} is not a regular file", path.display())]
    NotAFile { path: PathBuf },
    #[error("{} is on a file system mounted noexec", path.display())]
    NoExecMount { path: PathBuf },
    /// A bare program name that no `PATH` entry holds.
    #[error("no directory of PATH ({path}) holds it")]
    NotInPath { path: String },
    #[error("more than {MAX_LINKS} symbolic links on the way to {}", path.display())]
    Loop { path: PathBuf },
    /// The walk itself failed as vigil's own user (e.g. `vigil check` run by someone who may
    /// not read there): nothing is known about the container's user.
    #[error("cannot check {}: {source}", path.display())]
    Unknown { path: PathBuf, source: io::Error },
}

impl Denial {
    /// Whether this is a fact about the path rather than a failure to look.
    pub fn is_known(&self) -> bool {
        !matches!(self, Denial::Unknown { .. })
    }

    /// The path that was denied or is missing (none for a name not in PATH).
    pub fn path(&self) -> Option<&Path> {
        Some(match self {
            Denial::NotInPath { .. } => return None,
            Denial::Missing { path }
            | Denial::NotADirectory { path }
            | Denial::IsADirectory { path }
            | Denial::NotAFile { path }
            | Denial::NoExecMount { path }
            | Denial::Loop { path }
            | Denial::Unknown { path, .. } => path,
            Denial::NotSearchable { dir, .. } => dir,
            Denial::NotExecutable { file, .. } => file,
        })
    }
}

/// What the walk must end on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A program `who` may execute (a regular file with an execute bit for them, not on a
    /// noexec mount).
    Program,
    /// A directory `who` may enter (`working_dir`).
    Directory,
}

/// Walks `path` (absolute, or relative to `base`) as `who` would resolve it and returns the
/// real path it names, or the first component that denies `who` what `want` needs.
pub fn walk(path: &Path, base: &Path, who: &Who, want: Want) -> Result<PathBuf, Denial> {
    let start = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut todo: VecDeque<OsString> = VecDeque::new();
    push_front(&mut todo, &start);
    let mut cur = PathBuf::from("/");
    let mut links = 0u32;
    while let Some(name) = todo.pop_front() {
        if name == "/" {
            cur = PathBuf::from("/");
            continue;
        }
        if name == ".." {
            search(&cur, who)?;
            cur.pop();
            continue;
        }
        search(&cur, who)?;
        let next = cur.join(&name);
        let md = match std::fs::symlink_metadata(&next) {
            Ok(md) => md,
            Err(e) => return Err(not_there(next, e)),
        };
        if md.file_type().is_symlink() {
            links += 1;
            if links > MAX_LINKS {
                return Err(Denial::Loop { path: start });
            }
            let target = std::fs::read_link(&next).map_err(|e| not_there(next.clone(), e))?;
            push_front(&mut todo, &target);
            continue;
        }
        if !todo.is_empty() && !md.is_dir() {
            return Err(Denial::NotADirectory { path: next });
        }
        cur = next;
    }
    let md = std::fs::metadata(&cur).map_err(|e| not_there(cur.clone(), e))?;
    match want {
        Want::Directory => {
            if !md.is_dir() {
                return Err(Denial::NotADirectory { path: cur });
            }
            search(&cur, who)?;
        }
        Want::Program => {
            if md.is_dir() {
                return Err(Denial::IsADirectory { path: cur });
            }
            if !md.is_file() {
                return Err(Denial::NotAFile { path: cur });
            }
            // execve(2): root needs one execute bit of the three, anyone else their own.
            let ok = if who.uid == 0 {
                md.mode() & 0o111 != 0
            } else {
                who.granted(md.uid(), md.gid(), md.mode(), 1)
            };
            if !ok {
                return Err(Denial::NotExecutable {
                    file: cur,
                    who: who.describe(),
                    mode: md.mode() & 0o7777,
                    owner: md.uid(),
                    group: md.gid(),
                });
            }
            if nix::sys::statvfs::statvfs(&cur)
                .is_ok_and(|s| s.flags().contains(nix::sys::statvfs::FsFlags::ST_NOEXEC))
            {
                return Err(Denial::NoExecMount { path: cur });
            }
        }
    }
    Ok(cur)
}

/// Puts the components of `path` in front of `todo` (an absolute path restarts from `/`).
fn push_front(todo: &mut VecDeque<OsString>, path: &Path) {
    let mut parts: Vec<OsString> = Vec::new();
    for c in path.components() {
        match c {
            Component::RootDir => parts.push("/".into()),
            Component::Normal(n) => parts.push(n.to_os_string()),
            Component::ParentDir => parts.push("..".into()),
            Component::CurDir | Component::Prefix(_) => {}
        }
    }
    for p in parts.into_iter().rev() {
        todo.push_front(p);
    }
}

/// Search (execute) permission on directory `dir` for `who`; root passes every directory
/// (CAP_DAC_READ_SEARCH).
fn search(dir: &Path, who: &Who) -> Result<(), Denial> {
    if who.uid == 0 {
        return Ok(());
    }
    let md = std::fs::metadata(dir).map_err(|e| not_there(dir.to_path_buf(), e))?;
    if who.granted(md.uid(), md.gid(), md.mode(), 1) {
        return Ok(());
    }
    Err(Denial::NotSearchable {
        dir: dir.to_path_buf(),
        who: who.describe(),
        mode: md.mode() & 0o7777,
        owner: md.uid(),
        group: md.gid(),
    })
}

fn not_there(path: PathBuf, e: io::Error) -> Denial {
    match e.raw_os_error() {
        Some(libc::ENOENT) => Denial::Missing { path },
        Some(libc::ENOTDIR) => Denial::NotADirectory { path },
        Some(libc::ELOOP) => Denial::Loop { path },
        _ => Denial::Unknown { path, source: e },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn nobody() -> Who {
        Who {
            uid: 65534,
            gid: 65534,
            groups: vec![],
        }
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_symlink_into_a_directory_the_user_may_not_enter_names_that_directory() {
        let t = tempfile::tempdir().unwrap();
        chmod(t.path(), 0o755);
        let private = t.path().join("private");
        std::fs::create_dir(&private).unwrap();
        let prog = private.join("app");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        chmod(&prog, 0o755);
        chmod(&private, 0o700);
        let link = t.path().join("app");
        symlink(&prog, &link).unwrap();
        // Owned by whoever runs the test; judged for another uid.
        let who = Who {
            uid: nix::unistd::Uid::effective().as_raw() + 1,
            gid: 65534,
            groups: vec![],
        };
        let e = walk(&link, Path::new("/"), &who, Want::Program).unwrap_err();
        assert_eq!(e.path(), Some(private.as_path()), "{e}");
        assert!(e.to_string().contains("may not enter"), "{e}");
        assert!(e.to_string().contains("mode 0700"), "{e}");
    }

    #[test]
    fn a_program_without_the_user_s_execute_bit_is_named_with_its_mode() {
        let t = tempfile::tempdir().unwrap();
        chmod(t.path(), 0o755);
        let prog = t.path().join("app");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        chmod(&prog, 0o744);
        let e = walk(&prog, Path::new("/"), &nobody(), Want::Program).unwrap_err();
        assert!(matches!(e, Denial::NotExecutable { .. }), "{e}");
        assert_eq!(e.path(), Some(prog.as_path()));
        chmod(&prog, 0o755);
        assert_eq!(
            walk(&prog, Path::new("/"), &nobody(), Want::Program).unwrap(),
            prog
        );
    }

    #[test]
    fn root_needs_one_execute_bit_and_enters_every_directory() {
        let t = tempfile::tempdir().unwrap();
        let prog = t.path().join("app");
        std::fs::write(&prog, "x").unwrap();
        chmod(&prog, 0o644);
        let root = Who {
            uid: 0,
            gid: 0,
            groups: vec![],
        };
        assert!(walk(&prog, Path::new("/"), &root, Want::Program).is_err());
        chmod(&prog, 0o700);
        chmod(t.path(), 0o700);
        assert!(walk(&prog, Path::new("/"), &root, Want::Program).is_ok());
    }

    #[test]
    fn a_missing_component_a_directory_and_a_relative_path_are_told_apart() {
        let t = tempfile::tempdir().unwrap();
        let who = Who::this_process();
        let e = walk(Path::new("no/such"), t.path(), &who, Want::Program).unwrap_err();
        assert!(
            matches!(&e, Denial::Missing { path } if *path == t.path().join("no")),
            "{e}"
        );
        let e = walk(t.path(), Path::new("/"), &who, Want::Program).unwrap_err();
        assert!(matches!(e, Denial::IsADirectory { .. }), "{e}");
        assert!(walk(Path::new("."), t.path(), &who, Want::Directory).is_ok());
        let loop_a = t.path().join("a");
        symlink(t.path().join("b"), &loop_a).unwrap();
        symlink(&loop_a, t.path().join("b")).unwrap();
        let e = walk(&loop_a, Path::new("/"), &who, Want::Program).unwrap_err();
        assert!(matches!(e, Denial::Loop { .. }), "{e}");
    }
}
