//! Paging against a real SQLite file: a backlog past the head waits on disk, and every rule
//! holds as it is read back (order, priorities, delays, cancels, purges, `max_depth`,
//! retention, a reopen).

use std::sync::Arc;

use sluice_core::message::{BodyKind, MessageState, NewMessage, Payload};
use sluice_core::queue::QueueConfig;
use sluice_core::store::*;
use sluice_core::{Millis, Store};

use super::{SharedSqliteStore, SqliteOptions};

const T0: Millis = 1_700_000_000_000;
/// Ready messages of a queue and priority in memory in these tests.
const HEAD: usize = 3;

fn open(dir: &std::path::Path) -> SharedSqliteStore {
    let mut options = SqliteOptions::new(dir);
    options.durability = crate::Durability::Os;
    options.disk_reserve_bytes = 0;
    options.resident_messages = HEAD;
    SharedSqliteStore::open(options, T0).unwrap()
}

fn message(body: String, priority: i32, visible_at_ms: Millis) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: body.into_bytes(),
            body_kind: BodyKind::Bytes,
            headers: Default::default(),
        }),
        key: None,
        priority,
        visible_at_ms,
        dead_letter: None,
    }
}

async fn queue(store: &SharedSqliteStore, configure: impl FnOnce(&mut QueueConfig)) {
    let mut config = QueueConfig::defaults_for("q");
    configure(&mut config);
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config,
            now_ms: T0,
        })
        .await
        .unwrap();
}

/// Enqueues `bodies` one request each, as single-message producers do.
async fn enqueue(
    store: &SharedSqliteStore,
    bodies: &[(&str, i32)],
    now_ms: Millis,
) -> Vec<Enqueued> {
    let mut out = Vec::new();
    for &(body, priority) in bodies {
        out.extend(
            store
                .message_enqueue(EnqueueParams {
                    queue: "q".into(),
                    messages: vec![message(body.to_owned(), priority, now_ms)],
                    now_ms,
                })
                .await
                .unwrap(),
        );
    }
    out
}

/// Claims and acks until nothing is ready; returns the bodies in delivery order.
async fn drain(store: &SharedSqliteStore, max: usize, now_ms: Millis) -> Vec<String> {
    let mut bodies = Vec::new();
    loop {
        let claim = store
            .message_claim(ClaimParams {
                lane_runs: false,
                queue: "q".into(),
                max,
                lease_ms: Some(60_000),
                now_ms,
            })
            .await
            .unwrap();
        if claim.messages.is_empty() {
            return bodies;
        }
        check(store);
        for message in &claim.messages {
            bodies.push(String::from_utf8(message.payload.body_bytes.clone()).unwrap());
        }
        let acked = store
            .message_ack(AckParams {
                result: None,
                queue: "q".into(),
                receipts: claim.messages.iter().map(|m| m.receipt).collect(),
                delivery: None,
                now_ms,
            })
            .await
            .unwrap();
        assert!(acked.iter().all(Result::is_ok));
    }
}

fn check(store: &SharedSqliteStore) {
    store.0.index.lock().check_invariants().unwrap();
}

fn cold(store: &SharedSqliteStore) -> u64 {
    store.0.index.lock().cold_count("q")
}

async fn ready(store: &SharedSqliteStore) -> u64 {
    store.queue_get("q", T0).await.unwrap().depth.ready
}

fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:03}")).collect()
}

#[tokio::test]
async fn a_backlog_past_the_head_waits_on_disk_and_comes_back_in_order_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |_| {}).await;
    let bodies = numbered("m", 50);
    let sends: Vec<(&str, i32)> = bodies.iter().map(|b| (b.as_str(), 0)).collect();
    let enqueued = enqueue(&store, &sends, T0).await;
    assert_eq!(cold(&store), 47, "only the head is in memory");
    assert_eq!(
        ready(&store).await,
        50,
        "the depth counts what waits on disk"
    );
    assert_eq!(enqueued[49].position, 49, "positions count it too");
    check(&store);
    assert_eq!(
        drain(&store, 2, T0).await,
        bodies,
        "every message once, in order"
    );
    assert_eq!(cold(&store), 0);
    assert_eq!(ready(&store).await, 0);
}

