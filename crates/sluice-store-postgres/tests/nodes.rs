//! Two stores on one schema, as two `sluice serve` nodes on one database: what the conformance
//! suite (one store per case) cannot show. A receipt works on whichever node it is brought to
//! and a stale one is refused by every node; one ordering key is never in flight twice, whatever
//! node claims; a queue's `max_in_flight` holds for the nodes together; an enqueue on one node
//! wakes a waiter on the other within a second (docs/design/postgres-store.md §2.4, §2.5, §3.1).

use crate::support;
use sluice_core::store::prelude::*;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_core::message::{MessageState, NewMessage, Payload, Receipt};
use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::LeaseError;
use sluice_core::store::{
    AckParams, Claim, ClaimParams, EnqueueParams, ExtendParams, MessageGetParams, MessageRef,
    NackParams, QueuePutParams, Store, StoreError,
};
use sluice_store_postgres::PgStore;
use uuid::Uuid;

const T0: i64 = 1_700_000_000_000;

/// Two nodes on a fresh schema, and what drops it after the test.
struct Cluster {
    a: Arc<PgStore>,
    b: Arc<PgStore>,
    url: String,
    schema: String,
}

impl Cluster {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let schema = support::fresh_schema();
        let open = || async {
            Arc::new(
                PgStore::open(support::options(&url, &schema))
                    .await
                    .expect("the store opens"),
            )
        };
        let a = open().await;
        let b = open().await;
        Some(Self { a, b, url, schema })
    }

    async fn queue(&self, name: &str, edit: impl FnOnce(&mut QueueConfig)) {
        let mut config = QueueConfig::defaults_for(name);
        edit(&mut config);
        self.a
            .queue_put(QueuePutParams {
                name: name.into(),
                config,
                now_ms: T0,
            })
            .await
            .expect("queue put");
    }

    async fn drop(self) {
        self.a.close().await.unwrap();
        self.b.close().await.unwrap();
        support::drop_schema(self.url, self.schema).await;
    }
}

fn message(body: &str, key: Option<&str>) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: body.as_bytes().to_vec(),
            ..Payload::default()
        }),
        key: key.map(str::to_owned),
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

async fn send(store: &PgStore, queue: &str, messages: Vec<NewMessage>) -> Vec<Uuid> {
    store
        .message_enqueue(EnqueueParams {
            queue: queue.into(),
            messages,
            now_ms: T0,
        })
        .await
        .expect("enqueue")
        .iter()
        .map(|enqueued| enqueued.message_id)
        .collect()
}

async fn claim(store: &PgStore, queue: &str, max: usize, lease_ms: i64, now_ms: i64) -> Claim {
    store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: queue.into(),
            max,
            lease_ms: Some(lease_ms),
            now_ms,
        })
        .await
        .expect("claim")
}

async fn ack(
    store: &PgStore,
    queue: &str,
    receipt: Receipt,
    now_ms: i64,
) -> Result<(), LeaseError> {
    store
        .message_ack(AckParams {
            queue: queue.into(),
            receipts: vec![receipt],
            result: None,
            delivery: None,
            now_ms,
        })
        .await
        .expect("ack")
        .remove(0)
}

/// A lease taken on node A is extended and acked through node B; once B hands the message out
/// again, A's old receipt is refused by both nodes, for ack, nack and extend alike, while the
/// new one acks on A.
#[tokio::test]
async fn a_receipt_works_on_any_node_and_a_stale_one_on_none() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let (a, b) = (&cluster.a, &cluster.b);
    cluster.queue("q", |_| {}).await;
    send(a, "q", vec![message("one", None), message("two", None)]).await;
    let first = claim(a, "q", 2, 1_000, T0).await.messages;
    assert_eq!(first.len(), 2);

    let extended = b
        .message_extend(ExtendParams {
            queue: "q".into(),
            receipt: first[0].receipt,
            timeout_ms: 5_000,
            now_ms: T0 + 500,
        })
        .await
        .expect("A's receipt extends on B");
    assert_eq!(extended, T0 + 5_500);
    assert_eq!(ack(b, "q", first[0].receipt, T0 + 600).await, Ok(()));

    // The second lease runs out; B hands the message out again.
    let again = claim(b, "q", 2, 1_000, T0 + 1_000).await.messages;
    assert_eq!(again.len(), 1);
    let (old, new) = (first[1].receipt, again[0].receipt);
    assert_eq!(old.message_id, new.message_id);
    for node in [a, b] {
        assert_eq!(
            ack(node, "q", old, T0 + 1_100).await,
            Err(LeaseError::Stale)
        );
        let nacked = node
            .message_nack(NackParams {
                queue: "q".into(),
                receipt: old,
                error: Some("late".into()),
                delay_ms: None,
                permanent: false,
                delivery: None,
                now_ms: T0 + 1_100,
            })
            .await;
        assert!(
            matches!(nacked, Err(StoreError::Lease(LeaseError::Stale))),
            "{nacked:?}"
        );
        let extended = node
            .message_extend(ExtendParams {
                queue: "q".into(),
                receipt: old,
                timeout_ms: 5_000,
                now_ms: T0 + 1_100,
            })
            .await;
        assert!(
            matches!(extended, Err(StoreError::Lease(LeaseError::Stale))),
            "{extended:?}"
        );
    }
    assert_eq!(ack(a, "q", new, T0 + 1_200).await, Ok(()));
    let status = b
        .message_get(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(new.message_id),
            now_ms: T0 + 1_200,
        })
        .await
        .unwrap()
        .expect("known");
    assert_eq!((status.state, status.attempts), (MessageState::Acked, 2));
    cluster.drop().await;
}

