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
//! The crypto provider is *ring*: it builds with a C compiler alone (aws-lc-rs also needs
//! CMake and takes several times longer to compile) and gives a smaller binary; a probe
//! needs no FIPS mode and no post-quantum key exchange.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, Error};

use crate::config::spec::TlsSpec;

use super::ProbeError;

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
pub fn check_ca_file(path: &std::path::Path) -> Result<(), String> {
    verified_config(path).map(|_| ()).map_err(|e| e.to_string())
}

/// A configuration trusting exactly the certificates in `path` (PEM). The file is read on
/// every attempt, so a rotated CA is picked up without a reload; it is a small local file.
fn verified_config(path: &std::path::Path) -> Result<Arc<ClientConfig>, ProbeError> {
    let fail = |why: String| ProbeError::Tls {
        reason: format!("ca_file {}: {why}", path.display()),
    };
    let pem = std::fs::read(path).map_err(|e| fail(super::io_reason(&e)))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| fail(format!("bad PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| fail(format!("unusable certificate: {}", describe(&e))))?;
    }
    if roots.is_empty() {
        return Err(fail("no certificates in file".to_string()));
    }
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(describe(&e)))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// What failed, in a few words (`certificate expired`,
/// `certificate signed by unknown authority`), for messages prefixed `tls: `.
pub fn describe(err: &Error) -> String {
    match err {
        Error::InvalidCertificate(cert) => match cert {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "certificate expired".to_string()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "certificate not yet valid".to_string()
            }
            CertificateError::UnknownIssuer => {
                "certificate signed by unknown authority".to_string()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "certificate is not valid for the server name".to_string()
            }
            CertificateError::BadSignature => "certificate has a bad signature".to_string(),
            CertificateError::Revoked => "certificate revoked".to_string(),
            other => format!("invalid certificate: {other:?}"),
        },
        Error::AlertReceived(alert) => format!("server sent alert {alert:?}"),
        Error::NoCertificatesPresented => "server presented no certificate".to_string(),
        Error::InvalidMessage(m) => format!("malformed message from server: {m:?}"),
        Error::PeerIncompatible(p) => format!("server incompatible: {p:?}"),
        Error::PeerMisbehaved(p) => format!("server misbehaved: {p:?}"),
        other => other.to_string(),
    }
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
