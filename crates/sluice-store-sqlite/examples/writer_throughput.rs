//! Measures the store without HTTP: how many 1 KiB messages per second the writer commits when
//! many callers enqueue at once, and how long a claim + ack cycle takes.
//!
//! `cargo run --release -p sluice-store-sqlite --example writer_throughput -- [CALLERS] [BATCH] [TOTAL]`

use sluice_core::store::prelude::*;
use std::sync::Arc;
use std::time::Instant;

use sluice_core::message::{NewMessage, Payload};
use sluice_core::queue::QueueConfig;
use sluice_core::store::{AckParams, ClaimParams, EnqueueParams, QueuePutParams};
use sluice_core::{Clock, Store, SystemClock};
use sluice_store_sqlite::{SharedSqliteStore, SqliteOptions};

#[tokio::main]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let callers = args.first().copied().unwrap_or(32);
    let batch = args.get(1).copied().unwrap_or(100);
    let total = args.get(2).copied().unwrap_or(200_000);
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(
        SharedSqliteStore::open(SqliteOptions::new(dir.path()), SystemClock.now_ms())
            .expect("open"),
    );
    let queue = "bench".to_owned();
    store
        .queue_put(QueuePutParams {
            name: queue.clone(),
            config: QueueConfig::defaults_for(&queue),
            now_ms: SystemClock.now_ms(),
        })
        .await
        .expect("queue");
    let payload = Arc::new(Payload {
        body_bytes: vec![b'x'; 1024],
        body_kind: sluice_core::message::BodyKind::Bytes,
        headers: Default::default(),
    });

    let started = Instant::now();
    let per_caller = total / callers / batch;
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let (store, queue, payload) = (store.clone(), queue.clone(), payload.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_caller {
                let messages = (0..batch)
                    .map(|_| NewMessage {
                        idempotency_key: None,
                        payload: payload.clone(),
                        key: None,
                        priority: 0,
                        visible_at_ms: 0,
                        dead_letter: None,
                    })
                    .collect();
                store
                    .message_enqueue(EnqueueParams {
                        queue: queue.clone(),
                        messages,
                        now_ms: SystemClock.now_ms(),
                    })
                    .await
                    .expect("enqueue");
            }
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let sent = per_caller * callers * batch;
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "enqueue: {sent} msgs, {callers} callers, batches of {batch}: {:.0} msgs/s",
        sent as f64 / elapsed
    );

    let started = Instant::now();
    let mut acked = 0;
    while acked < sent {
        let claim = store
            .message_claim(ClaimParams {
                lane_runs: false,
                queue: queue.clone(),
                max: 100,
                lease_ms: None,
                now_ms: SystemClock.now_ms(),
            })
            .await
            .expect("claim");
        let receipts: Vec<_> = claim.messages.iter().map(|m| m.receipt).collect();
        acked += receipts.len();
        store
            .message_ack(AckParams {
                result: None,
                queue: queue.clone(),
                receipts,
                delivery: None,
                now_ms: SystemClock.now_ms(),
            })
            .await
            .expect("ack");
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "claim + ack, one caller, 100 at a time: {acked} msgs: {:.0} msgs/s",
        acked as f64 / elapsed
    );
    store.close().await.expect("close");
}
