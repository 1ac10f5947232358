//! Property-based fuzzing of the SQS parsers (issue 30): request detection and both protocols'
//! parsers (`detect`, `Request::from_query`, `Request::from_json`) and SigV4 verification, fed
//! random bytes and hostile but well-formed inputs built from the real parameter names.
//!
//! Every input must be answered without a panic: an accepted request respects the protocol's
//! caps (`QUERY_PARAMETERS_MAX`, `PARAMETER_NAME_PARTS_MAX`), and a refusal is an `SqsError`
//! with a message. The CI run is short; the long run (RELIABILITY.md):
//!
//! ```text
//! SLUICE_FUZZ_CASES=2000000 cargo test --release -p sluice-sqs --test fuzz -- --nocapture
//! ```

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use sluice_sqs::protocol::{PARAMETER_NAME_PARTS_MAX, QUERY_PARAMETERS_MAX};
use sluice_sqs::{Action, Protocol, Request, SignedRequest, detect};

/// Cases per property: a few hundred in CI, as many as `SLUICE_FUZZ_CASES` says otherwise.
fn runner() -> TestRunner {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(200);
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// Parameter names as SQS clients write them, and ways to break them.
fn name() -> impl Strategy<Value = String> {
    let parts = prop_oneof![
        Just("Action".to_owned()),
        Just("QueueUrl".to_owned()),
        Just("MessageBody".to_owned()),
        Just("QueueName".to_owned()),
        Just("Attribute".to_owned()),
        Just("Name".to_owned()),
        Just("Value".to_owned()),
        Just("MessageAttribute".to_owned()),
        Just("StringListValue".to_owned()),
        Just("BinaryValue".to_owned()),
        Just("DataType".to_owned()),
        Just("SendMessageBatchRequestEntry".to_owned()),
        Just("DeleteMessageBatchRequestEntry".to_owned()),
        Just("Id".to_owned()),
        Just("ReceiptHandle".to_owned()),
        Just("MaxNumberOfMessages".to_owned()),
        Just("DelaySeconds".to_owned()),
        Just("Tag".to_owned()),
        Just("AttributeName".to_owned()),
        (0u32..20).prop_map(|n| n.to_string()),
        "[A-Za-z0-9%+]{0,12}",
    ];
    prop::collection::vec(parts, 1..12).prop_map(|parts| parts.join("."))
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("SendMessage".to_owned()),
        Just("SendMessageBatch".to_owned()),
        Just("ReceiveMessage".to_owned()),
        Just("CreateQueue".to_owned()),
        Just("String".to_owned()),
        Just("Number".to_owned()),
        Just("Binary".to_owned()),
        Just("-1".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just("%FF%FE".to_owned()),
        Just("x".repeat(300)),
        "[ -~]{0,40}",
    ]
}

/// A form of parameters, sometimes with deep names or many repeats.
fn form() -> impl Strategy<Value = String> {
    let pairs = prop::collection::vec((name(), value()), 0..60);
    (pairs, 0usize..3, 0usize..2000).prop_map(|(pairs, extra, repeats)| {
        let mut text: Vec<String> = pairs
            .into_iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        match extra {
            1 => text.push(format!("{}=x", ".".repeat(repeats * 10))),
            2 => text.extend((0..repeats).map(|i| format!("P{i}=x"))),
            _ => {}
        }
        text.join("&")
    })
}

/// JSON bodies: well-formed members of every request, hostile shapes, and random text.
fn json_body() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::json!(f)),
        "[ -~]{0,20}".prop_map(serde_json::Value::from),
    ];
    let value = leaf.prop_recursive(6, 200, 10, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..10).prop_map(serde_json::Value::from),
            prop::collection::btree_map(name(), inner, 0..10)
                .prop_map(|map| serde_json::Value::Object(map.into_iter().collect())),
        ]
    });
    prop_oneof![
        value.prop_map(|v| serde_json::to_vec(&v).unwrap()),
        prop::collection::vec(any::<u8>(), 0..400),
        (1usize..200_000).prop_map(|depth| {
            let mut text = "[".repeat(depth);
            text.push_str(&"]".repeat(depth));
            text.into_bytes()
        }),
    ]
}

