//! Counters shared by the nodes (docs/design/postgres-store.md §2.11): each node counts in its
//! own memory (the message path and the upkeep call `PgStore::count`) and writes its totals
//! into `queue_counters` once a second, one row per (queue, node), with one multi-row upsert.
//! A queue's counters are then this node's in memory (exact) plus every other row (at most a
//! second behind): the other nodes', the `nil` node's (where the totals of nodes that left are
//! folded, so they stay in the cluster's counts) and `queue_counter_deltas` (`sluice.enqueue`'s).
//!
//! A node declared gone by the leader (unseen for 60 s, `crate::cleanup`) while it still runs
//! has had its row folded into `nil`: it then counts only what came after ([`Ledger::folded`]),
//! so nothing is counted twice.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_core::store::Counters;
use sluice_core::store::StoreResult;
use uuid::Uuid;

use crate::cached::Cached;

/// The counter columns, in the order [`values`] gives them.
const COLUMNS: &str = "enqueued, delivered, acked, nacked, dead_lettered, lease_expired, expired, rejected, cancelled, purged, deduplicated";

/// How many counters there are.
const COUNTERS: usize = 11;

/// The row counters of the nodes that left are folded into.
pub(crate) const NIL_NODE: Uuid = Uuid::nil();

/// A [`Counters`] as its eleven values, in [`COLUMNS`] order.
fn values(counters: &Counters) -> [u64; COUNTERS] {
    [
        counters.enqueued,
        counters.delivered,
        counters.acked,
        counters.nacked,
        counters.dead_lettered,
        counters.lease_expired,
        counters.expired,
        counters.rejected,
        counters.cancelled,
        counters.purged,
        counters.deduplicated,
    ]
}

fn from_values(v: [u64; COUNTERS]) -> Counters {
    Counters {
        enqueued: v[0],
        delivered: v[1],
        acked: v[2],
        nacked: v[3],
        dead_lettered: v[4],
        lease_expired: v[5],
        expired: v[6],
        rejected: v[7],
        cancelled: v[8],
        purged: v[9],
        deduplicated: v[10],
    }
}

/// `a + b`, counter by counter.
pub(crate) fn plus(a: &Counters, b: &Counters) -> Counters {
    let (a, b) = (values(a), values(b));
    from_values(std::array::from_fn(|i| a[i].saturating_add(b[i])))
}

/// `a - b`, counter by counter (never below 0).
fn minus(a: &Counters, b: &Counters) -> Counters {
    let (a, b) = (values(a), values(b));
    from_values(std::array::from_fn(|i| a[i].saturating_sub(b[i])))
}

/// This node's counters: what it counted since it opened, and what of that the cluster already
/// holds elsewhere.
#[derive(Default)]
pub(crate) struct Ledger {
    /// Counted since open, per queue id (shared with the writers).
    pub live: Arc<Mutex<HashMap<i32, Counters>>>,
    /// Of `live`, what the leader folded into the `nil` row when it took this node for gone.
    folded: Mutex<HashMap<i32, Counters>>,
    /// What the last flush wrote (this node's row), to skip a flush that would change nothing.
    flushed: Mutex<HashMap<i32, Counters>>,
}

impl Ledger {
    /// This node's counters of a queue that no row holds yet: `live` less what was folded.
    pub(crate) fn own(&self, queue_id: i32) -> Counters {
        let live = self.live.lock().get(&queue_id).copied().unwrap_or_default();
        let folded = self
            .folded
            .lock()
            .get(&queue_id)
            .copied()
            .unwrap_or_default();
        minus(&live, &folded)
    }

    /// Writes this node's counters into its `queue_counters` rows (only queues that still
    /// exist, and only when something changed since the last flush).
    pub(crate) async fn flush(
        &self,
        client: &deadpool_postgres::Client,
        node_id: Uuid,
    ) -> StoreResult<()> {
        let own: HashMap<i32, Counters> = {
            let live = self.live.lock();
            let folded = self.folded.lock();
            live.iter()
                .map(|(&id, counters)| {
                    let folded = folded.get(&id).copied().unwrap_or_default();
                    (id, minus(counters, &folded))
                })
                .collect()
        };
        if own == *self.flushed.lock() {
            return Ok(());
        }
        let ids: Vec<i32> = own.keys().copied().collect();
        let columns: Vec<Vec<i64>> = (0..COUNTERS)
            .map(|i| {
                ids.iter()
                    .map(|id| i64::try_from(values(&own[id])[i]).unwrap_or(i64::MAX))
                    .collect()
            })
            .collect();
        client
            .execute_cached(
                &format!(
                    "INSERT INTO queue_counters (queue_id, node_id, {COLUMNS}) \
                     SELECT u.queue_id, $2, u.c0, u.c1, u.c2, u.c3, u.c4, u.c5, u.c6, u.c7, u.c8, u.c9, u.c10 \
                     FROM unnest($1::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], \
                                 $7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], \
                                 $11::bigint[], $12::bigint[], $13::bigint[]) \
                          AS u(queue_id, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10) \
                     WHERE EXISTS (SELECT 1 FROM queues q WHERE q.id = u.queue_id) \
                     ORDER BY u.queue_id \
                     ON CONFLICT (queue_id, node_id) DO UPDATE SET \
                         enqueued = excluded.enqueued, delivered = excluded.delivered, \
                         acked = excluded.acked, nacked = excluded.nacked, \
                         dead_lettered = excluded.dead_lettered, \
                         lease_expired = excluded.lease_expired, expired = excluded.expired, \
                         rejected = excluded.rejected, cancelled = excluded.cancelled, \
                         purged = excluded.purged, deduplicated = excluded.deduplicated"
                ),
                &[
                    &ids,
                    &node_id,
                    &columns[0],
                    &columns[1],
                    &columns[2],
                    &columns[3],
                    &columns[4],
                    &columns[5],
                    &columns[6],
                    &columns[7],
                    &columns[8],
                    &columns[9],
                    &columns[10],
                ],
            )
            .await?;
        *self.flushed.lock() = own;
        Ok(())
    }

