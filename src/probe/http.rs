//! The pure half of the HTTP probe: building the GET request and parsing the response
//! incrementally from whatever bytes have arrived. No sockets here, so every partial-read and
//! hostile-server case is tested on byte strings.
//!
//! Behaviour follows the kubelet's HTTP probe (`pkg/probe/http`): success iff the status is
//! 200–399; a redirect (301, 302, 303, 307, 308 with a `Location`) to the same host name is
//! followed by the caller (`net`, with [`redirect_target`]), up to 10 (kubelet
//! `RedirectChecker`); a 3xx that ends the chain (another host, or no `Location`) is a
//! [`ProbeOutcome::Warning`] (DoHTTPProbe's `probe.Warning`); at most 10 KiB of body is read,
//! `User-Agent` and `Host` are defaults that configured headers replace. Framing follows
//! RFC 9112 §6.3 (message body length): `Transfer-Encoding` ending in `chunked`, else
//! `Content-Length`, else the body runs to connection close; 1xx interim responses are
//! skipped, at most [`MAX_INTERIM`] of them (Go's `net/http` transport, whose client the
//! kubelet's probe is, stops at the same count: `max1xxResponses`); 204 and 304 have no body.
//!
//! Must not: keep more than a peer's bounded share. One head is at most [`MAX_HEADER_BYTES`],
//! all heads of one response (interim ones included) at most [`MAX_HEAD_TOTAL`], the body read
//! at most [`MAX_BODY_BYTES`]; past each the outcome is a failure naming the cap.

use crate::core::ProbeOutcome;

use super::{escape_controls, excerpt};

/// Response head larger than this fails the probe instead of growing the buffer.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// All heads of one response together (1xx interim ones and the final one) larger than
/// this fail the probe: the interim cap alone would let 5 × 16 KiB through.
pub const MAX_HEAD_TOTAL: usize = 32 * 1024;
/// Interim (1xx) responses skipped before the probe fails (Go `net/http` transport.go,
/// `max1xxResponses`: "net/http: too many 1xx informational responses").
pub const MAX_INTERIM: u32 = 5;
/// At most this much body is read (kubelet: `maxRespBodyLength`, 10 KiB).
pub const MAX_BODY_BYTES: usize = 10 * 1024;
/// How much of the body goes into the result message.
pub const EXCERPT_BYTES: usize = 100;
/// Redirects after which a probe fails (kubelet `RedirectChecker`: "stopped after 10
/// redirects").
pub const MAX_REDIRECTS: u32 = 10;
/// How many header lines httparse may hold; more fails the probe.
const MAX_HEADERS: usize = 128;
/// A chunk-size line (with extensions) longer than this is malformed.
const MAX_CHUNK_LINE: usize = 1024;
/// The reason phrase shown in messages is cut to this many bytes.
const MAX_REASON_BYTES: usize = 64;

/// `User-Agent` sent unless the probe configures one.
pub fn user_agent() -> String {
    format!("vigil-probe/{}", env!("CARGO_PKG_VERSION"))
}

/// `host:port` as it appears in `Host` and in messages; IPv6 literals get brackets.
pub fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The bytes of `GET <path> HTTP/1.1` with `Host`, `User-Agent`, `Accept: */*`,
/// `Connection: close` and the configured headers.
///
/// A configured `Host`, `User-Agent`, `Accept` or `Connection` header replaces the default
/// (only the first configured `Host` is sent, since two make the request invalid). Config
/// validation is expected to reject bad header names and values; as a last defence, a name
/// that is not an RFC 9110 token is skipped and CR, LF and NUL in a value become spaces, so
/// a header can never inject another header or a second request. The path gets a leading `/`
/// if missing, loses any `#fragment`, and bytes that may not appear in a request target are
/// percent-encoded (`%` itself is kept, so pre-encoded paths pass through).
pub fn build_request(host: &str, port: u16, path: &str, headers: &[(String, String)]) -> Vec<u8> {
    build("GET", host, port, path, headers, None)
}

/// The bytes of `POST <path> HTTP/1.1` carrying `body` as `application/json` (an `on_event`
/// webhook), with the defaults and the configured headers of [`build_request`]; a configured
/// `Content-Type` replaces the default one, `Content-Length` is always vigil's.
pub fn build_post(
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    build("POST", host, port, path, headers, Some(body))
}

