//! Long polls: woken by the enqueue itself, and honest about their wait on an empty queue.
//! `wait_ms` is real time even with the test clock, so these tests measure wall time.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::TestServer;

#[tokio::test]
async fn a_waiting_receive_is_woken_by_a_send() {
    // Proves a receive waiting with wait_ms=5000 returns the message sent 200 ms into its wait
    // well before its deadline (under 1.5 s after the send started), so the wake-up comes from
    // the enqueue and not from the timeout.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    let started = Instant::now();
    let (received, send_started) = tokio::join!(
        async {
            let messages = server
                .receive("q", json!({"max": 1, "wait_ms": 5000}))
                .await;
            (messages, Instant::now())
        },
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let send_started = Instant::now();
            server.send("q", json!({"body": "wake up"})).await;
            send_started
        },
    );
    let (messages, returned) = received;
    assert_eq!(messages.len(), 1, "the waiting receive got {messages:?}");
    assert_eq!(messages[0]["body"], "wake up");
    let after_send = returned.saturating_duration_since(send_started);
    assert!(
        after_send < Duration::from_millis(1500),
        "receive returned {after_send:?} after the send"
    );
    assert!(
        returned - started >= Duration::from_millis(150),
        "receive returned before the send: {:?}",
        returned - started
    );
}

#[tokio::test]
async fn a_receive_on_an_empty_queue_waits_its_wait_ms() {
    // Proves a long poll with wait_ms=300 on an empty queue returns no messages, and not before
    // 300 ms have passed.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    let started = Instant::now();
    let messages = server.receive("q", json!({"max": 5, "wait_ms": 300})).await;
    let waited = started.elapsed();
    assert!(messages.is_empty(), "{messages:?}");
    assert!(
        waited >= Duration::from_millis(300),
        "returned after {waited:?}"
    );
    assert!(waited < Duration::from_secs(5), "returned after {waited:?}");
}
