//! Due delays and leases that ran out, in the leader's upkeep, for every queue
//! (docs/design/postgres-store.md §2.7, §4.3). Claims already do the first two for their own
//! queue (U1, U2 of §2.3); the upkeep does them for queues nobody claims from, so depths and
//! browsing stay current, and it alone does the third, which moves lanes:
//!
//! | What | Here |
//! |---|---|
//! | a delay that is due | `ready` (U1) |
//! | a lease that ran out with attempts left, or with no dead-letter queue | retried at once (U2) |
//! | a lease that ran out on the last attempt | `rules::failure::decide` per row, then the dead-letter move of §2.6 |
//!
//! Every statement re-checks its condition on the rows it locked and skips rows another
//! transaction holds, so two nodes running this at once (a leader change under way) split or
//! repeat the work without repeating an effect: a lease is expired once.

use sluice_core::Millis;
use sluice_core::queue::Ordering;
use sluice_core::rules::backoff::random_draw;
use sluice_core::rules::failure::{self, Failure, FailureDecision, LEASE_EXPIRED_ERROR};
use sluice_core::store::{StoreError, StoreResult};

use crate::PgStore;
use crate::cache::CachedQueue;
use crate::cached::Cached;
use crate::dead_letter_move::{Leaving, Named, move_rows};
use crate::error::{Db, is_conflict};
use crate::messages::{lock_lanes_of, notify_wakes, ready_due};

/// Most leases one upkeep pass moves to dead-letter queues, over all queues; the rest go with
/// the next pass (500 ms later on the server).
pub(crate) const DEAD_LETTER_ROWS_PER_PASS: i64 = 5_000;
/// Times a transaction that failed with a deadlock or serialization failure is tried again.
const RETRIES: usize = 3;

impl PgStore {
    /// Due delays and expired leases of every queue that has some, at `now_ms`.
    pub(crate) async fn expire_due(&self, now_ms: Millis) -> StoreResult<()> {
        let due = {
            let client = self.client().await?;
            client
                .query_cached(
                    "SELECT q.id, q.name FROM queues q \
                     WHERE EXISTS (SELECT 1 FROM messages m WHERE m.queue_id = q.id \
                                     AND m.state = 'delayed' AND m.visible_at_ms <= $1) \
                        OR EXISTS (SELECT 1 FROM messages m WHERE m.queue_id = q.id \
                                     AND m.state = 'leased' AND m.lease_expires_at_ms <= $1) \
                     ORDER BY q.id",
                    &[&now_ms],
                )
                .await?
        };
        let mut budget = DEAD_LETTER_ROWS_PER_PASS;
        for row in due {
            let (id, name): (i32, String) = (row.get(0), row.get(1));
            let queue = match self.resolve(&name).await {
                Ok(queue) if queue.id == id => queue,
                // Deleted (or deleted and made again) since: its rows are the cleanup's.
                Ok(_) | Err(StoreError::QueueNotFound(_)) => continue,
                Err(error) => return Err(error),
            };
            self.retry_until_settled(|| self.ready_due_of(&name, &queue, now_ms))
                .await?;
            let config = &queue.config;
            if budget > 0 && config.max_attempts > 0 && config.dead_letter_queue.is_some() {
                budget -= self
                    .retry_until_settled(|| self.dead_letter_expired(&name, &queue, now_ms, budget))
                    .await?;
            }
        }
        Ok(())
    }

