//! The alerts page: each alert with what it watches, what it notifies of, where it sends (never
//! a secret of the destination's URL), what it sent, the queues firing now and the delivery
//! through its queue, refreshed while open. A child of `browser.rs`: it uses that file's
//! server, browser and API helpers.

use fantoccini::Locator;
use serde_json::{Value, json};

use super::{Api, Browser, Server, Tools};

/// The secret path of a Slack incoming webhook: never shown.
const SLACK_SECRET: &str = "slack-secret-path-0123456789";
/// A capability in a webhook's query: never shown.
const HOOK_SECRET: &str = "hook-secret-token-0123456789";

/// `PUT /v1/alerts/{name}`.
async fn define(api: &Api, name: &str, spec: Value) -> Value {
    api.send(
        api.http
            .put(format!("{}/v1/alerts/{name}", api.url))
            .json(&spec),
    )
    .await
}

/// The number the element matching `css` shows, if it is one.
async fn number(browser: &Browser, css: &str) -> Option<u64> {
    let element = browser.client.find(Locator::Css(css)).await.ok()?;
    element
        .text()
        .await
        .ok()?
        .trim()
        .replace(',', "")
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_alerts_page_shows_notifications_firing_queues_and_delivery_without_secrets() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/ui/#/alerts", server.url)).await;
    browser
        .wait_text_contains("main .empty", "No alerts", "the empty state")
        .await;
    for (needle, what) in [
        ("PUT /v1/alerts/{name}", "the empty state names the API"),
        ("[alerts.<name>]", "the empty state names the config file"),
        ("sluice alert set", "the empty state names the CLI"),
        ("docs/alerts.md", "the empty state names the docs"),
    ] {
        browser
            .wait_text_contains("main .empty", needle, what)
            .await;
    }
    assert!(
        browser.exists(r#"nav a[data-nav="alerts"].active"#).await,
        "the nav shows the page"
    );

    // Defined while the page is open: the next poll shows them.
    api.send(
        api.http
            .put(format!("{}/v1/queues/jobs", server.url))
            .json(&json!({"max_attempts": 1})),
    )
    .await;
    // No destination: the notifications wait in the alert's queue.
    define(&api, "ops", json!({"queues": ["jobs"], "window_ms": 1000})).await;
    define(
        &api,
        "backlog",
        json!({"queues": ["jobs"], "dead_letters": false, "depth_above": 0, "window_ms": 1000}),
    )
    .await;
    // Destinations with secrets in their URLs, watching a queue that never has anything to
    // say (so nothing is ever sent to them).
    define(
        &api,
        "chat",
        json!({
            "queues": ["quiet.*"], "oldest_ready_age_above_ms": 90_000,
            "destination": {"slack_url": format!("http://127.0.0.1:9/services/T0/B0/{SLACK_SECRET}")},
        }),
    )
    .await;
    define(
        &api,
        "pager",
        json!({
            "queues": ["quiet"],
            "destination": {"webhook_url": format!("http://127.0.0.1:9/hook?token={HOOK_SECRET}")},
        }),
    )
    .await;

    // One dead letter (one attempt allowed) and one message ready: depth 1 > 0.
    api.enqueue("jobs", json!({"body": {"n": 1}})).await;
    let received = api.receive("jobs", 1).await;
    assert_eq!(received.len(), 1);
    let nack = api
        .post(
            "/v1/queues/jobs/nack",
            json!({"receipt": received[0]["receipt"], "error": "boom"}),
        )
        .await;
    assert_eq!(nack["state"], "dead", "{nack}");
    api.enqueue("jobs", json!({"body": {"n": 2}})).await;

    let ops = r#"tr[data-row="ops"]"#;
    let backlog = r#"tr[data-row="backlog"]"#;
    let chat = r#"tr[data-row="chat"]"#;
    let pager = r#"tr[data-row="pager"]"#;
    browser
        .wait_text(&format!(r#"{ops} [data-field="name"]"#), "ops")
        .await;
    browser
        .wait_text(&format!(r#"{backlog} [data-field="name"]"#), "backlog")
        .await;
    assert_eq!(
        browser
            .attribute_values("main tr[data-row]", "data-row")
            .await,
        ["backlog", "chat", "ops", "pager"],
        "one row per alert, by name"
    );

    // What each watches and notifies of, and its window.
    assert_eq!(
        browser
            .attribute_values(&format!(r#"{ops} [data-field="watches"] a"#), "href")
            .await,
        ["#/queue/jobs"],
        "a watched queue links to its page"
    );
    browser
        .wait_text(&format!(r#"{ops} [data-field="on"]"#), "dead letters")
        .await;
    browser
        .wait_text(&format!(r#"{ops} [data-field="window"]"#), "1s")
        .await;
    browser
        .wait_text(&format!(r#"{backlog} [data-field="on"]"#), "depth > 0")
        .await;
    browser
        .wait_text(&format!(r#"{chat} [data-field="watches"]"#), "quiet.*")
        .await;
    browser
        .wait_text(
            &format!(r#"{chat} [data-field="on"]"#),
            "dead letters\noldest ready > 1m 30s",
        )
        .await;
    browser
        .wait_text(&format!(r#"{chat} [data-field="window"]"#), "5m")
        .await;

    // Where each sends: Slack by name only, a webhook by its host, else the alert's queue.
    browser
        .wait_text(&format!(r#"{ops} [data-field="destination"]"#), "its queue")
        .await;
    browser
        .wait_text(&format!(r#"{chat} [data-field="destination"]"#), "Slack")
        .await;
    browser
        .wait_text(
            &format!(r#"{pager} [data-field="destination"]"#),
            "webhook 127.0.0.1:9",
        )
        .await;

    // The pass runs every 500 ms and counts a dead letter once it is a second old: the dead
    // letter makes one notification of "ops", which waits in its queue; "backlog" fires for
    // "jobs".
    browser
        .wait_text(&format!(r#"{ops} [data-field="dead_letters"]"#), "1")
        .await;
    browser
        .wait_text(
            &format!(r#"{ops} [data-field="dead_letters_counted"]"#),
            "1",
        )
        .await;
    browser
        .wait_text_contains(
            &format!(r#"{ops} [data-field="sent"]"#),
            "1 dead-letter notification (1 dead letter counted)",
            "the notification and what it counted",
        )
        .await;
    browser
        .wait_text_contains(
            &format!(r#"{ops} [data-field="last_sent"]"#),
            "ago",
            "when it was sent",
        )
        .await;
    browser
        .wait_text(&format!(r#"{ops} [data-field="waiting"]"#), "1")
        .await;
    browser
        .wait_text(&format!(r#"{ops} [data-field="firing"]"#), "none")
        .await;

    browser
        .wait_text(&format!(r#"{backlog} [data-field="firing"]"#), "jobs")
        .await;
    assert_eq!(
        browser
            .attribute_values(&format!(r#"{backlog} a[data-firing]"#), "href")
            .await,
        ["#/queue/jobs"],
        "a firing queue links to its page"
    );
    // A threshold notifies again at each window while the queue stays over it.
    let thresholds = format!(r#"{backlog} [data-field="thresholds"]"#);
    browser
        .wait_until("a threshold notification is counted", || async {
            number(&browser, &thresholds).await.is_some_and(|n| n >= 1)
        })
        .await;
    browser
        .wait_text(&format!(r#"{chat} [data-field="last_sent"]"#), "never")
        .await;

    // The delivery queue and its dead letters are links.
    assert_eq!(
        browser
            .attribute_values(&format!(r#"{ops} a[data-field="queue"]"#), "href")
            .await,
        ["#/queue/sluice.alerts.ops"]
    );
    browser
        .wait_text(
            &format!(r#"{ops} a[data-field="queue"]"#),
            "sluice.alerts.ops",
        )
        .await;
    assert_eq!(
        browser
            .attribute_values(&format!(r#"{ops} a[data-field="dlq"]"#), "href")
            .await,
        ["#/dlq/sluice.alerts.ops"]
    );

    // No secret of a destination anywhere on the page.
    let page = browser.client.source().await.unwrap();
    for secret in [SLACK_SECRET, HOOK_SECRET, "/services/", "token="] {
        assert!(!page.contains(secret), "the page shows {secret:?}");
    }

    // A click on the delivery queue opens its page, with the notification waiting.
    browser
        .click(&format!(r#"{ops} a[data-field="queue"]"#))
        .await;
    browser
        .wait_text_contains("h1", "sluice.alerts.ops", "the alert queue's page")
        .await;
    browser
        .wait_text_contains(".tabs", "Ready (1)", "the notification waits there")
        .await;
    browser.close().await;
}
