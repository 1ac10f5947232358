//! SendMessageBatch, DeleteMessageBatch and ChangeMessageVisibilityBatch: per-entry successes
//! and failures in one 200 answer. Whole-request batch errors are in `errors`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry, QueueAttributeName,
    SendMessageBatchRequestEntry,
};

use crate::support::{Sqs, bodies, body, receipt};

/// A batch entry `id` with `body`.
pub fn entry(id: &str, body: &str) -> SendMessageBatchRequestEntry {
    SendMessageBatchRequestEntry::builder()
        .id(id)
        .message_body(body)
        .build()
        .expect("a batch entry")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_batch_reports_a_failing_entry_and_enqueues_the_rest() {
    let Some(sqs) = Sqs::sluice_only(
        "moto answers SenderFault as the string \"true\", which the SDK cannot parse",
    )
    .await
    else {
        return;
    };
    let url = sqs.queue("batch-send", &[]).await;
    // DelaySeconds is 0–900: entry "late" fails on its own (spec §3.8).
    let late = SendMessageBatchRequestEntry::builder()
        .id("late")
        .message_body("too late")
        .delay_seconds(1000)
        .build()
        .expect("entry");
    let output = sqs
        .client
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("first", "msg"))
        .entries(late)
        .entries(entry("third", "test"))
        .send()
        .await
        .expect("SendMessageBatch");

    let successful: BTreeMap<&str, Option<&str>> = output
        .successful()
        .iter()
        .map(|s| (s.id(), Some(s.md5_of_message_body())))
        .collect();
    assert_eq!(
        successful,
        BTreeMap::from([
            ("first", Some("6e2baaf3b97dbeef01c0043275f9a0e7")),
            ("third", Some("098f6bcd4621d373cade4e832627b4f6")),
        ])
    );
    let ids: BTreeSet<&str> = output.successful().iter().map(|s| s.message_id()).collect();
    assert_eq!(ids.len(), 2, "distinct MessageIds: {output:?}");

    assert_eq!(output.failed().len(), 1, "{output:?}");
    let failed = &output.failed()[0];
    assert_eq!(failed.id(), "late");
    assert!(failed.sender_fault());
    assert_eq!(failed.code(), "InvalidParameterValue");

    let received = sqs.receive_count(&url, 2, Duration::from_secs(5)).await;
    let mut got = bodies(&received);
    got.sort();
    assert_eq!(got, ["msg", "test"]);
    // Nothing else arrives (the failed entry was not enqueued).
    assert!(sqs.receive(&url, 10, 0).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_entry_with_invalid_characters_fails_alone() {
    let Some(sqs) = Sqs::sluice_only("moto accepts any characters in a body").await else {
        return;
    };
    let url = sqs.queue("batch-invalid-chars", &[]).await;
    let output = sqs
        .client
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("good", "fine"))
        .entries(entry("bad", "nul \u{0} inside"))
        .send()
        .await
        .expect("SendMessageBatch");
    assert_eq!(
        output
            .successful()
            .iter()
            .map(|s| s.id())
            .collect::<Vec<_>>(),
        ["good"]
    );
    assert_eq!(output.failed().len(), 1, "{output:?}");
    assert_eq!(output.failed()[0].id(), "bad");
    assert_eq!(output.failed()[0].code(), "InvalidMessageContents");
    assert!(output.failed()[0].sender_fault());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_message_batch_deletes_each_entry_and_fails_a_garbage_handle() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("batch-delete", &[]).await;
    for n in 0..3 {
        sqs.send(&url, &format!("m{n}")).await;
    }
    let received = sqs.receive_count(&url, 3, Duration::from_secs(5)).await;
    assert_eq!(received.len(), 3);

    let mut request = sqs.client.delete_message_batch().queue_url(&url);
    for (n, message) in received.iter().enumerate() {
        request = request.entries(
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("d{n}"))
                .receipt_handle(receipt(message))
                .build()
                .expect("entry"),
        );
    }
    request = request.entries(
        DeleteMessageBatchRequestEntry::builder()
            .id("garbage")
            .receipt_handle("garbage")
            .build()
            .expect("entry"),
    );
    let output = request.send().await.expect("DeleteMessageBatch");
    let deleted: BTreeSet<&str> = output.successful().iter().map(|s| s.id()).collect();
    assert_eq!(deleted, BTreeSet::from(["d0", "d1", "d2"]));
    assert_eq!(output.failed().len(), 1, "{output:?}");
    assert_eq!(output.failed()[0].id(), "garbage");
    assert_eq!(output.failed()[0].code(), "ReceiptHandleIsInvalid");

    // Gone: not even after their visibility timeout would have ended.
    sqs.client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::VisibilityTimeout, "0")
        .send()
        .await
        .expect("SetQueueAttributes");
    assert!(sqs.receive(&url, 10, 1).await.is_empty());
    assert_eq!(sqs.visible_count(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_message_visibility_batch_releases_some_and_keeps_others() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("batch-visibility", &[]).await;
    sqs.send(&url, "released").await;
    sqs.send(&url, "kept").await;
    let received = sqs.receive_count(&url, 2, Duration::from_secs(5)).await;
    assert_eq!(received.len(), 2);
    let by_body = |wanted: &str| {
        received
            .iter()
            .find(|m| body(m) == wanted)
            .unwrap_or_else(|| panic!("no {wanted} in {received:?}"))
    };

    let output = sqs
        .client
        .change_message_visibility_batch()
        .queue_url(&url)
        .entries(
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id("release")
                .receipt_handle(receipt(by_body("released")))
                .visibility_timeout(0)
                .build()
                .expect("entry"),
        )
        .entries(
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id("keep")
                .receipt_handle(receipt(by_body("kept")))
                .visibility_timeout(600)
                .build()
                .expect("entry"),
        )
        .entries(
            ChangeMessageVisibilityBatchRequestEntry::builder()
                .id("garbage")
                .receipt_handle("garbage")
                .visibility_timeout(0)
                .build()
                .expect("entry"),
        )
        .send()
        .await
        .expect("ChangeMessageVisibilityBatch");
    let changed: BTreeSet<&str> = output.successful().iter().map(|s| s.id()).collect();
    assert_eq!(changed, BTreeSet::from(["release", "keep"]));
    assert_eq!(output.failed().len(), 1, "{output:?}");
    assert_eq!(output.failed()[0].id(), "garbage");
    assert_eq!(output.failed()[0].code(), "ReceiptHandleIsInvalid");

    // Visibility 0: visible at once; 600 s: still hidden.
    let again = sqs.receive(&url, 10, 1).await;
    assert_eq!(bodies(&again), ["released"]);
}
