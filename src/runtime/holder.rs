//! The output holder (issue 36.2): a small process that keeps a duplicate of the read end of
//! every container output pipe, so that a `kill -9` of vigil does not close the pipes — a
//! container's writes never fail (no EPIPE, no SIGPIPE) and what it writes while no vigil runs
//! waits in the pipe — and hands them to the next vigil on the same socket.
//!
//! The holder is vigil's own binary run again (`/proc/self/exe`, so a fresh process: nothing
//! of vigil's threads or locks) with [`FD_ENV`] naming its end of a `SOCK_SEQPACKET`
//! socketpair and [`PATH_ENV`] the Unix socket it hands over at (`<socket>.holder`, mode 0600,
//! next to the control socket and its state file). It never reads a pipe: vigil does. Messages
//! from vigil: `ADD NAME` with one descriptor (`SCM_RIGHTS`, unix(7)), NAME being
//! `POD/CONTAINER PID out|err`; `BYE` (vigil is exiting cleanly: the holder exits). A pipe
//! whose writers are all gone (`POLLHUP`: its container ended) is closed: the next vigil
//! adopts only running containers, and closes the pipes of any other run unread. When vigil's
//! end closes without `BYE` (it crashed, or exec'd for `vigil upgrade`), the holder waits for
//! the next vigil: a connection at its path from a process of its own uid (`SO_PEERCRED`) gets
//! every pipe, one message each (`NAME` and the descriptor), then `END`; the holder unlinks
//! its path before sending and exits after.
//!
//! Its lifetime, so that it never outlives what it is for: it exits on `BYE`; after handing
//! over; once vigil is gone and it holds nothing (every container it held a pipe of has
//! ended, or there was none); and on SIGTERM, unless it serves a running vigil and holds
//! pipes (then a SIGTERM sent to the whole unit or group is not its to act on: vigil's clean
//! exit ends it). SIGINT and SIGHUP, a terminal's, are ignored. The signals are read from a
//! signalfd(2) in its poll, never from a handler.
//!
//! Must not: read or write a pipe; take a connection from another uid; outlive a clean exit of
//! vigil, or the last container it holds a pipe of once vigil is gone.

#![allow(unsafe_code)]

use std::collections::HashMap;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use log::{debug, info, warn};
use nix::sys::socket::{
    self, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags, SockFlag, SockType,
    UnixAddr,
};

/// The holder's end of its socketpair with vigil, in its environment.
pub const FD_ENV: &str = "VIGIL_OUTPUT_HOLDER_FD";
/// The path it hands the pipes over at, in its environment.
pub const PATH_ENV: &str = "VIGIL_OUTPUT_HOLDER_PATH";
/// Pipes held at most (two per running container).
pub const MAX_HELD: usize = 32_768;
/// The longest message (a name; pod and container names are short DNS labels).
const MAX_MESSAGE: usize = 512;
/// How long a starting vigil waits for an earlier holder's pipes.
const TAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The holder's socket for the control socket at `socket`.
pub fn path_for(socket: &Path) -> PathBuf {
    let mut s = socket.as_os_str().to_os_string();
    s.push(".holder");
    PathBuf::from(s)
}

/// The name a pipe is held under.
pub fn name(label: &str, pid: u32, stderr: bool) -> String {
    format!("{label} {pid} {}", if stderr { "err" } else { "out" })
}

/// vigil's side: the link to its holder.
#[derive(Debug, Default)]
pub struct Holder {
    link: Option<OwnedFd>,
    /// The holder's pid (awaited at a clean exit).
    pid: Option<u32>,
    /// A send failed (said once).
    failing: bool,
}

impl Holder {
    /// Starts a holder for the control socket at `socket` (a warning, and no holder, if it
    /// cannot be started: output then dies with vigil as before).
    pub fn start(socket: &Path) -> Holder {
        match spawn(socket) {
            Ok((link, pid)) => {
                debug!("output holder pid {pid} at {}", path_for(socket).display());
                Holder {
                    link: Some(link),
                    pid: Some(pid),
                    failing: false,
                }
            }
            Err(e) => {
                warn!(
                    "cannot start the output holder: {e}; a crash of vigil will close its \
                     containers' output pipes"
                );
                Holder::default()
            }
        }
    }