    /// The leader took this node for gone and folded its row: what that row held is the
    /// cluster's now, so this node counts only what comes after.
    pub(crate) fn was_folded(&self) {
        let flushed = std::mem::take(&mut *self.flushed.lock());
        let mut folded = self.folded.lock();
        for (id, counters) in flushed {
            let entry = folded.entry(id).or_default();
            *entry = plus(entry, &counters);
        }
    }
}

/// The counters of queue `queue_id` (or of every queue) that other rows hold: the other nodes'
/// flushed totals, the `nil` row of nodes that left, and `sluice.enqueue`'s deltas.
pub(crate) async fn others(
    client: &deadpool_postgres::Client,
    node_id: Uuid,
    queue_id: Option<i32>,
) -> StoreResult<HashMap<i32, Counters>> {
    let rows = client
        .query_cached(
            "SELECT queue_id, sum(enqueued)::bigint, sum(delivered)::bigint, sum(acked)::bigint, \
                    sum(nacked)::bigint, sum(dead_lettered)::bigint, sum(lease_expired)::bigint, \
                    sum(expired)::bigint, sum(rejected)::bigint, sum(cancelled)::bigint, \
                    sum(purged)::bigint, sum(deduplicated)::bigint \
             FROM (SELECT queue_id, enqueued, delivered, acked, nacked, dead_lettered, \
                          lease_expired, expired, rejected, cancelled, purged, deduplicated \
                   FROM queue_counters \
                   WHERE node_id <> $1 AND ($2::int IS NULL OR queue_id = $2) \
                   UNION ALL \
                   SELECT queue_id, enqueued, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 FROM queue_counter_deltas \
                   WHERE $2::int IS NULL OR queue_id = $2) c \
             GROUP BY queue_id",
            &[&node_id, &queue_id],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let counters = from_values(std::array::from_fn(|i| {
                row.get::<_, i64>(i + 1).max(0) as u64
            }));
            (row.get(0), counters)
        })
        .collect())
}

/// Folds the counters rows of `nodes` into the `nil` row and deletes them, inside the caller's
/// transaction: the totals of nodes that left stay in the cluster's counters.
pub(crate) async fn fold_nodes(
    transaction: &deadpool_postgres::Transaction<'_>,
    nodes: &[Uuid],
) -> StoreResult<()> {
    transaction
        .execute_cached(
            &format!(
                "WITH gone AS ( \
                     DELETE FROM queue_counters WHERE node_id = ANY($1) \
                     RETURNING queue_id, {COLUMNS}) \
                 INSERT INTO queue_counters AS c (queue_id, node_id, {COLUMNS}) \
                 SELECT queue_id, $2, sum(enqueued), sum(delivered), sum(acked), sum(nacked), \
                        sum(dead_lettered), sum(lease_expired), sum(expired), sum(rejected), \
                        sum(cancelled), sum(purged), sum(deduplicated) \
                 FROM gone GROUP BY queue_id ORDER BY queue_id \
                 ON CONFLICT (queue_id, node_id) DO UPDATE SET \
                     enqueued = c.enqueued + excluded.enqueued, \
                     delivered = c.delivered + excluded.delivered, \
                     acked = c.acked + excluded.acked, nacked = c.nacked + excluded.nacked, \
                     dead_lettered = c.dead_lettered + excluded.dead_lettered, \
                     lease_expired = c.lease_expired + excluded.lease_expired, \
                     expired = c.expired + excluded.expired, \
                     rejected = c.rejected + excluded.rejected, \
                     cancelled = c.cancelled + excluded.cancelled, \
                     purged = c.purged + excluded.purged, \
                     deduplicated = c.deduplicated + excluded.deduplicated"
            ),
            &[&nodes, &NIL_NODE],
        )
        .await?;
    Ok(())
}

/// Folds `sluice.enqueue`'s appended deltas into the `nil` row (the leader's cleanup), so the
/// table stays small.
pub(crate) async fn fold_deltas(
    transaction: &deadpool_postgres::Transaction<'_>,
) -> StoreResult<()> {
    transaction
        .execute_cached(
            "WITH taken AS (DELETE FROM queue_counter_deltas RETURNING queue_id, enqueued) \
             INSERT INTO queue_counters AS c (queue_id, node_id, enqueued) \
             SELECT queue_id, $1, sum(enqueued) FROM taken \
             WHERE EXISTS (SELECT 1 FROM queues q WHERE q.id = taken.queue_id) \
             GROUP BY queue_id ORDER BY queue_id \
             ON CONFLICT (queue_id, node_id) DO UPDATE SET enqueued = c.enqueued + excluded.enqueued",
            &[&NIL_NODE],
        )
        .await?;
    Ok(())
}
