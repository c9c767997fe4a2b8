//! The containers' sd_notify sockets (`notify = true`; docs/behaviour.md §4.4): one
//! `SOCK_DGRAM` Unix socket per run, `<socket>.notify/<name>`, made before the spawn and
//! given to the container as `NOTIFY_SOCKET` (sd_notify(3)). What arrives on it is parsed into
//! a typed [`Notification`] and fed to the core, which decides what it means.
//!
//! Who may speak for a run: the socket file is writable by the container's user only (and
//! root), and every datagram carries the sender's credentials (`SO_PASSCRED`,
//! `SCM_CREDENTIALS`, unix(7): the kernel fills in the sender's pid, and only a process with
//! `CAP_SYS_ADMIN` may name another); the sender's pid must be in the run's cgroup or below
//! it (`/proc/PID/cgroup`), or without cgroups in the run's session (field 6 of
//! `/proc/PID/stat`: vigil's child calls `setsid`, so the session is the main process's pid).
//! A datagram from anyone else is dropped (counted and logged at debug), so no process of
//! another container, nor another user, can make a run ready.
//!
//! Owns: the sockets (their descriptors, registrations and files, removed when the run ends),
//! and the parsing of datagrams. Must not: decide readiness (the core does), wait (every socket
//! is non-blocking; at most [`PER_TURN`] datagrams of one socket are read per turn, the rest
//! next turn), or keep a descriptor a sender passed (`BARRIER=1`'s, closed at once: that is
//! the barrier's answer, sd_notify_barrier(3)).

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use log::{debug, warn};
use mio::{Interest, Registry};
use nix::sys::socket::{self, ControlMessageOwned, MsgFlags, sockopt};

use super::component::{Component, Link};
use super::runs::Runs;
use super::tokens::{self, Watched};
use crate::core::{ContainerKey, Generation, Input, Notification};

/// The largest datagram taken (systemd's `NOTIFY_BUFFER_MAX`, `PIPE_BUF`): a longer one is
/// dropped whole, as systemd drops it.
pub(super) const MAX_DATAGRAM: usize = 4096;
/// Datagrams of one socket read per loop turn at most; the rest wait for the next turn.
pub(super) const PER_TURN: usize = 16;
/// Descriptors one datagram may pass that are taken (and closed at once); the kernel drops
/// any beyond (`MSG_CTRUNC`).
const MAX_FDS: usize = 8;

/// Who may speak for a run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Speaker {
    /// A process in this cgroup (as `/proc/PID/cgroup` names it) or below it.
    Cgroup(String),
    /// A process in the session of this main process (without cgroups).
    Session(u32),
    /// Not known yet (no cgroup, and the main process not started yet).
    Nobody,
}

/// One run's socket.
struct NotifySocket {
    sock: Watched<UnixDatagram>,
    path: PathBuf,
    generation: Generation,
    speaker: Speaker,
    /// Datagrams dropped: not the run's, too long, not readable.
    dropped: u64,
    /// `MAINPID=` was logged once for this run.
    mainpid_said: bool,
}

impl Drop for NotifySocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The runs' sd_notify sockets (see the module doc).
pub(super) struct NotifySockets {
    registry: Rc<Registry>,
    socks: HashMap<ContainerKey, NotifySocket>,
    /// Sockets read up to [`PER_TURN`] this turn that may hold more.
    backlog: Vec<ContainerKey>,
    /// The cgroup2 mount (its mount point and root), read once from `/proc/self/mountinfo`.
    mount: Option<Option<(PathBuf, String)>>,
}

/// What one datagram was, once read.
enum Received {
    /// Nothing more to read now.
    Empty,
    /// A datagram of the run's own.
    Own(Notification),
    /// A datagram dropped (why, for the debug log).
    Dropped(String),
}

impl NotifySockets {
    pub(super) fn new(registry: Rc<Registry>) -> NotifySockets {
        NotifySockets {
            registry,
            socks: HashMap::new(),
            backlog: Vec::new(),
            mount: None,
        }
    }

