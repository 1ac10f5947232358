//! The dashboard's message page in a real browser (headless Chromium over WebDriver): the push
//! delivery log and a line per failed attempt in the timeline.
//!
//! Needs the Debian packages `chromium` and `chromium-driver` (`CHROMIUM` and `CHROMEDRIVER`
//! override the paths). Without them each test prints "skipped: chromium not installed" and
//! passes, except under CI (the `CI` variable set), where it fails. The server and the push
//! destination come from the `it` suite's support (`tests/it/support`), one launcher for both.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::driver::{Browser, Tools, UI_TIMEOUT};
use crate::support::TestServer;
use crate::support::destination::{Answer, Destination, Script};

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_lettered_push_shows_each_attempt_and_its_delivery_log() {
    // Proves a push message that failed twice (500 with a body and a header) and was
    // dead-lettered shows, on its message page, a timeline line for each attempt ("Attempt 1
    // failed", "Attempt 2 failed", then "Dead-lettered ... after 2 attempts") and the delivery log
    // with both attempts, newest first, each opening to its request and answer (status, header,
    // body excerpt).
    let Some(tools) = Tools::find() else { return };
    let destination = Destination::start().await;
    destination.on_path(
        "/in",
        Script::always(
            Answer::status(500)
                .body("database down")
                .header("x-upstream", "db-7"),
        ),
    );
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "jobs",
            json!({
                "max_attempts": 2,
                "backoff": {"initial_ms": 50, "jitter": false},
                "push": {"url": destination.url("/in")},
            }),
        )
        .await;
    let id = message_id(&server.send("jobs", json!({"body": {"n": 1}})).await);
    let deadline = Instant::now() + UI_TIMEOUT;
    while server.message_status("jobs", &id).await["state"] != "dead" {
        assert!(Instant::now() < deadline, "never dead-lettered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/message/jobs/{id}", server.url()))
        .await;
    let timeline = browser
        .wait_text_containing("ol.timeline", "Dead-lettered")
        .await;
    let lines: Vec<&str> = timeline.lines().collect();
    let attempt_1 = position(&lines, "Attempt 1 failed: HTTP 500: database down");
    let attempt_2 = position(&lines, "Attempt 2 failed: HTTP 500: database down");
    let dead = position(&lines, "Dead-lettered into jobs.dlq after 2 attempts");
    assert!(
        attempt_1 < attempt_2 && attempt_2 < dead,
        "in time order: {timeline}"
    );

    let log = browser
        .wait_text_containing(r#"[data-section="deliveries"]"#, "HTTP 500")
        .await;
    assert!(log.contains("Push deliveries (last 2)"), "{log}");
    let attempts = browser
        .attribute_values(r#"[data-section="deliveries"] details"#, "data-attempt")
        .await;
    assert_eq!(attempts, ["2", "1"], "newest first");
    browser.click(r#"details[data-attempt="1"] summary"#).await;
    let opened = browser
        .wait_text_containing(r#"details[data-attempt="1"]"#, "x-upstream: db-7")
        .await;
    assert!(
        opened.contains("database down"),
        "the body excerpt: {opened}"
    );
    assert!(
        opened.contains(&format!("POST {}", destination.url("/in"))),
        "the request: {opened}"
    );
    assert!(opened.contains("sluice-attempt: 1"), "{opened}");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consumer_nacked_message_has_a_line_per_attempt_and_no_delivery_log() {
    // Proves the same timeline for a message a consumer nacked twice (max_attempts 2): both
    // attempts have their line, and there is no push delivery log.
    let Some(tools) = Tools::find() else { return };
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "jobs",
            json!({"max_attempts": 2, "backoff": {"initial_ms": 1, "jitter": false}}),
        )
        .await;
    let id = message_id(&server.send("jobs", json!({"body": "x"})).await);
    for error in ["first try broke", "second try broke"] {
        let deadline = Instant::now() + UI_TIMEOUT;
        let message = loop {
            let mut got = server.receive("jobs", json!({"max": 1})).await;
            if let Some(message) = got.pop() {
                break message;
            }
            assert!(Instant::now() < deadline, "not delivered again");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        server
            .nack(
                "jobs",
                json!({"receipt": message["receipt"], "error": error}),
            )
            .await;
    }

    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/message/jobs/{id}", server.url()))
        .await;
    let timeline = browser
        .wait_text_containing("ol.timeline", "Dead-lettered")
        .await;
    let lines: Vec<&str> = timeline.lines().collect();
    let attempt_1 = position(&lines, "Attempt 1 failed: first try broke");
    let attempt_2 = position(&lines, "Attempt 2 failed: second try broke");
    let dead = position(&lines, "Dead-lettered into jobs.dlq after 2 attempts");
    assert!(attempt_1 < attempt_2 && attempt_2 < dead, "{timeline}");
    assert!(
        !browser.exists(r#"[data-section="deliveries"]"#).await,
        "no push, no delivery log"
    );
    browser.close().await;
}

fn message_id(answer: &Value) -> String {
    answer["message_id"]
        .as_str()
        .expect("message_id")
        .to_owned()
}

/// The index of the line that starts with `text` (panics when none does).
fn position(lines: &[&str], text: &str) -> usize {
    lines
        .iter()
        .position(|line| line.starts_with(text))
        .unwrap_or_else(|| panic!("no line {text:?} in {lines:#?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_time_still_to_come_reads_in_not_a_negative_age() {
    // Issue 31: a delayed message's timeline showed its visibility as "-29s ago".
    let Some(tools) = Tools::find() else { return };
    let server = TestServer::builder().start().await;
    server.put_queue("later", json!({})).await;
    let id = message_id(
        &server
            .send("later", json!({"body": "x", "delay_ms": 600_000}))
            .await,
    );
    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/message/later/{id}", server.url()))
        .await;
    let timeline = browser
        .wait_text_containing("ol.timeline", "Delayed: visible in")
        .await;
    // Each entry: its time (absolute · relative), then what happened.
    let lines: Vec<&str> = timeline.lines().collect();
    let delayed = position(&lines, "Delayed: visible in");
    let time = lines[delayed.checked_sub(1).expect("a time before it")];
    assert!(
        time.contains(" · in 9m") || time.contains(" · in 10m"),
        "{timeline}"
    );
    assert!(!time.contains(" · -"), "{timeline}");
    browser.close().await;
}