fn build(
    method: &str,
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> Vec<u8> {
    let configured: Vec<(&str, String)> = headers
        .iter()
        .filter(|(name, _)| is_token(name))
        .filter(|(name, _)| body.is_none() || !name.eq_ignore_ascii_case("content-length"))
        .map(|(name, value)| (name.as_str(), clean_value(value)))
        .collect();
    let has = |name: &str| configured.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));

    let mut req = String::with_capacity(256);
    req.push_str(method);
    req.push(' ');
    req.push_str(&request_target(path));
    req.push_str(" HTTP/1.1\r\n");

    let defaults = [
        ("Host", authority(host, port)),
        ("User-Agent", user_agent()),
        ("Accept", "*/*".to_string()),
        ("Connection", "close".to_string()),
    ];
    for (name, value) in &defaults {
        if !has(name) {
            push_header(&mut req, name, value);
            continue;
        }
        let mut matching = configured
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        if name.eq_ignore_ascii_case("host") {
            if let Some((n, v)) = matching.next() {
                push_header(&mut req, n, v);
            }
        } else {
            for (n, v) in matching {
                push_header(&mut req, n, v);
            }
        }
    }
    for (name, value) in &configured {
        if !defaults.iter().any(|(d, _)| d.eq_ignore_ascii_case(name)) {
            push_header(&mut req, name, value);
        }
    }
    let Some(body) = body else {
        req.push_str("\r\n");
        return req.into_bytes();
    };
    if !has("content-type") {
        push_header(&mut req, "Content-Type", "application/json");
    }
    push_header(&mut req, "Content-Length", &body.len().to_string());
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn push_header(req: &mut String, name: &str, value: &str) {
    req.push_str(name);
    req.push_str(": ");
    req.push_str(value);
    req.push_str("\r\n");
}

/// RFC 9110 §5.6.2 token.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn clean_value(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if matches!(c, '\r' | '\n' | '\0') {
                ' '
            } else {
                c
            }
        })
        .collect::<String>()
        .trim()
        .to_string()
}

fn request_target(path: &str) -> String {
    let path = path.split('#').next().unwrap_or("");
    let mut out = String::with_capacity(path.len() + 1);
    if !path.starts_with('/') {
        out.push('/');
    }
    for &b in path.as_bytes() {
        let plain = b.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&b);
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What the parser needs after a slice was fed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Keep reading; on EOF call [`ResponseParser::finish`].
    NeedMore,
    /// The probe result is decided; stop reading.
    Done(ProbeOutcome),
}

/// How the end of the body is known (RFC 9112 §6.3).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Framing {
    /// `Content-Length`: this many bytes still to come.
    Length(u64),
    /// `Transfer-Encoding: …, chunked`.
    Chunked(Chunk),
    /// Body runs to connection close.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// Waiting for a `size[;ext]\r\n` line.
    Size,
    /// This many data bytes of the current chunk still to come.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Collecting the status line and headers in `buf`.
    Head,
    /// Status known; collecting up to [`MAX_BODY_BYTES`] of body. `buf` holds bytes not yet
    /// decoded (chunked framing only).
    Body {
        status: u16,
        reason: String,
        framing: Framing,
        body: Vec<u8>,
    },
    Done(ProbeOutcome),
}

