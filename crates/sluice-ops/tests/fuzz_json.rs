//! Property-based fuzzing of the JSON request decoding that the HTTP API and the gRPC API
//! share, at the library level: the request documents of `sluice_wire` (`EnqueueIn`,
//! `MessageIn`, `AckIn`, `NackIn`, `ExtendIn`, `ReceiveIn`, `ReplayIn`, `CancelIn`, `DrainIn`,
//! `QueueSpec`, `WebhookSpec`, `AlertSpec`, `ScheduleSpec`, `TopicSpec`, …), then what the
//! operations do with a message: `MessageRequest::decode_body` and `Enqueue::add` (a real
//! `Ops` over SQLite, on a queue with the defaults and on one with small limits and content
//! dedup), and `QueueSpec::apply_to`. The whole HTTP route is fuzzed through the real binary by
//! `crates/sluice-cli/tests/fuzz_api.rs`; the gRPC decoders by `crates/sluice-grpc/tests/fuzz.rs`.
//!
//! What is generated: objects of the documents' own field names with values of every type;
//! nesting far past serde_json's recursion limit; huge arrays and header maps; duplicate keys;
//! numbers past `i64`/`u64`/`f64`; escapes that are no character (lone surrogates, `\u12`,
//! `\x41`); invalid UTF-8 inside strings; bodies in base64 valid and not; ids, keys, headers,
//! delays and times at and past their limits; and valid documents with bytes changed.
//!
//! Properties: nothing panics; every call returns within `CALL_TIME_MAX`; every refusal has a
//! message; a message `Enqueue::add` accepts is inside the documented limits (body bytes, id
//! and key lengths, header count and bytes, delay), and a body taken as JSON is JSON.
//!
//! `SLUICE_FUZZ_CASES` cases per property (default 256: seconds in a debug build). The long
//! run (release build; RELIABILITY.md has the last results):
//! `SLUICE_FUZZ_CASES=1000000 cargo test --release -p sluice-ops --test fuzz_json -- --nocapture`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::TestRunner;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use sluice_core::message::BodyKind;
use sluice_core::queue::{Dedup, QueueConfig, limits};
use sluice_core::store::QueuePutParams;
use sluice_core::{Clock, ManualClock, Store};
use sluice_ops::{MessageRequest, Ops, OpsError};
use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
use sluice_wire::{
    AckIn, AlertSpec, CancelIn, DrainIn, EnqueueIn, ExtendIn, MessageBatchIn, MessageIn, NackIn,
    PushSpec, QueueSpec, ReceiveIn, ReplayIn, ReplayOneIn, ScheduleSpec, SubscriptionSpec,
    TopicSpec, WebhookSpec,
};
use tokio_util::sync::CancellationToken;

fn config() -> ProptestConfig {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    ProptestConfig {
        // Regressions are written as tests below, not to a file.
        failure_persistence: None,
        ..ProptestConfig::with_cases(cases.unwrap_or(256))
    }
}

/// Generous for a debug build: the largest inputs are a few MiB of JSON.
const CALL_TIME_MAX: Duration = Duration::from_secs(5);

/// The small queue's body limit.
const SMALL_BODY_MAX: usize = 64;

struct Fixture {
    runtime: tokio::runtime::Runtime,
    ops: Ops,
    _dir: tempfile::TempDir,
}

/// Two queues over SQLite: `q` with the defaults, `small` with a 64-byte body limit,
/// content dedup and a default delay.
fn fixture() -> Fixture {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ops = runtime.block_on(async {
        let mut options = SqliteOptions::new(dir.path());
        options.durability = Durability::Os;
        options.disk_reserve_bytes = 0;
        let clock = ManualClock::new(1_700_000_000_000);
        let store: Arc<dyn Store> =
            Arc::new(SharedSqliteStore::open(options, clock.now_ms()).expect("the store opens"));
        let mut small = QueueConfig::defaults_for("small");
        small.max_message_bytes = SMALL_BODY_MAX;
        small.dedup = Dedup::Content;
        small.delay_ms = 1_000;
        for (name, config) in [("q", QueueConfig::defaults_for("q")), ("small", small)] {
            store
                .queue_put(QueuePutParams {
                    name: name.to_owned(),
                    config,
                    now_ms: clock.now_ms(),
                })
                .await
                .expect("the queue is defined");
        }
        Ops::new(store, Arc::new(clock), Arc::new(CancellationToken::new()))
    });
    Fixture {
        runtime,
        ops,
        _dir: dir,
    }
}

