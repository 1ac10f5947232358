//! Lanes left by the upkeep's moves (docs/design/postgres-store.md §2.5): members counted out
//! of their lanes and the lanes settled, and the leader's safety net that settles lanes left
//! with members and no active one (which no code path should ever leave).
//!
//! The caller holds the lanes' rows (locked before any message row, §2.0); the settle runs in
//! a statement of its own so it sees what the leaving statement did.

use sluice_core::Millis;
use sluice_core::store::StoreResult;

use crate::cached::Cached;
use crate::messages::{settle, settle_lanes};

type Transaction<'a> = deadpool_postgres::Transaction<'a>;

/// Most lanes one pass of the safety net looks at.
const REPAIR_LANES_MAX: i64 = 1_000;

/// Counts one member out of its lane of queue `queue_id` per entry of `lanes` (a lane named
/// twice loses two), then lets each lane's next member go.
pub(crate) async fn leave(
    transaction: &Transaction<'_>,
    queue_id: i32,
    lanes: &[&str],
    now_ms: Millis,
) -> StoreResult<()> {
    if lanes.is_empty() {
        return Ok(());
    }
    transaction
        .execute_cached(
            "UPDATE lanes l SET members = l.members - n.leaving \
             FROM (SELECT lane_key, count(*) AS leaving FROM unnest($2::text[]) AS lane_key \
                   GROUP BY lane_key) n \
             WHERE l.queue_id = $1 AND l.lane_key = n.lane_key",
            &[&queue_id, &lanes],
        )
        .await?;
    let mut distinct: Vec<String> = lanes.iter().map(|lane| (*lane).to_owned()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    settle(transaction, queue_id, &distinct, now_ms).await
}

/// The safety net (§4.3): lanes with members and no active member, locked (those another
/// transaction holds are skipped: it settles them itself), then settled. Returns the members
/// promoted; any is a bug somewhere, which the caller reports.
pub(crate) async fn repair(transaction: &Transaction<'_>, now_ms: Millis) -> StoreResult<u64> {
    let stuck = transaction
        .query_cached(
            "SELECT l.queue_id, l.lane_key FROM lanes l \
             WHERE l.members > 0 \
               AND NOT EXISTS (SELECT 1 FROM messages a \
                               WHERE a.queue_id = l.queue_id AND a.lane_key = l.lane_key \
                                 AND a.state IN ('ready', 'delayed', 'leased')) \
             ORDER BY l.queue_id, l.lane_key \
             LIMIT $1 \
             FOR UPDATE SKIP LOCKED",
            &[&REPAIR_LANES_MAX],
        )
        .await?;
    if stuck.is_empty() {
        return Ok(0);
    }
    let queue_ids: Vec<i32> = stuck.iter().map(|row| row.get(0)).collect();
    let lanes: Vec<String> = stuck.iter().map(|row| row.get(1)).collect();
    settle_lanes(transaction, &queue_ids, &lanes, &vec![now_ms; lanes.len()]).await
}
