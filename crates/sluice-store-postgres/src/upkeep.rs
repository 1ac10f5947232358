//! The upkeep behind `Store::maintain` (docs/design/postgres-store.md §4.3): on the leader
//! (`crate::leader`) it runs the cluster's housekeeping with the `now_ms` it is given, the time
//! of the caller's clock as everywhere in this store; on a follower it does nothing, since what
//! each node does for itself (its row, its counters, its clock) runs on its own timer
//! (`crate::nodes`).
//!
//! | Job | How often (in the given time) | Module |
//! |---|---|---|
//! | due delays, expired leases, last-attempt expiries into the dead-letter queue | every call | `expiry` |
//! | retention, at most 5,000 messages a call, round-robin over queues | every call | `retention` |
//! | depth count into `queue_stats` | every second, spaced out when a count is slow | `stats` |
//! | `ANALYZE` of a busy table that changed by more than its size | with the depth count | `analyze` |
//! | lane safety net | every 5 s | `lanes` |
//! | cleanup of records, keys, sessions, deleted queues, departed nodes | every 10 s, or at once while chunks come back full | `cleanup` |
//!
//! Each job commits its own transactions; a job that fails is logged by the caller and tried
//! again at the next call, and does not keep the others from running.

use sluice_core::Millis;
use sluice_core::store::StoreResult;

use crate::PgStore;
use crate::stats::next_count_in_ms;

/// How often the lane safety net runs, in ms of the given time.
const LANES_EVERY_MS: Millis = 5_000;
/// How often the cleanup runs when it has nothing left over, in ms of the given time.
const CLEANUP_EVERY_MS: Millis = 10_000;

/// When each job is next due, and where retention goes on; held while a pass runs, so passes
/// of one node never overlap.
#[derive(Debug, Default)]
pub(crate) struct Schedule {
    stats_due_ms: Option<Millis>,
    /// The wait before `stats_due_ms`: a second, longer after a slow count.
    stats_every_ms: Millis,
    lanes_due_ms: Option<Millis>,
    cleanup_due_ms: Option<Millis>,
    retention_from: Option<String>,
}

/// Whether a job due at `due_ms` runs at `now_ms`: never run yet, due, or the clock went back.
fn is_due(due_ms: Option<Millis>, now_ms: Millis, every_ms: Millis) -> bool {
    due_ms.is_none_or(|due| now_ms >= due || due - now_ms > every_ms)
}

impl PgStore {
    /// Runs the leader's upkeep at `now_ms` on this node, whether it leads or not
    /// (`Store::maintain` calls it on the leader only). Safe to run on several nodes at once:
    /// every statement re-checks what it changes on the rows it locked (§4.1), so a message is
    /// expired, retried or dead-lettered once.
    ///
    /// Errors: the first error of a job (`Unavailable` when the database cannot be reached);
    /// the other jobs ran regardless.
    pub async fn upkeep(&self, now_ms: Millis) -> StoreResult<()> {
        self.check_open()?;
        let mut schedule = self.schedule.lock().await;
        let mut first_error = None;
        let mut note = |outcome: StoreResult<()>| {
            if let Err(error) = outcome {
                tracing::debug!(%error, "an upkeep job failed");
                first_error.get_or_insert(error);
            }
        };

        note(self.expire_due(now_ms).await);
        let from = schedule.retention_from.take();
        match self.apply_retention(now_ms, from.clone()).await {
            Ok(next) => schedule.retention_from = next,
            Err(error) => {
                schedule.retention_from = from;
                note(Err(error));
            }
        }

        if is_due(schedule.stats_due_ms, now_ms, schedule.stats_every_ms) {
            let started = std::time::Instant::now();
            note(self.count_queues(now_ms).await);
            let took_ms = started.elapsed().as_millis() as Millis;
            schedule.stats_every_ms = next_count_in_ms(took_ms);
            schedule.stats_due_ms = Some(now_ms.saturating_add(schedule.stats_every_ms));
            note(self.refresh_statistics().await);
        }
        if is_due(schedule.lanes_due_ms, now_ms, LANES_EVERY_MS) {
            note(self.repair_lanes(now_ms).await);
            schedule.lanes_due_ms = Some(now_ms.saturating_add(LANES_EVERY_MS));
        }
        if is_due(schedule.cleanup_due_ms, now_ms, CLEANUP_EVERY_MS) {
            let more = self.clean_up(now_ms).await;
            let wait_ms = if matches!(more, Ok(true)) {
                0
            } else {
                CLEANUP_EVERY_MS
            };
            note(more.map(drop));
            schedule.cleanup_due_ms = Some(now_ms.saturating_add(wait_ms));
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    async fn count_queues(&self, now_ms: Millis) -> StoreResult<()> {
        let client = self.client().await?;
        crate::stats::count_all(&client, now_ms).await
    }

    async fn refresh_statistics(&self) -> StoreResult<()> {
        let client = self.client().await?;
        let analyzed = crate::analyze::refresh(&client).await?;
        if !analyzed.is_empty() {
            tracing::debug!(?analyzed, "planner statistics refreshed");
        }
        Ok(())
    }

    /// The lane safety net (§4.3): a repair means some path left a lane without its active
    /// member, a bug, so it is logged as a warning.
    async fn repair_lanes(&self, now_ms: Millis) -> StoreResult<()> {
        use crate::error::Db;
        let mut client = self.client().await?;
        let transaction = client.transaction().await.db()?;
        let promoted = crate::lanes::repair(&transaction, now_ms).await?;
        transaction.commit().await.db()?;
        if promoted > 0 {
            tracing::warn!(
                promoted,
                "lanes with members and no active member were settled: a bug, please report it"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_runs_when_due_first_or_after_the_clock_went_back() {
        assert!(is_due(None, 0, 1_000));
        assert!(!is_due(Some(2_000), 1_500, 1_000));
        assert!(is_due(Some(2_000), 2_000, 1_000));
        assert!(is_due(Some(2_000), 500, 1_000), "the clock went back");
    }
}