fn timed<T>(what: &str, call: impl FnOnce() -> T) -> Result<T, TestCaseError> {
    let started = Instant::now();
    let out = call();
    let took = started.elapsed();
    prop_assert!(took <= CALL_TIME_MAX, "{what} took {took:?}");
    Ok(out)
}

fn check_ops_error(error: &OpsError) -> Result<(), TestCaseError> {
    prop_assert!(!error.message.trim().is_empty(), "no message: {error:?}");
    Ok(())
}

// ---- Generated JSON ------------------------------------------------------------------------

/// Every field name of the request documents fuzzed here, and a few that are none.
const FIELDS: &[&str] = &[
    "messages",
    "id",
    "body",
    "body_base64",
    "headers",
    "key",
    "priority",
    "delay_ms",
    "not_before",
    "max",
    "wait_ms",
    "visibility_timeout_ms",
    "receipt",
    "receipts",
    "result",
    "then",
    "queue",
    "error",
    "permanent",
    "ids",
    "since",
    "until",
    "limit",
    "dry_run",
    "target_queue",
    "message_id",
    "reason",
    "timeout_ms",
    "max_attempts",
    "backoff",
    "dead_letter_queue",
    "rate_limit",
    "push",
    "url",
    "schema",
    "tags",
    "cron",
    "message",
    "subscriptions",
    "filter",
    "",
    "Body",
];

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        any::<i32>().prop_map(Value::from),
        select(vec![
            0_i64,
            -1,
            1,
            i64::from(i32::MAX) + 1,
            limits::DELAY_MS_MAX,
            limits::DELAY_MS_MAX + 1,
            i64::MAX,
            i64::MIN,
        ])
        .prop_map(Value::from),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[ -~]{0,24}",
        1 => any::<String>(),
        1 => select(vec![
            "",
            "eHk=",
            "eHk",
            "not base64!",
            "AAAA====",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00+25:00",
            "9999-12-31T23:59:59Z",
            "0000-01-01T00:00:00Z",
            "2126-01-02T00:00:00Z",
            "q",
            "small",
            "0123456789abcdef0123456789abcdef.1.ff",
        ])
        .prop_map(str::to_owned),
        1 => (0_usize..3, select(vec![
            limits::KEY_BYTES_MAX,
            limits::KEY_BYTES_MAX + 1,
            SMALL_BODY_MAX,
            SMALL_BODY_MAX + 1,
        ]))
        .prop_map(|(pad, n)| "é".repeat(n / 2) + &"x".repeat(n % 2 + pad)),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        string().prop_map(Value::from),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(
                prop_oneof![4 => select(FIELDS).prop_map(str::to_owned), 1 => string()],
                inner,
                0..8
            )
            .prop_map(|map| Value::Object(map.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A message document: each field present or not, with a value of its type or any other.
fn message() -> impl Strategy<Value = Value> {
    let headers = prop_oneof![
        3 => proptest::collection::btree_map(string(), string(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k, Value::from(v))).collect())),
        1 => select(vec![limits::HEADERS_MAX, limits::HEADERS_MAX + 1]).prop_map(|n| {
            Value::Object((0..n).map(|i| (format!("h{i}"), Value::from("v"))).collect())
        }),
        1 => select(vec![limits::HEADER_BYTES_MAX - 2, limits::HEADER_BYTES_MAX - 1])
            .prop_map(|n| json!({"h": "v".repeat(n)})),
        1 => value(),
    ];
    let body = prop_oneof![
        3 => value(),
        1 => (0_usize..4).prop_map(|d| json!("x".repeat(SMALL_BODY_MAX - 4 + d))),
    ];
    (
        proptest::option::of(body),
        proptest::option::of(prop_oneof![string().prop_map(Value::from), value()]),
        proptest::option::weighted(0.6, prop_oneof![string().prop_map(Value::from), leaf()]),
        proptest::option::weighted(0.5, prop_oneof![string().prop_map(Value::from), leaf()]),
        proptest::option::weighted(0.4, headers),
        proptest::option::weighted(0.3, number()),
        proptest::option::weighted(0.3, number()),
        proptest::option::weighted(0.3, prop_oneof![string().prop_map(Value::from), leaf()]),
        proptest::option::weighted(0.05, (select(FIELDS), leaf())),
    )
        .prop_map(
            |(body, body_base64, id, key, headers, priority, delay_ms, not_before, extra)| {
                let mut object = Map::new();
                for (name, field) in [
                    ("body", body),
                    ("body_base64", body_base64),
                    ("id", id),
                    ("key", key),
                    ("headers", headers),
                    ("priority", priority),
                    ("delay_ms", delay_ms),
                    ("not_before", not_before),
                ] {
                    if let Some(field) = field {
                        object.insert(name.to_owned(), field);
                    }
                }
                if let Some((name, value)) = extra {
                    object.insert(name.to_owned(), value);
                }
                Value::Object(object)
            },
        )
}

