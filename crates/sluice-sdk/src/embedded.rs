//! [`Embedded`]: the queue core and the SQLite store inside the process, no server.
//!
//! The same store and the same operations layer (`sluice-ops`) the server uses, so every
//! rule of a queue is the server's: limits, JSON Schema, content dedup, default delays,
//! leases, retries, dead letters, per-key order, idempotency. This backend holds no handle to
//! the store: every call is an operation. What the server adds beside its queues is not here:
//! webhooks, topics and push delivery.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use sluice_core::message::BodyKind;
use sluice_core::queue::QueueConfig;
use sluice_core::store::CancelOutcome as StoreCancel;
use sluice_core::{Clock, ManualClock, Millis, SystemClock};
use sluice_ops::{Ops, OpsError};
use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
use sluice_wire::ErrorCode as WireCode;

use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, NextStep, Outgoing, QueueOptions, QueueStats, WAIT_MAX, millis, system_time,
};
use crate::{Error, Result};

/// How often leases, retries and retention are looked after in the background.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(200);

/// A store inside the process.
pub struct Embedded {
    /// The operations every server door goes through, and the only way to the store.
    ops: Ops,
    clock: Arc<dyn Clock>,
    manual: Option<ManualClock>,
    maintenance: tokio::task::JoinHandle<()>,
    /// A temporary store's directory, removed on drop.
    _dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded")
            .field("test_clock", &self.manual.is_some())
            .finish_non_exhaustive()
    }
}

/// Options of [`Embedded`].
#[derive(Debug, Clone, Default)]
pub struct EmbeddedBuilder {
    path: Option<PathBuf>,
    test_clock: Option<SystemTime>,
}

impl EmbeddedBuilder {
    /// Keep the data in this directory (created if missing), durably: every enqueue and ack
    /// is fsynced before it returns. Without a path the store is temporary.
    pub fn path(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_owned());
        self
    }

    /// Run on a clock that moves only by [`Embedded::advance`], starting at `start`: delays,
    /// backoff, lease expiry and retention become deterministic and instant in tests.
    pub fn test_clock(mut self, start: SystemTime) -> Self {
        self.test_clock = Some(start);
        self
    }

    /// Opens the store. Must be called inside a tokio runtime (a background task looks after
    /// leases and retries).
    pub async fn open(self) -> Result<Embedded> {
        let (clock, manual): (Arc<dyn Clock>, Option<ManualClock>) = match self.test_clock {
            Some(start) => {
                let start_ms = start
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as Millis);
                let manual = ManualClock::new(start_ms);
                (Arc::new(manual.clone()), Some(manual))
            }
            None => (Arc::new(SystemClock), None),
        };
        let (options, dir) = match self.path {
            Some(path) => (SqliteOptions::new(path), None),
            None => {
                let dir = temporary_dir()?;
                let mut options = SqliteOptions::new(dir.path());
                // Nobody will read this store after the process: the OS page cache is enough.
                options.durability = Durability::Os;
                // A throwaway store in memory keeps no disk reserve.
                options.disk_reserve_bytes = 0;
                (options, Some(dir))
            }
        };
        let now_ms = clock.now_ms();
        let store = tokio::task::spawn_blocking(move || SharedSqliteStore::open(options, now_ms))
            .await
            .map_err(|e| Error::Unavailable(e.to_string()))??;
        let mut ops = Ops::new(
            Arc::new(store),
            clock.clone(),
            Arc::new(tokio_util::sync::CancellationToken::new()),
        );
        if manual.is_some() {
            ops = ops.on_manual_clock();
        }
        let maintenance = tokio::spawn({
            let ops = ops.clone();
            async move {
                let mut interval = tokio::time::interval(MAINTENANCE_INTERVAL);
                loop {
                    interval.tick().await;
                    if ops.maintain().await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Embedded {
            ops,
            clock,
            manual,
            maintenance,
            _dir: dir,
        })
    }
}

/// A temporary directory in memory (`/dev/shm`) where there is one, else in the system's
/// temporary directory.
fn temporary_dir() -> Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    let builder = {
        let mut builder = tempfile::Builder::new();
        builder.prefix("sluice-embedded-");
        builder
    };
    if shm.is_dir()
        && let Ok(dir) = builder.tempdir_in(shm)
    {
        return Ok(dir);
    }
    builder
        .tempdir()
        .map_err(|e| Error::Unavailable(format!("cannot create a temporary directory: {e}")))
}

impl Embedded {
    /// Options: a path for a durable store, a test clock.
    pub fn builder() -> EmbeddedBuilder {
        EmbeddedBuilder::default()
    }

