//! Cancel: every outcome of `POST /v1/queues/{queue}/cancel`, on the test clock.

use serde_json::{Value, json};

use crate::support::{TestServer, message_id, receipt};

async fn cancel(server: &TestServer, by: Value) -> Value {
    let reply = server.post("/v1/queues/q/cancel", by).await;
    let answer = reply.ok();
    let _: sluice_wire::CancelOut = reply.parse();
    answer
}

#[tokio::test]
async fn a_ready_message_cancelled_by_id_is_never_delivered() {
    // Proves cancel by message_id of a ready message: outcome cancelled with its id and state,
    // the lookup says `cancelled` (with finished_at), it is never delivered, a second cancel
    // says already_completed/cancelled, and counters.cancelled counts it.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    let id = message_id(&server.send("q", json!({"body": "doomed"})).await);
    let kept = message_id(&server.send("q", json!({"body": "kept"})).await);

    let answer = cancel(&server, json!({ "message_id": id })).await;
    assert_eq!(
        answer,
        json!({"outcome": "cancelled", "message_id": id, "state": "cancelled"})
    );
    let status = server.message_status("q", &id).await;
    assert_eq!(status["state"], "cancelled", "{status}");
    assert!(status["finished_at"].is_string(), "{status}");

    server.advance_clock(3_600_000).await;
    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["message_id"], kept.as_str());
    server.ack("q", receipt(&messages[0])).await;
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());

    let again = cancel(&server, json!({ "message_id": id })).await;
    assert_eq!(again["outcome"], "already_completed", "{again}");
    assert_eq!(again["state"], "cancelled", "{again}");

    let stats = server.stats("q").await;
    assert_eq!(stats["counters"]["cancelled"], 1, "{stats}");
    assert_eq!(stats["ready"], 0, "{stats}");
}

#[tokio::test]
async fn cancel_reports_every_outcome() {
    // Proves cancel by idempotency key, a delayed message (cancelled, never delivered after its
    // delay), already_processing for an in-flight message (which can still be acked),
    // already_completed for acked and dead-lettered messages (state says which), and not_found
    // for an unknown message id and an unknown key.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;

    // By idempotency key.
    let keyed = message_id(&server.send("q", json!({"body": "k", "id": "key-1"})).await);
    let answer = cancel(&server, json!({"id": "key-1"})).await;
    assert_eq!(answer["outcome"], "cancelled", "{answer}");
    assert_eq!(answer["message_id"], keyed.as_str(), "{answer}");

    // Delayed.
    let delayed = message_id(
        &server
            .send("q", json!({"body": "later", "delay_ms": 60_000}))
            .await,
    );
    let answer = cancel(&server, json!({ "message_id": delayed })).await;
    assert_eq!(answer["outcome"], "cancelled", "{answer}");
    assert_eq!(answer["state"], "cancelled", "{answer}");
    server.advance_clock(120_000).await;
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
    assert_eq!(server.stats("q").await["delayed"], 0);

    // In flight, then acked.
    let busy = message_id(&server.send("q", json!({"body": "busy"})).await);
    let leased = server.receive("q", json!({})).await.remove(0);
    assert_eq!(leased["message_id"], busy.as_str());
    let answer = cancel(&server, json!({ "message_id": busy })).await;
    assert_eq!(answer["outcome"], "already_processing", "{answer}");
    assert_eq!(answer["message_id"], busy.as_str(), "{answer}");
    assert_eq!(answer["state"], "in_flight", "{answer}");
    server.ack("q", receipt(&leased)).await;
    let answer = cancel(&server, json!({ "message_id": busy })).await;
    assert_eq!(answer["outcome"], "already_completed", "{answer}");
    assert_eq!(answer["state"], "acked", "{answer}");

    // Dead-lettered.
    let dead = message_id(
        &server
            .send("q", json!({"body": "bad", "id": "key-2"}))
            .await,
    );
    let leased = server.receive("q", json!({})).await.remove(0);
    assert_eq!(leased["message_id"], dead.as_str());
    server
        .nack("q", json!({"receipt": receipt(&leased), "permanent": true}))
        .await;
    let answer = cancel(&server, json!({"id": "key-2"})).await;
    assert_eq!(answer["outcome"], "already_completed", "{answer}");
    assert_eq!(answer["state"], "dead", "{answer}");
    assert_eq!(server.stats("q").await["dead_lettered"], 1);

    // Unknown.
    let unknown = uuid::Uuid::now_v7().to_string();
    let answer = cancel(&server, json!({ "message_id": unknown })).await;
    assert_eq!(answer["outcome"], "not_found", "{answer}");
    assert!(answer.get("message_id").is_none(), "{answer}");
    let answer = cancel(&server, json!({"id": "no-such-key"})).await;
    assert_eq!(answer["outcome"], "not_found", "{answer}");

    let stats = server.stats("q").await;
    assert_eq!(stats["counters"]["cancelled"], 2, "{stats}");
    assert_eq!(stats["counters"]["delivered"], 2, "{stats}");
}