/// Incremental HTTP/1.x response parser: feed it byte slices as they arrive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseParser {
    state: State,
    buf: Vec<u8>,
    /// The `Location` of a redirect status Go's client follows.
    location: Option<String>,
    /// Interim (1xx) responses skipped so far.
    interim: u32,
    /// Bytes of the heads consumed so far (interim ones).
    head_bytes: usize,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    pub fn new() -> Self {
        ResponseParser {
            state: State::Head,
            buf: Vec::new(),
            location: None,
            interim: 0,
            head_bytes: 0,
        }
    }

    /// The `Location` of the response, when its status is one a client follows (301, 302,
    /// 303, 307, 308; Go `net/http` redirectBehavior).
    pub fn location(&self) -> Option<&str> {
        self.location.as_deref()
    }

    /// Whether the status code has been seen (so an EOF or read error still yields a
    /// status-based outcome).
    pub fn status_known(&self) -> bool {
        !matches!(self.state, State::Head)
    }

    /// Feed the next bytes from the connection.
    pub fn feed(&mut self, data: &[u8]) -> Progress {
        if let State::Done(outcome) = &self.state {
            return Progress::Done(outcome.clone());
        }
        self.buf.extend_from_slice(data);
        let progress = self.advance();
        if let Progress::Done(outcome) = &progress {
            self.state = State::Done(outcome.clone());
            self.buf = Vec::new();
        }
        progress
    }

    /// The peer closed the connection: decide with what has arrived. A response whose
    /// status is known is judged by it even if its body is shorter than announced (the probe
    /// asks "is the service healthy", not "is this a valid download").
    pub fn finish(&mut self) -> ProbeOutcome {
        let outcome = match &self.state {
            State::Done(outcome) => outcome.clone(),
            State::Head => {
                if self.buf.contains(&b'\n') {
                    failure("connection closed before end of response headers")
                } else {
                    failure("connection closed before response")
                }
            }
            State::Body {
                status,
                reason,
                body,
                ..
            } => judge(*status, reason, body),
        };
        self.state = State::Done(outcome.clone());
        self.buf = Vec::new();
        outcome
    }

    fn advance(&mut self) -> Progress {
        loop {
            match &mut self.state {
                State::Done(outcome) => return Progress::Done(outcome.clone()),
                State::Head => match self.parse_head() {
                    Ok(true) => continue,
                    Ok(false) => return Progress::NeedMore,
                    Err(outcome) => return Progress::Done(outcome),
                },
                State::Body { .. } => return self.advance_body(),
            }
        }
    }

    /// Ok(true): the head was consumed (state changed, or a 1xx was skipped); Ok(false):
    /// need more bytes.
    fn parse_head(&mut self) -> Result<bool, ProbeOutcome> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        // This head may use what the earlier (interim) heads left of the total.
        let room = MAX_HEADER_BYTES.min(MAX_HEAD_TOTAL - self.head_bytes);
        let window = &self.buf[..self.buf.len().min(room)];
        let head_len = match resp.parse(window) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if self.buf.len() >= room {
                    return Err(failure(if room < MAX_HEADER_BYTES {
                        TOTAL_TOO_LARGE
                    } else {
                        "response headers too large"
                    }));
                }
                return Ok(false);
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Err(failure("response headers too large"));
            }
            Err(e) => return Err(failure(&format!("malformed response: {e}"))),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) && status != 101 {
            // Interim response (100 Continue, 103 Early Hints): the real one follows, after
            // at most MAX_INTERIM of them.
            self.interim += 1;
            if self.interim > MAX_INTERIM {
                return Err(failure(&format!(
                    "too many 1xx informational responses (more than {MAX_INTERIM})"
                )));
            }
            self.head_bytes += head_len;
            self.buf.drain(..head_len);
            return Ok(true);
        }
        if matches!(status, 301 | 302 | 303 | 307 | 308) {
            self.location = resp
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("location"))
                .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
                .filter(|l| !l.is_empty());
        }
        let reason = short_reason(resp.reason.unwrap_or(""));
        let framing = if matches!(status, 101 | 204 | 304) {
            Framing::Length(0)
        } else {
            framing(resp.headers)?
        };
        self.buf.drain(..head_len);
        self.state = State::Body {
            status,
            reason,
            framing,
            body: Vec::new(),
        };
        Ok(true)
    }

    fn advance_body(&mut self) -> Progress {
        let State::Body {
            status,
            reason,
            framing,
            body,
        } = &mut self.state
        else {
            return Progress::NeedMore;
        };
        let room = |body: &Vec<u8>| MAX_BODY_BYTES.saturating_sub(body.len());
        let finished = match framing {
            Framing::Close => {
                let take = room(body).min(self.buf.len());
                body.extend_from_slice(&self.buf[..take]);
                self.buf.clear();
                false
            }
            Framing::Length(remaining) => {
                let avail = u64::try_from(self.buf.len()).unwrap_or(u64::MAX);
                let got = avail.min(*remaining);
                // got <= buf.len(), so it fits in usize.
                let got_usize = usize::try_from(got).unwrap_or(self.buf.len());
                let take = room(body).min(got_usize);
                body.extend_from_slice(&self.buf[..take]);
                self.buf.clear();
                *remaining -= got;
                *remaining == 0
            }
            Framing::Chunked(chunk) => match decode_chunks(chunk, &mut self.buf, body) {
                Ok(done) => done,
                Err(why) => return Progress::Done(failure(&format!("malformed response: {why}"))),
            },
        };
        if finished || body.len() >= MAX_BODY_BYTES {
            Progress::Done(judge(*status, reason, body))
        } else {
            Progress::NeedMore
        }
    }
}

