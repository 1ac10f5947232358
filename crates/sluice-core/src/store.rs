//! The `Store` trait: what every storage backend offers the server.
//!
//! The trait speaks queue semantics (enqueue, claim, ack, nack, extend), not SQL, and its
//! documentation promises only what every backend keeps: the embedded SQLite store, owned by
//! one process and dispatching from an in-memory index, and a store shared by several server
//! nodes (PostgreSQL) alike. Where backends may differ (whether a lease outlives a restart, which
//! storage metrics exist), the method says so, and callers must not count on either way. The
//! store conformance suite (`sluice-store-tests`) holds every backend to these promises.
//!
//! Every method that depends on time takes `now_ms` from the caller's [`crate::Clock`]. A method
//! that returns `Ok` after a write has made it durable, as the store's durability setting
//! defines it. Which backend the server opens is its configuration's choice (`[store] kind`).

use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::clock::Millis;
use crate::message::{
    ClaimedMessage, DeliveryAttempt, DeliveryLogEntry, MessageState, MessageStatus, NewMessage,
    Payload, Receipt,
};
use crate::notify::Notifier;
use crate::queue::QueueConfig;
pub use crate::stored::ScheduleState;

mod outcomes;
pub mod sessions;

pub use outcomes::{Counters, DeadLetterFilter, LeaseError, NackOutcome, QueueDepth, Seq};

/// What kind of definition a [`DefinitionStore::definition_put`] row holds: each kind is its own
/// namespace of names, its spec opaque JSON to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DefinitionKind {
    /// A topic and its subscriptions.
    Topic,
    /// A dead-letter or threshold alert.
    Alert,
    /// Where an alert stands (what it last sent, per queue), kept apart from its definition so
    /// a pass can advance it with [`DefinitionStore::definition_swap`] without touching the definition.
    AlertState,
}

impl DefinitionKind {
    /// The name at rest.
    pub fn as_str(self) -> &'static str {
        match self {
            DefinitionKind::Topic => "topic",
            DefinitionKind::Alert => "alert",
            DefinitionKind::AlertState => "alert_state",
        }
    }
}

/// A stored schedule: its definition as given and its progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRow {
    /// Its name.
    pub name: String,
    /// The definition's JSON.
    pub spec: String,
    /// Where it stands.
    pub state: ScheduleState,
}

/// Errors by meaning, whatever the backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named queue does not exist.
    #[error("queue {0:?} does not exist")]
    QueueNotFound(String),
    /// The request conflicts with the current state (e.g. deleting a queue in use as a DLQ).
    #[error("{0}")]
    Conflict(String),
    /// A lease operation was refused.
    #[error(transparent)]
    Lease(#[from] LeaseError),
    /// The backend cannot serve now (writer gone, database down).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The disk is full: nothing new is stored until space is freed; writes resume on their own.
    #[error("the disk is full: {0}")]
    DiskFull(String),
    /// Writes stopped for good (e.g. a failed fsync: the page cache can no longer be trusted to
    /// reach the disk); a restart is needed.
    #[error("storage failed; writes stopped until a restart: {0}")]
    WritesStopped(String),
    /// The queue is at its `max_depth`: nothing of the batch was stored.
    #[error(
        "queue {queue:?} is full: it holds {depth} of at most {max_depth} messages, and {refused} more were refused"
    )]
    QueueFull {
        /// The queue.
        queue: String,
        /// Messages it holds (or has admitted).
        depth: u64,
        /// Its limit.
        max_depth: u64,
        /// Messages in the refused batch.
        refused: u64,
        /// A suggested wait before retrying, from how fast the queue drains.
        retry_after_s: u64,
    },
    /// Too many new messages are waiting to be stored (the backend's writes are behind):
    /// nothing of the batch was stored. Only enqueues are refused this way.
    #[error(
        "the store is behind: {pending_bytes} bytes of new messages are waiting to be stored, at most {max_bytes} ([store] writer_queue_bytes); nothing of the batch was stored"
    )]
    Overloaded {
        /// Bytes of new messages waiting now.
        pending_bytes: u64,
        /// The bound (`[store] writer_queue_bytes`).
        max_bytes: u64,
        /// A suggested wait before retrying.
        retry_after_s: u64,
    },
    /// Anything else, with its cause.
    #[error("storage error: {0}")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Result alias for store calls.
