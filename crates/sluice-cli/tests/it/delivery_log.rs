//! The push delivery log (`GET /v1/queues/{q}/messages/{id}/deliveries`): every push attempt
//! with the request as sent (secrets hidden), the answer's status or the transport error, its
//! headers, a bounded body excerpt and the latency; bounded per message
//! (`[push] delivery_log_*`), kept across restarts and into the dead-letter queue.
//!
//! Retries run on a 50 ms backoff of real time; every wait is a bounded poll.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::destination::{Answer, Destination, Script};

/// Longest wait for something the server should do promptly.
const WAIT: Duration = Duration::from_secs(20);
/// Secrets of the destination, none of which may be shown.
const URL_PASSWORD: &str = "pa55word-9c1";
const QUERY_TOKEN: &str = "qtok-7f3e2a";
const HEADER_SECRET: &str = "Bearer hdr-secret-51b";

/// A destination URL with a password and a query token.
fn secret_url(destination: &Destination) -> String {
    destination
        .url(&format!("/in?token={QUERY_TOKEN}"))
        .replacen("http://", &format!("http://user:{URL_PASSWORD}@"), 1)
}

/// Polls the delivery log until `done` holds (for at most [`WAIT`]); returns it either way.
async fn deliveries_until(
    server: &TestServer,
    queue: &str,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let log = deliveries(server, queue, id).await;
        if done(&log) || tokio::time::Instant::now() >= deadline {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn deliveries(server: &TestServer, queue: &str, id: &str) -> Value {
    let reply = server
        .get(&format!("/v1/queues/{queue}/messages/{id}/deliveries"))
        .await;
    let log = reply.ok();
    let _: sluice_wire::DeliveriesOut = reply.parse();
    log
}

fn attempts_in(log: &Value) -> usize {
    log["deliveries"].as_array().map_or(0, Vec::len)
}

fn assert_no_secrets(text: &str) {
    for secret in [URL_PASSWORD, QUERY_TOKEN, "hdr-secret-51b"] {
        assert!(!text.contains(secret), "{secret} shown in {text}");
    }
}

#[tokio::test]
async fn each_attempt_is_logged_with_its_answer_and_kept_after_a_restart() {
    // Proves a 500 (slow, with a body that echoes a secret and a header) then a 200 leave two
    // attempts: numbers 1 and 2, statuses 500 and 200, the 500's error, its header, its body
    // excerpt with the secret hidden, a latency at least the destination's 200 ms delay; the
    // request as sent with the URL's password and query, the Basic credentials made from them
    // and the configured header hidden; and
    // the same log after a restart.
    let destination = Destination::start().await;
    destination.on_path(
        "/in",
        Script::fail(
            1,
            Answer::status(500)
                .body(&format!("database down; you sent {QUERY_TOKEN} back"))
                .header("x-upstream", "db-7")
                .delay(Duration::from_millis(200)),
        )
        .then(Answer::ok().body("thanks").header("x-receipt", "r-1")),
    );
    let mut server = TestServer::builder().start().await;
    server
        .put_queue(
            "q",
            json!({
                "max_attempts": 5,
                "backoff": {"initial_ms": 50, "jitter": false},
                "push": {"url": secret_url(&destination), "headers": {"x-api-key": HEADER_SECRET}},
            }),
        )
        .await;
    let id = server.send("q", json!({"body": {"n": 1}})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    destination.wait_for(2, WAIT).await;
    let log = deliveries_until(&server, "q", &id, |log| {
        attempts_in(log) == 2 && log["state"] == "acked"
    })
    .await;
    assert_eq!(attempts_in(&log), 2, "{log:#}");
    assert_eq!(log["message_id"], id.as_str());
    assert_eq!(log["state"], "acked", "{log:#}");
    let [first, second] = [&log["deliveries"][0], &log["deliveries"][1]];

    assert_eq!(first["attempt"], 1, "{first:#}");
    assert_eq!(first["status"], 500, "{first:#}");
    assert_eq!(first["method"], "POST");
    assert!(
        first["error"].as_str().unwrap().starts_with("HTTP 500"),
        "{first:#}"
    );
    assert_eq!(first["response_headers"]["x-upstream"], "db-7", "{first:#}");
    assert_eq!(
        first["body_excerpt"], "database down; you sent (hidden) back",
        "the excerpt keeps the answer with the secret hidden"
    );
    assert!(first.get("body_truncated").is_none(), "{first:#}");
    let latency = first["latency_ms"].as_u64().unwrap();
    assert!(
        (200..10_000).contains(&latency),
        "latency {latency} ms of an answer delayed 200 ms"
    );
    let url = first["url"].as_str().unwrap();
    assert!(
        url.starts_with("http://(hidden)@127.0.0.1:") && url.ends_with("/in?(hidden)"),
        "{url}"
    );
    let request_headers = &first["request_headers"];
    assert_eq!(
        request_headers["x-api-key"], "(hidden)",
        "a configured header"
    );
    assert_eq!(
        request_headers["authorization"], "(hidden)",
        "the Basic credentials made from the URL's user info"
    );
    assert_eq!(request_headers["sluice-attempt"], "1");
    assert_eq!(request_headers["sluice-message-id"], id.as_str());
    assert_eq!(request_headers["content-type"], "application/json");

    assert_eq!(second["attempt"], 2, "{second:#}");
    assert_eq!(second["status"], 200, "{second:#}");
    assert!(second.get("error").is_none(), "{second:#}");
    assert_eq!(second["body_excerpt"], "thanks");
    assert_eq!(second["response_headers"]["x-receipt"], "r-1");
    assert_eq!(second["request_headers"]["sluice-attempt"], "2");
    assert!(
        second["at"].as_str().unwrap() >= first["at"].as_str().unwrap(),
        "oldest first"
    );
    assert_no_secrets(&log.to_string());

    server.restart().await;
    let after = deliveries(&server, "q", &id).await;
    assert_eq!(
        after["deliveries"], log["deliveries"],
        "kept across a restart"
    );
}

#[tokio::test]
async fn the_log_is_bounded_and_a_dead_letter_keeps_it() {
    // Proves with `delivery_log_attempts = 2` and `delivery_log_body_bytes = 16`, a message that
    // fails all 3 attempts with a long body is dead-lettered keeping only attempts 2 and 3, each
    // excerpt cut to 16 bytes and marked; the log is read through the source queue and through
    // the dead-letter queue alike; and a refused connection is logged without a status.
    let mut destination = Destination::start().await;
    destination.on_path(
        "/in",
        Script::always(Answer::status(503).body("0123456789abcdefTHE-REST-IS-CUT")),
    );
    let server = TestServer::builder()
        .config("[push]\ndelivery_log_attempts = 2\ndelivery_log_body_bytes = 16\n")
        .start()
        .await;
    server
        .put_queue(
            "q",
            json!({
                "max_attempts": 3,
                "backoff": {"initial_ms": 50, "jitter": false},
                "push": {"url": destination.url("/in")},
            }),
        )
        .await;
    let id = server.send("q", json!({"body": "x"})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = deliveries_until(&server, "q", &id, |log| log["state"] == "dead").await;
    assert_eq!(log["state"], "dead", "{log:#}");
    assert_eq!(log["queue"], "q.dlq");
    assert_eq!(destination.count(), 3);
    let attempts: Vec<u64> = log["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(
        attempts,
        [2, 3],
        "only the last 2 attempts are kept: {log:#}"
    );
    for delivery in log["deliveries"].as_array().unwrap() {
        assert_eq!(delivery["status"], 503);
        assert_eq!(delivery["body_excerpt"], "0123456789abcdef");
        assert_eq!(delivery["body_truncated"], true);
    }
    let through_dlq = deliveries(&server, "q.dlq", &id).await;
    assert_eq!(through_dlq["deliveries"], log["deliveries"]);

    // Replayed, the new message starts a log of its own; a refused connection has no status.
    destination.stop().await;
    let replay = server
        .post(&format!("/v1/queues/q/dlq/{id}/replay"), json!({}))
        .await
        .ok();
    let new_id = replay["results"][0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = deliveries_until(&server, "q", &new_id, |log| attempts_in(log) >= 1).await;
    let first = &log["deliveries"][0];
    assert_eq!(first["attempt"], 1, "{log:#}");
    assert!(first.get("status").is_none(), "{first:#}");
    assert!(
        first["error"].as_str().unwrap().contains("cannot connect"),
        "{first:#}"
    );
    assert!(first.get("body_excerpt").is_none(), "{first:#}");
}

#[tokio::test]
async fn the_log_goes_with_the_acked_record() {
    // Proves the log is kept with the message's record and removed with it: after a push is
    // acked its one attempt is listed; once `acked_retention_ms` (1 s of server time) removed
    // the record, the route answers 404 like the lookup.
    let destination = Destination::start().await;
    let server = TestServer::builder()
        .test_clock(true)
        .config("[server]\nacked_retention_ms = 1000\n")
        .start()
        .await;
    server
        .put_queue("q", json!({"push": {"url": destination.url("/in")}}))
        .await;
    let id = server.send("q", json!({"body": 1})).await["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let log = deliveries_until(&server, "q", &id, |log| log["state"] == "acked").await;
    assert_eq!(attempts_in(&log), 1, "{log:#}");
    assert_eq!(log["deliveries"][0]["status"], 200);

    server.advance_clock(60_000).await;
    // Cleanup runs on the maintenance tick (every 500 ms of real time).
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let reply = server
            .get(&format!("/v1/queues/q/messages/{id}/deliveries"))
            .await;
        if reply.status == 404 {
            reply.error(404, "message_not_found");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the record and its log were never removed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_unknown_message_has_no_log_and_the_route_is_described() {
    // Proves the route answers 404 `message_not_found` for an id that is no message and for a
    // text that is no id, and is in the OpenAPI document.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server
        .get("/v1/queues/q/messages/0190b3a0-0000-7000-8000-000000000000/deliveries")
        .await
        .error(404, "message_not_found");
    server
        .get("/v1/queues/q/messages/nope/deliveries")
        .await
        .error(404, "message_not_found");
    let doc = server.get("/v1/openapi.json").await.ok();
    let operation = &doc["paths"]["/v1/queues/{queue}/messages/{message_id}/deliveries"]["get"];
    assert_eq!(
        operation["operationId"], "message_deliveries",
        "{operation:#}"
    );
}

#[tokio::test]
async fn the_cli_shows_the_log_as_a_table_and_as_json() {
    // Proves `sluice deliveries QUEUE ID` reads the log through the client: the table has one
    // row per attempt with its status, and the failed one's answer; `--json` prints the same
    // log as the API; a message that was never pushed says so; a bad id is a usage error.
    let destination = Destination::start().await;
    destination.on_path(
        "/in",
        Script::fail(1, Answer::status(503).body("upstream down"))
            .then(Answer::ok().body("thanks")),
    );
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "q",
            json!({"backoff": {"initial_ms": 50, "jitter": false},
                   "push": {"url": destination.url("/in")}}),
        )
        .await;
    server.put_queue("plain", json!({})).await;
    let id = crate::support::message_id(&server.send("q", json!({"body": 1})).await);
    let log = deliveries_until(&server, "q", &id, |log| {
        attempts_in(log) == 2 && log["state"] == "acked"
    })
    .await;
    assert_eq!(attempts_in(&log), 2, "{log:#}");

    let sluice = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .args(["--url", server.url()])
            .env_remove("SLUICE_TOKEN")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, table, stderr) = sluice(&["deliveries", "q", &id]);
    assert_eq!(code, Some(0), "{stderr}");
    let rows: Vec<&str> = table.lines().filter(|line| line.contains(" ms")).collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(
        rows[0].contains("503") && rows[0].contains("HTTP 503: upstream down"),
        "{table}"
    );
    assert!(
        rows[1].contains("200") && rows[1].contains("thanks"),
        "{table}"
    );

    let (code, json_out, stderr) = sluice(&["deliveries", "q", &id, "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let printed: Value = serde_json::from_str(&json_out).unwrap();
    assert_eq!(printed, log, "--json prints the API's log");

    let plain = crate::support::message_id(&server.send("plain", json!({"body": 2})).await);
    let (code, text, stderr) = sluice(&["deliveries", "plain", &plain]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(text.contains("no push attempts"), "{text}");

    let (code, _, stderr) = sluice(&["deliveries", "q", "not-a-uuid"]);
    assert_eq!(code, Some(2), "a usage error: {stderr}");
}
