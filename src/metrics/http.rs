//! The pure side of the metrics endpoint: reading one HTTP/1.x request head from the bytes a
//! connection has sent so far, and writing a reply head.
//!
//! Owns what a request may look like: `GET /metrics` (a query string is ignored), or `GET
//! /readyz`, `/healthz`, `/livez` (health checks, read with their query: [`HealthAsk`]); at most
//! [`MAX_REQUEST`] bytes and [`MAX_HEADERS`] header lines, no body (a `Content-Length` other than
//! 0 or any `Transfer-Encoding` is refused, so no body bytes are ever read as a request). The
//! request line and headers are parsed by `httparse` (RFC 9112); this module only reads the
//! three headers that matter: `Accept` (format), `Connection` and the HTTP version
//! (keep-alive).
//!
//! Must not: touch sockets or the clock (the shell's metrics component does), or allocate in
//! proportion to what a client sends (a head is looked at in place).

use super::expo::Format;

/// Longest request head accepted (request line and headers, with the blank line).
pub const MAX_REQUEST: usize = 8 * 1024;
/// Header lines accepted in one request.
pub const MAX_HEADERS: usize = 32;

/// An HTTP status vigil answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    /// A health check that failed (the Kubernetes API server answers so).
    InternalServerError,
    NotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    HeadersTooLarge,
    Unavailable,
    VersionNotSupported,
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::InternalServerError => 500,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::PayloadTooLarge => 413,
            Status::HeadersTooLarge => 431,
            Status::Unavailable => 503,
            Status::VersionNotSupported => 505,
        }
    }

    pub fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::InternalServerError => "Internal Server Error",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::PayloadTooLarge => "Payload Too Large",
            Status::HeadersTooLarge => "Request Header Fields Too Large",
            Status::Unavailable => "Service Unavailable",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// A complete, acceptable scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scrape {
    /// Bytes of the head, to drop from the connection's input.
    pub len: usize,
    pub format: Format,
    /// The connection stays open after the reply (HTTP/1.1 without `Connection: close`, or
    /// HTTP/1.0 with `Connection: keep-alive`).
    pub keep_alive: bool,
}

/// Which health check (the Kubernetes API server's endpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `/readyz`: every pod judged is Ready or Completed.
    Ready,
    /// `/healthz` (and `/livez`): no pod judged has failed, crash-loops or waits on a failed
    /// dependency.
    Live,
}

impl Check {
    pub fn name(self) -> &'static str {
        match self {
            Check::Ready => "readyz",
            Check::Live => "healthz",
        }
    }
}

/// A complete, acceptable health check (`GET /readyz?pod=web&verbose`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthAsk {
    /// Bytes of the head, to drop from the connection's input.
    pub len: usize,
    pub check: Check,
    /// Where the query string (after `?`) lies in the head: read with [`HealthAsk::query`].
    pub query: std::ops::Range<usize>,
    pub keep_alive: bool,
}

impl HealthAsk {
    /// The query string, from the head this was parsed from.
    pub fn query<'a>(&self, head: &'a [u8]) -> &'a str {
        head.get(self.query.clone())
            .and_then(|q| std::str::from_utf8(q).ok())
            .unwrap_or("")
    }
}

/// The pods a query names (`pod=web&pod=db`, also `pod=web,db`) and whether it asks for
/// `verbose` (present with any value, as the API server reads it).
pub fn health_query(query: &str) -> (Vec<&str>, bool) {
    let mut pods = Vec::new();
    let mut verbose = false;
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "verbose" => verbose = true,
            "pod" => pods.extend(value.split(',').filter(|p| !p.is_empty())),
            _ => {}
        }
    }
    (pods, verbose)
}

/// What the bytes received so far amount to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// The head is not complete yet (and within the limit).
    Partial,
    Scrape(Scrape),
    Health(HealthAsk),
    /// Answer with this status and a one-line explanation, then close.
    Refuse(Status, &'static str),
}

/// Reads the request head at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() >= MAX_REQUEST => {
            return Parsed::Refuse(Status::HeadersTooLarge, "request head longer than 8 KiB");
        }
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Refuse(Status::HeadersTooLarge, "more than 32 header lines");
        }
        Err(httparse::Error::Version) => {
            return Parsed::Refuse(Status::VersionNotSupported, "only HTTP/1.0 and 1.1");
        }
        Err(_) => return Parsed::Refuse(Status::BadRequest, "malformed HTTP request"),
    };
    if len > MAX_REQUEST {
        return Parsed::Refuse(Status::HeadersTooLarge, "request head longer than 8 KiB");
    }
    let mut accept = None;
    let mut connection: Option<&[u8]> = None;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("accept") {
            accept = std::str::from_utf8(h.value).ok();
        } else if h.name.eq_ignore_ascii_case("connection") {
            connection = Some(h.value);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding")
            || (h.name.eq_ignore_ascii_case("content-length")
                && h.value.iter().any(|b| !matches!(b, b'0' | b' ' | b'\t')))
        {
            return Parsed::Refuse(Status::PayloadTooLarge, "a scrape has no body");
        }
    }
    if req.method != Some("GET") {
        return Parsed::Refuse(Status::MethodNotAllowed, "only GET");
    }
    let target = req.path.unwrap_or("");
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let check = match path {
        "/metrics" => None,
        "/readyz" => Some(Check::Ready),
        "/healthz" | "/livez" => Some(Check::Live),
        _ => {
            return Parsed::Refuse(
                Status::NotFound,
                "vigil serves only /metrics, /readyz, /healthz and /livez",
            );
        }
    };
    let has = |token: &str| {
        connection.is_some_and(|v| {
            std::str::from_utf8(v)
                .unwrap_or("")
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case(token))
        })
    };
    let keep_alive = match req.version {
        Some(1) => !has("close"),
        _ => has("keep-alive"),
    };
    if let Some(check) = check {
        // The query's place in `buf`: `query` is a slice of it.
        let at = (query.as_ptr() as usize).saturating_sub(buf.as_ptr() as usize);
        return Parsed::Health(HealthAsk {
            len,
            check,
            query: at..at + query.len(),
            keep_alive,
        });
    }
    Parsed::Scrape(Scrape {
        len,
        format: Format::from_accept(accept),
        keep_alive,
    })
}

