//! Message status lookups, by message id and by idempotency key.

use serde_json::json;

use crate::support::{TestServer, parse_time, receipt};

#[tokio::test]
async fn status_follows_a_message_through_its_states() {
    // Proves GET .../messages/{id} and GET .../messages?id={key} show the same message as it
    // goes delayed -> ready -> in_flight -> acked, with the fields each state carries.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    let now = server.now().await;
    let sent = server.send("q", json!({"body": 1, "id": "order-7", "key": "customer-3", "priority": 4, "delay_ms": 1000})).await;
    let id = sent["message_id"].as_str().unwrap().to_owned();
    let by_id = format!("/v1/queues/q/messages/{id}");
    let by_key = "/v1/queues/q/messages?id=order-7";

    let status = server.get(&by_id).await.ok();
    assert_eq!(status["state"], "delayed", "{status}");
    assert_eq!(status["message_id"], id.as_str());
    assert_eq!(status["queue"], "q");
    assert_eq!(status["id"], "order-7");
    assert_eq!(status["key"], "customer-3");
    assert_eq!(status["priority"], 4);
    assert_eq!(status["attempts"], 0);
    assert_eq!(parse_time(&status["enqueued_at"]), now);
    assert_eq!(parse_time(&status["visible_at"]), now + 1000);
    assert_eq!(
        server.get(by_key).await.ok(),
        status,
        "lookup by idempotency key differs"
    );

    server.advance_clock(1000).await;
    assert_eq!(server.get(&by_id).await.ok()["state"], "ready");

    let message = server.receive("q", json!({})).await.remove(0);
    let status = server.get(&by_id).await.ok();
    assert_eq!(status["state"], "in_flight", "{status}");
    assert_eq!(status["attempts"], 1);
    assert_eq!(status["lease_expires_at"], message["lease_expires_at"]);
    assert_eq!(status["first_received_at"], message["first_received_at"]);
    assert_eq!(server.get(by_key).await.ok(), status);

    server.ack("q", receipt(&message)).await;
    let status = server.get(&by_id).await.ok();
    assert_eq!(status["state"], "acked", "{status}");
    assert_eq!(parse_time(&status["acked_at"]), now + 1000);
    assert_eq!(server.get(by_key).await.ok()["state"], "acked");
}

#[tokio::test]
async fn unknown_messages_are_404_message_not_found() {
    // Proves an unknown message id, an unknown idempotency key, and a message id looked up in
    // another queue all answer 404 message_not_found; an id that is not a uuid is a 4xx.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.put_queue("other", json!({})).await;
    let id = server.send("q", json!({"body": 1, "id": "known"})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let unknown = uuid::Uuid::now_v7();
    server
        .get(&format!("/v1/queues/q/messages/{unknown}"))
        .await
        .error(404, "message_not_found");
    server
        .get("/v1/queues/q/messages?id=unknown-key")
        .await
        .error(404, "message_not_found");
    server
        .get(&format!("/v1/queues/other/messages/{id}"))
        .await
        .error(404, "message_not_found");
    server
        .get("/v1/queues/other/messages?id=known")
        .await
        .error(404, "message_not_found");
    server
        .get("/v1/queues/q/messages/not-a-uuid")
        .await
        .client_error();
    server
        .get(&format!("/v1/queues/missing/messages/{id}"))
        .await
        .error(404, "queue_not_found");
}

#[tokio::test]
async fn an_acked_record_keeps_the_attempts_and_first_delivery_of_its_last_lease() {
    // Proves the acked record is written with the lease's delivery count and first delivery
    // time: a message nacked once and acked on its second delivery reads attempts 2.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    let id = crate::support::message_id(&server.send("q", json!({"body": 1})).await);
    let first = server.receive("q", json!({})).await.remove(0);
    let first_received = parse_time(&first["first_received_at"]);
    server
        .nack("q", json!({"receipt": receipt(&first), "delay_ms": 0}))
        .await;
    server.advance_clock(1_000).await;
    let second = server.receive("q", json!({})).await.remove(0);
    assert_eq!(second["attempts"], 2);
    server.ack("q", receipt(&second)).await;
    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(status["state"], "acked", "{status}");
    assert_eq!(status["attempts"], 2, "{status}");
    assert_eq!(
        parse_time(&status["first_received_at"]),
        first_received,
        "{status}"
    );
}

#[tokio::test]
async fn a_lookup_lists_every_failed_attempt_with_its_error() {
    // Proves the failure log behind the message timeline: each nack and each lease that ran
    // out is listed with its attempt, time and error, while the message is live, after it is
    // dead-lettered (the move marked), and under the same id in the DLQ.
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({"max_attempts": 3, "visibility_timeout_ms": 1000, "backoff": {"initial_ms": 10, "jitter": false}}),
        )
        .await;
    let id = crate::support::message_id(&server.send("q", json!({"body": 1})).await);
    let path = format!("/v1/queues/q/messages/{id}");
    let untouched = server.get(&path).await.ok();
    assert!(untouched.get("failures").is_none(), "{untouched}");

    let first = server.receive("q", json!({})).await.remove(0);
    server
        .nack("q", json!({"receipt": receipt(&first), "error": "db down"}))
        .await;
    server.advance_clock(100).await;
    let _second = server.receive("q", json!({})).await.remove(0);
    server.advance_clock(1_500).await; // the lease runs out
    let live = server.get(&path).await.ok();
    let failures = live["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 2, "{live}");
    assert_eq!(failures[0]["attempt"], 1);
    assert_eq!(failures[0]["error"], "db down");
    assert_eq!(failures[1]["attempt"], 2);
    assert_eq!(failures[1]["error"], "visibility timeout expired");
    assert!(parse_time(&failures[1]["at"]) > parse_time(&failures[0]["at"]));

    let third = server.receive("q", json!({})).await.remove(0);
    server
        .nack(
            "q",
            json!({"receipt": receipt(&third), "error": "still down"}),
        )
        .await;
    let dead = server.get(&path).await.ok();
    assert_eq!(dead["state"], "dead", "{dead}");
    let failures = dead["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 3, "{dead}");
    assert_eq!(failures[2]["attempt"], 3);
    assert_eq!(failures[2]["error"], "still down");
    assert_eq!(failures[2]["dead_lettered"], true);
}
