//! The gRPC health check (`grpc.health.v1.Health/Check`, as the kubelet's gRPC probe) as a
//! sans-I/O HTTP/2 client over cleartext with prior knowledge (RFC 9113 §3.3): the caller
//! moves [`HealthCheck::output`] to the socket and feeds what it reads.
//!
//! One connection, one stream (1): the preface and our SETTINGS, then HEADERS and one DATA
//! frame carrying the HealthCheckRequest. The server's SETTINGS are acknowledged and its
//! PINGs answered; its response HEADERS, DATA and trailers are collected, and the outcome
//! decided when stream 1 ends: SERVING is a success; NOT_SERVING, UNKNOWN, SERVICE_UNKNOWN,
//! a grpc-status other than OK, a reset stream, GOAWAY or a closed connection are failures
//! that say which. Messages follow the kubelet's (`pkg/probe/grpc`): `service unhealthy
//! (responded with "NOT_SERVING")`, `this server does not implement the grpc health
//! protocol (grpc.health.v1.Health): …`.
//!
//! The request and response messages are protobuf with one field each
//! (`health.proto`: `HealthCheckRequest { string service = 1; }`,
//! `HealthCheckResponse { ServingStatus status = 1; }`), encoded and decoded by hand.
//!
//! Must not: do I/O, or keep without bound whatever a server sends — one header block and
//! the response message are capped at [`MAX_BLOCK`] and [`MAX_MESSAGE`], the header blocks of
//! the response at [`MAX_HEADER_BLOCKS`] and [`MAX_HEADERS_TOTAL`] decoded bytes in all, and
//! the SETTINGS and PING frames answered at [`MAX_ACKS`] (each queues an acknowledgement: a
//! server that sends PINGs and never reads would otherwise grow the queue without end). Past
//! each cap the check fails with a message naming it.

use crate::core::ProbeOutcome;

use super::excerpt;
use super::h2::{self, Frame};

/// The one stream a probe opens.
const STREAM: u32 = 1;
/// A header block (HEADERS + CONTINUATION) larger than this fails the probe.
pub const MAX_BLOCK: usize = 16 * 1024;
/// A response message larger than this fails the probe.
pub const MAX_MESSAGE: usize = 16 * 1024;
/// Header blocks (interim, response headers, trailers) past which the check fails: a
/// response has two, three with an interim 1xx.
pub const MAX_HEADER_BLOCKS: usize = 4;
/// Decoded header fields of all blocks together (counted as RFC 9113 §6.5.2 does), past
/// which the check fails: an HPACK block of one-byte references to a 4 KiB table entry
/// decodes to a thousand times its size.
pub const MAX_HEADERS_TOTAL: usize = 64 * 1024;
/// SETTINGS and PING frames acknowledged on one connection past which the check fails. A
/// server sends one SETTINGS and perhaps a few PINGs (grpc-go's BDP estimator); each
/// acknowledgement waits in the output until the server reads it.
pub const MAX_ACKS: usize = 256;
/// Bytes of input not yet framed, at most one frame.
const MAX_PENDING: usize = h2::HEADER_LEN + h2::MAX_FRAME;
/// The RPC's path.
pub const PATH: &str = "/grpc.health.v1.Health/Check";

/// One gRPC health check on one connection.
pub struct HealthCheck {
    out: Vec<u8>,
    sent: usize,
    input: Vec<u8>,
    decoder: h2::HeaderDecoder,
    /// A header block still waiting for CONTINUATION frames: (bytes, ends the stream).
    block: Option<(Vec<u8>, bool)>,
    /// Response headers, then trailers, in order.
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    header_blocks: usize,
    /// Decoded size of the header blocks so far (see [`MAX_HEADERS_TOTAL`]).
    headers_size: usize,
    /// SETTINGS and PING frames acknowledged so far (see [`MAX_ACKS`]).
    acks: usize,
    message: Vec<u8>,
    done: Option<ProbeOutcome>,
}

impl std::fmt::Debug for HealthCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthCheck")
            .field("sent", &self.sent)
            .field("out", &self.out.len())
            .field("done", &self.done)
            .finish()
    }
}

