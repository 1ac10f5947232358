//! `TestServer`: the real `sluice` binary on a temp data dir (started by the test kit's
//! [`Launch`]), an HTTP client for it, and a few request helpers.
//!
//! It owns what the tests need to talk to a server and nothing else: it does not know about
//! particular queues or scenarios. Happy-path helpers (`put_queue`, `send`, `receive`, `ack`,
//! `nack`, `advance_clock`, `stats`) assert success; error cases go through `get`/`post`/`put`,
//! which return a [`Reply`] to inspect. This module is shared by the `it`, `crash`, `fuzz_api`,
//! `cli` and `browser` test binaries, each of which uses a part of it.
#![allow(dead_code)]

pub mod hooks;

pub mod destination;

/// Pinned Python tools in venvs of their own.
pub mod python;
pub mod tokens;

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sluice_core::Millis;
use sluice_testkit::server::{Launch, Server};

/// Longest single request (long polls are at most 20 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `sluice serve` with its own temp dir (the test kit's [`Server`]), and an HTTP
/// client for it; the child is killed on drop.
pub struct TestServer {
    server: Server,
    client: reqwest::Client,
}

/// Options for [`TestServer`].
#[derive(Debug, Clone, Default)]
pub struct TestServerBuilder {
    config: Option<String>,
    test_clock: bool,
    durability: Option<String>,
    env: Vec<(String, String)>,
}

impl TestServerBuilder {
    /// An environment variable of the server process (secrets of webhook endpoints, or
    /// `SLUICE_TEST_CLOCK_START_MS` to start the test clock at a given time).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// TOML written to a file and passed as `--config`.
    pub fn config(mut self, toml: &str) -> Self {
        self.config = Some(toml.to_owned());
        self
    }

    /// Runs with `SLUICE_TEST_CLOCK=1`: time moves only by [`TestServer::advance_clock`].
    pub fn test_clock(mut self, on: bool) -> Self {
        self.test_clock = on;
        self
    }

    /// `--durability fsync|os`.
    pub fn durability(mut self, durability: &str) -> Self {
        self.durability = Some(durability.to_owned());
        self
    }

    /// Starts the server and waits until it is ready.
    pub async fn start(self) -> TestServer {
        // `SLUICE_TEST_BINARY` runs the tests against another build, such as the code before
        // a fix, to see a regression test fail there.
        let binary = std::env::var_os("SLUICE_TEST_BINARY")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_sluice").into());
        let mut launch = Launch::new(binary);
        if let Some(toml) = &self.config {
            launch = launch.config(toml);
        }
        if let Some(durability) = &self.durability {
            launch = launch.args(["--durability", durability]);
        }
        if self.test_clock {
            launch = launch.env("SLUICE_TEST_CLOCK", "1");
        }
        for (name, value) in &self.env {
            launch = launch.env(name, value);
        }
        TestServer {
            server: launch.start().await,
            client: new_client(),
        }
    }
}

impl TestServer {
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The data directory the server runs on (`--data`), the same across restarts.
    pub fn data_dir(&self) -> PathBuf {
        self.server.data_dir()
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// SIGKILL, then waits for the process to be gone.
    pub async fn kill(&mut self) {
        self.server.kill().await;
    }

    /// SIGTERM, then waits (bounded) for the process to exit and returns its status.
    pub async fn terminate(&mut self) -> ExitStatus {
        self.server.terminate().await
    }

    /// Starts the server again on the same data dir and port (stopping it with SIGTERM first
    /// if it still runs), and waits until `/readyz` says ready.
    pub async fn restart(&mut self) {
        if self.server.is_running() {
            self.terminate().await;
        }
        // Pooled connections went with the old process.
        self.client = new_client();
        self.server.start_again().await;
    }

    /// [`TestServer::restart`] of a server that comes up not ready (on a full disk): waits
    /// only until `/readyz` answers.
    pub async fn restart_unready(&mut self) {
        if self.server.is_running() {
            self.terminate().await;
        }
        self.client = new_client();
        self.server.start_again_unready().await;
    }

    /// Sets (`Some`) or removes (`None`) an environment variable of the server process from
    /// the next start on.
    pub fn set_env(&mut self, name: &str, value: Option<&str>) {
        self.server.set_env(name, value);
    }

    /// The last `lines` lines of the server's stderr, across restarts.
    pub fn log_tail(&self, lines: usize) -> String {
        self.server.log_tail(lines)
    }

    // ---- raw requests ----------------------------------------------------------------------

    pub async fn request(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.url()));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        Reply::read(format!("{method} {path}"), response).await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.request(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.request(Method::POST, path, Some(&body)).await
    }

