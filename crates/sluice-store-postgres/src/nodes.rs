//! This node in the `nodes` table (docs/design/postgres-store.md §4.2) and the work every node
//! does on its own timer, whoever leads (§4.3): its row is inserted at open, its `seen_at_ms`
//! and its counters (`crate::counters`) written every second, the database's size read every
//! 10 s (`storage_metrics`), its clock compared with the database's every 60 s (§4.5), and its
//! row removed at close after folding its counters into the cluster's.
//!
//! `seen_at_ms` and `started_at_ms` are the database's clock, not the node's: whether a node is
//! gone is one clock's question, so a node whose clock is off is not taken for gone (§4.5 is
//! about the clocks of leases and delays, which stay the callers').
//!
//! Nothing here answers a caller: a failed beat is logged and tried again a second later.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use deadpool_postgres::Pool;
use sluice_core::store::StoreResult;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::cached::Cached;
use crate::counters::{self, Ledger};
use crate::error::Db;
use crate::leader::Elector;
use crate::options::PgOptions;

/// The database's clock in epoch ms, as SQL.
pub(crate) const DATABASE_NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
/// How often the node writes its row and its counters.
const BEAT_EVERY: Duration = Duration::from_secs(1);
/// How often the database's size is read.
const SIZE_EVERY: Duration = Duration::from_secs(10);
/// How often the node's clock is compared with the database's.
const CLOCK_EVERY: Duration = Duration::from_secs(60);
/// A clock skew past this is logged as a warning (§4.5).
const CLOCK_SKEW_WARN_MS: i64 = 250;

/// What the node task measures, for `storage_metrics`.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Bytes of the schema's tables with their indexes and TOAST; `u64::MAX` until read.
    database_bytes: AtomicU64,
    /// The database's clock minus this node's, in ms, from the last check.
    clock_skew_ms: AtomicI64,
    has_clock_skew: AtomicBool,
}

impl Health {
    pub(crate) fn new() -> Self {
        Self {
            database_bytes: AtomicU64::new(u64::MAX),
            ..Self::default()
        }
    }

    pub(crate) fn database_bytes(&self) -> Option<u64> {
        Some(self.database_bytes.load(Ordering::Relaxed)).filter(|&bytes| bytes != u64::MAX)
    }

    pub(crate) fn clock_skew_ms(&self) -> Option<i64> {
        self.has_clock_skew
            .load(Ordering::Relaxed)
            .then(|| self.clock_skew_ms.load(Ordering::Relaxed))
    }
}

/// This node's part in the cluster, owned by the store: its id, its counters, what it measures,
/// its election and its timer.
pub(crate) struct ThisNode {
    pub node_id: Uuid,
    pub ledger: Arc<Ledger>,
    pub health: Arc<Health>,
    elector: parking_lot::Mutex<Option<Elector>>,
    task: parking_lot::Mutex<Option<NodeTask>>,
}

impl ThisNode {
    /// Starts the node task of a node whose row is registered and whose elector runs.
    pub(crate) fn start(
        options: &PgOptions,
        pool: &Pool,
        node_id: Uuid,
        ledger: Arc<Ledger>,
        elector: Elector,
    ) -> Self {
        let health = Arc::new(Health::new());
        let task = NodeTask::spawn(Node {
            pool: pool.clone(),
            node_id,
            name: options.node_name.clone(),
            schema: options.schema.clone(),
            ledger: ledger.clone(),
            health: health.clone(),
        });
        Self {
            node_id,
            ledger,
            health,
            elector: parking_lot::Mutex::new(Some(elector)),
            task: parking_lot::Mutex::new(Some(task)),
        }
    }

    /// At close: gives leadership up (announced, so another node takes over at once), then
    /// folds this node's counters into the cluster's and removes its row; each within `within`.
    pub(crate) async fn leave(&self, within: Duration) {
        let elector = self.elector.lock().take();
        if let Some(mut elector) = elector {
            elector.resign(within).await;
        }
        let task = self.task.lock().take();
        if let Some(mut task) = task {
            task.leave(within).await;
        }
    }
}

/// Inserts this node's row (at open).
pub(crate) async fn register(pool: &Pool, node_id: Uuid, name: &str) -> StoreResult<()> {
    let client = pool.get().await.db()?;
    client
        .execute_cached(
            &format!(
                "INSERT INTO nodes (node_id, name, started_at_ms, seen_at_ms) \
                 VALUES ($1, $2, {DATABASE_NOW_MS}, {DATABASE_NOW_MS})"
            ),
            &[&node_id, &name],
        )
        .await?;
    Ok(())
}

