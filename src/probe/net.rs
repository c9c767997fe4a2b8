//! One in-flight `tcp_socket`, `http_get` (HTTP or HTTPS) or `grpc` attempt as a
//! non-blocking state machine on the runtime's mio `Poll`.
//!
//! An attempt goes through up to three stages, all driven by readiness events for its one
//! token: waiting for a host name ([`super::resolve`], an eventfd registered under the
//! token), connecting, and talking. Talking is layered: a [`Session`] (the HTTP/1.1 request
//! and parser, or the gRPC health check over HTTP/2) produces and consumes plaintext, and
//! the transport carries it either straight over the socket or through a rustls session
//! ([`super::tls`]) whose records are moved with `read_tls`/`write_tls` — so a TLS
//! handshake waits on the same events and the same deadline as everything else.
//!
//! The socket is registered for both readable and writable readiness from the start. mio is
//! edge-triggered, so every event drives the machine as far as it can go: each direction is
//! worked until `WouldBlock`, which guarantees that a later edge is reported (mio docs,
//! "Draining readiness") — or until [`READ_BUDGET`] bytes were read in this event, whatever
//! the peer keeps sending: the attempt then re-arms its socket with `EPOLL_CTL_MOD`
//! (`Registry::reregister`), which makes the kernel poll the socket again and queue a new
//! event if it is still ready (fs/eventpoll.c, `ep_modify`: "If the item is 'hot' … push it
//! now"), and returns to the loop. The rest of the turn (other attempts, restarts, the
//! control socket) runs before the attempt reads again, and the core's timeout is checked
//! every turn. A non-blocking `connect(2)` is complete when the socket becomes
//! writable; `SO_ERROR` then says whether it failed (connect(2), EINPROGRESS). An event that
//! reports the socket writable with no error is the connection: Linux's `tcp_poll`
//! (net/ipv4/tcp.c) never reports a socket in SYN_SENT writable, and epoll reports the mask
//! as polled when the event is read, not when it was queued. Any other event, e.g. the one
//! that delivered a host name, asks `getpeername(2)`, whose ENOTCONN means the connect is
//! still in progress (mio `TcpStream::connect` docs). Data is read when an event reports it
//! (or an error, or the peer's close), not on speculation right after the request went out:
//! data that arrives after an event was read queues a new one (epoll(7), edge-triggered).
//!
//! A decided or abandoned attempt just closes its socket, without `EPOLL_CTL_DEL`: the close
//! removes the registration (epoll(7) Q6), and where a child cloned meanwhile still holds the
//! descriptor until its exec, the registration's token belongs to that attempt alone (the
//! runtime numbers attempts in their tokens), so a late event for it is dropped. A socket
//! replaced within one attempt (the next address, a redirect) is deregistered first, since
//! the next one is registered under the same token.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use rustls::ClientConnection;

use crate::config::on_event::Webhook;
use crate::config::spec::{HttpScheme, ProbeAction};
use crate::core::ProbeOutcome;

use super::grpc::HealthCheck;
use super::http::{
    MAX_REDIRECTS, Progress, ResponseParser, Target, build_post, build_request, redirect_target,
    same_host,
};
use super::resolve::{self, Lookup, Pending};
use super::{ProbeError, io_reason, tls};

/// Bytes read from the socket per `read(2)`.
const READ_CHUNK: usize = 8 * 1024;
/// Bytes read from the socket for one attempt per readiness event. Past it the attempt
/// yields to the loop with its socket re-armed ([`NetProbe::on_event`]), so a peer that
/// sends without pause costs the loop at most this much parsing per turn.
pub const READ_BUDGET: usize = 64 * 1024;

/// Where a pump left the attempt.
#[derive(Debug)]
enum Pumped {
    /// Decided.
    Done(ProbeOutcome),
    /// Waiting for the next readiness event (`WouldBlock`, or nothing to do yet).
    Waiting,
    /// [`READ_BUDGET`] used up with data still coming: drive again on a later turn.
    Yielded,
}

/// The protocol spoken once connected, as plaintext in and out.
enum Session {
    Tcp,
    Http {
        request: Vec<u8>,
        written: usize,
        parser: ResponseParser,
    },
    Grpc(Box<HealthCheck>),
}

impl Session {
    /// Plaintext waiting to be sent.
    fn output(&self) -> &[u8] {
        match self {
            Session::Tcp => &[],
            Session::Http {
                request, written, ..
            } => &request[*written..],
            Session::Grpc(h) => h.output(),
        }
    }

    /// `n` bytes of [`Session::output`] were sent.
    fn sent(&mut self, n: usize) {
        match self {
            Session::Tcp => {}
            Session::Http { written, .. } => *written += n,
            Session::Grpc(h) => h.sent(n),
        }
    }

    /// Plaintext arrived; `Some` once the outcome is decided.
    fn feed(&mut self, data: &[u8]) -> Option<ProbeOutcome> {
        match self {
            Session::Tcp => None,
            Session::Http { parser, .. } => match parser.feed(data) {
                Progress::Done(outcome) => Some(outcome),
                Progress::NeedMore => None,
            },
            Session::Grpc(h) => h.feed(data),
        }
    }

    /// The peer closed its side.
    fn eof(&mut self) -> ProbeOutcome {
        match self {
            Session::Tcp => ProbeOutcome::Failure("connection closed".to_string()),
            Session::Http { parser, .. } => parser.finish(),
            Session::Grpc(h) => h.finish(),
        }
    }

    /// Reading failed: an HTTP response whose status arrived is still judged by it.
    fn read_failed(&mut self, err: &io::Error) -> ProbeError {
        match self {
            Session::Grpc(_) => ProbeError::GrpcIo {
                op: "read",
                reason: io_reason(err),
            },
            _ => ProbeError::Read {
                reason: io_reason(err),
            },
        }
    }

    fn write_failed(&self, reason: String) -> ProbeError {
        match self {
            Session::Grpc(_) => ProbeError::GrpcIo {
                op: "write",
                reason,
            },
            _ => ProbeError::Write { reason },
        }
    }

    fn judged_on_read_error(&mut self) -> Option<ProbeOutcome> {
        match self {
            Session::Http { parser, .. } if parser.status_known() => Some(parser.finish()),
            _ => None,
        }
    }
}

/// Where the attempt is.
enum Stage {
    /// Waiting for the helper thread to resolve the host.
    Resolving(Pending),
    /// Socket open, connect in progress (or done and talking).
    Connected {
        stream: TcpStream,
        connected: bool,
        tls: Option<Box<ClientConnection>>,
    },
    /// Decided, or cancelled; nothing registered.
    Finished,
}

/// One in-flight network probe attempt. Dropping it closes its descriptors, as
/// [`NetProbe::cancel`] does (a resolver's eventfd is deregistered first).
pub struct NetProbe {
    host: String,
    port: u16,
    addr: Option<SocketAddr>,
    scheme: HttpScheme,
    /// Boxed: the runtime keeps probes in flight in a map beside much smaller exec runs.
    tls_spec: Box<crate::config::spec::TlsSpec>,
    session: Box<Session>,
    stage: Stage,
    token: Token,
    /// Addresses of the host not tried yet: a failed connect moves on to the next, as Go's
    /// dialer does (`dialSerial`), and the first error is what the user sees.
    untried: std::collections::VecDeque<std::net::IpAddr>,
    first_error: Option<ProbeError>,
    /// When the attempt times out and its timeout as configured (see [`NetProbe::expire_at`]).
    deadline: Option<(std::time::Instant, std::time::Duration)>,
    /// HTTP only: what following a redirect needs.
    follow: Option<Box<Follow>>,
}

