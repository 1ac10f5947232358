//! Several `sluice serve` nodes on one PostgreSQL schema: the multi-node scenarios of
//! docs/design/postgres-store.md §7.1, run against real processes over the native HTTP API.
//!
//! Each test starts three nodes on a fresh schema `sluice_test_<uuid v7>` (`cluster/support.rs`),
//! drives them with producers and consumers that keep a journal of every lease they were given
//! (message, lease number, when it arrived, its deadline, how its ack or nack was answered), and
//! checks the journal against the rule under test. The loads are scaled down from §7.1 so the
//! whole file runs in under three minutes on two shared cores; each test runs alone (the support
//! holds a lock), and every wait has a deadline and every load a count.
//!
//! How to run (needs PostgreSQL at `SLUICE_TEST_POSTGRES_URL`, default
//! `postgres://postgres@127.0.0.1:5432/test`; without it each test says it is skipped, and with
//! `CI` or `SLUICE_REQUIRE_POSTGRES` set it fails instead):
//!
//! ```sh
//! CI=1 cargo test -p sluice-cli --test cluster -- --nocapture
//! SLUICE_BIN=target/release/sluice cargo test -p sluice-cli --test cluster   # another binary
//! ```
//!
//! `--nocapture` shows the figures each scenario measures (wake-up latencies, delivery rates).

#[path = "cluster/support.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_core::message::Receipt;
use tokio::sync::Semaphore;

use sluice_testkit::eventually;
use support::{Cluster, ClusterOptions, Endpoint};

// ---- 1 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_lease_is_held_by_two_consumers_at_once() {
    // §7.1 scenario 1, scaled: 1,000 messages, two consumers per node taking up to 4 at a
    // time, leases of 2 s and one handler in ten sleeping 2.5 s, past its lease. For every
    // message the leases handed out (by any node) must follow one another: a later lease starts
    // only after the earlier one's deadline, an ack answered 2xx is the message's last lease,
    // an ack of a lease that another consumer was given since is refused, and every message is
    // acked in the end.
    const MESSAGES: u64 = 1_000;
    const LEASE_MS: i64 = 2_000;
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(90), async {
        let nodes = cluster.endpoints();
        nodes[0]
            .put(
                "/v1/queues/leases",
                &json!({"visibility_timeout_ms": LEASE_MS, "max_attempts": 0}),
            )
            .await;
        enqueue_numbered(&nodes, "leases", 0..MESSAGES, 100).await;

        let journal = Journal::new();
        let handler = handler(|_| async {
            let slow = rand::random_bool(0.1);
            let pause = if slow {
                Duration::from_millis(2_500)
            } else {
                Duration::from_millis(rand::random_range(0..20))
            };
            tokio::time::sleep(pause).await;
            Outcome::Ack
        });
        let consumers = start_consumers(&nodes, 2, |node| Consumer {
            slots: 4,
            ..Consumer::new(&nodes[node], node, "leases", LEASE_MS, &journal)
        }, &handler);
        journal
            .wait_for_acks(MESSAGES as usize, Duration::from_secs(60))
            .await;
        stop_consumers(&journal, consumers).await;

        let deliveries = journal.deliveries();
        journal.assert_no_failures(&[]);
        let leases = leases_by_message(&deliveries);
        assert_eq!(leases.len() as u64, MESSAGES, "every message was delivered");
        for (message, leases) in &leases {
            let numbers: Vec<u32> = leases.iter().map(|d| d.lease_number).collect();
            let expected: Vec<u32> = (1..=leases.len() as u32).collect();
            assert_eq!(
                numbers, expected,
                "{message}: a lease was granted that no consumer was given, or twice"
            );
        }
        let behind = assert_leases_follow_one_another(&leases, &HashSet::new());
        let bodies: BTreeSet<u64> = leases.values().map(|leases| leases[0].n).collect();
        assert_eq!(
            bodies,
            (0..MESSAGES).collect::<BTreeSet<u64>>(),
            "every body was delivered as sent"
        );
        let mut per_node = vec![0; nodes.len()];
        for delivery in &deliveries {
            per_node[delivery.node] += 1;
        }
        assert!(
            per_node.iter().all(|count| *count > 0),
            "a node delivered nothing: {per_node:?}"
        );
        let redelivered = leases.values().filter(|leases| leases.len() > 1).count();
        let stale_acks = deliveries
            .iter()
            .filter(|d| d.settled_status == Some(409))
            .count();
        eprintln!(
            "scenario 1: {} deliveries of {MESSAGES} messages (by node {per_node:?}), {redelivered} delivered again after a lease ran out, {stale_acks} late acks refused, {} leases granted by a clock behind the earlier deadline (at most {} ms)",
            deliveries.len(),
            behind.len(),
            behind.iter().max().unwrap_or(&0)
        );
        assert!(
            redelivered > 0,
            "no lease ran out: the test did not test what it should"
        );
        assert_queue_empty(&nodes, "leases").await;
    })
    .await;
    cluster.assert_no_panics();
}

// ---- 2 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_key_order_holds_across_nodes() {
    // §7.1 scenario 2, scaled: a `per_key` queue with 20 keys x 15 messages, each key's
    // producer sending one message at a time to the nodes in turn; two consumers per node, one
    // delivery in ten nacked with a delay of 0-200 ms. Consumers mark a key as theirs from the
    // receive's answer until just before they send its ack or nack, so a second message of the
    // key handed out while the first is held is seen as it happens; per key the acks must come
    // 1..=15 in order with no gap. Then the same with a `fifo` queue (one lane, 60 messages).
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(90), async {
        let nodes = cluster.endpoints();
        let per_key = order_run(&nodes, "by-key", "per_key", 20, 15).await;
        let fifo = order_run(&nodes, "one-lane", "fifo", 1, 60).await;
        eprintln!(
            "scenario 2: per_key {} deliveries ({} nacked), fifo {} deliveries ({} nacked)",
            per_key.0, per_key.1, fifo.0, fifo.1
        );
    })
    .await;
    cluster.assert_no_panics();
}

/// One ordered queue under producers (one per key) and consumers on every node; returns
/// (deliveries, nacks).
async fn order_run(
    nodes: &[Endpoint],
    queue: &str,
    ordering: &str,
    keys: usize,
    per_key: u64,
) -> (usize, usize) {
    const LEASE_MS: i64 = 30_000;
    nodes[0]
        .put(
            &format!("/v1/queues/{queue}"),
            &json!({"ordering": ordering, "max_attempts": 0, "visibility_timeout_ms": LEASE_MS}),
        )
        .await;
    let lanes = Arc::new(Lanes::default());
    let journal = Journal::new();
    let handler = {
        let lanes = Arc::clone(&lanes);
        let journal = Arc::clone(&journal);
        handler(move |delivery| {
            let (lanes, journal) = (Arc::clone(&lanes), Arc::clone(&journal));
            async move {
                let lane = delivery.key.clone().unwrap_or_default();
                lanes.take(&lane, delivery.n, &journal);
                tokio::time::sleep(Duration::from_millis(rand::random_range(0..10))).await;
                let outcome = if rand::random_bool(0.1) {
                    Outcome::Nack {
                        delay_ms: rand::random_range(0..=200),
                    }
                } else {
                    Outcome::Ack
                };
                lanes.release(&lane, delivery.n, outcome == Outcome::Ack);
                outcome
            }
        })
    };
    let consumers = start_consumers(
        nodes,
        2,
        |node| Consumer {
            slots: 4,
            ..Consumer::new(&nodes[node], node, queue, LEASE_MS, &journal)
        },
        &handler,
    );
    // Each key's producer: one message at a time, each to the next node.
    let producers: Vec<_> = (0..keys)
        .map(|key| {
            let nodes = nodes.to_vec();
            let path = format!("/v1/queues/{queue}/messages");
            let lane = if ordering == "fifo" {
                None
            } else {
                Some(format!("k{key}"))
            };
            tokio::spawn(async move {
                for n in 1..=per_key {
                    let node = &nodes[(key + n as usize) % nodes.len()];
                    let message = match &lane {
                        Some(lane) => json!({"key": lane, "body": {"n": n}}),
                        None => json!({"body": {"n": n}}),
                    };
                    node.post(&path, &message).await;
                }
            })
        })
        .collect();
    for producer in producers {
        producer.await.expect("a producer ran without panicking");
    }
    journal
        .wait_for_acks(keys * per_key as usize, Duration::from_secs(60))
        .await;
    stop_consumers(&journal, consumers).await;

    journal.assert_no_failures(&[]);
    let acked = lanes.acked();
    assert_eq!(acked.len(), keys, "every lane was acked: {acked:?}");
    for (lane, order) in &acked {
        let expected: Vec<u64> = (1..=per_key).collect();
        assert_eq!(order, &expected, "lane {lane:?} was acked out of order");
    }
    assert_queue_empty(nodes, queue).await;
    let deliveries = journal.deliveries();
    let nacks = deliveries
        .iter()
        .filter(|d| matches!(d.outcome, Outcome::Nack { .. }))
        .count();
    assert!(
        nacks > 0,
        "no nack: the test did not test redelivery in order"
    );
    (deliveries.len(), nacks)
}

