//! The service manager's file-descriptor store (issue 36): under systemd (`NOTIFY_SOCKET`
//! set, the shipped `Type=notify` unit), vigil gives the service manager a duplicate of the
//! read end of every container output pipe (`FDSTORE=1` with `FDNAME=`, sd_notify(3),
//! sd_pid_notify_with_fds(3)); when vigil dies and the unit is restarted (`Restart=`), the
//! manager hands them back to the new vigil at fd 3 on (`LISTEN_FDS`, `LISTEN_FDNAMES`,
//! `LISTEN_PID`: sd_listen_fds(3)), which reads the pipes of the runs it adopts on from where
//! they were. The same as the output holder (`runtime::holder`) does from a shell, kept by the
//! service manager, which outlives any crash of vigil. Stored pipes are preferred to the
//! holder's duplicates at start.
//!
//! A pipe is stored under [`PipeName::encode`]: `vigil.out.PID.P.POD.C.CONTAINER` (`err` for
//! stderr). Pod and container names are lower-case (`config::values::check_name`), so the
//! upper-case `P` and `C` segments cannot occur in them and the name splits back unambiguously;
//! it uses only `[A-Za-z0-9_.-]` and is at most 163 characters (systemd takes up to 255, no
//! `:`, sd_notify(3) `FDNAME=`).
//!
//! Owns: one unbound datagram socket that sends to `NOTIFY_SOCKET` (never blocking:
//! `MSG_DONTWAIT`; a message the manager's queue cannot take now is not sent, said once at
//! warn), and the names it stored, by pid and stream, so that a pipe's entry is removed
//! (`FDSTOREREMOVE=1`) when vigil closes the pipe — the manager also drops an entry by itself
//! once the pipe's writers are all gone (it sees `POLLHUP`), so nothing accumulates in the
//! store over many restarts. Every send is one `sendmsg(2)` of under 200 bytes, made where a
//! run is spawned or adopted or a pipe closes: as bounded per turn as those are.
//!
//! At start ([`take_listen_fds`], before any other process is started): the descriptors named
//! by `LISTEN_FDS` when `LISTEN_PID` is vigil's pid, each made close-on-exec; the ones whose
//! name is a pipe name and that are pipes are kept, the others closed (said at warn); the
//! `LISTEN_*` variables are removed from vigil's environment, so nothing vigil starts (its
//! holder, a new binary of `vigil upgrade`) sees them. Containers never see them in any case
//! (`process::prepare` builds their environment afresh and drops `LISTEN_*` even if
//! configured).
//!
//! Must not: block; read or write a pipe (the capture does); take descriptors meant for
//! another pid (`LISTEN_PID`); send anything without `NOTIFY_SOCKET`.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io::IoSlice;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use log::{debug, info, warn};
use nix::sys::socket::{
    self, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, UnixAddr,
};

/// The first descriptor the service manager passes (`SD_LISTEN_FDS_START`, sd_listen_fds(3)).
const LISTEN_FDS_START: RawFd = 3;
/// The most descriptors taken from `LISTEN_FDS` (the shipped unit stores at most 4096).
const MAX_LISTEN_FDS: usize = 65_536;
/// The variables of sd_listen_fds(3), removed from vigil's environment at start.
const LISTEN_VARS: [&str; 3] = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"];

/// Which pipe a stored descriptor is: its container (`pod/container`), main pid and stream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PipeName {
    pub label: String,
    pub pid: u32,
    pub stderr: bool,
}

impl PipeName {
    pub fn new(label: &str, pid: u32, stderr: bool) -> PipeName {
        PipeName {
            label: label.to_string(),
            pid,
            stderr,
        }
    }

    /// Its `FDNAME=`: `vigil.out.PID.P.POD.C.CONTAINER` (`err` for stderr).
    pub fn encode(&self) -> String {
        let (pod, container) = self.label.split_once('/').unwrap_or((&self.label, ""));
        let stream = if self.stderr { "err" } else { "out" };
        format!("vigil.{stream}.{}.P.{pod}.C.{container}", self.pid)
    }

