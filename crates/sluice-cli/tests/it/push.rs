//! Push delivery: a queue with a `push` destination is delivered by the server to an HTTP URL
//! (here an in-process [`Destination`]). Retry timing runs on the test clock; a push worker polls
//! at most every second of real time and is woken by enqueues and clock advances, so the real
//! waits below are bounded polls, and "nothing more arrives" checks run while the test clock
//! stands still, where an early retry cannot be excused by slowness.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use sluice_webhooks::verify::{Request, Scheme, Verifier, VerifyError};

use crate::support::destination::{Answer, Destination, Recorded, Script};
use crate::support::{TestServer, message_id, parse_time};

/// Longest wait for something the server should do promptly.
const WAIT: Duration = Duration::from_secs(20);
/// How long "nothing more happens" is watched (a worker polls at least every second).
const QUIET: Duration = Duration::from_millis(1_200);
/// The Standard Webhooks example secret.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Polls `GET /v1/queues/{queue}/messages/{id}` until `done` holds (for at most [`WAIT`]);
/// returns the last status either way (the caller asserts).
async fn status_until(
    server: &TestServer,
    queue: &str,
    id: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = server.message_status(queue, id).await;
        if done(&status) || tokio::time::Instant::now() >= deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the queue is empty and its destination delivered `n` (acks included).
async fn drained(server: &TestServer, queue: &str, n: u64, timeout: Duration) -> Value {
    let stats = server
        .stats_until(queue, timeout, |s| {
            s["ready"] == 0
                && s["delayed"] == 0
                && s["in_flight"] == 0
                && s["counters"]["acked"] == n
                && s["push"]["delivered"] == n
        })
        .await;
    assert_eq!(stats["ready"], 0, "{stats}");
    assert_eq!(stats["delayed"], 0, "{stats}");
    assert_eq!(stats["in_flight"], 0, "{stats}");
    assert_eq!(stats["counters"]["acked"], n, "{stats}");
    assert_eq!(stats["push"]["delivered"], n, "{stats}");
    stats
}

/// Checks a delayed message (`status`) is due `expected_delay_ms` from now, moves the test clock
/// to 1 ms before that and checks nothing arrives at the destination, then to the due time and
/// waits for the retry. Returns all requests so far.
async fn retry_exactly_at(
    server: &TestServer,
    destination: &Destination,
    status: &Value,
    expected_delay_ms: i64,
) -> Vec<Recorded> {
    let before = destination.count();
    let now = server.now().await;
    let visible_at = parse_time(&status["visible_at"]);
    assert_eq!(
        visible_at - now,
        expected_delay_ms,
        "retry not scheduled after the expected delay: {status}"
    );
    server.advance_clock(expected_delay_ms - 1).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        destination.count(),
        before,
        "a retry arrived 1 ms of server time early: {:?}",
        destination.requests().last()
    );
    server.advance_clock(1).await;
    let requests = destination.wait_for(before + 1, WAIT).await;
    assert_eq!(
        requests.len(),
        before + 1,
        "the retry did not come once due"
    );
    requests
}

fn ids_in(requests: &[Recorded]) -> Vec<String> {
    requests.iter().map(|r| r.message_id().to_owned()).collect()
}

