//! The writer's inbox is bounded: with the writer stalled, enqueues beyond
//! `writer_queue_bytes` are refused at once (never queued, never waiting), acks still go in, and
//! once the writer catches up everything accepted is stored and enqueues are taken again.
//!
//! The writer is stalled the honest way: another connection holds the database's write lock, as
//! a backup tool or an operator's `sqlite3` shell can. The writer's `BEGIN IMMEDIATE` waits for
//! it (and retries), exactly as in production.

use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use sluice_core::message::{BodyKind, NewMessage, Payload};
use sluice_core::queue::QueueConfig;
use sluice_core::store::*;
use sluice_core::{Millis, Store};
use sluice_store_sqlite::{SharedSqliteStore, SqliteOptions};

const T0: Millis = 1_700_000_000_000;
/// The bound under test: room for a 40 KiB and a 16 KiB batch, not for a third.
const BOUND: u64 = 64 * 1024;

fn message(body_bytes: usize) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: vec![b'x'; body_bytes],
            body_kind: BodyKind::Bytes,
            headers: Default::default(),
        }),
        key: None,
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

fn enqueue(
    store: &SharedSqliteStore,
    body_bytes: usize,
) -> impl Future<Output = StoreResult<Vec<Enqueued>>> + Send + 'static {
    let store = store.clone();
    async move {
        store
            .message_enqueue(EnqueueParams {
                queue: "q".into(),
                messages: vec![message(body_bytes)],
                now_ms: T0,
            })
            .await
    }
}

fn inbox_bytes(store: &SharedSqliteStore) -> u64 {
    store
        .storage_metrics()
        .value("sluice_storage_writer_queue_bytes")
        .expect("measured") as u64
}

fn inbox_ops(store: &SharedSqliteStore) -> u64 {
    store
        .storage_metrics()
        .value("sluice_storage_writer_queue_operations")
        .expect("measured") as u64
}

/// Waits (at most 10 s) for `condition`.
async fn until(what: &str, condition: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Takes the database's write lock from another connection, stalling the store's writer until
/// the returned connection rolls back.
fn hold_write_lock(store: &SharedSqliteStore) -> Connection {
    let conn = Connection::open(store.0.db_path()).unwrap();
    conn.pragma_update(None, "busy_timeout", 10_000).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueues_beyond_the_bound_are_refused_until_the_writer_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SqliteOptions::new(dir.path());
    options.writer_queue_bytes = BOUND;
    options.disk_reserve_bytes = 0;
    let store = SharedSqliteStore::open(options, T0).unwrap();
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config: QueueConfig::defaults_for("q"),
            now_ms: T0,
        })
        .await
        .unwrap();
    // A lease to ack while the writer is stalled.
    enqueue(&store, 10).await.unwrap();
    let leased = store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "q".into(),
            max: 1,
            lease_ms: Some(60_000),
            now_ms: T0,
        })
        .await
        .unwrap()
        .messages
        .pop()
        .expect("a lease");
    assert_eq!(inbox_bytes(&store), 0);

    let lock = hold_write_lock(&store);
    let first = tokio::spawn(enqueue(&store, 40 * 1024));
    until("the first batch is charged", || {
        inbox_bytes(&store) > 40 * 1024
    })
    .await;
    let charged = inbox_bytes(&store);
    let second = tokio::spawn(enqueue(&store, 16 * 1024));
    until("the second batch is charged", || {
        inbox_bytes(&store) > charged
    })
    .await;
    let charged = inbox_bytes(&store);
    assert!(charged <= BOUND, "{charged}");

    // Full: a third batch is refused at once, with nothing stored or charged, however often.
    for _ in 0..100 {
        let refused = tokio::time::timeout(Duration::from_secs(1), enqueue(&store, 16 * 1024))
            .await
            .expect("a refusal does not wait for the writer")
            .expect_err("the inbox is full");
        match refused {
            StoreError::Overloaded {
                pending_bytes,
                max_bytes,
                retry_after_s,
            } => {
                assert_eq!(
                    (pending_bytes, max_bytes, retry_after_s),
                    (charged, BOUND, 1)
                );
            }
            other => panic!("expected Overloaded, got {other:?}"),
        }
        assert_eq!(inbox_bytes(&store), charged, "memory stays bounded");
    }

    // An ack is never refused: the index already let the message go, so it waits its turn.
    let ack = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .message_ack(AckParams {
                    queue: "q".into(),
                    receipts: vec![leased.receipt],
                    result: None,
                    delivery: None,
                    now_ms: T0,
                })
                .await
        })
    };
    until("the ack waits in the inbox", || inbox_ops(&store) >= 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!first.is_finished() && !second.is_finished() && !ack.is_finished());

    // The writer catches up: everything accepted is stored, and the room is given back.
    lock.execute_batch("ROLLBACK").unwrap();
    drop(lock);
    let first = first.await.unwrap().expect("the first batch is stored");
    let second = second.await.unwrap().expect("the second batch is stored");
    assert!(first[0].created && second[0].created);
    assert!(ack.await.unwrap().unwrap().iter().all(Result::is_ok));
    assert_eq!(inbox_bytes(&store), 0);
    until("the writer took everything", || inbox_ops(&store) == 0).await;

    let third = enqueue(&store, 16 * 1024)
        .await
        .expect("taken again once the writer caught up");
    assert!(third[0].created);
    // A batch bigger than the whole bound still goes when nothing else waits.
    enqueue(&store, 2 * BOUND as usize)
        .await
        .expect("a big batch goes alone");
    let depth = store.queue_get("q", T0).await.unwrap().depth;
    // The acked message is gone; the four batches wait, ready.
    assert_eq!((depth.ready, depth.in_flight), (4, 0), "{depth:?}");
    store.close().await.unwrap();
}
