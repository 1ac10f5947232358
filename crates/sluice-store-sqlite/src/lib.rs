//! sluice-store-sqlite: the embedded default store.
//!
//! SQLite is the durable record, written by one writer thread with group commit
//! (`writer.rs`) whose groups a second thread makes durable before anyone is answered (`sync.rs`).
//! Dispatch never reads SQLite: the in-memory [`Index`] holds the ready order, lanes, delays and
//! leases, and is rebuilt from the `messages` table at start (`load.rs`). Bodies of recent
//! messages are kept in memory up to a budget; older ones are read back by primary key from a
//! small pool of read-only connections.
//!
//! Leases are not written to disk. After a restart every message that was in flight is visible
//! again at once; its delivery still counts as an attempt unless the crash came within a second
//! of it (`claims.rs`).

mod body_kind;
mod checkpoint;
mod claims;
mod dead_letters;
mod delivery_log;
mod dir_sync;
mod files;
mod health;
mod ids;
mod inbox;
mod lifecycle;
mod load;
mod metrics;
mod publish;
mod schema;
mod space;
mod sync;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;

use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use sluice_core::dispatch::{Index, LeaseError, NackOutcome, Seq};
use sluice_core::message::{DeadLetterInfo, MessageState, MessageStatus, Payload};
use sluice_core::notify::Notifier;
use sluice_core::queue::QueueConfig;
use sluice_core::store::*;
use sluice_core::{Millis, Store};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::writer::{WriteOp, Writer, config_to_json};

/// When a write counts as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// After the WAL is fsynced: survives a machine crash.
    #[default]
    Fsync,
    /// After the write reached the OS: survives a crash of the process, not of the machine.
    Os,
}

/// How to open the store.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Directory holding `sluice.db`; created if missing.
    pub data_dir: PathBuf,
    /// Fsync or not.
    pub durability: Durability,
    /// Bytes of message bodies kept in memory for fast delivery (default 64 MiB).
    pub payload_cache_bytes: usize,
    /// How long acked messages stay answerable by id (default 1 h).
    pub acked_retention_ms: Millis,
    /// Past this size the WAL is checkpointed whole and truncated (default 64 MiB).
    pub wal_max_bytes: u64,
    /// Space kept back in the data directory for acks when the disk fills (default 64 MiB; 0:
    /// none).
    pub disk_reserve_bytes: u64,
    /// Bytes of new messages that may wait for the writer; an enqueue beyond it is refused with
    /// [`StoreError::Overloaded`] (default 128 MiB; see `inbox.rs`).
    pub writer_queue_bytes: u64,
}

impl SqliteOptions {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            durability: Durability::Fsync,
            payload_cache_bytes: 64 << 20,
            acked_retention_ms: 60 * 60 * 1000,
            wal_max_bytes: 64 << 20,
            disk_reserve_bytes: 64 << 20,
            writer_queue_bytes: 128 << 20,
        }
    }
}

/// The SQLite store. Cheap to share behind an `Arc`.
pub struct SqliteStore {
    index: Arc<Mutex<Index>>,
    writer: Mutex<Option<Sender<WriteOp>>>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    checkpoint: Arc<checkpoint::CheckpointSignal>,
    checkpoint_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Mutex<Vec<Connection>>,
    db_path: PathBuf,
    notifier: Arc<Notifier>,
    options: SqliteOptions,
    closed: AtomicBool,
    /// Group sizes and sync times, for metrics.
    write_stats: Arc<metrics::WriteStats>,
    /// Whether writes are taken (disk full, stopped).
    health: Arc<health::WriteHealth>,
    /// The bound on new messages waiting for the writer, and the inbox's gauges.
    inbox: Arc<inbox::Inbox>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("db_path", &self.db_path)
            .finish_non_exhaustive()
    }
}

/// Sorts SQLite errors by meaning: a full or failing disk makes the store unavailable.
fn store_error(error: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::*;
    match error.sqlite_error_code() {
        Some(DiskFull) => health::disk_full(),
        Some(SystemIoFailure | CannotOpen | ReadOnly | DatabaseBusy | DatabaseLocked) => {
            StoreError::Unavailable(error.to_string())
        }
        _ => StoreError::Other(Box::new(error)),
    }
}

