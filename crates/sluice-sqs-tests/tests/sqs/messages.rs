//! SendMessage and ReceiveMessage: the MD5 digests against the spec's known vectors (the Rust
//! SDK does not verify them itself), message attribute filters, system attributes, long polls.

use std::time::{Duration, Instant};

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::primitives::Blob;
use aws_sdk_sqs::types::{
    Message, MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
};

use crate::support::{Sqs, bodies, body, now_ms, receipt, system_attribute, system_number};

/// A `String` message attribute.
fn string_attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("a String attribute")
}

/// Makes a received message visible again at once, so the next receive gets it.
async fn release(sqs: &Sqs, url: &str, message: &Message) {
    sqs.client
        .change_message_visibility()
        .queue_url(url)
        .receipt_handle(receipt(message))
        .visibility_timeout(0)
        .send()
        .await
        .expect("ChangeMessageVisibility 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_answers_the_md5_of_the_body_and_of_the_attributes() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("md5", &[]).await;
    // Vectors from the spec (§3.7), recorded from AWS.
    let sent = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("msg")
        .message_attributes("General", string_attribute("Kenobi"))
        .message_attributes("Hello", string_attribute("There"))
        .message_attributes("Help.Me", string_attribute("Me"))
        .send()
        .await
        .expect("SendMessage with attributes");
    assert_eq!(
        sent.md5_of_message_body(),
        Some("6e2baaf3b97dbeef01c0043275f9a0e7")
    );
    assert_eq!(
        sent.md5_of_message_attributes(),
        Some("4c360f3fdafd970e05fae2f149d997f5")
    );
    assert!(sent.message_id().is_some_and(|id| !id.is_empty()));
    // Standard queues have no sequence numbers.
    assert_eq!(sent.sequence_number(), None);

    // Without attributes there is no attribute digest.
    let plain = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("test")
        .send()
        .await
        .expect("SendMessage without attributes");
    assert_eq!(
        plain.md5_of_message_body(),
        Some("098f6bcd4621d373cade4e832627b4f6")
    );
    assert_eq!(plain.md5_of_message_attributes(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_custom_typed_attributes_digest_as_aws_does() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("md5-types", &[]).await;
    let cases = [
        (
            "attr1",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(
                    b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"
                        .to_vec(),
                ))
                .build()
                .expect("Binary attribute"),
            "8cbe4db156db8a94db8b801b7addb984",
        ),
        (
            "customNumberTypeAttrib",
            MessageAttributeValue::builder()
                .data_type("Number.float")
                .string_value("4563442423554324324264524243.32543234")
                .build()
                .expect("Number.float attribute"),
            "9fe1b90bbd9965bdf77bac517c7d2495",
        ),
        (
            "binaryAttribute",
            MessageAttributeValue::builder()
                .data_type("Binary")
                .binary_value(Blob::new(b"Hello binary world!".to_vec()))
                .build()
                .expect("Binary attribute"),
            "31a92b15d92f8db860eda32aceb656c3",
        ),
    ];
    for (name, value, md5) in cases {
        let sent = sqs
            .client
            .send_message()
            .queue_url(&url)
            .message_body("typed")
            .message_attributes(name, value.clone())
            .send()
            .await
            .unwrap_or_else(|e| panic!("SendMessage with {name}: {e:?}"));
        assert_eq!(sent.md5_of_message_attributes(), Some(md5), "{name}");

        // The receive reports the same digest and gives the value back unchanged.
        let received = sqs.receive(&url, 1, 1).await;
        assert_eq!(received.len(), 1, "{name}");
        let message = &received[0];
        assert_eq!(message.md5_of_message_attributes(), Some(md5), "{name}");
        assert_eq!(
            message.message_attributes().and_then(|all| all.get(name)),
            Some(&value),
            "{name}"
        );
        sqs.delete(&url, message).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_valued_attributes_are_part_of_the_digest() {
    let Some(sqs) = Sqs::sluice_only("moto leaves list values out of the attribute MD5").await
    else {
        return;
    };
    let url = sqs.queue("md5-list", &[]).await;
    let sent = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("listed")
        .message_attributes(
            "a",
            MessageAttributeValue::builder()
                .data_type("String")
                .string_list_values("x")
                .string_list_values("y")
                .build()
                .expect("a list attribute"),
        )
        .send()
        .await
        .expect("SendMessage with a StringListValues attribute");
    // Computed in the spec (§3.7, transport byte 3); no external record.
    assert_eq!(
        sent.md5_of_message_attributes(),
        Some("9b30dab58df08a3e3fccee8f544f1c2d")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_returns_only_the_attributes_asked_for_with_their_digest() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("filters", &[]).await;
    sqs.client
        .send_message()
        .queue_url(&url)
        .message_body("filtered")
        .message_attributes("General", string_attribute("Kenobi"))
        .message_attributes("Hello", string_attribute("There"))
        .message_attributes("Help.Me", string_attribute("Me"))
        .send()
        .await
        .expect("SendMessage");

    // (filter, names returned, digest of those): AWS-recorded (spec §3.9, §3.7).
    let cases: [(&[&str], &[&str], Option<&str>); 6] = [
        (
            &["All"],
            &["General", "Hello", "Help.Me"],
            Some("4c360f3fdafd970e05fae2f149d997f5"),
        ),
        (
            &["General", "Hello"],
            &["General", "Hello"],
            Some("fca026605781cb4126a1e9044df24232"),
        ),
        (
            &["Hello"],
            &["Hello"],
            Some("a311262e065454b75da111d535b8dacd"),
        ),
        (
            &["Hel.*"],
            &["Hello", "Help.Me"],
            Some("83fee93c1bcd8b9a5a923ffacdc636c7"),
        ),
        // Unknown names are ignored, not errors.
        (
            &["Hello", "Nobody"],
            &["Hello"],
            Some("a311262e065454b75da111d535b8dacd"),
        ),
        // No filter: no attributes and no digest.
        (&[], &[], None),
    ];
    for (filter, names, md5) in cases {
        let mut request = sqs
            .client
            .receive_message()
            .queue_url(&url)
            .wait_time_seconds(1);
        for name in filter {
            request = request.message_attribute_names(*name);
        }
        let messages = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("ReceiveMessage {filter:?}: {e:?}"))
            .messages
            .unwrap_or_default();
        assert_eq!(messages.len(), 1, "filter {filter:?}");
        let message = &messages[0];
        let mut returned: Vec<&str> = message
            .message_attributes()
            .map(|all| all.keys().map(String::as_str).collect())
            .unwrap_or_default();
        returned.sort_unstable();
        assert_eq!(returned, names, "filter {filter:?}");
        assert_eq!(
            message.md5_of_message_attributes(),
            md5,
            "filter {filter:?}"
        );
        // MD5 of "filtered": the body digest does not depend on the filter.
        assert_eq!(
            message.md5_of_body(),
            Some("dce4a640a8b606a2290c35b8d8d1e9d6")
        );
        release(&sqs, &url, message).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_reports_the_system_attributes_asked_for() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("system", &[]).await;
    let before = now_ms();
    let id = sqs.send(&url, "stamped").await;

    let first = sqs.receive(&url, 1, 1).await;
    assert_eq!(first.len(), 1);
    let message = &first[0];
    assert_eq!(message.message_id(), Some(id.as_str()));
    assert_eq!(body(message), "stamped");
    // MD5 of "stamped".
    assert_eq!(
        message.md5_of_body(),
        Some("195c4f8e50992699d681ba19d1e0626a")
    );
    assert!(!system_attribute(message, &MessageSystemAttributeName::SenderId).is_empty());
    let sent_at = system_number(message, &MessageSystemAttributeName::SentTimestamp);
    assert!(
        (before.saturating_sub(1000)..=now_ms() + 1000).contains(&sent_at),
        "SentTimestamp {sent_at} is epoch ms of the send ({before})"
    );
    let first_receive = system_number(
        message,
        &MessageSystemAttributeName::ApproximateFirstReceiveTimestamp,
    );
    assert!(first_receive >= sent_at, "{first_receive} < {sent_at}");
    assert_eq!(
        system_number(
            message,
            &MessageSystemAttributeName::ApproximateReceiveCount
        ),
        1
    );
    release(&sqs, &url, message).await;

    // Asking for one attribute returns only that one; the count rose with the receive.
    let second = sqs
        .client
        .receive_message()
        .queue_url(&url)
        .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("ReceiveMessage with ApproximateReceiveCount")
        .messages
        .unwrap_or_default();
    assert_eq!(second.len(), 1);
    let attributes = second[0].attributes().expect("system attributes");
    assert_eq!(
        attributes.keys().collect::<Vec<_>>(),
        [&MessageSystemAttributeName::ApproximateReceiveCount]
    );
    assert_eq!(
        system_number(
            &second[0],
            &MessageSystemAttributeName::ApproximateReceiveCount
        ),
        2
    );
    assert_ne!(
        receipt(&second[0]),
        receipt(message),
        "every receive gets a new receipt handle"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_returns_at_most_max_number_of_messages_at_once() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("max-number", &[]).await;
    for n in 0..5 {
        sqs.send(&url, &format!("m{n}")).await;
    }
    // Messages are there: the call returns at once, even with a long wait.
    let started = Instant::now();
    let received = sqs.receive(&url, 3, 10).await;
    assert!(!received.is_empty() && received.len() <= 3, "{received:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let rest = sqs
        .receive_count(&url, 5 - received.len(), Duration::from_secs(5))
        .await;
    assert_eq!(received.len() + rest.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_poll_wakes_up_when_a_message_is_sent() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("long-poll", &[]).await;
    let started = Instant::now();
    let poll = {
        let client = sqs.client.clone();
        let url = url.clone();
        tokio::spawn(async move {
            client
                .receive_message()
                .queue_url(url)
                .wait_time_seconds(15)
                .send()
                .await
                .expect("long-poll ReceiveMessage")
                .messages
                .unwrap_or_default()
        })
    };
    // Let the poll start waiting, then send.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !poll.is_finished(),
        "the poll returned before anything was sent"
    );
    let sent_at = Instant::now();
    sqs.send(&url, "wake up").await;
    let received = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .expect("the poll did not end within 10 s of the send")
        .expect("poll task");
    assert_eq!(received.len(), 1);
    assert_eq!(body(&received[0]), "wake up");
    assert!(
        sent_at.elapsed() < Duration::from_secs(3),
        "the send woke the poll only after {:?} (poll started {:?} ago)",
        sent_at.elapsed(),
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_long_poll_returns_no_messages_after_its_wait() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("empty-poll", &[]).await;
    let started = Instant::now();
    let output = sqs
        .client
        .receive_message()
        .queue_url(&url)
        .wait_time_seconds(1)
        .send()
        .await
        .expect("ReceiveMessage on an empty queue");
    assert!(output.messages().is_empty(), "{output:?}");
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(5)).contains(&waited),
        "waited {waited:?} for WaitTimeSeconds=1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_message_becomes_visible_after_its_delay() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("delayed", &[]).await;
    sqs.client
        .send_message()
        .queue_url(&url)
        .message_body("later")
        .delay_seconds(1)
        .send()
        .await
        .expect("SendMessage with DelaySeconds 1");
    assert!(
        sqs.receive(&url, 1, 0).await.is_empty(),
        "visible before its delay"
    );
    assert_eq!(
        sqs.attribute(&url, QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .await
            .as_deref(),
        Some("1")
    );
    let received = sqs.receive(&url, 1, 5).await;
    assert_eq!(bodies(&received), ["later"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_maximum_message_size_is_invalid_parameter_value() {
    let sqs = Sqs::start().await;
    let url = sqs
        .queue("small", &[(QueueAttributeName::MaximumMessageSize, "1024")])
        .await;
    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("x".repeat(1025))
        .send()
        .await
        .expect_err("SendMessage of 1025 bytes to a 1024-byte queue")
        .into_service_error();
    assert_eq!(error.code(), Some("InvalidParameterValue"), "{error:?}");
    // Exactly the limit is fine.
    sqs.send(&url, &"x".repeat(1024)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_id_on_a_standard_queue_comes_back_as_a_system_attribute() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("fair", &[]).await;
    let sent = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("fair")
        .message_group_id("tenant-1")
        .send()
        .await
        .expect("SendMessage with a group to a standard queue (fair queues)");
    assert_eq!(sent.sequence_number(), None);
    let received = sqs.receive(&url, 1, 1).await;
    assert_eq!(received.len(), 1);
    assert_eq!(
        system_attribute(&received[0], &MessageSystemAttributeName::MessageGroupId),
        "tenant-1"
    );
}
