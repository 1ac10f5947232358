//! Tenants: a `tenant_admin` token does what an admin does within its tenant's names and
//! nothing outside: the matrix below calls every route of the OpenAPI document on team-a's
//! and team-b's resources, and every list, with team-a's tenant admin.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::TestServer;

const ADMIN: &str = "admin-token-0123456789";
const A_ADMIN: &str = "team-a-admin-0123456789";
const A_WORKER: &str = "team-a-worker-0123456789";

const CONFIG: &str = r#"
[tenants.team-a]
queues = ["team-a.*"]
secrets_env_prefix = "TEAM_A_"

[tenants.team-b]
queues = ["team-b.*"]

[[auth.tokens]]
name = "ops"
token = { env = "TEST_ADMIN" }
roles = ["admin"]

[[auth.tokens]]
name = "team-a-admin"
token = { env = "TEST_A_ADMIN" }
roles = ["tenant_admin"]
tenant = "team-a"

[[auth.tokens]]
name = "team-a-worker"
token = { env = "TEST_A_WORKER" }
roles = ["producer", "consumer"]
tenant = "team-a"
"#;

async fn start() -> TestServer {
    TestServer::builder()
        .config(CONFIG)
        .env("TEST_ADMIN", ADMIN)
        .env("TEST_A_ADMIN", A_ADMIN)
        .env("TEST_A_WORKER", A_WORKER)
        .env("TEAM_A_X", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        .start()
        .await
}

async fn call(
    server: &TestServer,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    crate::support::tokens::call(server, method, path, Some(token), body).await
}

/// The name of `team`'s resource a path template names.
fn concrete(path: &str, team: &str, message_id: &str) -> String {
    let name = if path.starts_with("/v1/webhooks/") {
        "hook"
    } else if path.starts_with("/v1/schedules/") {
        "tick"
    } else if path.starts_with("/v1/topics/") {
        "events"
    } else {
        "ops"
    };
    path.replace("{queue}", &format!("{team}.orders"))
        .replace("{name}", &format!("{team}.{name}"))
        .replace("{message_id}", message_id)
}

/// A body that defines `team`'s resource at a definition route; `{}` elsewhere.
fn body(method: &Method, path: &str, team: &str) -> Option<Value> {
    if *method == Method::GET || *method == Method::DELETE {
        return None;
    }
    let queue = format!("{team}.orders");
    Some(match (method.as_str(), path) {
        ("PUT", "/v1/webhooks/{name}") => json!({"queue": queue, "verify": {"scheme": "none"}}),
        ("PUT", "/v1/schedules/{name}") => {
            json!({"queue": queue, "every_ms": 60_000, "paused": true, "message": {"body": 1}})
        }
        ("PUT", "/v1/topics/{name}") => json!({"subscriptions": [{"queue": queue}]}),
        ("PUT", "/v1/alerts/{name}") => json!({"queues": [format!("{team}.*")]}),
        _ => json!({}),
    })
}

async fn define_fixtures(server: &TestServer) {
    for team in ["team-a", "team-b"] {
        for (path, body_path) in [
            ("/v1/queues/{queue}", "/v1/queues/{queue}"),
            ("/v1/webhooks/{name}", "/v1/webhooks/{name}"),
            ("/v1/schedules/{name}", "/v1/schedules/{name}"),
            ("/v1/topics/{name}", "/v1/topics/{name}"),
            ("/v1/alerts/{name}", "/v1/alerts/{name}"),
        ] {
            let (status, text) = call(
                server,
                Method::PUT,
                &concrete(path, team, ""),
                ADMIN,
                body(&Method::PUT, body_path, team),
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{path} for {team}: {text}");
        }
    }
}

#[tokio::test]
async fn a_tenant_admin_administers_its_tenant_and_nothing_outside_through_every_route() {
    // Proves the tenant matrix: for every route of the OpenAPI document, team-a's tenant admin
    // is refused (403) on team-b's queue or named resource, and allowed on team-a's (defining,
    // replaying, purging and deleting included); every list it gets names nothing of team-b's.
    let server = start().await;
    define_fixtures(&server).await;
    let (status, doc) = call(&server, Method::GET, "/v1/openapi.json", A_ADMIN, None).await;
    assert_eq!(status, StatusCode::OK);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    let mut routes = Vec::new();
    for (path, methods) in doc["paths"].as_object().unwrap() {
        if matches!(
            path.as_str(),
            "/healthz" | "/readyz" | "/v1/openapi.json" | "/hooks/{name}"
        ) {
            continue;
        }
        for method in methods.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            routes.push((method, path.clone()));
        }
    }
    // Deletes last: they take away what the other rows use.
    routes.sort_by_key(|(method, _)| *method == Method::DELETE);
    assert!(routes.len() >= 40, "{} routes", routes.len());
    let message_id = uuid::Uuid::now_v7().to_string();
    let mut lists = 0;
    for (method, path) in &routes {
        if !path.contains('{') {
            // A list: allowed, and only the tenant's.
            let (status, text) = call(&server, method.clone(), path, A_ADMIN, None).await;
            assert_eq!(status, StatusCode::OK, "{method} {path}: {text}");
            assert!(
                !text.contains("team-b"),
                "{method} {path} shows team-b: {text}"
            );
            lists += 1;
            continue;
        }
        let theirs = concrete(path, "team-b", &message_id);
        let (status, text) = call(
            &server,
            method.clone(),
            &theirs,
            A_ADMIN,
            body(method, path, "team-b"),
        )
        .await;
        if *path == "/v1/topics/{name}/messages" {
            // Another tenant's topic is answered as missing (issue 30, finding 17).
            assert_eq!(status, StatusCode::NOT_FOUND, "{method} {theirs}: {text}");
            assert!(text.contains("\"topic_not_found\""), "{text}");
            continue;
        }
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {theirs}: {text}");
        assert!(text.contains("\"forbidden\""), "{text}");
    }
    for (method, path) in routes.iter().filter(|(_, path)| path.contains('{')) {
        let ours = concrete(path, "team-a", &message_id);
        let (status, text) = call(
            &server,
            method.clone(),
            &ours,
            A_ADMIN,
            body(method, path, "team-a"),
        )
        .await;
        assert!(
            status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
            "{method} {ours}: {status} {text}"
        );
    }
    assert!(lists >= 6, "{lists} lists");
    // team-b's are all still there.
    for path in [
        "/v1/queues/team-b.orders",
        "/v1/webhooks/team-b.hook",
        "/v1/schedules/team-b.tick",
        "/v1/topics/team-b.events",
        "/v1/alerts/team-b.ops",
    ] {
        let (status, text) = call(&server, Method::GET, path, ADMIN, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {text}");
    }
}

#[tokio::test]
async fn definitions_cannot_reach_into_another_tenant() {
    // Proves: a tenant admin's definitions refer only to its own queues (a webhook's or a
    // schedule's queue, a topic's subscriptions, an alert's patterns, a queue's dead-letter
    // queue); its metrics show its own series only; a tenant's producer and consumer token
    // works on its queues and nowhere else.
    let server = start().await;
    define_fixtures(&server).await;
    for (path, body, field) in [
        (
            "/v1/webhooks/team-a.x",
            json!({"queue": "team-b.orders", "verify": {"scheme": "none"}}),
            "queue",
        ),
        (
            "/v1/webhooks/team-a.x",
            json!({"queue": "team-a.orders", "topic": "team-b.events", "verify": {"scheme": "none"}}),
            "topic",
        ),
        (
            "/v1/schedules/team-a.x",
            json!({"queue": "team-b.orders", "every_ms": 60_000, "message": {"body": 1}}),
            "queue",
        ),
        (
            "/v1/topics/team-a.x",
            json!({"subscriptions": [{"queue": "team-a.orders"}, {"queue": "team-b.orders"}]}),
            "subscriptions[1].queue",
        ),
        ("/v1/alerts/team-a.x", json!({}), "queues[0]"),
        (
            "/v1/alerts/team-a.x",
            json!({"queues": ["team-*"]}),
            "queues[0]",
        ),
        (
            "/v1/queues/team-a.x",
            json!({"dead_letter_queue": "team-b.orders"}),
            "dead_letter_queue",
        ),
    ] {
        let (status, text) = call(&server, Method::PUT, path, A_ADMIN, Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {text}");
        assert!(text.contains(field), "{path}: {text}");
    }
    for path in [
        "/v1/queues/team-a.orders/dlq/replay".to_owned(),
        format!(
            "/v1/queues/team-a.orders/dlq/{}/replay",
            uuid::Uuid::now_v7()
        ),
    ] {
        let body = json!({"target_queue": "team-b.orders"});
        let (status, text) = call(&server, Method::POST, &path, A_ADMIN, Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {text}");
        assert!(text.contains("target_queue"), "{path}: {text}");
    }
    let (status, text) = call(&server, Method::GET, "/v1/queues/team-a.x", ADMIN, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was made: {text}");

    let (status, metrics) = call(&server, Method::GET, "/metrics", A_ADMIN, None).await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    assert!(metrics.contains("queue=\"team-a.orders\""), "{metrics}");
    assert!(!metrics.contains("team-b"), "{metrics}");
    assert!(!metrics.contains("sluice_http_requests"), "{metrics}");
    let (_, everything) = call(&server, Method::GET, "/metrics", ADMIN, None).await;
    assert!(everything.contains("team-b.orders"));

    let (status, text) = call(
        &server,
        Method::POST,
        "/v1/queues/team-a.orders/messages",
        A_WORKER,
        Some(json!({"body": 1})),
    )
    .await;
    assert!(status.is_success(), "{status} {text}");
    for (method, path, body) in [
        (
            Method::POST,
            "/v1/queues/team-b.orders/messages",
            Some(json!({"body": 1})),
        ),
        (
            Method::POST,
            "/v1/queues/team-b.orders/receive",
            Some(json!({})),
        ),
        (Method::PUT, "/v1/queues/team-a.new", Some(json!({}))),
        (Method::GET, "/v1/webhooks", None),
    ] {
        let (status, text) = call(&server, method.clone(), path, A_WORKER, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {text}");
    }
    let (_, listed) = call(&server, Method::GET, "/v1/queues", A_WORKER, None).await;
    assert!(
        listed.contains("team-a.orders") && !listed.contains("team-b"),
        "{listed}"
    );
}

#[tokio::test]
async fn a_tenant_admin_names_neither_server_secrets_nor_internal_addresses() {
    // Proves: a tenant admin's definitions name secrets only from environment variables with
    // its tenant's `secrets_env_prefix` (no other variable, no file), send to no internal
    // address, and a queue made without `dead_letter_queue` gets a default within the tenant;
    // the tenant admin owns its alerts' queues, not another tenant's.
    let server = start().await;
    define_fixtures(&server).await;
    for (path, body, field) in [
        (
            "/v1/queues/team-a.push",
            json!({"push": {"url": "https://example.com/x", "signing_secret": {"env": "OTHER_VAR"}}}),
            "push.signing_secret",
        ),
        (
            "/v1/queues/team-a.push",
            json!({"push": {"url": "https://example.com/x", "signing_secret": {"file": "/etc/passwd"}}}),
            "push.signing_secret",
        ),
        (
            "/v1/queues/team-a.push",
            json!({"push": {"url": "http://127.0.0.1:9/x"}}),
            "push.url",
        ),
        (
            "/v1/queues/team-a.push",
            json!({"push": {"url": "http://10.0.0.1/x"}}),
            "push.url",
        ),
        (
            "/v1/alerts/team-a.x",
            json!({"queues": ["team-a.*"], "destination": {"webhook_url": "http://169.254.169.254/"}}),
            "destination.webhook_url",
        ),
        (
            "/v1/webhooks/team-a.x",
            json!({"queue": "team-a.orders", "verify": {"scheme": "standard_webhooks", "secrets": [{"env": "NOT_MINE"}]}}),
            "verify.secrets[0]",
        ),
    ] {
        let (status, text) = call(&server, Method::PUT, path, A_ADMIN, Some(body)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {text}");
        assert!(
            text.contains("\"forbidden\"") && text.contains(field),
            "{path}: {text}"
        );
    }
    for path in [
        "/v1/queues/team-a.push",
        "/v1/alerts/team-a.x",
        "/v1/webhooks/team-a.x",
    ] {
        let (status, text) = call(&server, Method::GET, path, ADMIN, None).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "nothing was made: {path}: {text}"
        );
    }

    // Its own secret and a public destination are fine (nothing is enqueued, so nothing sent).
    let (status, text) = call(
        &server,
        Method::PUT,
        "/v1/queues/team-a.push",
        A_ADMIN,
        Some(json!({"push": {"url": "https://example.com/x?key=abc", "signing_secret": {"env": "TEAM_A_X"}}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    // Its answer is redacted as a GET is for a token that is not an admin.
    assert!(!text.contains("abc"), "{text}");

    // A queue made without dead_letter_queue: the default team-a.y.dlq is the tenant's.
    let (status, text) = call(
        &server,
        Method::PUT,
        "/v1/queues/team-a.y",
        A_ADMIN,
        Some(json!({})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert!(text.contains("team-a.y.dlq"), "{text}");

    // Its alerts' queues are its own; another tenant's are not.
    let (status, text) = call(
        &server,
        Method::GET,
        "/v1/queues/sluice.alerts.team-a.ops",
        A_ADMIN,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = call(
        &server,
        Method::GET,
        "/v1/queues/sluice.alerts.team-b.ops",
        A_ADMIN,
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
}