    /// The pipe an `FDNAME` names; `None` for any other name.
    pub fn decode(name: &str) -> Option<PipeName> {
        let rest = name.strip_prefix("vigil.")?;
        let (stream, rest) = rest.split_once('.')?;
        let stderr = match stream {
            "out" => false,
            "err" => true,
            _ => return None,
        };
        let (pid, rest) = rest.split_once(".P.")?;
        let (pod, container) = rest.split_once(".C.")?;
        let named = |n: &str| crate::config::values::check_name(n, "container").is_ok();
        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let pid: u32 = pid.parse().ok().filter(|p| *p > 0)?;
        (named(pod) && named(container)).then(|| PipeName {
            label: format!("{pod}/{container}"),
            pid,
            stderr,
        })
    }
}

/// What `LISTEN_PID`, `LISTEN_FDS` and `LISTEN_FDNAMES` say, for a process of pid `me`
/// (sd_listen_fds_with_names(3)).
#[derive(Debug, PartialEq, Eq)]
enum Listen {
    /// No `LISTEN_FDS` (or `LISTEN_FDS=0`).
    Nothing,
    /// `LISTEN_PID` names another process (or is missing): the descriptors are not vigil's.
    NotOurs(String),
    /// A value that does not parse.
    Bad(String),
    /// The descriptors from fd 3 on, each with its name (`unknown` when not named).
    Fds(Vec<(RawFd, String)>),
}

fn parse_listen(pid: Option<&str>, fds: Option<&str>, names: Option<&str>, me: u32) -> Listen {
    let Some(fds) = fds else {
        return Listen::Nothing;
    };
    let Ok(n) = fds.trim().parse::<usize>() else {
        return Listen::Bad(format!("LISTEN_FDS={fds:?} is not a number"));
    };
    if n == 0 {
        return Listen::Nothing;
    }
    match pid.map(|p| p.trim().parse::<u32>()) {
        Some(Ok(p)) if p == me => {}
        Some(Ok(p)) => return Listen::NotOurs(format!("LISTEN_PID={p} is not vigil's pid {me}")),
        Some(Err(_)) => {
            return Listen::NotOurs(format!("LISTEN_PID={:?} is not a pid", pid.unwrap_or("")));
        }
        None => return Listen::NotOurs("LISTEN_PID is not set".to_string()),
    }
    if n > MAX_LISTEN_FDS {
        return Listen::Bad(format!("LISTEN_FDS={n} is more than {MAX_LISTEN_FDS}"));
    }
    let names: Vec<&str> = names.map(|n| n.split(':').collect()).unwrap_or_default();
    // A list of the wrong length names nothing reliably: every descriptor is `unknown`
    // (sd_listen_fds_with_names(3) fails then).
    let named = names.len() == n;
    Listen::Fds(
        (0..n)
            .map(|i| {
                let name = if named { names[i] } else { "unknown" };
                // n ≤ MAX_LISTEN_FDS: fits an fd number.
                (LISTEN_FDS_START + i as RawFd, name.to_string())
            })
            .collect(),
    )
}