    /// Gives the holder a duplicate of `fd` (a pipe's read end) under `name`. Never blocks
    /// (the link is non-blocking): a pipe the holder cannot take now is not held (said once).
    pub fn keep(&mut self, name: &str, fd: BorrowedFd<'_>) {
        let Some(link) = &self.link else {
            return;
        };
        let msg = format!("ADD {name}");
        let fds = [fd.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        match socket::sendmsg::<()>(
            link.as_raw_fd(),
            &[IoSlice::new(msg.as_bytes())],
            &cmsg,
            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(_) => self.failing = false,
            Err(e) => {
                if !self.failing {
                    warn!(
                        "the output holder did not take {name}: {e}; a crash of vigil would \
                         close that pipe"
                    );
                }
                self.failing = true;
            }
        }
    }

    /// vigil exits cleanly: the holder lets go of everything and exits. Waits up to a second
    /// for it to be gone (shutdown path only: its cgroup, vigil's, is removed next).
    pub fn bye(&mut self) {
        if let Some(link) = self.link.take() {
            let _ = socket::send(
                link.as_raw_fd(),
                b"BYE",
                MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
            );
        }
        let Some(pid) = self.pid.take() else {
            return;
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while std::time::Instant::now() < deadline
            && super::statefile::read_stat(pid).is_some_and(|s| s.state != 'Z')
        {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// Runs vigil's binary again as the holder.
fn spawn(socket: &Path) -> std::io::Result<(OwnedFd, u32)> {
    use std::os::unix::process::CommandExt;
    let (mine, theirs) = socket::socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )?;
    nix::fcntl::fcntl(
        mine.as_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )?;
    let raw = theirs.as_raw_fd();
    let mut cmd = std::process::Command::new("/proc/self/exe");
    cmd.arg0("vigil-output-holder")
        .env(FD_ENV, raw.to_string())
        .env(PATH_ENV, path_for(socket))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // Its own process group: a terminal's Ctrl-C is for vigil, not for it.
        .process_group(0);
    // SAFETY: between fork and exec only fcntl(2) (async-signal-safe) on a descriptor this
    // process owns: it clears close-on-exec so the holder inherits its end.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(raw, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    drop(theirs);
    Ok((mine, child.id()))
}

/// At start: the pipes an earlier vigil's holder kept (it crashed, or this is the new
/// instance of an upgrade), by name; none when there is no holder there. Waits at most
/// [`TAKE_TIMEOUT`] (start-up only, before the loop).
pub fn take_previous(socket: &Path) -> HashMap<String, OwnedFd> {
    let path = path_for(socket);
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_socket() => {}
        _ => return HashMap::new(),
    }
    match receive_all(&path) {
        Ok(held) => {
            if !held.is_empty() {
                info!(
                    "took {} output pipe(s) an earlier vigil's holder kept ({})",
                    held.len(),
                    path.display()
                );
            }
            held
        }
        Err(e) => {
            debug!("no output pipes from {}: {e}", path.display());
            HashMap::new()
        }
    }
}

fn receive_all(path: &Path) -> std::io::Result<HashMap<String, OwnedFd>> {
    let sock = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let timeout = nix::sys::time::TimeVal::new(TAKE_TIMEOUT.as_secs() as _, 0);
    socket::setsockopt(&sock, socket::sockopt::ReceiveTimeout, &timeout)?;
    socket::connect(sock.as_raw_fd(), &UnixAddr::new(path)?)?;
    let mut held = HashMap::new();
    loop {
        let (text, fd) = receive(sock.as_fd())?;
        match (text.as_str(), fd) {
            ("END", _) | ("", None) => return Ok(held),
            (name, Some(fd)) => {
                held.insert(name.to_string(), fd);
            }
            _ => {}
        }
    }
}

/// One message and the descriptor that came with it.
fn receive(sock: BorrowedFd<'_>) -> std::io::Result<(String, Option<OwnedFd>)> {
    let mut buf = [0u8; MAX_MESSAGE];
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [IoSliceMut::new(&mut buf)];
    let msg = socket::recvmsg::<()>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )?;
    let mut fd = None;
    for c in msg.cmsgs()? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: SCM_RIGHTS installed this descriptor in this process for us; each
                // is owned once (extra ones are closed by their OwnedFd at once).
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                if fd.is_none() {
                    fd = Some(owned);
                }
            }
        }
    }
    let len = msg.bytes;
    let text = String::from_utf8_lossy(buf.get(..len).unwrap_or(&[])).into_owned();
    Ok((text, fd))
}

/// When this process is an output holder (started by [`Holder::start`]): runs it and
/// returns its exit code.
pub fn entry() -> Option<i32> {
    let fd: RawFd = std::env::var(FD_ENV)
        .ok()?
        .parse()
        .ok()
        .filter(|f| *f > 2)?;
    let path = PathBuf::from(std::env::var_os(PATH_ENV)?);
    // SAFETY: the descriptor was handed to this process to own (inherited at exec).
    let link = unsafe { OwnedFd::from_raw_fd(fd) };
    Some(hold(link, &path))
}

