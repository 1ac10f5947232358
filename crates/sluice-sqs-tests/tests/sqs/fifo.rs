//! FIFO queues: order within a message group under concurrent consumers, a group held while
//! one of its messages is in flight, deduplication (content-based and by id), and the FIFO
//! send errors.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};

use crate::support::{Sqs, bodies, body, receipt};

const GROUPS: usize = 3;
const PER_GROUP: usize = 10;

/// Sends `PER_GROUP` messages to each of `GROUPS` groups, then three consumers receive
/// concurrently and delete what they got in order. Each consumer logs a message when it
/// receives it, before deleting it: since a group's next message is only handed out once the
/// ones before it are deleted, each group's part of the shared log must be in send order, with
/// nothing missing and nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_group_is_received_in_order_by_concurrent_consumers() {
    let sqs = Sqs::start().await;
    let url = sqs
        .fifo_queue(
            "ordered",
            &[(QueueAttributeName::ContentBasedDeduplication, "true")],
        )
        .await;
    for group in 0..GROUPS {
        let mut request = sqs.client.send_message_batch().queue_url(&url);
        for n in 0..PER_GROUP {
            request = request.entries(
                SendMessageBatchRequestEntry::builder()
                    .id(format!("e{n}"))
                    .message_body(format!("g{group}-{n}"))
                    .message_group_id(format!("g{group}"))
                    .build()
                    .expect("entry"),
            );
        }
        let output = request.send().await.expect("SendMessageBatch to a group");
        assert!(output.failed().is_empty(), "{output:?}");
        if !sqs.is_sluice() {
            // moto answers batch entries without a SequenceNumber.
            continue;
        }
        // Sequence numbers rise within the group, in entry order.
        let mut by_entry: Vec<(usize, u128)> = output
            .successful()
            .iter()
            .map(|s| {
                let entry: usize = s.id()[1..].parse().expect("entry number");
                let sequence = s
                    .sequence_number()
                    .unwrap_or_else(|| panic!("no SequenceNumber in {s:?}"))
                    .parse()
                    .expect("a numeric SequenceNumber");
                (entry, sequence)
            })
            .collect();
        by_entry.sort_unstable();
        assert!(
            by_entry.windows(2).all(|pair| pair[0].1 < pair[1].1),
            "sequence numbers not rising in entry order: {by_entry:?}"
        );
    }

    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut consumers = Vec::new();
    for _ in 0..3 {
        let client = sqs.client.clone();
        let url = url.clone();
        let log = log.clone();
        consumers.push(tokio::spawn(async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while log.lock().expect("log").len() < GROUPS * PER_GROUP
                && tokio::time::Instant::now() < deadline
            {
                let messages = client
                    .receive_message()
                    .queue_url(&url)
                    .max_number_of_messages(3)
                    .wait_time_seconds(1)
                    .send()
                    .await
                    .expect("ReceiveMessage")
                    .messages
                    .unwrap_or_default();
                log.lock().expect("log").extend(bodies(&messages));
                // A little work, so consumers overlap.
                tokio::time::sleep(Duration::from_millis(10)).await;
                for message in &messages {
                    client
                        .delete_message()
                        .queue_url(&url)
                        .receipt_handle(receipt(message))
                        .send()
                        .await
                        .expect("DeleteMessage");
                }
            }
        }));
    }
    for consumer in consumers {
        consumer.await.expect("consumer task");
    }

    let log = log.lock().expect("log").clone();
    let mut per_group: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for entry in &log {
        let (group, n) = entry.split_once('-').expect("g<group>-<n>");
        per_group
            .entry(group.to_owned())
            .or_default()
            .push(n.parse().expect("a message number"));
    }
    let expected: Vec<usize> = (0..PER_GROUP).collect();
    assert_eq!(per_group.len(), GROUPS, "{log:?}");
    for (group, received) in &per_group {
        assert_eq!(
            received, &expected,
            "group {group} out of order or incomplete: {log:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_is_held_while_one_of_its_messages_is_in_flight() {
    let sqs = Sqs::start().await;
    let url = sqs
        .fifo_queue(
            "held",
            &[(QueueAttributeName::ContentBasedDeduplication, "true")],
        )
        .await;
    for (group, text) in [("a", "a1"), ("a", "a2"), ("b", "b1")] {
        sqs.client
            .send_message()
            .queue_url(&url)
            .message_body(text)
            .message_group_id(group)
            .send()
            .await
            .expect("SendMessage");
    }
    let first = sqs.receive(&url, 1, 1).await;
    assert_eq!(bodies(&first), ["a1"]);
    // a1 in flight: group a is held, group b is not.
    let second = sqs.receive(&url, 10, 1).await;
    assert_eq!(bodies(&second), ["b1"]);
    sqs.delete(&url, &first[0]).await;
    let third = sqs.receive(&url, 10, 1).await;
    assert_eq!(bodies(&third), ["a2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_receive_takes_several_messages_of_a_group_in_order_and_holds_it() {
    let sqs = Sqs::start().await;
    let url = sqs
        .fifo_queue(
            "runs",
            &[(QueueAttributeName::ContentBasedDeduplication, "true")],
        )
        .await;
    for (group, text) in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")] {
        sqs.client
            .send_message()
            .queue_url(&url)
            .message_body(text)
            .message_group_id(group)
            .send()
            .await
            .expect("SendMessage");
    }
    // As SQS: one receive gets a group's messages in order, up to MaxNumberOfMessages.
    let run = sqs.receive(&url, 2, 1).await;
    assert_eq!(bodies(&run), ["a1", "a2"]);
    // The group is held while any of them is in flight: a3 waits, b goes on.
    let other = sqs.receive(&url, 10, 1).await;
    assert_eq!(bodies(&other), ["b1"]);
    sqs.delete(&url, &run[0]).await;
    assert!(
        sqs.receive(&url, 10, 0).await.is_empty(),
        "a2 is still in flight"
    );
    sqs.delete(&url, &run[1]).await;
    let rest = sqs.receive(&url, 10, 1).await;
    assert_eq!(bodies(&rest), ["a3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_based_deduplication_delivers_a_repeated_body_once() {
    let sqs = Sqs::start().await;
    let url = sqs
        .fifo_queue(
            "dedup-content",
            &[(QueueAttributeName::ContentBasedDeduplication, "true")],
        )
        .await;
    let send = |text: &'static str| {
        let client = sqs.client.clone();
        let url = url.clone();
        async move {
            client
                .send_message()
                .queue_url(url)
                .message_body(text)
                .message_group_id("g")
                .send()
                .await
                .expect("SendMessage")
        }
    };
    let first = send("same body").await;
    let duplicate = send("same body").await;
    let other = send("other body").await;
    // The duplicate is accepted and answers the original MessageId (spec §4; moto makes up
    // a new one).
    if sqs.is_sluice() {
        assert_eq!(duplicate.message_id(), first.message_id());
    }
    assert_ne!(other.message_id(), first.message_id());

    // One group: a receive may take both, in order (as SQS).
    let mut received = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while received.len() < 2 && tokio::time::Instant::now() < deadline {
        for message in sqs.receive(&url, 10, 1).await {
            sqs.delete(&url, &message).await;
            received.push(message);
        }
    }
    assert_eq!(bodies(&received), ["same body", "other body"]);
    assert!(
        sqs.receive(&url, 10, 1).await.is_empty(),
        "the duplicate came too"
    );
    // Still deduplicated after the first copy was deleted (within the 5 minutes; AWS-validated
    // in [LS-TEST], while moto delivers it again).
    if sqs.is_sluice() {
        send("same body").await;
        assert!(sqs.receive(&url, 10, 1).await.is_empty());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_deduplication_id_deduplicates_different_bodies() {
    let sqs = Sqs::start().await;
    let url = sqs.fifo_queue("dedup-id", &[]).await;
    for text in ["first", "second"] {
        sqs.client
            .send_message()
            .queue_url(&url)
            .message_body(text)
            .message_group_id("g")
            .message_deduplication_id("one-id")
            .send()
            .await
            .expect("SendMessage with a deduplication id");
    }
    let received = sqs.receive(&url, 10, 1).await;
    assert_eq!(bodies(&received), ["first"]);
    assert_eq!(body(&received[0]), "first");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_sends_need_a_group_and_a_deduplication_id() {
    let sqs = Sqs::start().await;
    let url = sqs.fifo_queue("fifo-errors", &[]).await;
    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .message_deduplication_id("d")
        .send()
        .await
        .expect_err("FIFO SendMessage without a group")
        .into_service_error();
    assert_eq!(error.code(), Some("MissingParameter"), "{error:?}");
    assert_eq!(
        error.message(),
        Some("The request must contain the parameter MessageGroupId.")
    );

    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .message_group_id("g")
        .send()
        .await
        .expect_err("FIFO SendMessage without deduplication")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    assert_eq!(
        error.message(),
        Some(
            "The queue should either have ContentBasedDeduplication enabled or \
             MessageDeduplicationId provided explicitly"
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_batches_and_delays_follow_the_fifo_rules() {
    let sqs = Sqs::start().await;
    let url = sqs
        .fifo_queue(
            "fifo-rules",
            &[(QueueAttributeName::ContentBasedDeduplication, "true")],
        )
        .await;
    // A batch entry without a group fails the whole request (spec §4, AWS-recorded).
    let error = sqs
        .client
        .send_message_batch()
        .queue_url(&url)
        .entries(
            SendMessageBatchRequestEntry::builder()
                .id("grouped")
                .message_body("a")
                .message_group_id("g")
                .build()
                .expect("entry"),
        )
        .entries(crate::batches::entry("ungrouped", "b"))
        .send()
        .await
        .expect_err("FIFO SendMessageBatch with an entry without a group")
        .into_service_error();
    // moto answers MissingParameter, as for a single send; AWS does not.
    if sqs.is_sluice() {
        assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    }
    assert!(
        sqs.receive(&url, 10, 0).await.is_empty(),
        "nothing of it was enqueued"
    );

    // A per-message delay other than 0 is refused; 0 is fine.
    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("delayed")
        .message_group_id("g")
        .delay_seconds(2)
        .send()
        .await
        .expect_err("FIFO SendMessage with DelaySeconds 2")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    sqs.client
        .send_message()
        .queue_url(&url)
        .message_body("not delayed")
        .message_group_id("g")
        .delay_seconds(0)
        .send()
        .await
        .expect("FIFO SendMessage with DelaySeconds 0");
}
