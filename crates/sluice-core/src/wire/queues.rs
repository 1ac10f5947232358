//! Queues: their settings as given over the API or in the config file (validated here into a
//! [`QueueConfig`]), their settings as shown, and the answers of the queue-wide operations
//! (define, list, delete, purge, drain).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PushMethod, PushSpec, QueueStatsOut, null_as_zero, present};
use crate::queue::{
    Backoff, Dedup, MessageSchema, OnExpire, Ordering, QueueConfig, RateLimit, limits,
};

/// Queue settings as given over the API or in the config file; every field is optional and
/// falls back to the current value (update) or the default (create).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// Lease length of a receive, in ms (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<i64>,
    /// Deliveries before dead-lettering (default 5; 0 = retry forever).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// Retry backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<BackoffSpec>,
    /// Dead-letter queue name (default `<name>.dlq`); an empty string means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    /// Largest body in bytes (default 1048576).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<usize>,
    /// `unordered` (default), `fifo` or `per_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering: Option<String>,
    /// Idempotency window in ms (default 86400000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_ms: Option<i64>,
    /// `id` (default): only a message's `id` makes it a duplicate. `content`: a message sent
    /// without an `id` gets one made from its content (SHA-256 of its key and body), so the
    /// same body sent twice within the window is stored once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup: Option<String>,
    /// Retention in ms: older messages are removed (default 345600000, 4 days; 14 days for a
    /// dead-letter queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<i64>,
    /// `drop` (default) or `dead_letter`: what retention does with an old message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<String>,
    /// How long an acked message keeps its body, headers and result, browsable with
    /// `GET /v1/queues/{queue}/browse?state=acked`, in ms (default 0: dropped at the ack;
    /// at most 7776000000, 90 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_acked_ms: Option<i64>,
    /// Most messages held (ready + delayed + in flight); 0 or null = unbounded (default), also
    /// on an update.
    #[serde(
        default,
        deserialize_with = "null_as_zero",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_depth: Option<u64>,
    /// Most leases out at once; 0 or null = unbounded (default), also on an update.
    #[serde(
        default,
        deserialize_with = "null_as_zero",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_in_flight: Option<u32>,
    /// Deliveries per second as a token bucket; `null` or `per_second: 0` turns it off.
    #[serde(
        default,
        deserialize_with = "null_as_zero",
        skip_serializing_if = "Option::is_none"
    )]
    pub rate_limit: Option<RateLimitSpec>,
    /// JSON Schema for JSON bodies; `null` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<Value>)]
    pub schema: Option<serde_json::Value>,
    /// Push destination (the server calls it with each message); `null` removes it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub push: Option<Option<PushSpec>>,
    /// Delay in ms given to a message enqueued without one (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<i64>,
    /// Tags, replacing the queue's tags (at most 50; keys 1-128 characters, values up to 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
}

/// Rate limit settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSpec {
    /// Sustained deliveries per second; 0 turns the limit off (the default value: `null` in a
    /// `QueueSpec` means this).
    pub per_second: f64,
    /// Deliveries allowed at once after a quiet spell (default: one second's worth, at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

/// Backoff settings; missing fields keep their current or default value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackoffSpec {
    /// First delay in ms (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_ms: Option<i64>,
    /// Largest delay in ms (default 60000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<i64>,
    /// Growth per attempt (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    /// Equal jitter: a delay in `[d/2, d]` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<bool>,
}

