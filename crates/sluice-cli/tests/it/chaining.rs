//! Chaining: an ack that enqueues the next steps in the same commit (`then`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::tokens::{self, ADMIN, CONSUMER_A};
use crate::support::{TestServer, receipt};

#[tokio::test]
async fn an_ack_with_then_enqueues_the_next_steps_or_nothing() {
    // Proves `then` on an ack: the next steps are stored with the ack (200 with each one's
    // enqueue answer) and delivered from their queues; a refusal of a next step (its queue
    // missing, full, or the step malformed) is the ack's refusal and leaves the lease; a stale
    // receipt enqueues nothing; several receipts with `then` are refused.
    let server = TestServer::builder().start().await;
    for (queue, spec) in [
        ("orders", json!({})),
        ("ship", json!({})),
        ("full", json!({"max_depth": 1})),
    ] {
        server.put_queue(queue, spec).await;
    }
    server.send("full", json!({"body": "occupant"})).await;
    server.send("orders", json!({"body": {"order": 7}})).await;
    let message = server.receive("orders", json!({"max": 1})).await.remove(0);
    let lease = receipt(&message).to_owned();
    let ack = |then: Value| json!({"receipt": lease, "result": {"charged": true}, "then": then});

    for (then, status, code, text) in [
        (
            json!([{"queue": "nowhere", "body": 1}]),
            404,
            "queue_not_found",
            "nowhere",
        ),
        (
            json!([{"queue": "ship", "body": 1}, {"queue": "full", "body": 2}]),
            503,
            "queue_full",
            "full",
        ),
        (
            json!([{"queue": "ship"}]),
            422,
            "invalid_field",
            "then[0].body",
        ),
        (
            json!([{"queue": "ship", "body": 1, "colour": "red"}]),
            400,
            "malformed_json",
            "colour",
        ),
    ] {
        let error = server
            .post("/v1/queues/orders/ack", ack(then.clone()))
            .await
            .error(status, code);
        assert!(
            error["message"].as_str().unwrap().contains(text),
            "{then} gave {error}"
        );
    }
    assert_eq!(server.stats("ship").await["ready"], 0);
    let status = server
        .message_status("orders", message["message_id"].as_str().unwrap())
        .await;
    assert_eq!(status["state"], "in_flight", "the lease is untouched");

    let answer = server
        .post(
            "/v1/queues/orders/ack",
            ack(json!([
                {"queue": "ship", "body": {"ship": 7}, "id": "ship-7", "key": "eu"},
                {"queue": "ship", "body_base64": "aGk=", "priority": 5},
            ])),
        )
        .await
        .ok();
    assert_eq!(answer["acked"], 1, "{answer}");
    let then = answer["then"].as_array().unwrap();
    assert_eq!(then.len(), 2, "{answer}");
    assert!(then.iter().all(|step| step["created"] == true), "{answer}");
    let shipped = server.receive("ship", json!({"max": 10})).await;
    let bodies: Vec<Value> = shipped
        .iter()
        .map(|m| m.get("body").cloned().unwrap_or(m["body_base64"].clone()))
        .collect();
    assert_eq!(
        bodies,
        [json!("aGk="), json!({"ship": 7})],
        "priority first"
    );
    assert_eq!(shipped[1]["id"], "ship-7");
    assert_eq!(shipped[1]["message_id"], then[0]["message_id"]);

    let stale = server
        .post(
            "/v1/queues/orders/ack",
            ack(json!([{"queue": "ship", "body": 3}])),
        )
        .await
        .error(409, "stale_receipt");
    assert_eq!(stale["details"]["acked"], 0, "{stale}");
    assert_eq!(server.stats("ship").await["counters"]["enqueued"], 2);

    server.send("orders", json!({"body": 1})).await;
    server.send("orders", json!({"body": 2})).await;
    let two = server.receive("orders", json!({"max": 2})).await;
    server
        .post(
            "/v1/queues/orders/ack",
            json!({"receipts": [receipt(&two[0]), receipt(&two[1])], "then": [{"queue": "ship", "body": 1}]}),
        )
        .await
        .error(422, "invalid_field");
}

