//! HTTPS with a certificate and key from files.

use crate::support::TestServer;

#[tokio::test]
async fn with_a_certificate_the_server_speaks_https_only() {
    // Proves TLS: with tls_cert and tls_key the ready line says https, a client trusting the
    // certificate gets answers over HTTPS (HTTP/1.1, and HTTP/2 by ALPN), and plain HTTP on the
    // same port gets none.
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, generated.cert.pem()).unwrap();
    std::fs::write(&key, generated.key_pair.serialize_pem()).unwrap();
    let server = TestServer::builder()
        .config(&format!(
            "[server]\ntls_cert = {:?}\ntls_key = {:?}\n",
            cert.display().to_string(),
            key.display().to_string()
        ))
        .start()
        .await;
    assert!(server.url().starts_with("https://"), "{}", server.url());

    let client = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(generated.cert.pem().as_bytes()).unwrap(),
        )
        .build()
        .unwrap();
    let health = client
        .get(format!("{}/healthz", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let plain = server.url().replace("https://", "http://");
    let refused = reqwest::Client::new()
        .get(format!("{plain}/healthz"))
        .send()
        .await;
    assert!(
        refused.is_err() || !refused.unwrap().status().is_success(),
        "plain HTTP must not be served"
    );
    // ALPN offers h2: a client that asks for HTTP/2 over TLS gets it, on the same port.
    let h2 = std::process::Command::new("curl")
        .args(["-s", "--http2", "--cacert"])
        .arg(&cert)
        .args(["-o", "/dev/null", "-w", "%{http_version} %{http_code}"])
        .arg(format!("{}/healthz", server.url()))
        .output()
        .expect("curl runs");
    assert_eq!(String::from_utf8_lossy(&h2.stdout), "2 200");
    let untrusted = reqwest::Client::new()
        .get(format!("{}/healthz", server.url()))
        .send()
        .await;
    assert!(
        untrusted.is_err(),
        "a client that does not trust the certificate refuses it"
    );
}
