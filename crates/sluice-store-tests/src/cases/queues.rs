//! Queues: creation with their dead-letter queue, and errors for queues that do not exist.

use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::{
    AckParams, ClaimParams, EnqueueParams, MessageGetParams, MessageRef, QueuePut, QueuePutParams,
    StoreError,
};
use uuid::Uuid;

use crate::Harness;

/// Creating a queue creates its dead-letter queue (configured never to give up on a message)
/// and says so; putting it again updates it in place; a dead-letter queue in use cannot be
/// deleted from under its source queue, which can be deleted (with its messages) itself.
pub async fn queue_put_creates_the_dead_letter_queue_and_guards_it(h: Harness) {
    let put = |config: QueueConfig| QueuePutParams {
        name: "orders".into(),
        config,
        now_ms: h.now(),
    };
    let created = h
        .store
        .queue_put(put(QueueConfig::defaults_for("orders")))
        .await
        .unwrap();
    assert_eq!(
        created,
        QueuePut {
            created: true,
            dead_letter_created: true
        }
    );
    let dlq = h.store.queue_get("orders.dlq", h.now()).await.unwrap();
    assert_eq!(
        dlq.config.dead_letter_queue, None,
        "a DLQ has no DLQ of its own"
    );
    assert_eq!(
        dlq.config.max_attempts, 0,
        "a DLQ never gives up on a message"
    );
    assert!(
        h.store
            .queue_is_dead_letter_queue("orders.dlq")
            .await
            .unwrap()
    );
    assert!(!h.store.queue_is_dead_letter_queue("orders").await.unwrap());

    let mut changed = QueueConfig::defaults_for("orders");
    changed.max_attempts = 9;
    let updated = h.store.queue_put(put(changed)).await.unwrap();
    assert_eq!(
        updated,
        QueuePut {
            created: false,
            dead_letter_created: false
        }
    );
    let info = h.store.queue_get("orders", h.now()).await.unwrap();
    assert_eq!(
        info.config.max_attempts, 9,
        "the update is what the store keeps"
    );
    assert_eq!(info.dead_letter_depth, Some(0));
    let names: Vec<String> = h
        .store
        .queue_list(h.now())
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.name)
        .collect();
    assert_eq!(names, ["orders", "orders.dlq"], "listed by name");

    assert!(matches!(
        h.store.queue_delete("orders.dlq").await,
        Err(StoreError::Conflict(_))
    ));
    h.send("orders", &["a", "b"]).await;
    assert_eq!(h.store.queue_delete("orders").await.unwrap(), 2);
    assert!(matches!(
        h.store.queue_get("orders", h.now()).await,
        Err(StoreError::QueueNotFound(name)) if name == "orders"
    ));
    h.store.queue_delete("orders.dlq").await.unwrap();
}

/// Every message operation on a queue that does not exist fails with `QueueNotFound` naming
/// it, rather than creating the queue or answering with nothing.
pub async fn unknown_queues_are_refused(h: Harness) {
    let now = h.now();
    let not_found = |result: Result<(), StoreError>, what: &str| match result {
        Err(StoreError::QueueNotFound(name)) => assert_eq!(name, "nowhere", "{what}"),
        other => panic!("{what} on an unknown queue: {other:?}"),
    };
    let enqueue = h
        .store
        .message_enqueue(EnqueueParams {
            queue: "nowhere".into(),
            messages: vec![h.message("x")],
            now_ms: now,
        })
        .await;
    not_found(enqueue.map(drop), "enqueue");
    let claim = h
        .store
        .message_claim(ClaimParams {
            queue: "nowhere".into(),
            max: 1,
            lease_ms: None,
            now_ms: now,
        })
        .await;
    not_found(claim.map(drop), "claim");
    let ack = h
        .store
        .message_ack(AckParams {
            queue: "nowhere".into(),
            receipts: Vec::new(),
            result: None,
            delivery: None,
            now_ms: now,
        })
        .await;
    not_found(ack.map(drop), "ack");
    let get = h
        .store
        .message_get(MessageGetParams {
            queue: "nowhere".into(),
            by: MessageRef::Id(Uuid::now_v7()),
            now_ms: now,
        })
        .await;
    not_found(get.map(drop), "lookup");
    not_found(
        h.store.queue_get("nowhere", now).await.map(drop),
        "queue_get",
    );
    not_found(h.store.queue_purge("nowhere", now).await.map(drop), "purge");
    not_found(h.store.queue_pause("nowhere", true).await, "pause");
    assert!(
        h.store.queue_list(now).await.unwrap().is_empty(),
        "nothing was created"
    );
}

/// A queue's ordering cannot change while it holds messages (its lanes would be rebuilt under
/// its consumers); once it is empty the change is taken.
pub async fn ordering_changes_are_refused_while_messages_are_queued(h: Harness) {
    h.queue("q", |_| {}).await;
    h.send("q", &["waiting"]).await;
    let put = |ordering: Ordering| {
        let mut config = QueueConfig::defaults_for("q");
        config.ordering = ordering;
        h.store.queue_put(QueuePutParams {
            name: "q".into(),
            config,
            now_ms: h.now(),
        })
    };
    let refused = put(Ordering::PerKey).await;
    assert!(
        refused.is_err(),
        "refused while a message waits: {refused:?}"
    );
    let info = h.store.queue_get("q", h.now()).await.unwrap();
    assert_eq!(info.config.ordering, Ordering::Unordered, "unchanged");
    let claim = h.claim("q", 1).await.messages;
    assert!(
        put(Ordering::PerKey).await.is_err(),
        "refused while a message is leased"
    );
    assert_eq!(h.ack("q", claim[0].receipt).await, Ok(()));
    put(Ordering::PerKey)
        .await
        .expect("taken once the queue is empty");
    let info = h.store.queue_get("q", h.now()).await.unwrap();
    assert_eq!(info.config.ordering, Ordering::PerKey);
}
