//! Result memo: an ack can carry a result, and a duplicate enqueue gets it back.

use serde_json::json;

use crate::support::{TestServer, message_id, receipt};

#[tokio::test]
async fn a_duplicate_enqueue_returns_where_the_first_is_and_its_result() {
    // Proves the duplicate answer: before delivery created false / state ready and no result;
    // while leased state in_flight and no result; after an ack with "result" state acked and
    // that result (single and batch enqueue alike); lookups by key and by id show the result;
    // nothing new is stored by the duplicates.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    let first = server
        .send("q", json!({"body": {"amount": 5}, "id": "order-1"}))
        .await;
    assert_eq!(first["created"], true, "{first}");
    let id = message_id(&first);

    let duplicate = server
        .send("q", json!({"body": {"amount": 5}, "id": "order-1"}))
        .await;
    assert_eq!(duplicate["created"], false, "{duplicate}");
    assert_eq!(duplicate["message_id"], id.as_str(), "{duplicate}");
    assert_eq!(duplicate["state"], "ready", "{duplicate}");
    assert!(duplicate.get("result").is_none(), "{duplicate}");

    let leased = server.receive("q", json!({})).await.remove(0);
    let duplicate = server
        .send("q", json!({"body": {"amount": 5}, "id": "order-1"}))
        .await;
    assert_eq!(duplicate["created"], false, "{duplicate}");
    assert_eq!(duplicate["state"], "in_flight", "{duplicate}");
    assert!(duplicate.get("result").is_none(), "{duplicate}");

    let acked = server
        .post(
            "/v1/queues/q/ack",
            json!({"receipt": receipt(&leased), "result": {"charge": "ch_1"}}),
        )
        .await
        .ok();
    assert_eq!(acked["acked"], 1, "{acked}");

    let duplicate = server
        .send("q", json!({"body": {"amount": 5}, "id": "order-1"}))
        .await;
    assert_eq!(
        duplicate,
        json!({"message_id": id, "created": false, "state": "acked", "result": {"charge": "ch_1"}})
    );
    let batch = server
        .send(
            "q",
            json!({"messages": [{"body": 1, "id": "order-1"}, {"body": 2, "id": "order-2"}]}),
        )
        .await;
    assert_eq!(batch["results"][0]["created"], false, "{batch}");
    assert_eq!(batch["results"][0]["state"], "acked", "{batch}");
    assert_eq!(
        batch["results"][0]["result"],
        json!({"charge": "ch_1"}),
        "{batch}"
    );
    assert_eq!(batch["results"][1]["created"], true, "{batch}");

    let by_key = server.get("/v1/queues/q/messages?id=order-1").await.ok();
    assert_eq!(by_key["state"], "acked", "{by_key}");
    assert_eq!(by_key["result"], json!({"charge": "ch_1"}), "{by_key}");
    let by_id = server.message_status("q", &id).await;
    assert_eq!(by_id["result"], json!({"charge": "ch_1"}), "{by_id}");

    let stats = server.stats("q").await;
    assert_eq!(
        stats["counters"]["enqueued"], 2,
        "duplicates were stored: {stats}"
    );
    assert_eq!(stats["ready"], 1, "{stats}");
}

#[tokio::test]
async fn results_are_optional_and_bounded() {
    // Proves an ack without a result leaves none on the record; a result over 64 KiB is a
    // client error that acks nothing (the lease can still be acked); any JSON value (here a
    // string) is kept as the result.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    server
        .send(
            "q",
            json!({"messages": [{"body": 1, "id": "plain"}, {"body": 2, "id": "big"}]}),
        )
        .await;
    let leased = server.receive("q", json!({"max": 2})).await;
    assert_eq!(leased.len(), 2);
    let (plain, big) = if leased[0]["id"] == "plain" {
        (&leased[0], &leased[1])
    } else {
        (&leased[1], &leased[0])
    };

    server.ack("q", receipt(plain)).await;
    let duplicate = server.send("q", json!({"body": 1, "id": "plain"})).await;
    assert_eq!(duplicate["state"], "acked", "{duplicate}");
    assert!(duplicate.get("result").is_none(), "{duplicate}");

    let huge = "x".repeat(70 * 1024);
    let refused = server
        .post(
            "/v1/queues/q/ack",
            json!({"receipt": receipt(big), "result": huge}),
        )
        .await;
    refused.client_error();
    assert_eq!(
        server.stats("q").await["in_flight"],
        1,
        "a refused ack acked"
    );

    server
        .post(
            "/v1/queues/q/ack",
            json!({"receipt": receipt(big), "result": "done"}),
        )
        .await
        .ok();
    let status = server.get("/v1/queues/q/messages?id=big").await.ok();
    assert_eq!(status["result"], "done", "{status}");
}

#[tokio::test]
async fn a_result_goes_with_a_single_receipt_only() {
    // Proves `result` with two receipts is refused (422 invalid_field) and acks nothing: a
    // result belongs to one message.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({})).await;
    server
        .send("q", json!({"messages": [{"body": 1}, {"body": 2}]}))
        .await;
    let leased = server.receive("q", json!({"max": 2})).await;
    assert_eq!(leased.len(), 2);
    server
        .post(
            "/v1/queues/q/ack",
            json!({"receipts": [receipt(&leased[0]), receipt(&leased[1])], "result": {"x": 1}}),
        )
        .await
        .error(422, "invalid_field");
    assert_eq!(
        server.stats("q").await["in_flight"],
        2,
        "a refused ack acked"
    );
    for message in &leased {
        server.ack("q", receipt(message)).await;
    }
}