    /// A temporary store (in memory where `/dev/shm` exists), removed when dropped.
    pub async fn temporary() -> Result<Self> {
        Self::builder().open().await
    }

    /// A durable store in `path`.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::builder().path(path).open().await
    }

    /// Moves the test clock forward and lets everything that was waiting for that time happen
    /// (delays end, leases run out, retries come back). Panics without a test clock.
    pub async fn advance(&self, by: Duration) {
        let manual = self
            .manual
            .as_ref()
            .expect("Embedded::advance needs a store opened with a test clock");
        manual.advance(by.as_millis() as Millis);
        let _ = self.ops.maintain().await;
        self.ops.wake_all();
    }

    /// Now, by the store's clock.
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.clock.now_ms().max(0) as u64)
    }

    /// Creates or updates a queue with a full configuration.
    pub async fn put_queue(&self, name: &str, config: QueueConfig) -> Result<()> {
        // The checks of every door's queues (its name, its dead-letter queue).
        self.ops.queue_put_config(name, config).await?;
        Ok(())
    }

    /// Flushes and closes the store; later calls fail with [`Error::Unavailable`].
    pub async fn close(&self) -> Result<()> {
        self.maintenance.abort();
        self.ops.close().await?;
        Ok(())
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.maintenance.abort();
    }
}

/// `None` for a message that is not there, the error otherwise.
fn found<T>(result: std::result::Result<T, OpsError>) -> Result<Option<T>> {
    match result {
        Ok(found) => Ok(Some(found)),
        Err(error) if error.code == WireCode::MessageNotFound => Ok(None),
        Err(error) => Err(error.into()),
    }
}