/// At start, before any other process is started: the output pipes the service manager handed
/// back (see the module docs), by name. Removes the `LISTEN_*` variables from vigil's
/// environment.
pub fn take_listen_fds() -> Vec<(PipeName, OwnedFd)> {
    let var = |k: &str| std::env::var(k).ok();
    let listen = parse_listen(
        var("LISTEN_PID").as_deref(),
        var("LISTEN_FDS").as_deref(),
        var("LISTEN_FDNAMES").as_deref(),
        std::process::id(),
    );
    for k in LISTEN_VARS {
        if std::env::var_os(k).is_some() {
            // SAFETY: vigil's start-up runs on its only thread (the resolver thread starts
            // with the first probe, later), so nothing reads the environment concurrently.
            unsafe { std::env::remove_var(k) };
        }
    }
    let fds = match listen {
        Listen::Nothing => return Vec::new(),
        Listen::NotOurs(why) => {
            warn!(
                "LISTEN_FDS ignored: {why}; those descriptors are not vigil's and are left alone"
            );
            return Vec::new();
        }
        Listen::Bad(why) => {
            warn!("LISTEN_FDS ignored: {why}");
            return Vec::new();
        }
        Listen::Fds(fds) => fds,
    };
    let mut kept = Vec::new();
    let mut refused = Vec::new();
    for (raw, name) in fds {
        let Some(fd) = own_listen_fd(raw) else {
            refused.push(format!("{name} (fd {raw} is not open)"));
            continue;
        };
        match PipeName::decode(&name) {
            Some(pipe) if is_pipe(&fd) => kept.push((pipe, fd)),
            Some(_) => refused.push(format!("{name} (fd {raw} is not a pipe)")),
            None => refused.push(format!("{name} (fd {raw})")),
        }
    }
    if !refused.is_empty() {
        warn!(
            "{} descriptor(s) from the service manager are not vigil output pipes and were \
             closed: {}",
            refused.len(),
            refused.join(", ")
        );
    }
    if !kept.is_empty() {
        info!(
            "took {} output pipe(s) back from the service manager's file-descriptor store",
            kept.len()
        );
    }
    kept
}

/// Takes a descriptor passed at `fd` (close-on-exec from now on); `None` when it is not open.
fn own_listen_fd(fd: RawFd) -> Option<OwnedFd> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    // SAFETY: F_SETFD on a raw number only sets its flag, or fails with EBADF when it is not
    // open; no memory is involved.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).ok()?;
    // SAFETY: the service manager passed this number for this process to own (LISTEN_PID is
    // ours), it is open (checked above), and each number in the range is taken once.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn is_pipe(fd: &OwnedFd) -> bool {
    nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO)
}

/// vigil's side of the store (module docs). Without `NOTIFY_SOCKET` every call is a no-op.
#[derive(Default)]
pub struct FdStore {
    /// The socket it sends from and the manager's address.
    link: Option<(OwnedFd, UnixAddr)>,
    /// Names in the store, by pid and stream.
    stored: HashMap<(u32, bool), String>,
    /// Handed back at start and not (yet) claimed by an adopted run.
    unclaimed: HashMap<(u32, bool), String>,
    /// A send failed (said once, until one succeeds).
    failing: bool,
}

