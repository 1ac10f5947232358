//! Dead-letter operations: list (paging, filters), show, replay (one, many, dry run, another
//! target, paging of big replays), delete and purge. On the test clock.

use std::collections::BTreeSet;

use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::support::{TestServer, message_id, parse_time, query_time, receipt};

const TIMEOUT_ERROR: &str = "timeout talking to db";
const PAYLOAD_ERROR: &str = "bad payload";

/// Enqueues one message per error in `errors` to `queue` (max_attempts 1), receives them and
/// nacks each with its error, so all are dead-lettered now. Returns their ids, in order.
async fn dead_letter(server: &TestServer, queue: &str, errors: &[&str]) -> Vec<String> {
    let messages: Vec<Value> = errors
        .iter()
        .enumerate()
        .map(|(seq, error)| {
            json!({"body": {"seq": seq, "error": error}, "headers": {"kind": error}})
        })
        .collect();
    let sent = server.send(queue, json!({ "messages": messages })).await;
    let ids: Vec<String> = sent["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(message_id)
        .collect();
    let mut left = errors.len();
    for _ in 0..100 {
        if left == 0 {
            break;
        }
        let received = server.receive(queue, json!({"max": 100})).await;
        assert!(!received.is_empty(), "{left} messages not delivered");
        for message in &received {
            let seq = message["body"]["seq"].as_u64().unwrap() as usize;
            let nacked = server
                .nack(
                    queue,
                    json!({"receipt": receipt(message), "error": errors[seq]}),
                )
                .await;
            assert_eq!(nacked["state"], "dead", "{nacked}");
            left -= 1;
        }
    }
    assert_eq!(left, 0);
    ids
}

/// Every entry of `GET /v1/queues/{queue}/dlq?{query}`, following next_cursor; also returns how
/// many pages it took.
async fn list_all(server: &TestServer, queue: &str, query: &str) -> (Vec<Value>, usize) {
    let mut entries = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 1..=100 {
        let mut path = format!("/v1/queues/{queue}/dlq?{query}");
        if let Some(cursor) = &cursor {
            path.push_str(&format!("&cursor={cursor}"));
        }
        let reply = server.get(&path).await;
        let answer = reply.ok();
        let _: sluice_wire::DeadLetterListOut = reply.parse();
        entries.extend(
            answer["entries"]
                .as_array()
                .expect("entries")
                .iter()
                .cloned(),
        );
        match answer["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return (entries, page),
        }
    }
    panic!("GET /v1/queues/{queue}/dlq?{query} never ended");
}

fn ids_of(entries: &[Value]) -> Vec<String> {
    entries.iter().map(message_id).collect()
}

fn set(ids: &[String]) -> BTreeSet<String> {
    ids.iter().cloned().collect()
}

#[tokio::test]
async fn the_dlq_lists_newest_first_in_pages_and_filters() {
    // Proves GET /v1/queues/q/dlq: 25 dead letters in pages of 10 (10, 10, 5) following
    // next_cursor, each exactly once, newest first by last_seen_at; error=TIMEOUT matches
    // case-insensitively; since (inclusive) / until (exclusive) select by dead-letter time;
    // GET .../dlq/{id} shows the full body and headers; list entries carry the metadata.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;

    let t1 = server.now().await;
    let first = dead_letter(
        &server,
        "q",
        &[
            TIMEOUT_ERROR,
            PAYLOAD_ERROR,
            TIMEOUT_ERROR,
            PAYLOAD_ERROR,
            TIMEOUT_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
        ],
    )
    .await;
    let t2 = server.advance_clock(1_000).await;
    let second = dead_letter(
        &server,
        "q",
        &[
            PAYLOAD_ERROR,
            TIMEOUT_ERROR,
            TIMEOUT_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
        ],
    )
    .await;
    let t3 = server.advance_clock(1_000).await;
    let third = dead_letter(
        &server,
        "q",
        &[
            TIMEOUT_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            TIMEOUT_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
            PAYLOAD_ERROR,
        ],
    )
    .await;
    server.advance_clock(1_000).await;
    let all: Vec<String> = [first.clone(), second.clone(), third.clone()].concat();
    assert_eq!(all.len(), 25);
    assert_eq!(server.stats("q").await["dead_lettered"], 25);

    // Pages of 10, newest first.
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let path = match &cursor {
            Some(cursor) => format!("/v1/queues/q/dlq?limit=10&cursor={cursor}"),
            None => "/v1/queues/q/dlq?limit=10".to_owned(),
        };
        let page = server.get(&path).await.ok();
        assert_eq!(page["dead_letter_queue"], "q.dlq", "{page}");
        pages.push(page["entries"].as_array().unwrap().clone());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    assert!(
        sizes == [10, 10, 5] || sizes == [10, 10, 5, 0],
        "page sizes {sizes:?}"
    );
    let listed: Vec<Value> = pages.concat();
    let listed_ids = ids_of(&listed);
    assert_eq!(set(&listed_ids).len(), 25, "an entry was listed twice");
    assert_eq!(set(&listed_ids), set(&all));
    let times: Vec<i64> = listed
        .iter()
        .map(|entry| parse_time(&entry["last_seen_at"]))
        .collect();
    assert!(
        times.windows(2).all(|pair| pair[0] >= pair[1]),
        "not newest first: {times:?}"
    );
    assert_eq!(
        set(&listed_ids[..8]),
        set(&third),
        "the newest page starts with the last batch"
    );
    for entry in &listed {
        assert_eq!(entry["queue"], "q.dlq", "{entry}");
        assert_eq!(entry["source_queue"], "q", "{entry}");
        assert_eq!(entry["state"], "dead", "{entry}");
        assert_eq!(entry["attempts"], 1, "{entry}");
        assert!(
            entry.get("body").is_none(),
            "a list entry carries its body: {entry}"
        );
    }

    // error filter, case-insensitive substring.
    let (timeouts, _) = list_all(&server, "q", "error=TIMEOUT&limit=1000").await;
    assert_eq!(timeouts.len(), 7, "{timeouts:?}");
    for entry in &timeouts {
        assert_eq!(entry["last_error"], TIMEOUT_ERROR, "{entry}");
    }
    let (payload, _) = list_all(&server, "q", "error=payload").await;
    assert_eq!(payload.len(), 18);

    // since inclusive, until exclusive.
    let (middle, _) = list_all(
        &server,
        "q",
        &format!("since={}&until={}", query_time(t2), query_time(t3)),
    )
    .await;
    assert_eq!(set(&ids_of(&middle)), set(&second));
    let (newest, _) = list_all(&server, "q", &format!("since={}", query_time(t3))).await;
    assert_eq!(set(&ids_of(&newest)), set(&third));
    let (oldest, _) = list_all(&server, "q", &format!("until={}", query_time(t2))).await;
    assert_eq!(set(&ids_of(&oldest)), set(&first));
    let (none, _) = list_all(&server, "q", &format!("until={}", query_time(t1))).await;
    assert!(none.is_empty(), "{none:?}");
    let (combined, _) = list_all(
        &server,
        "q",
        &format!(
            "error=timeout&since={}&until={}",
            query_time(t2),
            query_time(t3)
        ),
    )
    .await;
    assert_eq!(set(&ids_of(&combined)), set(&second[1..3]));

    // One entry in full.
    let reply = server.get(&format!("/v1/queues/q/dlq/{}", second[1])).await;
    let entry = reply.ok();
    let _: sluice_wire::DeadLetterEntryOut = reply.parse();
    assert_eq!(entry["message_id"], second[1].as_str(), "{entry}");
    assert_eq!(
        entry["body"],
        json!({"seq": 1, "error": TIMEOUT_ERROR}),
        "{entry}"
    );
    assert_eq!(entry["headers"], json!({"kind": TIMEOUT_ERROR}), "{entry}");
    assert_eq!(entry["last_error"], TIMEOUT_ERROR, "{entry}");
    assert_eq!(entry["attempts"], 1, "{entry}");
    assert_eq!(entry["state"], "dead", "{entry}");
    assert_eq!(parse_time(&entry["last_seen_at"]), t2, "{entry}");
    assert!(parse_time(&entry["first_seen_at"]) <= t2, "{entry}");

    let unknown = uuid::Uuid::now_v7();
    let missing = server.get(&format!("/v1/queues/q/dlq/{unknown}")).await;
    assert_eq!(missing.status.as_u16(), 404, "{missing:?}");
    missing.error_shape();
    server
        .get("/v1/queues/q/dlq?limit=0")
        .await
        .error(422, "invalid_field");
    server
        .get("/v1/queues/nope/dlq")
        .await
        .error(404, "queue_not_found");
}

#[tokio::test]
async fn replaying_one_entry_creates_a_fresh_message() {
    // Proves POST .../dlq/{id}/replay: a new message id in the source queue with the same body,
    // headers, key, priority and idempotency key and attempts 1; the entry's record says
    // replayed (replayed_as, replayed_at) and it leaves the list; the idempotency key points at
    // the new message; target_queue sends another entry elsewhere; DELETE removes an entry
    // (then 404).
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;
    server.put_queue("other", json!({})).await;
    let mut ids = Vec::new();
    for seq in 0..3 {
        ids.push(message_id(
            &server
                .send(
                    "q",
                    json!({"body": {"seq": seq}, "id": format!("k{seq}"), "headers": {"h": "v"},
                           "key": "acct-1", "priority": 7}),
                )
                .await,
        ));
        let message = server.receive("q", json!({})).await.remove(0);
        server
            .nack("q", json!({"receipt": receipt(&message), "error": "boom"}))
            .await;
    }
    server.advance_clock(1_000).await;

    let reply = server
        .post(&format!("/v1/queues/q/dlq/{}/replay", ids[0]), json!({}))
        .await;
    let replay = reply.ok();
    let _: sluice_wire::ReplayOut = reply.parse();
    assert_eq!(replay["dry_run"], false, "{replay}");
    assert_eq!(replay["replayed"], 1, "{replay}");
    assert_eq!(replay["more"], false, "{replay}");
    assert_eq!(replay["target_queue"], "q", "{replay}");
    assert_eq!(
        replay["results"][0]["dead_letter_id"],
        ids[0].as_str(),
        "{replay}"
    );
    let new_id = replay["results"][0]["message_id"]
        .as_str()
        .expect("new message id")
        .to_owned();
    assert_ne!(new_id, ids[0]);

    let message = server.receive("q", json!({})).await.remove(0);
    assert_eq!(message["message_id"], new_id.as_str(), "{message}");
    assert_eq!(message["attempts"], 1, "{message}");
    assert_eq!(message["body"], json!({"seq": 0}), "{message}");
    assert_eq!(message["headers"], json!({"h": "v"}), "{message}");
    assert_eq!(message["id"], "k0", "{message}");
    assert_eq!(message["key"], "acct-1", "{message}");
    assert_eq!(message["priority"], 7, "{message}");
    server.ack("q", receipt(&message)).await;

    let entry = server
        .get(&format!("/v1/queues/q/dlq/{}", ids[0]))
        .await
        .ok();
    assert_eq!(entry["state"], "replayed", "{entry}");
    assert_eq!(entry["replayed_as"], new_id.as_str(), "{entry}");
    assert!(entry["replayed_at"].is_string(), "{entry}");
    let status = server.message_status("q", &ids[0]).await;
    assert_eq!(status["state"], "replayed", "{status}");
    assert_eq!(status["replayed_as"], new_id.as_str(), "{status}");
    let by_key = server.get("/v1/queues/q/messages?id=k0").await.ok();
    assert_eq!(by_key["message_id"], new_id.as_str(), "{by_key}");

    let (listed, _) = list_all(&server, "q", "").await;
    assert_eq!(set(&ids_of(&listed)), set(&ids[1..]), "{listed:?}");

    // Into another queue.
    let replay = server
        .post(
            &format!("/v1/queues/q/dlq/{}/replay", ids[1]),
            json!({"target_queue": "other"}),
        )
        .await
        .ok();
    assert_eq!(replay["target_queue"], "other", "{replay}");
    let moved = server.receive("other", json!({})).await;
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(moved[0]["body"], json!({"seq": 1}));
    assert_eq!(moved[0]["message_id"], replay["results"][0]["message_id"]);
    assert!(server.receive("q", json!({})).await.is_empty());
    server
        .post(
            &format!("/v1/queues/q/dlq/{}/replay", ids[2]),
            json!({"target_queue": "nope"}),
        )
        .await
        .error(404, "queue_not_found");

    // Delete.
    let deleted = server
        .delete(&format!("/v1/queues/q/dlq/{}", ids[2]))
        .await
        .ok();
    assert_eq!(deleted, json!({"deleted": 1}));
    let again = server.delete(&format!("/v1/queues/q/dlq/{}", ids[2])).await;
    assert_eq!(again.status.as_u16(), 404, "{again:?}");
    let (listed, _) = list_all(&server, "q", "").await;
    assert!(listed.is_empty(), "{listed:?}");
    assert_eq!(server.stats("q").await["dead_lettered"], 0);
}

#[tokio::test]
async fn replaying_many_by_filter_with_a_dry_run_first() {
    // Proves POST .../dlq/replay: a dry run counts the matches and changes nothing; the real
    // replay moves exactly the matching entries back; a queue sharing the DLQ does not see or
    // replay the other queue's entries; DELETE /v1/queues/q/dlq purges only q's entries.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;
    server
        .put_queue(
            "q2",
            json!({"max_attempts": 1, "dead_letter_queue": "q.dlq"}),
        )
        .await;
    let errors = [
        TIMEOUT_ERROR,
        PAYLOAD_ERROR,
        TIMEOUT_ERROR,
        TIMEOUT_ERROR,
        PAYLOAD_ERROR,
        TIMEOUT_ERROR,
        PAYLOAD_ERROR,
        TIMEOUT_ERROR,
        PAYLOAD_ERROR,
        TIMEOUT_ERROR,
    ];
    let ids = dead_letter(&server, "q", &errors).await;
    let timeout_ids: Vec<String> = ids
        .iter()
        .zip(errors)
        .filter(|(_, error)| *error == TIMEOUT_ERROR)
        .map(|(id, _)| id.clone())
        .collect();
    let other_ids = dead_letter(&server, "q2", &[TIMEOUT_ERROR, TIMEOUT_ERROR]).await;

    let (listed, _) = list_all(&server, "q", "").await;
    assert_eq!(set(&ids_of(&listed)), set(&ids), "q sees q2's dead letters");

    let reply = server
        .post(
            "/v1/queues/q/dlq/replay",
            json!({"error": "Timeout", "dry_run": true}),
        )
        .await;
    let dry = reply.ok();
    let _: sluice_wire::ReplayOut = reply.parse();
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["matched"], 6, "{dry}");
    assert_eq!(dry["replayed"], 0, "{dry}");
    assert_eq!(dry["more"], false, "{dry}");
    assert_eq!(server.stats("q").await["ready"], 0, "a dry run replayed");
    assert_eq!(list_all(&server, "q", "").await.0.len(), 10);

    let replay = server
        .post("/v1/queues/q/dlq/replay", json!({"error": "Timeout"}))
        .await
        .ok();
    assert_eq!(replay["dry_run"], false, "{replay}");
    assert_eq!(replay["matched"], 6, "{replay}");
    assert_eq!(replay["replayed"], 6, "{replay}");
    assert_eq!(replay["more"], false, "{replay}");
    let replayed: Vec<String> = replay["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|result| result["dead_letter_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(set(&replayed), set(&timeout_ids), "{replay}");

    let back = server.receive("q", json!({"max": 100})).await;
    assert_eq!(back.len(), 6, "{back:?}");
    assert!(back.iter().all(|message| message["attempts"] == 1));
    assert!(
        back.iter()
            .all(|message| message["body"]["error"] == TIMEOUT_ERROR)
    );
    let (left, _) = list_all(&server, "q", "").await;
    assert_eq!(left.len(), 4);
    assert!(
        left.iter()
            .all(|entry| entry["last_error"] == PAYLOAD_ERROR)
    );
    // q2's entries are untouched.
    assert_eq!(
        set(&ids_of(&list_all(&server, "q2", "").await.0)),
        set(&other_ids)
    );
    assert!(server.receive("q2", json!({})).await.is_empty());

    // By ids into another queue.
    server.put_queue("other", json!({})).await;
    let replay = server
        .post(
            "/v1/queues/q/dlq/replay",
            json!({"ids": [message_id(&left[0])], "target_queue": "other"}),
        )
        .await
        .ok();
    assert_eq!(replay["replayed"], 1, "{replay}");
    assert_eq!(replay["target_queue"], "other", "{replay}");
    assert_eq!(server.receive("other", json!({"max": 10})).await.len(), 1);

    let purged = server.delete("/v1/queues/q/dlq").await.ok();
    assert_eq!(purged, json!({"deleted": 3}));
    assert!(list_all(&server, "q", "").await.0.is_empty());
    assert_eq!(list_all(&server, "q2", "").await.0.len(), 2);
    assert_eq!(
        server.stats("q").await["dead_lettered"],
        2,
        "the DLQ depth counts all of q.dlq"
    );
}

#[tokio::test]
async fn a_big_replay_pages_by_its_limit() {
    // Proves a replay of 2,500 entries with limit 1000 takes three calls (replayed 1000, 1000,
    // 500 with more true, true, false), puts all 2,500 back in the source queue and leaves the
    // DLQ empty; a dry run first counts all 2,500.
    const TOTAL: usize = 2_500;
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 5})).await;
    for chunk in 0..TOTAL / 500 {
        let batch: Vec<Value> = (0..500)
            .map(|seq| json!({ "body": chunk * 500 + seq }))
            .collect();
        server.send("q", json!({ "messages": batch })).await;
    }
    let mut receipts = Vec::new();
    for _ in 0..TOTAL / 100 {
        let messages = server.receive("q", json!({"max": 100})).await;
        assert_eq!(messages.len(), 100);
        receipts.extend(messages.iter().map(|message| receipt(message).to_owned()));
    }
    let nacks = futures::stream::iter(receipts)
        .map(|receipt| {
            let server = &server;
            async move {
                server
                    .nack(
                        "q",
                        json!({"receipt": receipt, "error": "poison", "permanent": true}),
                    )
                    .await
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    assert!(nacks.iter().all(|nacked| nacked["state"] == "dead"));
    assert_eq!(server.stats("q").await["dead_lettered"], TOTAL);

    let dry = server
        .post(
            "/v1/queues/q/dlq/replay",
            json!({"dry_run": true, "limit": 1000}),
        )
        .await
        .ok();
    assert_eq!(dry["matched"], TOTAL, "a dry run counts every match: {dry}");
    assert_eq!(dry["replayed"], 0, "{dry}");

    let mut calls = Vec::new();
    let mut replayed = BTreeSet::new();
    for _ in 0..5 {
        let replay = server
            .post("/v1/queues/q/dlq/replay", json!({"limit": 1000}))
            .await
            .ok();
        for result in replay["results"].as_array().unwrap() {
            assert!(
                replayed.insert(result["dead_letter_id"].as_str().unwrap().to_owned()),
                "replayed twice: {result}"
            );
        }
        calls.push((replay["replayed"].as_u64().unwrap(), replay["more"] == true));
        if replay["more"] != true {
            break;
        }
    }
    assert_eq!(calls, [(1000, true), (1000, true), (500, false)]);
    assert_eq!(replayed.len(), TOTAL);
    let stats = server.stats("q").await;
    assert_eq!(stats["ready"], TOTAL, "{stats}");
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
}

#[tokio::test]
async fn a_replay_skips_the_targets_schema_and_max_depth() {
    // Proves a replay is an operator's decision: it goes into a target queue that is full
    // (max_depth 1) and whose schema the body fails, where a normal send is refused.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;
    server
        .put_queue(
            "strict",
            json!({"max_depth": 1, "schema": {"type": "object", "required": ["id"]}}),
        )
        .await;
    server.send("strict", json!({"body": {"id": 1}})).await;
    let ids = dead_letter(&server, "q", &[PAYLOAD_ERROR]).await;

    server
        .post("/v1/queues/strict/messages", json!({"body": {"seq": 0}}))
        .await
        .client_error();
    let replay = server
        .post(
            &format!("/v1/queues/q/dlq/{}/replay", ids[0]),
            json!({"target_queue": "strict"}),
        )
        .await
        .ok();
    assert_eq!(replay["replayed"], 1, "{replay}");
    let stats = server.stats("strict").await;
    assert_eq!(stats["ready"], 2, "{stats}");
}

#[tokio::test]
async fn purging_the_dlq_leaves_entries_in_flight() {
    // Proves DELETE /v1/queues/q/dlq removes every entry except one a DLQ consumer holds, which
    // is listed with state in_flight and can still be acked from the DLQ.
    let server = TestServer::builder().test_clock(true).start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;
    dead_letter(&server, "q", &[PAYLOAD_ERROR, PAYLOAD_ERROR, PAYLOAD_ERROR]).await;
    let held = server
        .receive("q.dlq", json!({"visibility_timeout_ms": 3_600_000}))
        .await
        .remove(0);

    let purged = server.delete("/v1/queues/q/dlq").await.ok();
    assert_eq!(purged, json!({"deleted": 2}));
    let (left, _) = list_all(&server, "q", "").await;
    assert_eq!(ids_of(&left), [message_id(&held)], "{left:?}");
    assert_eq!(left[0]["state"], "in_flight", "{left:?}");
    server.ack("q.dlq", receipt(&held)).await;
    assert!(list_all(&server, "q", "").await.0.is_empty());
}
