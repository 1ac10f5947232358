//! Request ids and what the log keeps.

use serde_json::json;

use crate::support::TestServer;

#[tokio::test]
async fn every_response_carries_a_request_id_and_bodies_stay_out_of_the_log() {
    // Proves each response has an x-request-id (a fresh one per request, or the client's own
    // when it sent one), and that message bodies and webhook secrets never reach the log at
    // the default level.
    let server = TestServer::builder()
        .env("HOOK_SECRET_FOR_LOG_TEST", "a-webhook-secret-value-42")
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..3 {
        let response = server
            .client()
            .get(format!("{}/v1/queues/q", server.url()))
            .send()
            .await
            .unwrap();
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(uuid::Uuid::try_parse(&id).is_ok(), "{id}");
        assert!(seen.insert(id), "request ids repeat");
    }
    let echoed = server
        .client()
        .get(format!("{}/v1/queues/nope", server.url()))
        .header("x-request-id", "trace-me-123")
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.status(), 404);
    assert_eq!(echoed.headers()["x-request-id"], "trace-me-123");

    server
        .send("q", json!({"body": {"card": "SECRET-BODY-4242"}}))
        .await;
    server
        .put(
            "/v1/webhooks/h",
            json!({"queue": "q", "verify": {"scheme": "github", "secrets": [{"env": "HOOK_SECRET_FOR_LOG_TEST"}]}}),
        )
        .await
        .ok();
    let refused = server
        .client()
        .post(format!("{}/hooks/h", server.url()))
        .header("x-hub-signature-256", "sha256=00")
        .body("{\"card\": \"SECRET-BODY-4242\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let log = server.log_tail(10_000);
    assert!(!log.contains("SECRET-BODY-4242"), "a body is in the log");
    assert!(
        !log.contains("a-webhook-secret-value-42"),
        "a secret is in the log"
    );
}

#[tokio::test]
async fn a_webhook_message_keeps_its_headers_but_not_its_signature() {
    // Proves the stored headers leave out the signature and its timestamp (they would let
    // anyone who can read the queue post the delivery again) and keep the rest.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let server = TestServer::builder()
        .env("STORED_HEADERS_TEST_SECRET", SECRET)
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    server
        .put(
            "/v1/webhooks/sw",
            json!({"queue": "q", "verify": {"scheme": "standard_webhooks", "secrets": [{"env": "STORED_HEADERS_TEST_SECRET"}]}}),
        )
        .await
        .ok();
    let body = r#"{"type":"ping"}"#;
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let signer = sluice_webhooks::sign::StandardSigner::new(SECRET).unwrap();
    let mut request = server
        .client()
        .post(format!("{}/hooks/sw", server.url()))
        .header("x-custom", "kept")
        .body(body);
    for (name, value) in signer.headers("msg_stored_1", now_s, body.as_bytes()) {
        request = request.header(name, value);
    }
    assert_eq!(request.send().await.unwrap().status(), 202);
    let message = server.receive("q", json!({})).await.remove(0);
    let headers = message["headers"].as_object().unwrap();
    assert_eq!(headers["x-custom"], "kept", "{headers:?}");
    assert_eq!(headers["webhook-id"], "msg_stored_1", "{headers:?}");
    assert!(!headers.contains_key("webhook-signature"), "{headers:?}");
    assert!(!headers.contains_key("webhook-timestamp"), "{headers:?}");
}