#[tokio::test]
async fn each_message_is_pushed_once_with_its_body_and_headers() {
    // Proves the basic contract: 20 messages of different JSON shapes each reach the destination
    // exactly once, as a POST to the configured URL with the body as stored (same bytes as sent),
    // content-type application/json, sluice-message-id / sluice-attempt 1 / sluice-queue, and
    // idempotency-key exactly for messages with an id; every message ends acked, the queue
    // empty, and stats.push counts 20 deliveries with last_status 200.
    let destination = Destination::start().await;
    let server = TestServer::builder().start().await;
    let queue = server
        .put_queue("q", json!({"push": {"url": destination.url("/in")}}))
        .await;
    assert_eq!(queue["config"]["push"]["url"], destination.url("/in"));

    let mut sent: HashMap<String, (Value, Option<String>)> = HashMap::new();
    for i in 0..20 {
        let body = match i % 4 {
            0 => json!({"n": i, "nested": {"list": [1, 2.5, "three"], "text": "h\u{e9}llo \"q\""}}),
            1 => json!(format!("text {i}")),
            2 => json!(i),
            _ => json!([i, null, true]),
        };
        let key = (i % 2 == 0).then(|| format!("order-{i}"));
        let mut message = json!({ "body": body });
        if let Some(key) = &key {
            message["id"] = json!(key);
        }
        let answer = server.send("q", message).await;
        sent.insert(message_id(&answer), (body, key));
    }

    destination.wait_for(20, WAIT).await;
    drained(&server, "q", 20, WAIT).await;
    // All are acked; a second push of any would arrive about now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let requests = destination.requests();
    assert_eq!(requests.len(), 20, "{requests:#?}");
    let ids = ids_in(&requests);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        20,
        "a message was pushed twice: {ids:?}"
    );
    for request in &requests {
        let id = request.message_id();
        let (body, key) = sent
            .get(id)
            .unwrap_or_else(|| panic!("pushed an unknown message {id}"));
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/in");
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.attempt(), 1, "{request:?}");
        assert_eq!(request.header("sluice-queue"), Some("q"));
        assert_eq!(request.header("idempotency-key"), key.as_deref(), "{id}");
        assert_eq!(&request.json(), body, "{id}");
        assert_eq!(
            request.text(),
            serde_json::to_string(body).unwrap(),
            "the body is not the stored bytes"
        );
        let status = server.message_status("q", id).await;
        assert_eq!(status["state"], "acked", "{status}");
    }
    let stats = server.stats("q").await;
    assert_eq!(stats["push"]["retried"], 0, "{stats}");
    assert_eq!(stats["push"]["failed_permanently"], 0, "{stats}");
    assert_eq!(stats["push"]["in_flight"], 0, "{stats}");
    assert_eq!(stats["push"]["last_status"], 200, "{stats}");
    assert!(stats["push"].get("last_error").is_none(), "{stats}");
    assert_eq!(stats["push"]["latency_ms"]["samples"], 20, "{stats}");
}

