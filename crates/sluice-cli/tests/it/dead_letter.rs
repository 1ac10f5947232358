//! Dead-lettering after max_attempts, and the metadata that goes with it. On the test clock.

use serde_json::{Value, json};

use crate::support::{TestServer, parse_time, receipt};

#[tokio::test]
async fn a_message_is_dead_lettered_after_max_attempts() {
    // Proves the third failed attempt with max_attempts 3 dead-letters the message: the nack
    // says so, its status shows it in `q.dlq`, stats count it, and it is received from `q.dlq`
    // with source_queue, last_error, attempts and first/last seen times, and can be acked there.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"max_attempts": 3, "backoff": {"initial_ms": 1000, "jitter": false}}),
        )
        .await;
    let id = server
        .send("q", json!({"body": {"job": 7}, "headers": {"h": "v"}}))
        .await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();

    for attempt in 1..=3 {
        let messages = server.receive("q", json!({})).await;
        assert_eq!(messages.len(), 1, "attempt {attempt} was not delivered");
        assert_eq!(messages[0]["attempts"], attempt);
        let nacked = server
            .nack(
                "q",
                json!({"receipt": receipt(&messages[0]), "error": format!("failure {attempt}")}),
            )
            .await;
        if attempt < 3 {
            assert_eq!(nacked["state"], "delayed", "{nacked}");
            server
                .advance_clock(parse_time(&nacked["visible_at"]) - server.now().await)
                .await;
        } else {
            assert_eq!(nacked["state"], "dead", "{nacked}");
            assert_eq!(nacked["dead_letter_queue"], "q.dlq", "{nacked}");
        }
    }
    server.advance_clock(120_000).await;
    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "delivered past max_attempts"
    );

    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(status["state"], "dead", "{status}");
    assert_eq!(status["queue"], "q.dlq", "{status}");
    assert_eq!(status["dead_letter"]["source_queue"], "q", "{status}");
    assert_eq!(status["dead_letter"]["attempts"], 3, "{status}");
    // One count: a dead letter's attempts are those it had (issue 31 saw 0 beside 3).
    assert_eq!(status["attempts"], 3, "{status}");
    assert_eq!(status["dead_letter"]["last_error"], "failure 3", "{status}");

    let stats = server.stats("q").await;
    assert_eq!(stats["dead_lettered"], 1, "{stats}");
    assert_eq!(stats["counters"]["dead_lettered"], 1, "{stats}");
    assert_eq!(server.stats("q.dlq").await["ready"], 1);

    let dead = server.receive("q.dlq", json!({})).await;
    assert_eq!(dead.len(), 1);
    let dead = &dead[0];
    assert_eq!(dead["message_id"], id.as_str());
    assert_eq!(dead["body"], json!({"job": 7}));
    assert_eq!(dead["headers"], json!({"h": "v"}));
    let meta = &dead["dead_letter"];
    assert_eq!(meta["source_queue"], "q", "{dead}");
    assert_eq!(meta["last_error"], "failure 3", "{dead}");
    assert_eq!(meta["attempts"], 3, "{dead}");
    let first_seen = parse_time(&meta["first_seen_at"]);
    let last_seen = parse_time(&meta["last_seen_at"]);
    assert!(
        first_seen < last_seen,
        "first_seen_at {first_seen} is not before last_seen_at {last_seen}: {dead}"
    );
    assert!(last_seen <= server.now().await, "{dead}");

    server.ack("q.dlq", receipt(dead)).await;
    assert!(server.receive("q.dlq", json!({})).await.is_empty());
    assert_eq!(server.stats("q").await["dead_lettered"], 0);
}

#[tokio::test]
async fn a_queue_can_name_its_own_dead_letter_queue() {
    // Proves `dead_letter_queue` chooses where failures go, and a queue used as another's
    // dead-letter queue cannot be deleted (409 conflict).
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("graveyard", json!({})).await;
    let queue = server
        .put_queue(
            "q",
            json!({"dead_letter_queue": "graveyard", "max_attempts": 1}),
        )
        .await;
    assert_eq!(queue["config"]["dead_letter_queue"], "graveyard");
    server.send("q", json!({"body": "x"})).await;
    let message = server.receive("q", json!({})).await.remove(0);
    let nacked = server
        .nack("q", json!({"receipt": receipt(&message), "error": "no"}))
        .await;
    assert_eq!(nacked["state"], "dead", "{nacked}");
    assert_eq!(nacked["dead_letter_queue"], "graveyard");
    let dead = server.receive("graveyard", json!({})).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["dead_letter"]["source_queue"], "q");

    server
        .delete("/v1/queues/graveyard")
        .await
        .error(409, "conflict");
}

/// Issue 31: deleting a queue left its dead-letter queue behind over HTTP and the CLI, so
/// orphan `.dlq` queues piled up. It goes with the queue now, dead letters and all, unless
/// `?dead_letters=keep` or another queue still dead-letters into it.
#[tokio::test]
async fn deleting_a_queue_deletes_its_dead_letter_queue_unless_kept_or_shared() {
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.send("q", json!({"body": "x"})).await;
    let message = server.receive("q", json!({})).await.remove(0);
    server
        .nack(
            "q",
            json!({"receipt": receipt(&message), "error": "no", "permanent": true}),
        )
        .await;
    let deleted = server.delete("/v1/queues/q").await.ok();
    assert_eq!(
        deleted,
        json!({"deleted": true, "messages_removed": 0, "dead_letter_queue": "q.dlq", "dead_letters_removed": 1})
    );
    server
        .get("/v1/queues/q.dlq")
        .await
        .error(404, "queue_not_found");

    // Shared: it stays until the last queue that uses it goes.
    for name in ["a", "b"] {
        server
            .put_queue(name, json!({"dead_letter_queue": "shared"}))
            .await;
    }
    let deleted = server.delete("/v1/queues/a").await.ok();
    assert_eq!(deleted["dead_letter_queue"], Value::Null, "{deleted}");
    server.get("/v1/queues/shared").await.ok();
    let deleted = server.delete("/v1/queues/b").await.ok();
    assert_eq!(deleted["dead_letter_queue"], "shared", "{deleted}");

    server
        .delete("/v1/queues/nope?dead_letters=maybe")
        .await
        .error(400, "malformed_query");
}
