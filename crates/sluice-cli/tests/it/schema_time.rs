//! JSON Schema patterns cannot stall the server: they run on a linear-time regex engine, off
//! the async threads, and the features only a backtracking engine has (backreferences,
//! lookaround) are refused when the queue is defined.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;

/// Generous bound on a batch's validation (a backtracking engine took tens of seconds).
const BATCH_TIME_MAX: Duration = Duration::from_secs(30);
/// Generous bound on `/healthz` while a batch is validated (it stalled 13 s before).
const HEALTHZ_TIME_MAX: Duration = Duration::from_secs(1);

fn string_schema(pattern: &str) -> Value {
    json!({"schema": {
        "type": "object",
        "properties": {"s": {"type": "string", "pattern": pattern}},
    }})
}

#[tokio::test]
async fn backtracking_patterns_are_refused_at_definition() {
    // Proves a pattern that needs a backtracking engine is refused with 422 when the queue is
    // defined. With the old engine `^(a|aa)+\1$` was accepted and took about half a second
    // per 26-character string (debug build): a 1000-message batch was still not answered after
    // 5 minutes, and held up a graceful shutdown as long.
    let server = TestServer::builder().start().await;
    for pattern in [r"^(a|aa)+\1$", "^(?=a)(a+)+$", "(?<!b)a", "^(?!x)(a+)+$"] {
        let reply = server
            .put("/v1/queues/strings", string_schema(pattern))
            .await;
        let error = reply.error(422, "invalid_field");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("lookaround") && message.contains("backreferences"),
            "{pattern}: {error}"
        );
    }
}

#[tokio::test]
async fn a_batch_against_a_nested_quantifier_pattern_does_not_stall_the_server() {
    // Proves the catastrophic-looking pattern `^(a+)+$` on a 1000-message batch of
    // "aaaa…!" strings is answered well within bounds, every message's violation reported,
    // while /healthz keeps answering within a second; a batch that fits is stored.
    let server = TestServer::builder().start().await;
    server.put_queue("strings", string_schema("^(a+)+$")).await;
    let evil = format!("{}!", "a".repeat(2_000));
    let batch =
        json!({"messages": (0..1000).map(|_| json!({"body": {"s": evil}})).collect::<Vec<_>>()});
    let url = format!("{}/v1/queues/strings/messages", server.url());
    let client = server.client().clone();
    let started = Instant::now();
    let sending = tokio::spawn(async move {
        let response = client.post(url).json(&batch).send().await.expect("batch");
        let status = response.status().as_u16();
        (
            status,
            response.json::<Value>().await.expect("a JSON answer"),
        )
    });
    let mut slowest = Duration::ZERO;
    while !sending.is_finished() && started.elapsed() < BATCH_TIME_MAX {
        let asked = Instant::now();
        let health = tokio::time::timeout(
            BATCH_TIME_MAX,
            server
                .client()
                .get(format!("{}/healthz", server.url()))
                .send(),
        )
        .await
        .expect("healthz answers")
        .expect("healthz");
        assert_eq!(health.status(), 200);
        slowest = slowest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, answer) = tokio::time::timeout(BATCH_TIME_MAX, sending)
        .await
        .expect("the batch is answered in time")
        .unwrap();
    assert!(started.elapsed() < BATCH_TIME_MAX);
    assert!(slowest < HEALTHZ_TIME_MAX, "/healthz took {slowest:?}");
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["code"], "schema_violation");
    assert_eq!(
        answer["error"]["details"]["violations"]
            .as_array()
            .map(Vec::len),
        Some(1000)
    );

    let fine =
        json!({"messages": (0..1000).map(|_| json!({"body": {"s": "aaaa"}})).collect::<Vec<_>>()});
    server.send("strings", fine).await;
    assert_eq!(server.stats("strings").await["ready"], 1000);
}
