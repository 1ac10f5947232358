//! Chaining: an ack that enqueues the next steps in the same commit.

use sluice_core::message::{MessageState, NewMessage, Receipt};
use sluice_core::store::LeaseError;
use sluice_core::store::{AckParams, ClaimParams, EnqueueParams, StoreError};

use crate::{Harness, bodies};

/// An ack with next steps is one change: a next step that is refused (its queue full or
/// missing) leaves the lease as it was and enqueues nothing; an accepted one acks the message
/// with its result and stores every next step (an idempotency key already seen answers with
/// its first message and is counted as a duplicate); the same receipt again is stale and adds
/// nothing; all of it is kept across a reopen. Next steps count in their queues' counters.
pub async fn an_ack_enqueues_its_next_steps_in_the_same_commit(h: Harness) {
    h.queue("first", |_| {}).await;
    h.queue("second", |_| {}).await;
    h.queue("full", |c| c.max_depth = Some(1)).await;
    h.send("full", &["occupant"]).await;
    let ids = h.send("first", &["a"]).await;
    let receipt = h.claim("first", 1).await.messages[0].receipt;
    let ack = |receipt: Receipt| AckParams {
        queue: "first".into(),
        receipts: vec![receipt],
        result: Some(r#"{"step":1}"#.into()),
        delivery: None,
        now_ms: h.now(),
    };
    let then = |queue: &str, body: &str, id: Option<&str>| EnqueueParams {
        queue: queue.into(),
        messages: vec![NewMessage {
            idempotency_key: id.map(str::to_owned),
            ..h.message(body)
        }],
        now_ms: h.now(),
    };

    let refused = h
        .store
        .message_ack_then(
            ack(receipt),
            vec![then("second", "next", None), then("full", "no room", None)],
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::QueueFull { .. })),
        "{refused:?}"
    );
    let missing = h
        .store
        .message_ack_then(ack(receipt), vec![then("nowhere", "lost", None)])
        .await;
    assert!(
        matches!(missing, Err(StoreError::QueueNotFound(_))),
        "{missing:?}"
    );
    assert_eq!(
        h.status_of("first", ids[0]).await.state,
        MessageState::InFlight
    );
    let second = h.store.queue_get("second", h.now()).await.unwrap().depth;
    assert_eq!(second.ready + second.delayed + second.in_flight, 0);

    h.enqueue(
        "second",
        vec![then("second", "earlier", Some("dup")).messages.remove(0)],
    )
    .await;
    let done = h
        .store
        .message_ack_then(
            ack(receipt),
            vec![
                then("second", "next", Some("step-2")),
                then("second", "copy", Some("dup")),
            ],
        )
        .await
        .unwrap()
        .unwrap();
    assert!(done[0][0].created && !done[1][0].created, "{done:?}");
    let acked = h.status_of("first", ids[0]).await;
    assert_eq!(
        (acked.state, acked.result.as_deref()),
        (MessageState::Acked, Some(r#"{"step":1}"#))
    );
    let again = h
        .store
        .message_ack_then(ack(receipt), vec![then("second", "twice", None)])
        .await
        .unwrap();
    assert_eq!(again, Err(LeaseError::Stale));
    let counters = h
        .store
        .queue_get("second", h.now())
        .await
        .unwrap()
        .depth
        .counters;
    assert_eq!((counters.enqueued, counters.deduplicated), (2, 1));

    let store = h.reopen().await;
    let claim = store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "second".into(),
            max: 10,
            lease_ms: None,
            now_ms: h.now(),
        })
        .await
        .unwrap();
    assert_eq!(bodies(&claim.messages), ["earlier", "next"]);
    store.close().await.unwrap();
}

/// Batches enqueued together (a topic's copies) are one change: a refused batch (its queue
/// full or missing) stores none of the others; accepted ones are answered per batch as alone
/// (a key already seen in a queue answers with its first message) and delivered from each
/// queue on its own.
pub async fn batches_enqueued_together_are_stored_all_or_none(h: Harness) {
    h.queue("a", |_| {}).await;
    h.queue("b", |_| {}).await;
    h.queue("full", |c| c.max_depth = Some(1)).await;
    h.send("full", &["occupant"]).await;
    let batch = |queue: &str, body: &str, id: Option<&str>| EnqueueParams {
        queue: queue.into(),
        messages: vec![NewMessage {
            idempotency_key: id.map(str::to_owned),
            ..h.message(body)
        }],
        now_ms: h.now(),
    };
    let refused = h
        .store
        .message_enqueue_together(vec![batch("a", "x", None), batch("full", "x", None)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::QueueFull { .. })),
        "{refused:?}"
    );
    let missing = h
        .store
        .message_enqueue_together(vec![batch("a", "x", None), batch("nowhere", "x", None)])
        .await;
    assert!(
        matches!(missing, Err(StoreError::QueueNotFound(_))),
        "{missing:?}"
    );
    assert_eq!(
        h.store.queue_get("a", h.now()).await.unwrap().depth.ready,
        0
    );

    let stored = h
        .store
        .message_enqueue_together(vec![
            batch("a", "copy", Some("k")),
            batch("b", "copy", Some("k")),
        ])
        .await
        .unwrap();
    assert_eq!(stored.len(), 2);
    assert!(
        stored
            .iter()
            .all(|answer| answer.len() == 1 && answer[0].created)
    );
    let again = h
        .store
        .message_enqueue_together(vec![
            batch("a", "copy", Some("k")),
            batch("b", "copy", Some("k")),
        ])
        .await
        .unwrap();
    for (first, second) in stored.iter().zip(&again) {
        assert!(!second[0].created);
        assert_eq!(first[0].message_id, second[0].message_id);
    }
    assert_eq!(h.claim_bodies("a", 10).await, ["copy"]);
    assert_eq!(h.claim_bodies("b", 10).await, ["copy"]);
}