impl QueueSpec {
    /// Applies this spec on top of `base`, validating every field. Errors name the field.
    pub fn apply_to(&self, mut base: QueueConfig) -> Result<QueueConfig, String> {
        if let Some(ms) = self.visibility_timeout_ms {
            check_range(
                "visibility_timeout_ms",
                ms,
                1,
                limits::VISIBILITY_TIMEOUT_MS_MAX,
            )?;
            base.visibility_timeout_ms = ms;
        }
        if let Some(max_attempts) = self.max_attempts {
            base.max_attempts = max_attempts;
        }
        if let Some(backoff) = &self.backoff {
            base.backoff = backoff.apply_to(base.backoff)?;
        }
        if let Some(dlq) = &self.dead_letter_queue {
            if dlq.is_empty() {
                base.dead_letter_queue = None;
            } else {
                crate::queue::validate_queue_name(dlq)
                    .map_err(|e| format!("dead_letter_queue: {e}"))?;
                base.dead_letter_queue = Some(dlq.clone());
            }
        }
        if let Some(bytes) = self.max_message_bytes {
            check_range(
                "max_message_bytes",
                bytes as i64,
                1,
                limits::MESSAGE_BYTES_MAX as i64,
            )?;
            base.max_message_bytes = bytes;
        }
        if let Some(ordering) = &self.ordering {
            base.ordering = Ordering::parse(ordering).ok_or_else(|| {
                format!("ordering: {ordering:?} is not one of unordered, fifo, per_key")
            })?;
        }
        if let Some(ms) = self.dedup_window_ms {
            check_range("dedup_window_ms", ms, 0, limits::DEDUP_WINDOW_MS_MAX)?;
            base.dedup_window_ms = ms;
        }
        if let Some(dedup) = &self.dedup {
            base.dedup = Dedup::parse(dedup)
                .ok_or_else(|| format!("dedup: {dedup:?} is not one of id, content"))?;
        }
        if let Some(ms) = self.max_age_ms {
            check_range(
                "max_age_ms",
                ms,
                limits::MAX_AGE_MS_MIN,
                limits::MAX_AGE_MS_MAX,
            )?;
            base.max_age_ms = ms;
        }
        if let Some(on_expire) = &self.on_expire {
            base.on_expire = OnExpire::parse(on_expire).ok_or_else(|| {
                format!("on_expire: {on_expire:?} is not one of drop, dead_letter")
            })?;
        }
        if let Some(ms) = self.keep_acked_ms {
            check_range("keep_acked_ms", ms, 0, limits::KEEP_ACKED_MS_MAX)?;
            base.keep_acked_ms = ms;
        }
        if let Some(depth) = self.max_depth {
            base.max_depth = (depth > 0).then_some(depth);
        }
        if let Some(in_flight) = self.max_in_flight {
            base.max_in_flight = (in_flight > 0).then_some(in_flight);
        }
        if let Some(rate) = &self.rate_limit {
            base.rate_limit = rate.to_limit()?;
        }
        if let Some(schema) = &self.schema {
            base.schema = match schema {
                serde_json::Value::Null => None,
                schema => {
                    if schema.to_string().len() > limits::SCHEMA_BYTES_MAX {
                        return Err(format!(
                            "schema: larger than {} bytes",
                            limits::SCHEMA_BYTES_MAX
                        ));
                    }
                    Some(std::sync::Arc::new(MessageSchema::compile(schema.clone())?))
                }
            };
        }
        if let Some(ms) = self.delay_ms {
            check_range("delay_ms", ms, 0, limits::DELAY_MS_MAX)?;
            base.delay_ms = ms;
        }
        if let Some(tags) = &self.tags {
            validate_tags(tags)?;
            base.tags = tags.clone();
        }
        if let Some(push) = &self.push {
            base.push = match push {
                None => None,
                Some(push) => {
                    validate_push(push)?;
                    Some(std::sync::Arc::new(push.clone()))
                }
            };
        }
        Ok(base)
    }
}

/// Checks a queue's tags against the limits in [`limits`].
pub fn validate_tags(tags: &BTreeMap<String, String>) -> Result<(), String> {
    if tags.len() > limits::TAGS_MAX {
        return Err(format!(
            "tags: {} tags; at most {} per queue",
            tags.len(),
            limits::TAGS_MAX
        ));
    }
    for (key, value) in tags {
        let chars = key.chars().count();
        if chars == 0 || chars > limits::TAG_KEY_CHARS_MAX {
            return Err(format!(
                "tags: a key must be 1 to {} characters, got {chars}",
                limits::TAG_KEY_CHARS_MAX
            ));
        }
        if value.chars().count() > limits::TAG_VALUE_CHARS_MAX {
            return Err(format!(
                "tags: the value of {key:?} is longer than {} characters",
                limits::TAG_VALUE_CHARS_MAX
            ));
        }
    }
    Ok(())
}

/// Checks what can be checked without IO: the URL's scheme, the method and the ranges.
/// (Transforms and secrets are checked by the server, which compiles and reads them.)
fn validate_push(push: &PushSpec) -> Result<(), String> {
    let url = push.url.to_ascii_lowercase();
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        // The URL is not echoed: it may hold credentials.
        .ok_or("push.url: not an http:// or https:// URL")?;
    if host.is_empty() || host.starts_with('/') {
        return Err("push.url: the URL has no host".into());
    }
    PushMethod::of_spec(push.method.as_deref())?;
    if let Some(ms) = push.timeout_ms {
        check_range("push.timeout_ms", ms, 1, 300_000)?;
    }
    if let Some(concurrency) = push.concurrency {
        check_range("push.concurrency", i64::from(concurrency), 1, 1000)?;
    }
    for name in push.headers.iter().flat_map(|headers| headers.keys()) {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!("push.headers: {name:?} is not a header name"));
        }
    }
    Ok(())
}