impl HealthCheck {
    /// A check of `service` ("" = the whole server) on a server known as `authority`.
    pub fn new(authority: &str, service: &str) -> HealthCheck {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(h2::PREFACE);
        let mut settings = Vec::new();
        settings.extend_from_slice(&h2::SETTINGS_ENABLE_PUSH.to_be_bytes());
        settings.extend_from_slice(&0u32.to_be_bytes());
        h2::push_frame(&mut out, h2::SETTINGS, 0, 0, &settings);

        // Static table indices (RFC 7541 Appendix A): 3 `:method POST`, 6 `:scheme http`,
        // 4 `:path`, 1 `:authority`, 31 `content-type`, 58 `user-agent`.
        let mut block = Vec::new();
        h2::push_indexed(&mut block, 3);
        h2::push_indexed(&mut block, 6);
        h2::push_literal(&mut block, 4, b"", PATH.as_bytes());
        h2::push_literal(&mut block, 1, b"", authority.as_bytes());
        h2::push_literal(&mut block, 31, b"", b"application/grpc");
        h2::push_literal(&mut block, 0, b"te", b"trailers");
        h2::push_literal(&mut block, 58, b"", super::http::user_agent().as_bytes());
        h2::push_frame(&mut out, h2::HEADERS, h2::END_HEADERS, STREAM, &block);

        let request = encode_request(service);
        let mut data = Vec::with_capacity(5 + request.len());
        data.push(0); // not compressed
        data.extend_from_slice(&(request.len() as u32).to_be_bytes());
        data.extend_from_slice(&request);
        h2::push_frame(&mut out, h2::DATA, h2::END_STREAM, STREAM, &data);

        HealthCheck {
            out,
            sent: 0,
            input: Vec::new(),
            decoder: h2::HeaderDecoder::new(),
            block: None,
            headers: Vec::new(),
            header_blocks: 0,
            headers_size: 0,
            acks: 0,
            message: Vec::new(),
            done: None,
        }
    }

    /// Bytes to send.
    pub fn output(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// `n` bytes of [`HealthCheck::output`] went out.
    pub fn sent(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.out.len());
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
    }

    /// Bytes from the server; `Some` once the outcome is decided.
    pub fn feed(&mut self, data: &[u8]) -> Option<ProbeOutcome> {
        if self.done.is_some() {
            return self.done.clone();
        }
        self.input.extend_from_slice(data);
        let mut used = 0;
        let outcome = loop {
            match h2::next_frame(&self.input[used..]) {
                Ok(Some((frame, n))) => {
                    used += n;
                    // Frames borrow `input`; copy the payload out before touching `self`.
                    let payload = frame.payload.to_vec();
                    if let Some(outcome) = self.on_frame(frame.header, &payload) {
                        break Some(outcome);
                    }
                }
                Ok(None) => break None,
                Err(e) => break Some(failure(&format!("bad HTTP/2 frame: {e}"))),
            }
        };
        self.input.drain(..used);
        if outcome.is_none() && self.input.len() > MAX_PENDING {
            return self.decide(failure("bad HTTP/2 frame: oversized"));
        }
        match outcome {
            Some(o) => self.decide(o),
            None => None,
        }
    }

    /// The server closed the connection.
    pub fn finish(&mut self) -> ProbeOutcome {
        if let Some(done) = &self.done {
            return done.clone();
        }
        let outcome = if self.header_blocks == 0 && self.input.is_empty() && self.block.is_none() {
            failure("connection closed before a response")
        } else {
            failure("connection closed before the response ended")
        };
        self.done = Some(outcome.clone());
        outcome
    }

    fn decide(&mut self, outcome: ProbeOutcome) -> Option<ProbeOutcome> {
        self.done = Some(outcome.clone());
        self.input = Vec::new();
        Some(outcome)
    }