/// What consumers hold of each lane, as they see it: a message of a lane is taken from the
/// receive's answer until just before its ack or nack is sent. The server may hand out the
/// lane's next message only once that ack is stored, so a lane taken twice, or a message other
/// than the lane's oldest unacked one, is a broken rule, not a race of the test's.
#[derive(Default)]
struct Lanes {
    lanes: Mutex<HashMap<String, Lane>>,
}

#[derive(Default)]
struct Lane {
    /// The message held now.
    held: Option<u64>,
    /// What was acked (or is being acked), in order.
    acked: Vec<u64>,
}

impl Lanes {
    fn take(&self, lane: &str, n: u64, journal: &Journal) {
        let mut lanes = lock(&self.lanes);
        let state = lanes.entry(lane.to_owned()).or_default();
        if let Some(held) = state.held {
            journal.violation(format!("lane {lane:?}: {n} delivered while {held} is held"));
        }
        let next = state.acked.last().map_or(1, |last| last + 1);
        if n != next {
            journal.violation(format!(
                "lane {lane:?}: {n} delivered when {next} is the oldest not acked"
            ));
        }
        state.held = Some(n);
    }

    fn release(&self, lane: &str, n: u64, acking: bool) {
        let mut lanes = lock(&self.lanes);
        let state = lanes.entry(lane.to_owned()).or_default();
        state.held = None;
        if acking {
            state.acked.push(n);
        }
    }

    fn acked(&self) -> BTreeMap<String, Vec<u64>> {
        lock(&self.lanes)
            .iter()
            .map(|(lane, state)| (lane.clone(), state.acked.clone()))
            .collect()
    }
}

// ---- 3 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idempotency_key_makes_one_message_across_nodes() {
    // §7.1 scenario 3: 16 clients spread over the three nodes send the same idempotency key at
    // a barrier, for 100 keys in turn. Per key exactly one answer says `created: true` and all
    // 16 name the same message; the queue then holds 100 messages, and a lookup by key on every
    // node finds that message.
    const CLIENTS: usize = 16;
    const KEYS: usize = 100;
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(60), async {
        let nodes = cluster.endpoints();
        nodes[0].put("/v1/queues/once", &json!({})).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
        let started = Instant::now();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|client| {
                let node = nodes[client % nodes.len()].clone();
                let barrier = Arc::clone(&barrier);
                tokio::spawn(async move {
                    let mut answers = Vec::with_capacity(KEYS);
                    for key in 0..KEYS {
                        barrier.wait().await;
                        let answer = node
                            .post(
                                "/v1/queues/once/messages",
                                &json!({"id": format!("key-{key}"), "body": {"client": client}}),
                            )
                            .await;
                        let created = answer["created"].as_bool().expect("created");
                        let id = answer["message_id"].as_str().expect("an id").to_owned();
                        answers.push((created, id));
                    }
                    answers
                })
            })
            .collect();
        let mut by_key: Vec<Vec<(bool, String)>> = vec![Vec::new(); KEYS];
        for client in clients {
            let answers = client.await.expect("a client ran without panicking");
            for (key, answer) in answers.into_iter().enumerate() {
                by_key[key].push(answer);
            }
        }
        eprintln!(
            "scenario 3: {KEYS} keys, each sent by {CLIENTS} clients at once, in {:?}",
            started.elapsed()
        );
        let mut message_ids = Vec::with_capacity(KEYS);
        for (key, answers) in by_key.iter().enumerate() {
            let created = answers.iter().filter(|(created, _)| *created).count();
            assert_eq!(
                created, 1,
                "key-{key}: {created} answers said created: {answers:?}"
            );
            let ids: HashSet<&String> = answers.iter().map(|(_, id)| id).collect();
            assert_eq!(
                ids.len(),
                1,
                "key-{key}: answers name several messages: {ids:?}"
            );
            message_ids.push(answers[0].1.clone());
        }
        let distinct: HashSet<&String> = message_ids.iter().collect();
        assert_eq!(distinct.len(), KEYS, "two keys share a message");
        for node in &nodes {
            let stats = node.get("/v1/queues/once/stats").await;
            assert_eq!(stats["ready"], json!(KEYS), "{}: {stats}", node.url());
            for key in (0..KEYS).step_by(7) {
                let found = node
                    .get(&format!("/v1/queues/once/messages?id=key-{key}"))
                    .await;
                assert_eq!(
                    found["message_id"].as_str(),
                    Some(message_ids[key].as_str()),
                    "{}: key-{key}: {found}",
                    node.url()
                );
            }
        }
    })
    .await;
    cluster.assert_no_panics();
}

// ---- 4 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dead_letters_are_notified_once_by_three_nodes() {
    // Issue 17: every node passes over every alert twice a second. Dead letters made through
    // all three nodes must be counted once, in one notification per window, whichever nodes
    // pass at the same moment.
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(60), async {
        let nodes = cluster.endpoints();
        nodes[0]
            .put("/v1/queues/pay", &json!({"max_attempts": 1}))
            .await;
        nodes[1]
            .put(
                "/v1/alerts/ops",
                &json!({"queues": ["pay"], "window_ms": 2_000}),
            )
            .await;
        for i in 0..30 {
            let node = &nodes[i % 3];
            node.post("/v1/queues/pay/messages", &json!({"body": i}))
                .await;
            let answer = node.post("/v1/queues/pay/receive", &json!({})).await;
            let receipt = answer["messages"][0]["receipt"].clone();
            node.post(
                "/v1/queues/pay/nack",
                &json!({"receipt": receipt, "error": format!("failed {i}")}),
            )
            .await;
        }
        // Counted once they are a second old, in windows of 2 s: every dead letter is counted,
        // then in a notification, within a few seconds.
        eventually(
            "every dead letter counted",
            Duration::from_secs(20),
            || async { nodes[0].get("/v1/alerts/ops").await["sent"]["dead_letters_counted"] == 30 },
        )
        .await;
        let notified = Mutex::new(Vec::new());
        eventually(
            "every counted dead letter notified",
            Duration::from_secs(10),
            || async {
                let answer = nodes[2]
                    .post("/v1/queues/sluice.alerts.ops/receive", &json!({"max": 100}))
                    .await;
                let messages = answer["messages"].as_array().cloned().unwrap_or_default();
                let mut notified = lock(&notified);
                for message in &messages {
                    notified.push(message["body"]["count"].as_u64().unwrap());
                }
                notified.iter().sum::<u64>() >= 30
            },
        )
        .await;
        let counts = notified
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        // The first pass may count the first dead letters before the rest were made: every
        // one is counted once, in at most one notification per window.
        assert_eq!(counts.iter().sum::<u64>(), 30, "{counts:?}");
        assert!(
            counts.len() <= 3,
            "one notification per 2 s window: {counts:?}"
        );
        let shown = nodes[0].get("/v1/alerts/ops").await;
        assert_eq!(shown["sent"]["dead_letters"], counts.len(), "{shown}");
        assert_eq!(shown["sent"]["dead_letters_counted"], 30, "{shown}");
    })
    .await;
    cluster.assert_no_panics();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_schedule_run_is_enqueued_once_by_three_nodes() {
    // Issue 17: every node passes over every schedule twice a second. A schedule defined on one
    // node, running every second for about 4 s, must put exactly one message per run in its
    // queue (no run twice, none missing between the first and the last), and its `runs` count
    // must equal the messages, whichever node is asked.
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(60), async {
        let nodes = cluster.endpoints();
        nodes[0].put("/v1/queues/ticks", &json!({})).await;
        nodes[1]
            .put(
                "/v1/schedules/tick",
                &json!({"queue": "ticks", "every_ms": 1000, "message": {"body": "tick"}}),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(4_300)).await;
        nodes[2].post("/v1/schedules/tick/pause", &json!({})).await;
        // A pass that read the schedule before the pause may still be enqueueing its run.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        let mut runs = Vec::new();
        loop {
            let answer = nodes[0]
                .post("/v1/queues/ticks/receive", &json!({"max": 100}))
                .await;
            let messages = answer["messages"].as_array().cloned().unwrap_or_default();
            if messages.is_empty() {
                break;
            }
            for message in &messages {
                runs.push(
                    message["headers"]["sluice-scheduled-at"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                );
                nodes[0]
                    .post(
                        "/v1/queues/ticks/ack",
                        &json!({"receipt": message["receipt"]}),
                    )
                    .await;
            }
        }
        runs.sort();
        let distinct: BTreeSet<&String> = runs.iter().collect();
        assert_eq!(
            distinct.len(),
            runs.len(),
            "a run was enqueued twice: {runs:?}"
        );
        assert!(runs.len() >= 3, "runs missing: {runs:?}");
        let times: Vec<i64> = runs
            .iter()
            .map(|t| sluice_wire::parse_rfc3339(t).unwrap())
            .collect();
        assert!(
            times.windows(2).all(|w| w[1] - w[0] == 1000),
            "a run between the first and the last is missing: {runs:?}"
        );
        for node in &nodes {
            let shown = node.get("/v1/schedules/tick").await;
            assert_eq!(shown["runs"].as_u64(), Some(runs.len() as u64), "{shown}");
        }
    })
    .await;
    cluster.assert_no_panics();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rate_limit_and_max_in_flight_hold_for_the_nodes_together() {
    // §7.1 scenario 4, scaled: a queue limited to 50 deliveries a second (burst 50) with two
    // consumers on every node for 6 s: counted by the server's own grant times, deliveries
    // never run ahead of 50 + 50/s since the first, and keep up with at least 80 % of the rate
    // after the burst. Then a queue with `max_in_flight = 5` and nine consumers holding each
    // message 300 ms: never more than 5 held at once, and 5 reached.
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(60), async {
        let nodes = cluster.endpoints();
        rate_limit_run(&nodes).await;
        max_in_flight_run(&nodes).await;
    })
    .await;
    cluster.assert_no_panics();
}

