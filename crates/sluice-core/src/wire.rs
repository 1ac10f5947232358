//! The JSON shapes of the HTTP API v1, shared by the server and the client.
//!
//! These types are a promise to the outside world: field names carry their unit (`_ms`) and
//! times are RFC 3339 strings. Validation into core types happens here too, so the server, the
//! config file and the client agree on what is valid.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::clock::Millis;

mod error;
mod hooks;
use crate::queue::{Backoff, MessageSchema, OnExpire, Ordering, QueueConfig, RateLimit, limits};
pub use error::*;
pub use hooks::*;

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
    /// Retention in ms: older messages are removed (default 345600000, 4 days; 14 days for a
    /// dead-letter queue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_ms: Option<i64>,
    /// `drop` (default) or `dead_letter`: what retention does with an old message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_expire: Option<String>,
    /// Most messages held (ready + delayed + in flight); 0 or null = unbounded (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<u64>,
    /// Most leases out at once; 0 or null = unbounded (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    /// Deliveries per second as a token bucket; `per_second: 0` turns it off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
}

/// Rate limit settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSpec {
    /// Sustained deliveries per second; 0 turns the limit off.
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
            check_range("backoff.initial_ms", ms, 0, limits::DELAY_MS_MAX)?;
            base.initial_ms = ms;
        }
        if let Some(ms) = self.max_ms {
            check_range("backoff.max_ms", ms, 0, limits::DELAY_MS_MAX)?;
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
    /// Retention in ms.
    pub max_age_ms: i64,
    /// `drop` or `dead_letter`.
    pub on_expire: String,
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
            max_age_ms: config.max_age_ms,
            on_expire: config.on_expire.as_str().to_owned(),
            max_depth: config.max_depth,
            max_in_flight: config.max_in_flight,
            rate_limit: config.rate_limit.map(|limit| RateLimitOut {
                per_second: limit.per_second,
                burst: limit.burst,
            }),
            schema: config.schema.as_ref().map(|schema| schema.source().clone()),
            push: config.push.as_deref().cloned(),
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
}

/// Depth and counters of a queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueStatsOut {
    /// Visible, waiting for a consumer.
    pub ready: u64,
    /// Waiting for a delay or backoff to end.
    pub delayed: u64,
    /// Leased to consumers.
    pub in_flight: u64,
    /// Messages in this queue's dead-letter queue.
    pub dead_lettered: Option<u64>,
    /// Age of the oldest ready message in ms.
    pub oldest_ready_age_ms: Option<i64>,
    /// True while deliveries are paused.
    pub paused: bool,
    /// Since the server started.
    pub counters: CountersOut,
    /// Over the last 60 seconds.
    pub last_1m: ThroughputOut,
    /// Over the last 300 seconds.
    pub last_5m: ThroughputOut,
    /// Enqueue-to-ack latency over the last five minutes; null before the first ack.
    pub latency_ms: Option<LatencyOut>,
    /// The push destination's deliveries, when the queue has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<PushStatsOut>,
}

/// Messages through a queue over a recent span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ThroughputOut {
    /// Messages accepted.
    pub enqueued: u64,
    /// Messages acked.
    pub acked: u64,
    /// Failed attempts (nacks and leases that ran out).
    pub failed: u64,
    /// Accepted per second.
    pub enqueued_per_s: f64,
    /// Acked per second.
    pub acked_per_s: f64,
    /// Failed per second.
    pub failed_per_s: f64,
}

/// Enqueue-to-ack latency percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LatencyOut {
    /// Acks measured.
    pub samples: u64,
    /// Median, ms.
    pub p50: u64,
    /// 95th percentile, ms.
    pub p95: u64,
    /// 99th percentile, ms.
    pub p99: u64,
}

/// Counters since the server started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CountersOut {
    /// Accepted messages (duplicates not counted).
    pub enqueued: u64,
    /// Deliveries.
    pub delivered: u64,
    /// Acks.
    pub acked: u64,
    /// Nacks.
    pub nacked: u64,
    /// Moved to the dead-letter queue.
    pub dead_lettered: u64,
    /// Leases that ran out.
    pub lease_expired: u64,
    /// Removed or dead-lettered by retention.
    pub expired: u64,
    /// Refused at `max_depth`.
    pub rejected: u64,
    /// Cancelled before delivery.
    pub cancelled: u64,
    /// Removed by purges.
    pub purged: u64,
}

