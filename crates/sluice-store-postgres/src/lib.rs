//! The PostgreSQL store of sluice (issue 15): several `sluice serve` nodes on one database,
//! every rule kept by the database rather than by one process's memory. Its design is
//! docs/design/postgres-store.md; this crate is built in the steps of that document's §8.
//!
//! What is built (steps 2 and 3): opening ([`PgStore::open`]: options, the pool, migrations
//! under an advisory lock, the listener), queue definitions (put, get, config, list, pause,
//! delete, and whether a queue is a dead-letter queue), webhook endpoint definitions, `close`,
//! and the message path (`messages`): enqueue with idempotency keys, lanes and `max_depth`;
//! claim (and `message_claim_recorded`) with due delays, expired leases, pause, lanes and the
//! shared `max_in_flight` and rate limit; ack, nack (retry with the core's backoff, or the
//! dead-letter move), extend and give back, fenced by the receipt; lookups of one message by
//! id or idempotency key (`message_get`, `message_body`). Every node caches queue definitions and drops a copy
//! when any node changes it (`cache`, `listen`), and a change that may make a message
//! claimable is announced on `<schema>.wake`, which wakes the queue's waiters on every node.
//!
//! Enqueues and acks are committed in groups (`group`): one transaction and one commit flush
//! for every caller waiting, as the design's §2.1 asks. The module doc of `messages` lists
//! where step 3 departs from the design.
//!
//! Step 5's parts: every connection is made by one `connect::Connector` (TLS as the URL's
//! `sslmode` says, [`tls`]; `application_name = sluice/<node name>`); `health` knows whether
//! the database can be reached, so that while it cannot every call answers `Unavailable` at
//! once and `write_state()` says why, until a prober's connection succeeds; dashboard sessions
//! live in the `sessions` table (`sessions`); push pauses in `queue_state`.
//!
//! What is not built yet (step 4): lease expiry on the last attempt into the dead-letter queue
//! (the leader's upkeep), dead-letter list, get, replay and delete, retention, purge, cancel,
//! delivery logs and browsing. Those methods first resolve their queue (an unknown one
//! is `QueueNotFound`, as for every store), then fail with a [`NotBuiltYet`] error, a
//! `StoreError::Other` that names the method and the step that brings it; they never panic.
//! `maintain` returns at once. Until step 4 the store passes only the conformance cases listed
//! in `tests/conformance.rs`.
//!
//! Errors are sorted by meaning in [`error`] alone (a connection refused or lost is
//! `StoreError::Unavailable`). Module map: [`options`] (what the store is opened with),
//! `connect` (the pool and session settings), [`migrate`], `cache`, `listen`, `queues`,
//! `messages`, `group`, `webhooks`, `sessions` (dashboard sessions shared by every node),
//! `health` (the way to the database that other parts share).

mod cache;
mod cached;
mod connect;
pub mod error;
mod group;
mod health;
mod listen;
mod messages;
pub mod migrate;
pub mod options;
mod queues;
mod sessions;
pub mod tls;
mod webhooks;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use sluice_core::clock::Millis;
use sluice_core::dispatch::{Counters, LeaseError, NackOutcome};
use sluice_core::message::MessageStatus;
use sluice_core::notify::Notifier;
use sluice_core::queue::QueueConfig;
use sluice_core::store::{
    AckParams, BrowsePage, BrowseQuery, CancelOutcome, Claim, ClaimParams, DeadLetter,
    DeadLetterQuery, DeadLetterSelection, DeadLetters, EnqueueParams, Enqueued, ExtendParams,
    GiveBackParams, MessageBody, MessageGetParams, NackParams, QueueInfo, QueuePut, QueuePutParams,
    Replay, ReplayParams, Store, StoreError, StoreResult,
};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::cache::QueueCache;
pub use crate::migrate::{Migrated, migrate};
pub use crate::options::{DatabaseUrl, Durability, PgOptions};

