//! [`Embedded`]: the queue core and the SQLite store inside the process, no server.
//!
//! The same store the server uses, so delivery rules (leases, retries, dead letters, per-key
//! order, idempotency) are the server's. What the server adds on top of the store is not here:
//! JSON Schema checks, webhooks and push delivery.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use sluice_core::message::{BodyKind, Receipt};
use sluice_core::queue::QueueConfig;
use sluice_core::store::{
    AckParams, CancelOutcome as StoreCancel, ExtendParams, GiveBackParams, MessageGetParams,
    MessageRef as StoreRef, NackParams,
};
use sluice_core::{Clock, ManualClock, Millis, Store, StoreError, SystemClock};
use sluice_ops::wait::{self, Wait};
use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
use tokio::time::Instant;

use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, NextStep, Outgoing, QueueOptions, QueueStats, system_time,
};
use crate::{Error, ErrorCode, Result};

/// How often leases, retries and retention are looked after in the background.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(200);

/// A store inside the process.
pub struct Embedded {
    store: Arc<SharedSqliteStore>,
    /// The operations every server door goes through: an enqueue here gets the queue's rules
    /// (limits, schema, content dedup, its default delay) as over HTTP.
    ops: sluice_ops::Ops,
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
        let store = Arc::new(store);
        let maintenance = tokio::spawn({
            let store = store.clone();
            let clock = clock.clone();
            async move {
                let mut interval = tokio::time::interval(MAINTENANCE_INTERVAL);
                loop {
                    interval.tick().await;
                    if store.maintain(clock.now_ms()).await.is_err() {
                        return;
                    }
                }
            }
        });
        let ops = sluice_ops::Ops::new(
            store.clone(),
            clock.clone(),
            Arc::new(tokio_util::sync::CancellationToken::new()),
        );
        Ok(Embedded {
            store,
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
        let _ = self.store.maintain(self.clock.now_ms()).await;
        self.store.notifier().wake_all();
    }

    /// Now, by the store's clock.
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.clock.now_ms().max(0) as u64)
    }

    /// The store underneath, for what the [`Backend`] trait does not cover.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
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
        self.store.close().await?;
        Ok(())
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.maintenance.abort();
    }
}

fn parse_receipt(receipt: &str) -> Result<Receipt> {
    Receipt::parse(receipt).ok_or_else(|| Error::Invalid {
        code: ErrorCode::MalformedReceipt.into(),
        message: format!("{receipt:?} is not a receipt"),
    })
}

fn store_ref(message: MessageRef) -> StoreRef {
    match message {
        MessageRef::Id(id) => StoreRef::Id(id),
        MessageRef::IdempotencyId(key) => StoreRef::IdempotencyKey(key),
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
        match self.store.queue_get(queue, self.clock.now_ms()).await {
            Ok(_) => Ok(()),
            Err(StoreError::QueueNotFound(_)) => {
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

    async fn lease(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        let policy = Wait::embedded(Instant::now() + wait, self.manual.is_some());
        let messages = wait::claim(
            self.store.as_ref(),
            self.clock.as_ref(),
            &policy,
            queue,
            max.clamp(1, 100),
            Some((lease.as_millis() as Millis).max(1)),
        )
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
        let receipt = parse_receipt(receipt)?;
        let results = self
            .store
            .message_ack(AckParams {
                queue: queue.to_owned(),
                receipts: vec![receipt],
                result: None,
                delivery: None,
                now_ms: self.clock.now_ms(),
            })
            .await?;
        match results.into_iter().next() {
            Some(Ok(())) => Ok(()),
            Some(Err(error)) => Err(Error::StaleLease(error.to_string())),
            None => Err(Error::Unavailable("the store returned no result".into())),
        }
    }

    async fn ack_then(&self, queue: &str, receipt: &str, then: Vec<NextStep>) -> Result<()> {
        // Through ops, so each next step gets its queue's rules as an enqueue does.
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
        let receipt = parse_receipt(receipt)?;
        let outcome = self
            .store
            .message_nack(NackParams {
                queue: queue.to_owned(),
                receipt,
                error: Some(sluice_ops::error_text(nack.error)),
                delay_ms: nack.delay.map(|d| d.as_millis() as Millis),
                permanent: nack.permanent,
                delivery: None,
                now_ms: self.clock.now_ms(),
            })
            .await?;
        Ok(match outcome {
            sluice_core::dispatch::NackOutcome::Retry { .. } => NackOutcome::Retried,
            sluice_core::dispatch::NackOutcome::DeadLettered { .. } => NackOutcome::DeadLettered,
        })
    }

    async fn release(&self, queue: &str, receipt: &str) -> Result<()> {
        let receipt = parse_receipt(receipt)?;
        self.store
            .message_give_back(GiveBackParams {
                queue: queue.to_owned(),
                receipt,
                now_ms: self.clock.now_ms(),
            })
            .await?;
        Ok(())
    }

    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()> {
        let receipt = parse_receipt(receipt)?;
        self.store
            .message_extend(ExtendParams {
                queue: queue.to_owned(),
                receipt,
                timeout_ms: lease.as_millis() as Millis,
                now_ms: self.clock.now_ms(),
            })
            .await?;
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let info = self.store.queue_get(queue, self.clock.now_ms()).await?;
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
        self.store.queue_pause(queue, paused).await?;
        Ok(())
    }

    async fn cancel(&self, queue: &str, message: MessageRef) -> Result<CancelOutcome> {
        let outcome = self
            .store
            .message_cancel(
                MessageGetParams {
                    queue: queue.to_owned(),
                    by: store_ref(message),
                    now_ms: self.clock.now_ms(),
                },
                None,
            )
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
        let status = self
            .store
            .message_get(MessageGetParams {
                queue: queue.to_owned(),
                by: store_ref(message),
                now_ms: self.clock.now_ms(),
            })
            .await?;
        Ok(status.map(|status| MessageInfo {
            message_id: status.message_id,
            state: status.state.as_str().to_owned(),
            attempts: status.attempts,
            last_error: status.last_error,
        }))
    }

    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>> {
        let page = self
            .store
            .dead_letter_list(sluice_core::store::DeadLetterQuery {
                queue: queue.to_owned(),
                filter: sluice_core::dispatch::DeadLetterFilter {
                    source_queue: queue.to_owned(),
                    error_contains: None,
                    since_ms: None,
                    until_ms: None,
                },
                before: None,
                limit: max.clamp(1, 1000),
            })
            .await?;
        let mut letters = Vec::with_capacity(page.entries.len());
        // The list is newest first and carries no bodies: each entry is read in full.
        for entry in page.entries.into_iter().rev() {
            let Some(full) = self
                .store
                .dead_letter_get(queue, entry.status.message_id)
                .await?
            else {
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
