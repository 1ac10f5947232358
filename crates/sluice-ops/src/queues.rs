//! Queues: their definitions (put, get, list, delete) and operating on a whole queue (pause
//! and resume, purge, drain).
//!
//! A definition's rules live here so every protocol that defines queues (the native API, the
//! SQS-compatible one) refuses the same definitions with the same field named.

use std::time::Duration;

use sluice_core::StoreError;
use sluice_core::queue::{QueueConfig, validate_queue_name};
use sluice_core::store::{PurgeScope, QueueDepth};
use sluice_core::store::{QueueInfo, QueuePutParams};
use sluice_wire::{PushSpec, QueueSpec};
use tokio::time::Instant;

use crate::wait::{self, Look, Wait};
use crate::{Caller, Ops, OpsError, OpsResult};

/// Longest drain wait.
const DRAIN_TIMEOUT_MS_MAX: i64 = 15 * 60 * 1000;
/// Drain wait when none is given.
const DRAIN_TIMEOUT_MS_DEFAULT: i64 = 30_000;
/// How often a drain looks again when nothing wakes it: retention and lease expiry run in the
/// background without waking waiters.
const DRAIN_RECHECK: Duration = Duration::from_millis(100);

/// How a drain ended.
#[derive(Debug)]
pub struct Drained {
    /// True when the queue held nothing (ready, delayed or in flight).
    pub drained: bool,
    /// How long the drain waited.
    pub waited: Duration,
    /// The queue's depth at the end.
    pub depth: QueueDepth,
}

/// What a purge removed, and what it left.
#[derive(Debug, Clone, Copy)]
pub struct Purged {
    /// Messages removed.
    pub purged: u64,
    /// Messages in flight, which a purge leaves.
    pub in_flight: u64,
}

/// A queue to create, or to update with the fields given.
#[derive(Debug, Clone)]
pub struct QueuePutRequest {
    /// The queue's name.
    pub name: String,
    /// The fields to set; those not given keep their current value (or the default, for a new
    /// queue).
    pub spec: QueueSpec,
}

/// A queue put: whether it was created, and the queue as it now is.
#[derive(Debug)]
pub struct QueuePutDone {
    /// False when the queue existed and was updated.
    pub created: bool,
    /// The queue, with its depth.
    pub queue: QueueInfo,
}

/// Whether `dead_letter_queue` names the queue `name` itself: refused by every door that
/// configures a queue (the SQS API words it as AWS does), and never deleted with it.
pub fn is_own_dead_letter_queue(name: &str, dead_letter_queue: Option<&str>) -> bool {
    dead_letter_queue == Some(name)
}

impl Ops {
    /// Creates a queue, or updates the fields `request.spec` gives; its dead-letter queue is
    /// created with it. Refusals name the field. `check_push` checks a push destination the
    /// way the push workers will run it (its transform compiles, its secret resolves): that
    /// needs the server's push client, so the server passes it in.
    pub async fn queue_put(
        &self,
        request: QueuePutRequest,
        check_push: impl FnOnce(&PushSpec) -> Result<(), String>,
    ) -> OpsResult<QueuePutDone> {
        let QueuePutRequest { name, spec } = request;
        validate_queue_name(&name).map_err(OpsError::invalid_field)?;
        let now_ms = self.now_ms();
        let base = match self.store.queue_get(&name, now_ms).await {
            Ok(info) => info.config,
            Err(StoreError::QueueNotFound(_)) => QueueConfig::defaults_for(&name),
            Err(error) => return Err(error.into()),
        };
        let config = base.apply(&spec).map_err(OpsError::invalid_field)?;
        if let Some(push) = &config.push {
            check_push(push).map_err(OpsError::invalid_field)?;
        }
        self.queue_put_config(&name, config).await
    }

    /// Creates a queue, or replaces its whole configuration: for a protocol whose settings
    /// map onto the configuration as a whole (the SQS API's attributes) and for the queues of
    /// the config file. The checks of [`Ops::queue_put`] apply; a push destination is kept as
    /// it is.
    pub async fn queue_put_config(
        &self,
        name: &str,
        config: QueueConfig,
    ) -> OpsResult<QueuePutDone> {
        validate_queue_name(name).map_err(OpsError::invalid_field)?;
        if is_own_dead_letter_queue(name, config.dead_letter_queue.as_deref()) {
            return Err(OpsError::invalid_field(
                "dead_letter_queue: a queue cannot be its own dead-letter queue",
            ));
        }
        let now_ms = self.now_ms();
        let put = self
            .store
            .queue_put(QueuePutParams {
                name: name.to_owned(),
                config,
                now_ms,
            })
            .await?;
        let queue = self.store.queue_get(name, now_ms).await?;
        Ok(QueuePutDone {
            created: put.created,
            queue,
        })
    }

    /// One queue, with its depth and counters.
    pub async fn queue_get(&self, name: &str) -> OpsResult<QueueInfo> {
        Ok(self.store.queue_get(name, self.now_ms()).await?)
    }

