//! The topics page: each topic with its subscriptions (the queue, linked, and its jq filter) and
//! its counts, refreshed while open, rows kept from one refresh to the next. A child of
//! `browser.rs`: it uses that file's server, browser and API helpers.

use serde_json::{Value, json};

use super::{Api, Browser, Server, Tools};

/// A filter with markup in it: shown as text, never parsed as HTML.
const FILTER: &str = r#".body.amount > 1000 and .body.tag != "<i>x</i>""#;

/// `POST /v1/topics/{name}/messages`: the queues that got a copy.
async fn publish(api: &Api, topic: &str, message: Value) -> Vec<String> {
    let out = api
        .post(&format!("/v1/topics/{topic}/messages"), message)
        .await;
    out["copies"]
        .as_array()
        .unwrap_or_else(|| panic!("no copies in {out}"))
        .iter()
        .map(|copy| copy["queue"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Whether the element matching `css` still has the `data-mark` set by the test.
async fn marked(browser: &Browser, css: &str) -> bool {
    browser
        .attribute_values(css, "data-mark")
        .await
        .iter()
        .any(|mark| mark == "1")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_topics_page_lists_subscriptions_with_filters_and_counts() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    api.create_queue("audit").await;
    api.create_queue("fraud-review").await;

    let browser = Browser::start(&tools).await;
    browser.goto(&format!("{}/ui/#/topics", server.url)).await;
    browser
        .wait_text_contains("main .empty", "No topics", "the empty state")
        .await;
    browser
        .wait_text_contains(
            "main .empty",
            "PUT /v1/topics/{name}",
            "the empty state names the API",
        )
        .await;
    browser
        .wait_text_contains(
            "main .empty",
            "sluice topic set",
            "the empty state names the CLI",
        )
        .await;
    assert!(
        browser.exists(r#"nav a[data-nav="topics"].active"#).await,
        "the nav shows the page"
    );

    // Defined and published to while the page is open: the next poll shows them.
    api.send(
        api.http
            .put(format!("{}/v1/topics/orders", server.url))
            .json(&json!({"subscriptions": [
                {"queue": "audit"},
                {"queue": "fraud-review", "filter": FILTER},
            ]})),
    )
    .await;
    assert_eq!(
        publish(&api, "orders", json!({"body": {"amount": 5000}})).await,
        ["audit", "fraud-review"],
        "the filter takes the big one"
    );
    assert_eq!(
        publish(&api, "orders", json!({"body": {"amount": 10}})).await,
        ["audit"],
        "the filter drops the small one"
    );

    let row = r#"tr[data-row="orders"]"#;
    browser
        .wait_text(&format!(r#"{row} [data-field="name"]"#), "orders")
        .await;
    browser
        .wait_text(&format!(r#"{row} [data-field="published"]"#), "2")
        .await;
    browser
        .wait_text(&format!(r#"{row} [data-field="copies"]"#), "3")
        .await;
    browser
        .wait_text(&format!(r#"{row} [data-field="filtered"]"#), "1")
        .await;
    browser
        .wait_text(&format!(r#"{row} [data-field="duplicates"]"#), "0")
        .await;

    // The subscriptions, in order, each queue linking to its page; the filter is shown as code,
    // its markup as text.
    assert_eq!(
        browser
            .attribute_values(&format!("{row} li[data-subscription]"), "data-subscription")
            .await,
        ["audit", "fraud-review"]
    );
    let audit = format!(r#"{row} li[data-subscription="audit"]"#);
    let fraud = format!(r#"{row} li[data-subscription="fraud-review"]"#);
    browser
        .wait_text(&format!(r#"{audit} a[data-field="queue"]"#), "audit")
        .await;
    browser
        .wait_text(&format!(r#"{fraud} a[data-field="queue"]"#), "fraud-review")
        .await;
    assert_eq!(
        browser
            .attribute_values(&format!(r#"{row} a[data-field="queue"]"#), "href")
            .await,
        ["#/queue/audit", "#/queue/fraud-review"],
        "each queue links to its page"
    );
    browser
        .wait_text(&format!(r#"{fraud} code[data-field="filter"]"#), FILTER)
        .await;
    assert!(
        !browser.exists(&format!("{row} i")).await,
        "the filter's markup is text, not elements"
    );
    assert!(
        !browser
            .exists(&format!(r#"{audit} [data-field="filter"]"#))
            .await,
        "no filter shown where there is none"
    );
    browser
        .wait_text(&format!(r#"{audit} [data-field="all"]"#), "all messages")
        .await;

    // The row and its links stay the same elements across refreshes: mark them, publish again,
    // and the new count shows in the marked row.
    browser
        .client
        .execute(
            r#"const row = document.querySelector('tr[data-row="orders"]');
               row.dataset.mark = '1';
               row.querySelector('a[data-field="queue"]').dataset.mark = '1';"#,
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        publish(&api, "orders", json!({"body": {"amount": 7}})).await,
        ["audit"]
    );
    browser
        .wait_text(&format!(r#"{row} [data-field="published"]"#), "3")
        .await;
    browser
        .wait_text(&format!(r#"{row} [data-field="filtered"]"#), "2")
        .await;
    assert!(marked(&browser, row).await, "the row was kept");
    assert!(
        marked(&browser, &format!(r#"{audit} a[data-field="queue"]"#)).await,
        "the subscriptions' links were kept"
    );

    // A click on a queue opens its page.
    browser
        .click(&format!(r#"{fraud} a[data-field="queue"]"#))
        .await;
    browser
        .wait_until("the queue's page opens", || async {
            browser
                .client
                .current_url()
                .await
                .is_ok_and(|url| url.fragment() == Some("/queue/fraud-review"))
        })
        .await;
    browser
        .wait_text_contains("h1", "fraud-review", "the queue page's title")
        .await;
    browser.close().await;
}
