//! Schedules on the test clock: one message per run, across restarts, SIGKILL and clock jumps
//! either way; the missed-run policies; pause; DST in a zone that has it; refusals; the config
//! file and the CLI.

use serde_json::{Value, json};

use crate::support::{TestServer, parse_time};

/// 2026-03-28T12:00:00Z: a Saturday, the day before Europe's spring-forward change.
const START_MS: i64 = 1_774_699_200_000;

async fn clocked_server(start_ms: i64) -> TestServer {
    TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &start_ms.to_string())
        .start()
        .await
}

/// Every message in `queue`, received and acked: its scheduled-at header, oldest first.
async fn take_runs(server: &TestServer, queue: &str) -> Vec<String> {
    let mut runs = Vec::new();
    loop {
        let messages = server.receive(queue, json!({"max": 100})).await;
        if messages.is_empty() {
            break;
        }
        for message in &messages {
            assert_eq!(message["headers"]["sluice-schedule"], "tick", "{message}");
            runs.push(
                message["headers"]["sluice-scheduled-at"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
            server
                .ack(queue, message["receipt"].as_str().unwrap())
                .await;
        }
    }
    runs.sort();
    runs
}

async fn schedule(server: &TestServer, name: &str) -> Value {
    server.get(&format!("/v1/schedules/{name}")).await.ok()
}

fn at(ms: i64) -> String {
    crate::support::format_time(ms)
}

fn times(runs: &[String]) -> Vec<i64> {
    runs.iter().map(|t| parse_time(&json!(t))).collect()
}

#[tokio::test]
async fn each_run_is_enqueued_once_across_sigkill_restarts_and_clock_jumps() {
    // Proves: an every-minute schedule enqueues one message per run with the run's idempotency
    // key and headers; after a SIGKILL the restarted server (its test clock starting over, a
    // jump back of minutes) makes no run twice and skips none silently: a jump forward of ten
    // minutes under `skip` makes the runs within grace and counts the eight others skipped.
    let mut server = clocked_server(START_MS).await;
    server.put_queue("q", json!({})).await;
    let put = server
        .put(
            "/v1/schedules/tick",
            json!({"queue": "q", "every_ms": 60_000, "message": {"body": {"job": "sweep"}}}),
        )
        .await
        .ok();
    assert_eq!(put["created"], true, "{put}");
    assert_eq!(
        put["schedule"]["next_run_at"],
        at(START_MS + 60_000),
        "{put}"
    );
    // Issue 31: it showed its creation time as its last run.
    assert_eq!(
        put["schedule"]["last_run_at"],
        Value::Null,
        "no run yet: {put}"
    );
    assert!(
        take_runs(&server, "q").await.is_empty(),
        "nothing before its time"
    );

    server.advance_clock(59_999).await;
    assert!(take_runs(&server, "q").await.is_empty(), "a run 1 ms early");
    server.advance_clock(1).await;
    let first = server.receive("q", json!({"max": 10})).await;
    assert_eq!(first.len(), 1, "{first:?}");
    let status = server
        .get(&format!(
            "/v1/queues/q/messages/{}",
            first[0]["message_id"].as_str().unwrap()
        ))
        .await
        .ok();
    assert_eq!(status["id"], format!("schedule:tick:{}", START_MS + 60_000));
    assert_eq!(first[0]["body"], json!({"job": "sweep"}));
    server.ack("q", first[0]["receipt"].as_str().unwrap()).await;
    let shown = schedule(&server, "tick").await;
    assert_eq!(shown["runs"], 1, "{shown}");
    assert_eq!(shown["last_run_at"], at(START_MS + 60_000), "{shown}");
    assert_eq!(shown["last_message_id"], first[0]["message_id"], "{shown}");

    // SIGKILL; the test clock starts again at START_MS: two minutes behind the last run.
    server.advance_clock(60_000).await;
    assert_eq!(take_runs(&server, "q").await, [at(START_MS + 120_000)]);
    server.kill().await;
    server.restart().await;
    server.advance_clock(120_000).await;
    assert!(
        take_runs(&server, "q").await.is_empty(),
        "runs already made were made again after the clock went back"
    );
    server.advance_clock(60_000).await;
    assert_eq!(take_runs(&server, "q").await, [at(START_MS + 180_000)]);

    // Ten minutes at once: the runs within grace_ms (60 s) are made, eight are skipped, counted.
    server.advance_clock(600_000).await;
    assert_eq!(
        take_runs(&server, "q").await,
        [at(START_MS + 720_000), at(START_MS + 780_000)]
    );
    let shown = schedule(&server, "tick").await;
    assert_eq!(
        (shown["runs"].as_u64(), shown["skipped_runs"].as_u64()),
        (Some(5), Some(8)),
        "{shown}"
    );
    assert!(server.log_tail(200).contains("a schedule missed runs"));
}

#[tokio::test]
async fn a_run_made_again_after_a_crash_is_the_same_message() {
    // Proves: a run whose message was stored but whose progress was not (as after a SIGKILL
    // between the two) is made again as a duplicate of the first message, not a second one.
    let mut server = clocked_server(START_MS).await;
    server.put_queue("q", json!({})).await;
    server
        .put(
            "/v1/schedules/tick",
            json!({"queue": "q", "every_ms": 60_000, "message": {"body": 1}}),
        )
        .await
        .ok();
    // The run's message, as the pass would have stored it, without the pass's record.
    let run = START_MS + 60_000;
    let sent = server
        .send(
            "q",
            json!({"id": format!("schedule:tick:{run}"), "body": 1}),
        )
        .await;
    server.kill().await;
    server.set_env("SLUICE_TEST_CLOCK_START_MS", Some(&run.to_string()));
    server.restart().await;
    server.advance_clock(0).await;
    let messages = server.receive("q", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    let shown = schedule(&server, "tick").await;
    assert_eq!(shown["last_message_id"], sent["message_id"], "{shown}");
    assert_eq!(shown["last_run_at"], at(run), "{shown}");
}

#[tokio::test]
async fn missed_runs_follow_run_all_and_run_once() {
    // Proves: after 10 missed minutes, run_all with missed_max 3 makes the 3 latest runs (oldest
    // first) and counts 7 skipped; run_once makes only the latest and counts 9.
    let server = clocked_server(START_MS).await;
    server.put_queue("all", json!({})).await;
    server.put_queue("once", json!({})).await;
    for (name, queue, missed) in [
        ("tick", "all", json!({"missed": "run_all", "missed_max": 3})),
        ("tock", "once", json!({"missed": "run_once"})),
    ] {
        let mut spec = json!({"queue": queue, "every_ms": 60_000, "message": {"body": name}});
        spec.as_object_mut()
            .unwrap()
            .extend(missed.as_object().unwrap().clone());
        server
            .put(&format!("/v1/schedules/{name}"), spec)
            .await
            .ok();
    }
    server.advance_clock(600_000).await;
    assert_eq!(
        times(&take_runs(&server, "all").await),
        [START_MS + 480_000, START_MS + 540_000, START_MS + 600_000]
    );
    let messages = server.receive("once", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0]["headers"]["sluice-scheduled-at"],
        at(START_MS + 600_000)
    );
    assert_eq!(schedule(&server, "tick").await["skipped_runs"], 7);
    assert_eq!(schedule(&server, "tock").await["skipped_runs"], 9);
}

#[tokio::test]
async fn a_paused_schedule_makes_no_runs_and_misses_none() {
    // Proves: runs passed while paused are neither made nor counted as skipped; after resume the
    // next run is made; pause and resume answer the schedule, and survive a restart.
    let mut server = clocked_server(START_MS).await;
    server.put_queue("q", json!({})).await;
    server
        .put(
            "/v1/schedules/tick",
            json!({"queue": "q", "every_ms": 60_000, "message": {"body": 1}}),
        )
        .await
        .ok();
    let paused = server.post_empty("/v1/schedules/tick/pause").await.ok();
    assert_eq!(paused["paused"], true, "{paused}");
    assert!(paused.get("next_run_at").is_none(), "{paused}");
    server.advance_clock(300_000).await;
    server.set_env(
        "SLUICE_TEST_CLOCK_START_MS",
        Some(&(START_MS + 300_000).to_string()),
    );
    server.restart().await;
    assert_eq!(schedule(&server, "tick").await["paused"], true);
    assert!(take_runs(&server, "q").await.is_empty());
    let resumed = server.post_empty("/v1/schedules/tick/resume").await.ok();
    assert_eq!(resumed["paused"], false, "{resumed}");
    server.advance_clock(60_000).await;
    assert_eq!(take_runs(&server, "q").await, [at(START_MS + 360_000)]);
    assert_eq!(schedule(&server, "tick").await["skipped_runs"], 0);
}

#[tokio::test]
async fn cron_runs_follow_dst_in_their_time_zone() {
    // Proves, in Europe/Berlin: a daily 02:30 run is made at 03:00 CEST on the day spring
    // forward skips 02:30, and once (not twice) on the day fall back repeats it; an hourly
    // pattern is made every hour of absolute time.
    let spring = clocked_server(START_MS).await;
    spring.put_queue("q", json!({})).await;
    spring
        .put(
            "/v1/schedules/tick",
            json!({"queue": "q", "cron": "30 2 * * *", "timezone": "Europe/Berlin", "missed": "run_once", "message": {"body": "daily"}}),
        )
        .await
        .ok();
    for _ in 0..48 {
        spring.advance_clock(3_600_000).await;
    }
    assert_eq!(
        take_runs(&spring, "q").await,
        ["2026-03-29T01:00:00.000Z", "2026-03-30T00:30:00.000Z"]
    );

    // 2026-10-24T12:00:00Z, the day before fall back.
    let autumn_start = 1_792_843_200_000;
    let autumn = clocked_server(autumn_start).await;
    autumn.put_queue("q", json!({})).await;
    autumn.put_queue("h", json!({})).await;
    autumn
        .put(
            "/v1/schedules/tick",
            json!({"queue": "q", "cron": "0 30 2 * * *", "timezone": "Europe/Berlin", "message": {"body": "daily"}}),
        )
        .await
        .ok();
    autumn
        .put(
            "/v1/schedules/hourly",
            json!({"queue": "h", "cron": "0 * * * *", "timezone": "Europe/Berlin", "message": {"body": "hourly"}}),
        )
        .await
        .ok();
    for _ in 0..(48 * 4) {
        autumn.advance_clock(900_000).await;
    }
    assert_eq!(
        take_runs(&autumn, "q").await,
        ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"]
    );
    let hourly = autumn.receive("h", json!({"max": 100})).await;
    assert_eq!(
        hourly.len(),
        48,
        "one run per hour of absolute time, the repeated one too"
    );
}

#[tokio::test]
async fn definitions_are_checked_with_the_field_named() {
    // Proves: a missing queue is 404, a bad pattern, zone or interval 422 naming the field, a
    // message the queue would refuse is refused now (413, 422), an unknown schedule 404
    // schedule_not_found; and a definition that is refused changes nothing.
    let server = clocked_server(START_MS).await;
    server
        .put_queue("q", json!({"max_message_bytes": 1024}))
        .await;
    let s = &server;
    let put = |spec: Value| async move { s.put("/v1/schedules/s", spec).await };
    let body = json!({"body": 1});
    put(json!({"queue": "nope", "every_ms": 60_000, "message": body}))
        .await
        .error(404, "queue_not_found");
    for (spec, field) in [
        (
            json!({"queue": "q", "cron": "61 * * * *", "message": body}),
            "cron:",
        ),
        (json!({"queue": "q", "message": body}), "cron:"),
        (
            json!({"queue": "q", "cron": "* * * * *", "timezone": "Mars/Base", "message": body}),
            "timezone:",
        ),
        (
            json!({"queue": "q", "every_ms": 10, "message": body}),
            "every_ms:",
        ),
        (
            json!({"queue": "q", "every_ms": 60_000, "message": {}}),
            "message.body:",
        ),
        (
            json!({"queue": "q", "every_ms": 60_000, "message": body, "missed_max": 5}),
            "missed_max:",
        ),
    ] {
        let error = put(spec.clone()).await.error(422, "invalid_field");
        assert!(
            error["message"].as_str().unwrap().starts_with(field),
            "{spec} → {error}"
        );
    }
    put(json!({"queue": "q", "every_ms": 60_000, "message": {"body": "x".repeat(2000)}}))
        .await
        .error(413, "too_large");
    server
        .get("/v1/schedules/s")
        .await
        .error(404, "schedule_not_found");
    server
        .delete("/v1/schedules/s")
        .await
        .error(404, "schedule_not_found");
    assert_eq!(
        server.get("/v1/schedules").await.ok(),
        json!({"schedules": []})
    );
}

#[tokio::test]
async fn the_config_file_and_the_cli_define_and_show_schedules() {
    // Proves: `[schedules.<name>]` in the config file is defined at start and makes runs;
    // `sluice schedule set/list/show/pause/resume/delete` do what they say.
    let server = TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &START_MS.to_string())
        .config(
            r#"
[queues.reports]

[schedules.nightly]
queue = "reports"
cron = "0 3 * * *"
timezone = "Europe/Berlin"
missed = "run_once"
message = { body = { report = "nightly" }, headers = { team = "ops" } }
"#,
        )
        .start()
        .await;
    let shown = schedule(&server, "nightly").await;
    assert_eq!(shown["next_run_at"], "2026-03-29T01:00:00.000Z", "{shown}");
    server.advance_clock(86_400_000).await;
    let messages = server.receive("reports", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["body"], json!({"report": "nightly"}));
    assert_eq!(messages[0]["headers"]["team"], "ops");

    let cli = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["--url", server.url()])
            .args(args)
            .output()
            .expect("run sluice");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "sluice {args:?}: {stderr}");
        stdout
    };
    let set = cli(&[
        "schedule",
        "set",
        "tick",
        r#"{"n": 1}"#,
        "--queue",
        "reports",
        "--every",
        "5m",
        "--header",
        "a=b",
        "--missed",
        "run_all",
        "--missed-max",
        "2",
    ]);
    assert!(set.contains("created schedule tick"), "{set}");
    let list = cli(&["schedule", "list"]);
    assert!(
        list.contains("nightly") && list.contains("every 5m"),
        "{list}"
    );
    let show: Value = serde_json::from_str(&cli(&["--json", "schedule", "show", "tick"])).unwrap();
    assert_eq!(show["spec"]["every_ms"], 300_000);
    assert_eq!(show["spec"]["missed"], "run_all");
    assert_eq!(show["spec"]["message"]["headers"]["a"], "b");
    assert!(cli(&["schedule", "pause", "tick"]).contains("paused schedule tick"));
    assert_eq!(schedule(&server, "tick").await["paused"], true);
    assert!(cli(&["schedule", "resume", "tick"]).contains("resumed schedule tick"));
    assert!(cli(&["schedule", "delete", "tick"]).contains("deleted schedule tick"));
    server
        .get("/v1/schedules/tick")
        .await
        .error(404, "schedule_not_found");
}
