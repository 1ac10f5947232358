//! The dead-letter move (docs/design/postgres-store.md §2.6): one routine for the three ways a
//! message reaches its dead-letter queue, a nack that ends its attempts, a lease that runs out
//! on the last attempt (the leader's upkeep), and retention with `on_expire = dead_letter`.
//!
//! It runs inside the caller's transaction, which holds the source lanes of the rows and the
//! rows themselves: the rows become messages of the dead-letter queue with the metadata of
//! `Index::dead_letter` and the failure-log entry the SQLite writer appends, their source lanes
//! count them out and let their next members go, and they join their lanes in the dead-letter
//! queue when that queue is ordered. It never decides *whether* a message dies; the callers ask
//! `rules::failure` or `rules::retention` for that.

use std::collections::BTreeMap;
use std::sync::Arc;

use sluice_core::Millis;
use sluice_core::queue::QueueConfig;
use sluice_core::rules::lanes::lane_key;
use sluice_core::store::{QueuePutParams, QueueStore, StoreError, StoreResult};

use crate::PgStore;
use crate::cache::CachedQueue;
use crate::cached::Cached;
use crate::messages::notify_wakes;

type Transaction<'a> = deadpool_postgres::Transaction<'a>;

/// A message leaving its queue for the dead-letter queue: its row, its lane in the source
/// queue, and its key (which names its lane in an ordered dead-letter queue).
#[derive(Debug, Clone)]
pub(crate) struct Leaving {
    pub seq: i64,
    pub lane_key: Option<String>,
    pub msg_key: Option<String>,
}

/// A queue by name and as cached.
#[derive(Clone, Copy)]
pub(crate) struct Named<'a> {
    pub name: &'a str,
    pub queue: &'a CachedQueue,
}

/// Moves `rows` of `source` to the dead-letter queue `target` with `error` as their last error
/// (§2.6). The caller's transaction holds the source lanes of the rows (locked first, the lock
/// order of §2.0) and the rows. Sends the wake-ups of both queues at commit.
pub(crate) async fn move_rows(
    transaction: &Transaction<'_>,
    wake_channel: &str,
    source: Named<'_>,
    rows: &[Leaving],
    target: Named<'_>,
    error: Option<&str>,
    now_ms: Millis,
) -> StoreResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut rows = rows.to_vec();
    rows.sort_by_key(|row| row.seq);
    let target_lanes: Vec<Option<String>> = rows
        .iter()
        .map(|row| {
            let key = row.msg_key.as_deref().map(Arc::<str>::from);
            lane_key(target.queue.config.ordering, key.as_ref()).map(|lane| lane.to_string())
        })
        .collect();
    let states = join_target_lanes(transaction, target.queue.id, &target_lanes).await?;

    let seqs: Vec<i64> = rows.iter().map(|row| row.seq).collect();
    transaction
        .execute_cached(
            "UPDATE messages m \
             SET queue_id = $2, state = x.state::message_state, lane_key = x.lane_key, \
                 attempts = 0, first_received_at_ms = NULL, visible_at_ms = $3, \
                 last_error = $4::text, lease_token = NULL, lease_expires_at_ms = NULL, \
                 dead_source_queue = $5, dead_last_error = $4::text, \
                 dead_attempts = m.attempts, \
                 dead_first_seen_at_ms = coalesce(m.first_received_at_ms, m.enqueued_at_ms), \
                 dead_last_seen_at_ms = $3, \
                 failures = coalesce(m.failures, '[]'::jsonb) || jsonb_build_object( \
                     'attempt', m.attempts, 'at', $3::bigint, 'error', $4::text, \
                     'dead_lettered', true) \
             FROM unnest($1::bigint[], $6::text[], $7::text[]) AS x(seq, state, lane_key) \
             WHERE m.seq = x.seq",
            &[
                &seqs,
                &target.queue.id,
                &now_ms,
                &error,
                &source.name,
                &states,
                &target_lanes,
            ],
        )
        .await?;

    // The source lanes count their leavers out, then let their next members go.
    let left: Vec<&str> = rows
        .iter()
        .filter_map(|row| row.lane_key.as_deref())
        .collect();
    crate::lanes::leave(transaction, source.queue.id, &left, now_ms).await?;
    let mut woken = vec![source.name, target.name];
    woken.sort_unstable();
    woken.dedup();
    notify_wakes(transaction, wake_channel, &woken).await
}

/// Joins the rows' lanes in the dead-letter queue (in key order), and says per row, in seq
/// order, the state it enters: `waiting` behind its lane's active member, else `ready` (a lane
/// that was empty makes its first joining row active, §2.5).
async fn join_target_lanes(
    transaction: &Transaction<'_>,
    target_id: i32,
    lanes: &[Option<String>],
) -> StoreResult<Vec<&'static str>> {
    let mut joining: BTreeMap<&str, i64> = BTreeMap::new();
    for lane in lanes.iter().flatten() {
        *joining.entry(lane).or_default() += 1;
    }
    let mut was_empty: BTreeMap<String, bool> = BTreeMap::new();
    if !joining.is_empty() {
        let (keys, counts): (Vec<&str>, Vec<i64>) = joining.iter().map(|(k, n)| (*k, *n)).unzip();
        let joined = transaction
            .query_cached(
                "INSERT INTO lanes (queue_id, lane_key, members) \
                 SELECT $1, lane_key, n FROM unnest($2::text[], $3::bigint[]) AS j(lane_key, n) \
                 ORDER BY lane_key \
                 ON CONFLICT (queue_id, lane_key) DO UPDATE \
                     SET members = lanes.members + excluded.members \
                 RETURNING lane_key, members",
                &[&target_id, &keys, &counts],
            )
            .await?;
        for row in joined {
            let lane: String = row.get(0);
            let members: i64 = row.get(1);
            let added = joining.get(lane.as_str()).copied().unwrap_or(0);
            was_empty.insert(lane, members == added);
        }
    }
    Ok(lanes
        .iter()
        .map(|lane| match lane {
            None => "ready",
            Some(lane) => match was_empty.get_mut(lane) {
                // The first row of a lane that was empty is its active member.
                Some(empty @ true) => {
                    *empty = false;
                    "ready"
                }
                _ => "waiting",
            },
        })
        .collect())
}

impl PgStore {
    /// The dead-letter queue `name`, created as the index creates it when it is missing (a
    /// queue deleted after another named it); called before the moving transaction starts.
    pub(crate) async fn dead_letter_queue(
        &self,
        name: &str,
        now_ms: Millis,
    ) -> StoreResult<CachedQueue> {
        match self.resolve(name).await {
            Err(StoreError::QueueNotFound(_)) => {
                self.queue_put(QueuePutParams {
                    name: name.to_owned(),
                    config: QueueConfig::for_dead_letter_queue(name),
                    now_ms,
                })
                .await?;
                self.resolve(name).await
            }
            found => found,
        }
    }
}
