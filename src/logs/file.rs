//! `log_dir/<pod>/<container>.log`, rotated by size ([`LogFile`]).
//!
//! Owns: the pod directory's descriptor and the open log file. Every name below `log_dir` is
//! opened relative to a directory descriptor (openat(2)) with `O_NOFOLLOW`, so a symlink put
//! in place of the pod directory or a log file is refused, never followed. vigil creates
//! `<log_dir>/<pod>` itself (mode 0750) and refuses one that belongs to someone else (not root
//! or vigil's uid) or that others may write to; it refuses a log file that is not a regular
//! file of a trusted owner or that has other hard links (it could be someone else's file).
//! (`log_dir` itself and its ancestors are checked as a whole path at start and reload, see
//! `crate::trust`.)
//!
//! A write that fails (ENOSPC, EIO, a refused file) is not silent: the first failure of a run
//! of failures is logged as a warning, the bytes are counted, and when writing works again a
//! `[vigil: N bytes not written: REASON]` line goes into the file before the new output.
//!
//! The oldest rotated file is not unlinked in one call (the kernel frees its whole page cache
//! and extents inside unlink(2), 1.4–1.6 ms for 10 MiB on ext4, in the loop's thread): it is
//! renamed aside to `<container>.log.deleting` and shrunk by [`SHRINK_STEP`] bytes per loop
//! turn with ftruncate(2) ([`LogFile::shrink_step`]), then unlinked once that little is left
//! (never truncated to 0: on ext4 a truncate to 0 starts writeback at close, `auto_da_alloc`,
//! ext4(5)). A leftover aside file (vigil stopped or re-executed mid-deletion) is removed when
//! the log file is next opened, if it is a regular file of a trusted owner with one link;
//! anything else under that name is left alone with a warning.
//!
//! Must not: follow a symlink below `log_dir`, block on anything but a local file write, or
//! stop capture when the file cannot be written (the ring keeps the output).

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

use super::LogError;

/// Stamped output is written in blocks of about this many bytes ([`LogFile::write_output`]):
/// twice a read's 64 KiB, so the stamped text of one read (100-byte lines grow by a third) is
/// one write(2), not two.
pub const STAMPED_BLOCK: usize = 128 * 1024;

/// Bytes an aside (rotated-out) file is shrunk by per step, one step per loop turn: what the
/// kernel frees inside one ftruncate(2) (about 0.1 ms of page cache and extents on ext4, where
/// 1 MiB took 0.17 ms; smaller steps cost more calls, each with a fixed ~35 µs of journal and
/// orphan-list work), eight times what one turn may read from all pipes (`TURN_LOG_BYTES` in
/// the shell's capture), so deletion outpaces any flood.
pub const SHRINK_STEP: u64 = 512 * 1024;

/// The name the oldest rotated file is renamed to while it is shrunk away.
pub const ASIDE_SUFFIX: &str = ".deleting";

/// The rotated-out oldest file, renamed aside and being shrunk step by step. Dropping it
/// unlinks the name (if it is still this file) and closes the file.
#[derive(Debug)]
struct Aside {
    /// The pod directory (its own descriptor: the log file may reopen the directory meanwhile).
    dir: OwnedFd,
    name: String,
    path: PathBuf,
    file: File,
    size: u64,
}

impl Drop for Aside {
    fn drop(&mut self) {
        // Only the file vigil put aside: the name must still be it (same device and inode).
        let ours = match (
            nix::sys::stat::fstatat(&self.dir, self.name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW),
            nix::sys::stat::fstat(&self.file),
        ) {
            (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
            _ => false,
        };
        if !ours {
            return;
        }
        match nix::unistd::unlinkat(
            &self.dir,
            self.name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        ) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
            Err(e) => log::warn!("remove rotated-out log file {:?}: {e}", self.path),
        }
    }
}

/// Why a name under `log_dir` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it is a symbolic link")]
    Symlink,
    #[error("it is owned by uid {0}, not root or vigil's uid")]
    ForeignOwner(u32),
    #[error("it is writable by group or others (mode {0:04o})")]
    Writable(u32),
    #[error("it is not a regular file")]
    NotRegular,
    #[error("it has {0} hard links (another name may be someone else's file)")]
    HardLinks(u64),
}

/// What went wrong writing, for the gap marker.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Gap {
    bytes: u64,
    reason: String,
}