impl SqliteStore {
    /// Opens (or creates) the store and rebuilds the dispatch index from disk.
    pub fn open(options: SqliteOptions, now_ms: Millis) -> StoreResult<Self> {
        let db_path = files::prepare_data_dir(&options.data_dir).map_err(|e| {
            StoreError::Unavailable(format!(
                "cannot prepare the data directory {}: {e}",
                options.data_dir.display()
            ))
        })?;
        let conn = Connection::open(&db_path).map_err(store_error)?;
        schema::open_writer(&conn, options.durability, options.wal_max_bytes)
            .map_err(store_error)?;
        // The database and WAL now exist (and a new database's journal is gone): their names
        // must be durable before the first answer (dir_sync.rs).
        dir_sync::fsync_dir(&options.data_dir).map_err(|e| {
            StoreError::Unavailable(format!("cannot sync {}: {e}", options.data_dir.display()))
        })?;
        let mut index = Index::new();
        let next_seq = load::load(&conn, &mut index, now_ms).map_err(store_error)?;
        let index = Arc::new(Mutex::new(index));
        let notifier = Arc::new(Notifier::default());
        let (sender, receiver) = std::sync::mpsc::channel();
        let checkpoint = Arc::new(checkpoint::CheckpointSignal::default());
        let publisher = Arc::new(publish::Publisher {
            index: index.clone(),
            notifier: notifier.clone(),
            payload_cache_bytes: options.payload_cache_bytes,
        });
        let health = Arc::new(health::WriteHealth::default());
        let reserve = space::Reserve::new(&options.data_dir, options.disk_reserve_bytes);
        // A start on a full disk serves what is stored and refuses new messages until there is
        // room, instead of failing.
        if !reserve.at_start() {
            tracing::error!(
                "the disk is full: new messages are refused until space is freed; receives and lookups are served"
            );
            health.set_full(true);
        }
        let write_stats = Arc::new(metrics::WriteStats::default());
        let inbox = Arc::new(inbox::Inbox::new(options.writer_queue_bytes));
        let (syncer, syncer_thread) = match options.durability {
            Durability::Fsync => {
                // Bounded: if syncs fall behind, the writer waits instead of piling up groups.
                let (sender, groups) = std::sync::mpsc::sync_channel(64);
                let wal_path = options.data_dir.join(files::WAL_FILE);
                let (publisher, health) = (publisher.clone(), health.clone());
                let stats = write_stats.clone();
                let thread = std::thread::Builder::new()
                    .name("sluice-sqlite-sync".into())
                    .spawn(move || sync::run(wal_path, groups, publisher, health, stats))
                    .map_err(|e| {
                        StoreError::Unavailable(format!("cannot start the sync thread: {e}"))
                    })?;
                (Some(sender), Some(thread))
            }
            Durability::Os => (None, None),
        };
        let writer = Writer {
            conn,
            publisher,
            syncer,
            syncer_thread,
            health: health.clone(),
            reserve,
            wal_limit: checkpoint::WalLimit::new(
                options.data_dir.join(files::WAL_FILE),
                options.wal_max_bytes,
            ),
            held: Vec::new(),
            next_seq,
            payload_cache_bytes: options.payload_cache_bytes,
            checkpoint: checkpoint.clone(),
            claims: Default::default(),
            flush_all_claims: false,
            stats: write_stats.clone(),
            inbox: inbox.clone(),
        };
        let checkpoint_path = db_path.clone();
        let checkpoint_signal = checkpoint.clone();
        let checkpoint_health = health.clone();
        let checkpoint_thread = std::thread::Builder::new()
            .name("sluice-sqlite-checkpoint".into())
            .spawn(move || checkpoint::run(checkpoint_path, checkpoint_signal, checkpoint_health))
            .map_err(|e| {
                StoreError::Unavailable(format!("cannot start the checkpoint thread: {e}"))
            })?;
        let writer_thread = std::thread::Builder::new()
            .name("sluice-sqlite-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|e| StoreError::Unavailable(format!("cannot start the writer thread: {e}")))?;
        Ok(Self {
            index,
            writer: Mutex::new(Some(sender)),
            writer_thread: Mutex::new(Some(writer_thread)),
            checkpoint,
            checkpoint_thread: Mutex::new(Some(checkpoint_thread)),
            readers: Mutex::new(Vec::new()),
            db_path,
            notifier,
            options,
            closed: AtomicBool::new(false),
            write_stats,
            health,
            inbox,
        })
    }

    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// Sends a write to the writer. Never waits and never refuses for room: only new messages
    /// are bounded, by the [`inbox::Charge`] an enqueue takes before it gets here (`inbox.rs`
    /// has the rule); every other write records a change the index already made.
    fn send(&self, op: WriteOp) -> StoreResult<()> {
        let writer = self.writer.lock();
        let sender = writer
            .as_ref()
            .ok_or_else(|| StoreError::Unavailable("the store is closed".into()))?;
        // Counted before it is sent, so the writer never takes it off the count first.
        self.inbox.sent();
        sender.send(op).map_err(|_| {
            self.inbox.taken();
            StoreError::Unavailable("the writer thread has stopped".into())
        })
    }

    /// Returns once every write queued before it is committed.
    /// Sends a push attempt to the writer for the message's delivery log (nothing without one).
    /// Called under the index lock, just before the ack or nack the attempt ended with.
    fn log_delivery(
        &self,
        seq: Seq,
        delivery: Option<sluice_core::message::DeliveryLogEntry>,
    ) -> StoreResult<()> {
        let Some(delivery) = delivery else {
            return Ok(());
        };
        self.send(WriteOp::LogDelivery {
            seq,
            entry: delivery_log::encode(delivery.attempt),
            keep: delivery.keep,
        })
    }

    async fn flush(&self) -> StoreResult<()> {
        let (reply, wait) = oneshot::channel();
        self.send(WriteOp::Flush { reply })?;
        SqliteStore::wait(wait).await
    }

    async fn wait<T>(reply: oneshot::Receiver<StoreResult<T>>) -> StoreResult<T> {
        reply
            .await
            .map_err(|_| StoreError::Unavailable("the writer thread has stopped".into()))?
    }

    /// Runs `f` on a pooled read-only connection, off the async threads.
    async fn read<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> StoreResult<T> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || {
            let conn = match store.readers.lock().pop() {
                Some(conn) => conn,
                None => {
                    let conn = Connection::open_with_flags(
                        &store.db_path,
                        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )
                    .map_err(store_error)?;
                    schema::open_reader(&conn).map_err(store_error)?;
                    conn
                }
            };
            let result = f(&conn).map_err(store_error);
            store.readers.lock().push(conn);
            result
        })
        .await
        .map_err(|e| StoreError::Other(Box::new(e)))?
    }

    fn queue_info(&self, index: &Index, name: &str, now_ms: Millis) -> StoreResult<QueueInfo> {
        let config = index
            .queue_config(name)
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))?;
        let depth = index.depth(name, now_ms).unwrap_or_default();
        let dead_letter_depth = config
            .dead_letter_queue
            .as_deref()
            .map(|dlq| index.queue_len(dlq));
        Ok(QueueInfo {
            name: name.to_owned(),
            config: (*config).clone(),
            depth,
            dead_letter_depth,
        })
    }
}

