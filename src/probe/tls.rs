//! TLS for HTTPS probes: builds the rustls client session for one attempt and words its
//! failures for the user.
//!
//! Owns: the client configuration (crypto provider, trust roots, whether the server's
//! certificate is checked) and the mapping from a rustls error to a short message
//! (`tls: certificate expired`). The session itself is sans-I/O: [`super::net`] moves its
//! records over the probe's non-blocking socket with `read_tls`/`write_tls`, so a handshake
//! obeys the same readiness events and the same deadline as a plain connection.
//!
//! Must not: do socket I/O, block, or keep state between attempts other than the shared
//! configuration of unverified probes (which also carries rustls' session cache, so a
//! probe resumes its previous session instead of doing a full handshake every period).
//!
//! Like the kubelet's HTTPS probe (`pkg/probe/http`, `InsecureSkipVerify: true`), the
//! server's certificate chain and name are not checked unless `tls.ca_file` is given; the
//! handshake signature is still verified against the presented key, as Go does.
//!
//! With `tls.ca_file`, the server's certificate is accepted when it is one of the file's
//! certificates byte for byte (a pinned certificate, typically the server's own self-signed
//! one from `openssl req -x509`, which is CA:TRUE and which webpki alone refuses as an end
//! entity) and its validity dates hold now; otherwise webpki checks the chain up to a certificate of the file, the dates and
//! the name, as `curl --cacert` does. The file is opened at every attempt ([`super::cafile`])
//! and read and parsed only when its (device, inode, mtime, size) changed: what it gave is
//! kept per path, for at most [`MAX_CACHED`] paths.
//!
//! The crypto provider is *ring*: it builds with a C compiler alone (aws-lc-rs also needs
//! CMake and takes several times longer to compile) and gives a smaller binary; a probe
//! needs no FIPS mode and no post-quantum key exchange.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    AlertDescription, CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct,
    Error, OtherError,
};

use crate::config::spec::TlsSpec;

use super::ProbeError;
use super::cafile::{self, Stamp};

/// CA files whose configuration is kept at once: a config names a handful; past this the
/// cache starts over.
const MAX_CACHED: usize = 64;

/// What one version of a CA file gave: its configuration, or why it cannot be used.
type Built = Result<Arc<ClientConfig>, String>;

thread_local! {
    /// Per `ca_file` path: the stamp of the version read and what it gave. The loop's thread
    /// (and `vigil check`'s) is the only one to build HTTPS sessions.
    static CA_FILES: RefCell<HashMap<PathBuf, (Stamp, Built)>> = RefCell::new(HashMap::new());
}

/// The provider every probe uses (see the module docs for why ring).
fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| Arc::new(rustls::crypto::ring::default_provider()))
        .clone()
}

/// A fresh client session for `host` (or `tls.server_name`), ready to write its
/// ClientHello. Failures come back as the probe's error (unreadable CA file, bad name).
pub fn client(tls: &TlsSpec, host: &str) -> Result<ClientConnection, ProbeError> {
    let name_text = tls.server_name.as_deref().unwrap_or(host);
    let literal = name_text
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(name_text);
    let name = ServerName::try_from(literal.to_string()).map_err(|_| ProbeError::Tls {
        reason: format!("invalid server name {name_text:?}"),
    })?;
    let config = match &tls.ca_file {
        None => unverified_config()?,
        Some(path) => verified_config(path)?,
    };
    ClientConnection::new(config, name).map_err(|e| ProbeError::Tls {
        reason: describe(&e),
    })
}

/// The shared configuration that skips certificate checks.
fn unverified_config() -> Result<Arc<ClientConfig>, ProbeError> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = provider();
            let verifier = Arc::new(NoVerify(provider.clone()));
            ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| {
                    Arc::new(
                        b.dangerous()
                            .with_custom_certificate_verifier(verifier)
                            .with_no_client_auth(),
                    )
                })
                .map_err(|e| describe(&e))
        })
        .clone()
        .map_err(|reason| ProbeError::Tls { reason })
}

