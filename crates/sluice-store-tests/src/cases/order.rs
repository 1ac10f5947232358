//! Delivery order: fifo, per-key lanes, priorities, delays.

use sluice_core::message::{MessageState, NewMessage};
use sluice_core::queue::Ordering;

use crate::{Harness, bodies};

fn with_key(h: &Harness, body: &str, key: Option<&str>) -> NewMessage {
    NewMessage {
        key: key.map(str::to_owned),
        ..h.message(body)
    }
}

/// A fifo queue has one message in flight at a time, in enqueue order whatever the
/// priorities; a retry holds back everything behind it until it is done.
pub async fn fifo_delivers_one_at_a_time_in_enqueue_order(h: Harness) {
    h.queue("q", |c| c.ordering = Ordering::Fifo).await;
    let messages = ["1", "2", "3"]
        .iter()
        .enumerate()
        .map(|(n, body)| NewMessage {
            priority: n as i32 * 10,
            ..h.message(body)
        })
        .collect();
    h.enqueue("q", messages).await;
    let first = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&first), ["1"], "one at a time, the oldest first");
    assert!(h.claim("q", 10).await.messages.is_empty());
    assert_eq!(h.ack("q", first[0].receipt).await, Ok(()));

    let second = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&second), ["2"]);
    h.nack("q", second[0].receipt, "retry", Some(1_000), false)
        .await
        .unwrap();
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "a retry blocks the messages behind it"
    );
    h.advance(1_000);
    let retried = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&retried), ["2"]);
    assert_eq!(h.ack("q", retried[0].receipt).await, Ok(()));
    assert_eq!(h.claim_bodies("q", 10).await, ["3"]);
}

/// A per_key queue delivers each key's messages one at a time in enqueue order while
/// different keys (and messages without a key) go in parallel; acking a key's message
/// releases its next one; a message behind its key reads as ready but is not claimable.
pub async fn per_key_orders_within_a_key_and_runs_keys_in_parallel(h: Harness) {
    h.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let ids: Vec<_> = h
        .enqueue(
            "q",
            vec![
                with_key(&h, "a1", Some("a")),
                with_key(&h, "b1", Some("b")),
                with_key(&h, "a2", Some("a")),
                with_key(&h, "free1", None),
                with_key(&h, "b2", Some("b")),
                with_key(&h, "a3", Some("a")),
                with_key(&h, "free2", None),
            ],
        )
        .await
        .iter()
        .map(|e| e.message_id)
        .collect();
    let first = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&first), ["a1", "b1", "free1", "free2"]);
    assert_eq!(first[0].key.as_deref(), Some("a"));
    assert_eq!(h.status_of("q", ids[2]).await.state, MessageState::Ready);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "each key has one in flight"
    );

    assert_eq!(h.ack("q", first[0].receipt).await, Ok(()));
    let next = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&next), ["a2"], "only key a moved on");
    h.nack("q", first[1].receipt, "b failed", Some(0), false)
        .await
        .unwrap();
    assert_eq!(
        h.claim_bodies("q", 10).await,
        ["b1"],
        "b1 is retried before b2"
    );
}

/// Higher priorities are delivered first; within a priority, enqueue order.
pub async fn priorities_go_first_then_enqueue_order(h: Harness) {
    h.queue("q", |_| {}).await;
    let messages = [
        ("low1", 0),
        ("high1", 5),
        ("low2", 0),
        ("mid", 1),
        ("high2", 5),
        ("neg", -3),
    ]
    .iter()
    .map(|&(body, priority)| NewMessage {
        priority,
        ..h.message(body)
    })
    .collect();
    h.enqueue("q", messages).await;
    let mut order = Vec::new();
    for _ in 0..6 {
        order.extend(h.claim_bodies("q", 1).await);
    }
    assert_eq!(order, ["high1", "high2", "mid", "low1", "low2", "neg"]);
}

/// A message enqueued with a later `visible_at` is hidden (reported delayed) until that very
/// millisecond, while the messages behind it go; an empty claim says when it comes due.
pub async fn delayed_messages_stay_hidden_until_visible(h: Harness) {
    h.queue("q", |_| {}).await;
    let due = h.now() + 5_000;
    let enqueued = h
        .enqueue(
            "q",
            vec![
                NewMessage {
                    visible_at_ms: due,
                    ..h.message("later")
                },
                h.message("now"),
            ],
        )
        .await;
    let status = h.status_of("q", enqueued[0].message_id).await;
    assert_eq!(
        (status.state, status.visible_at_ms),
        (MessageState::Delayed, due)
    );
    let depth = h.store.queue_get("q", h.now()).await.unwrap().depth;
    assert_eq!((depth.ready, depth.delayed), (1, 1));
    assert_eq!(h.claim_bodies("q", 10).await, ["now"]);
    let empty = h.claim("q", 10).await;
    assert!(empty.messages.is_empty());
    let next = empty.next_change_at_ms.expect("when the delay ends");
    assert!(
        next <= due,
        "looked again at {next}, after the delay ended at {due}"
    );
    h.advance(4_999);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "not a millisecond early"
    );
    h.advance(1);
    assert_eq!(h.claim_bodies("q", 10).await, ["later"]);
}