/// A request document as text: a message, a batch, any object of the fields, or text no
/// document could be.
fn document() -> impl Strategy<Value = Vec<u8>> {
    let field = select(FIELDS);
    prop_oneof![
        4 => message().prop_map(|m| m.to_string().into_bytes()),
        2 => proptest::collection::vec(message(), 0..6)
            .prop_map(|m| json!({"messages": m}).to_string().into_bytes()),
        2 => proptest::collection::btree_map(select(FIELDS), value(), 0..6).prop_map(|m| {
            Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                .to_string()
                .into_bytes()
        }),
        1 => (1_usize..100_000, select(vec!["[", "{\"body\":", "{\"messages\":[", "{\"then\":[{\"body\":", "{\"headers\":{\"a\":"]))
            .prop_map(|(depth, open)| open.repeat(depth).into_bytes()),
        1 => (1_usize..100_000, select(vec!["[", "{\"a\":"]))
            .prop_map(|(depth, open)| {
                // Nesting inside a raw body is kept as text, but the depth still counts.
                let close = if open == "[" { "]" } else { "}" };
                format!("{{\"body\":{}1{}}}", open.repeat(depth), close.repeat(depth)).into_bytes()
            }),
        1 => (1_usize..50_000).prop_map(|n| {
            format!("{{\"messages\":[{}{{\"body\":1}}]}}", "{\"body\":1},".repeat(n)).into_bytes()
        }),
        1 => (1_usize..100_000).prop_map(|n| {
            format!("{{\"receipts\":[{}\"r\"]}}", "\"r\",".repeat(n)).into_bytes()
        }),
        1 => (field.clone(), leaf(), leaf()).prop_map(|(name, a, b)| {
            format!("{{\"body\":1,\"{name}\":{a},\"{name}\":{b}}}").into_bytes()
        }),
        1 => (field.clone(), select(vec![
            "1e400", "-1e400", "99999999999999999999999999", "-9223372036854775809",
            "18446744073709551616", "1.0", "-0", "1E2", "NaN", "Infinity", "0x10", "01",
            "2147483648", "-2147483649", "1e-400",
        ]))
        .prop_map(|(name, number)| format!("{{\"body\":{number},\"{name}\":{number}}}").into_bytes()),
        1 => (field, select(vec![
            "\\ud800", "\\udc00", "\\ud800\\u0041", "\\udbff\\udfff", "\\u0000", "\\x41",
            "\\u12", "\\", "\\uD834\\uDD1E", "\u{7f}", "\\uzzzz", "\\ud800\\ud800",
        ]))
        .prop_map(|(name, escape)| {
            format!("{{\"body\":\"{escape}\",\"id\":\"{escape}\",\"headers\":{{\"{escape}\":\"{escape}\"}},\"{name}\":\"{escape}\"}}")
                .into_bytes()
        }),
        1 => (message(), proptest::collection::vec((any::<Index>(), any::<u8>()), 1..4)).prop_map(
            |(m, edits)| {
                let mut bytes = m.to_string().into_bytes();
                for (at, byte) in edits {
                    if !bytes.is_empty() {
                        let i = at.index(bytes.len());
                        bytes[i] = byte;
                    }
                }
                bytes
            }
        ),
        1 => proptest::collection::vec(any::<u8>(), 0..200),
    ]
}

// ---- Checks --------------------------------------------------------------------------------

/// Decodes `bytes` as `T`: a value, or an error with a message.
fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<Option<T>, TestCaseError> {
    let decoded = timed(std::any::type_name::<T>(), || {
        serde_json::from_slice::<T>(bytes)
    })?;
    match decoded {
        Ok(value) => Ok(Some(value)),
        Err(error) => {
            prop_assert!(!error.to_string().is_empty());
            Ok(None)
        }
    }
}