async fn rate_limit_run(nodes: &[Endpoint]) {
    const PER_SECOND: i64 = 50;
    const BURST: i64 = 50;
    const RUN_MS: i64 = 6_000;
    const LEASE_MS: i64 = 30_000;
    nodes[0]
        .put(
            "/v1/queues/paced",
            &json!({"rate_limit": {"per_second": PER_SECOND, "burst": BURST}, "visibility_timeout_ms": LEASE_MS}),
        )
        .await;
    // More than the run can take, so the consumers never run dry.
    let supply = (BURST + PER_SECOND * RUN_MS / 1_000) as u64 * 2;
    enqueue_numbered(nodes, "paced", 0..supply, 100).await;

    let journal = Journal::new();
    let handler = handler(|_| async { Outcome::Ack });
    let started = Instant::now();
    let consumers = start_consumers(
        nodes,
        2,
        |node| Consumer {
            slots: 10,
            ..Consumer::new(&nodes[node], node, "paced", LEASE_MS, &journal)
        },
        &handler,
    );
    // The first grant starts the clock; the run lasts RUN_MS past it (a little more, so
    // grants until then are surely journalled).
    let deadline = Instant::now() + Duration::from_secs(10);
    while lock(&journal.deliveries).is_empty() {
        assert!(Instant::now() < deadline, "nothing delivered within 10 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(RUN_MS as u64 + 500)).await;
    stop_consumers(&journal, consumers).await;
    journal.assert_no_failures(&[]);

    // The bucket counts by its own time, which never runs backwards: a claim whose `now` is
    // older than the bucket's adds nothing. So the grants' own times (each claim's `now`) may
    // run ahead of the limit by as long as a claim waited after reading its clock; the client's
    // receive times may not, since each comes after its grant was counted. The bucket's clock
    // starts at the first grant's time, at the earliest the smallest of the grants' times.
    let deliveries = journal.deliveries();
    let mut grants: Vec<i64> = deliveries.iter().map(|d| d.claimed_at_ms).collect();
    grants.sort_unstable();
    let first = grants[0];
    let mut received: Vec<i64> = deliveries.iter().map(|d| d.received_at_ms).collect();
    received.sort_unstable();
    // One token of slack for the rounding of times to the millisecond.
    const SLACK: i64 = 1;
    for (index, at) in received.iter().enumerate() {
        let allowed = BURST + PER_SECOND * (at - first) / 1_000;
        let delivered = index as i64 + 1;
        assert!(
            delivered <= allowed + SLACK,
            "{delivered} deliveries received by {} ms after the first grant, where the limit allows {allowed}",
            at - first
        );
    }
    let in_run = grants.iter().filter(|t| **t - first <= RUN_MS).count() as i64;
    let full_rate = BURST + PER_SECOND * RUN_MS / 1_000;
    eprintln!(
        "scenario 4: {in_run} deliveries in {RUN_MS} ms from the first (the limit allows {full_rate}), {} in all over {:?}",
        grants.len(),
        started.elapsed()
    );
    assert!(
        (in_run - BURST) * 10 >= (full_rate - BURST) * 8,
        "only {in_run} deliveries in {RUN_MS} ms: under 80 % of the rate after the burst"
    );
}

async fn max_in_flight_run(nodes: &[Endpoint]) {
    const LIMIT: usize = 5;
    const MESSAGES: u64 = 60;
    const LEASE_MS: i64 = 30_000;
    nodes[0]
        .put(
            "/v1/queues/narrow",
            &json!({"max_in_flight": LIMIT, "visibility_timeout_ms": LEASE_MS}),
        )
        .await;
    enqueue_numbered(nodes, "narrow", 0..MESSAGES, 20).await;

    let held = Arc::new(AtomicUsize::new(0));
    let most_held = Arc::new(AtomicUsize::new(0));
    let journal = Journal::new();
    let handler = {
        let (held, most_held) = (Arc::clone(&held), Arc::clone(&most_held));
        handler(move |_| {
            let (held, most_held) = (Arc::clone(&held), Arc::clone(&most_held));
            async move {
                // Held from the receive's answer until just before the ack is sent: inside the
                // lease, so more held at once means more leases at once.
                let now_held = held.fetch_add(1, Ordering::SeqCst) + 1;
                most_held.fetch_max(now_held, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
                held.fetch_sub(1, Ordering::SeqCst);
                Outcome::Ack
            }
        })
    };
    let consumers = start_consumers(
        nodes,
        3,
        |node| Consumer::new(&nodes[node], node, "narrow", LEASE_MS, &journal),
        &handler,
    );
    journal
        .wait_for_acks(MESSAGES as usize, Duration::from_secs(30))
        .await;
    stop_consumers(&journal, consumers).await;
    journal.assert_no_failures(&[]);
    let most = most_held.load(Ordering::SeqCst);
    eprintln!(
        "scenario 4: at most {most} of {MESSAGES} messages held at once (max_in_flight {LIMIT})"
    );
    assert!(most <= LIMIT, "{most} messages were held at once");
    assert_eq!(
        most, LIMIT,
        "the limit was never reached: the test tested nothing"
    );
    assert_queue_empty(nodes, "narrow").await;
}

// ---- 8 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_enqueue_wakes_a_long_poll_on_another_node_at_once() {
    // §7.1 scenario 8: a consumer long-polls on node 2 while node 1 takes an enqueue every
    // 50 ms, 200 times. From the enqueue's answer to the receive's answer is the wake-up's
    // latency across nodes (LISTEN/NOTIFY): p99 under 20 ms, far from the 250 ms timer that
    // stands in while a listener is away. Every message reaches the waiting consumer.
    //
    // The p99 bound is loosened only by what this moment's machine noise costs a wake-up that
    // crosses no node: 25 ms after each of those enqueues, node 1 takes one for a consumer
    // long-polling on node 1 itself, and the p99 across nodes must stay under the larger of
    // 20 ms and twice that same-node p99 (a wake-up across nodes passes through twice the
    // processes: the database's backends and the other node's listener). On two cores shared
    // with other builds (load 9-12) the same-node p99 alone was 35-60 ms; on a quiet machine the
    // bound is the 20 ms of §7.1. The median must be under 20 ms whatever the load, which a
    // wake-up by a timer (250 ms) or by the long poll's end (1 s) cannot meet.
    const ROUNDS: usize = 200;
    const SPACING: Duration = Duration::from_millis(50);
    const P99_BOUND: Duration = Duration::from_millis(20);
    let Some(cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(60), async {
        let nodes = cluster.endpoints();
        nodes[0].put("/v1/queues/wake", &json!({})).await;
        nodes[0].put("/v1/queues/wake-here", &json!({})).await;
        let across = WakeProbe::start(&nodes[1], "wake");
        let here = WakeProbe::start(&nodes[0], "wake-here");
        // Let the first long polls start waiting.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let start = tokio::time::Instant::now();
        for n in 0..ROUNDS as u64 {
            tokio::time::sleep_until(start + SPACING * n as u32).await;
            across.enqueue(&nodes[0], n).await;
            tokio::time::sleep_until(start + SPACING * n as u32 + SPACING / 2).await;
            here.enqueue(&nodes[0], n).await;
        }
        let across = across.latencies(ROUNDS).await;
        let here = here.latencies(ROUNDS).await;
        eprintln!("scenario 8: wake-up across nodes, enqueue answer to receive answer: {across}");
        eprintln!("scenario 8: the same on one node (the machine's noise): {here}");
        assert!(across.p50 < P99_BOUND, "across nodes {across}");
        let bound = P99_BOUND.max(here.p99 * 2);
        assert!(
            across.p99 < bound,
            "across nodes p99 {:?} (bound {bound:?}); {across}; on one node {here}",
            across.p99
        );
    })
    .await;
    cluster.assert_no_panics();
}

/// A consumer long-polling one queue, and when each numbered message was answered to the
/// producer and to it.
struct WakeProbe {
    queue: String,
    answered: Mutex<HashMap<u64, Instant>>,
    received: Arc<Mutex<HashMap<u64, Instant>>>,
    stop: Arc<AtomicBool>,
    consumer: tokio::task::JoinHandle<()>,
}

impl WakeProbe {
    fn start(node: &Endpoint, queue: &str) -> WakeProbe {
        let received: Arc<Mutex<HashMap<u64, Instant>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let consumer = {
            let (node, received, stop) = (node.clone(), Arc::clone(&received), Arc::clone(&stop));
            let (receive, ack) = (
                format!("/v1/queues/{queue}/receive"),
                format!("/v1/queues/{queue}/ack"),
            );
            tokio::spawn(async move {
                // Bounded by `stop`, set once the last message is in or the wait is over.
                while !stop.load(Ordering::SeqCst) {
                    let answer = node
                        .post(&receive, &json!({"max": 1, "wait_ms": 1_000}))
                        .await;
                    let arrived = Instant::now();
                    for message in answer["messages"].as_array().into_iter().flatten() {
                        let n = message["body"]["n"].as_u64().expect("n");
                        lock(&received).insert(n, arrived);
                        // The ack goes on beside the next poll, not before it.
                        let (node, ack) = (node.clone(), ack.clone());
                        let receipt = json!({"receipt": message["receipt"]});
                        tokio::spawn(async move { node.post(&ack, &receipt).await });
                    }
                }
            })
        };
        WakeProbe {
            queue: queue.to_owned(),
            answered: Mutex::default(),
            received,
            stop,
            consumer,
        }
    }

    async fn enqueue(&self, node: &Endpoint, n: u64) {
        node.post(
            &format!("/v1/queues/{}/messages", self.queue),
            &json!({"body": {"n": n}}),
        )
        .await;
        lock(&self.answered).insert(n, Instant::now());
    }

    /// Waits (at most 5 s) for all `rounds` messages, stops the consumer and sums up.
    async fn latencies(self, rounds: usize) -> Latencies {
        let deadline = Instant::now() + Duration::from_secs(5);
        while lock(&self.received).len() < rounds && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.stop.store(true, Ordering::SeqCst);
        self.consumer
            .await
            .expect("the consumer ran without panicking");
        let received = lock(&self.received).clone();
        assert_eq!(
            received.len(),
            rounds,
            "{}: messages missing at the waiting consumer",
            self.queue
        );
        let answered = lock(&self.answered).clone();
        let mut latencies: Vec<Duration> = answered
            .iter()
            .map(|(n, answered)| received[n].saturating_duration_since(*answered))
            .collect();
        latencies.sort_unstable();
        let percentile = |p: usize| latencies[(latencies.len() * p / 100).min(latencies.len() - 1)];
        Latencies {
            p50: percentile(50),
            p99: percentile(99),
            max: latencies[latencies.len() - 1],
        }
    }
}

struct Latencies {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl std::fmt::Display for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:?}, p99 {:?}, max {:?}",
            self.p50, self.p99, self.max
        )
    }
}

