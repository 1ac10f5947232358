//! The operations over a real store (SQLite, in a temporary directory): what the HTTP suite
//! proves through the server, checked here at the layer that owns it.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::message::BodyKind;
use sluice_core::queue::QueueConfig;
use sluice_core::store::{PurgeScope, QueuePutParams};
use sluice_core::{Clock, ManualClock, Store};
use sluice_ops::{
    AckRequest, EventOutcome, EventRequest, MessageRequest, Ops, PushAnswer, PushSettled,
    QueuePutRequest, ReceiveRequest, push_out_of_attempts, push_retry_delay_ms,
};
use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
use sluice_wire::{ErrorCode, PushSpec, QueueSpec};
use tokio_util::sync::CancellationToken;

struct Fixture {
    ops: Ops,
    store: Arc<dyn Store>,
    shutdown: Arc<CancellationToken>,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut options = SqliteOptions::new(dir.path());
    options.durability = Durability::Os;
    options.disk_reserve_bytes = 0;
    let clock = ManualClock::new(1_700_000_000_000);
    let store: Arc<dyn Store> =
        Arc::new(SharedSqliteStore::open(options, clock.now_ms()).expect("the store opens"));
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config: QueueConfig::defaults_for("q"),
            now_ms: clock.now_ms(),
        })
        .await
        .expect("the queue is defined");
    let shutdown = Arc::new(CancellationToken::new());
    let ops = Ops::new(store.clone(), Arc::new(clock), shutdown.clone());
    Fixture {
        ops,
        store,
        shutdown,
        _dir: dir,
    }
}

fn receive(max: i64, wait_ms: i64) -> ReceiveRequest {
    ReceiveRequest {
        lane_runs: false,
        queue: "q".into(),
        max: Some(max),
        wait_ms: Some(wait_ms),
        visibility_timeout_ms: None,
    }
}

