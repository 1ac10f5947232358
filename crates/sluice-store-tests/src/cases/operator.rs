//! What operators do to a queue: purge, cancel, pause; and retention.

use sluice_core::clock::Millis;
use sluice_core::message::{MessageState, NewMessage};
use sluice_core::queue::OnExpire;
use sluice_core::rules::retention::MAX_AGE_ERROR;
use sluice_core::store::{CancelOutcome, MessageGetParams, MessageRef, PurgeScope};
use uuid::Uuid;

use crate::{Harness, bodies};

/// A purge removes every message of the queue that is not leased, and says how many; purged
/// messages read as purged and are never delivered, while a leased one stays and still acks.
pub async fn purge_removes_everything_but_leased_messages(h: Harness) {
    h.queue("q", |_| {}).await;
    let ids = h.send("q", &["leased", "a", "b"]).await;
    h.enqueue(
        "q",
        vec![sluice_core::message::NewMessage {
            visible_at_ms: h.now() + 60_000,
            ..h.message("delayed")
        }],
    )
    .await;
    let leased = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(
        h.store
            .queue_purge("q", PurgeScope::Waiting, h.now())
            .await
            .unwrap(),
        3
    );
    let depth = h.store.queue_get("q", h.now()).await.unwrap().depth;
    assert_eq!((depth.ready, depth.delayed, depth.in_flight), (0, 0, 1));
    assert_eq!(h.status_of("q", ids[1]).await.state, MessageState::Purged);
    assert_eq!(h.ack("q", leased.receipt).await, Ok(()));
    h.advance(120_000);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "nothing purged comes back"
    );
    h.send("q", &["after"]).await;
    assert_eq!(
        h.claim_bodies("q", 10).await,
        ["after"],
        "the queue takes new messages"
    );
}

/// A purge of everything (SQS's `PurgeQueue`) takes the leased messages too: their receipts
/// are stale afterwards, nothing comes back when their visibility would have ended, and in a
/// `fifo` queue the lane is free for new messages. It also forgets the queue's idempotency ids:
/// a send with an id the purged messages had is a new message.
pub async fn purging_everything_takes_leased_messages_and_forgets_ids(h: Harness) {
    h.queue("q", |c| {
        c.ordering = sluice_core::queue::Ordering::Fifo;
        c.dedup_window_ms = 300_000;
    })
    .await;
    let keyed = |body: &str, key: &str| NewMessage {
        idempotency_key: Some(key.to_owned()),
        ..h.message(body)
    };
    h.enqueue("q", vec![keyed("leased", "k1"), keyed("behind", "k2")])
        .await;
    let leased = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(
        h.store
            .queue_purge("q", PurgeScope::Everything, h.now())
            .await
            .unwrap(),
        2,
        "the leased message counts among those purged"
    );
    let depth = h.store.queue_get("q", h.now()).await.unwrap().depth;
    assert_eq!((depth.ready, depth.delayed, depth.in_flight), (0, 0, 0));
    assert!(
        h.ack("q", leased.receipt).await.is_err(),
        "its receipt is stale"
    );
    h.advance(120_000);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "the leased message does not come back when its lease would have ended"
    );
    let again = h.enqueue("q", vec![keyed("again", "k1")]).await;
    assert!(again[0].created, "the purge forgot the idempotency id");
    assert_eq!(h.claim_bodies("q", 10).await, ["again"], "the lane is free");
}

