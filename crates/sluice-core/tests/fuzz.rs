//! Property-based fuzzing of the parsers in core that read what a client sends: receipts, queue
//! names and queue definitions (every field, arbitrary JSON where the field is expected).
//!
//! Properties: nothing panics; what parses round-trips; a definition that is accepted has every
//! limit inside its documented bounds (`within_documented_bounds`: each field of `QueueConfig`
//! that has one, against `sluice_core::queue::limits` and docs/http-api.md, docs/webhooks.md).
//! Random definitions seldom put one field just past its bound with every other field valid,
//! so `each_limit_is_refused_just_past_its_bounds` tries every bound's edges on its own. `SLUICE_FUZZ_CASES` cases per property (default 256);
//! the long run: `SLUICE_FUZZ_CASES=200000 cargo test --release -p sluice-core --test fuzz`.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use sluice_core::message::Receipt;
use sluice_core::queue::{QueueConfig, limits, validate_queue_name};
use sluice_wire::QueueSpec;

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
    "dedup",
    "keep_acked_ms",
    "delay_ms",
    "tags",
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
        // Just past the limits.
        proptest::sample::select(EDGES.to_vec()).prop_map(Value::from),
    ]
}

/// Each limit, and one past it.
const EDGES: &[i64] = &[
    limits::VISIBILITY_TIMEOUT_MS_MAX,
    limits::VISIBILITY_TIMEOUT_MS_MAX + 1,
    limits::BACKOFF_MS_MAX,
    limits::BACKOFF_MS_MAX + 1,
    limits::MESSAGE_BYTES_MAX as i64,
    limits::MESSAGE_BYTES_MAX as i64 + 1,
    limits::DEDUP_WINDOW_MS_MAX,
    limits::DEDUP_WINDOW_MS_MAX + 1,
    limits::MAX_AGE_MS_MIN - 1,
    limits::MAX_AGE_MS_MAX,
    limits::MAX_AGE_MS_MAX + 1,
    limits::KEEP_ACKED_MS_MAX,
    limits::KEEP_ACKED_MS_MAX + 1,
    limits::DELAY_MS_MAX,
    limits::DELAY_MS_MAX + 1,
    300_000,
    300_001,
    1000,
    1001,
    1_000_001,
];

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
            "content",
            "id",
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
                "jitter",
                "method",
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
            && let Ok(config) = QueueConfig::defaults_for("q").apply(&spec)
        {
            // Any count is kept as asked; 0 means retry forever (docs/http-api.md).
            prop_assert_eq!(config.max_attempts, spec.max_attempts.unwrap_or(5));
            if let Err(outside) = within_documented_bounds(&config) {
                return Err(TestCaseError::fail(format!("accepted {spec:?}, but {outside}")));
            }
            // The backoff of any attempt is computed without overflow.
            let ceiling = sluice_core::rules::backoff::ceiling_ms(&config.backoff, attempt);
            let delay = sluice_core::rules::backoff::random_delay_ms(&config.backoff, attempt);
            prop_assert!(delay <= ceiling.max(0));
        }
    }
}

/// Whether every limit of an accepted definition is inside its documented bounds; the first
/// that is not, otherwise.
fn within_documented_bounds(config: &QueueConfig) -> Result<(), String> {
    fn range<T: PartialOrd + std::fmt::Debug>(
        field: &str,
        value: T,
        bounds: std::ops::RangeInclusive<T>,
    ) -> Result<(), String> {
        if bounds.contains(&value) {
            Ok(())
        } else {
            Err(format!("{field} is {value:?}, outside {bounds:?}"))
        }
    }
    range(
        "visibility_timeout_ms",
        config.visibility_timeout_ms,
        1..=limits::VISIBILITY_TIMEOUT_MS_MAX,
    )?;
    let backoff = &config.backoff;
    range(
        "backoff.initial_ms",
        backoff.initial_ms,
        0..=limits::BACKOFF_MS_MAX,
    )?;
    range("backoff.max_ms", backoff.max_ms, 0..=limits::BACKOFF_MS_MAX)?;
    range("backoff.factor", backoff.factor, 1.0..=100.0)?;
    if backoff.max_ms < backoff.initial_ms {
        return Err(format!(
            "backoff.max_ms {} is below backoff.initial_ms {}",
            backoff.max_ms, backoff.initial_ms
        ));
    }
    if let Some(dlq) = &config.dead_letter_queue {
        validate_queue_name(dlq).map_err(|e| format!("dead_letter_queue {dlq:?}: {e}"))?;
    }
    range(
        "max_message_bytes",
        config.max_message_bytes,
        1..=limits::MESSAGE_BYTES_MAX,
    )?;
    range(
        "dedup_window_ms",
        config.dedup_window_ms,
        0..=limits::DEDUP_WINDOW_MS_MAX,
    )?;
    range(
        "max_age_ms",
        config.max_age_ms,
        limits::MAX_AGE_MS_MIN..=limits::MAX_AGE_MS_MAX,
    )?;
    range(
        "keep_acked_ms",
        config.keep_acked_ms,
        0..=limits::KEEP_ACKED_MS_MAX,
    )?;
    range("delay_ms", config.delay_ms, 0..=limits::DELAY_MS_MAX)?;
    // 0 means unbounded and is kept as none.
    if let Some(depth) = config.max_depth {
        range("max_depth", depth, 1..=u64::MAX)?;
    }
    if let Some(in_flight) = config.max_in_flight {
        range("max_in_flight", in_flight, 1..=u32::MAX)?;
    }
    // per_second 0 removes the limit, so a kept one is positive.
    if let Some(rate) = &config.rate_limit {
        if !(rate.per_second > 0.0 && rate.per_second <= 1_000_000.0) {
            return Err(format!(
                "rate_limit.per_second is {}, outside (0, 1000000]",
                rate.per_second
            ));
        }
        range("rate_limit.burst", rate.burst, 1..=u32::MAX)?;
    }
    if let Some(schema) = &config.schema {
        range(
            "schema bytes",
            schema.source().to_string().len(),
            0..=limits::SCHEMA_BYTES_MAX,
        )?;
    }
    range("tags count", config.tags.len(), 0..=limits::TAGS_MAX)?;
    for (key, value) in &config.tags {
        range(
            "tag key characters",
            key.chars().count(),
            1..=limits::TAG_KEY_CHARS_MAX,
        )?;
        range(
            "tag value characters",
            value.chars().count(),
            0..=limits::TAG_VALUE_CHARS_MAX,
        )?;
    }
    if let Some(push) = &config.push {
        let url = push.url.to_ascii_lowercase();
        let host = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or("push.url is not an http:// or https:// URL")?;
        if host.is_empty() || host.starts_with('/') {
            return Err("push.url has no host".into());
        }
        // docs/webhooks.md: per request, and requests in flight at once.
        if let Some(ms) = push.timeout_ms {
            range("push.timeout_ms", ms, 1..=300_000)?;
        }
        if let Some(concurrency) = push.concurrency {
            range("push.concurrency", concurrency, 1..=1000)?;
        }
    }
    Ok(())
}

