//! `TestServer`: the real `sluice` binary on a temp data dir, and a few request helpers.
//!
//! It owns what the tests need to talk to a server and nothing else: it does not know about
//! particular queues or scenarios. Happy-path helpers (`put_queue`, `send`, `receive`, `ack`,
//! `nack`, `advance_clock`, `stats`) assert success; error cases go through `get`/`post`/`put`,
//! which return a [`Reply`] to inspect. This module is shared by the `it` and `crash` test
//! binaries, each of which uses a part of it.
#![allow(dead_code)]

pub mod hooks;

pub mod destination;

/// Pinned Python tools in venvs of their own.
pub mod python;
pub mod tokens;

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use sluice_core::Millis;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long a start may take until the ready line, including retries for a busy port.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long SIGTERM may take to stop the server.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest single request (long polls are at most 20 s).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// What the server prints on stdout when it is ready, followed by its URL.
const READY_PREFIX: &str = "sluice listening on ";

/// A running `sluice serve` with its own temp dir; the child is killed on drop.
pub struct TestServer {
    root: TempDir,
    builder: TestServerBuilder,
    /// `127.0.0.1:0` before the first start, then the port it got, so restarts keep the URL.
    listen: String,
    url: String,
    client: reqwest::Client,
    child: Option<Child>,
    starts: u32,
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

    /// Starts the server and waits for its ready line.
    pub async fn start(self) -> TestServer {
        let root = tempfile::Builder::new()
            .prefix("sluice-it-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir_all(root.path().join("data")).expect("data dir");
        if let Some(toml) = &self.config {
            std::fs::write(root.path().join("sluice.toml"), toml).expect("config file");
        }
        let mut server = TestServer {
            root,
            builder: self,
            listen: "127.0.0.1:0".to_owned(),
            url: String::new(),
            client: new_client(),
            child: None,
            starts: 0,
        };
        server.launch().await;
        server
    }
}

impl TestServer {
    pub fn builder() -> TestServerBuilder {
        TestServerBuilder::default()
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The data directory the server runs on (`--data`), the same across restarts.
    pub fn data_dir(&self) -> PathBuf {
        self.root.path().join("data")
    }

    /// The server's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// SIGKILL, then waits for the process to be gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().expect("SIGKILL the server");
            child.wait().await.expect("wait for the killed server");
        }
    }

    /// SIGTERM, then waits (bounded) for the process to exit and returns its status.
    pub async fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server is not running");
        let pid = child.id().expect("running server has a pid");
        // The workspace forbids `unsafe`, so the signal goes through kill(1) rather than libc.
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill(1)");
        assert!(sent.success(), "kill -TERM {pid} failed");
        match tokio::time::timeout(STOP_TIMEOUT, child.wait()).await {
            Ok(status) => status.expect("wait for the server"),
            Err(_) => {
                let _ = child.start_kill();
                panic!(
                    "server did not stop within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.log_tail(40)
                );
            }
        }
    }

    /// Starts the server again on the same data dir and port (stopping it with SIGTERM first
    /// if it still runs).
    pub async fn restart(&mut self) {
        if self.child.is_some() {
            self.terminate().await;
        }
        // Pooled connections went with the old process.
        self.client = new_client();
        self.launch().await;
    }

    /// Sets (`Some`) or removes (`None`) an environment variable of the server process from
    /// the next start on.
    pub fn set_env(&mut self, name: &str, value: Option<&str>) {
        self.builder.env.retain(|(n, _)| n != name);
        if let Some(value) = value {
            self.builder.env.push((name.to_owned(), value.to_owned()));
        }
    }

    /// The last `lines` lines of the server's stderr, across restarts.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    // ---- raw requests ----------------------------------------------------------------------

    pub async fn request(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.url));
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
            .post(format!("{}{path}", self.url))
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

    // ---- process management ---------------------------------------------------------------

    fn log_path(&self) -> PathBuf {
        self.root.path().join("server.log")
    }

    /// Spawns the binary and reads its ready line. A restart on a fixed port retries while the
    /// old socket is not yet free (the process then exits before printing the ready line).
    async fn launch(&mut self) {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            self.starts += 1;
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.log_path())
                .expect("open server log");
            use std::io::Write as _;
            writeln!(
                log,
                "=== test harness: start #{} on {} ===",
                self.starts, self.listen
            )
            .expect("write server log");

            // `SLUICE_TEST_BINARY` runs the tests against another build, such as the code
            // before a fix, to see a regression test fail there.
            let binary = std::env::var_os("SLUICE_TEST_BINARY")
                .unwrap_or_else(|| env!("CARGO_BIN_EXE_sluice").into());
            let mut command = Command::new(binary);
            command
                .arg("serve")
                .arg("--listen")
                .arg(&self.listen)
                .arg("--data")
                .arg(self.root.path().join("data"))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .kill_on_drop(true);
            if self.builder.config.is_some() {
                command
                    .arg("--config")
                    .arg(self.root.path().join("sluice.toml"));
            }
            if let Some(durability) = &self.builder.durability {
                command.arg("--durability").arg(durability);
            }
            if self.builder.test_clock {
                command.env("SLUICE_TEST_CLOCK", "1");
            } else {
                command.env_remove("SLUICE_TEST_CLOCK");
            }
            for (name, value) in &self.builder.env {
                command.env(name, value);
            }
            let mut child = command.spawn().expect("spawn the sluice binary");
            let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();

            match tokio::time::timeout_at(deadline, stdout.next_line()).await {
                Ok(Ok(Some(line))) => {
                    let url = line
                        .strip_prefix(READY_PREFIX)
                        .unwrap_or_else(|| {
                            panic!("first stdout line is not the ready line: {line:?}")
                        })
                        .trim()
                        .to_owned();
                    let port = url
                        .rsplit(':')
                        .next()
                        .and_then(|port| port.parse::<u16>().ok())
                        .unwrap_or_else(|| panic!("no port in the ready line {line:?}"));
                    assert_ne!(port, 0, "ready line names port 0: {line:?}");
                    if self.url.is_empty() {
                        self.url = url;
                        self.listen = format!("127.0.0.1:{port}");
                    } else {
                        assert_eq!(
                            url, self.url,
                            "a restart on {} announced another URL",
                            self.listen
                        );
                    }
                    // Keep the pipe drained so a chatty server never blocks on stdout.
                    tokio::spawn(
                        async move { while let Ok(Some(_)) = stdout.next_line().await {} },
                    );
                    self.child = Some(child);
                    return;
                }
                Ok(_) => {
                    // stdout closed: the process is exiting without being ready.
                    let status = child.wait().await.expect("wait for the server");
                    let port_is_fixed = !self.listen.ends_with(":0");
                    if port_is_fixed
                        && tokio::time::Instant::now() + Duration::from_millis(200) < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    panic!(
                        "sluice serve exited with {status} before its ready line\n{}",
                        self.log_tail(40)
                    );
                }
                Err(_) => {
                    let _ = child.start_kill();
                    panic!(
                        "sluice serve printed no ready line within {READY_TIMEOUT:?}\n{}",
                        self.log_tail(40)
                    );
                }
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- server log ({}) ----\n{}\n---- end of server log ----",
                self.url,
                self.log_tail(80)
            );
        }
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
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
