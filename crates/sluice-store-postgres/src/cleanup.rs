//! The leader's cleanup (docs/design/postgres-store.md §2.9, §4.2): what no rule needs any
//! more leaves the database in bounded chunks, each statement its own transaction.
//!
//! - final records (acked, expired, cancelled, ...) older than `acked_retention_ms`, through
//!   `messages_finished`, which holds no row while it is kept;
//! - keeps that ended (acked messages of a queue with `keep_acked_ms`, migration 6), through
//!   `messages_kept_until`: the payload goes, and the row with it once it is also older than
//!   `acked_retention_ms`, else it becomes an ordinary final record (reads stopped showing its
//!   body at `kept_until_ms` already, whenever this runs);
//! - idempotency keys whose window ended (a key answers only within its window anyway);
//! - expired dashboard sessions;
//! - live rows of deleted queues (`queue_delete` removes the first chunk; their id is never
//!   used again), found by a skip scan of the queue ids in `messages_by_age` rather than a scan
//!   of the table, and their kept rows likewise in `messages_kept`, so a deleted queue's kept
//!   bodies do not wait for their keep to end; and the per-queue rows (`queue_stats`,
//!   `queue_counters`) of deleted queues;
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
/// Ended keeps one chunk finishes: fewer than records, since each deletes a body.
const KEPT_ROWS_PER_CHUNK: i64 = 5_000;
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
                         WHERE finished_at_ms IS NOT NULL AND kept_until_ms IS NULL \
                           AND finished_at_ms < $1 \
                         ORDER BY finished_at_ms LIMIT $2), \
                     {DELETE_DOOMED_SQL}"
                ),
                &[&finished_before_ms, &FINISHED_ROWS_PER_CHUNK],
            )
            .await?;
        let kept: i64 = client
            .query_one_cached(
                KEEPS_ENDED_SQL,
                &[&now_ms, &finished_before_ms, &KEPT_ROWS_PER_CHUNK],
            )
            .await?
            .get(0);
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
        let mut orphans = 0;
        for rows in [
            format!("state IN {LIVE}"),
            "kept_until_ms IS NOT NULL".to_owned(),
        ] {
            orphans += client
                .execute_cached(
                    &format!(
                        "WITH RECURSIVE ids AS ( \
                             (SELECT queue_id FROM messages WHERE {rows} \
                              ORDER BY queue_id LIMIT 1) \
                             UNION ALL \
                             SELECT (SELECT m.queue_id FROM messages m \
                                     WHERE m.{rows} AND m.queue_id > ids.queue_id \
                                     ORDER BY m.queue_id LIMIT 1) \
                             FROM ids WHERE ids.queue_id IS NOT NULL), \
                         gone AS ( \
                             SELECT queue_id FROM ids \
                             WHERE queue_id IS NOT NULL \
                               AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.id = ids.queue_id)), \
                         doomed AS ( \
                             SELECT seq FROM messages \
                             WHERE queue_id IN (SELECT queue_id FROM gone) AND {rows} \
                             LIMIT $1), \
                         {DELETE_DOOMED_SQL}"
                    ),
                    &[&ORPHAN_ROWS_PER_CHUNK],
                )
                .await?;
        }
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
            || kept >= KEPT_ROWS_PER_CHUNK
            || keys as i64 >= KEYS_PER_CHUNK
            || sessions as i64 >= KEYS_PER_CHUNK
            || orphans as i64 >= ORPHAN_ROWS_PER_CHUNK)
    }
}

/// One chunk of keeps that ended by `$1` (now), in the order they ended: each payload goes;
/// a row finished before `$2` (past the retention of final records too) goes with it, any
/// other stays as an ordinary final record. At most `$3` rows; returns how many. Safe on two
/// nodes at once: a row deleted or cleared twice is deleted or cleared once.
pub(crate) const KEEPS_ENDED_SQL: &str = "WITH ended AS ( \
         SELECT seq, finished_at_ms < $2 AS is_done FROM messages \
         WHERE kept_until_ms IS NOT NULL AND kept_until_ms <= $1 \
         ORDER BY kept_until_ms LIMIT $3), \
     unloaded AS (DELETE FROM payloads WHERE seq IN (SELECT seq FROM ended)), \
     gone AS (DELETE FROM messages WHERE seq IN (SELECT seq FROM ended WHERE is_done)), \
     unkept AS ( \
         UPDATE messages SET kept_until_ms = NULL \
         WHERE seq IN (SELECT seq FROM ended WHERE NOT is_done)) \
     SELECT count(*) FROM ended";