/// One message to enqueue. Give `body` (any JSON) or `body_base64` (bytes), not both.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageIn {
    /// Idempotency key: the same key within the dedup window returns the first message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Any JSON value.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Value)]
    pub body: Option<Box<RawValue>>,
    /// Bytes, standard base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// String headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Ordering key for `per_key` queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Higher first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Invisible for this long, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<i64>,
    /// Invisible until this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
}

impl MessageIn {
    /// A message with this JSON body and nothing else set.
    pub fn json(body: Box<RawValue>) -> Self {
        Self {
            id: None,
            body: Some(body),
            body_base64: None,
            headers: None,
            key: None,
            priority: None,
            delay_ms: None,
            not_before: None,
        }
    }
}

/// Deserializes a present field as `Some`, even when it is JSON `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// `{"messages": [...]}`: a batch of up to 1000 messages or 10 MiB.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBatchIn {
    /// The messages.
    pub messages: Vec<MessageIn>,
}

/// The result for one enqueued message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EnqueueOut {
    /// Server id (the original's for a duplicate).
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// False for a duplicate idempotency key within the window.
    pub created: bool,
    /// For a new message: how many messages the queue held when it was stored (ahead of it,
    /// give or take priorities and delays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// For a duplicate: where the first message is now (`ready`, `in_flight`, `acked`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// For a duplicate whose first message was acked with a result: that result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<serde_json::Value>,
}

/// Answer to a batch enqueue: one result per message, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EnqueueBatchOut {
    /// Per message.
    pub results: Vec<EnqueueOut>,
}

/// The body of `POST /v1/queues/{queue}/messages`: one message, or a batch. A body with a
/// `messages` field is a batch.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum EnqueueIn {
    /// `{"messages": [...]}`.
    Batch(MessageBatchIn),
    /// One message.
    One(MessageIn),
}

/// The answer to `POST /v1/queues/{queue}/messages`: `EnqueueOut` for one message,
/// `EnqueueBatchOut` for a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum EnqueueAnswerOut {
    /// For a batch.
    Batch(EnqueueBatchOut),
    /// For one message.
    One(EnqueueOut),
}

/// `POST /v1/queues/{queue}/receive`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiveIn {
    /// 1..=100 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// Long poll: wait up to this long for a message, 0..=20000 (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<i64>,
    /// Lease length for these messages (default: the queue's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<i64>,
}

/// One delivered message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReceivedMessage {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// Lease handle for ack, nack and extend.
    pub receipt: String,
    /// JSON body, when it was enqueued as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Value)]
    pub body: Option<Box<RawValue>>,
    /// Byte body in base64, when it was enqueued as bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ordering key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// This delivery's attempt number, from 1.
    pub attempts: u32,
    /// RFC 3339.
    pub enqueued_at: String,
    /// RFC 3339.
    pub first_received_at: String,
    /// RFC 3339.
    pub lease_expires_at: String,
    /// Error of the previous attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Where a dead-lettered message came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterOut>,
}

/// Dead-letter metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterOut {
    /// The queue it failed in.
    pub source_queue: String,
    /// Error of the last attempt.
    pub last_error: Option<String>,
    /// Attempts made there.
    pub attempts: u32,
    /// RFC 3339.
    pub first_seen_at: String,
    /// RFC 3339.
    pub last_seen_at: String,
}

/// Answer to receive.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReceiveOut {
    /// Zero or more messages.
    pub messages: Vec<ReceivedMessage>,
}

/// `POST /v1/queues/{queue}/ack`: one receipt or many.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckIn {
    /// One receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// Many receipts (up to 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipts: Option<Vec<String>>,
    /// A small JSON result (up to 64 KiB) kept with the message: a later enqueue with the same
    /// idempotency key gets it back. Only with a single receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<Box<RawValue>>,
}

/// The result for one receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AckResult {
    /// The receipt.
    pub receipt: String,
    /// True when acked.
    pub acked: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Answer to ack (200 when every receipt was acked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AckOut {
    /// How many were acked.
    pub acked: usize,
    /// Per receipt, in order.
    pub results: Vec<AckResult>,
}

/// `POST /v1/queues/{queue}/nack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackIn {
    /// The lease.
    pub receipt: String,
    /// What went wrong (kept as `last_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Retry after this many ms instead of the backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<i64>,
    /// Dead-letter at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permanent: Option<bool>,
}

/// Answer to nack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NackOut {
    /// `delayed`, `ready` or `dead`.
    pub state: String,
    /// When it is visible again (RFC 3339), for a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_at: Option<String>,
    /// The dead-letter queue it went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
}

