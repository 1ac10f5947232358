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
//! Operator actions and lookups (step 4, part A): dead letters listed, read, replayed and
//! deleted (`dead_letters`), purge and cancel (`removal`), browsing a queue's states and a
//! message's push delivery log (`lookups`, `delivery_log`; acks and nacks of pushed messages
//! append to it). Bounded walks for filtered listings are `scan`'s; a transaction that meets
//! a deadlock or serialization failure is tried again (`retry`).
//!
//! Several nodes on one schema (step 4, `leader`, `nodes`, `upkeep`): each node has a row in
//! `nodes` and writes its counters into `queue_counters` every second; one node, elected by a
//! session advisory lock, runs the upkeep behind `maintain` (due delays, expired leases and the
//! last-attempt move into the dead-letter queue, retention, the depth count in `queue_stats`
//! that `queue_list` and `position` read, the lane safety net, cleanup). Another node takes
//! over within a second when the leader closes or dies. `PgStore::upkeep` runs the same jobs
//! on any node; running them on two at once is safe.
//!
//! Step 5's parts: every connection is made by one `connect::Connector` (TLS as the URL's
//! `sslmode` says, [`tls`]; `application_name = sluice/<node name>`); `health` knows whether
//! the database can be reached, so that while it cannot every call answers `Unavailable` at
//! once and `write_state()` says why, until a prober's connection succeeds; dashboard sessions
//! live in the `sessions` table (`sessions`); push pauses in `queue_state`.
//!
//! Errors are sorted by meaning in [`error`] alone (a connection refused or lost is
//! `StoreError::Unavailable`). Module map: [`options`] (what the store is opened with),
//! `connect` (the pool and session settings), [`migrate`], `cache`, `listen`, `queues`,
//! `messages`, `group`, `dead_letter_move`, `lanes`, `webhooks`, `dead_letters`, `removal`,
//! `lookups`, `delivery_log`, `scan`, `retry`; `leader`, `nodes`, `counters`, `stats`, and the
//! upkeep: `upkeep`, `expiry`, `retention`, `cleanup`; `sessions` (dashboard sessions
//! shared by every node), `health` (the way to the database that other parts share), `tls`.

mod analyze;
mod cache;
mod cached;
mod cleanup;
pub mod config;
mod connect;
mod counters;
mod dead_letter_move;
mod dead_letters;
mod delivery_log;
pub mod error;
mod expiry;
mod group;
mod health;
mod lanes;
mod leader;
mod listen;
mod lookups;
mod messages;
pub mod migrate;
mod nodes;
pub mod options;
mod queues;
mod removal;
mod retention;
mod retry;
mod scan;
mod schedules;
mod sessions;
mod stats;
pub mod tls;
mod upkeep;
mod webhooks;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use parking_lot::Mutex;
use sluice_core::clock::Millis;
use sluice_core::notify::Notifier;
use sluice_core::store::Counters;
use sluice_core::store::{Store, StoreError, StoreResult};
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::cache::QueueCache;
pub use crate::config::{PgSection, PgSettings};
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
    /// This node's counters per queue id since it opened (§2.11), the `live` map of
    /// `node.ledger`.
    counters: Arc<Mutex<HashMap<i32, Counters>>>,
    /// This node among the others on the schema: its id, counters, measurements, and the
    /// tasks that keep its row and its election (§4).
    node: nodes::ThisNode,
    /// Whether this node leads the upkeep now (§4.1).
    leadership: Arc<leader::Leadership>,
    /// When the upkeep's jobs are next due; held while a pass runs.
    schedule: tokio::sync::Mutex<upkeep::Schedule>,
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
        let node_id = Uuid::now_v7();
        let wake_tag = node_id.simple().to_string();
        let listener = listen::spawn(
            options.clone(),
            connector.clone(),
            listen::Followers {
                cache: cache.clone(),
                changed: definitions_changed.clone(),
                notifier: notifier.clone(),
                health: health.clone(),
                wake_tag: wake_tag.clone(),
            },
        );
        nodes::register(database.pool(), node_id, &options.node_name).await?;
        analyze::warn_without_autovacuum(&database.client().await?).await?;
        let elector = leader::Elector::start(options.clone(), node_id).await?;
        let leadership = elector.leadership();
        let ledger = Arc::new(counters::Ledger::default());
        let counters = ledger.live.clone();
        let node = nodes::ThisNode::start(&options, database.pool(), node_id, ledger, elector);
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
            wake_tag,
            group_commit_ops: sluice_core::histogram::AtomicHistogram::new(group::GROUP_OPS_BOUNDS),
            keep_records: options.acked_retention_ms > 0,
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
            node,
            leadership,
            schedule: tokio::sync::Mutex::new(upkeep::Schedule::default()),
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

    /// A queue's counters: this node's, plus what `others` (the other rows of
    /// `queue_counters`, §2.11) hold.
    fn counters_of(&self, queue_id: i32, others: &HashMap<i32, Counters>) -> Counters {
        let own = self.node.ledger.own(queue_id);
        match others.get(&queue_id) {
            Some(others) => counters::plus(&own, others),
            None => own,
        }
    }

    fn check_open(&self) -> StoreResult<()> {
        if self.is_closed.load(Ordering::Acquire) {
            return Err(StoreError::Unavailable(
                "the PostgreSQL store is closed".into(),
            ));
        }
        Ok(())
    }
}

