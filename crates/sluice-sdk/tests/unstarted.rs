//! A message given back unstarted (a worker paused or stopped before running it) counts no
//! delivery where the backend can tell it so (issue 33, item 4): on sluice (embedded, HTTP,
//! gRPC) its next delivery is attempt 1 again; SQS counts every receive, so there it is a
//! release like any other.

use std::time::Duration;

use sluice_sdk::Outgoing;

use crate::support::{Clock, Harness, Kind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unstarted_give_back_counts_no_attempt() {
    for (kind, clock) in [
        (Kind::Embedded, Clock::Test),
        (Kind::Http, Clock::Real),
        (Kind::Grpc, Clock::Real),
        (Kind::Sqs, Clock::Real),
    ] {
        let Some(h) = Harness::try_start(kind, clock).await else {
            continue;
        };
        let queue = h.name("unstarted");
        h.backend.ensure_queue(&queue).await.unwrap();
        h.backend
            .enqueue(
                &queue,
                vec![Outgoing {
                    body: b"1".to_vec(),
                    ..Default::default()
                }],
            )
            .await
            .unwrap();
        let lease = Duration::from_secs(30);
        let wait = Duration::from_secs(2);
        let first = h.backend.receive(&queue, 1, lease, wait).await.unwrap();
        assert_eq!(first[0].attempt, 1, "{}", kind.name());
        h.backend
            .release_unstarted(&queue, &first[0].receipt)
            .await
            .unwrap();
        let again = h.backend.receive(&queue, 1, lease, wait).await.unwrap();
        let expected = if kind == Kind::Sqs { 2 } else { 1 };
        assert_eq!(again[0].attempt, expected, "{}", kind.name());
        h.backend.ack(&queue, &again[0].receipt).await.unwrap();
        h.cleanup_all().await;
    }
}
