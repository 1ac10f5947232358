//! Acked messages kept with their body (`keep_acked_ms`): set in the config file or over the
//! API, browsed and searched with `GET /v1/queues/{queue}/browse?state=acked`, read whole by
//! id, kept across a SIGKILL, and gone exactly when their keep ends on the test clock.

use serde_json::{Value, json};

use crate::support::{TestServer, format_time};

/// 2026-11-28T00:00:00Z, where the test clock starts (also after a restart).
const START_MS: i64 = 1_795_824_000_000;

/// The ids of a browse of `audit`'s acked messages with `query` (URL query text).
async fn acked_ids(server: &TestServer, query: &str) -> Vec<String> {
    let page = server
        .get(&format!("/v1/queues/audit/browse?state=acked&{query}"))
        .await
        .ok();
    assert_eq!(page["state"], "acked", "{page}");
    page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["message_id"].as_str().unwrap().to_owned())
        .collect()
}

/// Receives the one message of `queue` and acks it with `result`; the ack time.
async fn take_one(server: &TestServer, queue: &str, result: Value) -> i64 {
    let messages = server.receive(queue, json!({"max": 1})).await;
    assert_eq!(messages.len(), 1);
    server
        .post(
            &format!("/v1/queues/{queue}/ack"),
            json!({"receipt": messages[0]["receipt"], "result": result}),
        )
        .await
        .ok();
    server.now().await
}

