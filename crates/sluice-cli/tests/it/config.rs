//! Queues from the config file, and queue updates over the API.

use serde_json::json;
use sluice_testkit::server::Launch;

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn queues_in_the_config_file_are_created_at_start() {
    // Proves a `[queues.NAME]` table is applied at start: the queue, its DLQ and every given
    // setting exist before any API call, the others keep their defaults, and the visibility
    // timeout is in force.
    let config = r#"
[queues.orders]
visibility_timeout_ms = 1000
max_attempts = 3
ordering = "per_key"
max_message_bytes = 4096

[queues.orders.backoff]
initial_ms = 250
jitter = false
"#;
    let server = TestServer::builder()
        .config(config)
        .test_clock(true)
        .start()
        .await;

    let queue = server.get("/v1/queues/orders").await.ok();
    let config = &queue["config"];
    assert_eq!(config["visibility_timeout_ms"], 1000, "{queue}");
    assert_eq!(config["max_attempts"], 3, "{queue}");
    assert_eq!(config["ordering"], "per_key", "{queue}");
    assert_eq!(config["max_message_bytes"], 4096, "{queue}");
    assert_eq!(
        config["backoff"],
        json!({"initial_ms": 250, "max_ms": 60000, "factor": 2.0, "jitter": false}),
        "{queue}"
    );
    assert_eq!(config["dead_letter_queue"], "orders.dlq", "{queue}");
    assert_eq!(config["dedup_window_ms"], 86_400_000, "{queue}");
    server.get("/v1/queues/orders.dlq").await.ok();

    server.send("orders", json!({"body": 1, "key": "a"})).await;
    let first = server.receive("orders", json!({})).await.remove(0);
    server.advance_clock(1000).await;
    let again = server.receive("orders", json!({})).await;
    assert_eq!(
        again.len(),
        1,
        "the configured visibility timeout is not in force"
    );
    assert_ne!(receipt(&again[0]), receipt(&first));
}

#[tokio::test]
async fn updating_a_queue_applies_only_the_given_fields() {
    // Proves PUT on an existing queue answers created: false and changes only what it names,
    // and changing the ordering of a non-empty queue is 409 conflict.
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "q",
            json!({"visibility_timeout_ms": 2000, "max_attempts": 7}),
        )
        .await;
    let updated = server
        .put("/v1/queues/q", json!({"max_attempts": 2}))
        .await
        .ok();
    assert_eq!(updated["created"], false);
    assert_eq!(updated["queue"]["config"]["max_attempts"], 2);
    assert_eq!(updated["queue"]["config"]["visibility_timeout_ms"], 2000);

    server.send("q", json!({"body": 1})).await;
    server
        .put("/v1/queues/q", json!({"ordering": "fifo"}))
        .await
        .error(409, "conflict");
    assert_eq!(
        server.get("/v1/queues/q").await.ok()["config"]["ordering"],
        "unordered"
    );

    let deleted = server.delete("/v1/queues/q?dead_letters=keep").await.ok();
    assert_eq!(
        deleted,
        json!({"deleted": true, "messages_removed": 1, "dead_letter_queue": null, "dead_letters_removed": 0})
    );
    server
        .get("/v1/queues/q")
        .await
        .error(404, "queue_not_found");
    server.get("/v1/queues/q.dlq").await.ok();
}

#[tokio::test]
async fn a_config_file_queue_gets_the_checks_of_every_door() {
    // Proves the config file's queues go through the operations layer like the API's: a
    // queue that is its own dead-letter queue is refused at start, naming the table (it was
    // stored as written, before issue 32).
    // `SLUICE_TEST_BINARY` runs the tests against another build (see `support`).
    let binary = std::env::var_os("SLUICE_TEST_BINARY")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_sluice").into());
    let out = Launch::new(binary)
        .config("[queues.orders]\ndead_letter_queue = \"orders\"\n")
        .refused()
        .await;
    let stderr = &out.stderr;
    assert!(!out.status.success(), "started: {stderr}");
    assert!(
        stderr.contains("[queues.orders]") && stderr.contains("its own dead-letter queue"),
        "{stderr}"
    );
}
