//! The operations over a real store (SQLite, in a temporary directory): what the HTTP suite
//! proves through the server, checked here at the layer that owns it.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::queue::QueueConfig;
use sluice_core::store::QueuePutParams;
use sluice_core::wire::ErrorCode;
use sluice_core::{Clock, ManualClock, Store};
use sluice_ops::{AckRequest, MessageRequest, Ops, ReceiveRequest};
use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
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
        queue: "q".into(),
        max: Some(max),
        wait_ms: Some(wait_ms),
        visibility_timeout_ms: None,
    }
}

async fn enqueue(ops: &Ops, body: &str) {
    let mut enqueue = ops.enqueue_to("q".into()).await.expect("the queue exists");
    enqueue
        .add(
            MessageRequest {
                body: (
                    body.as_bytes().to_vec(),
                    sluice_core::message::BodyKind::Json,
                ),
                id: None,
                key: None,
                headers: None,
                priority: None,
                delay_ms: None,
                not_before: None,
            },
            "",
        )
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
        })
        .await
        .unwrap_err();
    assert_eq!(none.code, ErrorCode::InvalidField);
}