    fn on_frame(&mut self, header: h2::FrameHeader, payload: &[u8]) -> Option<ProbeOutcome> {
        let frame = Frame { header, payload };
        if self.block.is_some() && (header.kind != h2::CONTINUATION || header.stream != STREAM) {
            return Some(failure("bad HTTP/2 frame: header block interrupted"));
        }
        match header.kind {
            h2::SETTINGS if header.stream == 0 && header.flags & h2::ACK == 0 => {
                if payload.len() % 6 != 0 {
                    return Some(failure("bad HTTP/2 frame: SETTINGS length"));
                }
                if let Some(over) = self.count_ack() {
                    return Some(over);
                }
                h2::push_frame(&mut self.out, h2::SETTINGS, h2::ACK, 0, &[]);
                None
            }
            h2::PING if header.stream == 0 && header.flags & h2::ACK == 0 => {
                if payload.len() != 8 {
                    return Some(failure("bad HTTP/2 frame: PING length"));
                }
                if let Some(over) = self.count_ack() {
                    return Some(over);
                }
                h2::push_frame(&mut self.out, h2::PING, h2::ACK, 0, payload);
                None
            }
            h2::GOAWAY => {
                let last = payload
                    .first_chunk::<4>()
                    .map(|b| u32::from_be_bytes(*b) & 0x7fff_ffff)
                    .unwrap_or(0);
                let code = payload
                    .get(4..8)
                    .and_then(|b| b.first_chunk::<4>())
                    .map(|b| u32::from_be_bytes(*b))
                    .unwrap_or(0);
                if last >= STREAM && code == 0 {
                    return None; // graceful shutdown: our stream is still answered
                }
                let debug = payload.get(8..).unwrap_or(&[]);
                let mut why = format!("server sent GOAWAY ({})", error_name(code));
                if !debug.is_empty() {
                    why.push_str(": ");
                    why.push_str(&excerpt(debug, 100));
                }
                Some(failure(&why))
            }
            h2::RST_STREAM if header.stream == STREAM => {
                let code = payload
                    .first_chunk::<4>()
                    .map(|b| u32::from_be_bytes(*b))
                    .unwrap_or(0);
                Some(failure(&format!(
                    "stream reset by server ({})",
                    error_name(code)
                )))
            }
            h2::HEADERS if header.stream == STREAM => {
                let fragment = match h2::strip_padding(&frame) {
                    Ok(f) => f,
                    Err(e) => return Some(failure(&format!("bad HTTP/2 frame: {e}"))),
                };
                let end_stream = header.flags & h2::END_STREAM != 0;
                self.block = Some((fragment.to_vec(), end_stream));
                if header.flags & h2::END_HEADERS != 0 {
                    return self.end_block();
                }
                None
            }
            h2::CONTINUATION if header.stream == STREAM => {
                let Some((block, _)) = &mut self.block else {
                    return Some(failure("bad HTTP/2 frame: CONTINUATION without HEADERS"));
                };
                if block.len() + payload.len() > MAX_BLOCK {
                    return Some(failure("response headers too large"));
                }
                block.extend_from_slice(payload);
                if header.flags & h2::END_HEADERS != 0 {
                    return self.end_block();
                }
                None
            }
            h2::DATA if header.stream == STREAM => {
                let data = match h2::strip_padding(&frame) {
                    Ok(d) => d,
                    Err(e) => return Some(failure(&format!("bad HTTP/2 frame: {e}"))),
                };
                if self.header_blocks == 0 {
                    return Some(failure("bad HTTP/2 frame: DATA before HEADERS"));
                }
                if self.message.len() + data.len() > MAX_MESSAGE {
                    return Some(failure("response message too large"));
                }
                self.message.extend_from_slice(data);
                if header.flags & h2::END_STREAM != 0 {
                    return Some(self.judge());
                }
                None
            }
            // PUSH_PROMISE is refused by our SETTINGS; WINDOW_UPDATE, PRIORITY, ACKs, other
            // streams and unknown frame types are ignored (RFC 9113 §4.1, §5.5).
            _ => None,
        }
    }

    /// One more SETTINGS or PING to acknowledge: the failure once past [`MAX_ACKS`].
    fn count_ack(&mut self) -> Option<ProbeOutcome> {
        self.acks += 1;
        (self.acks > MAX_ACKS).then(|| {
            failure(&format!(
                "server sent more than {MAX_ACKS} SETTINGS and PING frames (each needs an \
                 acknowledgement)"
            ))
        })
    }