#[tokio::test]
async fn acked_messages_are_kept_browsable_and_searchable_until_their_keep_ends() {
    // Proves: a queue with keep_acked_ms from the config file keeps each acked message's body,
    // headers and result; browse state=acked lists them newest ack first and narrows them by
    // key, idempotency key, message id and ack time; the body route reads one whole; a SIGKILL
    // loses none of it; at ack time + keep_acked_ms (test clock) every read stops finding them.
    // A queue without the option keeps nothing, and the option's bounds are checked.
    let mut server = TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &START_MS.to_string())
        .config("[queues.audit]\nkeep_acked_ms = 60000\n")
        .start()
        .await;
    let queue = server.get("/v1/queues/audit").await.ok();
    assert_eq!(queue["config"]["keep_acked_ms"], 60_000, "{queue}");

    let mut ids = Vec::new();
    let mut acked_at = Vec::new();
    for (n, key, id) in [(1, "k1", "inv-1"), (2, "k2", "inv-2"), (3, "k1", "inv-3")] {
        let sent = server
            .send(
                "audit",
                json!({"body": {"n": n}, "key": key, "id": id, "headers": {"x-n": n.to_string()}}),
            )
            .await;
        ids.push(sent["message_id"].as_str().unwrap().to_owned());
        server.advance_clock(1_000).await;
        acked_at.push(take_one(&server, "audit", json!({"done": n})).await);
    }

    let page = server
        .get("/v1/queues/audit/browse?state=acked&preview_bytes=100")
        .await
        .ok();
    let listed: Vec<&Value> = page["messages"].as_array().unwrap().iter().collect();
    assert_eq!(
        listed
            .iter()
            .map(|m| m["message_id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()],
        "newest ack first: {page}"
    );
    let newest = listed[0];
    assert_eq!(newest["state"], "acked");
    assert_eq!(newest["acked_at"], format_time(acked_at[2]), "{newest}");
    assert_eq!(newest["kept_until"], format_time(acked_at[2] + 60_000));
    assert_eq!(newest["result"], json!({"done": 3}));
    assert_eq!(newest["body_preview"], r#"{"n":3}"#);
    assert_eq!(newest["key"], "k1");
    assert_eq!(newest["id"], "inv-3");

    assert_eq!(
        acked_ids(&server, "key=k1").await,
        [ids[2].as_str(), ids[0].as_str()]
    );
    assert_eq!(acked_ids(&server, "id=inv-2").await, [ids[1].as_str()]);
    assert_eq!(
        acked_ids(&server, &format!("message_id={}", ids[0])).await,
        [ids[0].as_str()]
    );
    let (since, until) = (format_time(acked_at[1]), format_time(acked_at[2]));
    assert_eq!(
        acked_ids(&server, &format!("since={since}&until={until}")).await,
        [ids[1].as_str()],
        "since inclusive, until exclusive"
    );
    assert_eq!(
        acked_ids(&server, "key=k1&id=inv-2").await,
        Vec::<String>::new()
    );
    assert_eq!(
        acked_ids(&server, "key=&id=").await.len(),
        3,
        "blank fields ask for nothing"
    );
    let first = server
        .get("/v1/queues/audit/browse?state=acked&limit=2")
        .await
        .ok();
    let cursor = first["next_cursor"].as_str().expect("a second page");
    assert_eq!(
        acked_ids(&server, &format!("limit=2&cursor={cursor}")).await,
        [ids[0].as_str()]
    );

    let body = server
        .get(&format!("/v1/queues/audit/messages/{}/body", ids[0]))
        .await
        .ok();
    assert_eq!(body["available"], true, "{body}");
    assert_eq!(body["body"], json!({"n": 1}));
    assert_eq!(body["headers"]["x-n"], "1");
    let status = server.message_status("audit", ids[0].as_str()).await;
    assert_eq!(status["kept_until"], format_time(acked_at[0] + 60_000));
    assert_eq!(status["result"], json!({"done": 1}));

    // Refusals: a search of a live state, a bad id or time, a keep out of bounds.
    for query in [
        "state=ready&key=k1",
        "state=acked&message_id=nope",
        "state=acked&since=yesterday",
        "state=kept",
    ] {
        server
            .get(&format!("/v1/queues/audit/browse?{query}"))
            .await
            .error(422, "invalid_field");
    }
    for keep in [json!(-1), json!(7_776_000_001_i64)] {
        server
            .put("/v1/queues/other", json!({"keep_acked_ms": keep}))
            .await
            .client_error();
    }

    // A queue without the option keeps nothing.
    server.put_queue("plain", json!({})).await;
    let plain = server.send("plain", json!({"body": {"n": 9}})).await;
    take_one(&server, "plain", json!(null)).await;
    let plain_page = server.get("/v1/queues/plain/browse?state=acked").await.ok();
    assert_eq!(plain_page["messages"], json!([]), "{plain_page}");
    let plain_body = server
        .get(&format!(
            "/v1/queues/plain/messages/{}/body",
            plain["message_id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(plain_body["available"], false, "{plain_body}");

    // Kept across a SIGKILL (the test clock starts again at START_MS).
    server.kill().await;
    server.restart().await;
    let restarted_at = server.now().await;
    assert!(restarted_at < acked_at[2]);
    server.advance_clock(acked_at[2] - restarted_at).await;
    assert_eq!(
        acked_ids(&server, "").await,
        [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()],
        "after a SIGKILL"
    );

    // Each keep ends at its ack time + keep_acked_ms, to the millisecond.
    let now = server.now().await;
    server.advance_clock(acked_at[0] + 60_000 - 1 - now).await;
    assert_eq!(acked_ids(&server, "").await.len(), 3);
    server.advance_clock(1).await;
    assert_eq!(
        acked_ids(&server, "").await,
        [ids[2].as_str(), ids[1].as_str()]
    );
    let gone = server
        .get(&format!("/v1/queues/audit/messages/{}/body", ids[0]))
        .await
        .ok();
    assert_eq!(gone["available"], false, "{gone}");
    let status = server.message_status("audit", ids[0].as_str()).await;
    assert_eq!(status["state"], "acked", "{status}");
    assert!(status.get("kept_until").is_none(), "{status}");
    server.advance_clock(2_000).await;
    assert!(acked_ids(&server, "").await.is_empty());
}