#[tokio::test]
async fn cancel_needs_exactly_one_way_to_name_the_message() {
    // Proves a cancel with neither message_id nor id is a client error (never a 500), and
    // nothing is cancelled.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    server.send("q", json!({"body": 1})).await;
    server
        .post("/v1/queues/q/cancel", json!({}))
        .await
        .client_error();
    assert_eq!(server.stats("q").await["ready"], 1);
}

#[tokio::test]
async fn cancelling_in_an_ordered_queue_keeps_the_key_moving() {
    // Proves a cancel in a per_key queue neither blocks the key nor reorders it: with A, B, C
    // sent on one key, cancelling B (behind A) gives A then C; cancelling the head D of
    // another key gives E at once. A purge of a fifo queue with the head in flight lets later
    // messages through once it is acked.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"ordering": "per_key"})).await;
    let mut ids = Vec::new();
    for body in ["A", "B", "C"] {
        ids.push(message_id(
            &server.send("q", json!({"body": body, "key": "k"})).await,
        ));
    }
    cancel(&server, json!({"message_id": ids[1]})).await;
    let a = server.receive("q", json!({"max": 10})).await;
    assert_eq!(bodies(&a), ["A"]);
    server.ack("q", receipt(&a[0])).await;
    let c = server.receive("q", json!({"max": 10})).await;
    assert_eq!(bodies(&c), ["C"]);
    server.ack("q", receipt(&c[0])).await;

    let d = message_id(&server.send("q", json!({"body": "D", "key": "j"})).await);
    server.send("q", json!({"body": "E", "key": "j"})).await;
    cancel(&server, json!({ "message_id": d })).await;
    assert_eq!(
        bodies(&server.receive("q", json!({"max": 10})).await),
        ["E"]
    );

    server.put_queue("f", json!({"ordering": "fifo"})).await;
    server.send("f", json!({"body": "head"})).await;
    let head = server.receive("f", json!({})).await.remove(0);
    server.send("f", json!({"body": "purged"})).await;
    let purged = server.post_empty("/v1/queues/f/purge").await.ok();
    assert_eq!(purged, json!({"purged": 1, "in_flight": 1}));
    server.send("f", json!({"body": "after"})).await;
    server.ack("f", receipt(&head)).await;
    assert_eq!(
        bodies(&server.receive("f", json!({"max": 10})).await),
        ["after"]
    );
}

fn bodies(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|message| message["body"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_cancel_keeps_its_reason_as_the_last_error() {
    // Proves `reason`: kept as the cancelled message's `last_error` (cut to 4096 bytes, as a
    // nack's error), shown by the lookup; a cancel without one leaves `last_error` empty.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    let id = message_id(&server.send("q", json!({"body": "order 7"})).await);
    let answer = cancel(
        &server,
        json!({"message_id": id, "reason": "customer withdrew the order"}),
    )
    .await;
    assert_eq!(answer["outcome"], "cancelled", "{answer}");
    let status = server.message_status("q", &id).await;
    assert_eq!(status["state"], "cancelled", "{status}");
    assert_eq!(
        status["last_error"], "customer withdrew the order",
        "{status}"
    );

    let long = message_id(
        &server
            .send("q", json!({"body": "order 8", "id": "o-8"}))
            .await,
    );
    let answer = cancel(&server, json!({"id": "o-8", "reason": "x".repeat(10_000)})).await;
    assert_eq!(answer["outcome"], "cancelled", "{answer}");
    let status = server.message_status("q", &long).await;
    assert_eq!(
        status["last_error"].as_str().unwrap().len(),
        4096,
        "{status}"
    );

    let plain = message_id(&server.send("q", json!({"body": "order 9"})).await);
    cancel(&server, json!({"message_id": plain})).await;
    let status = server.message_status("q", &plain).await;
    assert!(
        status.get("last_error").is_none_or(Value::is_null),
        "{status}"
    );
}
