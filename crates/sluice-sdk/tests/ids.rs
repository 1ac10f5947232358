//! An idempotency id is never silently ignored (issue 33). On a queue that deduplicates (every
//! sluice queue, embedded or over HTTP or gRPC, and an SQS queue opened with `dedup`) a repeated
//! id stores nothing new; where the queue cannot deduplicate (a standard SQS queue, RabbitMQ) an
//! enqueue with an id is refused with `Error::Unsupported` and nothing of the call is stored.

use sluice_sdk::{Envelope, Error, QueueOptions};

use crate::support::{Clock, Harness, Kind};

async fn an_id_deduplicates_or_is_refused(kind: Kind, clock: Clock) {
    let Some(h) = Harness::try_start(kind, clock).await else {
        return;
    };
    let queue = h.queue::<u32>("ids").await;
    if matches!(kind, Kind::Sqs | Kind::Amqp) {
        let refused = queue
            .enqueue_many([Envelope::new(1), Envelope::new(2).id("order-1")])
            .await;
        match refused {
            Err(Error::Unsupported(why)) => {
                assert!(
                    why.starts_with("dedup") && why.contains("idempotency id"),
                    "{why}"
                );
            }
            other => panic!("{}: an id was not refused: {other:?}", kind.name()),
        }
        let stats = queue.stats().await.expect("stats");
        assert_eq!(
            stats.ready,
            0,
            "{}: nothing of the call was stored",
            kind.name()
        );
        assert!(
            queue
                .enqueue(&3)
                .await
                .expect("enqueue without an id")
                .created
        );
    } else {
        let first = queue.enqueue(&1).id("order-1").await.expect("first");
        let again = queue.enqueue(&1).id("order-1").await.expect("again");
        assert!(first.created, "{}", kind.name());
        assert!(!again.created, "{}", kind.name());
        assert_eq!(again.message_id, first.message_id, "{}", kind.name());
    }
    h.cleanup_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_on_every_backend() {
    for (kind, clock) in [
        (Kind::Embedded, Clock::Test),
        (Kind::Http, Clock::Real),
        (Kind::Grpc, Clock::Real),
        (Kind::Sqs, Clock::Real),
        (Kind::Amqp, Clock::Real),
    ] {
        an_id_deduplicates_or_is_refused(kind, clock).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sqs_queue_opened_with_dedup_keeps_the_id() {
    let Some(h) = Harness::try_start(Kind::Sqs, Clock::Real).await else {
        return;
    };
    let queue = h
        .queue_with::<u32>(
            "idd",
            QueueOptions {
                dedup: true,
                ..Default::default()
            },
        )
        .await;
    let first = queue.enqueue(&1).id("order-1").await.expect("first");
    assert!(first.created);
    h.cleanup_all().await;
}