/// An HTTP attempt's request, kept to follow same-host redirects (kubelet `RedirectChecker`).
#[derive(Debug)]
struct Follow {
    /// The first request's host name: only redirects to it are followed.
    origin: String,
    path: String,
    headers: Vec<(String, String)>,
    /// Redirect responses seen so far.
    redirects: u32,
}

impl std::fmt::Debug for NetProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetProbe")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("addr", &self.addr)
            .field("stage", &self.stage_name())
            .finish()
    }
}

impl NetProbe {
    /// Start an attempt for a network action and register what it waits on under `token`.
    /// Failures that happen at once (EMFILE, unreachable network, a name the cache knows to
    /// be unresolvable…) come back as a finished outcome, with nothing left registered.
    pub fn start(
        action: &ProbeAction,
        registry: &Registry,
        token: Token,
    ) -> Result<NetProbe, ProbeOutcome> {
        let mut probe = NetProbe::prepare(action, token)?;
        probe.begin(registry)?;
        Ok(probe)
    }

    /// An `on_event` webhook's `POST` of `body` (the event as JSON) to `hook`, registered under
    /// `token`. A redirect is not followed (a POST is not sent again elsewhere): a 3xx is the
    /// answer, judged as a probe's status is (200–399 delivered).
    pub fn post(
        hook: &Webhook,
        body: &[u8],
        registry: &Registry,
        token: Token,
    ) -> Result<NetProbe, ProbeOutcome> {
        let mut probe = NetProbe {
            host: hook.host.clone(),
            port: hook.port,
            addr: None,
            scheme: if hook.https {
                HttpScheme::Https
            } else {
                HttpScheme::Http
            },
            tls_spec: Box::new(hook.tls.clone()),
            session: Box::new(Session::Http {
                request: build_post(&hook.host, hook.port, &hook.path, &hook.headers, body),
                written: 0,
                parser: ResponseParser::new(),
            }),
            stage: Stage::Finished,
            token,
            deadline: None,
            follow: None,
            untried: Default::default(),
            first_error: None,
        };
        probe.begin(registry)?;
        Ok(probe)
    }

    /// The attempt for `action`, nothing opened yet.
    fn prepare(action: &ProbeAction, token: Token) -> Result<NetProbe, ProbeOutcome> {
        let (host, port, session, scheme, tls_spec) = match action {
            ProbeAction::TcpSocket { host, port } => (
                host,
                *port,
                Session::Tcp,
                HttpScheme::Http,
                Default::default(),
            ),
            ProbeAction::HttpGet {
                host,
                port,
                path,
                headers,
                scheme,
                tls,
            } => (
                host,
                *port,
                Session::Http {
                    request: build_request(host, *port, path, headers),
                    written: 0,
                    parser: ResponseParser::new(),
                },
                *scheme,
                tls.clone(),
            ),
            ProbeAction::Grpc {
                host,
                port,
                service,
            } => (
                host,
                *port,
                Session::Grpc(Box::new(HealthCheck::new(
                    &super::http::authority(host, *port),
                    service,
                ))),
                HttpScheme::Http,
                Default::default(),
            ),
            ProbeAction::Exec { .. } => return Err(ProbeError::NotNetwork.outcome()),
        };
        let follow = match action {
            ProbeAction::HttpGet {
                host,
                path,
                headers,
                ..
            } => Some(Box::new(Follow {
                origin: host.clone(),
                path: path.clone(),
                headers: headers.clone(),
                redirects: 0,
            })),
            _ => None,
        };
        let probe = NetProbe {
            host: host.clone(),
            port,
            addr: None,
            scheme,
            tls_spec: Box::new(tls_spec),
            session: Box::new(session),
            stage: Stage::Finished,
            token,
            deadline: None,
            follow,
            untried: Default::default(),
            first_error: None,
        };
        Ok(probe)
    }

    /// Resolve the host (or take the cached answer) and connect.
    fn begin(&mut self, registry: &Registry) -> Result<(), ProbeOutcome> {
        self.untried.clear();
        self.first_error = None;
        match resolve::lookup(&self.host) {
            Lookup::Ready(ips) => self.connect_first(registry, ips).map_err(|e| e.outcome())?,
            Lookup::Failed(e) => return Err(e.outcome()),
            Lookup::Pending(pending) => {
                let fd = pending.fd();
                registry
                    .register(&mut SourceFd(&fd), self.token, Interest::READABLE)
                    .map_err(|e| {
                        ProbeError::Register {
                            addr: self.host.clone(),
                            reason: io_reason(&e),
                        }
                        .outcome()
                    })?;
                self.stage = Stage::Resolving(pending);
            }
        }
        Ok(())
    }

    /// After a decided HTTP exchange: follow a redirect to the first request's host name
    /// (new connection, same headers; `None` while it runs), fail after
    /// [`MAX_REDIRECTS`], and otherwise keep the outcome (a redirect elsewhere stays the
    /// parser's `Warning`, kubelet DoHTTPProbe).
    fn next_hop(&mut self, registry: &Registry, outcome: ProbeOutcome) -> Option<ProbeOutcome> {
        let Session::Http { parser, .. } = &*self.session else {
            return Some(outcome);
        };
        let (Some(location), Some(follow)) = (parser.location(), self.follow.as_deref_mut()) else {
            return Some(outcome);
        };
        let from = Target {
            https: self.scheme == HttpScheme::Https,
            host: self.host.clone(),
            port: self.port,
            path: follow.path.clone(),
        };
        let Some(to) = redirect_target(&from, location) else {
            return Some(outcome);
        };
        if !same_host(&to.host, &follow.origin) {
            return Some(outcome);
        }
        follow.redirects += 1;
        if follow.redirects >= MAX_REDIRECTS {
            return Some(ProbeOutcome::Failure(format!(
                "Get \"{}\": stopped after {MAX_REDIRECTS} redirects",
                to.url()
            )));
        }
        *self.session = Session::Http {
            request: build_request(&to.host, to.port, &to.path, &follow.headers),
            written: 0,
            parser: ResponseParser::new(),
        };
        follow.path = to.path;
        self.scheme = if to.https {
            HttpScheme::Https
        } else {
            HttpScheme::Http
        };
        self.host = to.host;
        self.port = to.port;
        self.addr = None;
        self.begin(registry).err()
    }