pub type StoreResult<T> = Result<T, StoreError>;

/// Create a queue or replace its configuration.
#[derive(Debug, Clone)]
pub struct QueuePutParams {
    /// A valid queue name.
    pub name: String,
    /// The full, validated configuration.
    pub config: QueueConfig,
    /// Now.
    pub now_ms: Millis,
}

/// What a queue put did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePut {
    /// False when the queue existed and was updated.
    pub created: bool,
    /// True when its dead-letter queue was created along with it.
    pub dead_letter_created: bool,
}

/// A queue with its depth.
#[derive(Debug, Clone)]
pub struct QueueInfo {
    /// Name.
    pub name: String,
    /// Configuration.
    pub config: QueueConfig,
    /// Depth and counters.
    pub depth: QueueDepth,
    /// Messages in its dead-letter queue, if it has one.
    pub dead_letter_depth: Option<u64>,
    /// True while an operator has paused its push delivery ([`QueueStore::queue_push_pause`]).
    pub is_push_paused: bool,
}

/// The body bytes one queue stores ([`QueueStore::queue_bytes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueBytes {
    /// Queue name.
    pub queue: String,
    /// Bodies of its messages not yet final: ready, delayed, leased (dead letters are held by
    /// their dead-letter queue).
    pub held: u64,
    /// Bodies of its acked messages kept for browsing (the queue's `keep_acked_ms`), while kept.
    pub kept: u64,
}

/// Enqueue a batch of validated messages into one queue.
#[derive(Debug, Clone)]
pub struct EnqueueParams {
    /// Target queue.
    pub queue: String,
    /// One or more messages.
    pub messages: Vec<NewMessage>,
    /// Now.
    pub now_ms: Millis,
}

/// The result for one enqueued message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enqueued {
    /// The new message's id, or the original's for a duplicate idempotency key.
    pub message_id: Uuid,
    /// False for a duplicate within the dedup window.
    pub created: bool,
    /// Messages the queue held (in any state) when this one was stored: how many are ahead of
    /// it, give or take priorities and delays. 0 for a duplicate.
    pub position: u64,
}

/// Lease up to `max` messages.
#[derive(Debug, Clone)]
pub struct ClaimParams {
    /// Source queue.
    pub queue: String,
    /// 1..=100.
    pub max: usize,
    /// Lease length; the queue's visibility timeout when `None`.
    pub lease_ms: Option<Millis>,
    /// A message leased from a lane brings the members that follow it, in order, while they
    /// are visible, and the lane stays held until all of them are settled or back
    /// ([`crate::rules::lanes`]): SQS's FIFO receive. Without it a lane hands out one message
    /// at a time (the native `fifo` and `per_key` rule).
    pub lane_runs: bool,
    /// Now.
    pub now_ms: Millis,
}

/// Claimed messages, and when to look again if there were none.
#[derive(Debug, Clone, Default)]
pub struct Claim {
    /// Leased messages, at most `max`.
    pub messages: Vec<ClaimedMessage>,
    /// The next time a message of this queue becomes claimable without an enqueue.
    pub next_change_at_ms: Option<Millis>,
}

/// Ack a batch of leases in one queue.
#[derive(Debug, Clone)]
pub struct AckParams {
    /// Queue of the leases.
    pub queue: String,
    /// Receipts from receive.
    pub receipts: Vec<Receipt>,
    /// JSON result kept with every message acked (the API allows it with one receipt).
    pub result: Option<String>,
    /// The push attempt that ends with this ack, for the message's delivery log (one receipt).
    pub delivery: Option<DeliveryLogEntry>,
    /// Now.
    pub now_ms: Millis,
}

/// Nack one lease.
#[derive(Debug, Clone)]
pub struct NackParams {
    /// Queue of the lease.
    pub queue: String,
    /// Receipt from receive.
    pub receipt: Receipt,
    /// Why it failed, already cut to [`crate::queue::limits::ERROR_BYTES_MAX`] by the caller
    /// (`sluice_ops::error_text`): the store keeps it as given.
    pub error: Option<String>,
    /// Explicit retry delay instead of the backoff.
    pub delay_ms: Option<Millis>,
    /// Dead-letter at once.
    pub permanent: bool,
    /// The push attempt that failed, for the message's delivery log.
    pub delivery: Option<DeliveryLogEntry>,
    /// Now.
    pub now_ms: Millis,
}

