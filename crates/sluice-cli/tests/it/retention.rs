//! Retention: `max_age_ms` with `on_expire` `drop` and `dead_letter`, on the test clock.
//! The clock is advanced past the age; the removal itself is done by the server's background
//! task (every 500 ms real time), so the tests poll stats for a few seconds.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, message_id, receipt};

const MAX_AGE_MS: i64 = 60_000;
/// How long the background task may take to get to the old messages (real time).
const EXPIRY_WAIT: Duration = Duration::from_secs(5);

/// Sends three old messages, one that will be in flight, then (half an age later) one young
/// message; moves the clock just past the old ones' age. Returns (old ids, in-flight receipt,
/// young id).
async fn old_and_young(server: &TestServer) -> (Vec<String>, String, String) {
    let mut old = Vec::new();
    for seq in 0..3 {
        old.push(message_id(
            &server
                .send("q", json!({"body": {"old": seq}, "headers": {"h": "v"}}))
                .await,
        ));
    }
    // Leased for longer than the test runs: retention must leave it to its consumer.
    server.send("q", json!({"body": "leased"})).await;
    let leased = server
        .receive("q", json!({"max": 10, "visibility_timeout_ms": 3_600_000}))
        .await;
    assert_eq!(leased.len(), 4, "{leased:?}");
    // Put the three old ones back; keep "leased" in flight.
    let mut leased_receipt = None;
    for message in &leased {
        if message["body"] == "leased" {
            leased_receipt = Some(receipt(message).to_owned());
        } else {
            let nacked = server
                .nack("q", json!({"receipt": receipt(message), "delay_ms": 0}))
                .await;
            assert_eq!(nacked["state"], "ready", "{nacked}");
        }
    }

    server.advance_clock(MAX_AGE_MS / 2).await;
    let young = message_id(&server.send("q", json!({"body": "young"})).await);
    // The old ones are now max_age + 1 ms old, the young one half of that.
    server.advance_clock(MAX_AGE_MS / 2 + 1).await;
    (old, leased_receipt.expect("the leased message"), young)
}

#[tokio::test]
async fn expired_messages_are_dropped() {
    // Proves on_expire "drop": messages older than max_age_ms are removed by the background
    // task (ready 0 of them, counters.expired 3, lookup says `expired` with finished_at, nothing
    // goes to the DLQ), a younger message stays and is delivered, and an in-flight message is
    // left to its consumer, who can still ack it.
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server
        .put_queue("q", json!({"max_age_ms": MAX_AGE_MS}))
        .await;
    assert_eq!(queue["config"]["max_age_ms"], MAX_AGE_MS, "{queue}");
    assert_eq!(queue["config"]["on_expire"], "drop", "{queue}");

    let (old, leased, young) = old_and_young(&server).await;
    let stats = server
        .stats_until("q", EXPIRY_WAIT, |stats| stats["counters"]["expired"] == 3)
        .await;
    assert_eq!(
        stats["counters"]["expired"], 3,
        "old messages not expired: {stats}"
    );
    assert_eq!(stats["ready"], 1, "{stats}");
    assert_eq!(stats["in_flight"], 1, "{stats}");
    assert_eq!(
        stats["dead_lettered"], 0,
        "drop put messages in the DLQ: {stats}"
    );

    for id in &old {
        let status = server.message_status("q", id).await;
        assert_eq!(status["state"], "expired", "{status}");
        assert!(status["finished_at"].is_string(), "{status}");
    }
    assert_eq!(server.message_status("q", &young).await["state"], "ready");

    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["message_id"], young.as_str());
    server.ack("q", &leased).await;
    server.ack("q", receipt(&messages[0])).await;
    let stats = server.stats("q").await;
    assert_eq!(depths(&stats), [0, 0, 0], "{stats}");
    assert_eq!(stats["counters"]["expired"], 3, "{stats}");
}

