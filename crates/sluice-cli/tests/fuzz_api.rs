//! Property-based fuzzing of the HTTP API of the real `sluice serve` binary: every route of the
//! OpenAPI document the server serves (so a new route is fuzzed without being listed here) gets
//! arbitrary bytes, arbitrary JSON, and objects made of the API's own field names with arbitrary
//! values, on real and made-up queues, message ids and webhook names.
//!
//! Properties: no answer is a 5xx (a panic in a handler would be a 503 `unavailable`; only a
//! full queue's `queue_full` may answer 503), every error answer is the JSON error shape, and
//! the server is still up afterwards. `SLUICE_FUZZ_CASES` requests (default 400, about ten
//! seconds); the long run: `SLUICE_FUZZ_CASES=100000 cargo test --release -p sluice-cli --test fuzz_api`.

#[path = "it/support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{Map, Value, json};
use support::TestServer;

const QUEUE: &str = "fz";
const WEBHOOK: &str = "fz-hook";
/// Long polls and drains are cut to this, so one case never waits long.
const WAIT_MS_MAX: u64 = 50;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn fuzz_every_route_answers_bad_input_with_a_clean_4xx() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let server = runtime.block_on(TestServer::builder().start());
    let document = runtime.block_on(server.get("/v1/openapi.json")).ok();
    let routes = routes(&document);
    assert!(routes.len() >= 20, "the document lists only {routes:?}");
    let fields: Vec<String> = field_names(&document).into_iter().collect();
    let client = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("client");
    runtime.block_on(recreate(&server));

    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(400);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        proptest::sample::select(routes),
        path_values(),
        body(fields),
    );
    let statuses = std::sync::Mutex::new(std::collections::BTreeMap::<u16, u64>::new());
    let outcome = runner.run(&strategy, |((method, template), values, body)| {
        runtime.block_on(async {
            let path = fill(&template, &values);
            let answer = send(&client, server.url(), &method, &path, body).await?;
            *statuses.lock().unwrap().entry(answer.status).or_default() += 1;
            if method == "DELETE" && template == "/v1/queues/{queue}" {
                recreate(&server).await;
            }
            check(&method, &path, answer)
        })
    });
    println!(
        "fuzzed the API: answers by status {:?}",
        statuses.lock().unwrap()
    );
    if let Err(failure) = outcome {
        panic!("{failure}\nserver log:\n{}", server.log_tail(30));
    }
    let health = runtime.block_on(server.get("/healthz"));
    assert_eq!(
        health.status, 200,
        "the server is not healthy after the fuzzing"
    );
}

/// `(METHOD, path template)` of every operation in the document.
fn routes(document: &Value) -> Vec<(String, String)> {
    let mut routes = Vec::new();
    for (path, operations) in document["paths"].as_object().expect("paths") {
        for method in operations.as_object().expect("operations").keys() {
            routes.push((method.to_uppercase(), path.clone()));
        }
    }
    routes
}

/// Every property name of every schema, so generated objects use the API's own words.
fn field_names(document: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, names: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::Object(properties)) = map.get("properties") {
                    names.extend(properties.keys().cloned());
                }
                map.values().for_each(|v| walk(v, names));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, names)),
            _ => {}
        }
    }
    let mut names = BTreeSet::new();
    walk(document, &mut names);
    names
}

/// Values for `{queue}`, `{message_id}` and `{name}`: mostly real ones, sometimes not.
#[derive(Debug, Clone)]
struct PathValues {
    queue: String,
    message_id: String,
    name: String,
}

fn path_segment(real: &'static str) -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just(real.to_owned()),
        1 => Just(format!("{real}.dlq")),
        1 => "[a-z0-9._-]{1,300}",
        1 => any::<String>().prop_map(|s| percent_encode(&s)),
    ]
}

fn path_values() -> impl Strategy<Value = PathValues> {
    (
        path_segment(QUEUE),
        prop_oneof![
            Just("0190d6d2-8f9c-7000-8000-000000000001".to_owned()),
            "[0-9a-f]{32}",
            any::<String>().prop_map(|s| percent_encode(&s)),
        ],
        path_segment(WEBHOOK),
    )
        .prop_map(|(queue, message_id, name)| PathValues {
            queue,
            message_id,
            name,
        })
}

fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    if out.is_empty() { "x".into() } else { out }
}

fn fill(template: &str, values: &PathValues) -> String {
    template
        .replace("{queue}", &values.queue)
        .replace("{message_id}", &values.message_id)
        .replace("{name}", &values.name)
}

/// A request body: nothing, bytes, JSON, or an object of API field names.
#[derive(Debug, Clone)]
enum Body {
    None,
    Bytes(Vec<u8>),
    Json(Value),
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (0_u64..5_000).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[ -~]{0,40}".prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        proptest::sample::select(vec![
            "fifo",
            "per_key",
            "drop",
            "dead_letter",
            "ready",
            "delayed",
            "in_flight",
            "fz",
            "fz.dlq",
            "2026-01-01T00:00:00Z",
            "1d",
            "standard_webhooks",
            "github",
            "hmac",
            ".body",
            "select(.)",
            "{\"type\":\"object\"}",
        ])
        .prop_map(Value::from),
    ]
}

fn body(fields: Vec<String>) -> impl Strategy<Value = Body> {
    let json = json_leaf().prop_recursive(4, 48, 8, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::from),
            proptest::collection::btree_map(proptest::sample::select(fields.clone()), inner, 0..8)
                .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    });
    prop_oneof![
        1 => Just(Body::None),
        2 => proptest::collection::vec(any::<u8>(), 0..200).prop_map(Body::Bytes),
        8 => json.prop_map(|value| Body::Json(tame(value))),
    ]
}

/// Keeps fuzzed values from leaving this machine or waiting: every `url` points at a closed
/// loopback port, and waits are short.
fn tame(mut value: Value) -> Value {
    fn walk(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, field) in map.iter_mut() {
                    match key.as_str() {
                        "url" => *field = json!("http://127.0.0.1:9/fuzz"),
                        "wait_ms" | "timeout_ms" if field.as_u64().unwrap_or(0) > WAIT_MS_MAX => {
                            *field = json!(WAIT_MS_MAX)
                        }
                        _ => walk(field),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut value);
    value
}

struct Answer {
    status: u16,
    body: String,
}

async fn send(
    client: &reqwest::Client,
    base: &str,
    method: &str,
    path: &str,
    body: Body,
) -> Result<Answer, TestCaseError> {
    let method = Method::from_bytes(method.as_bytes()).expect("method");
    let mut request = client.request(method, format!("{base}{path}"));
    request = match body {
        Body::None => request,
        Body::Bytes(bytes) => request.body(bytes),
        Body::Json(value) => request.json(&value),
    };
    let response = request.send().await.map_err(|error| {
        TestCaseError::fail(format!(
            "{path}: no answer (server down or stalled): {error}"
        ))
    })?;
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    Ok(Answer { status, body })
}

fn check(method: &str, path: &str, answer: Answer) -> Result<(), TestCaseError> {
    let Answer { status, body } = answer;
    if status < 400 {
        return Ok(());
    }
    let error: Value = serde_json::from_str(&body).map_err(|_| {
        TestCaseError::fail(format!(
            "{method} {path}: {status} with a body that is not JSON: {body}"
        ))
    })?;
    let code = error["error"]["code"].as_str().unwrap_or_default();
    prop_assert!(
        !code.is_empty() && error["error"]["message"].is_string(),
        "{method} {path}: {status} without the error shape: {body}"
    );
    prop_assert!(
        status < 500 || (status == 503 && code == "queue_full"),
        "{method} {path}: server error {status}: {body}"
    );
    Ok(())
}

/// The queue and webhook endpoint the fuzzed requests mostly aim at.
async fn recreate(server: &TestServer) {
    server
        .put(&format!("/v1/queues/{QUEUE}"), json!({"max_attempts": 2}))
        .await;
    server
        .put(
            &format!("/v1/webhooks/{WEBHOOK}"),
            json!({"queue": QUEUE, "verify": {"scheme": "hmac", "header": "x-signature", "secrets": ["s"]}}),
        )
        .await;
}
