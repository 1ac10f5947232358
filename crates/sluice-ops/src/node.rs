//! What the node that runs these operations asks of its store for itself, not for a caller:
//! readiness, storage metrics, byte counts for quotas, background upkeep, what changed on
//! other nodes, and closing. They pass through here so that nothing above ops holds the store.

use std::sync::Arc;

use sluice_core::store::sessions::SessionStore;
use sluice_core::store::{QueueBytes, StorageMetrics, WriteState};

use crate::{Ops, OpsResult};

impl Ops {
    /// Whether the store takes writes now (for readiness). Cheap: it reads flags.
    pub fn write_state(&self) -> WriteState {
        self.store.write_state()
    }

    /// The store's internals for metrics. Cheap: it reads counters.
    pub fn storage_metrics(&self) -> StorageMetrics {
        self.store.storage_metrics()
    }

    /// The bytes every queue holds and keeps (a scan: for quotas, at a bounded rate).
    pub async fn queue_bytes(&self) -> OpsResult<Vec<QueueBytes>> {
        Ok(self.store.queue_bytes(self.now_ms()).await?)
    }

    /// Whether some queue names `name` as its dead-letter queue.
    pub async fn queue_is_dead_letter_queue(&self, name: &str) -> OpsResult<bool> {
        Ok(self.store.queue_is_dead_letter_queue(name).await?)
    }

    /// Background upkeep at the operations' time: expires leases, applies retention.
    pub async fn maintain(&self) -> OpsResult<()> {
        Ok(self.store.maintain(self.now_ms()).await?)
    }

    /// Wakes every waiter (long polls, push workers, drains) to look again: after a test
    /// clock moves, when waits bounded by time must see the new time.
    pub fn wake_all(&self) {
        self.store.notifier().wake_all();
    }

    /// Moves when definitions change on another node of a shared store.
    pub fn definitions_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.store.definitions_changed()
    }

    /// Where the dashboard's sessions live when the store shares them between nodes.
    pub fn session_store(&self) -> Option<Arc<dyn SessionStore>> {
        self.store.session_store()
    }

    /// Flushes and closes the store; later operations fail with `unavailable`.
    pub async fn close(&self) -> OpsResult<()> {
        Ok(self.store.close().await?)
    }
}
