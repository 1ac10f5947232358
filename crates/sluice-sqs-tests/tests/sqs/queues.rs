//! Queue lifecycle: CreateQueue (standard, FIFO, idempotent), GetQueueUrl, ListQueues (prefix,
//! pagination), PurgeQueue, DeleteQueue.

use std::collections::BTreeSet;
use std::time::Duration;

use aws_sdk_sqs::error::ProvideErrorMetadata;
use aws_sdk_sqs::operation::RequestId;
use aws_sdk_sqs::types::QueueAttributeName;

use crate::support::Sqs;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_queue_answers_a_url_that_get_queue_url_finds_again() {
    let sqs = Sqs::start().await;
    let name = sqs.name("create");
    let url = sqs.create(&name, &[]).await;
    assert!(
        url.ends_with(&format!("/{name}")),
        "the queue URL ends in the name: {url}"
    );

    let found = sqs
        .client
        .get_queue_url()
        .queue_name(&name)
        .send()
        .await
        .expect("GetQueueUrl");
    assert_eq!(found.queue_url(), Some(url.as_str()));
    // Read from x-amzn-RequestId (spec §1.1), on answers and on errors.
    assert!(
        found.request_id().is_some_and(|id| !id.is_empty()),
        "{found:?}"
    );
    let error = sqs
        .client
        .get_queue_url()
        .queue_name(sqs.name("missing"))
        .send()
        .await
        .expect_err("GetQueueUrl of a missing queue");
    assert!(
        error.request_id().is_some_and(|id| !id.is_empty()),
        "{error:?}"
    );
    // A standard queue has no FIFO attributes.
    assert_eq!(
        sqs.attribute(&url, QueueAttributeName::FifoQueue).await,
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_fifo_queue_reports_fifo_attributes() {
    let sqs = Sqs::start().await;
    let url = sqs
        .fifo_queue(
            "create-fifo",
            &[(QueueAttributeName::ContentBasedDeduplication, "true")],
        )
        .await;
    assert!(url.ends_with(".fifo"), "{url}");
    let attributes = sqs
        .client
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::All)
        .send()
        .await
        .expect("GetQueueAttributes All")
        .attributes
        .unwrap_or_default();
    assert_eq!(
        attributes
            .get(&QueueAttributeName::FifoQueue)
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        attributes
            .get(&QueueAttributeName::ContentBasedDeduplication)
            .map(String::as_str),
        Some("true")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_queue_again_is_idempotent_unless_an_attribute_differs() {
    let sqs = Sqs::start().await;
    let name = sqs.name("idempotent");
    let url = sqs
        .create(&name, &[(QueueAttributeName::VisibilityTimeout, "5")])
        .await;
    // Same attributes, and no attributes at all: the same URL.
    let again = sqs
        .create(&name, &[(QueueAttributeName::VisibilityTimeout, "5")])
        .await;
    assert_eq!(again, url);
    assert_eq!(sqs.create(&name, &[]).await, url);

    let error = sqs
        .client
        .create_queue()
        .queue_name(&name)
        .attributes(QueueAttributeName::VisibilityTimeout, "7")
        .send()
        .await
        .expect_err("CreateQueue with another VisibilityTimeout")
        .into_service_error();
    assert!(error.is_queue_name_exists(), "{error:?}");
    assert_eq!(error.code(), Some("QueueAlreadyExists"));
    if sqs.is_sluice() {
        // AWS names the differing attribute (spec §2.2); moto does not.
        assert_eq!(
            error.message(),
            Some(
                "A queue already exists with the same name and a different value for \
                 attribute VisibilityTimeout"
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_queue_url_of_a_missing_queue_is_queue_does_not_exist() {
    let sqs = Sqs::start().await;
    let error = sqs
        .client
        .get_queue_url()
        .queue_name(sqs.name("nope"))
        .send()
        .await
        .expect_err("GetQueueUrl of a missing queue")
        .into_service_error();
    // `is_queue_does_not_exist` needs the legacy code in x-amzn-query-error (spec §2.1).
    assert!(error.is_queue_does_not_exist(), "{error:?}");
    assert_eq!(
        error.code(),
        Some("AWS.SimpleQueueService.NonExistentQueue")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_queues_filters_by_prefix() {
    let sqs = Sqs::start().await;
    let prefix = sqs.name("listed");
    let mut created = BTreeSet::new();
    for suffix in ["a", "b", "c"] {
        created.insert(sqs.create(&format!("{prefix}-{suffix}"), &[]).await);
    }
    let other = sqs.queue("unlisted", &[]).await;

    let listed: BTreeSet<String> = sqs
        .client
        .list_queues()
        .queue_name_prefix(&prefix)
        .send()
        .await
        .expect("ListQueues")
        .queue_urls
        .unwrap_or_default()
        .into_iter()
        .collect();
    assert_eq!(listed, created);
    assert!(!listed.contains(&other));

    // A prefix matching nothing: no URLs (the member may be absent).
    let none = sqs
        .client
        .list_queues()
        .queue_name_prefix(format!("{prefix}-zzz"))
        .send()
        .await
        .expect("ListQueues with an unmatched prefix");
    assert!(none.queue_urls().is_empty(), "{none:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_queues_pages_with_max_results_and_next_token() {
    let Some(sqs) = Sqs::sluice_only("moto ignores MaxResults and NextToken").await else {
        return;
    };
    let prefix = sqs.name("paged");
    let mut created = BTreeSet::new();
    for n in 0..5 {
        created.insert(sqs.create(&format!("{prefix}-{n}"), &[]).await);
    }

    let mut listed = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(pages <= 5, "more pages than queues: {listed:?}");
        let page = sqs
            .client
            .list_queues()
            .queue_name_prefix(&prefix)
            .max_results(2)
            .set_next_token(token.take())
            .send()
            .await
            .expect("ListQueues page");
        assert!(page.queue_urls().len() <= 2, "{page:?}");
        listed.extend(page.queue_urls().iter().cloned());
        match page.next_token {
            Some(next) => token = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 3, "5 queues in pages of 2: {listed:?}");
    assert_eq!(listed.len(), 5, "no queue listed twice: {listed:?}");
    assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), created);

    // Without MaxResults there is no NextToken (spec §3.3).
    let whole = sqs
        .client
        .list_queues()
        .queue_name_prefix(&prefix)
        .send()
        .await
        .expect("ListQueues");
    assert_eq!(whole.queue_urls().len(), 5);
    assert_eq!(whole.next_token(), None);

    // MaxResults is 1–1000.
    for max in [0, 1001] {
        let error = sqs
            .client
            .list_queues()
            .max_results(max)
            .send()
            .await
            .expect_err("ListQueues with MaxResults out of range")
            .into_service_error();
        assert_eq!(
            error.code(),
            Some("InvalidParameterValue"),
            "{max}: {error:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_queue_makes_it_missing() {
    let sqs = Sqs::start().await;
    let name = sqs.name("deleted");
    let url = sqs.create(&name, &[]).await;
    sqs.send(&url, "gone with the queue").await;
    sqs.client
        .delete_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("DeleteQueue");

    let error = sqs
        .client
        .get_queue_url()
        .queue_name(&name)
        .send()
        .await
        .expect_err("GetQueueUrl after DeleteQueue")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");
    let error = sqs
        .client
        .send_message()
        .queue_url(&url)
        .message_body("x")
        .send()
        .await
        .expect_err("SendMessage after DeleteQueue")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");
    let error = sqs
        .client
        .delete_queue()
        .queue_url(&url)
        .send()
        .await
        .expect_err("DeleteQueue twice")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_queue_removes_every_message_in_flight_too() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("purged", &[]).await;
    for n in 0..3 {
        sqs.send(&url, &format!("m{n}")).await;
    }
    // One of them in flight, for a second only.
    let in_flight = sqs
        .client
        .receive_message()
        .queue_url(&url)
        .visibility_timeout(1)
        .send()
        .await
        .expect("ReceiveMessage")
        .messages
        .unwrap_or_default();
    assert_eq!(in_flight.len(), 1);

    sqs.client
        .purge_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("PurgeQueue");
    assert_eq!(sqs.visible_count(&url).await, 0);
    let not_visible = sqs
        .attribute(
            &url,
            QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
        )
        .await;
    assert_eq!(
        not_visible.as_deref(),
        Some("0"),
        "AWS purges in-flight messages"
    );
    // Its visibility timeout ends: it does not come back.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(sqs.receive(&url, 10, 0).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_purge_within_60_seconds_is_purge_queue_in_progress() {
    let Some(sqs) = Sqs::sluice_only("moto does not limit purges to one per 60 s").await else {
        return;
    };
    let url = sqs.queue("purged-twice", &[]).await;
    sqs.client
        .purge_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("first PurgeQueue");
    let error = sqs
        .client
        .purge_queue()
        .queue_url(&url)
        .send()
        .await
        .expect_err("second PurgeQueue within 60 s");
    let status = error.raw_response().map(|raw| raw.status().as_u16());
    let error = error.into_service_error();
    assert!(error.is_purge_queue_in_progress(), "{error:?}");
    assert_eq!(
        error.code(),
        Some("AWS.SimpleQueueService.PurgeQueueInProgress")
    );
    assert_eq!(
        status,
        Some(403),
        "PurgeQueueInProgress is a 403 (spec §2.2)"
    );
}
