//! Webhooks as their senders really send them: Svix (signed by the `svix` library itself, which
//! sends `svix-*` headers), Slack's Events API (the `url_verification` handshake, and retries of
//! one event), and the sender's signature headers kept with a message for consumers that check
//! the body themselves (`keep_signature_headers`).
//!
//! The Svix test runs the `svix` Python package pinned in `.ci/requirements-webhooks.txt`,
//! installed into a venv under the target directory on first use. Without Python's venv or the
//! package index it reports itself skipped, unless `CI` is set, where it fails.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use reqwest::StatusCode;
use serde_json::{Value, json};
use sluice_webhooks::sign::{StandardSigner, hmac};
use sluice_webhooks::verify::HmacAlgorithm;
use sluice_wire::ReceiveOut;

use crate::support::hooks::{define, held, hook_stats, post_hook};
use crate::support::python::venv_python_or_skip;
use crate::support::{Reply, TestServer};

/// The test clock's start: every signature below is made at this time or after.
const START_S: i64 = 1_700_000_000;
/// A Standard Webhooks secret, as Svix shows it (24 random bytes, base64).
const SVIX_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// A well-formed secret that signs nothing the endpoints accept.
const OTHER_SVIX_SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
/// A Slack signing secret (32 hex characters, as Slack issues them).
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const GITHUB_SECRET: &str = "It's a Secret to Everybody";

/// A test-clock server at [`START_S`] with every secret of this module in its environment.
async fn server_with_secrets(config: &str) -> TestServer {
    TestServer::builder()
        .test_clock(true)
        .env("SLUICE_TEST_CLOCK_START_MS", &(START_S * 1000).to_string())
        .env("SENDERS_SVIX_SECRET", SVIX_SECRET)
        .env("SENDERS_SLACK_SECRET", SLACK_SECRET)
        .env("SENDERS_GITHUB_SECRET", GITHUB_SECRET)
        .config(config)
        .start()
        .await
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

fn assert_status(reply: &Reply, status: StatusCode, context: &str) {
    assert_eq!(
        reply.status, status,
        "{context}: {} answered {}: {}",
        reply.request, reply.status, reply.text
    );
}

fn assert_refused(reply: &Reply, code: &str, context: &str) {
    assert_status(reply, StatusCode::UNAUTHORIZED, context);
    assert_eq!(
        reply.error_shape()["code"],
        code,
        "{context}: {}",
        reply.text
    );
}

/// Receives every message of `queue` (at most 100) with its body exactly as stored.
async fn receive_all(server: &TestServer, queue: &str) -> ReceiveOut {
    let reply = server
        .post(&format!("/v1/queues/{queue}/receive"), json!({"max": 100}))
        .await;
    reply.ok();
    reply.parse()
}

// ---- Svix, signed by the svix library ----

/// One signature for the svix library to make.
struct SvixSigning<'a> {
    secret: &'a str,
    msg_id: &'a str,
    timestamp_s: i64,
    body: &'a str,
}

