//! TLS to PostgreSQL (the URL's `sslmode`, `[store] ca_file`; `sluice_store_postgres::tls`),
//! against the test database, which must have `ssl = on` (the Debian package's default, with
//! its self-signed "snakeoil" certificate for `localhost`). Each test says it is skipped when
//! the database has TLS off, unless `CI` is set.
//!
//! What is shown: `require` encrypts every connection of the store (`pg_stat_ssl`) and
//! `disable` none; `verify-full` refuses a certificate no trusted root signed (a CA file of
//! another authority), with an error that names the handshake and what to set; with the server's own certificate as `ca_file`,
//! `verify-ca` connects to any host name and `verify-full` only to the one the certificate
//! names.

use crate::support;
use sluice_core::store::prelude::*;

use sluice_core::queue::QueueConfig;
use sluice_core::store::{QueuePutParams, Store, StoreError};
use sluice_store_postgres::{DatabaseUrl, PgOptions, PgStore};

/// The test database's URL with `sslmode` and a host of the test's choosing, and the schema.
struct Fixture {
    url: String,
    schema: String,
}

impl Fixture {
    /// The fixture, once the test database answers and has TLS on.
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let client = support::connect(&url).await.unwrap();
        let ssl: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
        if ssl != "on" {
            assert!(
                std::env::var_os("CI").is_none(),
                "the test database has ssl = off; the TLS tests need it on"
            );
            eprintln!("skipped: the test database has ssl = off");
            return None;
        }
        Some(Self {
            url,
            schema: support::fresh_schema(),
        })
    }

    /// Options for `host` with `sslmode`, naming the node after the schema so its
    /// connections can be found in `pg_stat_activity`.
    fn options(&self, host: &str, ssl_mode: &str) -> PgOptions {
        let mut options = support::options(&self.url, &self.schema);
        let url = self.url.replacen("127.0.0.1", host, 1);
        let separator = if url.contains('?') { '&' } else { '?' };
        options.url = DatabaseUrl::new(format!("{url}{separator}sslmode={ssl_mode}"));
        options.node_name = self.node_name(ssl_mode);
        options
    }

    /// A node name of this test and mode, so connections of a store closed a moment ago (their
    /// backends may not have exited yet) are not counted for the next.
    fn node_name(&self, ssl_mode: &str) -> String {
        format!("tls-{ssl_mode}-{}", &self.schema[self.schema.len() - 12..])
    }

    /// Whether each connection of the node opened with `ssl_mode` is encrypted, as the
    /// database sees them.
    async fn encrypted(&self, ssl_mode: &str) -> Vec<bool> {
        let client = support::connect(&self.url).await.unwrap();
        client
            .query(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
                 WHERE a.application_name = $1",
                &[&format!("sluice/{}", self.node_name(ssl_mode))],
            )
            .await
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    }

    /// The server's certificate file, when this test runs where the database does and may
    /// read it.
    async fn server_certificate(&self) -> Option<std::path::PathBuf> {
        let client = support::connect(&self.url).await.unwrap();
        let path: String = client
            .query_one("SHOW ssl_cert_file", &[])
            .await
            .unwrap()
            .get(0);
        let path = std::path::PathBuf::from(path);
        std::fs::metadata(&path).is_ok().then_some(path)
    }

    async fn drop(self) {
        support::drop_schema(self.url, self.schema).await;
    }
}

/// A queue written and read back: the store works over its connections.
async fn use_store(store: &PgStore) {
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config: QueueConfig::defaults_for("q"),
            now_ms: 1_700_000_000_000,
        })
        .await
        .unwrap();
    store.queue_get("q", 1_700_000_000_000).await.unwrap();
}

#[tokio::test]
async fn sslmode_require_encrypts_every_connection_and_disable_none() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    for (mode, expected) in [("require", true), ("disable", false)] {
        let store = PgStore::open(fixture.options("127.0.0.1", mode))
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        use_store(&store).await;
        let encrypted = fixture.encrypted(mode).await;
        assert!(!encrypted.is_empty(), "the node's connections are found");
        assert!(
            encrypted.iter().all(|&ssl| ssl == expected),
            "sslmode={mode}: {encrypted:?}"
        );
        store.close().await.unwrap();
    }
    fixture.drop().await;
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_no_trusted_root_signed() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    // A CA of the test's own, which signed nothing the database holds: the server's
    // certificate is refused for its issuer, whatever the host name.
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("other-ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();
    let mut options = fixture.options("localhost", "verify-full");
    options.ca_file = Some(ca_file);
    let error = PgStore::open(options).await.map(drop).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, StoreError::Unavailable(_))
            && text.contains("TLS handshake")
            && text.contains("UnknownIssuer")
            && text.contains("[store] ca_file"),
        "{text}"
    );
    eprintln!("verify-full with a CA that signed nothing: {text}");
    // Without a CA file the platform's roots decide; the test database's self-signed
    // certificate is not issued for 127.0.0.1 either way.
    let error = PgStore::open(fixture.options("127.0.0.1", "verify-full"))
        .await
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(error.contains("TLS handshake"), "{error}");
    fixture.drop().await;
}

#[tokio::test]
async fn a_ca_file_is_trusted_and_verify_full_checks_the_host_name() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let Some(certificate) = fixture.server_certificate().await else {
        eprintln!("skipped: the server's certificate cannot be read here");
        return;
    };
    let with_ca = |host: &str, mode: &str| {
        let mut options = fixture.options(host, mode);
        options.ca_file = Some(certificate.clone());
        options
    };
    // The snakeoil certificate is issued for `localhost`: trusted from the file, by any name
    // under verify-ca, by its own name under verify-full.
    for (host, mode) in [("127.0.0.1", "verify-ca"), ("localhost", "verify-full")] {
        let store = PgStore::open(with_ca(host, mode))
            .await
            .unwrap_or_else(|e| panic!("{host} sslmode={mode}: {e}"));
        use_store(&store).await;
        let encrypted = fixture.encrypted(mode).await;
        assert!(
            !encrypted.is_empty() && encrypted.iter().all(|&ssl| ssl),
            "{encrypted:?}"
        );
        store.close().await.unwrap();
    }
    let error = PgStore::open(with_ca("127.0.0.1", "verify-full"))
        .await
        .map(drop)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("TLS handshake") && error.contains("not valid for name"),
        "{error}"
    );
    fixture.drop().await;
}
