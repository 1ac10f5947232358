//! Nack: the queue's backoff, an explicit delay, and permanent failures. On the test clock.

use serde_json::json;

use crate::support::{TestServer, parse_time, receipt};

#[tokio::test]
async fn nack_waits_the_queue_backoff_for_each_attempt() {
    // Proves a nack without delay_ms waits the backoff without jitter: 1000 ms after the first
    // failure (invisible at +999, visible at +1000), 2000 ms after the second, and the message
    // comes back with the next attempt number and the nack's error.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"backoff": {"initial_ms": 1000, "jitter": false}}),
        )
        .await;
    server.send("q", json!({"body": "x"})).await;

    let mut message = server.receive("q", json!({})).await.remove(0);
    for (attempt, backoff_ms) in [(1, 1000), (2, 2000)] {
        assert_eq!(message["attempts"], attempt);
        let now = server.now().await;
        let nacked = server
            .nack(
                "q",
                json!({"receipt": receipt(&message), "error": format!("failure {attempt}")}),
            )
            .await;
        assert_eq!(nacked["state"], "delayed", "{nacked}");
        assert_eq!(
            parse_time(&nacked["visible_at"]),
            now + backoff_ms,
            "{nacked}"
        );
        let stats = server.stats("q").await;
        assert_eq!(
            (stats["delayed"].as_u64(), stats["ready"].as_u64()),
            (Some(1), Some(0)),
            "{stats}"
        );

        server.advance_clock(backoff_ms - 1).await;
        assert!(
            server.receive("q", json!({})).await.is_empty(),
            "visible 1 ms before its backoff ended"
        );
        server.advance_clock(1).await;
        let again = server.receive("q", json!({})).await;
        assert_eq!(
            again.len(),
            1,
            "not visible when its backoff of {backoff_ms} ms ended"
        );
        message = again.into_iter().next().unwrap();
        assert_eq!(message["last_error"], format!("failure {attempt}"));
    }
    assert_eq!(message["attempts"], 3);
    assert_eq!(server.stats("q").await["counters"]["nacked"], 2);
}

#[tokio::test]
async fn nack_delay_ms_replaces_the_backoff() {
    // Proves an explicit delay_ms decides when the message is visible again (invisible at
    // +4999, visible at +5000 for 5000 ms) and delay_ms 0 makes it ready at once.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"backoff": {"initial_ms": 1000, "jitter": false}}),
        )
        .await;
    server.send("q", json!({"body": "x"})).await;

    let message = server.receive("q", json!({})).await.remove(0);
    let now = server.now().await;
    let nacked = server
        .nack("q", json!({"receipt": receipt(&message), "delay_ms": 5000}))
        .await;
    assert_eq!(nacked["state"], "delayed");
    assert_eq!(parse_time(&nacked["visible_at"]), now + 5000);
    server.advance_clock(4999).await;
    assert!(server.receive("q", json!({})).await.is_empty());
    server.advance_clock(1).await;
    let message = server.receive("q", json!({})).await.remove(0);
    assert_eq!(message["attempts"], 2);

    let nacked = server
        .nack("q", json!({"receipt": receipt(&message), "delay_ms": 0}))
        .await;
    assert_eq!(nacked["state"], "ready", "{nacked}");
    let message = server.receive("q", json!({})).await;
    assert_eq!(
        message.len(),
        1,
        "not ready at once after a nack with delay_ms 0"
    );
    assert_eq!(message[0]["attempts"], 3);
}

#[tokio::test]
async fn a_permanent_nack_dead_letters_at_once() {
    // Proves permanent: true moves the message to the dead-letter queue on its first attempt,
    // with the error kept, whatever max_attempts says.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 5})).await;
    let id = server.send("q", json!({"body": "poison"})).await["message_id"].clone();

    let message = server.receive("q", json!({})).await.remove(0);
    let nacked = server
        .nack(
            "q",
            json!({"receipt": receipt(&message), "error": "cannot parse", "permanent": true}),
        )
        .await;
    assert_eq!(nacked["state"], "dead", "{nacked}");
    assert_eq!(nacked["dead_letter_queue"], "q.dlq");

    server.advance_clock(3_600_000).await;
    assert!(server.receive("q", json!({})).await.is_empty());
    let dead = server.receive("q.dlq", json!({})).await;
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["message_id"], id);
    assert_eq!(dead[0]["body"], "poison");
    assert_eq!(dead[0]["dead_letter"]["source_queue"], "q");
    assert_eq!(dead[0]["dead_letter"]["attempts"], 1);
    assert_eq!(dead[0]["dead_letter"]["last_error"], "cannot parse");
    server.ack("q.dlq", receipt(&dead[0])).await;
}

#[tokio::test]
async fn a_permanent_nack_without_a_dead_letter_queue_is_refused() {
    // Proves permanent: true on a queue without a dead-letter queue answers 422 and leaves the
    // lease as it was (the receipt still acks).
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server
        .put_queue("q", json!({"dead_letter_queue": ""}))
        .await;
    assert!(queue["config"]["dead_letter_queue"].is_null(), "{queue}");
    server.send("q", json!({"body": "x"})).await;

    let message = server.receive("q", json!({})).await.remove(0);
    let refused = server
        .post(
            "/v1/queues/q/nack",
            json!({"receipt": receipt(&message), "permanent": true}),
        )
        .await;
    assert_eq!(refused.status.as_u16(), 422, "{}", refused.text);
    refused.error_shape();
    server.ack("q", receipt(&message)).await;
}
