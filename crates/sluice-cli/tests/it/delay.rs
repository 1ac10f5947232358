//! Delayed messages: `delay_ms` and `not_before`, on the test clock.

use serde_json::json;

use crate::support::{TestServer, format_time, parse_time};

#[tokio::test]
async fn delay_ms_hides_a_message_until_its_time() {
    // Proves a message sent with delay_ms 5000 is delayed (in stats and status), invisible at
    // +4999 ms and visible at +5000 ms, while an undelayed one is visible at once.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    let now = server.now().await;
    let id = server
        .send("q", json!({"body": "later", "delay_ms": 5000}))
        .await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(status["state"], "delayed", "{status}");
    assert_eq!(parse_time(&status["visible_at"]), now + 5000);
    let stats = server.stats("q").await;
    assert_eq!(
        (stats["delayed"].as_u64(), stats["ready"].as_u64()),
        (Some(1), Some(0)),
        "{stats}"
    );

    server.send("q", json!({"body": "now"})).await;
    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["body"], "now");

    server.advance_clock(4999).await;
    assert!(
        server.receive("q", json!({"max": 10})).await.is_empty(),
        "visible 1 ms early"
    );
    server.advance_clock(1).await;
    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "not visible at its time");
    assert_eq!(messages[0]["body"], "later");
    assert_eq!(messages[0]["attempts"], 1);
}

#[tokio::test]
async fn not_before_hides_a_message_until_that_time() {
    // Proves not_before (RFC 3339) hides a message until that instant, and a not_before in the
    // past makes it visible at once.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    let now = server.now().await;
    server
        .send(
            "q",
            json!({"body": "future", "not_before": format_time(now + 3000)}),
        )
        .await;
    server
        .send(
            "q",
            json!({"body": "past", "not_before": format_time(now - 60_000)}),
        )
        .await;

    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["body"], "past");
    server.advance_clock(2999).await;
    assert!(
        server.receive("q", json!({"max": 10})).await.is_empty(),
        "visible 1 ms early"
    );
    server.advance_clock(1).await;
    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "not visible at its not_before");
    assert_eq!(messages[0]["body"], "future");
}

#[tokio::test]
async fn a_delay_of_two_years_is_kept_and_delivered() {
    // Proves delays have no practical cap: a message delayed two years is accepted (202),
    // survives a year on a queue that keeps messages one minute (retention counts from when it
    // becomes visible) and a SIGKILL, and is delivered once its time comes; only a delay past
    // 100 years is refused, naming the field.
    const YEAR_MS: i64 = 365 * 24 * 60 * 60 * 1000;
    let mut server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_age_ms": 60_000})).await;
    let now = server.now().await;
    let id = server
        .send("q", json!({"body": "later", "delay_ms": 2 * YEAR_MS}))
        .await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (message, field) in [
        (json!({"body": 1, "delay_ms": 101 * YEAR_MS}), "delay_ms"),
        (
            json!({"body": 1, "not_before": format_time(now + 101 * YEAR_MS)}),
            "not_before",
        ),
    ] {
        let error = server
            .post("/v1/queues/q/messages", message.clone())
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains(field),
            "{message} gave {error}"
        );
    }

    server.advance_clock(YEAR_MS).await;
    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(status["state"], "delayed", "{status}");
    assert_eq!(parse_time(&status["visible_at"]), now + 2 * YEAR_MS);

    server.kill().await;
    server.restart().await;
    let restarted = server.now().await;
    server
        .advance_clock(now + 2 * YEAR_MS - restarted - 1)
        .await;
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
    server.advance_clock(1).await;
    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "not visible at its time");
    assert_eq!(messages[0]["body"], "later");
}
