//! Errors as the Rust SDK reports them. The SDK matches modeled errors on the legacy code in
//! `x-amzn-query-error` (spec §2.1), so each `is_*()` below fails unless that header is right;
//! unmodeled ones (InvalidParameterValue) are checked through `.code()`.

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, DeleteMessageBatchRequestEntry,
};

use crate::batches::entry;
use crate::support::Sqs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_on_a_missing_queue_are_queue_does_not_exist() {
    let sqs = Sqs::start().await;
    // A URL of the right shape, for a name that was never created.
    let existing = sqs.queue("exists", &[]).await;
    let missing = format!(
        "{}/{}",
        existing.rsplit_once('/').expect("a URL with a path").0,
        sqs.name("never-created")
    );
    let error = sqs
        .client
        .send_message()
        .queue_url(&missing)
        .message_body("x")
        .send()
        .await
        .expect_err("SendMessage to a missing queue")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");
    assert_eq!(error.message(), Some("The specified queue does not exist."));

    let error = sqs
        .client
        .receive_message()
        .queue_url(&missing)
        .send()
        .await
        .expect_err("ReceiveMessage from a missing queue")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");

    let error = sqs
        .client
        .get_queue_attributes()
        .queue_url(&missing)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
        .send()
        .await
        .expect_err("GetQueueAttributes of a missing queue")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_receipt_handle_is_receipt_handle_is_invalid() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("garbage-handle", &[]).await;
    let error = sqs
        .client
        .delete_message()
        .queue_url(&url)
        .receipt_handle("garbage")
        .send()
        .await
        .expect_err("DeleteMessage with a garbage handle")
        .into_service_error();
    assert!(error.is_receipt_handle_is_invalid(), "{error:?}");
    assert_eq!(error.code(), Some("ReceiptHandleIsInvalid"));

    let error = sqs
        .client
        .change_message_visibility()
        .queue_url(&url)
        .receipt_handle("garbage")
        .visibility_timeout(0)
        .send()
        .await
        .expect_err("ChangeMessageVisibility with a garbage handle")
        .into_service_error();
    assert!(error.is_receipt_handle_is_invalid(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_ten_entries_is_too_many_entries_in_batch_request() {
    let Some(sqs) = Sqs::sluice_only(
        "moto reports 11 distinct entry ids as BatchEntryIdsNotDistinct (\"Id e01 repeated.\")",
    )
    .await
    else {
        return;
    };
    let url = sqs.queue("too-many", &[]).await;
    let mut send = sqs.client.send_message_batch().queue_url(&url);
    for n in 0..11 {
        send = send.entries(entry(&format!("e{n}"), "x"));
    }
    let error = send
        .send()
        .await
        .expect_err("SendMessageBatch of 11")
        .into_service_error();
    assert!(error.is_too_many_entries_in_batch_request(), "{error:?}");
    assert_eq!(
        error.message(),
        Some("Maximum number of entries per request are 10. You have sent 11.")
    );
    // Nothing of the refused batch was enqueued.
    assert_eq!(sqs.visible_count(&url).await, 0);

    let mut delete = sqs.client.delete_message_batch().queue_url(&url);
    for n in 0..11 {
        delete = delete.entries(
            DeleteMessageBatchRequestEntry::builder()
                .id(format!("e{n}"))
                .receipt_handle("garbage")
                .build()
                .expect("entry"),
        );
    }
    let error = delete
        .send()
        .await
        .expect_err("DeleteMessageBatch of 11")
        .into_service_error();
    assert!(error.is_too_many_entries_in_batch_request(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_without_entries_is_empty_batch_request() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("empty-batch", &[]).await;
    let error = sqs
        .client
        .send_message_batch()
        .queue_url(&url)
        .set_entries(Some(Vec::new()))
        .send()
        .await
        .expect_err("SendMessageBatch of none")
        .into_service_error();
    assert!(error.is_empty_batch_request(), "{error:?}");

    if !sqs.is_sluice() {
        // moto checks only SendMessageBatch and DeleteMessageBatch for empty entries.
        return;
    }
    let error = sqs
        .client
        .change_message_visibility_batch()
        .queue_url(&url)
        .set_entries(Some(Vec::<ChangeMessageVisibilityBatchRequestEntry>::new()))
        .send()
        .await
        .expect_err("ChangeMessageVisibilityBatch of none")
        .into_service_error();
    assert!(error.is_empty_batch_request(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_entry_ids_are_batch_entry_ids_not_distinct() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("repeated-ids", &[]).await;
    let error = sqs
        .client
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("same", "a"))
        .entries(entry("same", "b"))
        .send()
        .await
        .expect_err("SendMessageBatch with a repeated Id")
        .into_service_error();
    assert!(error.is_batch_entry_ids_not_distinct(), "{error:?}");
    assert_eq!(sqs.visible_count(&url).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_parameters_are_invalid_parameter_value() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("invalid-parameter", &[]).await;
    let error = sqs
        .client
        .receive_message()
        .queue_url(&url)
        .max_number_of_messages(11)
        .send()
        .await
        .expect_err("ReceiveMessage of 11")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    if sqs.is_sluice() {
        // AWS's text (spec §2.2); moto words it differently.
        assert_eq!(
            error.message(),
            Some(
                "Value 11 for parameter MaxNumberOfMessages is invalid. \
                 Reason: Must be between 1 and 10, if provided."
            )
        );
    }

    let error = sqs
        .client
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(21)
        .send()
        .await
        .expect_err("ReceiveMessage waiting 21 s")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    if sqs.is_sluice() {
        assert_eq!(
            error.message(),
            Some(
                "Value 21 for parameter WaitTimeSeconds is invalid. \
                 Reason: Must be >= 0 and <= 20, if provided."
            )
        );
    }

    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .delay_seconds(901)
        .send()
        .await
        .expect_err("SendMessage delayed 901 s")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_with_characters_outside_the_allowed_set_is_invalid_message_contents() {
    let Some(sqs) = Sqs::sluice_only("moto accepts any characters in a body").await else {
        return;
    };
    let url = sqs.queue("invalid-contents", &[]).await;
    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("bell \u{7}")
        .send()
        .await
        .expect_err("SendMessage with U+0007")
        .into_service_error();
    assert!(error.is_invalid_message_contents(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_body_is_missing_parameter() {
    let Some(sqs) = Sqs::sluice_only("moto accepts an empty body").await else {
        return;
    };
    let url = sqs.queue("empty-body", &[]).await;
    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("")
        .send()
        .await
        .expect_err("SendMessage with an empty body")
        .into_service_error();
    assert_eq!(error.code(), Some("MissingParameter"), "{error:?}");
    assert_eq!(
        error.message(),
        Some("The request must contain the parameter MessageBody.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_entry_id_is_invalid_batch_entry_id() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("bad-entry-id", &[]).await;
    let error = sqs
        .client
        .send_message_batch()
        .queue_url(&url)
        .entries(entry("not valid!", "x"))
        .send()
        .await
        .expect_err("SendMessageBatch with Id \"not valid!\"")
        .into_service_error();
    assert!(error.is_invalid_batch_entry_id(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_queue_name_is_invalid_parameter_value() {
    let sqs = Sqs::start().await;
    for name in ["has space", "dotted.name", &"n".repeat(81)] {
        let error = sqs
            .client
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .expect_err("CreateQueue with an invalid name")
            .into_service_error();
        assert_eq!(
            error.code(),
            Some("InvalidParameterValue"),
            "{name}: {error:?}"
        );
    }
}