/// Longest wait of a close for the writes queued before it.
const CLOSE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// Rows deleted per transaction when a queue is deleted.
const PURGE_CHUNK_ROWS: usize = 2_000;
/// Messages retention looks at per maintenance tick, so expiry never holds the index for long.
const EXPIRE_PER_TICK: usize = 5_000;
/// Members a browse of waiting messages looks at per page, so it never holds the index for long.
const BROWSE_SCAN_MAX: usize = 10_000;

/// Seconds a refused producer should wait: the time the queue takes to drain the batch at its
/// recent ack rate, between 1 and 60 (10 when nothing is being acked).
fn retry_after_s(count: u64, acks_per_s: f64) -> u64 {
    if acks_per_s <= 0.0 {
        return 10;
    }
    ((count as f64 / acks_per_s).ceil() as u64).clamp(1, 60)
}

/// A store handle that can hand itself to blocking readers.
#[derive(Debug, Clone)]
pub struct SharedSqliteStore(pub Arc<SqliteStore>);

impl SharedSqliteStore {
    /// Claims; with `record_now` the attempt counts are durable before the claim returns
    /// (otherwise they wait in `claims.rs` for an ack).
    async fn claim(&self, params: ClaimParams, record_now: bool) -> StoreResult<Claim> {
        let store = &self.0;
        let mut recorded = None;
        let (claimed, next_change_at_ms) = {
            let mut index = store.index.lock();
            let config = index
                .queue_config(&params.queue)
                .ok_or_else(|| StoreError::QueueNotFound(params.queue.clone()))?;
            let changes = index.tick_queue(&params.queue, params.now_ms);
            if !changes.is_empty() {
                if let Some(dlq) = &config.dead_letter_queue {
                    store.notifier.wake(dlq);
                }
                store.send(WriteOp::Apply {
                    changes,
                    now_ms: params.now_ms,
                    reply: None,
                })?;
            }
            let lease_ms = params.lease_ms.unwrap_or(config.visibility_timeout_ms);
            let claimed = index.claim(
                &params.queue,
                params.max,
                lease_ms,
                params.now_ms,
                rand::random,
            );
            if !claimed.is_empty() {
                let records = claimed
                    .iter()
                    .map(|c| (c.seq, c.message.attempts, c.message.first_received_at_ms))
                    .collect();
                let reply = record_now.then(|| {
                    let (reply, wait) = oneshot::channel();
                    recorded = Some(wait);
                    reply
                });
                store.send(WriteOp::Claimed { records, reply })?;
            }
            (claimed, index.next_change_at(&params.queue))
        };
        if let Some(wait) = recorded {
            SqliteStore::wait(wait).await?;
        }
        let missing: Vec<Seq> = claimed
            .iter()
            .filter(|c| !c.payload_cached)
            .map(|c| c.seq)
            .collect();
        let mut payloads = if missing.is_empty() {
            Vec::new()
        } else {
            self.0
                .read(move |conn| read_payloads(conn, &missing))
                .await?
        };
        let messages = claimed
            .into_iter()
            .map(|mut c| {
                if !c.payload_cached
                    && let Some(position) = payloads.iter().position(|(seq, _)| *seq == c.seq)
                {
                    c.message.payload = Arc::new(payloads.swap_remove(position).1);
                }
                c.message
            })
            .collect();
        Ok(Claim {
            messages,
            next_change_at_ms,
        })
    }