impl FdStore {
    /// The store of the service manager at `NOTIFY_SOCKET` (a path, or `@name` in the
    /// abstract namespace); a disabled one without it.
    pub fn from_env() -> FdStore {
        let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
            return FdStore::default();
        };
        match open(&path) {
            Ok(link) => FdStore {
                link: Some(link),
                ..FdStore::default()
            },
            Err(e) => {
                warn!(
                    "NOTIFY_SOCKET {}: {e}; output pipes are not kept in the service manager's \
                     file-descriptor store",
                    path.to_string_lossy()
                );
                FdStore::default()
            }
        }
    }

    /// Pipes the manager handed back at start ([`take_listen_fds`]): in the store already.
    pub fn handed_back<'a>(&mut self, pipes: impl IntoIterator<Item = &'a PipeName>) {
        for p in pipes {
            self.unclaimed.insert((p.pid, p.stderr), p.encode());
        }
    }

    /// Keeps `fd`, the read end of pipe `name`, in the store: sent once (a pipe handed back
    /// at start is there already and is not sent again).
    pub fn keep(&mut self, name: &PipeName, fd: BorrowedFd<'_>) {
        let key = (name.pid, name.stderr);
        if let Some(n) = self.unclaimed.remove(&key) {
            self.stored.insert(key, n);
            return;
        }
        let Some((sock, addr)) = &self.link else {
            return;
        };
        let encoded = name.encode();
        if self.stored.get(&key) == Some(&encoded) {
            return;
        }
        let msg = format!("FDSTORE=1\nFDNAME={encoded}\n");
        let fds = [fd.as_raw_fd()];
        match send(sock, addr, &msg, &[ControlMessage::ScmRights(&fds)]) {
            Ok(()) => {
                self.failing = false;
                self.stored.insert(key, encoded);
            }
            Err(e) => {
                if !self.failing {
                    warn!(
                        "the service manager's file-descriptor store did not take {encoded}: \
                         {e}; a crash of vigil would leave that pipe to the output holder alone"
                    );
                }
                self.failing = true;
            }
        }
    }

    /// A pipe handed over by `vigil upgrade`: the store has it already (the manager keeps
    /// a service's store across an exec of the same process), under the same name.
    pub fn kept_before(&mut self, name: &PipeName) {
        if self.link.is_some() {
            self.stored.insert((name.pid, name.stderr), name.encode());
        }
    }

    /// Start-up is over: the pipes handed back for runs that were not adopted leave the store
    /// (their descriptors were closed with the rest of what was not adopted).
    pub fn drop_unclaimed(&mut self) {
        let names: Vec<String> = self.unclaimed.drain().map(|(_, n)| n).collect();
        if !names.is_empty() {
            debug!(
                "{} stored output pipe(s) of runs not adopted removed from the store",
                names.len()
            );
        }
        for n in names {
            self.remove(&n);
        }
    }

    /// vigil closed the pipe of `pid`'s `stderr` or stdout: its entry leaves the store.
    pub fn release(&mut self, pid: u32, stderr: bool) {
        if let Some(n) = self.stored.remove(&(pid, stderr)) {
            self.remove(&n);
        }
    }

    /// A clean exit: every entry leaves the store.
    pub fn release_all(&mut self) {
        let names: Vec<String> = self.stored.drain().map(|(_, n)| n).collect();
        for n in names {
            self.remove(&n);
        }
    }

    /// Entries in the store now (as far as vigil knows).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.stored.len()
    }

    fn remove(&mut self, name: &str) {
        let Some((sock, addr)) = &self.link else {
            return;
        };
        // A lost removal is harmless: the manager drops the entry once the pipe hangs up.
        if let Err(e) = send(
            sock,
            addr,
            &format!("FDSTOREREMOVE=1\nFDNAME={name}\n"),
            &[],
        ) {
            debug!("FDSTOREREMOVE of {name} not sent: {e}");
        }
    }
}

/// An unbound, non-blocking datagram socket and the address of `NOTIFY_SOCKET`.
pub(crate) fn open(path: &std::ffi::OsStr) -> nix::Result<(OwnedFd, UnixAddr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_bytes();
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => UnixAddr::new_abstract(name)?,
        None => UnixAddr::new(bytes)?,
    };
    let sock = socket::socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    Ok((sock, addr))
}

