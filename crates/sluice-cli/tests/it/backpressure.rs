//! Backpressure: `max_depth` refuses whole enqueues with 503 `queue_full` and `Retry-After`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::support::{Reply, TestServer, receipt};

#[tokio::test]
async fn a_full_queue_refuses_enqueues_whole_and_loses_nothing() {
    // Proves max_depth 10: ten sends are accepted, the 11th gets 503 queue_full with a
    // Retry-After of 1..=60 s and details {accepted 0, refused, depth, max_depth}; in-flight
    // messages count toward the depth; a batch of 2 at depth 9 is refused whole (depth stays
    // 9, neither of its messages is ever delivered); a duplicate key counts against the check;
    // after acks the queue accepts again; every accepted message is received exactly once and
    // counters.rejected counts the refused messages.
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server.put_queue("q", json!({"max_depth": 10})).await;
    assert_eq!(queue["config"]["max_depth"], 10, "{queue}");

    let mut accepted = BTreeSet::new();
    for seq in 0..10 {
        let answer = server
            .send("q", json!({"body": seq, "id": format!("m{seq}")}))
            .await;
        assert_eq!(answer["created"], true, "{answer}");
        accepted.insert(seq);
    }

    let refused = send(&server, json!({"body": 100})).await;
    check_full(&refused, 1, 10);
    assert_eq!(server.stats("q").await["ready"], 10);

    // In-flight messages still count toward max_depth.
    let leased = server.receive("q", json!({"max": 3})).await;
    assert_eq!(leased.len(), 3);
    check_full(&send(&server, json!({"body": 101})).await, 1, 10);

    // Down to 9: a batch of 2 does not fit and is refused whole.
    let mut received = BTreeMap::new();
    server.ack("q", receipt(&leased[0])).await;
    count(&mut received, &leased[0]);
    let batch = send(&server, json!({"messages": [{"body": 102}, {"body": 103}]})).await;
    check_full(&batch, 2, 9);
    let stats = server.stats("q").await;
    assert_eq!(
        stats["ready"].as_u64().unwrap() + stats["in_flight"].as_u64().unwrap(),
        9,
        "a refused batch stored something: {stats}"
    );

    // A duplicate of a stored message counts against the check too: at depth 10 it is refused.
    let answer = server.send("q", json!({"body": 90, "id": "extra"})).await;
    assert_eq!(answer["created"], true, "{answer}");
    accepted.insert(90);
    let duplicate = send(&server, json!({"messages": [{"body": 1, "id": "m1"}]})).await;
    check_full(&duplicate, 1, 10);

    // A consumer makes room; enqueues are accepted again.
    for message in &leased[1..] {
        server.ack("q", receipt(message)).await;
        count(&mut received, message);
    }
    let answer = server
        .send("q", json!({"messages": [{"body": 10}, {"body": 11}]}))
        .await;
    assert_eq!(answer["results"].as_array().unwrap().len(), 2, "{answer}");
    accepted.extend([10, 11]);

    let stats = server.stats("q").await;
    assert_eq!(
        stats["counters"]["rejected"], 5,
        "rejected should count the 1 + 1 + 2 + 1 refused messages: {stats}"
    );
    assert_eq!(stats["counters"]["enqueued"], 13, "{stats}");

    // Drain: every accepted message exactly once, none of the refused ones.
    for _ in 0..20 {
        let messages = server.receive("q", json!({"max": 100})).await;
        if messages.is_empty() {
            break;
        }
        for message in &messages {
            count(&mut received, message);
            server.ack("q", receipt(message)).await;
        }
    }
    let expected: BTreeMap<i64, u32> = accepted.iter().map(|&seq| (seq, 1)).collect();
    assert_eq!(received, expected, "deliveries per body");
    assert_eq!(depths(&server.stats("q").await), [0, 0, 0]);
}