    /// The address being probed, once the host is resolved.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// What the attempt is waiting for, for a timeout message: `resolve`, `connect`,
    /// `tls handshake`, `response`, or `done`.
    pub fn stage_name(&self) -> &'static str {
        match &self.stage {
            Stage::Resolving(_) => "resolve",
            Stage::Connected {
                connected: false, ..
            } => "connect",
            Stage::Connected { tls: Some(t), .. } if t.is_handshaking() => "tls handshake",
            Stage::Connected { .. } => "response",
            Stage::Finished => "done",
        }
    }

    /// Tells the attempt when it times out (`started + timeout`, the core's deadline), so
    /// that [`NetProbe::expired`] can name the stage it was stuck in.
    pub fn expire_at(&mut self, started: std::time::Instant, timeout: std::time::Duration) {
        self.deadline = Some((crate::instant::saturating_add(started, timeout), timeout));
    }

    /// When the attempt times out, as set by [`NetProbe::expire_at`].
    pub fn expires_at(&self) -> Option<std::time::Instant> {
        self.deadline.map(|(at, _)| at)
    }

    /// At or after the deadline, while still resolving, connecting or in a TLS handshake:
    /// the failure message naming that stage. `None` otherwise — a probe waiting for its
    /// response is left to the core's own `probe timed out after …`.
    pub fn expired(&self, now: std::time::Instant) -> Option<String> {
        let (at, timeout) = self.deadline?;
        if now < at || matches!(self.stage_name(), "response" | "done") {
            return None;
        }
        Some(self.timeout_message(&crate::core::go_duration(timeout)))
    }

    /// The message for an attempt abandoned after `timeout` in its current stage, naming
    /// what it was waiting for (`tls: handshake timed out after 1s`).
    pub fn timeout_message(&self, timeout: &str) -> String {
        match self.stage_name() {
            "resolve" => format!("dial tcp: lookup {}: timed out after {timeout}", self.host),
            "connect" => format!(
                "dial tcp {}: connect: timed out after {timeout}",
                self.addr.map(|a| a.to_string()).unwrap_or_default()
            ),
            "tls handshake" => format!("tls: handshake timed out after {timeout}"),
            _ => format!("probe timed out after {timeout}"),
        }
    }

    /// Connects to the first of `ips` that does not fail at once; the rest wait in
    /// `untried` in case this one fails later.
    fn connect_first(
        &mut self,
        registry: &Registry,
        ips: Vec<std::net::IpAddr>,
    ) -> Result<(), ProbeError> {
        self.untried = ips.into();
        self.connect_next(registry)
    }

    fn connect_next(&mut self, registry: &Registry) -> Result<(), ProbeError> {
        while let Some(ip) = self.untried.pop_front() {
            match self.connect(registry, ip) {
                Ok(()) => return Ok(()),
                Err(e) => {
                    self.first_error.get_or_insert(e);
                }
            }
        }
        Err(self.first_error.take().unwrap_or(ProbeError::Lookup {
            host: self.host.clone(),
            reason: "no addresses".to_string(),
        }))
    }

    fn connect(&mut self, registry: &Registry, ip: std::net::IpAddr) -> Result<(), ProbeError> {
        let addr = SocketAddr::new(ip, self.port);
        self.addr = Some(addr);
        let mut stream = TcpStream::connect(addr).map_err(|e| dial_error(addr, &e))?;
        registry
            .register(
                &mut stream,
                self.token,
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| ProbeError::Register {
                addr: addr.to_string(),
                reason: io_reason(&e),
            })?;
        let tls = match self.scheme {
            HttpScheme::Http => None,
            HttpScheme::Https => match tls::client(&self.tls_spec, &self.host) {
                Ok(c) => Some(Box::new(c)),
                Err(e) => {
                    let _ = registry.deregister(&mut stream);
                    return Err(e);
                }
            },
        };
        self.stage = Stage::Connected {
            stream,
            connected: false,
            tls,
        };
        Ok(())
    }

    /// Drive the attempt on a readiness event for its token. Returns the outcome once the
    /// attempt is decided; its descriptors are then deregistered (they close on drop).
    /// Later calls return `None`.
    pub fn on_event(
        &mut self,
        registry: &Registry,
        event: &mio::event::Event,
    ) -> Option<ProbeOutcome> {
        // Only for the socket this attempt was already connecting when the event came (not
        // one opened below for a host name that just arrived).
        let hint = match self.stage {
            Stage::Connected { .. } => Readiness {
                writable: event.is_writable() && !event.is_error(),
                readable: event.is_readable() || event.is_read_closed() || event.is_error(),
            },
            _ => Readiness::default(),
        };
        if let Stage::Resolving(pending) = &self.stage {
            let answer = pending.take()?;
            let fd = pending.fd();
            if let Err(e) = registry.deregister(&mut SourceFd(&fd)) {
                log::debug!("probe {}: deregister resolver eventfd: {e}", self.host);
            }
            self.stage = Stage::Finished;
            let connected = answer.and_then(|ips| self.connect_first(registry, ips));
            if let Err(e) = connected {
                return Some(e.outcome());
            }
        }
        let outcome = match self.drive(hint) {
            Ok(Pumped::Waiting) => return None,
            Ok(Pumped::Yielded) => match self.rearm(registry) {
                Ok(()) => return None,
                Err(e) => e.outcome(),
            },
            Ok(Pumped::Done(outcome)) => {
                // A response naming a new location may be followed on a new socket under
                // the same token.
                let may_follow = self.follow.is_some()
                    && matches!(&*self.session, Session::Http { parser, .. } if parser.location().is_some());
                self.release(registry, may_follow);
                return self.next_hop(registry, outcome);
            }
            Err(e @ (ProbeError::Connect { .. } | ProbeError::Socket { .. }))
                if !self.untried.is_empty() =>
            {
                // This address failed to connect: try the next one on the same token.
                self.first_error.get_or_insert(e);
                self.release(registry, true);
                match self.connect_next(registry) {
                    Ok(()) => return None,
                    Err(e) => e.outcome(),
                }
            }
            Err(e @ (ProbeError::Connect { .. } | ProbeError::Socket { .. })) => {
                self.first_error.take().unwrap_or(e).outcome()
            }
            Err(e) => e.outcome(),
        };
        self.release(registry, false);
        Some(outcome)
    }

    /// After a yield: `EPOLL_CTL_MOD` on the socket, so that the kernel queues a new event for
    /// it while it is still readable or writable (see the module docs).
    fn rearm(&mut self, registry: &Registry) -> Result<(), ProbeError> {
        let Stage::Connected { stream, .. } = &mut self.stage else {
            return Ok(());
        };
        registry
            .reregister(stream, self.token, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| ProbeError::Register {
                addr: self.addr.map(|a| a.to_string()).unwrap_or_default(),
                reason: io_reason(&e),
            })
    }

    /// Abandon the attempt (the core's timeout fired): close everything.
    pub fn cancel(mut self, registry: &Registry) {
        self.release(registry, false);
    }

    /// Closes what the attempt has open. `reuse_token`: another socket of this attempt is
    /// about to be registered under the same token, so the old one is deregistered first
    /// (otherwise its close alone removes it, see the module docs).
    fn release(&mut self, registry: &Registry, reuse_token: bool) {
        match std::mem::replace(&mut self.stage, Stage::Finished) {
            Stage::Resolving(pending) => {
                let fd = pending.fd();
                if let Err(e) = registry.deregister(&mut SourceFd(&fd)) {
                    log::debug!("probe {}: deregister resolver eventfd: {e}", self.host);
                }
            }
            Stage::Connected { mut stream, .. } => {
                if reuse_token && let Err(e) = registry.deregister(&mut stream) {
                    log::debug!("probe {}: deregister: {e}", self.host);
                }
            }
            Stage::Finished => {}
        }
    }

    fn drive(&mut self, hint: Readiness) -> Result<Pumped, ProbeError> {
        let Some(addr) = self.addr else {
            return Ok(Pumped::Waiting);
        };
        let Stage::Connected {
            stream,
            connected,
            tls,
        } = &mut self.stage
        else {
            return Ok(Pumped::Waiting);
        };
        if !*connected {
            if !check_connected(stream, addr, hint.writable)? {
                return Ok(Pumped::Waiting);
            }
            *connected = true;
        }
        if let Session::Tcp = *self.session {
            return Ok(Pumped::Done(ProbeOutcome::Success(format!(
                "connected to {addr}"
            ))));
        }
        match tls {
            None => pump_plain(stream, &mut self.session, hint.readable),
            Some(conn) => pump_tls(stream, conn, &mut self.session),
        }
    }
}

/// What the event being handled reported for the attempt's socket (nothing for any other).
#[derive(Debug, Default, Clone, Copy)]
struct Readiness {
    /// Writable without an error: connected, once `SO_ERROR` agrees.
    writable: bool,
    /// Data, the peer's close, or an error to read.
    readable: bool,
}

