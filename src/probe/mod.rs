//! Probe actions: TCP, HTTP(S) and gRPC checks as non-blocking state machines, plus the
//! message formatting for exec probes.
//!
//! Owns: turning one probe attempt into a [`ProbeOutcome`] with a short, human message in the
//! kubelet's words (`dial tcp 127.0.0.1:8080: connect: connection refused`, `HTTP probe failed
//! with statuscode: 503`, `tls: certificate expired`), and the pure protocol halves, tested
//! without sockets: the HTTP/1.1 request builder and response parser ([`http`]), the HTTP/2
//! framing ([`h2`]) and the gRPC health check client on top of it ([`grpc`]). TLS is a rustls
//! session driven over the same socket (`tls`); host names are resolved by [`resolve`].
//!
//! Must not: block, sleep, or own a clock. The one exception to "no threads" is the
//! resolver's helper thread, which exists because getaddrinfo(3) blocks; its cache expiry
//! is the one clock read. A network attempt ([`NetProbe`]) is
//! driven by readiness events of the runtime's mio `Poll`; the core enforces the timeout and
//! tells the runtime to [`NetProbe::cancel`]. Exec probes are spawned and reaped by the
//! runtime through the process module; this module only formats their output
//! ([`exec_message`]). It never decides thresholds or what a result means for the container:
//! that is the core's job. A target that fails is an outcome (`Failure` with a message), never
//! an `Err`.

mod cafile;
pub mod grpc;
pub mod h2;
pub mod http;
mod net;
pub mod resolve;
mod tls;
pub use tls::check_ca_file;

pub use net::NetProbe;

use crate::core::ProbeOutcome;

/// How much of an exec probe's output goes into its result message.
pub const EXEC_MESSAGE_BYTES: usize = 1024;

/// Why a network probe attempt could not complete. Each variant's `Display` is the result
/// message the user sees; [`ProbeError::outcome`] turns it into a `Failure`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The host name did not resolve (getaddrinfo's reason, lower-cased as Go prints it).
    #[error("dial tcp: lookup {host}: {reason}")]
    Lookup { host: String, reason: String },
    /// The action handed to [`NetProbe::start`] was not `http_get` or `tcp_socket`.
    #[error("probe action is not a network probe")]
    NotNetwork,
    /// `socket(2)` failed (EMFILE, ENOBUFS…), worded like Go's `net.OpError`.
    #[error("dial tcp {addr}: socket: {reason}")]
    Socket { addr: String, reason: String },
    /// `connect(2)` failed, immediately or later through `SO_ERROR`.
    #[error("dial tcp {addr}: connect: {reason}")]
    Connect { addr: String, reason: String },
    /// The socket could not be added to or driven by the poller.
    #[error("probe {addr}: register with poller: {reason}")]
    Register { addr: String, reason: String },
    /// Sending the HTTP request failed.
    #[error("HTTP probe failed: write: {reason}")]
    Write { reason: String },
    /// Receiving the HTTP response failed.
    #[error("HTTP probe failed: read: {reason}")]
    Read { reason: String },
    /// The TLS session failed: handshake, certificate, alert, or the CA file.
    #[error("tls: {reason}")]
    Tls { reason: String },
    /// Sending or receiving on a gRPC probe's connection failed.
    #[error("gRPC probe failed: {op}: {reason}")]
    GrpcIo { op: &'static str, reason: String },
}

impl ProbeError {
    /// The failed outcome carrying this error's message.
    pub fn outcome(&self) -> ProbeOutcome {
        ProbeOutcome::Failure(self.to_string())
    }
}

/// Result message for an exec probe from the first bytes of its combined output: the first
/// [`EXEC_MESSAGE_BYTES`] bytes, decoded as lossy UTF-8, trimmed, control characters escaped
/// (`\n`, `\u{1b}`), with `…` appended when the output was longer.
pub fn exec_message(output: &[u8]) -> String {
    excerpt(output, EXEC_MESSAGE_BYTES)
}

/// `bytes` cut to at most `max` bytes (never inside a UTF-8 sequence), decoded lossily,
/// trimmed, with control characters escaped so that one result stays on one line and cannot
/// drive a terminal; `…` marks a cut.
pub(crate) fn excerpt(bytes: &[u8], max: usize) -> String {
    let cut = bytes.len() > max;
    let head = if cut {
        drop_incomplete_tail(&bytes[..max])
    } else {
        bytes
    };
    let text = String::from_utf8_lossy(head);
    let mut out = escape_controls(text.trim());
    if cut {
        out.push('…');
    }
    out
}

/// Escapes every control character (C0, DEL, C1) the way Rust's `escape_debug` does.
pub(crate) fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

/// Drops a multi-byte UTF-8 sequence that a cut left incomplete at the end, so that a cut
/// does not show up as a replacement character. Invalid bytes elsewhere are left to the lossy
/// decoder.
fn drop_incomplete_tail(bytes: &[u8]) -> &[u8] {
    // A sequence is at most 4 bytes: look back at most 3 bytes for its lead byte.
    for back in 1..=bytes.len().min(4) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead
        }
        let want = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return bytes, // ASCII or invalid lead: nothing to drop
        };
        return if back < want {
            &bytes[..bytes.len() - back]
        } else {
            bytes
        };
    }
    bytes
}

/// The lower-case `strerror` text of an I/O error, as Go prints syscall errors
/// (`connection refused`, not `Connection refused (os error 111)`).
pub(crate) fn io_reason(err: &std::io::Error) -> String {
    let text = match err.raw_os_error() {
        Some(code) => nix::errno::Errno::from_raw(code).desc().to_string(),
        None => err.to_string(),
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_message_trims_and_escapes_control_characters() {
        assert_eq!(exec_message(b"  ok\n"), "ok");
        assert_eq!(
            exec_message(b"line1\nline2\x1b[31m\n"),
            "line1\\nline2\\u{1b}[31m"
        );
        assert_eq!(exec_message(b"tab\there"), "tab\\there");
        assert_eq!(exec_message(b""), "");
    }

    #[test]
    fn exec_message_decodes_invalid_utf8_lossily() {
        assert_eq!(exec_message(b"bad \xff byte"), "bad \u{fffd} byte");
        assert_eq!(exec_message("héllo".as_bytes()), "héllo");
    }

    #[test]
    fn exec_message_keeps_first_kibibyte_and_marks_the_cut() {
        let long = vec![b'a'; 5000];
        let msg = exec_message(&long);
        assert_eq!(msg.len(), EXEC_MESSAGE_BYTES + '…'.len_utf8());
        assert!(msg.ends_with('…'));
        let exact = vec![b'b'; EXEC_MESSAGE_BYTES];
        assert_eq!(exec_message(&exact), "b".repeat(EXEC_MESSAGE_BYTES));
    }

    #[test]
    fn exec_message_never_cuts_inside_a_utf8_sequence() {
        // 1023 ASCII bytes then a 3-byte character straddling the 1 KiB cut.
        let mut out = vec![b'x'; EXEC_MESSAGE_BYTES - 1];
        out.extend_from_slice("€tail".as_bytes());
        let msg = exec_message(&out);
        assert_eq!(msg, format!("{}…", "x".repeat(EXEC_MESSAGE_BYTES - 1)));
        assert!(!msg.contains('\u{fffd}'));
    }

    #[test]
    fn io_reason_is_lower_case_strerror() {
        let err = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(io_reason(&err), "connection refused");
    }
}