/// `POST /v1/queues/{queue}/extend`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendIn {
    /// The lease.
    pub receipt: String,
    /// New lease length from now, in ms.
    pub visibility_timeout_ms: i64,
}

/// Answer to extend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExtendOut {
    /// RFC 3339.
    pub lease_expires_at: String,
}

/// Where a message is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageStatusOut {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The queue it is in now (its DLQ once dead).
    pub queue: String,
    /// `ready`, `delayed`, `in_flight`, `acked`, `dead`, `expired`, `cancelled`, `purged`,
    /// `replayed` or `deleted`.
    pub state: String,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ordering key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// Deliveries so far.
    pub attempts: u32,
    /// RFC 3339.
    pub enqueued_at: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_at: Option<String>,
    /// RFC 3339.
    pub visible_at: String,
    /// RFC 3339, while in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// Error of the last failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// RFC 3339, once acked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_at: Option<String>,
    /// RFC 3339, once in a final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// Set once dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterOut>,
    /// The result its consumer acked it with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<serde_json::Value>,
    /// For a replayed dead letter: the new message's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub replayed_as: Option<uuid::Uuid>,
    /// Failed attempts, oldest first: nacks, leases that ran out, the move to the DLQ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureOut>,
}

/// One failed attempt of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailureOut {
    /// The attempt's number.
    pub attempt: u32,
    /// RFC 3339.
    pub at: String,
    /// Its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True when it sent the message to the dead-letter queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead_lettered: bool,
}

/// `POST /v1/queues/{queue}/cancel`: name the message by `message_id` or by idempotency `id`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelIn {
    /// Server id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Answer to cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancelOut {
    /// `cancelled`, `not_found`, `already_processing` or `already_completed`.
    pub outcome: String,
    /// The message, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub message_id: Option<uuid::Uuid>,
    /// Its state now (`cancelled`, `in_flight`, `acked`, `dead`, ...), when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
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

/// One dead letter.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterEntryOut {
    /// Its id (the id it had in the source queue).
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The dead-letter queue holding it.
    pub queue: String,
    /// The queue it failed in.
    pub source_queue: String,
    /// `dead`, `in_flight` (someone consumes the DLQ), `replayed` or `deleted`.
    pub state: String,
    /// Error of the last attempt.
    pub last_error: Option<String>,
    /// Attempts made in the source queue.
    pub attempts: u32,
    /// RFC 3339: first enqueued.
    pub enqueued_at: String,
    /// RFC 3339: first delivery in the source queue.
    pub first_seen_at: String,
    /// RFC 3339: when it was dead-lettered.
    pub last_seen_at: String,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ordering key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// Body size in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
    /// JSON body (`GET .../dlq/{message_id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub body: Option<Box<RawValue>>,
    /// Byte body in base64 (`GET .../dlq/{message_id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers (`GET .../dlq/{message_id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// RFC 3339, once replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_at: Option<String>,
    /// The new message a replay created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub replayed_as: Option<uuid::Uuid>,
}

/// `GET /v1/queues/{queue}/dlq`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterListOut {
    /// The dead-letter queue.
    pub dead_letter_queue: String,
    /// Newest first.
    pub entries: Vec<DeadLetterEntryOut>,
    /// Pass as `cursor` for the next page; absent at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `POST /v1/queues/{queue}/dlq/replay`: which dead letters to replay (all of this queue's when
/// no filter is given).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayIn {
    /// These entries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<String>>,
    /// Case-insensitive substring of the last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Dead-lettered at or after this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Dead-lettered before this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Most entries replayed by this call, 1..=10000 (default 1000); call again for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only count what matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Replay into this queue instead of the source queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_queue: Option<String>,
}

/// One replayed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplayedOut {
    /// The dead letter.
    #[schema(value_type = String)]
    pub dead_letter_id: uuid::Uuid,
    /// The new message.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
}

/// Answer to replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplayOut {
    /// True when nothing was replayed, only counted.
    pub dry_run: bool,
    /// Entries matching (for a dry run: all of them; otherwise those taken by this call).
    pub matched: u64,
    /// Entries replayed by this call.
    pub replayed: u64,
    /// True when more matching entries are left (call again).
    pub more: bool,
    /// The queue they went to.
    pub target_queue: String,
    /// Per entry.
    pub results: Vec<ReplayedOut>,
}

/// `POST /v1/queues/{queue}/dlq/{message_id}/replay`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayOneIn {
    /// Replay into this queue instead of the source queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_queue: Option<String>,
}