/// The node task: beats until stopped, then writes its counters a last time.
pub(crate) struct NodeTask {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

/// What the node task works with.
pub(crate) struct Node {
    pub pool: Pool,
    pub node_id: Uuid,
    pub name: String,
    pub schema: String,
    pub ledger: Arc<Ledger>,
    pub health: Arc<Health>,
}

impl NodeTask {
    pub(crate) fn spawn(node: Node) -> Self {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(node.run(stopped));
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the beats, then folds this node's counters into the cluster's and removes its row,
    /// so the totals stay and no one takes it for a node still serving. Waits at most `within`.
    pub(crate) async fn leave(&mut self, within: Duration) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take()
            && tokio::time::timeout(within, task).await.is_err()
        {
            tracing::warn!(
                "this node's row was not removed in time; the leader removes it after 60 s"
            );
        }
    }
}

impl Drop for NodeTask {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl Node {
    async fn run(self, mut stop: oneshot::Receiver<()>) {
        let mut beat = tokio::time::interval(BEAT_EVERY);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut size_due = tokio::time::Instant::now();
        let mut clock_due = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = beat.tick() => {}
            }
            if let Err(error) = self.beat().await {
                tracing::debug!(%error, "this node's beat failed; it tries again in a second");
                continue;
            }
            let now = tokio::time::Instant::now();
            if now >= size_due {
                size_due = now + SIZE_EVERY;
                if let Err(error) = self.read_size().await {
                    tracing::debug!(%error, "the database's size could not be read");
                }
            }
            if now >= clock_due {
                clock_due = now + CLOCK_EVERY;
                if let Err(error) = self.check_clock().await {
                    tracing::debug!(%error, "the clock could not be compared with the database's");
                }
            }
        }
        if let Err(error) = self.remove().await {
            tracing::warn!(%error, "this node's row could not be removed; the leader removes it after 60 s");
        }
    }

    /// Writes `seen_at_ms` (inserting the row again when the leader took this node for gone,
    /// after folding its counters) and this node's counters.
    async fn beat(&self) -> StoreResult<()> {
        let client = self.pool.get().await.db()?;
        let row = client
            .query_one_cached(
                &format!(
                    "WITH seen AS ( \
                         UPDATE nodes SET seen_at_ms = {DATABASE_NOW_MS} WHERE node_id = $1 \
                         RETURNING 1), \
                     again AS ( \
                         INSERT INTO nodes (node_id, name, started_at_ms, seen_at_ms) \
                         SELECT $1, $2, {DATABASE_NOW_MS}, {DATABASE_NOW_MS} \
                         WHERE NOT EXISTS (SELECT 1 FROM seen) \
                         RETURNING 1) \
                     SELECT EXISTS (SELECT 1 FROM again)"
                ),
                &[&self.node_id, &self.name],
            )
            .await?;
        if row.get::<_, bool>(0) {
            tracing::warn!(node = %self.name, "this node was taken for gone (unseen for 60 s) and registers again");
            self.ledger.was_folded();
        }
        self.ledger.flush(&client, self.node_id).await
    }

    /// The size of the schema's tables, their indexes and TOAST.
    async fn read_size(&self) -> StoreResult<()> {
        let client = self.pool.get().await.db()?;
        let bytes: i64 = client
            .query_one_cached(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')",
                &[&self.schema],
            )
            .await?
            .get(0);
        self.health
            .database_bytes
            .store(bytes.max(0) as u64, Ordering::Relaxed);
        Ok(())
    }

    /// The database's clock against this node's, corrected by half the round trip (§4.5).
    async fn check_clock(&self) -> StoreResult<()> {
        let client = self.pool.get().await.db()?;
        let sent = SystemTime::now();
        let database_ms: i64 = client
            .query_one_cached(&format!("SELECT {DATABASE_NOW_MS}"), &[])
            .await?
            .get(0);
        let received = SystemTime::now();
        let epoch_ms = |at: SystemTime| {
            at.duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as i64)
        };
        let (sent_ms, received_ms) = (epoch_ms(sent), epoch_ms(received));
        let skew_ms = database_ms - (sent_ms + (received_ms - sent_ms) / 2);
        self.health.clock_skew_ms.store(skew_ms, Ordering::Relaxed);
        self.health.has_clock_skew.store(true, Ordering::Relaxed);
        if skew_ms.abs() > CLOCK_SKEW_WARN_MS {
            tracing::warn!(skew_ms, node = %self.name, "this node's clock differs from the database's: leases and delays end that much apart across nodes; keep the clocks in step (NTP)");
        }
        Ok(())
    }

    /// Writes the counters a last time, folds them into the cluster's and removes the row.
    async fn remove(&self) -> StoreResult<()> {
        let mut client = self.pool.get().await.db()?;
        self.ledger.flush(&client, self.node_id).await?;
        let transaction = client.transaction().await.db()?;
        counters::fold_nodes(&transaction, &[self.node_id]).await?;
        transaction
            .execute_cached("DELETE FROM nodes WHERE node_id = $1", &[&self.node_id])
            .await?;
        transaction.commit().await.db()?;
        Ok(())
    }
}
