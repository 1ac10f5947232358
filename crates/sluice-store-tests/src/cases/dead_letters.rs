//! Dead letters: how messages get there, what they keep, and what operators do with them.

use sluice_core::message::MessageState;
use sluice_core::rules::failure::LEASE_EXPIRED_ERROR;
use sluice_core::store::{DeadLetterFilter, LeaseError, NackOutcome};
use sluice_core::store::{DeadLetterQuery, DeadLetterSelection, ReplayParams, StoreError};
use uuid::Uuid;

use crate::{Harness, bodies};

fn from_q() -> DeadLetterFilter {
    DeadLetterFilter {
        source_queue: "q".into(),
        ..DeadLetterFilter::default()
    }
}

/// Dead-letters every message sent to `q` (which must allow one attempt) by a permanent nack
/// with `error`; their ids in order.
async fn dead_letter(h: &Harness, bodies: &[&str], error: &str) -> Vec<Uuid> {
    let ids = h.send("q", bodies).await;
    for message in h.claim("q", bodies.len()).await.messages {
        let outcome = h
            .nack("q", message.receipt, error, None, true)
            .await
            .unwrap();
        assert!(matches!(outcome, NackOutcome::DeadLettered { .. }));
    }
    ids
}

/// A message whose last allowed attempt fails moves to the dead-letter queue with its
/// metadata: the source queue, the last error, the attempts made, when it was first delivered
/// and when it died. A lease that runs out on the last attempt counts the same way. Found
/// through its source queue, it is reported dead and in the DLQ; the source no longer holds it.
pub async fn exhausted_attempts_dead_letter_with_metadata(h: Harness) {
    h.queue("q", |c| c.max_attempts = 2).await;
    let ids = h.send("q", &["nacked", "timed out"]).await;
    let first_delivery = h.now();
    let claim = h.claim_for("q", 2, 1_000).await;
    let outcome = h
        .nack("q", claim.messages[0].receipt, "first", Some(0), false)
        .await;
    assert!(matches!(outcome, Ok(NackOutcome::Retry { .. })));
    h.advance(1_000);
    // The nacked message is claimed again; the other's lease ran out, its second attempt too.
    let again = h.claim_for("q", 2, 1_000).await;
    assert_eq!(again.messages.len(), 2);
    assert!(again.messages.iter().all(|m| m.attempts == 2));
    let nacked = again
        .messages
        .iter()
        .find(|m| m.message_id == ids[0])
        .unwrap();
    let outcome = h
        .nack("q", nacked.receipt, "second", None, false)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        NackOutcome::DeadLettered {
            queue: "q.dlq".into()
        }
    );
    let nacked_at = h.now();
    h.advance(1_000);
    h.maintain().await;
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "nothing is left to retry"
    );

    let status = h.status_of("q", ids[0]).await;
    assert_eq!(
        (status.state, status.queue.as_str()),
        (MessageState::Dead, "q.dlq")
    );
    let info = status.dead_letter.expect("dead-letter metadata");
    assert_eq!(info.source_queue, "q");
    assert_eq!(info.last_error.as_deref(), Some("second"));
    assert_eq!(info.attempts, 2);
    assert_eq!(info.first_seen_at_ms, first_delivery);
    assert_eq!(info.last_seen_at_ms, nacked_at);

    let timed_out = h.status_of("q", ids[1]).await;
    assert_eq!(timed_out.state, MessageState::Dead);
    let info = timed_out.dead_letter.expect("dead-letter metadata");
    assert_eq!(info.last_error.as_deref(), Some(LEASE_EXPIRED_ERROR));
    assert_eq!(info.attempts, 2);
    let depth = h.store.queue_get("q", h.now()).await.unwrap();
    assert_eq!(depth.dead_letter_depth, Some(2));
    assert_eq!(
        depth.depth.ready + depth.depth.delayed + depth.depth.in_flight,
        0
    );
}