/// `log_dir/<pod>/<container>.log`, rotated by size to `.1` (newest) … `.N` (oldest).
///
/// Errors never stop capture: each run of failures is logged once and counted, and the next
/// write retries opening the file.
#[derive(Debug)]
pub struct LogFile {
    log_dir: PathBuf,
    pod: String,
    name: String,
    /// `log_dir/pod/name`, for messages.
    path: PathBuf,
    max_bytes: u64,
    max_files: u32,
    dir: Option<OwnedFd>,
    file: Option<File>,
    size: u64,
    /// The last byte written ended a line (a marker then starts on its own line).
    at_line_start: bool,
    /// `log_timestamps`: each line of container output is prefixed with when it was read.
    timestamps: bool,
    /// The container's next byte begins one of its lines (what gets a stamp).
    output_line_start: bool,
    gap: Option<Gap>,
    /// The oldest rotated file being shrunk away ([`LogFile::shrink_step`]).
    aside: Option<Aside>,
    /// The number of the last `--- run N started` marker written, or found in the file (or
    /// its newest rotated one) when it was opened: numbering continues across reloads and
    /// restarts of vigil ([`last_run_marker`]).
    last_run: u64,
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from(e)
}

fn trusted(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::Uid::effective().as_raw()
}

impl LogFile {
    /// Creates `<log_dir>/<pod>` (mode 0750) if needed and opens (appends to) the file (mode
    /// 0640). An error here is returned so the runtime can report it; [`LogFile::write`] keeps
    /// trying.
    pub fn open(
        log_dir: &Path,
        pod: &str,
        container: &str,
        max_bytes: u64,
        max_files: u32,
    ) -> Result<LogFile, LogError> {
        let name = format!("{container}.log");
        let mut f = LogFile {
            log_dir: log_dir.to_path_buf(),
            pod: pod.to_string(),
            path: log_dir.join(pod).join(&name),
            name,
            max_bytes: max_bytes.max(1),
            max_files,
            dir: None,
            file: None,
            size: 0,
            at_line_start: true,
            timestamps: false,
            output_line_start: true,
            gap: None,
            aside: None,
            last_run: 0,
        };
        f.reopen()?;
        f.remove_leftover_aside();
        if let Some(dir) = &f.dir {
            f.last_run = last_run_marker(dir, &f.name)
                .or_else(|| last_run_marker(dir, &f.rotated(1)))
                .unwrap_or(0);
        }
        Ok(f)
    }

    fn aside_name(&self) -> String {
        format!("{}{ASIDE_SUFFIX}", self.name)
    }

