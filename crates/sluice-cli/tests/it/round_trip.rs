//! Send, receive, ack: the basic life of a message and the shapes on the way.

use serde_json::json;

use crate::support::{TestServer, parse_time, receipt};

#[tokio::test]
async fn a_message_is_sent_received_acked_and_then_gone() {
    // Proves the basic round trip: the body and headers come back as sent, with attempt 1 and
    // a lease, and after the ack the queue is empty and the message's status is `acked`.
    let server = TestServer::builder().start().await;
    let queue = server.put_queue("orders", json!({})).await;
    assert_eq!(queue["name"], "orders");

    let body = json!({"order": 42, "lines": [{"sku": "a-1", "qty": 2}], "note": null});
    let sent = server
        .send("orders", json!({"body": body, "headers": {"trace": "t-1"}}))
        .await;
    assert_eq!(sent["created"], true);
    let message_id = sent["message_id"].as_str().expect("message_id").to_owned();
    uuid::Uuid::parse_str(&message_id).expect("message_id is a uuid");

    let messages = server.receive("orders", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let message = &messages[0];
    assert_eq!(message["message_id"], message_id.as_str());
    assert_eq!(message["body"], body);
    assert!(message.get("body_base64").is_none(), "{message}");
    assert_eq!(message["headers"], json!({"trace": "t-1"}));
    assert_eq!(message["attempts"], 1);
    assert_eq!(message["priority"], 0);
    let enqueued_at = parse_time(&message["enqueued_at"]);
    let first_received_at = parse_time(&message["first_received_at"]);
    let lease_expires_at = parse_time(&message["lease_expires_at"]);
    assert!(enqueued_at <= first_received_at, "{message}");
    assert!(lease_expires_at > first_received_at, "{message}");

    assert!(
        server.receive("orders", json!({})).await.is_empty(),
        "a leased message was handed out twice"
    );

    let acked = server.ack("orders", receipt(message)).await;
    assert_eq!(acked["acked"], 1);
    assert_eq!(
        acked["results"],
        json!([{"receipt": receipt(message), "acked": true}])
    );

    assert!(
        server
            .receive("orders", json!({"max": 10}))
            .await
            .is_empty()
    );
    let stats = server.stats("orders").await;
    assert_eq!(
        (
            stats["ready"].as_u64(),
            stats["in_flight"].as_u64(),
            stats["delayed"].as_u64()
        ),
        (Some(0), Some(0), Some(0))
    );
    let status = server
        .get(&format!("/v1/queues/orders/messages/{message_id}"))
        .await
        .ok();
    assert_eq!(status["state"], "acked", "{status}");
    assert_eq!(status["queue"], "orders");
    parse_time(&status["acked_at"]);
}

#[tokio::test]
async fn byte_bodies_and_json_scalars_round_trip_unchanged() {
    // Proves body_base64 comes back as the same bytes (and not as `body`), and JSON scalars,
    // including null, come back as themselves.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    let bytes = "AAEC/wD+3q2+7w==";
    server
        .send("q", json!({"body_base64": bytes, "priority": 3}))
        .await;
    let messages = server.receive("q", json!({})).await;
    assert_eq!(messages[0]["body_base64"], bytes);
    assert!(messages[0].get("body").is_none(), "{}", messages[0]);
    server.ack("q", receipt(&messages[0])).await;

    for body in [
        json!(null),
        json!("text"),
        json!(12.5),
        json!(false),
        json!([]),
    ] {
        server.send("q", json!({ "body": body })).await;
        let messages = server.receive("q", json!({})).await;
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0]["body"], body, "{}", messages[0]);
        server.ack("q", receipt(&messages[0])).await;
    }
}

#[tokio::test]
async fn health_and_queue_listing_answer() {
    // Proves /healthz, /readyz, the queue list (a queue and its DLQ), the OpenAPI document, and
    // 404 not_found for an unknown route.
    let server = TestServer::builder().start().await;
    assert_eq!(server.get("/healthz").await.ok(), json!({"status": "ok"}));
    assert_eq!(server.get("/readyz").await.ok(), json!({"status": "ok"}));

    let created = server.put("/v1/queues/jobs", json!({})).await.ok();
    assert_eq!(created["created"], true);
    assert_eq!(created["queue"]["config"]["dead_letter_queue"], "jobs.dlq");
    let again = server.put("/v1/queues/jobs", json!({})).await.ok();
    assert_eq!(again["created"], false);

    let list = server.get("/v1/queues").await.ok();
    let names: Vec<&str> = list["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .filter_map(|q| q["name"].as_str())
        .collect();
    assert!(
        names.contains(&"jobs") && names.contains(&"jobs.dlq"),
        "{names:?}"
    );
    let dlq = server.get("/v1/queues/jobs.dlq").await.ok();
    assert_eq!(dlq["name"], "jobs.dlq");

    let openapi = server.get("/v1/openapi.json").await.ok();
    assert!(openapi["paths"].is_object(), "openapi.json without paths");

    server
        .get("/v1/no-such-route")
        .await
        .error(404, "not_found");
}