/// Claimers on both nodes work through a per-key queue at once: no key is ever held by two
/// leases, every key's messages are acked in enqueue order, and every message exactly once.
/// A claimer drops its key from the shared in-flight set before it acks, so a later claim of
/// that key (possible only after the ack commits) never finds it still there by accident.
#[tokio::test]
async fn one_key_is_never_in_flight_twice_across_nodes() {
    const KEYS: usize = 6;
    const PER_KEY: usize = 15;
    const CLAIMERS_PER_NODE: usize = 2;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let mut messages = Vec::new();
    for n in 0..PER_KEY {
        for key in 0..KEYS {
            messages.push(message(&format!("{key}.{n}"), Some(&format!("k{key}"))));
        }
    }
    send(&cluster.a, "q", messages).await;

    let in_flight: Arc<Mutex<HashSet<String>>> = Arc::default();
    let next_of_key: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut claimers = Vec::new();
    for node in [&cluster.a, &cluster.b] {
        for _ in 0..CLAIMERS_PER_NODE {
            let (store, in_flight, next_of_key, done) = (
                node.clone(),
                in_flight.clone(),
                next_of_key.clone(),
                done.clone(),
            );
            claimers.push(tokio::spawn(async move {
                while done.load(std::sync::atomic::Ordering::SeqCst) < KEYS * PER_KEY {
                    assert!(Instant::now() < deadline, "the queue did not drain in time");
                    let claimed = claim(&store, "q", 4, 600_000, T0).await.messages;
                    for message in &claimed {
                        let key = message.key.clone().expect("keyed");
                        assert!(
                            in_flight.lock().insert(key.clone()),
                            "key {key} is in flight twice"
                        );
                    }
                    for message in &claimed {
                        let key = message.key.clone().unwrap();
                        let body = String::from_utf8(message.payload.body_bytes.clone()).unwrap();
                        let n: usize = body.split('.').nth(1).unwrap().parse().unwrap();
                        {
                            let mut next = next_of_key.lock();
                            let expected = next.entry(key.clone()).or_default();
                            assert_eq!(n, *expected, "key {key} out of order");
                            *expected += 1;
                        }
                        in_flight.lock().remove(&key);
                        assert_eq!(ack(&store, "q", message.receipt, T0).await, Ok(()));
                        done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    if claimed.is_empty() {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
    }
    for claimer in claimers {
        claimer.await.expect("a claimer failed");
    }
    assert_eq!(
        done.load(std::sync::atomic::Ordering::SeqCst),
        KEYS * PER_KEY
    );
    let depth = cluster.b.queue_get("q", T0).await.unwrap().depth;
    assert_eq!((depth.ready, depth.in_flight), (0, 0));
    cluster.drop().await;
}

/// `max_in_flight` is the queue's, not a node's: claims on both nodes at once lease no more
/// than the limit in all, and an ack on one node frees a place for the other.
#[tokio::test]
async fn max_in_flight_holds_for_the_nodes_together() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let (a, b) = (&cluster.a, &cluster.b);
    cluster.queue("q", |c| c.max_in_flight = Some(3)).await;
    let bodies: Vec<NewMessage> = (0..10).map(|n| message(&n.to_string(), None)).collect();
    send(a, "q", bodies).await;
    let (on_a, on_b) = tokio::join!(claim(a, "q", 10, 60_000, T0), claim(b, "q", 10, 60_000, T0));
    assert_eq!(on_a.messages.len() + on_b.messages.len(), 3);
    assert!(claim(b, "q", 10, 60_000, T0).await.messages.is_empty());
    let held = on_a.messages.iter().chain(&on_b.messages).next().unwrap();
    assert_eq!(ack(a, "q", held.receipt, T0).await, Ok(()));
    assert_eq!(claim(b, "q", 10, 60_000, T0).await.messages.len(), 1);
    cluster.drop().await;
}

/// A waiter on node B is woken by an enqueue on node A through `<schema>.wake`, within a
/// second, and not before: nothing wakes it while nothing is enqueued.
#[tokio::test]
async fn an_enqueue_on_one_node_wakes_a_waiter_on_the_other_within_a_second() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |_| {}).await;
    // B's listener is connected once its definitions counter has moved.
    let mut connected = cluster.b.definitions_changed();
    tokio::time::timeout(
        Duration::from_secs(10),
        connected.wait_for(|count| *count > 0),
    )
    .await
    .expect("B's listener connects")
    .unwrap();
    let signal = cluster.b.notifier().queue("q");
    let mut woken = std::pin::pin!(signal.notified());
    woken.as_mut().enable();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), woken.as_mut())
            .await
            .is_err(),
        "woken with nothing enqueued"
    );
    let sent = Instant::now();
    send(&cluster.a, "q", vec![message("hello", None)]).await;
    tokio::time::timeout(Duration::from_secs(1), woken)
        .await
        .expect("B's waiter is woken within a second of A's enqueue");
    eprintln!(
        "woken on B {:?} after the enqueue on A began",
        sent.elapsed()
    );
    assert_eq!(claim(&cluster.b, "q", 1, 1_000, T0).await.messages.len(), 1);
    cluster.drop().await;
}

/// An idempotency key enqueued again on one node while its message is acked on the other, in
/// a per-key queue, in a batch with a new message of the same lane: both succeed, and the key
/// answers with the first message. The race is
/// made to happen: a session of the test holds the lane's row, the ack queues behind it first,
/// then the enqueue; when the session lets go, the ack goes on and reaches the key's memo. An
/// enqueue that took the key before the lane (to add its new message to it) would now hold
/// what the ack needs while waiting for the lane the ack holds: a deadlock, which PostgreSQL ends by failing one of them.
#[tokio::test]
async fn an_enqueue_of_a_key_beside_the_ack_of_its_message_never_deadlocks() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster
        .queue("q", |c| {
            c.ordering = Ordering::PerKey;
            c.dedup_window_ms = 3_600_000;
        })
        .await;
    let keyed = || NewMessage {
        idempotency_key: Some("k".into()),
        ..message("job", Some("lane"))
    };
    let [first] = send(&cluster.a, "q", vec![keyed()]).await[..] else {
        unreachable!()
    };
    let leased = claim(&cluster.b, "q", 1, 60_000, T0).await.messages;
    assert_eq!(leased.len(), 1);

    let mut session = support::connect(&cluster.url).await.unwrap();
    let holder = session.transaction().await.unwrap();
    holder
        .execute(
            &format!("SELECT 1 FROM \"{}\".lanes FOR UPDATE", cluster.schema),
            &[],
        )
        .await
        .unwrap();
    let holder_pid: i32 = holder
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let waiting = |count: i64| {
        let url = cluster.url.clone();
        async move {
            let watcher = support::connect(&url).await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let blocked: i64 = watcher
                    .query_one(
                        // Behind the holder, or behind one that waits for it.
                        "WITH RECURSIVE w(pid) AS ( \
                             SELECT pid FROM pg_stat_activity \
                             WHERE $1 = ANY(pg_blocking_pids(pid)) \
                             UNION \
                             SELECT a.pid FROM pg_stat_activity a \
                             JOIN w ON w.pid = ANY(pg_blocking_pids(a.pid))) \
                         SELECT count(*) FROM w",
                        &[&holder_pid],
                    )
                    .await
                    .unwrap()
                    .get(0);
                if blocked >= count {
                    return;
                }
                assert!(Instant::now() < deadline, "{count} waiters never queued");
                tokio::task::yield_now().await;
            }
        }
    };
    let store_b = cluster.b.clone();
    let receipt = leased[0].receipt;
    let acking = tokio::spawn(async move { ack(&store_b, "q", receipt, T0).await });
    waiting(1).await;
    let store_a = cluster.a.clone();
    let enqueueing = tokio::spawn(async move {
        store_a
            .message_enqueue(EnqueueParams {
                queue: "q".into(),
                messages: vec![keyed(), message("next", Some("lane"))],
                now_ms: T0,
            })
            .await
    });
    waiting(2).await;
    holder.commit().await.unwrap();
    assert_eq!(acking.await.unwrap(), Ok(()));
    let again = enqueueing
        .await
        .unwrap()
        .expect("the enqueue beside the ack");
    assert_eq!((again[0].message_id, again[0].created), (first, false));
    assert!(again[1].created);
    assert_eq!(
        bodies_of(&claim(&cluster.a, "q", 10, 60_000, T0).await),
        ["next"],
        "the lane moved on to the new message"
    );
    cluster.drop().await;
}

