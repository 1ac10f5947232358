//! The seam between queue semantics and where the queue lives.
//!
//! [`Backend`] is what [`crate::Queue`] and [`crate::Worker`] need from a broker: enqueue,
//! lease, ack, nack, extend, stats and a few operator actions, in queue terms, not HTTP terms.
//! [`crate::Http`] implements it against a sluice server, [`crate::Embedded`] against a store
//! inside the process; a backend for another broker (Amazon SQS, RabbitMQ) would implement the
//! same trait.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use uuid::Uuid;

use crate::Result;

/// A message to enqueue, already encoded.
#[derive(Debug, Clone, Default)]
pub struct Outgoing {
    /// JSON text of the body.
    pub body: Vec<u8>,
    /// Idempotency id: the same id within the queue's dedup window gives the first message.
    pub id: Option<String>,
    /// Ordering key (`per_key` queues).
    pub key: Option<String>,
    /// Higher first.
    pub priority: i32,
    /// Invisible for this long.
    pub delay: Option<Duration>,
}

/// The outcome of one enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enqueued {
    /// The message (the first one, for a duplicate id).
    pub message_id: Uuid,
    /// False when the id was seen within the dedup window: nothing new was stored.
    pub created: bool,
    /// Messages the queue held when this one was stored (0 for a duplicate).
    pub position: u64,
}

/// A leased message, as the backend hands it out.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The message.
    pub message_id: Uuid,
    /// The lease handle for ack, nack and extend.
    pub receipt: String,
    /// JSON text of the body (or the raw bytes of a byte body).
    pub body: Vec<u8>,
    /// Idempotency id it was enqueued with.
    pub id: Option<String>,
    /// Ordering key.
    pub key: Option<String>,
    /// 1-based delivery count.
    pub attempt: u32,
    /// When it was enqueued.
    pub enqueued_at: SystemTime,
    /// Error of the previous attempt.
    pub last_error: Option<String>,
}

/// A failed attempt.
#[derive(Debug, Clone, Default)]
pub struct Nack {
    /// Why it failed (kept as `last_error`).
    pub error: String,
    /// Retry after this long (the queue's backoff when `None`).
    pub delay: Option<Duration>,
    /// Dead-letter at once.
    pub permanent: bool,
}

/// What a nack did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackOutcome {
    /// It will be delivered again.
    Retried,
    /// It went to the dead-letter queue.
    DeadLettered,
}

/// A queue's numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Visible, waiting for a consumer.
    pub ready: u64,
    /// Waiting for a delay or backoff.
    pub delayed: u64,
    /// Leased.
    pub in_flight: u64,
    /// Acked since the backend started.
    pub processed: u64,
    /// In the dead-letter queue.
    pub dead_lettered: u64,
    /// Deliveries paused.
    pub paused: bool,
}

/// How a message is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageRef {
    /// By message id.
    Id(Uuid),
    /// By idempotency id.
    IdempotencyId(String),
}

/// What a cancel found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Removed before delivery.
    Cancelled,
    /// No such message.
    NotFound,
    /// Being processed now.
    AlreadyProcessing,
    /// Done already (acked, dead-lettered, expired, cancelled or purged); the state in words.
    AlreadyCompleted(String),
}

/// Where a message is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    /// The message.
    pub message_id: Uuid,
    /// `ready`, `delayed`, `in_flight`, `acked`, `dead`, `expired`, `cancelled`, ...
    pub state: String,
    /// Deliveries so far.
    pub attempts: u32,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
}

/// A broker, in queue terms.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// Creates the queue with default settings if it does not exist.
    async fn ensure_queue(&self, queue: &str) -> Result<()>;
    /// Stores messages durably; one result per message, in order.
    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>>;
    /// Leases up to `max` messages for `lease`, waiting up to `wait` for the first.
    async fn lease(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>>;
    /// The message is done.
    async fn ack(&self, queue: &str, receipt: &str) -> Result<()>;
    /// The attempt failed.
    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome>;
    /// Keeps the lease for `lease` from now.
    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()>;
    /// The queue's numbers.
    async fn stats(&self, queue: &str) -> Result<QueueStats>;
    /// Pauses or resumes deliveries.
    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()>;
    /// Cancels a message that is not being processed.
    async fn cancel(&self, queue: &str, message: MessageRef) -> Result<CancelOutcome>;
    /// Where a message is.
    async fn get(&self, queue: &str, message: MessageRef) -> Result<Option<MessageInfo>>;
    /// Now, by the backend's clock (the embedded store's test clock, say).
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    /// Waits until the queue holds no ready, delayed or in-flight message, or `timeout`; true
    /// when it emptied.
    async fn drain(&self, queue: &str, timeout: Duration) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let stats = self.stats(queue).await?;
            if stats.ready + stats.delayed + stats.in_flight == 0 {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