/// A permanent nack dead-letters on the first attempt whatever `max_attempts` says; on a queue
/// without a dead-letter queue it is refused and the lease stays held; a queue with
/// `max_attempts = 0` retries for ever.
pub async fn permanent_nack_dead_letters_at_once(h: Harness) {
    h.queue("q", |c| c.max_attempts = 0).await;
    h.queue("nodlq", |c| {
        c.dead_letter_queue = None;
        c.max_attempts = 1;
    })
    .await;
    h.send("q", &["x"]).await;
    for _ in 0..7 {
        let message = h.claim("q", 1).await.messages.remove(0);
        let outcome = h.nack("q", message.receipt, "again", Some(0), false).await;
        assert!(
            matches!(outcome, Ok(NackOutcome::Retry { .. })),
            "{outcome:?}"
        );
    }
    let message = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(message.attempts, 8, "max_attempts 0 never gives up");
    let outcome = h
        .nack("q", message.receipt, "poison", None, true)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        NackOutcome::DeadLettered {
            queue: "q.dlq".into()
        }
    );
    assert_eq!(
        h.status_of("q", message.message_id)
            .await
            .dead_letter
            .unwrap()
            .last_error
            .as_deref(),
        Some("poison")
    );

    let [id] = h.send("nodlq", &["y"]).await[..] else {
        unreachable!()
    };
    let receipt = h.claim("nodlq", 1).await.messages[0].receipt;
    assert!(matches!(
        h.nack("nodlq", receipt, "poison", None, true).await,
        Err(StoreError::Lease(LeaseError::NoDeadLetterQueue))
    ));
    assert_eq!(h.status_of("nodlq", id).await.state, MessageState::InFlight);
    // Out of attempts without a DLQ: it keeps retrying rather than vanish.
    let outcome = h
        .nack("nodlq", receipt, "again", Some(0), false)
        .await
        .unwrap();
    assert!(matches!(outcome, NackOutcome::Retry { .. }));
    assert_eq!(h.claim_bodies("nodlq", 1).await, ["y"]);
}

/// Dead letters are listed newest first, filtered by error text (case-insensitive) and time,
/// paged with a cursor that neither skips nor repeats; one dead letter is read back with its
/// body and headers.
pub async fn dead_letters_are_listed_and_read_with_their_payload(h: Harness) {
    h.queue("q", |_| {}).await;
    let mut ids = Vec::new();
    for (body, error) in [
        ("a", "Timeout talking to db"),
        ("b", "bad input"),
        ("c", "timeout"),
    ] {
        ids.extend(dead_letter(&h, &[body], error).await);
        h.advance(10);
    }
    let list = |filter: DeadLetterFilter, before, limit| DeadLetterQuery {
        queue: "q".into(),
        filter,
        before,
        limit,
    };
    let all = h
        .store
        .dead_letter_list(list(from_q(), None, 10))
        .await
        .unwrap();
    assert_eq!(all.dead_letter_queue, "q.dlq");
    let listed: Vec<Uuid> = all.entries.iter().map(|e| e.status.message_id).collect();
    assert_eq!(listed, [ids[2], ids[1], ids[0]], "newest first");

    let timeouts = DeadLetterFilter {
        error_contains: Some("TIMEOUT".into()),
        ..from_q()
    };
    let found = h
        .store
        .dead_letter_list(list(timeouts, None, 10))
        .await
        .unwrap();
    let listed: Vec<Uuid> = found.entries.iter().map(|e| e.status.message_id).collect();
    assert_eq!(listed, [ids[2], ids[0]]);
    let since = DeadLetterFilter {
        since_ms: Some(crate::T0 + 10),
        until_ms: Some(crate::T0 + 20),
        ..from_q()
    };
    let found = h
        .store
        .dead_letter_list(list(since, None, 10))
        .await
        .unwrap();
    assert_eq!(found.entries.len(), 1);
    assert_eq!(found.entries[0].status.message_id, ids[1]);

    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = h
            .store
            .dead_letter_list(list(from_q(), before, 1))
            .await
            .unwrap();
        paged.extend(page.entries.iter().map(|e| e.status.message_id));
        match page.next {
            Some(next) => before = Some(next),
            None => break,
        }
        assert!(paged.len() <= 3, "the cursor repeats entries: {paged:?}");
    }
    assert_eq!(paged, [ids[2], ids[1], ids[0]], "pages of one, in order");

    let dead = h.store.dead_letter_get("q", ids[1]).await.unwrap().unwrap();
    assert_eq!(dead.status.state, MessageState::Dead);
    let payload = dead.payload.expect("the body of a dead letter");
    assert_eq!(payload.body_bytes, b"b");
    assert_eq!(payload.headers["origin"], "conformance b");
    assert_eq!(dead.body_bytes, Some(1));
    assert!(
        h.store
            .dead_letter_get("q", Uuid::now_v7())
            .await
            .unwrap()
            .is_none()
    );
}