    /// U1 and U2 of §2.3 for one queue, in a transaction of their own (message rows only, no
    /// lanes: the claim path's statements), then a wake-up for its waiters on every node.
    async fn ready_due_of(
        &self,
        name: &str,
        queue: &CachedQueue,
        now_ms: Millis,
    ) -> StoreResult<()> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let expired = ready_due(&transaction, queue.id, &queue.config, now_ms).await?;
        notify_wakes(&transaction, &self.wake_channel, &[name]).await?;
        transaction.commit().await.db()?;
        self.notifier.wake(name);
        self.count(queue.id, |counters| counters.lease_expired += expired);
        Ok(())
    }

    /// Leases of one queue that ran out on their last attempt (U2 left them leased), at most
    /// `budget`: each one's fate from `rules::failure::decide`, then the dead-letter move.
    /// Returns the leases expired.
    async fn dead_letter_expired(
        &self,
        name: &str,
        queue: &CachedQueue,
        now_ms: Millis,
        budget: i64,
    ) -> StoreResult<i64> {
        let config = &queue.config;
        let Some(dlq) = config.dead_letter_queue.as_deref() else {
            return Ok(0);
        };
        let candidates: Vec<i64> = {
            let client = self.client().await?;
            client
                .query_cached(
                    "SELECT seq FROM messages \
                     WHERE queue_id = $1 AND state = 'leased' AND lease_expires_at_ms <= $2 \
                     ORDER BY lease_expires_at_ms, seq LIMIT $3",
                    &[&queue.id, &now_ms, &budget],
                )
                .await?
                .iter()
                .map(|row| row.get(0))
                .collect()
        };
        if candidates.is_empty() {
            return Ok(0);
        }
        // Made before the moving transaction, as a nack makes it.
        let target = self.dead_letter_queue(dlq, now_ms).await?;

        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        if config.ordering != Ordering::Unordered {
            lock_lanes_of(&transaction, queue.id, &candidates).await?;
        }
        // The re-check on the locked rows: a lease acked, extended or expired by another node
        // since the candidates were read is not this pass's any more.
        let rows = transaction
            .query_cached(
                "SELECT seq, attempts, lane_key, msg_key FROM messages \
                 WHERE seq = ANY($1) AND queue_id = $2 AND state = 'leased' \
                   AND lease_expires_at_ms <= $3 \
                 ORDER BY seq FOR UPDATE SKIP LOCKED",
                &[&candidates, &queue.id, &now_ms],
            )
            .await?;
        let mut leaving = Vec::new();
        let (mut retried, mut retry_at) = (Vec::new(), Vec::new());
        for row in &rows {
            let attempts: i32 = row.get(1);
            let decision = failure::decide(
                config,
                attempts.max(0) as u32,
                Failure::LeaseExpired,
                now_ms,
                random_draw,
            );
            match decision {
                Ok(FailureDecision::DeadLetter { .. }) => leaving.push(Leaving {
                    seq: row.get(0),
                    lane_key: row.get(2),
                    msg_key: row.get(3),
                }),
                // The definition changed since U2 ran (more attempts allowed): a retry, as U2.
                Ok(FailureDecision::Retry { at_ms }) => {
                    retried.push(row.get::<_, i64>(0));
                    retry_at.push(at_ms);
                }
                Err(failure::NoDeadLetterQueue) => {
                    retried.push(row.get::<_, i64>(0));
                    retry_at.push(now_ms);
                }
            }
        }
        if !retried.is_empty() {
            transaction
                .execute_cached(
                    "UPDATE messages m \
                     SET state = CASE WHEN r.at_ms <= $2 THEN 'ready'::message_state \
                                      ELSE 'delayed' END, \
                         visible_at_ms = r.at_ms, lease_expires_at_ms = NULL, \
                         last_error = $3::text, \
                         failures = coalesce(m.failures, '[]'::jsonb) || jsonb_build_object( \
                             'attempt', m.attempts, 'at', $2::bigint, 'error', $3::text) \
                     FROM unnest($1::bigint[], $4::bigint[]) AS r(seq, at_ms) \
                     WHERE m.seq = r.seq",
                    &[&retried, &now_ms, &LEASE_EXPIRED_ERROR, &retry_at],
                )
                .await?;
            notify_wakes(&transaction, &self.wake_channel, &[name]).await?;
        }
        move_rows(
            &transaction,
            &self.wake_channel,
            Named { name, queue },
            &leaving,
            Named {
                name: dlq,
                queue: &target,
            },
            Some(LEASE_EXPIRED_ERROR),
            now_ms,
        )
        .await?;
        transaction.commit().await.db()?;
        let (expired, moved) = (rows.len() as u64, leaving.len() as u64);
        self.notifier.wake(name);
        if moved > 0 {
            self.notifier.wake(dlq);
            self.count(target.id, |counters| counters.enqueued += moved);
        }
        self.count(queue.id, |counters| {
            counters.lease_expired += expired;
            counters.dead_lettered += moved;
        });
        Ok(rows.len() as i64)
    }

    /// Runs `attempt` again (at most [`RETRIES`] times) while it fails with a deadlock or a
    /// serialization failure; nothing of a failed attempt was committed.
    pub(crate) async fn retry_until_settled<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = StoreResult<T>>,
    {
        let mut tries = 0;
        loop {
            match attempt().await {
                Err(error) if is_conflict(&error) && tries < RETRIES => tries += 1,
                outcome => return outcome,
            }
        }
    }
}