/// A cancel removes a message that is not being processed and says so; a leased message is
/// reported as processing and left alone; a message already done is reported with its final
/// state; an unknown one as not found. A cancel by idempotency key works the same.
pub async fn cancel_reports_each_outcome(h: Harness) {
    h.queue("q", |_| {}).await;
    let ids = h.send("q", &["leased", "acked"]).await;
    let keyed = h
        .enqueue(
            "q",
            vec![sluice_core::message::NewMessage {
                idempotency_key: Some("order-7".into()),
                priority: -1,
                ..h.message("by key")
            }],
        )
        .await[0]
        .message_id;
    let cancel = |by| {
        let store = h.store.clone();
        let params = MessageGetParams {
            queue: "q".into(),
            by,
            now_ms: h.now(),
        };
        async move { store.message_cancel(params, None).await.unwrap() }
    };
    let claim = h.claim("q", 2).await.messages;
    assert_eq!(bodies(&claim), ["leased", "acked"]);
    assert_eq!(h.ack("q", claim[1].receipt).await, Ok(()));

    assert_eq!(
        cancel(MessageRef::IdempotencyKey("order-7".into())).await,
        CancelOutcome::Cancelled { message_id: keyed }
    );
    assert_eq!(
        cancel(MessageRef::Id(keyed)).await,
        CancelOutcome::AlreadyCompleted {
            message_id: keyed,
            state: MessageState::Cancelled
        }
    );
    assert_eq!(
        cancel(MessageRef::Id(ids[0])).await,
        CancelOutcome::AlreadyProcessing { message_id: ids[0] }
    );
    assert_eq!(
        cancel(MessageRef::Id(ids[1])).await,
        CancelOutcome::AlreadyCompleted {
            message_id: ids[1],
            state: MessageState::Acked
        }
    );
    assert_eq!(
        cancel(MessageRef::Id(Uuid::now_v7())).await,
        CancelOutcome::NotFound
    );
    assert_eq!(h.status_of("q", keyed).await.state, MessageState::Cancelled);
    // A cancel's reason is kept as the record's last error.
    let reasoned = h.send("q", &["with a reason"]).await[0];
    let outcome = h
        .store
        .message_cancel(
            MessageGetParams {
                queue: "q".into(),
                by: MessageRef::Id(reasoned),
                now_ms: h.now(),
            },
            Some("customer withdrew the order".into()),
        )
        .await
        .unwrap();
    assert_eq!(
        outcome,
        CancelOutcome::Cancelled {
            message_id: reasoned
        }
    );
    let status = h.status_of("q", reasoned).await;
    assert_eq!(status.state, MessageState::Cancelled);
    assert_eq!(
        status.last_error.as_deref(),
        Some("customer withdrew the order")
    );
    assert_eq!(
        h.ack("q", claim[0].receipt).await,
        Ok(()),
        "the refused cancel left the lease"
    );
    h.advance(60_000);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "the cancelled message never comes"
    );
}

/// A paused queue delivers nothing (and says it is paused) while it still takes messages and
/// acks; resuming delivers what waited.
pub async fn a_paused_queue_delivers_nothing(h: Harness) {
    h.queue("q", |_| {}).await;
    h.send("q", &["before"]).await;
    let leased = h.claim("q", 1).await.messages.remove(0);
    h.store.queue_pause("q", true).await.unwrap();
    assert!(h.store.queue_get("q", h.now()).await.unwrap().depth.paused);
    h.send("q", &["during"]).await;
    assert!(h.claim("q", 10).await.messages.is_empty(), "paused");
    assert_eq!(
        h.ack("q", leased.receipt).await,
        Ok(()),
        "acks go on while paused"
    );
    h.store.queue_pause("q", false).await.unwrap();
    assert!(!h.store.queue_get("q", h.now()).await.unwrap().depth.paused);
    assert_eq!(h.claim_bodies("q", 10).await, ["during"]);
}

/// Retention (`max_age_ms`, applied by upkeep) removes messages older than the limit as
/// expired, leaves younger ones, and leaves a leased message to its consumer however old.
pub async fn retention_drops_old_messages_but_not_leased_ones(h: Harness) {
    h.queue("q", |c| c.max_age_ms = 10_000).await;
    let old = h.send("q", &["old", "old and leased"]).await;
    let leased = h.claim_for("q", 2, 60_000).await.messages;
    assert!(
        h.nack("q", leased[0].receipt, "later", Some(0), false)
            .await
            .is_ok()
    );
    h.advance(5_000);
    let young = h.send("q", &["young"]).await;
    h.advance(5_000);
    h.maintain().await;
    assert_eq!(h.status_of("q", old[0]).await.state, MessageState::Expired);
    assert_eq!(h.status_of("q", old[1]).await.state, MessageState::InFlight);
    assert_eq!(h.status_of("q", young[0]).await.state, MessageState::Ready);
    assert_eq!(h.ack("q", leased[1].receipt).await, Ok(()));
    assert_eq!(h.claim_bodies("q", 10).await, ["young"]);
    let counters = h
        .store
        .queue_get("q", h.now())
        .await
        .unwrap()
        .depth
        .counters;
    assert_eq!(counters.expired, 1);
}

