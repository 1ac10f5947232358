//! Idempotent enqueue: one message per idempotency key within the dedup window.

use std::sync::Arc;

use serde_json::json;

use crate::support::{TestServer, receipt};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_of_one_key_create_exactly_one_message() {
    // Proves 16 concurrent senders of one idempotency key get one `created: true` between them,
    // all the same message_id, and exactly one message is delivered.
    let server = Arc::new(TestServer::builder().start().await);
    server.put_queue("q", json!({})).await;

    let senders = (0..16).map(|sender| {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            server
                .send("q", json!({"id": "payment-1", "body": {"sender": sender}}))
                .await
        })
    });
    let answers: Vec<_> = futures::future::join_all(senders)
        .await
        .into_iter()
        .map(|joined| joined.expect("sender task"))
        .collect();

    let created = answers
        .iter()
        .filter(|answer| answer["created"] == true)
        .count();
    assert_eq!(created, 1, "{answers:?}");
    let first_id = &answers[0]["message_id"];
    assert!(
        answers
            .iter()
            .all(|answer| &answer["message_id"] == first_id),
        "{answers:?}"
    );

    let messages = server.receive("q", json!({"max": 100})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(&messages[0]["message_id"], first_id);
    server.ack("q", receipt(&messages[0])).await;
    assert!(
        server
            .receive("q", json!({"max": 100, "wait_ms": 200}))
            .await
            .is_empty()
    );
    assert_eq!(server.stats("q").await["counters"]["enqueued"], 1);
}

#[tokio::test]
async fn a_repeated_key_returns_the_first_message_and_stores_nothing() {
    // Proves a repeat of a key, alone or inside a batch, answers the first message_id with
    // created: false and stores nothing; the key is per queue.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.put_queue("other", json!({})).await;

    let first = server.send("q", json!({"id": "k1", "body": "first"})).await;
    assert_eq!(first["created"], true);
    let repeat = server
        .send("q", json!({"id": "k1", "body": "second"}))
        .await;
    assert_eq!(
        repeat,
        json!({"message_id": first["message_id"], "created": false, "state": "ready"})
    );

    let batch = server
        .send("q", json!({"messages": [{"id": "k1", "body": 1}, {"id": "k2", "body": 2}, {"id": "k2", "body": 3}]}))
        .await;
    let results = batch["results"].as_array().expect("results");
    assert_eq!(
        results[0],
        json!({"message_id": first["message_id"], "created": false, "state": "ready"})
    );
    assert_eq!(results[1]["created"], true);
    assert_eq!(
        results[2],
        json!({"message_id": results[1]["message_id"], "created": false, "state": "ready"})
    );

    let elsewhere = server
        .send("other", json!({"id": "k1", "body": "other queue"}))
        .await;
    assert_eq!(
        elsewhere["created"], true,
        "idempotency keys leaked across queues"
    );

    let messages = server.receive("q", json!({"max": 100})).await;
    let mut bodies: Vec<String> = messages
        .iter()
        .map(|message| message["body"].to_string())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["\"first\"", "2"]);
}

#[tokio::test]
async fn a_key_is_new_again_after_the_dedup_window() {
    // Proves the dedup window is honoured on the test clock: a repeat inside the window is a
    // duplicate, one after it creates a new message.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"dedup_window_ms": 1000}))
        .await;
    let first = server.send("q", json!({"id": "k", "body": 1})).await;
    server.advance_clock(500).await;
    assert_eq!(
        server.send("q", json!({"id": "k", "body": 2})).await["created"],
        false
    );
    server.advance_clock(1001).await;
    let later = server.send("q", json!({"id": "k", "body": 3})).await;
    assert_eq!(later["created"], true);
    assert_ne!(later["message_id"], first["message_id"]);
}