#[tokio::test]
async fn expired_messages_are_dead_lettered() {
    // Proves on_expire "dead_letter": old messages move to the DLQ with a last_error that says
    // "expired", listed by GET /v1/queues/q/dlq, counted in counters.expired and the DLQ depth;
    // the young and the in-flight message stay in the queue.
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server
        .put_queue(
            "q",
            json!({"max_age_ms": MAX_AGE_MS, "on_expire": "dead_letter"}),
        )
        .await;
    assert_eq!(queue["config"]["on_expire"], "dead_letter", "{queue}");
    // The dead-letter queue keeps its own (longer) retention.
    let dlq = server.get("/v1/queues/q.dlq").await.ok();
    assert!(
        dlq["config"]["max_age_ms"].as_i64().unwrap() > MAX_AGE_MS,
        "{dlq}"
    );

    let (old, leased, young) = old_and_young(&server).await;
    let stats = server
        .stats_until("q", EXPIRY_WAIT, |stats| {
            stats["counters"]["expired"] == 3 && stats["dead_lettered"] == 3
        })
        .await;
    assert_eq!(stats["counters"]["expired"], 3, "{stats}");
    assert_eq!(stats["dead_lettered"], 3, "{stats}");
    assert_eq!(stats["ready"], 1, "{stats}");
    assert_eq!(stats["in_flight"], 1, "{stats}");

    for id in &old {
        let status = server.message_status("q", id).await;
        assert_eq!(status["state"], "dead", "{status}");
        assert_eq!(status["queue"], "q.dlq", "{status}");
        let error = status["dead_letter"]["last_error"].as_str().unwrap_or("");
        assert!(error.contains("expired"), "{status}");
    }

    let list = server.get("/v1/queues/q/dlq").await.ok();
    assert_eq!(list["dead_letter_queue"], "q.dlq", "{list}");
    let entries = list["entries"].as_array().expect("entries");
    let mut listed: Vec<&str> = entries
        .iter()
        .map(|entry| entry["message_id"].as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut expected: Vec<&str> = old.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(listed, expected, "{list}");
    for entry in entries {
        assert_eq!(entry["source_queue"], "q", "{entry}");
        assert!(
            entry["last_error"]
                .as_str()
                .unwrap_or("")
                .contains("expired"),
            "{entry}"
        );
    }

    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["message_id"], young.as_str());
    server.ack("q", &leased).await;
}

/// `[ready, delayed, in_flight]`.
fn depths(stats: &Value) -> [u64; 3] {
    ["ready", "delayed", "in_flight"].map(|field| {
        stats[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} missing: {stats}"))
    })
}

#[tokio::test]
async fn a_dead_letter_ages_from_when_it_was_dead_lettered() {
    // Proves retention in a dead-letter queue counts from the dead-letter time, not from the
    // first enqueue: a message enqueued 50 s before it was dead-lettered into a DLQ with a 60 s
    // max_age is still there 20 s later (70 s after enqueue) and gone 61 s after the
    // dead-lettering, counted in the DLQ's counters.expired.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;
    let dlq = server
        .put_queue("q.dlq", json!({"max_age_ms": MAX_AGE_MS}))
        .await;
    assert_eq!(dlq["config"]["max_age_ms"], MAX_AGE_MS);
    let id = message_id(&server.send("q", json!({"body": "late failure"})).await);
    server.advance_clock(50_000).await;
    let message = server
        .receive("q", json!({"visibility_timeout_ms": 3_600_000}))
        .await
        .remove(0);
    server
        .nack("q", json!({"receipt": receipt(&message), "error": "boom"}))
        .await;

    server.advance_clock(20_000).await;
    // Give the background task (every 500 ms) a tick: nothing may happen.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let stats = server.stats("q.dlq").await;
    assert_eq!(
        stats["ready"], 1,
        "a dead letter aged from its enqueue: {stats}"
    );
    assert_eq!(stats["counters"]["expired"], 0, "{stats}");

    server.advance_clock(41_000).await;
    let stats = server
        .stats_until("q.dlq", EXPIRY_WAIT, |stats| stats["ready"] == 0)
        .await;
    assert_eq!(stats["ready"], 0, "{stats}");
    assert_eq!(stats["counters"]["expired"], 1, "{stats}");
    assert_eq!(server.message_status("q", &id).await["state"], "expired");
}

#[tokio::test]
async fn dead_letter_expiry_without_a_dead_letter_queue_drops() {
    // Proves on_expire "dead_letter" on a queue without a dead-letter queue drops the old
    // message (counted in counters.expired, lookup says `expired`).
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"max_age_ms": MAX_AGE_MS, "on_expire": "dead_letter", "dead_letter_queue": ""}),
        )
        .await;
    let id = message_id(&server.send("q", json!({"body": "old"})).await);
    server.advance_clock(MAX_AGE_MS + 1).await;
    let stats = server
        .stats_until("q", EXPIRY_WAIT, |stats| stats["counters"]["expired"] == 1)
        .await;
    assert_eq!(stats["counters"]["expired"], 1, "{stats}");
    assert_eq!(stats["ready"], 0, "{stats}");
    assert_eq!(server.message_status("q", &id).await["state"], "expired");
}

#[tokio::test]
async fn retention_settings_are_validated() {
    // Proves max_age_ms below 1000 and an unknown on_expire are 422 invalid_field naming the
    // field, and the defaults are 4 days / drop (14 days for the dead-letter queue).
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server.put_queue("q", json!({})).await;
    assert_eq!(queue["config"]["max_age_ms"], 345_600_000_i64);
    assert_eq!(queue["config"]["on_expire"], "drop");
    let dlq = server.get("/v1/queues/q.dlq").await.ok();
    assert_eq!(
        dlq["config"]["max_age_ms"],
        14 * 24 * 3_600_000_i64,
        "{dlq}"
    );
    for (spec, field) in [
        (json!({"max_age_ms": 999}), "max_age_ms"),
        (json!({"on_expire": "archive"}), "on_expire"),
    ] {
        let error = server
            .put("/v1/queues/q", spec)
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains(field),
            "{error}"
        );
    }
}
