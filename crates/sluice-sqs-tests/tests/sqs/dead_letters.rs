//! Dead-letter queues: a message moves after maxReceiveCount receives, the DLQ lists its
//! sources, and a message move task (StartMessageMoveTask, ListMessageMoveTasks,
//! CancelMessageMoveTask) redrives the DLQ back to its source.

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::support::{Sqs, bodies, redrive_policy};

/// A source queue with a 1 s visibility timeout dead-lettering to a new DLQ after
/// `max_receive_count` receives; returns (source URL, DLQ URL, DLQ ARN).
async fn source_and_dead_letter_queue(
    sqs: &Sqs,
    prefix: &str,
    max_receive_count: u32,
) -> (String, String, String) {
    let dead = sqs.queue(&format!("{prefix}-dlq"), &[]).await;
    let dead_arn = sqs.arn(&dead).await;
    let policy = redrive_policy(&dead_arn, max_receive_count);
    let source = sqs
        .queue(
            prefix,
            &[
                (QueueAttributeName::VisibilityTimeout, "1"),
                (QueueAttributeName::RedrivePolicy, &policy),
            ],
        )
        .await;
    (source, dead, dead_arn)
}

/// Receives from `source` (never deleting) until `count` messages were dead-lettered into
/// `dead` (panics after 10 s).
async fn receive_until_dead_lettered(sqs: &Sqs, source: &str, dead: &str, count: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while tokio::time::Instant::now() < deadline {
        if sqs.visible_count(dead).await >= count {
            return;
        }
        sqs.receive(source, 10, 1).await;
    }
    panic!(
        "{count} messages were not dead-lettered within 10 s (DLQ has {})",
        sqs.visible_count(dead).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_moves_to_the_dead_letter_queue_after_max_receive_count() {
    let sqs = Sqs::start().await;
    let (source, dead, _) = source_and_dead_letter_queue(&sqs, "dlq-count", 2).await;
    let id = sqs.send(&source, "poison").await;

    // Two receives are allowed; each lease ends after 1 s without a delete.
    for attempt in 1..=2 {
        let received = sqs.receive(&source, 1, 3).await;
        assert_eq!(bodies(&received), ["poison"], "receive #{attempt}");
    }
    // The third attempt finds it gone to the DLQ.
    let third = sqs.receive(&source, 1, 3).await;
    assert!(third.is_empty(), "received a third time: {third:?}");
    let dead_lettered = sqs.receive(&dead, 1, 2).await;
    assert_eq!(bodies(&dead_lettered), ["poison"]);
    assert_eq!(dead_lettered[0].message_id(), Some(id.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_dead_letter_source_queues_names_every_source() {
    let sqs = Sqs::start().await;
    let dead = sqs.queue("sources-dlq", &[]).await;
    let dead_arn = sqs.arn(&dead).await;
    let policy = redrive_policy(&dead_arn, 3);
    let mut sources = BTreeSet::new();
    for prefix in ["source-a", "source-b"] {
        sources.insert(
            sqs.queue(prefix, &[(QueueAttributeName::RedrivePolicy, &policy)])
                .await,
        );
    }
    let unrelated = sqs.queue("source-not", &[]).await;

    let listed: BTreeSet<String> = sqs
        .client
        .list_dead_letter_source_queues()
        .queue_url(&dead)
        .send()
        .await
        .expect("ListDeadLetterSourceQueues")
        .queue_urls
        .into_iter()
        .collect();
    assert_eq!(listed, sources);
    assert!(!listed.contains(&unrelated));

    let none = sqs
        .client
        .list_dead_letter_source_queues()
        .queue_url(&unrelated)
        .send()
        .await
        .expect("ListDeadLetterSourceQueues of a queue that is no DLQ");
    assert!(none.queue_urls().is_empty(), "{none:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_task_redrives_the_dead_letter_queue_to_its_source() {
    let Some(sqs) = Sqs::sluice_only("moto answers 500 to message move tasks").await else {
        return;
    };
    let (source, dead, dead_arn) = source_and_dead_letter_queue(&sqs, "redrive", 1).await;
    for n in 0..3 {
        sqs.send(&source, &format!("r{n}")).await;
    }
    receive_until_dead_lettered(&sqs, &source, &dead, 3).await;

    // No DestinationArn: each message goes back to the queue it came from.
    let started = sqs
        .client
        .start_message_move_task()
        .source_arn(&dead_arn)
        .send()
        .await
        .expect("StartMessageMoveTask");
    assert!(
        started.task_handle().is_some_and(|h| !h.is_empty()),
        "{started:?}"
    );

    let redriven = sqs.receive_count(&source, 3, Duration::from_secs(10)).await;
    let mut got = bodies(&redriven);
    got.sort();
    assert_eq!(got, ["r0", "r1", "r2"]);
    assert_eq!(sqs.visible_count(&dead).await, 0);

    // The task reports itself done, with what it moved (bounded wait for the final status).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let tasks = sqs
            .client
            .list_message_move_tasks()
            .source_arn(&dead_arn)
            .send()
            .await
            .expect("ListMessageMoveTasks");
        let task = tasks.results().first().expect("the task is listed").clone();
        assert_eq!(task.source_arn(), Some(dead_arn.as_str()));
        if task.status() == Some("COMPLETED") {
            assert_eq!(task.approximate_number_of_messages_moved(), 3);
            assert!(task.started_timestamp() > 0, "{task:?}");
            break;
        }
        assert_eq!(task.status(), Some("RUNNING"), "{task:?}");
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {task:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last task of `dead_arn` once it is no longer running (bounded wait).
async fn finished_task(
    sqs: &Sqs,
    dead_arn: &str,
) -> aws_sdk_sqs::types::ListMessageMoveTasksResultEntry {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let tasks = sqs
            .client
            .list_message_move_tasks()
            .source_arn(dead_arn)
            .send()
            .await
            .expect("ListMessageMoveTasks");
        let task = tasks.results().first().expect("the task is listed").clone();
        if task.status() != Some("RUNNING") {
            return task;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {task:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_task_with_a_destination_moves_every_message_however_it_got_there() {
    let Some(sqs) = Sqs::sluice_only("moto answers 500 to message move tasks").await else {
        return;
    };
    let (source, dead, dead_arn) = source_and_dead_letter_queue(&sqs, "move-all", 1).await;
    sqs.send(&source, "failed").await;
    receive_until_dead_lettered(&sqs, &source, &dead, 1).await;
    // Sent straight into the dead-letter queue, as a client that dead-letters by itself does.
    sqs.send(&dead, "sent straight").await;
    let destination = sqs.queue("move-all-to", &[]).await;
    let destination_arn = sqs.arn(&destination).await;

    sqs.client
        .start_message_move_task()
        .source_arn(&dead_arn)
        .destination_arn(&destination_arn)
        .send()
        .await
        .expect("StartMessageMoveTask");
    let task = finished_task(&sqs, &dead_arn).await;
    assert_eq!(task.status(), Some("COMPLETED"), "{task:?}");
    assert_eq!(task.approximate_number_of_messages_to_move(), Some(2));
    assert_eq!(task.approximate_number_of_messages_moved(), 2);
    assert_eq!(task.destination_arn(), Some(destination_arn.as_str()));
    let moved = sqs
        .receive_count(&destination, 2, Duration::from_secs(5))
        .await;
    let mut got = bodies(&moved);
    got.sort();
    assert_eq!(got, ["failed", "sent straight"]);
    assert_eq!(sqs.visible_count(&dead).await, 0);
    let not_visible = sqs
        .attribute(
            &dead,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .await;
    assert_eq!(not_visible.as_deref(), Some("0"), "nothing is left held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_task_to_the_sources_fails_on_a_message_with_no_source() {
    let Some(sqs) = Sqs::sluice_only("moto answers 500 to message move tasks").await else {
        return;
    };
    let (source, dead, dead_arn) = source_and_dead_letter_queue(&sqs, "move-back", 1).await;
    sqs.send(&source, "failed").await;
    receive_until_dead_lettered(&sqs, &source, &dead, 1).await;
    sqs.send(&dead, "sent straight").await;

    // No DestinationArn: the dead letter goes back to its source; the message sent straight
    // has none, so it stays and the task fails as AWS's does.
    sqs.client
        .start_message_move_task()
        .source_arn(&dead_arn)
        .send()
        .await
        .expect("StartMessageMoveTask");
    let task = finished_task(&sqs, &dead_arn).await;
    assert_eq!(task.status(), Some("FAILED"), "{task:?}");
    assert_eq!(
        task.failure_reason(),
        Some("CouldNotDetermineMessageSource")
    );
    assert_eq!(task.approximate_number_of_messages_to_move(), Some(2));
    assert_eq!(task.approximate_number_of_messages_moved(), 1);
    let back = sqs.receive_count(&source, 1, Duration::from_secs(5)).await;
    assert_eq!(bodies(&back), ["failed"]);
    let left = sqs.receive(&dead, 10, 0).await;
    assert_eq!(bodies(&left), ["sent straight"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_move_task_can_be_cancelled() {
    let Some(sqs) = Sqs::sluice_only("moto answers 500 to message move tasks").await else {
        return;
    };
    let (source, dead, dead_arn) = source_and_dead_letter_queue(&sqs, "cancelled", 1).await;
    for n in 0..6 {
        sqs.send(&source, &format!("c{n}")).await;
    }
    receive_until_dead_lettered(&sqs, &source, &dead, 6).await;

    // One message per second: the task is still running when it is cancelled.
    let started = sqs
        .client
        .start_message_move_task()
        .source_arn(&dead_arn)
        .max_number_of_messages_per_second(1)
        .send()
        .await
        .expect("StartMessageMoveTask at 1 message/s");
    let handle = started.task_handle().expect("a TaskHandle").to_owned();

    // Only one running task per source.
    let error = sqs
        .client
        .start_message_move_task()
        .source_arn(&dead_arn)
        .send()
        .await
        .expect_err("a second StartMessageMoveTask")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");

    let cancelled = sqs
        .client
        .cancel_message_move_task()
        .task_handle(&handle)
        .send()
        .await
        .expect("CancelMessageMoveTask");
    let moved = cancelled.approximate_number_of_messages_moved();
    assert!(moved < 6, "moved {moved} of 6 at 1/s before the cancel");

    let tasks = sqs
        .client
        .list_message_move_tasks()
        .source_arn(&dead_arn)
        .send()
        .await
        .expect("ListMessageMoveTasks");
    let status = tasks.results().first().and_then(|task| task.status());
    assert!(
        matches!(status, Some("CANCELLING" | "CANCELLED")),
        "status after the cancel: {tasks:?}"
    );
    // The rest stays in the DLQ (a task that went on at 1/s would have emptied it in 6 s),
    // and nothing is lost on the way. A bounded wait, not `eventually`: it gives a task that
    // went on the time to move more, which must not happen.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let left = sqs.visible_count(&dead).await;
    let back = sqs.visible_count(&source).await;
    assert!(left > 0, "the cancelled task moved everything");
    assert_eq!(
        left + back,
        6,
        "{left} in the DLQ, {back} back in the source"
    );

    let error = sqs
        .client
        .cancel_message_move_task()
        .task_handle("garbage")
        .send()
        .await
        .expect_err("CancelMessageMoveTask with a garbage handle")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_task_needs_a_dead_letter_queue_as_source() {
    let Some(sqs) = Sqs::sluice_only("moto answers 500 to message move tasks").await else {
        return;
    };
    let plain = sqs.queue("no-dlq", &[]).await;
    let arn = sqs.arn(&plain).await;
    let error = sqs
        .client
        .start_message_move_task()
        .source_arn(&arn)
        .send()
        .await
        .expect_err("StartMessageMoveTask from a queue that is no DLQ")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    assert_eq!(
        error.message(),
        Some("Source queue must be configured as a Dead Letter Queue.")
    );
}
