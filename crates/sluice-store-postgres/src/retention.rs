//! Retention in the leader's upkeep (docs/design/postgres-store.md §2.9): messages older than
//! their queue's `max_age_ms` (`rules::retention::cutoff_ms`, counted from when they first became
//! visible or, in a dead-letter queue, from when they died: the `messages_by_age` order) are dropped as
//! `expired` or moved to the dead-letter queue with `MAX_AGE_ERROR`, as
//! `rules::retention::on_expiry` says. A leased message is never selected: it is left to its
//! consumer and looked at again once its lease ends.
//!
//! At most [`RETENTION_ROWS_PER_PASS`] rows per pass over all queues, the queues taken
//! round-robin from where the last full pass stopped, so one queue's backlog cannot starve the
//! others (`Index::expire_from`). Rows are re-checked once locked and rows another transaction
//! holds are skipped, so two nodes running this at once expire each message once.

use std::collections::BTreeMap;

use sluice_core::Millis;
use sluice_core::queue::Ordering;
use sluice_core::rules::retention::{self, Expiry, MAX_AGE_ERROR};
use sluice_core::store::{StoreError, StoreResult};

use crate::PgStore;
use crate::cache::CachedQueue;
use crate::cached::Cached;
use crate::dead_letter_move::{Leaving, Named, move_rows};
use crate::error::Db;
use crate::messages::{lock_lanes_of, notify_wakes};
use crate::scan::AGED_FROM;

/// Most messages one retention pass looks at, over all queues.
pub(crate) const RETENTION_ROWS_PER_PASS: i64 = 5_000;

/// The states retention takes from: live and not leased.
const RETAINED: &str = "('waiting', 'ready', 'delayed')";