/// A key's message that is dead-lettered (its attempts used up by a nack, or by a lease that ran
/// out on its last attempt) leaves its lane: the key's next message goes out.
pub async fn a_dead_lettered_lane_head_lets_its_key_go_on(h: Harness) {
    h.queue("q", |c| {
        c.ordering = Ordering::PerKey;
        c.max_attempts = 1;
    })
    .await;
    h.enqueue(
        "q",
        ["a1", "a2", "a3"]
            .iter()
            .map(|body| with_key(&h, body, Some("a")))
            .collect(),
    )
    .await;
    let first = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&first), ["a1"]);
    h.nack("q", first[0].receipt, "failed", None, false)
        .await
        .unwrap();
    let second = h.claim_for("q", 10, 1_000).await.messages;
    assert_eq!(bodies(&second), ["a2"], "a nacked-out head frees its key");
    h.advance(1_001);
    h.maintain().await;
    assert_eq!(
        h.claim_bodies("q", 10).await,
        ["a3"],
        "a head whose last lease ran out frees its key"
    );
}

/// A claim that takes runs (SQS's FIFO receive) takes a key's messages in order after the one
/// it leases, while they are visible, and other keys' heads; the key then stays held until
/// every message of the run is settled or back, whatever comes back goes first again, and a
/// claim without runs still takes one message of a key at a time.
pub async fn lane_runs_take_a_keys_messages_in_order_and_hold_the_key(h: Harness) {
    h.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let later = NewMessage {
        visible_at_ms: h.now() + 10_000,
        ..with_key(&h, "a4", Some("a"))
    };
    h.enqueue(
        "q",
        vec![
            with_key(&h, "a1", Some("a")),
            with_key(&h, "a2", Some("a")),
            with_key(&h, "a3", Some("a")),
            with_key(&h, "b1", Some("b")),
            later,
        ],
    )
    .await;
    let run = h.claim_runs("q", 10).await.messages;
    assert_eq!(
        bodies(&run),
        ["a1", "a2", "a3", "b1"],
        "a's visible messages in order behind its head, then b's; a4 is not visible yet"
    );
    assert!(run.iter().all(|message| message.attempts == 1));
    // a2 fails while a1 and a3 are out: nothing of a is handed out.
    h.nack("q", run[1].receipt, "a2 failed", Some(0), false)
        .await
        .expect("nack");
    h.enqueue("q", vec![with_key(&h, "b2", Some("b"))]).await;
    assert!(
        h.claim_runs("q", 10).await.messages.is_empty(),
        "a and b are held"
    );
    assert_eq!(h.ack("q", run[0].receipt).await, Ok(()));
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "a3 still holds a"
    );
    assert_eq!(h.ack("q", run[3].receipt).await, Ok(()));
    let b2 = h.claim("q", 10).await.messages;
    assert_eq!(bodies(&b2), ["b2"], "b is free again");
    assert_eq!(h.ack("q", b2[0].receipt).await, Ok(()));
    assert_eq!(h.ack("q", run[2].receipt).await, Ok(()));
    // The run is over: a2, which came back, goes first, before a4 (still delayed).
    let again = h.claim_runs("q", 10).await.messages;
    assert_eq!(bodies(&again), ["a2"]);
    assert_eq!(again[0].attempts, 2);
    // A run that runs out comes back whole, in order.
    h.advance(10_000);
    h.give_back_all("q", &again).await;
    let whole = h.claim_runs("q", 10).await.messages;
    assert_eq!(bodies(&whole), ["a2", "a4"]);
    h.advance(whole[0].lease_expires_at_ms - h.now() + 1);
    let back = h.claim_runs("q", 10).await.messages;
    assert_eq!(
        bodies(&back),
        ["a2", "a4"],
        "both came back when their lease ran out"
    );
    assert_eq!(back.iter().map(|m| m.attempts).collect::<Vec<_>>(), [4, 2]);
}