/// Whether `path` is a readable PEM file of usable certificates, as an HTTPS probe with
/// `tls.ca_file` needs (`vigil check`): the probe's own message otherwise.
pub fn check_ca_file(path: &Path) -> Result<(), String> {
    verified_config(path).map(|_| ()).map_err(|e| e.to_string())
}

/// A configuration trusting the certificates in `path` (PEM, see the module docs), from the
/// cache while the file's stamp is unchanged.
fn verified_config(path: &Path) -> Result<Arc<ClientConfig>, ProbeError> {
    let fail = |why: String| ProbeError::Tls {
        reason: format!("ca_file {}: {why}", path.display()),
    };
    let (file, stamp) = cafile::open(path).map_err(fail)?;
    let hit = CA_FILES.with(|c| {
        c.borrow()
            .get(path)
            .filter(|(seen, _)| *seen == stamp)
            .map(|(_, built)| built.clone())
    });
    let built = match hit {
        Some(built) => built,
        None => {
            let built = cafile::read(file).and_then(|pem| config_trusting(&pem));
            CA_FILES.with(|c| {
                let mut c = c.borrow_mut();
                if c.len() >= MAX_CACHED && !c.contains_key(path) {
                    c.clear();
                }
                c.insert(path.to_path_buf(), (stamp, built.clone()));
            });
            built
        }
    };
    built.map_err(fail)
}

/// The configuration for the PEM text of a CA file: its certificates are the trust roots and
/// the pins. No byte of the file goes into an error.
fn config_trusting(pem: &[u8]) -> Built {
    let mut roots = rustls::RootCertStore::empty();
    let mut pins = Vec::new();
    for (i, cert) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let n = i + 1;
        let cert = cert.map_err(|_| format!("certificate {n} is not valid PEM"))?;
        roots
            .add(cert.clone())
            .map_err(|e| format!("certificate {n} cannot be used: {}", describe(&e)))?;
        pins.push(cert);
    }
    if pins.is_empty() {
        return Err("no certificates in file".to_string());
    }
    let provider = provider();
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let verifier = Arc::new(PinnedOrWebPki { pins, webpki });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| describe(&e))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// A certificate refusal of vigil's own, worded for the user (carried in
/// `CertificateError::Other`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum Refusal {
    #[error("self-signed certificate that ca_file does not hold (put this very certificate in it)")]
    SelfSignedNotPinned,
    #[error("certificate is a CA's (basicConstraints CA:TRUE) that ca_file does not hold")]
    CaAsServer,
    /// A pinned certificate past its `notAfter` (the date, RFC 3339).
    #[error("pinned certificate expired (not valid after {0})")]
    PinExpired(String),
    /// A pinned certificate before its `notBefore` (the date, RFC 3339).
    #[error("pinned certificate not yet valid (not valid before {0})")]
    PinNotYetValid(String),
    #[error("pinned certificate has validity dates vigil cannot read")]
    PinDatesUnreadable,
}

/// `tls.ca_file`'s verifier: the presented certificate is accepted when it is byte for byte
/// one of the file's and valid now (a pin: its chain, name and basic constraints are what the
/// file's owner chose; its dates are checked as webpki checks a chain's, RFC 5280 §4.1.2.5);
/// otherwise webpki decides, name included.
#[derive(Debug)]
struct PinnedOrWebPki {
    pins: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self.pins.iter().any(|p| p.as_ref() == end_entity.as_ref()) {
            return pin_valid_at(end_entity.as_ref(), now)
                .map(|()| ServerCertVerified::assertion())
                .map_err(|refusal| {
                    Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                        refusal,
                    ))))
                });
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| refine(e, end_entity))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// webpki's refusal of a certificate the file does not hold, said as curl would: a
/// self-signed one is `self-signed certificate` rather than an unknown issuer, a CA's
/// certificate presented by a server is named so rather than webpki's `CaUsedAsEndEntity`.
fn refine(err: Error, end_entity: &CertificateDer<'_>) -> Error {
    let ca_as_server = matches!(&err, Error::InvalidCertificate(CertificateError::Other(o))
        if o.0.to_string() == "CaUsedAsEndEntity");
    let unknown = matches!(
        &err,
        Error::InvalidCertificate(CertificateError::UnknownIssuer)
    );
    if !(ca_as_server || unknown) {
        return err;
    }
    let refusal = if der::self_signed(end_entity.as_ref()) {
        Refusal::SelfSignedNotPinned
    } else if ca_as_server {
        Refusal::CaAsServer
    } else {
        return err;
    };
    Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(refusal))))
}