/// Extend one lease.
#[derive(Debug, Clone)]
pub struct ExtendParams {
    /// Queue of the lease.
    pub queue: String,
    /// Receipt from receive.
    pub receipt: Receipt,
    /// New lease length from now.
    pub timeout_ms: Millis,
    /// Now.
    pub now_ms: Millis,
}

/// Give one lease back without counting a failure (see `Index::give_back`).
#[derive(Debug, Clone)]
pub struct GiveBackParams {
    /// Queue of the lease.
    pub queue: String,
    /// Receipt from receive.
    pub receipt: Receipt,
    /// The message was never started (a worker paused, or stopped, before handing it to a
    /// handler): the delivery is not counted either, so its attempts are as before the claim.
    pub unstarted: bool,
    /// Now.
    pub now_ms: Millis,
}

/// How to find a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageRef {
    /// By server id.
    Id(Uuid),
    /// By client idempotency key (within the dedup window).
    IdempotencyKey(String),
}

/// Look a message up.
#[derive(Debug, Clone)]
pub struct MessageGetParams {
    /// The queue it was enqueued to (it may be in that queue's DLQ now).
    pub queue: String,
    /// Which message.
    pub by: MessageRef,
    /// Now.
    pub now_ms: Millis,
}

/// What a cancel found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Removed before delivery.
    Cancelled { message_id: Uuid },
    /// No such message (or it left the records long ago).
    NotFound,
    /// Leased to a consumer now.
    AlreadyProcessing { message_id: Uuid },
    /// Acked, dead-lettered, expired, cancelled or purged already.
    AlreadyCompleted {
        message_id: Uuid,
        state: MessageState,
    },
}

/// Select dead letters of a queue.
#[derive(Debug, Clone)]
pub struct DeadLetterQuery {
    /// The source queue (its dead-letter queue is searched).
    pub queue: String,
    /// What to match.
    pub filter: DeadLetterFilter,
    /// Continue below this position (from a previous page).
    pub before: Option<(Millis, Seq)>,
    /// Most entries returned.
    pub limit: usize,
}

/// One dead letter as stores report it.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// Its status (queue, state, metadata, `dead_letter` info, replay record).
    pub status: MessageStatus,
    /// Body and headers, when asked for.
    pub payload: Option<Payload>,
    /// Body size in bytes, when known.
    pub body_bytes: Option<u64>,
}

/// A page of dead letters.
#[derive(Debug, Clone)]
pub struct DeadLetters {
    /// The dead-letter queue searched.
    pub dead_letter_queue: String,
    /// Newest first.
    pub entries: Vec<DeadLetter>,
    /// Where the next page starts.
    pub next: Option<(Millis, Seq)>,
}

/// Which dead letters to replay or delete.
#[derive(Debug, Clone)]
pub enum DeadLetterSelection {
    /// These ids.
    Ids(Vec<Uuid>),
    /// Every entry matching, up to a limit per call.
    Matching(DeadLetterFilter),
}

/// What a purge takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PurgeScope {
    /// The messages waiting for delivery (ready, delayed, behind their lane). Leased ones stay
    /// and may still be acked; idempotency ids are kept. The native purge, as RabbitMQ's.
    Waiting,
    /// Every message, those in flight too (their receipts go stale), and the queue's
    /// idempotency ids are forgotten, so a send after it is new: SQS's `PurgeQueue`, which
    /// AWS documents as deleting every message and which clears a FIFO queue's deduplication.
    Everything,
}

/// Replay dead letters as fresh messages.
#[derive(Debug, Clone)]
pub struct ReplayParams {
    /// The source queue whose dead-letter queue is read.
    pub queue: String,
    /// Which entries.
    pub selection: DeadLetterSelection,
    /// Most entries this call replays.
    pub limit: usize,
    /// Only count.
    pub dry_run: bool,
    /// Where the new messages go (default: each entry's source queue).
    pub target_queue: Option<String>,
    /// Now.
    pub now_ms: Millis,
}

/// What a replay did.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// Matching entries (all of them for a dry run; those taken otherwise).
    pub matched: u64,
    /// (dead letter id, new message id), in order.
    pub replayed: Vec<(Uuid, Uuid)>,
    /// More matching entries are left.
    pub more: bool,
}