/// A [`Store`] on a PostgreSQL schema, shared with every other node opened on it.
pub struct PgStore {
    options: PgOptions,
    /// The pool, behind this node's view of whether the database can be reached (`health`).
    database: health::Database,
    /// Declares the database back once a connection is made again, until close.
    prober: Mutex<Option<JoinHandle<()>>>,
    cache: Arc<QueueCache>,
    notifier: Arc<Notifier>,
    /// This node's counters per queue id since it opened (§2.11: the other nodes' come with
    /// step 4).
    counters: Arc<Mutex<HashMap<i32, Counters>>>,
    /// The way to the group-commit writers, until close.
    writers: Mutex<Option<group::Writers>>,
    /// What the writers share with the store (their metrics).
    group_context: Arc<group::Context>,
    /// The writer tasks, awaited at close so what they hold is committed and answered.
    writer_tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The listener task, until close.
    listener: Mutex<Option<JoinHandle<()>>>,
    /// Moved by the listener at every definition change ([`Store::definitions_changed`]).
    definitions_changed: Arc<tokio::sync::watch::Sender<u64>>,
    is_closed: AtomicBool,
    /// `<schema>.config`: definition changes.
    config_channel: String,
    /// `<schema>.wake`: a queue may have a claimable message (payload: its name).
    wake_channel: String,
}

impl PgStore {
    /// Opens the store: checks `options`, migrates the schema (or, with `migrate: false`, checks
    /// that it is current), makes the pool and starts the listener. Several nodes may open one
    /// schema at once; the migration runs once.
    ///
    /// Errors: `Unavailable` when the database cannot be reached within
    /// `options.connect_timeout`; `Other` for options that do not check, a schema migrated by
    /// a newer sluice, or a failed migration.
    pub async fn open(options: PgOptions) -> StoreResult<Self> {
        options.check().map_err(|e| StoreError::Other(e.into()))?;
        if options.migrate {
            migrate::migrate(&options).await?;
        } else {
            migrate::check(&options).await?;
        }
        let connector = connect::Connector::new(&options)?;
        let cache = Arc::new(QueueCache::default());
        let definitions_changed = Arc::new(tokio::sync::watch::Sender::new(0));
        let notifier = Arc::new(Notifier::default());
        let health = Arc::new(health::Health::new(notifier.clone()));
        let database = health::Database::new(
            connector.pool(options.pool_size, options.connect_timeout)?,
            health.clone(),
        );
        let prober = health::spawn_prober(database.clone());
        let listener = listen::spawn(
            options.clone(),
            connector.clone(),
            listen::Followers {
                cache: cache.clone(),
                changed: definitions_changed.clone(),
                notifier: notifier.clone(),
                health: health.clone(),
            },
        );
        let counters = Arc::new(Mutex::new(HashMap::new()));
        let wake_channel = listen::wake_channel(&options.schema);
        let group_context = Arc::new(group::Context {
            // One connection per writer, on top of `pool_size`: groups never wait behind claims
            // for a connection, nor claims behind groups.
            database: health::Database::new(
                connector.pool(2 * options.writer_connections, options.connect_timeout)?,
                health,
            ),
            notifier: notifier.clone(),
            counters: counters.clone(),
            wake_channel: wake_channel.clone(),
            group_commit_ops: sluice_core::histogram::AtomicHistogram::new(group::GROUP_OPS_BOUNDS),
        });
        let (writers, writer_tasks) =
            group::Writers::spawn(group_context.clone(), options.writer_connections);
        tracing::info!(url = %options.url, schema = %options.schema, node = %options.node_name, "PostgreSQL store open");
        Ok(Self {
            config_channel: listen::config_channel(&options.schema),
            wake_channel,
            options,
            database,
            prober: Mutex::new(Some(prober)),
            cache,
            notifier,
            counters,
            writers: Mutex::new(Some(writers)),
            group_context,
            writer_tasks: Mutex::new(writer_tasks),
            listener: Mutex::new(Some(listener)),
            definitions_changed,
            is_closed: AtomicBool::new(false),
        })
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &PgOptions {
        &self.options
    }

    /// A pooled connection; `Unavailable` once closed, at once while the database is lost,
    /// or when none comes within the connect timeout.
    async fn client(&self) -> StoreResult<deadpool_postgres::Object> {
        self.check_open()?;
        self.database.client().await
    }

    /// The way to the writers; `Unavailable` once closed.
    fn writers(&self) -> StoreResult<group::Writers> {
        self.check_open()?;
        self.writers
            .lock()
            .clone()
            .ok_or_else(|| StoreError::Unavailable("the PostgreSQL store is closed".into()))
    }

    /// Changes this node's counters of a queue.
    fn count(&self, queue_id: i32, change: impl FnOnce(&mut Counters)) {
        change(self.counters.lock().entry(queue_id).or_default());
    }

    /// This node's counters of a queue.
    fn counters_of(&self, queue_id: i32) -> Counters {
        self.counters
            .lock()
            .get(&queue_id)
            .copied()
            .unwrap_or_default()
    }

    fn check_open(&self) -> StoreResult<()> {
        if self.is_closed.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable(
                "the PostgreSQL store is closed".into(),
            ));
        }
        Ok(())
    }

    /// The error of a method a later build step brings, once its queue is known to exist.
    async fn not_built_yet(&self, queue: &str, method: &'static str, step: u8) -> StoreError {
        match self.resolve(queue).await {
            Ok(_) => StoreError::Other(Box::new(NotBuiltYet { method, step })),
            Err(error) => error,
        }
    }
}