/// Decodes as many chunks as `buf` holds into `body` (capped); returns whether the last
/// chunk was seen. Trailers after the last chunk are not waited for.
fn decode_chunks(
    chunk: &mut Chunk,
    buf: &mut Vec<u8>,
    body: &mut Vec<u8>,
) -> Result<bool, &'static str> {
    let mut pos = 0;
    let result = loop {
        let rest = &buf[pos..];
        match *chunk {
            Chunk::Size => match httparse::parse_chunk_size(rest) {
                Ok(httparse::Status::Complete((used, 0))) => {
                    pos += used;
                    break Ok(true);
                }
                Ok(httparse::Status::Complete((used, size))) => {
                    pos += used;
                    *chunk = Chunk::Data(size);
                }
                Ok(httparse::Status::Partial) => {
                    if rest.len() > MAX_CHUNK_LINE {
                        break Err("chunk size line too long");
                    }
                    break Ok(false);
                }
                Err(_) => break Err("invalid chunk size"),
            },
            Chunk::Data(remaining) => {
                if rest.is_empty() {
                    break Ok(false);
                }
                let got = usize::try_from(remaining).map_or(rest.len(), |r| r.min(rest.len()));
                let take = MAX_BODY_BYTES.saturating_sub(body.len()).min(got);
                body.extend_from_slice(&rest[..take]);
                pos += got;
                let left = remaining - got as u64;
                *chunk = if left == 0 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left)
                };
                if body.len() >= MAX_BODY_BYTES {
                    break Ok(false);
                }
            }
            Chunk::DataEnd => {
                if rest.starts_with(b"\r\n") {
                    pos += 2;
                } else if rest.starts_with(b"\n") {
                    pos += 1;
                } else if rest.is_empty() || rest == b"\r" {
                    break Ok(false);
                } else {
                    break Err("missing CRLF after chunk data");
                }
                *chunk = Chunk::Size;
            }
        }
    };
    buf.drain(..pos);
    result
}

/// Body framing from the headers (RFC 9112 §6.3).
fn framing(headers: &[httparse::Header<'_>]) -> Result<Framing, ProbeOutcome> {
    let mut transfer_encoding: Option<String> = None;
    let mut length: Option<u64> = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            // Several fields form one list; the last coding decides.
            let value = String::from_utf8_lossy(h.value).to_string();
            transfer_encoding = Some(match transfer_encoding {
                Some(prev) => format!("{prev},{value}"),
                None => value,
            });
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(h.value).unwrap_or("").trim();
            // A list of identical values is allowed (RFC 9110 §8.6); anything else is not.
            for part in text.split(',') {
                let part = part.trim();
                let n = match part.parse::<u64>() {
                    Ok(n) if part.bytes().all(|b| b.is_ascii_digit()) => n,
                    _ => return Err(failure("malformed response: invalid Content-Length")),
                };
                if length.is_some_and(|l| l != n) {
                    return Err(failure("malformed response: conflicting Content-Length"));
                }
                length = Some(n);
            }
        }
    }
    if let Some(te) = transfer_encoding {
        let last = te.rsplit(',').next().unwrap_or("").trim();
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked(Chunk::Size)
        } else {
            Framing::Close
        });
    }
    Ok(match length {
        Some(n) => Framing::Length(n),
        None => Framing::Close,
    })
}

fn short_reason(reason: &str) -> String {
    let mut end = reason.len().min(MAX_REASON_BYTES);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    escape_controls(reason[..end].trim())
}

/// Why a response fails when its heads together pass [`MAX_HEAD_TOTAL`].
const TOTAL_TOO_LARGE: &str =
    "response headers too large (32 KiB in all, 1xx informational responses included)";

fn failure(why: &str) -> ProbeOutcome {
    ProbeOutcome::Failure(format!("HTTP probe failed: {why}"))
}

/// The outcome for a status and the body collected so far.
fn judge(status: u16, reason: &str, body: &[u8]) -> ProbeOutcome {
    let head = if (200..400).contains(&status) {
        if reason.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status} {reason}")
        }
    } else {
        format!("HTTP probe failed with statuscode: {status}")
    };
    let text = excerpt(body, EXCERPT_BYTES);
    let message = if text.is_empty() {
        head
    } else {
        format!("{head}, body: \"{text}\"")
    };
    if (300..400).contains(&status) {
        ProbeOutcome::Warning(format!("Probe terminated redirects: {message}"))
    } else if (200..300).contains(&status) {
        ProbeOutcome::Success(message)
    } else {
        ProbeOutcome::Failure(message)
    }
}