/// A definition holding one value.
type SpecOf = Box<dyn Fn(i64) -> Value>;

/// Every bounded field alone, at each edge of its bounds and one past it: accepted exactly
/// inside, and then inside `within_documented_bounds`. `(field, spec with the value, low, high)`.
#[test]
fn each_limit_is_refused_just_past_its_bounds() {
    let push = |field: &'static str| move |v: i64| json!({"push": {"url": "http://127.0.0.1:9/x", field: v}});
    let cases: Vec<(&str, SpecOf, i64, i64)> = vec![
        (
            "visibility_timeout_ms",
            Box::new(|v| json!({"visibility_timeout_ms": v})),
            1,
            limits::VISIBILITY_TIMEOUT_MS_MAX,
        ),
        (
            "backoff.initial_ms",
            Box::new(|v| json!({"backoff": {"initial_ms": v, "max_ms": limits::BACKOFF_MS_MAX}})),
            0,
            limits::BACKOFF_MS_MAX,
        ),
        (
            "backoff.max_ms",
            Box::new(|v| json!({"backoff": {"initial_ms": 0, "max_ms": v}})),
            0,
            limits::BACKOFF_MS_MAX,
        ),
        (
            "max_message_bytes",
            Box::new(|v| json!({"max_message_bytes": v})),
            1,
            limits::MESSAGE_BYTES_MAX as i64,
        ),
        (
            "dedup_window_ms",
            Box::new(|v| json!({"dedup_window_ms": v})),
            0,
            limits::DEDUP_WINDOW_MS_MAX,
        ),
        (
            "max_age_ms",
            Box::new(|v| json!({"max_age_ms": v})),
            limits::MAX_AGE_MS_MIN,
            limits::MAX_AGE_MS_MAX,
        ),
        (
            "keep_acked_ms",
            Box::new(|v| json!({"keep_acked_ms": v})),
            0,
            limits::KEEP_ACKED_MS_MAX,
        ),
        (
            "delay_ms",
            Box::new(|v| json!({"delay_ms": v})),
            0,
            limits::DELAY_MS_MAX,
        ),
        (
            "rate_limit.burst",
            Box::new(|v| json!({"rate_limit": {"per_second": 1, "burst": v}})),
            1,
            i64::from(u32::MAX),
        ),
        (
            "rate_limit.per_second",
            Box::new(|v| json!({"rate_limit": {"per_second": v}})),
            0,
            1_000_000,
        ),
        ("push.timeout_ms", Box::new(push("timeout_ms")), 1, 300_000),
        ("push.concurrency", Box::new(push("concurrency")), 1, 1000),
        (
            "tags (count)",
            Box::new(
                |v| json!({"tags": (0..v).map(|i| (format!("k{i}"), json!("v"))).collect::<Map<_, _>>()}),
            ),
            0,
            limits::TAGS_MAX as i64,
        ),
        (
            "tags (key characters)",
            Box::new(|v| json!({"tags": {"é".repeat(v as usize): "v"}})),
            1,
            limits::TAG_KEY_CHARS_MAX as i64,
        ),
        (
            "tags (value characters)",
            Box::new(|v| json!({"tags": {"k": "é".repeat(v as usize)}})),
            0,
            limits::TAG_VALUE_CHARS_MAX as i64,
        ),
    ];
    for (field, spec_of, low, high) in &cases {
        // Below the lowest a negative count cannot be written (it is refused as a number).
        for value in [*low - 1, *low, *high, *high + 1] {
            if value < 0 && field.starts_with("tags") {
                continue;
            }
            let spec = spec_of(value);
            let config = serde_json::from_value::<QueueSpec>(spec.clone())
                .map_err(|e| e.to_string())
                .and_then(|spec| QueueConfig::defaults_for("q").apply(&spec));
            let inside = (*low..=*high).contains(&value);
            match config {
                Ok(config) => {
                    assert!(
                        inside,
                        "{field} = {value} is outside {low}..={high} but accepted: {spec}"
                    );
                    if let Err(outside) = within_documented_bounds(&config) {
                        panic!("{field} = {value} accepted, but {outside}: {spec}");
                    }
                }
                Err(error) => assert!(
                    !inside,
                    "{field} = {value} is inside {low}..={high} but refused ({error}): {spec}"
                ),
            }
        }
    }
}
