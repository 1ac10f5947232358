//! The periodic upkeep: due delays and expired leases, retention, and clean-up of old rows.

use sluice_core::Millis;
use sluice_core::store::StoreResult;
use tokio::sync::oneshot;

use crate::writer::WriteOp;
use crate::{SharedSqliteStore, SqliteStore};

/// Messages retention looks at per maintenance tick, so expiry never holds the index for long.
const EXPIRE_PER_TICK: usize = 5_000;

impl SharedSqliteStore {
    /// One upkeep tick: moves due delays and expired leases, applies retention, and has the
    /// writer clean up final rows past their retention. Returns once its changes are on disk.
    pub(crate) async fn run_maintenance(&self, now_ms: Millis) -> StoreResult<()> {
        let store = &self.0;
        let committed = {
            let mut index = store.index.lock();
            let mut changes = index.tick_all(now_ms);
            changes.extend(index.expire(now_ms, EXPIRE_PER_TICK));
            index.compact();
            if changes.is_empty() {
                None
            } else {
                // Queued while the index is still locked: whoever sees these changes in the
                // index and then flushes the writer finds them on disk.
                let (reply, wait) = oneshot::channel();
                store.send(WriteOp::Apply {
                    changes,
                    now_ms,
                    reply: Some(reply),
                })?;
                Some(wait)
            }
        };
        // Heads that retention, a purge or cancels ran down, with no claim to notice.
        self.page_in_all(now_ms).await;
        if let Some(wait) = committed {
            store.notifier.wake_all();
            // Upkeep returns once its changes are on disk, so what follows it (a test clock's
            // advance, the next tick) reads them there.
            SqliteStore::wait(wait).await?;
        }
        store.send(WriteOp::Cleanup {
            now_ms,
            acked_before_ms: now_ms - store.options.acked_retention_ms,
        })
    }
}
