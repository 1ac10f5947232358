//! The overview shows what is stuck first: queues with dead letters, paused, or over the
//! server's depth threshold are listed before the others, their rows marked and their reasons
//! shown, and a queue that is no longer stuck goes back among the others. A child of
//! `browser.rs`: it uses that file's server, browser and API helpers.

use serde_json::json;

use super::{Api, Browser, Server, Tools};

/// A depth threshold of three messages; the age threshold out of reach of the test.
const CONFIG: &str = "[dashboard]\nstuck_depth = 3\nstuck_age_ms = 3600000\n";

/// The overview's queue rows, top to bottom, leaving out the dead-letter queues.
async fn row_order(browser: &Browser) -> Vec<String> {
    browser
        .attribute_values("main tr[data-row]", "data-row")
        .await
        .into_iter()
        .filter(|name| !name.ends_with(".dlq"))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_overview_lists_stuck_queues_first_with_their_reasons() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start_with_config(Some(CONFIG));
    let api = Api::new(&server.url);
    for name in ["alpha", "billing", "cargo", "deep", "zulu"] {
        api.create_queue(name).await;
    }
    // billing: one dead letter.
    api.enqueue("billing", json!({"body": {"invoice": 7}}))
        .await;
    let received = api.receive("billing", 1).await;
    let nack = api
        .post(
            "/v1/queues/billing/nack",
            json!({"receipt": received[0]["receipt"], "error": "card declined", "permanent": true}),
        )
        .await;
    assert_eq!(nack["state"], "dead", "{nack}");
    // cargo: paused. deep: three messages, the threshold. alpha and zulu: one message each.
    api.post("/v1/queues/cargo/pause", json!({})).await;
    for n in 0..3 {
        api.enqueue("deep", json!({"body": {"n": n}})).await;
    }
    api.enqueue("alpha", json!({"body": "fine"})).await;
    api.enqueue("zulu", json!({"body": "fine"})).await;

    // The API names the reasons, the one rule the page draws.
    let listed = api.get("/v1/queues").await;
    let stuck_of = |name: &str| {
        listed["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {listed}"))["stats"]["stuck"]
            .clone()
    };
    assert_eq!(stuck_of("billing"), json!(["dead_letters"]));
    assert_eq!(stuck_of("cargo"), json!(["paused"]));
    assert_eq!(stuck_of("deep"), json!(["depth"]));
    assert_eq!(stuck_of("alpha"), json!([]));

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/", server.url)).await;
    browser
        .wait_text_contains(
            ".stuck-summary",
            "3 queues stuck",
            "the summary counts them",
        )
        .await;
    assert_eq!(
        row_order(&browser).await,
        ["billing", "cargo", "deep", "alpha", "zulu"],
        "stuck queues first, each group by name"
    );
    assert_eq!(
        browser.attribute_values("main tr.stuck", "data-row").await,
        ["billing", "cargo", "deep"],
        "only the stuck rows are marked"
    );
    for (queue, reason, text) in [
        ("billing", "dead_letters", "dead letters"),
        ("cargo", "paused", "paused"),
        ("deep", "depth", "too deep"),
    ] {
        browser
            .wait_text(
                &format!(r#"tr[data-row="{queue}"] [data-stuck="{reason}"]"#),
                text,
            )
            .await;
    }
    browser
        .wait_text(r#"tr[data-row="billing"] a.bad[data-field="dlq"]"#, "1")
        .await;

    // Unstuck while the page is open: cargo resumed and deep purged go back in name order.
    api.post("/v1/queues/cargo/resume", json!({})).await;
    api.post("/v1/queues/deep/purge", json!({})).await;
    browser
        .wait_text_contains(
            ".stuck-summary",
            "1 queue stuck",
            "the next poll counts again",
        )
        .await;
    browser
        .wait_until("the unstuck rows go back in name order", || async {
            row_order(&browser).await == ["billing", "alpha", "cargo", "deep", "zulu"]
        })
        .await;
    assert!(
        !browser.exists(r#"tr[data-row="cargo"].stuck"#).await,
        "cargo is no longer marked"
    );
    browser.close().await;
}
