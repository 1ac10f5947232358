//! Alerts: a flood of dead letters makes one notification per window with the right count;
//! thresholds fire, repeat each window and resolve; notifications reach Slack and signed
//! webhooks, retried when the destination fails; commands from the config file only.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::destination::{Answer, Destination, Script};

/// 2026-03-02T00:00:00Z.
const START_MS: i64 = 1_772_409_600_000;
/// More than the wait before a dead letter is counted (`DEAD_LETTER_SETTLE_MS`).
const SETTLE_MS: i64 = 1_001;
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn clocked_server() -> TestServer {
    TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &START_MS.to_string())
        .start()
        .await
}

/// Every notification waiting in the alert's queue, received and acked: their bodies.
async fn take_notifications(server: &TestServer, alert: &str) -> Vec<Value> {
    let queue = format!("sluice.alerts.{alert}");
    let mut bodies = Vec::new();
    loop {
        let messages = server.receive(&queue, json!({"max": 100})).await;
        if messages.is_empty() {
            return bodies;
        }
        for message in messages {
            assert_eq!(message["headers"]["sluice-alert"], alert, "{message}");
            server
                .ack(&queue, message["receipt"].as_str().unwrap())
                .await;
            bodies.push(message["body"].clone());
        }
    }
}

/// Enqueues `n` messages into `queue` and leases them all, so that moving the clock past the
/// lease dead-letters them at once (the queue takes one attempt).
async fn lease_all(server: &TestServer, queue: &str, n: usize) {
    for start in (0..n).step_by(1000) {
        let messages: Vec<Value> = (start..n.min(start + 1000))
            .map(|i| json!({"body": {"i": i}}))
            .collect();
        server.send(queue, json!({ "messages": messages })).await;
    }
    let mut leased = 0;
    while leased < n {
        let got = server.receive(queue, json!({"max": 100})).await.len();
        assert!(got > 0, "only {leased} of {n} leased");
        leased += got;
    }
}

#[tokio::test]
async fn a_flood_of_ten_thousand_dead_letters_makes_one_notification_per_window() {
    // Proves: 10,000 messages dead-lettered at once make one notification, counting all of
    // them (with a sample of their errors and a dashboard link); more dead letters within the
    // window make none, and the next window's one counts exactly those; the alert's counters
    // say so.
    let server = clocked_server().await;
    server
        .put_queue(
            "orders",
            json!({"max_attempts": 1, "visibility_timeout_ms": 30_000}),
        )
        .await;
    server.put_queue("other", json!({"max_attempts": 1})).await;
    let put = server
        .put(
            "/v1/alerts/ops",
            json!({"queues": ["ord*"], "window_ms": 300_000, "sample_size": 3}),
        )
        .await
        .ok();
    assert_eq!(put["created"], true, "{put}");
    assert_eq!(put["alert"]["queue"], "sluice.alerts.ops", "{put}");

    lease_all(&server, "orders", 10_000).await;
    // A queue the alert does not watch says nothing.
    lease_all(&server, "other", 3).await;
    server.advance_clock(31_000).await;
    server.advance_clock(SETTLE_MS).await;
    let first = take_notifications(&server, "ops").await;
    assert_eq!(first.len(), 1, "{first:?}");
    let event = &first[0];
    assert_eq!(event["type"], "dead_letters", "{event}");
    assert_eq!(event["status"], "firing", "{event}");
    assert_eq!(event["queue"], "orders", "{event}");
    assert_eq!(event["dead_letter_queue"], "orders.dlq", "{event}");
    assert_eq!(event["sample"].as_array().unwrap().len(), 3, "{event}");
    assert!(
        event["dashboard_url"]
            .as_str()
            .unwrap()
            .ends_with("/ui/#/dlq/orders"),
        "{event}"
    );
    let first_count = event["count"].as_u64().unwrap();

    // More dead letters inside the window: no notification until it has passed.
    lease_all(&server, "orders", 250).await;
    server.advance_clock(31_000).await;
    server.advance_clock(SETTLE_MS).await;
    assert!(take_notifications(&server, "ops").await.is_empty());
    server.advance_clock(300_000).await;
    let second = take_notifications(&server, "ops").await;
    assert_eq!(second.len(), 1, "{second:?}");
    let second_count = second[0]["count"].as_u64().unwrap();
    assert_eq!(first_count + second_count, 10_250, "{first:?} {second:?}");
    assert_eq!(first_count, 10_000, "all of the flood in the first");

    // An alert's queue deleted by hand comes back with the next pass.
    server.delete("/v1/queues/sluice.alerts.ops").await.ok();
    server.advance_clock(1).await;
    server.get("/v1/queues/sluice.alerts.ops").await.ok();
    let alert = server.get("/v1/alerts/ops").await.ok();
    assert_eq!(alert["sent"]["dead_letters"], 2, "{alert}");
    assert_eq!(alert["sent"]["dead_letters_counted"], 10_250, "{alert}");
    assert!(alert["last_sent_at"].is_string(), "{alert}");
    assert!(alert["delivery"].is_object(), "{alert}");
    // Nothing new, however long: nothing more.
    server.advance_clock(600_000).await;
    assert!(take_notifications(&server, "ops").await.is_empty());
}