fn bodies_of(claim: &Claim) -> Vec<String> {
    claim
        .messages
        .iter()
        .map(|message| String::from_utf8_lossy(&message.payload.body_bytes).into_owned())
        .collect()
}

/// Enqueues and acks of many callers at once are committed in groups (§2.1): every caller's
/// message is stored and acked, in fewer commits than callers, and the groups' sizes add up to
/// the callers.
#[tokio::test]
async fn callers_at_once_share_commits() {
    const CALLERS: usize = 64;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |_| {}).await;
    let store = cluster.a.clone();
    let sent = futures_join_all((0..CALLERS).map(|n| {
        let store = store.clone();
        async move { send(&store, "q", vec![message(&n.to_string(), None)]).await }
    }))
    .await;
    assert_eq!(sent.iter().flatten().collect::<HashSet<_>>().len(), CALLERS);
    let claimed = claim(&store, "q", 100, 60_000, T0).await.messages;
    assert_eq!(claimed.len(), CALLERS);
    let acked = futures_join_all(claimed.iter().map(|message| {
        let store = store.clone();
        let receipt = message.receipt;
        async move { ack(&store, "q", receipt, T0).await }
    }))
    .await;
    assert!(acked.iter().all(Result::is_ok), "{acked:?}");
    let metrics = store.storage_metrics();
    let groups = metrics
        .histogram("sluice_storage_group_commit_operations")
        .expect("groups are measured");
    assert_eq!(groups.sum(), 2 * CALLERS as u64, "every batch once");
    assert!(
        groups.count() < 2 * CALLERS as u64,
        "{} commits for {} batches",
        groups.count(),
        2 * CALLERS
    );
    eprintln!("{} batches in {} groups", groups.sum(), groups.count());
    cluster.drop().await;
}