/// One message through the operations' checks, on both queues; what is accepted is inside
/// the limits.
fn check_message(fixture: &Fixture, input: MessageIn) -> Result<(), TestCaseError> {
    let json = input.body.as_ref().map(|raw| raw.get().as_bytes().to_vec());
    let body = match timed("decode_body", || {
        MessageRequest::decode_body(json, input.body_base64.as_deref(), "messages[0].")
    })? {
        Ok(body) => body,
        Err(error) => return check_ops_error(&error),
    };
    if body.1 == BodyKind::Json {
        // What is taken as JSON text is JSON text every reader can read: a `Value` to
        // serde_json too (`bodies_no_json_reader_can_read_are_not_taken_as_json`).
        let raw = serde_json::from_slice::<&serde_json::value::RawValue>(&body.0);
        prop_assert!(raw.is_ok(), "{raw:?}");
        let value = serde_json::from_slice::<Value>(&body.0);
        prop_assert!(
            value.is_ok(),
            "body accepted as JSON but not JSON: {:?} ({value:?})",
            String::from_utf8_lossy(&body.0)
        );
    }
    for queue in ["q", "small"] {
        let request = MessageRequest {
            body: body.clone(),
            id: input.id.clone(),
            key: input.key.clone(),
            headers: input.headers.clone(),
            priority: input.priority,
            delay_ms: input.delay_ms,
            not_before: input.not_before.clone(),
        };
        let mut enqueue = fixture
            .runtime
            .block_on(fixture.ops.enqueue_to(queue.to_owned()))
            .expect("the queue exists");
        let max_body = enqueue.config().max_message_bytes;
        match timed("Enqueue::add", || enqueue.add(request, "messages[0]."))? {
            Err(error) => check_ops_error(&error)?,
            Ok(()) => {
                prop_assert_eq!(enqueue.len(), 1);
                prop_assert!(body.0.len() <= max_body);
                for value in [&input.id, &input.key].into_iter().flatten() {
                    prop_assert!((1..=limits::KEY_BYTES_MAX).contains(&value.len()));
                }
                let headers = input.headers.clone().unwrap_or_default();
                prop_assert!(headers.len() <= limits::HEADERS_MAX);
                let bytes: usize = headers.iter().map(|(k, v)| k.len() + v.len()).sum();
                prop_assert!(bytes <= limits::HEADER_BYTES_MAX);
                prop_assert!(input.delay_ms.is_none() || input.not_before.is_none());
                if let Some(delay) = input.delay_ms {
                    prop_assert!((0..=limits::DELAY_MS_MAX).contains(&delay));
                }
            }
        }
    }
    Ok(())
}

/// Every request document, from the same bytes.
fn check_document(fixture: &Fixture, bytes: &[u8]) -> Result<(), TestCaseError> {
    // The HTTP API reads a body with `messages` as `MessageBatchIn`, any other as `MessageIn`
    // (`EnqueueIn` is the document's schema; untagged, it cannot hold a raw body).
    decode::<EnqueueIn>(bytes)?;
    if let Some(message) = decode::<MessageIn>(bytes)? {
        check_message(fixture, message)?;
    }
    if let Some(batch) = decode::<MessageBatchIn>(bytes)? {
        // Checked message by message, as the operations do; a few are enough.
        for message in batch.messages.into_iter().take(8) {
            check_message(fixture, message)?;
        }
    }
    decode::<ReceiveIn>(bytes)?;
    if let Some(ack) = decode::<AckIn>(bytes)? {
        for step in ack.then.unwrap_or_default().into_iter().take(8) {
            let json = step.body.as_ref().map(|raw| raw.get().as_bytes().to_vec());
            if let Err(error) =
                MessageRequest::decode_body(json, step.body_base64.as_deref(), "then[0].")
            {
                check_ops_error(&error)?;
            }
        }
    }
    decode::<NackIn>(bytes)?;
    decode::<ExtendIn>(bytes)?;
    decode::<ReplayIn>(bytes)?;
    decode::<ReplayOneIn>(bytes)?;
    decode::<CancelIn>(bytes)?;
    decode::<DrainIn>(bytes)?;
    if let Some(spec) = decode::<QueueSpec>(bytes)? {
        let applied = timed("apply", || QueueConfig::defaults_for("q").apply(&spec))?;
        if let Err(message) = applied {
            prop_assert!(!message.trim().is_empty());
        }
    }
    decode::<PushSpec>(bytes)?;
    decode::<WebhookSpec>(bytes)?;
    decode::<AlertSpec>(bytes)?;
    decode::<ScheduleSpec>(bytes)?;
    decode::<TopicSpec>(bytes)?;
    decode::<SubscriptionSpec>(bytes)?;
    Ok(())
}

