//! Lookups of one message: by id, by idempotency key, with its body.

use sluice_core::message::{MessageState, NewMessage};
use sluice_core::queue::Ordering;
use sluice_core::store::{
    AckParams, BrowseCursor, BrowseQuery, BrowseState, MessageGetParams, MessageRef,
};
use uuid::Uuid;

use crate::Harness;

/// A message is found by id and by idempotency key through the queue it was sent to, with
/// what it was enqueued with and where it is; its body and headers can be read back; a lookup
/// through another queue, of an unknown id or an unknown key finds nothing.
pub async fn lookups_find_messages_by_id_and_idempotency_key(h: Harness) {
    h.queue("q", |c| c.ordering = sluice_core::queue::Ordering::PerKey)
        .await;
    h.queue("other", |_| {}).await;
    let enqueued_at = h.now();
    let id = h
        .enqueue(
            "q",
            vec![NewMessage {
                idempotency_key: Some("invoice-42".into()),
                key: Some("customer-1".into()),
                priority: 7,
                ..h.message("{\"total\":12}")
            }],
        )
        .await[0]
        .message_id;
    let status = h.status_of("q", id).await;
    assert_eq!(status.message_id, id);
    assert_eq!(
        (status.queue.as_str(), status.state),
        ("q", MessageState::Ready)
    );
    assert_eq!(status.idempotency_key.as_deref(), Some("invoice-42"));
    assert_eq!(status.key.as_deref(), Some("customer-1"));
    assert_eq!((status.priority, status.attempts), (7, 0));
    assert_eq!(status.enqueued_at_ms, enqueued_at);
    assert_eq!(status.first_received_at_ms, None);
    let by_key = h
        .status("q", MessageRef::IdempotencyKey("invoice-42".into()))
        .await;
    assert_eq!(by_key.map(|s| s.message_id), Some(id));

    h.advance(100);
    let leased = h.claim_for("q", 1, 5_000).await.messages.remove(0);
    let status = h.status_of("q", id).await;
    assert_eq!(status.state, MessageState::InFlight);
    assert_eq!(status.attempts, 1);
    assert_eq!(status.first_received_at_ms, Some(enqueued_at + 100));
    assert_eq!(status.lease_expires_at_ms, Some(leased.lease_expires_at_ms));

    let body = h
        .store
        .message_body(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(id),
            now_ms: h.now(),
        })
        .await
        .unwrap()
        .expect("the message with its body");
    let payload = body.payload.expect("a live message has its body");
    assert_eq!(payload.body_bytes, b"{\"total\":12}");
    assert_eq!(payload.headers["origin"], "conformance {\"total\":12}");

    assert!(
        h.status("other", MessageRef::Id(id)).await.is_none(),
        "not through another queue"
    );
    assert!(
        h.status("q", MessageRef::Id(Uuid::now_v7()))
            .await
            .is_none()
    );
    assert!(
        h.status("q", MessageRef::IdempotencyKey("nope".into()))
            .await
            .is_none()
    );
    assert_eq!(h.ack("q", leased.receipt).await, Ok(()));
    let done = h.status_of("q", id).await;
    assert_eq!(done.state, MessageState::Acked);
    assert_eq!(done.acked_at_ms, Some(h.now()));
}

/// An ack's result is kept with the message: a lookup by id or by idempotency key answers with
/// it, as does the enqueue of a duplicate's key (its first message, acked).
pub async fn acks_keep_their_result(h: Harness) {
    h.queue("q", |_| {}).await;
    let id = h
        .enqueue(
            "q",
            vec![NewMessage {
                idempotency_key: Some("charge-1".into()),
                ..h.message("charge")
            }],
        )
        .await[0]
        .message_id;
    let receipt = h.claim("q", 1).await.messages[0].receipt;
    let acked = h
        .store
        .message_ack(AckParams {
            queue: "q".into(),
            receipts: vec![receipt],
            result: Some("{\"charged\":true}".into()),
            delivery: None,
            now_ms: h.now(),
        })
        .await
        .unwrap();
    assert_eq!(acked, [Ok(())]);
    let by_id = h.status_of("q", id).await;
    assert_eq!(by_id.result.as_deref(), Some("{\"charged\":true}"));
    let by_key = h
        .status("q", MessageRef::IdempotencyKey("charge-1".into()))
        .await
        .unwrap();
    assert_eq!((by_key.message_id, by_key.state), (id, MessageState::Acked));
    assert_eq!(by_key.result.as_deref(), Some("{\"charged\":true}"));
}

