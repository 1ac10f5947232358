//! The dashboard in a real browser: headless Chromium driven over WebDriver (chromedriver)
//! against the real `sluice` binary.
//!
//! Needs the Debian packages `chromium` and `chromium-driver` (`CHROMIUM` and `CHROMEDRIVER`
//! override the paths). Without them each test prints "skipped: chromium not installed" and
//! passes, except under CI (the `CI` variable set), where it fails.
//!
//! Each test starts its own server (optionally with a config file: [`Server::start_with_config`])
//! and its own chromedriver on a free loopback port; both are stopped on drop.

use std::time::{Duration, Instant};

use fantoccini::Locator;
use serde_json::{Value, json};
use sluice_testkit::server::Launch;

/// The charts' history, and the queue page's header, tabs and previews.
#[path = "browser/driver.rs"]
mod driver;
use driver::{Browser, Tools, UI_TIMEOUT};

#[path = "browser/charts.rs"]
mod charts;

/// The schedules page.
#[path = "browser/schedules.rs"]
mod schedules;

/// The topics page.
#[path = "browser/topics.rs"]
mod topics;

/// The alerts page.
#[path = "browser/alerts.rs"]
mod alerts;

/// The queue page's acked tab and kept acked messages.
#[path = "browser/kept.rs"]
mod kept;

/// The overview's stuck queues, first.
#[path = "browser/stuck.rs"]
mod stuck;

/// The message page: a push's delivery log and a line per failed attempt (its server and push
/// destination from the `it` suite's support).
#[path = "browser/message_page.rs"]
mod message_page;
#[path = "it/support/mod.rs"]
mod support;

// ---------- the tests ----------