/// The per-state sets of a queue that [`LookupStore::message_browse`] pages through, each in the order
/// dispatch takes from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowseState {
    /// Claimable now, by priority (higher first) then enqueue order.
    Ready,
    /// Visible but behind the active message of its lane (ordered queues), oldest first.
    Waiting,
    /// Invisible until a delay or backoff ends, by the time it becomes visible.
    Delayed,
    /// Leased, by lease deadline.
    InFlight,
    /// Acked and still keeping its body (the queue's `keep_acked_ms`), newest ack first; the
    /// only set a [`BrowseQuery::search`] narrows.
    Acked,
}

impl BrowseState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            BrowseState::Ready => "ready",
            BrowseState::Waiting => "waiting",
            BrowseState::Delayed => "delayed",
            BrowseState::InFlight => "in_flight",
            BrowseState::Acked => "acked",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "ready" => BrowseState::Ready,
            "waiting" => BrowseState::Waiting,
            "delayed" => BrowseState::Delayed,
            "in_flight" => BrowseState::InFlight,
            "acked" => BrowseState::Acked,
            _ => return None,
        })
    }
}

/// A position in a browsed set: (the set's sort key, seq); a page starts after it. The
/// acked set's key is the ack time, and its pages go from newer to older.
pub type BrowseCursor = (i64, Seq);

/// What a browse of acked messages keeps: each condition given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckedSearch {
    /// This message.
    pub message_id: Option<Uuid>,
    /// Sent with this idempotency key.
    pub idempotency_key: Option<String>,
    /// Sent with this ordering key.
    pub key: Option<String>,
    /// Acked at or after this time.
    pub since_ms: Option<Millis>,
    /// Acked before this time.
    pub until_ms: Option<Millis>,
}

/// Page through one state of a queue.
#[derive(Debug, Clone)]
pub struct BrowseQuery {
    /// The queue.
    pub queue: String,
    /// Which set.
    pub state: BrowseState,
    /// Start after this position (a previous page's `next`).
    pub after: Option<BrowseCursor>,
    /// Most messages returned.
    pub limit: usize,
    /// Narrows [`BrowseState::Acked`]; empty for the other sets.
    pub search: AckedSearch,
    /// Now.
    pub now_ms: Millis,
}

/// One browsed message.
#[derive(Debug, Clone)]
pub struct BrowsedMessage {
    /// Where it is.
    pub status: MessageStatus,
    /// When its current lease began (in flight only).
    pub leased_at_ms: Option<Millis>,
    /// Body size in bytes, when the store knows it without reading the body (`None` otherwise).
    pub body_bytes: Option<u64>,
}

/// How many messages a queue holds in each browsable state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BrowseCounts {
    /// Claimable now.
    pub ready: u64,
    /// Behind their lane.
    pub waiting: u64,
    /// Delayed.
    pub delayed: u64,
    /// Leased.
    pub in_flight: u64,
}

/// A page of browsed messages.
#[derive(Debug, Clone, Default)]
pub struct BrowsePage {
    /// In the set's order.
    pub messages: Vec<BrowsedMessage>,
    /// Where the next page starts, when there may be more.
    pub next: Option<BrowseCursor>,
    /// Sizes of every set of the queue.
    pub counts: BrowseCounts,
}

/// A message's status with its body and headers, when the store still has them.
#[derive(Debug, Clone)]
pub struct MessageBody {
    /// Where it is.
    pub status: MessageStatus,
    /// Body and headers; `None` once dropped (acked, unless its queue keeps acked bodies and
    /// the keep has not ended; expired, cancelled, purged, deleted).
    pub payload: Option<Payload>,
}

/// What a store reports about itself for `/metrics`: its write state, which every store has,
/// and the measurements it names and explains itself (`sluice_storage_*`, `sluice_store_*`),
/// which the server writes out as they are. Each store documents its own in docs/metrics.md
/// and tests that it does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageMetrics {
    /// The write state (what `/readyz` reports).
    pub write_state: WriteState,
    /// The store's own measurements, in the order it lists them.
    pub reported: Vec<StoreMetric>,
}

impl StorageMetrics {
    /// The value of the gauge or counter `name`, when the store reports it.
    pub fn value(&self, name: &str) -> Option<f64> {
        self.reported
            .iter()
            .find(|metric| metric.name == name)
            .and_then(|metric| match &metric.value {
                StoreMetricValue::Gauge(value) => Some(*value),
                StoreMetricValue::Counter(value) => Some(*value as f64),
                StoreMetricValue::Histogram { .. } => None,
            })
    }