// ---- 5 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_killed_mid_load_loses_nothing_and_its_leases_come_back() {
    // §7.1 scenario 5, scaled: three producers (one per node, batches of 4 every 50 ms, 100
    // batches each, every message with an idempotency key so a retry elsewhere stores it once)
    // and two consumers per node on a queue with 3 s leases; node 2 is SIGKILLed 2.5 s in. Its
    // consumers go with it, leaving their leases. Requests to nodes 1 and 3 all succeed; every
    // message whose enqueue was answered 2xx is acked in the end; node 2's leases are handed
    // out again only after their deadline; nothing acked comes back; node 2 restarted serves
    // the same (empty) queue.
    const KILLED: usize = 1;
    const LEASE_MS: i64 = 3_000;
    const PRODUCERS: usize = 3;
    const BATCHES: usize = 100;
    const BATCH: usize = 4;
    let Some(mut cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(90), async {
        let nodes = cluster.endpoints();
        nodes[0]
            .put(
                "/v1/queues/crash",
                &json!({"visibility_timeout_ms": LEASE_MS, "max_attempts": 0}),
            )
            .await;
        let journal = Journal::new();
        let stored: Arc<Mutex<HashSet<String>>> = Arc::default();
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|producer| {
                let (nodes, journal, stored) = (nodes.clone(), Arc::clone(&journal), Arc::clone(&stored));
                tokio::spawn(produce_through_failures(nodes, producer, BATCHES, BATCH, journal, stored))
            })
            .collect();
        // Node 2's consumers are slower, so they surely hold leases when it dies.
        let handler = handler(|delivery| async move {
            let pause = if delivery.node == KILLED {
                rand::random_range(200..400)
            } else {
                rand::random_range(20..60)
            };
            tokio::time::sleep(Duration::from_millis(pause)).await;
            Outcome::Ack
        });
        let consumers = start_consumers(
            &nodes,
            2,
            |node| Consumer {
                slots: 4,
                quit_when_node_gone: node == KILLED,
                ..Consumer::new(&nodes[node], node, "crash", LEASE_MS, &journal)
            },
            &handler,
        );

        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let killed_at_ms = now_ms();
        cluster.node_mut(KILLED).kill9().await;
        for producer in producers {
            producer.await.expect("a producer ran without panicking");
        }
        let stored = lock(&stored).clone();
        let confirmed = wait_until_all_acked(&journal, &nodes[0], "crash", &stored).await;
        stop_consumers(&journal, consumers).await;

        journal.assert_no_failures(&[KILLED]);
        let deliveries = journal.deliveries();
        let leases = leases_by_message(&deliveries);
        let behind = assert_leases_follow_one_another(&leases, &confirmed);
        // Leases node 2's consumers held when it died, acks without an answer included.
        let left_by_killed: Vec<&Delivery> = deliveries
            .iter()
            .filter(|d| d.node == KILLED && d.settled_status.is_none())
            .collect();
        let came_back = left_by_killed
            .iter()
            .filter(|left| leases[&left.message_id].last().expect("a lease").lease_number > left.lease_number)
            .count();
        let served_after = deliveries
            .iter()
            .filter(|d| d.node != KILLED && d.received_at_ms > killed_at_ms + 500)
            .count();
        eprintln!(
            "scenario 5: {} messages stored, {} deliveries; node 2's consumers left {} leases unsettled (acks without an answer included): {came_back} delivered again after their deadline, {} found acked by lookup; {served_after} deliveries by the other nodes after the kill; {} leases granted by a clock behind the earlier deadline",
            stored.len(),
            deliveries.len(),
            left_by_killed.len(),
            confirmed.len(),
            behind.len()
        );
        assert_eq!(stored.len(), PRODUCERS * BATCHES * BATCH, "every batch was stored somewhere");
        assert!(came_back > 0, "none of node 2's leases came back: the kill found it idle");
        assert!(served_after > 0, "the other nodes served nothing after the kill");

        cluster.node_mut(KILLED).restart().await;
        assert_queue_empty(&cluster.endpoints(), "crash").await;
    })
    .await;
    cluster.assert_no_panics();
}

/// A producer that sends `batches` batches of `batch` messages, one every 50 ms, starting on
/// node `producer`; a batch that gets no answer or a 5xx is sent again (same idempotency keys)
/// to the next node, which it then keeps. Journals every failed request; adds the keys of
/// every batch answered 200 to `stored`.
async fn produce_through_failures(
    nodes: Vec<Endpoint>,
    producer: usize,
    batches: usize,
    batch: usize,
    journal: Arc<Journal>,
    stored: Arc<Mutex<HashSet<String>>>,
) {
    const TRIES: usize = 10;
    let mut node = producer % nodes.len();
    let start = tokio::time::Instant::now();
    for index in 0..batches {
        tokio::time::sleep_until(start + Duration::from_millis(50) * index as u32).await;
        let ids: Vec<String> = (0..batch)
            .map(|i| format!("p{producer}-{index}-{i}"))
            .collect();
        let messages: Vec<Value> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| json!({"id": id, "body": {"n": (producer * batches + index) * batch + i}}))
            .collect();
        let body = json!({ "messages": messages });
        let mut tries = 0;
        loop {
            tries += 1;
            assert!(
                tries <= TRIES,
                "producer {producer}: batch {index} not stored in {TRIES} tries"
            );
            match nodes[node]
                .try_post("/v1/queues/crash/messages", &body)
                .await
            {
                Ok(reply) if reply.status == 200 => break,
                Ok(reply) => journal.fail_reply(node, &reply),
                Err(error) => journal.fail_transport(node, error),
            }
            node = (node + 1) % nodes.len();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        lock(&stored).extend(ids);
    }
}