/// Whether a pinned certificate is valid at `now`: `notBefore <= now <= notAfter`, both
/// inclusive as RFC 5280 §4.1.2.5 says.
fn pin_valid_at(cert: &[u8], now: UnixTime) -> Result<(), Refusal> {
    let (not_before, not_after) = der::validity(cert).ok_or(Refusal::PinDatesUnreadable)?;
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    if now < not_before.unix {
        return Err(Refusal::PinNotYetValid(not_before.text));
    }
    if now > not_after.unix {
        return Err(Refusal::PinExpired(not_after.text));
    }
    Ok(())
}

/// Just enough DER (X.690) to read a certificate's issuer, subject and validity (RFC 5280
/// §4.1).
mod der {
    /// One TLV at the front of `input`: (tag, contents, the rest). `None` if malformed.
    fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        Some((tag, &rest[..len], &rest[len..]))
    }

    /// Whether the certificate names itself as its issuer (issuer = subject, byte for byte).
    pub fn self_signed(cert: &[u8]) -> bool {
        issuer_and_subject(cert).is_some_and(|(issuer, subject)| issuer == subject)
    }

    /// `tbsCertificate`'s issuer and subject `Name`s, as DER.
    fn issuer_and_subject(cert: &[u8]) -> Option<(&[u8], &[u8])> {
        let (issuer, _, subject) = fields(cert)?;
        Some((issuer, subject))
    }

    /// A certificate date: seconds since the Unix epoch and the date as RFC 3339 text.
    #[derive(Debug, PartialEq, Eq)]
    pub struct Date {
        pub unix: i64,
        pub text: String,
    }

    /// `tbsCertificate`'s validity: (notBefore, notAfter).
    pub fn validity(cert: &[u8]) -> Option<(Date, Date)> {
        let (_, validity, _) = fields(cert)?;
        let (before_tag, before, rest) = tlv(validity)?;
        let (after_tag, after, _) = tlv(rest)?;
        Some((time(before_tag, before)?, time(after_tag, after)?))
    }

    /// A `Time` (RFC 5280 §4.1.2.5): UTCTime `YYMMDDHHMMSSZ` (years 50–99 are 19xx) or
    /// GeneralizedTime `YYYYMMDDHHMMSSZ`, the only forms the RFC allows.
    fn time(tag: u8, value: &[u8]) -> Option<Date> {
        const UTC_TIME: u8 = 0x17;
        const GENERALIZED_TIME: u8 = 0x18;
        let digits = value.strip_suffix(b"Z")?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let num = |d: &[u8]| d.iter().fold(0i64, |n, c| n * 10 + i64::from(c - b'0'));
        let (year, rest) = match (tag, digits.len()) {
            (UTC_TIME, 12) => {
                let yy = num(&digits[..2]);
                (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &digits[2..])
            }
            (GENERALIZED_TIME, 14) => (num(&digits[..4]), &digits[4..]),
            _ => return None,
        };
        let [month, day, hour, minute, second] = [0, 2, 4, 6, 8].map(|i| num(&rest[i..i + 2]));
        // jiff checks the calendar (day of month, leap years) and does the arithmetic.
        let small = |n: i64| i8::try_from(n).ok();
        let civil = jiff::civil::DateTime::new(
            i16::try_from(year).ok()?,
            small(month)?,
            small(day)?,
            small(hour)?,
            small(minute)?,
            small(second)?,
            0,
        )
        .ok()?;
        let at = civil.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
        Some(Date {
            unix: at.as_second(),
            text: at.to_string(),
        })
    }

    /// `tbsCertificate`'s issuer `Name`, `Validity` and subject `Name`, as DER contents.
    fn fields(cert: &[u8]) -> Option<(&[u8], &[u8], &[u8])> {
        const SEQUENCE: u8 = 0x30;
        let (SEQUENCE, cert, _) = tlv(cert)? else {
            return None;
        };
        let (SEQUENCE, tbs, _) = tlv(cert)? else {
            return None;
        };
        let (tag, _, mut rest) = tlv(tbs)?;
        if tag == 0xa0 {
            rest = tlv(rest)?.2; // [0] version: the serial number follows
        }
        let (_signature, rest) = tlv(rest).map(|(_, v, r)| (v, r))?;
        let (SEQUENCE, issuer, rest) = tlv(rest)? else {
            return None;
        };
        let (SEQUENCE, validity, rest) = tlv(rest)? else {
            return None;
        };
        let (SEQUENCE, subject, _) = tlv(rest)? else {
            return None;
        };
        Some((issuer, validity, subject))
    }
}

