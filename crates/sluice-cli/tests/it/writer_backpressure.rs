//! `[store] writer_queue_bytes`: while the store's writer is stalled, an enqueue that would
//! take the new messages waiting for it beyond the bound gets 503 `overloaded` with
//! `Retry-After` at once (not more memory, not a wait), an ack still goes in, and once the
//! writer catches up everything accepted is stored and the refused batch is taken.
//!
//! The writer is stalled the way it is in production when another program (a backup, an
//! operator's `sqlite3` shell) holds the database's write lock: the test holds it.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

/// The bound of the server under test (the smallest allowed).
const BOUND: u64 = 1 << 20;
/// Bodies of the batches: 7 of these (700 KB) fit, 4 more do not.
const BODY_CHARS: usize = 100_000;

fn batch(count: usize) -> Value {
    let messages: Vec<Value> = (0..count)
        .map(|i| json!({ "body": { "n": i, "pad": "x".repeat(BODY_CHARS) } }))
        .collect();
    json!({ "messages": messages })
}

/// `sluice_storage_writer_queue_bytes` now.
async fn inbox_bytes(server: &TestServer) -> u64 {
    let text = server.get("/metrics").await.text;
    text.lines()
        .find_map(|line| line.strip_prefix("sluice_storage_writer_queue_bytes "))
        .and_then(|value| value.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no sluice_storage_writer_queue_bytes in {text}")) as u64
}

/// Sends a request in its own task, so the test goes on while it waits for the writer.
fn spawn_post(server: &TestServer, path: &str, body: Value) -> tokio::task::JoinHandle<StatusCode> {
    let request = server
        .client()
        .post(format!("{}{path}", server.url()))
        .json(&body);
    tokio::spawn(async move { request.send().await.expect("an answer").status() })
}

#[tokio::test]
async fn enqueues_beyond_the_writer_queue_get_503_overloaded_until_the_writer_catches_up() {
    let server = TestServer::builder()
        .config(&format!("[store]\nwriter_queue_bytes = {BOUND}\n"))
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    server.send("q", json!({"body": "to ack"})).await;
    let leased = server.receive("q", json!({"max": 1})).await;
    let receipt = receipt(&leased[0]).to_owned();
    assert_eq!(inbox_bytes(&server).await, 0);

    let lock = rusqlite::Connection::open(server.data_dir().join("sluice.db")).unwrap();
    lock.pragma_update(None, "busy_timeout", 10_000).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();

    let first = spawn_post(&server, "/v1/queues/q/messages", batch(7));
    let deadline = Instant::now() + Duration::from_secs(10);
    while inbox_bytes(&server).await < 700_000 {
        assert!(
            Instant::now() < deadline,
            "the first batch was never charged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let refused = server.post("/v1/queues/q/messages", batch(4)).await;
    let error = refused.error(503, "overloaded");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("writer_queue_bytes"),
        "{error}"
    );
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    let held = inbox_bytes(&server).await;
    assert!((700_000..=BOUND).contains(&held), "{held}");

    // An ack is never refused for it: the message already left memory, so it waits its turn.
    let ack = spawn_post(&server, "/v1/queues/q/ack", json!({ "receipt": receipt }));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!first.is_finished() && !ack.is_finished());

    lock.execute_batch("ROLLBACK").unwrap();
    drop(lock);
    assert!(first.await.unwrap().is_success());
    assert!(ack.await.unwrap().is_success());
    assert_eq!(inbox_bytes(&server).await, 0);
    let answer = server.send("q", batch(4)).await;
    assert_eq!(
        answer["results"].as_array().map(Vec::len),
        Some(4),
        "{answer}"
    );
    assert_eq!(server.stats("q").await["ready"], 11);
}
