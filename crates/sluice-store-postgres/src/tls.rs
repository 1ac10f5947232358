//! TLS to PostgreSQL (docs/design/postgres-store.md §6.1): the URL's `sslmode`, as libpq reads
//! it, over rustls on ring.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (the default) | when the server offers it | not checked, unless `[store] ca_file` is set: then signed by it |
//! | `require` | always | as `prefer` |
//! | `verify-ca` | always | signed by `[store] ca_file`, else by a root the platform trusts |
//! | `verify-full` | always | as `verify-ca`, and issued for the host the URL names |
//!
//! A certificate checked "as `verify-ca`" under `require` with a CA file is libpq's rule too (a
//! root certificate file turns `require` into `verify-ca`). The driver itself knows only
//! `disable`, `prefer` and `require`, so the `sslmode` parameter is taken out of the URL here and
//! the driver is given `require` with a connector that checks what the mode asks.

use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

/// How the URL asks for TLS (`sslmode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it.
    #[default]
    Prefer,
    /// TLS always.
    Require,
    /// TLS always, the certificate signed by a trusted root.
    VerifyCa,
    /// TLS always, the certificate signed by a trusted root and issued for the host.
    VerifyFull,
}

impl SslMode {
    /// The mode of an `sslmode` value.
    pub fn parse(value: &str) -> Result<Self, String> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }

    /// What the driver is told: whether TLS is tried, and whether it must succeed.
    pub(crate) fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Driver;
        match self {
            SslMode::Disable => Driver::Disable,
            SslMode::Prefer => Driver::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Driver::Require,
        }
    }
}

/// `url` without its `sslmode` parameter, and that parameter's value: in a `postgres://` URL's
/// query, or among the words of a `key=value` string.
pub fn split_ssl_mode(url: &str) -> (String, Option<String>) {
    let mut mode = None;
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_owned(), None);
        };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| match pair.strip_prefix("sslmode=") {
                Some(value) => {
                    mode = Some(value.to_owned());
                    false
                }
                None => true,
            })
            .collect();
        let url = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (url, mode);
    }
    let kept: Vec<&str> = url
        .split_whitespace()
        .filter(|word| match word.strip_prefix("sslmode=") {
            Some(value) => {
                mode = Some(value.trim_matches('\'').to_owned());
                false
            }
            None => true,
        })
        .collect();
    (kept.join(" "), mode)
}

/// The connector for `mode`: what it trusts comes from `ca_file` (PEM certificates) when set,
/// else, for the verifying modes, from the platform's trusted roots.
pub(crate) fn connector(
    mode: SslMode,
    ca_file: Option<&Path>,
) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = match (mode, ca_file) {
        (SslMode::Disable, _) => None,
        (_, Some(path)) => Some(roots_from_file(path)?),
        (SslMode::VerifyCa | SslMode::VerifyFull, None) => Some(platform_roots()?),
        (SslMode::Prefer | SslMode::Require, None) => None,
    };
    let verifier: Arc<dyn ServerCertVerifier> = match roots {
        None => Arc::new(Unchecked {
            algorithms: provider.signature_verification_algorithms,
        }),
        Some(roots) => {
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("the trusted certificates cannot be used: {e}"))?;
            if mode == SslMode::VerifyFull {
                webpki
            } else {
                Arc::new(AnyHostName(webpki))
            }
        }
    };
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The certificates of a PEM file (`[store] ca_file`).
fn roots_from_file(path: &Path) -> Result<RootCertStore, String> {
    let what = || format!("[store] ca_file {}", path.display());
    let mut roots = RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", what()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", what()))?;
    let (added, _ignored) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("{} holds no usable PEM certificate", what()));
    }
    Ok(roots)
}

/// The roots the platform trusts (its certificate store).
fn platform_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!(%error, "a trusted root of the platform could not be read");
    }
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "no trusted root certificates were found on this platform to verify the database's certificate; set [store] ca_file"
                .into(),
        );
    }
    Ok(roots)
}

/// `prefer` and `require` without a CA file: the connection is encrypted, the certificate not
/// checked (what libpq does). The handshake's signatures are still checked, so the server holds
/// the key of the certificate it sent.
#[derive(Debug)]
struct Unchecked {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain is checked against the trusted roots, the host name is not.
#[derive(Debug)]
struct AnyHostName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            checked => checked,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Whether a connection error was the TLS handshake's (a certificate refused, no common
/// protocol): a setting to fix, said as such. rustls's error reaches the driver inside an
/// `io::Error`, whose `source()` skips it, so that one is looked into too.
pub(crate) fn is_handshake_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(cause) = source {
        let inner = cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref);
        if cause.is::<rustls::Error>() || inner.is_some_and(|inner| inner.is::<rustls::Error>()) {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, rest: &str, mode: Option<&str>) {
        assert_eq!(
            split_ssl_mode(url),
            (rest.to_owned(), mode.map(str::to_owned)),
            "{url}"
        );
    }

    #[test]
    fn sslmode_is_taken_out_of_both_url_forms() {
        check(
            "postgres://u@db/q?sslmode=verify-full",
            "postgres://u@db/q",
            Some("verify-full"),
        );
        check(
            "postgresql://u@db/q?connect_timeout=3&sslmode=require&application_name=x",
            "postgresql://u@db/q?connect_timeout=3&application_name=x",
            Some("require"),
        );
        check("postgres://u@db/q", "postgres://u@db/q", None);
        check(
            "host=db user=u sslmode=verify-ca dbname=q",
            "host=db user=u dbname=q",
            Some("verify-ca"),
        );
        check("host=db dbname=q", "host=db dbname=q", None);
    }

    #[test]
    fn sslmode_values_are_libpqs() {
        for (value, mode) in [
            ("disable", SslMode::Disable),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ] {
            assert_eq!(SslMode::parse(value), Ok(mode));
        }
        for bad in ["allow", "VERIFY-FULL", ""] {
            assert!(
                SslMode::parse(bad).unwrap_err().contains("sslmode"),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_naming_the_key() {
        let dir = std::env::temp_dir().join(format!("sluice-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        for path in [empty.as_path(), &dir.join("missing.pem")] {
            let error = connector(SslMode::VerifyFull, Some(path))
                .map(drop)
                .unwrap_err();
            assert!(error.contains("[store] ca_file"), "{error}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
