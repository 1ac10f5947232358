//! Topics: one publish, a copy per matching subscription, all in one commit; filters; one
//! idempotency key for the whole publish; atomicity under SIGKILL and a full queue; access
//! control; the config file and the CLI.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::tokens::{self, ADMIN, PRODUCER_A};

async fn drain(server: &TestServer, queue: &str) -> Vec<Value> {
    let mut bodies = Vec::new();
    loop {
        let batch = server.receive(queue, json!({"max": 100})).await;
        if batch.is_empty() {
            return bodies;
        }
        for message in batch {
            server
                .ack(queue, message["receipt"].as_str().unwrap())
                .await;
            bodies.push(message["body"].clone());
        }
    }
}

#[tokio::test]
async fn a_publish_stores_a_copy_per_matching_subscription_each_with_its_own_lease() {
    // Proves: copies go to every subscription without a filter and to those whose filter takes
    // the message; each copy is its own message (acked in one queue, still ready in another);
    // the stats count publishes, copies and filtered copies; a bytes body reaches filters as
    // null.
    let server = TestServer::builder().start().await;
    for queue in ["billing", "audit", "big"] {
        server.put_queue(queue, json!({})).await;
    }
    let put = server
        .put(
            "/v1/topics/orders",
            json!({"subscriptions": [
                {"queue": "billing"},
                {"queue": "audit"},
                {"queue": "big", "filter": ".body.amount > 100"},
            ]}),
        )
        .await
        .ok();
    assert_eq!(put["created"], true, "{put}");

    let small = server
        .post("/v1/topics/orders/messages", json!({"body": {"amount": 5}}))
        .await
        .ok();
    let queues: Vec<&str> = small["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["queue"].as_str().unwrap())
        .collect();
    assert_eq!(queues, ["billing", "audit"], "{small}");
    let large = server
        .post(
            "/v1/topics/orders/messages",
            json!({"body": {"amount": 500}, "headers": {"h": "v"}}),
        )
        .await
        .ok();
    assert_eq!(large["copies"].as_array().unwrap().len(), 3, "{large}");
    let ids: std::collections::HashSet<&str> = large["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "each copy is a message of its own");
    server
        .post("/v1/topics/orders/messages", json!({"body_base64": "AAE="}))
        .await
        .ok();

    assert_eq!(drain(&server, "billing").await.len(), 3);
    assert_eq!(
        server.stats("audit").await["ready"],
        3,
        "acking billing's copies left audit's"
    );
    assert_eq!(drain(&server, "big").await, [json!({"amount": 500})]);
    let topic = server.get("/v1/topics/orders").await.ok();
    assert_eq!(
        topic["stats"],
        json!({"published": 3, "copies": 7, "filtered": 2, "duplicates": 0}),
        "{topic}"
    );
}

#[tokio::test]
async fn one_idempotency_key_dedups_the_whole_publish() {
    // Proves: publishing again with the same id stores no copy anywhere and answers each copy's
    // first message; the queues hold one copy each.
    let server = TestServer::builder().start().await;
    server.put_queue("a", json!({})).await;
    server.put_queue("b", json!({})).await;
    server
        .put(
            "/v1/topics/t",
            json!({"subscriptions": [{"queue": "a"}, {"queue": "b"}]}),
        )
        .await
        .ok();
    let first = server
        .post("/v1/topics/t/messages", json!({"id": "evt-1", "body": 1}))
        .await
        .ok();
    let again = server
        .post("/v1/topics/t/messages", json!({"id": "evt-1", "body": 1}))
        .await
        .ok();
    for (one, two) in first["copies"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["copies"].as_array().unwrap())
    {
        assert_eq!(one["created"], true);
        assert_eq!(two["created"], false);
        assert_eq!(one["message_id"], two["message_id"]);
    }
    assert_eq!(server.stats("a").await["ready"], 1);
    assert_eq!(server.stats("b").await["ready"], 1);
    assert_eq!(
        server.get("/v1/topics/t").await.ok()["stats"]["duplicates"],
        2
    );
}

#[tokio::test]
async fn a_refused_copy_stores_none() {
    // Proves the copies are one commit: with one subscribed queue full (max_depth) or a copy
    // failing its queue's schema, the publish is refused (503 queue_full, 422) and no other
    // queue got a copy.
    let server = TestServer::builder().start().await;
    server.put_queue("open", json!({})).await;
    server.put_queue("full", json!({"max_depth": 1})).await;
    server
        .put_queue(
            "typed",
            json!({"schema": {"type": "object", "required": ["n"]}}),
        )
        .await;
    server.send("full", json!({"body": "filler"})).await;
    server
        .put(
            "/v1/topics/t",
            json!({"subscriptions": [{"queue": "open"}, {"queue": "full"}]}),
        )
        .await
        .ok();
    server
        .post("/v1/topics/t/messages", json!({"body": {"n": 1}}))
        .await
        .error(503, "queue_full");
    server
        .put(
            "/v1/topics/u",
            json!({"subscriptions": [{"queue": "open"}, {"queue": "typed"}]}),
        )
        .await
        .ok();
    server
        .post("/v1/topics/u/messages", json!({"body": {"m": 1}}))
        .await
        .error(422, "schema_violation");
    assert_eq!(
        server.stats("open").await["ready"],
        0,
        "a copy was stored alone"
    );
    assert_eq!(server.stats("full").await["ready"], 1);
}

#[tokio::test]
async fn definitions_are_checked() {
    // Proves: an unknown topic is 404 topic_not_found (publish, get, delete); a subscribed queue
    // that does not exist 404 queue_not_found; a bad filter, a queue subscribed twice or a bad
    // name 422 naming the field.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server
        .post("/v1/topics/none/messages", json!({"body": 1}))
        .await
        .error(404, "topic_not_found");
    server
        .get("/v1/topics/none")
        .await
        .error(404, "topic_not_found");
    server
        .delete("/v1/topics/none")
        .await
        .error(404, "topic_not_found");
    server
        .put(
            "/v1/topics/t",
            json!({"subscriptions": [{"queue": "nope"}]}),
        )
        .await
        .error(404, "queue_not_found");
    for (spec, field) in [
        (
            json!({"subscriptions": [{"queue": "q", "filter": ".body |||"}]}),
            "subscriptions[0].filter",
        ),
        (
            json!({"subscriptions": [{"queue": "q"}, {"queue": "q"}]}),
            "subscriptions[1].queue",
        ),
    ] {
        let error = server
            .put("/v1/topics/t", spec)
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().starts_with(field),
            "{error}"
        );
    }
    assert_eq!(server.get("/v1/topics").await.ok(), json!({"topics": []}));
}

#[tokio::test]
async fn a_token_publishes_only_to_topics_whose_queues_it_may_produce_to() {
    // Proves: with access control on, a producer of team-a.* may publish to a topic whose
    // subscriptions are all team-a queues, not to one that also reaches team-b (403, nothing
    // stored); defining topics is for admins.
    let server = tokens::team_a(TestServer::builder(), "").start().await;
    let call = async |method: Method, path: &str, token: &str, body: Value| {
        let response = server
            .client()
            .request(method, format!("{}{path}", server.url()))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status();
        (
            status,
            response.json::<Value>().await.unwrap_or(Value::Null),
        )
    };
    for queue in ["team-a.x", "team-a.y", "team-b.z"] {
        let (status, _) = call(
            Method::PUT,
            &format!("/v1/queues/{queue}"),
            ADMIN,
            json!({}),
        )
        .await;
        assert!(status.is_success());
    }
    let (status, _) = call(
        Method::PUT,
        "/v1/topics/mine",
        PRODUCER_A,
        json!({"subscriptions": [{"queue": "team-a.x"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    for (name, queues) in [
        ("mine", vec!["team-a.x", "team-a.y"]),
        ("wide", vec!["team-a.x", "team-b.z"]),
    ] {
        let subscriptions: Vec<Value> = queues.iter().map(|q| json!({"queue": q})).collect();
        let (status, _) = call(
            Method::PUT,
            &format!("/v1/topics/{name}"),
            ADMIN,
            json!({"subscriptions": subscriptions}),
        )
        .await;
        assert!(status.is_success());
    }
    let (status, answer) = call(
        Method::POST,
        "/v1/topics/mine/messages",
        PRODUCER_A,
        json!({"body": 1}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (status, error) = call(
        Method::POST,
        "/v1/topics/wide/messages",
        PRODUCER_A,
        json!({"body": 2}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{error}");
    // Another team's queue is not named to a token that may not see it (issue 30, finding 17).
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("a queue it may not see") && !message.contains("team-b"),
        "{error}"
    );
    let (_, stats) = call(Method::GET, "/v1/queues/team-a.x/stats", ADMIN, Value::Null).await;
    assert_eq!(stats["ready"], 1, "{stats}");
}

/// Publishes the kill test sends.
const PUBLISHES: usize = 400;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_among_publishes_leaves_all_copies_or_none() {
    // Proves the copies of a publish are one commit: eight tasks publish numbered messages to a
    // topic of three queues, the server is SIGKILLed mid-way, and after the restart every
    // number is in all three queues or in none, and every publish answered 2xx is in all three.
    let mut server = TestServer::builder().start().await;
    for queue in ["q1", "q2", "q3"] {
        server.put_queue(queue, json!({})).await;
    }
    server
        .put(
            "/v1/topics/fan",
            json!({"subscriptions": [{"queue": "q1"}, {"queue": "q2"}, {"queue": "q3"}]}),
        )
        .await
        .ok();
    let next = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let client = server.client().clone();
        let url = format!("{}/v1/topics/fan/messages", server.url());
        let next = next.clone();
        let answered = answered.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= PUBLISHES {
                    return;
                }
                let sent = client.post(&url).json(&json!({"body": n})).send().await;
                match sent {
                    Ok(response) if response.status().is_success() => {
                        answered.lock().unwrap().push(n)
                    }
                    _ => return,
                }
            }
        }));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while answered.lock().unwrap().len() < PUBLISHES / 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the publishers stalled"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    server.kill().await;
    for task in tasks {
        let _ = task.await;
    }
    let answered = answered.lock().unwrap().clone();
    assert!(
        answered.len() < PUBLISHES,
        "the kill came too late to test anything"
    );
    server.restart().await;

    let mut seen = vec![[0_u32; 3]; PUBLISHES];
    for (i, queue) in ["q1", "q2", "q3"].into_iter().enumerate() {
        for body in drain(&server, queue).await {
            seen[body.as_u64().unwrap() as usize][i] += 1;
        }
    }
    let torn: Vec<(usize, [u32; 3])> = seen
        .iter()
        .enumerate()
        .filter(|(_, counts)| !(counts == &&[0, 0, 0] || counts == &&[1, 1, 1]))
        .map(|(n, counts)| (n, *counts))
        .collect();
    assert!(
        torn.is_empty(),
        "publishes not in all queues or none: {torn:?}"
    );
    for n in &answered {
        assert_eq!(
            seen[*n],
            [1, 1, 1],
            "publish {n} was answered 2xx but lost copies"
        );
    }
}

#[tokio::test]
async fn the_config_file_and_the_cli_define_and_publish() {
    // Proves: `[topics.<name>]` is defined at start; `sluice topic set/list/show/publish/delete`
    // do what they say.
    let server = TestServer::builder()
        .config(
            r#"
[queues.emails]
[queues.sms]

[topics.alerts]
subscriptions = [{ queue = "emails" }, { queue = "sms", filter = '.body.urgent' }]
"#,
        )
        .start()
        .await;
    let topic = server.get("/v1/topics/alerts").await.ok();
    assert_eq!(topic["spec"]["subscriptions"][1]["filter"], ".body.urgent");
    let cli = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["--url", server.url()])
            .args(args)
            .output()
            .expect("run sluice");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "sluice {args:?}: {stderr}");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let published = cli(&[
        "topic",
        "publish",
        "alerts",
        r#"{"urgent": true}"#,
        "--id",
        "a-1",
    ]);
    assert!(
        published.contains("emails") && published.contains("sms"),
        "{published}"
    );
    let again = cli(&[
        "topic",
        "publish",
        "alerts",
        r#"{"urgent": true}"#,
        "--id",
        "a-1",
    ]);
    assert!(again.contains("duplicate"), "{again}");
    let set = cli(&[
        "topic",
        "set",
        "digest",
        "--subscribe",
        "emails",
        "--subscribe",
        "sms=.body.n > 1",
    ]);
    assert!(
        set.contains("created topic digest: 2 subscriptions"),
        "{set}"
    );
    let list = cli(&["topic", "list"]);
    assert!(list.contains("alerts") && list.contains("digest"), "{list}");
    let show: Value = serde_json::from_str(&cli(&["--json", "topic", "show", "digest"])).unwrap();
    assert_eq!(show["spec"]["subscriptions"][1]["filter"], ".body.n > 1");
    assert!(cli(&["topic", "delete", "digest"]).contains("deleted topic digest"));
    assert_eq!(server.stats("emails").await["ready"], 1);
    assert_eq!(server.stats("sms").await["ready"], 1);
}

#[tokio::test]
async fn a_webhook_endpoint_publishes_its_events_to_a_topic() {
    // Proves: an endpoint with `topic` publishes each accepted event to it (a copy in each
    // subscribed queue whose filter takes it, none in the endpoint's queue); the sender's
    // delivery id dedups the whole publish; an event a subscribed queue's schema refuses is
    // kept in the endpoint queue's dead-letter queue with the reason; the topic must exist.
    let server = TestServer::builder().start().await;
    for queue in ["inbox", "billing", "big"] {
        server.put_queue(queue, json!({})).await;
    }
    server
        .put_queue(
            "typed",
            json!({"schema": {"type": "object", "required": ["amount"]}}),
        )
        .await;
    server
        .put(
            "/v1/topics/orders",
            json!({"subscriptions": [{"queue": "billing"}, {"queue": "big", "filter": ".body.amount > 100"}]}),
        )
        .await
        .ok();
    let missing = server
        .put(
            "/v1/webhooks/shop",
            json!({"queue": "inbox", "topic": "nope", "verify": {"scheme": "none"}}),
        )
        .await;
    missing.error(404, "topic_not_found");
    server
        .put(
            "/v1/webhooks/shop",
            json!({"queue": "inbox", "topic": "orders", "verify": {"scheme": "none"},
                   "idempotency": {"header": "x-delivery"}}),
        )
        .await
        .ok();
    let post = |delivery: &'static str, body: Value| {
        server
            .client()
            .post(format!("{}/hooks/shop", server.url()))
            .header("x-delivery", delivery)
            .json(&body)
            .send()
    };
    let first = post("d-1", json!({"amount": 500})).await.unwrap();
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first: Value = first.json().await.unwrap();
    let queues: Vec<&str> = first["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|copy| copy["queue"].as_str().unwrap())
        .collect();
    assert_eq!(queues, ["billing", "big"], "{first}");
    let again = post("d-1", json!({"amount": 500})).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(
        again["copies"][0]["message_id"],
        first["copies"][0]["message_id"]
    );
    let small = post("d-2", json!({"amount": 5})).await.unwrap();
    assert_eq!(small.status(), StatusCode::ACCEPTED);
    assert_eq!(drain(&server, "billing").await.len(), 2);
    assert_eq!(drain(&server, "big").await.len(), 1);
    assert!(drain(&server, "inbox").await.is_empty());

    // A subscribed queue whose schema refuses the event: kept in inbox's DLQ, nothing stored.
    server
        .put(
            "/v1/topics/orders",
            json!({"subscriptions": [{"queue": "billing"}, {"queue": "typed"}]}),
        )
        .await
        .ok();
    let refused = post("d-3", json!({"no": "amount"})).await.unwrap();
    assert_eq!(refused.status(), StatusCode::ACCEPTED);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["dead_lettered"], true, "{refused}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("the topic refused the event"),
        "{refused}"
    );
    assert!(drain(&server, "billing").await.is_empty(), "all or none");
    let dead = server.get("/v1/queues/inbox/dlq").await.ok();
    assert_eq!(dead["entries"].as_array().unwrap().len(), 1, "{dead}");

    // The topic deleted under the endpoint: events are kept, not bounced.
    server.delete("/v1/topics/orders").await.ok();
    let orphan = post("d-4", json!({"amount": 7})).await.unwrap();
    assert_eq!(orphan.status(), StatusCode::ACCEPTED);
    let orphan: Value = orphan.json().await.unwrap();
    assert_eq!(orphan["dead_lettered"], true, "{orphan}");
    let dead = server.get("/v1/queues/inbox/dlq").await.ok();
    assert_eq!(dead["entries"].as_array().unwrap().len(), 2, "{dead}");
}