#[tokio::test]
async fn a_configured_authorization_header_is_the_only_one_sent() {
    // Proves a destination whose URL has user info and whose headers configure
    // `Authorization` gets exactly one Authorization header, the configured one (the HTTP
    // client used to add a Basic one from the user info beside it); without a configured one,
    // the user info still becomes Basic credentials.
    let destination = Destination::start().await;
    let server = TestServer::builder().start().await;
    let with_user_info = destination.url("/in").replace("http://", "http://user:pw@");
    server
        .put_queue(
            "configured",
            json!({"push": {"url": with_user_info, "headers": {"Authorization": "Bearer tok-1"}}}),
        )
        .await;
    server
        .put_queue("basic", json!({"push": {"url": with_user_info}}))
        .await;
    server.send("configured", json!({"body": 1})).await;
    server.send("basic", json!({"body": 2})).await;
    destination.wait_for(2, WAIT).await;
    let requests = destination.requests();
    let authorization = |queue: &str| -> Vec<String> {
        let request = requests
            .iter()
            .find(|request| request.header("sluice-queue") == Some(queue))
            .unwrap_or_else(|| panic!("nothing pushed from {queue}: {requests:#?}"));
        request
            .headers
            .get_all("authorization")
            .iter()
            .map(|value| value.to_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(authorization("configured"), ["Bearer tok-1"]);
    assert_eq!(
        authorization("basic"),
        ["Basic dXNlcjpwdw=="],
        "user:pw as Basic"
    );
}

#[tokio::test]
async fn byte_bodies_go_as_octet_stream_with_the_configured_method() {
    // Proves a body_base64 message is pushed as its raw bytes with content-type
    // application/octet-stream, and push.method PUT is used.
    let destination = Destination::start().await;
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "q",
            json!({"push": {"url": destination.url("/bytes"), "method": "PUT"}}),
        )
        .await;
    // 00 01 02 ff fe
    server.send("q", json!({"body_base64": "AAEC//4="})).await;
    let requests = destination.wait_for(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "PUT");
    assert_eq!(
        requests[0].header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(&requests[0].body[..], &[0, 1, 2, 0xff, 0xfe]);
    drained(&server, "q", 1, WAIT).await;
}

#[tokio::test]
async fn server_errors_are_retried_with_the_queue_backoff_until_success() {
    // Proves a destination answering 503 twice then 200 gets attempts 1, 2, 3 (sluice-attempt),
    // each retry exactly when the backoff (1000 ms, then 2000 ms, no jitter) of server time has
    // passed and not 1 ms earlier, last_error "HTTP 503: upstream down" while retrying, and the
    // message acked after the third attempt, with stats counting 2 retries and 1 delivery.
    let destination = Destination::start().await;
    destination.on_path(
        "/flaky",
        Script::fail(2, Answer::status(503).body("upstream down")),
    );
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({
                "max_attempts": 5,
                "backoff": {"initial_ms": 1000, "factor": 2, "jitter": false},
                "push": {"url": destination.url("/flaky")},
            }),
        )
        .await;
    let id = message_id(&server.send("q", json!({"body": {"job": 1}})).await);

    let requests = destination.wait_for(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].attempt(), 1);
    for (attempt, delay_ms) in [(1, 1000), (2, 2000)] {
        let status = status_until(&server, "q", &id, |s| {
            s["state"] == "delayed" && s["attempts"] == attempt
        })
        .await;
        assert_eq!(status["state"], "delayed", "{status}");
        assert_eq!(status["attempts"], attempt, "{status}");
        assert_eq!(status["last_error"], "HTTP 503: upstream down", "{status}");
        let stats = server.stats("q").await;
        assert_eq!(stats["push"]["last_status"], 503, "{stats}");
        assert_eq!(stats["push"]["last_error"], "HTTP 503: upstream down");
        let requests = retry_exactly_at(&server, &destination, &status, delay_ms).await;
        let last = requests.last().unwrap();
        assert_eq!(last.attempt(), attempt + 1, "{last:?}");
        assert_eq!(last.message_id(), id);
    }

    let status = status_until(&server, "q", &id, |s| s["state"] == "acked").await;
    assert_eq!(status["state"], "acked", "{status}");
    let stats = drained(&server, "q", 1, WAIT).await;
    assert_eq!(stats["push"]["retried"], 2, "{stats}");
    assert_eq!(stats["push"]["failed_permanently"], 0, "{stats}");
    assert_eq!(stats["push"]["last_status"], 200, "{stats}");
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
    assert_eq!(destination.count(), 3);
}

/// Issue 30, finding 11: with `max_attempts: 2` and no dead-letter queue (documented as retry
/// for ever), the server stopped calling the destination after 2 failures, even once it was
/// back, and recorded attempts it never made ("out of attempts: the server stopped…").
#[tokio::test]
async fn a_queue_without_a_dead_letter_queue_keeps_calling_past_max_attempts() {
    let destination = Destination::start().await;
    destination.on_path(
        "/flaky",
        Script::fail(3, Answer::status(503).body("upstream down")),
    );
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({
                "max_attempts": 2,
                "dead_letter_queue": "",
                "backoff": {"initial_ms": 1000, "factor": 1, "jitter": false},
                "push": {"url": destination.url("/flaky")},
            }),
        )
        .await;
    let id = message_id(&server.send("q", json!({"body": {"job": 1}})).await);
    for attempt in 1..=3 {
        let requests = destination.wait_for(attempt, WAIT).await;
        assert_eq!(requests.len(), attempt, "attempt {attempt} was never sent");
        let status = status_until(&server, "q", &id, |s| {
            s["state"] == "delayed" && s["attempts"] == attempt
        })
        .await;
        assert_eq!(status["last_error"], "HTTP 503: upstream down", "{status}");
        server.advance_clock(1000).await;
    }
    let status = status_until(&server, "q", &id, |s| s["state"] == "acked").await;
    assert_eq!(status["state"], "acked", "{status}");
    assert_eq!(destination.count(), 4, "every attempt was a real request");
    let stats = server.stats("q").await;
    assert_eq!(stats["counters"]["dead_lettered"], 0, "{stats}");
    assert_eq!(stats["push"]["retried"], 3, "{stats}");
}