/// Runs the futures side by side on the runtime; their outputs in order.
async fn futures_join_all<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for task in tasks {
        outputs.push(task.await.expect("a caller panicked"));
    }
    outputs
}

/// A bounded queue admits exactly `max_depth` messages from many callers on both nodes at
/// once, whether their batches share a group or not: the rest are refused as full, and the
/// queue holds exactly its bound.
#[tokio::test]
async fn max_depth_holds_for_callers_on_both_nodes_at_once() {
    const CALLERS: usize = 40;
    const MAX_DEPTH: u64 = 15;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.max_depth = Some(MAX_DEPTH)).await;
    let answers = futures_join_all((0..CALLERS).map(|n| {
        let store = if n.is_multiple_of(2) {
            cluster.a.clone()
        } else {
            cluster.b.clone()
        };
        async move {
            store
                .message_enqueue(EnqueueParams {
                    queue: "q".into(),
                    messages: vec![message(&n.to_string(), None)],
                    now_ms: T0,
                })
                .await
        }
    }))
    .await;
    let stored = answers.iter().filter(|answer| answer.is_ok()).count();
    let full = answers
        .iter()
        .filter(|answer| matches!(answer, Err(StoreError::QueueFull { .. })))
        .count();
    assert_eq!(
        (stored, full),
        (MAX_DEPTH as usize, CALLERS - MAX_DEPTH as usize)
    );
    let depth = cluster.b.queue_get("q", T0).await.unwrap().depth;
    assert_eq!(depth.ready, MAX_DEPTH);
    cluster.drop().await;
}

/// One receipt acked by eight callers at once, on both nodes: exactly one ack succeeds and
/// the rest are stale, whether the acks share a group or not.
#[tokio::test]
async fn one_receipt_acked_by_many_callers_at_once_is_acked_once() {
    const CALLERS: usize = 8;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |_| {}).await;
    send(&cluster.a, "q", vec![message("once", None)]).await;
    let receipt = claim(&cluster.a, "q", 1, 60_000, T0).await.messages[0].receipt;
    let answers = futures_join_all((0..CALLERS).map(|n| {
        let store = if n.is_multiple_of(2) {
            cluster.a.clone()
        } else {
            cluster.b.clone()
        };
        async move { ack(&store, "q", receipt, T0).await }
    }))
    .await;
    assert_eq!(answers.iter().filter(|answer| answer.is_ok()).count(), 1);
    assert!(
        answers
            .iter()
            .all(|answer| matches!(answer, Ok(()) | Err(LeaseError::Stale))),
        "{answers:?}"
    );
    let mut acked = 0;
    for node in [&cluster.a, &cluster.b] {
        acked += node.queue_get("q", T0).await.unwrap().depth.counters.acked;
    }
    assert_eq!(acked, 1, "counted once");
    cluster.drop().await;
}
