//! `GET /metrics`: the Prometheus text exposition, parsed with a Prometheus text-format parser
//! and checked number by number after a known sequence of queue, webhook and push traffic.

use std::time::Duration;

use prometheus_parse::{HistogramCount, Sample, Scrape, Value as Metric};
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::destination::Destination;
use crate::support::hooks::{define, post_hook};

/// Longest wait for something the server does in the background.
const WAIT: Duration = Duration::from_secs(20);

/// `GET /metrics` (asserts 200 and the content type), parsed.
async fn scrape(server: &TestServer) -> Scrape {
    let reply = server.get("/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.text);
    let content_type = reply.header("content-type").unwrap_or_default();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let lines = reply.text.lines().map(|line| Ok(line.to_owned()));
    Scrape::parse(lines).expect("the exposition parses")
}

/// The one sample of `name` with exactly these labels.
fn sample<'a>(scrape: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> &'a Sample {
    let found: Vec<&Sample> = scrape
        .samples
        .iter()
        .filter(|s| {
            s.metric == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name}{labels:?}: {found:?} among {:#?}",
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .collect::<Vec<_>>()
    );
    found[0]
}

/// The value of a counter, gauge or (for `_sum`/`_count`) untyped sample.
fn value(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    match &sample(scrape, name, labels).value {
        Metric::Counter(v) | Metric::Gauge(v) | Metric::Untyped(v) => *v,
        other => panic!("{name}{labels:?} is not a single value: {other:?}"),
    }
}

/// Asserts that a counter has type counter and this value.
fn counter(scrape: &Scrape, name: &str, labels: &[(&str, &str)], expected: u64) {
    let found = sample(scrape, name, labels);
    assert_eq!(
        found.value,
        Metric::Counter(expected as f64),
        "{name}{labels:?}"
    );
}

/// Asserts that a gauge has type gauge and this value.
fn gauge(scrape: &Scrape, name: &str, labels: &[(&str, &str)], expected: f64) {
    let found = sample(scrape, name, labels);
    assert_eq!(found.value, Metric::Gauge(expected), "{name}{labels:?}");
}

/// A histogram's cumulative buckets (`le` → count).
fn buckets(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<HistogramCount> {
    match &sample(scrape, name, labels).value {
        Metric::Histogram(buckets) => buckets.clone(),
        other => panic!("{name}{labels:?} is not a histogram: {other:?}"),
    }
}

/// The count of a cumulative bucket.
fn bucket(buckets: &[HistogramCount], le: f64) -> f64 {
    buckets
        .iter()
        .find(|b| b.less_than == le)
        .unwrap_or_else(|| panic!("no bucket le={le} in {buckets:?}"))
        .count
}

fn receipts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| m["receipt"].as_str().expect("receipt").to_owned())
        .collect()
}

#[tokio::test]
async fn metrics_count_a_known_sequence_exactly() {
    // Proves: after enqueue 10, receive 10 (8 + one with a 10 s lease + one with a 600 s lease),
    // ack 6 exactly 2.5 s (test clock) after the enqueue, nack 2 (one retried in 60 s, one
    // permanently), and one lease running out, GET /metrics shows exactly those numbers for the
    // queue (depths by state, DLQ depth, oldest ready age, every counter, paused) and an
    // enqueue-to-ack histogram with 6 acks, all in the 2.5 s bucket, sum 15 s; a webhook
    // endpoint counts one accepted and one rejected (too_large) request; a push destination
    // counts one delivery and one timed request; the storage histograms counted the commits.
    // Everything parses as the Prometheus text format.
    let destination = Destination::start().await;
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "jobs",
            json!({"visibility_timeout_ms": 30_000, "max_attempts": 5, "dead_letter_queue": "jobs-dlq"}),
        )
        .await;

    let messages: Vec<Value> = (0..10).map(|i| json!({"body": {"n": i}})).collect();
    let sent = server.send("jobs", json!({"messages": messages})).await;
    assert_eq!(sent["results"].as_array().map(Vec::len), Some(10), "{sent}");
    let enqueued_at = server.now().await;

    let first = server.receive("jobs", json!({"max": 8})).await;
    assert_eq!(first.len(), 8);
    let short = server
        .receive("jobs", json!({"max": 1, "visibility_timeout_ms": 10_000}))
        .await;
    let long = server
        .receive("jobs", json!({"max": 1, "visibility_timeout_ms": 600_000}))
        .await;
    assert_eq!((short.len(), long.len()), (1, 1));

    server.advance_clock(2_500).await;
    let first = receipts(&first);
    for receipt in &first[..6] {
        server.ack("jobs", receipt).await;
    }
    let retried = server
        .nack(
            "jobs",
            json!({"receipt": first[6], "error": "later", "delay_ms": 60_000}),
        )
        .await;
    assert!(retried["visible_at"].is_string(), "{retried}");
    let dead = server
        .nack(
            "jobs",
            json!({"receipt": first[7], "error": "never", "permanent": true}),
        )
        .await;
    assert_eq!(dead["dead_letter_queue"], "jobs-dlq", "{dead}");

    // The 10 s lease runs out; maintenance (every 500 ms of real time) notices.
    server.advance_clock(10_000).await;
    let stats = server
        .stats_until("jobs", WAIT, |s| s["counters"]["lease_expired"] == 1)
        .await;
    assert_eq!(stats["counters"]["lease_expired"], 1, "{stats}");
    let now = server.now().await;
    assert_eq!(now - enqueued_at, 12_500);

    // A webhook endpoint: one accepted event, one refused as too large.
    server.put_queue("inbox", json!({})).await;
    define(
        &server,
        "hook",
        json!({"queue": "inbox", "verify": {"scheme": "none"}, "max_body_bytes": 64}),
    )
    .await;
    let json_type = [("content-type".to_owned(), "application/json".to_owned())];
    let reply = post_hook(&server, "/hooks/hook", &json_type, r#"{"ok": true}"#).await;
    assert_eq!(reply.status, 202, "{}", reply.text);
    let reply = post_hook(&server, "/hooks/hook", &json_type, "x".repeat(65)).await;
    reply.error(413, "too_large");

    // A push destination delivers one message.
    server
        .put_queue("out", json!({"push": {"url": destination.url("/in")}}))
        .await;
    server.send("out", json!({"body": "hello"})).await;
    destination.wait_for(1, WAIT).await;
    let stats = server
        .stats_until("out", WAIT, |s| {
            s["counters"]["acked"] == 1 && s["push"]["delivered"] == 1
        })
        .await;
    assert_eq!(stats["push"]["delivered"], 1, "{stats}");

    let scrape = scrape(&server).await;
    let jobs = [("queue", "jobs")];

    for (state, expected) in [("ready", 1.0), ("delayed", 1.0), ("in_flight", 1.0)] {
        gauge(
            &scrape,
            "sluice_queue_messages",
            &[("queue", "jobs"), ("state", state)],
            expected,
        );
    }
    gauge(&scrape, "sluice_queue_dead_letter_messages", &jobs, 1.0);
    // The ready one is the message whose lease ran out, enqueued 12.5 s ago.
    gauge(
        &scrape,
        "sluice_queue_oldest_ready_age_seconds",
        &jobs,
        12.5,
    );
    gauge(&scrape, "sluice_queue_paused", &jobs, 0.0);
    for (name, expected) in [
        ("sluice_messages_enqueued_total", 10),
        ("sluice_messages_delivered_total", 10),
        ("sluice_messages_acked_total", 6),
        ("sluice_messages_nacked_total", 2),
        ("sluice_messages_dead_lettered_total", 1),
        ("sluice_messages_expired_total", 0),
        ("sluice_messages_rejected_total", 0),
        ("sluice_messages_cancelled_total", 0),
        ("sluice_messages_purged_total", 0),
        ("sluice_leases_expired_total", 1),
    ] {
        counter(&scrape, name, &jobs, expected);
    }
    // The dead-letter queue is a queue of its own.
    gauge(
        &scrape,
        "sluice_queue_messages",
        &[("queue", "jobs-dlq"), ("state", "ready")],
        1.0,
    );

    let latency = buckets(&scrape, "sluice_message_ack_latency_seconds", &jobs);
    assert_eq!(bucket(&latency, 1.0), 0.0, "{latency:?}");
    assert_eq!(bucket(&latency, 2.5), 6.0, "{latency:?}");
    assert_eq!(bucket(&latency, f64::INFINITY), 6.0, "{latency:?}");
    let acks = value(&scrape, "sluice_message_ack_latency_seconds_count", &jobs);
    assert_eq!(acks, 6.0, "the histogram counts every ack");
    assert_eq!(
        acks,
        value(&scrape, "sluice_messages_acked_total", &jobs),
        "the histogram's count equals the acks"
    );
    assert_eq!(
        value(&scrape, "sluice_message_ack_latency_seconds_sum", &jobs),
        15.0
    );

    let endpoint = |outcome| [("endpoint", "hook"), ("outcome", outcome)];
    counter(
        &scrape,
        "sluice_webhook_requests_total",
        &endpoint("accepted"),
        1,
    );
    for outcome in ["duplicate", "ignored", "dead_lettered"] {
        counter(
            &scrape,
            "sluice_webhook_requests_total",
            &endpoint(outcome),
            0,
        );
    }
    counter(
        &scrape,
        "sluice_webhook_requests_total",
        &[
            ("endpoint", "hook"),
            ("outcome", "rejected"),
            ("reason", "too_large"),
        ],
        1,
    );
    counter(
        &scrape,
        "sluice_messages_enqueued_total",
        &[("queue", "inbox")],
        1,
    );

    let out = |outcome| [("queue", "out"), ("outcome", outcome)];
    counter(&scrape, "sluice_push_requests_total", &out("delivered"), 1);
    counter(&scrape, "sluice_push_requests_total", &out("retried"), 0);
    counter(
        &scrape,
        "sluice_push_requests_total",
        &out("failed_permanently"),
        0,
    );
    gauge(
        &scrape,
        "sluice_push_in_flight_requests",
        &[("queue", "out")],
        0.0,
    );
    let push = buckets(
        &scrape,
        "sluice_push_request_duration_seconds",
        &[("queue", "out")],
    );
    assert_eq!(bucket(&push, f64::INFINITY), 1.0, "{push:?}");
    assert_eq!(
        value(
            &scrape,
            "sluice_push_request_duration_seconds_count",
            &[("queue", "out")]
        ),
        1.0
    );
    assert!(
        value(
            &scrape,
            "sluice_push_request_duration_seconds_sum",
            &[("queue", "out")]
        ) > 0.0
    );

    // Storage: every write above went through a group commit and a WAL sync (durability fsync).
    let groups = value(&scrape, "sluice_storage_group_commit_operations_count", &[]);
    let ops = value(&scrape, "sluice_storage_group_commit_operations_sum", &[]);
    let syncs = value(
        &scrape,
        "sluice_storage_wal_fsync_duration_seconds_count",
        &[],
    );
    assert!(groups >= 1.0 && ops >= groups, "{groups} groups, {ops} ops");
    assert!(
        syncs >= 1.0 && syncs <= groups,
        "{syncs} syncs, {groups} groups"
    );
    let group_buckets = buckets(&scrape, "sluice_storage_group_commit_operations", &[]);
    assert_eq!(bucket(&group_buckets, f64::INFINITY), groups);
    assert!(
        value(
            &scrape,
            "sluice_storage_wal_fsync_duration_seconds_sum",
            &[]
        ) > 0.0,
        "syncs take time"
    );

    let build = sample(
        &scrape,
        "sluice_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
    );
    assert_eq!(build.value, Metric::Gauge(1.0));
}