impl RateLimitSpec {
    fn to_limit(&self) -> Result<Option<RateLimit>, String> {
        if !self.per_second.is_finite() || !(0.0..=1_000_000.0).contains(&self.per_second) {
            return Err(format!(
                "rate_limit.per_second must be between 0 and 1000000, got {}",
                self.per_second
            ));
        }
        if self.per_second == 0.0 {
            return Ok(None);
        }
        let burst = match self.burst {
            Some(0) => return Err("rate_limit.burst must be at least 1".into()),
            Some(burst) => burst,
            None => self.per_second.ceil().max(1.0) as u32,
        };
        Ok(Some(RateLimit {
            per_second: self.per_second,
            burst,
        }))
    }
}

impl BackoffSpec {
    fn apply_to(&self, mut base: Backoff) -> Result<Backoff, String> {
        if let Some(ms) = self.initial_ms {
            check_range("backoff.initial_ms", ms, 0, limits::BACKOFF_MS_MAX)?;
            base.initial_ms = ms;
        }
        if let Some(ms) = self.max_ms {
            check_range("backoff.max_ms", ms, 0, limits::BACKOFF_MS_MAX)?;
            base.max_ms = ms;
        }
        if let Some(factor) = self.factor {
            if !(1.0..=100.0).contains(&factor) {
                return Err(format!(
                    "backoff.factor must be between 1 and 100, got {factor}"
                ));
            }
            base.factor = factor;
        }
        if let Some(jitter) = self.jitter {
            base.jitter = jitter;
        }
        if base.max_ms < base.initial_ms {
            return Err(format!(
                "backoff.max_ms ({}) is less than backoff.initial_ms ({})",
                base.max_ms, base.initial_ms
            ));
        }
        Ok(base)
    }
}

fn check_range(field: &str, value: i64, min: i64, max: i64) -> Result<(), String> {
    if value < min || value > max {
        return Err(format!(
            "{field} must be between {min} and {max}, got {value}"
        ));
    }
    Ok(())
}

/// A queue's settings as the API shows them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueConfigOut {
    /// Lease length in ms.
    pub visibility_timeout_ms: i64,
    /// Deliveries before dead-lettering (0 = forever).
    pub max_attempts: u32,
    /// Retry backoff.
    pub backoff: BackoffOut,
    /// Dead-letter queue, if any.
    pub dead_letter_queue: Option<String>,
    /// Largest body in bytes.
    pub max_message_bytes: usize,
    /// `unordered`, `fifo` or `per_key`.
    pub ordering: String,
    /// Idempotency window in ms.
    pub dedup_window_ms: i64,
    /// `id` or `content`: what makes two messages the same one.
    pub dedup: String,
    /// Retention in ms.
    pub max_age_ms: i64,
    /// `drop` or `dead_letter`.
    pub on_expire: String,
    /// How long an acked message keeps its body, in ms; 0 = not kept.
    pub keep_acked_ms: i64,
    /// Most messages held; null = unbounded.
    pub max_depth: Option<u64>,
    /// Most leases out at once; null = unbounded.
    pub max_in_flight: Option<u32>,
    /// Delivery rate limit; null = none.
    pub rate_limit: Option<RateLimitOut>,
    /// JSON Schema for bodies; null = none.
    #[schema(value_type = Option<Value>)]
    pub schema: Option<serde_json::Value>,
    /// Push destination; null = none (consumers receive over HTTP).
    pub push: Option<PushSpec>,
    /// Delay in ms given to a message enqueued without one.
    pub delay_ms: i64,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// Settings a protocol keeps for the queue (`sqs.<Attribute>`), shown as stored.
    pub protocol_attributes: BTreeMap<String, String>,
}

/// Rate limit as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct RateLimitOut {
    /// Sustained deliveries per second.
    pub per_second: f64,
    /// Deliveries allowed at once.
    pub burst: u32,
}

/// Backoff as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BackoffOut {
    /// First delay in ms.
    pub initial_ms: i64,
    /// Largest delay in ms.
    pub max_ms: i64,
    /// Growth per attempt.
    pub factor: f64,
    /// Equal jitter on or off.
    pub jitter: bool,
}

