//! The socket file: binding it (replacing only a stale one), its mode and group, and noticing
//! when it is deleted or replaced (inotify watch, else the sweep's timer) to bind it again.
//!
//! Must not: remove a socket file that is not the one vigil bound (see `Drop for Server`),
//! touch open connections when re-binding, bind (as root) into a directory that fails the trust
//! check, or change a file's mode or group through its path (a symlink put there would be
//! followed; issue 43).

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use mio::net::UnixListener;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

use super::{Access, ControlError, Server};
use crate::control::watch::SocketWatch;

impl Server {
    /// Sets up (again) the inotify watch of the socket's path under `token`. A failure is
    /// logged and leaves the timer check in place of the watch.
    pub(super) fn arm_watch(&mut self, registry: &Registry, token: Token) {
        if let Some((old, _)) = self.watch.take() {
            let _ = registry.deregister(&mut SourceFd(&old.as_raw_fd()));
        }
        let watch = match SocketWatch::new(&self.path) {
            Ok(w) => w,
            Err(e) => {
                log::warn!("{e}; checking the socket file every second instead");
                return;
            }
        };
        match registry.register(&mut SourceFd(&watch.as_raw_fd()), token, Interest::READABLE) {
            Ok(()) => self.watch = Some((watch, token)),
            Err(e) => log::warn!(
                "registering the watch of {}: {e}; checking the socket file every second instead",
                self.path.display()
            ),
        }
    }

    /// An inotify event on the socket's path: watch the path afresh (it may now run through
    /// other directories), then look again and re-bind if the file is not ours. The new watch
    /// is armed before the look, so a change made between the two is not missed.
    pub(super) fn on_watch_event(&mut self, registry: &Registry) {
        let Some((watch, token)) = &self.watch else {
            return;
        };
        let token = *token;
        match watch.drain() {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => log::warn!("reading the watch of {}: {e}", self.path.display()),
        }
        self.arm_watch(registry, token);
        self.check_socket_file_logged(registry);
    }

    /// [`Server::check_socket_file`], its error logged; a failure keeps the sweep's timer
    /// checking again (an impostor may have bound the path between our look and our bind, and
    /// no further inotify event need come).
    pub(super) fn check_socket_file_logged(&mut self, registry: &Registry) {
        match self.check_socket_file(registry) {
            Ok(_) => self.socket_unsure = false,
            Err(e) => {
                log::error!("{e}; checking the socket file again every second");
                self.socket_unsure = true;
            }
        }
    }

    /// Whether the file at the socket path is not the one vigil bound (tests).
    #[cfg(test)]
    pub fn check_socket_file_is_needed(&self) -> bool {
        let now_id = file_id(&self.path);
        now_id.is_none() || now_id != self.file_id
    }

