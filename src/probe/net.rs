//! One in-flight `tcp_socket` or `http_get` attempt as a non-blocking state machine on the
//! runtime's mio `Poll`.
//!
//! The socket is registered for both readable and writable readiness from the start. mio is
//! edge-triggered, so every event drives the machine as far as it can go: each direction is
//! worked until `WouldBlock`, which guarantees that a later edge is reported (mio docs,
//! "Draining readiness"). A non-blocking `connect(2)` is complete when the socket becomes
//! writable; `SO_ERROR` then says whether it failed (connect(2), EINPROGRESS), and
//! `getpeername(2)` failing with ENOTCONN means it is still in progress (mio
//! `TcpStream::connect` docs).

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

use crate::config::spec::ProbeAction;
use crate::core::ProbeOutcome;

use super::http::{Progress, ResponseParser, build_request};
use super::{ProbeError, io_reason};

/// Bytes read from the socket per `read(2)`.
const READ_CHUNK: usize = 8 * 1024;

enum Mode {
    Tcp,
    Http {
        request: Vec<u8>,
        written: usize,
        parser: ResponseParser,
    },
}

/// One in-flight network probe attempt. Dropping it closes the socket; prefer
/// [`NetProbe::cancel`], which also deregisters it.
pub struct NetProbe {
    stream: TcpStream,
    addr: SocketAddr,
    mode: Mode,
    connected: bool,
    finished: bool,
}

impl std::fmt::Debug for NetProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetProbe")
            .field("addr", &self.addr)
            .field("http", &matches!(self.mode, Mode::Http { .. }))
            .field("connected", &self.connected)
            .field("finished", &self.finished)
            .finish()
    }
}

impl NetProbe {
    /// Start connecting to the target of an `http_get` or `tcp_socket` action and register the
    /// socket under `token`. Failures that happen at once (host not an IP literal or
    /// `localhost`, EMFILE, unreachable network…) come back as a finished outcome, with
    /// nothing left registered.
    pub fn start(
        action: &ProbeAction,
        registry: &Registry,
        token: Token,
    ) -> Result<NetProbe, ProbeOutcome> {
        let (host, port, mode) = match action {
            ProbeAction::TcpSocket { host, port } => (host, *port, Mode::Tcp),
            ProbeAction::HttpGet {
                host,
                port,
                path,
                headers,
            } => (
                host,
                *port,
                Mode::Http {
                    request: build_request(host, *port, path, headers),
                    written: 0,
                    parser: ResponseParser::new(),
                },
            ),
            ProbeAction::Exec { .. } => return Err(ProbeError::NotNetwork.outcome()),
        };
        let addr = SocketAddr::new(resolve(host).map_err(|e| e.outcome())?, port);
        let mut stream = TcpStream::connect(addr).map_err(|e| dial_error(addr, &e).outcome())?;
        registry
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| {
                ProbeError::Register {
                    addr: addr.to_string(),
                    reason: io_reason(&e),
                }
                .outcome()
            })?;
        Ok(NetProbe {
            stream,
            addr,
            mode,
            connected: false,
            finished: false,
        })
    }

    /// The address being probed (after resolving `localhost`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drive the attempt on a readiness event for its token. Returns the outcome once the
    /// attempt is decided; the socket is then deregistered (it closes on drop). Later calls
    /// return `None`.
    pub fn on_event(
        &mut self,
        registry: &Registry,
        event: &mio::event::Event,
    ) -> Option<ProbeOutcome> {
        let _ = event; // Readiness kinds are not trusted: every direction is tried until WouldBlock.
        if self.finished {
            return None;
        }
        let outcome = self.drive()?;
        self.finished = true;
        if let Err(e) = registry.deregister(&mut self.stream) {
            log::debug!("probe {}: deregister: {e}", self.addr);
        }
        Some(outcome)
    }

    /// Abandon the attempt (the core's timeout fired): deregister and close the socket.
    pub fn cancel(mut self, registry: &Registry) {
        if !self.finished
            && let Err(e) = registry.deregister(&mut self.stream)
        {
            log::debug!("probe {}: deregister: {e}", self.addr);
        }
    }

    fn drive(&mut self) -> Option<ProbeOutcome> {
        if !self.connected {
            match self.check_connected() {
                Ok(true) => self.connected = true,
                Ok(false) => return None,
                Err(e) => return Some(e.outcome()),
            }
        }
        let addr = self.addr;
        match &mut self.mode {
            Mode::Tcp => Some(ProbeOutcome::Success(format!("connected to {addr}"))),
            Mode::Http {
                request,
                written,
                parser,
            } => {
                let write_error = write_request(&mut self.stream, request, written).err();
                // Read even while the request is still going out: a server may answer (and
                // close) early, and edge-triggered readiness must be drained either way.
                match read_response(&mut self.stream, parser) {
                    Ok(Some(outcome)) => Some(outcome),
                    Ok(None) => write_error.map(|e| e.outcome()),
                    Err(read_error) => Some(write_error.unwrap_or(read_error).outcome()),
                }
            }
        }
    }

    /// Ok(true) once connected, Ok(false) while the connect is in progress.
    fn check_connected(&mut self) -> Result<bool, ProbeError> {
        match self.stream.take_error() {
            Ok(None) => {}
            Ok(Some(e)) | Err(e) => return Err(dial_error(self.addr, &e)),
        }
        match self.stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e)
                if e.kind() == io::ErrorKind::NotConnected
                    || e.kind() == io::ErrorKind::WouldBlock =>
            {
                Ok(false)
            }
            Err(e) => Err(dial_error(self.addr, &e)),
        }
    }
}