#[tokio::test]
async fn a_next_step_needs_the_right_to_produce_to_its_queue() {
    // Proves a next step is a produce: a token that may consume the acked queue but not produce
    // to the next step's queue is refused 403, naming the step, and nothing changes; a worker
    // token that may produce there is served.
    const WORKER_A: &str = "worker-a-token-0123456789";
    let config = r#"
[[auth.tokens]]
name = "team-a-worker"
token = { env = "TEST_WORKER_A" }
roles = ["producer", "consumer"]
queues = ["team-a.*"]
"#;
    let server = tokens::team_a(TestServer::builder(), config)
        .env("TEST_WORKER_A", WORKER_A)
        .start()
        .await;
    let call = async |method: Method, path: &str, token: &str, body: Value| {
        let response = server
            .client()
            .request(method, format!("{}{path}", server.url()))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = response.status();
        (status, response.json::<Value>().await.unwrap_or_default())
    };
    for queue in ["team-a.orders", "team-a.ship", "team-b.ship"] {
        let (status, _) = call(
            Method::PUT,
            &format!("/v1/queues/{queue}"),
            ADMIN,
            json!({}),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (status, _) = call(
        Method::POST,
        "/v1/queues/team-a.orders/messages",
        ADMIN,
        json!({"body": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, received) = call(
        Method::POST,
        "/v1/queues/team-a.orders/receive",
        WORKER_A,
        json!({"max": 1}),
    )
    .await;
    let lease = received["messages"][0]["receipt"]
        .as_str()
        .unwrap()
        .to_owned();
    for (token, target) in [(CONSUMER_A, "team-a.ship"), (WORKER_A, "team-b.ship")] {
        let (status, error) = call(
            Method::POST,
            "/v1/queues/team-a.orders/ack",
            token,
            json!({"receipt": lease, "then": [{"queue": target, "body": 1}]}),
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
        assert_eq!(error["error"]["code"], "forbidden", "{error}");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("then[0]"),
            "{error}"
        );
    }
    let (status, answer) = call(
        Method::POST,
        "/v1/queues/team-a.orders/ack",
        WORKER_A,
        json!({"receipt": lease, "then": [{"queue": "team-a.ship", "body": 1}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["then"][0]["created"], true, "{answer}");
}

/// Messages the chained workers take through `first` before the kill.
const CHAINED: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_among_chained_acks_leaves_exactly_one_next_step_each() {
    // Proves the ack and its next step are one commit: eight workers ack messages of `first`
    // with a next step in `second` (no idempotency key, so nothing else could hide a double),
    // the server is SIGKILLed while acks are in flight, and after the restart the workers
    // finish the rest: `second` then holds exactly one next step per message of `first`, none
    // lost (acked without its next step) and none twice (redelivered after its next step).
    let mut server = TestServer::builder().start().await;
    server
        .put_queue("first", json!({"visibility_timeout_ms": 1000}))
        .await;
    server.put_queue("second", json!({})).await;
    let messages: Vec<Value> = (0..CHAINED).map(|n| json!({"body": n})).collect();
    for chunk in messages.chunks(100) {
        server
            .post("/v1/queues/first/messages", json!({"messages": chunk}))
            .await
            .ok();
    }

    let answered = Arc::new(AtomicUsize::new(0));
    let workers = run_chained_workers(&server, 8, answered.clone());
    // Kill once a third are answered, with the others' acks in flight.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while answered.load(Ordering::SeqCst) < CHAINED / 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the workers stalled"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill().await;
    for worker in workers {
        let _ = worker.await;
    }
    let before_kill = answered.load(Ordering::SeqCst);
    assert!(
        before_kill < CHAINED,
        "the kill came too late to test anything"
    );

    server.restart().await;
    // Leases taken before the kill end within the visibility timeout; the workers finish.
    let workers = run_chained_workers(&server, 4, answered.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let first = server.stats("first").await;
        if first["ready"] == 0 && first["in_flight"] == 0 && first["delayed"] == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "first never emptied: {first}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for worker in workers {
        worker.abort();
    }

    let mut seen = vec![0_usize; CHAINED];
    loop {
        let batch = server.receive("second", json!({"max": 100})).await;
        if batch.is_empty() {
            break;
        }
        for message in &batch {
            let n = message["body"]["step_of"].as_u64().unwrap() as usize;
            seen[n] += 1;
        }
    }
    let wrong: Vec<(usize, usize)> = seen
        .iter()
        .enumerate()
        .filter(|(_, count)| **count != 1)
        .map(|(n, count)| (n, *count))
        .collect();
    assert!(
        wrong.is_empty(),
        "messages with other than one next step (n, count): {wrong:?} ({before_kill} acks answered before the kill)"
    );
}

/// `count` workers that receive from `first` and ack each message with its next step in
/// `second`, counting answered acks; each stops at its first failed request (the kill).
fn run_chained_workers(
    server: &TestServer,
    count: usize,
    answered: Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|_| {
            let client = server.client().clone();
            let url = server.url().to_owned();
            let answered = answered.clone();
            tokio::spawn(async move {
                let post = async |path: &str, body: Value| -> Option<Value> {
                    let response = client
                        .post(format!("{url}{path}"))
                        .json(&body)
                        .send()
                        .await
                        .ok()?;
                    let ok = response.status().is_success();
                    let body = response.json::<Value>().await.ok()?;
                    // A stale lease (taken again after its timeout) is skipped, not fatal.
                    if ok || body["code"] == "stale_receipt" {
                        Some(body)
                    } else {
                        None
                    }
                };
                for _ in 0..10_000 {
                    let Some(received) = post(
                        "/v1/queues/first/receive",
                        json!({"max": 5, "wait_ms": 100}),
                    )
                    .await
                    else {
                        return;
                    };
                    for message in received["messages"].as_array().into_iter().flatten() {
                        let then =
                            json!([{"queue": "second", "body": {"step_of": message["body"]}}]);
                        let ack = json!({"receipt": message["receipt"], "then": then});
                        if post("/v1/queues/first/ack", ack).await.is_none() {
                            return;
                        }
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect()
}
