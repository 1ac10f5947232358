//! The result memo outlives the acked record: the idempotency key remembers the ack and its
//! result for the whole dedup window.

use std::time::Duration;

use serde_json::json;

use crate::support::{TestServer, message_id, receipt};

#[tokio::test]
async fn a_duplicate_gets_the_result_after_the_acked_record_is_cleaned_up() {
    // Proves: with acked_retention_ms 1 s and a 24 h dedup window, once the acked record is
    // gone (the lookup by message id is 404), a duplicate enqueue still answers state acked with
    // the result, and so does the lookup by key; a key acked without a result says acked only.
    let server = TestServer::builder()
        .test_clock(true)
        .config("[server]\nacked_retention_ms = 1000\n")
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    let first = server.send("q", json!({"id": "pay-1", "body": 1})).await;
    let id = message_id(&first);
    server.send("q", json!({"id": "pay-2", "body": 2})).await;
    let leased = server.receive("q", json!({"max": 2})).await;
    for message in &leased {
        let result = (message["id"] == "pay-1").then(|| json!({"charge": "ch_9"}));
        let mut ack = json!({"receipt": receipt(message)});
        if let Some(result) = result {
            ack["result"] = result;
        }
        server.post("/v1/queues/q/ack", ack).await.ok();
    }
    server.advance_clock(60_000).await;
    // Cleanup runs on the maintenance tick (every 500 ms of real time).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let lookup = server.get(&format!("/v1/queues/q/messages/{id}")).await;
        if lookup.status == 404 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the acked record was never cleaned up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let duplicate = server.send("q", json!({"id": "pay-1", "body": 1})).await;
    assert_eq!(duplicate["created"], false, "{duplicate}");
    assert_eq!(duplicate["message_id"], id.as_str(), "{duplicate}");
    assert_eq!(duplicate["state"], "acked", "{duplicate}");
    assert_eq!(
        duplicate["result"],
        json!({"charge": "ch_9"}),
        "{duplicate}"
    );
    let by_key = server.get("/v1/queues/q/messages?id=pay-1").await.ok();
    assert_eq!(by_key["state"], "acked", "{by_key}");
    assert_eq!(by_key["result"], json!({"charge": "ch_9"}), "{by_key}");
    assert!(by_key["acked_at"].is_string(), "{by_key}");

    let without_result = server.send("q", json!({"id": "pay-2", "body": 2})).await;
    assert_eq!(without_result["state"], "acked", "{without_result}");
    assert!(without_result.get("result").is_none(), "{without_result}");
    assert_eq!(
        server.stats("q").await["ready"],
        0,
        "duplicates store nothing"
    );
}
