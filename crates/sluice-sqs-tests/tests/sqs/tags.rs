//! Queue tags: CreateQueue `tags`, TagQueue, UntagQueue, ListQueueTags.

use std::collections::HashMap;

use crate::support::Sqs;

/// The queue's tags (an absent map reads as empty).
async fn tags(sqs: &Sqs, url: &str) -> HashMap<String, String> {
    sqs.client
        .list_queue_tags()
        .queue_url(url)
        .send()
        .await
        .expect("ListQueueTags")
        .tags
        .unwrap_or_default()
}

fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_are_set_at_creation_added_overwritten_and_removed() {
    let sqs = Sqs::start().await;
    let url = sqs
        .client
        .create_queue()
        .queue_name(sqs.name("tagged"))
        .tags("team", "core")
        .tags("Env", "test")
        .send()
        .await
        .expect("CreateQueue with tags")
        .queue_url
        .expect("a QueueUrl");
    assert_eq!(
        tags(&sqs, &url).await,
        map(&[("team", "core"), ("Env", "test")])
    );

    // A repeated key overwrites; keys are case-sensitive.
    sqs.client
        .tag_queue()
        .queue_url(&url)
        .tags("team", "edge")
        .tags("env", "lower")
        .send()
        .await
        .expect("TagQueue");
    assert_eq!(
        tags(&sqs, &url).await,
        map(&[("team", "edge"), ("Env", "test"), ("env", "lower")])
    );

    // Untagging a key that is not there is fine.
    sqs.client
        .untag_queue()
        .queue_url(&url)
        .tag_keys("Env")
        .tag_keys("missing")
        .send()
        .await
        .expect("UntagQueue");
    assert_eq!(
        tags(&sqs, &url).await,
        map(&[("team", "edge"), ("env", "lower")])
    );

    sqs.client
        .untag_queue()
        .queue_url(&url)
        .tag_keys("team")
        .tag_keys("env")
        .send()
        .await
        .expect("UntagQueue of the rest");
    assert!(tags(&sqs, &url).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tagging_a_missing_queue_is_queue_does_not_exist() {
    let sqs = Sqs::start().await;
    let url = sqs.queue("tag-missing", &[]).await;
    sqs.client
        .delete_queue()
        .queue_url(&url)
        .send()
        .await
        .expect("DeleteQueue");
    let error = sqs
        .client
        .tag_queue()
        .queue_url(&url)
        .tags("k", "v")
        .send()
        .await
        .expect_err("TagQueue of a deleted queue")
        .into_service_error();
    assert!(error.is_queue_does_not_exist(), "{error:?}");
}