    fn end_block(&mut self) -> Option<ProbeOutcome> {
        let (block, end_stream) = self.block.take()?;
        if block.len() > MAX_BLOCK {
            return Some(failure("response headers too large"));
        }
        if self.header_blocks >= MAX_HEADER_BLOCKS {
            return Some(failure(&format!(
                "server sent more than {MAX_HEADER_BLOCKS} header blocks on the stream"
            )));
        }
        let room = MAX_HEADERS_TOTAL - self.headers_size;
        let (fields, size) = match self.decoder.decode(&block, room) {
            Ok(f) => f,
            Err(h2::HpackError::TooLarge) => {
                return Some(failure(&format!(
                    "response headers too large ({} KiB decoded in all)",
                    MAX_HEADERS_TOTAL / 1024
                )));
            }
            Err(e) => return Some(failure(&e.to_string())),
        };
        self.header_blocks += 1;
        self.headers_size += size;
        self.headers.extend(fields);
        if end_stream {
            return Some(self.judge());
        }
        None
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n.as_slice() == name.as_bytes())
            .map(|(_, v)| v.as_slice())
    }

    /// Stream 1 ended: decide from `:status`, `grpc-status` and the message.
    fn judge(&self) -> ProbeOutcome {
        match self.header(":status") {
            Some(b"200") => {}
            Some(other) => {
                return failure(&format!("HTTP status {}", excerpt(other, 16)));
            }
            None => return failure("response without :status"),
        }
        let Some(code) = self.header("grpc-status") else {
            return failure("response without grpc-status");
        };
        let code = std::str::from_utf8(code)
            .ok()
            .and_then(|c| c.parse::<u32>().ok());
        let desc = self
            .header("grpc-message")
            .map(|m| excerpt(&percent_decode(m), 200))
            .unwrap_or_default();
        match code {
            Some(0) => {}
            Some(12) => {
                return ProbeOutcome::Failure(format!(
                    "this server does not implement the grpc health protocol \
                     (grpc.health.v1.Health): rpc error: code = Unimplemented desc = {desc}"
                ));
            }
            Some(c) => {
                return failure(&format!("rpc error: code = {} desc = {desc}", code_name(c)));
            }
            None => return failure("unparsable grpc-status"),
        }
        let status = match decode_response(&self.message) {
            Ok(s) => s,
            Err(why) => return failure(&format!("bad response message: {why}")),
        };
        if status == 1 {
            ProbeOutcome::Success("SERVING".to_string())
        } else {
            ProbeOutcome::Failure(format!(
                "service unhealthy (responded with \"{}\")",
                status_name(status)
            ))
        }
    }
}

fn failure(why: &str) -> ProbeOutcome {
    ProbeOutcome::Failure(format!("gRPC probe failed: {why}"))
}

/// `HealthCheckRequest { service }` in protobuf: field 1, wire type 2.
pub fn encode_request(service: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if !service.is_empty() {
        out.push(0x0a);
        push_varint(&mut out, service.len() as u64);
        out.extend_from_slice(service.as_bytes());
    }
    out
}

fn push_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn read_varint(input: &mut &[u8]) -> Result<u64, &'static str> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = input.split_first().ok_or("truncated varint")?;
        *input = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long")
}

/// The `status` of a length-prefixed gRPC message holding a `HealthCheckResponse`
/// (0 UNKNOWN when absent, as proto3 defaults). Unknown fields are skipped.
pub fn decode_response(framed: &[u8]) -> Result<u64, &'static str> {
    let (prefix, rest) = framed
        .split_first_chunk::<5>()
        .ok_or("shorter than its 5-byte prefix")?;
    if prefix[0] != 0 {
        return Err("compressed, but none was asked for");
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    let mut msg = rest.get(..len).ok_or("shorter than its length prefix")?;
    let mut status = 0;
    while !msg.is_empty() {
        let key = read_varint(&mut msg)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = read_varint(&mut msg)?,
            (_, 0) => {
                read_varint(&mut msg)?;
            }
            (_, 1) => msg = msg.get(8..).ok_or("truncated field")?,
            (_, 5) => msg = msg.get(4..).ok_or("truncated field")?,
            (_, 2) => {
                let n = usize::try_from(read_varint(&mut msg)?).map_err(|_| "bad length")?;
                msg = msg.get(n..).ok_or("truncated field")?;
            }
            _ => return Err("bad wire type"),
        }
    }
    Ok(status)
}

