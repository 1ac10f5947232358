//! Batch enqueue: results in order, every message delivered.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::support::TestServer;

#[tokio::test]
async fn a_batch_of_100_is_stored_in_order_and_all_delivered() {
    // Proves a 100-message batch answers one result per message in request order (checked by
    // matching each delivered body to the id at its index) and every message is delivered once.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    let messages: Vec<Value> = (0..100).map(|i| json!({"body": {"i": i}})).collect();
    let answer = server.send("q", json!({ "messages": messages })).await;
    let results = answer["results"].as_array().expect("results");
    assert_eq!(results.len(), 100);
    let mut index_of_id = HashMap::new();
    for (i, result) in results.iter().enumerate() {
        assert_eq!(result["created"], true, "{result}");
        let id = result["message_id"]
            .as_str()
            .expect("message_id")
            .to_owned();
        assert!(
            index_of_id.insert(id, i as u64).is_none(),
            "duplicate message_id in results"
        );
    }

    let mut seen = HashMap::new();
    for _ in 0..20 {
        let batch = server.receive("q", json!({"max": 100})).await;
        if batch.is_empty() {
            break;
        }
        let receipts: Vec<&str> = batch.iter().map(crate::support::receipt).collect();
        let acked = server
            .post("/v1/queues/q/ack", json!({ "receipts": receipts }))
            .await
            .ok();
        assert_eq!(acked["acked"], batch.len());
        for message in &batch {
            let id = message["message_id"]
                .as_str()
                .expect("message_id")
                .to_owned();
            let i = message["body"]["i"].as_u64().expect("body.i");
            assert_eq!(
                index_of_id.get(&id),
                Some(&i),
                "result order does not match the request order"
            );
            assert!(
                seen.insert(id, i).is_none(),
                "message delivered twice: {message}"
            );
        }
    }
    assert_eq!(seen.len(), 100);
    assert!(server.receive("q", json!({"max": 100})).await.is_empty());
}