    /// Makes `key`'s socket for run `generation` in `dir` (created 0711 if missing) and returns
    /// its path, for `NOTIFY_SOCKET`. `cgroup` is the run's cgroup directory, if it has one.
    /// The file is left mode 0600, owned by vigil until [`grant`] gives it to the container's
    /// user.
    pub(super) fn open(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        dir: &Path,
        label: &str,
        cgroup: Option<&Path>,
    ) -> Result<PathBuf, String> {
        self.close(key);
        make_dir(dir)?;
        let path = dir.join(file_name(label));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("notify socket {}: {e}", path.display())),
        }
        let sock = UnixDatagram::bind(&path)
            .map_err(|e| format!("notify socket {}: bind: {e}", path.display()))?;
        let opened = (|| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
            sock.set_nonblocking(true)?;
            socket::setsockopt(&sock, sockopt::PassCred, &true).map_err(io::Error::from)?;
            Ok::<(), io::Error>(())
        })();
        if let Err(e) = opened {
            let _ = std::fs::remove_file(&path);
            return Err(format!("notify socket {}: {e}", path.display()));
        }
        let speaker = match cgroup {
            Some(dir) => match self.cgroup_name(dir) {
                Some(name) => Speaker::Cgroup(name),
                None => {
                    let _ = std::fs::remove_file(&path);
                    return Err(format!(
                        "notify socket {}: the cgroup {} is not under the cgroup2 mount",
                        path.display(),
                        dir.display()
                    ));
                }
            },
            None => Speaker::Nobody,
        };
        let sock = match Watched::new(
            &self.registry,
            sock,
            |s| s.as_fd(),
            tokens::notify_token(key),
            Interest::READABLE,
        ) {
            Ok(w) => w,
            Err((_, e)) => {
                let _ = std::fs::remove_file(&path);
                return Err(format!("notify socket {}: epoll: {e}", path.display()));
            }
        };
        self.socks.insert(
            key,
            NotifySocket {
                sock,
                path: path.clone(),
                generation,
                speaker,
                dropped: 0,
                mainpid_said: false,
            },
        );
        Ok(path)
    }

    /// The socket of `key`'s run `generation` handed over by the instance before an upgrade
    /// (`fd`), at its path in `dir`.
    pub(super) fn inherit(
        &mut self,
        key: ContainerKey,
        generation: Generation,
        dir: &Path,
        label: &str,
        cgroup: Option<&Path>,
        fd: OwnedFd,
    ) -> Result<(), String> {
        self.close(key);
        let path = dir.join(file_name(label));
        let sock = UnixDatagram::from(fd);
        sock.set_nonblocking(true)
            .map_err(|e| format!("notify socket {}: {e}", path.display()))?;
        let speaker = match cgroup {
            Some(dir) => Speaker::Cgroup(self.cgroup_name(dir).ok_or_else(|| {
                format!(
                    "notify socket {}: the cgroup {} is not under the cgroup2 mount",
                    path.display(),
                    dir.display()
                )
            })?),
            None => Speaker::Nobody,
        };
        let sock = Watched::new(
            &self.registry,
            sock,
            |s| s.as_fd(),
            tokens::notify_token(key),
            Interest::READABLE,
        )
        .map_err(|(_, e)| format!("notify socket {}: epoll: {e}", path.display()))?;
        self.socks.insert(
            key,
            NotifySocket {
                sock,
                path,
                generation,
                speaker,
                dropped: 0,
                mainpid_said: false,
            },
        );
        // Datagrams may have come while no vigil read: read them next turn.
        self.backlog.push(key);
        Ok(())
    }

    /// The descriptor of `key`'s socket for run `generation`, for an upgrade's handoff.
    pub(super) fn raw_fd(&self, key: ContainerKey, generation: Generation) -> Option<i32> {
        let s = self.socks.get(&key)?;
        (s.generation == generation).then(|| s.sock.as_raw_fd())
    }

    /// The run's main process was forked (its exec may not be confirmed yet): without
    /// cgroups, its session speaks for it. The child calls `setsid` before its exec, and a
    /// session id is never given to another process while one of its members lives, so the
    /// session named after the child's pid is the run's from its fork on.
    pub(super) fn started(&mut self, key: ContainerKey, generation: Generation, pid: u32) {
        if let Some(s) = self.socks.get_mut(&key)
            && s.generation == generation
            && s.speaker == Speaker::Nobody
        {
            s.speaker = Speaker::Session(pid);
        }
    }

    /// The run ended (or its container is forgotten): its socket is closed and removed.
    pub(super) fn close(&mut self, key: ContainerKey) {
        if let Some(s) = self.socks.remove(&key)
            && s.dropped > 0
        {
            debug!(
                "notify socket {}: {} datagram(s) dropped during the run",
                s.path.display(),
                s.dropped
            );
        }
    }

    /// Whether a socket was left with datagrams to read (the next turn must not wait).
    pub(super) fn has_backlog(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// `token`'s socket is readable: its datagrams, up to [`PER_TURN`], as inputs of its run.
    pub(super) fn on_readable(
        &mut self,
        token: mio::Token,
        out: &mut Vec<(ContainerKey, Generation, Notification)>,
    ) {
        self.read(tokens::notify_key(token), out);
    }

    /// The sockets left with datagrams last turn, read again.
    pub(super) fn read_backlog(&mut self, out: &mut Vec<(ContainerKey, Generation, Notification)>) {
        for key in std::mem::take(&mut self.backlog) {
            self.read(key, out);
        }
    }

    fn read(&mut self, key: ContainerKey, out: &mut Vec<(ContainerKey, Generation, Notification)>) {
        let Some(s) = self.socks.get_mut(&key) else {
            return;
        };
        for _ in 0..PER_TURN {
            match receive(s) {
                Received::Empty => return,
                Received::Own(n) => out.push((key, s.generation, n)),
                Received::Dropped(why) => {
                    s.dropped += 1;
                    debug!(
                        "notify socket {}: datagram dropped: {why}",
                        s.path.display()
                    );
                }
            }
        }
        if !self.backlog.contains(&key) {
            self.backlog.push(key);
        }
    }

    /// The name `/proc/PID/cgroup` gives the cgroup at `dir`: its path below the cgroup2
    /// mount, joined to the mount's root.
    fn cgroup_name(&mut self, dir: &Path) -> Option<String> {
        let mount = self.mount.get_or_insert_with(|| {
            let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
            let entries = crate::cgroup::discover::parse_mountinfo(&text);
            let m = crate::cgroup::discover::find_cgroup2(&entries)?;
            Some((m.mount_point.clone(), m.root.clone()))
        });
        let (mount_point, root) = mount.as_ref()?;
        let rel = dir.strip_prefix(mount_point).ok()?;
        let root = root.trim_end_matches('/');
        let rel = rel.to_str()?;
        Some(if rel.is_empty() {
            if root.is_empty() {
                "/".into()
            } else {
                root.into()
            }
        } else {
            format!("{root}/{rel}")
        })
    }
}