#[tokio::test]
async fn thresholds_fire_repeat_each_window_and_resolve_once() {
    // Proves: depth and oldest-ready-age thresholds notify on crossing, again each window while
    // passed, and once when back within; the alert lists the queues firing.
    let server = clocked_server().await;
    server.put_queue("backlog", json!({})).await;
    server
        .put(
            "/v1/alerts/slow",
            json!({"queues": ["backlog"], "dead_letters": false, "depth_above": 5,
                   "oldest_ready_age_above_ms": 60_000, "window_ms": 120_000}),
        )
        .await
        .ok();
    let messages: Vec<Value> = (0..6).map(|i| json!({"body": i})).collect();
    server
        .send("backlog", json!({ "messages": messages }))
        .await;
    server.advance_clock(1_000).await;
    let fired = take_notifications(&server, "slow").await;
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0]["type"], "depth");
    assert_eq!(fired[0]["status"], "firing");
    assert_eq!(fired[0]["value"], 6);
    assert_eq!(fired[0]["threshold"], 5);
    let alert = server.get("/v1/alerts/slow").await.ok();
    assert_eq!(alert["firing"], json!(["backlog"]), "{alert}");

    // The oldest message passes a minute: that fires; depth is inside its window: quiet.
    server.advance_clock(60_000).await;
    let fired = take_notifications(&server, "slow").await;
    let kinds: Vec<&str> = fired.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["oldest_ready_age"], "{fired:?}");
    // A window after the first, depth repeats.
    server.advance_clock(60_000).await;
    let fired = take_notifications(&server, "slow").await;
    let kinds: Vec<&str> = fired.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["depth"], "{fired:?}");

    // Drained: both resolve, once.
    loop {
        let got = server.receive("backlog", json!({"max": 100})).await;
        if got.is_empty() {
            break;
        }
        for message in got {
            server
                .ack("backlog", message["receipt"].as_str().unwrap())
                .await;
        }
    }
    server.advance_clock(1_000).await;
    let resolved = take_notifications(&server, "slow").await;
    let mut seen: Vec<(String, String)> = resolved
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().into(),
                e["status"].as_str().unwrap().into(),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("depth".to_owned(), "resolved".to_owned()),
            ("oldest_ready_age".to_owned(), "resolved".to_owned())
        ],
        "{resolved:?}"
    );
    server.advance_clock(300_000).await;
    assert!(take_notifications(&server, "slow").await.is_empty());
    let alert = server.get("/v1/alerts/slow").await.ok();
    assert_eq!(alert["firing"], json!(null), "{alert}");
    assert_eq!(alert["sent"]["depth"], 3, "{alert}");
    assert_eq!(alert["sent"]["oldest_ready_age"], 2, "{alert}");
}