/// Ok(true) once connected, Ok(false) while the connect is in progress. `writable`: the event
/// reported the socket writable (see the module docs), so no `getpeername` is needed.
fn check_connected(
    stream: &mut TcpStream,
    addr: SocketAddr,
    writable: bool,
) -> Result<bool, ProbeError> {
    match stream.take_error() {
        Ok(None) => {}
        Ok(Some(e)) | Err(e) => return Err(dial_error(addr, &e)),
    }
    if writable {
        return Ok(true);
    }
    match stream.peer_addr() {
        Ok(_) => Ok(true),
        Err(e)
            if e.kind() == io::ErrorKind::NotConnected || e.kind() == io::ErrorKind::WouldBlock =>
        {
            Ok(false)
        }
        Err(e) => Err(dial_error(addr, &e)),
    }
}

/// Plaintext over the socket: write what the session has, read until it decides, EOF,
/// `WouldBlock` or [`READ_BUDGET`]; repeat while reading made the session produce more output
/// (an HTTP/2 SETTINGS acknowledgement). A write error is reported only if reading decides
/// nothing: a server may answer (and close) before taking the whole request. `readable`: the
/// event reported something to read; without it (the connect just completed) nothing is read
/// unless a write failed, since what arrives later queues its own event.
fn pump_plain(
    stream: &mut TcpStream,
    session: &mut Session,
    readable: bool,
) -> Result<Pumped, ProbeError> {
    let mut buf = [0u8; READ_CHUNK];
    let mut write_error = None;
    let mut read_now = readable;
    let mut budget = READ_BUDGET;
    loop {
        while write_error.is_none() && !session.output().is_empty() {
            match stream.write(session.output()) {
                Ok(0) => write_error = Some(session.write_failed("connection closed".to_string())),
                Ok(n) => session.sent(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => write_error = Some(session.write_failed(io_reason(&e))),
            }
        }
        if budget == 0 {
            // Read nothing more in this event; a write error is met again on the next.
            return Ok(Pumped::Yielded);
        }
        if !read_now && write_error.is_none() {
            return Ok(Pumped::Waiting);
        }
        read_now = true;
        let mut answer_due = false;
        while budget > 0 {
            match stream.read(&mut buf[..READ_CHUNK.min(budget)]) {
                Ok(0) => return Ok(Pumped::Done(session.eof())),
                Ok(n) => {
                    budget -= n;
                    if let Some(outcome) = session.feed(&buf[..n]) {
                        return Ok(Pumped::Done(outcome));
                    }
                    answer_due |= !session.output().is_empty();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if let Some(outcome) = session.judged_on_read_error() {
                        return Ok(Pumped::Done(outcome));
                    }
                    return Err(write_error.unwrap_or_else(|| session.read_failed(&e)));
                }
            }
        }
        if budget == 0 {
            continue; // send what is due, then yield
        }
        if !answer_due || write_error.is_some() {
            return write_error.map_or(Ok(Pumped::Waiting), Err);
        }
    }
}

/// The same over TLS: the session's plaintext goes into rustls, rustls' records go to the
/// socket, records from the socket are processed and their plaintext fed to the session —
/// until `WouldBlock`, a decision, or [`READ_BUDGET`] bytes of records read in this event.
fn pump_tls(
    stream: &mut TcpStream,
    conn: &mut ClientConnection,
    session: &mut Session,
) -> Result<Pumped, ProbeError> {
    let mut buf = [0u8; READ_CHUNK];
    let tls_error = |e: &rustls::Error| ProbeError::Tls {
        reason: tls::describe(e),
    };
    let mut budget = READ_BUDGET;
    loop {
        // Plaintext into the session (buffered until the handshake is done).
        while !session.output().is_empty() {
            match conn.writer().write(session.output()) {
                Ok(0) => break, // rustls' buffer is full: wait for the socket
                Ok(n) => session.sent(n),
                Err(e) => return Err(session.write_failed(io_reason(&e))),
            }
        }
        // Records out.
        while conn.wants_write() {
            match conn.write_tls(stream) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(if conn.is_handshaking() {
                        ProbeError::Tls {
                            reason: format!("handshake: write: {}", io_reason(&e)),
                        }
                    } else {
                        session.write_failed(io_reason(&e))
                    });
                }
            }
        }
        if budget == 0 {
            return Ok(Pumped::Yielded);
        }
        // Records in.
        let eof = match conn.read_tls(&mut Budgeted {
            inner: stream,
            left: &mut budget,
        }) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Pumped::Waiting),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                if conn.is_handshaking() {
                    return Err(ProbeError::Tls {
                        reason: format!("handshake: read: {}", io_reason(&e)),
                    });
                }
                if let Some(outcome) = session.judged_on_read_error() {
                    return Ok(Pumped::Done(outcome));
                }
                return Err(session.read_failed(&e));
            }
        };
        let state = match conn.process_new_packets() {
            Ok(state) => state,
            Err(e) => {
                // Send our alert if the socket takes it; the probe has failed either way.
                let _ = conn.write_tls(stream);
                return Err(tls_error(&e));
            }
        };
        let closed = state.peer_has_closed();
        if (eof || closed) && conn.is_handshaking() {
            return Err(ProbeError::Tls {
                reason: "connection closed during handshake".to_string(),
            });
        }
        // Plaintext out of rustls.
        loop {
            match conn.reader().read(&mut buf) {
                Ok(0) => return Ok(Pumped::Done(session.eof())),
                Ok(n) => {
                    if let Some(outcome) = session.feed(&buf[..n]) {
                        return Ok(Pumped::Done(outcome));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // EOF without close_notify: the server closed, judge what arrived.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    return Ok(Pumped::Done(session.eof()));
                }
                Err(e) => return Err(session.read_failed(&e)),
            }
        }
        if eof || closed {
            return Ok(Pumped::Done(session.eof()));
        }
    }
}

/// The socket as rustls reads it, limited to what is left of the event's [`READ_BUDGET`]
/// (rustls asks for up to its whole buffer at once).
struct Budgeted<'a> {
    inner: &'a mut TcpStream,
    left: &'a mut usize,
}

impl Read for Budgeted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min(*self.left);
        let n = self.inner.read(&mut buf[..want])?;
        *self.left -= n;
        Ok(n)
    }
}

