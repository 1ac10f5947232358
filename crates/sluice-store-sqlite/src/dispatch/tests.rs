//! Dispatch rules, driven with explicit times: no clock, no sleeps.

use super::*;
use sluice_core::message::{ClaimedMessage, MessageState};
use sluice_core::queue::{Backoff, Ordering};

const T0: Millis = 1_000_000;

struct Harness {
    index: Index,
    next_seq: Seq,
}

impl Harness {
    fn new(config: QueueConfig) -> Self {
        let mut index = Index::new();
        index.queue_put("q", config).unwrap();
        index
            .queue_put("q.dlq", QueueConfig::for_dead_letter_queue("q.dlq"))
            .unwrap();
        Self { index, next_seq: 1 }
    }

    fn unordered() -> Self {
        let mut config = QueueConfig::defaults_for("q");
        config.backoff = Backoff {
            jitter: false,
            ..Backoff::default()
        };
        Self::new(config)
    }

    fn enqueue(&mut self, priority: i32, key: Option<&str>, visible_at_ms: Millis) -> Uuid {
        let id = Uuid::now_v7();
        let entry = Entry::new(
            self.next_seq,
            id,
            Arc::from("q"),
            priority,
            key.map(Arc::from),
            T0,
            visible_at_ms,
        );
        self.next_seq += 1;
        self.index.insert(entry, T0);
        id
    }

    fn claim(&mut self, max: usize, now_ms: Millis) -> Vec<ClaimedMessage> {
        self.index.tick_queue("q", now_ms);
        self.index
            .claim("q", max, false, 30_000, now_ms, || 7)
            .into_iter()
            .map(|c| c.message)
            .collect()
    }

    fn ids(&mut self, max: usize, now_ms: Millis) -> Vec<Uuid> {
        self.claim(max, now_ms)
            .into_iter()
            .map(|m| m.message_id)
            .collect()
    }
}

#[test]
fn higher_priority_first_then_enqueue_order() {
    let mut h = Harness::unordered();
    let low1 = h.enqueue(0, None, T0);
    let high = h.enqueue(5, None, T0);
    let low2 = h.enqueue(0, None, T0);
    let negative = h.enqueue(-3, None, T0);
    assert_eq!(h.ids(10, T0), vec![high, low1, low2, negative]);
}

#[test]
fn delayed_messages_stay_invisible_until_their_time() {
    let mut h = Harness::unordered();
    let later = h.enqueue(0, None, T0 + 5_000);
    assert!(h.ids(1, T0 + 4_999).is_empty());
    assert_eq!(h.index.next_change_at("q"), Some(T0 + 5_000));
    assert_eq!(h.ids(1, T0 + 5_000), vec![later]);
}

#[test]
fn expired_lease_is_a_failed_attempt_and_the_old_receipt_goes_stale() {
    let mut h = Harness::unordered();
    let id = h.enqueue(0, None, T0);
    let first = h.claim(1, T0).remove(0);
    assert_eq!(first.attempts, 1);
    assert!(h.claim(1, T0 + 29_999).is_empty());
    let second = h.claim(1, T0 + 30_000).remove(0);
    assert_eq!((second.message_id, second.attempts), (id, 2));
    assert_eq!(second.last_error.as_deref(), Some(LEASE_EXPIRED_ERROR));
    assert_eq!(
        h.index.ack("q", &first.receipt, T0 + 30_001),
        Err(LeaseError::Stale)
    );
    assert_eq!(h.index.ack("q", &second.receipt, T0 + 30_001), Ok(1));
    assert_eq!(
        h.index.ack("q", &second.receipt, T0 + 30_002),
        Err(LeaseError::Stale)
    );
    assert_eq!(h.index.queue_len("q"), 0);
}

