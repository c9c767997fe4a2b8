//! `tls.ca_file`: the PEM file an HTTPS probe trusts, opened by vigil (often root) on the loop
//! at every attempt — so opened in a way nobody can turn against the loop or against root.
//!
//! Owns: opening the file without following a symbolic link that someone other than root (or
//! vigil's own user) could have made, refusing what is not a regular file or is larger than
//! [`MAX_BYTES`], and the [`Stamp`] (device, inode, mtime, size) that keys the cache of what
//! the file gave ([`super::tls`]): each attempt opens and `fstat`s the file — a rotated CA
//! is picked up at the next attempt — and reads it only when its stamp changed.
//!
//! The open is [`crate::trust::open_without_links`] (openat2(2) `RESOLVE_NO_SYMLINKS`): no
//! link anywhere on the path is followed behind vigil's back, and it is `O_NONBLOCK`, so a
//! FIFO (whose `open(2)` would otherwise wait for a writer, fifo(7)) opens at once and is
//! refused by its type, as is a device (`/dev/zero` reads without end). A path that does go
//! through a link (`/etc/pki/tls/certs/ca-bundle.crt` on some distributions) is opened only
//! when the whole path passes the config file's check ([`crate::trust::check`]: every
//! directory, link and the file owned by root or vigil's user and not writable by others), so
//! that only they could have made the link.
//!
//! Whose the file is does not matter otherwise: what it holds decides only whether this
//! probe's peer is trusted, which its owner controls anyway, and no byte of it is ever shown
//! (a bad certificate is named by its number in the file, not by its text).
//!
//! Must not: block, read more than [`MAX_BYTES`] + 1 bytes, or put the file's content in a
//! message.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::trust::{self, TrustError};

/// Largest CA file read: a bundle of every public CA is about 200 KiB.
pub const MAX_BYTES: u64 = 1024 * 1024;

/// What identifies one version of a file: when any of these change, it is read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    mtime: i64,
    mtime_nsec: i64,
    size: u64,
}

/// Opens `path` as an attempt may read it: the open file and its stamp, or the reason
/// (without the path, which the caller puts in front).
pub fn open(path: &Path) -> Result<(File, Stamp), String> {
    let file = match trust::open_without_links(path) {
        Ok(file) => file,
        // `open_without_links` says "a symbolic link is on the path" with an error of its own
        // (no errno): judge the whole path before following it.
        Err(e) if e.raw_os_error().is_none() && e.kind() == std::io::ErrorKind::InvalidInput => {
            open_trusted(path)?
        }
        Err(e) => return Err(super::io_reason(&e)),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("fstat: {}", super::io_reason(&e)))?;
    if !meta.file_type().is_file() {
        return Err(format!("not a regular file ({})", kind(meta.mode())));
    }
    if meta.size() > MAX_BYTES {
        return Err(too_large());
    }
    let stamp = Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        mtime: meta.mtime(),
        mtime_nsec: meta.mtime_nsec(),
        size: meta.size(),
    };
    Ok((file, stamp))
}

/// At most [`MAX_BYTES`] of `file`; more is an error (it grew since its `fstat`).
pub fn read(file: File) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("read: {}", super::io_reason(&e)))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

fn too_large() -> String {
    format!("larger than {} KiB", MAX_BYTES / 1024)
}

/// The file type in words, for a refusal.
fn kind(mode: u32) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        libc::S_IFDIR => "a directory",
        _ => "of another kind",
    }
}

/// A path through a symbolic link: opened, following links, only when the whole path is
/// trusted (see the module docs); then as `O_NONBLOCK` as the other open.
fn open_trusted(path: &Path) -> Result<File, String> {
    trust::check("ca_file", path, trust::Target::File).map_err(|e| {
        format!(
            "a symbolic link on the path is followed only where root alone could have made \
             it, and {}",
            trust_reason(&e)
        )
    })?;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| super::io_reason(&e))
}

/// What the trust check found, without repeating the path it was asked about.
fn trust_reason(e: &TrustError) -> String {
    match e {
        TrustError::Unsafe {
            at,
            problem,
            uid,
            mode,
            ..
        } => format!(
            "{} is {} (owner uid {uid}, mode {mode:04o})",
            at.display(),
            problem.as_str()
        ),
        TrustError::Stat { at, source, .. } => {
            format!(
                "{} cannot be checked: {}",
                at.display(),
                super::io_reason(source)
            )
        }
        TrustError::Loop { .. } => {
            format!("it has more than {} symbolic links", trust::MAX_SYMLINKS)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fifo_in(dir: &Path) -> std::path::PathBuf {
        let fifo = dir.join("ca.pem");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        fifo
    }

    /// `open` on another thread: its answer, or a failure if it has not come within 10 s.
    fn open_within_seconds(path: std::path::PathBuf) -> Result<Stamp, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(open(&path).map(|(_, stamp)| stamp));
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("open(ca_file) blocked")
    }

    #[test]
    fn a_fifo_is_refused_at_once_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            open_within_seconds(fifo_in(dir.path())),
            Err("not a regular file (a FIFO)".to_string())
        );
    }

    #[test]
    fn a_link_to_dev_zero_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("ca.pem");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let refused = open_within_seconds(link).unwrap_err();
        // Followed only through a trusted path, and /dev/zero is a device anyone may write.
        assert!(
            refused.starts_with("a symbolic link on the path is followed only where")
                && refused.contains("/dev/zero is writable by others"),
            "{refused}"
        );
    }

    #[test]
    #[ignore = "needs root (a link owned by uid 65534)"]
    fn a_link_made_by_another_user_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.pem");
        std::fs::write(&real, "").unwrap();
        let link = dir.path().join("ca.pem");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let refused = open_within_seconds(link.clone()).unwrap_err();
        assert!(
            refused.contains(&format!(
                "{} is owned by a user other than root or vigil's own (owner uid 65534",
                link.display()
            )),
            "{refused}"
        );
    }

    #[test]
    fn a_file_over_one_mebibyte_is_refused_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("ca.pem");
        let f = File::create(&big).unwrap();
        f.set_len(MAX_BYTES + 1).unwrap();
        assert_eq!(
            open_within_seconds(big),
            Err("larger than 1024 KiB".to_string())
        );
    }

    #[test]
    fn the_stamp_changes_with_the_content_and_not_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "one").unwrap();
        let (file, first) = open(&path).unwrap();
        assert_eq!(read(file).unwrap(), b"one");
        assert_eq!(open(&path).unwrap().1, first);
        // Rotated by rename: another inode.
        let next = dir.path().join("next.pem");
        std::fs::write(&next, "two").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_ne!(open(&path).unwrap().1, first);
    }
}
