//! Webhook ingress (`POST /hooks/{name}`) and endpoint administration (`/v1/webhooks`).
//!
//! Signature checks replay requests recorded from the senders' own libraries
//! (`sluice-webhooks/tests/vectors/vectors.json`) on a test clock started at their time; the
//! other tests sign fresh Standard Webhooks requests with `StandardSigner`.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_webhooks::sign::StandardSigner;
use sluice_wire::WebhookStatsOut;

use crate::support::hooks::{
    StoredBody, Vector, define, held, hook_stats, post_hook, read_reply, standard_headers,
    stored_body,
};
use crate::support::{Reply, TestServer, message_id, receipt};

/// A Standard Webhooks secret for freshly signed requests (24 bytes, base64).
const STANDARD_SECRET: &str = "whsec_c2x1aWNlLWl0LXdlYmhvb2stc2VjcmV0";
const STANDARD_SECRET_ENV: &str = "SLUICE_IT_STANDARD_SECRET";

fn secret_env(case: usize, position: usize) -> String {
    format!("SLUICE_IT_HOOK_{case}_{position}")
}

fn wrong_env(case: usize) -> String {
    format!("SLUICE_IT_HOOK_{case}_WRONG")
}

/// Asserts a 401 with `code`.
fn refused(reply: &Reply, code: &str, context: &str) {
    assert_eq!(
        reply.status,
        StatusCode::UNAUTHORIZED,
        "{context}: {} answered {}: {}",
        reply.request,
        reply.status,
        reply.text
    );
    let error = reply.error_shape();
    assert_eq!(error["code"], code, "{context}: {}", reply.text);
}

/// A test-clock server at `start_ms` with the fresh-signing secret set and debug logs.
async fn hook_server(start_ms: i64) -> TestServer {
    TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &start_ms.to_string())
        .env(STANDARD_SECRET_ENV, STANDARD_SECRET)
        .env("SLUICE_LOG", "debug")
        .start()
        .await
}

/// A `standard_webhooks` endpoint spec on `queue` with the fresh-signing secret.
fn standard_spec(queue: &str, extra: Value) -> Value {
    let mut spec = json!({
        "queue": queue,
        "verify": {"scheme": "standard_webhooks", "secrets": [{"env": STANDARD_SECRET_ENV}]},
    });
    for (field, value) in extra.as_object().expect("extra fields") {
        spec[field] = value.clone();
    }
    spec
}

/// Posts `body` to `/hooks/{endpoint}` signed now (server time) as delivery `id`.
async fn post_signed(
    server: &TestServer,
    endpoint: &str,
    id: &str,
    body: &[u8],
    extra: &[(&str, &str)],
) -> Reply {
    let signer = StandardSigner::new(STANDARD_SECRET).expect("signer");
    let now_s = server.now().await.div_euclid(1000);
    let headers = standard_headers(&signer, id, now_s, body, extra);
    post_hook(
        server,
        &format!("/hooks/{endpoint}"),
        &headers,
        body.to_vec(),
    )
    .await
}

fn assert_no_secrets(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        assert!(
            !text.contains(secret),
            "{what} contains the secret {secret:?}"
        );
    }
}