    /// The histogram `name`, when the store reports it.
    pub fn histogram(&self, name: &str) -> Option<&crate::histogram::Histogram> {
        self.reported
            .iter()
            .find(|metric| metric.name == name)
            .and_then(|metric| match &metric.value {
                StoreMetricValue::Histogram { histogram, .. } => Some(histogram),
                _ => None,
            })
    }
}

/// One measurement a store reports, with its name and help text as `/metrics` shows them.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreMetric {
    /// Its name.
    pub name: &'static str,
    /// What it measures, for people.
    pub help: &'static str,
    /// Its value now.
    pub value: StoreMetricValue,
}

/// A store metric's kind and value.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreMetricValue {
    /// A value that goes up and down.
    Gauge(f64),
    /// A count since the store opened.
    Counter(u64),
    /// Observations, `per_unit` of the histogram's unit to one base unit (1e6 for µs → s).
    Histogram {
        /// The counts.
        histogram: crate::histogram::Histogram,
        /// Histogram units per base unit.
        per_unit: f64,
    },
}

impl StoreMetric {
    /// A gauge.
    pub fn gauge(name: &'static str, help: &'static str, value: f64) -> Self {
        Self {
            name,
            help,
            value: StoreMetricValue::Gauge(value),
        }
    }

    /// A counter.
    pub fn counter(name: &'static str, help: &'static str, value: u64) -> Self {
        Self {
            name,
            help,
            value: StoreMetricValue::Counter(value),
        }
    }

    /// A histogram whose values are `per_unit` to one base unit.
    pub fn histogram(
        name: &'static str,
        help: &'static str,
        histogram: crate::histogram::Histogram,
        per_unit: f64,
    ) -> Self {
        Self {
            name,
            help,
            value: StoreMetricValue::Histogram {
                histogram,
                per_unit,
            },
        }
    }
}

/// Whether a store takes writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WriteState {
    /// Everything is stored as usual.
    #[default]
    Accepting,
    /// The disk is full: new messages are refused; acks and other writes that free space go
    /// on while they can. Ends by itself once space is free.
    DiskFull,
    /// Writes stopped for good, with the reason; a restart is needed.
    Stopped(String),
    /// The store cannot reach its database now, with the reason (a shared store whose
    /// connection was lost): every call fails with `Unavailable` until it reconnects by itself.
    Unavailable(String),
}

/// A storage backend: every part below, and its upkeep.
///
/// The trait is split by concern so that each store implements each part in the module that
/// holds its code (a store's queues in its `queues.rs`, and so on), with no layer of methods
/// that only pass a call on. A caller names the parts it uses, or takes them all with
/// `use sluice_core::store::prelude::*`.
#[async_trait]
pub trait Store:
    QueueStore
    + MessageStore
    + LookupStore
    + DeadLetterStore
    + WebhookStore
    + DefinitionStore
    + Send
    + Sync
    + 'static
{
    /// Background upkeep: expire leases, apply retention, drop old records. Cheap when there is
    /// nothing to do. Every server calls it on a timer, so on a shared store several may call
    /// it at once.
    async fn maintain(&self, now_ms: Millis) -> StoreResult<()>;
    /// Wake-ups of waits on this store's queues (long polls, push workers, drains): a queue's
    /// waiters are woken after a change that may make one of its messages claimable. A wake-up
    /// is a hint, never a promise: a waiter looks again, and bounds its wait, since a wake-up
    /// may find nothing and one caused by another node of a shared store may come late.
    fn notifier(&self) -> Arc<Notifier>;
    /// Storage internals for metrics (group commits, syncs, the size on disk); nothing by
    /// default. Cheap: it reads counters.
    fn storage_metrics(&self) -> StorageMetrics {
        StorageMetrics::default()
    }
    /// A counter that moves when queue definitions, push pauses or webhook endpoints change on
    /// another node of a shared store, so a server reloads what it keeps of them in memory. The default
    /// never moves (its sender is gone): a store of one node, whose server applies its own
    /// changes as it makes them.
    fn definitions_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        tokio::sync::watch::channel(0).1
    }
    /// Where the dashboard's sessions live when this store shares them between nodes; `None`
    /// (the default): the server keeps them in its own memory.
    fn session_store(&self) -> Option<Arc<dyn sessions::SessionStore>> {
        None
    }
    /// Whether writes are taken now (for readiness). Cheap: it reads flags.
    fn write_state(&self) -> WriteState {
        WriteState::Accepting
    }
    /// Flushes and closes; later calls fail with `Unavailable`.
    async fn close(&self) -> StoreResult<()>;
}

