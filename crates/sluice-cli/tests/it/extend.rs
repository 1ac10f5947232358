//! Extend: a lease kept alive past its original timeout, on the test clock.

use serde_json::json;

use crate::support::{TestServer, parse_time, receipt};

#[tokio::test]
async fn extend_keeps_a_lease_alive_past_its_original_timeout() {
    // Proves extending a 1000 ms lease at +800 ms by 5000 ms makes it end at +5800: nobody else
    // gets the message at +1000 or +5799, the original receipt still acks, and the attempt count
    // never moved.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.send("q", json!({"body": "long job"})).await;
    let message = server.receive("q", json!({})).await.remove(0);

    let now = server.advance_clock(800).await;
    let extended = server
        .post(
            "/v1/queues/q/extend",
            json!({"receipt": receipt(&message), "visibility_timeout_ms": 5000}),
        )
        .await
        .ok();
    assert_eq!(
        parse_time(&extended["lease_expires_at"]),
        now + 5000,
        "{extended}"
    );

    server.advance_clock(200).await;
    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "redelivered at the original timeout"
    );
    server.advance_clock(4799).await;
    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "redelivered before the extended lease ended"
    );
    let id = message["message_id"].as_str().unwrap();
    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(status["state"], "in_flight");
    assert_eq!(status["attempts"], 1);
    assert_eq!(status["lease_expires_at"], extended["lease_expires_at"]);

    server.ack("q", receipt(&message)).await;
    assert_eq!(server.stats("q").await["counters"]["lease_expired"], 0);
}

#[tokio::test]
async fn an_extended_lease_still_expires_at_its_new_end() {
    // Proves extend moves the lease end rather than cancelling it: the message comes back at
    // exactly the extended end with attempts 2.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.send("q", json!({"body": "x"})).await;
    let message = server.receive("q", json!({})).await.remove(0);
    server
        .post(
            "/v1/queues/q/extend",
            json!({"receipt": receipt(&message), "visibility_timeout_ms": 3000}),
        )
        .await
        .ok();
    server.advance_clock(2999).await;
    assert!(server.receive("q", json!({})).await.is_empty());
    server.advance_clock(1).await;
    let again = server.receive("q", json!({})).await;
    assert_eq!(again.len(), 1, "not redelivered at the extended lease end");
    assert_eq!(again[0]["attempts"], 2);
}

#[tokio::test]
async fn extend_to_zero_releases_the_lease_without_a_failure_even_on_the_last_attempt() {
    // Proves extend with 0 is a release (a worker shutting down before its handler finished),
    // decided once in `Ops::extend` for HTTP, gRPC and SQS: the message is ready at once with no
    // error, no failure is counted, and on its last attempt it is not dead-lettered. Before,
    // the lease was left to run out at once, which counted a failure and dead-lettered it.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"max_attempts": 1, "visibility_timeout_ms": 30000}),
        )
        .await;
    server.send("q", json!({"body": "job"})).await;
    let message = server.receive("q", json!({})).await.remove(0);
    server
        .post(
            "/v1/queues/q/extend",
            json!({"receipt": receipt(&message), "visibility_timeout_ms": 0}),
        )
        .await
        .ok();
    let again = server.receive("q", json!({})).await;
    assert_eq!(again.len(), 1, "ready at once, not dead-lettered");
    assert_eq!(again[0]["message_id"], message["message_id"]);
    assert_eq!(again[0]["attempts"], 2, "the delivery still counts");
    let stats = server.stats("q").await;
    assert_eq!(stats["counters"]["lease_expired"], 0, "{stats}");
    assert_eq!(stats["counters"]["nacked"], 0, "{stats}");
    assert_eq!(stats["counters"]["dead_lettered"], 0, "{stats}");
    assert_eq!(stats["last_1m"]["failed"], 0, "{stats}");
    let id = message["message_id"].as_str().unwrap();
    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert!(status["last_error"].is_null(), "{status}");
    server.ack("q", receipt(&again[0])).await;
}