#[tokio::test]
async fn a_higher_priority_goes_first_even_when_both_wait_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |_| {}).await;
    let low = numbered("low", 10);
    let high = numbered("high", 10);
    let mut sends: Vec<(&str, i32)> = low.iter().map(|b| (b.as_str(), 0)).collect();
    sends.extend(high.iter().map(|b| (b.as_str(), 5)));
    enqueue(&store, &sends, T0).await;
    assert_eq!(cold(&store), 14);
    let got = drain(&store, 4, T0).await;
    let mut want = high.clone();
    want.extend(low);
    assert_eq!(got, want);
}

#[tokio::test]
async fn a_delay_that_ends_does_not_overtake_older_messages_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |_| {}).await;
    let first = numbered("a", 6);
    let sends: Vec<(&str, i32)> = first.iter().map(|b| (b.as_str(), 0)).collect();
    enqueue(&store, &sends, T0).await;
    // A delayed message is always kept in memory, so its delay is seen to end.
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: vec![message("delayed".into(), 0, T0 + 1_000)],
            now_ms: T0,
        })
        .await
        .unwrap();
    let later = numbered("b", 4);
    let sends: Vec<(&str, i32)> = later.iter().map(|b| (b.as_str(), 0)).collect();
    enqueue(&store, &sends, T0).await;
    assert_eq!(cold(&store), 7);
    // Before the delay ends it is not delivered; after, it comes after the older messages
    // that were on disk, and before the later ones.
    let got = drain(&store, 3, T0 + 2_000).await;
    let mut want = first;
    want.push("delayed".into());
    want.extend(later);
    assert_eq!(got, want);
}

#[tokio::test]
async fn cancel_purge_and_max_depth_see_messages_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |config| config.max_depth = Some(12)).await;
    let bodies = numbered("m", 12);
    let sends: Vec<(&str, i32)> = bodies.iter().map(|b| (b.as_str(), 0)).collect();
    let enqueued = enqueue(&store, &sends, T0).await;
    let refused = store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: vec![message("over".into(), 0, T0)],
            now_ms: T0,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::QueueFull { .. })),
        "max_depth counts messages on disk: {refused:?}"
    );
    // Cancel one that waits on disk.
    let on_disk = enqueued[8].message_id;
    let outcome = store
        .message_cancel(
            MessageGetParams {
                queue: "q".into(),
                by: MessageRef::Id(on_disk),
                now_ms: T0,
            },
            Some("not needed".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        CancelOutcome::Cancelled {
            message_id: on_disk
        }
    );
    assert_eq!(ready(&store).await, 11);
    check(&store);
    let status = store
        .message_get(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(enqueued[10].message_id),
            now_ms: T0,
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status.state,
        MessageState::Ready,
        "a message on disk is found by id"
    );
    // Two delivered, the rest purged: those in memory and those on disk.
    let claim = store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "q".into(),
            max: 2,
            lease_ms: Some(60_000),
            now_ms: T0,
        })
        .await
        .unwrap();
    assert_eq!(claim.messages.len(), 2);
    assert_eq!(
        store
            .queue_purge("q", PurgeScope::Waiting, T0)
            .await
            .unwrap(),
        9
    );
    assert_eq!(cold(&store), 0);
    assert_eq!(ready(&store).await, 0);
    let depth = store.queue_get("q", T0).await.unwrap().depth;
    assert_eq!(depth.in_flight, 2, "a purge leaves messages in flight");
    assert_eq!(drain(&store, 10, T0).await, Vec::<String>::new());
    store.close().await.unwrap();
    // Nothing purged or cancelled comes back.
    let store = open(dir.path());
    let back = drain(&store, 10, T0 + 120_000).await;
    assert_eq!(
        back,
        vec![bodies[0].clone(), bodies[1].clone()],
        "only the two leases"
    );
}