    /// Checks that the file at the socket path is still the one vigil bound; if it was deleted
    /// or replaced (someone renamed a directory on the path and put their own socket there),
    /// logs an error and binds afresh, removing an impostor socket. A replacement that is not
    /// a socket is left alone (and reported). Open connections are kept. Returns whether it
    /// re-bound.
    pub fn check_socket_file(&mut self, registry: &Registry) -> Result<bool, ControlError> {
        let now_id = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => Some((m.dev(), m.ino())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(ControlError::ProbeExisting {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        if now_id.is_some() && now_id == self.file_id {
            return Ok(false);
        }
        match now_id {
            None => log::warn!(
                "control socket {} was deleted; re-created it",
                self.path.display()
            ),
            Some(_) => log::error!(
                "control socket {} was replaced by another file (not the inode vigil bound): \
                 clients may have talked to an impostor; binding it again",
                self.path.display()
            ),
        }
        let mut fresh = bind_listener(&self.path, &self.access, true)?;
        std::mem::swap(&mut self.listener, &mut fresh);
        self.file_id = file_id(&self.path);
        if let Some(token) = self.listener_token {
            // The old listener (now in `fresh`) leaves the poll before it is closed.
            let _ = registry.deregister(&mut fresh);
            registry
                .register(&mut self.listener, token, Interest::READABLE)
                .map_err(|source| ControlError::Register {
                    path: self.path.clone(),
                    source,
                })?;
        }
        self.accept_pending = true;
        Ok(true)
    }
}

pub(super) fn file_id(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Binds a listener at `path`. `replace`: a socket file there is removed even if something
/// answers on it (it is not ours: vigil's own was replaced); otherwise only a stale one is.
///
/// As root, the directory is judged first, at start and at every re-bind alike
/// ([`crate::trust::check`], [`crate::trust::Target::PrivateDir`]): a directory that became
/// someone else's after start is refused, not bound into. The file is created with its final
/// mode (bound in a private directory and renamed into place, [`bind_with_mode`]) and given its group through a descriptor
/// of the file itself ([`set_mode_and_group`]): nothing is ever changed through the path, so a
/// symlink put there is never followed.
pub(super) fn bind_listener(
    path: &Path,
    access: &Access,
    replace: bool,
) -> Result<UnixListener, ControlError> {
    let owned = || path.to_path_buf();
    let root = nix::unistd::Uid::effective().is_root();
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    if root && let Some(dir) = dir {
        crate::trust::check("socket directory", dir, crate::trust::Target::PrivateDir)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            if !meta.file_type().is_socket() {
                return Err(ControlError::NotASocket { path: owned() });
            }
            if !replace {
                match std::os::unix::net::UnixStream::connect(path) {
                    Ok(_) => return Err(ControlError::AlreadyListening { path: owned() }),
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        log::info!("control: removing stale socket {}", path.display());
                    }
                    Err(source) => {
                        return Err(ControlError::ProbeExisting {
                            path: owned(),
                            source,
                        });
                    }
                }
            }
            std::fs::remove_file(path).map_err(|source| ControlError::RemoveStale {
                path: owned(),
                source,
            })?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = dir {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .map_err(|source| ControlError::CreateDir {
                        path: dir.to_path_buf(),
                        source,
                    })?;
                // The check above passed a directory that did not exist yet; under a sticky
                // one (/tmp) someone else may have made it (or a symlink) first, and `create`
                // accepts what exists. Judged again now that it does, before the socket goes
                // into it.
                if root {
                    crate::trust::check("socket directory", dir, crate::trust::Target::PrivateDir)?;
                }
            }
        }
        Err(source) => {
            return Err(ControlError::ProbeExisting {
                path: owned(),
                source,
            });
        }
    }
    let listener = bind_with_mode(path, access.mode).map_err(|source| ControlError::Bind {
        path: owned(),
        source,
    })?;
    if access.group.is_some() {
        set_mode_and_group(path, file_id(path), access)?;
    }
    Ok(listener)
}

/// Binds `path` so that the socket file appears there with `mode` exactly, never wider for a
/// moment and never changed through `path`: it is bound in a private directory made next to
/// `path` (mkdtemp(3): mode 0700, so no one else can reach or replace the file while its mode
/// is set), given `mode` there, and renamed into place (rename(2) replaces atomically what a
/// stale socket left; the listening socket follows its inode). The process's umask is left
/// alone: changing it would change the mode of files other threads create meanwhile.
fn bind_with_mode(path: &Path, mode: u32) -> io::Result<UnixListener> {
    use std::os::unix::fs::PermissionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let private = nix::unistd::mkdtemp(&dir.join(".vigil-bind-XXXXXX")).map_err(io::Error::from)?;
    // A short name inside: the whole path must fit sun_path (unix(7): 108 bytes).
    let staged = private.join("s");
    let bound = UnixListener::bind(&staged).and_then(|listener| {
        std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&staged, path)?;
        Ok(listener)
    });
    if bound.is_err() {
        let _ = std::fs::remove_file(&staged);
    }
    let _ = std::fs::remove_dir(&private);
    bound
}

/// Gives the socket file at `path` `access`'s mode and group, through a descriptor of the
/// file itself opened with `O_PATH | O_NOFOLLOW` (open(2)): a symlink at the path is not
/// followed, and anything but the socket vigil bound (`id`, its device and inode) is left
/// alone. The mode is changed through `/proc/self/fd` (an `O_PATH` descriptor takes no
/// `fchmod`; proc(5) resolves the link to the open file), the group with
/// `fchownat(AT_EMPTY_PATH)`.
pub(super) fn set_mode_and_group(
    path: &Path,
    id: Option<(u64, u64)>,
    access: &Access,
) -> Result<(), ControlError> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, fstat};
    let not_ours = || ControlError::NotOurs {
        path: path.to_path_buf(),
    };
    let fd = match open(
        path,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ENOENT) => return Err(not_ours()),
        Err(e) => {
            return Err(ControlError::ProbeExisting {
                path: path.to_path_buf(),
                source: e.into(),
            });
        }
    };
    let st = fstat(&fd).map_err(|e| ControlError::ProbeExisting {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let is_socket = st.st_mode & libc::S_IFMT == libc::S_IFSOCK;
    if !is_socket || id != Some((st.st_dev, st.st_ino)) {
        return Err(not_ours());
    }
    if st.st_mode & 0o7777 != access.mode {
        let through = format!("/proc/self/fd/{}", fd.as_raw_fd());
        std::fs::set_permissions(&through, std::fs::Permissions::from_mode(access.mode)).map_err(
            |source| ControlError::Chmod {
                path: path.to_path_buf(),
                mode: access.mode,
                source,
            },
        )?;
    }
    if let Some(gid) = access.group
        && st.st_gid != gid
    {
        nix::unistd::fchownat(
            &fd,
            "",
            None,
            Some(nix::unistd::Gid::from_raw(gid)),
            nix::fcntl::AtFlags::AT_EMPTY_PATH,
        )
        .map_err(|source| ControlError::Chown {
            path: path.to_path_buf(),
            gid,
            source,
        })?;
    }
    Ok(())
}
