//! Visibility and receipt handles: ChangeMessageVisibility (0 = visible at once, longer =
//! hidden), redelivery after the timeout, and the fence on stale receipt handles.

use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use sluice_testkit::eventually;

use crate::support::{Sqs, body, receipt, system_number};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_message_visibility_zero_makes_the_message_visible_at_once() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("visible-now", &[]).await;
    sqs.send(&url, "again").await;
    let first = sqs.receive(&url, 1, 1).await;
    assert_eq!(first.len(), 1);
    // Hidden for the default 30 s.
    assert!(sqs.receive(&url, 1, 0).await.is_empty());

    sqs.client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(receipt(&first[0]))
        .visibility_timeout(0)
        .send()
        .await
        .expect("ChangeMessageVisibility 0");
    let second = sqs.receive(&url, 1, 0).await;
    assert_eq!(second.len(), 1, "visible at once after a change to 0");
    assert_eq!(body(&second[0]), "again");
    assert_eq!(
        system_number(
            &second[0],
            &MessageSystemAttributeName::ApproximateReceiveCount
        ),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_message_visibility_extends_the_timeout_from_now() {
    let sqs = Sqs::start().await;
    let url = sqs
        .queue(
            "visible-later",
            &[(QueueAttributeName::VisibilityTimeout, "1")],
        )
        .await;
    sqs.send(&url, "held").await;
    let first = sqs.receive(&url, 1, 1).await;
    assert_eq!(first.len(), 1);
    sqs.client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(receipt(&first[0]))
        .visibility_timeout(30)
        .send()
        .await
        .expect("ChangeMessageVisibility 30");
    // Past the queue's 1 s timeout, the message stays hidden.
    assert!(sqs.receive(&url, 1, 2).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_comes_back_after_its_visibility_timeout() {
    let sqs = Sqs::start().await;
    let url = sqs
        .queue(
            "redelivered",
            &[(QueueAttributeName::VisibilityTimeout, "1")],
        )
        .await;
    let id = sqs.send(&url, "twice").await;
    let first = sqs.receive(&url, 1, 1).await;
    assert_eq!(first.len(), 1);
    let second = sqs.receive(&url, 1, 5).await;
    assert_eq!(second.len(), 1, "redelivered after the 1 s timeout");
    assert_eq!(second[0].message_id(), Some(id.as_str()));
    assert_ne!(receipt(&second[0]), receipt(&first[0]));
    assert_eq!(
        system_number(
            &second[0],
            &MessageSystemAttributeName::ApproximateReceiveCount
        ),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_handle_deletes_even_after_its_timeout_ended() {
    let sqs = Sqs::start().await;
    let url = sqs
        .queue(
            "late-delete",
            &[(QueueAttributeName::VisibilityTimeout, "1")],
        )
        .await;
    sqs.send(&url, "late").await;
    let received = sqs.receive(&url, 1, 1).await;
    assert_eq!(received.len(), 1);
    timeout_ended(&sqs, &url).await;
    // Nobody received it since: the handle is still the latest (spec §3.10, as AWS).
    sqs.delete(&url, &received[0]).await;
    assert!(sqs.receive(&url, 1, 2).await.is_empty());
}

/// Consumer A's lease ends, consumer B receives the message again; A's old handle must not
/// delete what B now holds (the fence), while B's handle still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_receipt_handle_does_not_delete_a_message_someone_else_holds() {
    let Some(sqs) = Sqs::sluice_only("moto lets every past receipt handle delete").await else {
        return;
    };
    let url = sqs
        .queue("fenced", &[(QueueAttributeName::VisibilityTimeout, "1")])
        .await;
    sqs.send(&url, "contested").await;
    let by_a = sqs.receive(&url, 1, 1).await;
    assert_eq!(by_a.len(), 1);
    let by_b = sqs.receive(&url, 1, 5).await;
    assert_eq!(by_b.len(), 1, "B receives it after A's timeout");
    // B takes its time.
    sqs.client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(receipt(&by_b[0]))
        .visibility_timeout(60)
        .send()
        .await
        .expect("B extends its visibility");

    // A's delete succeeds (AWS: "the request succeeds, but the message might not be
    // deleted") and deletes nothing.
    sqs.client
        .delete_message()
        .queue_url(&url)
        .receipt_handle(receipt(&by_a[0]))
        .send()
        .await
        .expect("DeleteMessage with A's stale handle");
    assert_eq!(
        sqs.attribute(
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible
        )
        .await
        .as_deref(),
        Some("1"),
        "B's message survives A's stale delete"
    );

    // B's handle still holds the message and deletes it.
    sqs.delete(&url, &by_b[0]).await;
    assert_eq!(
        sqs.attribute(
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible
        )
        .await
        .as_deref(),
        Some("0")
    );
    assert_eq!(sqs.visible_count(&url).await, 0);
    assert!(sqs.receive(&url, 1, 2).await.is_empty(), "deleted for good");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_twice_with_the_same_handle_succeeds() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("delete-twice", &[]).await;
    sqs.send(&url, "once").await;
    let received = sqs.receive(&url, 1, 1).await;
    assert_eq!(received.len(), 1);
    sqs.delete(&url, &received[0]).await;
    // A handle of a message already deleted: success, repeatedly (spec §3.10).
    sqs.delete(&url, &received[0]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_visibility_of_a_deleted_message_is_invalid_parameter_value() {
    let Some(sqs) =
        Sqs::sluice_only("moto answers ReceiptHandleIsInvalid for a deleted message").await
    else {
        return;
    };
    let url = sqs.queue("visibility-deleted", &[]).await;
    sqs.send(&url, "gone").await;
    let received = sqs.receive(&url, 1, 1).await;
    assert_eq!(received.len(), 1);
    sqs.delete(&url, &received[0]).await;
    let error = sqs
        .client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle(receipt(&received[0]))
        .visibility_timeout(0)
        .send()
        .await
        .expect_err("ChangeMessageVisibility of a deleted message")
        .into_service_error();
    // AWS-validated (spec §2.2, §3.11).
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
}

/// A FIFO queue with a 1 s visibility timeout and one message in group "g"; returns its URL.
async fn fifo_with_one_message(sqs: &Sqs, prefix: &str) -> String {
    let url = sqs
        .fifo_queue(
            prefix,
            &[
                (QueueAttributeName::ContentBasedDeduplication, "true"),
                (QueueAttributeName::VisibilityTimeout, "1"),
            ],
        )
        .await;
    sqs.client
        .send_message()
        .queue_url(&url)
        .message_body("expires")
        .message_group_id("g")
        .send()
        .await
        .expect("SendMessage");
    url
}

/// In a FIFO queue another consumer holds the group once it received the message again, so
/// the older handle is refused as expired (spec §3.10) and the new holder's still deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_fifo_handle_is_refused_as_expired() {
    let Some(sqs) = Sqs::sluice_only("moto lets every past receipt handle delete").await else {
        return;
    };
    let url = fifo_with_one_message(&sqs, "fifo-stale").await;
    let by_a = sqs.receive(&url, 1, 1).await;
    assert_eq!(by_a.len(), 1);
    let by_b = sqs.receive(&url, 1, 5).await;
    assert_eq!(by_b.len(), 1, "B receives it after A's timeout");
    let error = sqs
        .client
        .delete_message()
        .queue_url(&url)
        .receipt_handle(receipt(&by_a[0]))
        .send()
        .await
        .expect_err("DeleteMessage with A's stale FIFO handle")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    assert!(
        error
            .message()
            .is_some_and(|m| m.ends_with("Reason: The receipt handle has expired.")),
        "{error:?}"
    );
    sqs.delete(&url, &by_b[0]).await;
    assert!(
        sqs.receive(&url, 1, 2).await.is_empty(),
        "B's delete deleted it"
    );
}

/// A FIFO handle whose visibility expired is refused even when nobody received the message
/// since (spec §3.10, AWS-recorded): another consumer may hold the group by now. The message
/// stays, and the next receive's handle deletes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latest_fifo_handle_after_its_timeout_has_expired() {
    let Some(sqs) = Sqs::sluice_only("moto lets every past receipt handle delete").await else {
        return;
    };
    let url = fifo_with_one_message(&sqs, "fifo-expired").await;
    let received = sqs.receive(&url, 1, 1).await;
    assert_eq!(received.len(), 1);
    timeout_ended(&sqs, &url).await;
    let error = sqs
        .client
        .delete_message()
        .queue_url(&url)
        .receipt_handle(receipt(&received[0]))
        .send()
        .await
        .unwrap_err()
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"));
    assert!(
        error
            .message()
            .unwrap_or_default()
            .ends_with("Reason: The receipt handle has expired."),
        "{error:?}"
    );
    let again = sqs.receive(&url, 1, 2).await;
    assert_eq!(again.len(), 1, "still there");
    sqs.delete(&url, &again[0]).await;
    assert!(sqs.receive(&url, 1, 1).await.is_empty());
}

/// Waits until the visibility timeout of the one message received from `url` ended: the queue
/// counts it visible again (without receiving it, which would give it a new handle).
async fn timeout_ended(sqs: &Sqs, url: &str) {
    eventually(
        "the visibility timeout ended",
        Duration::from_secs(10),
        || async { sqs.visible_count(url).await == 1 },
    )
    .await;
}
