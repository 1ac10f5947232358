//! Messages an operator takes out before delivery (docs/design/postgres-store.md §2.8): the
//! step a purge of a queue (`QueueStore::queue_purge`, in `queues.rs`), a cancel of one message
//! (`MessageStore::message_cancel`, in `messages.rs`) and the deletion of dead letters share
//! ([`PgStore::finish`]): rows that are not leased become final records (`purged`,
//! `cancelled`, `deleted`), their bodies dropped, their lanes counted down and settled so the
//! next member of a key goes on.
//!
//! A leased message is taken only by a purge of everything (`PurgeScope::Everything`, SQS's
//! `PurgeQueue`): otherwise its consumer may still ack it. Each change is one
//! transaction that locks the lanes of its rows first (lock order, §2.0) and then changes the
//! rows with a plain `UPDATE`, whose `WHERE` PostgreSQL evaluates again on a row another
//! transaction changed meanwhile: a row a claim leased while the purge waited is left alone.

use sluice_core::Millis;
use sluice_core::store::{PurgeScope, StoreResult};
use uuid::Uuid;

use crate::PgStore;
use crate::cache::CachedQueue;
use crate::cached::Cached;
use crate::error::Db;
use crate::messages::{lock_lanes_of, notify_wake, settle};
use crate::queues::LIVE;
use crate::scan::AGED_FROM;

type Transaction<'a> = deadpool_postgres::Transaction<'a>;

/// Rows one purge or dead-letter deletion transaction takes (the rest go in the next one), so
/// a large queue never holds its lanes or a long transaction open.
pub(crate) const CHUNK_ROWS: i64 = 2_000;

/// The states a message may be taken out of: live and not leased.
pub(crate) const UNLEASED: &str = "('waiting', 'ready', 'delayed')";

/// The states a purge of `scope` takes messages out of.
fn purged_states(scope: PurgeScope) -> &'static str {
    match scope {
        PurgeScope::Waiting => UNLEASED,
        PurgeScope::Everything => LIVE,
    }
}

/// A final state a message is taken out into.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Finished {
    Purged,
    Cancelled,
    Deleted,
}

impl Finished {
    fn as_sql(self) -> &'static str {
        match self {
            Finished::Purged => "purged",
            Finished::Cancelled => "cancelled",
            Finished::Deleted => "deleted",
        }
    }
}

impl PgStore {
    /// One chunk of a purge: the unleased messages after position `after` in
    /// `messages_by_age` order (so every chunk starts where the last one ended, whatever was
    /// leased meanwhile). Returns those it took, and the position of the last one it looked at
    /// when a full chunk was read.
    pub(crate) async fn purge_chunk(
        &self,
        queue: &CachedQueue,
        name: &str,
        scope: PurgeScope,
        upto: i64,
        after: (i64, i64),
        now_ms: Millis,
    ) -> StoreResult<(u64, Option<(i64, i64)>)> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let rows = transaction
            .query_cached(
                &format!(
                    "SELECT {AGED_FROM}, m.seq FROM messages m \
                     WHERE m.queue_id = $1 AND m.state IN {states} AND m.seq <= $2 \
                       AND ({AGED_FROM}, m.seq) > ($3::bigint, $4::bigint) \
                     ORDER BY {AGED_FROM}, m.seq LIMIT $5::bigint",
                    states = purged_states(scope)
                ),
                &[&queue.id, &upto, &after.0, &after.1, &CHUNK_ROWS],
            )
            .await?;
        let seqs: Vec<i64> = rows.iter().map(|row| row.get(1)).collect();
        let last = rows
            .last()
            .filter(|_| rows.len() as i64 == CHUNK_ROWS)
            .map(|row| (row.get(0), row.get(1)));
        if seqs.is_empty() {
            return Ok((0, None));
        }
        let take = Take {
            state: Finished::Purged,
            scope,
            ids: None,
            reason: None,
            now_ms,
        };
        let taken = finish(
            &transaction,
            &self.wake_channel,
            queue.id,
            name,
            &seqs,
            take,
        )
        .await?;
        transaction.commit().await.db()?;
        Ok((taken.len() as u64, last))
    }

    /// One try of a cancel: true when the message was live, not leased, and is cancelled now.
    pub(crate) async fn cancel_once(
        &self,
        queue: &CachedQueue,
        name: &str,
        seq: i64,
        id: Uuid,
        reason: Option<&str>,
        now_ms: Millis,
    ) -> StoreResult<bool> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let take = Take {
            state: Finished::Cancelled,
            scope: PurgeScope::Waiting,
            ids: Some(&[id]),
            reason,
            now_ms,
        };
        let taken = finish(
            &transaction,
            &self.wake_channel,
            queue.id,
            name,
            &[seq],
            take,
        )
        .await?;
        transaction.commit().await.db()?;
        Ok(!taken.is_empty())
    }
}

/// How rows are taken out by [`finish`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Take<'a> {
    /// The final state they get.
    pub state: Finished,
    /// Whether leased rows are taken too ([`PurgeScope::Everything`]).
    pub scope: PurgeScope,
    /// Only rows with one of these ids (a message named by its id), when given.
    pub ids: Option<&'a [Uuid]>,
    /// Kept as their last error, when given (a cancel's reason).
    pub reason: Option<&'a str>,
    /// Now.
    pub now_ms: Millis,
}

/// Takes the rows `seqs` of queue `queue_id` (named `name`) that are still live (and not
/// leased, unless `take.scope` is everything) into a final state, inside `transaction`: their lanes are locked first, their bodies
/// and headers dropped; their lanes are counted down and settled (an emptied lane's row goes,
/// a lane left without an active member promotes its next one, and then the queue is announced
/// on `wake_channel`). Returns the seqs taken.
pub(crate) async fn finish(
    transaction: &Transaction<'_>,
    wake_channel: &str,
    queue_id: i32,
    name: &str,
    seqs: &[i64],
    take: Take<'_>,
) -> StoreResult<Vec<i64>> {
    lock_lanes_of(transaction, queue_id, seqs).await?;
    let rows = transaction
        .query_cached(
            &format!(
                "WITH gone AS ( \
                     UPDATE messages \
                     SET state = $3::text::message_state, finished_at_ms = $4, \
                         last_error = coalesce($5, last_error) \
                     WHERE seq = ANY($2) AND queue_id = $1 AND state IN {states} \
                       AND ($6::uuid[] IS NULL OR id = ANY($6)) \
                     RETURNING seq, lane_key), \
                 unloaded AS ( \
                     DELETE FROM payloads p USING gone WHERE p.seq = gone.seq), \
                 leaving AS ( \
                     UPDATE lanes l SET members = l.members - n.leaving \
                     FROM (SELECT lane_key, count(*) AS leaving FROM gone \
                           WHERE lane_key IS NOT NULL GROUP BY lane_key) n \
                     WHERE l.queue_id = $1 AND l.lane_key = n.lane_key) \
                 SELECT seq, lane_key FROM gone",
                states = purged_states(take.scope)
            ),
            &[
                &queue_id,
                &seqs,
                &take.state.as_sql(),
                &take.now_ms,
                &take.reason,
                &take.ids,
            ],
        )
        .await?;
    let mut lanes: Vec<String> = rows
        .iter()
        .filter_map(|row| row.get::<_, Option<String>>(1))
        .collect();
    if !lanes.is_empty() {
        lanes.sort_unstable();
        lanes.dedup();
        settle(transaction, queue_id, &lanes, take.now_ms).await?;
        notify_wake(transaction, wake_channel, name).await?;
    }
    Ok(rows.iter().map(|row| row.get(0)).collect())
}
