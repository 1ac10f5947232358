//! The schedules page: each schedule with its queue, its timing and its state, refreshed while
//! open, and paused or resumed with a click. A child of `browser.rs`: it uses that file's
//! server, browser and API helpers.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Api, Browser, Server, Tools, UI_TIMEOUT};

/// `PUT /v1/schedules/{name}`.
async fn define(api: &Api, name: &str, spec: Value) -> Value {
    api.send(
        api.http
            .put(format!("{}/v1/schedules/{name}", api.url))
            .json(&spec),
    )
    .await
}

/// Waits until `GET /v1/schedules/{name}` says `paused`.
async fn wait_paused(api: &Api, name: &str, paused: bool) {
    let deadline = Instant::now() + UI_TIMEOUT;
    loop {
        let shown = api.get(&format!("/v1/schedules/{name}")).await;
        if shown["paused"] == paused {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the server never said paused = {paused}: {shown}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_schedules_page_lists_schedules_and_pauses_one_with_a_click() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    api.create_queue("reports").await;

    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/schedules", server.url))
        .await;
    browser
        .wait_text_contains("main .empty", "No schedules", "the empty state")
        .await;
    assert!(
        browser
            .exists(r#"nav a[data-nav="schedules"].active"#)
            .await,
        "the nav shows the page"
    );

    // Defined while the page is open: the next poll shows them.
    define(
        &api,
        "nightly-report",
        json!({
            "queue": "reports", "cron": "30 2 * * *", "timezone": "Europe/Berlin",
            "message": {"body": {"report": "nightly"}}, "paused": true,
        }),
    )
    .await;
    define(
        &api,
        "heartbeat",
        json!({"queue": "reports", "every_ms": 60_000, "message": {"body": "tick"}}),
    )
    .await;
    // A schedule whose queue is gone fails its runs, and says why.
    api.create_queue("gone").await;
    define(
        &api,
        "orphan",
        json!({"queue": "gone", "every_ms": 1000, "message": {"body": "lost"}}),
    )
    .await;
    api.send(api.http.delete(format!("{}/v1/queues/gone", server.url)))
        .await;

    let nightly = r#"tr[data-row="nightly-report"]"#;
    let heartbeat = r#"tr[data-row="heartbeat"]"#;
    let orphan = r#"tr[data-row="orphan"]"#;
    browser
        .wait_text(
            &format!(r#"{nightly} [data-field="name"]"#),
            "nightly-report",
        )
        .await;
    browser
        .wait_text(
            &format!(r#"{nightly} [data-field="when"]"#),
            "30 2 * * * (Europe/Berlin)",
        )
        .await;
    browser
        .wait_text(&format!(r#"{nightly} [data-field="state"]"#), "paused")
        .await;
    browser
        .wait_text(&format!(r#"{nightly} [data-field="next"]"#), "–")
        .await;
    browser
        .wait_text(&format!(r#"{nightly} [data-field="last"]"#), "never")
        .await;
    browser
        .wait_text(&format!(r#"{nightly} [data-field="runs"]"#), "0")
        .await;
    browser
        .wait_text(
            &format!(r#"{nightly} button[data-action="resume"]"#),
            "Resume",
        )
        .await;

    browser
        .wait_text(&format!(r#"{heartbeat} [data-field="name"]"#), "heartbeat")
        .await;
    browser
        .wait_text(&format!(r#"{heartbeat} [data-field="when"]"#), "every 1m")
        .await;
    browser
        .wait_text(&format!(r#"{heartbeat} [data-field="state"]"#), "active")
        .await;
    browser
        .wait_text_contains(
            &format!(r#"{heartbeat} [data-field="next"]"#),
            "in ",
            "the next run, from now",
        )
        .await;
    assert_eq!(
        browser
            .attribute_values(&format!(r#"{heartbeat} a[data-field="queue"]"#), "href")
            .await,
        ["#/queue/reports"],
        "the queue links to its page"
    );

    browser
        .wait_text(&format!(r#"{orphan} [data-field="state"]"#), "failing")
        .await;
    browser
        .wait_text_contains(
            &format!(r#"{orphan} [data-field="error"]"#),
            "gone",
            "the last error names the queue",
        )
        .await;

    // Pause the active one: the server says so, and the row does.
    browser
        .click(&format!(r#"{heartbeat} button[data-action="pause"]"#))
        .await;
    wait_paused(&api, "heartbeat", true).await;
    browser
        .wait_text(&format!(r#"{heartbeat} [data-field="state"]"#), "paused")
        .await;
    browser
        .wait_text(
            &format!(r#"{heartbeat} button[data-action="resume"]"#),
            "Resume",
        )
        .await;
    browser
        .wait_text(&format!(r#"{heartbeat} [data-field="next"]"#), "–")
        .await;
    let shown = api.get("/v1/schedules/nightly-report").await;
    assert_eq!(shown["paused"], true, "the other one is untouched: {shown}");

    // And resume it.
    browser
        .click(&format!(r#"{heartbeat} button[data-action="resume"]"#))
        .await;
    wait_paused(&api, "heartbeat", false).await;
    browser
        .wait_text(&format!(r#"{heartbeat} [data-field="state"]"#), "active")
        .await;
    browser.close().await;
}