/// Queues: their definitions, depths and pauses. Part of [`Store`].
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Creates or updates a queue; creates its dead-letter queue when missing.
    async fn queue_put(&self, params: QueuePutParams) -> StoreResult<QueuePut>;
    /// One queue with its depth.
    async fn queue_get(&self, name: &str, now_ms: Millis) -> StoreResult<QueueInfo>;
    /// One queue's configuration only: cheap, for the paths every message takes.
    async fn queue_config(&self, name: &str) -> StoreResult<Arc<QueueConfig>>;
    /// All queues with their depth, by name.
    async fn queue_list(&self, now_ms: Millis) -> StoreResult<Vec<QueueInfo>>;
    /// The body bytes of every queue that stores any, by name (tenants' byte quotas). It reads
    /// every stored message's size (not its body), so it is for a periodic count, not a hot path.
    async fn queue_bytes(&self, now_ms: Millis) -> StoreResult<Vec<QueueBytes>>;
    /// True when some queue names `name` as its dead-letter queue (whatever `name` is called).
    /// Access control asks on every producer or consumer request, so backends with a cheaper
    /// way than listing every queue should say it.
    async fn queue_is_dead_letter_queue(&self, name: &str) -> StoreResult<bool> {
        Ok(self
            .queue_list(0)
            .await?
            .iter()
            .any(|info| info.config.dead_letter_queue.as_deref() == Some(name)))
    }
    /// Deletes a queue and its messages. Refused with `Conflict` while another queue uses it as
    /// its dead-letter queue.
    async fn queue_delete(&self, name: &str) -> StoreResult<u64>;
    /// Pauses or resumes deliveries of a queue, durably.
    async fn queue_pause(&self, name: &str, paused: bool) -> StoreResult<()>;
    /// Pauses or resumes the server's push delivery of a queue, durably; reported as
    /// [`QueueInfo::is_push_paused`]. Consumers still receive its messages (unlike
    /// [`QueueStore::queue_pause`]). Kept with the queue: a new definition keeps it, deleting the
    /// queue ends it. On a shared store it moves [`Store::definitions_changed`] on every node,
    /// so each node's push workers stop or start.
    async fn queue_push_pause(&self, name: &str, paused: bool) -> StoreResult<()>;
    /// Removes the messages of a queue that `scope` names, from a snapshot taken at the call
    /// (later enqueues stay); returns how many went.
    async fn queue_purge(&self, name: &str, scope: PurgeScope, now_ms: Millis) -> StoreResult<u64>;
}

