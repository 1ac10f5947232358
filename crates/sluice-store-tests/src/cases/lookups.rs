//! Lookups of one message: by id, by idempotency key, with its body.

use sluice_core::message::{MessageState, NewMessage};
use sluice_core::store::{MessageGetParams, MessageRef};
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
