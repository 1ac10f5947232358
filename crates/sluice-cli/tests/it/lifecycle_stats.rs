//! The new stats: every counter, last_1m / last_5m throughput, enqueue-to-ack latency, the
//! paused flag and the DLQ depth, after a known sequence on the test clock.

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn stats_match_a_known_sequence() {
    // Proves after 10 enqueued, 6 acked 2 s after enqueue, 2 nacked and 1 lease expiry:
    // counters (all ten of them), last_1m and last_5m (enqueued 10, acked 6, failed 3, rates
    // above 0), latency_ms (null before the first ack, then 6 samples with p50 about 2000 and
    // p50 <= p95 <= p99); paused follows pause/resume; dead_lettered is the DLQ depth; after 3
    // minutes the events leave last_1m but stay in last_5m.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"visibility_timeout_ms": 10_000, "backoff": {"initial_ms": 1000, "jitter": false}}),
        )
        .await;

    let stats = server.stats("q").await;
    assert!(stats["latency_ms"].is_null(), "{stats}");
    assert_eq!(stats["paused"], false, "{stats}");
    assert_eq!(stats["counters"], counters(0, 0, 0, 0, 0, 0), "{stats}");
    check_throughput(&stats["last_1m"], [0, 0, 0]);

    let batch: Vec<Value> = (0..10).map(|seq| json!({ "body": seq })).collect();
    server.send("q", json!({ "messages": batch })).await;
    server.advance_clock(1_000).await;
    let leased = server.receive("q", json!({"max": 10})).await;
    assert_eq!(leased.len(), 10);
    server.advance_clock(1_000).await;
    for message in &leased[..6] {
        server.ack("q", receipt(message)).await;
    }
    for message in &leased[6..8] {
        server
            .nack("q", json!({"receipt": receipt(message), "error": "nope"}))
            .await;
    }
    server
        .post(
            "/v1/queues/q/extend",
            json!({"receipt": receipt(&leased[8]), "visibility_timeout_ms": 600_000}),
        )
        .await
        .ok();
    // leased[9]'s lease ends 10 s after it was received.
    server.advance_clock(10_000).await;

    let stats = server
        .stats_until("q", std::time::Duration::from_secs(3), |stats| {
            stats["counters"]["lease_expired"] == 1
        })
        .await;
    assert_eq!(stats["counters"], counters(10, 10, 6, 2, 0, 1), "{stats}");
    assert_eq!(
        (&stats["ready"], &stats["delayed"], &stats["in_flight"]),
        (&json!(3), &json!(0), &json!(1)),
        "{stats}"
    );
    check_throughput(&stats["last_1m"], [10, 6, 3]);
    check_throughput(&stats["last_5m"], [10, 6, 3]);
    let latency = &stats["latency_ms"];
    assert_eq!(latency["samples"], 6, "{stats}");
    let [p50, p95, p99] = ["p50", "p95", "p99"].map(|field| latency[field].as_u64().unwrap());
    assert!(
        (1_000..=3_000).contains(&p50),
        "p50 {p50}, every ack came 2000 ms after its enqueue"
    );
    assert!(p50 <= p95 && p95 <= p99, "{latency}");
    assert_eq!(stats["dead_lettered"], 0, "{stats}");

    // paused
    server.post_empty("/v1/queues/q/pause").await.ok();
    assert_eq!(server.stats("q").await["paused"], true);
    server.post_empty("/v1/queues/q/resume").await.ok();
    assert_eq!(server.stats("q").await["paused"], false);

    // DLQ depth
    let message = server.receive("q", json!({})).await.remove(0);
    server
        .nack(
            "q",
            json!({"receipt": receipt(&message), "permanent": true, "error": "poison"}),
        )
        .await;
    let stats = server.stats("q").await;
    assert_eq!(stats["dead_lettered"], 1, "{stats}");
    assert_eq!(stats["counters"]["dead_lettered"], 1, "{stats}");
    assert_eq!(server.stats("q.dlq").await["ready"], 1);

    // Three minutes on, the events are out of the last minute but not the last five.
    server.advance_clock(180_000).await;
    let stats = server.stats("q").await;
    check_throughput(&stats["last_1m"], [0, 0, 0]);
    assert_eq!(stats["last_5m"]["enqueued"], 10, "{stats}");
    assert_eq!(stats["last_5m"]["acked"], 6, "{stats}");
    assert_eq!(stats["latency_ms"]["samples"], 6, "{stats}");
}