    /// A `<container>.log.deleting` left by a vigil that stopped mid-deletion is removed (in one
    /// call: once per open, not per rotation), if it is what vigil leaves there: a regular
    /// file of a trusted owner with no other link. Anything else is left alone.
    fn remove_leftover_aside(&mut self) {
        let Some(dir) = self.dir.as_ref() else {
            return;
        };
        let name = self.aside_name();
        let path = self.pod_dir().join(&name);
        let st = match nix::sys::stat::fstatat(dir, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(nix::errno::Errno::ENOENT) => return,
            Err(e) => {
                log::warn!("look at leftover rotated-out log file {path:?}: {e}");
                return;
            }
        };
        let why = if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            Some(Refusal::NotRegular)
        } else if !trusted(st.st_uid) {
            Some(Refusal::ForeignOwner(st.st_uid))
        } else if st.st_nlink > 1 {
            Some(Refusal::HardLinks(st.st_nlink as u64))
        } else {
            None
        };
        if let Some(why) = why {
            log::warn!("leaving {path:?} alone, not a file vigil left: {why}");
            return;
        }
        match nix::unistd::unlinkat(dir, name.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) => log::info!("removed leftover rotated-out log file {path:?}"),
            Err(nix::errno::Errno::ENOENT) => {}
            Err(e) => log::warn!("remove leftover rotated-out log file {path:?}: {e}"),
        }
    }

    /// Whether a rotated-out file is still being shrunk: [`LogFile::shrink_step`] is due on a
    /// later loop turn.
    pub fn shrinking(&self) -> bool {
        self.aside.is_some()
    }

    /// One bounded step of deleting the rotated-out file: ftruncate(2) it [`SHRINK_STEP`]
    /// bytes shorter, or, once no more than that is left, unlink it. Returns whether more steps
    /// are due.
    pub fn shrink_step(&mut self) -> bool {
        let Some(aside) = self.aside.as_mut() else {
            return false;
        };
        if aside.size > SHRINK_STEP {
            let to = aside.size - SHRINK_STEP;
            match aside.file.set_len(to) {
                Ok(()) => {
                    aside.size = to;
                    return true;
                }
                Err(e) => log::warn!("shrink rotated-out log file {:?}: {e}", aside.path),
            }
        }
        // Unlinks what is left (or, after an error, the whole file).
        self.aside = None;
        false
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// New rotation limits, used from the next write on.
    pub fn set_limits(&mut self, max_bytes: u64, max_files: u32) {
        self.max_bytes = max_bytes.max(1);
        self.max_files = max_files;
    }

    /// `log_timestamps`: stamp each line of container output from the next write on.
    pub fn set_timestamps(&mut self, on: bool) {
        self.timestamps = on;
    }

    /// Container output read at `unix_nanos`: with `log_timestamps`, each line that begins in
    /// `data` is prefixed with that time (RFC 3339, nanoseconds, UTC) and a space, as
    /// `vigil logs --timestamps` prints it; otherwise written as is ([`LogFile::write`]).
    ///
    /// The stamped text is put together in blocks of about [`STAMPED_BLOCK`] bytes, each
    /// written before the next is built (lines found with `memchr`; the time formatted once
    /// per call): the copy stays small and cache-warm whatever the size of `data`.
    pub fn write_output(&mut self, data: &[u8], unix_nanos: i64) -> bool {
        if !self.timestamps || data.is_empty() {
            return self.write(data);
        }
        let mut prefix = super::rfc3339_nano(unix_nanos).into_bytes();
        prefix.push(b' ');
        let mut out = Vec::with_capacity(STAMPED_BLOCK.min(data.len() + data.len() / 2) + 64);
        let mut all = true;
        let mut rest = data;
        while !rest.is_empty() {
            if self.output_line_start {
                out.extend_from_slice(&prefix);
            }
            let line = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
            out.extend_from_slice(&rest[..line]);
            self.output_line_start = rest[line - 1] == b'\n';
            rest = &rest[line..];
            if out.len() >= STAMPED_BLOCK {
                all &= self.write(&out);
                out.clear();
            }
        }
        if !out.is_empty() {
            all &= self.write(&out);
        }
        all
    }

    /// A new run of the container begins: the line `--- run N started at TIME ---` (on a line
    /// of its own), so runs appended to one file can be told apart; N is one more than the
    /// last marker's, whichever vigil wrote it.
    pub fn mark_run(&mut self, unix_nanos: i64) -> bool {
        let mut line = String::new();
        if !self.at_line_start {
            line.push('\n');
        }
        self.last_run += 1;
        line.push_str(&run_marker(self.last_run, unix_nanos));
        self.output_line_start = true;
        self.write(line.as_bytes())
    }

    /// Writes go to `file` from now on (tests: `/dev/full` for ENOSPC).
    #[cfg(test)]
    pub(crate) fn set_file_for_test(&mut self, file: File) {
        self.file = Some(file);
    }

    /// Forgets the open file and directory, as after a failure (tests).
    #[cfg(test)]
    pub(crate) fn close_for_test(&mut self) {
        self.file = None;
        self.dir = None;
    }

    fn pod_dir(&self) -> PathBuf {
        self.log_dir.join(&self.pod)
    }

    /// The pod directory, created by vigil if missing, opened without following a symlink and
    /// checked: a trusted owner, not writable by group or others.
    fn open_dir(&self) -> Result<OwnedFd, LogError> {
        let pod_dir = self.pod_dir();
        let create = |source| LogError::CreateDir {
            path: pod_dir.clone(),
            source,
        };
        if !self.log_dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .create(&self.log_dir)
                .map_err(|source| LogError::CreateDir {
                    path: self.log_dir.clone(),
                    source,
                })?;
        }
        let base = nix::fcntl::open(
            &self.log_dir,
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| LogError::Open {
            path: self.log_dir.clone(),
            source: errno(e),
        })?;
        match nix::sys::stat::mkdirat(&base, self.pod.as_str(), Mode::from_bits_truncate(0o750)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(create(errno(e))),
        }
        let dir = nix::fcntl::openat(
            &base,
            self.pod.as_str(),
            OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => {
                let st =
                    nix::sys::stat::fstatat(&base, self.pod.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW);
                let is_link = st.is_ok_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFLNK);
                if is_link {
                    LogError::Refused {
                        path: pod_dir.clone(),
                        why: Refusal::Symlink,
                    }
                } else {
                    create(errno(e))
                }
            }
            e => create(errno(e)),
        })?;
        let st = nix::sys::stat::fstat(&dir).map_err(|e| create(errno(e)))?;
        if !trusted(st.st_uid) {
            return Err(LogError::Refused {
                path: pod_dir,
                why: Refusal::ForeignOwner(st.st_uid),
            });
        }
        let mode = st.st_mode & 0o7777;
        if mode & 0o022 != 0 {
            return Err(LogError::Refused {
                path: pod_dir,
                why: Refusal::Writable(mode),
            });
        }
        Ok(dir)
    }

    fn reopen(&mut self) -> Result<(), LogError> {
        self.file = None;
        let dir = match self.dir.take() {
            Some(d) => d,
            None => self.open_dir()?,
        };
        let result = self.open_file(&dir);
        match result {
            Ok(()) => {
                self.dir = Some(dir);
                Ok(())
            }
            // The directory may have been replaced: look it up afresh next time.
            Err(e) => Err(e),
        }
    }

    fn open_file(&mut self, dir: &OwnedFd) -> Result<(), LogError> {
        let open_err = |source| LogError::Open {
            path: self.path.clone(),
            source,
        };
        // O_NONBLOCK: a FIFO planted under the name must not block the loop; it makes no
        // difference to a regular file (open(2)).
        let fd = nix::fcntl::openat(
            dir,
            self.name.as_str(),
            OFlag::O_WRONLY
                | OFlag::O_APPEND
                | OFlag::O_CREAT
                | OFlag::O_NOFOLLOW
                | OFlag::O_NONBLOCK
                | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o640),
        )
        .map_err(|e| match e {
            nix::errno::Errno::ELOOP => LogError::Refused {
                path: self.path.clone(),
                why: Refusal::Symlink,
            },
            // A FIFO without a reader (or a device) under the name (open(2), ENXIO).
            nix::errno::Errno::ENXIO => LogError::Refused {
                path: self.path.clone(),
                why: Refusal::NotRegular,
            },
            e => open_err(errno(e)),
        })?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(open_err)?;
        let refuse = |why| {
            Err(LogError::Refused {
                path: self.path.clone(),
                why,
            })
        };
        if !meta.file_type().is_file() {
            return refuse(Refusal::NotRegular);
        }
        if !trusted(meta.uid()) {
            return refuse(Refusal::ForeignOwner(meta.uid()));
        }
        if meta.nlink() > 1 {
            return refuse(Refusal::HardLinks(meta.nlink()));
        }
        // Back to blocking writes: a regular file's writes do not wait on anything but the disk.
        nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_APPEND))
            .map_err(|e| open_err(errno(e)))?;
        self.size = meta.len();
        if self.size == 0 {
            self.at_line_start = true;
        }
        self.file = Some(file);
        Ok(())
    }

    fn rotated(&self, n: u32) -> String {
        format!("{}.{n}", self.name)
    }

    /// Shifts `.log` → `.1` → … → `.N` (the oldest, `.N`, is removed first), then opens a
    /// fresh file.
    /// With `max_files` 0 the file is simply truncated. Renames stay inside the pod directory
    /// (renameat(2) on its descriptor).
    fn rotate(&mut self) -> Result<(), LogError> {
        if self.max_files == 0 {
            if let Some(f) = &self.file {
                f.set_len(0).map_err(|source| LogError::Open {
                    path: self.path.clone(),
                    source,
                })?;
                self.size = 0;
                return Ok(());
            }
            return self.reopen();
        }
        self.file = None;
        // A deletion still under way from the last rotation (rotations faster than its steps)
        // ends now: the rest is unlinked, whole.
        self.aside = None;
        let Some(owned) = self.dir.take() else {
            return self.reopen();
        };
        let dir = &owned;
        let rename = |from: &str, to: &str| {
            nix::fcntl::renameat(dir, from, dir, to).map_err(|e| LogError::Rotate {
                from: self.pod_dir().join(from),
                to: self.pod_dir().join(to),
                source: errno(e),
            })
        };
        // The oldest goes first, so that no rename below replaces an existing name: on ext4
        // (the default `auto_da_alloc`, ext4(5)) a rename over an existing file starts
        // writeback of the renamed file's delayed-allocation blocks inside the rename call,
        // which held the loop for milliseconds per rotation. It is renamed aside and shrunk
        // over later turns ([`LogFile::shrink_step`]).
        let oldest = self.rotated(self.max_files);
        let aside = self.aside_name();
        let mut put_aside = None;
        let remove = |name: &str| match nix::unistd::unlinkat(
            dir,
            name,
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        ) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(LogError::RemoveOldest {
                path: self.pod_dir().join(name),
                source: errno(e),
            }),
        };
        // RENAME_NOREPLACE (rename(2)): whatever else sits under the aside name stays.
        match rename_noreplace(dir, &oldest, &aside) {
            Ok(()) => put_aside = self.open_aside(dir, aside),
            Err(nix::errno::Errno::ENOENT) => {}
            // EEXIST (a name vigil did not leave) or EINVAL (no RENAME_NOREPLACE here):
            // removed in one call, as before.
            Err(_) => remove(&oldest)?,
        }
        for n in (1..self.max_files).rev() {
            match rename(&self.rotated(n), &self.rotated(n + 1)) {
                Ok(()) => {}
                Err(LogError::Rotate { source, .. })
                    if source.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        rename(&self.name, &self.rotated(1))?;
        self.aside = put_aside;
        self.dir = Some(owned);
        self.reopen()
    }

    /// The file just renamed aside, opened to be shrunk; if it cannot be (not a regular file,
    /// an error), its name is unlinked at once.
    fn open_aside(&self, dir: &OwnedFd, name: String) -> Option<Aside> {
        let path = self.pod_dir().join(&name);
        let opened = nix::fcntl::openat(
            dir,
            name.as_str(),
            OFlag::O_WRONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map(File::from)
        .and_then(|file| {
            let st = nix::sys::stat::fstat(&file)?;
            let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
            let dir = dir.try_clone().map_err(|_| nix::errno::Errno::EMFILE)?;
            Ok((regular, file, st.st_size as u64, dir))
        });
        match opened {
            Ok((true, file, size, dir)) => Some(Aside {
                dir,
                name,
                path,
                file,
                size,
            }),
            other => {
                if let Err(e) = other {
                    log::warn!("open rotated-out log file {path:?} to shrink it: {e}");
                }
                match nix::unistd::unlinkat(
                    dir,
                    name.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                ) {
                    Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
                    Err(e) => log::warn!("remove rotated-out log file {path:?}: {e}"),
                }
                None
            }
        }
    }

    /// Writes `data` whole, or says how much did not make it and why.
    fn write_counted(&mut self, data: &[u8]) -> Result<(), (u64, LogError)> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let mut done = 0;
        while done < data.len() {
            match file.write(&data[done..]) {
                Ok(0) => {
                    return Err((
                        (data.len() - done) as u64,
                        LogError::Write {
                            path: self.path.clone(),
                            source: io::Error::from(io::ErrorKind::WriteZero),
                        },
                    ));
                }
                Ok(n) => {
                    done += n;
                    self.size += n as u64;
                    self.at_line_start = data[done - 1] == b'\n';
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err((
                        (data.len() - done) as u64,
                        LogError::Write {
                            path: self.path.clone(),
                            source,
                        },
                    ));
                }
            }
        }
        Ok(())
    }

    fn try_write(&mut self, data: &[u8]) -> Result<(), (u64, LogError)> {
        let all = data.len() as u64;
        if self.file.is_none() {
            self.reopen().map_err(|e| (all, e))?;
        }
        if self.size > 0 && self.size + data.len() as u64 > self.max_bytes {
            self.rotate().map_err(|e| (all, e))?;
        }
        if let Some(gap) = self.gap.take() {
            let mut marker = String::new();
            if !self.at_line_start {
                marker.push('\n');
            }
            marker.push_str(&gap_marker(gap.bytes, &gap.reason));
            if let Err((_, e)) = self.write_counted(marker.as_bytes()) {
                self.gap = Some(gap);
                self.file = None;
                return Err((all, e));
            }
        }
        self.write_counted(data).inspect_err(|_| {
            self.file = None;
        })
    }

    /// Appends `data`, rotating first when it would push the file past `max_bytes` (a single
    /// chunk larger than the limit goes into a fresh file whole). Errors are logged (the first
    /// of a run), counted and noted in the file once it works again; the return value says
    /// whether all the bytes reached the file.
    pub fn write(&mut self, data: &[u8]) -> bool {
        match self.try_write(data) {
            Ok(()) => true,
            Err((lost, e)) => {
                match &mut self.gap {
                    Some(g) => g.bytes += lost,
                    None => {
                        log::warn!(
                            "{e}; container output is kept in memory only until this recovers"
                        );
                        self.gap = Some(Gap {
                            bytes: lost,
                            reason: reason_of(&e),
                        });
                    }
                }
                // A refused or vanished directory is looked up afresh on the next write.
                if !matches!(e, LogError::Write { .. }) {
                    self.dir = None;
                }
                false
            }
        }
    }
}