/// A method of the [`Store`] trait this store does not have yet; the step of
/// docs/design/postgres-store.md §8 that brings it is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{method} is not built yet in the PostgreSQL store (docs/design/postgres-store.md §8, step {step})"
)]
pub struct NotBuiltYet {
    /// The trait method.
    pub method: &'static str,
    /// The build step that brings it.
    pub step: u8,
}

/// The build step of everything else: lookups, cancel, purge, dead letters, browse, upkeep.
const EVERYTHING_ELSE: u8 = 4;

#[async_trait]
impl Store for PgStore {
    async fn queue_put(&self, params: QueuePutParams) -> StoreResult<QueuePut> {
        self.put_queue(params).await
    }

    async fn queue_get(&self, name: &str, now_ms: Millis) -> StoreResult<QueueInfo> {
        self.get_queue(name, now_ms).await
    }

    async fn queue_config(&self, name: &str) -> StoreResult<Arc<QueueConfig>> {
        self.queue_config_of(name).await
    }

    async fn queue_list(&self, now_ms: Millis) -> StoreResult<Vec<QueueInfo>> {
        self.list_queues(now_ms).await
    }

    async fn queue_is_dead_letter_queue(&self, name: &str) -> StoreResult<bool> {
        self.is_dead_letter_queue(name).await
    }

    async fn queue_delete(&self, name: &str) -> StoreResult<u64> {
        self.delete_queue(name).await
    }

    async fn message_enqueue(&self, params: EnqueueParams) -> StoreResult<Vec<Enqueued>> {
        self.enqueue(params).await
    }

