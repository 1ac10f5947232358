//! The dashboard's history (`[dashboard]`, `GET /v1/history`, `GET /v1/queues/{queue}/history`):
//! the server samples depths and rates itself, keeps one window of them, forgets deleted
//! queues, shows a token only what it may read; and `/browse` gives body previews.
//!
//! These run on real time (the sampler ticks by the monotonic clock), with a 200 ms interval.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::tokens::{self, ADMIN, PRODUCER_A};
use crate::support::{TestServer, receipt};

const INTERVAL_MS: u64 = 200;
const WINDOW_MS: u64 = 5000;
/// Points a series holds at most: the window's worth plus the one at its start.
const POINTS: usize = (WINDOW_MS / INTERVAL_MS) as usize + 1;
/// How long a test waits for samples to show something.
const WAIT: Duration = Duration::from_secs(10);

fn dashboard_config() -> String {
    format!("[dashboard]\nhistory_interval_ms = {INTERVAL_MS}\nhistory_window_ms = {WINDOW_MS}\n")
}

async fn start() -> TestServer {
    TestServer::builder()
        .config(&dashboard_config())
        .start()
        .await
}

/// Polls `GET path` until `done` holds of the answer (or the time is up: then the last answer).
async fn history_until(server: &TestServer, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let out = server.get(path).await.ok();
        if done(&out) || tokio::time::Instant::now() >= deadline {
            return out;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn points(out: &Value) -> &Vec<Value> {
    out["points"].as_array().expect("points")
}

/// The sum over points of a rate times the interval: about the number of events (a little less
/// when a sample came late, since a rate divides by the real time between samples).
fn events(points: &[Value], field: &str) -> f64 {
    points
        .iter()
        .map(|p| {
            p[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{field} in {p}"))
        })
        .sum::<f64>()
        * (INTERVAL_MS as f64 / 1000.0)
}

#[tokio::test]
async fn the_history_holds_depths_and_rates_sampled_by_the_server() {
    // Proves the points carry the queue's depths as they were and its enqueue/ack/fail rates,
    // at the configured interval, and that a series is bounded to the window.
    let server = start().await;
    server.put_queue("orders", json!({})).await;
    for n in 0..20 {
        server.send("orders", json!({"body": {"n": n}})).await;
    }
    let taken = server.receive("orders", json!({"max": 5})).await;
    assert_eq!(taken.len(), 5);
    for message in &taken[..2] {
        server.ack("orders", receipt(message)).await;
    }
    server
        .nack(
            "orders",
            json!({"receipt": receipt(&taken[2]), "error": "boom", "delay_ms": 3_600_000}),
        )
        .await;

    let out = history_until(&server, "/v1/queues/orders/history", |out| {
        points(out)
            .last()
            .is_some_and(|p| p["ready"] == 15 && p["in_flight"] == 2 && p["delayed"] == 1)
    })
    .await;
    assert_eq!(out["queue"], "orders", "{out}");
    assert_eq!(out["interval_ms"], INTERVAL_MS, "{out}");
    assert_eq!(out["window_ms"], WINDOW_MS, "{out}");
    let last = points(&out).last().cloned().unwrap_or_default();
    assert_eq!(
        (&last["ready"], &last["in_flight"], &last["delayed"]),
        (&json!(15), &json!(2), &json!(1)),
        "the last sample has the depths: {out}"
    );
    assert_eq!(last["dead_lettered"], 0, "orders.dlq is empty: {last}");
    assert!(
        last["at_ms"].as_i64().unwrap() <= out["now_ms"].as_i64().unwrap(),
        "{out}"
    );

    // Rates: 20 enqueued, 2 acked, 1 failed, over the samples since.
    let all = points(&out).clone();
    let enqueued = events(&all, "enqueued_per_s");
    assert!(
        (5.0..=20.01).contains(&enqueued),
        "about 20 enqueued, got {enqueued}: {out}"
    );
    let acked = events(&all, "acked_per_s");
    assert!((0.5..=2.01).contains(&acked), "about 2 acked, got {acked}");
    let failed = events(&all, "failed_per_s");
    assert!(
        (0.25..=1.01).contains(&failed),
        "about 1 failed, got {failed}"
    );

    // Samples come at the interval, in time order.
    let times: Vec<i64> = all.iter().map(|p| p["at_ms"].as_i64().unwrap()).collect();
    for pair in times.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= INTERVAL_MS as i64 - 50,
            "samples {INTERVAL_MS} ms apart, got {gap}: {times:?}"
        );
    }

    // `since_ms` gives only what is newer.
    let since = times[times.len() - 1];
    let newer = server
        .get(&format!("/v1/queues/orders/history?since_ms={since}"))
        .await
        .ok();
    assert!(
        points(&newer)
            .iter()
            .all(|p| p["at_ms"].as_i64().unwrap() > since),
        "{newer}"
    );

    // Bounded: once the window is full, the series stays at its size.
    let full = history_until(&server, "/v1/queues/orders/history", |out| {
        points(out).len() >= POINTS
    })
    .await;
    assert_eq!(points(&full).len(), POINTS, "{full}");
    tokio::time::sleep(Duration::from_millis(3 * INTERVAL_MS)).await;
    let later = server.get("/v1/queues/orders/history").await.ok();
    assert_eq!(points(&later).len(), POINTS, "still one window: {later}");
    let oldest = points(&later)[0]["at_ms"].as_i64().unwrap();
    assert!(
        later["now_ms"].as_i64().unwrap() - oldest <= (WINDOW_MS + 2 * INTERVAL_MS) as i64,
        "nothing older than the window: {later}"
    );
}

#[tokio::test]
async fn a_deleted_queue_leaves_the_history_and_starts_again_when_created_again() {
    let server = start().await;
    server.put_queue("temp", json!({})).await;
    server.put_queue("kept", json!({})).await;
    for n in 0..3 {
        server.send("temp", json!({"body": n})).await;
    }
    let all = history_until(&server, "/v1/history", |out| {
        series(out, "temp")
            .and_then(|points| points.last().cloned())
            .is_some_and(|p| p["ready"] == 3)
    })
    .await;
    assert!(series(&all, "kept").is_some(), "{all}");
    assert!(
        series(&all, "temp.dlq").is_some(),
        "dead-letter queues too: {all}"
    );

    server.delete("/v1/queues/temp").await.ok();
    let all = server.get("/v1/history").await.ok();
    assert!(series(&all, "temp").is_none(), "gone at once: {all}");
    assert!(series(&all, "kept").is_some(), "{all}");
    server
        .get("/v1/queues/temp/history")
        .await
        .error(404, "queue_not_found");

    // Created again: a new series, without the old depths.
    server.put_queue("temp", json!({})).await;
    let again = history_until(&server, "/v1/queues/temp/history", |out| {
        !points(out).is_empty()
    })
    .await;
    assert!(!points(&again).is_empty(), "{again}");
    assert!(
        points(&again).iter().all(|p| p["ready"] == 0),
        "the old queue's samples are gone: {again}"
    );
}

/// The points of `name` in a `GET /v1/history` answer.
fn series(out: &Value, name: &str) -> Option<Vec<Value>> {
    out["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == name)
        .map(|q| q["points"].as_array().cloned().unwrap_or_default())
}

#[tokio::test]
async fn webhook_endpoints_have_a_history_of_what_they_received() {
    // Unsigned requests to a GitHub endpoint are received and refused: both show.
    let server = TestServer::builder()
        .config(&dashboard_config())
        .env("SLUICE_IT_HISTORY_SECRET", "history-secret")
        .start()
        .await;
    server.put_queue("events", json!({})).await;
    server
        .put(
            "/v1/webhooks/gh",
            json!({"queue": "events", "verify": {"scheme": "github", "secrets": [{"env": "SLUICE_IT_HISTORY_SECRET"}]}}),
        )
        .await
        .ok();
    for _ in 0..6 {
        let reply = server.post("/hooks/gh", json!({"unsigned": true})).await;
        assert!(reply.status.is_client_error(), "{}", reply.text);
    }
    let hook = |out: &Value| -> Vec<Value> {
        out["webhooks"]
            .as_array()
            .expect("webhooks")
            .iter()
            .find(|w| w["name"] == "gh")
            .map(|w| w["points"].as_array().cloned().unwrap_or_default())
            .unwrap_or_default()
    };
    let out = history_until(&server, "/v1/history", |out| {
        events(&hook(out), "received_per_s") > 1.0
    })
    .await;
    let points = hook(&out);
    let received = events(&points, "received_per_s");
    assert!(
        (1.5..=6.01).contains(&received),
        "about 6 received, got {received}: {out}"
    );
    let failed = events(&points, "failed_per_s");
    assert!(
        (1.5..=6.01).contains(&failed),
        "all refused, got {failed}: {out}"
    );
    assert_eq!(events(&points, "accepted_per_s"), 0.0, "{out}");
}

#[tokio::test]
async fn a_token_sees_the_history_of_the_queues_it_may_read_only() {
    let server = tokens::team_a(TestServer::builder(), &dashboard_config())
        .start()
        .await;
    for queue in ["team-a.jobs", "payroll"] {
        let (status, text) =
            call(&server, Method::PUT, &format!("/v1/queues/{queue}"), ADMIN).await;
        assert_eq!(status, 200, "{text}");
    }
    let (status, _) = call(&server, Method::GET, "/v1/history", "").await;
    assert_eq!(status, 401, "no token, no history");

    let deadline = tokio::time::Instant::now() + WAIT;
    let admin = loop {
        let (_, text) = call(&server, Method::GET, "/v1/history", ADMIN).await;
        let out: Value = serde_json::from_str(&text).unwrap();
        if series(&out, "payroll").is_some() || tokio::time::Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(series(&admin, "payroll").is_some(), "{admin}");
    assert!(series(&admin, "team-a.jobs").is_some(), "{admin}");

    let (status, text) = call(&server, Method::GET, "/v1/history", PRODUCER_A).await;
    assert_eq!(status, 200, "{text}");
    let producer: Value = serde_json::from_str(&text).unwrap();
    assert!(series(&producer, "team-a.jobs").is_some(), "{producer}");
    assert!(
        series(&producer, "payroll").is_none(),
        "not its queue: {producer}"
    );
    assert_eq!(producer["webhooks"], json!([]), "endpoints are for admins");

    let (status, _) = call(
        &server,
        Method::GET,
        "/v1/queues/payroll/history",
        PRODUCER_A,
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = call(
        &server,
        Method::GET,
        "/v1/queues/team-a.jobs/history",
        PRODUCER_A,
    )
    .await;
    assert_eq!(status, 200);
}

async fn call(server: &TestServer, method: Method, path: &str, token: &str) -> (u16, String) {
    let mut request = server
        .client()
        .request(method.clone(), format!("{}{path}", server.url()));
    if !token.is_empty() {
        request = request.bearer_auth(token);
    }
    if method == Method::PUT {
        request = request.json(&json!({}));
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn history_queries_are_checked() {
    let server = start().await;
    server.put_queue("q", json!({})).await;
    let reply = server.get("/v1/history?since_ms=yesterday").await;
    assert!(reply.status.is_client_error(), "{}", reply.text);
    reply.error_shape();
    server
        .get("/v1/queues/nope/history")
        .await
        .error(404, "queue_not_found");
}

#[tokio::test]
async fn browse_gives_a_short_body_preview_when_asked() {
    let server = start().await;
    server.put_queue("p", json!({})).await;
    server
        .send("p", json!({"body": "<b>héllo</b> and a long tail of text"}))
        .await;
    server.send("p", json!({"body": "tiny"})).await;

    let plain = server.get("/v1/queues/p/browse").await.ok();
    assert!(
        plain["messages"][0].get("body_preview").is_none(),
        "no preview unless asked: {plain}"
    );

    let previews = |page: &Value| -> Vec<String> {
        page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["body_preview"].as_str().expect("a preview").to_owned())
            .collect()
    };
    let page = server
        .get("/v1/queues/p/browse?preview_bytes=24")
        .await
        .ok();
    assert_eq!(
        previews(&page),
        ["\"<b>héllo</b> and a lon…", "\"tiny\""],
        "the JSON text as stored, cut, markup left as text: {page}"
    );
    // 6 bytes would end inside "é": the cut goes back before it.
    let page = server.get("/v1/queues/p/browse?preview_bytes=6").await.ok();
    assert_eq!(previews(&page)[0], "\"<b>h…", "{page}");

    server
        .get("/v1/queues/p/browse?preview_bytes=5000")
        .await
        .error(422, "invalid_field");
}
