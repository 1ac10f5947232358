//! A queue's depth, counters, throughput and latency as the API shows them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::PushStatsOut;

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
    /// Why the queue is stuck (dead letters, paused, over the server's depth or age
    /// threshold), in that order; empty when it is not. The dashboard's overview lists stuck
    /// queues first.
    #[serde(default)]
    pub stuck: Vec<StuckReason>,
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
    /// Not stored: their idempotency key (given as `id`, or made from the content on a
    /// `dedup: "content"` queue) was seen within the dedup window. Idempotency hits, counted
    /// on every path (HTTP, gRPC, SQS, webhooks).
    #[serde(default)]
    pub deduplicated: u64,
}

/// Why a queue is stuck, in the order [`stuck_reasons`] lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StuckReason {
    /// Its dead-letter queue holds messages.
    DeadLetters,
    /// Its consumers' deliveries or its push deliveries are paused.
    Paused,
    /// Ready + delayed + in flight reached the depth threshold or the queue's `max_depth`.
    Depth,
    /// Its oldest ready message is older than the age threshold.
    Age,
}

impl StuckReason {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DeadLetters => "dead_letters",
            Self::Paused => "paused",
            Self::Depth => "depth",
            Self::Age => "age",
        }
    }
}