/// A message's life: enqueue, claim under a lease, ack, nack, extend, give back, cancel. Part of [`Store`].
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Stores messages durably; one result per message, in order. A backend whose writes fall
    /// behind may refuse with [`StoreError::Overloaded`]; then none of the messages is stored, so
    /// the caller may retry them all.
    async fn message_enqueue(&self, params: EnqueueParams) -> StoreResult<Vec<Enqueued>>;
    /// Enqueues several batches, to one queue or several, in one commit: after a crash every
    /// message of every batch is stored, or none is (a topic's copies). Each batch is answered
    /// as [`MessageStore::message_enqueue`] would answer it alone; a refusal of any (a queue missing or
    /// full) stores nothing.
    async fn message_enqueue_together(
        &self,
        batches: Vec<EnqueueParams>,
    ) -> StoreResult<Vec<Vec<Enqueued>>>;
    /// Leases up to `max` ready messages: each gets a deadline, a fresh receipt and one more
    /// attempt. Concurrent claims, from this process or (on a shared store) from other nodes,
    /// never lease one message twice at once, and a receipt stays valid only while its lease is
    /// the message's current one.
    ///
    /// Whether a lease outlives a restart of the server is the backend's choice, and callers
    /// must not count on either: the SQLite store keeps leases in memory only (after a restart
    /// every leased message is visible again at once), a shared store may keep them until their
    /// deadline. Either way a message leased when the server stopped is delivered again, at the
    /// latest once its lease would have ended. The attempt a claim counts may reach the disk
    /// after the answer; [`MessageStore::message_claim_recorded`] waits for it.
    async fn message_claim(&self, params: ClaimParams) -> StoreResult<Claim>;
    /// [`MessageStore::message_claim`] that returns only once the claimed messages' attempt counts
    /// are durable, so a crash during the work that follows counts as a failed attempt. For
    /// work the server itself does with a message (push delivery, its transform): a message
    /// that crashes the process reaches its dead-letter queue after `max_attempts` restarts
    /// instead of crashing every restart. A store that records attempts at once anyway can
    /// keep this default.
    async fn message_claim_recorded(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.message_claim(params).await
    }
    /// Acks leases; one result per receipt. Successful acks are durable when this returns.
    async fn message_ack(&self, params: AckParams) -> StoreResult<Vec<Result<(), LeaseError>>>;
    /// Acks one lease (`params` holds one receipt) and enqueues the next steps `then` in the
    /// same commit: both happen or neither, so a crash in between can neither lose a next step
    /// nor let it run twice. A stale receipt enqueues nothing (`Ok(Err(..))`); a refusal of a
    /// next step (its queue missing or full) leaves the lease as it was. The answer holds each
    /// batch's results, in order, durable when this returns.
    async fn message_ack_then(
        &self,
        params: AckParams,
        then: Vec<EnqueueParams>,
    ) -> StoreResult<Result<Vec<Vec<Enqueued>>, LeaseError>>;
    /// Records a failed attempt durably.
    async fn message_nack(&self, params: NackParams) -> StoreResult<NackOutcome>;
    /// Pushes a lease's deadline out; returns the new deadline.
    async fn message_extend(&self, params: ExtendParams) -> StoreResult<Millis>;
    /// Ends a lease early: the message is ready again at once, not counted as a failure, and
    /// waiting receivers are woken.
    async fn message_give_back(&self, params: GiveBackParams) -> StoreResult<()>;
    /// Cancels a message that is not being processed; `reason` (already cut to
    /// [`crate::queue::limits::ERROR_BYTES_MAX`]) is kept as its record's `last_error`.
    async fn message_cancel(
        &self,
        params: MessageGetParams,
        reason: Option<String>,
    ) -> StoreResult<CancelOutcome>;
}

/// Reading messages without changing them: where one is, a queue's pages, bodies, push logs. Part of [`Store`].
#[async_trait]
pub trait LookupStore: Send + Sync {
    /// Where a message is now; `None` when unknown (or acked long ago).
    async fn message_get(&self, params: MessageGetParams) -> StoreResult<Option<MessageStatus>>;
    /// Pages through one state of a queue in dispatch order, from a cursor, in time bounded by
    /// the page rather than the queue (for the dashboard). The acked set holds the messages
    /// acked while their queue had `keep_acked_ms`, until their keep ends (exactly: a read
    /// after `kept_until_ms` no longer finds it, whenever the upkeep removes it).
    async fn message_browse(&self, query: BrowseQuery) -> StoreResult<BrowsePage>;
    /// A message found as [`LookupStore::message_get`] finds it, with its body and headers.
    async fn message_body(&self, params: MessageGetParams) -> StoreResult<Option<MessageBody>>;
    /// As [`LookupStore::message_body`], with at most the first `max_bytes` of the body and no
    /// headers, read without the rest of the body: a page of previews of big bodies must not
    /// read them whole (issue 30, finding 12). The default reads the whole body and cuts it.
    async fn message_body_prefix(
        &self,
        params: MessageGetParams,
        max_bytes: usize,
    ) -> StoreResult<Option<MessageBody>> {
        let mut found = self.message_body(params).await?;
        if let Some(payload) = found.as_mut().and_then(|found| found.payload.as_mut()) {
            payload.body_bytes.truncate(max_bytes);
            payload.headers.clear();
        }
        Ok(found)
    }
    /// A message found as [`LookupStore::message_get`] finds it, with its push delivery log (the
    /// attempts recorded with acks and nacks, oldest first; kept with the message's record).
    /// A backend without a log answers with none.
    async fn message_deliveries(
        &self,
        params: MessageGetParams,
    ) -> StoreResult<Option<(MessageStatus, Vec<DeliveryAttempt>)>> {
        Ok(self
            .message_get(params)
            .await?
            .map(|status| (status, Vec::new())))
    }
}