#[tokio::test]
async fn every_scheme_accepts_its_senders_requests_and_refuses_forgeries() {
    // Proves, for every recorded vector of every scheme (standard_webhooks, github, stripe,
    // slack, shopify, pagerduty, twilio, hmac): the request exactly as the sender's library
    // signed it is answered 202 and stored once with its body (JSON, form fields, or bytes) and
    // the scheme's delivery id as idempotency key; an endpoint listing a wrong secret first and
    // the right one after it accepts too (rotation). Each of these is 401 with its code and
    // stores nothing: the body changed, the endpoint's only secret wrong, each required header
    // missing, and the vectors recorded as invalid. Timestamped schemes accept at exactly the
    // tolerance and refuse one second later (timestamp_out_of_tolerance). Twilio endpoints sign
    // over `public_url` plus the request's query. No secret appears in the server log or the API.
    let vectors = Vector::all();
    let now = vectors[0].now;
    assert!(vectors.iter().all(|vector| vector.now == now));
    let schemes: std::collections::BTreeSet<&str> =
        vectors.iter().map(Vector::scheme_name).collect();
    assert_eq!(schemes.len(), 8, "vectors.json covers {schemes:?}");

    let mut builder = TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &(now * 1000).to_string())
        .env("SLUICE_LOG", "debug");
    let mut secrets: Vec<&str> = Vec::new();
    for (case, vector) in vectors.iter().enumerate() {
        for (position, secret) in vector.secrets.iter().enumerate() {
            builder = builder.env(&secret_env(case, position), secret);
            secrets.push(secret);
        }
        if let Some(wrong) = &vector.wrong_secret {
            builder = builder.env(&wrong_env(case), wrong);
            secrets.push(wrong);
        }
    }
    let server = builder.start().await;

    for (case, vector) in vectors.iter().enumerate() {
        let context = format!("vector {}", vector.name);
        let envs: Vec<String> = (0..vector.secrets.len())
            .map(|position| secret_env(case, position))
            .collect();
        let queue = format!("q{case}");
        server.put_queue(&queue, json!({})).await;
        let spec = |verify: Value, queue: &str| {
            let mut spec = json!({ "queue": queue, "verify": verify });
            if vector.scheme_name() == "twilio" {
                spec["public_url"] = json!(vector.public_url());
            }
            spec
        };
        define(
            &server,
            &format!("v{case}"),
            spec(vector.verify(&envs), &queue),
        )
        .await;

        if !vector.is_valid() {
            let reply = vector.post(&server, &format!("v{case}")).await;
            refused(&reply, &vector.expect, &context);
            assert_eq!(held(&server, &queue).await, 0, "{context}: stored");
            continue;
        }

        // Refusals first: none may store anything.
        let mut tampered = vector.body.clone();
        tampered.push(' ');
        let reply = post_hook(
            &server,
            &vector.hook_path(&format!("v{case}")),
            &vector.headers,
            tampered,
        )
        .await;
        refused(
            &reply,
            &vector.tampered_body_code,
            &format!("{context}, tampered"),
        );

        let wrong = [wrong_env(case)];
        define(
            &server,
            &format!("w{case}"),
            spec(vector.verify(&wrong), &queue),
        )
        .await;
        let reply = vector.post(&server, &format!("w{case}")).await;
        refused(
            &reply,
            "signature_mismatch",
            &format!("{context}, wrong secret"),
        );

        assert!(!vector.required_headers.is_empty(), "{context}");
        for header in &vector.required_headers {
            let reply = post_hook(
                &server,
                &vector.hook_path(&format!("v{case}")),
                &vector.headers_without(header),
                vector.body.clone(),
            )
            .await;
            refused(&reply, "missing_header", &format!("{context}, no {header}"));
        }
        assert_eq!(
            held(&server, &queue).await,
            0,
            "{context}: a refusal stored"
        );
        assert_eq!(
            server.stats(&queue).await["dead_lettered"],
            0,
            "{context}: a refusal was dead-lettered"
        );

        // The recorded request is accepted and stored as sent.
        let reply = vector.post(&server, &format!("v{case}")).await;
        assert_eq!(
            reply.status,
            StatusCode::ACCEPTED,
            "{context}: {}",
            reply.text
        );
        let receipt = reply.json();
        assert_eq!(receipt["queued"], true, "{context}: {receipt}");
        assert_eq!(
            receipt["idempotency_key"].as_str().map(str::to_owned),
            vector.delivery_id(),
            "{context}: {receipt}"
        );
        let messages = server.receive(&queue, json!({"max": 10})).await;
        assert_eq!(messages.len(), 1, "{context}: {messages:?}");
        let message = &messages[0];
        assert_eq!(message_id(message), message_id(&receipt), "{context}");
        assert_eq!(
            stored_body(message),
            vector.stored_body(),
            "{context}: {message}"
        );
        assert_eq!(
            message["headers"]["sluice-webhook"],
            format!("v{case}"),
            "{context}: {message}"
        );
        server.ack(&queue, crate::support::receipt(message)).await;

        // Rotation: the right secret after a wrong one.
        let rotated_queue = format!("r{case}");
        server.put_queue(&rotated_queue, json!({})).await;
        let rotated: Vec<String> = std::iter::once(wrong_env(case))
            .chain(envs.iter().cloned())
            .collect();
        define(
            &server,
            &format!("r{case}"),
            spec(vector.verify(&rotated), &rotated_queue),
        )
        .await;
        let reply = vector.post(&server, &format!("r{case}")).await;
        assert_eq!(
            reply.status,
            StatusCode::ACCEPTED,
            "{context}, rotation: {}",
            reply.text
        );
        assert_eq!(held(&server, &rotated_queue).await, 1, "{context}");
    }

    // Stale requests: fine at exactly the tolerance, refused one second later.
    let tolerance_s = vectors[0].tolerance_s;
    assert!(
        vectors
            .iter()
            .all(|vector| vector.tolerance_s == tolerance_s)
    );
    server.advance_clock(tolerance_s * 1000).await;
    let timestamped: Vec<(usize, &Vector)> = vectors
        .iter()
        .enumerate()
        .filter(|(_, vector)| vector.is_valid() && vector.is_timestamped())
        .collect();
    assert!(timestamped.len() >= 3, "{timestamped:?}");
    for (case, vector) in &timestamped {
        let reply = vector.post(&server, &format!("v{case}")).await;
        assert!(
            reply.status.is_success(),
            "vector {} at the tolerance: {} {}",
            vector.name,
            reply.status,
            reply.text
        );
    }
    server.advance_clock(1000).await;
    for (case, vector) in &timestamped {
        let queue = format!("q{case}");
        let before = held(&server, &queue).await;
        let reply = vector.post(&server, &format!("v{case}")).await;
        refused(
            &reply,
            "timestamp_out_of_tolerance",
            &format!("vector {}, stale", vector.name),
        );
        assert_eq!(held(&server, &queue).await, before, "{}", vector.name);
    }

    let listed = server.get("/v1/webhooks").await.ok().to_string();
    assert_no_secrets(&listed, &secrets, "GET /v1/webhooks");
    assert_no_secrets(&server.log_tail(usize::MAX), &secrets, "the server log");
    eprintln!("LOGPEEK {}", server.log_tail(usize::MAX).len());
    eprintln!("{}", server.log_tail(30));
}

