//! Notices, without waking up on a timer, that the control socket's path no longer leads to the
//! socket vigil bound: an inotify instance watching the socket's directory for the socket's
//! name being removed, renamed away or renamed over, and every ancestor directory for being
//! renamed or deleted itself (a user who owns an ancestor can rename it and put their own
//! listener at the old path; issue 12 item 6).
//!
//! Owns the inotify descriptor and its watches. It must not judge what it saw: an event only
//! means "look again"; the server compares the inode it bound ([`super::server`]) and re-binds.
//! After an event the watches are set up afresh, since the path may now run through other
//! directories. See inotify(7): `IN_MOVE_SELF` / `IN_DELETE_SELF` fire on the watched directory
//! itself, `IN_MOVED_FROM` / `IN_MOVED_TO` / `IN_DELETE` on entries of a watched directory.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};

/// Errors setting up the watch; the server then falls back to checking the socket file on a
/// timer.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("creating an inotify instance for the control socket: {0}")]
    Init(Errno),
    #[error("watching {path} for changes to the control socket's path: {source}")]
    Add { path: PathBuf, source: Errno },
    #[error("the control socket path {0} has no parent directory or file name")]
    BadPath(PathBuf),
}

/// Watches the path of one socket file.
pub struct SocketWatch {
    inotify: Inotify,
    name: OsString,
}

impl SocketWatch {
    /// Watches `socket`'s directory (entries named like the socket) and every ancestor (the
    /// directory itself moved or deleted).
    pub fn new(socket: &Path) -> Result<SocketWatch, WatchError> {
        let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
            return Err(WatchError::BadPath(socket.to_path_buf()));
        };
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(WatchError::Init)?;
        let add = |path: &Path, flags: AddWatchFlags| {
            inotify
                .add_watch(path, flags | AddWatchFlags::IN_DONT_FOLLOW)
                .map(drop)
                .map_err(|source| WatchError::Add {
                    path: path.to_path_buf(),
                    source,
                })
        };
        let self_gone = AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_DELETE_SELF;
        add(
            dir,
            self_gone
                | AddWatchFlags::IN_DELETE
                | AddWatchFlags::IN_MOVED_FROM
                | AddWatchFlags::IN_MOVED_TO,
        )?;
        for ancestor in dir.ancestors().skip(1) {
            if ancestor.as_os_str().is_empty() {
                break;
            }
            add(ancestor, self_gone)?;
        }
        Ok(SocketWatch {
            inotify,
            name: name.to_os_string(),
        })
    }

    /// Reads every queued event; true when one of them may have changed what the socket path
    /// leads to (so the caller should compare the inode). Never blocks.
    pub fn drain(&self) -> io::Result<bool> {
        let mut relevant = false;
        loop {
            match self.inotify.read_events() {
                Ok(events) if events.is_empty() => return Ok(relevant),
                Ok(events) => {
                    for e in events {
                        let entry_event = e.mask.intersects(
                            AddWatchFlags::IN_DELETE
                                | AddWatchFlags::IN_MOVED_FROM
                                | AddWatchFlags::IN_MOVED_TO,
                        );
                        // An entry event matters only for the socket's own name; anything
                        // else (a directory moved or deleted, the queue overflowing, a watch
                        // dropped) may change the path.
                        if !entry_event || e.name.as_deref() == Some(self.name.as_os_str()) {
                            relevant = true;
                        }
                    }
                }
                Err(Errno::EAGAIN) => return Ok(relevant),
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl AsRawFd for SocketWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.inotify.as_fd().as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn socket_in(dir: &Path) -> PathBuf {
        let run = dir.join("g").join("run");
        std::fs::create_dir_all(&run).unwrap();
        let sock = run.join("vigil.sock");
        std::fs::write(&sock, b"").unwrap();
        sock
    }

    #[test]
    fn an_ancestor_renamed_is_noticed() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = socket_in(tmp.path());
        let w = SocketWatch::new(&sock).unwrap();
        assert!(!w.drain().unwrap(), "nothing happened yet");
        let g = tmp.path().join("g");
        std::fs::rename(g.join("run"), g.join("old")).unwrap();
        assert!(w.drain().unwrap());
    }

    #[test]
    fn the_socket_removed_or_renamed_over_is_noticed() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = socket_in(tmp.path());
        let w = SocketWatch::new(&sock).unwrap();
        std::fs::remove_file(&sock).unwrap();
        assert!(w.drain().unwrap());
        let other = sock.with_file_name("impostor");
        std::fs::write(&other, b"").unwrap();
        assert!(
            !w.drain().unwrap(),
            "a new file of another name changes nothing"
        );
        std::fs::rename(&other, &sock).unwrap();
        assert!(w.drain().unwrap(), "a file renamed onto the socket's name");
    }

    #[test]
    fn other_files_in_the_directory_are_not_relevant() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = socket_in(tmp.path());
        let w = SocketWatch::new(&sock).unwrap();
        let state = sock.with_file_name("state.tmp");
        std::fs::write(&state, b"x").unwrap();
        std::fs::rename(&state, sock.with_file_name("state")).unwrap();
        std::fs::remove_file(sock.with_file_name("state")).unwrap();
        assert!(!w.drain().unwrap());
    }
}
