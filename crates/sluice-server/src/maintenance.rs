//! Background upkeep: expire leases (failed attempts, dead-letter moves) and drop old records.
//!
//! Receivers already expire leases of the queue they claim from, exactly on time; this task
//! covers queues nobody is reading, so stats and dead-letter moves stay current.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice_core::{Clock, Store};

/// How often upkeep runs.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(500);

/// Runs until shutdown.
pub async fn run(store: Arc<dyn Store>, clock: Arc<dyn Clock>, shutting_down: Arc<AtomicBool>) {
    let mut interval = tokio::time::interval(MAINTENANCE_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !shutting_down.load(Ordering::SeqCst) {
        interval.tick().await;
        if let Err(error) = store.maintain(clock.now_ms()).await {
            tracing::warn!(%error, "maintenance failed");
        }
    }
}