#[tokio::test]
async fn a_longer_retry_after_wins_over_the_backoff() {
    // Proves 429 with Retry-After: 3 on a queue with a 100 ms backoff schedules the retry 3000 ms
    // of server time later (nothing arrives at 2999 ms), with last_error "HTTP 429: slow down";
    // and a Retry-After shorter than the backoff (1 s against 5000 ms) does not shorten it.
    let destination = Destination::start().await;
    destination.on_path(
        "/busy",
        Script::fail(
            1,
            Answer::status(429)
                .header("retry-after", "3")
                .body("slow down"),
        ),
    );
    destination.on_path(
        "/short",
        Script::fail(1, Answer::status(503).header("retry-after", "1")),
    );
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({
                "backoff": {"initial_ms": 100, "jitter": false},
                "push": {"url": destination.url("/busy")},
            }),
        )
        .await;
    let id = message_id(&server.send("q", json!({"body": "x"})).await);
    assert_eq!(destination.wait_for(1, WAIT).await.len(), 1);
    let status = status_until(&server, "q", &id, |s| s["state"] == "delayed").await;
    assert_eq!(status["last_error"], "HTTP 429: slow down", "{status}");
    let requests = retry_exactly_at(&server, &destination, &status, 3000).await;
    assert_eq!(requests[1].attempt(), 2);
    drained(&server, "q", 1, WAIT).await;

    server
        .put_queue(
            "q2",
            json!({
                "backoff": {"initial_ms": 5000, "jitter": false},
                "push": {"url": destination.url("/short")},
            }),
        )
        .await;
    let id = message_id(&server.send("q2", json!({"body": "y"})).await);
    assert_eq!(destination.wait_for(3, WAIT).await.len(), 3);
    let status = status_until(&server, "q2", &id, |s| s["state"] == "delayed").await;
    assert_eq!(status["last_error"], "HTTP 503", "{status}");
    retry_exactly_at(&server, &destination, &status, 5000).await;
    drained(&server, "q2", 1, WAIT).await;
}

#[tokio::test]
async fn a_client_error_dead_letters_at_once_unless_client_errors_are_retried() {
    // Proves a 400 answer sends the message to the DLQ on its first attempt (max_attempts 5)
    // with last_error "HTTP 400: " and the first 256 bytes of the answer, never calls again,
    // and counts it in stats.push.failed_permanently; and that with retry_client_errors a 422
    // is retried with the backoff (last_error "HTTP 422: try later") and then delivered.
    let reject_body = format!(
        "{{\"error\":\"amount_must_be_positive\",\"detail\":\"{}\"}}",
        "x".repeat(300)
    );
    let destination = Destination::start().await;
    destination.on_path(
        "/reject",
        Script::always(Answer::status(400).body(&reject_body)),
    );
    destination.on_path(
        "/lenient",
        Script::fail(1, Answer::status(422).body("try later")),
    );
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "strict",
            json!({
                "max_attempts": 5,
                "backoff": {"initial_ms": 1000, "jitter": false},
                "push": {"url": destination.url("/reject")},
            }),
        )
        .await;
    let id = message_id(&server.send("strict", json!({"body": {"amount": -1}})).await);
    assert_eq!(destination.wait_for(1, WAIT).await.len(), 1);
    let status = status_until(&server, "strict", &id, |s| s["state"] == "dead").await;
    assert_eq!(status["state"], "dead", "{status}");
    assert_eq!(status["queue"], "strict.dlq", "{status}");
    assert_eq!(status["dead_letter"]["attempts"], 1, "{status}");
    assert_eq!(
        status["dead_letter"]["last_error"],
        format!("HTTP 400: {}", &reject_body[..256]),
        "{status}"
    );
    let stats = server.stats("strict").await;
    assert_eq!(stats["dead_lettered"], 1, "{stats}");
    assert_eq!(stats["push"]["failed_permanently"], 1, "{stats}");
    assert_eq!(stats["push"]["retried"], 0, "{stats}");
    assert_eq!(stats["push"]["delivered"], 0, "{stats}");
    assert_eq!(stats["push"]["last_status"], 400, "{stats}");
    server.advance_clock(120_000).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(destination.count(), 1, "a permanent failure was retried");

    server
        .put_queue(
            "lenient",
            json!({
                "max_attempts": 5,
                "backoff": {"initial_ms": 1000, "jitter": false},
                "push": {"url": destination.url("/lenient"), "retry_client_errors": true},
            }),
        )
        .await;
    let id = message_id(&server.send("lenient", json!({"body": {"amount": 1}})).await);
    assert_eq!(destination.wait_for(2, WAIT).await.len(), 2);
    let status = status_until(&server, "lenient", &id, |s| s["state"] == "delayed").await;
    assert_eq!(status["state"], "delayed", "{status}");
    assert_eq!(status["last_error"], "HTTP 422: try later", "{status}");
    let requests = retry_exactly_at(&server, &destination, &status, 1000).await;
    assert_eq!(requests[2].attempt(), 2);
    let stats = drained(&server, "lenient", 1, WAIT).await;
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
    assert_eq!(stats["push"]["failed_permanently"], 0, "{stats}");
}