/// Go words a failed `socket(2)` and a failed `connect(2)` differently; resource exhaustion
/// can only come from the former.
fn dial_error(addr: SocketAddr, err: &io::Error) -> ProbeError {
    let socket_errors = [
        libc::EMFILE,
        libc::ENFILE,
        libc::ENOBUFS,
        libc::ENOMEM,
        libc::EAFNOSUPPORT,
    ];
    let addr_text = addr.to_string();
    let reason = io_reason(err);
    if err
        .raw_os_error()
        .is_some_and(|code| socket_errors.contains(&code))
    {
        ProbeError::Socket {
            addr: addr_text,
            reason,
        }
    } else {
        ProbeError::Connect {
            addr: addr_text,
            reason,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::net::{TcpListener, TcpStream as StdStream};
    use std::sync::mpsc;
    use std::thread;
    use std::time::{Duration, Instant};

    use mio::{Events, Poll};

    const TOKEN: Token = Token(7);
    const DEADLINE: Duration = Duration::from_secs(10);

    fn http(port: u16, path: &str, headers: &[(&str, &str)]) -> ProbeAction {
        ProbeAction::HttpGet {
            host: "127.0.0.1".to_string(),
            port,
            path: path.to_string(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            scheme: HttpScheme::Http,
            tls: Default::default(),
        }
    }

    fn tcp(host: &str, port: u16) -> ProbeAction {
        ProbeAction::TcpSocket {
            host: host.to_string(),
            port,
        }
    }

    /// Runs one attempt to completion on a real Poll, failing the test after a deadline.
    fn run(action: &ProbeAction) -> ProbeOutcome {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(16);
        let mut probe = match NetProbe::start(action, poll.registry(), TOKEN) {
            Ok(p) => p,
            Err(outcome) => return outcome,
        };
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(100));
            for event in events.iter() {
                assert_eq!(event.token(), TOKEN);
                if let Some(outcome) = probe.on_event(poll.registry(), event) {
                    return outcome;
                }
            }
        }
        panic!("probe did not finish within {DEADLINE:?}");
    }

    /// A port with nothing listening: bind an ephemeral port, then close it.
    fn free_port() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    /// A port of 127.0.0.1 that refuses connections for as long as the returned socket
    /// lives: it is bound but never listens, so no other test's listener can take the port
    /// meanwhile (connect(2) to it gets ECONNREFUSED).
    fn refusing_port() -> (std::os::fd::OwnedFd, u16) {
        use nix::sys::socket::{
            AddressFamily, SockFlag, SockType, SockaddrIn, bind, getsockname, socket,
        };
        use std::os::fd::AsRawFd;
        let fd = socket(
            AddressFamily::Inet,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
        let port = getsockname::<SockaddrIn>(fd.as_raw_fd()).unwrap().port();
        (fd, port)
    }

    /// Reads one request head (through the blank line) from a test connection.
    fn read_head(conn: &StdStream) -> String {
        let mut reader = BufReader::new(conn);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap() == 0 {
                break;
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        head
    }

    /// A server that answers one request with `response` and closes; returns its port and
    /// a receiver for the request head it saw.
    fn serve_once(response: Vec<u8>) -> (u16, mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(DEADLINE)).unwrap();
            let head = read_head(&conn);
            // The probe may hang up once it has decided (e.g. headers too large).
            let _ = conn.write_all(&response);
            let _ = tx.send(head);
        });
        (port, rx)
    }

    fn respond(response: &str) -> ProbeOutcome {
        let (port, _rx) = serve_once(response.as_bytes().to_vec());
        run(&http(port, "/healthz", &[]))
    }

    #[test]
    fn a_response_sent_at_accept_before_the_request_is_read_decides_the_probe() {
        // The answer may be queued before the probe's connect event is read, between that
        // event and the request going out, or after: each case must reach the parser (the
        // probe reads only when an event reports data).
        for _ in 0..20 {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let server = thread::spawn(move || {
                let (mut conn, _) = listener.accept().unwrap();
                conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                    .unwrap();
                // Held open, unread, until the probe has decided.
                conn.set_read_timeout(Some(DEADLINE)).unwrap();
                let _ = read_head(&conn);
            });
            let outcome = run(&http(port, "/healthz", &[]));
            assert!(matches!(outcome, ProbeOutcome::Success(_)), "{outcome:?}");
            server.join().unwrap();
        }
    }

    #[test]
    fn http_200_is_success_with_body() {
        assert_eq!(
            respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
            ProbeOutcome::Success("HTTP 200 OK, body: \"ok\"".to_string())
        );
    }

    #[test]
    fn http_redirect_to_another_host_is_a_warning_without_following() {
        assert_eq!(
            respond(
                "HTTP/1.1 301 Moved Permanently\r\nLocation: http://localhost:1/\r\nContent-Length: 0\r\n\r\n"
            ),
            ProbeOutcome::Warning("Probe terminated redirects: HTTP 301 Moved Permanently".into())
        );
    }

    #[test]
    fn http_redirect_to_the_same_host_is_followed_and_judged_by_its_target() {
        // Kubelet `RedirectChecker`: same host name (another port is fine) is followed, so a
        // 302 to a failing page is a failure, not a healthy redirect.
        let (target, seen) =
            serve_once(b"HTTP/1.1 503 Unavailable\r\nContent-Length: 4\r\n\r\ndown".to_vec());
        let (port, _rx) = serve_once(
            format!(
                "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{target}/down?x=1\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes(),
        );
        let outcome = run(&http(port, "/healthz", &[("X-Probe", "1")]));
        assert_eq!(
            outcome,
            ProbeOutcome::Failure(
                "HTTP probe failed with statuscode: 503, body: \"down\"".to_string()
            )
        );
        let head = seen.recv_timeout(DEADLINE).unwrap();
        assert!(head.starts_with("GET /down?x=1 HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("Host: 127.0.0.1:{target}\r\n")),
            "{head}"
        );
        assert!(
            head.contains("X-Probe: 1\r\n"),
            "headers are sent again: {head}"
        );
    }

    #[test]
    fn http_redirect_loop_fails_after_ten_redirects() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let served = thread::spawn(move || {
            let mut n = 0;
            listener.set_nonblocking(false).unwrap();
            while n < MAX_REDIRECTS {
                let (mut conn, _) = listener.accept().unwrap();
                read_head(&conn);
                let _ = conn.write_all(
                    b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n",
                );
                n += 1;
            }
            n
        });
        assert_eq!(
            run(&http(port, "/healthz", &[])),
            ProbeOutcome::Failure(format!(
                "Get \"http://127.0.0.1:{port}/again\": stopped after 10 redirects"
            ))
        );
        assert_eq!(
            served.join().unwrap(),
            MAX_REDIRECTS,
            "ten requests were made"
        );
    }

    #[test]
    fn http_404_is_failure_with_status_code() {
        assert_eq!(
            respond("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"),
            ProbeOutcome::Failure(
                "HTTP probe failed with statuscode: 404, body: \"not found\"".to_string()
            )
        );
    }

    #[test]
    fn http_503_close_delimited_is_failure_with_body() {
        assert_eq!(
            respond("HTTP/1.0 503 Service Unavailable\r\n\r\ndraining"),
            ProbeOutcome::Failure(
                "HTTP probe failed with statuscode: 503, body: \"draining\"".to_string()
            )
        );
    }

    #[test]
    fn http_response_trickled_byte_by_byte_is_assembled() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_nodelay(true).unwrap();
            conn.set_read_timeout(Some(DEADLINE)).unwrap();
            let _head = read_head(&conn);
            let resp =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nyes\r\n0\r\n\r\n";
            for b in resp {
                if conn.write_all(&[*b]).is_err() {
                    return;
                }
            }
            // Hold the connection open: the chunk terminator alone must finish the probe.
            let mut rest = Vec::new();
            let _ = conn.read_to_end(&mut rest);
        });
        assert_eq!(
            run(&http(port, "/", &[])),
            ProbeOutcome::Success("HTTP 200 OK, body: \"yes\"".to_string())
        );
    }

    #[test]
    fn http_close_mid_headers_fails() {
        assert_eq!(
            respond("HTTP/1.1 200 OK\r\nContent-Ty"),
            ProbeOutcome::Failure(
                "HTTP probe failed: connection closed before end of response headers".to_string()
            )
        );
    }

    #[test]
    fn http_close_without_answer_fails() {
        assert_eq!(
            respond(""),
            ProbeOutcome::Failure(
                "HTTP probe failed: connection closed before response".to_string()
            )
        );
    }

    #[test]
    fn http_one_mebibyte_of_headers_fails() {
        let mut resp = b"HTTP/1.1 200 OK\r\n".to_vec();
        while resp.len() < 1024 * 1024 {
            resp.extend_from_slice(b"X-Filler: 0123456789abcdef0123456789abcdef\r\n");
        }
        let (port, _rx) = serve_once(resp);
        assert_eq!(
            run(&http(port, "/", &[])),
            ProbeOutcome::Failure("HTTP probe failed: response headers too large".to_string())
        );
    }

    #[test]
    fn http_refused_port_fails_like_kubelet() {
        let port = free_port();
        assert_eq!(
            run(&http(port, "/", &[])),
            ProbeOutcome::Failure(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    #[test]
    fn http_request_carries_exact_default_and_custom_headers() {
        let (port, rx) = serve_once(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec());
        let outcome = run(&http(
            port,
            "/ready?x=1",
            &[("X-Token", "abc"), ("Accept", "text/plain")],
        ));
        assert_eq!(
            outcome,
            ProbeOutcome::Success("HTTP 204 No Content".to_string())
        );
        let head = rx.recv_timeout(DEADLINE).unwrap();
        assert_eq!(
            head,
            format!(
                "GET /ready?x=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: vigil-probe/{}\r\nAccept: text/plain\r\nConnection: close\r\nX-Token: abc\r\n\r\n",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn http_configured_host_and_user_agent_are_sent_verbatim() {
        let (port, rx) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_vec());
        let outcome = run(&http(
            port,
            "/",
            &[("Host", "app.internal"), ("User-Agent", "mine/2")],
        ));
        assert_eq!(outcome, ProbeOutcome::Success("HTTP 200 OK".to_string()));
        let head = rx.recv_timeout(DEADLINE).unwrap();
        assert!(head.contains("\r\nHost: app.internal\r\n"), "{head}");
        assert!(head.contains("\r\nUser-Agent: mine/2\r\n"), "{head}");
        assert_eq!(head.matches("Host:").count(), 1, "{head}");
        assert!(!head.contains("vigil-probe"), "{head}");
    }

    #[test]
    fn http_silent_server_stays_pending_until_cancelled() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(DEADLINE)).unwrap();
            let _head = read_head(&conn);
            // Never answer; report whether the probe's close arrives as EOF.
            let mut rest = Vec::new();
            let eof = (&conn).read_to_end(&mut rest).is_ok();
            let _ = tx.send(eof);
        });

        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(16);
        let mut probe = NetProbe::start(&http(port, "/", &[]), poll.registry(), TOKEN).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
            for event in events.iter() {
                assert_eq!(
                    probe.on_event(poll.registry(), event),
                    None,
                    "silent server must not decide"
                );
            }
        }
        probe.cancel(poll.registry());
        assert_eq!(
            rx.recv_timeout(DEADLINE),
            Ok(true),
            "server did not see the probe close"
        );
        crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
        assert!(events.is_empty(), "cancelled probe still registered");
    }

    #[test]
    fn tcp_connect_succeeds() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            run(&tcp("127.0.0.1", port)),
            ProbeOutcome::Success(format!("connected to 127.0.0.1:{port}"))
        );
    }

    #[test]
    fn tcp_localhost_resolves_to_ipv4_loopback() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            run(&tcp("localhost", port)),
            ProbeOutcome::Success(format!("connected to 127.0.0.1:{port}"))
        );
    }

    #[test]
    #[ignore = "needs an IPv6 loopback (::1)"]
    fn tcp_ipv6_literal_is_supported() {
        let listener =
            TcpListener::bind("[::1]:0").expect("this test needs an IPv6 loopback (::1)");
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            run(&tcp("::1", port)),
            ProbeOutcome::Success(format!("connected to [::1]:{port}"))
        );
    }

    #[test]
    fn tcp_refused_fails_like_kubelet() {
        let port = free_port();
        assert_eq!(
            run(&tcp("127.0.0.1", port)),
            ProbeOutcome::Failure(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    /// A name other than `localhost` that /etc/hosts maps to 127.0.0.1 (containers list
    /// their host name), so the lookup goes through the resolver thread; `localhost` (the
    /// fast path) if there is none.
    fn loopback_name_in_etc_hosts() -> String {
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        hosts
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .filter_map(|l| {
                let mut words = l.split_whitespace();
                (words.next() == Some("127.0.0.1"))
                    .then(|| words.find(|w| !w.eq_ignore_ascii_case("localhost")))
                    .flatten()
                    .map(str::to_string)
            })
            .next()
            .unwrap_or_else(|| "localhost".to_string())
    }

    #[test]
    fn host_name_from_etc_hosts_is_resolved_off_the_loop_and_connected() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let outcome = run(&tcp(&loopback_name_in_etc_hosts(), port));
        assert!(
            matches!(&outcome, ProbeOutcome::Success(m) if m.ends_with(&format!(":{port}"))),
            "{outcome:?}"
        );
    }

    /// Runs an attempt whose host resolved to `ips`, as the resolver would hand them over.
    fn run_with_addresses(action: &ProbeAction, ips: Vec<std::net::IpAddr>) -> ProbeOutcome {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(16);
        let mut probe = NetProbe::prepare(action, TOKEN).unwrap();
        if let Err(e) = probe.connect_first(poll.registry(), ips) {
            return e.outcome();
        }
        let deadline = Instant::now() + DEADLINE;
        while Instant::now() < deadline {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(100));
            for event in events.iter() {
                if let Some(outcome) = probe.on_event(poll.registry(), event) {
                    return outcome;
                }
            }
        }
        panic!("probe did not finish within {DEADLINE:?}");
    }

    #[test]
    fn refused_address_of_a_name_falls_through_to_the_next_like_go() {
        // 127.0.0.1 of the same port must refuse: held bound (not listening) for the test,
        // so a listener of a test running beside this one cannot answer there.
        let (_refusing, port) = refusing_port();
        let _listener = TcpListener::bind(("127.0.0.2", port)).unwrap();
        let ips = vec!["127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap()];
        assert_eq!(
            run_with_addresses(&tcp("app.internal", port), ips),
            ProbeOutcome::Success(format!("connected to 127.0.0.2:{port}"))
        );
    }

    #[test]
    fn every_address_refused_reports_the_first_error() {
        let (_refusing, port) = refusing_port();
        let ips = vec!["127.0.0.1".parse().unwrap(), "127.0.0.3".parse().unwrap()];
        assert_eq!(
            run_with_addresses(&tcp("app.internal", port), ips),
            ProbeOutcome::Failure(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }

    #[test]
    fn unresolvable_host_fails_naming_it() {
        let outcome = run(&tcp("no-such-host.invalid", 80));
        assert!(
            matches!(&outcome, ProbeOutcome::Failure(m) if m.starts_with("dial tcp: lookup no-such-host.invalid: ")),
            "{outcome:?}"
        );
    }

    #[test]
    fn exec_action_is_not_a_network_probe() {
        let poll = Poll::new().unwrap();
        let action = ProbeAction::Exec {
            command: vec!["true".to_string()],
        };
        assert!(NetProbe::start(&action, poll.registry(), TOKEN).is_err());
    }

    // ---- HTTPS against `openssl s_server`, certificates made by rcgen ----------------------

    /// Certificates for the TLS tests: a CA, a leaf for 127.0.0.1/localhost signed by it, an
    /// expired leaf signed by it, and an unrelated CA.
    struct Pki {
        dir: tempfile::TempDir,
    }

    impl Pki {
        fn new() -> Pki {
            use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
            let dir = tempfile::tempdir().unwrap();
            let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text);
            let ca_key = KeyPair::generate().unwrap();
            let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca_params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "vigil test CA");
            ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let ca_cert = ca_params.self_signed(&ca_key).unwrap();
            write("ca.pem", ca_cert.pem()).unwrap();
            let issuer = Issuer::new(ca_params, ca_key);
            let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
            let leaf_key = KeyPair::generate().unwrap();
            let leaf = CertificateParams::new(names.clone())
                .unwrap()
                .signed_by(&leaf_key, &issuer)
                .unwrap();
            write("leaf.pem", leaf.pem()).unwrap();
            write("leaf.key", leaf_key.serialize_pem()).unwrap();
            let mut old = CertificateParams::new(names).unwrap();
            old.not_before = rcgen::date_time_ymd(2019, 1, 1);
            old.not_after = rcgen::date_time_ymd(2020, 1, 1);
            let expired = old.signed_by(&leaf_key, &issuer).unwrap();
            write("expired.pem", expired.pem()).unwrap();
            let other_key = KeyPair::generate().unwrap();
            let mut other = CertificateParams::new(Vec::<String>::new()).unwrap();
            other
                .distinguished_name
                .push(rcgen::DnType::CommonName, "another CA");
            other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            write("other-ca.pem", other.self_signed(&other_key).unwrap().pem()).unwrap();
            // What `openssl req -x509 -subj /CN=localhost` makes: self-signed, CA:TRUE, a
            // common name and no subject alternative name; with the leaf's key.
            let mut own = CertificateParams::new(Vec::<String>::new()).unwrap();
            own.distinguished_name
                .push(rcgen::DnType::CommonName, "localhost");
            own.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let own = own.self_signed(&leaf_key).unwrap().pem();
            write("self-signed.pem", own.clone()).unwrap();
            let bundle = std::fs::read_to_string(dir.path().join("other-ca.pem")).unwrap() + &own;
            write("bundle-with-self-signed.pem", bundle).unwrap();
            Pki { dir }
        }

        fn path(&self, name: &str) -> std::path::PathBuf {
            self.dir.path().join(name)
        }
    }

    /// `openssl s_server -www` on an ephemeral loopback port with `cert`; killed on drop.
    struct OpensslServer {
        child: std::process::Child,
        port: u16,
    }

    impl OpensslServer {
        fn start(pki: &Pki, cert: &str) -> OpensslServer {
            let mut child = std::process::Command::new("openssl")
                .args(["s_server", "-accept", "127.0.0.1:0", "-www", "-cert"])
                .arg(pki.path(cert))
                .arg("-key")
                .arg(pki.path("leaf.key"))
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect(
                    "the openssl CLI is needed for the HTTPS tests (tests/run-all.sh installs it)",
                );
            let stdout = child.stdout.take().unwrap();
            let mut lines = BufReader::new(stdout).lines();
            let port = loop {
                let line = lines.next().expect("s_server exited").unwrap();
                if let Some(addr) = line.strip_prefix("ACCEPT ") {
                    break addr.rsplit(':').next().unwrap().parse().unwrap();
                }
            };
            // Keep draining its output so it never blocks on a full pipe.
            thread::spawn(move || for _ in lines {});
            OpensslServer { child, port }
        }
    }

    impl Drop for OpensslServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn https(
        port: u16,
        ca_file: Option<std::path::PathBuf>,
        server_name: Option<&str>,
    ) -> ProbeAction {
        ProbeAction::HttpGet {
            host: "127.0.0.1".to_string(),
            port,
            path: "/".to_string(),
            headers: vec![],
            scheme: HttpScheme::Https,
            tls: crate::config::spec::TlsSpec {
                ca_file,
                server_name: server_name.map(str::to_string),
            },
        }
    }

    fn is_success(outcome: &ProbeOutcome) -> bool {
        matches!(outcome, ProbeOutcome::Success(m) if m.starts_with("HTTP 200"))
    }

    #[test]
    fn https_with_unknown_certificate_succeeds_without_verification_like_the_kubelet() {
        let pki = Pki::new();
        let server = OpensslServer::start(&pki, "leaf.pem");
        let outcome = run(&https(server.port, None, None));
        assert!(is_success(&outcome), "{outcome:?}");
        let expired = OpensslServer::start(&pki, "expired.pem");
        let outcome = run(&https(expired.port, None, None));
        assert!(is_success(&outcome), "{outcome:?}");
    }

    #[test]
    fn https_verified_against_ca_file_succeeds_for_ip_and_name() {
        let pki = Pki::new();
        let server = OpensslServer::start(&pki, "leaf.pem");
        let outcome = run(&https(server.port, Some(pki.path("ca.pem")), None));
        assert!(is_success(&outcome), "{outcome:?}");
        let outcome = run(&https(
            server.port,
            Some(pki.path("ca.pem")),
            Some("localhost"),
        ));
        assert!(is_success(&outcome), "{outcome:?}");
    }

    #[test]
    fn https_expired_certificate_fails_when_verifying() {
        let pki = Pki::new();
        let server = OpensslServer::start(&pki, "expired.pem");
        assert_eq!(
            run(&https(server.port, Some(pki.path("ca.pem")), None)),
            ProbeOutcome::Failure("tls: certificate expired".to_string())
        );
    }

    #[test]
    fn https_certificate_from_another_ca_or_for_another_name_fails() {
        let pki = Pki::new();
        let server = OpensslServer::start(&pki, "leaf.pem");
        assert_eq!(
            run(&https(server.port, Some(pki.path("other-ca.pem")), None)),
            ProbeOutcome::Failure("tls: certificate signed by unknown authority".to_string())
        );
        assert_eq!(
            run(&https(
                server.port,
                Some(pki.path("ca.pem")),
                Some("db.internal")
            )),
            ProbeOutcome::Failure(
                "tls: certificate is valid for localhost, 127.0.0.1, not db.internal".to_string()
            )
        );
    }

    #[test]
    fn https_pinned_self_signed_ca_certificate_is_accepted_alone_or_in_a_bundle() {
        let pki = Pki::new();
        let server = OpensslServer::start(&pki, "self-signed.pem");
        for file in ["self-signed.pem", "bundle-with-self-signed.pem"] {
            let outcome = run(&https(server.port, Some(pki.path(file)), None));
            assert!(is_success(&outcome), "{file}: {outcome:?}");
        }
    }

    #[test]
    fn https_self_signed_certificate_that_ca_file_does_not_hold_fails_saying_so() {
        let pki = Pki::new();
        let server = OpensslServer::start(&pki, "self-signed.pem");
        assert_eq!(
            run(&https(server.port, Some(pki.path("ca.pem")), None)),
            ProbeOutcome::Failure(
                "tls: self-signed certificate that ca_file does not hold (put this very \
                 certificate in it)"
                    .to_string()
            )
        );
    }

    #[test]
    fn https_against_a_plain_http_server_fails_as_tls() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            let mut sink = Vec::new();
            let _ = conn.read_to_end(&mut sink);
        });
        let outcome = run(&https(port, None, None));
        assert!(
            matches!(&outcome, ProbeOutcome::Failure(m) if m.starts_with("tls: ")),
            "{outcome:?}"
        );
    }

    #[test]
    fn https_server_closing_mid_handshake_fails_naming_the_handshake() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            // Read the whole ClientHello record (so closing sends FIN, not RST), then close.
            let mut head = [0u8; 5];
            conn.read_exact(&mut head).unwrap();
            let mut body = vec![0u8; usize::from(u16::from_be_bytes([head[3], head[4]]))];
            conn.read_exact(&mut body).unwrap();
        });
        assert_eq!(
            run(&https(port, None, None)),
            ProbeOutcome::Failure("tls: connection closed during handshake".to_string())
        );
    }

    #[test]
    fn https_server_stalling_mid_handshake_stays_pending_and_times_out_as_handshake() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            // Read the ClientHello, then say nothing until the probe hangs up.
            let mut sink = Vec::new();
            let _ = conn.read_to_end(&mut sink);
        });
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(16);
        let mut probe = NetProbe::start(&https(port, None, None), poll.registry(), TOKEN).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
            for event in events.iter() {
                assert_eq!(probe.on_event(poll.registry(), event), None);
            }
        }
        assert_eq!(probe.stage_name(), "tls handshake");
        let started = Instant::now();
        probe.expire_at(started, Duration::from_secs(1));
        assert_eq!(probe.expired(started), None);
        assert_eq!(
            probe.expired(started + Duration::from_secs(1)).as_deref(),
            Some("tls: handshake timed out after 1s")
        );
        probe.cancel(poll.registry());
    }

    // ---- gRPC against grpcio's health service, and hand-made HTTP/2 peers ----------------

    /// `tests/servers/grpc_health_server.py` (grpcio + grpcio-health-checking); killed on
    /// drop. Panics with the install hint when the Python packages are missing.
    struct GrpcServer {
        child: std::process::Child,
        port: u16,
    }

    impl GrpcServer {
        fn start(statuses: &[&str]) -> GrpcServer {
            let script = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/servers/grpc_health_server.py"
            );
            let mut child = std::process::Command::new("python3")
                .arg(script)
                .args(statuses)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .expect("python3 is needed for the gRPC probe tests");
            let stdout = child.stdout.take().unwrap();
            let mut lines = BufReader::new(stdout).lines();
            let port = match lines.next() {
                Some(Ok(line)) if line.starts_with("PORT ") => line[5..].parse().unwrap(),
                other => panic!(
                    "the gRPC health server did not start ({other:?}); it needs \
                     `pip install grpcio grpcio-health-checking` (tests/run-all.sh does it)"
                ),
            };
            thread::spawn(move || for _ in lines {});
            GrpcServer { child, port }
        }
    }

    impl Drop for GrpcServer {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    fn grpc(port: u16, service: &str) -> ProbeAction {
        ProbeAction::Grpc {
            host: "127.0.0.1".to_string(),
            port,
            service: service.to_string(),
        }
    }

    #[test]
    #[ignore = "needs python3 with grpcio and grpcio-health-checking (tests/run-all.sh installs them)"]
    fn grpc_server_serving_is_success_and_not_serving_is_failure() {
        let server = GrpcServer::start(&["web=NOT_SERVING", "db=SERVING"]);
        assert_eq!(
            run(&grpc(server.port, "")),
            ProbeOutcome::Success("SERVING".to_string())
        );
        assert_eq!(
            run(&grpc(server.port, "db")),
            ProbeOutcome::Success("SERVING".to_string())
        );
        assert_eq!(
            run(&grpc(server.port, "web")),
            ProbeOutcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".to_string())
        );
    }

    #[test]
    #[ignore = "needs python3 with grpcio and grpcio-health-checking (tests/run-all.sh installs them)"]
    fn grpc_server_unknown_service_fails_with_the_rpc_error() {
        let server = GrpcServer::start(&[]);
        let outcome = run(&grpc(server.port, "nosuch"));
        assert!(
            matches!(&outcome, ProbeOutcome::Failure(m)
                if m.starts_with("gRPC probe failed: rpc error: code = NotFound desc = ")),
            "{outcome:?}"
        );
    }

    #[test]
    #[ignore = "needs python3 with grpcio and grpcio-health-checking (tests/run-all.sh installs them)"]
    fn grpc_server_many_checks_in_a_row_all_succeed() {
        // Fresh connections each time, as the probe makes them; exercises HPACK state per
        // connection and grpcio's SETTINGS/WINDOW_UPDATE/PING traffic.
        let server = GrpcServer::start(&[]);
        for _ in 0..20 {
            assert_eq!(
                run(&grpc(server.port, "")),
                ProbeOutcome::Success("SERVING".to_string())
            );
        }
    }

    #[test]
    fn grpc_against_an_http1_server_fails_without_hanging() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
        });
        let outcome = run(&grpc(port, ""));
        assert!(
            matches!(&outcome, ProbeOutcome::Failure(m) if m.starts_with("gRPC probe failed: ")),
            "{outcome:?}"
        );
    }

    /// An HTTP/2 peer that reads the request, sends SETTINGS and response HEADERS, then
    /// either closes or stalls (keeps the connection open until the probe hangs up).
    fn h2_server_stopping_mid_stream(close: bool) -> u16 {
        use super::super::h2 as frames;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut preface = [0u8; 24];
            conn.read_exact(&mut preface).unwrap();
            let mut out = Vec::new();
            frames::push_frame(&mut out, frames::SETTINGS, 0, 0, &[]);
            let mut head = Vec::new();
            frames::push_indexed(&mut head, 8);
            frames::push_frame(&mut out, frames::HEADERS, frames::END_HEADERS, 1, &head);
            conn.write_all(&out).unwrap();
            if !close {
                let mut sink = Vec::new();
                let _ = conn.read_to_end(&mut sink);
            } else {
                // Drain what the probe sent so the close is a FIN.
                conn.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let mut buf = [0u8; 4096];
                while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
            }
        });
        port
    }

    #[test]
    fn grpc_server_closing_mid_stream_fails() {
        let port = h2_server_stopping_mid_stream(true);
        assert_eq!(
            run(&grpc(port, "")),
            ProbeOutcome::Failure(
                "gRPC probe failed: connection closed before the response ended".to_string()
            )
        );
    }

    #[test]
    fn a_peer_sending_without_pause_gets_one_budget_per_event_and_the_attempt_stays_pending() {
        use super::super::h2 as frames;
        // WINDOW_UPDATE frames are ignored by the check: they never decide it. The server
        // stops after 20 s, so a probe that reads until the peer pauses returns only then.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut frame = Vec::new();
            frames::push_frame(&mut frame, frames::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 1]);
            let burst = frame.repeat(4096);
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until && conn.write_all(&burst).is_ok() {}
        });
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(16);
        let mut probe = NetProbe::start(&grpc(port, ""), poll.registry(), TOKEN).unwrap();
        let mut handled = 0;
        let until = Instant::now() + Duration::from_millis(500);
        while Instant::now() < until {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
            for event in events.iter() {
                let started = Instant::now();
                assert_eq!(probe.on_event(poll.registry(), event), None);
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "one event read for {:?}",
                    started.elapsed()
                );
                handled += 1;
            }
        }
        // Re-armed after each budget: the stream keeps coming as new events.
        assert!(handled >= 3, "only {handled} events in 500 ms");
        assert_eq!(probe.stage_name(), "response");
        probe.cancel(poll.registry());
    }

    #[test]
    fn grpc_server_stalling_mid_stream_stays_pending_for_the_core_timeout() {
        let port = h2_server_stopping_mid_stream(false);
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(16);
        let mut probe = NetProbe::start(&grpc(port, ""), poll.registry(), TOKEN).unwrap();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            crate::testutil::poll_once(&mut poll, &mut events, Duration::from_millis(50));
            for event in events.iter() {
                assert_eq!(probe.on_event(poll.registry(), event), None);
            }
        }
        assert_eq!(probe.stage_name(), "response");
        let started = Instant::now();
        probe.expire_at(started, Duration::from_secs(1));
        assert_eq!(probe.expired(started + Duration::from_secs(2)), None);
        probe.cancel(poll.registry());
    }
}
