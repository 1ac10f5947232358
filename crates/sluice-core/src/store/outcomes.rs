//! What a store's operations answer and take that every store shares: enqueue order, a
//! queue's depth and counters, why a lease operation was refused, what a nack did, which dead
//! letters to list. They belong to the `Store` trait, not to any one store: the SQLite
//! store's in-memory index (`sluice_store_sqlite::dispatch`) and the PostgreSQL store both use them.

use std::sync::Arc;

use crate::clock::Millis;
use crate::histogram::Histogram;
use crate::meter::Recent;

pub use crate::message::Seq;

/// Why a lease operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// The receipt is not the message's current lease (expired and redelivered, or already done).
    #[error("the receipt is stale: the message is no longer leased with it")]
    Stale,
    /// The message is not in the queue the request named.
    #[error("no such message in this queue")]
    NotInQueue,
    /// A permanent failure on a queue without a dead-letter queue.
    #[error("the queue has no dead-letter queue")]
    NoDeadLetterQueue,
}

/// Counters since start, per queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages accepted (not counting duplicates).
    pub enqueued: u64,
    /// Deliveries handed out.
    pub delivered: u64,
    /// Acks.
    pub acked: u64,
    /// Nacks.
    pub nacked: u64,
    /// Messages moved to the dead-letter queue.
    pub dead_lettered: u64,
    /// Leases that ran out.
    pub lease_expired: u64,
    /// Messages removed (or dead-lettered) by retention.
    pub expired: u64,
    /// Messages refused because the queue was at `max_depth`.
    pub rejected: u64,
    /// Messages cancelled before delivery.
    pub cancelled: u64,
    /// Messages removed by purges.
    pub purged: u64,
    /// Messages not stored because their idempotency key (given, or made from the content) was
    /// seen within the dedup window: idempotency hits, on every path that enqueues.
    pub deduplicated: u64,
}

/// Depth and counters of one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueDepth {
    /// Visible messages (including those waiting behind their lane).
    pub ready: u64,
    /// Invisible until a delay or backoff ends.
    pub delayed: u64,
    /// Leased.
    pub in_flight: u64,
    /// Age of the oldest ready message.
    pub oldest_ready_age_ms: Option<Millis>,
    /// True while deliveries are paused.
    pub paused: bool,
    /// Since start.
    pub counters: Counters,
    /// Throughput and latency of the last minutes.
    pub recent: Recent,
    /// Enqueue-to-ack latency of every ack since start, in ms (for metrics).
    pub ack_latency_ms: Histogram,
}

/// Which dead-letter entries to select.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    /// Only entries that came from this queue.
    pub source_queue: String,
    /// Case-insensitive substring of the last error.
    pub error_contains: Option<String>,
    /// Dead-lettered at or after this time.
    pub since_ms: Option<Millis>,
    /// Dead-lettered before this time.
    pub until_ms: Option<Millis>,
}

/// What the result of a nack was.
#[derive(Debug, Clone, PartialEq)]
pub enum NackOutcome {
    /// Visible again at this time.
    Retry { visible_at_ms: Millis },
    /// Moved to this dead-letter queue.
    DeadLettered { queue: Arc<str> },
}