#[tokio::test]
async fn a_repeated_delivery_is_stored_once() {
    // Proves idempotency by delivery id: the recorded GitHub and Standard Webhooks requests
    // posted twice are answered 202 {queued, message_id, idempotency_key = the delivery id},
    // then 200 with the same fields plus duplicate: true and the first message's state; each
    // queue holds one message; once it is acked with a result, a third delivery gets state
    // acked and that result (the memo, as a duplicate API enqueue does); the endpoint counts
    // one accepted, two duplicates.
    let vectors = [
        Vector::named("github_json"),
        Vector::named("standard_webhooks"),
    ];
    let mut builder = TestServer::builder().test_clock(true).env(
        "SLUICE_TEST_CLOCK_START_MS",
        &(vectors[1].now * 1000).to_string(),
    );
    for (case, vector) in vectors.iter().enumerate() {
        builder = builder.env(&secret_env(case, 0), &vector.secrets[0]);
    }
    let server = builder.start().await;

    for (case, vector) in vectors.iter().enumerate() {
        let queue = format!("q{case}");
        server.put_queue(&queue, json!({})).await;
        define(
            &server,
            &format!("h{case}"),
            json!({"queue": queue, "verify": vector.verify(&[secret_env(case, 0)])}),
        )
        .await;
        let delivery_id = vector.delivery_id().expect("a delivery id");

        let first = vector.post(&server, &format!("h{case}")).await;
        assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
        let first = first.json();
        let id = message_id(&first);
        assert_eq!(
            first,
            json!({"queued": true, "message_id": id, "idempotency_key": delivery_id}),
            "{}",
            vector.name
        );

        let second = vector.post(&server, &format!("h{case}")).await.ok();
        assert_eq!(
            second,
            json!({
                "queued": true, "message_id": id, "idempotency_key": delivery_id,
                "duplicate": true, "state": "ready"
            }),
            "{}",
            vector.name
        );

        assert_eq!(held(&server, &queue).await, 1, "{}", vector.name);
        let messages = server.receive(&queue, json!({"max": 10})).await;
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(message_id(&messages[0]), id);
        assert_eq!(messages[0]["id"], delivery_id.as_str());
        server
            .post(
                &format!("/v1/queues/{queue}/ack"),
                json!({"receipt": receipt(&messages[0]), "result": {"handled": case}}),
            )
            .await
            .ok();
        let third = vector.post(&server, &format!("h{case}")).await.ok();
        assert_eq!(
            third,
            json!({
                "queued": true, "message_id": id, "idempotency_key": delivery_id,
                "duplicate": true, "state": "acked", "result": {"handled": case}
            }),
            "{}",
            vector.name
        );
        let stats = hook_stats(&server, &format!("h{case}")).await;
        assert_eq!((stats.accepted, stats.duplicates), (1, 2), "{stats:?}");
        let counters = &server.stats(&queue).await["counters"];
        assert_eq!(
            (&counters["enqueued"], &counters["deduplicated"]),
            (&json!(1), &json!(2)),
            "the queue counts the idempotency hits too: {counters}"
        );
    }
}

