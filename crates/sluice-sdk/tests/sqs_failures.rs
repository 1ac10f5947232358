//! The SQS backend reports a failed attempt to the server (issue 33, item 2): on sluice the
//! failure is a nack, so sluice retries or dead-letters the message itself, with its error,
//! counted in the queue's `dead_lettered` and replayable from the native API, the dashboard and
//! the CLI; the backend's own reading of the dead-letter queue shows the same errors. (Against a
//! server that does not know the report, AWS or moto, the backend dead-letters by itself, as
//! before: `ChangeMessageVisibility` answers without `x-sluice-outcome`.)

use std::time::Duration;

use serde_json::Value;
use sluice_sdk::{Nack, NackOutcome, Outgoing, QueueOptions};

use crate::support::{Clock, Harness, Kind};

fn message(body: &str) -> Outgoing {
    Outgoing {
        body: body.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn nack(error: &str, permanent: bool) -> Nack {
    Nack {
        error: error.to_owned(),
        delay: Some(Duration::ZERO),
        permanent,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_through_sqs_on_sluice_are_sluice_dead_letters() {
    let Some(h) = Harness::try_start(Kind::Sqs, Clock::Real).await else {
        return;
    };
    let base = h.server_url().expect("a server").to_owned();
    let queue = h.name("fails");
    let options = QueueOptions {
        max_attempts: Some(2),
        ..Default::default()
    };
    let backend = &h.backend;
    backend.ensure_queue_with(&queue, &options).await.unwrap();
    backend
        .enqueue(&queue, vec![message("used up"), message("poison")])
        .await
        .unwrap();
    let lease = Duration::from_secs(30);
    let first = backend
        .receive(&queue, 10, lease, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(first.len(), 2);
    for delivery in &first {
        let outcome = if delivery.body == b"poison" {
            backend
                .nack(&queue, &delivery.receipt, nack("bad input: é", true))
                .await
        } else {
            backend
                .nack(&queue, &delivery.receipt, nack("timeout 1", false))
                .await
        };
        let expected = if delivery.body == b"poison" {
            NackOutcome::DeadLettered
        } else {
            NackOutcome::Retried
        };
        assert_eq!(outcome.unwrap(), expected);
    }
    let again = backend
        .receive(&queue, 10, lease, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].body, b"used up");
    assert_eq!(again[0].attempt, 2);
    assert_eq!(
        backend
            .nack(&queue, &again[0].receipt, nack("timeout 2", false))
            .await
            .unwrap(),
        NackOutcome::DeadLettered,
        "its last attempt: sluice dead-letters it"
    );

    // The native API sees sluice dead letters with their errors, counted.
    let http = reqwest::Client::new();
    let get = |path: String| {
        let request = http.get(format!("{base}/v1/queues/{queue}/{path}"));
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let listed = get("dlq".into()).await;
    let mut errors: Vec<&str> = listed["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| entry["last_error"].as_str().unwrap_or_default())
        .collect();
    errors.sort_unstable();
    assert_eq!(errors, ["bad input: é", "timeout 2"], "{listed}");
    let stats = get("stats".into()).await;
    assert_eq!(stats["counters"]["dead_lettered"], 2, "{stats}");

    // The backend's own reading shows the same errors and attempts.
    let mut letters = backend.dead_letters(&queue, 10).await.unwrap();
    letters.sort_by_key(|letter| letter.body.clone());
    let seen: Vec<(Option<&str>, u32)> = letters
        .iter()
        .map(|letter| (letter.error.as_deref(), letter.attempts))
        .collect();
    assert_eq!(
        seen,
        [(Some("bad input: é"), 1), (Some("timeout 2"), 2)],
        "{letters:?}"
    );

    // A replay from the native API brings them back where the backend receives them.
    let replayed: Value = http
        .post(format!("{base}/v1/queues/{queue}/dlq/replay"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(replayed["replayed"], 2, "{replayed}");
    let back = backend
        .receive(&queue, 10, lease, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(back.len(), 2);
    assert!(back.iter().all(|delivery| delivery.attempt == 1));
    h.cleanup_all().await;
}