/// How far back from the end of a log file [`last_run_marker`] looks: a run that wrote more
/// than this since its marker, in the current file and the newest rotated one, restarts the
/// numbering at 1 (docs/interface.md, `log_dir`).
pub const MARKER_WINDOW: u64 = 1 << 20;

/// The N of the last `--- run N started at` line in the last [`MARKER_WINDOW`] bytes of
/// `name` in `dir`, if it is a regular file of a trusted owner (read once, when the log is
/// opened; opened without following a link or waiting on a FIFO).
fn last_run_marker(dir: &OwnedFd, name: &str) -> Option<u64> {
    use std::os::unix::fs::FileExt as _;
    let fd = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let file = File::from(fd);
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || !trusted(meta.uid()) {
        return None;
    }
    let start = meta.len().saturating_sub(MARKER_WINDOW);
    let mut tail = vec![0; usize::try_from(meta.len() - start).ok()?];
    let got = file.read_at(&mut tail, start).ok()?;
    tail.truncate(got);
    let prefix = b"--- run ";
    let mut found = None;
    for (i, line) in tail.split(|b| *b == b'\n').enumerate() {
        // The window's first piece may be the middle of a line.
        if i == 0 && start > 0 {
            continue;
        }
        let Some(rest) = line.strip_prefix(prefix) else {
            continue;
        };
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if rest[digits..].starts_with(b" started at ")
            && let Some(n) = std::str::from_utf8(&rest[..digits])
                .ok()
                .and_then(|d| d.parse().ok())
        {
            found = Some(n);
        }
    }
    found
}