#[test]
fn fuzz_request_documents() {
    let fixture = fixture();
    let mut runner = TestRunner::new(config());
    let result = runner.run(&document(), |bytes| check_document(&fixture, &bytes));
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// Messages alone, straight to the operations: more of the cases reach `Enqueue::add`.
#[test]
fn fuzz_messages_through_the_enqueue_checks() {
    let fixture = fixture();
    let mut runner = TestRunner::new(config());
    let result = runner.run(&message(), |message| {
        match serde_json::from_value::<MessageIn>(message) {
            Ok(input) => check_message(&fixture, input),
            Err(error) => {
                prop_assert!(!error.to_string().is_empty());
                Ok(())
            }
        }
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

/// The edges the random runs reach only by luck, once each: escapes that are no character
/// (serde_json refuses a lone surrogate in a `body` kept as raw text too, so what is stored
/// as JSON stays JSON), nesting past the recursion limit inside a raw body, the header limits
/// exactly and one past.
#[test]
fn the_edges_are_refused_or_kept_inside_the_limits() {
    let fixture = fixture();
    let many_headers = |n: usize| {
        json!({"body": 1, "headers": (0..n).map(|i| (format!("h{i}"), json!("v"))).collect::<Map<_, _>>()})
            .to_string()
    };
    let long_header = |n: usize| json!({"body": 1, "headers": {"h": "v".repeat(n)}}).to_string();
    let documents = [
        r#"{"body": "\ud800"}"#.to_owned(),
        r#"{"body": ["\udc00"]}"#.to_owned(),
        r#"{"body": {"\ud800\u0041": 1}}"#.to_owned(),
        r#"{"body": 1, "id": "\ud800"}"#.to_owned(),
        format!("{{\"body\":{}1{}}}", "[".repeat(200), "]".repeat(200)),
        format!(
            "{{\"body\":{}1{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        ),
        many_headers(limits::HEADERS_MAX),
        many_headers(limits::HEADERS_MAX + 1),
        long_header(limits::HEADER_BYTES_MAX - 1),
        long_header(limits::HEADER_BYTES_MAX),
        json!({"body": 1, "delay_ms": limits::DELAY_MS_MAX}).to_string(),
        json!({"body": 1, "delay_ms": limits::DELAY_MS_MAX + 1}).to_string(),
        json!({"body": 1, "not_before": "9999-12-31T23:59:59Z"}).to_string(),
        json!({"body": 1, "not_before": "-9999-01-01T00:00:00Z"}).to_string(),
        json!({"body": 1, "id": "x".repeat(limits::KEY_BYTES_MAX + 1)}).to_string(),
        json!({"body_base64": "eHk=", "body": 1}).to_string(),
        json!({"body_base64": "eHk"}).to_string(),
    ];
    for document in &documents {
        check_document(&fixture, document.as_bytes())
            .unwrap_or_else(|e| panic!("{}: {e}", &document[..document.len().min(80)]));
    }
}

/// Finding of this fuzzer (issue 30), fixed: a message body (HTTP `body`, gRPC `json`) is
/// checked with serde_json's `RawValue`, which follows RFC 8259's grammar with no depth limit.
/// So it takes escapes of lone surrogates (`"\ud800"`: in the grammar, but no character) and
/// nesting of any depth (500,000 levels fit in the default 1 MiB body), and stores them as
/// JSON. No `String` can hold the first and serde_json's `Value` stops at 128 levels, so every
/// typed reader refuses such a body: a queue with a schema refuses it at enqueue as "not JSON",
/// the SDK's worker dead-letters it ("cannot decode the event"), and a client whose JSON
/// parser recurses (Python's `json` raises `RecursionError`) fails on the whole receive answer
/// that holds it. Nothing panics. This test states the consistent behaviour (refused at
/// enqueue, as a schema queue does): `MessageRequest::decode_body` checks for them
/// (`sluice_ops::check_json_body`).
#[test]
fn bodies_no_json_reader_can_read_are_not_taken_as_json() {
    let deep = format!("{{\"body\": {}1{}}}", "[".repeat(129), "]".repeat(129));
    for document in [
        r#"{"body": "\ud800"}"#,
        r#"{"body": ["\udc00"]}"#,
        r#"{"body": {"\ud800\u0041": 1}}"#,
        &deep,
    ] {
        let input: MessageIn = serde_json::from_str(document).expect("the document parses");
        let json = input.body.map(|raw| raw.get().as_bytes().to_vec());
        assert!(
            MessageRequest::decode_body(json, None, "").is_err(),
            "{} is taken as a JSON body",
            &document[..document.len().min(40)]
        );
    }
}
