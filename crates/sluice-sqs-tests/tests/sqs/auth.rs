//! Access control through the SQS API (docs/sqs.md "Access control"): with tokens configured,
//! the SDK's SigV4 signature must verify against the token named by the access key id, and
//! the token's roles decide, as on the native API.

use aws_sdk_sqs::error::ProvideErrorMetadata;

use crate::support::Sqs;

const ADMIN: (&str, &str, &str) = ("ops-admin", "admin-token-0123456789", "roles = [\"admin\"]");
const PRODUCER: (&str, &str, &str) = (
    "orders-producer",
    "producer-token-0123456789",
    "roles = [\"producer\"]\nqueues = [\"orders*\"]",
);

/// The error code the SDK reports for a failed call.
fn code<E: ProvideErrorMetadata>(error: &E) -> String {
    error.code().unwrap_or("<none>").to_owned()
}

#[tokio::test]
async fn a_good_signature_is_served_and_a_wrong_secret_or_key_is_refused() {
    let Some(sqs) = Sqs::with_tokens(&[ADMIN, PRODUCER]).await else {
        return;
    };
    let url = sqs
        .client
        .create_queue()
        .queue_name("orders")
        .send()
        .await
        .expect("the admin token creates a queue")
        .queue_url
        .unwrap();
    let wrong_secret = sqs.signed_as(ADMIN.0, "not-the-admin-token-at-all");
    let error = wrong_secret.list_queues().send().await.unwrap_err();
    assert_eq!(code(&error.into_service_error()), "SignatureDoesNotMatch");
    let unknown = sqs.signed_as("nobody", ADMIN.1);
    let error = unknown.list_queues().send().await.unwrap_err();
    assert_eq!(code(&error.into_service_error()), "InvalidClientTokenId");
    // The producer's secret signs for the producer's name only.
    let swapped = sqs.signed_as(PRODUCER.0, ADMIN.1);
    let error = swapped
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&error.into_service_error()), "SignatureDoesNotMatch");
}

#[tokio::test]
async fn a_token_without_the_role_is_denied() {
    let Some(sqs) = Sqs::with_tokens(&[ADMIN, PRODUCER]).await else {
        return;
    };
    for name in ["orders", "billing"] {
        sqs.client
            .create_queue()
            .queue_name(name)
            .send()
            .await
            .unwrap();
    }
    let producer = sqs.signed_as(PRODUCER.0, PRODUCER.1);
    let sent = producer
        .send_message()
        .queue_url("orders")
        .message_body("by the producer")
        .send()
        .await;
    assert!(sent.is_ok(), "{sent:?}");
    // Producing elsewhere, consuming, and changing queues need roles it lacks.
    let elsewhere = producer
        .send_message()
        .queue_url("billing")
        .message_body("x")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&elsewhere.into_service_error()), "AccessDenied");
    let receive = producer
        .receive_message()
        .queue_url("orders")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&receive.into_service_error()), "AccessDenied");
    let create = producer
        .create_queue()
        .queue_name("planted")
        .send()
        .await
        .unwrap_err();
    assert_eq!(code(&create.into_service_error()), "AccessDenied");
    // Lists hold only what the token may read.
    let listed = producer.list_queues().send().await.unwrap();
    let urls = listed.queue_urls.unwrap_or_default();
    assert_eq!(urls.len(), 1, "{urls:?}");
    assert!(urls[0].ends_with("/orders"));
}