/// A dead-letter queue's letters: list, read, replay, delete. Part of [`Store`].
#[async_trait]
pub trait DeadLetterStore: Send + Sync {
    /// Lists dead letters of a queue, newest first.
    async fn dead_letter_list(&self, query: DeadLetterQuery) -> StoreResult<DeadLetters>;
    /// One dead letter of a queue with its payload (also after it was replayed or deleted,
    /// while its record is kept).
    async fn dead_letter_get(&self, queue: &str, id: Uuid) -> StoreResult<Option<DeadLetter>>;
    /// Replays dead letters into their source queue (or a target) as new messages, with
    /// attempts reset; records the new id on each entry.
    async fn dead_letter_replay(&self, params: ReplayParams) -> StoreResult<Replay>;
    /// Deletes dead letters of a queue; returns how many went.
    async fn dead_letter_delete(
        &self,
        queue: &str,
        selection: DeadLetterSelection,
        now_ms: Millis,
    ) -> StoreResult<u64>;
}

/// Webhook endpoint definitions, opaque JSON to the store. Part of [`Store`].
#[async_trait]
pub trait WebhookStore: Send + Sync {
    /// Stores a webhook endpoint definition (opaque JSON to the store) under `name`.
    async fn webhook_put(&self, name: &str, spec: String, now_ms: Millis) -> StoreResult<()>;
    /// Deletes a webhook endpoint definition; false when there was none.
    async fn webhook_delete(&self, name: &str) -> StoreResult<bool>;
    /// Every webhook endpoint definition, by name.
    async fn webhook_list(&self) -> StoreResult<Vec<(String, String)>>;
}

/// Definitions of other kinds (topics, alerts) and schedules, opaque JSON to the store. Part of [`Store`].
#[async_trait]
pub trait DefinitionStore: Send + Sync {
    /// Stores a definition of `kind` (opaque JSON to the store) under `name`, replacing one of
    /// the same kind and name. On a shared store every node's [`Store::definitions_changed`]
    /// moves.
    async fn definition_put(
        &self,
        kind: DefinitionKind,
        name: &str,
        spec: String,
        now_ms: Millis,
    ) -> StoreResult<()>;
    /// Deletes a definition; false when there was none.
    async fn definition_delete(&self, kind: DefinitionKind, name: &str) -> StoreResult<bool>;
    /// Every definition of `kind` as `(name, spec)`, by name.
    async fn definition_list(&self, kind: DefinitionKind) -> StoreResult<Vec<(String, String)>>;
    /// Stores `spec` under `name` only while the stored spec is still `expected` (`None`: only
    /// while there is none): of several nodes that read the same row and swap it, one wins and
    /// the others change nothing. Not announced to other nodes (it is progress, not a
    /// definition).
    async fn definition_swap(
        &self,
        kind: DefinitionKind,
        name: &str,
        expected: Option<String>,
        spec: String,
        now_ms: Millis,
    ) -> StoreResult<()>;
    /// Stores a schedule's definition (opaque JSON to the store) under `name`. With `state`
    /// the schedule's progress becomes it; without, an existing schedule keeps its own and a
    /// new one starts at [`ScheduleState::starting`]`(now_ms)`.
    async fn schedule_put(
        &self,
        name: &str,
        spec: String,
        state: Option<ScheduleState>,
        now_ms: Millis,
    ) -> StoreResult<()>;
    /// Deletes a schedule; false when there was none.
    async fn schedule_delete(&self, name: &str) -> StoreResult<bool>;
    /// Every schedule, by name.
    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRow>>;
    /// Records a pass over a schedule: its progress becomes `state`, but only while its last
    /// run done is still `from_run_ms` (another node's pass, or a redefinition, that moved it
    /// first wins; this one then changes nothing).
    async fn schedule_advance(
        &self,
        name: &str,
        from_run_ms: Millis,
        state: ScheduleState,
    ) -> StoreResult<()>;
}

/// Every part of [`Store`], for callers: `use sluice_core::store::prelude::*`.
pub mod prelude {
    pub use super::{
        DeadLetterStore, DefinitionStore, LookupStore, MessageStore, QueueStore, Store,
        WebhookStore,
    };
}
