//! Tenants' quotas (`[tenants.<name>] max_messages`, `max_bytes`, `max_kept_bytes`): what all
//! of a tenant's queues may hold at once (ready, delayed and in flight, dead-letter queues
//! included; and apart, the bodies of acked messages they keep), so one tenant cannot fill the
//! disk for every other (issue 30, finding 10).
//!
//! Every enqueue made through the operations layer passes [`TenantQuotas::admit`] (one rule for
//! HTTP, gRPC, SQS, topics, next steps and schedules). Counting a tenant's messages on every
//! enqueue would read every queue's depth, so the count is taken once a second
//! ([`TenantQuotas::run`]) and what is admitted in between is added to it: a burst cannot pass
//! the quota by more than what ends (acks, expiries) within that second would have allowed.
//!
//! Bytes are counted by the store from every stored message's size ([`sluice_ops::Ops::queue_bytes`]),
//! a scan of the messages table, so only while some tenant has a byte quota, and at most as
//! often as keeps that scan under a tenth of the time ([`next_byte_count`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_core::queue::QueueConfig;
use sluice_ops::{Admission, OpsError, OpsResult};
use sluice_wire::ErrorCode;
use tokio_util::sync::CancellationToken;

use crate::auth::{Quota, Tenant};

/// How often the tenants' messages are counted again.
const RECOUNT_EVERY: Duration = Duration::from_secs(1);
/// What `Retry-After` says to an enqueue over a quota.
const RETRY_AFTER_S: u64 = 1;
/// The byte count may take at most 1/`BYTE_COUNT_SHARE` of the time.
const BYTE_COUNT_SHARE: u32 = 10;

/// What one tenant's queues hold, as last counted plus what was admitted since.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Usage {
    messages: u64,
    bytes: u64,
    kept_bytes: u64,
}

/// The tenants with a quota, and what their queues hold.
#[derive(Debug)]
pub struct TenantQuotas {
    quotas: Vec<(Arc<Tenant>, Quota)>,
    counts_bytes: bool,
    used: Mutex<HashMap<String, Usage>>,
}

impl TenantQuotas {
    /// The quotas of `tenants`; `None` when no tenant has one.
    pub fn new(tenants: &[Arc<Tenant>]) -> Option<Arc<Self>> {
        let quotas: Vec<_> = tenants
            .iter()
            .filter(|tenant| tenant.quota.is_set())
            .map(|tenant| (tenant.clone(), tenant.quota))
            .collect();
        let counts_bytes = quotas
            .iter()
            .any(|(_, quota)| quota.bytes.is_some() || quota.kept_bytes.is_some());
        (!quotas.is_empty()).then(|| {
            Arc::new(Self {
                quotas,
                counts_bytes,
                used: Mutex::default(),
            })
        })
    }

    /// Counts every tenant's messages now, and their bytes when `with_bytes` (the bytes of the
    /// last count stand otherwise).
    pub async fn recount(&self, ops: &sluice_ops::Ops, with_bytes: bool) {
        let queues = match ops.queue_list(&sluice_ops::Anyone).await {
            Ok(queues) => queues,
            Err(error) => {
                tracing::warn!(%error, "cannot count the tenants' messages; the last count stands");
                return;
            }
        };
        let mut messages: HashMap<String, u64> = HashMap::new();
        for queue in &queues {
            if let Some((tenant, _)) = self.quota_of(&queue.name) {
                let depth = &queue.depth;
                *messages.entry(tenant.name.clone()).or_default() +=
                    depth.ready + depth.delayed + depth.in_flight;
            }
        }
        let bytes = if with_bytes && self.counts_bytes {
            match ops.queue_bytes().await {
                Ok(counted) => {
                    let mut bytes: HashMap<String, (u64, u64)> = HashMap::new();
                    for queue in counted {
                        if let Some((tenant, _)) = self.quota_of(&queue.queue) {
                            let sum = bytes.entry(tenant.name.clone()).or_default();
                            sum.0 += queue.held;
                            sum.1 += queue.kept;
                        }
                    }
                    Some(bytes)
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot count the tenants' bytes; the last count stands");
                    None
                }
            }
        } else {
            None
        };
        let mut used = self.used.lock();
        for (tenant, _) in &self.quotas {
            let usage = used.entry(tenant.name.clone()).or_default();
            usage.messages = messages.get(&tenant.name).copied().unwrap_or(0);
            if let Some(bytes) = &bytes {
                (usage.bytes, usage.kept_bytes) =
                    bytes.get(&tenant.name).copied().unwrap_or_default();
            }
        }
    }

