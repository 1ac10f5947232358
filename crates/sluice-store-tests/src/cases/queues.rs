//! Queues: creation with their dead-letter queue, definitions kept whole, and errors for
//! queues that do not exist.

use std::sync::Arc;

use sluice_core::queue::{Backoff, MessageSchema, OnExpire, Ordering, QueueConfig, RateLimit};
use sluice_core::store::{
    AckParams, ClaimParams, EnqueueParams, MessageGetParams, MessageRef, PurgeScope, QueuePut,
    QueuePutParams, StoreError,
};
use sluice_wire::{PushSpec, SecretRef};
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
            lane_runs: false,
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
    not_found(
        h.store
            .queue_purge("nowhere", PurgeScope::Waiting, now)
            .await
            .map(drop),
        "purge",
    );
    not_found(h.store.queue_pause("nowhere", true).await, "pause");
    not_found(
        h.store.queue_push_pause("nowhere", true).await,
        "push pause",
    );
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

/// A definition is kept whole: every setting, put to values none of them has by default, reads
/// back equal from `queue_get`, `queue_config` and `queue_list`; putting it again changes
/// nothing; a changed one replaces it. A dead-letter queue of another name is created with it,
/// and a queue that names itself as its dead-letter queue gets none created. Deleting a queue
/// takes it out of every lookup.
pub async fn queue_definitions_are_kept_whole(h: Harness) {
    let mut config = QueueConfig::defaults_for("billing");
    config.visibility_timeout_ms = 12_345;
    config.max_attempts = 7;
    config.backoff = Backoff {
        initial_ms: 250,
        max_ms: 9_000,
        factor: 1.5,
        jitter: false,
    };
    config.dead_letter_queue = Some("billing-failures".into());
    config.max_message_bytes = 4_096;
    config.ordering = Ordering::PerKey;
    config.dedup_window_ms = 60_000;
    config.max_age_ms = 3_600_000;
    config.on_expire = OnExpire::DeadLetter;
    config.max_depth = Some(1_000);
    config.max_in_flight = Some(3);
    config.rate_limit = Some(RateLimit {
        per_second: 0.1,
        burst: 2,
    });
    config.schema = Some(Arc::new(
        MessageSchema::compile(serde_json::json!({
            "type": "object",
            "required": ["invoice"],
            "properties": {"invoice": {"type": "integer", "minimum": 1}},
        }))
        .expect("the schema compiles"),
    ));
    config.push = Some(Arc::new(PushSpec {
        url: "http://127.0.0.1:9/hook".into(),
        method: Some("PUT".into()),
        headers: Some([("x-team".to_owned(), "billing".to_owned())].into()),
        timeout_ms: Some(2_500),
        transform: Some("{invoice: .body.invoice}".into()),
        signing_secret: Some(SecretRef {
            env: Some("BILLING_SECRET".into()),
            file: None,
        }),
        retry_client_errors: Some(true),
        concurrency: Some(4),
        secret_path: Some(false),
    }));
    config.delay_ms = 1_500;
    config.tags = [("team".to_owned(), "money".to_owned())].into();
    config.protocol_attributes = [("sqs.Policy".to_owned(), "{}".to_owned())].into();
    let put = |config: &QueueConfig| {
        h.store.queue_put(QueuePutParams {
            name: "billing".into(),
            config: config.clone(),
            now_ms: h.now(),
        })
    };

    assert_eq!(
        put(&config).await.unwrap(),
        QueuePut {
            created: true,
            dead_letter_created: true
        }
    );
    let info = h.store.queue_get("billing", h.now()).await.unwrap();
    assert_eq!(info.name, "billing");
    assert_eq!(info.config, config, "every setting reads back as put");
    assert_eq!(*h.store.queue_config("billing").await.unwrap(), config);
    assert_eq!(
        info.depth.ready + info.depth.delayed + info.depth.in_flight,
        0
    );
    assert!(!info.depth.paused);
    assert_eq!(info.dead_letter_depth, Some(0));
    let dlq = h
        .store
        .queue_get("billing-failures", h.now())
        .await
        .unwrap();
    assert_eq!(
        dlq.config,
        QueueConfig::for_dead_letter_queue("billing-failures")
    );
    assert!(
        h.store
            .queue_is_dead_letter_queue("billing-failures")
            .await
            .unwrap()
    );

    assert_eq!(
        put(&config).await.unwrap(),
        QueuePut {
            created: false,
            dead_letter_created: false
        },
        "the same definition again"
    );
    let mut changed = config.clone();
    changed.rate_limit = None;
    changed.schema = None;
    changed.push = None;
    changed.tags.clear();
    changed.max_depth = None;
    put(&changed).await.unwrap();
    assert_eq!(*h.store.queue_config("billing").await.unwrap(), changed);

    let mut own = QueueConfig::defaults_for("loop");
    own.dead_letter_queue = Some("loop".into());
    let looped = h
        .store
        .queue_put(QueuePutParams {
            name: "loop".into(),
            config: own.clone(),
            now_ms: h.now(),
        })
        .await
        .unwrap();
    assert_eq!(
        looped,
        QueuePut {
            created: true,
            dead_letter_created: false
        },
        "a queue that is its own dead-letter queue"
    );
    let listed: Vec<(String, QueueConfig)> = h
        .store
        .queue_list(h.now())
        .await
        .unwrap()
        .into_iter()
        .map(|info| (info.name, info.config))
        .collect();
    assert_eq!(
        listed,
        [
            ("billing".to_owned(), changed),
            (
                "billing-failures".to_owned(),
                QueueConfig::for_dead_letter_queue("billing-failures")
            ),
            ("loop".to_owned(), own),
        ],
        "listed by name, whole"
    );

    assert_eq!(h.store.queue_delete("billing").await.unwrap(), 0);
    for lookup in [
        h.store.queue_get("billing", h.now()).await.map(drop),
        h.store.queue_config("billing").await.map(drop),
        h.store.queue_delete("billing").await.map(drop),
        h.store.queue_pause("billing", true).await,
    ] {
        assert!(
            matches!(&lookup, Err(StoreError::QueueNotFound(name)) if name == "billing"),
            "{lookup:?}"
        );
    }
    assert!(
        !h.store
            .queue_is_dead_letter_queue("billing-failures")
            .await
            .unwrap(),
        "nothing names it any more"
    );
    h.store.queue_delete("billing-failures").await.unwrap();
}

