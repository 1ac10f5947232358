//! Bad input: each refusal has the documented status and code and the error shape, nothing is
//! stored by a refused request, and the server keeps working afterwards.

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn malformed_json_wrong_types_and_unknown_fields_are_400() {
    // Proves bodies that are not JSON, or not the expected shape, are 400 malformed_json on every
    // JSON endpoint.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    for path in [
        "/v1/queues/q/messages",
        "/v1/queues/q/receive",
        "/v1/queues/q/ack",
        "/v1/queues/q/nack",
        "/v1/queues/q/extend",
    ] {
        for raw in [
            "{\"body\": ",
            "not json",
            "[1, 2",
            "{\"body\": 1} trailing",
            "{'body': 1}",
        ] {
            server
                .post_raw(path, raw)
                .await
                .error(400, "malformed_json");
        }
    }
    server
        .post_raw("/v1/queues/q/messages", "")
        .await
        .error(400, "malformed_json");
    server
        .request(reqwest::Method::PUT, "/v1/queues/q", None)
        .await
        .client_error();

    let wrong_types = [
        (
            "/v1/queues/q/messages",
            json!({"body": 1, "priority": "high"}),
        ),
        (
            "/v1/queues/q/messages",
            json!({"body": 1, "delay_ms": "soon"}),
        ),
        (
            "/v1/queues/q/messages",
            json!({"body": 1, "headers": {"n": 1}}),
        ),
        ("/v1/queues/q/messages", json!({"messages": {"body": 1}})),
        ("/v1/queues/q/messages", json!([{"body": 1}])),
        ("/v1/queues/q/receive", json!({"max": "ten"})),
        ("/v1/queues/q/receive", json!({"wait_ms": 1.5})),
        ("/v1/queues/q/ack", json!({"receipt": 7})),
        ("/v1/queues/q/nack", json!({"receipt": ["a"]})),
        ("/v1/queues/q/nack", json!({"error": "no receipt"})),
        ("/v1/queues/q/extend", json!({"receipt": "r"})),
    ];
    for (path, body) in wrong_types {
        server.post(path, body).await.error(400, "malformed_json");
    }
    server
        .put("/v1/queues/q", json!({"max_attempts": "many"}))
        .await
        .error(400, "malformed_json");
    server
        .put("/v1/queues/q", json!({"max_attempts": -1}))
        .await
        .client_error();

    let unknown_fields = [
        ("/v1/queues/q/messages", json!({"body": 1, "colour": "red"})),
        (
            "/v1/queues/q/messages",
            json!({"messages": [{"body": 1}], "extra": true}),
        ),
        (
            "/v1/queues/q/messages",
            json!({"messages": [{"body": 1, "ttl": 5}]}),
        ),
        ("/v1/queues/q/receive", json!({"max": 1, "timeout": 5})),
        ("/v1/queues/q/ack", json!({"receipt": "r", "force": true})),
    ];
    for (path, body) in unknown_fields {
        server.post(path, body).await.error(400, "malformed_json");
    }
    server
        .put("/v1/queues/q", json!({"colour": "red"}))
        .await
        .error(400, "malformed_json");
    server
        .put(
            "/v1/queues/q",
            json!({"backoff": {"jitter": false, "spread": 2}}),
        )
        .await
        .error(400, "malformed_json");

    assert_nothing_stored(&server, "q").await;
    assert_still_working(&server).await;
}

#[tokio::test]
async fn oversized_bodies_and_batches_are_413_too_large() {
    // Proves a body over the queue's max_message_bytes, a batch with one such body, a batch of
    // 1001 messages and a batch of over 10 MiB of bodies are 413 too_large, and none of them
    // stores anything.
    let server = TestServer::builder().start().await;
    server
        .put_queue("small", json!({"max_message_bytes": 1024}))
        .await;
    server.put_queue("q", json!({})).await;

    let big = "x".repeat(2000);
    server
        .post("/v1/queues/small/messages", json!({ "body": big }))
        .await
        .error(413, "too_large");
    let bytes = "A".repeat(4000);
    server
        .post("/v1/queues/small/messages", json!({ "body_base64": bytes }))
        .await
        .error(413, "too_large");
    let batch = json!({"messages": [{"body": "fine"}, {"body": big}, {"body": "fine too"}]});
    server
        .post("/v1/queues/small/messages", batch)
        .await
        .error(413, "too_large");
    assert_nothing_stored(&server, "small").await;

    let messages: Vec<Value> = (0..1001).map(|i| json!({ "body": i })).collect();
    server
        .post("/v1/queues/q/messages", json!({ "messages": messages }))
        .await
        .error(413, "too_large");
    let chunk = "y".repeat(1_000_000);
    let messages: Vec<Value> = (0..11).map(|_| json!({ "body": chunk })).collect();
    server
        .post("/v1/queues/q/messages", json!({ "messages": messages }))
        .await
        .error(413, "too_large");
    assert_nothing_stored(&server, "q").await;

    let messages: Vec<Value> = (0..1000).map(|i| json!({ "body": i })).collect();
    let answer = server.send("q", json!({ "messages": messages })).await;
    assert_eq!(
        answer["results"].as_array().map(Vec::len),
        Some(1000),
        "a batch of exactly 1000 was refused"
    );
    server
        .send("small", json!({ "body": "z".repeat(1000) }))
        .await;
    assert_still_working(&server).await;
}