/// With `on_expire = dead_letter`, retention moves old messages to the dead-letter queue with
/// the expiry as their error instead of dropping them.
pub async fn retention_can_dead_letter_old_messages(h: Harness) {
    h.queue("q", |c| {
        c.max_age_ms = 10_000;
        c.on_expire = OnExpire::DeadLetter;
    })
    .await;
    let ids = h.send("q", &["old"]).await;
    h.advance(10_000);
    h.maintain().await;
    let status = h.status_of("q", ids[0]).await;
    assert_eq!(
        (status.state, status.queue.as_str()),
        (MessageState::Dead, "q.dlq")
    );
    let info = status.dead_letter.unwrap();
    assert_eq!(
        (info.source_queue.as_str(), info.last_error.as_deref()),
        ("q", Some(MAX_AGE_ERROR))
    );
    assert!(h.claim("q", 10).await.messages.is_empty());
}

/// A message delayed for two years is kept until it is visible and then for the queue's whole
/// `max_age_ms`, counted from when it became visible: not from its enqueue (it would be gone
/// before anyone saw it), and not from a retry's backoff, also after a reopen.
pub async fn retention_counts_from_the_end_of_a_delay(h: Harness) {
    const YEAR_MS: Millis = 365 * 24 * 60 * 60 * 1000;
    h.queue("q", |c| c.max_age_ms = 10_000).await;
    let visible_at_ms = h.now() + 2 * YEAR_MS;
    let later = h
        .enqueue(
            "q",
            vec![NewMessage {
                visible_at_ms,
                ..h.message("in two years")
            }],
        )
        .await[0]
        .message_id;
    let now = h.send("q", &["now"]).await[0];
    h.advance(YEAR_MS);
    h.maintain().await;
    assert_eq!(h.status_of("q", now).await.state, MessageState::Expired);
    let status = h.status_of("q", later).await;
    assert_eq!(
        (status.state, status.visible_at_ms),
        (MessageState::Delayed, visible_at_ms)
    );

    // Claimed 1 s after it became visible; a retry at 8 s, visible again at 9 s.
    h.advance(YEAR_MS + 1_000);
    h.maintain().await;
    let claim = h.claim("q", 10).await;
    assert_eq!(bodies(&claim.messages), ["in two years"]);
    h.advance(7_000);
    assert!(
        h.nack(
            "q",
            claim.messages[0].receipt,
            "not yet",
            Some(1_000),
            false
        )
        .await
        .is_ok()
    );
    let store = h.reopen().await;
    let state = |now_ms| {
        let store = store.clone();
        async move {
            store.maintain(now_ms).await.unwrap();
            let by = MessageRef::Id(later);
            let params = MessageGetParams {
                queue: "q".into(),
                by,
                now_ms,
            };
            store.message_get(params).await.unwrap().unwrap().state
        }
    };
    // 9 s of its 10 have passed: the backoff did not start them again.
    assert_eq!(state(h.advance(1_000)).await, MessageState::Ready);
    assert_eq!(state(h.advance(1_000)).await, MessageState::Expired);
    store.close().await.unwrap();
}

/// Purging a per-key queue removes what waits behind the leased heads of its lanes; the heads
/// can still be acked, and the keys take new messages afterwards (no lane stays blocked by
/// a purged message).
pub async fn purging_a_per_key_queue_leaves_no_lane_stuck(h: Harness) {
    h.queue("q", |c| c.ordering = sluice_core::queue::Ordering::PerKey)
        .await;
    let keyed = |body: &str, key: &str| sluice_core::message::NewMessage {
        key: Some(key.to_owned()),
        ..h.message(body)
    };
    h.enqueue(
        "q",
        vec![keyed("a1", "a"), keyed("a2", "a"), keyed("b1", "b")],
    )
    .await;
    let heads = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&heads), ["a1", "b1"]);
    assert_eq!(
        h.store
            .queue_purge("q", PurgeScope::Waiting, h.now())
            .await
            .unwrap(),
        1
    );
    for head in &heads {
        assert_eq!(h.ack("q", head.receipt).await, Ok(()));
    }
    h.enqueue("q", vec![keyed("a3", "a"), keyed("b2", "b")])
        .await;
    assert_eq!(h.claim_bodies("q", 10).await, ["a3", "b2"]);
}