/// The sockets' deadline: now while one was left with datagrams to read. (Their events and
/// backlog are read by the router, which lends this component to the runs through the
/// [`Link`]: the runs make a run's socket at its spawn and close it at its end.)
impl Component for NotifySockets {
    fn deadline(&self, now: Instant) -> Option<Instant> {
        self.has_backlog().then_some(now)
    }
}

/// Hands what the sockets said to the core, in the order it came; a run whose exec report
/// was not read yet is settled first (see [`Runs::before_notified`]).
pub(super) fn feed(
    said: Vec<(ContainerKey, Generation, Notification)>,
    now: Instant,
    runs: &mut Runs,
    link: &mut Link<'_>,
) {
    for (key, generation, notification) in said {
        runs.before_notified(key, generation, link);
        link.feed(
            now,
            Input::Notified {
                key,
                generation,
                notification,
            },
        );
    }
}

/// Gives the socket file to the container's user and group, so that it (and root) alone may
/// send to it. Only root can; another vigil runs its containers as itself, and the 0600 file is
/// its own.
pub(super) fn grant(path: &Path, uid: Option<u32>, gid: Option<u32>) -> Result<(), String> {
    if uid.is_none() && gid.is_none() {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, uid, gid)
        .map_err(|e| format!("notify socket {}: chown: {e}", path.display()))
}