#[tokio::test]
async fn unknown_queues_are_404_queue_not_found() {
    // Proves every queue-scoped endpoint answers 404 queue_not_found for a queue that does not
    // exist, and does not create it.
    let server = TestServer::builder().start().await;
    server
        .get("/v1/queues/nope")
        .await
        .error(404, "queue_not_found");
    server
        .get("/v1/queues/nope/stats")
        .await
        .error(404, "queue_not_found");
    server
        .delete("/v1/queues/nope")
        .await
        .error(404, "queue_not_found");
    server
        .get("/v1/queues/nope/messages?id=x")
        .await
        .error(404, "queue_not_found");
    server
        .post("/v1/queues/nope/messages", json!({"body": 1}))
        .await
        .error(404, "queue_not_found");
    server
        .post("/v1/queues/nope/receive", json!({}))
        .await
        .error(404, "queue_not_found");
    server
        .post("/v1/queues/nope/nack", json!({"receipt": "r"}))
        .await
        .client_error();
    server
        .get("/v1/queues/nope")
        .await
        .error(404, "queue_not_found");
    assert_still_working(&server).await;
}

#[tokio::test]
async fn invalid_queue_names_are_refused_with_a_4xx() {
    // Proves names over 80 characters or with characters outside [A-Za-z0-9_.-] (a space, an
    // encoded slash, others) are refused with a 4xx and the error shape, never a 5xx, while a
    // name of exactly 80 characters is fine.
    let server = TestServer::builder().start().await;
    let long = "a".repeat(81);
    let bad_names = [
        long.as_str(),
        "a%20b",
        "a%2Fb",
        "%2F",
        "caf%C3%A9",
        "a%00b",
        "semi%3Bcolon",
        "star*",
        "a%25b",
        "quote%22",
    ];
    for name in bad_names {
        server
            .put(&format!("/v1/queues/{name}"), json!({}))
            .await
            .client_error();
        server
            .get(&format!("/v1/queues/{name}"))
            .await
            .client_error();
        server
            .post(&format!("/v1/queues/{name}/messages"), json!({"body": 1}))
            .await
            .client_error();
        server
            .post(&format!("/v1/queues/{name}/receive"), json!({}))
            .await
            .client_error();
    }
    server
        .put("/v1/queues/q", json!({"dead_letter_queue": "bad name"}))
        .await
        .error(422, "invalid_field");
    server
        .put("/v1/queues/q", json!({"dead_letter_queue": "b".repeat(81)}))
        .await
        .error(422, "invalid_field");

    let longest = "b".repeat(80);
    server
        .put_queue(&longest, json!({"dead_letter_queue": ""}))
        .await;
    server.send(&longest, json!({"body": 1})).await;
    let listed = server.get("/v1/queues").await.ok();
    let names: Vec<&str> = listed["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|q| q["name"].as_str())
        .collect();
    assert_eq!(names, [longest.as_str()], "a refused name was created");
    assert_still_working(&server).await;
}

#[tokio::test]
async fn garbage_receipts_are_400_malformed_receipt() {
    // Proves receipts that are not receipts at all are 400 malformed_receipt on ack, nack and
    // extend, and a batch ack with one garbage receipt acks nothing.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.send("q", json!({"body": 1})).await;
    let message = server.receive("q", json!({})).await.remove(0);

    let long = "r".repeat(5000);
    for garbage in ["", "garbage", "!!!!", "\u{0}\u{1}", long.as_str()] {
        server
            .post("/v1/queues/q/ack", json!({ "receipt": garbage }))
            .await
            .error(400, "malformed_receipt");
        server
            .post("/v1/queues/q/nack", json!({ "receipt": garbage }))
            .await
            .error(400, "malformed_receipt");
        let extend = json!({ "receipt": garbage, "visibility_timeout_ms": 1000 });
        server
            .post("/v1/queues/q/extend", extend)
            .await
            .error(400, "malformed_receipt");
    }
    let mixed = json!({"receipts": [receipt(&message), "garbage"]});
    server
        .post("/v1/queues/q/ack", mixed)
        .await
        .error(400, "malformed_receipt");
    let id = message["message_id"].as_str().unwrap();
    let status = server
        .get(&format!("/v1/queues/q/messages/{id}"))
        .await
        .ok();
    assert_eq!(
        status["state"], "in_flight",
        "a refused batch ack acked a message: {status}"
    );

    server.ack("q", receipt(&message)).await;
    assert_still_working(&server).await;
}

#[tokio::test]
async fn out_of_range_fields_are_422_invalid_field_naming_the_field() {
    // Proves out-of-range or ill-formed fields (receive max 0 and 101, wait_ms 30000, both body
    // and body_base64, delay_ms with not_before, bad base64, a bad time, queue settings out of
    // range) are 422 invalid_field with a message naming the field.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;

    let receive = [
        (json!({"max": 0}), "max"),
        (json!({"max": 101}), "max"),
        (json!({"max": -1}), "max"),
        (json!({"wait_ms": 30000}), "wait_ms"),
        (json!({"wait_ms": -1}), "wait_ms"),
        (json!({"visibility_timeout_ms": 0}), "visibility_timeout_ms"),
    ];
    for (params, field) in receive {
        let error = server
            .post("/v1/queues/q/receive", params.clone())
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains(field),
            "{params} gave {error}"
        );
    }

    let messages = [
        (json!({"body": 1, "body_base64": "AA=="}), "body"),
        (
            json!({"body": 1, "delay_ms": 1000, "not_before": "2030-01-01T00:00:00Z"}),
            "delay_ms|not_before",
        ),
        (json!({"body_base64": "not base64!"}), "body_base64"),
        (json!({"body": 1, "not_before": "tomorrow"}), "not_before"),
        (json!({"body": 1, "delay_ms": -5}), "delay_ms"),
        (json!({"body": 1, "id": "i".repeat(1025)}), "id"),
    ];
    for (message, fields) in messages {
        let error = server
            .post("/v1/queues/q/messages", message.clone())
            .await
            .error(422, "invalid_field");
        let text = error["message"].as_str().unwrap();
        assert!(
            fields.split('|').any(|field| text.contains(field)),
            "{message} gave {error}"
        );
    }
    server
        .post("/v1/queues/q/messages", json!({"headers": {"a": "b"}}))
        .await
        .client_error();
    server
        .post("/v1/queues/q/messages", json!({"messages": []}))
        .await
        .client_error();
    let batch = json!({"messages": [{"body": 1}, {"body": 2, "body_base64": "AA=="}]});
    server
        .post("/v1/queues/q/messages", batch)
        .await
        .error(422, "invalid_field");

    let specs = [
        (json!({"visibility_timeout_ms": 0}), "visibility_timeout_ms"),
        (json!({"ordering": "random"}), "ordering"),
        (json!({"backoff": {"factor": 0.5}}), "backoff.factor"),
        (json!({"max_message_bytes": 0}), "max_message_bytes"),
    ];
    for (spec, field) in specs {
        let error = server
            .put("/v1/queues/q", spec.clone())
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains(field),
            "{spec} gave {error}"
        );
    }

    assert_nothing_stored(&server, "q").await;
    assert_still_working(&server).await;
}