/// Where a redirect leads: scheme, host, port and path of the next request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Target {
    /// `http://host:port/path`, for messages.
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!(
            "{scheme}://{}{}",
            authority(&self.host, self.port),
            self.path
        )
    }
}

/// Resolves a `Location` against the request it answered (RFC 3986 §5.2, for the forms
/// servers send: absolute `http(s)://…`, scheme-relative `//host/…`, absolute path, relative
/// path or query). `None` for another scheme or an unparsable authority: not followed.
pub fn redirect_target(from: &Target, location: &str) -> Option<Target> {
    let location = location.split('#').next().unwrap_or("");
    let lower = location.to_ascii_lowercase();
    let (https, rest) = if lower.starts_with("http://") {
        (false, location.get(7..))
    } else if lower.starts_with("https://") {
        (true, location.get(8..))
    } else if let Some(rest) = location.strip_prefix("//") {
        (from.https, Some(rest))
    } else if lower
        .split(['/', '?'])
        .next()
        .is_some_and(|p| p.contains(':'))
    {
        return None; // another scheme (`ftp:`, `mailto:`)
    } else {
        (from.https, None)
    };
    let Some(rest) = rest else {
        let path = if location.starts_with('/') {
            location.to_string()
        } else if location.starts_with('?') || location.is_empty() {
            let base = from.path.split('?').next().unwrap_or("/");
            format!("{base}{location}")
        } else {
            let base = from.path.split('?').next().unwrap_or("/");
            let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
            format!("{}{location}", if dir.is_empty() { "/" } else { dir })
        };
        return Some(Target {
            path,
            ..from.clone()
        });
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(end);
    let auth = auth.rsplit('@').next().unwrap_or(auth);
    let default_port = if https { 443 } else { 80 };
    let (host, port) = if let Some(v6) = auth.strip_prefix('[') {
        let close = v6.find(']')?;
        let port = match &v6[close + 1..] {
            "" => default_port,
            p => p.strip_prefix(':')?.parse().ok()?,
        };
        (v6[..close].to_string(), port)
    } else {
        match auth.split_once(':') {
            Some((h, "")) => (h.to_string(), default_port),
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (auth.to_string(), default_port),
        }
    };
    if host.is_empty() {
        return None;
    }
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else if path.is_empty() {
        "/".to_string()
    } else {
        path.to_string()
    };
    Some(Target {
        https,
        host,
        port,
        path,
    })
}

/// Whether a redirect stays on the first request's host name (kubelet `RedirectChecker`
/// compares `URL.Hostname()`, ports aside).
pub fn same_host(a: &str, b: &str) -> bool {
    let bare = |h: &str| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase()
    };
    bare(a) == bare(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(parts: &[&[u8]]) -> ProbeOutcome {
        let mut p = ResponseParser::new();
        for part in parts {
            if let Progress::Done(o) = p.feed(part) {
                return o;
            }
        }
        p.finish()
    }

    /// Feeds `bytes` split at every offset (two slices) and byte by byte; all must agree.
    fn outcome_at_every_split(bytes: &[u8]) -> ProbeOutcome {
        let whole = feed_all(&[bytes]);
        for i in 0..=bytes.len() {
            assert_eq!(feed_all(&[&bytes[..i], &bytes[i..]]), whole, "split at {i}");
        }
        let singles: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(feed_all(&singles), whole, "byte by byte");
        whole
    }

    fn success(s: &str) -> ProbeOutcome {
        ProbeOutcome::Success(s.to_string())
    }

    fn fail(s: &str) -> ProbeOutcome {
        ProbeOutcome::Failure(s.to_string())
    }

    #[test]
    fn content_length_200_is_success_with_body_excerpt_at_every_split() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(
            outcome_at_every_split(resp),
            success("HTTP 200 OK, body: \"ok\"")
        );
    }

    #[test]
    fn content_length_response_finishes_without_waiting_for_eof() {
        let mut p = ResponseParser::new();
        let progress = p.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!(
            progress,
            Progress::Done(success("HTTP 200 OK, body: \"ok\""))
        );
    }

    #[test]
    fn status_503_is_failure_with_code_and_body() {
        let resp = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 11\r\n\r\noverloaded\n";
        assert_eq!(
            outcome_at_every_split(resp),
            fail("HTTP probe failed with statuscode: 503, body: \"overloaded\"")
        );
    }

    #[test]
    fn redirect_that_ends_the_chain_is_a_warning_and_its_location_is_kept() {
        let resp =
            b"HTTP/1.1 301 Moved Permanently\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            outcome_at_every_split(resp),
            ProbeOutcome::Warning("Probe terminated redirects: HTTP 301 Moved Permanently".into())
        );
        let mut p = ResponseParser::new();
        p.feed(resp);
        assert_eq!(p.location(), Some("/elsewhere"));
        // 304 and 300 are not followed: no location.
        let mut p = ResponseParser::new();
        p.feed(b"HTTP/1.1 300 Multiple Choices\r\nLocation: /a\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(p.location(), None);
    }

    #[test]
    fn redirect_targets_resolve_like_a_browser() {
        let from = Target {
            https: false,
            host: "127.0.0.1".into(),
            port: 8080,
            path: "/app/health?x=1".into(),
        };
        let t = |l: &str| redirect_target(&from, l).map(|t| t.url());
        assert_eq!(t("/ok").as_deref(), Some("http://127.0.0.1:8080/ok"));
        assert_eq!(t("ok").as_deref(), Some("http://127.0.0.1:8080/app/ok"));
        assert_eq!(
            t("?y=2").as_deref(),
            Some("http://127.0.0.1:8080/app/health?y=2")
        );
        assert_eq!(
            t("http://127.0.0.1:9/x#f").as_deref(),
            Some("http://127.0.0.1:9/x")
        );
        assert_eq!(
            t("HTTPS://Other.example").as_deref(),
            Some("https://Other.example:443/")
        );
        assert_eq!(t("//[::1]:7/z").as_deref(), Some("http://[::1]:7/z"));
        assert_eq!(t("http://u:p@h:81?q").as_deref(), Some("http://h:81/?q"));
        assert_eq!(t("ftp://h/"), None);
        assert_eq!(t("http://h:notaport/"), None);
        assert!(same_host("LOCALHOST", "localhost") && same_host("[::1]", "::1"));
        assert!(!same_host("localhost", "127.0.0.1"));
    }

    #[test]
    fn status_boundaries_follow_kubelet() {
        for (code, ok) in [
            (199, false),
            (200, true),
            (399, true),
            (400, false),
            (404, false),
            (500, false),
        ] {
            let resp = format!("HTTP/1.1 {code} X\r\nContent-Length: 0\r\n\r\n");
            let outcome = feed_all(&[resp.as_bytes()]);
            assert_eq!(
                matches!(outcome, ProbeOutcome::Success(_) | ProbeOutcome::Warning(_)),
                ok,
                "{code}: {outcome:?}"
            );
        }
    }

    #[test]
    fn chunked_body_is_decoded_at_every_split() {
        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nheal\r\n3\r\nthy\r\n0\r\nX-Trailer: 1\r\n\r\n";
        assert_eq!(
            outcome_at_every_split(resp),
            success("HTTP 200 OK, body: \"healthy\"")
        );
    }

    #[test]
    fn chunked_body_finishes_at_last_chunk_without_eof() {
        let mut p = ResponseParser::new();
        let progress =
            p.feed(b"HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nno\r\n0\r\n");
        assert_eq!(
            progress,
            Progress::Done(fail("HTTP probe failed with statuscode: 500, body: \"no\""))
        );
    }

    #[test]
    fn chunked_with_garbage_size_is_malformed() {
        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n";
        assert_eq!(
            feed_all(&[resp]),
            fail("HTTP probe failed: malformed response: invalid chunk size")
        );
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let resp = b"HTTP/1.0 200 OK\r\n\r\nall good";
        let mut p = ResponseParser::new();
        assert_eq!(p.feed(resp), Progress::NeedMore);
        assert_eq!(p.finish(), success("HTTP 200 OK, body: \"all good\""));
        assert_eq!(
            outcome_at_every_split(resp),
            success("HTTP 200 OK, body: \"all good\"")
        );
    }

    #[test]
    fn body_reading_stops_at_ten_kibibytes() {
        let mut p = ResponseParser::new();
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\n\r\n"), Progress::NeedMore);
        assert_eq!(p.feed(&vec![b'a'; MAX_BODY_BYTES - 1]), Progress::NeedMore);
        let Progress::Done(ProbeOutcome::Success(msg)) = p.feed(b"aaaa") else {
            panic!("expected success once 10 KiB arrived");
        };
        assert_eq!(
            msg,
            format!("HTTP 200 OK, body: \"{}…\"", "a".repeat(EXCERPT_BYTES))
        );
    }

    #[test]
    fn excerpt_escapes_control_characters() {
        let resp = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 9\r\n\r\nbad\x1b[0m\r\n";
        assert_eq!(
            feed_all(&[resp]),
            fail("HTTP probe failed with statuscode: 500, body: \"bad\\u{1b}[0m\"")
        );
    }

    #[test]
    fn interim_100_continue_is_skipped() {
        let resp = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(outcome_at_every_split(resp), success("HTTP 204 No Content"));
    }

    #[test]
    fn five_interim_responses_are_skipped_and_a_sixth_fails_naming_the_cap() {
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_INTERIM as usize);
        let mut ok = interim.clone();
        ok.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(outcome_at_every_split(&ok), success("HTTP 200 OK"));
        let mut flood = interim;
        flood.extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n\r\n");
        assert_eq!(
            outcome_at_every_split(&flood),
            fail("HTTP probe failed: too many 1xx informational responses (more than 5)")
        );
    }

    #[test]
    fn an_endless_stream_of_100_continue_is_decided_within_six_heads() {
        let mut p = ResponseParser::new();
        let one = b"HTTP/1.1 100 Continue\r\n\r\n";
        let mut fed = 0;
        let outcome = loop {
            if let Progress::Done(o) = p.feed(one) {
                break o;
            }
            fed += 1;
            assert!(
                fed <= MAX_INTERIM,
                "still reading after {fed} interim responses"
            );
        };
        assert_eq!(
            outcome,
            fail("HTTP probe failed: too many 1xx informational responses (more than 5)")
        );
    }

    #[test]
    fn interim_heads_count_against_a_total_of_thirty_two_kibibytes() {
        // Three interim heads of 12 KiB each: each under the 16 KiB of one head, 36 KiB in all.
        let filler = format!("X-Filler: {}\r\n", "f".repeat(12 * 1024));
        let interim = format!("HTTP/1.1 103 Early Hints\r\n{filler}\r\n");
        let mut resp = interim.repeat(3).into_bytes();
        resp.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(
            feed_all(&[&resp]),
            fail(&format!("HTTP probe failed: {TOTAL_TOO_LARGE}"))
        );
        // Two of them and the final head fit.
        let mut resp = interim.repeat(2).into_bytes();
        resp.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(feed_all(&[&resp]), success("HTTP 200 OK"));
    }

    #[test]
    fn no_content_status_finishes_without_body() {
        let mut p = ResponseParser::new();
        assert_eq!(
            p.feed(b"HTTP/1.1 204 No Content\r\n\r\n"),
            Progress::Done(success("HTTP 204 No Content"))
        );
    }

    #[test]
    fn garbage_is_malformed() {
        let outcome = feed_all(&[b"SSH-2.0-OpenSSH_9.2\r\n"]);
        let ProbeOutcome::Failure(msg) = outcome else {
            panic!("garbage must fail");
        };
        assert!(
            msg.starts_with("HTTP probe failed: malformed response: "),
            "{msg}"
        );
    }

    #[test]
    fn invalid_content_length_is_malformed() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n";
        assert_eq!(
            feed_all(&[resp]),
            fail("HTTP probe failed: malformed response: invalid Content-Length")
        );
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab";
        assert_eq!(
            feed_all(&[resp]),
            fail("HTTP probe failed: malformed response: conflicting Content-Length")
        );
    }

    #[test]
    fn one_mebibyte_of_headers_fails_after_sixteen_kibibytes() {
        let mut p = ResponseParser::new();
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\n"), Progress::NeedMore);
        let line = b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut fed = 0;
        let mut outcome = None;
        while fed < 1024 * 1024 {
            if let Progress::Done(o) = p.feed(line) {
                outcome = Some(o);
                break;
            }
            fed += line.len();
        }
        assert!(
            fed <= MAX_HEADER_BYTES,
            "parser kept reading {fed} bytes of headers"
        );
        assert_eq!(
            outcome,
            Some(fail("HTTP probe failed: response headers too large"))
        );
    }

    #[test]
    fn one_huge_header_line_fails_as_too_large() {
        let mut resp = b"HTTP/1.1 200 OK\r\nX-Big: ".to_vec();
        resp.extend(std::iter::repeat_n(b'b', 1024 * 1024));
        assert_eq!(
            feed_all(&[&resp]),
            fail("HTTP probe failed: response headers too large")
        );
    }

    #[test]
    fn early_close_before_status_line() {
        assert_eq!(
            feed_all(&[]),
            fail("HTTP probe failed: connection closed before response")
        );
        assert_eq!(
            feed_all(&[b"HTTP/1.1 20"]),
            fail("HTTP probe failed: connection closed before response")
        );
    }

    #[test]
    fn early_close_mid_headers() {
        assert_eq!(
            feed_all(&[b"HTTP/1.1 200 OK\r\nContent-Le"]),
            fail("HTTP probe failed: connection closed before end of response headers")
        );
    }

    #[test]
    fn early_close_mid_body_is_judged_by_status() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart";
        assert_eq!(feed_all(&[resp]), success("HTTP 200 OK, body: \"part\""));
    }

    #[test]
    fn feeding_after_done_repeats_the_outcome() {
        let mut p = ResponseParser::new();
        let first = p.feed(b"HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(p.feed(b"junk"), first);
        let Progress::Done(o) = first else { panic!() };
        assert_eq!(p.finish(), o);
    }

    #[test]
    fn request_has_default_headers_in_order() {
        let req = build_request("127.0.0.1", 8080, "/healthz", &[]);
        let expected = format!(
            "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: vigil-probe/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(String::from_utf8(req).unwrap(), expected);
    }

    #[test]
    fn configured_host_and_user_agent_replace_defaults() {
        let headers = vec![
            ("X-Probe".to_string(), "yes".to_string()),
            ("host".to_string(), "example.test".to_string()),
            ("Host".to_string(), "second.test".to_string()),
            ("User-Agent".to_string(), "custom/1".to_string()),
        ];
        let req = String::from_utf8(build_request("::1", 80, "/", &headers)).unwrap();
        assert_eq!(
            req,
            "GET / HTTP/1.1\r\nhost: example.test\r\nUser-Agent: custom/1\r\nAccept: */*\r\nConnection: close\r\nX-Probe: yes\r\n\r\n"
        );
    }

    #[test]
    fn a_post_carries_its_json_body_with_its_length_whatever_the_headers_say() {
        let headers = vec![
            ("Content-Length".to_string(), "1".to_string()),
            ("X-Token".to_string(), "abc".to_string()),
        ];
        let req = build_post("hooks.test", 443, "/in", &headers, b"{\"a\":1}");
        let req = String::from_utf8(req).unwrap();
        assert_eq!(
            req,
            format!(
                "POST /in HTTP/1.1\r\nHost: hooks.test:443\r\nUser-Agent: vigil-probe/{}\r\nAccept: */*\r\nConnection: close\r\nX-Token: abc\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{{\"a\":1}}",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[test]
    fn request_cannot_be_split_by_configured_values() {
        let headers = vec![
            ("X-Evil".to_string(), "a\r\nInjected: 1".to_string()),
            ("Bad Name".to_string(), "x".to_string()),
        ];
        let req =
            String::from_utf8(build_request("127.0.0.1", 1, "/a b\r\n#frag", &headers)).unwrap();
        assert!(req.starts_with("GET /a%20b%0D%0A HTTP/1.1\r\n"), "{req}");
        assert!(req.contains("X-Evil: a  Injected: 1\r\n"), "{req}");
        assert!(!req.contains("Bad Name"), "{req}");
        assert_eq!(req.matches("\r\n").count(), 7, "{req}");
    }

    #[test]
    fn path_gets_leading_slash_and_keeps_query() {
        let req = String::from_utf8(build_request("127.0.0.1", 1, "ready?full=1", &[])).unwrap();
        assert!(req.starts_with("GET /ready?full=1 HTTP/1.1\r\n"), "{req}");
        let req = String::from_utf8(build_request("127.0.0.1", 1, "", &[])).unwrap();
        assert!(req.starts_with("GET / HTTP/1.1\r\n"), "{req}");
    }

    #[test]
    fn ipv6_authority_is_bracketed() {
        assert_eq!(authority("::1", 8080), "[::1]:8080");
        assert_eq!(authority("[::1]", 8080), "[::1]:8080");
        assert_eq!(authority("localhost", 80), "localhost:80");
    }
}