/// A reply head for a body of `len` bytes.
pub fn head(status: Status, content_type: &str, len: usize, keep_alive: bool) -> String {
    let mut h = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n",
        status.code(),
        status.reason()
    );
    if status == Status::MethodNotAllowed {
        h.push_str("Allow: GET\r\n");
    }
    h.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    h
}

/// A whole refusal: head and a one-line text body; the connection closes after it.
pub fn refusal(status: Status, message: &str) -> String {
    let body = format!("{} {}: {message}\n", status.code(), status.reason());
    head(status, "text/plain; charset=utf-8", body.len(), false) + &body
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(req: &str) -> Scrape {
        match parse(req.as_bytes()) {
            Parsed::Scrape(s) => s,
            other => panic!("{req:?}: {other:?}"),
        }
    }

    #[test]
    fn a_prometheus_scrape_is_read_with_its_format_and_keep_alive() {
        let req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9469\r\nUser-Agent: Prometheus/2.45\r\n\
                   Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5\r\n\
                   Accept-Encoding: gzip\r\n\r\n";
        let s = scrape(req);
        assert_eq!(s.len, req.len());
        assert_eq!(s.format, Format::OpenMetrics);
        assert!(s.keep_alive);
        let s = scrape("GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert_eq!(s.format, Format::Prometheus);
        assert!(!s.keep_alive);
        assert!(scrape("GET /metrics HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!scrape("GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
    }

    #[test]
    fn a_head_cut_short_waits_for_more_until_the_limit() {
        let req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
        for cut in 0..req.len() {
            assert_eq!(parse(&req[..cut]), Parsed::Partial, "cut at {cut}");
        }
        let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        long.resize(MAX_REQUEST, b'a');
        assert_eq!(
            parse(&long),
            Parsed::Refuse(Status::HeadersTooLarge, "request head longer than 8 KiB")
        );
    }

    #[test]
    fn anything_but_a_bodiless_get_of_metrics_is_refused_with_its_status() {
        let cases: &[(&str, Status)] = &[
            ("POST /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            ("HEAD /metrics HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            ("GET / HTTP/1.1\r\n\r\n", Status::NotFound),
            ("GET /readyzx HTTP/1.1\r\n\r\n", Status::NotFound),
            ("POST /readyz HTTP/1.1\r\n\r\n", Status::MethodNotAllowed),
            ("GET /metricsx HTTP/1.1\r\n\r\n", Status::NotFound),
            ("GET /metrics HTTP/2.0\r\n\r\n", Status::VersionNotSupported),
            (
                "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
                Status::PayloadTooLarge,
            ),
            (
                "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                Status::PayloadTooLarge,
            ),
            (
                "\x16\x03\x01\x02\x00\x01\x00\x01\x03\x03",
                Status::BadRequest,
            ),
            (
                "GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n",
                Status::BadRequest,
            ),
        ];
        for (req, want) in cases {
            match parse(req.as_bytes()) {
                Parsed::Refuse(s, _) => assert_eq!(s, *want, "{req:?}"),
                other => panic!("{req:?}: {other:?}"),
            }
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: y\r\n")).collect();
        let req = format!("GET /metrics HTTP/1.1\r\n{many}\r\n");
        assert!(matches!(
            parse(req.as_bytes()),
            Parsed::Refuse(Status::HeadersTooLarge, _)
        ));
        // A zero Content-Length is no body.
        scrape("GET /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    }

    #[test]
    fn refusals_close_the_connection_and_say_why() {
        let r = refusal(Status::NotFound, "vigil serves only /metrics");
        assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
        assert!(r.contains("Connection: close\r\n"), "{r}");
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
        assert!(refusal(Status::MethodNotAllowed, "only GET").contains("Allow: GET\r\n"));
    }

    #[test]
    fn a_health_check_is_read_with_its_query_pods_and_verbose() {
        let req = "GET /readyz?pod=web&verbose&pod=db,cache HTTP/1.1\r\nHost: x\r\n\r\n";
        let Parsed::Health(h) = parse(req.as_bytes()) else {
            panic!("{req:?}");
        };
        assert_eq!(
            (h.check, h.len, h.keep_alive),
            (Check::Ready, req.len(), true)
        );
        assert_eq!(h.query(req.as_bytes()), "pod=web&verbose&pod=db,cache");
        assert_eq!(
            health_query(h.query(req.as_bytes())),
            (vec!["web", "db", "cache"], true)
        );
        for path in ["/healthz", "/livez"] {
            let req = format!("GET {path} HTTP/1.0\r\n\r\n");
            let Parsed::Health(h) = parse(req.as_bytes()) else {
                panic!("{req:?}");
            };
            assert_eq!((h.check, h.keep_alive), (Check::Live, false));
            assert_eq!(health_query(h.query(req.as_bytes())), (vec![], false));
        }
        assert_eq!(health_query("verbose=0&x=1&pod="), (vec![], true));
    }
}