/// `ServingStatus` names (health.proto).
pub fn status_name(status: u64) -> String {
    match status {
        0 => "UNKNOWN".to_string(),
        1 => "SERVING".to_string(),
        2 => "NOT_SERVING".to_string(),
        3 => "SERVICE_UNKNOWN".to_string(),
        n => n.to_string(),
    }
}

/// gRPC status code names (grpc/doc/statuscodes.md), as Go's `codes.Code` prints them.
fn code_name(code: u32) -> String {
    const NAMES: [&str; 17] = [
        "OK",
        "Canceled",
        "Unknown",
        "InvalidArgument",
        "DeadlineExceeded",
        "NotFound",
        "AlreadyExists",
        "PermissionDenied",
        "ResourceExhausted",
        "FailedPrecondition",
        "Aborted",
        "OutOfRange",
        "Unimplemented",
        "Internal",
        "Unavailable",
        "DataLoss",
        "Unauthenticated",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("Code({code})"), |n| n.to_string())
}

/// HTTP/2 error code names (RFC 9113 §7).
fn error_name(code: u32) -> String {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    NAMES
        .get(code as usize)
        .map_or_else(|| format!("error {code:#x}"), |n| n.to_string())
}

/// `grpc-message` is percent-encoded (gRPC over HTTP/2 spec); invalid escapes stay as they
/// are.
fn percent_decode(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if v[i] == b'%'
            && let (Some(h), Some(l)) = (
                v.get(i + 1).copied().and_then(hex),
                v.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Server frames: SETTINGS, response HEADERS, DATA, trailers — HPACK-encoded with
    /// literals so the test does not depend on an encoder.
    fn response(status: u64, grpc_status: &str, message: &str) -> Vec<u8> {
        let mut out = Vec::new();
        h2::push_frame(&mut out, h2::SETTINGS, 0, 0, &[]);
        let mut head = Vec::new();
        h2::push_indexed(&mut head, 8); // :status 200
        h2::push_literal(&mut head, 31, b"", b"application/grpc");
        h2::push_frame(&mut out, h2::HEADERS, h2::END_HEADERS, 1, &head);
        let mut msg = vec![0x08];
        push_varint(&mut msg, status);
        let mut data = vec![0];
        data.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        data.extend_from_slice(&msg);
        h2::push_frame(&mut out, h2::DATA, 0, 1, &data);
        let mut trailers = Vec::new();
        h2::push_literal(&mut trailers, 0, b"grpc-status", grpc_status.as_bytes());
        if !message.is_empty() {
            h2::push_literal(&mut trailers, 0, b"grpc-message", message.as_bytes());
        }
        h2::push_frame(
            &mut out,
            h2::HEADERS,
            h2::END_HEADERS | h2::END_STREAM,
            1,
            &trailers,
        );
        out
    }

    fn at_every_split(bytes: &[u8]) -> ProbeOutcome {
        let mut first = None;
        for cut in 0..=bytes.len() {
            let mut hc = HealthCheck::new("127.0.0.1:9090", "");
            let a = hc.feed(&bytes[..cut]);
            let outcome = a
                .or_else(|| hc.feed(&bytes[cut..]))
                .unwrap_or_else(|| hc.finish());
            match &first {
                None => first = Some(outcome),
                Some(f) => assert_eq!(f, &outcome, "split at {cut}"),
            }
        }
        first.unwrap()
    }

    #[test]
    fn request_starts_with_preface_settings_and_one_stream() {
        let hc = HealthCheck::new("127.0.0.1:9090", "web");
        let out = hc.output();
        assert!(out.starts_with(h2::PREFACE));
        let mut rest = &out[h2::PREFACE.len()..];
        let mut kinds = Vec::new();
        while let Some((f, n)) = h2::next_frame(rest).unwrap() {
            kinds.push((f.header.kind, f.header.flags, f.header.stream));
            if f.header.kind == h2::DATA {
                assert_eq!(f.payload, [0, 0, 0, 0, 5, 0x0a, 3, b'w', b'e', b'b']);
            }
            rest = &rest[n..];
        }
        assert!(rest.is_empty());
        assert_eq!(
            kinds,
            [
                (h2::SETTINGS, 0, 0),
                (h2::HEADERS, h2::END_HEADERS, 1),
                (h2::DATA, h2::END_STREAM, 1)
            ]
        );
    }

    #[test]
    fn serving_is_success_at_every_split() {
        assert_eq!(
            at_every_split(&response(1, "0", "")),
            ProbeOutcome::Success("SERVING".to_string())
        );
    }

    #[test]
    fn not_serving_and_unknown_fail_with_the_status_name() {
        assert_eq!(
            at_every_split(&response(2, "0", "")),
            ProbeOutcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".to_string())
        );
        assert_eq!(
            at_every_split(&response(0, "0", "")),
            ProbeOutcome::Failure("service unhealthy (responded with \"UNKNOWN\")".to_string())
        );
    }

    #[test]
    fn grpc_error_status_fails_with_code_and_decoded_message() {
        assert_eq!(
            at_every_split(&response(1, "5", "unknown%20service")),
            ProbeOutcome::Failure(
                "gRPC probe failed: rpc error: code = NotFound desc = unknown service".to_string()
            )
        );
    }

    #[test]
    fn settings_and_ping_are_answered() {
        let mut hc = HealthCheck::new("h:1", "");
        let n = hc.output().len();
        hc.sent(n);
        let mut input = Vec::new();
        h2::push_frame(&mut input, h2::SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
        h2::push_frame(&mut input, h2::PING, 0, 0, b"12345678");
        assert_eq!(hc.feed(&input), None);
        let mut expected = Vec::new();
        h2::push_frame(&mut expected, h2::SETTINGS, h2::ACK, 0, &[]);
        h2::push_frame(&mut expected, h2::PING, h2::ACK, 0, b"12345678");
        assert_eq!(hc.output(), expected);
    }

    #[test]
    fn a_ping_flood_fails_past_the_acknowledgement_cap_with_a_bounded_queue() {
        let mut hc = HealthCheck::new("h:1", "");
        let n = hc.output().len();
        hc.sent(n);
        // The server never reads: nothing queued is ever sent.
        let mut ping = Vec::new();
        h2::push_frame(&mut ping, h2::PING, 0, 0, b"12345678");
        let mut fed = 0;
        let outcome = loop {
            if let Some(o) = hc.feed(&ping) {
                break o;
            }
            fed += 1;
            assert!(fed <= MAX_ACKS, "still answering after {fed} PINGs");
        };
        assert_eq!(
            outcome,
            ProbeOutcome::Failure(
                "gRPC probe failed: server sent more than 256 SETTINGS and PING frames (each \
                 needs an acknowledgement)"
                    .to_string()
            )
        );
        assert!(
            hc.output().len() <= MAX_ACKS * ping.len(),
            "{}",
            hc.output().len()
        );
    }

    /// A HEADERS frame of stream 1 without END_STREAM whose block is `refs` one-byte
    /// references to dynamic-table entry 62.
    fn headers_referencing_the_table(refs: usize) -> Vec<u8> {
        let mut out = Vec::new();
        h2::push_frame(
            &mut out,
            h2::HEADERS,
            h2::END_HEADERS,
            1,
            &vec![0x80 | 62; refs],
        );
        out
    }

    #[test]
    fn an_hpack_flood_of_header_blocks_fails_naming_the_cap() {
        // One block adds a 4 KiB entry to the dynamic table (literal with incremental
        // indexing, new name); every later block references it again and again.
        let mut first = Vec::new();
        first.push(0x40);
        first.push(1);
        first.push(b'x');
        h2::push_hpack_int(&mut first, 0, 7, 4000);
        first.extend(std::iter::repeat_n(b'v', 4000));
        let mut input = Vec::new();
        h2::push_frame(&mut input, h2::HEADERS, h2::END_HEADERS, 1, &first);
        let mut hc = HealthCheck::new("h:1", "");
        assert_eq!(hc.feed(&input), None);
        // 16 references: 63 KiB decoded, past the total with the first block's 4 KiB.
        let outcome = hc.feed(&headers_referencing_the_table(16));
        assert_eq!(
            outcome,
            Some(ProbeOutcome::Failure(
                "gRPC probe failed: response headers too large (64 KiB decoded in all)".into()
            ))
        );

        // Small blocks: the count cap.
        let mut hc = HealthCheck::new("h:1", "");
        let mut small = Vec::new();
        let mut head = Vec::new();
        h2::push_indexed(&mut head, 8);
        h2::push_frame(&mut small, h2::HEADERS, h2::END_HEADERS, 1, &head);
        let outcome = (0..=MAX_HEADER_BLOCKS).find_map(|_| hc.feed(&small));
        assert_eq!(
            outcome,
            Some(ProbeOutcome::Failure(
                "gRPC probe failed: server sent more than 4 header blocks on the stream".into()
            ))
        );
    }

    #[test]
    fn a_malformed_header_block_is_worded_without_debug_formatting() {
        let mut hc = HealthCheck::new("h:1", "");
        let outcome = hc.feed(&headers_referencing_the_table(1));
        assert_eq!(
            outcome,
            Some(ProbeOutcome::Failure(
                "gRPC probe failed: bad header block: header index out of bounds".into()
            ))
        );
    }

    #[test]
    fn reset_stream_and_goaway_fail_with_the_error_name() {
        let mut input = Vec::new();
        h2::push_frame(&mut input, h2::RST_STREAM, 0, 1, &[0, 0, 0, 7]);
        let mut hc = HealthCheck::new("h:1", "");
        assert_eq!(
            hc.feed(&input),
            Some(ProbeOutcome::Failure(
                "gRPC probe failed: stream reset by server (REFUSED_STREAM)".to_string()
            ))
        );
        let mut input = Vec::new();
        h2::push_frame(
            &mut input,
            h2::GOAWAY,
            0,
            0,
            &[0, 0, 0, 0, 0, 0, 0, 1, b'b', b'y', b'e'],
        );
        let mut hc = HealthCheck::new("h:1", "");
        assert_eq!(
            hc.feed(&input),
            Some(ProbeOutcome::Failure(
                "gRPC probe failed: server sent GOAWAY (PROTOCOL_ERROR): bye".to_string()
            ))
        );
    }

    #[test]
    fn close_mid_stream_fails() {
        let full = response(1, "0", "");
        let mut hc = HealthCheck::new("h:1", "");
        assert_eq!(hc.feed(&full[..full.len() - 4]), None);
        assert_eq!(
            hc.finish(),
            ProbeOutcome::Failure(
                "gRPC probe failed: connection closed before the response ended".to_string()
            )
        );
        let mut hc = HealthCheck::new("h:1", "");
        assert_eq!(
            hc.finish(),
            ProbeOutcome::Failure("gRPC probe failed: connection closed before a response".into())
        );
    }

    #[test]
    fn http1_answer_is_a_framing_failure_not_a_hang() {
        let mut hc = HealthCheck::new("h:1", "");
        let outcome = hc.feed(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        assert!(
            matches!(&outcome, Some(ProbeOutcome::Failure(m)) if m.starts_with("gRPC probe failed: bad HTTP/2 frame")),
            "{outcome:?}"
        );
    }

    #[test]
    fn response_decoding_skips_unknown_fields() {
        // field 2 (varint 5), field 3 (bytes "x"), field 1 = 2
        let msg = [0x10, 5, 0x1a, 1, b'x', 0x08, 2];
        let mut framed = vec![0, 0, 0, 0, msg.len() as u8];
        framed.extend_from_slice(&msg);
        assert_eq!(decode_response(&framed), Ok(2));
        assert_eq!(decode_response(&[0, 0, 0, 0, 0]), Ok(0));
        assert!(decode_response(&[1, 0, 0, 0, 0]).is_err());
        assert!(decode_response(&[0, 0, 0, 0, 9, 8]).is_err());
    }
}