/// No message of any state in `queue`.
async fn assert_nothing_stored(server: &TestServer, queue: &str) {
    let stats = server.stats(queue).await;
    for field in ["ready", "delayed", "in_flight"] {
        assert_eq!(
            stats[field], 0,
            "a refused request stored something in {queue}: {stats}"
        );
    }
    assert_eq!(stats["counters"]["enqueued"], 0, "{stats}");
}

/// After the abuse: /healthz answers and a round trip works on a fresh queue.
async fn assert_still_working(server: &TestServer) {
    assert_eq!(server.get("/healthz").await.ok(), json!({"status": "ok"}));
    server.put_queue("after", json!({})).await;
    server.send("after", json!({"body": "still here"})).await;
    let messages = server.receive("after", json!({})).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["body"], "still here");
    server.ack("after", receipt(&messages[0])).await;
}

/// Issue 30's JSON fuzzer: a `body` of a lone surrogate escape or nested past 128 levels was
/// stored as JSON, which no typed reader (a schema, the SDKs, Python's `json`) could read back.
/// It is a 422 `invalid_field` naming the body now; `body_base64` still takes any bytes.
#[tokio::test]
async fn json_bodies_no_reader_can_read_are_422() {
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    let deep = format!("{{\"body\": {}1{}}}", "[".repeat(200), "]".repeat(200));
    for document in [r#"{"body": "\ud800"}"#, r#"{"body": {"\udfff": 1}}"#, &deep] {
        let reply = server
            .post_raw("/v1/queues/q/messages", document.to_owned())
            .await;
        assert_eq!(reply.status, 422, "{}", reply.text);
        assert!(
            reply.text.contains("invalid_field") && reply.text.contains("body"),
            "{}",
            reply.text
        );
    }
    let batch = r#"{"messages": [{"body": 1}, {"body": "\ud800"}]}"#;
    let reply = server.post_raw("/v1/queues/q/messages", batch).await;
    assert_eq!(reply.status, 422, "{}", reply.text);
    assert!(reply.text.contains("messages[1].body"), "{}", reply.text);
    let fine = r#"{"body": "\ud83d\ude00"}"#;
    let reply = server.post_raw("/v1/queues/q/messages", fine).await;
    assert!(reply.status.is_success(), "{}", reply.text);
    let stats = server.get("/v1/queues/q").await.ok();
    assert_eq!(
        stats["stats"]["ready"], 1,
        "nothing of the refused requests stored: {stats}"
    );
}
