//! Leases: expiry and redelivery, and receipts that are no longer the current lease.
//! All on the test clock.

use serde_json::{Value, json};

use crate::support::{TestServer, parse_time, receipt};

#[tokio::test]
async fn an_expired_lease_redelivers_with_the_next_attempt() {
    // Proves a message leased for 1000 ms stays invisible at +999 ms and is handed out again at
    // +1000 ms with attempts 2, a new receipt and last_error "visibility timeout expired".
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.send("q", json!({"body": "x"})).await;

    let now = server.now().await;
    let first = server.receive("q", json!({})).await.remove(0);
    assert_eq!(first["attempts"], 1);
    assert!(
        first.get("last_error").is_none_or(Value::is_null),
        "{first}"
    );
    assert_eq!(parse_time(&first["lease_expires_at"]), now + 1000);

    server.advance_clock(999).await;
    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "visible before its lease ran out"
    );
    server.advance_clock(1).await;
    let second = server.receive("q", json!({})).await;
    assert_eq!(second.len(), 1, "not visible again when the lease ran out");
    let second = &second[0];
    assert_eq!(second["message_id"], first["message_id"]);
    assert_eq!(second["attempts"], 2);
    assert_eq!(second["last_error"], "visibility timeout expired");
    assert_ne!(receipt(second), receipt(&first));
    assert_eq!(second["first_received_at"], first["first_received_at"]);

    let stats = server.stats("q").await;
    assert_eq!(stats["counters"]["lease_expired"], 1, "{stats}");
    assert_eq!(stats["counters"]["delivered"], 2, "{stats}");
}

#[tokio::test]
async fn receive_visibility_timeout_overrides_the_queue_default() {
    // Proves `visibility_timeout_ms` on a receive sets that lease's length.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.send("q", json!({"body": "x"})).await;

    let now = server.now().await;
    let message = server
        .receive("q", json!({"visibility_timeout_ms": 5000}))
        .await
        .remove(0);
    assert_eq!(parse_time(&message["lease_expires_at"]), now + 5000);
    server.advance_clock(4999).await;
    assert!(server.receive("q", json!({})).await.is_empty());
    server.advance_clock(1).await;
    assert_eq!(server.receive("q", json!({})).await.len(), 1);
}

#[tokio::test]
async fn an_expired_lease_can_still_be_acked_before_redelivery() {
    // Proves an ack after the lease ran out succeeds while nobody else has received the message.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.send("q", json!({"body": "x"})).await;
    let message = server.receive("q", json!({})).await.remove(0);

    server.advance_clock(5000).await;
    server.ack("q", receipt(&message)).await;
    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "an acked message came back"
    );
}

#[tokio::test]
async fn an_expired_last_attempt_is_dead_lettered() {
    // Proves a lease running out on the last allowed attempt dead-letters the message with
    // last_error "visibility timeout expired".
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"visibility_timeout_ms": 1000, "max_attempts": 2}),
        )
        .await;
    let id = server.send("q", json!({"body": "x"})).await["message_id"].clone();

    server.receive("q", json!({})).await.remove(0);
    server.advance_clock(1000).await;
    assert_eq!(
        server.receive("q", json!({})).await.remove(0)["attempts"],
        2
    );
    server.advance_clock(1000).await;
    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "delivered past max_attempts"
    );

    let dead = server.receive("q.dlq", json!({})).await;
    assert_eq!(dead.len(), 1, "not in the dead-letter queue");
    assert_eq!(dead[0]["message_id"], id);
    assert_eq!(dead[0]["dead_letter"]["source_queue"], "q");
    assert_eq!(dead[0]["dead_letter"]["attempts"], 2);
    assert_eq!(
        dead[0]["dead_letter"]["last_error"],
        "visibility timeout expired"
    );
}

#[tokio::test]
async fn a_stale_receipt_is_refused_and_changes_nothing() {
    // Proves that once a lease ran out and the message went out again, the old receipt gets 409
    // stale_receipt on ack, nack and extend, the message stays in flight on its new lease, and
    // the new receipt still acks; acking twice is stale too.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    let id = server.send("q", json!({"body": "x"})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let old = server.receive("q", json!({})).await.remove(0);
    server.advance_clock(1000).await;
    let new = server.receive("q", json!({})).await.remove(0);
    assert_eq!(new["attempts"], 2);
    let status_before = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();

    let refused = server
        .post("/v1/queues/q/ack", json!({"receipt": receipt(&old)}))
        .await;
    let error = refused.error(409, "stale_receipt");
    let results = ack_results(&error);
    assert_eq!(results.len(), 1, "{error}");
    assert_eq!(results[0]["receipt"], receipt(&old));
    assert_eq!(results[0]["acked"], false);

    server
        .post(
            "/v1/queues/q/nack",
            json!({"receipt": receipt(&old), "error": "late"}),
        )
        .await
        .error(409, "stale_receipt");
    server
        .post(
            "/v1/queues/q/extend",
            json!({"receipt": receipt(&old), "visibility_timeout_ms": 60000}),
        )
        .await
        .error(409, "stale_receipt");

    let status_after = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(status_after["state"], "in_flight", "{status_after}");
    assert_eq!(
        status_after, status_before,
        "a refused receipt changed the message"
    );
    assert!(server.receive("q", json!({})).await.is_empty());

    server.ack("q", receipt(&new)).await;
    server
        .post("/v1/queues/q/ack", json!({"receipt": receipt(&new)}))
        .await
        .error(409, "stale_receipt");
}

#[tokio::test]
async fn a_batch_ack_with_a_stale_receipt_still_acks_the_current_ones() {
    // Proves a multi-receipt ack with one stale receipt answers 409 stale_receipt with one
    // result per receipt in `details`, and the current receipts are acked all the same.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.send("q", json!({"body": "stale"})).await;
    let old = server.receive("q", json!({})).await.remove(0);
    server.advance_clock(1000).await;
    let new = server.receive("q", json!({})).await.remove(0);
    server.send("q", json!({"body": "fresh"})).await;
    let fresh = server.receive("q", json!({})).await.remove(0);
    assert_eq!(fresh["body"], "fresh");

    let receipts = [receipt(&fresh), receipt(&old)];
    let error = server
        .post("/v1/queues/q/ack", json!({ "receipts": receipts }))
        .await
        .error(409, "stale_receipt");
    let results = ack_results(&error);
    assert_eq!(results.len(), 2, "{error}");
    assert_eq!(
        (results[0]["receipt"].as_str(), &results[0]["acked"]),
        (Some(receipts[0]), &json!(true))
    );
    assert_eq!(
        (results[1]["receipt"].as_str(), &results[1]["acked"]),
        (Some(receipts[1]), &json!(false))
    );

    server
        .post("/v1/queues/q/ack", json!({"receipt": receipt(&fresh)}))
        .await
        .error(409, "stale_receipt");
    server.ack("q", receipt(&new)).await;
    let stats = server.stats("q").await;
    assert_eq!(
        (stats["ready"].as_u64(), stats["in_flight"].as_u64()),
        (Some(0), Some(0)),
        "{stats}"
    );
}

/// The per-receipt results of a refused ack: `details` is either the list or holds it as
/// `results` (the contract names the content, not the nesting).
fn ack_results(error: &Value) -> Vec<Value> {
    let details = &error["details"];
    let list = if details.is_array() {
        details
    } else {
        &details["results"]
    };
    list.as_array()
        .unwrap_or_else(|| panic!("no per-receipt results in details: {error}"))
        .clone()
}