    /// Opens the store.
    pub fn open(options: SqliteOptions, now_ms: Millis) -> StoreResult<Self> {
        Ok(Self(Arc::new(SqliteStore::open(options, now_ms)?)))
    }
}

#[async_trait]
impl Store for SharedSqliteStore {
    async fn queue_put(&self, params: QueuePutParams) -> StoreResult<QueuePut> {
        let store = &self.0;
        // The index changes and the write is queued under one lock, so concurrent definitions
        // and deletions reach the disk in the order the index saw them (a deletion cannot slip
        // between a definition's write and its index update and leave a queue only in memory).
        // Enqueues to the new definition are queued behind its row.
        let (created, dead_letter_created, wait) = {
            let mut index = store.index.lock();
            let created = index.queue_config(&params.name).is_none();
            let dlq = params
                .config
                .dead_letter_queue
                .clone()
                .filter(|dlq| index.queue_config(dlq).is_none() && dlq != &params.name);
            if dlq.is_none()
                && index
                    .queue_config(&params.name)
                    .is_some_and(|stored| *stored == params.config)
            {
                // Nothing changes (a start applying the same config file): no write, so a start
                // on a full disk does not wait for one.
                return Ok(QueuePut {
                    created: false,
                    dead_letter_created: false,
                });
            }
            let mut queues = vec![(params.name.clone(), params.config.clone())];
            if let Some(dlq) = &dlq {
                queues.push((dlq.clone(), QueueConfig::for_dead_letter_queue(dlq)));
            }
            let rows = queues
                .iter()
                .map(|(name, config)| (name.clone(), config_to_json(config)))
                .collect();
            // Refuses an ordering change while messages are queued; nothing is written then.
            for (name, config) in queues {
                index
                    .queue_put(&name, config)
                    .map_err(StoreError::Conflict)?;
            }
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::QueuePut {
                queues: rows,
                now_ms: params.now_ms,
                reply,
            })?;
            (created, dlq.is_some(), wait)
        };
        SqliteStore::wait(wait).await?;
        Ok(QueuePut {
            created,
            dead_letter_created,
        })
    }

    async fn queue_get(&self, name: &str, now_ms: Millis) -> StoreResult<QueueInfo> {
        let index = self.0.index.lock();
        self.0.queue_info(&index, name, now_ms)
    }

    async fn queue_config(&self, name: &str) -> StoreResult<Arc<QueueConfig>> {
        self.0
            .index
            .lock()
            .queue_config(name)
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))
    }

    async fn queue_is_dead_letter_queue(&self, name: &str) -> StoreResult<bool> {
        Ok(self.0.index.lock().is_dead_letter_queue(name))
    }

    async fn queue_list(&self, now_ms: Millis) -> StoreResult<Vec<QueueInfo>> {
        let index = self.0.index.lock();
        index
            .queue_names()
            .iter()
            .map(|name| self.0.queue_info(&index, name, now_ms))
            .collect()
    }

    async fn queue_delete(&self, name: &str) -> StoreResult<u64> {
        let store = &self.0;
        let wait = {
            let mut index = store.index.lock();
            if index.queue_config(name).is_none() {
                return Err(StoreError::QueueNotFound(name.to_owned()));
            }
            let users: Vec<_> = index
                .queue_names()
                .into_iter()
                .filter(|other| {
                    &**other != name
                        && index
                            .queue_config(other)
                            .and_then(|c| c.dead_letter_queue.clone())
                            .as_deref()
                            == Some(name)
                })
                .collect();
            if !users.is_empty() {
                let users: Vec<&str> = users.iter().map(|u| &**u).collect();
                return Err(StoreError::Conflict(format!(
                    "queue {name:?} is the dead-letter queue of {}; delete those first",
                    users.join(", ")
                )));
            }
            // The rows go by primary key, a chunk per transaction, so a big queue never holds
            // the writer for long; the index already knows which rows are live. The queue row
            // goes with the first chunk: rows of a deleted queue left by a crash are removed at
            // the next start. Sent under the lock, so no later write can come between them.
            let mut seqs = index.queue_remove(name);
            // In table order, each chunk touches few pages (the index hands them out unordered).
            seqs.sort_unstable();
            let mut chunks = seqs.chunks(PURGE_CHUNK_ROWS);
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::QueueDelete {
                name: name.to_owned(),
                seqs: chunks.next().unwrap_or_default().to_vec(),
                reply,
            })?;
            for chunk in chunks {
                store.send(WriteOp::Purge {
                    seqs: chunk.to_vec(),
                })?;
            }
            (wait, seqs.len() as u64)
        };
        SqliteStore::wait(wait.0).await?;
        store.notifier.wake(name);
        Ok(wait.1)
    }

    async fn message_enqueue(&self, params: EnqueueParams) -> StoreResult<Vec<Enqueued>> {
        let store = &self.0;
        if let Some(refused) = store.health.refusal(true) {
            return Err(refused);
        }
        let count = params.messages.len() as u64;
        // New work is refused while too much of it waits for the writer; nothing has changed
        // yet, so the caller can simply try again.
        let charge = store.inbox.charge(&params.messages)?;
        let (queue, dedup_window_ms, reserved) = {
            let mut index = store.index.lock();
            let config = index
                .queue_config(&params.queue)
                .ok_or_else(|| StoreError::QueueNotFound(params.queue.clone()))?;
            // The depth check counts messages on their way to disk too, so concurrent batches
            // cannot overshoot the limit together. All or nothing for a batch.
            if let Some(max_depth) = config.max_depth {
                index.reserve(&params.queue, count).map_err(|depth| {
                    let drain_rate = index.ack_rate(&params.queue, params.now_ms);
                    StoreError::QueueFull {
                        queue: params.queue.clone(),
                        depth,
                        max_depth,
                        refused: count,
                        retry_after_s: retry_after_s(count, drain_rate),
                    }
                })?;
            }
            (
                index.queue_name(&params.queue).expect("config found"),
                config.dedup_window_ms,
                config.max_depth.is_some(),
            )
        };
        let (reply, wait) = oneshot::channel();
        let sent = store.send(WriteOp::Enqueue {
            queue: queue.clone(),
            dedup_window_ms,
            now_ms: params.now_ms,
            messages: params.messages,
            reply,
            charge,
        });
        let result = match sent {
            Ok(()) => SqliteStore::wait(wait).await,
            Err(error) => Err(error),
        };
        if reserved {
            // Published by now (or failed): the index counts what was stored.
            store.index.lock().release(&queue, count);
        }
        result
    }

    async fn message_claim(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, false).await
    }

    async fn message_claim_recorded(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, true).await
    }

    async fn message_ack(&self, mut params: AckParams) -> StoreResult<Vec<Result<(), LeaseError>>> {
        let store = &self.0;
        let mut results = Vec::with_capacity(params.receipts.len());
        let wait = {
            let mut index = store.index.lock();
            if index.queue_config(&params.queue).is_none() {
                return Err(StoreError::QueueNotFound(params.queue));
            }
            let mut seqs = Vec::new();
            let mut memos = Vec::new();
            for receipt in &params.receipts {
                let entry = index
                    .seq_of(&receipt.message_id)
                    .and_then(|seq| index.entry(seq));
                // The acked record keeps the delivery count the lease had.
                let attempts = entry.map(|entry| (entry.attempts, entry.first_received_at_ms));
                let memo = entry.and_then(|entry| {
                    let key = entry.idempotency_key.clone()?;
                    Some((entry.queue.clone(), key, entry.id))
                });
                match index.ack(&params.queue, receipt, params.now_ms) {
                    Ok(seq) => {
                        store.log_delivery(seq, params.delivery.take())?;
                        let (attempts, first_received_at_ms) = attempts.unwrap_or_default();
                        seqs.push((seq, attempts, first_received_at_ms));
                        memos.extend(memo);
                        results.push(Ok(()));
                    }
                    Err(error) => results.push(Err(error)),
                }
            }
            if seqs.is_empty() {
                None
            } else {
                let (reply, wait) = oneshot::channel();
                // Sent under the index lock so the disk sees changes in the order the index made them.
                store.send(WriteOp::Ack {
                    seqs,
                    memos,
                    result: params.result,
                    now_ms: params.now_ms,
                    reply,
                })?;
                Some(wait)
            }
        };
        if let Some(wait) = wait {
            SqliteStore::wait(wait).await?;
            // An ack can unblock the next message of a lane.
            store.notifier.wake(&params.queue);
        }
        Ok(results)
    }

    async fn message_nack(&self, params: NackParams) -> StoreResult<NackOutcome> {
        let store = &self.0;
        let error = params.error.map(|e| Arc::from(truncate(e)));
        let (outcome, wait) = {
            let mut index = store.index.lock();
            if index.queue_config(&params.queue).is_none() {
                return Err(StoreError::QueueNotFound(params.queue));
            }
            let (change, outcome) = index.nack(
                &params.queue,
                &params.receipt,
                error,
                params.delay_ms,
                params.permanent,
                params.now_ms,
            )?;
            // Before the change, so its answer means the attempt is on disk too.
            store.log_delivery(change.seq(), params.delivery)?;
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::Apply {
                changes: vec![change],
                now_ms: params.now_ms,
                reply: Some(reply),
            })?;
            (outcome, wait)
        };
        SqliteStore::wait(wait).await?;
        store.notifier.wake(&params.queue);
        if let NackOutcome::DeadLettered { queue } = &outcome {
            store.notifier.wake(queue);
        }
        Ok(outcome)
    }

    async fn message_extend(&self, params: ExtendParams) -> StoreResult<Millis> {
        let mut index = self.0.index.lock();
        if index.queue_config(&params.queue).is_none() {
            return Err(StoreError::QueueNotFound(params.queue));
        }
        Ok(index.extend(
            &params.queue,
            &params.receipt,
            params.timeout_ms,
            params.now_ms,
        )?)
    }

    async fn message_get(&self, params: MessageGetParams) -> StoreResult<Option<MessageStatus>> {
        let store = &self.0;
        if store.index.lock().queue_config(&params.queue).is_none() {
            return Err(StoreError::QueueNotFound(params.queue));
        }
        let Some(record) = self
            .resolve(&params.queue, params.by.clone(), params.now_ms)
            .await?
        else {
            return Ok(None);
        };
        let id = record.message_id;
        let belongs = |status: &MessageStatus| {
            status.queue == params.queue
                || status
                    .dead_letter
                    .as_ref()
                    .is_some_and(|d| d.source_queue == params.queue)
        };
        let live = store.index.lock().status(&id);
        if let Some(mut status) = live {
            if !belongs(&status) {
                return Ok(None);
            }
            // Failed attempts are only on disk; messages that never failed need no read. The
            // latest failure may still be queued for the writer (the index changes first), so
            // wait for what is queued to be committed before reading.
            if status.last_error.is_some() {
                store.flush().await?;
                status.failures = store.read(move |conn| read_failures(conn, id)).await?;
            }
            return Ok(Some(status));
        }
        let mut status = store.read(move |conn| read_status(conn, id)).await?;
        if status
            .as_ref()
            .is_some_and(|status| !status.state.is_final())
        {
            // A live row the index no longer holds: its final state (an ack, expiry, cancel,
            // purge) is on its way to disk. Wait for the writer, then read what it wrote.
            store.flush().await?;
            status = store.read(move |conn| read_status(conn, id)).await?;
        }
        if status.is_none()
            && let (Some(_), MessageRef::IdempotencyKey(key)) = (record.acked_at_ms, &params.by)
        {
            // The acked record is gone but the key's window is open: it remembers the outcome.
            return Ok(Some(remembered_ack(&params.queue, key, record)));
        }
        Ok(status.filter(belongs))
    }

    async fn maintain(&self, now_ms: Millis) -> StoreResult<()> {
        let store = &self.0;
        let committed = {
            let mut index = store.index.lock();
            let mut changes = index.tick_all(now_ms);
            changes.extend(index.expire(now_ms, EXPIRE_PER_TICK));
            index.compact();
            if changes.is_empty() {
                None
            } else {
                // Queued while the index is still locked: whoever sees these changes in the
                // index and then flushes the writer finds them on disk.
                let (reply, wait) = oneshot::channel();
                store.send(WriteOp::Apply {
                    changes,
                    now_ms,
                    reply: Some(reply),
                })?;
                Some(wait)
            }
        };
        if let Some(wait) = committed {
            store.notifier.wake_all();
            // Upkeep returns once its changes are on disk, so what follows it (a test clock's
            // advance, the next tick) reads them there.
            SqliteStore::wait(wait).await?;
        }
        store.send(WriteOp::Cleanup {
            now_ms,
            acked_before_ms: now_ms - store.options.acked_retention_ms,
        })
    }

    async fn webhook_put(&self, name: &str, spec: String, now_ms: Millis) -> StoreResult<()> {
        let (reply, wait) = oneshot::channel();
        self.0.send(WriteOp::WebhookPut {
            name: name.to_owned(),
            spec,
            now_ms,
            reply,
        })?;
        SqliteStore::wait(wait).await
    }

    async fn webhook_delete(&self, name: &str) -> StoreResult<bool> {
        let exists = self
            .webhook_list()
            .await?
            .iter()
            .any(|(existing, _)| existing == name);
        if !exists {
            return Ok(false);
        }
        let (reply, wait) = oneshot::channel();
        self.0.send(WriteOp::WebhookDelete {
            name: name.to_owned(),
            reply,
        })?;
        SqliteStore::wait(wait).await?;
        Ok(true)
    }

    async fn webhook_list(&self) -> StoreResult<Vec<(String, String)>> {
        self.0
            .read(|conn| {
                let mut statement =
                    conn.prepare_cached("SELECT name, spec FROM webhooks ORDER BY name")?;
                let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
                rows.collect()
            })
            .await
    }

    async fn queue_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        self.pause(name, paused).await
    }

    async fn queue_purge(&self, name: &str, now_ms: Millis) -> StoreResult<u64> {
        self.purge(name, now_ms).await
    }

    async fn message_cancel(&self, params: MessageGetParams) -> StoreResult<CancelOutcome> {
        self.cancel(params).await
    }

    async fn dead_letter_list(&self, query: DeadLetterQuery) -> StoreResult<DeadLetters> {
        self.list_dead_letters(query).await
    }

    async fn dead_letter_get(&self, queue: &str, id: Uuid) -> StoreResult<Option<DeadLetter>> {
        self.get_dead_letter(queue, id).await
    }

    async fn dead_letter_replay(&self, params: ReplayParams) -> StoreResult<Replay> {
        self.replay_dead_letters(params).await
    }

    async fn dead_letter_delete(
        &self,
        queue: &str,
        selection: DeadLetterSelection,
        now_ms: Millis,
    ) -> StoreResult<u64> {
        self.delete_dead_letters(queue, selection, now_ms).await
    }

    fn storage_metrics(&self) -> sluice_core::store::StorageMetrics {
        let store = &self.0;
        let mut metrics = store
            .write_stats
            .snapshot(store.options.durability == Durability::Fsync);
        let file_bytes =
            |name| std::fs::metadata(store.options.data_dir.join(name)).map_or(0, |m| m.len());
        let wal_bytes = file_bytes(files::WAL_FILE);
        metrics.wal_bytes = Some(wal_bytes);
        metrics.database_bytes = Some(file_bytes(files::DB_FILE) + wal_bytes);
        metrics.wal_checkpoint_lag_frames =
            Some(store.checkpoint.lag_frames.load(Ordering::Relaxed));
        metrics.wal_truncations = Some(store.checkpoint.truncations.load(Ordering::Relaxed));
        metrics.write_state = store.health.state();
        metrics.writer_queue_bytes = Some(store.inbox.bytes());
        metrics.writer_queue_ops = Some(store.inbox.ops());
        metrics
    }

    fn write_state(&self) -> WriteState {
        self.0.health.state()
    }

    fn notifier(&self) -> Arc<Notifier> {
        self.0.notifier.clone()
    }

    async fn close(&self) -> StoreResult<()> {
        let store = &self.0;
        if store.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // Bounded: on a disk so full that even the reserve is used up, writes wait for space;
        // a shutdown does not. The writer answers what it still holds with `disk_full` when its
        // channel closes below.
        let _ = tokio::time::timeout(CLOSE_FLUSH_WAIT, store.flush()).await;
        // The checkpoint thread stops first, so the writer's final checkpoint is not blocked by it.
        store.checkpoint.stop.store(true, Ordering::SeqCst);
        let checkpoint_thread = store.checkpoint_thread.lock().take();
        if let Some(thread) = checkpoint_thread {
            thread.thread().unpark();
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        store.writer.lock().take();
        let writer_thread = store.writer_thread.lock().take();
        if let Some(thread) = writer_thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        store.notifier.wake_all();
        Ok(())
    }

    async fn message_browse(&self, query: BrowseQuery) -> StoreResult<BrowsePage> {
        let index = self.0.index.lock();
        let (entries, next) = index
            .browse(
                &query.queue,
                query.state,
                query.after,
                query.limit,
                BROWSE_SCAN_MAX,
            )
            .ok_or_else(|| StoreError::QueueNotFound(query.queue.clone()))?;
        let messages = entries
            .into_iter()
            .filter_map(|entry| {
                Some(BrowsedMessage {
                    status: index.status(&entry.id)?,
                    leased_at_ms: index.leased_at(entry.seq),
                    body_bytes: entry.payload.as_ref().map(|p| p.body_bytes.len() as u64),
                })
            })
            .collect();
        Ok(BrowsePage {
            messages,
            next,
            counts: index.browse_counts(&query.queue).unwrap_or_default(),
        })
    }

    async fn message_deliveries(
        &self,
        params: MessageGetParams,
    ) -> StoreResult<Option<(MessageStatus, Vec<sluice_core::message::DeliveryAttempt>)>> {
        let Some(status) = self.message_get(params).await? else {
            return Ok(None);
        };
        let Some(seq) = ids::decode(&status.message_id) else {
            return Ok(Some((status, Vec::new())));
        };
        // The latest attempt may still be on its way to the writer.
        self.0.flush().await?;
        let deliveries = self
            .0
            .read(move |conn| delivery_log::read(conn, seq))
            .await?;
        Ok(Some((status, deliveries)))
    }

    async fn message_body(&self, params: MessageGetParams) -> StoreResult<Option<MessageBody>> {
        let Some(status) = self.message_get(params).await? else {
            return Ok(None);
        };
        // Final rows keep no body, except a replayed dead letter's.
        if status.state.is_final() && status.state != MessageState::Replayed {
            return Ok(Some(MessageBody {
                status,
                payload: None,
            }));
        }
        let Some(seq) = ids::decode(&status.message_id) else {
            return Ok(Some(MessageBody {
                status,
                payload: None,
            }));
        };
        let cached = self.0.index.lock().payload_of(seq);
        let payload = match cached {
            Some(payload) => Some((*payload).clone()),
            None => self
                .0
                .read(move |conn| read_payloads(conn, &[seq]))
                .await?
                .pop()
                .map(|(_, payload)| payload),
        };
        Ok(Some(MessageBody { status, payload }))
    }
}