#[tokio::test]
async fn notifications_reach_slack_and_signed_webhooks_retried_until_delivered() {
    // Proves: a Slack destination gets a Slack message quoting the error with the dashboard
    // link; a webhook destination gets the JSON notification signed with Standard Webhooks,
    // retried after failures until delivered, and the alert's delivery stats say so.
    let destination = Destination::start().await;
    destination.on_path(
        "/hook",
        Script::fail(2, Answer::status(503)).then(Answer::ok()),
    );
    let server = TestServer::builder()
        .env("ALERT_SIGNING_SECRET", SECRET)
        .start()
        .await;
    server.put_queue("jobs", json!({"max_attempts": 1})).await;
    server
        .put(
            "/v1/alerts/chat",
            json!({"queues": ["jobs"], "window_ms": 1_000,
                   "destination": {"slack_url": destination.url("/slack")}}),
        )
        .await
        .ok();
    server
        .put(
            "/v1/alerts/hook",
            json!({"queues": ["jobs"], "window_ms": 1_000,
                   "destination": {"webhook_url": destination.url("/hook"),
                                   "signing_secret": {"env": "ALERT_SIGNING_SECRET"}}}),
        )
        .await
        .ok();
    server.send("jobs", json!({"body": {"card": 4242}})).await;
    let message = server.receive("jobs", json!({})).await.remove(0);
    server
        .nack(
            "jobs",
            json!({"receipt": message["receipt"], "error": "card <declined> & blocked"}),
        )
        .await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (slack, hooks) = loop {
        let requests = destination.requests();
        let slack: Vec<_> = requests
            .iter()
            .filter(|r| r.path == "/slack")
            .cloned()
            .collect();
        let hooks: Vec<_> = requests
            .iter()
            .filter(|r| r.path == "/hook")
            .cloned()
            .collect();
        if (!slack.is_empty() && hooks.len() >= 3) || tokio::time::Instant::now() > deadline {
            break (slack, hooks);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        slack.len(),
        1,
        "{:?} {} {}",
        destination.requests(),
        server.get("/v1/alerts").await.text,
        server.log_tail(30)
    );
    let text = slack[0].json()["text"].as_str().unwrap().to_owned();
    assert!(
        text.contains("1 message was dead-lettered in queue jobs"),
        "{text}"
    );
    assert!(
        text.contains("card &lt;declined&gt; &amp; blocked"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "<{}/ui/#/dlq/jobs|Open in the dashboard>",
            server.url()
        )),
        "{text}"
    );
    assert_eq!(hooks.len(), 3, "two failures, then delivered: {hooks:?}");
    let event = hooks[2].json();
    assert_eq!(event["type"], "dead_letters", "{event}");
    assert_eq!(event["alert"], "hook", "{event}");
    assert_eq!(event["count"], 1, "{event}");
    assert_eq!(
        event["sample"][0]["error"], "card <declined> & blocked",
        "{event}"
    );
    assert!(
        hooks[2]
            .expect_header("webhook-signature")
            .starts_with("v1,")
    );
    assert_eq!(hooks[0].header("webhook-id"), hooks[2].header("webhook-id"));

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let alert = loop {
        let alert = server.get("/v1/alerts/hook").await.ok();
        if alert["delivery"]["push"]["delivered"] == 1 || tokio::time::Instant::now() > deadline {
            break alert;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(alert["delivery"]["push"]["delivered"], 1, "{alert}");
    assert_eq!(alert["delivery"]["push"]["retried"], 2, "{alert}");
}

#[tokio::test]
async fn commands_come_from_the_config_file_only_and_get_the_notification() {
    // Proves: an alert in the config file may run a command, which gets the notification's
    // JSON on its standard input; the API refuses a command (422 naming the field), checks the
    // rest of a definition, and deleting an alert takes its queue with it.
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("alert.json");
    let server = TestServer::builder()
        .env("ALERT_OUT", file.to_str().unwrap())
        .config(
            r#"
[queues.jobs]
max_attempts = 1

[alerts.pager]
queues = ["jobs"]
window_ms = 1000
destination = { command = ["sh", "-c", "cat > \"$ALERT_OUT\""] }
"#,
        )
        .start()
        .await;
    server.send("jobs", json!({"body": 1})).await;
    let message = server.receive("jobs", json!({})).await.remove(0);
    server
        .nack(
            "jobs",
            json!({"receipt": message["receipt"], "error": "disk on fire"}),
        )
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let written = loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if let Ok(event) = serde_json::from_str::<Value>(&text) {
            break event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}",
            server.log_tail(40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(written["type"], "dead_letters", "{written}");
    assert_eq!(written["sample"][0]["error"], "disk on fire", "{written}");

    let refused = server
        .put(
            "/v1/alerts/sneaky",
            json!({"destination": {"command": ["sh", "-c", "id"]}}),
        )
        .await;
    let error = refused.error(422, "invalid_field");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .starts_with("destination.command"),
        "{error}"
    );
    for (spec, field) in [
        (json!({"window_ms": 5}), "window_ms"),
        (json!({"queues": ["a*b"]}), "queues[0]"),
        (json!({"dead_letters": false}), "dead_letters"),
        (
            json!({"destination": {"webhook_url": "ftp://x"}}),
            "destination",
        ),
        (json!({"sample_size": 99}), "sample_size"),
    ] {
        let error = server
            .put("/v1/alerts/bad", spec)
            .await
            .error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().contains(field),
            "{field}: {error}"
        );
    }
    server
        .get("/v1/alerts/bad")
        .await
        .error(404, "alert_not_found");

    let list = server.get("/v1/alerts").await.ok();
    assert_eq!(list["alerts"][0]["name"], "pager", "{list}");
    server.delete("/v1/alerts/pager").await.ok();
    server
        .get("/v1/alerts/pager")
        .await
        .error(404, "alert_not_found");
    server
        .get("/v1/queues/sluice.alerts.pager")
        .await
        .error(404, "queue_not_found");
}

/// What one `sluice` command did: exit status, stdout, stderr.
struct CliRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for CliRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

fn sluice(server: &TestServer, args: &[&str]) -> CliRun {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["--url", server.url()])
        .args(args)
        .output()
        .expect("run sluice");
    CliRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[tokio::test]
async fn the_cli_defines_lists_shows_and_deletes_alerts() {
    // Proves: `sluice alert set/list/show/delete` do what they say, with every flag of `set`
    // reaching the definition; a missing alert is exit status 3 naming alert_not_found; a
    // Slack URL and a webhook URL together are refused before any request.
    let server = TestServer::builder()
        .env("HOOK_SECRET", SECRET)
        .config("[queues.jobs]\n")
        .start()
        .await;
    let ok = |args: &[&str]| {
        let run = sluice(&server, args);
        assert_eq!(run.code, Some(0), "sluice {args:?}: {run:?}");
        run.stdout
    };
    let set_args = [
        "alert",
        "set",
        "ops",
        "--queue",
        "jobs",
        "--queue",
        "billing*",
        "--depth-above",
        "100",
        "--oldest-ready-age-above",
        "10m",
        "--window",
        "1m",
        "--sample-size",
        "3",
        "--max-attempts",
        "4",
        "--webhook-url",
        "http://127.0.0.1:9/hook",
        "--signing-secret-env",
        "HOOK_SECRET",
        "--header",
        "x-team=ops",
    ];
    let set = ok(&set_args);
    assert!(
        set.contains("created alert ops")
            && set.contains("webhook http://127.0.0.1:9/hook")
            && set.contains("sluice.alerts.ops"),
        "{set}"
    );
    assert!(ok(&set_args).contains("updated alert ops"));
    let quiet = ok(&["alert", "set", "quiet"]);
    assert!(
        quiet.contains("created alert quiet: dead letters on *; notifications wait in queue sluice.alerts.quiet"),
        "{quiet}"
    );

    let list = ok(&["alert", "list"]);
    let row = list
        .lines()
        .find(|line| line.split_whitespace().next() == Some("ops"))
        .unwrap_or_else(|| panic!("no ops row: {list}"));
    assert!(
        row.contains("jobs, billing*") && row.contains("depth > 100") && row.contains("webhook"),
        "{row}"
    );
    assert!(
        list.lines()
            .any(|line| line.trim_start().starts_with("quiet ")),
        "{list}"
    );
    let listed: Value = serde_json::from_str(&ok(&["--json", "alert", "list"])).unwrap();
    let names: Vec<&str> = listed["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|alert| alert["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ops", "quiet"], "{listed}");

    let table = ok(&["alert", "show", "ops"]);
    for (field, value) in [
        ("queue", "sluice.alerts.ops"),
        ("queues", "jobs, billing*"),
        ("depth above", "100"),
        ("oldest ready age above", "10m00s"),
        ("window", "1m00s"),
        ("max attempts", "4"),
        ("signing secret", "env HOOK_SECRET"),
        ("headers", "x-team=ops"),
    ] {
        let cell = table.lines().find_map(|line| {
            let rest = line.trim().strip_prefix(field)?;
            rest.starts_with("  ").then(|| rest.trim())
        });
        assert_eq!(cell, Some(value), "{field}: {table}");
    }
    let shown: Value = serde_json::from_str(&ok(&["--json", "alert", "show", "ops"])).unwrap();
    assert_eq!(shown["name"], "ops");
    assert_eq!(shown["queue"], "sluice.alerts.ops");
    assert_eq!(
        shown["spec"],
        json!({
            "queues": ["jobs", "billing*"],
            "depth_above": 100,
            "oldest_ready_age_above_ms": 600_000,
            "window_ms": 60_000,
            "sample_size": 3,
            "max_attempts": 4,
            "destination": {
                "webhook_url": "http://127.0.0.1:9/hook",
                "signing_secret": {"env": "HOOK_SECRET"},
                "headers": {"x-team": "ops"},
            },
        }),
        "{shown}"
    );
    assert_eq!(shown["sent"]["dead_letters"], 0, "{shown}");
    assert!(shown["delivery"]["push"].is_object(), "{shown}");
    assert_eq!(
        server.get("/v1/alerts/ops").await.ok()["spec"],
        shown["spec"]
    );

    assert!(ok(&["alert", "delete", "ops"]).contains("deleted alert ops"));
    let missing = sluice(&server, &["alert", "show", "ops"]);
    assert_eq!(missing.code, Some(3), "{missing:?}");
    assert!(
        missing.stderr.contains("alert_not_found") && missing.stderr.contains("ops"),
        "{missing:?}"
    );
    let missing = sluice(&server, &["--json", "alert", "show", "ops"]);
    assert_eq!(missing.code, Some(3), "{missing:?}");
    let error: Value = serde_json::from_str(missing.stderr.trim()).unwrap();
    assert_eq!(error["error"]["code"], "alert_not_found", "{missing:?}");
    server
        .get("/v1/queues/sluice.alerts.ops")
        .await
        .error(404, "queue_not_found");

    let both = sluice(
        &server,
        &[
            "alert",
            "set",
            "both",
            "--slack-url",
            "https://hooks.slack.com/services/T/B/x",
            "--webhook-url",
            "http://127.0.0.1:9/hook",
        ],
    );
    assert_eq!(both.code, Some(2), "{both:?}");
    assert!(
        both.stderr.contains("--slack-url") && both.stderr.contains("--webhook-url"),
        "{both:?}"
    );
    let unsigned = sluice(
        &server,
        &[
            "alert",
            "set",
            "both",
            "--signing-secret-env",
            "HOOK_SECRET",
        ],
    );
    assert_eq!(unsigned.code, Some(2), "{unsigned:?}");
    assert!(unsigned.stderr.contains("--webhook-url"), "{unsigned:?}");
    let refused = sluice(&server, &["alert", "set", "both", "--no-dead-letters"]);
    assert_eq!(refused.code, Some(4), "{refused:?}");
    assert!(
        refused.stderr.contains("invalid_field") && refused.stderr.contains("dead_letters"),
        "{refused:?}"
    );
    server
        .get("/v1/alerts/both")
        .await
        .error(404, "alert_not_found");
}