pub(crate) fn send(
    sock: &OwnedFd,
    addr: &UnixAddr,
    msg: &str,
    cmsgs: &[ControlMessage<'_>],
) -> nix::Result<()> {
    socket::sendmsg(
        sock.as_raw_fd(),
        &[IoSlice::new(msg.as_bytes())],
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        Some(addr),
    )
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_pipe_name_fits_systemd_and_splits_back() {
        for (label, pid, stderr) in [
            ("web/app", 42, false),
            ("a.c.b/c-.c_1", 4_000_000, true),
            ("p/q", 1, false),
        ] {
            let p = PipeName::new(label, pid, stderr);
            let n = p.encode();
            assert!(n.len() <= 255, "{n}");
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b)),
                "{n}"
            );
            assert_eq!(PipeName::decode(&n), Some(p), "{n}");
        }
        assert_eq!(
            PipeName::new("web/app", 42, true).encode(),
            "vigil.err.42.P.web.C.app"
        );
        let longest = PipeName::new(
            &format!("{}/{}", "a".repeat(63), "b".repeat(63)),
            u32::MAX,
            true,
        );
        assert!(longest.encode().len() <= 255);
    }

    #[test]
    fn names_of_anything_else_are_not_pipe_names() {
        for n in [
            "stored",
            "unknown",
            "vigil.out.42.P.web",
            "vigil.xxx.42.P.web.C.app",
            "vigil.out.x.P.web.C.app",
            "vigil.out.0.P.web.C.app",
            "vigil.out.42.P.Web.C.app",
            "vigil.out.42.P.web.C.",
            "vigil.out.42.P.web.C.a/b",
        ] {
            assert_eq!(PipeName::decode(n), None, "{n}");
        }
    }

    #[test]
    fn listen_fds_are_taken_only_for_vigils_own_pid() {
        let two = Some("2");
        assert_eq!(parse_listen(None, None, None, 7), Listen::Nothing);
        assert_eq!(parse_listen(Some("7"), Some("0"), None, 7), Listen::Nothing);
        assert!(matches!(
            parse_listen(Some("8"), two, None, 7),
            Listen::NotOurs(_)
        ));
        assert!(matches!(
            parse_listen(None, two, None, 7),
            Listen::NotOurs(_)
        ));
        assert!(matches!(
            parse_listen(Some("x"), two, None, 7),
            Listen::NotOurs(_)
        ));
        assert!(matches!(
            parse_listen(Some("7"), Some("lots"), None, 7),
            Listen::Bad(_)
        ));
        assert!(matches!(
            parse_listen(Some("7"), Some("9999999"), None, 7),
            Listen::Bad(_)
        ));
        assert_eq!(
            parse_listen(Some("7"), two, Some("a:b"), 7),
            Listen::Fds(vec![(3, "a".into()), (4, "b".into())])
        );
        // Names that do not match the count name nothing.
        assert_eq!(
            parse_listen(Some("7"), two, Some("a"), 7),
            Listen::Fds(vec![(3, "unknown".into()), (4, "unknown".into())])
        );
    }

    /// A fake service manager: a datagram socket bound in a temp dir.
    fn manager() -> (tempfile::TempDir, std::os::unix::net::UnixDatagram, FdStore) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        sock.set_nonblocking(true).unwrap();
        let store = FdStore {
            link: Some(open(path.as_os_str()).unwrap()),
            ..FdStore::default()
        };
        (dir, sock, store)
    }

    fn received(sock: &std::os::unix::net::UnixDatagram) -> Vec<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 512];
        while let Ok(n) = sock.recv(&mut buf) {
            got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
        got
    }

    #[test]
    fn a_pipe_is_stored_once_and_removed_when_released() {
        let (_dir, sock, mut store) = manager();
        let (r, _w) = nix::unistd::pipe().unwrap();
        let name = PipeName::new("web/app", 42, false);
        store.keep(&name, r.as_fd());
        store.keep(&name, r.as_fd());
        assert_eq!(
            received(&sock),
            ["FDSTORE=1\nFDNAME=vigil.out.42.P.web.C.app\n"]
        );
        store.release(42, true);
        assert!(received(&sock).is_empty(), "not stored: nothing to remove");
        store.release(42, false);
        assert_eq!(
            received(&sock),
            ["FDSTOREREMOVE=1\nFDNAME=vigil.out.42.P.web.C.app\n"]
        );
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn pipes_handed_back_are_not_sent_again_and_the_unclaimed_leave_the_store() {
        let (_dir, sock, mut store) = manager();
        let adopted = PipeName::new("web/app", 42, false);
        let gone = PipeName::new("web/old", 41, true);
        store.handed_back([&adopted, &gone]);
        let (r, _w) = nix::unistd::pipe().unwrap();
        store.keep(&adopted, r.as_fd());
        store.drop_unclaimed();
        assert_eq!(
            received(&sock),
            ["FDSTOREREMOVE=1\nFDNAME=vigil.err.41.P.web.C.old\n"]
        );
        store.release_all();
        assert_eq!(
            received(&sock),
            ["FDSTOREREMOVE=1\nFDNAME=vigil.out.42.P.web.C.app\n"]
        );
    }

    #[test]
    fn without_notify_socket_nothing_is_stored() {
        let mut store = FdStore::default();
        let (r, _w) = nix::unistd::pipe().unwrap();
        store.keep(&PipeName::new("web/app", 42, false), r.as_fd());
        assert_eq!(store.len(), 0);
    }
}
