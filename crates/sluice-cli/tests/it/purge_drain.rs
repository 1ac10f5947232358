//! Purge (remove what waits, keep what is in flight) and drain (wait until the queue is
//! empty). Drain timeouts are real time, so those tests measure wall time.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestServer, message_id, receipt};

#[tokio::test]
async fn purge_removes_ready_and_delayed_but_not_in_flight() {
    // Proves purge: 3 ready + 2 delayed are removed ({"purged": 5, "in_flight": 1}), lookups
    // say `purged`, nothing of them is delivered even after the delay, counters.purged is 5, and
    // the in-flight message stays and can still be acked.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    server.send("q", json!({"body": "in flight"})).await;
    let leased = server
        .receive("q", json!({"visibility_timeout_ms": 3_600_000}))
        .await
        .remove(0);

    let mut purged = Vec::new();
    for seq in 0..3 {
        purged.push(message_id(&server.send("q", json!({ "body": seq })).await));
    }
    for seq in 3..5 {
        purged.push(message_id(
            &server
                .send("q", json!({"body": seq, "delay_ms": 60_000}))
                .await,
        ));
    }

    let reply = server.post_empty("/v1/queues/q/purge").await;
    let answer = reply.ok();
    let _: sluice_wire::PurgeOut = reply.parse();
    assert_eq!(answer, json!({"purged": 5, "in_flight": 1}));

    let stats = server.stats("q").await;
    assert_eq!(depths(&stats), [0, 0, 1], "{stats}");
    assert_eq!(stats["counters"]["purged"], 5, "{stats}");
    for id in &purged {
        let status = server.message_status("q", id).await;
        assert_eq!(status["state"], "purged", "{status}");
    }
    let cancelled = server
        .post("/v1/queues/q/cancel", json!({"message_id": purged[0]}))
        .await
        .ok();
    assert_eq!(cancelled["outcome"], "already_completed", "{cancelled}");
    assert_eq!(cancelled["state"], "purged", "{cancelled}");

    server.advance_clock(120_000).await;
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
    server.ack("q", receipt(&leased)).await;
    assert_eq!(depths(&server.stats("q").await), [0, 0, 0]);

    // Enqueues work as before.
    server.send("q", json!({"body": "after"})).await;
    assert_eq!(server.receive("q", json!({})).await.len(), 1);
}

#[tokio::test]
async fn drain_times_out_while_a_message_is_in_flight() {
    // Proves drain with timeout_ms 300 and a message in flight answers drained false with what
    // is left (ready 2, in_flight 1) after waiting about 300 ms, a send during the drain is
    // accepted at once, an empty queue drains at once (with an empty request body), and a
    // timeout over 900000 is 422.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    let started = Instant::now();
    let reply = server.post_empty("/v1/queues/q/drain").await;
    let empty = reply.ok();
    let _: sluice_wire::DrainOut = reply.parse();
    assert_eq!(empty["drained"], true, "{empty}");
    assert!(started.elapsed() < Duration::from_secs(2), "{empty}");

    server
        .send("q", json!({"messages": [{"body": 1}, {"body": 2}]}))
        .await;
    let leased = server.receive("q", json!({})).await;
    assert_eq!(leased.len(), 1);

    // A drain does not stop enqueues: a send during it is accepted at once.
    let started = Instant::now();
    let (answer, sent_in) = tokio::join!(
        async {
            server
                .post("/v1/queues/q/drain", json!({"timeout_ms": 300}))
                .await
                .ok()
        },
        async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let sending = Instant::now();
            server.send("q", json!({"body": 3})).await;
            sending.elapsed()
        },
    );
    let elapsed = started.elapsed();
    assert!(
        sent_in < Duration::from_millis(200),
        "a send during a drain took {sent_in:?}"
    );
    assert_eq!(answer["drained"], false, "{answer}");
    assert_eq!(
        (&answer["ready"], &answer["delayed"], &answer["in_flight"]),
        (&json!(2), &json!(0), &json!(1)),
        "{answer}"
    );
    let waited = answer["waited_ms"].as_u64().expect("waited_ms");
    assert!((250..2000).contains(&waited), "{answer}");
    assert!(
        elapsed >= Duration::from_millis(290) && elapsed < Duration::from_secs(3),
        "drain took {elapsed:?}"
    );

    server
        .post("/v1/queues/q/drain", json!({"timeout_ms": 900_001}))
        .await
        .error(422, "invalid_field");
}

#[tokio::test]
async fn drain_returns_once_a_consumer_acks_everything() {
    // Proves drain with timeout_ms 10000 returns drained true (all counts 0) soon after a
    // concurrent consumer acks the last in-flight messages, long before its timeout.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server
        .send(
            "q",
            json!({"messages": [{"body": 1}, {"body": 2}, {"body": 3}]}),
        )
        .await;
    let leased = server.receive("q", json!({"max": 3})).await;
    assert_eq!(leased.len(), 3);

    let started = Instant::now();
    let (drained, acked_at) = tokio::join!(
        async {
            let answer = server
                .post("/v1/queues/q/drain", json!({"timeout_ms": 10_000}))
                .await
                .ok();
            (answer, Instant::now())
        },
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            for message in &leased {
                server.ack("q", receipt(message)).await;
            }
            Instant::now()
        },
    );
    let (answer, returned) = drained;
    assert_eq!(answer["drained"], true, "{answer}");
    assert_eq!(
        (&answer["ready"], &answer["delayed"], &answer["in_flight"]),
        (&json!(0), &json!(0), &json!(0)),
        "{answer}"
    );
    assert!(
        returned - started >= Duration::from_millis(150),
        "drain returned before the acks: {answer}"
    );
    let after = returned.saturating_duration_since(acked_at);
    assert!(
        after < Duration::from_millis(2000),
        "drain returned {after:?} after the last ack"
    );
}

/// `[ready, delayed, in_flight]`.
fn depths(stats: &Value) -> [u64; 3] {
    ["ready", "delayed", "in_flight"].map(|field| {
        stats[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{field} missing: {stats}"))
    })
}
