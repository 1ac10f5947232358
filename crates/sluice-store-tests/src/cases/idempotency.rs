//! Idempotency keys: one message per key within the queue's dedup window.

use sluice_core::message::{MessageState, NewMessage};
use sluice_core::store::{Enqueued, MessageRef};

use crate::{Harness, bodies};

fn keyed(h: &Harness, body: &str, key: &str) -> NewMessage {
    NewMessage {
        idempotency_key: Some(key.to_owned()),
        ..h.message(body)
    }
}

/// Within the dedup window a key answers with its first message: the same id, `created`
/// false, position 0, and the later body is never stored or delivered, whether the duplicate
/// comes in the same batch, while the first is in flight, or after it was acked. Keys are per
/// queue: the same key in another queue is a new message. Each duplicate counts in the queue's
/// `deduplicated` counter.
pub async fn idempotency_keys_answer_with_the_first_message_within_the_window(h: Harness) {
    h.queue("q", |c| c.dedup_window_ms = 60_000).await;
    h.queue("other", |c| c.dedup_window_ms = 60_000).await;
    let batch = h
        .enqueue(
            "q",
            vec![
                keyed(&h, "first", "k"),
                keyed(&h, "copy", "k"),
                h.message("plain"),
            ],
        )
        .await;
    assert!(batch[0].created);
    let duplicate = Enqueued {
        message_id: batch[0].message_id,
        created: false,
        position: 0,
    };
    assert_eq!(batch[1], duplicate, "a duplicate within one batch");
    assert!(batch[2].created && batch[2].message_id != batch[0].message_id);

    let claim = h.claim("q", 10).await.messages;
    assert_eq!(
        bodies(&claim),
        ["first", "plain"],
        "the duplicate was not stored"
    );
    assert_eq!(claim[0].idempotency_key.as_deref(), Some("k"));
    h.advance(1_000);
    assert_eq!(
        h.enqueue("q", vec![keyed(&h, "while leased", "k")]).await[0],
        duplicate
    );
    assert_eq!(h.ack("q", claim[0].receipt).await, Ok(()));
    assert_eq!(h.ack("q", claim[1].receipt).await, Ok(()));
    h.advance(58_000);
    assert_eq!(
        h.enqueue("q", vec![keyed(&h, "after ack", "k")]).await[0],
        duplicate,
        "the key still answers at the end of its window, after the ack"
    );
    let status = h
        .status("q", MessageRef::IdempotencyKey("k".into()))
        .await
        .unwrap();
    assert_eq!(
        (status.message_id, status.state),
        (batch[0].message_id, MessageState::Acked)
    );
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "no duplicate was delivered"
    );

    let elsewhere = h
        .enqueue("other", vec![keyed(&h, "other queue", "k")])
        .await;
    assert!(elsewhere[0].created, "keys are per queue");
    assert_ne!(elsewhere[0].message_id, batch[0].message_id);

    // Each duplicate is an idempotency hit in the queue's counters, beside what was stored.
    for (queue, enqueued, deduplicated) in [("q", 2, 3), ("other", 1, 0)] {
        let counters = h
            .store
            .queue_get(queue, h.now())
            .await
            .unwrap()
            .depth
            .counters;
        assert_eq!(
            (counters.enqueued, counters.deduplicated),
            (enqueued, deduplicated),
            "{queue}"
        );
    }
}

/// Once the dedup window has passed, the key is free (whether or not upkeep has run since):
/// the same key makes a new message, which is delivered, and lookups by key find the new one.
pub async fn idempotency_keys_are_free_again_after_the_window(h: Harness) {
    h.queue("q", |c| c.dedup_window_ms = 10_000).await;
    let first = h.enqueue("q", vec![keyed(&h, "first", "k")]).await[0];
    let receipt = h.claim("q", 1).await.messages[0].receipt;
    assert_eq!(h.ack("q", receipt).await, Ok(()));
    // No upkeep runs in between: the window ends by time, not when a cleanup gets to it.
    h.advance(10_001);
    let second = h.enqueue("q", vec![keyed(&h, "second", "k")]).await[0];
    assert!(second.created, "the window is over");
    assert_ne!(second.message_id, first.message_id);
    assert_eq!(h.claim_bodies("q", 10).await, ["second"]);
    let found = h
        .status("q", MessageRef::IdempotencyKey("k".into()))
        .await
        .unwrap();
    assert_eq!(found.message_id, second.message_id);
}
