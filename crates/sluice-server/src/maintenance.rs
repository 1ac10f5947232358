//! Background upkeep: expire leases (failed attempts, dead-letter moves) and drop old records,
//! make the schedules' due runs and the alerts' due notifications.
//!
//! Receivers already expire leases of the queue they claim from, exactly on time; this task
//! covers queues nobody is reading, so stats and dead-letter moves stay current. Every node of a
//! shared store runs it: the store's upkeep elects one, and a schedule's run is enqueued once
//! whichever nodes pass over it (its idempotency key).

use std::sync::Arc;
use std::time::Duration;

use sluice_ops::Ops;
use tokio_util::sync::CancellationToken;

/// How often upkeep runs.
const MAINTENANCE_INTERVAL: Duration = Duration::from_millis(500);

/// Runs until `shutdown` is cancelled; a tick in progress then finishes (its changes are
/// committed), and no other starts.
pub async fn run(ops: Arc<Ops>, dashboard_url: Option<String>, shutdown: CancellationToken) {
    let notifications = crate::notifications::Notifications {
        dashboard: dashboard_url,
    };
    let mut interval = tokio::time::interval(MAINTENANCE_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            // A tick due at the same moment as the stop does not run.
            biased;
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        if let Err(error) = ops.maintain().await {
            tracing::warn!(%error, "maintenance failed");
        }
        if let Err(error) = ops.schedules_pass().await {
            tracing::warn!(%error, "schedules' pass failed");
        }
        if let Err(error) = ops.alerts_pass(&notifications).await {
            tracing::warn!(%error, "alerts' pass failed");
        }
    }
}