/// The line written into a log file where a run of the container begins.
pub fn run_marker(run: u64, unix_nanos: i64) -> String {
    format!(
        "--- run {run} started at {} ---\n",
        super::rfc3339_nano(unix_nanos)
    )
}

/// The marker line written where output is missing from a log file.
pub fn gap_marker(bytes: u64, reason: &str) -> String {
    format!("[vigil: {bytes} bytes not written: {reason}]\n")
}

/// The OS error's text without the `(os error N)` suffix, or the refusal.
fn reason_of(e: &LogError) -> String {
    let source = match e {
        LogError::Write { source, .. }
        | LogError::Open { source, .. }
        | LogError::CreateDir { source, .. }
        | LogError::Rotate { source, .. }
        | LogError::RemoveOldest { source, .. } => source,
        LogError::Refused { why, .. } => return format!("refused: {why}"),
        LogError::Stdout { source } => source,
    };
    match source.raw_os_error() {
        Some(n) => nix::errno::Errno::from_raw(n).desc().to_string(),
        None => source.to_string(),
    }
}

/// `from` renamed to `to` in the directory `dir` unless `to` exists: renameat2(2) with
/// `RENAME_NOREPLACE`, made as a raw system call because the C libraries differ in wrapping it
/// (musl does not; nix offers it for glibc only), so every build takes the same path.
#[allow(unsafe_code)]
fn rename_noreplace(dir: &OwnedFd, from: &str, to: &str) -> Result<(), nix::errno::Errno> {
    let (Ok(from), Ok(to)) = (CString::new(from), CString::new(to)) else {
        return Err(nix::errno::Errno::EINVAL);
    };
    // SAFETY: renameat2(2) reads two NUL-terminated paths, which `from` and `to` own for the
    // call's duration, relative to `dir`, a directory descriptor this file's owner keeps open;
    // no memory is written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            dir.as_raw_fd(),
            from.as_ptr(),
            dir.as_raw_fd(),
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::errno::Errno::last())
    }
}