/// Answer to deleting dead letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterDeleteOut {
    /// Entries deleted.
    pub deleted: u64,
}

/// One way a body fails its queue's schema (in the `details` of a 422 `schema_violation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SchemaViolationOut {
    /// Position of the message in a batch (0 for a single message).
    pub index: usize,
    /// JSON Pointer into the body.
    pub path: String,
    /// Why it fails.
    pub reason: String,
}

/// Health answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthOut {
    /// `ok`, or why not.
    pub status: String,
}

/// Converts epoch ms to the wire time format.
pub fn time_out(ms: Millis) -> String {
    crate::clock::format_rfc3339(ms)
}

/// One message of `GET /v1/queues/{queue}/browse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BrowsedMessageOut {
    /// Where it is and what happened to it so far.
    #[serde(flatten)]
    pub status: MessageStatusOut,
    /// RFC 3339: when its current lease began (in flight only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased_at: Option<String>,
    /// How long it has been leased, ms (in flight only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_age_ms: Option<i64>,
    /// How long since it was enqueued, ms.
    pub age_ms: i64,
    /// Body size in bytes, when known without a read from disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
    /// The start of the body (with `preview_bytes`): its JSON text as stored, bytes as base64,
    /// ending in `…` when cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_preview: Option<String>,
}

/// How many messages a queue holds in each browsable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BrowseCountsOut {
    /// Claimable now.
    pub ready: u64,
    /// Visible but behind the active message of their lane (ordered queues).
    pub waiting: u64,
    /// Waiting for a delay or backoff to end.
    pub delayed: u64,
    /// Leased to consumers.
    pub in_flight: u64,
}

/// `GET /v1/queues/{queue}/browse`: a page of one state's messages in dispatch order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BrowseOut {
    /// The queue.
    pub queue: String,
    /// `ready`, `waiting`, `delayed` or `in_flight`.
    pub state: String,
    /// In order: ready by priority then enqueue order, waiting oldest first, delayed by visible
    /// time, in flight by lease deadline.
    pub messages: Vec<BrowsedMessageOut>,
    /// Pass as `cursor` for the next page; absent at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Sizes of every state now.
    pub counts: BrowseCountsOut,
}

/// `GET /v1/queues/{queue}/messages/{message_id}/body`: a message with its body and headers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MessageBodyOut {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The queue it is in now.
    pub queue: String,
    /// Its state (see `MessageStatusOut.state`).
    pub state: String,
    /// False once the body was dropped (acked, expired, cancelled, purged, deleted).
    pub available: bool,
    /// Body size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
    /// JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub body: Option<Box<RawValue>>,
    /// Byte body in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
}

/// `GET /v1/queues/{queue}/messages/{message_id}/deliveries`: a message's push delivery log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveriesOut {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The queue it is in now (its dead-letter queue once dead).
    pub queue: String,
    /// Its state (see `MessageStatusOut.state`).
    pub state: String,
    /// Its last push attempts, oldest first (at most `[push] delivery_log_attempts`).
    pub deliveries: Vec<DeliveryOut>,
}

/// One push delivery attempt: the request as sent (secrets hidden) and the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryOut {
    /// The attempt's number (in the queue it was delivered from).
    pub attempt: u32,
    /// RFC 3339: when the request was sent.
    pub at: String,
    /// HTTP method.
    pub method: String,
    /// The destination URL, with user info and query (and a `secret_path`) shown as `(hidden)`.
    pub url: String,
    /// Request headers; values of the destination's configured headers are `(hidden)`.
    pub request_headers: BTreeMap<String, String>,
    /// The answer's HTTP status; absent when none came (connection error, timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why the attempt failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The answer's headers (repeated names joined with `, `).
    pub response_headers: BTreeMap<String, String>,
    /// True when headers were left out past `[push] delivery_log_header_bytes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub response_headers_truncated: bool,
    /// The first bytes of the answer's body (`[push] delivery_log_body_bytes`), as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_excerpt: Option<String>,
    /// True when the body was longer than the excerpt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
    /// From sending the request to reading the excerpt, in ms.
    pub latency_ms: u64,
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

    #[test]
    fn a_null_body_is_present_but_a_missing_one_is_not() {
        let null: MessageIn = serde_json::from_str(r#"{"body": null}"#).unwrap();
        assert_eq!(
            null.body.map(|raw| raw.get().to_owned()).as_deref(),
            Some("null")
        );
        let missing: MessageIn = serde_json::from_str(r#"{"body_base64": "AA=="}"#).unwrap();
        assert!(missing.body.is_none());
    }
}