#[tokio::test]
async fn an_unbounded_queue_takes_any_depth_and_zero_removes_the_limit() {
    // Proves delayed messages count toward max_depth (a queue limited to 2 holding one ready
    // and one delayed refuses a third), and max_depth 0 means unbounded: after PUT max_depth 0
    // (shown as null) it takes 50 more.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_depth": 2})).await;
    server
        .send(
            "q",
            json!({"messages": [{"body": 1}, {"body": 2, "delay_ms": 60_000}]}),
        )
        .await;
    check_full(&send(&server, json!({"body": 3})).await, 1, 2);
    let queue = server.put_queue("q", json!({"max_depth": 0})).await;
    assert!(queue["config"]["max_depth"].is_null(), "{queue}");
    let batch: Vec<Value> = (0..50).map(|seq| json!({ "body": seq })).collect();
    server.send("q", json!({ "messages": batch })).await;
    let stats = server.stats("q").await;
    assert_eq!(
        (&stats["ready"], &stats["delayed"]),
        (&json!(51), &json!(1))
    );
}

async fn send(server: &TestServer, message: Value) -> Reply {
    server.post("/v1/queues/q/messages", message).await
}

/// Asserts a 503 queue_full refusal of `refused` messages at `depth` of 10 (or 2).
fn check_full(reply: &Reply, refused: u64, depth: u64) {
    let error = reply.error(503, "queue_full");
    let retry_after = reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After header on {reply:?}"));
    let seconds: u64 = retry_after
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("Retry-After {retry_after:?} is not seconds: {e}"));
    assert!((1..=60).contains(&seconds), "Retry-After {seconds}");
    let details = &error["details"];
    assert_eq!(details["accepted"], 0, "{error}");
    assert_eq!(details["refused"], refused, "{error}");
    assert_eq!(details["depth"], depth, "{error}");
    assert!(details["max_depth"].is_u64(), "{error}");
}

fn count(received: &mut BTreeMap<i64, u32>, message: &Value) {
    let body = message["body"]
        .as_i64()
        .unwrap_or_else(|| panic!("unexpected body: {message}"));
    *received.entry(body).or_default() += 1;
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
async fn cancels_purges_expiry_and_dead_letters_free_room() {
    // Proves every way a message leaves frees its place under max_depth 3: a cancel, a
    // dead-lettering nack, a purge and retention expiry each let new messages in again.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"max_depth": 3, "max_age_ms": 60_000}))
        .await;
    let fill = |bodies: [i64; 3]| json!({"messages": bodies.map(|body| json!({ "body": body }))});
    let sent = server.send("q", fill([1, 2, 3])).await;
    check_full(&send(&server, json!({"body": 4})).await, 1, 3);

    let first = sent["results"][0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancelled = server
        .post("/v1/queues/q/cancel", json!({ "message_id": first }))
        .await
        .ok();
    assert_eq!(cancelled["outcome"], "cancelled", "{cancelled}");
    server.send("q", json!({"body": 4})).await;
    check_full(&send(&server, json!({"body": 5})).await, 1, 3);

    let message = server.receive("q", json!({})).await.remove(0);
    server
        .nack(
            "q",
            json!({"receipt": receipt(&message), "permanent": true}),
        )
        .await;
    server.send("q", json!({"body": 5})).await;
    check_full(&send(&server, json!({"body": 6})).await, 1, 3);

    let purged = server.post_empty("/v1/queues/q/purge").await.ok();
    assert_eq!(purged["purged"], 3, "{purged}");
    server.send("q", fill([6, 7, 8])).await;
    check_full(&send(&server, json!({"body": 9})).await, 1, 3);

    server.advance_clock(60_001).await;
    let stats = server
        .stats_until("q", std::time::Duration::from_secs(5), |stats| {
            stats["counters"]["expired"] == 3
        })
        .await;
    assert_eq!(stats["counters"]["expired"], 3, "{stats}");
    server.send("q", fill([9, 10, 11])).await;
    assert_eq!(server.stats("q").await["ready"], 3);
}
