//! AddPermission and RemovePermission, seen through the queue's `Policy` attribute (sluice
//! stores the statement and grants nothing by it; spec §3.13).

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::support::Sqs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_and_remove_permission_round_trip_through_the_policy() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("permitted", &[]).await;
    let arn = sqs.arn(&url).await;
    sqs.client
        .add_permission()
        .queue_url(&url)
        .label("partner-send")
        .aws_account_ids("111111111111")
        .actions("SendMessage")
        .send()
        .await
        .expect("AddPermission");
    let policy = sqs
        .attribute(&url, QueueAttributeName::Policy)
        .await
        .expect("a Policy after AddPermission");
    let compact: String = policy.chars().filter(|c| !c.is_whitespace()).collect();
    // The statement AWS writes: Sid = label, the action with the SQS: prefix, the queue as
    // resource, the account's root as principal (a string or a one-element list).
    for part in [
        r#""Sid":"partner-send""#.to_owned(),
        r#""Effect":"Allow""#.to_owned(),
        r#""Action":"SQS:SendMessage""#.to_owned(),
        format!(r#""Resource":"{arn}""#),
        format!(r#""Id":"{arn}/SQSDefaultPolicy""#),
        "arn:aws:iam::111111111111:root".to_owned(),
    ] {
        assert!(compact.contains(&part), "{part} not in the policy {policy}");
    }

    // The label exists already.
    let error = sqs
        .client
        .add_permission()
        .queue_url(&url)
        .label("partner-send")
        .aws_account_ids("111111111111")
        .actions("ReceiveMessage")
        .send()
        .await
        .expect_err("AddPermission with a label in use")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");

    sqs.client
        .remove_permission()
        .queue_url(&url)
        .label("partner-send")
        .send()
        .await
        .expect("RemovePermission");
    // Removing the last statement removes the policy.
    assert_eq!(sqs.attribute(&url, QueueAttributeName::Policy).await, None);

    let error = sqs
        .client
        .remove_permission()
        .queue_url(&url)
        .label("partner-send")
        .send()
        .await
        .expect_err("RemovePermission of an unknown label")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
}