    async fn message_claim(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, false).await
    }

    async fn message_claim_recorded(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, true).await
    }

    async fn message_ack(&self, params: AckParams) -> StoreResult<Vec<Result<(), LeaseError>>> {
        self.ack(params).await
    }

    async fn message_nack(&self, params: NackParams) -> StoreResult<NackOutcome> {
        self.nack(params).await
    }

    async fn message_extend(&self, params: ExtendParams) -> StoreResult<Millis> {
        self.extend(params).await
    }

    async fn message_give_back(&self, params: GiveBackParams) -> StoreResult<()> {
        self.give_back(params).await
    }

    async fn message_get(&self, params: MessageGetParams) -> StoreResult<Option<MessageStatus>> {
        self.get_message(params).await
    }

    async fn queue_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        self.pause_queue(name, paused).await
    }

    async fn queue_push_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        self.push_pause_queue(name, paused).await
    }

    async fn queue_purge(&self, name: &str, _now_ms: Millis) -> StoreResult<u64> {
        Err(self
            .not_built_yet(name, "queue_purge", EVERYTHING_ELSE)
            .await)
    }

    async fn message_cancel(
        &self,
        params: MessageGetParams,
        _reason: Option<String>,
    ) -> StoreResult<CancelOutcome> {
        Err(self
            .not_built_yet(&params.queue, "message_cancel", EVERYTHING_ELSE)
            .await)
    }

    async fn dead_letter_list(&self, query: DeadLetterQuery) -> StoreResult<DeadLetters> {
        Err(self
            .not_built_yet(&query.queue, "dead_letter_list", EVERYTHING_ELSE)
            .await)
    }

    async fn dead_letter_get(&self, queue: &str, _id: Uuid) -> StoreResult<Option<DeadLetter>> {
        Err(self
            .not_built_yet(queue, "dead_letter_get", EVERYTHING_ELSE)
            .await)
    }

    async fn dead_letter_replay(&self, params: ReplayParams) -> StoreResult<Replay> {
        Err(self
            .not_built_yet(&params.queue, "dead_letter_replay", EVERYTHING_ELSE)
            .await)
    }

    async fn dead_letter_delete(
        &self,
        queue: &str,
        _selection: DeadLetterSelection,
        _now_ms: Millis,
    ) -> StoreResult<u64> {
        Err(self
            .not_built_yet(queue, "dead_letter_delete", EVERYTHING_ELSE)
            .await)
    }

    async fn webhook_put(&self, name: &str, spec: String, now_ms: Millis) -> StoreResult<()> {
        self.put_webhook(name, spec, now_ms).await
    }

    async fn webhook_delete(&self, name: &str) -> StoreResult<bool> {
        self.delete_webhook(name).await
    }

    async fn webhook_list(&self) -> StoreResult<Vec<(String, String)>> {
        self.list_webhooks().await
    }

    /// Nothing yet: claims expire the leases of their own queue and end its delays (§2.3);
    /// step 4 runs the leader's upkeep here (last-attempt expiries, retention, cleanup).
    async fn maintain(&self, _now_ms: Millis) -> StoreResult<()> {
        self.check_open()
    }

    fn notifier(&self) -> Arc<Notifier> {
        self.notifier.clone()
    }

    /// Batches per committed group of both writers; nothing else yet (the database's size
    /// and the writers' queues come with step 4).
    fn storage_metrics(&self) -> sluice_core::store::StorageMetrics {
        sluice_core::store::StorageMetrics {
            group_commit_ops: Some(self.group_context.group_commit_ops.snapshot()),
            write_state: self.write_state(),
            ..Default::default()
        }
    }

    /// `Unavailable(reason)` while the database cannot be reached (`health`).
    fn write_state(&self) -> sluice_core::store::WriteState {
        self.database.health().write_state()
    }

    fn definitions_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.definitions_changed.subscribe()
    }

    /// Sessions in the `sessions` table, seen by every node (`sessions`).
    fn session_store(&self) -> Option<Arc<dyn sluice_core::sessions::SessionStore>> {
        Some(Arc::new(sessions::PgSessions::new(
            self.database.clone(),
            self.options.schema.clone(),
        )))
    }

    async fn close(&self) -> StoreResult<()> {
        self.is_closed.store(true, Ordering::Release);
        if let Some(listener) = self.listener.lock().take() {
            listener.abort();
        }
        // The writers stop once the senders are gone and what they hold is committed and
        // answered.
        self.writers.lock().take();
        let writer_tasks = std::mem::take(&mut *self.writer_tasks.lock());
        for task in writer_tasks {
            let _ = task.await;
        }
        if let Some(prober) = self.prober.lock().take() {
            prober.abort();
        }
        self.group_context.database.close();
        self.database.close();
        // Waiters look again and find the store closed.
        self.notifier.wake_all();
        Ok(())
    }

    async fn message_browse(&self, query: BrowseQuery) -> StoreResult<BrowsePage> {
        Err(self
            .not_built_yet(&query.queue, "message_browse", EVERYTHING_ELSE)
            .await)
    }

    async fn message_body(&self, params: MessageGetParams) -> StoreResult<Option<MessageBody>> {
        self.message_with_body(params).await
    }
}
