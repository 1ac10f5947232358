//! Property-based fuzzing of the parsers in core that read what a client sends: receipts, queue
//! names and queue definitions (every field, arbitrary JSON where the field is expected).
//!
//! Properties: nothing panics; what parses round-trips; a definition that is accepted has its
//! limits inside the documented bounds. `SLUICE_FUZZ_CASES` cases per property (default 256);
//! the long run: `SLUICE_FUZZ_CASES=200000 cargo test --release -p sluice-core --test fuzz`.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use sluice_core::message::Receipt;
use sluice_core::queue::{QueueConfig, validate_queue_name};
use sluice_core::wire::QueueSpec;

fn config() -> ProptestConfig {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    ProptestConfig::with_cases(cases.unwrap_or(256))
}

/// Fields of a queue definition, each with values of the expected shape and of others.
const QUEUE_FIELDS: &[&str] = &[
    "max_attempts",
    "visibility_timeout_ms",
    "backoff",
    "ordering",
    "dead_letter_queue",
    "max_in_flight",
    "rate_limit",
    "max_depth",
    "max_age_ms",
    "on_expire",
    "schema",
    "dedup_window_ms",
    "max_message_bytes",
    "push",
];

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        (0_i64..100_000).prop_map(Value::from),
        Just(json!(i64::MAX)),
        Just(json!(-1)),
        Just(json!(0)),
    ]
}

fn field_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        number(),
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        "[ -~]{0,24}".prop_map(Value::from),
        proptest::sample::select(vec![
            "fifo",
            "per_key",
            "none",
            "drop",
            "dead_letter",
            "http://127.0.0.1:9/x",
            "orders.dlq",
            "",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        proptest::collection::btree_map(
            proptest::sample::select(vec![
                "per_second",
                "burst",
                "initial_ms",
                "max_ms",
                "factor",
                "url",
                "timeout_ms",
                "headers",
                "type",
                "required",
                "pattern",
                "properties",
                "signing_secret",
                "transform",
                "concurrency",
            ]),
            inner,
            0..4,
        )
        .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    })
}

fn queue_spec() -> impl Strategy<Value = Value> {
    proptest::collection::btree_map(proptest::sample::select(QUEUE_FIELDS), field_value(), 0..6)
        .prop_map(|map| {
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect::<Map<_, _>>(),
            )
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_receipts_parse_without_panic_and_round_trip(text in prop_oneof![
        any::<String>(),
        "[0-9a-f]{32}\\.[0-9]{0,12}\\.[0-9a-fA-F+-]{0,10}(\\.[a-z]{0,3})?",
    ]) {
        if let Some(receipt) = Receipt::parse(&text) {
            prop_assert_eq!(Receipt::parse(&receipt.to_string()), Some(receipt));
        }
    }

    #[test]
    fn fuzz_queue_names_are_checked_without_panic(name in any::<String>()) {
        if validate_queue_name(&name).is_ok() {
            prop_assert!(!name.is_empty());
        }
    }

    #[test]
    fn fuzz_queue_definitions_parse_and_apply_without_panic(
        spec in queue_spec(),
        attempt in prop_oneof![0_u32..100, any::<u32>()],
    ) {
        if let Ok(spec) = serde_json::from_value::<QueueSpec>(spec)
            && let Ok(config) = spec.apply_to(QueueConfig::defaults_for("q"))
        {
            // Any count is kept as asked; 0 means retry forever (docs/http-api.md).
            prop_assert_eq!(config.max_attempts, spec.max_attempts.unwrap_or(5));
            // The backoff of any attempt is computed without overflow.
            let ceiling = config.backoff.ceiling_ms(attempt);
            let delay = config.backoff.delay_ms(attempt);
            prop_assert!(delay <= ceiling.max(0));
        }
    }
}