#[async_trait]
impl Backend for Embedded {
    fn now(&self) -> SystemTime {
        system_time(self.clock.now_ms())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn ensure_queue_with(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        match self.ops.queue_get(queue).await {
            Ok(_) => Ok(()),
            Err(error) if error.code == WireCode::QueueNotFound => {
                let mut config = QueueConfig::defaults_for(queue);
                if let Some(max_attempts) = options.max_attempts {
                    config.max_attempts = max_attempts;
                }
                if options.per_key {
                    config.ordering = sluice_core::queue::Ordering::PerKey;
                }
                // `dedup`: every sluice queue deduplicates by idempotency id.
                self.put_queue(queue, config).await
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>> {
        let mut enqueue = self.ops.enqueue_to(queue.to_owned()).await?;
        for (position, message) in messages.into_iter().enumerate() {
            enqueue.add(message_request(message), &format!("messages[{position}]."))?;
        }
        let results = self.ops.enqueue(enqueue).await?;
        Ok(results
            .into_iter()
            .map(|result| Enqueued {
                message_id: result.message_id,
                created: result.created,
                position: result.position.unwrap_or(0),
            })
            .collect())
    }

    async fn receive(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        let messages = self
            .ops
            .receive(sluice_ops::ReceiveRequest {
                lane_runs: false,
                queue: queue.to_owned(),
                max: Some(max.clamp(1, sluice_core::queue::limits::RECEIVE_MAX) as i64),
                wait_ms: Some(millis(wait.min(WAIT_MAX))),
                visibility_timeout_ms: Some(millis(lease)),
            })
            .await?;
        Ok(messages
            .into_iter()
            .map(|message| Delivery {
                message_id: message.message_id,
                receipt: message.receipt.to_string(),
                body: message.payload.body_bytes.clone(),
                id: message.idempotency_key,
                key: message.key,
                attempt: message.attempts,
                enqueued_at: system_time(message.enqueued_at_ms),
                last_error: message.last_error,
            })
            .collect())
    }

    async fn ack(&self, queue: &str, receipt: &str) -> Result<()> {
        self.ack_then(queue, receipt, Vec::new()).await
    }

    async fn ack_then(&self, queue: &str, receipt: &str, then: Vec<NextStep>) -> Result<()> {
        // Each next step gets its queue's rules as an enqueue does.
        let then = then
            .into_iter()
            .map(|step| sluice_ops::NextStep {
                queue: step.queue,
                message: message_request(step.message),
            })
            .collect();
        self.ops
            .ack(sluice_ops::AckRequest {
                queue: queue.to_owned(),
                receipts: vec![receipt.to_owned()],
                result: None,
                then,
            })
            .await?;
        Ok(())
    }

    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome> {
        let out = self
            .ops
            .nack(sluice_ops::NackRequest {
                queue: queue.to_owned(),
                receipt: receipt.to_owned(),
                error: Some(nack.error),
                delay_ms: nack.delay.map(millis),
                permanent: nack.permanent,
            })
            .await?;
        Ok(match out {
            sluice_ops::Nacked::DeadLettered { .. } => NackOutcome::DeadLettered,
            sluice_ops::Nacked::Retry { .. } => NackOutcome::Retried,
        })
    }

    async fn release(&self, queue: &str, receipt: &str) -> Result<()> {
        self.ops.extend(queue.to_owned(), receipt, 0).await?;
        Ok(())
    }

    async fn release_unstarted(&self, queue: &str, receipt: &str) -> Result<()> {
        self.ops.release(queue.to_owned(), receipt, true).await?;
        Ok(())
    }

    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()> {
        // As by every door: 0 releases the lease.
        self.ops
            .extend(queue.to_owned(), receipt, millis(lease))
            .await?;
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let info = self.ops.queue_get(queue).await?;
        Ok(QueueStats {
            ready: info.depth.ready,
            delayed: info.depth.delayed,
            in_flight: Some(info.depth.in_flight),
            processed: info.depth.counters.acked,
            dead_lettered: info.dead_letter_depth.unwrap_or(0),
            paused: info.depth.paused,
        })
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        self.ops.queue_set_paused(queue, paused).await?;
        Ok(())
    }

    async fn cancel(&self, queue: &str, message: MessageRef) -> Result<CancelOutcome> {
        let (message_id, id) = match message {
            MessageRef::Id(message_id) => (Some(message_id.to_string()), None),
            MessageRef::IdempotencyId(id) => (None, Some(id)),
        };
        let outcome = self
            .ops
            .cancel(sluice_ops::CancelRequest {
                queue: queue.to_owned(),
                message_id,
                id,
                reason: None,
            })
            .await?;
        Ok(match outcome {
            StoreCancel::Cancelled { .. } => CancelOutcome::Cancelled,
            StoreCancel::NotFound => CancelOutcome::NotFound,
            StoreCancel::AlreadyProcessing { .. } => CancelOutcome::AlreadyProcessing,
            StoreCancel::AlreadyCompleted { state, .. } => {
                CancelOutcome::AlreadyCompleted(state.as_str().to_owned())
            }
        })
    }

    async fn get(&self, queue: &str, message: MessageRef) -> Result<Option<MessageInfo>> {
        let status = match message {
            MessageRef::Id(message_id) => {
                self.ops
                    .message_by_id(queue.to_owned(), &message_id.to_string())
                    .await
            }
            MessageRef::IdempotencyId(id) => {
                self.ops.message_by_key(queue.to_owned(), Some(id)).await
            }
        };
        Ok(found(status)?.map(|status| MessageInfo {
            message_id: status.message_id,
            state: status.state.as_str().to_owned(),
            attempts: status.attempts,
            last_error: status.last_error,
        }))
    }

    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>> {
        let page = self
            .ops
            .dead_letter_list(sluice_ops::DeadLetterListRequest {
                queue: queue.to_owned(),
                limit: Some(max.clamp(1, 1000)),
                cursor: None,
                matching: sluice_ops::DeadLetterMatch::default(),
            })
            .await?;
        let mut letters = Vec::with_capacity(page.entries.len());
        // The list is newest first and carries no bodies: each entry is read in full.
        for entry in page.entries.into_iter().rev() {
            let id = entry.status.message_id.to_string();
            let Some(full) = found(self.ops.dead_letter_get(queue, &id).await)? else {
                continue;
            };
            letters.push(dead_letter(full));
        }
        Ok(letters)
    }
}

fn dead_letter(entry: sluice_core::store::DeadLetter) -> DeadLetter {
    let status = entry.status;
    let info = status.dead_letter.as_ref();
    DeadLetter {
        message_id: status.message_id,
        body: entry.payload.map(|p| p.body_bytes).unwrap_or_default(),
        id: status.idempotency_key.clone(),
        key: status.key.clone(),
        error: info
            .and_then(|i| i.last_error.clone())
            .or(status.last_error.clone()),
        attempts: info.map_or(status.attempts, |i| i.attempts),
        enqueued_at: system_time(status.enqueued_at_ms),
        failed_at: system_time(info.map_or(status.enqueued_at_ms, |i| i.last_seen_at_ms)),
    }
}

/// A message as ops takes it from any door: without a delay, the queue's own `delay_ms`
/// applies.
fn message_request(message: Outgoing) -> sluice_ops::MessageRequest {
    sluice_ops::MessageRequest {
        body: (message.body, BodyKind::Json),
        id: message.id,
        key: message.key,
        headers: None,
        priority: Some(message.priority),
        delay_ms: message
            .delay
            .map(|delay| i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
        not_before: None,
    }
}
