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
pub mod config;
mod dead_letters;
mod delivery_log;
mod dir_sync;
pub mod dispatch;
mod files;
mod health;
mod inbox;
mod load;
mod messages;
mod metrics;
mod paging;
mod publish;
mod push_pauses;
mod queues;
mod reads;
mod schedules;
mod schema;
mod space;
mod sync;
mod webhooks;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;

use crate::dispatch::Index;
use async_trait::async_trait;
use parking_lot::Mutex;
use rusqlite::{Connection, OpenFlags};
use sluice_core::notify::Notifier;
use sluice_core::store::Seq;
use sluice_core::store::*;
use sluice_core::{Millis, Store};
use tokio::sync::oneshot;

use crate::writer::{WriteOp, Writer};

pub use config::{SqliteSection, SqliteSettings};

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
#[derive(Debug, Clone, PartialEq)]
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
    pub max_wal_bytes: u64,
    /// Space kept back in the data directory for acks when the disk fills (default 64 MiB; 0:
    /// none).
    pub disk_reserve_bytes: u64,
    /// Bytes of new messages that may wait for the writer; an enqueue beyond it is refused with
    /// [`StoreError::Overloaded`] (default 128 MiB; see `inbox.rs`).
    pub writer_queue_bytes: u64,
    /// Ready messages of each queue and priority the dispatch index keeps in memory; the rest
    /// wait on disk and are paged in as the head drains (default 10,000; 0: all in memory;
    /// `sluice_core::dispatch` `paging.rs`).
    pub resident_messages: usize,
}

impl SqliteOptions {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            durability: Durability::Fsync,
            payload_cache_bytes: config::DEFAULT_PAYLOAD_CACHE_BYTES,
            acked_retention_ms: 60 * 60 * 1000,
            max_wal_bytes: config::DEFAULT_WAL_MAX_BYTES,
            disk_reserve_bytes: config::DEFAULT_DISK_RESERVE_BYTES,
            writer_queue_bytes: config::DEFAULT_WRITER_QUEUE_BYTES,
            resident_messages: config::DEFAULT_RESIDENT_MESSAGES,
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
    /// Queues whose push is paused, as `queues.push_paused` says; changed under the index
    /// lock, taken after it.
    push_paused: Mutex<std::collections::BTreeSet<String>>,
    /// Held while a page-in runs (`paging.rs`): one at a time.
    pager: tokio::sync::Mutex<()>,
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
        schema::open_writer(&conn, options.durability, options.max_wal_bytes)
            .map_err(store_error)?;
        // The database and WAL now exist (and a new database's journal is gone): their names
        // must be durable before the first answer (dir_sync.rs).
        dir_sync::fsync_dir(&options.data_dir).map_err(|e| {
            StoreError::Unavailable(format!("cannot sync {}: {e}", options.data_dir.display()))
        })?;
        push_pauses::carry_over(&conn, &options.data_dir)?;
        let push_paused = push_pauses::load(&conn).map_err(store_error)?;
        let mut index = Index::new();
        index.set_resident_max(options.resident_messages);
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
                options.max_wal_bytes,
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
        let checkpoint_limit = options.max_wal_bytes;
        let checkpoint_signal = checkpoint.clone();
        let checkpoint_health = health.clone();
        let checkpoint_thread = std::thread::Builder::new()
            .name("sluice-sqlite-checkpoint".into())
            .spawn(move || {
                checkpoint::run(
                    checkpoint_path,
                    checkpoint_limit,
                    checkpoint_signal,
                    checkpoint_health,
                )
            })
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
            push_paused: Mutex::new(push_paused),
            pager: tokio::sync::Mutex::new(()),
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
}

/// Longest wait of a close for the writes queued before it.
const CLOSE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// Messages retention looks at per maintenance tick, so expiry never holds the index for long.
const EXPIRE_PER_TICK: usize = 5_000;
/// Rows deleted per transaction when a queue is deleted.
const PURGE_CHUNK_ROWS: usize = 2_000;

/// A store handle that can hand itself to blocking readers.
#[derive(Debug, Clone)]
pub struct SharedSqliteStore(pub Arc<SqliteStore>);

impl SharedSqliteStore {
    /// Opens the store.
    pub fn open(options: SqliteOptions, now_ms: Millis) -> StoreResult<Self> {
        Ok(Self(Arc::new(SqliteStore::open(options, now_ms)?)))
    }
}

#[async_trait]
impl Store for SharedSqliteStore {
    /// One upkeep tick: moves due delays and expired leases, applies retention, and has the
    /// writer clean up final rows past their retention. Returns once its changes are on disk.
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
        // Heads that retention, a purge or cancels ran down, with no claim to notice.
        self.page_in_all(now_ms).await;
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

    fn storage_metrics(&self) -> sluice_core::store::StorageMetrics {
        let store = &self.0;
        let mut reported = Vec::new();
        store
            .write_stats
            .report(store.options.durability == Durability::Fsync, &mut reported);
        let file_bytes =
            |name| std::fs::metadata(store.options.data_dir.join(name)).map_or(0, |m| m.len());
        let (index_messages, paged_out_messages) = {
            let index = store.index.lock();
            (index.len() as u64, index.cold_total())
        };
        metrics::Report {
            database_file_bytes: file_bytes(files::DB_FILE),
            wal_bytes: file_bytes(files::WAL_FILE),
            wal_checkpoint_lag_frames: store.checkpoint.lag_frames.load(Ordering::Relaxed),
            wal_truncations: store.checkpoint.truncations.load(Ordering::Relaxed),
            writer_queue_bytes: store.inbox.bytes(),
            writer_queue_ops: store.inbox.ops(),
            index_messages,
            paged_out_messages,
        }
        .metrics(&mut reported);
        sluice_core::store::StorageMetrics {
            write_state: store.health.state(),
            reported,
        }
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
}

#[cfg(test)]
mod paging_tests;
#[cfg(test)]
mod tests;