impl PgStore {
    /// One retention pass at `now_ms`, starting after the queue named `from` (where the last
    /// pass ran out of budget). Returns where the next pass starts: `None` when this one got
    /// through every queue.
    pub(crate) async fn apply_retention(
        &self,
        now_ms: Millis,
        from: Option<String>,
    ) -> StoreResult<Option<String>> {
        let mut queues = Vec::new();
        {
            let client = self.client().await?;
            let rows = client
                .query_cached(
                    "SELECT id, name FROM queues ORDER BY name COLLATE \"C\"",
                    &[],
                )
                .await?;
            for row in rows {
                let (id, name): (i32, String) = (row.get(0), row.get(1));
                match self.resolve(&name).await {
                    Ok(queue) if queue.id == id => queues.push((name, queue)),
                    Ok(_) | Err(StoreError::QueueNotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
        }
        if let Some(from) = &from {
            let start = queues.partition_point(|(name, _)| name <= from);
            queues.rotate_left(start);
        }
        let ids: Vec<i32> = queues.iter().map(|(_, queue)| queue.id).collect();
        let cutoffs: Vec<Millis> = queues
            .iter()
            .map(|(_, queue)| retention::cutoff_ms(&queue.config, now_ms))
            .collect();
        // The oldest of each queue first, queue after queue, until the budget is spent.
        let candidates = {
            let client = self.client().await?;
            client
                .query_cached(
                    &format!(
                        "SELECT c.queue_id, m.seq FROM unnest($1::int[], $2::bigint[]) \
                             AS c(queue_id, cutoff) \
                         CROSS JOIN LATERAL ( \
                             SELECT m.seq FROM messages m \
                             WHERE m.queue_id = c.queue_id AND m.state IN {RETAINED} \
                               AND {AGED_FROM} <= c.cutoff \
                             ORDER BY {AGED_FROM}, m.seq \
                             LIMIT $3) m \
                         LIMIT $3"
                    ),
                    &[&ids, &cutoffs, &RETENTION_ROWS_PER_PASS],
                )
                .await?
        };
        let spent = candidates.len() as i64 >= RETENTION_ROWS_PER_PASS;
        let mut per_queue: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
        let mut last = None;
        for row in &candidates {
            let queue_id: i32 = row.get(0);
            per_queue.entry(queue_id).or_default().push(row.get(1));
            last = Some(queue_id);
        }
        for (name, queue) in &queues {
            let Some(seqs) = per_queue.remove(&queue.id) else {
                continue;
            };
            let cutoff = retention::cutoff_ms(&queue.config, now_ms);
            self.retry_until_settled(|| self.expire_rows(name, queue, &seqs, cutoff, now_ms))
                .await?;
        }
        Ok(spent
            .then(|| {
                queues
                    .iter()
                    .find(|(_, queue)| Some(queue.id) == last)
                    .map(|(name, _)| name.clone())
            })
            .flatten())
    }

    /// Expires the messages `seqs` of one queue that are still old enough and not leased once
    /// locked, as the queue's `on_expire` says.
    async fn expire_rows(
        &self,
        name: &str,
        queue: &CachedQueue,
        seqs: &[i64],
        cutoff_ms: Millis,
        now_ms: Millis,
    ) -> StoreResult<()> {
        let config = &queue.config;
        let expiry = retention::on_expiry(config);
        let target = match expiry {
            // Made before the moving transaction, as a nack makes it.
            Expiry::DeadLetter { queue: dlq } => Some(self.dead_letter_queue(dlq, now_ms).await?),
            Expiry::Drop => None,
        };
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        if config.ordering != Ordering::Unordered {
            lock_lanes_of(&transaction, queue.id, seqs).await?;
        }
        let rows = transaction
            .query_cached(
                &format!(
                    "SELECT m.seq, m.lane_key, m.msg_key FROM messages m \
                     WHERE m.seq = ANY($1) AND m.queue_id = $2 AND m.state IN {RETAINED} \
                       AND {AGED_FROM} <= $3 \
                     ORDER BY m.seq FOR UPDATE SKIP LOCKED"
                ),
                &[&seqs, &queue.id, &cutoff_ms],
            )
            .await?;
        let leaving: Vec<Leaving> = rows
            .iter()
            .map(|row| Leaving {
                seq: row.get(0),
                lane_key: row.get(1),
                msg_key: row.get(2),
            })
            .collect();
        if leaving.is_empty() {
            return Ok(());
        }
        match (expiry, &target) {
            (Expiry::DeadLetter { queue: dlq }, Some(target)) => {
                move_rows(
                    &transaction,
                    &self.wake_channel,
                    Named { name, queue },
                    &leaving,
                    Named {
                        name: dlq,
                        queue: target,
                    },
                    Some(MAX_AGE_ERROR),
                    now_ms,
                )
                .await?;
            }
            _ => {
                let expired: Vec<i64> = leaving.iter().map(|row| row.seq).collect();
                transaction
                    .execute_cached(
                        "WITH gone AS ( \
                             UPDATE messages SET state = 'expired', finished_at_ms = $2 \
                             WHERE seq = ANY($1) RETURNING seq) \
                         DELETE FROM payloads p USING gone WHERE p.seq = gone.seq",
                        &[&expired, &now_ms],
                    )
                    .await?;
                let lanes: Vec<&str> = leaving
                    .iter()
                    .filter_map(|row| row.lane_key.as_deref())
                    .collect();
                if !lanes.is_empty() {
                    crate::lanes::leave(&transaction, queue.id, &lanes, now_ms).await?;
                    notify_wakes(&transaction, &self.wake_channel, &[name]).await?;
                }
            }
        }
        transaction.commit().await.db()?;
        let count = leaving.len() as u64;
        self.notifier.wake(name);
        self.count(queue.id, |counters| counters.expired += count);
        if let (Expiry::DeadLetter { queue: dlq }, Some(target)) = (expiry, &target) {
            self.notifier.wake(dlq);
            self.count(queue.id, |counters| counters.dead_lettered += count);
            self.count(target.id, |counters| counters.enqueued += count);
        }
        Ok(())
    }
}
