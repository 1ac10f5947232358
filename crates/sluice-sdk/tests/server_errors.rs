//! The sluice backends report the server's refusals alike: over HTTP and over gRPC the same
//! refusal is the same `Error` variant (a missing queue, a full queue with its retry-after, a
//! stale lease, a malformed receipt, a message that is not there).

use std::time::Duration;

use crate::support::{Clock, Harness, Kind};
use sluice_sdk::{Error, ErrorCode, MessageRef, Outgoing};
use uuid::Uuid;

/// What a refusal is, without its wording.
fn shape(result: sluice_sdk::Result<impl std::fmt::Debug>) -> String {
    match result {
        Ok(value) => format!("ok {value:?}"),
        Err(Error::QueueNotFound(_)) => "queue_not_found".into(),
        Err(Error::QueueFull { retry_after }) => format!("queue_full after {retry_after:?}"),
        Err(Error::StaleLease(_)) => "stale_lease".into(),
        Err(Error::Invalid { code, .. }) => format!("invalid {code}"),
        Err(Error::Other { status, code, .. }) => format!("other {status} {code}"),
        Err(error) => format!("{error:?}"),
    }
}

fn json(text: &str) -> Outgoing {
    Outgoing {
        body: text.as_bytes().to_vec(),
        ..Outgoing::default()
    }
}

async fn refusals(kind: Kind) -> Vec<String> {
    let h = Harness::start(kind, Clock::Real).await;
    let backend = &h.backend;
    let mut seen = Vec::new();

    seen.push(shape(backend.stats("nowhere").await));
    seen.push(shape(backend.enqueue("nowhere", vec![json("1")]).await));

    // A queue that holds one message.
    let response = reqwest::Client::new()
        .put(format!("{}/v1/queues/small", h.server_url().unwrap()))
        .json(&serde_json::json!({ "max_depth": 1 }))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{response:?}");
    backend.enqueue("small", vec![json("1")]).await.unwrap();
    seen.push(shape(backend.enqueue("small", vec![json("2")]).await));

    let leased = backend
        .receive("small", 1, Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    backend.ack("small", &leased[0].receipt).await.unwrap();
    seen.push(shape(backend.ack("small", &leased[0].receipt).await));
    seen.push(shape(
        backend
            .extend("small", &leased[0].receipt, Duration::from_secs(5))
            .await,
    ));
    seen.push(shape(backend.ack("small", "not-a-receipt").await));
    seen.push(shape(
        backend.get("small", MessageRef::Id(Uuid::now_v7())).await,
    ));
    seen.push(shape(
        backend
            .receive(
                "small",
                1,
                Duration::from_secs(30),
                Duration::from_millis(200),
            )
            .await
            .map(|leased| leased.len()),
    ));
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_refusals_are_the_errors_http_gives() {
    let http = refusals(Kind::Http).await;
    let grpc = refusals(Kind::Grpc).await;
    assert_eq!(http, grpc);
    // And they are what they should be.
    assert_eq!(http[0], "queue_not_found");
    assert!(http[2].starts_with("queue_full after"), "{http:?}");
    assert_eq!(http[3], "stale_lease");
    assert_eq!(http[4], "stale_lease");
    assert_eq!(
        http[5],
        format!("invalid {}", ErrorCode::MalformedReceipt.as_str())
    );
    assert_eq!(http[6], "ok None");
    assert_eq!(http[7], "ok 0");
}

#[tokio::test]
async fn the_embedded_backend_applies_the_queues_rules_as_the_server_does() {
    // Issue 32: the embedded backend enqueues through the operations layer, so a queue's
    // content dedup, JSON Schema, default delay and batch cap hold there as over HTTP (it
    // stored messages itself and applied none of them).
    let embedded = sluice_sdk::Embedded::temporary().await.unwrap();
    let mut config = sluice_core::queue::QueueConfig::defaults_for("orders");
    config.dedup = sluice_core::queue::Dedup::Content;
    config.delay_ms = 60_000;
    config.schema = Some(std::sync::Arc::new(
        sluice_core::queue::MessageSchema::compile(serde_json::json!({
            "type": "object", "required": ["order"]
        }))
        .unwrap(),
    ));
    embedded.put_queue("orders", config).await.unwrap();
    let backend: &dyn sluice_sdk::Backend = &embedded;

    let first = backend
        .enqueue("orders", vec![json(r#"{"order":1}"#)])
        .await
        .unwrap();
    let again = backend
        .enqueue("orders", vec![json(r#"{"order":1}"#)])
        .await
        .unwrap();
    assert!(first[0].created && !again[0].created, "content dedup");
    assert_eq!(again[0].message_id, first[0].message_id);

    let stats = backend.stats("orders").await.unwrap();
    assert_eq!(
        (stats.ready, stats.delayed),
        (0, 1),
        "the queue's default delay"
    );

    assert_eq!(
        shape(backend.enqueue("orders", vec![json(r#"{"item":1}"#)]).await),
        "invalid schema_violation"
    );
    let too_many = vec![json(r#"{"order":2}"#); sluice_core::queue::limits::BATCH_MESSAGES_MAX + 1];
    assert_eq!(
        shape(backend.enqueue("orders", too_many).await),
        "invalid too_large"
    );
    embedded.close().await.unwrap();
}