/// Browsing pages through each state of a queue in the order dispatch takes from it (ready by
/// priority then enqueue order; waiting behind their lane; delayed; in flight) with a cursor
/// that neither skips nor repeats, and counts every state.
pub async fn browse_pages_each_state_in_dispatch_order(h: Harness) {
    h.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let message = |body: &str, priority, key: Option<&str>, delay_ms| NewMessage {
        priority,
        key: key.map(str::to_owned),
        visible_at_ms: h.now() + delay_ms,
        ..h.message(body)
    };
    let ids: Vec<Uuid> = h
        .enqueue(
            "q",
            vec![
                message("low", 0, None, 0),
                message("high", 3, None, 0),
                message("a1", 0, Some("a"), 0),
                message("a2", 0, Some("a"), 0),
                message("later", 0, None, 5_000),
            ],
        )
        .await
        .iter()
        .map(|e| e.message_id)
        .collect();
    let leased = h.claim("q", 1).await.messages;
    assert_eq!(
        leased[0].message_id, ids[1],
        "the highest priority went first"
    );
    let browse = |state, after: Option<BrowseCursor>| BrowseQuery {
        queue: "q".into(),
        state,
        after,
        limit: 1,
        search: Default::default(),
        now_ms: h.now(),
    };
    let mut pages = 0;
    for (state, expected) in [
        (BrowseState::Ready, vec![ids[0], ids[2]]),
        (BrowseState::Waiting, vec![ids[3]]),
        (BrowseState::Delayed, vec![ids[4]]),
        (BrowseState::InFlight, vec![ids[1]]),
    ] {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = h.store.message_browse(browse(state, after)).await.unwrap();
            pages += 1;
            assert!(page.messages.len() <= 1, "the limit holds");
            assert_eq!(
                (
                    page.counts.ready,
                    page.counts.waiting,
                    page.counts.delayed,
                    page.counts.in_flight
                ),
                (2, 1, 1, 1)
            );
            seen.extend(page.messages.iter().map(|m| m.status.message_id));
            match page.next {
                Some(next) if seen.len() <= expected.len() => after = Some(next),
                Some(_) => panic!("{state:?}: the cursor repeats: {seen:?}"),
                None => break,
            }
        }
        assert_eq!(seen, expected, "{state:?} in dispatch order");
    }
    assert!(pages >= 5, "pages of one");
    let in_flight = h
        .store
        .message_browse(browse(BrowseState::InFlight, None))
        .await
        .unwrap();
    assert_eq!(in_flight.messages[0].leased_at_ms, Some(h.now()));
    assert_eq!(in_flight.messages[0].status.state, MessageState::InFlight);
}

/// The first bytes of a body are read alone (previews of big bodies, issue 30 finding 12):
/// the prefix is the body's start, of the body's kind, with no headers; a body shorter than
/// the prefix comes whole; a kept acked message has its prefix until its keep ends. Fresh
/// from the writer and after a reopen (read from disk) alike.
pub async fn a_body_prefix_is_the_bodys_first_bytes(h: Harness) {
    h.queue("q", |_| {}).await;
    h.queue("kept", |c| c.keep_acked_ms = 60_000).await;
    let long = format!("\"{}\"", "x".repeat(100_000));
    let ids = h.send("q", &[long.as_str(), "{\"a\":1}"]).await;
    let kept = h.send("kept", &[long.as_str()]).await[0];
    let receipt = h.claim("kept", 1).await.messages.remove(0).receipt;
    let results = h
        .store
        .message_ack(AckParams {
            queue: "kept".into(),
            receipts: vec![receipt],
            result: None,
            delivery: None,
            now_ms: h.now(),
        })
        .await
        .unwrap();
    assert_eq!(results, [Ok(())]);
    let prefix_of = |store: std::sync::Arc<dyn sluice_core::store::Store>,
                     queue: &'static str,
                     id: Uuid,
                     max: usize,
                     now_ms: i64| async move {
        store
            .message_body_prefix(
                MessageGetParams {
                    queue: queue.into(),
                    by: MessageRef::Id(id),
                    now_ms,
                },
                max,
            )
            .await
            .unwrap()
            .expect("the message")
            .payload
    };
    let (ids, prefix_of) = (&ids, &prefix_of);
    let check = |store: std::sync::Arc<dyn sluice_core::store::Store>, now_ms: i64| async move {
        let payload = prefix_of(store.clone(), "q", ids[0], 10, now_ms)
            .await
            .expect("a body");
        assert_eq!(payload.body_bytes, b"\"xxxxxxxxx");
        assert_eq!(payload.body_kind, sluice_core::message::BodyKind::Json);
        assert!(payload.headers.is_empty());
        let payload = prefix_of(store.clone(), "q", ids[1], 10, now_ms)
            .await
            .expect("a body");
        assert_eq!(payload.body_bytes, b"{\"a\":1}");
        let payload = prefix_of(store, "kept", kept, 4, now_ms)
            .await
            .expect("kept");
        assert_eq!(payload.body_bytes, b"\"xxx");
    };
    check(h.store.clone(), h.now()).await;
    let store = h.reopen().await;
    check(store.clone(), h.now()).await;
    h.advance(60_000);
    assert!(
        prefix_of(store, "kept", kept, 4, h.now()).await.is_none(),
        "the keep ended"
    );
}
