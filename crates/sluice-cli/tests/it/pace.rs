//! Pace: `max_in_flight` caps leases out at once, `rate_limit` caps deliveries per second.
//! The concurrency and rate tests run on real time (bounded), the rest on the test clock.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn max_in_flight_caps_leases_and_waiting_receives_get_freed_slots() {
    // Proves max_in_flight 3: a receive of 10 gets 3, another gets none, a long poll waits
    // until an ack frees a slot (and is woken by it, well before its wait_ms), and a lease
    // that runs out frees its slot too.
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server
        .put_queue(
            "q",
            json!({"max_in_flight": 3, "visibility_timeout_ms": 10_000}),
        )
        .await;
    assert_eq!(queue["config"]["max_in_flight"], 3, "{queue}");
    let batch: Vec<Value> = (0..6).map(|seq| json!({ "body": seq })).collect();
    server.send("q", json!({ "messages": batch })).await;

    let first = server.receive("q", json!({"max": 10})).await;
    assert_eq!(first.len(), 3, "{first:?}");
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
    let stats = server.stats("q").await;
    assert_eq!(
        (&stats["ready"], &stats["in_flight"]),
        (&json!(3), &json!(3))
    );

    let started = Instant::now();
    let (waited, acked_at) = tokio::join!(
        async {
            let messages = server
                .receive("q", json!({"max": 10, "wait_ms": 5000}))
                .await;
            (messages, Instant::now())
        },
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let acked_at = Instant::now();
            server.ack("q", receipt(&first[0])).await;
            acked_at
        },
    );
    let (messages, returned) = waited;
    assert_eq!(messages.len(), 1, "one slot was freed: {messages:?}");
    assert!(
        returned.saturating_duration_since(acked_at) < Duration::from_millis(1500),
        "the long poll returned {:?} after the ack",
        returned.saturating_duration_since(acked_at)
    );
    assert!(returned - started >= Duration::from_millis(150));

    // Three leases out again; when they run out, their slots are free.
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
    server.advance_clock(10_000).await;
    let again = server.receive("q", json!({"max": 10})).await;
    assert_eq!(again.len(), 3, "{again:?}");
}

