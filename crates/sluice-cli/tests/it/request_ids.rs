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
