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

#[tokio::test]
async fn a_content_dedup_queue_stores_the_same_content_once() {
    // Proves `dedup: "content"`: a message sent without an id is a duplicate of an earlier one
    // with the same key and body (HTTP or SQS), answered with the first message; another key or
    // body, or an explicit id, makes a new message; a queue without the option stores every
    // copy; each hit counts in `counters.deduplicated` and the metric.
    let server = TestServer::builder().start().await;
    server
        .put_queue("content", json!({"dedup": "content"}))
        .await;
    server.put_queue("plain", json!({})).await;
    assert_eq!(
        server.get("/v1/queues/content").await.ok()["config"]["dedup"],
        "content"
    );
    assert_eq!(
        server.get("/v1/queues/plain").await.ok()["config"]["dedup"],
        "id"
    );

    let body = json!({"alert": "disk full", "host": "db-1"});
    let first = server.send("content", json!({"body": body})).await;
    assert_eq!(first["created"], true);
    let again = server.send("content", json!({"body": body})).await;
    assert_eq!(
        (&again["created"], &again["message_id"]),
        (&json!(false), &first["message_id"]),
        "{again}"
    );
    let batch = server
        .post(
            "/v1/queues/content/messages",
            json!({"messages": [
                {"body": body},
                {"body": body, "key": "db-1"},
                {"body": {"alert": "disk full", "host": "db-2"}},
                {"body": body, "id": "explicit"},
            ]}),
        )
        .await
        .ok();
    let created: Vec<&serde_json::Value> = batch["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| &result["created"])
        .collect();
    assert_eq!(
        created,
        [&json!(false), &json!(true), &json!(true), &json!(true)],
        "{batch}"
    );
    // The SQS API's send runs the same rule.
    let sqs = server
        .client()
        .post(format!("{}/", server.url()))
        .header("content-type", "application/x-amz-json-1.0")
        .header("x-amz-target", "AmazonSQS.SendMessage")
        .body(json!({"QueueUrl": "content", "MessageBody": body.to_string()}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sqs.status(), 200);

    for _ in 0..2 {
        server.send("plain", json!({"body": body})).await;
    }
    let content = server.stats("content").await["counters"].clone();
    assert_eq!(
        (&content["enqueued"], &content["deduplicated"]),
        (&json!(4), &json!(3)),
        "{content}"
    );
    let plain = server.stats("plain").await["counters"].clone();
    assert_eq!(
        (&plain["enqueued"], &plain["deduplicated"]),
        (&json!(2), &json!(0))
    );
    let metrics = server.get("/metrics").await.text;
    assert!(
        metrics.contains("sluice_messages_deduplicated_total{queue=\"content\"} 3"),
        "{metrics}"
    );
}