#[tokio::test]
async fn concurrent_receivers_never_hold_more_than_max_in_flight() {
    // Proves max_in_flight 3 under 16 concurrent receivers: the leases held at once (counted
    // between a receive's answer and the ack) never exceed 3, and all 50 messages are acked
    // exactly once.
    const MESSAGES: usize = 50;
    const LIMIT: usize = 3;
    let server = Arc::new(TestServer::builder().start().await);
    server.put_queue("q", json!({"max_in_flight": LIMIT})).await;
    let batch: Vec<Value> = (0..MESSAGES).map(|seq| json!({ "body": seq })).collect();
    server.send("q", json!({ "messages": batch })).await;

    let held = Arc::new(AtomicUsize::new(0));
    let max_held = Arc::new(AtomicUsize::new(0));
    let acked = Arc::new(AtomicUsize::new(0));
    let acks: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let deadline = Instant::now() + Duration::from_secs(20);

    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (server, held, max_held, acked, acks) = (
            server.clone(),
            held.clone(),
            max_held.clone(),
            acked.clone(),
            acks.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for _ in 0..200 {
                if acked.load(Ordering::SeqCst) >= MESSAGES || Instant::now() > deadline {
                    break;
                }
                let messages = server
                    .receive("q", json!({"max": 10, "wait_ms": 1000}))
                    .await;
                if messages.is_empty() {
                    continue;
                }
                let now_held = held.fetch_add(messages.len(), Ordering::SeqCst) + messages.len();
                max_held.fetch_max(now_held, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                for message in &messages {
                    // Released before the ack is sent, so the count never runs ahead of the
                    // server's: any excess observed is the server's.
                    held.fetch_sub(1, Ordering::SeqCst);
                    server.ack("q", receipt(message)).await;
                    let id = message["message_id"].as_str().unwrap().to_owned();
                    *acks.lock().unwrap().entry(id).or_default() += 1;
                    acked.fetch_add(1, Ordering::SeqCst);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("receiver task");
    }

    let max_held = max_held.load(Ordering::SeqCst);
    assert!(
        max_held <= LIMIT,
        "{max_held} leases were out at once (max_in_flight {LIMIT})"
    );
    assert!(
        max_held >= 2,
        "receivers never overlapped ({max_held}); the test proves nothing"
    );
    let acks = acks.lock().unwrap().clone();
    assert_eq!(acks.len(), MESSAGES, "distinct messages acked");
    assert!(
        acks.values().all(|&n| n == 1),
        "acked more than once: {acks:?}"
    );
    let stats = server.stats("q").await;
    assert_eq!(stats["counters"]["acked"], MESSAGES, "{stats}");
    assert_eq!(stats["counters"]["delivered"], MESSAGES, "{stats}");
}

#[tokio::test]
async fn rate_limit_paces_deliveries_in_real_time() {
    // Proves rate_limit {per_second 20, burst 1}: over a real 3-second window, 4 eager
    // receivers get 61 deliveries (1 burst + 60) within 10 %, and the config shows the limit.
    let server = Arc::new(TestServer::builder().start().await);
    let queue = server
        .put_queue("q", json!({"rate_limit": {"per_second": 20, "burst": 1}}))
        .await;
    assert_eq!(
        queue["config"]["rate_limit"],
        json!({"per_second": 20.0, "burst": 1}),
        "{queue}"
    );
    let batch: Vec<Value> = (0..200).map(|seq| json!({ "body": seq })).collect();
    server.send("q", json!({ "messages": batch })).await;

    let window = Duration::from_secs(3);
    let start = Instant::now();
    let end = start + window;
    let delivered = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (server, delivered) = (server.clone(), delivered.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..1000 {
                let left = end.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let wait_ms = left.as_millis().min(1000) as u64;
                let messages = server
                    .receive("q", json!({"max": 10, "wait_ms": wait_ms}))
                    .await;
                if Instant::now() <= end {
                    delivered.fetch_add(messages.len(), Ordering::SeqCst);
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("receiver task");
    }
    assert!(
        start.elapsed() < window + Duration::from_secs(3),
        "receivers overran the window: {:?}",
        start.elapsed()
    );
    let delivered = delivered.load(Ordering::SeqCst);
    assert!(
        (54..=67).contains(&delivered),
        "{delivered} deliveries in {window:?} at 20/s with burst 1 (expected about 61)"
    );

    // per_second 0 removes the limit: everything left comes at once.
    let queue = server
        .put_queue("q", json!({"rate_limit": {"per_second": 0}}))
        .await;
    assert!(queue["config"]["rate_limit"].is_null(), "{queue}");
    let mut rest = 0;
    for _ in 0..10 {
        rest += server.receive("q", json!({"max": 100})).await.len();
    }
    assert!(rest >= 120, "only {rest} more without a limit");
}

#[tokio::test]
async fn pace_settings_show_defaults_and_refuse_bad_values() {
    // Proves a rate limit without burst gets one second's worth (per_second 20 → burst 20),
    // burst 0 and a negative rate are 422 invalid_field, and max_in_flight 0 means unbounded.
    let server = TestServer::builder().test_clock(true).start().await;
    let queue = server
        .put_queue("q", json!({"rate_limit": {"per_second": 20}}))
        .await;
    assert_eq!(
        queue["config"]["rate_limit"],
        json!({"per_second": 20.0, "burst": 20})
    );
    for spec in [
        json!({"rate_limit": {"per_second": 5, "burst": 0}}),
        json!({"rate_limit": {"per_second": -1}}),
    ] {
        let error = server
            .put("/v1/queues/q", spec)
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains("rate_limit"),
            "{error}"
        );
    }
    let queue = server.put_queue("q", json!({"max_in_flight": 2})).await;
    assert_eq!(queue["config"]["max_in_flight"], 2);
    let queue = server.put_queue("q", json!({"max_in_flight": 0})).await;
    assert!(queue["config"]["max_in_flight"].is_null(), "{queue}");
}

#[tokio::test]
async fn null_removes_a_limit_on_an_update_as_zero_does() {
    // Proves `null` on an update removes max_depth, max_in_flight and rate_limit (as the docs
    // and the README's "remove the limits (null or 0)" say), while a field left out keeps its
    // value. Before the fix a `null` was read as "left out" and the limits stayed.
    let server = TestServer::builder().start().await;
    let limited = json!({"max_depth": 5, "max_in_flight": 2, "rate_limit": {"per_second": 3}});
    let config = server.put_queue("q", limited.clone()).await["config"].clone();
    assert_eq!(config["max_depth"], 5, "{config}");
    let kept = server.put_queue("q", json!({"max_attempts": 3})).await["config"].clone();
    assert_eq!(
        (
            &kept["max_depth"],
            &kept["max_in_flight"],
            &kept["rate_limit"]["per_second"]
        ),
        (&json!(5), &json!(2), &json!(3.0)),
        "fields left out keep their value: {kept}"
    );
    let removed = server
        .put_queue(
            "q",
            json!({"max_depth": null, "max_in_flight": null, "rate_limit": null}),
        )
        .await["config"]
        .clone();
    assert!(removed["max_depth"].is_null(), "{removed}");
    assert!(removed["max_in_flight"].is_null(), "{removed}");
    assert!(removed["rate_limit"].is_null(), "{removed}");
    server.put_queue("q", limited).await;
    let zeroed = server
        .put_queue(
            "q",
            json!({"max_depth": 0, "max_in_flight": 0, "rate_limit": {"per_second": 0}}),
        )
        .await["config"]
        .clone();
    assert!(
        zeroed["max_depth"].is_null() && zeroed["rate_limit"].is_null(),
        "{zeroed}"
    );
}
