//! Queues: their settings as given over the API or in the config file (validated into a
//! `QueueConfig` by `sluice-core`), their settings as shown, and the answers of the queue-wide operations
//! (define, list, delete, purge, drain).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{PushSpec, QueueStatsOut, null_as_zero, present};

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
