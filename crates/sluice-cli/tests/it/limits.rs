//! Bounded by construction: what one request, many requests and many connections may hold
//! (`[limits]` in config.default.toml, docs/http-api.md "Limits").

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::TestServer;

/// A batch of `count` empty messages: 3 bytes of body per message.
fn empty_messages(count: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(16 + 3 * count);
    body.extend_from_slice(br#"{"messages":["#);
    for i in 0..count {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(b"{}");
    }
    body.extend_from_slice(b"]}");
    body
}

/// A field of /proc/PID/status, in KiB (`VmHWM`: peak resident memory; `VmRSS`: now).
fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status
        .lines()
        .find(|line| line.starts_with(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn address(server: &TestServer) -> String {
    server.url().trim_start_matches("http://").to_owned()
}

/// Posts `body` as JSON; the status and the parsed answer.
async fn post_bytes(server: &TestServer, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let response = server
        .client()
        .post(format!("{}{path}", server.url()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let status = response.status();
    let text = response.text().await.unwrap();
    let answer = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!("POST {path}: {status} with a body that is not JSON ({e}): {text}")
    });
    (status, answer)
}

/// Reads from `stream` until the server closes it; how long that took, or `None` when it
/// was still open after `limit`.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buffer = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(
            tokio::time::Instant::from_std(started + limit),
            stream.read(&mut buffer),
        )
        .await
        {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn huge_batches_of_empty_messages_are_refused_with_bounded_memory() {
    // Proves a batch's count is checked before its messages are built: 9 MB (3 million empty
    // messages) and 16 MiB batches, alone and six at once, each get 413 too_large with a JSON
    // error, and the server's peak memory stays under 150 MB (before: 880 MB for one 9 MB batch,
    // 1.67 GB for one of 16 MiB).
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    let pid = server.pid().unwrap();
    let nine_mb = empty_messages(3_000_000);
    let sixteen_mib = empty_messages((16 * 1024 * 1024 - 20) / 3);
    assert!(sixteen_mib.len() <= 16 * 1024 * 1024);
    const PEAK_KIB_MAX: u64 = 150 * 1024;
    // Six at once hold 77 MB of bodies, each possibly twice while it is collected into one
    // buffer; the old code took one 9 MB batch alone to 880 MB.
    const CONCURRENT_PEAK_KIB_MAX: u64 = 256 * 1024;

    let (status, answer) = post_bytes(&server, "/v1/queues/q/messages", nine_mb.clone()).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert_eq!(answer["error"]["code"], "too_large");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3000000 messages"),
        "{answer}"
    );
    let peak = proc_status_kib(pid, "VmHWM");
    assert!(
        peak < PEAK_KIB_MAX,
        "one 9 MB batch took the server to {} MiB",
        peak / 1024
    );

    let mut requests = Vec::new();
    for body in [
        &nine_mb,
        &sixteen_mib,
        &nine_mb,
        &sixteen_mib,
        &nine_mb,
        &sixteen_mib,
    ] {
        let client = server.client().clone();
        let url = format!("{}/v1/queues/q/messages", server.url());
        let body = body.clone();
        requests.push(tokio::spawn(async move {
            let response = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = response.status();
            (status, response.json::<Value>().await.unwrap())
        }));
    }
    for request in requests {
        let (status, answer) = request.await.unwrap();
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
        assert_eq!(answer["error"]["code"], "too_large", "{answer}");
    }
    let peak = proc_status_kib(pid, "VmHWM");
    assert!(
        peak < CONCURRENT_PEAK_KIB_MAX,
        "six huge batches at once took the server to {} MiB",
        peak / 1024
    );

    // A batch within the caps is still stored.
    let answer = server
        .send("q", json!({"messages": vec![json!({"body": 1}); 1000]}))
        .await;
    assert_eq!(answer["results"].as_array().unwrap().len(), 1000);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn huge_receipt_and_header_lists_are_refused_with_bounded_memory() {
    // Other lists are counted before they are built too. A server of its own: after the huge
    // batches the allocator keeps the pages they freed, which would hide (or inflate) this peak.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    let pid = server.pid().unwrap();
    const PEAK_KIB_MAX: u64 = 150 * 1024;
    let mut receipts = br#"{"receipts":["#.to_vec();
    receipts.extend(std::iter::repeat_n(&b"\"\","[..], 3_000_000).flatten());
    receipts.extend_from_slice(br#""x"]}"#);
    let (status, answer) = post_bytes(&server, "/v1/queues/q/ack", receipts).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    let mut headers = br#"{"body":1,"headers":{"#.to_vec();
    for i in 0..1_000_000 {
        headers.extend_from_slice(format!("\"{i}\":\"\",").as_bytes());
    }
    headers.extend_from_slice(br#""x":""}}"#);
    let (status, answer) = post_bytes(&server, "/v1/queues/q/messages", headers).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("headers: 1000001 headers"),
        "{answer}"
    );
    let peak = proc_status_kib(pid, "VmHWM");
    assert!(
        peak < PEAK_KIB_MAX,
        "huge receipt and header lists took the server to {} MiB",
        peak / 1024
    );
    let answer = server
        .send("q", json!({"body": 1, "headers": {"a": "b"}}))
        .await;
    assert_eq!(answer["created"], true, "{answer}");
}

#[tokio::test]
async fn bodies_beyond_the_in_flight_budget_get_503_overloaded() {
    // Proves the global budget for request bodies: while one upload holds 16 MB of a 20 MiB
    // budget, a 9 MB request gets 503 overloaded with Retry-After (not more memory); once the
    // upload is gone the same request is taken (and refused for its count, 413).
    let server = TestServer::builder()
        .config("[limits]\nbody_bytes_in_flight = 20971520\n")
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    let mut upload = TcpStream::connect(address(&server)).await.unwrap();
    upload
        .write_all(
            format!(
                "POST /v1/queues/q/messages HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 16000000\r\n\r\n{{\"messages\":[",
                address(&server)
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // Bodies are charged as they arrive: the upload sends all but its last bytes, and holds
    // them in the budget until it ends.
    upload.write_all(&vec![b' '; 15_999_000]).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.body_bytes_held().await < 15_900_000 {
        assert!(Instant::now() < deadline, "the upload was never charged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let nine_mb = empty_messages(3_000_000);
    let response = server
        .client()
        .post(format!("{}/v1/queues/q/messages", server.url()))
        .body(nine_mb.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "overloaded", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("body_bytes_in_flight"),
        "{answer}"
    );
    // Small requests still fit.
    server.send("q", json!({"body": "small"})).await;

    drop(upload);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, answer) = post_bytes(&server, "/v1/queues/q/messages", nine_mb.clone()).await;
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            assert_eq!(answer["error"]["code"], "too_large");
            break;
        }
        assert_eq!(answer["error"]["code"], "overloaded", "{answer}");
        assert!(
            Instant::now() < deadline,
            "the closed upload's charge never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn long_polls_and_drains_on_queues_that_do_not_exist_leave_nothing_behind() {
    // Proves the notifier keeps no entry for names that 404: 1,000 receives and 1,000 drains
    // on distinct 60 KiB names (near the longest URI a client sends) grow the server's memory
    // by less than 48 MiB (before: every name stayed, 2,000 × 60 KiB = 117 MiB, never freed).
    let server = TestServer::builder().start().await;
    let pid = server.pid().unwrap();
    let before = proc_status_kib(pid, "VmRSS");
    let name_tail = "n".repeat(60 * 1024);
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let client = server.client().clone();
        let url = server.url().to_owned();
        let name_tail = name_tail.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..125 {
                let name = format!("{worker}-{i}-{name_tail}");
                for (route, body) in [
                    ("receive", json!({"wait_ms": 1000})),
                    ("drain", json!({"timeout_ms": 1000})),
                ] {
                    let response = client
                        .post(format!("{url}/v1/queues/{name}/{route}"))
                        .json(&body)
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(response.status(), StatusCode::NOT_FOUND, "{route}");
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let after = proc_status_kib(pid, "VmRSS");
    let grown_mib = after.saturating_sub(before) / 1024;
    assert!(
        grown_mib < 48,
        "2,000 requests on names that do not exist left {grown_mib} MiB behind"
    );
}

#[tokio::test]
async fn slow_half_open_and_idle_connections_are_closed_but_long_polls_are_not() {
    // Proves the header-read timeout on plain HTTP: connections that send a partial request
    // line and nothing more (slowloris), or nothing at all, and an idle keep-alive connection
    // are closed within the timeout (1 s here, plus slack); a long poll of 3 s on the same
    // server is answered in full.
    let server = TestServer::builder()
        .config("[limits]\nheader_read_timeout_ms = 1000\n")
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    let slack = Duration::from_secs(4);

    let mut half_open = Vec::new();
    for i in 0..200 {
        let mut stream = TcpStream::connect(address(&server)).await.unwrap();
        if i % 2 == 0 {
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHo")
                .await
                .unwrap();
        }
        half_open.push(stream);
    }
    let long_poll = {
        let client = server.client().clone();
        let url = format!("{}/v1/queues/q/receive", server.url());
        tokio::spawn(async move {
            let started = Instant::now();
            let response = client
                .post(url)
                .json(&json!({"wait_ms": 3000}))
                .send()
                .await
                .unwrap();
            (response.status(), started.elapsed())
        })
    };
    for (i, stream) in half_open.iter_mut().enumerate() {
        let closed = closed_within(stream, Duration::from_secs(1) + slack).await;
        assert!(closed.is_some(), "half-open connection {i} is still open");
    }

    let mut idle = TcpStream::connect(address(&server)).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 12];
    idle.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    let closed = closed_within(&mut idle, Duration::from_secs(1) + slack).await;
    assert!(closed.is_some(), "an idle keep-alive connection stays open");

    let (status, waited) = long_poll.await.unwrap();
    assert_eq!(status, StatusCode::OK, "the long poll was cut");
    assert!(waited >= Duration::from_millis(2900), "{waited:?}");
}

#[tokio::test]
async fn connections_beyond_the_limit_wait_until_others_close() {
    // Proves [limits] max_connections: with 4 connections open, a fifth is not served (its
    // request gets no answer); when one of the four closes, the fifth is answered.
    let server = TestServer::builder()
        .config("[limits]\nmax_connections = 4\n")
        .start()
        .await;
    let mut open = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(address(&server)).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = [0u8; 12];
        stream.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 200");
        open.push(stream);
    }
    let mut fifth = TcpStream::connect(address(&server)).await.unwrap();
    fifth
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut answer = [0u8; 12];
    let waited = tokio::time::timeout(Duration::from_secs(1), fifth.read_exact(&mut answer)).await;
    assert!(waited.is_err(), "a fifth connection was served");

    drop(open.pop());
    tokio::time::timeout(Duration::from_secs(10), fifth.read_exact(&mut answer))
        .await
        .expect("the fifth connection is served once one closes")
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
}

const ADMIN: &str = "admin-token-0123456789";
const PRODUCER: &str = "producer-token-0123456789";

fn tokens_config(limits: &str) -> String {
    format!(
        r#"
{limits}
[[auth.tokens]]
name = "ops"
token = {{ env = "TEST_ADMIN_TOKEN" }}
roles = ["admin"]

[[auth.tokens]]
name = "producer"
token = {{ env = "TEST_PRODUCER_TOKEN" }}
roles = ["producer"]
queues = ["*"]
"#
    )
}

async fn start_with_tokens(limits: &str) -> TestServer {
    TestServer::builder()
        .config(&tokens_config(limits))
        .env("TEST_ADMIN_TOKEN", ADMIN)
        .env("TEST_PRODUCER_TOKEN", PRODUCER)
        .start()
        .await
}

/// One login through the form: the status, and the session cookie (`name=value`) if any.
async fn log_in(
    client: &reqwest::Client,
    server: &TestServer,
    token: &str,
) -> (StatusCode, Option<String>, String) {
    let response = client
        .post(format!("{}/ui/login", server.url()))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    let status = response.status();
    let cookie = response.headers().get("set-cookie").map(|value| {
        value
            .to_str()
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned()
    });
    (status, cookie, response.text().await.unwrap())
}

async fn session_works(client: &reqwest::Client, server: &TestServer, cookie: &str) -> bool {
    let response = client
        .get(format!("{}/v1/queues", server.url()))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    response.status() == StatusCode::OK
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_login_flood_by_one_token_signs_no_one_else_out() {
    // Proves sessions are capped per token: 10,001 logins with a producer token (more than
    // the whole table held before) keep only its newest 16 sessions, and the admin's session
    // from before the flood still works (before: the flood evicted it).
    let server = start_with_tokens("").await;
    let client = no_redirects();
    let (status, admin, _) = log_in(&client, &server, ADMIN).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let admin = admin.unwrap();
    let (_, first_of_flood, _) = log_in(&client, &server, PRODUCER).await;
    let first_of_flood = first_of_flood.unwrap();

    let mut tasks = Vec::new();
    for _ in 0..10 {
        let client = client.clone();
        let url = format!("{}/ui/login", server.url());
        tasks.push(tokio::spawn(async move {
            for _ in 0..1000 {
                let response = client
                    .post(&url)
                    .form(&[("token", PRODUCER)])
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status(), StatusCode::SEE_OTHER);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let (status, newest, _) = log_in(&client, &server, PRODUCER).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        session_works(&client, &server, &admin).await,
        "the flood signed the admin out"
    );
    assert!(
        !session_works(&client, &server, &first_of_flood).await,
        "the flooding token's oldest session is gone"
    );
    assert!(session_works(&client, &server, &newest.unwrap()).await);
}

#[tokio::test]
async fn a_full_session_table_refuses_logins_and_keeps_everyone_signed_in() {
    // Proves [limits] max_sessions: with the table full, a login that would need a new place
    // is refused (503, saying why) and no one is signed out; a token at its own cap still
    // signs in, in place of its own oldest session.
    let server = start_with_tokens("[limits]\nsessions_per_token = 2\nsessions_max = 3\n").await;
    let client = no_redirects();
    let mut admin = Vec::new();
    for _ in 0..2 {
        let (status, cookie, _) = log_in(&client, &server, ADMIN).await;
        assert_eq!(status, StatusCode::SEE_OTHER);
        admin.push(cookie.unwrap());
    }
    let (status, producer, _) = log_in(&client, &server, PRODUCER).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let producer = producer.unwrap();

    let (status, cookie, page) = log_in(&client, &server, PRODUCER).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{page}");
    assert!(cookie.is_none());
    assert!(page.contains("max_sessions"), "{page}");
    for cookie in admin.iter().chain([&producer]) {
        assert!(
            session_works(&client, &server, cookie).await,
            "still signed in"
        );
    }

    let (status, newest, _) = log_in(&client, &server, ADMIN).await;
    assert_eq!(
        status,
        StatusCode::SEE_OTHER,
        "at its own cap, a token replaces its oldest"
    );
    assert!(session_works(&client, &server, &newest.unwrap()).await);
    assert!(
        !session_works(&client, &server, &admin[0]).await,
        "the admin's oldest"
    );
    assert!(session_works(&client, &server, &admin[1]).await);
    assert!(
        session_works(&client, &server, &producer).await,
        "another identity's is kept"
    );
}