#[test]
fn nack_waits_for_the_backoff_of_that_attempt() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    let mut now = T0;
    for (attempt, backoff) in [(1, 1_000), (2, 2_000), (3, 4_000)] {
        let message = h.claim(1, now).remove(0);
        assert_eq!(message.attempts, attempt);
        let (_, outcome) = h
            .index
            .nack(
                "q",
                &message.receipt,
                Some(Arc::from("boom")),
                None,
                false,
                now,
            )
            .unwrap();
        assert_eq!(
            outcome,
            NackOutcome::Retry {
                visible_at_ms: now + backoff
            }
        );
        assert!(
            h.claim(1, now + backoff - 1).is_empty(),
            "visible before its backoff ended"
        );
        now += backoff;
    }
    assert_eq!(h.claim(1, now)[0].last_error.as_deref(), Some("boom"));
}

#[test]
fn out_of_attempts_moves_to_the_dead_letter_queue_with_its_history() {
    let mut config = QueueConfig::defaults_for("q");
    config.max_attempts = 2;
    let mut h = Harness::new(config);
    let id = h.enqueue(0, None, T0);
    let first = h.claim(1, T0).remove(0);
    h.index
        .nack(
            "q",
            &first.receipt,
            Some(Arc::from("e1")),
            Some(0),
            false,
            T0,
        )
        .unwrap();
    let second = h.claim(1, T0 + 10).remove(0);
    let (change, outcome) = h
        .index
        .nack(
            "q",
            &second.receipt,
            Some(Arc::from("e2")),
            None,
            false,
            T0 + 20,
        )
        .unwrap();
    assert_eq!(
        outcome,
        NackOutcome::DeadLettered {
            queue: Arc::from("q.dlq")
        }
    );
    let Change::DeadLettered { info, .. } = change else {
        panic!("{change:?}")
    };
    assert_eq!(
        (
            info.source_queue.as_str(),
            info.last_error.as_deref(),
            info.attempts
        ),
        ("q", Some("e2"), 2)
    );
    assert_eq!((info.first_seen_at_ms, info.last_seen_at_ms), (T0, T0 + 20));
    assert_eq!(h.index.queue_len("q"), 0);
    let status = h.index.status(&id).unwrap();
    assert_eq!(
        (status.state, status.queue.as_str()),
        (MessageState::Dead, "q.dlq")
    );
    h.index.tick_queue("q.dlq", T0 + 20);
    let from_dlq = h
        .index
        .claim("q.dlq", 1, false, 1_000, T0 + 20, || 1)
        .remove(0)
        .message;
    assert_eq!((from_dlq.message_id, from_dlq.attempts), (id, 1));
    assert!(h.index.ack("q.dlq", &from_dlq.receipt, T0 + 21).is_ok());
}

#[test]
fn permanent_nack_dead_letters_at_once() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    let message = h.claim(1, T0).remove(0);
    let (_, outcome) = h
        .index
        .nack("q", &message.receipt, None, None, true, T0)
        .unwrap();
    assert!(matches!(outcome, NackOutcome::DeadLettered { .. }));
    assert_eq!(h.index.queue_len("q.dlq"), 1);
}

#[test]
fn per_key_keeps_one_message_of_a_key_in_flight_and_retries_block_the_key() {
    let mut config = QueueConfig::defaults_for("q");
    config.ordering = Ordering::PerKey;
    config.backoff = Backoff {
        jitter: false,
        ..Backoff::default()
    };
    let mut h = Harness::new(config);
    let a1 = h.enqueue(0, Some("a"), T0);
    let a2 = h.enqueue(0, Some("a"), T0);
    let b1 = h.enqueue(0, Some("b"), T0);
    let free = h.enqueue(0, None, T0);
    let claimed = h.claim(10, T0);
    let ids: Vec<_> = claimed.iter().map(|m| m.message_id).collect();
    assert_eq!(
        ids,
        vec![a1, b1, free],
        "only lane heads and keyless messages are claimable"
    );
    // a1 fails: a2 must still wait while a1 backs off.
    h.index
        .nack("q", &claimed[0].receipt, None, None, false, T0)
        .unwrap();
    assert!(h.ids(10, T0 + 999).is_empty());
    let retried = h.claim(10, T0 + 1_000);
    assert_eq!(
        retried.iter().map(|m| m.message_id).collect::<Vec<_>>(),
        vec![a1]
    );
    h.index.ack("q", &retried[0].receipt, T0 + 1_001).unwrap();
    assert_eq!(h.ids(10, T0 + 1_001), vec![a2]);
}

