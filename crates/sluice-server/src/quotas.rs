//! Tenants' quotas (`[tenants.<name>] max_messages`): the messages all of a tenant's queues
//! may hold at once (ready, delayed and in flight, dead-letter queues included), so one
//! tenant cannot fill the disk for every other (issue 30, finding 10).
//!
//! Every enqueue made through the operations layer passes [`TenantQuotas::admit`] (one rule for
//! HTTP, gRPC, SQS, topics, next steps and schedules). Counting a tenant's messages on every
//! enqueue would read every queue's depth, so the count is taken once a second
//! ([`TenantQuotas::run`]) and what is admitted in between is added to it: a burst cannot pass
//! the quota by more than what ends (acks, expiries) within that second would have allowed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_core::store::Store;
use sluice_core::wire::ErrorCode;
use sluice_ops::{Admission, OpsError, OpsResult};
use tokio_util::sync::CancellationToken;

use crate::auth::Tenant;

/// How often the tenants' messages are counted again.
const RECOUNT_EVERY: Duration = Duration::from_secs(1);
/// What `Retry-After` says to an enqueue over a quota.
const RETRY_AFTER_S: u64 = 1;

/// The tenants with a quota, and their messages as last counted plus what was admitted since.
#[derive(Debug)]
pub struct TenantQuotas {
    quotas: Vec<(Arc<Tenant>, u64)>,
    held: Mutex<HashMap<String, u64>>,
}

impl TenantQuotas {
    /// The quotas of `tenants`; `None` when no tenant has one.
    pub fn new(tenants: &[Arc<Tenant>]) -> Option<Arc<Self>> {
        let quotas: Vec<_> = tenants
            .iter()
            .filter_map(|tenant| tenant.max_messages.map(|max| (tenant.clone(), max)))
            .collect();
        (!quotas.is_empty()).then(|| {
            Arc::new(Self {
                quotas,
                held: Mutex::default(),
            })
        })
    }

    /// Counts every tenant's messages now.
    pub async fn recount(&self, store: &dyn Store, now_ms: sluice_core::Millis) {
        let queues = match store.queue_list(now_ms).await {
            Ok(queues) => queues,
            Err(error) => {
                tracing::warn!(%error, "cannot count the tenants' messages; the last count stands");
                return;
            }
        };
        let mut held: HashMap<String, u64> = HashMap::new();
        for queue in &queues {
            if let Some((tenant, _)) = self.quota_of(&queue.name) {
                let depth = &queue.depth;
                *held.entry(tenant.name.clone()).or_default() +=
                    depth.ready + depth.delayed + depth.in_flight;
            }
        }
        *self.held.lock() = held;
    }

    /// Recounts every [`RECOUNT_EVERY`] until `shutdown`.
    pub async fn run(
        self: Arc<Self>,
        store: Arc<dyn Store>,
        clock: Arc<dyn sluice_core::clock::Clock>,
        shutdown: CancellationToken,
    ) {
        loop {
            self.recount(&*store, clock.now_ms()).await;
            tokio::select! {
                () = tokio::time::sleep(RECOUNT_EVERY) => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    fn quota_of(&self, queue: &str) -> Option<&(Arc<Tenant>, u64)> {
        self.quotas.iter().find(|(tenant, _)| tenant.owns(queue))
    }
}

impl Admission for TenantQuotas {
    fn admit(&self, queue: &str, count: usize) -> OpsResult<()> {
        let Some((tenant, max)) = self.quota_of(queue) else {
            return Ok(());
        };
        let mut held = self.held.lock();
        let used = held.entry(tenant.name.clone()).or_default();
        let count = count as u64;
        if used.saturating_add(count) > *max {
            let mut error = OpsError::new(
                ErrorCode::QueueFull,
                format!(
                    "tenant {:?} holds {used} messages and may hold {max} ([tenants.{}] max_messages); retry once its consumers catch up",
                    tenant.name, tenant.name
                ),
            );
            error.retry_after_s = Some(RETRY_AFTER_S);
            return Err(error);
        }
        *used += count;
        Ok(())
    }
}