    /// Every queue `caller` may read, by name (every queue for [`crate::Anyone`]).
    pub async fn queue_list(&self, caller: &dyn Caller) -> OpsResult<Vec<QueueInfo>> {
        let mut queues = self.store.queue_list(self.now_ms()).await?;
        queues.retain(|info| caller.may_read(&info.name));
        Ok(queues)
    }

    /// Deletes a queue and its messages and, unless `dead_letters` says keep, its dead-letter
    /// queue with its dead letters: one rule for every door that deletes a queue (HTTP, gRPC,
    /// the CLI and SDKs through them, alerts). The dead-letter queue stays when another queue
    /// still dead-letters into it, or when `caller` may not delete it.
    pub async fn queue_delete(
        &self,
        caller: &dyn Caller,
        name: &str,
        dead_letters: OnDelete,
    ) -> OpsResult<QueueDeleted> {
        let config = self.store.queue_config(name).await?;
        let messages_removed = self.store.queue_delete(name).await?;
        let mut deleted = QueueDeleted {
            messages_removed,
            ..QueueDeleted::default()
        };
        let Some(dlq) = config.dead_letter_queue.as_deref() else {
            return Ok(deleted);
        };
        if dead_letters == OnDelete::KeepDeadLetters
            || is_own_dead_letter_queue(name, Some(dlq))
            || !caller.may_manage(dlq)
            || self.store.queue_is_dead_letter_queue(dlq).await?
        {
            return Ok(deleted);
        }
        // The queue is gone already: a failure here leaves the dead-letter queue as it was
        // (another queue may have come to use it in between, which the store refuses), and the
        // answer says it stayed.
        match self.store.queue_delete(dlq).await {
            Ok(removed) => {
                deleted.dead_letter_queue = Some(dlq.to_owned());
                deleted.dead_letters_removed = removed;
            }
            Err(error) => {
                tracing::info!(queue = name, dead_letter_queue = dlq, %error, "the dead-letter queue stays");
            }
        }
        Ok(deleted)
    }

    /// Pauses (or resumes) a queue's deliveries; enqueues are still stored. Returns the queue.
    pub async fn queue_set_paused(&self, queue: &str, paused: bool) -> OpsResult<QueueInfo> {
        self.store.queue_pause(queue, paused).await?;
        Ok(self.store.queue_get(queue, self.now_ms()).await?)
    }

    /// Removes the messages `scope` names: what waits (the native purge; messages in flight
    /// stay and may still be acked), or everything (SQS's `PurgeQueue`).
    pub async fn queue_purge(&self, queue: &str, scope: PurgeScope) -> OpsResult<Purged> {
        let purged = self.store.queue_purge(queue, scope, self.now_ms()).await?;
        let info = self.store.queue_get(queue, self.now_ms()).await?;
        Ok(Purged {
            purged,
            in_flight: info.depth.in_flight,
        })
    }

    /// Waits until the queue holds nothing, or `timeout_ms` (30 s when `None`). The first
    /// look is unregistered: a queue that does not exist is refused before the notifier keeps
    /// anything for the name. Shutdown answers with the depth as it is.
    pub async fn queue_drain(&self, queue: &str, timeout_ms: Option<i64>) -> OpsResult<Drained> {
        let timeout_ms = timeout_ms.unwrap_or(DRAIN_TIMEOUT_MS_DEFAULT);
        if !(0..=DRAIN_TIMEOUT_MS_MAX).contains(&timeout_ms) {
            return Err(OpsError::invalid_field(format!(
                "timeout_ms must be between 0 and {DRAIN_TIMEOUT_MS_MAX}, got {timeout_ms}"
            )));
        }
        let started = Instant::now();
        let deadline = started + Duration::from_millis(timeout_ms as u64);
        let policy = Wait::drain(deadline, DRAIN_RECHECK, &self.shutdown);
        let look = |now_ms| async move {
            let depth = self.store.queue_get(queue, now_ms).await?.depth;
            let drained = depth.ready + depth.delayed + depth.in_flight == 0;
            Ok::<_, OpsError>(if drained {
                Look::Ready((true, depth))
            } else {
                Look::Pending {
                    current: (false, depth),
                    next_change_at_ms: None,
                }
            })
        };
        let notifier = self.store.notifier();
        let (drained, depth) =
            wait::until(&notifier, queue, self.clock.as_ref(), &policy, look).await?;
        Ok(Drained {
            drained,
            waited: started.elapsed(),
            depth,
        })
    }
}

/// What deleting a queue does with its dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDelete {
    /// Delete it and its dead letters too (the default), unless another queue uses it.
    #[default]
    DeleteDeadLetters,
    /// Leave it, with its dead letters.
    KeepDeadLetters,
}

/// What a queue's deletion removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueDeleted {
    /// Messages of the queue.
    pub messages_removed: u64,
    /// Its dead-letter queue, when it was deleted with it.
    pub dead_letter_queue: Option<String>,
    /// Messages of that dead-letter queue.
    pub dead_letters_removed: u64,
}
