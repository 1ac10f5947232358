//! A push destination's secrets (user info, a secret path, the query, header values) never
//! reach what producers and consumers read, nor the log or `/metrics`: the failure texts in
//! stats, message lookups and dead-letter entries carry only the destination's origin, with
//! anything the destination echoed back scrubbed.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::TestServer;
use crate::support::destination::{Answer, Destination, Script};
use crate::support::tokens::{self, ADMIN, CONSUMER_A, PRODUCER_A};

/// Every secret of the destinations below.
const SECRETS: [&str; 5] = [
    "pushuser",
    "PUSH-PASS-1234",
    "SECRET-PATH-5678",
    "SECRET-QUERY-9012",
    "HEADER-SECRET-3456",
];

/// Longest wait for a push failure to be recorded.
const WAIT: Duration = Duration::from_secs(20);

async fn call(server: &TestServer, method: Method, path: &str, token: &str) -> (u16, String) {
    let response = server
        .client()
        .request(method, format!("{}{path}", server.url()))
        .bearer_auth(token)
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

async fn get(server: &TestServer, path: &str, token: &str) -> Value {
    let (status, text) = call(server, Method::GET, path, token).await;
    assert_eq!(status, 200, "GET {path}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("GET {path}: {e}: {text}"))
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} shows {secret}: {text}");
    }
}

/// A destination URL with user info, a secret path and a secret query.
fn secret_url(origin: &str) -> String {
    let host = origin.strip_prefix("http://").unwrap();
    format!("http://pushuser:PUSH-PASS-1234@{host}/hooks/SECRET-PATH-5678?token=SECRET-QUERY-9012")
}

#[tokio::test]
async fn push_secrets_stay_out_of_every_output() {
    // Proves that stats, message lookups (last_error, failures), dead-letter list and show,
    // the browse listing, the queue settings (for non-admins), /metrics and the server log do
    // not show a destination's credentials, secret path, query or header values, to any
    // token, both for a connection error and for an answer that echoes the request back.
    let server = tokens::team_a(TestServer::builder(), "")
        .env("SLUICE_LOG", "debug")
        .start()
        .await;
    // Nothing listens on this port: every push fails to connect.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let echo = Destination::start().await;
    echo.on_other(Script::always(Answer::status(400).body(
        "bad request from pushuser:PUSH-PASS-1234 to /hooks/SECRET-PATH-5678?token=SECRET-QUERY-9012 with Bearer HEADER-SECRET-3456",
    )));
    let origin_of_echo = echo.url("");
    for (queue, origin) in [
        ("team-a.refused", &closed),
        ("team-a.echo", &origin_of_echo),
    ] {
        let spec = json!({
            "max_attempts": 1,
            "push": {
                "url": secret_url(origin),
                "secret_path": true,
                "headers": {"authorization": "Bearer HEADER-SECRET-3456"},
            },
        });
        let response = server
            .client()
            .put(format!("{}/v1/queues/{queue}", server.url()))
            .bearer_auth(ADMIN)
            .json(&spec)
            .send()
            .await
            .expect("define the queue");
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
    }

    let mut ids = Vec::new();
    for queue in ["team-a.refused", "team-a.echo"] {
        let sent = server
            .client()
            .post(format!("{}/v1/queues/{queue}/messages", server.url()))
            .bearer_auth(PRODUCER_A)
            .json(&json!({"body": {"n": 1}}))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        let id = sent["message_id"].as_str().unwrap().to_owned();
        // Both fail for good on their first attempt (max_attempts 1, or a 400).
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let stats = get(&server, &format!("/v1/queues/{queue}/stats"), ADMIN).await;
            if stats["push"]["failed_permanently"] == 1 && stats["dead_lettered"] == 1 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{queue}: no failure recorded: {stats}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ids.push((queue, id));
    }

    let refused_stats = get(&server, "/v1/queues/team-a.refused/stats", ADMIN).await;
    let refused_error = refused_stats["push"]["last_error"].as_str().unwrap();
    assert!(
        refused_error.starts_with(&format!("cannot connect to {closed}")),
        "the error still says where: {refused_error}"
    );
    let echo_error =
        get(&server, "/v1/queues/team-a.echo/stats", ADMIN).await["push"]["last_error"]
            .as_str()
            .unwrap()
            .to_owned();
    assert!(
        echo_error.starts_with("HTTP 400: bad request from (hidden)"),
        "the answer is kept, without the secrets: {echo_error}"
    );

    for token in [PRODUCER_A, CONSUMER_A, ADMIN] {
        for (queue, id) in &ids {
            let dlq = format!("{queue}.dlq");
            let mut paths = vec![
                format!("/v1/queues/{queue}/stats"),
                format!("/v1/queues/{queue}/dlq"),
                format!("/v1/queues/{queue}/dlq/{id}"),
                format!("/v1/queues/{dlq}/messages/{id}"),
                format!("/v1/queues/{dlq}/browse?state=ready"),
            ];
            if token != ADMIN {
                // Admins see the destination as configured.
                paths.extend([format!("/v1/queues/{queue}"), "/v1/queues".to_owned()]);
            }
            for path in paths {
                let text = get(&server, &path, token).await.to_string();
                assert_no_secret(&format!("GET {path} as {token}"), &text);
            }
            let lookup = get(&server, &format!("/v1/queues/{dlq}/messages/{id}"), token).await;
            let failures = lookup["failures"].to_string();
            assert!(
                failures.contains("cannot connect to") || failures.contains("HTTP 400"),
                "the lookup shows the failure: {lookup}"
            );
        }
    }
    let settings = get(&server, "/v1/queues/team-a.echo", PRODUCER_A).await;
    let url = settings["config"]["push"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("http://(hidden)@127.0.0.1:") && url.ends_with("/(hidden)?(hidden)"),
        "{url}"
    );
    let as_admin = get(&server, "/v1/queues/team-a.echo", ADMIN)
        .await
        .to_string();
    assert!(as_admin.contains("PUSH-PASS-1234") && as_admin.contains("SECRET-QUERY-9012"));

    let (status, metrics) = call(&server, Method::GET, "/metrics", ADMIN).await;
    assert_eq!(status, 200);
    assert_no_secret("/metrics", &metrics);
    assert_no_secret("the server log (debug level)", &server.log_tail(100_000));
}