/// What failed, in a few words as curl and Go say them (`certificate expired`,
/// `certificate signed by unknown authority`), for messages prefixed `tls: `. Never a Rust
/// `Debug` value: what has no words here gets a general phrase.
pub fn describe(err: &Error) -> String {
    match err {
        Error::InvalidCertificate(cert) => certificate_problem(cert),
        Error::AlertReceived(alert) => format!("server sent alert: {}", alert_words(*alert)),
        Error::NoCertificatesPresented => "server presented no certificate".to_string(),
        Error::InvalidMessage(_) => "malformed TLS message from server".to_string(),
        Error::InappropriateMessage { .. } | Error::InappropriateHandshakeMessage { .. } => {
            "unexpected TLS message from server".to_string()
        }
        Error::PeerIncompatible(_) => {
            "server has no TLS version, cipher suite or key exchange in common with vigil"
                .to_string()
        }
        Error::PeerMisbehaved(_) => "server broke the TLS protocol".to_string(),
        Error::DecryptError => "cannot decrypt a record from server".to_string(),
        Error::UnsupportedNameType => "server name of an unsupported type".to_string(),
        Error::EncryptError => "cannot encrypt a record".to_string(),
        Error::General(text) => text.clone(),
        _ => "TLS failure".to_string(),
    }
}

/// A refused certificate in words.
fn certificate_problem(cert: &CertificateError) -> String {
    match cert {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "certificate expired".to_string()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "certificate not yet valid".to_string()
        }
        CertificateError::UnknownIssuer => "certificate signed by unknown authority".to_string(),
        CertificateError::NotValidForNameContext {
            expected,
            presented,
        } => {
            let expected = match expected {
                ServerName::DnsName(name) => name.as_ref().to_string(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                _ => "the server name".to_string(),
            };
            if presented.is_empty() {
                format!(
                    "certificate is not valid for {expected}: it has no subject alternative names"
                )
            } else {
                let names: Vec<String> = presented.iter().map(|n| presented_name(n)).collect();
                format!(
                    "certificate is valid for {}, not {expected}",
                    names.join(", ")
                )
            }
        }
        CertificateError::NotValidForName => {
            "certificate is not valid for the server name".to_string()
        }
        CertificateError::BadSignature => "certificate has a bad signature".to_string(),
        CertificateError::BadEncoding => "certificate is malformed".to_string(),
        CertificateError::Revoked => "certificate revoked".to_string(),
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "certificate is not for a TLS server (extended key usage)".to_string()
        }
        CertificateError::UnhandledCriticalExtension => {
            "certificate has a critical extension vigil does not know".to_string()
        }
        CertificateError::Other(other) => match other.0.downcast_ref::<Refusal>() {
            Some(refusal) => refusal.to_string(),
            None => match other.0.to_string().as_str() {
                "CaUsedAsEndEntity" => Refusal::CaAsServer.to_string(),
                "EndEntityUsedAsCa" => "a server's certificate is used as a CA".to_string(),
                "PathLenConstraintViolated" => {
                    "certificate chain is longer than a CA allows".to_string()
                }
                "NameConstraintViolation" => {
                    "certificate violates its CA's name constraints".to_string()
                }
                _ => "invalid certificate".to_string(),
            },
        },
        _ => "invalid certificate".to_string(),
    }
}