/// `svix.webhooks.Webhook(secret).sign(msg_id, timestamp, body)` for each request, in order.
fn svix_sign(python: &Path, requests: &[SvixSigning<'_>]) -> Vec<String> {
    const SIGN: &str = r#"
import json, sys
from datetime import datetime, timezone
from svix.webhooks import Webhook
out = []
for secret, msg_id, timestamp, body in json.load(sys.stdin):
    when = datetime.fromtimestamp(timestamp, tz=timezone.utc)
    out.append(Webhook(secret).sign(msg_id, when, body))
json.dump(out, sys.stdout)
"#;
    let input: Vec<Value> = requests
        .iter()
        .map(|r| json!([r.secret, r.msg_id, r.timestamp_s, r.body]))
        .collect();
    let mut child = Command::new(python)
        .args(["-c", SIGN])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the venv's python");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(Value::Array(input).to_string().as_bytes())
        .expect("write to python");
    let output = child.wait_with_output().expect("python's answer");
    assert!(
        output.status.success(),
        "svix signing failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let signatures: Vec<String> = serde_json::from_slice(&output.stdout).expect("JSON list");
    assert_eq!(signatures.len(), requests.len());
    signatures
}

/// Headers of a Standard Webhooks delivery under the names `prefix-id`, `prefix-timestamp`,
/// `prefix-signature`.
fn delivery_headers(
    prefix: &str,
    id: &str,
    timestamp_s: i64,
    signature: &str,
) -> Vec<(String, String)> {
    vec![
        (format!("{prefix}-id"), id.to_owned()),
        (format!("{prefix}-timestamp"), timestamp_s.to_string()),
        (format!("{prefix}-signature"), signature.to_owned()),
        ("content-type".into(), "application/json".into()),
    ]
}

#[tokio::test]
async fn svix_deliveries_signed_by_the_svix_library_are_taken_under_either_header_set() {
    // Proves, with signatures made by the `svix` Python library: a delivery with Svix's
    // `svix-id`/`svix-timestamp`/`svix-signature` and one with the standard `webhook-*` names
    // are both stored (202), each with its id as the idempotency key; Svix's retry of the first
    // (same id, signed again later) is a duplicate (200, nothing stored); and each forgery is
    // refused with 401 and stores nothing: a changed body, another secret, a changed svix-id, a
    // wrong svix-signature beside a valid webhook-* set (the svix- names win, as in Svix's
    // libraries), a stale timestamp, no signature at all. The signature headers are not kept.
    let Some(python) = venv_python_or_skip(
        "webhook-senders",
        "requirements-webhooks.txt",
        "the svix library",
    ) else {
        return;
    };
    let server = server_with_secrets("").await;
    server.put_queue("svix-events", json!({})).await;
    define(
        &server,
        "svix",
        json!({"queue": "svix-events",
            "verify": {"scheme": "standard_webhooks", "secrets": [{"env": "SENDERS_SVIX_SECRET"}]}}),
    )
    .await;

    let body = r#"{"type": "invoice.paid",  "data": {"id": 42, "amount": 10.50}}"#;
    let later = START_S + 30;
    let signing = |secret, msg_id, timestamp_s, body| SvixSigning {
        secret,
        msg_id,
        timestamp_s,
        body,
    };
    let signatures = svix_sign(
        &python,
        &[
            signing(SVIX_SECRET, "msg_2x7svix", START_S, body),
            signing(SVIX_SECRET, "msg_2x7standard", START_S, body),
            signing(SVIX_SECRET, "msg_2x7svix", later, body),
            signing(OTHER_SVIX_SECRET, "msg_2x7other", START_S, body),
            signing(SVIX_SECRET, "msg_2x7stale", START_S - 301, body),
        ],
    );
    let [
        svix_sig,
        standard_sig,
        retry_sig,
        other_secret_sig,
        stale_sig,
    ] = <[String; 5]>::try_from(signatures).expect("five signatures");
    let post = |headers: Vec<(String, String)>, body: &str| {
        let body = body.to_owned();
        let server = &server;
        async move { post_hook(server, "/hooks/svix", &headers, body).await }
    };

    let reply = post(
        delivery_headers("svix", "msg_2x7svix", START_S, &svix_sig),
        body,
    )
    .await;
    assert_status(&reply, StatusCode::ACCEPTED, "svix-* headers");
    assert_eq!(reply.json()["idempotency_key"], "msg_2x7svix");
    let reply = post(
        delivery_headers("webhook", "msg_2x7standard", START_S, &standard_sig),
        body,
    )
    .await;
    assert_status(&reply, StatusCode::ACCEPTED, "webhook-* headers");
    assert_eq!(reply.json()["idempotency_key"], "msg_2x7standard");

    server.advance_clock(30_000).await;
    let reply = post(
        delivery_headers("svix", "msg_2x7svix", later, &retry_sig),
        body,
    )
    .await;
    assert_status(&reply, StatusCode::OK, "Svix's retry");
    assert_eq!(reply.json()["duplicate"], true, "{}", reply.text);

    let changed = body.replace("10.50", "1050");
    let forgeries = [
        (
            "a changed body",
            delivery_headers("svix", "msg_2x7svix", later, &retry_sig),
            changed.as_str(),
            "signature_mismatch",
        ),
        (
            "another secret",
            delivery_headers("svix", "msg_2x7other", START_S, &other_secret_sig),
            body,
            "signature_mismatch",
        ),
        (
            "a changed svix-id",
            delivery_headers("svix", "msg_2x7forged", later, &retry_sig),
            body,
            "signature_mismatch",
        ),
        (
            "a wrong svix-signature beside a valid webhook-* set",
            [
                delivery_headers("svix", "msg_2x7svix", later, &other_secret_sig),
                delivery_headers("webhook", "msg_2x7svix", later, &retry_sig),
            ]
            .concat(),
            body,
            "signature_mismatch",
        ),
        (
            "a stale timestamp",
            delivery_headers("svix", "msg_2x7stale", START_S - 301, &stale_sig),
            body,
            "timestamp_out_of_tolerance",
        ),
        (
            "no signature",
            owned(&[("svix-id", "msg_2x7none"), ("svix-timestamp", "1700000030")]),
            body,
            "missing_header",
        ),
    ];
    for (what, headers, body, code) in forgeries {
        let reply = post(headers, body).await;
        assert_refused(&reply, code, what);
    }

    let received = receive_all(&server, "svix-events").await;
    let mut ids: Vec<_> = received
        .messages
        .iter()
        .map(|m| m.id.clone().unwrap_or_default())
        .collect();
    ids.sort();
    assert_eq!(ids, ["msg_2x7standard", "msg_2x7svix"]);
    for message in &received.messages {
        assert_eq!(message.body.as_ref().map(|b| b.get()), Some(body));
        for signature_header in [
            "svix-signature",
            "svix-timestamp",
            "webhook-signature",
            "webhook-timestamp",
        ] {
            assert!(
                !message.headers.contains_key(signature_header),
                "{:?}",
                message.headers
            );
        }
    }
    let stats = hook_stats(&server, "svix").await;
    assert_eq!((stats.accepted, stats.duplicates), (2, 1), "{stats:?}");
}

// ---- Slack ----

/// Slack's request signing: `v0=` + hex HMAC-SHA256 of `v0:<timestamp>:<body>`.
fn slack_headers(secret: &str, timestamp_s: i64, body: &str) -> Vec<(String, String)> {
    let timestamp = timestamp_s.to_string();
    let mac = hmac(
        HmacAlgorithm::Sha256,
        secret.as_bytes(),
        &[b"v0:", timestamp.as_bytes(), b":", body.as_bytes()],
    );
    vec![
        ("x-slack-request-timestamp".into(), timestamp),
        ("x-slack-signature".into(), format!("v0={}", hex(&mac))),
        ("content-type".into(), "application/json".into()),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test]
async fn slack_url_verification_is_answered_and_retried_events_are_stored_once() {
    // Proves: Slack's signed `url_verification` handshake is answered 200 with the challenge as
    // plain text and stores nothing (counted as ignored); the same handshake unsigned, signed
    // with another secret, or stale is refused with 401 and its challenge is not echoed; an
    // Events API callback is stored with its `event_id` as the idempotency key, and Slack's
    // retry of it (same event_id, `X-Slack-Retry-Num: 1`, signed again later) is a duplicate, so
    // the queue holds it once.
    let server = server_with_secrets("").await;
    server.put_queue("slack-events", json!({})).await;
    define(
        &server,
        "slack",
        json!({"queue": "slack-events",
            "verify": {"scheme": "slack", "secrets": [{"env": "SENDERS_SLACK_SECRET"}]}}),
    )
    .await;
    let challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P";
    let handshake = format!(
        r#"{{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"{challenge}","type":"url_verification"}}"#
    );

    let reply = post_hook(
        &server,
        "/hooks/slack",
        &slack_headers(SLACK_SECRET, START_S, &handshake),
        handshake.clone(),
    )
    .await;
    assert_status(&reply, StatusCode::OK, "signed handshake");
    assert_eq!(reply.text, challenge);
    assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/plain")),
        "{:?}",
        reply.headers
    );
    assert_eq!(held(&server, "slack-events").await, 0);

    let refusals = [
        (
            "unsigned",
            owned(&[("content-type", "application/json")]),
            "missing_header",
        ),
        (
            "signed with another secret",
            slack_headers("00000000000000000000000000000000", START_S, &handshake),
            "signature_mismatch",
        ),
        (
            "stale",
            slack_headers(SLACK_SECRET, START_S - 301, &handshake),
            "timestamp_out_of_tolerance",
        ),
    ];
    for (what, headers, code) in refusals {
        let reply = post_hook(&server, "/hooks/slack", &headers, handshake.clone()).await;
        assert_refused(&reply, code, what);
        assert!(!reply.text.contains(challenge), "{what}: {}", reply.text);
    }

    let event = r#"{"token":"XXYYZZ","team_id":"T123ABC456","api_app_id":"A123ABC456","event":{"type":"app_mention","user":"U123ABC456","text":"<@U0LAN0Z89> is it everything a river should be?","ts":"1515449522.000016","channel":"C123ABC456","event_ts":"1515449522000016"},"type":"event_callback","event_id":"Ev123ABC456","event_time":1515449522000016,"authorizations":[{"enterprise_id":"E123ABC456","team_id":"T123ABC456","user_id":"U123ABC456","is_bot":false,"is_enterprise_install":false}],"is_ext_shared_channel":false,"event_context":"EC123ABC456"}"#;
    let reply = post_hook(
        &server,
        "/hooks/slack",
        &slack_headers(SLACK_SECRET, START_S, event),
        event,
    )
    .await;
    assert_status(&reply, StatusCode::ACCEPTED, "event callback");
    assert_eq!(reply.json()["idempotency_key"], "Ev123ABC456");
    // Slack retries after 3 seconds without an answer, signed anew.
    server.advance_clock(3_000).await;
    let mut retry = slack_headers(SLACK_SECRET, START_S + 3, event);
    retry.extend(owned(&[
        ("x-slack-retry-num", "1"),
        ("x-slack-retry-reason", "http_timeout"),
    ]));
    let reply = post_hook(&server, "/hooks/slack", &retry, event).await;
    assert_status(&reply, StatusCode::OK, "Slack's retry");
    assert_eq!(reply.json()["duplicate"], true, "{}", reply.text);

    let received = receive_all(&server, "slack-events").await;
    assert_eq!(received.messages.len(), 1);
    assert_eq!(received.messages[0].id.as_deref(), Some("Ev123ABC456"));
    assert_eq!(
        received.messages[0].body.as_ref().map(|b| b.get()),
        Some(event)
    );
    let stats = hook_stats(&server, "slack").await;
    assert_eq!(
        (stats.accepted, stats.duplicates, stats.ignored),
        (1, 1, 1),
        "{stats:?}"
    );
}

// ---- keep_signature_headers ----

#[tokio::test]
async fn kept_signature_headers_let_a_consumer_verify_the_stored_body() {
    // Proves: with `keep_signature_headers = true` (from the config file for a GitHub endpoint,
    // over the API for a Standard Webhooks one sent under Svix's names) the message keeps the
    // sender's signature headers and the body exactly as signed, so a consumer recomputes the
    // sender's signature from the stored message and it matches; without it (the default) the
    // same delivery is stored without them. The definition shows the setting.
    let server = server_with_secrets(
        r#"
[queues.github-kept]
[queues.github-dropped]
[queues.svix-kept]

[webhooks.github-kept]
queue = "github-kept"
verify = { scheme = "github", secrets = [{ env = "SENDERS_GITHUB_SECRET" }] }
keep_signature_headers = true

[webhooks.github-dropped]
queue = "github-dropped"
verify = { scheme = "github", secrets = [{ env = "SENDERS_GITHUB_SECRET" }] }
"#,
    )
    .await;
    let kept = define(
        &server,
        "svix-kept",
        json!({"queue": "svix-kept", "keep_signature_headers": true,
            "verify": {"scheme": "standard_webhooks", "secrets": [{"env": "SENDERS_SVIX_SECRET"}]}}),
    )
    .await;
    assert_eq!(kept["spec"]["keep_signature_headers"], true, "{kept}");
    let shown = server.get("/v1/webhooks/github-kept").await.ok();
    assert_eq!(shown["spec"]["keep_signature_headers"], true, "{shown}");
    let shown = server.get("/v1/webhooks/github-dropped").await.ok();
    assert!(
        shown["spec"].get("keep_signature_headers").is_none(),
        "{shown}"
    );

    // Spacing, key order and a number that JSON parsers would rewrite: all signed as sent.
    let body = r#"{"zen": "Design for failure.",   "hook_id": 1, "amount": 1.500e2}"#;
    let mac = hmac(
        HmacAlgorithm::Sha256,
        GITHUB_SECRET.as_bytes(),
        &[body.as_bytes()],
    );
    let github = owned(&[
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("x-github-event", "ping"),
        ("x-hub-signature-256", &format!("sha256={}", hex(&mac))),
        ("content-type", "application/json"),
    ]);
    for endpoint in ["github-kept", "github-dropped"] {
        let reply = post_hook(&server, &format!("/hooks/{endpoint}"), &github, body).await;
        assert_status(&reply, StatusCode::ACCEPTED, endpoint);
    }
    let signer = StandardSigner::new(SVIX_SECRET).expect("secret");
    let svix = delivery_headers(
        "svix",
        "msg_kept",
        START_S,
        &signer.sign("msg_kept", START_S, body.as_bytes()),
    );
    let reply = post_hook(&server, "/hooks/svix-kept", &svix, body).await;
    assert_status(&reply, StatusCode::ACCEPTED, "svix-kept");

    // The consumer's side: only the stored message and the secret.
    let message = receive_all(&server, "github-kept").await.messages.remove(0);
    let stored = message.body.as_ref().expect("a JSON body").get();
    assert_eq!(stored, body);
    let header = &message.headers["x-hub-signature-256"];
    let expected = hmac(
        HmacAlgorithm::Sha256,
        GITHUB_SECRET.as_bytes(),
        &[stored.as_bytes()],
    );
    assert_eq!(header, &format!("sha256={}", hex(&expected)));

    let message = receive_all(&server, "svix-kept").await.messages.remove(0);
    let stored = message.body.as_ref().expect("a JSON body").get();
    let timestamp: i64 = message.headers["svix-timestamp"].parse().expect("seconds");
    let expected = signer.sign(&message.headers["svix-id"], timestamp, stored.as_bytes());
    assert_eq!(message.headers["svix-signature"], expected);

    let message = receive_all(&server, "github-dropped")
        .await
        .messages
        .remove(0);
    assert_eq!(message.body.as_ref().map(|b| b.get()), Some(body));
    assert!(
        !message.headers.contains_key("x-hub-signature-256"),
        "{:?}",
        message.headers
    );
    assert_eq!(message.headers["x-github-event"], "ping");
    // Credentials are never kept, whatever the setting.
    let with_credentials = owned(&[
        ("x-github-delivery", "72d3162e-0000-0000-0000-000000000001"),
        ("x-hub-signature-256", &format!("sha256={}", hex(&mac))),
        ("authorization", "Bearer secret-token"),
        ("content-type", "application/json"),
    ]);
    let reply = post_hook(&server, "/hooks/github-kept", &with_credentials, body).await;
    assert_status(&reply, StatusCode::ACCEPTED, "with credentials");
    let message = receive_all(&server, "github-kept").await.messages.remove(0);
    assert!(message.headers.contains_key("x-hub-signature-256"));
    assert!(
        !message.headers.contains_key("authorization"),
        "{:?}",
        message.headers
    );
}