/// Writes what is left of the request until done or `WouldBlock`.
fn write_request(
    stream: &mut TcpStream,
    request: &[u8],
    written: &mut usize,
) -> Result<(), ProbeError> {
    while *written < request.len() {
        match stream.write(&request[*written..]) {
            Ok(0) => {
                return Err(ProbeError::Write {
                    reason: "connection closed".to_string(),
                });
            }
            Ok(n) => *written += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(ProbeError::Write {
                    reason: io_reason(&e),
                });
            }
        }
    }
    Ok(())
}

/// Reads until the parser decides, EOF, or `WouldBlock` (`Ok(None)`). A read error after
/// the status line arrived still yields the status-based outcome.
fn read_response(
    stream: &mut TcpStream,
    parser: &mut ResponseParser,
) -> Result<Option<ProbeOutcome>, ProbeError> {
    let mut buf = [0u8; READ_CHUNK];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(Some(parser.finish())),
            Ok(n) => {
                if let Progress::Done(outcome) = parser.feed(&buf[..n]) {
                    return Ok(Some(outcome));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) if parser.status_known() => return Ok(Some(parser.finish())),
            Err(e) => {
                return Err(ProbeError::Read {
                    reason: io_reason(&e),
                });
            }
        }
    }
}

/// IP literals (IPv6 with or without brackets) and `localhost` only: any other name would
/// need a blocking resolver call on the event loop.
fn resolve(host: &str) -> Result<IpAddr, ProbeError> {
    let trimmed = host.trim();
    if trimmed.eq_ignore_ascii_case("localhost") {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    let literal = trimmed
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(trimmed);
    literal
        .parse::<IpAddr>()
        .map_err(|_| ProbeError::ResolveHost {
            host: host.to_string(),
        })
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
            poll.poll(&mut events, Some(Duration::from_millis(100)))
                .unwrap();
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
    fn http_200_is_success_with_body() {
        assert_eq!(
            respond("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
            ProbeOutcome::Success("HTTP 200 OK, body: \"ok\"".to_string())
        );
    }

    #[test]
    fn http_301_is_success_without_following() {
        assert_eq!(
            respond(
                "HTTP/1.1 301 Moved Permanently\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n"
            ),
            ProbeOutcome::Success("HTTP 301 Moved Permanently".to_string())
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
            poll.poll(&mut events, Some(Duration::from_millis(50)))
                .unwrap();
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
        poll.poll(&mut events, Some(Duration::from_millis(50)))
            .unwrap();
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
    fn tcp_ipv6_literal_is_supported() {
        let Ok(listener) = TcpListener::bind("[::1]:0") else {
            eprintln!("skipping: no IPv6 loopback on this machine");
            return;
        };
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

    #[test]
    fn host_names_other_than_localhost_are_refused_at_start() {
        let poll = Poll::new().unwrap();
        let err = NetProbe::start(&tcp("example.com", 80), poll.registry(), TOKEN).unwrap_err();
        assert_eq!(
            err,
            ProbeOutcome::Failure(
                "probe host must be an IP address or localhost, not \"example.com\"".to_string()
            )
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
}