/// A name the certificate has, as webpki lists it (`DnsName("db")`, `IpAddress(10.0.0.1)`, the
/// `Debug` form of its name types): the name alone, control characters escaped.
fn presented_name(listed: &str) -> String {
    let bare = listed
        .strip_prefix("DnsName(\"")
        .and_then(|n| n.strip_suffix("\")"))
        .or_else(|| {
            listed
                .strip_prefix("IpAddress(")
                .and_then(|n| n.strip_suffix(')'))
        })
        .unwrap_or(listed);
    super::escape_controls(bare)
}

/// A TLS alert in words (RFC 8446 §6).
fn alert_words(alert: AlertDescription) -> String {
    let words = match alert {
        AlertDescription::CloseNotify => "close notify",
        AlertDescription::UnexpectedMessage => "unexpected message",
        AlertDescription::BadRecordMac => "bad record MAC",
        AlertDescription::HandshakeFailure => "handshake failure",
        AlertDescription::BadCertificate => "bad certificate",
        AlertDescription::UnsupportedCertificate => "unsupported certificate",
        AlertDescription::CertificateRevoked => "certificate revoked",
        AlertDescription::CertificateExpired => "certificate expired",
        AlertDescription::CertificateUnknown => "certificate unknown",
        AlertDescription::IllegalParameter => "illegal parameter",
        AlertDescription::UnknownCA => "unknown CA",
        AlertDescription::AccessDenied => "access denied",
        AlertDescription::DecodeError => "decode error",
        AlertDescription::DecryptError => "decrypt error",
        AlertDescription::ProtocolVersion => "protocol version not supported",
        AlertDescription::InsufficientSecurity => "insufficient security",
        AlertDescription::InternalError => "internal error",
        AlertDescription::UnrecognisedName => "unrecognised name",
        AlertDescription::CertificateRequired => "certificate required",
        AlertDescription::NoApplicationProtocol => "no application protocol",
        other => return format!("alert {}", u8::from(other)),
    };
    words.to_string()
}

