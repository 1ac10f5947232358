//! The seam between queue semantics and where the queue lives.
//!
//! [`Backend`] is what [`crate::Queue`] and [`crate::Worker`] need from a broker: enqueue,
//! receive, ack, nack, extend, stats and a few operator actions, in queue terms, not HTTP terms.
//! [`crate::Http`] implements it against a sluice server, `Grpc` (feature `grpc`) against the
//! same server over its gRPC API, [`crate::Embedded`] against a store inside the process, `Sqs`
//! (feature `sqs`) against Amazon SQS or sluice's SQS-compatible API, and `Amqp` (feature
//! `amqp`) against RabbitMQ.
//!
//! Not every broker can keep every rule: [`Backend::capabilities`] says what a backend can do,
//! and a call it cannot serve fails with [`crate::Error::Unsupported`] instead of doing nothing.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

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

/// A message an ack enqueues in its own commit ([`Backend::ack_then`]), and its queue.
#[derive(Debug, Clone)]
pub struct NextStep {
    /// The queue it goes to.
    pub queue: String,
    /// The message.
    pub message: Outgoing,
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
    /// Leased; `None` where the broker cannot count messages delivered and not yet settled
    /// (RabbitMQ: see [`Capabilities::in_flight_stats`]).
    pub in_flight: Option<u64>,
    /// Acked since the backend started: on sluice (HTTP, embedded) by the store, whoever acked;
    /// on SQS and RabbitMQ, which keep no such count, the acks made through this backend value.
    pub processed: u64,
    /// In the dead-letter queue.
    pub dead_lettered: u64,
    /// Deliveries paused.
    pub paused: bool,
}

impl QueueStats {
    /// Ready, delayed and in flight together (in flight counted as 0 where it is unknown).
    pub fn outstanding(&self) -> u64 {
        self.ready + self.delayed + self.in_flight.unwrap_or(0)
    }
}

/// What a backend can do. A call that needs something a backend cannot do fails with
/// [`crate::Error::Unsupported`]; nothing is silently skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// [`Backend::extend`]: a lease can be renewed while a handler runs.
    pub extend: bool,
    /// A lease that is neither settled nor extended runs out, and the message is delivered
    /// again. Without it (RabbitMQ) a leased message comes back only when the backend's
    /// connection closes.
    pub lease_expiry: bool,
    /// [`Backend::set_paused`]: deliveries of a whole queue can be paused and resumed.
    pub pause: bool,
    /// [`Backend::cancel`]: a message not yet delivered can be removed by id.
    pub cancel: bool,
    /// [`Backend::get`]: where a message is, by id.
    pub lookup: bool,
    /// Per-key order: [`QueueOptions::per_key`] queues deliver one message of a key at a time.
    pub per_key_order: bool,
    /// Deduplication by idempotency id ([`Outgoing::id`]; on SQS in a [`QueueOptions::dedup`]
    /// queue).
    pub dedup: bool,
    /// Delayed enqueue ([`Outgoing::delay`]). Retry delays of a nack are a separate matter:
    /// every backend has those.
    pub delays: bool,
    /// Priorities ([`Outgoing::priority`] other than 0).
    pub priority: bool,
    /// [`QueueStats::in_flight`] is counted, so [`Backend::drain`] can tell when a queue is
    /// empty.
    pub in_flight_stats: bool,
    /// [`Backend::ack_then`]: an ack enqueues next steps in its own commit.
    pub chaining: bool,
}

impl Capabilities {
    /// Everything: what sluice (HTTP or embedded) can do.
    pub const ALL: Capabilities = Capabilities {
        extend: true,
        lease_expiry: true,
        pause: true,
        cancel: true,
        lookup: true,
        per_key_order: true,
        dedup: true,
        delays: true,
        priority: true,
        in_flight_stats: true,
        chaining: true,
    };
}

/// How to create a queue ([`Backend::ensure_queue_with`]). The default is the backend's
/// default queue.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueOptions {
    /// Deliveries before a failure dead-letters (the backend's default, 5, when `None`).
    pub max_attempts: Option<u32>,
    /// Messages of one key are delivered one at a time, in order (sluice `ordering: per_key`;
    /// SQS: a FIFO queue, key = MessageGroupId). Refused where
    /// [`Capabilities::per_key_order`] is false.
    pub per_key: bool,
    /// An idempotency id deduplicates (sluice always does; SQS: a FIFO queue, id =
    /// MessageDeduplicationId). Refused where [`Capabilities::dedup`] is false.
    pub dedup: bool,
}