/// A replay enqueues dead letters again as new messages in their source queue (or a target),
/// with the same body and attempts reset; the dead letter records the new id and reads as
/// replayed. A dry run only counts. A replayed entry is not replayed twice.
pub async fn replay_sends_dead_letters_back_as_new_messages(h: Harness) {
    h.queue("q", |_| {}).await;
    h.queue("elsewhere", |_| {}).await;
    let ids = dead_letter(&h, &["one", "two", "three"], "broken").await;
    let replay = |selection, dry_run, target: Option<&str>| ReplayParams {
        queue: "q".into(),
        selection,
        limit: 10,
        dry_run,
        target_queue: target.map(str::to_owned),
        now_ms: h.now(),
    };
    let counted = h
        .store
        .dead_letter_replay(replay(DeadLetterSelection::Matching(from_q()), true, None))
        .await
        .unwrap();
    assert_eq!(
        (counted.matched, counted.replayed.len()),
        (3, 0),
        "a dry run only counts"
    );
    assert_eq!(
        h.store
            .queue_get("q", h.now())
            .await
            .unwrap()
            .dead_letter_depth,
        Some(3)
    );

    let done = h
        .store
        .dead_letter_replay(replay(DeadLetterSelection::Ids(vec![ids[0]]), false, None))
        .await
        .unwrap();
    assert_eq!(done.replayed.len(), 1);
    let (dead_id, new_id) = done.replayed[0];
    assert_eq!(dead_id, ids[0]);
    assert_ne!(new_id, ids[0], "a new message");
    let claimed = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&claimed), ["one"]);
    assert_eq!((claimed[0].message_id, claimed[0].attempts), (new_id, 1));
    let record = h.store.dead_letter_get("q", ids[0]).await.unwrap().unwrap();
    assert_eq!(record.status.state, MessageState::Replayed);
    assert_eq!(record.status.replayed_as, Some(new_id));
    let twice = h
        .store
        .dead_letter_replay(replay(DeadLetterSelection::Ids(vec![ids[0]]), false, None))
        .await
        .unwrap();
    assert!(
        twice.replayed.is_empty(),
        "a replayed dead letter is not replayed again"
    );

    let moved = h
        .store
        .dead_letter_replay(replay(
            DeadLetterSelection::Matching(from_q()),
            false,
            Some("elsewhere"),
        ))
        .await
        .unwrap();
    assert_eq!(moved.replayed.len(), 2);
    assert!(!moved.more);
    assert_eq!(
        h.claim_bodies("elsewhere", 10).await,
        ["two", "three"],
        "oldest first"
    );
    assert_eq!(
        h.store
            .queue_get("q", h.now())
            .await
            .unwrap()
            .dead_letter_depth,
        Some(0)
    );
}

/// Deleting dead letters removes exactly those selected and says how many; a deleted entry
/// reads as deleted (or is gone), never as dead.
pub async fn dead_letter_delete_removes_entries(h: Harness) {
    h.queue("q", |_| {}).await;
    let ids = dead_letter(&h, &["keep", "drop"], "broken").await;
    let deleted = h
        .store
        .dead_letter_delete("q", DeadLetterSelection::Ids(vec![ids[1]]), h.now())
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let left = h
        .store
        .dead_letter_list(DeadLetterQuery {
            queue: "q".into(),
            filter: from_q(),
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    let listed: Vec<Uuid> = left.entries.iter().map(|e| e.status.message_id).collect();
    assert_eq!(listed, [ids[0]]);
    if let Some(record) = h.store.dead_letter_get("q", ids[1]).await.unwrap() {
        assert_eq!(record.status.state, MessageState::Deleted);
    }
    let all = h
        .store
        .dead_letter_delete("q", DeadLetterSelection::Matching(from_q()), h.now())
        .await
        .unwrap();
    assert_eq!(all, 1);
    assert_eq!(
        h.store
            .queue_get("q", h.now())
            .await
            .unwrap()
            .dead_letter_depth,
        Some(0)
    );
}