fn counters(
    enqueued: u64,
    delivered: u64,
    acked: u64,
    nacked: u64,
    dead_lettered: u64,
    lease_expired: u64,
) -> Value {
    json!({
        "enqueued": enqueued, "delivered": delivered, "acked": acked, "nacked": nacked,
        "dead_lettered": dead_lettered, "lease_expired": lease_expired,
        "expired": 0, "rejected": 0, "cancelled": 0, "purged": 0, "deduplicated": 0,
    })
}

/// Checks `[enqueued, acked, failed]` and that each rate is above 0 exactly when its count is.
fn check_throughput(span: &Value, [enqueued, acked, failed]: [u64; 3]) {
    assert_eq!(
        [&span["enqueued"], &span["acked"], &span["failed"]],
        [&json!(enqueued), &json!(acked), &json!(failed)],
        "{span}"
    );
    for (count, rate) in [
        (enqueued, "enqueued_per_s"),
        (acked, "acked_per_s"),
        (failed, "failed_per_s"),
    ] {
        let rate_value = span[rate]
            .as_f64()
            .unwrap_or_else(|| panic!("{rate} missing: {span}"));
        assert_eq!(count > 0, rate_value > 0.0, "{rate} in {span}");
    }
}

#[tokio::test]
async fn new_settings_states_and_records_survive_a_restart() {
    // Proves after a SIGTERM restart: the new queue settings (max_age_ms, on_expire,
    // max_depth, max_in_flight, rate_limit, schema) are unchanged; a result is still returned to
    // a duplicate; cancelled and purged lookups keep their state; the DLQ keeps its entries and
    // a replayed entry keeps replayed_as.
    let mut server = TestServer::builder().start().await;
    let spec = json!({
        "max_age_ms": 120_000, "on_expire": "dead_letter", "max_depth": 50,
        "max_in_flight": 4, "rate_limit": {"per_second": 1000, "burst": 10},
        "schema": {"type": "object"}, "max_attempts": 1,
    });
    let before = server.put_queue("q", spec).await["config"].clone();

    server
        .send("q", json!({"body": {"n": 1}, "id": "order-1"}))
        .await;
    let leased = server.receive("q", json!({})).await.remove(0);
    server
        .post(
            "/v1/queues/q/ack",
            json!({"receipt": receipt(&leased), "result": {"charge": "ch_1"}}),
        )
        .await
        .ok();
    let cancelled = server.send("q", json!({"body": {"n": 2}})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    server
        .post("/v1/queues/q/cancel", json!({ "message_id": cancelled }))
        .await
        .ok();
    let failing = server
        .send(
            "q",
            json!({"messages": [{"body": {"n": 3}}, {"body": {"n": 4}}]}),
        )
        .await;
    for message in server.receive("q", json!({"max": 2})).await {
        server
            .nack("q", json!({"receipt": receipt(&message), "error": "boom"}))
            .await;
    }
    let dead: Vec<String> = failing["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["message_id"].as_str().unwrap().to_owned())
        .collect();
    let replay = server
        .post(&format!("/v1/queues/q/dlq/{}/replay", dead[0]), json!({}))
        .await
        .ok();
    let replayed_as = replay["results"][0]["message_id"].clone();
    let purged = server.send("q", json!({"body": {"n": 5}})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let purge = server.post_empty("/v1/queues/q/purge").await.ok();
    assert_eq!(purge["purged"], 2, "the replayed message and n=5: {purge}");

    server.restart().await;

    let after = server.get("/v1/queues/q").await.ok()["config"].clone();
    assert_eq!(after, before, "settings changed across a restart");
    let duplicate = server
        .send("q", json!({"body": {"n": 1}, "id": "order-1"}))
        .await;
    assert_eq!(duplicate["state"], "acked", "{duplicate}");
    assert_eq!(
        duplicate["result"],
        json!({"charge": "ch_1"}),
        "{duplicate}"
    );
    assert_eq!(
        server.message_status("q", &cancelled).await["state"],
        "cancelled"
    );
    assert_eq!(server.message_status("q", &purged).await["state"], "purged");
    let entry = server
        .get(&format!("/v1/queues/q/dlq/{}", dead[0]))
        .await
        .ok();
    assert_eq!(entry["state"], "replayed", "{entry}");
    assert_eq!(entry["replayed_as"], replayed_as, "{entry}");
    let list = server.get("/v1/queues/q/dlq").await.ok();
    let listed: Vec<&Value> = list["entries"].as_array().unwrap().iter().collect();
    assert_eq!(listed.len(), 1, "{list}");
    assert_eq!(listed[0]["message_id"], dead[1].as_str(), "{list}");
    assert_eq!(listed[0]["last_error"], "boom", "{list}");
}