#[tokio::test]
async fn a_down_destination_dead_letters_after_max_attempts_and_a_replay_delivers() {
    // Proves connection errors are retried with the backoff until max_attempts (3), then the
    // message is in the DLQ with a "cannot connect to <origin>" last_error (only the origin:
    // the rest of a URL may hold secrets); once the destination
    // listens again (same port), replaying the DLQ entry pushes it: the destination gets the
    // body as the replayed message (attempt 1) and it is acked.
    let mut destination = Destination::start().await;
    destination.stop().await;
    let url = destination.url("/down");
    let origin = destination.url("");
    let server = TestServer::builder().test_clock(true).start().await;
    server
        .put_queue(
            "q",
            json!({
                "max_attempts": 3,
                "backoff": {"initial_ms": 1000, "factor": 2, "jitter": false},
                "push": {"url": url},
            }),
        )
        .await;
    let id = message_id(&server.send("q", json!({"body": {"order": 42}})).await);
    for attempt in 1..=3 {
        // A dead message counts its attempts in `dead_letter` (in the DLQ it starts at 0).
        let status = status_until(&server, "q", &id, |s| {
            (s["state"] == "delayed" && s["attempts"] == attempt)
                || (s["state"] == "dead" && s["dead_letter"]["attempts"] == attempt)
        })
        .await;
        let error = if attempt < 3 {
            assert_eq!(status["attempts"], attempt, "{status}");
            assert_eq!(status["state"], "delayed", "{status}");
            let error = status["last_error"].as_str().unwrap_or_default().to_owned();
            let now = server.now().await;
            server
                .advance_clock(parse_time(&status["visible_at"]) - now)
                .await;
            error
        } else {
            assert_eq!(status["state"], "dead", "{status}");
            assert_eq!(status["queue"], "q.dlq", "{status}");
            assert_eq!(status["dead_letter"]["attempts"], 3, "{status}");
            status["dead_letter"]["last_error"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            error.starts_with(&format!("cannot connect to {origin}: ")),
            "attempt {attempt}: {status}"
        );
    }
    let stats = server.stats("q").await;
    assert_eq!(stats["dead_lettered"], 1, "{stats}");
    assert_eq!(stats["push"]["delivered"], 0, "{stats}");
    assert!(
        stats["push"]["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("cannot connect to")),
        "{stats}"
    );
    assert_eq!(destination.count(), 0);

    destination.start_again().await;
    let replay = server
        .post("/v1/queues/q/dlq/replay", json!({"ids": [id]}))
        .await
        .ok();
    assert_eq!(replay["replayed"], 1, "{replay}");
    let replayed_id = replay["results"][0]["message_id"]
        .as_str()
        .expect("replayed message id")
        .to_owned();
    let requests = destination.wait_for(1, WAIT).await;
    assert_eq!(requests.len(), 1, "the replayed message was not pushed");
    assert_eq!(requests[0].message_id(), replayed_id);
    assert_eq!(requests[0].attempt(), 1);
    assert_eq!(requests[0].json(), json!({"order": 42}));
    let status = status_until(&server, "q", &replayed_id, |s| s["state"] == "acked").await;
    assert_eq!(status["state"], "acked", "{status}");
    drained(&server, "q", 1, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_key_order_holds_at_the_destination() {
    // Proves a per_key queue pushed with concurrency 8 to a destination answering after random
    // 0..40 ms delays: each key's 10 messages arrive in enqueue order, a key's next message
    // arrives only after the previous one was answered, keys do run in parallel, and each of
    // the 50 messages arrives once.
    const KEYS: usize = 5;
    const PER_KEY: usize = 10;
    let destination = Destination::start().await;
    destination.on_other(Script::always(
        Answer::ok().random_delay(Duration::from_millis(40)),
    ));
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "q",
            json!({"ordering": "per_key", "push": {"url": destination.url("/ordered"), "concurrency": 8}}),
        )
        .await;
    let messages: Vec<Value> = (0..KEYS * PER_KEY)
        .map(|i| {
            let key = format!("k{}", i % KEYS);
            json!({"key": key, "body": {"key": key, "seq": i / KEYS}})
        })
        .collect();
    server.send("q", json!({ "messages": messages })).await;

    let total = KEYS * PER_KEY;
    let requests = destination.wait_for(total, Duration::from_secs(60)).await;
    assert_eq!(requests.len(), total, "not all messages were pushed");
    drained(&server, "q", total as u64, WAIT).await;
    let ids = ids_in(&requests);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), total);

    let mut by_key: HashMap<String, Vec<&Recorded>> = HashMap::new();
    for request in &requests {
        let key = request.json()["key"].as_str().unwrap().to_owned();
        by_key.entry(key).or_default().push(request);
    }
    assert_eq!(by_key.len(), KEYS);
    for (key, seen) in &by_key {
        let seqs: Vec<u64> = seen
            .iter()
            .map(|r| r.json()["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(
            seqs,
            (0..PER_KEY as u64).collect::<Vec<_>>(),
            "key {key} out of order"
        );
        for pair in seen.windows(2) {
            assert!(
                pair[1].arrived >= pair[0].answered.unwrap(),
                "key {key}: seq {} arrived before seq {} was answered",
                pair[1].json()["seq"],
                pair[0].json()["seq"]
            );
        }
    }
    assert!(
        destination.max_in_flight() >= 2,
        "keys were not pushed in parallel (max {} at once)",
        destination.max_in_flight()
    );
}

#[tokio::test]
async fn signed_requests_verify_as_standard_webhooks() {
    // Proves push.signing_secret {env} makes each request carry webhook-id (= the message id),
    // webhook-timestamp (now) and webhook-signature that verify with the Standard Webhooks
    // verifier and the same secret, and not with another secret or a changed body; the queue
    // shows the secret's reference only; a secret variable that is not set is refused at PUT.
    let destination = Destination::start().await;
    let server = TestServer::builder()
        .env("PUSH_SIGNING_SECRET", SECRET)
        .start()
        .await;
    let refused = server
        .put(
            "/v1/queues/bad",
            json!({"push": {"url": destination.url("/x"), "signing_secret": {"env": "SLUICE_IT_UNSET_SECRET"}}}),
        )
        .await;
    refused.error(422, "invalid_field");
    let queue = server
        .put_queue(
            "q",
            json!({"push": {"url": destination.url("/signed"), "signing_secret": {"env": "PUSH_SIGNING_SECRET"}}}),
        )
        .await;
    assert_eq!(
        queue["config"]["push"]["signing_secret"],
        json!({"env": "PUSH_SIGNING_SECRET"}),
        "{queue}"
    );
    assert!(!queue.to_string().contains(SECRET), "{queue}");

    for body in [json!({"a": 1}), json!("text"), json!([1, 2, 3])] {
        server.send("q", json!({ "body": body })).await;
    }
    let requests = destination.wait_for(3, WAIT).await;
    assert_eq!(requests.len(), 3);
    let verifier = Verifier::new(Scheme::StandardWebhooks, vec![SECRET.to_owned()], 300).unwrap();
    let other = Verifier::new(
        Scheme::StandardWebhooks,
        vec!["whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCEh".to_owned()],
        300,
    )
    .unwrap();
    let now_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let url = destination.url("/signed");
    for request in &requests {
        assert_eq!(
            request.header("webhook-id"),
            Some(request.message_id()),
            "{request:?}"
        );
        let timestamp: i64 = request.expect_header("webhook-timestamp").parse().unwrap();
        assert!((timestamp - now_s).abs() <= 60, "{request:?}");
        assert!(
            request
                .expect_header("webhook-signature")
                .starts_with("v1,")
        );
        let signed = Request {
            url: &url,
            headers: &request.headers,
            body: &request.body,
        };
        verifier
            .verify(&signed, now_s)
            .unwrap_or_else(|e| panic!("signature does not verify ({e}): {request:?}"));
        assert_eq!(
            other.verify(&signed, now_s),
            Err(VerifyError::SignatureMismatch)
        );
        let mut changed = request.body.to_vec();
        changed.push(b' ');
        let tampered = Request {
            body: &changed,
            ..signed
        };
        assert_eq!(
            verifier.verify(&tampered, now_s),
            Err(VerifyError::SignatureMismatch)
        );
    }
    drained(&server, "q", 3, WAIT).await;
}

#[tokio::test]
async fn transform_and_headers_from_the_config_file_shape_the_request() {
    // Proves a `[queues.q.push]` table in the config file starts pushing with no API call, its
    // transform `{id: .message_id, data: .body}` is the request body (application/json) and its
    // headers are sent along with sluice's own.
    let destination = Destination::start().await;
    let config = format!(
        r#"
[queues.q.push]
url = "{}"
transform = '{{id: .message_id, data: .body}}'
headers = {{ "x-team" = "a" }}
"#,
        destination.url("/shaped")
    );
    let server = TestServer::builder().config(&config).start().await;
    let queue = server.get("/v1/queues/q").await.ok();
    assert_eq!(
        queue["config"]["push"]["headers"],
        json!({"x-team": "a"}),
        "{queue}"
    );
    let id = message_id(
        &server
            .send("q", json!({"body": {"n": 1, "tags": ["x", "y"]}}))
            .await,
    );
    let requests = destination.wait_for(1, WAIT).await;
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(
        request.json(),
        json!({"id": id, "data": {"n": 1, "tags": ["x", "y"]}})
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("x-team"), Some("a"));
    assert_eq!(request.message_id(), id);
    assert_eq!(request.header("sluice-queue"), Some("q"));
    drained(&server, "q", 1, WAIT).await;
}

#[tokio::test]
async fn a_paused_queue_pushes_nothing_until_resumed() {
    // Proves the push worker honours pause: with the worker running (stats.push present), 5
    // ready messages of a paused queue stay ready and nothing reaches the destination; after
    // resume all 5 are pushed and acked.
    let destination = Destination::start().await;
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.post_empty("/v1/queues/q/pause").await.ok();
    for i in 0..5 {
        server.send("q", json!({ "body": i })).await;
    }
    server
        .put_queue("q", json!({"push": {"url": destination.url("/paused")}}))
        .await;
    let stats = server
        .stats_until("q", WAIT, |s| s.get("push").is_some())
        .await;
    assert!(stats.get("push").is_some(), "no push worker: {stats}");
    assert_eq!(stats["paused"], true, "{stats}");
    tokio::time::sleep(QUIET).await;
    assert_eq!(destination.count(), 0, "a paused queue pushed");
    let stats = server.stats("q").await;
    assert_eq!(stats["ready"], 5, "{stats}");
    assert_eq!(stats["in_flight"], 0, "{stats}");

    server.post_empty("/v1/queues/q/resume").await.ok();
    assert_eq!(destination.wait_for(5, WAIT).await.len(), 5);
    drained(&server, "q", 5, WAIT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_caps_requests_to_a_slow_destination() {
    // Proves the queue's max_in_flight (2) bounds requests open at the destination even with
    // push.concurrency 8: a destination answering after 150 ms never sees more than 2 at once
    // (and does see 2), and all 10 messages are delivered.
    let destination = Destination::start().await;
    destination.on_other(Script::always(
        Answer::ok().delay(Duration::from_millis(150)),
    ));
    let server = TestServer::builder().start().await;
    server
        .put_queue(
            "q",
            json!({"max_in_flight": 2, "push": {"url": destination.url("/slow"), "concurrency": 8}}),
        )
        .await;
    let messages: Vec<Value> = (0..10).map(|i| json!({ "body": i })).collect();
    server.send("q", json!({ "messages": messages })).await;
    assert_eq!(destination.wait_for(10, WAIT).await.len(), 10);
    drained(&server, "q", 10, WAIT).await;
    assert_eq!(
        destination.max_in_flight(),
        2,
        "requests open at once at the destination"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_messages_are_each_pushed_once() {
    // Proves throughput and exactly-once delivery to a healthy destination: 10,000 messages sent
    // in batches of 100 by 32 concurrent tasks are all pushed within 120 s, each message id
    // exactly once (no duplicates, none missing, none unknown), and stats.push.delivered is
    // 10,000 with an empty queue.
    const TOTAL: usize = 10_000;
    const BATCH: usize = 100;
    const SENDERS: usize = 32;
    let destination = Destination::start().await;
    let server = Arc::new(TestServer::builder().start().await);
    server
        .put_queue("q", json!({"push": {"url": destination.url("/load")}}))
        .await;

    let started = std::time::Instant::now();
    let next_batch = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = (0..SENDERS)
        .map(|_| {
            let (server, next_batch) = (server.clone(), next_batch.clone());
            tokio::spawn(async move {
                let mut ids = Vec::new();
                loop {
                    let batch = next_batch.fetch_add(1, Ordering::SeqCst);
                    if batch * BATCH >= TOTAL {
                        return ids;
                    }
                    let messages: Vec<Value> = (batch * BATCH..(batch + 1) * BATCH)
                        .map(|n| json!({"body": {"n": n}}))
                        .collect();
                    let answer = server.send("q", json!({ "messages": messages })).await;
                    for message in answer["results"].as_array().expect("batch answer") {
                        ids.push(message_id(message));
                    }
                }
            })
        })
        .collect();
    let mut sent = HashSet::new();
    for sender in senders {
        sent.extend(sender.await.expect("sender task"));
    }
    assert_eq!(sent.len(), TOTAL);

    let requests = destination.wait_for(TOTAL, Duration::from_secs(120)).await;
    let elapsed = started.elapsed();
    assert!(
        requests.len() >= TOTAL,
        "only {} of {TOTAL} pushed within 120 s",
        requests.len()
    );
    drained(&server, "q", TOTAL as u64, WAIT).await;
    // Anything pushed twice would show up by now: every message is acked.
    let requests = destination.requests();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for request in &requests {
        *seen.entry(request.message_id()).or_default() += 1;
    }
    let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicates.is_empty(),
        "{} messages pushed more than once, e.g. {:?}",
        duplicates.len(),
        &duplicates[..duplicates.len().min(5)]
    );
    let seen: HashSet<String> = seen.keys().map(|id| (*id).to_owned()).collect();
    assert_eq!(seen, sent, "pushed ids differ from the sent ids");
    assert!(requests.iter().all(|r| r.attempt() == 1));
    eprintln!("pushed {TOTAL} messages in {elapsed:?}");
}