/// Accepts any certificate chain and name (the kubelet's default), but still checks that
/// the handshake was signed by the presented key.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_and_unknown_issuer_are_worded_like_go() {
        assert_eq!(
            describe(&Error::InvalidCertificate(CertificateError::Expired)),
            "certificate expired"
        );
        assert_eq!(
            describe(&Error::InvalidCertificate(CertificateError::UnknownIssuer)),
            "certificate signed by unknown authority"
        );
    }

    #[test]
    fn no_message_is_a_debug_value() {
        use rustls::{InvalidMessage, PeerIncompatible, PeerMisbehaved};
        let cases = [
            (
                Error::AlertReceived(AlertDescription::HandshakeFailure),
                "server sent alert: handshake failure",
            ),
            (
                Error::InvalidMessage(InvalidMessage::MissingData("x")),
                "malformed TLS message from server",
            ),
            (
                Error::PeerIncompatible(PeerIncompatible::NoCipherSuitesInCommon),
                "server has no TLS version, cipher suite or key exchange in common with vigil",
            ),
            (
                Error::PeerMisbehaved(PeerMisbehaved::IllegalMiddleboxChangeCipherSpec),
                "server broke the TLS protocol",
            ),
            (
                Error::InvalidCertificate(CertificateError::NotValidForNameContext {
                    expected: ServerName::try_from("db.internal").unwrap(),
                    presented: vec![],
                }),
                "certificate is not valid for db.internal: it has no subject alternative names",
            ),
            (
                Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    Refusal::CaAsServer,
                )))),
                "certificate is a CA's (basicConstraints CA:TRUE) that ca_file does not hold",
            ),
        ];
        for (err, words) in cases {
            assert_eq!(describe(&err), words, "{err:?}");
        }
    }

    #[test]
    fn a_ca_file_is_read_again_only_when_its_stamp_changes() {
        use std::time::{Duration, SystemTime};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem();
        std::fs::write(&path, &cert).unwrap();
        let when = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(when)
            .unwrap();
        let first = verified_config(&path).unwrap();
        // The same size and mtime, other bytes in place: not read, the same configuration.
        let garbage = "x".repeat(cert.len());
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, garbage.as_bytes(), 0).unwrap();
        file.set_modified(when).unwrap();
        assert!(Arc::ptr_eq(&first, &verified_config(&path).unwrap()));
        // Touched: read again, and its new content is refused.
        file.set_modified(SystemTime::now()).unwrap();
        assert_eq!(
            verified_config(&path).unwrap_err().to_string(),
            format!("tls: ca_file {}: no certificates in file", path.display())
        );
    }

    /// A self-signed certificate valid from `from` to `to`, as DER.
    fn dated(from: (i32, u8, u8), to: (i32, u8, u8)) -> Vec<u8> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
        params.not_after = rcgen::date_time_ymd(to.0, to.1, to.2);
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn certificate_dates_are_read_from_utc_time_and_generalized_time() {
        // rcgen writes UTCTime up to 2049 and GeneralizedTime from 2050, as RFC 5280 asks.
        let (before, after) = der::validity(&dated((2019, 1, 1), (2051, 2, 28))).unwrap();
        assert_eq!(before.text, "2019-01-01T00:00:00Z");
        assert_eq!(before.unix, 1_546_300_800);
        assert_eq!(after.text, "2051-02-28T00:00:00Z");
        assert_eq!(after.unix, 2_561_155_200);
        assert!(der::validity(b"\x30\x03\x02\x01\x01").is_none());
        // The calendar is checked: 29 February only in a leap year.
        let with_not_before = |utc: &[u8; 13]| {
            let mut cert = dated((2019, 1, 1), (2051, 2, 28));
            let at = cert
                .windows(13)
                .position(|w| w == b"190101000000Z")
                .unwrap();
            cert[at..at + 13].copy_from_slice(utc);
            der::validity(&cert)
        };
        assert!(with_not_before(b"190229000000Z").is_none());
        assert!(with_not_before(b"190431000000Z").is_none());
        let (leap, _) = with_not_before(b"200229000000Z").unwrap();
        assert_eq!(leap.text, "2020-02-29T00:00:00Z");
    }

    #[test]
    fn a_pinned_certificate_outside_its_dates_is_refused_naming_the_date() {
        let at = |secs: u64| UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs));
        let cert = dated((2019, 1, 1), (2020, 1, 1));
        assert_eq!(pin_valid_at(&cert, at(1_546_300_800)), Ok(()));
        assert_eq!(pin_valid_at(&cert, at(1_577_836_800)), Ok(()));
        assert_eq!(
            pin_valid_at(&cert, at(1_577_836_801)),
            Err(Refusal::PinExpired("2020-01-01T00:00:00Z".to_string()))
        );
        assert_eq!(
            pin_valid_at(&cert, at(1_546_300_799)),
            Err(Refusal::PinNotYetValid("2019-01-01T00:00:00Z".to_string()))
        );
        assert_eq!(
            describe(&Error::InvalidCertificate(CertificateError::Other(
                OtherError(Arc::new(Refusal::PinExpired(
                    "2020-01-01T00:00:00Z".to_string()
                )))
            ))),
            "pinned certificate expired (not valid after 2020-01-01T00:00:00Z)"
        );
    }

    #[test]
    fn unverified_client_accepts_ip_literals_and_names() {
        let spec = TlsSpec::default();
        assert!(client(&spec, "127.0.0.1").is_ok());
        assert!(client(&spec, "::1").is_ok());
        assert!(client(&spec, "[::1]").is_ok());
        assert!(client(&spec, "db.internal").is_ok());
    }

    #[test]
    fn missing_ca_file_is_a_probe_error_naming_it() {
        let spec = TlsSpec {
            ca_file: Some("/nonexistent/vigil-ca.pem".into()),
            server_name: None,
        };
        let err = client(&spec, "127.0.0.1").unwrap_err();
        assert_eq!(
            err.to_string(),
            "tls: ca_file /nonexistent/vigil-ca.pem: no such file or directory"
        );
    }
}