/// The socket's file name: a hash of `pod/container` (stable across runs, upgrades and restarts
/// of vigil, and short: a socket path holds at most 107 bytes, unix(7)).
fn file_name(label: &str) -> String {
    // FNV-1a, 64 bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The sockets' directory: made 0711 (others may reach a socket they are given, not list them)
/// and refused when it is not a directory of vigil's own (a symlink, another user's).
fn make_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o711).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("notify socket directory {}: {e}", dir.display())),
    }
    let m = std::fs::symlink_metadata(dir)
        .map_err(|e| format!("notify socket directory {}: {e}", dir.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    if !m.file_type().is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(format!(
            "notify socket directory {} is not a directory of vigil's uid {me} that only it may \
             write (owner uid {}, mode {:04o})",
            dir.display(),
            m.uid(),
            m.mode() & 0o7777
        ));
    }
    Ok(())
}

/// One datagram of `s`, judged and parsed.
fn receive(s: &mut NotifySocket) -> Received {
    let mut buf = [0u8; MAX_DATAGRAM];
    let mut cmsg = nix::cmsg_space!(libc::ucred, [std::os::fd::RawFd; MAX_FDS]);
    let fd = s.sock.as_raw_fd();
    let mut iov = [io::IoSliceMut::new(&mut buf)];
    let msg = match socket::recvmsg::<()>(
        fd,
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_CMSG_CLOEXEC | MsgFlags::MSG_TRUNC,
    ) {
        Ok(m) => m,
        Err(nix::errno::Errno::EAGAIN) => return Received::Empty,
        Err(nix::errno::Errno::EINTR) => return Received::Dropped("interrupted".into()),
        Err(e) => {
            warn!("notify socket {}: recvmsg: {e}", s.path.display());
            return Received::Empty;
        }
    };
    let mut pid = None;
    // Descriptors sent with the message, closed when this function returns — after the sender
    // was judged: a `BARRIER=1` sender (`systemd-notify` by default) waits for exactly that
    // close and then exits, and a sender gone before it is judged cannot be told apart from a
    // stranger (its /proc entry is gone).
    let mut _held: Vec<OwnedFd> = Vec::new();
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            match c {
                ControlMessageOwned::ScmCredentials(cred) => pid = Some(cred.pid()),
                ControlMessageOwned::ScmRights(fds) => {
                    for fd in fds {
                        #[allow(unsafe_code)]
                        // SAFETY: the kernel installed `fd` in vigil's table for this message
                        // (SCM_RIGHTS, close-on-exec); nothing else owns it; it is closed when
                        // `_held` drops at the end of this call.
                        _held.push(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
                _ => {}
            }
        }
    }
    let len = msg.bytes;
    let truncated = msg.flags.contains(MsgFlags::MSG_TRUNC) || len > MAX_DATAGRAM;
    if truncated {
        return Received::Dropped(format!("longer than {MAX_DATAGRAM} bytes"));
    }
    let Some(pid) = pid.and_then(|p| u32::try_from(p).ok()) else {
        return Received::Dropped("no sender credentials".into());
    };
    if !speaks_for(&s.speaker, pid) {
        return Received::Dropped(format!(
            "sent by pid {pid}, which is not in the container's {}",
            match s.speaker {
                Speaker::Session(_) => "session",
                _ => "cgroup",
            }
        ));
    }
    let parsed = parse(&buf[..len]);
    if parsed.main_pid && !s.mainpid_said {
        s.mainpid_said = true;
        log::info!(
            "notify socket {}: MAINPID= ignored: the main process is the one vigil started",
            s.path.display()
        );
    }
    Received::Own(parsed.notification)
}

/// Whether `pid` may speak for the run.
fn speaks_for(speaker: &Speaker, pid: u32) -> bool {
    match speaker {
        Speaker::Cgroup(own) => std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .ok()
            .and_then(|t| crate::cgroup::discover::parse_own_cgroup(&t))
            .is_some_and(|c| in_cgroup(&c, own)),
        Speaker::Session(main) => {
            crate::runtime::statefile::read_stat(pid).is_some_and(|st| st.session == *main)
        }
        Speaker::Nobody => false,
    }
}

/// Whether cgroup `c` is `own` or below it.
fn in_cgroup(c: &str, own: &str) -> bool {
    c == own
        || c.strip_prefix(own)
            .is_some_and(|rest| rest.starts_with('/') || own.ends_with('/'))
}

/// A datagram's lines as vigil reads them.
#[derive(Debug, Default, PartialEq)]
struct Parsed {
    notification: Notification,
    /// It said `MAINPID=` (not honoured).
    main_pid: bool,
}

/// Parses a datagram: newline-separated `KEY=VALUE` assignments (sd_notify(3)); unknown keys
/// and malformed lines are ignored, as systemd ignores them.
fn parse(data: &[u8]) -> Parsed {
    let mut p = Parsed::default();
    for line in data.split(|b| *b == b'\n') {
        let Some(eq) = line.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (k, v) = (&line[..eq], &line[eq + 1..]);
        match k {
            b"READY" => p.notification.ready |= v == b"1",
            b"STOPPING" => p.notification.stopping |= v == b"1",
            b"STATUS" => p.notification.status = Some(String::from_utf8_lossy(v).into_owned()),
            b"WATCHDOG" if v == b"1" => p.notification.watchdog = true,
            b"WATCHDOG" if v == b"trigger" => p.notification.watchdog_trigger = true,
            // A count of microseconds (sd_notify(3)); anything else is ignored.
            b"EXTEND_TIMEOUT_USEC" => {
                if let Some(us) = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    p.notification.extend_timeout = Some(Duration::from_micros(us));
                }
            }
            b"MAINPID" => p.main_pid = true,
            _ => {}
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_datagram_is_parsed_line_by_line_and_unknown_lines_are_ignored() {
        let p = parse(b"READY=1\nSTATUS=serving 3 clients\nFOO=bar\ngarbage\nSTOPPING=0");
        assert!(p.notification.ready);
        assert!(!p.notification.stopping);
        assert_eq!(p.notification.status.as_deref(), Some("serving 3 clients"));
        assert!(!p.main_pid);
        let p = parse(b"READY=2\nSTOPPING=1\nMAINPID=1\nSTATUS=\xff\x1b[2J\nWATCHDOG=0");
        assert!(!p.notification.ready, "only READY=1 counts");
        assert!(!p.notification.watchdog && !p.notification.watchdog_trigger);
        assert!(p.notification.stopping && p.main_pid);
        assert_eq!(p.notification.status.as_deref(), Some("\u{fffd}\u{1b}[2J"));
        let p = parse(b"WATCHDOG=1");
        assert!(p.notification.watchdog && !p.notification.watchdog_trigger);
        let p = parse(b"WATCHDOG=trigger");
        assert!(!p.notification.watchdog && p.notification.watchdog_trigger);
        let p = parse(b"EXTEND_TIMEOUT_USEC=2500000");
        assert_eq!(
            p.notification.extend_timeout,
            Some(Duration::from_millis(2500))
        );
        for bad in [
            &b"EXTEND_TIMEOUT_USEC=-1"[..],
            b"EXTEND_TIMEOUT_USEC=2s",
            b"EXTEND_TIMEOUT_USEC=",
        ] {
            assert_eq!(parse(bad).notification.extend_timeout, None, "{bad:?}");
        }
    }

    #[test]
    fn a_cgroup_speaks_for_itself_and_its_children_only() {
        assert!(in_cgroup("/vigil/web/app", "/vigil/web/app"));
        assert!(in_cgroup("/vigil/web/app/probe-hook-1", "/vigil/web/app"));
        assert!(!in_cgroup("/vigil/web/app2", "/vigil/web/app"));
        assert!(!in_cgroup("/vigil/web", "/vigil/web/app"));
        assert!(in_cgroup("/x", "/"));
    }

    #[test]
    fn socket_names_are_short_and_stable() {
        let a = file_name("web/app");
        assert_eq!(a.len(), 16);
        assert_eq!(a, file_name("web/app"));
        assert_ne!(a, file_name("web/ap"));
    }
}