#[tokio::test]
async fn filters_transforms_keys_priorities_and_idempotency_from_expressions() {
    // Proves the expressions of an endpoint: an event the filter rejects (x-github-event: push)
    // is answered 200 {ignored: true} and stores nothing; a matching one is stored with the
    // transformed body, the key and priority the expressions give, and the idempotency key
    // computed from the body, so another delivery id for the same PR action is a duplicate.
    let server = hook_server(1_700_000_000_000).await;
    server.put_queue("prs", json!({})).await;
    define(
        &server,
        "gh",
        standard_spec(
            "prs",
            json!({
                "filter": r#"select(.headers["x-github-event"] == "pull_request")"#,
                "transform": r#"{event: .headers["x-github-event"], action: .body.action, n: .body.number}"#,
                "key": ".body.repository.full_name",
                "priority": r#"if .body.action == "opened" then 7 else 1 end"#,
                "idempotency": {"expression": r#"(.body.number | tostring) + "-" + .body.action"#},
            }),
        ),
    )
    .await;
    let event = |action: &str| {
        json!({
            "action": action,
            "number": 42,
            "repository": {"full_name": "octo/repo"},
            "sender": {"login": "octocat"},
        })
        .to_string()
    };

    let body = event("opened");
    let reply = post_signed(
        &server,
        "gh",
        "msg_push",
        body.as_bytes(),
        &[
            ("x-github-event", "push"),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(reply.ok(), json!({"queued": false, "ignored": true}));
    assert_eq!(held(&server, "prs").await, 0);

    let reply = post_signed(
        &server,
        "gh",
        "msg_pr_1",
        body.as_bytes(),
        &[
            ("x-github-event", "pull_request"),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    let receipt = reply.json();
    assert_eq!(receipt["idempotency_key"], "42-opened", "{receipt}");

    // Another delivery of the same PR action: a duplicate by the expression's key.
    let again = post_signed(
        &server,
        "gh",
        "msg_pr_2",
        body.as_bytes(),
        &[
            ("x-github-event", "pull_request"),
            ("content-type", "application/json"),
        ],
    )
    .await
    .ok();
    assert_eq!(again["duplicate"], true, "{again}");
    assert_eq!(again["message_id"], receipt["message_id"], "{again}");

    let closed = event("closed");
    let reply = post_signed(
        &server,
        "gh",
        "msg_pr_3",
        closed.as_bytes(),
        &[
            ("x-github-event", "pull_request"),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_eq!(reply.json()["idempotency_key"], "42-closed");

    let messages = server.receive("prs", json!({"max": 10})).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    let by_action: BTreeMap<String, &Value> = messages
        .iter()
        .map(|message| {
            (
                message["body"]["action"].as_str().unwrap().to_owned(),
                message,
            )
        })
        .collect();
    let opened = by_action["opened"];
    assert_eq!(message_id(opened), message_id(&receipt));
    assert_eq!(
        opened["body"],
        json!({"event": "pull_request", "action": "opened", "n": 42}),
        "{opened}"
    );
    assert_eq!(opened["key"], "octo/repo", "{opened}");
    assert_eq!(opened["priority"], 7, "{opened}");
    assert_eq!(opened["id"], "42-opened", "{opened}");
    let closed = by_action["closed"];
    assert_eq!(closed["priority"], 1, "{closed}");
    assert_eq!(closed["key"], "octo/repo", "{closed}");

    let stats = hook_stats(&server, "gh").await;
    assert_eq!(
        (
            stats.received,
            stats.accepted,
            stats.duplicates,
            stats.ignored
        ),
        (4, 2, 1, 1),
        "{stats:?}"
    );
}

#[tokio::test]
async fn malformed_events_are_dead_lettered_and_replayable() {
    // Proves nothing a sender delivered is lost: five bodies labelled JSON that are not JSON are
    // each answered 202 {queued: false, dead_lettered: true, error}, and the queue's DLQ lists
    // five entries with a non-empty last_error (and the bytes as sent); a body failing the
    // queue's schema is dead-lettered with the violation in last_error. After the schema is
    // removed, replaying that entry brings the event back to the queue with its body.
    let server = hook_server(1_700_000_000_000).await;
    let schema = json!({"type": "object", "required": ["id"]});
    server.put_queue("ev", json!({ "schema": schema })).await;
    define(&server, "ev", standard_spec("ev", json!({}))).await;
    let json_type = [("content-type", "application/json")];

    for n in 0..5 {
        let body = format!("not json {n} {{");
        let reply = post_signed(
            &server,
            "ev",
            &format!("bad{n}"),
            body.as_bytes(),
            &json_type,
        )
        .await;
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
        let receipt = reply.json();
        assert_eq!(receipt["dead_lettered"], true, "{receipt}");
        assert_eq!(receipt["queued"], false, "{receipt}");
        assert!(
            !receipt["error"].as_str().unwrap_or_default().is_empty(),
            "{receipt}"
        );
        assert!(receipt["message_id"].is_string(), "{receipt}");
    }
    assert_eq!(held(&server, "ev").await, 0);
    let list = server.get("/v1/queues/ev/dlq?limit=100").await.ok();
    let entries = list["entries"].as_array().expect("entries").clone();
    assert_eq!(entries.len(), 5, "{list}");
    for entry in &entries {
        assert_eq!(entry["source_queue"], "ev", "{entry}");
        assert!(
            !entry["last_error"].as_str().unwrap_or_default().is_empty(),
            "{entry}"
        );
    }
    let one = server
        .get(&format!("/v1/queues/ev/dlq/{}", message_id(&entries[0])))
        .await
        .ok();
    let StoredBody::Bytes(bytes) = stored_body(&one) else {
        panic!("a body that is not JSON is kept as bytes: {one}");
    };
    assert!(String::from_utf8(bytes).unwrap().starts_with("not json "));

    let body = br#"{"amount": 5}"#;
    let reply = post_signed(&server, "ev", "schema1", body, &json_type).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    let receipt = reply.json();
    assert_eq!(receipt["dead_lettered"], true, "{receipt}");
    let error = receipt["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("schema") && error.contains("id"),
        "{receipt}"
    );
    let entry = server
        .get(&format!("/v1/queues/ev/dlq/{}", message_id(&receipt)))
        .await
        .ok();
    let last_error = entry["last_error"].as_str().unwrap_or_default();
    assert!(last_error.contains("\"id\""), "{entry}");
    assert_eq!(server.stats("ev").await["dead_lettered"], 6);
    assert_eq!(held(&server, "ev").await, 0);

    // Fix the cause, replay the schema failure.
    server.put_queue("ev", json!({"schema": null})).await;
    let replay = server
        .post("/v1/queues/ev/dlq/replay", json!({"error": "schema"}))
        .await
        .ok();
    assert_eq!(replay["replayed"], 1, "{replay}");
    assert_eq!(
        replay["results"][0]["dead_letter_id"], receipt["message_id"],
        "{replay}"
    );
    let messages = server.receive("ev", json!({"max": 10})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["body"], json!({"amount": 5}));

    let stats = hook_stats(&server, "ev").await;
    assert_eq!((stats.dead_lettered, stats.accepted), (6, 0), "{stats:?}");
}

#[tokio::test]
async fn refusals_have_their_status_and_every_outcome_is_counted() {
    // Proves: an unknown endpoint is 404 webhook_not_found; a body of max_body_bytes + 1 is 413
    // too_large before the signature is looked at, one of exactly max_body_bytes is accepted; a
    // full queue is 503 queue_full with a Retry-After; GET /v1/webhooks/{name} counts received,
    // accepted, duplicates, ignored, dead_lettered and rejected by reason exactly.
    let server = hook_server(1_700_000_000_000).await;
    server.put_queue("q", json!({"max_depth": 2})).await;
    define(
        &server,
        "e",
        standard_spec(
            "q",
            json!({"filter": r#".body.kind != "skip""#, "max_body_bytes": 100}),
        ),
    )
    .await;

    let reply = post_hook(&server, "/hooks/nope", &[], "{}").await;
    reply.error(404, "webhook_not_found");

    let json_type = [("content-type", "application/json")];
    let a = br#"{"kind": "a"}"#;
    let reply = post_signed(&server, "e", "id-a", a, &json_type).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    let reply = post_signed(&server, "e", "id-a", a, &json_type).await;
    assert_eq!(reply.ok()["duplicate"], true);
    let reply = post_signed(&server, "e", "id-s", br#"{"kind": "skip"}"#, &json_type).await;
    assert_eq!(reply.ok()["ignored"], true);
    let reply = post_signed(&server, "e", "id-x", b"{oops", &json_type).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_eq!(reply.json()["dead_lettered"], true);

    // A signature over another body.
    let signer = StandardSigner::new(STANDARD_SECRET).unwrap();
    let now_s = server.now().await / 1000;
    let headers = standard_headers(&signer, "id-f", now_s, b"{}", &[]);
    let reply = post_hook(&server, "/hooks/e", &headers, r#"{"kind":"forged"}"#).await;
    refused(&reply, "signature_mismatch", "forged");
    let reply = post_hook(&server, "/hooks/e", &headers[..2], "{}").await;
    refused(&reply, "missing_header", "unsigned");

    let sized = |len: usize, fill: &str| {
        let body = format!(r#"{{"kind": "{}"}}"#, fill.repeat(len - 12));
        assert_eq!(body.len(), len);
        body
    };
    let too_big = sized(101, "x");
    let reply = post_hook(&server, "/hooks/e", &[], too_big).await;
    reply.error(413, "too_large");

    let exact = sized(100, "b");
    let reply = post_signed(&server, "e", "id-b", exact.as_bytes(), &json_type).await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_eq!(held(&server, "q").await, 2);

    let reply = post_signed(&server, "e", "id-c", br#"{"kind": "c"}"#, &json_type).await;
    reply.error(503, "queue_full");
    let retry_after: u64 = reply
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {reply:?}"))
        .parse()
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(held(&server, "q").await, 2);

    let stats = hook_stats(&server, "e").await;
    assert_eq!(
        stats,
        WebhookStatsOut {
            received: 9,
            accepted: 2,
            duplicates: 1,
            ignored: 1,
            dead_lettered: 1,
            rejected: BTreeMap::from(
                [
                    ("missing_header", 1),
                    ("queue_full", 1),
                    ("signature_mismatch", 1),
                    ("too_large", 1)
                ]
                .map(|(reason, n)| (reason.to_owned(), n))
            ),
        }
    );
}

#[tokio::test]
async fn endpoints_are_defined_checked_listed_kept_and_deleted() {
    // Proves endpoint administration: a broken expression, a missing secret variable and an
    // unknown scheme are each 422 naming the field (the variable, never a secret's value); a
    // missing queue is 404; an endpoint from the config file works; one defined over the API is
    // listed, survives a restart and is gone for good after DELETE (404 on post, get and a
    // second delete, also after another restart). Secrets never reach the log or the API.
    let github = Vector::named("github_json");
    let present_secret = "present-secret-value-1234";
    let config = r#"
[queues.cfgq]

[webhooks.from-config]
queue = "cfgq"
verify = { scheme = "github", secrets = [{ env = "SLUICE_IT_GITHUB" }] }
"#;
    let mut server = TestServer::builder()
        .config(config)
        .env("SLUICE_IT_GITHUB", &github.secrets[0])
        .env("SLUICE_IT_PRESENT", present_secret)
        .env("SLUICE_LOG", "debug")
        .start()
        .await;
    server.put_queue("apiq", json!({})).await;
    let verify = json!({"scheme": "github", "secrets": [{"env": "SLUICE_IT_GITHUB"}]});

    let reply = server
        .put(
            "/v1/webhooks/broken",
            json!({"queue": "apiq", "verify": verify, "transform": "{.a"}),
        )
        .await;
    let error = reply.error(422, "invalid_field");
    assert!(
        error["message"].as_str().unwrap().contains("transform"),
        "{error}"
    );
    let reply = server
        .put(
            "/v1/webhooks/broken",
            json!({"queue": "apiq", "verify": verify, "filter": "select(.a ==", "key": ".k"}),
        )
        .await;
    let error = reply.error(422, "invalid_field");
    assert!(
        error["message"].as_str().unwrap().contains("filter"),
        "{error}"
    );

    let reply = server
        .put(
            "/v1/webhooks/broken",
            json!({"queue": "apiq", "verify": {"scheme": "github", "secrets": [
                {"env": "SLUICE_IT_PRESENT"}, {"env": "SLUICE_IT_SURELY_UNSET"}
            ]}}),
        )
        .await;
    let error = reply.error(422, "invalid_field");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("SLUICE_IT_SURELY_UNSET"),
        "{error}"
    );
    assert!(!reply.text.contains(present_secret), "{}", reply.text);

    let reply = server
        .put(
            "/v1/webhooks/broken",
            json!({"queue": "apiq", "verify": {"scheme": "svix", "secrets": [{"env": "SLUICE_IT_GITHUB"}]}}),
        )
        .await;
    let error = reply.error(422, "invalid_field");
    assert!(
        error["message"].as_str().unwrap().contains("scheme"),
        "{error}"
    );

    let reply = server
        .put(
            "/v1/webhooks/broken",
            json!({"queue": "no-such-queue", "verify": verify}),
        )
        .await;
    reply.error(404, "queue_not_found");
    server
        .get("/v1/webhooks/broken")
        .await
        .error(404, "webhook_not_found");

    // From the config file.
    let reply = github.post(&server, "from-config").await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_eq!(held(&server, "cfgq").await, 1);

    // Over the API: listed, kept across a restart.
    let put = server
        .put(
            "/v1/webhooks/from-api",
            json!({"queue": "apiq", "verify": verify}),
        )
        .await
        .ok();
    assert_eq!(put["created"], true, "{put}");
    assert_eq!(put["webhook"]["path"], "/hooks/from-api", "{put}");
    assert_eq!(put["webhook"]["spec"]["verify"], verify, "{put}");
    let listed = server.get("/v1/webhooks").await;
    let list: sluice_wire::WebhookListOut = listed.parse();
    let names: Vec<&str> = list
        .webhooks
        .iter()
        .map(|hook| hook.name.as_str())
        .collect();
    assert_eq!(names, ["from-api", "from-config"], "{}", listed.text);

    server.restart().await;
    let reply = github.post(&server, "from-api").await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_eq!(held(&server, "apiq").await, 1);
    let list: sluice_wire::WebhookListOut = server.get("/v1/webhooks").await.parse();
    let names: Vec<&str> = list
        .webhooks
        .iter()
        .map(|hook| hook.name.as_str())
        .collect();
    assert_eq!(names, ["from-api", "from-config"]);

    // A secret from a file; when the file goes bad, the restart logs the error without it.
    let secret_dir = tempfile::tempdir().expect("temp dir");
    let secret_file = secret_dir.path().join("standard.secret");
    std::fs::write(&secret_file, format!("{STANDARD_SECRET}\n")).unwrap();
    define(
        &server,
        "from-file",
        json!({"queue": "apiq", "verify": {
            "scheme": "standard_webhooks",
            "secrets": [{"file": secret_file.display().to_string()}],
        }}),
    )
    .await;
    let signer = StandardSigner::new(STANDARD_SECRET).unwrap();
    let unix_now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let headers = standard_headers(&signer, "msg_file", unix_now, b"{}", &[]);
    let reply = post_hook(&server, "/hooks/from-file", &headers, "{}").await;
    assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
    assert_eq!(held(&server, "apiq").await, 2);
    let bad_secret = "whsec_%%leaked-if-logged%%";
    std::fs::write(&secret_file, bad_secret).unwrap();
    server.restart().await;
    let log = server.log_tail(usize::MAX);
    assert!(
        log.contains("from-file"),
        "the bad stored endpoint is not logged:\n{log}"
    );
    assert_no_secrets(&log, &[bad_secret, "leaked-if-logged"], "the server log");

    // Deleted: gone, also after a restart.
    let deleted = server.delete("/v1/webhooks/from-api").await.ok();
    assert_eq!(deleted, json!({"deleted": true}));
    github
        .post(&server, "from-api")
        .await
        .error(404, "webhook_not_found");
    server
        .get("/v1/webhooks/from-api")
        .await
        .error(404, "webhook_not_found");
    server
        .delete("/v1/webhooks/from-api")
        .await
        .error(404, "webhook_not_found");
    server.restart().await;
    github
        .post(&server, "from-api")
        .await
        .error(404, "webhook_not_found");
    let list: sluice_wire::WebhookListOut = server.get("/v1/webhooks").await.parse();
    assert_eq!(list.webhooks.len(), 1);
    assert_eq!(list.webhooks[0].name, "from-config");

    let secrets = [github.secrets[0].as_str(), present_secret];
    assert_no_secrets(
        &server.get("/v1/webhooks").await.text,
        &secrets,
        "GET /v1/webhooks",
    );
    assert_no_secrets(&server.log_tail(usize::MAX), &secrets, "the server log");
}

#[tokio::test]
async fn ten_thousand_signed_deliveries_from_32_senders_are_all_stored_and_pushed_once() {
    // Proves ingress under concurrency: 10,000 freshly signed Standard Webhooks requests with
    // distinct webhook-ids, from 32 concurrent tasks against a real-time server, are all 202
    // and the queue then holds exactly 10,000 messages; then a push destination receives each
    // exactly once. Bounded to 120 s per phase.
    const TOTAL: usize = 10_000;
    const SENDERS: usize = 32;
    let server = TestServer::builder()
        .env(STANDARD_SECRET_ENV, STANDARD_SECRET)
        .start()
        .await;
    server.put_queue("load", json!({})).await;
    define(&server, "load", standard_spec("load", json!({}))).await;

    let run = async {
        let mut tasks = Vec::new();
        for sender in 0..SENDERS {
            let client = server.client().clone();
            let url = format!("{}/hooks/load", server.url());
            tasks.push(tokio::spawn(async move {
                let signer = StandardSigner::new(STANDARD_SECRET).unwrap();
                let mut accepted = 0;
                for n in (sender..TOTAL).step_by(SENDERS) {
                    let body = json!({"n": n, "sender": sender}).to_string();
                    let id = format!("msg_load_{n}");
                    let now_s = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_secs() as i64;
                    let mut request = client.post(&url).body(body.clone());
                    for (name, value) in signer.headers(&id, now_s, body.as_bytes()) {
                        request = request.header(name, value);
                    }
                    let response = request.send().await.expect("POST /hooks/load");
                    let reply = read_reply(format!("POST /hooks/load ({id})"), response).await;
                    assert_eq!(reply.status, StatusCode::ACCEPTED, "{id}: {}", reply.text);
                    accepted += 1;
                }
                accepted
            }));
        }
        let mut accepted = 0;
        for task in tasks {
            accepted += task.await.expect("sender task");
        }
        accepted
    };
    let accepted = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("10,000 deliveries took more than 120 s");
    assert_eq!(accepted, TOTAL);
    let stats = server.stats("load").await;
    assert_eq!(stats["ready"], TOTAL as u64, "{stats}");
    let hook = hook_stats(&server, "load").await;
    assert_eq!(hook.accepted, TOTAL as u64, "{hook:?}");

    // Then a push destination receives each of them exactly once.
    let destination = crate::support::destination::Destination::start().await;
    server
        .put_queue(
            "load",
            json!({"push": {"url": destination.url("/in"), "concurrency": 32}}),
        )
        .await;
    let received = destination.wait_for(TOTAL, Duration::from_secs(120)).await;
    let distinct: std::collections::HashSet<String> = received
        .iter()
        .map(|request| request.message_id().to_owned())
        .collect();
    assert_eq!(distinct.len(), TOTAL, "every webhook pushed");
    assert_eq!(received.len(), TOTAL, "none pushed twice");
    let stats = server.stats("load").await;
    assert_eq!(stats["push"]["delivered"], TOTAL as u64, "{stats}");
}
