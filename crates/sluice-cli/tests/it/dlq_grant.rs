//! The dead-letter grant follows what a queue is: a queue some queue names as its
//! `dead_letter_queue` needs a dead-letter grant to produce into or consume from, whatever it is
//! called, even when a token's ordinary pattern (`team-a.*`) matches its name.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::tokens::{self, ADMIN, CONSUMER_A, PRODUCER_A};

const DLQ_BY_NAME: &str = "dlq-by-name-token-0123456789";
const DLQ_BY_SUFFIX: &str = "dlq-by-suffix-token-0123456789";

/// Tokens beyond the shared team-a ones (`support::tokens`).
const CONFIG: &str = r#"
[[auth.tokens]]
name = "pay-failed-operator"
token = { env = "TEST_DLQ_BY_NAME" }
roles = ["producer", "consumer"]
queues = ["team-a.pay-failed"]

[[auth.tokens]]
name = "team-a-dead-letters"
token = { env = "TEST_DLQ_BY_SUFFIX" }
roles = ["producer", "consumer"]
queues = ["team-a.*.dlq"]
"#;

async fn call(
    server: &TestServer,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    crate::support::tokens::call(server, method, path, Some(token), body).await
}

/// The producer and consumer routes of `queue`, with a body each accepts.
fn taking_and_adding(queue: &str) -> Vec<(Method, String, Value, bool)> {
    // (method, path, body, is a producer route)
    vec![
        (
            Method::POST,
            format!("/v1/queues/{queue}/messages"),
            json!({"body": 1}),
            true,
        ),
        (
            Method::POST,
            format!("/v1/queues/{queue}/cancel"),
            json!({"id": "none"}),
            true,
        ),
        (
            Method::POST,
            format!("/v1/queues/{queue}/receive"),
            json!({"max": 1}),
            false,
        ),
        (
            Method::POST,
            format!("/v1/queues/{queue}/ack"),
            json!({"receipt": "x"}),
            false,
        ),
        (
            Method::POST,
            format!("/v1/queues/{queue}/nack"),
            json!({"receipt": "x"}),
            false,
        ),
        (
            Method::POST,
            format!("/v1/queues/{queue}/extend"),
            json!({"receipt": "x", "visibility_timeout_ms": 1000}),
            false,
        ),
    ]
}

#[tokio::test]
async fn a_dead_letter_queue_needs_a_dead_letter_grant_whatever_its_name() {
    // Proves, by role: with `team-a.pay`'s dead_letter_queue set to `team-a.pay-failed`, the
    // `team-a.*` producer and consumer may read it but not add to or take from it (403); a
    // token that names it exactly, and an admin, may; `.dlq` queues keep their rule; and a
    // queue that becomes a dead-letter queue later is guarded from that moment.
    let server = tokens::team_a(TestServer::builder(), CONFIG)
        .env("TEST_DLQ_BY_NAME", DLQ_BY_NAME)
        .env("TEST_DLQ_BY_SUFFIX", DLQ_BY_SUFFIX)
        .start()
        .await;
    for (queue, spec) in [
        (
            "team-a.pay",
            json!({"dead_letter_queue": "team-a.pay-failed"}),
        ),
        ("team-a.orders", json!({})),
        ("team-a.other", json!({})),
    ] {
        let (status, text) = call(
            &server,
            Method::PUT,
            &format!("/v1/queues/{queue}"),
            ADMIN,
            Some(spec),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{text}");
    }

    for queue in ["team-a.pay-failed", "team-a.orders.dlq"] {
        for (method, path, body, is_producer_route) in taking_and_adding(queue) {
            let team_token = if is_producer_route {
                PRODUCER_A
            } else {
                CONSUMER_A
            };
            let (status, text) = call(
                &server,
                method.clone(),
                &path,
                team_token,
                Some(body.clone()),
            )
            .await;
            assert_eq!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {path} as team-a.*: {text}"
            );
            let (status, text) =
                call(&server, method.clone(), &path, ADMIN, Some(body.clone())).await;
            assert_ne!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {path} as admin: {text}"
            );
            assert_ne!(
                status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} as admin: {text}"
            );
            let granted = if queue == "team-a.pay-failed" {
                DLQ_BY_NAME
            } else {
                DLQ_BY_SUFFIX
            };
            let (status, text) = call(&server, method.clone(), &path, granted, Some(body)).await;
            assert_ne!(
                status,
                StatusCode::FORBIDDEN,
                "{method} {path} with a grant: {text}"
            );
        }
        for token in [PRODUCER_A, CONSUMER_A] {
            let (status, text) = call(
                &server,
                Method::GET,
                &format!("/v1/queues/{queue}/stats"),
                token,
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "reading stays allowed: {text}");
        }
    }
    let (status, text) = call(
        &server,
        Method::GET,
        "/v1/queues/team-a.pay/dlq",
        CONSUMER_A,
        None,
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "dead letters are read through the source queue: {text}"
    );
    let (status, text) = call(
        &server,
        Method::POST,
        "/v1/queues/team-a.pay/receive",
        DLQ_BY_NAME,
        Some(json!({"max": 1})),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a dead-letter grant is not a grant of the source: {text}"
    );

    // An ordinary queue until some queue names it as its dead-letter queue.
    let receive_other = || {
        call(
            &server,
            Method::POST,
            "/v1/queues/team-a.other/receive",
            CONSUMER_A,
            Some(json!({"max": 1})),
        )
    };
    assert_eq!(receive_other().await.0, StatusCode::OK);
    let (status, text) = call(
        &server,
        Method::PUT,
        "/v1/queues/team-a.orders",
        ADMIN,
        Some(json!({"dead_letter_queue": "team-a.other"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(receive_other().await.0, StatusCode::FORBIDDEN);
}
