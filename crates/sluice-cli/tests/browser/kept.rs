//! The queue page's acked tab: the acked messages a queue keeps (`keep_acked_ms`), newest ack
//! first, searched by key and idempotency key with the search in the URL; a kept message's page
//! with its body and result; and, for a queue that keeps none, how to keep them. A child of
//! `browser.rs`: it uses that file's server, browser and API helpers.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Api, Browser, Server, Tools};

/// The ids of the acked tab's rows, in the order shown.
async fn rows(browser: &Browser) -> Vec<String> {
    browser
        .attribute_values("main tbody tr[data-id]", "data-id")
        .await
}

/// Waits until the acked tab shows exactly `expected`, in that order.
async fn wait_rows(browser: &Browser, expected: &[&str], what: &str) {
    browser
        .wait_until(what, || async { rows(browser).await == expected })
        .await;
}

/// `PUT /v1/queues/{name}` with `spec`.
async fn define_queue(api: &Api, name: &str, spec: Value) {
    api.send(
        api.http
            .put(format!("{}/v1/queues/{name}", api.url))
            .json(&spec),
    )
    .await;
}

/// Types `text` into the acked search's `field` (emptied first).
async fn type_search(browser: &Browser, field: &str, text: &str) {
    let css = format!(r#"#acked-search input[data-search="{field}"]"#);
    browser
        .wait_until("the search form is shown", || async {
            browser.exists(&css).await
        })
        .await;
    let input = browser
        .client
        .find(fantoccini::Locator::Css(&css))
        .await
        .unwrap();
    input.clear().await.unwrap();
    input.send_keys(text).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn kept_acked_messages_are_listed_newest_first_searched_and_opened_with_their_body() {
    let Some(tools) = Tools::find() else { return };
    let server = Server::start();
    let api = Api::new(&server.url);
    define_queue(&api, "receipts", json!({"keep_acked_ms": 3_600_000})).await;
    define_queue(&api, "plain", json!({})).await;

    // Three messages, two of them under the key "alice"; the last one's body has markup in it.
    let sent = [
        json!({"id": "order-1", "key": "alice", "body": {"n": 1}}),
        json!({"id": "order-2", "key": "bob", "body": {"n": 2}, "headers": {"x-shop": "north"}}),
        json!({"id": "order-3", "key": "alice", "body": {"n": 3, "note": "<b>bold</b>"}}),
    ];
    let mut ids = Vec::new();
    for message in &sent {
        let out = api.enqueue("receipts", message.clone()).await;
        ids.push(out["message_id"].as_str().unwrap().to_owned());
    }
    let received = api.receive_waiting("receipts", 3).await;
    assert_eq!(received.len(), 3, "{received:?}");
    // Acked in the order sent, a little apart: the tab shows the last ack first.
    let results = [
        Some(json!({"invoice": "INV-1", "ok": true})),
        None,
        Some(json!({"invoice": "INV-3"})),
    ];
    for (id, result) in ids.iter().zip(&results) {
        let message = received
            .iter()
            .find(|m| m["message_id"] == json!(id))
            .unwrap_or_else(|| panic!("{id} not received: {received:?}"));
        let mut ack = json!({"receipt": message["receipt"]});
        if let Some(result) = result {
            ack["result"] = result.clone();
        }
        let out = api.post("/v1/queues/receipts/ack", ack).await;
        assert_eq!(out["acked"], 1, "{out}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let newest_first = [ids[2].as_str(), ids[1].as_str(), ids[0].as_str()];

    let browser = Browser::start(&tools).await;
    browser
        .goto(&format!("{}/ui/#/queue/receipts", server.url))
        .await;
    browser
        .wait_text(r#"[data-field="keep_acked"]"#, "1h")
        .await;
    browser.click(r#".tabs a[data-state="acked"]"#).await;
    wait_rows(
        &browser,
        &newest_first,
        "the acked tab lists all three, newest ack first",
    )
    .await;
    browser
        .wait_text_contains(
            r#"[data-field="keep-note"]"#,
            "kept for 1h",
            "how long they are kept",
        )
        .await;
    let first = format!(r#"main tbody tr[data-id="{}"]"#, ids[0]);
    browser
        .wait_text_contains(&first, "order-1", "the idempotency key")
        .await;
    browser.wait_text_contains(&first, "alice", "the key").await;
    browser
        .wait_text_contains(&first, "INV-1", "the result")
        .await;
    browser
        .wait_text_contains(
            &format!(r#"main tbody tr[data-id="{}"]"#, ids[2]),
            r#""note":"<b>bold</b>""#,
            "the body preview, as text",
        )
        .await;
    assert!(
        !browser.exists("main tbody b").await,
        "markup in a body is shown as text, never parsed"
    );

    // By key: only alice's, still newest first, and the search is in the URL.
    type_search(&browser, "key", "alice").await;
    browser
        .click(r#"#acked-search button[type="submit"]"#)
        .await;
    wait_rows(&browser, &[&ids[2], &ids[0]], "only the key's messages").await;
    let url = browser.client.current_url().await.unwrap();
    let fragment = url.fragment().unwrap_or_default().to_owned();
    assert!(fragment.contains("state=acked"), "{fragment}");
    assert!(fragment.contains("key=alice"), "{fragment}");
    // A reload keeps the search.
    browser.client.refresh().await.unwrap();
    wait_rows(
        &browser,
        &[&ids[2], &ids[0]],
        "the search survives a reload",
    )
    .await;
    let values = browser
        .attribute_values(r#"#acked-search input[data-search="key"]"#, "value")
        .await;
    assert_eq!(values, ["alice"], "the form shows the search");

    // By idempotency key, after clearing the key.
    browser
        .click(r#"#acked-search a[data-action="clear"]"#)
        .await;
    wait_rows(&browser, &newest_first, "cleared: all three again").await;
    type_search(&browser, "id", "order-2").await;
    browser
        .click(r#"#acked-search button[type="submit"]"#)
        .await;
    wait_rows(&browser, &[&ids[1]], "only the idempotency key's message").await;

    // By ack time, from the URL: nothing was acked before 2001.
    browser
        .goto(&format!(
            "{}/ui/#/queue/receipts?state=acked&until=2001-01-01T00:00",
            server.url
        ))
        .await;
    browser
        .wait_text_contains(
            "main .empty",
            "No kept acked message matches",
            "an ack-time search that matches none",
        )
        .await;

    // A message's page: kept until when, its body, headers and result.
    browser
        .goto(&format!("{}/ui/#/queue/receipts?state=acked", server.url))
        .await;
    wait_rows(&browser, &newest_first, "all three").await;
    browser
        .click(&format!(r#"main tbody tr[data-id="{}"] a"#, ids[1]))
        .await;
    browser.wait_text(r#"[data-field="state"]"#, "acked").await;
    browser
        .wait_text_contains("h1", &ids[1], "the message page")
        .await;
    assert!(
        browser.exists(r#"[data-field="kept_until"]"#).await,
        "kept until is shown"
    );
    browser
        .wait_text_contains(r#"pre[data-field="body"]"#, "\"n\": 2", "its body")
        .await;
    browser
        .wait_text_contains(r#"pre[data-field="headers"]"#, "x-shop", "its headers")
        .await;
    browser
        .goto(&format!("{}/ui/#/message/receipts/{}", server.url, ids[0]))
        .await;
    browser
        .wait_text_contains(r#"pre[data-field="result"]"#, "INV-1", "its result")
        .await;
    browser
        .wait_text_contains(r#"pre[data-field="body"]"#, "\"n\": 1", "its body")
        .await;

    // A queue that keeps none: the tab says so and how to keep them.
    browser
        .goto(&format!("{}/ui/#/queue/plain?state=acked", server.url))
        .await;
    browser
        .wait_text_contains(
            r#"[data-field="keep-note"]"#,
            "does not keep acked messages",
            "the tab says the queue keeps none",
        )
        .await;
    for how in [
        "keep_acked_ms",
        "--keep-acked 1h",
        "[queues.plain] keep_acked_ms",
    ] {
        browser
            .wait_text_contains(r#"[data-field="keep-note"]"#, how, "how to keep them")
            .await;
    }
    browser
        .wait_text(r#"[data-field="keep_acked"]"#, "off")
        .await;
    browser.close().await;
}
