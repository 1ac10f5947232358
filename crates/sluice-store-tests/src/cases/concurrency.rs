//! Many consumers at once.

use std::collections::HashSet;
use std::sync::Arc;

use sluice_core::store::{AckParams, ClaimParams};
use uuid::Uuid;

use crate::Harness;

/// Claimers running at once.
const CLAIMERS: usize = 8;
/// Messages they share.
const MESSAGES: usize = 500;

/// Eight claimers racing over 500 messages (leases long enough never to run out) each get
/// distinct messages: no message is handed to two of them, every one is delivered exactly
/// once, and every ack succeeds. A store that claims without taking the message atomically
/// (read, then mark) fails this.
pub async fn concurrent_claimers_never_share_a_lease(h: Harness) {
    h.queue("q", |c| c.visibility_timeout_ms = 600_000).await;
    let bodies: Vec<String> = (0..MESSAGES).map(|n| format!("m{n}")).collect();
    let mut sent = HashSet::new();
    for chunk in bodies.chunks(100) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        sent.extend(h.send("q", &chunk).await);
    }
    let now = h.now();
    // All start together, so the first one spawned cannot drain the queue alone.
    let start = Arc::new(tokio::sync::Barrier::new(CLAIMERS));
    let mut claimers = Vec::new();
    for _ in 0..CLAIMERS {
        let store = Arc::clone(&h.store);
        let start = Arc::clone(&start);
        claimers.push(tokio::spawn(async move {
            start.wait().await;
            let mut mine: Vec<Uuid> = Vec::new();
            loop {
                let claim = store
                    .message_claim(ClaimParams {
                        lane_runs: false,
                        queue: "q".into(),
                        max: 7,
                        lease_ms: None,
                        now_ms: now,
                    })
                    .await
                    .expect("claim");
                if claim.messages.is_empty() {
                    return mine;
                }
                mine.extend(claim.messages.iter().map(|m| m.message_id));
                let acked = store
                    .message_ack(AckParams {
                        queue: "q".into(),
                        receipts: claim.messages.iter().map(|m| m.receipt).collect(),
                        result: None,
                        delivery: None,
                        now_ms: now,
                    })
                    .await
                    .expect("ack");
                assert!(
                    acked.iter().all(Result::is_ok),
                    "an ack of a fresh lease failed: {acked:?}"
                );
                tokio::task::yield_now().await;
            }
        }));
    }
    let mut delivered = HashSet::new();
    let mut busy = 0;
    for claimer in claimers {
        let mine = claimer.await.expect("a claimer panicked");
        busy += usize::from(!mine.is_empty());
        for id in mine {
            assert!(
                delivered.insert(id),
                "message {id} was handed to two claimers"
            );
        }
    }
    assert_eq!(delivered, sent, "every message was delivered exactly once");
    assert!(busy > 1, "the claimers did not run side by side");
    let depth = h.store.queue_get("q", h.now()).await.unwrap().depth;
    assert_eq!(
        (depth.ready, depth.in_flight, depth.counters.acked),
        (0, 0, MESSAGES as u64)
    );
}
