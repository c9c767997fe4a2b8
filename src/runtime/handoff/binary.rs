//! Checking the binary `vigil upgrade` is to execute, before anything is handed over: opened
//! once without following a final symlink, trusted as the config is ([`crate::trust`]: the
//! file and every directory on the way owned by root or vigil's uid, not writable by group or
//! others; the file judged on its descriptor), a regular executable file, an ELF executable
//! for this machine (elf(5): `e_ident` class and byte order, `e_type`, `e_machine`), and —
//! asked with `--handoff-version` — reading the state format this vigil writes.
//!
//! Must not: execute the binary for anything but `--handoff-version` (stdin closed, no
//! handoff descriptors; a child the caller reaps and bounds in time) and the pre-flight,
//! execute it by path (only from the descriptor that
//! was checked, [`Checked`]), or change anything.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::{ERROR_ENV, EXE_FD_ENV, FD_ENV, FORMAT_VERSION, VersionInfo};

/// How long `PATH --handoff-version` may take.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(5);

/// elf(5) `e_machine` of the architecture this vigil was built for.
pub const OUR_MACHINE: u16 = if cfg!(target_arch = "x86_64") {
    62 // EM_X86_64
} else if cfg!(target_arch = "aarch64") {
    183 // EM_AARCH64
} else if cfg!(target_arch = "riscv64") {
    243 // EM_RISCV
} else if cfg!(target_arch = "x86") {
    3 // EM_386
} else if cfg!(target_arch = "arm") {
    40 // EM_ARM
} else if cfg!(target_arch = "powerpc64") {
    21 // EM_PPC64
} else if cfg!(target_arch = "s390x") {
    22 // EM_S390
} else {
    0
};

/// Why a binary cannot be the next vigil.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BinaryError {
    #[error("{}: cannot use it: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
    #[error("{}: refused: {reason}", path.display())]
    Untrusted { path: PathBuf, reason: String },
    #[error("{}: not executable (no execute permission for vigil's user)", path.display())]
    NotExecutable { path: PathBuf },
    #[error("{}: not an ELF executable ({what})", path.display())]
    NotElf { path: PathBuf, what: String },
    #[error(
        "{}: built for another machine (ELF e_machine {machine}, {class}-bit {order}); this vigil runs on e_machine {OUR_MACHINE}, 64-bit little-endian",
        path.display()
    )]
    WrongArch {
        path: PathBuf,
        machine: u16,
        class: u8,
        order: &'static str,
    },
    #[error("{}: `--handoff-version` failed: {reason}", path.display())]
    NoVersion { path: PathBuf, reason: String },
    #[error(
        "{}: cannot take this vigil's state over (`--handoff-check`): {reason}; nothing changed",
        path.display()
    )]
    CannotTakeOver { path: PathBuf, reason: String },
    #[error(
        "{}: vigil {vigil} reads handoff format{} {}, not {FORMAT_VERSION} (the format this vigil writes)",
        path.display(),
        if reads.len() == 1 { "" } else { "s" },
        reads.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    )]
    Incompatible {
        path: PathBuf,
        vigil: String,
        reads: Vec<u32>,
    },
}

/// A binary opened once and checked on that descriptor ([`open`]): what `upgrade` asks and
/// executes, from the descriptor, never by path again — a file swapped in after the check is
/// never run.
#[derive(Debug)]
pub struct Checked {
    /// The path it was opened at (argv[0], messages).
    pub path: PathBuf,
    /// `O_RDONLY | O_NOFOLLOW | O_CLOEXEC`.
    pub fd: OwnedFd,
}

