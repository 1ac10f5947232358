//! GetQueueAttributes and SetQueueAttributes: the default set AWS reports, changes read back,
//! RedrivePolicy set and removed, and the validation errors.

use std::collections::HashMap;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::support::{Sqs, attributes, now_ms, redrive_policy};

/// Every attribute of `url` (`All`).
async fn all_attributes(sqs: &Sqs, url: &str) -> HashMap<QueueAttributeName, String> {
    sqs.client
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("GetQueueAttributes All")
        .attributes
        .unwrap_or_default()
}

/// An epoch-seconds timestamp attribute, checked to be within a minute of now.
fn recent_seconds(
    attributes: &HashMap<QueueAttributeName, String>,
    name: QueueAttributeName,
) -> f64 {
    let value = attributes
        .get(&name)
        .unwrap_or_else(|| panic!("no {name} in {attributes:?}"));
    // AWS sends whole seconds; moto adds a fraction, which this accepts.
    let seconds: f64 = value
        .parse()
        .unwrap_or_else(|e| panic!("{name} {value:?} is not a number: {e}"));
    let now = now_ms() as f64 / 1000.0;
    assert!(
        (now - 60.0..=now + 1.0).contains(&seconds),
        "{name} {value} is not epoch seconds close to now ({now})"
    );
    seconds
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_standard_queue_reports_the_aws_defaults() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("defaults", &[]).await;
    let all = all_attributes(&sqs, &url).await;
    // The set AWS returns for a new standard queue (spec §3.14, [LS-SNAP]).
    for (name, value) in [
        (QueueAttributeName::ApproximateNumberOfMessages, "0"),
        (QueueAttributeName::ApproximateNumberOfMessagesDelayed, "0"),
        (
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
            "0",
        ),
        (QueueAttributeName::DelaySeconds, "0"),
        (QueueAttributeName::MaximumMessageSize, "1048576"),
        (QueueAttributeName::MessageRetentionPeriod, "345600"),
        (QueueAttributeName::ReceiveMessageWaitTimeSeconds, "0"),
        (QueueAttributeName::VisibilityTimeout, "30"),
        (QueueAttributeName::SqsManagedSseEnabled, "true"),
    ] {
        assert_eq!(
            all.get(&name).map(String::as_str),
            Some(value),
            "{name} in {all:?}"
        );
    }
    let arn = &all[&QueueAttributeName::QueueArn];
    let name = url.rsplit('/').next().expect("a name in the URL");
    assert!(
        arn.starts_with("arn:aws:sqs:") && arn.ends_with(&format!(":{name}")),
        "QueueArn {arn} of {url}"
    );
    let created = recent_seconds(&all, QueueAttributeName::CreatedTimestamp);
    let modified = recent_seconds(&all, QueueAttributeName::LastModifiedTimestamp);
    assert!(modified >= created);
    if sqs.is_sluice() {
        // AWS's timestamps are whole seconds.
        assert!(
            !all[&QueueAttributeName::CreatedTimestamp].contains('.'),
            "{all:?}"
        );
    }
    // Attributes that are not set are not reported.
    for absent in [
        QueueAttributeName::RedrivePolicy,
        QueueAttributeName::Policy,
        QueueAttributeName::FifoQueue,
    ] {
        assert!(!all.contains_key(&absent), "{absent} in {all:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_queue_attributes_changes_what_get_reports() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("set", &[]).await;
    sqs.client
        .set_queue_attributes()
        .queue_url(&url)
        .set_attributes(Some(attributes(&[
            (QueueAttributeName::VisibilityTimeout, "45"),
            (QueueAttributeName::DelaySeconds, "2"),
            (QueueAttributeName::MaximumMessageSize, "2048"),
            (QueueAttributeName::ReceiveMessageWaitTimeSeconds, "3"),
        ])))
        .send()
        .await
        .expect("SetQueueAttributes");
    let all = all_attributes(&sqs, &url).await;
    for (name, value) in [
        (QueueAttributeName::VisibilityTimeout, "45"),
        (QueueAttributeName::DelaySeconds, "2"),
        (QueueAttributeName::MaximumMessageSize, "2048"),
        (QueueAttributeName::ReceiveMessageWaitTimeSeconds, "3"),
        // Unchanged.
        (QueueAttributeName::MessageRetentionPeriod, "345600"),
    ] {
        assert_eq!(all.get(&name).map(String::as_str), Some(value), "{name}");
    }

    // Only the names asked for come back.
    let some = sqs
        .client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::VisibilityTimeout)
        .attribute_names(QueueAttributeName::DelaySeconds)
        .send()
        .await
        .expect("GetQueueAttributes of two names")
        .attributes
        .unwrap_or_default();
    assert_eq!(
        some,
        attributes(&[
            (QueueAttributeName::VisibilityTimeout, "45"),
            (QueueAttributeName::DelaySeconds, "2"),
        ])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_policy_round_trips_and_an_empty_value_removes_it() {
    let sqs = Sqs::start().await;
    let dead = sqs.queue("rp-dlq", &[]).await;
    let dead_arn = sqs.arn(&dead).await;
    let url = sqs.queue("rp-source", &[]).await;
    sqs.client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(
            QueueAttributeName::RedrivePolicy,
            redrive_policy(&dead_arn, 3),
        )
        .send()
        .await
        .expect("SetQueueAttributes RedrivePolicy");
    let policy = sqs
        .attribute(&url, QueueAttributeName::RedrivePolicy)
        .await
        .expect("a RedrivePolicy");
    // Compared by meaning: whitespace and a string or number maxReceiveCount vary by server.
    let compact: String = policy.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(
        compact.contains(&format!(r#""deadLetterTargetArn":"{dead_arn}""#)),
        "{policy}"
    );
    assert!(
        compact.contains(r#""maxReceiveCount":3"#) || compact.contains(r#""maxReceiveCount":"3""#),
        "{policy}"
    );

    sqs.client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::RedrivePolicy, "")
        .send()
        .await
        .expect("SetQueueAttributes RedrivePolicy \"\"");
    assert_eq!(
        sqs.attribute(&url, QueueAttributeName::RedrivePolicy).await,
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_attribute_names_are_invalid_attribute_name() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("unknown-attribute", &[]).await;
    let error = sqs
        .client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::from("Foobar"))
        .send()
        .await
        .expect_err("GetQueueAttributes Foobar")
        .into_service_error();
    assert!(error.is_invalid_attribute_name(), "{error:?}");
    assert_eq!(error.message(), Some("Unknown Attribute Foobar."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_queue_attributes_validates_names_and_values() {
    let Some(sqs) = Sqs::sluice_only("moto accepts any attribute name and value on set").await
    else {
        return;
    };
    let url = sqs.queue("validated", &[]).await;
    let error = sqs
        .client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::from("Foobar"), "1")
        .send()
        .await
        .expect_err("SetQueueAttributes Foobar")
        .into_service_error();
    assert!(error.is_invalid_attribute_name(), "{error:?}");

    // VisibilityTimeout is 0–43200 (spec §3.14).
    let error = sqs
        .client
        .set_queue_attributes()
        .queue_url(&url)
        .attributes(QueueAttributeName::VisibilityTimeout, "43201")
        .send()
        .await
        .expect_err("SetQueueAttributes VisibilityTimeout 43201")
        .into_service_error();
    assert!(error.is_invalid_attribute_value(), "{error:?}");

    // A standard queue cannot take FIFO attributes, even "false" (spec §2.2).
    let error = sqs
        .client
        .create_queue()
        .queue_name(sqs.name("not-fifo"))
        .attributes(QueueAttributeName::FifoQueue, "false")
        .send()
        .await
        .expect_err("CreateQueue of a standard queue with FifoQueue=false")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidAttributeName"), "{error:?}");

    // Nothing changed.
    assert_eq!(
        sqs.attribute(&url, QueueAttributeName::VisibilityTimeout)
            .await
            .as_deref(),
        Some("30")
    );
}