/// A message in the dead-letter queue, as [`Backend::dead_letters`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetter {
    /// The message (the id it had in its queue).
    pub message_id: Uuid,
    /// JSON text of the body.
    pub body: Vec<u8>,
    /// Idempotency id it was enqueued with.
    pub id: Option<String>,
    /// Ordering key.
    pub key: Option<String>,
    /// The error of the last failed attempt.
    pub error: Option<String>,
    /// Deliveries made before it was dead-lettered.
    pub attempts: u32,
    /// When it was enqueued.
    pub enqueued_at: SystemTime,
    /// When it was dead-lettered.
    pub failed_at: SystemTime,
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
    /// What this backend can do; calls beyond it fail with [`crate::Error::Unsupported`].
    fn capabilities(&self) -> Capabilities;
    /// Creates the queue (and its dead-letter queue) with `options` if it does not exist; an
    /// existing queue keeps its settings. Options the backend cannot keep are refused with
    /// [`crate::Error::Unsupported`].
    async fn ensure_queue_with(&self, queue: &str, options: &QueueOptions) -> Result<()>;
    /// Creates the queue with default settings if it does not exist.
    async fn ensure_queue(&self, queue: &str) -> Result<()> {
        self.ensure_queue_with(queue, &QueueOptions::default())
            .await
    }
    /// Stores messages durably; one result per message, in order.
    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>>;
    /// Receives up to `max` messages, each leased for `visibility_timeout`, waiting up to
    /// `wait` for the first.
    async fn receive(
        &self,
        queue: &str,
        max: usize,
        visibility_timeout: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>>;
    /// The message is done.
    async fn ack(&self, queue: &str, receipt: &str) -> Result<()>;
    /// The message is done, and `then` is enqueued in the same commit as the ack: both happen
    /// or neither. Backends without [`Capabilities::chaining`] refuse any next step with
    /// [`crate::Error::Unsupported`] rather than enqueue it apart from the ack.
    async fn ack_then(&self, queue: &str, receipt: &str, then: Vec<NextStep>) -> Result<()> {
        if then.is_empty() {
            return self.ack(queue, receipt).await;
        }
        Err(crate::Error::Unsupported(
            "next steps: this backend cannot enqueue them in the ack's commit".into(),
        ))
    }
    /// The attempt failed.
    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome>;
    /// Keeps the lease for `lease` from now.
    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()>;
    /// Gives the message back without a failure (the worker does this with what still runs
    /// when its shutdown grace ends): ready again at once, with no error and no backoff, and
    /// never dead-lettered by the release. The delivery still counts in its attempts (sluice:
    /// an extend to 0; SQS: `ChangeMessageVisibility` to 0; RabbitMQ: a requeue).
    async fn release(&self, queue: &str, receipt: &str) -> Result<()>;
    /// Gives back a message this consumer received but never started (it paused or stopped
    /// before handing it to a handler): as [`Backend::release`], and where the backend can,
    /// the delivery is not counted in its attempts either (sluice: an extend to 0 with
    /// `unstarted`). Where it cannot (SQS counts every receive), a release.
    async fn release_unstarted(&self, queue: &str, receipt: &str) -> Result<()> {
        self.release(queue, receipt).await
    }
    /// The queue's numbers.
    async fn stats(&self, queue: &str) -> Result<QueueStats>;
    /// Pauses or resumes deliveries.
    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()>;
    /// Cancels a message that is not being processed.
    async fn cancel(&self, queue: &str, message: MessageRef) -> Result<CancelOutcome>;
    /// Where a message is.
    async fn get(&self, queue: &str, message: MessageRef) -> Result<Option<MessageInfo>>;
    /// Up to `max` of the queue's dead letters, oldest failure first, without removing them.
    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>>;
    /// Now, by the backend's clock (the embedded store's test clock, say).
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    /// Waits until the queue holds no ready, delayed or in-flight message, or `timeout`; true
    /// when it emptied. Unsupported where in-flight messages are not counted.
    async fn drain(&self, queue: &str, timeout: Duration) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let stats = self.stats(queue).await?;
            let Some(in_flight) = stats.in_flight else {
                return Err(crate::Error::Unsupported(
                    "drain: this backend does not count messages in flight".into(),
                ));
            };
            if stats.ready + stats.delayed + in_flight == 0 {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Milliseconds since the Unix epoch, as the servers and stores give times (before it: the
/// epoch).
pub(crate) fn system_time(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

/// The longest long poll a sluice server allows (`sluice_core::queue::limits::WAIT_MS_MAX`):
/// every sluice backend (HTTP, gRPC, embedded) caps a lease's wait at it.
pub(crate) const WAIT_MAX: Duration =
    Duration::from_millis(sluice_core::queue::limits::WAIT_MS_MAX as u64);

/// A duration in whole milliseconds, as the servers take waits and leases.
pub(crate) fn millis(duration: Duration) -> i64 {
    duration.as_millis().min(i64::MAX as u128) as i64
}
