//! The tokens the access tests share: an admin, and a producer and a consumer of `team-a.*`.
//! A test adds its own tokens after them with [`team_a`]'s `extra` config.

use super::TestServerBuilder;

pub const ADMIN: &str = "admin-token-0123456789";
pub const PRODUCER_A: &str = "producer-a-token-0123456789";
pub const CONSUMER_A: &str = "consumer-a-token-0123456789";

/// `[[auth.tokens]]` of the three, read from the environment [`team_a`] sets.
const TEAM_A: &str = r#"
[[auth.tokens]]
name = "ops"
token = { env = "TEST_ADMIN_TOKEN" }
roles = ["admin"]

[[auth.tokens]]
name = "team-a-producer"
token = { env = "TEST_PRODUCER_A" }
roles = ["producer"]
queues = ["team-a.*"]

[[auth.tokens]]
name = "team-a-consumer"
token = { env = "TEST_CONSUMER_A" }
roles = ["consumer"]
queues = ["team-a.*"]
"#;

/// A server with access control on: the three shared tokens, then `extra` (more config, such
/// as more tokens, whose secrets the caller passes with `.env`).
pub fn team_a(builder: TestServerBuilder, extra: &str) -> TestServerBuilder {
    builder
        .config(&format!("{TEAM_A}{extra}"))
        .env("TEST_ADMIN_TOKEN", ADMIN)
        .env("TEST_PRODUCER_A", PRODUCER_A)
        .env("TEST_CONSUMER_A", CONSUMER_A)
}

/// `method path` with `token` as a bearer token (none: without one) and a JSON body: the status
/// and the body's text, whatever they are (the access tests assert on both).
pub async fn call(
    server: &super::TestServer,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> (reqwest::StatusCode, String) {
    let mut request = server
        .client()
        .request(method, format!("{}{path}", server.url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    (status, response.text().await.unwrap_or_default())
}
