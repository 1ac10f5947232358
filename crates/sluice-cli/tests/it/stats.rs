//! Queue stats: depths by state and counters since start, on the test clock.

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn stats_count_depths_and_events() {
    // Proves ready/delayed/in_flight depths, the DLQ depth, oldest_ready_age_ms, and the
    // enqueued/delivered/acked/nacked counters (a duplicate key does not count as enqueued).
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"backoff": {"initial_ms": 1000, "jitter": false}}),
        )
        .await;

    let empty = server.stats("q").await;
    assert_eq!(depths(&empty), [0, 0, 0]);
    assert_eq!(empty["dead_lettered"], 0, "{empty}");
    assert!(empty["oldest_ready_age_ms"].is_null(), "{empty}");
    assert_eq!(
        empty["counters"],
        json!({"enqueued": 0, "delivered": 0, "acked": 0, "nacked": 0, "dead_lettered": 0, "lease_expired": 0, "expired": 0, "rejected": 0, "cancelled": 0, "purged": 0, "deduplicated": 0})
    );

    for body in ["a", "b", "c"] {
        server.send("q", json!({ "body": body, "id": body })).await;
    }
    server.send("q", json!({"body": "a", "id": "a"})).await;
    server
        .send("q", json!({"body": "d", "delay_ms": 10_000}))
        .await;
    server.advance_clock(500).await;

    let stats = server.stats("q").await;
    assert_eq!(depths(&stats), [3, 1, 0], "{stats}");
    assert_eq!(stats["oldest_ready_age_ms"], 500, "{stats}");
    assert_eq!(stats["counters"]["enqueued"], 4, "{stats}");

    let messages = server.receive("q", json!({"max": 2})).await;
    assert_eq!(messages.len(), 2);
    let stats = server.stats("q").await;
    assert_eq!(depths(&stats), [1, 1, 2], "{stats}");
    assert_eq!(stats["counters"]["delivered"], 2, "{stats}");

    server.ack("q", receipt(&messages[0])).await;
    server
        .nack("q", json!({"receipt": receipt(&messages[1]), "error": "x"}))
        .await;
    let stats = server.stats("q").await;
    assert_eq!(depths(&stats), [1, 2, 0], "{stats}");
    let counters = &stats["counters"];
    assert_eq!(
        (
            &counters["acked"],
            &counters["nacked"],
            &counters["delivered"]
        ),
        (&json!(1), &json!(1), &json!(2)),
        "{stats}"
    );

    let queue = server.get("/v1/queues/q").await.ok();
    assert_eq!(queue["stats"], stats, "GET /v1/queues/q shows other stats");
}

/// `[ready, delayed, in_flight]`.
fn depths(stats: &Value) -> [u64; 3] {
    ["ready", "delayed", "in_flight"].map(|field| {
        stats[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} missing: {stats}"))
    })
}
