//! The leader's count of every queue (docs/design/postgres-store.md §2.11, §4.3): once a second
//! it writes each queue's four counts and its oldest ready message into `queue_stats`, so the
//! cheap reads (`queue_list`, every 500 ms by each node's push supervisor and the dashboard's
//! sampler, and an enqueue's `position`) read one small row per queue instead of counting live
//! messages on every node. `queue_get` still counts exactly.
//!
//! A count that took long spaces the next ones out ([`next_count_in_ms`]), so counting never
//! takes more than a tenth of the database's time however many messages are held.

use std::collections::HashMap;

use sluice_core::Millis;
use sluice_core::store::StoreResult;

use crate::cached::Cached;

/// The counts of the queue `q.id`, as the select list of a `LATERAL` subquery: the four states,
/// each an index-only count of its partial index, and the oldest ready message by a skip scan
/// over priorities (one probe per priority, §2.11).
pub(crate) const COUNTS_OF_Q: &str = "SELECT \
     (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND m.state = 'ready') AS ready, \
     (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND m.state = 'waiting') AS waiting, \
     (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND m.state = 'delayed') AS delayed, \
     (SELECT count(*) FROM messages m WHERE m.queue_id = q.id AND m.state = 'leased') AS leased, \
     (WITH RECURSIVE p AS ( \
          (SELECT priority, seq FROM messages \
           WHERE queue_id = q.id AND state = 'ready' ORDER BY priority DESC, seq LIMIT 1) \
          UNION ALL \
          SELECT n.priority, n.seq FROM p CROSS JOIN LATERAL ( \
              SELECT priority, seq FROM messages \
              WHERE queue_id = q.id AND state = 'ready' AND priority < p.priority \
              ORDER BY priority DESC, seq LIMIT 1) n) \
      SELECT min(m.enqueued_at_ms) FROM p JOIN messages m USING (seq)) \
         AS oldest_ready_enqueued_at_ms";

/// The shortest time between two counts.
const COUNT_EVERY_MS: Millis = 1_000;

/// When the next count is due after one that took `took_ms`: a second, or ten times the count's
/// own time when that is longer.
pub(crate) fn next_count_in_ms(took_ms: Millis) -> Millis {
    COUNT_EVERY_MS.max(took_ms.saturating_mul(10))
}

/// Counts every queue into `queue_stats` at `now_ms`, in one statement.
pub(crate) async fn count_all(
    client: &deadpool_postgres::Client,
    now_ms: Millis,
) -> StoreResult<()> {
    client
        .execute_cached(
            &format!(
                "INSERT INTO queue_stats (queue_id, ready, waiting, delayed, in_flight, \
                                          oldest_ready_enqueued_at_ms, counted_at_ms) \
                 SELECT q.id, c.ready, c.waiting, c.delayed, c.leased, \
                        c.oldest_ready_enqueued_at_ms, $1 \
                 FROM queues q CROSS JOIN LATERAL ({COUNTS_OF_Q}) c \
                 ORDER BY q.id \
                 ON CONFLICT (queue_id) DO UPDATE SET \
                     ready = excluded.ready, waiting = excluded.waiting, \
                     delayed = excluded.delayed, in_flight = excluded.in_flight, \
                     oldest_ready_enqueued_at_ms = excluded.oldest_ready_enqueued_at_ms, \
                     counted_at_ms = excluded.counted_at_ms"
            ),
            &[&now_ms],
        )
        .await?;
    Ok(())
}

/// The live messages of each queue in `queue_ids` at the leader's last count; a queue not
/// counted yet is missing.
pub(crate) async fn counted_depths(
    transaction: &impl crate::cached::Cached,
    queue_ids: &[i32],
) -> StoreResult<HashMap<i32, u64>> {
    if queue_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = transaction
        .query_cached(
            "SELECT queue_id, ready + waiting + delayed + in_flight FROM queue_stats \
             WHERE queue_id = ANY($1)",
            &[&queue_ids],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| (row.get(0), row.get::<_, i64>(1).max(0) as u64))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_count_spaces_the_next_ones_out() {
        assert_eq!(next_count_in_ms(0), 1_000);
        assert_eq!(next_count_in_ms(100), 1_000);
        assert_eq!(next_count_in_ms(250), 2_500);
        assert_eq!(next_count_in_ms(Millis::MAX), Millis::MAX);
    }
}