/// The holder's loop (see the module docs).
fn hold(link: OwnedFd, path: &Path) -> i32 {
    // A terminal's signals are not for the holder; SIGTERM is read from a signalfd (see the
    // module docs for when it ends the holder).
    // SAFETY: signal(2) with SIG_IGN installs no handler code; one thread.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let mut term = sigterm_fd();
    let listener = match listen(path) {
        Ok(l) => Some(l),
        Err(e) => {
            eprintln!(
                "vigil output holder: cannot listen at {}: {e}",
                path.display()
            );
            None
        }
    };
    let mut link = Some(link);
    // (name, fd)
    let mut held: Vec<(String, OwnedFd)> = Vec::new();
    loop {
        let orphan = link.is_none();
        if orphan && (held.is_empty() || listener.is_none()) {
            break;
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(held.len() + 3);
        fds.push(libc::pollfd {
            fd: link.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.push(libc::pollfd {
            fd: listener
                .as_ref()
                .filter(|_| orphan)
                .map_or(-1, AsRawFd::as_raw_fd),
            events: libc::POLLIN,
            revents: 0,
        });
        fds.push(libc::pollfd {
            fd: term.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            events: libc::POLLIN,
            revents: 0,
        });
        for (_, fd) in &held {
            fds.push(libc::pollfd {
                fd: fd.as_raw_fd(),
                events: 0,
                revents: 0,
            });
        }
        // SAFETY: poll(2) on an array this function owns, with its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[0].revents != 0
            && let Some(l) = &link
        {
            match receive(l.as_fd()) {
                Ok((text, _)) if text == "BYE" => break,
                Ok((text, Some(fd))) if held.len() < MAX_HELD => {
                    if let Some(name) = text.strip_prefix("ADD ") {
                        held.push((name.to_string(), fd));
                    }
                }
                Ok((text, None)) if text.is_empty() => link = None,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => link = None,
            }
        }
        if fds[1].revents != 0
            && let Some(l) = &listener
            && hand_over(l, path, &held)
        {
            return 0;
        }
        let mut terminated = false;
        if fds[2].revents != 0
            && let Some(t) = &mut term
        {
            // At most one SIGTERM is pending (standard signals do not queue).
            terminated = matches!(t.read_signal(), Ok(Some(_)));
        }
        // Pipes whose writers have all gone (their containers ended).
        let hung: Vec<usize> = fds
            .iter()
            .skip(3)
            .enumerate()
            .filter(|(_, p)| p.revents & (libc::POLLHUP | libc::POLLERR) != 0)
            .map(|(i, _)| i)
            .collect();
        for i in hung.into_iter().rev() {
            held.swap_remove(i);
        }
        // Serving a running vigil with pipes held, a SIGTERM is not acted on (module docs).
        if terminated && (link.is_none() || held.is_empty()) {
            break;
        }
    }
    let _ = std::fs::remove_file(path);
    0
}

/// SIGTERM blocked and readable from a signalfd(2) (none, and SIGTERM left as it is, if one
/// cannot be made: the holder then ends by the default action of SIGTERM).
fn sigterm_fd() -> Option<nix::sys::signalfd::SignalFd> {
    use nix::sys::signal::{SigSet, Signal};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK).ok()?;
    set.thread_block().ok()?;
    Some(fd)
}

/// Binds the holder's socket at `path` with mode 0600 (umask around bind). A socket left
/// there by an earlier holder of the same uid (its vigil took over meanwhile) is replaced;
/// anything else is not touched.
fn listen(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() || m.uid() != nix::unistd::geteuid().as_raw() {
            return Err(std::io::Error::other(
                "something else is there (not a socket of this uid)",
            ));
        }
        std::fs::remove_file(path)?;
    }
    let sock = socket::socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = socket::bind(sock.as_raw_fd(), &UnixAddr::new(path)?);
    nix::sys::stat::umask(old);
    bound?;
    socket::listen(&sock, socket::Backlog::new(4)?)?;
    Ok(sock)
}

/// A connection at the holder's socket: from this uid, it gets every pipe, then `END`.
/// Returns whether the pipes were handed over (the holder then exits).
fn hand_over(listener: &OwnedFd, path: &Path, held: &[(String, OwnedFd)]) -> bool {
    let Ok(raw) = socket::accept(listener.as_raw_fd()) else {
        return false;
    };
    // SAFETY: accept(2) returned a new descriptor that nothing else owns.
    let conn = unsafe { OwnedFd::from_raw_fd(raw) };
    let me = nix::unistd::geteuid().as_raw();
    match socket::getsockopt(&conn, socket::sockopt::PeerCredentials) {
        Ok(cred) if cred.uid() == me => {}
        _ => return false,
    }
    // Unlinked first: the next holder binds this path once the taker has seen `END`.
    let _ = std::fs::remove_file(path);
    for (name, fd) in held {
        let fds = [fd.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        if socket::sendmsg::<()>(
            conn.as_raw_fd(),
            &[IoSlice::new(name.as_bytes())],
            &cmsg,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .is_err()
        {
            break;
        }
    }
    let _ = socket::send(conn.as_raw_fd(), b"END", MsgFlags::MSG_NOSIGNAL);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pipe_is_named_by_its_container_pid_and_stream() {
        assert_eq!(name("web/app", 42, true), "web/app 42 err");
        assert_eq!(name("web/app", 42, false), "web/app 42 out");
    }
}