#[async_trait]
impl Store for PgStore {
    /// The leader's upkeep at `now_ms` (`upkeep`); nothing on a follower, whose own work
    /// runs on its own timer (`nodes`).
    async fn maintain(&self, now_ms: Millis) -> StoreResult<()> {
        self.check_open()?;
        if !self.leadership.is_leader() {
            return Ok(());
        }
        self.upkeep(now_ms).await
    }

    fn notifier(&self) -> Arc<Notifier> {
        self.notifier.clone()
    }

    /// Batches per committed group of both writers, the size of the schema's tables (read
    /// every 10 s), whether this node leads the upkeep, and its clock against the database's.
    fn storage_metrics(&self) -> sluice_core::store::StorageMetrics {
        use sluice_core::store::StoreMetric;
        let mut reported = vec![
            StoreMetric::histogram(
                "sluice_storage_group_commit_operations",
                "Write operations committed together in one transaction (group commit).",
                self.group_context.group_commit_ops.snapshot(),
                1.0,
            ),
            StoreMetric::gauge(
                "sluice_store_leader",
                "1 on the node that leads the shared store's upkeep (lease expiry, retention, cleanup), else 0.",
                f64::from(u8::from(self.leadership.is_leader())),
            ),
        ];
        if let Some(skew_ms) = self.node.health.clock_skew_ms() {
            reported.push(StoreMetric::gauge(
                "sluice_store_clock_skew_seconds",
                "The database's clock minus this node's, at the last check (every 60 s).",
                skew_ms as f64 / 1e3,
            ));
        }
        if let Some(bytes) = self.node.health.database_bytes() {
            reported.push(StoreMetric::gauge(
                "sluice_storage_database_bytes",
                "Size of the database on disk: the store's tables and their indexes.",
                bytes as f64,
            ));
        }
        sluice_core::store::StorageMetrics {
            write_state: self.write_state(),
            reported,
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
    fn session_store(&self) -> Option<Arc<dyn sluice_core::store::sessions::SessionStore>> {
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
        // Leadership goes first, announced, so another node takes over at once; then this
        // node's counters join the cluster's and its row goes.
        self.node.leave(self.options.connect_timeout).await;
        if let Some(prober) = self.prober.lock().take() {
            prober.abort();
        }
        self.group_context.database.close();
        self.database.close();
        // Waiters look again and find the store closed.
        self.notifier.wake_all();
        Ok(())
    }
}

/// The message path's statements whose plans the tests pin (`tests/plans.rs`); not an API.
#[doc(hidden)]
pub mod statements {
    /// A claim's lease change (C of §2.3).
    pub fn claim() -> &'static str {
        &crate::messages::CLAIM_SQL
    }

    /// A claim's due delays (U1 of §2.3).
    pub fn ready_due() -> &'static str {
        crate::messages::READY_DUE_SQL
    }

    /// A claim's expired leases (U2 of §2.3).
    pub fn leases_expired() -> &'static str {
        crate::messages::LEASES_EXPIRED_SQL
    }

    /// A page of kept acked messages narrowed by the conditions `search` gives.
    pub fn acked_page(search: &sluice_core::store::AckedSearch) -> String {
        crate::lookups::acked_page_sql(search)
    }

    /// The cleanup's chunk of keeps that ended.
    pub fn keeps_ended() -> &'static str {
        crate::cleanup::KEEPS_ENDED_SQL
    }
}