    /// Recounts every [`RECOUNT_EVERY`] until `shutdown`.
    pub async fn run(self: Arc<Self>, ops: Arc<sluice_ops::Ops>, shutdown: CancellationToken) {
        let mut bytes_due = Instant::now();
        loop {
            let with_bytes = self.counts_bytes && Instant::now() >= bytes_due;
            let started = Instant::now();
            self.recount(&ops, with_bytes).await;
            if with_bytes {
                bytes_due = next_byte_count(started, started.elapsed());
            }
            tokio::select! {
                () = tokio::time::sleep(RECOUNT_EVERY) => {}
                () = shutdown.cancelled() => return,
            }
        }
    }

    fn quota_of(&self, queue: &str) -> Option<&(Arc<Tenant>, Quota)> {
        self.quotas.iter().find(|(tenant, _)| tenant.owns(queue))
    }
}

/// When the bytes are counted next, after a count that began at `started` and took `took`:
/// every [`RECOUNT_EVERY`] while the count is quick, and never more than 1/[`BYTE_COUNT_SHARE`]
/// of the time (a store with many messages is counted less often).
fn next_byte_count(started: Instant, took: Duration) -> Instant {
    started + took + RECOUNT_EVERY.max(took * (BYTE_COUNT_SHARE - 1))
}

/// The refusal of an enqueue over `tenant`'s quota `setting`.
fn over_quota(tenant: &Tenant, what: &str, used: u64, max: u64, setting: &str) -> OpsError {
    let mut error = OpsError::new(
        ErrorCode::QueueFull,
        format!(
            "tenant {:?} holds {used} {what} and may hold {max} ([tenants.{}] {setting}); retry once its consumers catch up",
            tenant.name, tenant.name
        ),
    );
    error.retry_after_s = Some(RETRY_AFTER_S);
    error
}

impl Admission for TenantQuotas {
    fn admit(&self, queue: &str, config: &QueueConfig, count: usize, bytes: u64) -> OpsResult<()> {
        let Some((tenant, quota)) = self.quota_of(queue) else {
            return Ok(());
        };
        let mut used = self.used.lock();
        let usage = used.entry(tenant.name.clone()).or_default();
        let count = count as u64;
        if let Some(max) = quota.messages
            && usage.messages.saturating_add(count) > max
        {
            return Err(over_quota(
                tenant,
                "messages",
                usage.messages,
                max,
                "max_messages",
            ));
        }
        if let Some(max) = quota.bytes
            && usage.bytes.saturating_add(bytes) > max
        {
            return Err(over_quota(
                tenant,
                "body bytes",
                usage.bytes,
                max,
                "max_bytes",
            ));
        }
        // What a queue that keeps acked messages takes now, it keeps once acked.
        if let Some(max) = quota.kept_bytes
            && config.keep_acked_ms > 0
            && usage.kept_bytes.saturating_add(bytes) > max
        {
            let what = "body bytes of kept acked messages";
            return Err(over_quota(
                tenant,
                what,
                usage.kept_bytes,
                max,
                "max_kept_bytes",
            ));
        }
        usage.messages += count;
        usage.bytes += bytes;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_byte_count_is_made_seldom() {
        let start = Instant::now();
        let quick = Duration::from_millis(5);
        assert_eq!(next_byte_count(start, quick), start + quick + RECOUNT_EVERY);
        let slow = Duration::from_millis(500);
        let next = next_byte_count(start, slow);
        assert_eq!(
            next,
            start + Duration::from_secs(5),
            "0.5 s of 5 s is a tenth"
        );
    }
}