impl From<&QueueConfig> for QueueConfigOut {
    fn from(config: &QueueConfig) -> Self {
        Self {
            visibility_timeout_ms: config.visibility_timeout_ms,
            max_attempts: config.max_attempts,
            backoff: BackoffOut {
                initial_ms: config.backoff.initial_ms,
                max_ms: config.backoff.max_ms,
                factor: config.backoff.factor,
                jitter: config.backoff.jitter,
            },
            dead_letter_queue: config.dead_letter_queue.clone(),
            max_message_bytes: config.max_message_bytes,
            ordering: config.ordering.as_str().to_owned(),
            dedup_window_ms: config.dedup_window_ms,
            dedup: config.dedup.as_str().to_owned(),
            max_age_ms: config.max_age_ms,
            on_expire: config.on_expire.as_str().to_owned(),
            keep_acked_ms: config.keep_acked_ms,
            max_depth: config.max_depth,
            max_in_flight: config.max_in_flight,
            rate_limit: config.rate_limit.map(|limit| RateLimitOut {
                per_second: limit.per_second,
                burst: limit.burst,
            }),
            schema: config.schema.as_ref().map(|schema| schema.source().clone()),
            push: config.push.as_deref().cloned(),
            delay_ms: config.delay_ms,
            tags: config.tags.clone(),
            protocol_attributes: config.protocol_attributes.clone(),
        }
    }
}

/// A queue, its settings and its stats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueOut {
    /// Name.
    pub name: String,
    /// Settings.
    pub config: QueueConfigOut,
    /// Depth and counters.
    pub stats: QueueStatsOut,
}

/// Answer to `PUT /v1/queues/{queue}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueuePutOut {
    /// False when an existing queue was updated.
    pub created: bool,
    /// The queue as it is now.
    pub queue: QueueOut,
}

/// `GET /v1/queues`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueListOut {
    /// Every queue, by name.
    pub queues: Vec<QueueOut>,
}

/// `DELETE /v1/queues/{queue}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueDeleteOut {
    /// Always true.
    pub deleted: bool,
    /// Messages removed with it.
    pub messages_removed: u64,
    /// Its dead-letter queue, when it was deleted with it (`null`: kept, or none).
    #[serde(default)]
    pub dead_letter_queue: Option<String>,
    /// Dead letters removed with that queue.
    #[serde(default)]
    pub dead_letters_removed: u64,
}

/// What `DELETE /v1/queues/{queue}?dead_letters=` does with the queue's dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeadLettersOnDelete {
    /// Delete it and its dead letters (the default), unless another queue dead-letters into it.
    #[default]
    Delete,
    /// Keep it with its dead letters.
    Keep,
}

/// Answer to purge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PurgeOut {
    /// Messages removed.
    pub purged: u64,
    /// Messages left because they are in flight.
    pub in_flight: u64,
}

/// `POST /v1/queues/{queue}/drain`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainIn {
    /// How long to wait, 0..=900000 ms (default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
}

/// Answer to drain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DrainOut {
    /// True when the queue held no ready, delayed or in-flight message.
    pub drained: bool,
    /// How long the call waited, ms.
    pub waited_ms: u64,
    /// Left when it returned.
    pub ready: u64,
    /// Left when it returned.
    pub delayed: u64,
    /// Left when it returned.
    pub in_flight: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(spec: serde_json::Value) -> Result<QueueConfig, String> {
        let spec: QueueSpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
        spec.apply_to(QueueConfig::defaults_for("q"))
    }

    #[test]
    fn an_empty_spec_gives_the_documented_defaults() {
        let config = check(serde_json::json!({})).unwrap();
        assert_eq!(config.visibility_timeout_ms, 30_000);
        assert_eq!(config.max_attempts, 5);
        assert_eq!(config.dead_letter_queue.as_deref(), Some("q.dlq"));
        assert_eq!(config.max_message_bytes, 1 << 20);
        assert_eq!(config.dedup_window_ms, 86_400_000);
        assert_eq!(
            config.backoff,
            Backoff {
                initial_ms: 1_000,
                max_ms: 60_000,
                factor: 2.0,
                jitter: true
            }
        );
    }

    #[test]
    fn invalid_fields_are_named_in_the_error() {
        for (spec, field) in [
            (
                serde_json::json!({"visibility_timeout_ms": 0}),
                "visibility_timeout_ms",
            ),
            (serde_json::json!({"ordering": "random"}), "ordering"),
            (
                serde_json::json!({"backoff": {"factor": 0.5}}),
                "backoff.factor",
            ),
            (
                serde_json::json!({"backoff": {"initial_ms": 5000, "max_ms": 10}}),
                "backoff.max_ms",
            ),
            (
                serde_json::json!({"dead_letter_queue": "bad name"}),
                "dead_letter_queue",
            ),
            (
                serde_json::json!({"max_message_bytes": 0}),
                "max_message_bytes",
            ),
            (serde_json::json!({"colour": "red"}), "colour"),
        ] {
            let error = check(spec.clone()).unwrap_err();
            assert!(error.contains(field), "{spec} gave {error}");
        }
    }
}
