//! Leases: claim, ack, nack, extend, and receipts that no longer hold the message.

use sluice_core::message::{MessageState, Receipt};
use sluice_core::rules::failure::LEASE_EXPIRED_ERROR;
use sluice_core::store::{ExtendParams, GiveBackParams, StoreError};
use sluice_core::store::{LeaseError, NackOutcome};

use crate::{Harness, bodies};

/// A claim hands out each message once with its body, headers and a receipt, leases it for
/// the queue's visibility timeout, and counts the attempt; while leased nobody else gets it;
/// an ack ends it for good (a second ack with the same receipt is refused), and the message is
/// then reported acked.
pub async fn claimed_messages_are_leased_until_acked(h: Harness) {
    h.queue("q", |c| c.visibility_timeout_ms = 5_000).await;
    let ids = h.send("q", &["one", "two", "three"]).await;
    let claim = h.claim("q", 10).await;
    assert_eq!(bodies(&claim.messages), ["one", "two", "three"]);
    for (message, id) in claim.messages.iter().zip(&ids) {
        assert_eq!(message.message_id, *id);
        assert_eq!(message.receipt.message_id, *id);
        assert_eq!(message.attempts, 1);
        assert_eq!(message.lease_expires_at_ms, h.now() + 5_000);
        assert_eq!(message.enqueued_at_ms, h.now());
        assert_eq!(message.first_received_at_ms, h.now());
        let body = String::from_utf8_lossy(&message.payload.body_bytes);
        assert_eq!(
            message.payload.headers.get("origin").map(String::as_str),
            Some(format!("conformance {body}").as_str()),
            "headers come back as enqueued"
        );
    }
    let depth = h.store.queue_get("q", h.now()).await.unwrap().depth;
    assert_eq!((depth.ready, depth.in_flight), (0, 3));
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "leased messages are not handed out twice"
    );

    let first = claim.messages[0].receipt;
    assert_eq!(h.ack("q", first).await, Ok(()));
    assert_eq!(
        h.ack("q", first).await,
        Err(LeaseError::Stale),
        "an ack ends the lease"
    );
    assert_eq!(h.status_of("q", ids[0]).await.state, MessageState::Acked);
    assert_eq!(h.status_of("q", ids[1]).await.state, MessageState::InFlight);
    // The acked message never returns, even after the other leases run out.
    h.advance(5_000);
    assert_eq!(h.claim_bodies("q", 10).await, ["two", "three"]);
}

/// A lease that runs out without an ack or nack counts as a failed attempt: the message is
/// claimable again at once, with its attempt count grown and the expiry as its last error; an
/// empty claim says when the next lease runs out so a long poll knows when to look again.
pub async fn a_lease_that_runs_out_makes_the_message_claimable_again(h: Harness) {
    h.queue("q", |_| {}).await;
    let [id] = h.send("q", &["job"]).await[..] else {
        unreachable!()
    };
    let first = h.claim_for("q", 1, 1_000).await;
    let deadline = first.messages[0].lease_expires_at_ms;
    assert_eq!(
        deadline,
        h.now() + 1_000,
        "the claim's own lease length wins"
    );
    let empty = h.claim("q", 1).await;
    assert!(empty.messages.is_empty());
    let next = empty
        .next_change_at_ms
        .expect("an empty claim says when to look again");
    assert!(
        next <= deadline,
        "looked again at {next}, after the lease ran out at {deadline}"
    );

    h.advance(999);
    assert!(
        h.claim("q", 1).await.messages.is_empty(),
        "not a millisecond early"
    );
    h.advance(1);
    let again = h.claim("q", 1).await;
    assert_eq!(
        again.messages.len(),
        1,
        "the expired lease made it claimable again"
    );
    let message = &again.messages[0];
    assert_eq!(message.message_id, id);
    assert_eq!(message.attempts, 2);
    assert_eq!(message.last_error.as_deref(), Some(LEASE_EXPIRED_ERROR));
    assert_ne!(
        message.receipt, first.messages[0].receipt,
        "a new lease, a new receipt"
    );
    assert_eq!(
        message.first_received_at_ms,
        h.now() - 1_000,
        "first delivery is kept"
    );
}