#[tokio::test(flavor = "multi_thread")]
async fn the_overview_lists_queues_with_their_depths_on_a_narrow_screen() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    api.create_queue("orders").await;
    api.create_queue("emails").await;
    for n in 0..3 {
        api.enqueue("orders", json!({"body": {"n": n}})).await;
    }
    api.enqueue("emails", json!({"body": "later", "delay_ms": 3_600_000}))
        .await;
    let received = api.receive("orders", 1).await;
    assert_eq!(received.len(), 1);

    let browser = Browser::start(&tools).await;
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.goto(&format!("{}/", server.url)).await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/ui/", "/ goes to the dashboard");

    browser
        .wait_text(r#"tr[data-row="orders"] [data-field="ready"]"#, "2")
        .await;
    browser
        .wait_text(r#"tr[data-row="orders"] [data-field="in_flight"]"#, "1")
        .await;
    browser
        .wait_text(r#"tr[data-row="orders"] [data-field="delayed"]"#, "0")
        .await;
    browser
        .wait_text(r#"tr[data-row="emails"] [data-field="delayed"]"#, "1")
        .await;
    browser
        .wait_text(r#"tr[data-row="emails"] [data-field="ready"]"#, "0")
        .await;
    browser
        .wait_text(r#"tr[data-row="orders"] [data-field="dlq"]"#, "0")
        .await;
    assert!(
        browser.exists(r#"tr[data-row="orders.dlq"]"#).await,
        "the dead-letter queue is listed too"
    );
    assert!(
        browser.exists("svg.chart polyline").await,
        "the live charts are drawn"
    );

    // The queue page lists the message in flight with its lease.
    browser.click(r#"a[data-queue="orders"]"#).await;
    browser.click(r#".tabs a[data-state="in_flight"]"#).await;
    let id = received[0]["message_id"].as_str().unwrap();
    browser
        .wait_text_contains(
            "main table",
            &id[..8],
            "the in-flight message is listed on the queue page",
        )
        .await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_letter_is_previewed_and_replayed_with_a_click_and_delivered_again() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    api.create_queue("jobs").await;
    api.enqueue(
        "jobs",
        json!({"body": {"order": 42, "sku": "ABC"}, "headers": {"x-source": "test"}}),
    )
    .await;
    let received = api.receive("jobs", 1).await;
    let dead_id = received[0]["message_id"].as_str().unwrap().to_owned();
    let nack = api
        .post(
            "/v1/queues/jobs/nack",
            json!({"receipt": received[0]["receipt"], "error": "boom: payment refused", "permanent": true}),
        )
        .await;
    assert_eq!(nack["state"], "dead", "{nack}");

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/ui/#/dlq/jobs", server.url)).await;
    let row = format!(r#"tr[data-id="{dead_id}"]"#);
    browser
        .wait_text_contains(&row, "boom: payment refused", "the error is shown")
        .await;
    browser
        .click(&format!(r#"{row} button[data-action="preview"]"#))
        .await;
    browser
        .wait_text_contains(
            r#"pre[data-field="body"]"#,
            "\"order\": 42",
            "the body preview",
        )
        .await;
    browser
        .wait_text_contains(r#"pre[data-field="headers"]"#, "x-source", "the headers")
        .await;

    browser
        .click(&format!(r#"{row} button[data-action="replay"]"#))
        .await;
    browser
        .wait_until("the replayed row leaves the list", || async {
            !browser.exists(&row).await
        })
        .await;

    let again = api.receive_waiting("jobs", 1).await;
    assert_eq!(again.len(), 1, "the replayed message is delivered again");
    assert_eq!(again[0]["body"], json!({"order": 42, "sku": "ABC"}));
    assert_eq!(again[0]["attempts"], 1, "{}", again[0]);
    assert_ne!(
        again[0]["message_id"],
        json!(dead_id),
        "a replay is a new message"
    );
    let record = api.get(&format!("/v1/queues/jobs/dlq/{dead_id}")).await;
    assert_eq!(record["state"], "replayed", "{record}");
    assert_eq!(record["replayed_as"], again[0]["message_id"], "{record}");

    // The message page of the dead letter tells its story.
    browser
        .goto(&format!("{}/ui/#/message/jobs/{dead_id}", server.url))
        .await;
    browser
        .wait_text_contains("ol.timeline", "Dead-lettered into jobs.dlq", "timeline")
        .await;
    browser
        .wait_text_contains("ol.timeline", "Replayed", "timeline")
        .await;

    // Replay all that match: the count comes first (dry run), then the replay.
    for n in 0..2 {
        api.enqueue("jobs", json!({"body": {"bulk": n}})).await;
    }
    for message in api.receive("jobs", 2).await {
        api.post(
            "/v1/queues/jobs/nack",
            json!({"receipt": message["receipt"], "error": "timeout talking to bank", "permanent": true}),
        )
        .await;
    }
    browser
        .goto(&format!("{}/ui/#/dlq/jobs?error=bank", server.url))
        .await;
    browser.click(r#"button[data-action="replay-all"]"#).await;
    browser
        .wait_text_contains(
            r#"[data-field="matched"]"#,
            "2 dead letters match",
            "the dry run's count",
        )
        .await;
    browser
        .click(r#"button[data-action="confirm-replay-all"]"#)
        .await;
    let bulk = api.receive_waiting("jobs", 2).await;
    assert_eq!(bulk.len(), 2, "both were replayed: {bulk:?}");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_purge_asks_for_confirmation_first() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    api.create_queue("bulk").await;
    for n in 0..5 {
        api.enqueue("bulk", json!({"body": n})).await;
    }

    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/queue/bulk", server.url))
        .await;
    browser
        .wait_text_contains(".tabs", "Ready (5)", "the ready count")
        .await;

    browser.click(r#"button[data-action="purge"]"#).await;
    let question = browser.alert_text().await;
    assert!(question.contains("Purge queue \"bulk\""), "{question}");
    assert!(
        question.contains('5'),
        "the count is in the question: {question}"
    );
    browser.client.dismiss_alert().await.unwrap();
    // Give a purge that should not happen the time to happen.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        api.stats("bulk").await["ready"],
        5,
        "dismissed: nothing purged"
    );

    browser.click(r#"button[data-action="purge"]"#).await;
    browser.alert_text().await;
    browser.client.accept_alert().await.unwrap();
    let deadline = Instant::now() + UI_TIMEOUT;
    loop {
        let stats = api.stats("bulk").await;
        if stats["ready"] == 0 {
            assert_eq!(stats["counters"]["purged"], 5, "{stats}");
            break;
        }
        assert!(Instant::now() < deadline, "not purged: {stats}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser
        .wait_text_contains(".tabs", "Ready (0)", "the page shows the purge")
        .await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_is_found_by_its_idempotency_key_with_its_body() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    api.create_queue("payments").await;
    let out = api
        .enqueue(
            "payments",
            json!({"id": "payment-77", "body": {"amount": 1250, "currency": "EUR"}}),
        )
        .await;
    let id = out["message_id"].as_str().unwrap().to_owned();

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/ui/", server.url)).await;
    browser
        .wait_until("the search lists the queue", || async {
            browser
                .exists(r#"#search-queue option[value="payments"]"#)
                .await
        })
        .await;
    browser
        .client
        .execute(
            "document.getElementById('search-queue').value = 'payments'",
            vec![],
        )
        .await
        .unwrap();
    let input = browser
        .client
        .find(Locator::Css("#search-text"))
        .await
        .unwrap();
    input.send_keys("payment-77").await.unwrap();
    browser.click(r#"#search button[type="submit"]"#).await;
    browser.wait_text(r#"[data-field="state"]"#, "ready").await;
    browser
        .wait_text_contains("h1", &id, "the message page of the key's message")
        .await;
    browser
        .wait_text_contains(
            r#"pre[data-field="body"]"#,
            "\"currency\": \"EUR\"",
            "its body",
        )
        .await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_tokens_the_dashboard_needs_a_login_and_refuses_without() {
    // Proves access control in the browser: with a token configured the dashboard shows no
    // data and sends the visitor to the login form; a wrong token is refused there; the right
    // one signs in, and the overview then shows the queue's depth; signing out ends it.
    let Some(tools) = Tools::find() else { return };
    const TOKEN: &str = "dashboard-admin-token-0123456789";
    let server = Server::start_with(None, &[("SLUICE_ADMIN_TOKEN", TOKEN)]);
    let api = Api::with_token(&server.url, TOKEN);
    api.create_queue("orders").await;
    for n in 0..2 {
        api.enqueue("orders", json!({"body": {"n": n}})).await;
    }
    let anonymous = reqwest::get(format!("{}/v1/queues", server.url))
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401, "the API refuses without a token");

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/ui/", server.url)).await;
    browser
        .wait_for_path(
            "/ui/login",
            "the dashboard sends an anonymous visitor to the login form",
        )
        .await;
    assert!(!browser.exists(r#"tr[data-row="orders"]"#).await);

    let field = browser.client.find(Locator::Css("#token")).await.unwrap();
    field.send_keys("not-the-right-token-at-all").await.unwrap();
    browser.click("#sign-in").await;
    browser
        .wait_text_contains("#login-error", "not valid", "a wrong token is refused")
        .await;

    let field = browser.client.find(Locator::Css("#token")).await.unwrap();
    field.clear().await.unwrap();
    field.send_keys(TOKEN).await.unwrap();
    browser.click("#sign-in").await;
    browser
        .wait_text(r#"tr[data-row="orders"] [data-field="ready"]"#, "2")
        .await;

    // Signing out ends the session: the dashboard is back at the login form.
    browser.click("#sign-out button").await;
    browser
        .wait_for_path("/ui/login", "signing out leads to the login form")
        .await;
    browser.goto(&format!("{}/ui/", server.url)).await;
    browser
        .wait_for_path(
            "/ui/login",
            "after signing out the dashboard asks for a login again",
        )
        .await;
    browser.close().await;
}

// ---------- the API ----------

struct Api {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Api {
    fn new(url: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            token: None,
        }
    }

    /// Calls with `Authorization: Bearer <token>`.
    fn with_token(url: &str, token: &str) -> Self {
        Self {
            token: Some(token.to_owned()),
            ..Self::new(url)
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Value {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.expect("request");
        let status = response.status();
        let body: Value = response.json().await.expect("JSON answer");
        assert!(status.is_success(), "{status}: {body}");
        body
    }

    async fn get(&self, path: &str) -> Value {
        self.send(self.http.get(format!("{}{path}", self.url)))
            .await
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.send(self.http.post(format!("{}{path}", self.url)).json(&body))
            .await
    }

    async fn create_queue(&self, name: &str) {
        self.send(
            self.http
                .put(format!("{}/v1/queues/{name}", self.url))
                .json(&json!({})),
        )
        .await;
    }

    async fn enqueue(&self, queue: &str, message: Value) -> Value {
        self.post(&format!("/v1/queues/{queue}/messages"), message)
            .await
    }

    async fn receive(&self, queue: &str, max: usize) -> Vec<Value> {
        let out = self
            .post(&format!("/v1/queues/{queue}/receive"), json!({"max": max}))
            .await;
        out["messages"].as_array().cloned().unwrap_or_default()
    }

    /// Receives until `count` messages came or the time is up.
    async fn receive_waiting(&self, queue: &str, count: usize) -> Vec<Value> {
        let mut messages = Vec::new();
        let deadline = Instant::now() + UI_TIMEOUT;
        while messages.len() < count && Instant::now() < deadline {
            let out = self
                .post(
                    &format!("/v1/queues/{queue}/receive"),
                    json!({"max": count - messages.len(), "wait_ms": 1000}),
                )
                .await;
            messages.extend(out["messages"].as_array().cloned().unwrap_or_default());
        }
        messages
    }

    async fn stats(&self, queue: &str) -> Value {
        self.get(&format!("/v1/queues/{queue}/stats")).await
    }
}

// ---------- the server ----------

/// A `sluice serve` on a free port with a temporary data directory (the test kit's
/// [`Launch`]); killed on drop, its log printed when the test fails.
struct Server {
    url: String,
    _server: sluice_testkit::server::Server,
}

impl Server {
    fn start() -> Self {
        Self::start_with_config(None)
    }

    /// Starts the server, with `config` (TOML) as its config file when given.
    fn start_with_config(config: Option<&str>) -> Self {
        Self::start_with(config, &[])
    }

    /// Starts the server with a config file (when given) and environment variables (such as
    /// `SLUICE_ADMIN_TOKEN`).
    fn start_with(config: Option<&str>, env: &[(&str, &str)]) -> Self {
        let mut launch = Launch::new(env!("CARGO_BIN_EXE_sluice"));
        if let Some(config) = config {
            launch = launch.config(config);
        }
        for (name, value) in env {
            launch = launch.env(name, value);
        }
        let server = launch.start_blocking();
        Self {
            url: server.url().to_owned(),
            _server: server,
        }
    }
}