#[test]
fn fifo_is_one_lane_for_the_whole_queue() {
    let mut config = QueueConfig::defaults_for("q");
    config.ordering = Ordering::Fifo;
    let mut h = Harness::new(config);
    let first = h.enqueue(0, Some("x"), T0);
    let second = h.enqueue(9, Some("y"), T0);
    let claimed = h.claim(10, T0);
    assert_eq!(
        claimed.iter().map(|m| m.message_id).collect::<Vec<_>>(),
        vec![first]
    );
    h.index.ack("q", &claimed[0].receipt, T0).unwrap();
    assert_eq!(h.ids(10, T0), vec![second]);
}

#[test]
fn extend_moves_the_lease_deadline() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    let message = h.claim(1, T0).remove(0);
    assert_eq!(
        h.index.extend("q", &message.receipt, 60_000, T0 + 20_000),
        Ok(T0 + 80_000)
    );
    assert!(h.claim(1, T0 + 79_999).is_empty());
    assert_eq!(h.claim(1, T0 + 80_000)[0].attempts, 2);
}

#[test]
fn give_back_returns_a_lease_at_once_without_a_failure() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    let first = h.claim(1, T0).remove(0);
    assert_eq!(
        h.index.give_back("q", &first.receipt, false, T0 + 10),
        Ok(None)
    );
    // Ready at once: no backoff, no error, and the delivery still counted.
    let again = h.claim(1, T0 + 10).remove(0);
    assert_eq!((again.attempts, again.last_error.clone()), (2, None));
    assert_eq!(
        h.index.depth("q", T0 + 10).unwrap().counters.lease_expired,
        0
    );
    // The old receipt is fenced now that someone else holds the message.
    assert_eq!(
        h.index.give_back("q", &first.receipt, false, T0 + 20),
        Err(LeaseError::Stale)
    );
    assert!(h.index.ack("q", &first.receipt, T0 + 20).is_err());
    assert!(h.index.ack("q", &again.receipt, T0 + 20).is_ok());
}

#[test]
fn a_given_back_receipt_still_acks_until_the_message_goes_out_again() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    let first = h.claim(1, T0).remove(0);
    h.index
        .give_back("q", &first.receipt, false, T0 + 10)
        .unwrap();
    assert!(h.index.ack("q", &first.receipt, T0 + 20).is_ok());
    assert!(h.claim(1, T0 + 30).is_empty());
}

#[test]
fn depth_counts_each_state_and_the_oldest_ready_age() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    h.enqueue(3, None, T0);
    h.enqueue(0, None, T0 + 60_000);
    h.claim(1, T0 + 100);
    let depth = h.index.depth("q", T0 + 500).unwrap();
    assert_eq!((depth.ready, depth.delayed, depth.in_flight), (1, 1, 1));
    assert_eq!(depth.oldest_ready_age_ms, Some(500));
    assert_eq!(depth.counters.delivered, 1);
}

#[test]
fn changing_the_ordering_of_a_busy_queue_is_refused() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    let mut fifo = QueueConfig::defaults_for("q");
    fifo.ordering = Ordering::Fifo;
    assert!(h.index.queue_put("q", fifo).is_err());
}

#[test]
fn a_lease_that_ran_out_still_acks_until_the_message_goes_out_again() {
    let mut h = Harness::unordered();
    h.enqueue(0, None, T0);
    h.enqueue(0, None, T0);
    let leased = h.claim(2, T0);
    h.index.tick_queue("q", T0 + 30_000);
    assert_eq!(
        h.index.ack("q", &leased[0].receipt, T0 + 30_001),
        Ok(1),
        "nobody holds it: the late ack wins"
    );
    let again = h.claim(1, T0 + 30_002);
    assert_eq!(again[0].message_id, leased[1].message_id);
    assert_eq!(
        h.index.ack("q", &leased[1].receipt, T0 + 30_003),
        Err(LeaseError::Stale),
        "handed out again: the old receipt is stale"
    );
    assert!(
        h.index
            .nack("q", &leased[1].receipt, None, None, false, T0 + 30_003)
            .is_err()
    );
}