/// Pausing is kept with the queue and reported by its depth; a resume lifts it.
pub async fn pauses_are_kept_and_reported(h: Harness) {
    h.queue("q", |_| {}).await;
    h.store.queue_pause("q", true).await.unwrap();
    assert!(h.store.queue_get("q", h.now()).await.unwrap().depth.paused);
    let listed = h.store.queue_list(h.now()).await.unwrap();
    assert!(
        listed
            .iter()
            .find(|info| info.name == "q")
            .unwrap()
            .depth
            .paused
    );
    h.store.queue_pause("q", false).await.unwrap();
    assert!(!h.store.queue_get("q", h.now()).await.unwrap().depth.paused);
}

/// A push pause is kept with the queue and reported as `is_push_paused` (by `queue_get` and
/// `queue_list`), apart from the delivery pause: consumers still receive. A new definition keeps
/// it, a restart keeps it, a resume lifts it, and deleting the queue ends it (a queue made again
/// under the name starts with push running).
pub async fn push_pauses_are_kept_reported_and_survive_a_reopen(h: Harness) {
    async fn push_paused(store: &dyn crate::Store, now: crate::Millis) -> Vec<(String, bool)> {
        let listed = store.queue_list(now).await.unwrap();
        for info in &listed {
            let got = store.queue_get(&info.name, now).await.unwrap();
            assert_eq!(got.is_push_paused, info.is_push_paused, "{}", info.name);
        }
        listed
            .into_iter()
            .map(|info| (info.name, info.is_push_paused))
            .collect()
    }
    let pairs = |paused: [bool; 4]| {
        ["held", "held.dlq", "other", "other.dlq"]
            .into_iter()
            .zip(paused)
            .map(|(name, paused)| (name.to_owned(), paused))
            .collect::<Vec<_>>()
    };
    h.queue("held", |_| {}).await;
    h.queue("other", |_| {}).await;
    assert_eq!(
        push_paused(h.store.as_ref(), h.now()).await,
        pairs([false; 4])
    );
    h.store.queue_push_pause("held", true).await.unwrap();
    h.store.queue_push_pause("held", true).await.unwrap(); // pausing again is no error
    assert_eq!(
        push_paused(h.store.as_ref(), h.now()).await,
        pairs([true, false, false, false])
    );
    let info = h.store.queue_get("held", h.now()).await.unwrap();
    assert!(!info.depth.paused, "a push pause is not a delivery pause");
    h.send("held", &["still received"]).await;
    assert_eq!(h.claim_bodies("held", 10).await, ["still received"]);
    // A new definition (a config file applied again at a start) keeps the pause.
    h.queue("held", |config| config.visibility_timeout_ms = 45_000)
        .await;
    assert!(
        h.store
            .queue_get("held", h.now())
            .await
            .unwrap()
            .is_push_paused
    );

    let store = h.reopen().await;
    assert_eq!(
        push_paused(store.as_ref(), h.now()).await,
        pairs([true, false, false, false]),
        "kept across a reopen"
    );
    store.queue_push_pause("held", false).await.unwrap();
    store.queue_push_pause("other", true).await.unwrap();
    assert_eq!(
        push_paused(store.as_ref(), h.now()).await,
        pairs([false, false, true, false])
    );
    // Deleting the queue ends its pause.
    store.queue_delete("other").await.unwrap();
    store
        .queue_put(QueuePutParams {
            name: "other".into(),
            config: QueueConfig::defaults_for("other"),
            now_ms: h.now(),
        })
        .await
        .unwrap();
    assert_eq!(
        push_paused(store.as_ref(), h.now()).await,
        pairs([false; 4])
    );
    store.close().await.unwrap();
}