/// Opens `path` once (`O_NOFOLLOW`: the last component must not be a symbolic link) and
/// checks it as vigil checks its config ([`crate::trust`]): the file and every directory on
/// the way owned by root or vigil's own uid and not writable by group or others — judged on
/// the open descriptor (`fstat(2)`) for the file itself, so what was judged is what runs. Then:
/// a regular file with an execute bit, an ELF executable for this machine.
pub fn open(path: &Path) -> Result<Checked, BinaryError> {
    let unusable = |reason: String| BinaryError::Unusable {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_absolute() {
        return Err(unusable("the path must be absolute".to_string()));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                unusable("a symbolic link; name the file it points to".to_string())
            } else {
                unusable(e.to_string())
            }
        })?;
    let meta = file.metadata().map_err(|e| unusable(e.to_string()))?;
    if !meta.is_file() {
        return Err(unusable("not a regular file".to_string()));
    }
    // Every directory on the way (the walk follows their symlinks) ...
    crate::trust::check("the upgrade binary", path, crate::trust::Target::File).map_err(|e| {
        BinaryError::Untrusted {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }
    })?;
    // ... leads to this very file, which is judged on the descriptor.
    let walked = std::fs::metadata(path).map_err(|e| unusable(e.to_string()))?;
    if (walked.dev(), walked.ino()) != (meta.dev(), meta.ino()) {
        return Err(unusable(
            "it was replaced while being checked; try again".to_string(),
        ));
    }
    if let Some(problem) = crate::trust::judge(
        meta.uid(),
        meta.mode(),
        &crate::trust::trusted_uids(),
        false,
        false,
    ) {
        return Err(BinaryError::Untrusted {
            path: path.to_path_buf(),
            reason: format!(
                "it is {} (owner uid {}, mode {:04o}); whoever can write it could run their code \
                 as vigil's user — chown root and chmod go-w it",
                problem.as_str(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
        });
    }
    if meta.mode() & 0o111 == 0
        || nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_err()
    {
        return Err(BinaryError::NotExecutable {
            path: path.to_path_buf(),
        });
    }
    let mut head = [0u8; 64];
    let n = read_up_to(&file, &mut head).map_err(|e| unusable(e.to_string()))?;
    check_elf(path, &head[..n])?;
    Ok(Checked {
        path: path.to_path_buf(),
        fd: OwnedFd::from(file),
    })
}

/// The first bytes of `f`, read at offset 0 (pread(2): the descriptor's offset stays).
fn read_up_to(f: &std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::unix::fs::FileExt;
    let mut n = 0;
    while n < buf.len() {
        match f.read_at(&mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// The path under which `fd` is executed by the kernel in a child (`/proc/self/fd/N`, the
/// open file itself, as `fexecve(3)` does without `execveat(2)`): a child started with
/// [`std::process::Command`] keeps the number until its `execve`.
pub fn fd_path(fd: &OwnedFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The ELF header checks of [`open`] on the first bytes of a file (elf(5)).
pub fn check_elf(path: &Path, head: &[u8]) -> Result<(), BinaryError> {
    let not_elf = |what: &str| BinaryError::NotElf {
        path: path.to_path_buf(),
        what: what.to_string(),
    };
    if head.starts_with(b"#!") {
        return Err(not_elf("a script"));
    }
    if head.len() < 20 || &head[..4] != b"\x7fELF" {
        return Err(not_elf("no ELF magic"));
    }
    let class = head[4]; // EI_CLASS: 1 = 32-bit, 2 = 64-bit
    let data = head[5]; // EI_DATA: 1 = little-endian, 2 = big-endian
    let u16_at = |i: usize| {
        let b = [head[i], head[i + 1]];
        if data == 2 {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    };
    let e_type = u16_at(16);
    let machine = u16_at(18);
    let our_class = if cfg!(target_pointer_width = "64") {
        2
    } else {
        1
    };
    let our_data = if cfg!(target_endian = "little") { 1 } else { 2 };
    if machine != OUR_MACHINE || class != our_class || data != our_data {
        return Err(BinaryError::WrongArch {
            path: path.to_path_buf(),
            machine,
            class: if class == 2 { 64 } else { 32 },
            order: if data == 2 {
                "big-endian"
            } else {
                "little-endian"
            },
        });
    }
    // ET_EXEC or ET_DYN (a position-independent executable).
    if e_type != 2 && e_type != 3 {
        return Err(not_elf(&format!("ELF type {e_type}, not an executable")));
    }
    Ok(())
}

/// Starts the checked binary as `BINARY --handoff-version`, from its descriptor (stdin
/// closed, no handoff descriptor, its stdout a pipe: the returned read end, non-blocking; its
/// stderr discarded). Returns at once: the caller reaps it, enforces [`VERSION_TIMEOUT`] and
/// reads its answer once it has exited ([`version_answer`]).
pub fn start_version(binary: &Checked) -> Result<(u32, OwnedFd), BinaryError> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use std::os::unix::process::CommandExt;
    let path = binary.path.as_path();
    let failed = |reason: String| BinaryError::NoVersion {
        path: path.to_path_buf(),
        reason,
    };
    let mut child = Command::new(fd_path(&binary.fd))
        .arg0(path)
        .arg("--handoff-version")
        .env_remove(FD_ENV)
        .env_remove(EXE_FD_ENV)
        .env_remove(ERROR_ENV)
        .env_remove(super::guard::READY_FD_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| failed(format!("cannot run it: {e}")))?;
    let pid = child.id();
    let Some(out) = child.stdout.take().map(OwnedFd::from) else {
        return Err(failed("no pipe for its answer".to_string()));
    };
    // `child` is dropped without waiting: the caller's reaper collects it.
    fcntl(&out, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(|e| failed(format!("its answer's pipe: {e}")))?;
    Ok((pid, out))
}

/// The outcome of [`start_version`]'s run, once it has exited with `code` or by `signal`:
/// its answer (read from `out`, at most 4 KiB) must be a version line naming the format this
/// vigil writes.
pub fn version_answer(
    path: &Path,
    out: &OwnedFd,
    code: Option<i32>,
    signal: Option<i32>,
) -> Result<VersionInfo, BinaryError> {
    let failed = |reason: String| BinaryError::NoVersion {
        path: path.to_path_buf(),
        reason,
    };
    match (code, signal) {
        (Some(0), _) => {}
        (Some(c), _) => {
            return Err(failed(format!(
                "it exited with code {c} (not a vigil that can take over?)"
            )));
        }
        (_, Some(s)) => return Err(failed(format!("it was killed by signal {s}"))),
        _ => return Err(failed("it ended without a status".to_string())),
    }
    let out = String::from_utf8_lossy(&read_all(out)).into_owned();
    let info: VersionInfo = serde_json::from_str(out.trim()).map_err(|e| {
        failed(format!(
            "unreadable answer {:?}: {e}",
            out.chars().take(80).collect::<String>()
        ))
    })?;
    if !info.reads.contains(&FORMAT_VERSION) {
        return Err(BinaryError::Incompatible {
            path: path.to_path_buf(),
            vigil: info.vigil,
            reads: info.reads,
        });
    }
    Ok(info)
}

/// What an exited child left in its non-blocking answer pipe, at most 4 KiB.
fn read_all(out: &OwnedFd) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 1024];
    while bytes.len() < 4096 {
        match nix::unistd::read(out, &mut buf) {
            Ok(0) => break,
            Ok(n) => bytes.extend_from_slice(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => {}
            Err(_) => break,
        }
    }
    bytes.truncate(4096);
    bytes
}

/// Starts the checked binary as `BINARY --handoff-check`, a child with `state` (the real
/// handoff file) on `VIGIL_HANDOFF_FD` and nothing else handed over, its stdout a pipe (the
/// returned read end, non-blocking), its stderr vigil's. Returns at once: the caller reaps it
/// and enforces its deadline. A vigil that reads the state and could take it over exits 0
/// and prints its `--handoff-version` line ([`read_answer`]).
pub fn start_check(binary: &Checked, state: &OwnedFd) -> Result<(u32, OwnedFd), BinaryError> {
    use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
    use std::os::unix::process::CommandExt;
    let path = binary.path.as_path();
    let failed = |reason: String| BinaryError::CannotTakeOver {
        path: path.to_path_buf(),
        reason,
    };
    // A duplicate the child inherits (not close-on-exec), closed here once it is started.
    let inherit = state
        .try_clone()
        .map_err(|e| failed(format!("duplicating the state's descriptor: {e}")))?;
    fcntl(&inherit, FcntlArg::F_SETFD(FdFlag::empty()))
        .map_err(|e| failed(format!("handing the state's descriptor down: {e}")))?;
    let spawned = Command::new(fd_path(&binary.fd))
        .arg0(path)
        .arg("--handoff-check")
        .env(FD_ENV, inherit.as_raw_fd().to_string())
        .env_remove(EXE_FD_ENV)
        .env_remove(ERROR_ENV)
        .env_remove(super::guard::READY_FD_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn();
    drop(inherit);
    let mut child = spawned.map_err(|e| failed(format!("cannot run it: {e}")))?;
    let pid = child.id();
    let Some(out) = child.stdout.take().map(OwnedFd::from) else {
        return Err(failed("no pipe for its answer".to_string()));
    };
    // `child` is dropped without waiting: the caller's reaper collects it.
    fcntl(&out, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .map_err(|e| failed(format!("its answer's pipe: {e}")))?;
    Ok((pid, out))
}

/// What the pre-flight printed (read once it has exited; at most 4 KiB): its version line,
/// which must name the format this vigil writes; else why not.
pub fn read_answer(out: &OwnedFd) -> Result<VersionInfo, String> {
    let bytes = read_all(out);
    let text = String::from_utf8_lossy(&bytes);
    let info: VersionInfo = serde_json::from_str(text.trim()).map_err(|e| {
        format!(
            "it exited 0 but its answer is unreadable {:?}: {e}",
            text.chars().take(80).collect::<String>()
        )
    })?;
    if !info.check || !info.reads.contains(&FORMAT_VERSION) {
        return Err(format!(
            "it exited 0 but does not say it read format {FORMAT_VERSION}: {}",
            text.trim()
        ));
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(class: u8, data: u8, e_type: u16, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = data;
        h[6] = 1;
        let (t, m) = if data == 2 {
            (e_type.to_be_bytes(), machine.to_be_bytes())
        } else {
            (e_type.to_le_bytes(), machine.to_le_bytes())
        };
        h[16..18].copy_from_slice(&t);
        h[18..20].copy_from_slice(&m);
        h
    }

    #[test]
    fn an_elf_executable_for_this_machine_passes() {
        let p = Path::new("/x/vigil");
        assert_eq!(check_elf(p, &header(2, 1, 3, OUR_MACHINE)), Ok(()));
        assert_eq!(check_elf(p, &header(2, 1, 2, OUR_MACHINE)), Ok(()));
    }

    #[test]
    fn another_machine_a_script_or_a_library_is_refused() {
        let p = Path::new("/x/vigil");
        let other = if OUR_MACHINE == 183 { 62 } else { 183 };
        let e = check_elf(p, &header(2, 1, 3, other)).unwrap_err();
        assert!(matches!(e, BinaryError::WrongArch { machine, .. } if machine == other));
        assert!(e.to_string().contains("another machine"), "{e}");
        assert!(matches!(
            check_elf(p, &header(1, 1, 3, OUR_MACHINE)),
            Err(BinaryError::WrongArch { class: 32, .. })
        ));
        assert!(matches!(
            check_elf(p, &header(2, 2, 3, OUR_MACHINE)),
            Err(BinaryError::WrongArch { .. })
        ));
        assert!(matches!(
            check_elf(p, b"#!/bin/sh\nexec vigil \"$@\"\n"),
            Err(BinaryError::NotElf { .. })
        ));
        assert!(matches!(
            check_elf(p, b"hello"),
            Err(BinaryError::NotElf { .. })
        ));
        // ET_REL: an object file.
        assert!(matches!(
            check_elf(p, &header(2, 1, 1, OUR_MACHINE)),
            Err(BinaryError::NotElf { .. })
        ));
    }

    fn opened(path: &Path) -> Result<(), BinaryError> {
        open(path).map(|_| ())
    }

    #[test]
    fn missing_relative_and_non_executable_paths_are_refused_with_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = opened(&missing).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
        assert!(opened(Path::new("vigil")).is_err());
        assert!(opened(dir.path()).is_err());
        let plain = dir.path().join("plain");
        std::fs::write(&plain, header(2, 1, 3, OUR_MACHINE)).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        // Root may execute anything with some x bit; with none it is refused even for root.
        assert_eq!(
            opened(&plain),
            Err(BinaryError::NotExecutable {
                path: plain.clone()
            })
        );
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(opened(&plain), Ok(()));
    }

    #[test]
    fn a_binary_others_can_write_or_replace_or_a_symlink_to_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("vigil-next");
        std::fs::write(&bin, header(2, 1, 3, OUR_MACHINE)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = opened(&bin).unwrap_err();
        assert!(matches!(e, BinaryError::Untrusted { .. }), "{e}");
        assert!(e.to_string().contains("writable by others"), "{e}");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(matches!(opened(&bin), Err(BinaryError::Untrusted { .. })));
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(opened(&bin), Ok(()));
        // Its directory writable by others: they could rename another file into its place.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = opened(&bin).unwrap_err();
        assert!(e.to_string().contains("writable by others"), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // A symlink as the last component is not followed.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&bin, &link).unwrap();
        let e = opened(&link).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }
}
