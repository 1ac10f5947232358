//! What a web page may not make a browser do (docs/access-control.md, "Browsers"): in open mode
//! a page on any site could otherwise enqueue, purge or set a push destination on a server on
//! the same machine. Each check refuses the browser-shaped request and lets the same request
//! from curl or an SDK (no `Origin`, no `Sec-Fetch-*`) through.

use reqwest::{Method, RequestBuilder};
use serde_json::{Value, json};

use crate::support::TestServer;

const ADMIN: &str = "admin-token-0123456789";

/// Sends `request`; returns its status and error code ("" when it has none).
async fn send(request: RequestBuilder) -> (u16, String) {
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let code = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, code)
}

fn port_of(server: &TestServer) -> u16 {
    server.url().rsplit(':').next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn open_mode_refuses_cross_site_changes_and_lets_curl_through() {
    // Proves, without tokens: a change whose Origin or Sec-Fetch-Site says another site made it
    // is 403 (enqueue, purge, replay, setting a push destination), and nothing is stored; the
    // same requests from the server's own pages or with neither header (curl, SDKs) pass.
    let server = TestServer::builder().start().await;
    server.put_queue("orders", json!({})).await;
    let client = server.client();
    let url = |path: &str| format!("{}{path}", server.url());
    let evil = "http://evil.example";
    let changes: Vec<(Method, &str, Value)> = vec![
        (
            Method::POST,
            "/v1/queues/orders/messages",
            json!({"body": 1}),
        ),
        (Method::POST, "/v1/queues/orders/purge", json!({})),
        (Method::POST, "/v1/queues/orders/dlq/replay", json!({})),
        (
            Method::PUT,
            "/v1/queues/orders",
            json!({"push": {"url": "http://127.0.0.1:9/steal"}}),
        ),
    ];
    for (method, path, body) in &changes {
        for request in [
            client
                .request(method.clone(), url(path))
                .header("origin", evil)
                .json(body),
            client
                .request(method.clone(), url(path))
                .header("sec-fetch-site", "cross-site")
                .json(body),
            client
                .request(method.clone(), url(path))
                .header("sec-fetch-site", "same-site")
                .json(body),
            // A form post from another page: `text/plain` is a "simple" request, no preflight.
            client
                .request(method.clone(), url(path))
                .header("origin", "null")
                .header("content-type", "text/plain")
                .body(body.to_string()),
        ] {
            assert_eq!(
                send(request).await,
                (403, "cross_site_request".to_owned()),
                "{method} {path}"
            );
        }
    }
    let stats = server.stats("orders").await;
    assert_eq!(stats["ready"], 0, "nothing was stored: {stats}");
    assert!(
        server.get("/v1/queues/orders").await.ok()["config"]["push"].is_null(),
        "no push destination was set"
    );

    // The dashboard's own requests and non-browser clients pass.
    let own_origin = server.url().to_owned();
    for request in [
        client
            .post(url("/v1/queues/orders/messages"))
            .header("sec-fetch-site", "same-origin")
            .json(&json!({"body": 1})),
        client
            .post(url("/v1/queues/orders/messages"))
            .header("origin", &own_origin)
            .json(&json!({"body": 2})),
        client
            .post(url("/v1/queues/orders/messages"))
            .json(&json!({"body": 3})),
        // `curl -d '{"body": 4}'` sends a form content type.
        client
            .post(url("/v1/queues/orders/messages"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(r#"{"body": 4}"#),
        client
            .post(url("/v1/queues/orders/messages"))
            .header("content-type", "text/plain")
            .body(r#"{"body": 5}"#),
    ] {
        assert_eq!(send(request).await.0, 200);
    }
    assert_eq!(server.stats("orders").await["ready"], 5);
    // Cross-site reads of pages are navigation (links to the dashboard keep working).
    let page = client
        .get(url("/ui/"))
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
}

#[tokio::test]
async fn browsers_must_label_json_bodies_as_json() {
    // Proves: a body from a browser (Origin or Sec-Fetch-* present) that is not labelled
    // application/json is 415, even same-origin; without browser headers any label passes.
    let server = TestServer::builder().start().await;
    server.put_queue("orders", json!({})).await;
    let url = format!("{}/v1/queues/orders/messages", server.url());
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ] {
        for (name, value) in [
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-mode", "cors"),
            ("origin", server.url()),
        ] {
            let request = server
                .client()
                .post(&url)
                .header(name, value)
                .header("content-type", content_type)
                .body(r#"{"body": 1}"#);
            assert_eq!(
                send(request).await,
                (415, "unsupported_media_type".to_owned()),
                "{content_type} with {name}"
            );
        }
    }
    let labelled = server
        .client()
        .post(&url)
        .header("sec-fetch-site", "same-origin")
        .header("content-type", "application/json; charset=utf-8")
        .body(r#"{"body": 1}"#);
    assert_eq!(send(labelled).await.0, 200);
    // A change without a body (the dashboard's pause) needs no label.
    let pause = server
        .client()
        .post(format!("{}/v1/queues/orders/pause", server.url()))
        .header("sec-fetch-site", "same-origin");
    assert_eq!(send(pause).await.0, 200);
    assert_eq!(server.stats("orders").await["ready"], 1);
}

#[tokio::test]
async fn open_mode_serves_only_host_names_of_the_listen_address() {
    // Proves DNS rebinding is refused: a Host that is not the listen address (a page's own
    // name resolving to 127.0.0.1) gets 421, reads included; the loopback names pass; health
    // probes and webhooks are not checked.
    let server = TestServer::builder().start().await;
    server.put_queue("orders", json!({})).await;
    let port = port_of(&server);
    let get = |host: String, path: &'static str| {
        server
            .client()
            .get(format!("{}{path}", server.url()))
            .header("host", host)
    };
    for host in [
        format!("rebound.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        format!("localhost:{}", port.wrapping_add(1)),
        "127.0.0.1".to_owned(),
    ] {
        assert_eq!(
            send(get(host.clone(), "/v1/queues")).await,
            (421, "unknown_host".to_owned()),
            "{host}"
        );
        assert_eq!(send(get(host.clone(), "/ui/")).await.0, 421, "{host}");
        assert_eq!(send(get(host.clone(), "/healthz")).await.0, 200, "{host}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(send(get(host.clone(), "/v1/queues")).await.0, 200, "{host}");
    }
    // Webhooks: senders are servers, behind tunnels that rename the host.
    let hook = server
        .client()
        .post(format!("{}/hooks/nothing-here", server.url()))
        .header("host", "tunnel.example")
        .header("origin", "http://evil.example")
        .header("content-type", "text/plain")
        .body("x");
    assert_eq!(
        send(hook).await.0,
        404,
        "the webhook route answers for itself"
    );
}

#[tokio::test]
async fn public_urls_name_the_server_too() {
    // Proves a `[server] public_urls` entry is served in open mode and its origin counts as
    // the server's own, while other names are still refused.
    let server = TestServer::builder()
        .config("[server]\npublic_urls = [\"https://sluice.example.com\"]\n")
        .start()
        .await;
    server.put_queue("orders", json!({})).await;
    let from_public = |host: &str, origin: &str| {
        server
            .client()
            .post(format!("{}/v1/queues/orders/messages", server.url()))
            .header("host", host)
            .header("origin", origin)
            .json(&json!({"body": 1}))
    };
    let public = "https://sluice.example.com";
    assert_eq!(send(from_public("sluice.example.com", public)).await.0, 200);
    assert_eq!(
        send(from_public("sluice.example.com:443", public)).await.0,
        200
    );
    // Behind a proxy that passes the listen address on as the Host.
    let listen_host = server.url().strip_prefix("http://").unwrap().to_owned();
    assert_eq!(send(from_public(&listen_host, public)).await.0, 200);
    assert_eq!(
        send(from_public(
            "sluice.example.com",
            "https://other.example.com"
        ))
        .await,
        (403, "cross_site_request".to_owned())
    );
    assert_eq!(
        send(from_public(
            "other.example.com",
            "https://other.example.com"
        ))
        .await,
        (421, "unknown_host".to_owned())
    );
    assert_eq!(server.stats("orders").await["ready"], 3);
}

#[tokio::test]
async fn the_login_form_refuses_other_sites() {
    // Proves: another site cannot sign a browser in (login CSRF), while the form on the
    // server's own page, and a client without browser headers, still can.
    let server = TestServer::builder()
        .config(
            "[[auth.tokens]]\nname = \"ops\"\ntoken = { env = \"TEST_ADMIN_TOKEN\" }\nroles = [\"admin\"]\n",
        )
        .env("TEST_ADMIN_TOKEN", ADMIN)
        .start()
        .await;
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = || {
        client
            .post(format!("{}/ui/login", server.url()))
            .form(&[("token", ADMIN)])
    };
    assert_eq!(
        send(login().header("origin", "http://evil.example")).await,
        (403, "cross_site_request".to_owned())
    );
    assert_eq!(
        send(login().header("sec-fetch-site", "cross-site")).await,
        (403, "cross_site_request".to_owned())
    );
    assert_eq!(
        send(login().header("sec-fetch-site", "same-origin"))
            .await
            .0,
        303
    );
    assert_eq!(send(login().header("origin", server.url())).await.0, 303);
    assert_eq!(send(login()).await.0, 303);
    // With tokens, the host check is off: a proxy may use any name.
    let renamed = client
        .get(format!("{}/v1/queues", server.url()))
        .header("host", "queue.internal")
        .bearer_auth(ADMIN);
    assert_eq!(send(renamed).await.0, 200);
}
