//! The dashboard's charts show the server's history on a fresh page, and the queue page's
//! header and tabs agree, with body previews in the lists. A child of `browser.rs`: it uses that
//! file's server, browser and API helpers.

use std::time::Duration;

use serde_json::{Value, json};
use sluice_testkit::eventually;

use super::{Api, Browser, Server, Tools, UI_TIMEOUT};

/// Samples every 200 ms over one minute: the charts' x axis is 60 s wide, so a point taken 2 s
/// before the page opened is 20 px (of 600) left of "now".
const DASHBOARD: &str = "[dashboard]\nhistory_interval_ms = 200\nhistory_window_ms = 60000\n";

/// The sampled history of the deep queue.
const HISTORY: &str = "/v1/queues/orders/history";

/// The times (`at_ms`) of the history's points whose depth (`ready`) is `ready`.
fn sample_times(history: &Value, ready: u64) -> Vec<i64> {
    history["points"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|point| point["ready"] == ready)
        .filter_map(|point| point["at_ms"].as_i64())
        .collect()
}

/// The `points` of the polyline `css` as (x, y) pairs (empty when it has none).
async fn polyline(browser: &Browser, css: &str) -> Vec<(f64, f64)> {
    let script = format!(
        "const el = document.querySelector({}); return el ? el.getAttribute('points') : null;",
        Value::from(css)
    );
    let points = browser.client.execute(&script, vec![]).await.unwrap();
    points
        .as_str()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|pair| {
            let (x, y) = pair.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect()
}

/// Waits until the polyline has at least `n` points, then returns them.
async fn polyline_with(browser: &Browser, css: &str, n: usize) -> Vec<(f64, f64)> {
    let deadline = tokio::time::Instant::now() + UI_TIMEOUT;
    loop {
        let points = polyline(browser, css).await;
        if points.len() >= n || tokio::time::Instant::now() > deadline {
            return points;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fresh_overview_shows_the_depth_and_webhook_traffic_of_the_minutes_before() {
    // Proves the charts start from the server's samples: a depth that went back to 0 before the
    // page was opened is drawn as it was, and webhook requests received before show too.
    let Some(tools) = Tools::find() else { return };
    let server = Server::start_with(
        Some(DASHBOARD),
        &[("SLUICE_BROWSER_HOOK_SECRET", "browser-hook-secret")],
    );
    let api = Api::new(&server.url);
    api.create_queue("orders").await;
    for n in 0..10 {
        api.enqueue("orders", json!({"body": {"n": n}})).await;
    }
    api.send(
        api.http
            .put(format!("{}/v1/webhooks/gh", server.url))
            .json(&json!({"queue": "orders", "verify": {"scheme": "github", "secrets": [{"env": "SLUICE_BROWSER_HOOK_SECRET"}]}})),
    )
    .await;
    for _ in 0..5 {
        // Unsigned: received, and refused.
        let reply = api
            .http
            .post(format!("{}/hooks/gh", server.url))
            .json(&json!({"unsigned": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 401);
    }
    // The deep queue is sampled for a while (1.5 s: 15 px of the chart), then emptied before
    // anyone looks, and sampled empty.
    eventually("1.5 s of samples at depth 10", UI_TIMEOUT, || async {
        let times = sample_times(&api.get(HISTORY).await, 10);
        times.len() >= 2 && times[times.len() - 1] - times[0] >= 1_500
    })
    .await;
    for message in api.receive("orders", 10).await {
        api.post(
            "/v1/queues/orders/ack",
            json!({"receipt": message["receipt"]}),
        )
        .await;
    }
    eventually("a sample at depth 0", UI_TIMEOUT, || async {
        let out = api.get(HISTORY).await;
        let points = out["points"].as_array().cloned().unwrap_or_default();
        points.last().is_some_and(|point| point["ready"] == 0)
    })
    .await;

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/ui/", server.url)).await;
    browser
        .wait_text(r#"tr[data-row="orders"] [data-field="ready"]"#, "0")
        .await;
    let depth = r#"main .grid .panel:first-child svg.chart polyline.s1"#;
    let points = polyline_with(&browser, depth, 8).await;
    assert!(
        points.len() >= 8,
        "samples from before the page opened: {points:?}"
    );
    let (first_x, last_x) = (points[0].0, points[points.len() - 1].0);
    assert!(
        last_x - first_x >= 15.0,
        "the points span the seconds before the page opened: {points:?}"
    );
    // y = 4 at the chart's top (the peak, 10) and 116 at 0.
    assert!(
        points.iter().any(|&(_, y)| y < 20.0),
        "the depth of 10 before the acks is drawn: {points:?}"
    );
    assert!(
        points[points.len() - 1].1 > 110.0,
        "and the 0 of now: {points:?}"
    );

    browser.goto(&format!("{}/ui/#/webhooks", server.url)).await;
    let received = r#"[data-field="received-history"] polyline"#;
    browser
        .wait_until("the received history is drawn", || async {
            // A spark is 24 high: y = 22 at 0, 2 at its peak.
            polyline(&browser, received)
                .await
                .iter()
                .any(|&(_, y)| y < 20.0)
        })
        .await;
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_queue_header_and_its_tabs_agree_and_lists_preview_bodies() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start_with(Some(DASHBOARD), &[]);
    let api = Api::new(&server.url);
    api.send(
        api.http
            .put(format!("{}/v1/queues/lanes", server.url))
            .json(&json!({"ordering": "per_key"})),
    )
    .await;
    // Two lanes: their heads are ready, the three behind them wait.
    for (key, n) in [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)] {
        api.enqueue(
            "lanes",
            json!({"key": key, "body": format!("<b>{key}{n}</b> & more text")}),
        )
        .await;
    }

    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/queue/lanes", server.url))
        .await;
    browser
        .wait_text_contains(".tabs", "Ready (2)", "the ready tab")
        .await;
    browser
        .wait_text(r#".stats [data-field="ready"]"#, "2")
        .await;
    browser
        .wait_text(r#".stats [data-field="waiting"]"#, "3")
        .await;

    // More lanes arrive while the page is open: the header follows, and the tabs with it.
    for key in ["c", "d"] {
        api.enqueue("lanes", json!({"key": key, "body": key})).await;
    }
    browser
        .wait_text(r#".stats [data-field="ready"]"#, "4")
        .await;
    let both = browser
        .client
        .execute(
            "return [document.querySelector('.stats [data-field=\"ready\"]').textContent, \
             document.querySelector('.tabs a[data-state=\"ready\"]').textContent];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        both,
        json!(["4", "Ready (4)"]),
        "header and tab at the same moment"
    );

    // The ready list previews bodies as text.
    browser
        .wait_text(
            r#"tr:first-child [data-field="preview"]"#,
            "\"<b>a0</b> & more text\"",
        )
        .await;
    assert!(
        !browser.exists("td.preview b").await,
        "the body's markup is text, not elements"
    );
    browser.close().await;
}