fn headers(pairs: &[(String, String)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            map.append(name, value);
        }
    }
    map
}

fn header_pairs() -> impl Strategy<Value = Vec<(String, String)>> {
    let name = prop_oneof![
        Just("content-type".to_owned()),
        Just("x-amz-target".to_owned()),
        Just("authorization".to_owned()),
        Just("x-amz-date".to_owned()),
        Just("x-amz-content-sha256".to_owned()),
        Just("host".to_owned()),
        "[a-z-]{1,12}",
    ];
    let value = prop_oneof![
        Just("application/x-www-form-urlencoded".to_owned()),
        Just("application/x-amz-json-1.0".to_owned()),
        Just("AmazonSQS.SendMessage".to_owned()),
        Just("AmazonSQS.Nope".to_owned()),
        Just("UNSIGNED-PAYLOAD".to_owned()),
        Just("20261126T160000Z".to_owned()),
        Just("AWS4-HMAC-SHA256 Credential=k/20261126/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date, Signature=00".to_owned()),
        "[ -~]{0,60}",
    ];
    prop::collection::vec((name, value), 0..6)
}

/// The caps an accepted query request keeps.
fn assert_within_caps(params: &[(String, String)]) {
    assert!(
        params.len() <= QUERY_PARAMETERS_MAX + 1,
        "{} parameters",
        params.len()
    );
    for (name, _) in params {
        assert!(
            name.split('.').count() <= PARAMETER_NAME_PARTS_MAX,
            "{name:?} has too many parts"
        );
    }
}

#[test]
fn query_requests_are_parsed_or_refused_never_panic() {
    let strategy = (
        prop::bool::ANY,
        prop::option::of(form()),
        form(),
        header_pairs(),
        prop_oneof![
            Just("/".to_owned()),
            Just("/000000000000/q".to_owned()),
            "/[a-z0-9/]{0,20}"
        ],
    );
    runner()
        .run(&strategy, |(post, query, body, pairs, path)| {
            let method = if post { Method::POST } else { Method::GET };
            let headers = headers(&pairs);
            match detect(&method, &path, query.as_deref(), &headers, body.as_bytes()) {
                Protocol::Query { action, params } => {
                    assert_within_caps(&params);
                    if let Err(error) = Request::from_query(action, &params) {
                        assert!(
                            !error.message.is_empty() || error.kind.code() == "UnknownOperation"
                        );
                    }
                }
                Protocol::Json { action } => {
                    let _ = Request::from_json(action, body.as_bytes());
                }
                Protocol::Refused { error, .. } => {
                    assert!(!error.kind.code().is_empty());
                }
                Protocol::NotSqs => {}
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn json_bodies_are_parsed_or_refused_never_panic() {
    let actions: Vec<Action> = [
        "SendMessage",
        "SendMessageBatch",
        "ReceiveMessage",
        "DeleteMessageBatch",
        "ChangeMessageVisibilityBatch",
        "CreateQueue",
        "SetQueueAttributes",
        "TagQueue",
        "StartMessageMoveTask",
        "AddPermission",
    ]
    .iter()
    .map(|name| Action::from_name(name).unwrap())
    .collect();
    let strategy = (0..actions.len(), json_body());
    runner()
        .run(&strategy, |(index, body)| {
            if let Err(error) = Request::from_json(actions[index], &body) {
                assert!(!error.message.is_empty(), "{error:?}");
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn signatures_are_verified_or_refused_never_panic() {
    let strategy = (
        header_pairs(),
        prop::option::of("[ -~]{0,80}"),
        prop::collection::vec(any::<u8>(), 0..200),
    );
    let now = time::OffsetDateTime::from_unix_timestamp(1_795_708_800).unwrap();
    runner()
        .run(&strategy, |(pairs, query, body)| {
            let headers = headers(&pairs);
            let request = SignedRequest {
                method: &Method::POST,
                path: "/",
                query: query.as_deref(),
                headers: &headers,
                body: &body,
            };
            if let Err(error) =
                sluice_sqs::sigv4::verify(&request, |_| Some("secret".to_owned()), now)
            {
                assert!(!error.kind.code().is_empty());
            }
            Ok(())
        })
        .unwrap();
}