/// Extending a lease moves its deadline to now plus the new timeout: the message stays hidden
/// past the old deadline and acks after it; extending with a receipt that no longer holds the
/// lease is refused.
pub async fn extend_pushes_the_lease_deadline_out(h: Harness) {
    h.queue("q", |_| {}).await;
    h.send("q", &["long job"]).await;
    let receipt = h.claim_for("q", 1, 1_000).await.messages[0].receipt;
    h.advance(800);
    let extend = |receipt: Receipt, timeout_ms| ExtendParams {
        queue: "q".into(),
        receipt,
        timeout_ms,
        now_ms: h.now(),
    };
    let deadline = h
        .store
        .message_extend(extend(receipt, 2_000))
        .await
        .unwrap();
    assert_eq!(deadline, h.now() + 2_000);
    h.advance(1_000);
    assert!(
        h.claim("q", 1).await.messages.is_empty(),
        "still leased after the original deadline"
    );
    let status = h.status_of("q", receipt.message_id).await;
    assert_eq!(status.lease_expires_at_ms, Some(deadline));
    assert_eq!(h.ack("q", receipt).await, Ok(()));
    let forged = Receipt {
        token: receipt.token.wrapping_add(1),
        ..receipt
    };
    assert!(matches!(
        h.store.message_extend(extend(forged, 1_000)).await,
        Err(StoreError::Lease(LeaseError::Stale))
    ));
}

/// Releasing a lease makes the message claimable at once, with no error and no backoff, while
/// the delivery still counts; the released receipt acks nothing once the message is out again.
pub async fn give_back_returns_a_lease_without_a_failure(h: Harness) {
    h.queue("q", |config| config.backoff.initial_ms = 60_000)
        .await;
    h.send("q", &["job"]).await;
    let receipt = h.claim("q", 1).await.messages[0].receipt;
    let give_back = |receipt: Receipt| GiveBackParams {
        unstarted: false,
        queue: "q".into(),
        receipt,
        now_ms: h.now(),
    };
    h.store.message_give_back(give_back(receipt)).await.unwrap();
    let again = h.claim("q", 1).await.messages;
    assert_eq!(again.len(), 1, "ready at once, not after the backoff");
    assert_eq!((again[0].attempts, again[0].last_error.clone()), (2, None));
    assert!(matches!(
        h.store.message_give_back(give_back(receipt)).await,
        Err(StoreError::Lease(LeaseError::Stale))
    ));
    assert!(
        h.ack("q", receipt).await.is_err(),
        "the old receipt is fenced"
    );
    assert_eq!(h.ack("q", again[0].receipt).await, Ok(()));
}

/// Receipts are fenced: once a message is handed out again, the earlier receipt can neither
/// ack, nack nor extend it, and a receipt with a wrong token never works; a receipt used
/// through another queue is refused as not in that queue. Until the message is handed out
/// again, the receipt of a lease that ran out still acks it (the work was done and nobody else
/// holds it).
pub async fn stale_receipts_are_fenced(h: Harness) {
    h.queue("q", |_| {}).await;
    h.queue("other", |_| {}).await;
    h.send("q", &["a", "b"]).await;
    let claim = h.claim_for("q", 2, 1_000).await;
    let (old_a, old_b) = (claim.messages[0].receipt, claim.messages[1].receipt);

    let forged = Receipt {
        token: old_a.token ^ 0x5a5a_5a5a,
        ..old_a
    };
    assert_eq!(
        h.ack("q", forged).await,
        Err(LeaseError::Stale),
        "a guessed token"
    );
    assert_eq!(
        h.ack("other", old_a).await,
        Err(LeaseError::NotInQueue),
        "a receipt is good only in its own queue"
    );

    h.advance(1_000);
    // b's lease ran out and nobody took b since: its old receipt still acks.
    assert_eq!(h.ack("q", old_b).await, Ok(()));
    // a is handed out again: its old receipt is fenced off.
    let again = h.claim_for("q", 2, 1_000).await;
    assert_eq!(bodies(&again.messages), ["a"]);
    let new_a = again.messages[0].receipt;
    assert_eq!(new_a.message_id, old_a.message_id);
    assert_eq!(h.ack("q", old_a).await, Err(LeaseError::Stale));
    assert!(matches!(
        h.nack("q", old_a, "late", None, false).await,
        Err(StoreError::Lease(LeaseError::Stale))
    ));
    let extended = h
        .store
        .message_extend(ExtendParams {
            queue: "q".into(),
            receipt: old_a,
            timeout_ms: 60_000,
            now_ms: h.now(),
        })
        .await;
    assert!(matches!(
        extended,
        Err(StoreError::Lease(LeaseError::Stale))
    ));
    assert_eq!(
        h.status_of("q", old_a.message_id).await.attempts,
        2,
        "the refused nack counted nothing"
    );
    assert_eq!(
        h.ack("q", new_a).await,
        Ok(()),
        "the current receipt still works"
    );
}