/// Waits until every message of `stored` (by idempotency key) was acked: by a 2xx ack in the
/// journal, or, for a message whose ack got no answer (its node died) or a 5xx (the database
/// went away while it committed), by a lookup saying `acked`. Returns the message ids confirmed by lookup.
async fn wait_until_all_acked(
    journal: &Journal,
    node: &Endpoint,
    queue: &str,
    stored: &HashSet<String>,
) -> HashSet<String> {
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut confirmed = HashSet::new();
    loop {
        let deliveries = journal.deliveries();
        let acked: HashSet<&String> = deliveries
            .iter()
            .filter(|d| (d.outcome, d.settled_status) == (Outcome::Ack, Some(200)))
            .filter_map(|d| d.id.as_ref())
            .collect();
        // Acks sent that got no answer, or a 5xx: they may or may not have been stored.
        let unanswered: HashMap<&String, &String> = deliveries
            .iter()
            .filter(|d| d.outcome == Outcome::Ack)
            .filter(|d| d.settled_status.is_none_or(|status| status >= 500))
            .filter_map(|d| Some((d.id.as_ref()?, &d.message_id)))
            .collect();
        let pending: Vec<&String> = stored
            .iter()
            .filter(|key| !acked.contains(key))
            .filter(|key| {
                unanswered
                    .get(key)
                    .is_none_or(|message_id| !confirmed.contains(*message_id))
            })
            .collect();
        if pending.is_empty() {
            return confirmed;
        }
        assert!(
            Instant::now() < deadline,
            "{} stored messages not acked after 40 s, e.g. {:?}",
            pending.len(),
            pending.iter().take(5).collect::<Vec<_>>()
        );
        for key in pending {
            let Some(message_id) = unanswered.get(key) else {
                continue;
            };
            let found = node
                .get(&format!("/v1/queues/{queue}/messages/{message_id}"))
                .await;
            if found["state"] == "acked" {
                confirmed.insert((*message_id).clone());
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

// ---- 6 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leaders_upkeep_moves_to_another_node_when_it_is_killed() {
    // §7.1 scenario 6: find the leader by its `sluice_store_leader` gauge and SIGKILL it while
    // ten messages sit out 1 s leases on their only attempt and ten more pass a 2 s max_age.
    // Another node reports itself leader within 3 s of the kill, and within 5 s the leases have
    // run out into the dead-letter queue and the old messages have expired: the upkeep (which
    // only the leader runs) goes on elsewhere.
    const MESSAGES: u64 = 10;
    let Some(mut cluster) = Cluster::start(3, ClusterOptions::default()).await else {
        return;
    };
    within(Duration::from_secs(60), async {
        let nodes = cluster.endpoints();
        let leader = wait_for_leader(&cluster, None, Duration::from_secs(5)).await;
        let survivor = &nodes[(leader + 1) % nodes.len()];
        survivor
            .put(
                "/v1/queues/short",
                &json!({"visibility_timeout_ms": 1_000, "max_attempts": 1}),
            )
            .await;
        survivor
            .put("/v1/queues/old", &json!({"max_age_ms": 2_000}))
            .await;
        enqueue_numbered(&nodes, "short", 0..MESSAGES, 10).await;
        enqueue_numbered(&nodes, "old", 0..MESSAGES, 10).await;
        let leased = survivor
            .post(
                "/v1/queues/short/receive",
                &json!({"max": MESSAGES, "wait_ms": 1_000}),
            )
            .await;
        assert_eq!(
            leased["messages"].as_array().map(Vec::len),
            Some(MESSAGES as usize),
            "{leased}"
        );

        let killed_at = Instant::now();
        cluster.node_mut(leader).kill9().await;
        let next = wait_for_leader(&cluster, Some(leader), Duration::from_secs(3)).await;
        eprintln!(
            "scenario 6: node {} leads {:?} after node {} was killed",
            next + 1,
            killed_at.elapsed(),
            leader + 1
        );
        let deadline = killed_at + Duration::from_secs(5);
        loop {
            let short = survivor.get("/v1/queues/short/stats").await;
            let old = survivor.get("/v1/queues/old/stats").await;
            let done = short["in_flight"] == 0
                && short["dead_lettered"] == json!(MESSAGES)
                && old["ready"] == 0;
            if done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "5 s after the kill the upkeep has not run: short {short}, old {old}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    cluster.assert_no_panics();
}

/// Waits until a running node other than `not` reports itself leader; its index.
async fn wait_for_leader(cluster: &Cluster, not: Option<usize>, timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(leader) = cluster.leader().await
            && Some(leader) != not
        {
            return leader;
        }
        assert!(
            Instant::now() < deadline,
            "no node reports sluice_store_leader 1 within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---- 7 ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_database_cut_under_load_answers_503_and_recovers() {
    // §7.1 scenario 7a: producers and consumers on all three nodes while a proxy between the
    // nodes and PostgreSQL closes every connection and refuses new ones for 5 s. Every enqueue,
    // ack and receive sent during the cut is answered 503 `unavailable` with `Retry-After`,
    // never 2xx and never 500; `/readyz` says 503 within 2 s; after the proxy lets connections
    // through again every node serves within 10 s without a restart; every message whose
    // enqueue was answered 2xx is delivered and acked, nothing acked comes back, and every
    // node's listener has a session again.
    let options = ClusterOptions {
        through_proxy: true,
        connect_timeout_ms: 1_000,
        ..ClusterOptions::default()
    };
    let Some(cluster) = Cluster::start(3, options).await else {
        return;
    };
    within(Duration::from_secs(90), async {
        let nodes = cluster.endpoints();
        let outage = Outage::start(&nodes).await;
        tokio::time::sleep(Duration::from_secs(2)).await;

        let cut_at_ms = now_ms();
        cluster.proxy().cut();
        let readiness = readiness_during(&nodes, Duration::from_secs(5)).await;
        let healed_at_ms = now_ms();
        cluster.proxy().heal();

        let report = outage.finish(&nodes, healed_at_ms).await;
        report.assert_cut_answered_503(cut_at_ms, healed_at_ms);
        wait_for_listeners(&cluster).await;
        eprintln!(
            "scenario 7a: {}; /readyz 503 after {readiness:?} (by node)",
            report.summary()
        );
        for (node, ready) in readiness.iter().enumerate() {
            let waited = ready.unwrap_or_else(|| {
                panic!("node {}: /readyz stayed 200 through the 5 s cut", node + 1)
            });
            assert!(
                waited <= Duration::from_secs(2),
                "node {}: /readyz 503 only after {waited:?}",
                node + 1
            );
        }
    })
    .await;
    cluster.assert_no_panics();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn backends_terminated_under_load_are_replaced_without_a_restart() {
    // §7.1 scenario 7b: as 7a, but the database ends the cluster's sessions itself
    // (`pg_terminate_backend` of every backend that came through the cluster's proxy with an
    // `application_name` of `sluice/…`), as a database restart would, twice 300 ms apart. What
    // was in flight may get 503 (never 500); every node serves again within 10 s; every 2xx
    // enqueue is acked; nothing acked comes back; every node's listener has a session again
    // (its `LISTEN` seen in `pg_stat_activity`), and a wake-up crosses nodes again: a long poll
    // on node 2 gets node 1's enqueue within a second.
    let options = ClusterOptions {
        through_proxy: true,
        connect_timeout_ms: 1_000,
        ..ClusterOptions::default()
    };
    let Some(cluster) = Cluster::start(3, options).await else {
        return;
    };
    within(Duration::from_secs(90), async {
        let nodes = cluster.endpoints();
        let outage = Outage::start(&nodes).await;
        tokio::time::sleep(Duration::from_secs(2)).await;

        let first = cluster.terminate_backends().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let second = cluster.terminate_backends().await;
        let ended_at_ms = now_ms();
        assert!(
            first >= nodes.len(),
            "only {first} backends ended: each node's listener holds one"
        );
        let report = outage.finish(&nodes, ended_at_ms).await;
        report.assert_failures_are_503();
        wait_for_listeners(&cluster).await;

        nodes[0].put("/v1/queues/after", &json!({})).await;
        let mut waits = Vec::new();
        for n in 0..5 {
            let waiter = {
                let node = nodes[1].clone();
                tokio::spawn(async move {
                    let answer = node
                        .post("/v1/queues/after/receive", &json!({"wait_ms": 5_000}))
                        .await;
                    (Instant::now(), answer)
                })
            };
            tokio::time::sleep(Duration::from_millis(200)).await;
            nodes[0]
                .post("/v1/queues/after/messages", &json!({"body": {"n": n}}))
                .await;
            let sent = Instant::now();
            let (arrived, answer) = waiter.await.expect("the waiter ran");
            assert_eq!(answer["messages"].as_array().map(Vec::len), Some(1), "{answer}");
            waits.push(arrived.saturating_duration_since(sent));
        }
        eprintln!(
            "scenario 7b: {first} then {second} backends terminated; {}; wake-ups across nodes afterwards: {waits:?}",
            report.summary()
        );
        for wait in &waits {
            assert!(*wait < Duration::from_secs(1), "a wake-up across nodes took {wait:?}");
        }
    })
    .await;
    cluster.assert_no_panics();
}

/// Waits (at most 10 s, the listeners' longest reconnect backoff and then some) until every
/// node's listener has a session again.
async fn wait_for_listeners(cluster: &Cluster) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listening = cluster.listening_sessions().await;
        if listening == cluster.nodes().len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{listening} of {} listeners are back 10 s after the outage",
            cluster.nodes().len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Producers (one per node, an enqueue every 20 ms, each with its own idempotency key) and
/// consumers (two per node) that keep going through an outage of the database, journalling
/// every answer.
struct Outage {
    journal: Arc<Journal>,
    stored: Arc<Mutex<HashSet<String>>>,
    /// Every enqueue: (node, sent at, answered at, status or none).
    enqueues: Arc<Mutex<Vec<Sent>>>,
    stop_producers: Arc<AtomicBool>,
    producers: Vec<tokio::task::JoinHandle<()>>,
    consumers: Vec<tokio::task::JoinHandle<()>>,
}

/// One request and its answer, by the client's clock (epoch ms).
#[derive(Debug, Clone)]
struct Sent {
    node: usize,
    sent_ms: i64,
    answered_ms: i64,
    status: Option<u16>,
    code: String,
    retry_after: Option<String>,
}

/// What an [`Outage`] saw.
struct OutageReport {
    journal: Arc<Journal>,
    enqueues: Vec<Sent>,
    stored: usize,
    deliveries: usize,
    confirmed: usize,
    /// By node: how long after the outage ended its first 2xx enqueue came.
    recovered_after_ms: Vec<i64>,
}

impl Outage {
    const LEASE_MS: i64 = 3_000;
    /// Each producer's most enqueues (it stops earlier when told).
    const ENQUEUES_MAX: usize = 1_000;

    async fn start(nodes: &[Endpoint]) -> Outage {
        nodes[0]
            .put(
                "/v1/queues/outage",
                &json!({"visibility_timeout_ms": Self::LEASE_MS, "max_attempts": 0}),
            )
            .await;
        let journal = Journal::new();
        let stored: Arc<Mutex<HashSet<String>>> = Arc::default();
        let enqueues: Arc<Mutex<Vec<Sent>>> = Arc::default();
        let stop_producers = Arc::new(AtomicBool::new(false));
        let producers = (0..nodes.len())
            .map(|node| {
                let endpoint = nodes[node].clone();
                let (stored, enqueues, stop) = (
                    Arc::clone(&stored),
                    Arc::clone(&enqueues),
                    Arc::clone(&stop_producers),
                );
                tokio::spawn(async move {
                    for index in 0..Self::ENQUEUES_MAX {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let id = format!("n{node}-{index}");
                        let body =
                            json!({"id": id, "body": {"n": node * Self::ENQUEUES_MAX + index}});
                        let sent_ms = now_ms();
                        let answer = endpoint.try_post("/v1/queues/outage/messages", &body).await;
                        let answered_ms = now_ms();
                        let sent = match &answer {
                            Ok(reply) => Sent {
                                node,
                                sent_ms,
                                answered_ms,
                                status: Some(reply.status),
                                code: reply.error_code(),
                                retry_after: reply.retry_after.clone(),
                            },
                            Err(_) => Sent {
                                node,
                                sent_ms,
                                answered_ms,
                                status: None,
                                code: String::new(),
                                retry_after: None,
                            },
                        };
                        if sent.status == Some(200) {
                            lock(&stored).insert(id);
                        }
                        lock(&enqueues).push(sent);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                })
            })
            .collect();
        let handler = handler(|_| async {
            tokio::time::sleep(Duration::from_millis(rand::random_range(5..30))).await;
            Outcome::Ack
        });
        let consumers = start_consumers(
            nodes,
            2,
            |node| Consumer {
                slots: 4,
                ..Consumer::new(&nodes[node], node, "outage", Self::LEASE_MS, &journal)
            },
            &handler,
        );
        Outage {
            journal,
            stored,
            enqueues,
            stop_producers,
            producers,
            consumers,
        }
    }

    /// Lets the load run until every node has stored an enqueue again after `ended_at_ms`
    /// (at most 10 s) and a little longer, then stops the producers, waits until every stored
    /// message was acked, and stops the consumers.
    async fn finish(self, nodes: &[Endpoint], ended_at_ms: i64) -> OutageReport {
        let deadline = Instant::now() + Duration::from_secs(10);
        let recovered_after_ms = loop {
            let enqueues = lock(&self.enqueues).clone();
            let firsts: Vec<Option<i64>> = (0..nodes.len())
                .map(|node| {
                    enqueues
                        .iter()
                        .filter(|sent| {
                            sent.node == node
                                && sent.sent_ms > ended_at_ms
                                && sent.status == Some(200)
                        })
                        .map(|sent| sent.answered_ms - ended_at_ms)
                        .min()
                })
                .collect();
            if firsts.iter().all(Option::is_some) {
                break firsts.into_iter().flatten().collect::<Vec<i64>>();
            }
            assert!(
                Instant::now() < deadline,
                "10 s after the outage some node stores nothing (first 2xx by node, ms: {firsts:?}); e.g. {:?}",
                enqueues.iter().rev().take(3).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        self.stop_producers.store(true, Ordering::SeqCst);
        for producer in self.producers {
            tokio::time::timeout(Duration::from_secs(40), producer)
                .await
                .expect("a producer stops")
                .expect("a producer ran without panicking");
        }
        let stored = lock(&self.stored).clone();
        let confirmed = wait_until_all_acked(&self.journal, &nodes[0], "outage", &stored).await;
        stop_consumers(&self.journal, self.consumers).await;
        let deliveries = self.journal.deliveries();
        let leases = leases_by_message(&deliveries);
        assert_leases_follow_one_another(&leases, &confirmed);
        assert_queue_empty(nodes, "outage").await;
        let violations = lock(&self.journal.violations).clone();
        assert!(violations.is_empty(), "violations: {violations:#?}");
        OutageReport {
            journal: self.journal,
            enqueues: lock(&self.enqueues).clone(),
            stored: stored.len(),
            deliveries: deliveries.len(),
            confirmed: confirmed.len(),
            recovered_after_ms,
        }
    }
}

impl OutageReport {
    /// Every failed request (enqueue, receive, ack) was answered 503 `unavailable` with a
    /// `Retry-After`: no 500, no broken connection.
    fn assert_failures_are_503(&self) {
        let failed_enqueues = self
            .enqueues
            .iter()
            .filter(|sent| sent.status != Some(200))
            .map(|sent| {
                (
                    sent.status,
                    sent.code.clone(),
                    sent.retry_after.clone(),
                    format!("enqueue on node {}", sent.node + 1),
                )
            });
        let failed_others = self.journal.failures().into_iter().map(|failure| {
            (
                failure.status,
                failure.code,
                failure.retry_after,
                failure.what,
            )
        });
        let wrong: Vec<_> = failed_enqueues
            .chain(failed_others)
            .filter(|(status, code, retry_after, _)| {
                !(*status == Some(503) && code == "unavailable" && retry_after.is_some())
            })
            .collect();
        assert!(
            wrong.is_empty(),
            "{} failed requests were not 503 unavailable with Retry-After, e.g. {:#?}",
            wrong.len(),
            &wrong[..wrong.len().min(8)]
        );
    }

    /// [`Self::assert_failures_are_503`], and every enqueue and ack sent during the cut (a
    /// moment after it began, to let requests already past the database finish) was refused.
    fn assert_cut_answered_503(&self, cut_at_ms: i64, healed_at_ms: i64) {
        self.assert_failures_are_503();
        const SETTLE_MS: i64 = 100;
        let during = |sent_ms: i64, answered_ms: i64| {
            sent_ms > cut_at_ms + SETTLE_MS && answered_ms < healed_at_ms
        };
        let stored_during: Vec<&Sent> = self
            .enqueues
            .iter()
            .filter(|sent| during(sent.sent_ms, sent.answered_ms) && sent.status == Some(200))
            .collect();
        assert!(
            stored_during.is_empty(),
            "enqueues answered 2xx during the cut: {stored_during:?}"
        );
        let refused_during = self
            .enqueues
            .iter()
            .filter(|sent| during(sent.sent_ms, sent.answered_ms) && sent.status == Some(503))
            .count();
        assert!(refused_during > 0, "no enqueue was answered during the cut");
        let acked_during: Vec<Delivery> = self
            .journal
            .deliveries()
            .into_iter()
            .filter(|d| d.outcome == Outcome::Ack && d.settled_status == Some(200))
            .filter(|d| during(d.settle_sent_ms, d.settle_answered_ms))
            .collect();
        assert!(
            acked_during.is_empty(),
            "acks answered 2xx during the cut: {acked_during:?}"
        );
    }

    fn summary(&self) -> String {
        let refused = self
            .enqueues
            .iter()
            .filter(|sent| sent.status != Some(200))
            .count();
        format!(
            "{} enqueues ({refused} refused), {} stored and acked, {} deliveries, {} failed receives/acks, {} acks of unknown outcome found acked, every node storing again {:?} ms after the outage",
            self.enqueues.len(),
            self.stored,
            self.deliveries,
            self.journal.failures().len(),
            self.confirmed,
            self.recovered_after_ms
        )
    }
}

/// Polls every node's `/readyz` for `span`; by node, how long after the start it first
/// answered 503 (`None`: never).
async fn readiness_during(nodes: &[Endpoint], span: Duration) -> Vec<Option<Duration>> {
    let started = Instant::now();
    let mut first_503 = vec![None; nodes.len()];
    while started.elapsed() < span {
        for (node, endpoint) in nodes.iter().enumerate() {
            if first_503[node].is_none()
                && let Ok(reply) = endpoint
                    .try_request(reqwest::Method::GET, "/readyz", None)
                    .await
                && reply.status == 503
            {
                first_503[node] = Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    first_503
}

// ---- the journal: what consumers were given and how their answers went ----------------------

/// One lease a consumer was given, and how it ended.
#[derive(Debug, Clone)]
struct Delivery {
    /// Index of the node that answered the receive.
    node: usize,
    message_id: String,
    /// The idempotency key, when the message has one.
    id: Option<String>,
    key: Option<String>,
    /// `body.n`, the producer's number for the message.
    n: u64,
    lease_number: u32,
    receipt: String,
    /// Client clock (epoch ms) when the receive's answer arrived.
    received_at_ms: i64,
    /// The server's clock when it granted the lease: its deadline less the visibility timeout.
    claimed_at_ms: i64,
    /// `lease_expires_at`, epoch ms.
    deadline_ms: i64,
    /// What the consumer did with it.
    outcome: Outcome,
    /// The status of the ack or nack; `None` when none came (or none was sent).
    settled_status: Option<u16>,
    /// Client clock, epoch ms, when the ack or nack was sent and when its answer came.
    settle_sent_ms: i64,
    settle_answered_ms: i64,
}

/// What a handler decided for one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ack,
    /// Nack with this delay before the message is visible again.
    Nack {
        delay_ms: u64,
    },
    /// Leave the lease to run out (a consumer that went away).
    Abandon,
}

/// A request answered with something unexpected (`status`), or not at all.
#[derive(Debug, Clone)]
struct Failure {
    node: usize,
    status: Option<u16>,
    /// `error.code` of the answer, if any.
    code: String,
    retry_after: Option<String>,
    what: String,
}

/// Every delivery and every failed request of a scenario's consumers.
#[derive(Default)]
struct Journal {
    deliveries: Mutex<Vec<Delivery>>,
    /// Requests answered with anything unexpected, or not at all.
    failures: Mutex<Vec<Failure>>,
    /// Messages acked with a 2xx, by message id.
    acked: Mutex<HashSet<String>>,
    /// Violations a handler saw as it happened (two of one key at once, out of order).
    violations: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Journal {
    fn new() -> Arc<Journal> {
        Arc::new(Journal::default())
    }

    fn deliveries(&self) -> Vec<Delivery> {
        lock(&self.deliveries).clone()
    }

    fn acked_count(&self) -> usize {
        lock(&self.acked).len()
    }

    /// Journals a request answered with something other than what was expected.
    fn fail_reply(&self, node: usize, reply: &support::Reply) {
        lock(&self.failures).push(Failure {
            node,
            status: Some(reply.status),
            code: reply.error_code(),
            retry_after: reply.retry_after.clone(),
            what: format!("{}: {} {}", reply.request, reply.status, reply.text),
        });
    }

    /// Journals a request that got no answer.
    fn fail_transport(&self, node: usize, error: String) {
        lock(&self.failures).push(Failure {
            node,
            status: None,
            code: String::new(),
            retry_after: None,
            what: error,
        });
    }

    fn failures(&self) -> Vec<Failure> {
        lock(&self.failures).clone()
    }

    fn violation(&self, what: String) {
        lock(&self.violations).push(what);
    }

    /// Waits until `count` messages were acked, or panics after `timeout`.
    async fn wait_for_acks(&self, count: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.acked_count() < count {
            assert!(
                Instant::now() < deadline,
                "{} of {count} messages acked after {timeout:?}; failures: {:?}",
                self.acked_count(),
                lock(&self.failures)
                    .iter()
                    .take(10)
                    .map(|failure| &failure.what)
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Asserts that no request failed and no handler saw a violation, except requests to the
    /// nodes in `allowed` (a node that was killed).
    fn assert_no_failures(&self, allowed: &[usize]) {
        let failures: Vec<String> = lock(&self.failures)
            .iter()
            .filter(|failure| !allowed.contains(&failure.node))
            .map(|failure| failure.what.clone())
            .collect();
        assert!(failures.is_empty(), "failed requests: {failures:#?}");
        let violations = lock(&self.violations).clone();
        assert!(violations.is_empty(), "violations: {violations:#?}");
    }
}

type Handler = Arc<dyn Fn(Delivery) -> Pin<Box<dyn Future<Output = Outcome> + Send>> + Send + Sync>;

/// A handler from an async closure over the delivery.
fn handler<F, Fut>(handle: F) -> Handler
where
    F: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    Arc::new(move |delivery| Box::pin(handle(delivery)))
}

/// A consumer on one node: receives up to `slots` messages at once, hands each to the handler
/// as it arrives and acks or nacks it as the handler says, journalling every lease.
struct Consumer {
    node: usize,
    endpoint: Endpoint,
    queue: String,
    slots: usize,
    /// The queue's visibility timeout: a lease's deadline less this is when it was granted.
    lease_ms: i64,
    /// `wait_ms` of each receive.
    wait_ms: u64,
    /// Stop at the first request that gets no answer (a consumer beside a node that died),
    /// leaving its leases to run out.
    quit_when_node_gone: bool,
    journal: Arc<Journal>,
}

impl Consumer {
    fn new(
        endpoint: &Endpoint,
        node: usize,
        queue: &str,
        lease_ms: i64,
        journal: &Arc<Journal>,
    ) -> Self {
        Consumer {
            node,
            endpoint: endpoint.clone(),
            queue: queue.to_owned(),
            slots: 1,
            lease_ms,
            wait_ms: 500,
            quit_when_node_gone: false,
            journal: Arc::clone(journal),
        }
    }

    /// Runs until the journal says stop (or, with `quit_when_node_gone`, the node is gone),
    /// then waits for its handlers to finish.
    async fn run(self, handler: Handler) {
        let consumer = Arc::new(self);
        let slots = Arc::new(Semaphore::new(consumer.slots));
        let mut gone = false;
        // Bounded by the journal's stop, which every scenario sets before its deadline ends.
        while !consumer.journal.stop.load(Ordering::SeqCst) && !gone {
            let mut permits = vec![
                Arc::clone(&slots)
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed"),
            ];
            while let Ok(permit) = Arc::clone(&slots).try_acquire_owned() {
                permits.push(permit);
            }
            let path = format!("/v1/queues/{}/receive", consumer.queue);
            let request = json!({"max": permits.len(), "wait_ms": consumer.wait_ms});
            let reply = match consumer.endpoint.try_post(&path, &request).await {
                Ok(reply) => reply,
                Err(error) => {
                    consumer.journal.fail_transport(consumer.node, error);
                    gone = consumer.quit_when_node_gone;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if reply.status != 200 {
                consumer.journal.fail_reply(consumer.node, &reply);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let received_at_ms = now_ms();
            let messages = reply.json()["messages"]
                .as_array()
                .cloned()
                .unwrap_or_else(|| panic!("{}: no messages array: {}", reply.request, reply.text));
            assert!(
                messages.len() <= permits.len(),
                "more messages than asked for"
            );
            for (message, permit) in messages.into_iter().zip(permits.drain(..)) {
                let delivery = consumer.delivery(&message, received_at_ms);
                let (consumer, handler) = (Arc::clone(&consumer), Arc::clone(&handler));
                tokio::spawn(async move {
                    let outcome = handler(delivery.clone()).await;
                    // A settle without an answer is journalled; the next receive notices too.
                    let _ = consumer.settle(delivery, outcome).await;
                    drop(permit);
                });
            }
        }
        // The handlers under way finish (each holds a slot until it has settled).
        let all = u32::try_from(consumer.slots).expect("few slots");
        let finished = tokio::time::timeout(Duration::from_secs(10), slots.acquire_many(all)).await;
        assert!(
            finished.is_ok(),
            "handlers still running 10 s after the stop"
        );
    }

    fn delivery(&self, message: &Value, received_at_ms: i64) -> Delivery {
        let receipt = message["receipt"].as_str().expect("a receipt").to_owned();
        let lease_number = Receipt::parse(&receipt)
            .unwrap_or_else(|| panic!("not a receipt: {receipt}"))
            .lease_number;
        let deadline_ms = time(&message["lease_expires_at"]);
        Delivery {
            node: self.node,
            message_id: message["message_id"].as_str().expect("an id").to_owned(),
            id: message["id"].as_str().map(str::to_owned),
            key: message["key"].as_str().map(str::to_owned),
            n: message["body"]["n"]
                .as_u64()
                .unwrap_or_else(|| panic!("no n in {message}")),
            lease_number,
            receipt,
            received_at_ms,
            claimed_at_ms: deadline_ms - self.lease_ms,
            deadline_ms,
            outcome: Outcome::Abandon,
            settled_status: None,
            settle_sent_ms: 0,
            settle_answered_ms: 0,
        }
    }

    /// Sends the handler's outcome and journals the delivery; `Err` when no answer came.
    async fn settle(&self, mut delivery: Delivery, outcome: Outcome) -> Result<(), ()> {
        delivery.outcome = outcome;
        let (path, body) = match outcome {
            Outcome::Ack => (
                format!("/v1/queues/{}/ack", self.queue),
                json!({"receipt": delivery.receipt}),
            ),
            Outcome::Nack { delay_ms } => (
                format!("/v1/queues/{}/nack", self.queue),
                json!({"receipt": delivery.receipt, "error": "nacked by the test", "delay_ms": delay_ms}),
            ),
            Outcome::Abandon => {
                lock(&self.journal.deliveries).push(delivery);
                return Ok(());
            }
        };
        delivery.settle_sent_ms = now_ms();
        let answer = self.endpoint.try_post(&path, &body).await;
        delivery.settle_answered_ms = now_ms();
        let result = match answer {
            Ok(reply) => {
                delivery.settled_status = Some(reply.status);
                let stale = reply.status == 409 && reply.error_code() == "stale_receipt";
                if reply.status == 200 && outcome == Outcome::Ack {
                    lock(&self.journal.acked).insert(delivery.message_id.clone());
                } else if reply.status != 200 && !stale {
                    self.journal.fail_reply(self.node, &reply);
                }
                Ok(())
            }
            Err(error) => {
                self.journal.fail_transport(self.node, error);
                Err(())
            }
        };
        lock(&self.journal.deliveries).push(delivery);
        result
    }
}

/// Starts `per_node` consumers on every node, made by `make(node index)`.
fn start_consumers(
    nodes: &[Endpoint],
    per_node: usize,
    make: impl Fn(usize) -> Consumer,
    handler: &Handler,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..nodes.len())
        .flat_map(|node| (0..per_node).map(move |_| node))
        .map(|node| tokio::spawn(make(node).run(Arc::clone(handler))))
        .collect()
}

/// Tells the consumers to stop and waits for them (their handlers included).
async fn stop_consumers(journal: &Journal, consumers: Vec<tokio::task::JoinHandle<()>>) {
    journal.stop.store(true, Ordering::SeqCst);
    for consumer in consumers {
        tokio::time::timeout(Duration::from_secs(20), consumer)
            .await
            .expect("a consumer stops within 20 s")
            .expect("a consumer ran without panicking");
    }
}

/// The journal's leases by message id, each message's in lease order.
fn leases_by_message(deliveries: &[Delivery]) -> BTreeMap<String, Vec<Delivery>> {
    let mut leases: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    for delivery in deliveries {
        leases
            .entry(delivery.message_id.clone())
            .or_default()
            .push(delivery.clone());
    }
    for leases in leases.values_mut() {
        leases.sort_by_key(|delivery| delivery.lease_number);
    }
    leases
}

/// For every message: no two deliveries share a lease number; a lease reaches its consumer
/// only after the deadline of the one before it, and ends after it, so no two consumers held
/// it at once; a 2xx ack is the last lease of its message, so nothing acked was delivered
/// again; and the last lease was acked with a 2xx (or, for the messages of `acked_unanswered`,
/// acked by a request whose answer was lost, as a lookup showed).
///
/// Returns the leases granted by a clock behind the earlier lease's deadline, and by how much
/// (ms): a claim's `now` is read before the claim waits for a connection and the CPU, so a
/// claim of one node can lease a message whose earlier lease another node's later claim has
/// expired meanwhile, with a deadline counted from its older `now` (a lease that much shorter;
/// docs/design/postgres-store.md §4.5 says the same of clock skew between nodes).
fn assert_leases_follow_one_another(
    leases: &BTreeMap<String, Vec<Delivery>>,
    acked_unanswered: &HashSet<String>,
) -> Vec<i64> {
    let mut granted_behind = Vec::new();
    for (message, leases) in leases {
        for pair in leases.windows(2) {
            let (earlier, later) = (&pair[0], &pair[1]);
            assert!(
                earlier.lease_number < later.lease_number,
                "{message}: lease {} was given to two consumers",
                earlier.lease_number
            );
            assert_ne!(
                (earlier.outcome, earlier.settled_status),
                (Outcome::Ack, Some(200)),
                "{message}: acked (lease {}) and delivered again (lease {})",
                earlier.lease_number,
                later.lease_number
            );
            assert!(
                later.received_at_ms >= earlier.deadline_ms
                    && later.deadline_ms > earlier.deadline_ms,
                "{message}: lease {} (granted at {}, received {}, deadline {}) overlaps lease {}, which ran out at {}",
                later.lease_number,
                later.claimed_at_ms,
                later.received_at_ms,
                later.deadline_ms,
                earlier.lease_number,
                earlier.deadline_ms
            );
            if later.claimed_at_ms < earlier.deadline_ms {
                granted_behind.push(earlier.deadline_ms - later.claimed_at_ms);
            }
        }
        let last = leases.last().expect("at least one lease");
        if acked_unanswered.contains(message) {
            continue;
        }
        assert_eq!(
            (last.outcome, last.settled_status),
            (Outcome::Ack, Some(200)),
            "{message}: its last lease ({}) was not acked",
            last.lease_number
        );
    }
    granted_behind
}

// ---- requests ---------------------------------------------------------------------------------

/// Enqueues messages `{"n": n}` for every `n` of `numbers`, in batches of `batch`, the batches
/// spread over the nodes in turn.
async fn enqueue_numbered(
    nodes: &[Endpoint],
    queue: &str,
    numbers: std::ops::Range<u64>,
    batch: usize,
) {
    let numbers: Vec<u64> = numbers.collect();
    for (index, chunk) in numbers.chunks(batch).enumerate() {
        let messages: Vec<Value> = chunk.iter().map(|n| json!({"body": {"n": n}})).collect();
        nodes[index % nodes.len()]
            .post(
                &format!("/v1/queues/{queue}/messages"),
                &json!({ "messages": messages }),
            )
            .await;
    }
}

/// Asserts every node reports the queue empty: nothing ready, delayed or in flight.
async fn assert_queue_empty(nodes: &[Endpoint], queue: &str) {
    for node in nodes {
        let stats = node.get(&format!("/v1/queues/{queue}/stats")).await;
        assert_eq!(
            (&stats["ready"], &stats["delayed"], &stats["in_flight"]),
            (&json!(0), &json!(0), &json!(0)),
            "{}: {queue} is not empty: {stats}",
            node.url()
        );
    }
}

// ---- small things -----------------------------------------------------------------------------

/// Runs a scenario with a bound on its whole time.
async fn within(bound: Duration, scenario: impl Future<Output = ()>) {
    tokio::time::timeout(bound, scenario)
        .await
        .unwrap_or_else(|_| panic!("the scenario ran over its {bound:?}"));
}

/// The system clock in epoch ms (the nodes run on this machine, so it is theirs too).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// An RFC 3339 time of an answer, in epoch ms.
fn time(value: &Value) -> i64 {
    value
        .as_str()
        .and_then(sluice_wire::parse_rfc3339)
        .unwrap_or_else(|| panic!("not an RFC 3339 time: {value}"))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
