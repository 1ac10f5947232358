//! Flow control: max_depth, max_in_flight, rate limits.

use sluice_core::queue::RateLimit;
use sluice_core::store::StoreError;

use crate::Harness;

/// A queue at `max_depth` refuses a whole batch that would overshoot it (storing none of it)
/// with the depth, the limit, the size of the refused batch and the one rule's `Retry-After`
/// (`rules::backpressure`); every message held counts,
/// leased ones too; acks make room again.
pub async fn max_depth_refuses_whole_batches(h: Harness) {
    h.queue("q", |c| c.max_depth = Some(3)).await;
    h.send("q", &["1", "2"]).await;
    let leased = h.claim("q", 1).await.messages.remove(0);
    let refused = h
        .try_enqueue("q", vec![h.message("3"), h.message("4")])
        .await
        .expect_err("a batch of 2 does not fit in 1 free place");
    match refused {
        StoreError::QueueFull {
            queue,
            depth,
            max_depth,
            refused,
            retry_after_s,
        } => {
            assert_eq!((queue.as_str(), depth, max_depth, refused), ("q", 2, 3, 2));
            // Nothing acked yet: every store answers with the one rule's 10 s.
            assert_eq!(
                retry_after_s,
                sluice_core::rules::backpressure::queue_full_retry_after_s(2, 0.0)
            );
        }
        other => panic!("refused with {other:?}"),
    }
    let depth = h.store.queue_get("q", h.now()).await.unwrap().depth;
    assert_eq!(
        depth.ready + depth.in_flight,
        2,
        "nothing of the refused batch was stored"
    );
    assert_eq!(depth.counters.rejected, 2);
    h.send("q", &["3"]).await;
    assert!(matches!(
        h.try_enqueue("q", vec![h.message("4")]).await,
        Err(StoreError::QueueFull { depth: 3, .. })
    ));
    assert_eq!(h.ack("q", leased.receipt).await, Ok(()));
    h.send("q", &["4"]).await;
    assert_eq!(h.claim_bodies("q", 10).await, ["2", "3", "4"]);
}

/// No more than `max_in_flight` leases are out at once, however many a claim asks for; an ack
/// or nack frees a place.
pub async fn max_in_flight_caps_the_leases_out(h: Harness) {
    h.queue("q", |c| c.max_in_flight = Some(2)).await;
    h.send("q", &["1", "2", "3", "4", "5"]).await;
    let first = h.claim("q", 10).await.messages;
    assert_eq!(first.len(), 2);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "the limit is reached"
    );
    assert_eq!(h.ack("q", first[0].receipt).await, Ok(()));
    assert_eq!(h.claim_bodies("q", 10).await, ["3"], "one place was freed");
    h.nack("q", first[1].receipt, "later", Some(60_000), false)
        .await
        .unwrap();
    assert_eq!(h.claim_bodies("q", 10).await, ["4"]);
    assert!(h.claim("q", 10).await.messages.is_empty());
    assert_eq!(
        h.store
            .queue_get("q", h.now())
            .await
            .unwrap()
            .depth
            .in_flight,
        2
    );
}

/// A rate limit is a token bucket: a burst at once, then `per_second` deliveries a second,
/// never more than the burst saved up; a claim held back by it says when the next token comes.
pub async fn rate_limits_pace_deliveries_as_a_token_bucket(h: Harness) {
    h.queue("q", |c| {
        c.rate_limit = Some(RateLimit {
            per_second: 2.0,
            burst: 3,
        });
        c.visibility_timeout_ms = 120_000;
    })
    .await;
    let bodies: Vec<String> = (0..12).map(|n| n.to_string()).collect();
    let bodies: Vec<&str> = bodies.iter().map(String::as_str).collect();
    h.send("q", &bodies).await;
    assert_eq!(h.claim("q", 10).await.messages.len(), 3, "the burst");
    let held = h.claim("q", 10).await;
    assert!(held.messages.is_empty(), "the bucket is empty");
    let next = held.next_change_at_ms.expect("when the next token comes");
    assert!(
        next <= h.now() + 500,
        "told to wait until {next}, past the next token"
    );
    h.advance(499);
    assert!(
        h.claim("q", 10).await.messages.is_empty(),
        "no token before its time"
    );
    h.advance(1);
    assert_eq!(
        h.claim("q", 10).await.messages.len(),
        1,
        "2 a second: one per 500 ms"
    );
    h.advance(1_000);
    assert_eq!(h.claim("q", 10).await.messages.len(), 2);
    h.advance(60_000);
    assert_eq!(
        h.claim("q", 10).await.messages.len(),
        3,
        "no more than the burst is saved"
    );
    assert!(h.claim("q", 10).await.messages.is_empty());
}