#[tokio::test]
async fn a_reopen_loads_the_head_and_counts_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |_| {}).await;
    let bodies = numbered("m", 40);
    let sends: Vec<(&str, i32)> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| (b.as_str(), (i % 2) as i32))
        .collect();
    enqueue(&store, &sends, T0).await;
    store.close().await.unwrap();
    let store = open(dir.path());
    assert_eq!(cold(&store), 34, "three of each priority in memory");
    assert_eq!(ready(&store).await, 40);
    check(&store);
    let got = drain(&store, 5, T0).await;
    let odd: Vec<String> = bodies.iter().skip(1).step_by(2).cloned().collect();
    let even: Vec<String> = bodies.iter().step_by(2).cloned().collect();
    assert_eq!(got, [odd, even].concat());
}

#[tokio::test]
async fn retention_reaches_messages_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |config| config.max_age_ms = 1_000).await;
    let bodies = numbered("m", 20);
    let sends: Vec<(&str, i32)> = bodies.iter().map(|b| (b.as_str(), 0)).collect();
    enqueue(&store, &sends, T0).await;
    for tick in 0..20 {
        store.maintain(T0 + 2_000 + tick).await.unwrap();
        if ready(&store).await == 0 {
            break;
        }
    }
    assert_eq!(ready(&store).await, 0, "each upkeep pages in what expired");
    assert_eq!(cold(&store), 0);
    assert_eq!(drain(&store, 10, T0 + 3_000).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_deleted_queue_takes_what_waits_on_disk_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    queue(&store, |_| {}).await;
    let bodies = numbered("old", 20);
    let sends: Vec<(&str, i32)> = bodies.iter().map(|b| (b.as_str(), 0)).collect();
    enqueue(&store, &sends, T0).await;
    assert_eq!(store.queue_delete("q").await.unwrap(), 20);
    queue(&store, |_| {}).await;
    enqueue(&store, &[("new", 0)], T0).await;
    assert_eq!(ready(&store).await, 1);
    store.close().await.unwrap();
    let store = open(dir.path());
    assert_eq!(drain(&store, 10, T0).await, ["new"], "no old row came back");
}

/// Enqueues of three priorities and claims of random sizes, interleaved at random (seeded),
/// with a head of three: every claim hands out exactly what dispatch order says, whatever is
/// on disk at that moment: the oldest message of the highest priority waiting, each once.
#[tokio::test]
async fn random_interleavings_deliver_in_dispatch_order() {
    use rand::{Rng, SeedableRng};
    for seed in 0..8u64 {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        queue(&store, |_| {}).await;
        // What waits, per priority, oldest first: the model of dispatch order.
        let mut waiting: [std::collections::VecDeque<String>; 3] = Default::default();
        let (mut sent, mut delivered) = (0usize, 0usize);
        while sent < 300 || waiting.iter().any(|w| !w.is_empty()) {
            if sent < 300 && rng.random_bool(0.6) {
                let priority = rng.random_range(0..3usize);
                let body = format!("p{priority}-{sent:03}");
                enqueue(&store, &[(body.as_str(), priority as i32)], T0).await;
                waiting[priority].push_back(body);
                sent += 1;
                continue;
            }
            let max = rng.random_range(1..6usize);
            let claim = store
                .message_claim(ClaimParams {
                    lane_runs: false,
                    queue: "q".into(),
                    max,
                    lease_ms: Some(60_000),
                    now_ms: T0,
                })
                .await
                .unwrap();
            let expected: usize = waiting.iter().map(|w| w.len()).sum::<usize>().min(max);
            assert_eq!(claim.messages.len(), expected, "seed {seed}: a short claim");
            for message in &claim.messages {
                let body = String::from_utf8(message.payload.body_bytes.clone()).unwrap();
                let next = waiting
                    .iter_mut()
                    .rev()
                    .find(|w| !w.is_empty())
                    .and_then(|w| w.pop_front());
                assert_eq!(Some(body), next, "seed {seed}: out of dispatch order");
                delivered += 1;
            }
            let acked = store
                .message_ack(AckParams {
                    result: None,
                    queue: "q".into(),
                    receipts: claim.messages.iter().map(|m| m.receipt).collect(),
                    delivery: None,
                    now_ms: T0,
                })
                .await
                .unwrap();
            assert!(acked.iter().all(Result::is_ok));
            check(&store);
        }
        assert_eq!(delivered, 300, "seed {seed}");
        assert_eq!(cold(&store), 0, "seed {seed}");
    }
}
