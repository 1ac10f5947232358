//! The leader's cleanup (docs/design/postgres-store.md §2.9, §4.2): what no rule needs any
//! more leaves the database in bounded chunks, each statement its own transaction.
//!
//! - final records (acked, expired, cancelled, ...) older than `acked_retention_ms`, through
//!   `messages_finished`;
//! - idempotency keys whose window ended (a key answers only within its window anyway);
//! - expired dashboard sessions;
//! - live rows of deleted queues (`queue_delete` removes the first chunk; their id is never
//!   used again), found by a skip scan of the queue ids in `messages_by_age` rather than a scan
//!   of the table; and the per-queue rows (`queue_stats`, `queue_counters`) of deleted queues;
//! - `sluice.enqueue`'s counter deltas, folded into the `nil` node's counters;
//! - nodes unseen for [`NODE_GONE_AFTER_MS`] (by the database's clock), their counters folded
//!   into the `nil` node's first so the cluster's totals keep them.
//!
//! Every statement is safe to run on two nodes at once: a row deleted twice is deleted once.

use sluice_core::Millis;
use sluice_core::store::StoreResult;
use uuid::Uuid;

use crate::PgStore;
use crate::cached::Cached;
use crate::counters;
use crate::error::Db;
use crate::messages::DELETE_DOOMED_SQL;
use crate::nodes::DATABASE_NOW_MS;
use crate::queues::LIVE;

/// Final records one chunk deletes.
const FINISHED_ROWS_PER_CHUNK: i64 = 20_000;
/// Idempotency keys (and sessions) one chunk deletes.
const KEYS_PER_CHUNK: i64 = 20_000;
/// Rows of deleted queues one chunk deletes.
const ORPHAN_ROWS_PER_CHUNK: i64 = 2_000;
/// A node whose row was not written for this long is gone (§4.2).
pub(crate) const NODE_GONE_AFTER_MS: Millis = 60_000;

impl PgStore {
    /// One chunk of each kind of cleanup at `now_ms`. Returns true when a chunk was full, so
    /// the next pass should not wait for its interval.
    pub(crate) async fn clean_up(&self, now_ms: Millis) -> StoreResult<bool> {
        let finished_before_ms = now_ms.saturating_sub(self.options.acked_retention_ms);
        let mut client = self.client().await?;
        let finished = client
            .execute_cached(
                &format!(
                    "WITH doomed AS ( \
                         SELECT seq FROM messages \
                         WHERE finished_at_ms IS NOT NULL AND finished_at_ms < $1 \
                         ORDER BY finished_at_ms LIMIT $2), \
                     {DELETE_DOOMED_SQL}"
                ),
                &[&finished_before_ms, &FINISHED_ROWS_PER_CHUNK],
            )
            .await?;
        let keys = client
            .execute_cached(
                "DELETE FROM idempotency WHERE (queue_id, key) IN ( \
                     SELECT queue_id, key FROM idempotency WHERE expires_at_ms < $1 \
                     ORDER BY expires_at_ms LIMIT $2)",
                &[&now_ms, &KEYS_PER_CHUNK],
            )
            .await?;
        let sessions = client
            .execute_cached(
                "DELETE FROM sessions WHERE id_digest IN ( \
                     SELECT id_digest FROM sessions WHERE expires_at_ms < $1 \
                     ORDER BY expires_at_ms LIMIT $2)",
                &[&now_ms, &KEYS_PER_CHUNK],
            )
            .await?;
        let orphans = client
            .execute_cached(
                &format!(
                    "WITH RECURSIVE ids AS ( \
                         (SELECT queue_id FROM messages WHERE state IN {LIVE} \
                          ORDER BY queue_id LIMIT 1) \
                         UNION ALL \
                         SELECT (SELECT m.queue_id FROM messages m \
                                 WHERE m.state IN {LIVE} AND m.queue_id > ids.queue_id \
                                 ORDER BY m.queue_id LIMIT 1) \
                         FROM ids WHERE ids.queue_id IS NOT NULL), \
                     gone AS ( \
                         SELECT queue_id FROM ids \
                         WHERE queue_id IS NOT NULL \
                           AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = ids.queue_id)), \
                     doomed AS ( \
                         SELECT seq FROM messages \
                         WHERE queue_id IN (SELECT queue_id FROM gone) AND state IN {LIVE} \
                         LIMIT $1), \
                     {DELETE_DOOMED_SQL}"
                ),
                &[&ORPHAN_ROWS_PER_CHUNK],
            )
            .await?;
        client
            .batch_execute(
                "DELETE FROM queue_stats s \
                 WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = s.queue_id); \
                 DELETE FROM queue_counters c \
                 WHERE NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = c.queue_id);",
            )
            .await
            .db()?;

        let transaction = client.transaction().await.db()?;
        counters::fold_deltas(&transaction).await?;
        let gone: Vec<Uuid> = transaction
            .query_cached(
                &format!(
                    "SELECT node_id FROM nodes WHERE seen_at_ms < {DATABASE_NOW_MS} - $1 \
                     ORDER BY node_id FOR UPDATE SKIP LOCKED"
                ),
                &[&NODE_GONE_AFTER_MS],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if !gone.is_empty() {
            counters::fold_nodes(&transaction, &gone).await?;
            transaction
                .execute_cached("DELETE FROM nodes WHERE node_id = ANY($1)", &[&gone])
                .await?;
            tracing::info!(
                nodes = gone.len(),
                "nodes unseen for 60 s were removed; their counters stay in the cluster's"
            );
        }
        transaction.commit().await.db()?;
        Ok(finished as i64 >= FINISHED_ROWS_PER_CHUNK
            || keys as i64 >= KEYS_PER_CHUNK
            || sessions as i64 >= KEYS_PER_CHUNK
            || orphans as i64 >= ORPHAN_ROWS_PER_CHUNK)
    }
}
