//! Background upkeep: expire leases (failed attempts, dead-letter moves) and drop old records.
//!
//! Receivers already expire leases of the queue they claim from, exactly on time; this task
//! covers queues nobody is reading, so stats and dead-letter moves stay current.

use std::sync::Arc;
use std::time::Duration;

use sluice_core::{Clock, Store};
use tokio_util::sync::CancellationToken;

/// How often upkeep runs.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(500);

/// Runs until `shutdown` is cancelled; a tick in progress then finishes (its changes are
/// committed), and no other starts.
pub async fn run(store: Arc<dyn Store>, clock: Arc<dyn Clock>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(MAINTENANCE_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // A tick due at the same moment as the stop does not run.
            biased;
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        if let Err(error) = store.maintain(clock.now_ms()).await {
            tracing::warn!(%error, "maintenance failed");
        }
    }
}