/// A nack is a failed attempt: with a delay the message is hidden for exactly that long,
/// without one it waits the queue's backoff for that attempt (1 s, then 2 s: no jitter here);
/// it comes back with its attempt count and the nack's error.
pub async fn nack_retries_after_its_delay_or_the_backoff(h: Harness) {
    h.queue("q", |c| c.max_attempts = 10).await;
    let [id] = h.send("q", &["flaky"]).await[..] else {
        unreachable!()
    };
    let receipt = h.claim("q", 1).await.messages[0].receipt;
    let outcome = h
        .nack("q", receipt, "try later", Some(500), false)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        NackOutcome::Retry {
            visible_at_ms: h.now() + 500
        }
    );
    let status = h.status_of("q", id).await;
    assert_eq!(status.state, MessageState::Delayed);
    assert_eq!(status.last_error.as_deref(), Some("try later"));
    h.advance(499);
    assert!(
        h.claim("q", 1).await.messages.is_empty(),
        "hidden for the whole delay"
    );
    h.advance(1);
    let second = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(second.attempts, 2);
    assert_eq!(second.last_error.as_deref(), Some("try later"));

    // No delay given: the backoff after attempt 2 is 2 s.
    let outcome = h
        .nack("q", second.receipt, "again", None, false)
        .await
        .unwrap();
    assert_eq!(
        outcome,
        NackOutcome::Retry {
            visible_at_ms: h.now() + 2_000
        }
    );
    h.advance(1_999);
    assert!(h.claim("q", 1).await.messages.is_empty());
    h.advance(1);
    let third = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(
        (third.attempts, third.last_error.as_deref()),
        (3, Some("again"))
    );
    assert_eq!(h.ack("q", third.receipt).await, Ok(()));
}

/// A lease given back is like one that ran out: until the message is handed out again, its
/// receipt still acks it (the work may have been done after all); once it is claimed again,
/// the old receipt is fenced.
pub async fn a_given_back_receipt_acks_until_the_next_claim(h: Harness) {
    h.queue("q", |_| {}).await;
    h.send("q", &["kept", "taken"]).await;
    let claim = h.claim("q", 2).await.messages;
    let give_back = |receipt: Receipt| GiveBackParams {
        unstarted: false,
        queue: "q".into(),
        receipt,
        now_ms: h.now(),
    };
    for message in &claim {
        h.store
            .message_give_back(give_back(message.receipt))
            .await
            .unwrap();
    }
    assert_eq!(
        h.ack("q", claim[0].receipt).await,
        Ok(()),
        "not handed out again yet: the receipt still acks"
    );
    let again = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&again), ["taken"], "the acked one is gone");
    assert!(
        h.ack("q", claim[1].receipt).await.is_err(),
        "handed out again: the old receipt is fenced"
    );
    assert_eq!(h.ack("q", again[0].receipt).await, Ok(()));
}

/// A give-back of a message never started (a worker paused before running it) counts no
/// delivery: the next claim is its first attempt again.
pub async fn an_unstarted_give_back_counts_no_attempt(h: Harness) {
    h.queue("q", |_| {}).await;
    h.send("q", &["never started"]).await;
    let first = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(first.attempts, 1);
    h.store
        .message_give_back(GiveBackParams {
            queue: "q".into(),
            receipt: first.receipt,
            unstarted: true,
            now_ms: h.now(),
        })
        .await
        .expect("give back");
    let again = h.claim("q", 1).await.messages.remove(0);
    assert_eq!(again.attempts, 1, "the given-back delivery was not counted");
    // A counted give-back (a release) still counts.
    h.give_back_all("q", std::slice::from_ref(&again)).await;
    assert_eq!(h.claim("q", 1).await.messages[0].attempts, 2);
}