async fn enqueue(ops: &Ops, body: &str) {
    let mut enqueue = ops.enqueue_to("q".into()).await.expect("the queue exists");
    enqueue
        .add(json_message(body), "")
        .expect("a valid message");
    ops.enqueue(enqueue).await.expect("stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_is_answered_by_the_enqueue_it_waits_for() {
    let fixture = fixture().await;
    let waiting = tokio::spawn({
        let ops = fixture.ops.clone();
        async move { ops.receive(receive(1, 10_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    enqueue(&fixture.ops, "1").await;
    let messages = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("answered before its deadline")
        .unwrap()
        .expect("received");
    assert_eq!(messages.len(), 1);
    let acked = fixture
        .ops
        .ack(AckRequest {
            queue: "q".into(),
            receipts: vec![messages[0].receipt.to_string()],
            result: None,
            then: Vec::new(),
        })
        .await
        .expect("acked");
    assert_eq!(acked.acked, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_on_a_missing_queue_is_refused_and_leaves_no_signal() {
    let fixture = fixture().await;
    let error = fixture
        .ops
        .receive(ReceiveRequest {
            lane_runs: false,
            queue: "nope".into(),
            ..receive(1, 5_000)
        })
        .await
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::QueueNotFound);
    assert!(
        fixture.store.notifier().is_empty(),
        "nothing kept for the name"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_long_poll_with_nothing() {
    let fixture = fixture().await;
    let waiting = tokio::spawn({
        let ops = fixture.ops.clone();
        async move { ops.receive(receive(1, 20_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    fixture.shutdown.cancel();
    let messages = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("answered at shutdown")
        .unwrap()
        .expect("an answer, not an error");
    assert!(messages.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_ends_once_the_last_message_is_acked() {
    let fixture = fixture().await;
    enqueue(&fixture.ops, "1").await;
    let messages = fixture.ops.receive(receive(1, 0)).await.expect("received");
    let draining = tokio::spawn({
        let ops = fixture.ops.clone();
        async move { ops.queue_drain("q", Some(10_000)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    fixture
        .ops
        .ack(AckRequest {
            queue: "q".into(),
            receipts: vec![messages[0].receipt.to_string()],
            result: None,
            then: Vec::new(),
        })
        .await
        .expect("acked");
    let drained = tokio::time::timeout(Duration::from_secs(5), draining)
        .await
        .expect("ended before its deadline")
        .unwrap()
        .expect("drained");
    assert!(drained.drained);
    assert!(drained.waited < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_carry_their_codes() {
    let fixture = fixture().await;
    let too_many = fixture.ops.receive(receive(0, 0)).await.unwrap_err();
    assert_eq!(too_many.code, ErrorCode::InvalidField);
    let malformed = fixture
        .ops
        .ack(AckRequest {
            queue: "q".into(),
            receipts: vec!["not-a-receipt".into()],
            result: None,
            then: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(malformed.code, ErrorCode::MalformedReceipt);
    let none = fixture
        .ops
        .ack(AckRequest {
            queue: "q".into(),
            receipts: vec![],
            result: None,
            then: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(none.code, ErrorCode::InvalidField);
}

/// Defines `name` from a spec, as a queue put would.
async fn define(store: &Arc<dyn Store>, name: &str, spec: QueueSpec) {
    let config = QueueConfig::defaults_for(name)
        .apply(&spec)
        .expect("a valid spec");
    store
        .queue_put(QueuePutParams {
            name: name.into(),
            config,
            now_ms: 1_700_000_000_000,
        })
        .await
        .expect("the queue is defined");
}

fn event(body: &str, id: Option<&str>) -> EventRequest {
    EventRequest {
        message: MessageRequest {
            id: id.map(str::to_owned),
            ..json_message(body)
        },
        schema_body: serde_json::from_str(body).ok(),
        received: body.as_bytes().to_vec(),
    }
}

/// An event the queue's schema refuses is kept in the dead-letter queue with the violation,
/// not bounced; one that passes is enqueued, and a repeated delivery is a duplicate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_failing_the_schema_is_dead_lettered_by_ops() {
    let fixture = fixture().await;
    let spec = QueueSpec {
        dead_letter_queue: Some("events.dlq".into()),
        schema: Some(serde_json::json!({"type": "object", "required": ["id"]})),
        ..QueueSpec::default()
    };
    define(&fixture.store, "events", spec).await;
    let to = fixture.ops.enqueue_to("events".into()).await.unwrap();
    assert!(to.has_schema());
    let outcome = fixture
        .ops
        .enqueue_event(to, event("{}", None))
        .await
        .unwrap();
    let EventOutcome::DeadLettered(kept) = outcome else {
        panic!("not dead-lettered: {outcome:?}");
    };
    assert!(
        kept.reason.starts_with("the body fails the queue's schema"),
        "{}",
        kept.reason
    );
    let dead = fixture
        .store
        .queue_get("events.dlq", 1_700_000_000_000)
        .await
        .unwrap();
    assert_eq!(dead.depth.ready, 1);

    let first = {
        let to = fixture.ops.enqueue_to("events".into()).await.unwrap();
        fixture
            .ops
            .enqueue_event(to, event(r#"{"id": 1}"#, Some("d-1")))
            .await
            .unwrap()
    };
    let again = {
        let to = fixture.ops.enqueue_to("events".into()).await.unwrap();
        fixture
            .ops
            .enqueue_event(to, event(r#"{"id": 1}"#, Some("d-1")))
            .await
            .unwrap()
    };
    let (
        EventOutcome::Enqueued {
            message_id: a,
            created: true,
            ..
        },
        EventOutcome::Enqueued {
            message_id: b,
            created: false,
            state,
            ..
        },
    ) = (&first, &again)
    else {
        panic!("not a first delivery and a duplicate: {first:?}, {again:?}");
    };
    assert_eq!(a, b);
    assert_eq!(
        *state,
        Some(sluice_core::message::MessageState::Ready),
        "a duplicate says where the first is"
    );
}

/// A message larger than the queue takes is dead-lettered; with no dead-letter queue, the
/// event is refused with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_event_is_dead_lettered_or_refused_without_a_dead_letter_queue() {
    let fixture = fixture().await;
    let spec = QueueSpec {
        dead_letter_queue: Some("small.dlq".into()),
        max_message_bytes: Some(1024),
        ..QueueSpec::default()
    };
    define(&fixture.store, "small", spec).await;
    let big = format!("\"{}\"", "x".repeat(2000));
    let to = fixture.ops.enqueue_to("small".into()).await.unwrap();
    let outcome = fixture
        .ops
        .enqueue_event(to, event(&big, None))
        .await
        .unwrap();
    let EventOutcome::DeadLettered(kept) = outcome else {
        panic!("not dead-lettered: {outcome:?}");
    };
    assert!(
        kept.reason.contains("the queue accepts at most 1024"),
        "{}",
        kept.reason
    );

    let none = QueueSpec {
        dead_letter_queue: Some(String::new()),
        ..QueueSpec::default()
    };
    define(&fixture.store, "lone", none).await;
    let to = fixture.ops.enqueue_to("lone".into()).await.unwrap();
    let refused = fixture
        .ops
        .dead_letter_event(to, b"{".to_vec(), Default::default(), "not JSON".into())
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidField);
    assert!(
        refused.message.contains("no dead-letter queue"),
        "{}",
        refused.message
    );
}

fn put(name: &str, spec: QueueSpec) -> QueuePutRequest {
    QueuePutRequest {
        name: name.into(),
        spec,
    }
}

fn any_push(_: &PushSpec) -> Result<(), String> {
    Ok(())
}

/// A put creates the queue and its dead-letter queue, updates only the fields given, and
/// refuses a bad definition with the field named; delete removes the queue but not its
/// dead-letter queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_definitions_are_checked_created_updated_and_deleted() {
    let fixture = fixture().await;
    let ops = &fixture.ops;
    let spec = QueueSpec {
        max_attempts: Some(3),
        ..QueueSpec::default()
    };
    let created = ops.queue_put(put("jobs", spec), any_push).await.unwrap();
    assert!(created.created);
    assert_eq!(created.queue.config.max_attempts, 3);
    let dlq = created
        .queue
        .config
        .dead_letter_queue
        .clone()
        .expect("a dead-letter queue");
    assert!(
        ops.queue_get(&dlq).await.is_ok(),
        "the dead-letter queue exists"
    );

    let spec = QueueSpec {
        visibility_timeout_ms: Some(5_000),
        ..QueueSpec::default()
    };
    let updated = ops.queue_put(put("jobs", spec), any_push).await.unwrap();
    assert!(!updated.created);
    assert_eq!(
        updated.queue.config.max_attempts, 3,
        "fields not given are kept"
    );

    let invalid = QueueSpec {
        visibility_timeout_ms: Some(0),
        ..QueueSpec::default()
    };
    let refused = ops
        .queue_put(put("jobs", invalid), any_push)
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidField);
    assert!(
        refused.message.contains("visibility_timeout_ms"),
        "{}",
        refused.message
    );
    let bad_name = ops
        .queue_put(put("no spaces", QueueSpec::default()), any_push)
        .await
        .unwrap_err();
    assert_eq!(bad_name.code, ErrorCode::InvalidField);
    let own = QueueSpec {
        dead_letter_queue: Some("jobs".into()),
        ..QueueSpec::default()
    };
    let refused = ops.queue_put(put("jobs", own), any_push).await.unwrap_err();
    assert!(
        refused.message.starts_with("dead_letter_queue:"),
        "{}",
        refused.message
    );

    let names = |queues: Vec<sluice_core::store::QueueInfo>| -> Vec<String> {
        queues.into_iter().map(|q| q.name).collect()
    };
    let all = names(ops.queue_list(&sluice_ops::Anyone).await.unwrap());
    assert!(
        all.contains(&"jobs".to_owned()) && all.contains(&dlq),
        "{all:?}"
    );
    // A caller sees only the queues it may read.
    struct OnlyJobs;
    impl sluice_ops::Caller for OnlyJobs {
        fn name(&self) -> &str {
            "team-jobs"
        }
        fn is_admin(&self) -> bool {
            false
        }
        fn may_read(&self, queue: &str) -> bool {
            queue == "jobs"
        }
        fn may_manage(&self, queue: &str) -> bool {
            queue == "jobs"
        }
    }
    assert_eq!(names(ops.queue_list(&OnlyJobs).await.unwrap()), ["jobs"]);
    let deleted = ops
        .queue_delete(&OnlyJobs, "jobs", sluice_ops::OnDelete::DeleteDeadLetters)
        .await
        .unwrap();
    assert_eq!(deleted, sluice_ops::QueueDeleted::default());
    assert_eq!(
        ops.queue_get("jobs").await.unwrap_err().code,
        ErrorCode::QueueNotFound
    );
    assert!(
        ops.queue_get(&dlq).await.is_ok(),
        "a caller who may not delete the dead-letter queue leaves it"
    );
}

/// Deleting a queue deletes its dead-letter queue and its dead letters too, unless asked to
/// keep them or another queue still dead-letters into it (issue 31: orphan `.dlq` queues piled
/// up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_queue_deletes_its_own_dead_letter_queue() {
    use sluice_ops::{Anyone, OnDelete, QueueDeleted};
    let fixture = fixture().await;
    let ops = &fixture.ops;
    let any_push = |_: &PushSpec| Ok(());
    let put = |name: &str, spec: QueueSpec| QueuePutRequest {
        name: name.into(),
        spec,
    };
    let shared = |dlq: &str| QueueSpec {
        dead_letter_queue: Some(dlq.into()),
        ..QueueSpec::default()
    };
    for (name, spec) in [
        ("plain", QueueSpec::default()),
        ("kept", QueueSpec::default()),
        ("a", shared("shared")),
        ("b", shared("shared")),
    ] {
        ops.queue_put(put(name, spec), any_push).await.unwrap();
    }
    let exists = |name: &'static str| async move { ops.queue_get(name).await.is_ok() };

    let deleted = ops
        .queue_delete(&Anyone, "plain", OnDelete::default())
        .await
        .unwrap();
    assert_eq!(
        deleted,
        QueueDeleted {
            messages_removed: 0,
            dead_letter_queue: Some("plain.dlq".into()),
            dead_letters_removed: 0,
        }
    );
    assert!(!exists("plain.dlq").await);

    let deleted = ops
        .queue_delete(&Anyone, "kept", OnDelete::KeepDeadLetters)
        .await
        .unwrap();
    assert_eq!(deleted.dead_letter_queue, None);
    assert!(exists("kept.dlq").await);

    // Shared: it stays while another queue uses it, and goes with the last.
    let deleted = ops
        .queue_delete(&Anyone, "a", OnDelete::default())
        .await
        .unwrap();
    assert_eq!(deleted.dead_letter_queue, None);
    assert!(exists("shared").await);
    let deleted = ops
        .queue_delete(&Anyone, "b", OnDelete::default())
        .await
        .unwrap();
    assert_eq!(deleted.dead_letter_queue.as_deref(), Some("shared"));
    assert!(!exists("shared").await);
}

/// A push destination is checked by the caller's check, and its refusal is the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_put_refuses_a_push_destination_its_check_refuses() {
    let fixture = fixture().await;
    let spec: QueueSpec =
        serde_json::from_value(serde_json::json!({"push": {"url": "http://127.0.0.1:9/hook"}}))
            .expect("a spec with a push destination");
    let refused = fixture
        .ops
        .queue_put(put("pushed", spec.clone()), |_| {
            Err("push.transform: does not compile".into())
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::InvalidField);
    assert_eq!(refused.message, "push.transform: does not compile");
    assert_eq!(
        fixture.ops.queue_get("pushed").await.unwrap_err().code,
        ErrorCode::QueueNotFound,
        "nothing was defined"
    );
    assert!(
        fixture
            .ops
            .queue_put(put("pushed", spec), any_push)
            .await
            .unwrap()
            .created
    );
}

// ---------- push delivery's rules (issue 32: decided in ops, not in the push worker) ----------

/// Enqueues one message on "q" and receives it.
async fn one_claimed(ops: &Ops) -> sluice_core::message::ClaimedMessage {
    enqueue(ops, "1").await;
    ops.receive(receive(1, 0))
        .await
        .expect("received")
        .pop()
        .expect("one message")
}

fn failed(error: &str, permanent: bool, retry_after_ms: Option<i64>) -> PushAnswer {
    PushAnswer::Failed {
        error: error.into(),
        permanent,
        retry_after_ms,
    }
}

#[tokio::test]
async fn a_failed_push_waits_for_the_longer_of_retry_after_and_the_backoff() {
    let fixture = fixture().await;
    let mut config = QueueConfig::defaults_for("q");
    config.backoff.jitter = false;
    let backoff_ms = sluice_core::rules::backoff::random_delay_ms(&config.backoff, 1);
    for (retry_after_ms, expected_ms) in [
        (None, backoff_ms),
        (Some(backoff_ms / 2), backoff_ms),
        (Some(backoff_ms * 10), backoff_ms * 10),
    ] {
        assert_eq!(push_retry_delay_ms(&config, 1, retry_after_ms), expected_ms);
        let message = one_claimed(&fixture.ops).await;
        let now_ms = fixture.ops.now_ms();
        let settled = fixture
            .ops
            .push_settle(
                &config,
                "q".into(),
                &message,
                failed("503", false, retry_after_ms),
                None,
            )
            .await
            .expect("settled");
        assert_eq!(settled, PushSettled::Retried);
        let status = fixture
            .ops
            .message_by_id("q".into(), &message.message_id.to_string())
            .await
            .expect("found");
        assert_eq!(
            status.visible_at_ms,
            now_ms + expected_ms,
            "{retry_after_ms:?}"
        );
        fixture
            .ops
            .queue_purge("q", PurgeScope::Waiting)
            .await
            .expect("purged");
    }
}

#[tokio::test]
async fn a_permanent_push_failure_dead_letters_only_where_there_is_a_dead_letter_queue() {
    let fixture = fixture().await;
    let with_dlq = QueueConfig::defaults_for("q");
    let message = one_claimed(&fixture.ops).await;
    let settled = fixture
        .ops
        .push_settle(
            &with_dlq,
            "q".into(),
            &message,
            failed("400", true, None),
            None,
        )
        .await
        .expect("settled");
    assert_eq!(settled, PushSettled::DeadLettered);

    // A queue without a dead-letter queue retries even a permanent failure.
    let mut without = with_dlq.clone();
    without.dead_letter_queue = None;
    let message = one_claimed(&fixture.ops).await;
    let settled = fixture
        .ops
        .push_settle(
            &without,
            "q".into(),
            &message,
            failed("400", true, None),
            None,
        )
        .await
        .expect("settled");
    assert_eq!(settled, PushSettled::Retried);

    let delivered = one_claimed(&fixture.ops).await;
    let settled = fixture
        .ops
        .push_settle(
            &with_dlq,
            "q".into(),
            &delivered,
            PushAnswer::Delivered,
            None,
        )
        .await
        .expect("settled");
    assert_eq!(settled, PushSettled::Acked);
}

#[test]
fn a_push_past_its_attempts_is_out_of_them_only_with_a_dead_letter_queue() {
    let mut config = QueueConfig::defaults_for("q");
    config.max_attempts = 3;
    assert!(!push_out_of_attempts(&config, 3));
    assert!(push_out_of_attempts(&config, 4));
    config.dead_letter_queue = None;
    assert!(!push_out_of_attempts(&config, 4), "retried for ever");
    config.dead_letter_queue = Some("q.dlq".into());
    config.max_attempts = 0;
    assert!(!push_out_of_attempts(&config, 40), "0: no limit");
}

#[tokio::test]
async fn a_failures_error_is_cut_to_its_limit_by_ops_for_every_store() {
    // The store keeps the error as given; ops cuts it, for a nack and a push alike (the
    // SQLite store cut it and PostgreSQL did not, before issue 32).
    let fixture = fixture().await;
    let long = "é".repeat(sluice_core::queue::limits::ERROR_BYTES_MAX);
    let message = one_claimed(&fixture.ops).await;
    fixture
        .ops
        .nack(sluice_ops::NackRequest {
            queue: "q".into(),
            receipt: message.receipt.to_string(),
            error: Some(long.clone()),
            delay_ms: Some(0),
            permanent: false,
        })
        .await
        .expect("nacked");
    let message = fixture
        .ops
        .receive(receive(1, 0))
        .await
        .expect("received")
        .pop()
        .expect("again");
    let kept = message.last_error.clone().expect("an error");
    assert_eq!(kept.len(), sluice_core::queue::limits::ERROR_BYTES_MAX);
    assert!(long.starts_with(&kept));

    fixture
        .ops
        .push_settle(
            &QueueConfig::defaults_for("q"),
            "q".into(),
            &message,
            failed(&format!("x{long}"), false, Some(0)),
            None,
        )
        .await
        .expect("settled");
    let status = fixture
        .ops
        .message_by_id("q".into(), &message.message_id.to_string())
        .await
        .expect("found");
    let kept = status.last_error.expect("an error");
    assert!(kept.len() <= sluice_core::queue::limits::ERROR_BYTES_MAX);
    assert!(kept.len() > sluice_core::queue::limits::ERROR_BYTES_MAX - 2);
}

#[tokio::test]
async fn every_enqueue_holds_between_one_and_the_batch_cap_of_messages() {
    // The cap is decided in ops for every door (issue 32: HTTP and gRPC checked it themselves,
    // and an enqueue made by other code had none).
    let fixture = fixture().await;
    let empty = fixture.ops.enqueue_to("q".into()).await.expect("the queue");
    let refused = fixture
        .ops
        .enqueue(empty)
        .await
        .expect_err("an empty batch");
    assert_eq!(refused.code, ErrorCode::InvalidField, "{refused:?}");

    let max = sluice_core::queue::limits::BATCH_MESSAGES_MAX;
    let mut enqueue = fixture.ops.enqueue_to("q".into()).await.expect("the queue");
    for _ in 0..=max {
        enqueue.add(json_message("1"), "").expect("a valid message");
    }
    let refused = fixture
        .ops
        .enqueue(enqueue)
        .await
        .expect_err("over the cap");
    assert_eq!(refused.code, ErrorCode::TooLarge, "{refused:?}");
    assert!(
        refused.message.contains(&max.to_string()),
        "{}",
        refused.message
    );
    let depth = fixture
        .store
        .queue_get("q", fixture.ops.now_ms())
        .await
        .unwrap()
        .depth;
    assert_eq!(depth.ready, 0, "nothing of a refused batch is stored");
}

fn json_message(body: &str) -> MessageRequest {
    MessageRequest {
        body: (body.as_bytes().to_vec(), BodyKind::Json),
        id: None,
        key: None,
        headers: None,
        priority: None,
        delay_ms: None,
        not_before: None,
    }
}

/// The batch rule's two shapes: a batch sent as one request is refused whole by one message's
/// schema violation (each listed by index), while messages answered one by one
/// (`enqueue_each`: a Publish stream, SQS SendMessageBatch) are decided alone, the others
/// stored in one commit.
#[tokio::test]
async fn a_schema_violation_refuses_its_batch_or_only_its_message() {
    let f = fixture().await;
    let schema = serde_json::json!({
        "type": "object",
        "required": ["n"],
        "properties": {"n": {"type": "integer"}},
    });
    define(
        &f.store,
        "s",
        serde_json::from_value(serde_json::json!({ "schema": schema })).expect("a spec"),
    )
    .await;
    let bodies = [r#"{"n":1}"#, r#"{"n":"two"}"#, r#"{"n":3}"#, r#"{}"#];
    let batch = async || {
        let mut enqueue = f
            .ops
            .enqueue_to("s".into())
            .await
            .expect("the queue exists");
        for body in bodies {
            enqueue.add(json_message(body), "").expect("within limits");
        }
        enqueue
    };

    let whole = f.ops.enqueue(batch().await).await.expect_err("refused");
    assert_eq!(whole.code, ErrorCode::SchemaViolation);
    let Some(sluice_ops::Details::Violations(violations)) = &whole.details else {
        panic!("the violations are the details: {whole:?}");
    };
    let indexes: Vec<usize> = violations.iter().map(|violation| violation.index).collect();
    assert_eq!(indexes, [1, 3], "every violation, by the message's index");
    assert_eq!(f.ops.queue_get("s").await.expect("s").depth.ready, 0);

    let each = f.ops.enqueue_each(batch().await).await.expect("answered");
    let shape: Vec<Result<bool, ErrorCode>> = each
        .iter()
        .map(|answer| answer.as_ref().map(|out| out.created).map_err(|e| e.code))
        .collect();
    assert_eq!(
        shape,
        [
            Ok(true),
            Err(ErrorCode::SchemaViolation),
            Ok(true),
            Err(ErrorCode::SchemaViolation)
        ]
    );
    assert_eq!(f.ops.queue_get("s").await.expect("s").depth.ready, 2);
}

/// A definition the server compiles (a webhook endpoint, a topic) is stored only when what it
/// names exists; replacing one is always room, a new one past the cap is refused.
#[tokio::test]
async fn definitions_need_their_queues_and_topics() {
    use sluice_ops::{Definable, DefinitionPut};
    let f = fixture().await;
    let put = |kind, name: &'static str, queues: Vec<&'static str>, topics: Vec<&'static str>| {
        DefinitionPut {
            kind,
            name,
            spec: "{}".into(),
            queues,
            topics,
        }
    };
    let missing_queue = f
        .ops
        .definition_put(put(Definable::Topic, "t", vec!["q", "nope"], vec![]))
        .await
        .expect_err("a missing queue");
    assert_eq!(missing_queue.code, ErrorCode::QueueNotFound);
    let missing_topic = f
        .ops
        .definition_put(put(Definable::WebhookEndpoint, "w", vec!["q"], vec!["t"]))
        .await
        .expect_err("a missing topic");
    assert_eq!(missing_topic.code, ErrorCode::TopicNotFound);

    f.ops
        .definition_put(put(Definable::Topic, "t", vec!["q"], vec![]))
        .await
        .expect("the topic is stored");
    f.ops
        .definition_put(put(Definable::WebhookEndpoint, "w", vec!["q"], vec!["t"]))
        .await
        .expect("the endpoint is stored once its topic exists");
    let endpoints = f
        .ops
        .definition_list(Definable::WebhookEndpoint)
        .await
        .expect("listed");
    assert_eq!(endpoints, [("w".to_owned(), "{}".to_owned())]);
    assert!(
        f.ops
            .definition_delete(Definable::Topic, "t")
            .await
            .expect("deleted")
    );
    assert!(
        !f.ops
            .definition_delete(Definable::Topic, "t")
            .await
            .expect("gone")
    );
}