    /// A POST without a body (pause, resume, purge, drain).
    pub async fn post_empty(&self, path: &str) -> Reply {
        self.request(Method::POST, path, None).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Reply {
        self.request(Method::PUT, path, Some(&body)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.request(Method::DELETE, path, None).await
    }

    /// Sends `body` as it is, labelled `application/json`, for bodies that are not valid JSON.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Reply {
        let response = self
            .client
            .post(format!("{}{path}", self.url()))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        Reply::read(format!("POST {path}"), response).await
    }

    // ---- happy-path helpers (assert success) ------------------------------------------------

    /// `PUT /v1/queues/{name}` → the `queue` object.
    pub async fn put_queue(&self, name: &str, spec: Value) -> Value {
        let mut answer = self.put(&format!("/v1/queues/{name}"), spec).await.ok();
        answer["queue"].take()
    }

    /// `POST /v1/queues/{queue}/messages` with one message or `{"messages": [...]}`.
    pub async fn send(&self, queue: &str, message: Value) -> Value {
        self.post(&format!("/v1/queues/{queue}/messages"), message)
            .await
            .ok()
    }

    /// `POST /v1/queues/{queue}/receive` → the messages.
    pub async fn receive(&self, queue: &str, params: Value) -> Vec<Value> {
        let reply = self
            .post(&format!("/v1/queues/{queue}/receive"), params)
            .await;
        let answer = reply.ok();
        let _: sluice_wire::ReceiveOut = reply.parse();
        match answer {
            Value::Object(mut answer) => match answer.remove("messages") {
                Some(Value::Array(messages)) => messages,
                other => panic!("receive answer without a messages array: {other:?}"),
            },
            other => panic!("receive answer is not an object: {other}"),
        }
    }

    /// Acks one receipt.
    pub async fn ack(&self, queue: &str, receipt: &str) -> Value {
        self.post(
            &format!("/v1/queues/{queue}/ack"),
            json!({ "receipt": receipt }),
        )
        .await
        .ok()
    }

    /// `POST /v1/queues/{queue}/nack` with the whole request body.
    pub async fn nack(&self, queue: &str, nack: Value) -> Value {
        self.post(&format!("/v1/queues/{queue}/nack"), nack)
            .await
            .ok()
    }

    /// Moves the test clock forward and returns its new time in epoch ms.
    pub async fn advance_clock(&self, ms: Millis) -> Millis {
        let answer = self
            .post("/v1/_test/clock/advance", json!({ "ms": ms }))
            .await
            .ok();
        parse_time(&answer["now"])
    }

    /// The test clock's time, in epoch ms.
    pub async fn now(&self) -> Millis {
        self.advance_clock(0).await
    }

    /// `GET /v1/queues/{queue}/stats`.
    /// The `sluice_http_request_body_held_bytes` gauge, scraped.
    pub async fn body_bytes_held(&self) -> u64 {
        let text = self
            .client()
            .get(format!("{}/metrics", self.url()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|line| line.strip_prefix("sluice_http_request_body_held_bytes "))
            .expect("the gauge is exposed")
            .trim()
            .parse()
            .unwrap()
    }

    pub async fn stats(&self, queue: &str) -> Value {
        let reply = self.get(&format!("/v1/queues/{queue}/stats")).await;
        let stats = reply.ok();
        let _: sluice_wire::QueueStatsOut = reply.parse();
        stats
    }

    /// `GET /v1/queues/{queue}/messages/{message_id}` (asserts 200).
    pub async fn message_status(&self, queue: &str, message_id: &str) -> Value {
        self.get(&format!("/v1/queues/{queue}/messages/{message_id}"))
            .await
            .ok()
    }

    /// Polls `GET /v1/queues/{queue}/stats` every 50 ms until `done` holds, for at most
    /// `timeout` of real time; returns the last stats either way (the caller asserts).
    /// For work done by the server's background task, which runs every 500 ms.
    pub async fn stats_until(
        &self,
        queue: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let stats = self.stats(queue).await;
            if done(&stats) || tokio::time::Instant::now() >= deadline {
                return stats;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn new_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .build()
        .expect("reqwest client")
}

/// A response read whole: status and text, with checks for the API's shapes.
#[derive(Debug)]
pub struct Reply {
    /// `METHOD path`, for failure messages.
    pub request: String,
    pub status: StatusCode,
    pub text: String,
    /// The response headers (e.g. `Retry-After`).
    pub headers: reqwest::header::HeaderMap,
}

impl Reply {
    async fn read(request: String, response: reqwest::Response) -> Reply {
        let status = response.status();
        let headers = response.headers().clone();
        let text = response
            .text()
            .await
            .unwrap_or_else(|e| panic!("{request}: reading the body: {e}"));
        Reply {
            request,
            status,
            text,
            headers,
        }
    }

    /// A response header as text, if present (panics when it is not valid text).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|value| {
            value.to_str().unwrap_or_else(|e| {
                panic!(
                    "{}: header {name} is not text ({e}): {value:?}",
                    self.request
                )
            })
        })
    }

    /// The body as JSON (panics when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| {
            panic!(
                "{} answered {} with a body that is not JSON ({e}): {}",
                self.request, self.status, self.text
            )
        })
    }

    /// The body as a typed wire value, checking the shape against `sluice_wire`.
    pub fn parse<T: DeserializeOwned>(&self) -> T {
        serde_json::from_str(&self.text).unwrap_or_else(|e| {
            panic!(
                "{} answered {} with a body that is not a {} ({e}): {}",
                self.request,
                self.status,
                std::any::type_name::<T>(),
                self.text
            )
        })
    }

    /// Asserts 200 and returns the JSON body.
    pub fn ok(&self) -> Value {
        assert_eq!(
            self.status,
            StatusCode::OK,
            "{} answered {}: {}",
            self.request,
            self.status,
            self.text
        );
        self.json()
    }

    /// Asserts `status`, the error shape and `code`; returns the `error` object.
    pub fn error(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "{} answered {}: {}",
            self.request,
            self.status,
            self.text
        );
        let error = self.error_shape();
        assert_eq!(
            error["code"], code,
            "{} answered {}: {}",
            self.request, self.status, self.text
        );
        error
    }

    /// Asserts some 4xx (never 5xx) and the error shape; returns the `error` object.
    pub fn client_error(&self) -> Value {
        assert!(
            self.status.is_client_error(),
            "{} answered {} (expected 4xx): {}",
            self.request,
            self.status,
            self.text
        );
        self.error_shape()
    }

    /// Checks `{"error": {"code": "...", "message": "...", "details"?: ...}}` and nothing else.
    pub fn error_shape(&self) -> Value {
        let body = self.json();
        let context = format!("{} answered {}: {}", self.request, self.status, self.text);
        let top = body
            .as_object()
            .unwrap_or_else(|| panic!("error body is not an object; {context}"));
        assert_eq!(
            top.keys().collect::<Vec<_>>(),
            ["error"],
            "error body has other top-level keys; {context}"
        );
        let error = top["error"]
            .as_object()
            .unwrap_or_else(|| panic!("`error` is not an object; {context}"));
        for key in error.keys() {
            assert!(
                ["code", "message", "details"].contains(&key.as_str()),
                "unexpected key {key:?} in error; {context}"
            );
        }
        let code = error
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            !code.is_empty(),
            "error.code missing or not a string; {context}"
        );
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(
            !message.is_empty(),
            "error.message missing or not a string; {context}"
        );
        body["error"].clone()
    }
}

/// Parses an RFC 3339 string value into epoch ms.
pub fn parse_time(value: &Value) -> Millis {
    value
        .as_str()
        .and_then(sluice_wire::parse_rfc3339)
        .unwrap_or_else(|| panic!("not an RFC 3339 time: {value}"))
}

/// Formats epoch ms as RFC 3339.
pub fn format_time(ms: Millis) -> String {
    sluice_wire::format_rfc3339(ms)
}

/// The `message_id` of an enqueue answer or a message, as text.
pub fn message_id(value: &Value) -> String {
    value["message_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no message_id in {value}"))
        .to_owned()
}

/// An RFC 3339 time for a URL query string (`:` and `+` escaped).
pub fn query_time(ms: Millis) -> String {
    format_time(ms).replace(':', "%3A").replace('+', "%2B")
}

/// The receipt of a received message.
pub fn receipt(message: &Value) -> &str {
    message["receipt"]
        .as_str()
        .unwrap_or_else(|| panic!("message without a receipt: {message}"))
}