/// What an idempotency key remembers of a message acked longer ago than its record is kept.
fn remembered_ack(queue: &str, key: &str, record: writer::IdempotencyRecord) -> MessageStatus {
    let acked_at_ms = record.acked_at_ms.unwrap_or_default();
    // Message ids are UUIDv7 stamped at enqueue.
    let enqueued_at_ms = record
        .message_id
        .get_timestamp()
        .map_or(acked_at_ms, |stamp| {
            let (seconds, nanos) = stamp.to_unix();
            seconds as Millis * 1000 + Millis::from(nanos / 1_000_000)
        });
    MessageStatus {
        message_id: record.message_id,
        queue: queue.to_owned(),
        state: MessageState::Acked,
        idempotency_key: Some(key.to_owned()),
        key: None,
        priority: 0,
        attempts: 0,
        enqueued_at_ms,
        first_received_at_ms: None,
        visible_at_ms: enqueued_at_ms,
        lease_expires_at_ms: None,
        last_error: None,
        acked_at_ms: Some(acked_at_ms),
        finished_at_ms: Some(acked_at_ms),
        dead_letter: None,
        result: record.result,
        replayed_as: None,
        failures: Vec::new(),
    }
}

/// The failure log as stored (a JSON array); an unreadable one is treated as empty.
fn parse_failures(text: Option<String>) -> Vec<sluice_core::message::Failure> {
    text.and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// The failure log of a message the index holds (it lives on disk only).
fn read_failures(
    conn: &Connection,
    id: Uuid,
) -> rusqlite::Result<Vec<sluice_core::message::Failure>> {
    let Some(seq) = ids::decode(&id) else {
        return Ok(Vec::new());
    };
    let text: Option<Option<String>> = conn
        .prepare_cached("SELECT failures FROM messages WHERE seq = ?1")?
        .query_row(params![seq as i64], |row| row.get(0))
        .optional()?;
    Ok(parse_failures(text.flatten()))
}

fn truncate(mut text: String) -> String {
    let kept =
        sluice_core::message::cut_utf8(&text, sluice_core::queue::limits::ERROR_BYTES_MAX).len();
    text.truncate(kept);
    text
}

fn read_payloads(conn: &Connection, seqs: &[Seq]) -> rusqlite::Result<Vec<(Seq, Payload)>> {
    let mut statement =
        conn.prepare_cached("SELECT body, body_kind, headers FROM messages WHERE seq = ?1")?;
    let mut payloads = Vec::with_capacity(seqs.len());
    for &seq in seqs {
        let row = statement
            .query_row(params![seq as i64], |row| {
                let body: Option<Vec<u8>> = row.get(0)?;
                let kind: body_kind::BodyKindColumn = row.get(1)?;
                let headers: Option<String> = row.get(2)?;
                Ok(Payload {
                    body_bytes: body.unwrap_or_default(),
                    body_kind: kind.0,
                    headers: headers
                        .and_then(|h| serde_json::from_str(&h).ok())
                        .unwrap_or_default(),
                })
            })
            .optional()?;
        if let Some(payload) = row {
            payloads.push((seq, payload));
        }
    }
    Ok(payloads)
}

/// Status of a message as stored: for one the index does not hold, in a final state (or gone).
fn read_status(conn: &Connection, id: Uuid) -> rusqlite::Result<Option<MessageStatus>> {
    conn.prepare_cached(
        "SELECT queue, state, idempotency_key, msg_key, priority, attempts, enqueued_at, first_received_at, visible_at, last_error, acked_at,
                dead_source_queue, dead_last_error, dead_attempts, dead_first_seen_at, dead_last_seen_at, result, replayed_as, failures
         FROM messages WHERE seq = ?1 AND id = ?2",
    )?
    .query_row(params![ids::decode(&id).map_or(-1, |seq| seq as i64), id.as_bytes()], |row| {
        let state: i64 = row.get(1)?;
        let dead_source_queue: Option<String> = row.get(11)?;
        let dead_letter = match dead_source_queue {
            Some(source_queue) => Some(DeadLetterInfo {
                source_queue,
                last_error: row.get(12)?,
                attempts: row.get(13)?,
                first_seen_at_ms: row.get(14)?,
                last_seen_at_ms: row.get(15)?,
            }),
            None => None,
        };
        let state = schema::message_state(state);
        let finished_at_ms: Option<Millis> = row.get(10)?;
        let replayed_as: Option<Vec<u8>> = row.get(17)?;
        Ok(MessageStatus {
            message_id: id,
            queue: row.get(0)?,
            state,
            idempotency_key: row.get(2)?,
            key: row.get(3)?,
            priority: row.get(4)?,
            attempts: row.get(5)?,
            enqueued_at_ms: row.get(6)?,
            first_received_at_ms: row.get(7)?,
            visible_at_ms: row.get(8)?,
            lease_expires_at_ms: None,
            last_error: row.get(9)?,
            acked_at_ms: finished_at_ms.filter(|_| state == MessageState::Acked),
            finished_at_ms: finished_at_ms.filter(|_| state.is_final()),
            dead_letter,
            result: row.get(16)?,
            replayed_as: replayed_as.and_then(|bytes| Uuid::from_slice(&bytes).ok()),
            failures: parse_failures(row.get(18)?),
        })
    })
    .optional()
}

#[cfg(test)]
mod tests;