#[test]
fn retention_takes_turns_between_queues_with_a_backlog() {
    let mut h = Harness::unordered();
    h.index
        .queue_put("a", QueueConfig::defaults_for("a"))
        .unwrap();
    for n in 0..10 {
        h.index.insert(
            Entry::new(100 + n, Uuid::now_v7(), Arc::from("a"), 0, None, T0, T0),
            T0,
        );
    }
    let young = h.enqueue(0, None, T0);
    let later = T0 + QueueConfig::defaults_for("q").max_age_ms;
    let first = h.index.expire(later, 5);
    assert_eq!(first.len(), 5, "the budget bounds one pass");
    assert_eq!(h.index.queue_len("a"), 5);
    let second = h.index.expire(later, 5);
    assert!(
        h.index.status(&young).is_none(),
        "q gets its turn before a's backlog is done: {second:?}"
    );
    assert_eq!(h.index.queue_len("a"), 1);
    assert!(
        second
            .iter()
            .all(|change| matches!(change, Change::Expired { .. })),
        "on_expire drop removes: {second:?}"
    );
}

#[test]
fn pace_limits_cap_claims_and_say_when_the_next_token_comes() {
    let mut config = QueueConfig::defaults_for("q");
    config.max_in_flight = Some(2);
    config.rate_limit = Some(sluice_core::queue::RateLimit {
        per_second: 10.0,
        burst: 3,
    });
    let mut h = Harness::new(config);
    for _ in 0..10 {
        h.enqueue(0, None, T0);
    }
    assert_eq!(h.claim(10, T0).len(), 2, "max_in_flight");
    assert_eq!(h.claim(10, T0).len(), 0);
    let leased = h.index.depth("q", T0).unwrap().in_flight;
    assert_eq!(leased, 2);
    // Free the slots: the bucket has one token left of its burst of 3.
    let mut h2 = h;
    h2.index
        .queue_put("q", {
            let mut c = QueueConfig::defaults_for("q");
            c.rate_limit = Some(sluice_core::queue::RateLimit {
                per_second: 10.0,
                burst: 3,
            });
            c
        })
        .unwrap();
    assert_eq!(h2.claim(10, T0).len(), 1, "one token left of the burst");
    assert_eq!(h2.claim(10, T0).len(), 0);
    assert_eq!(
        h2.index.next_change_at("q"),
        Some(T0 + 100),
        "the next token comes in 1/10 s"
    );
    assert_eq!(h2.claim(10, T0 + 100).len(), 1);
    h2.index.set_paused("q", true);
    assert_eq!(h2.claim(10, T0 + 10_000).len(), 0, "paused");
    h2.index.set_paused("q", false);
    assert_eq!(
        h2.claim(10, T0 + 10_000).len(),
        3,
        "a full burst after a quiet spell"
    );
}

#[test]
fn compaction_gives_back_the_room_a_burst_took() {
    // After a flood drains, the index's maps shrink to the few messages left; while full, or
    // while only a little emptier, they keep their room (no rehash on every tick).
    let mut h = Harness::unordered();
    let seqs: Vec<Seq> = (0..50_000)
        .map(|_| {
            h.enqueue(0, None, T0);
            h.next_seq - 1
        })
        .collect();
    let full = h.index.entries.capacity();
    h.index.compact();
    assert_eq!(h.index.entries.capacity(), full, "a full map is left alone");

    h.index.remove_unleased("q", &seqs[..20_000], T0);
    h.index.compact();
    assert_eq!(
        h.index.entries.capacity(),
        full,
        "30,000 of 50,000 left: not sparse enough to shrink"
    );

    h.index.remove_unleased("q", &seqs[20_000..49_900], T0);
    h.index.compact();
    assert_eq!(h.index.entries.len(), 100);
    assert!(
        h.index.entries.capacity() < full / 20 && h.index.foreign_ids.capacity() < full / 20,
        "entries {} and foreign ids {} of {full}",
        h.index.entries.capacity(),
        h.index.foreign_ids.capacity()
    );
    // What is left is still delivered.
    assert_eq!(h.claim(1_000, T0).len(), 100);
}
