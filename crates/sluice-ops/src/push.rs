//! Push delivery's side of the queue's rules: what a push worker claims, and how a
//! destination's answer settles the message. The server's push workers make the request
//! (transform, signature, timeout) and report what came back; every rule about the message
//! itself is decided here, once, over the same store calls every other consumer's goes
//! through.

use sluice_core::Millis;
use sluice_core::message::{ClaimedMessage, DeliveryLogEntry};
use sluice_core::queue::QueueConfig;
use sluice_core::store::NackOutcome;
use sluice_core::store::{AckParams, ClaimParams, NackParams};

use crate::delivery::error_text;
use crate::wait::{self, Look, Wait};
use crate::{Ops, OpsResult};

/// What a destination's answer was, as the push worker saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushAnswer {
    /// A 2xx.
    Delivered,
    /// Anything else, or no answer.
    Failed {
        /// The status and the first bytes of the answer, or why there was none.
        error: String,
        /// The destination will not take this message (a 4xx other than 408 and 429, a
        /// transform that failed): dead-letter it rather than retry.
        permanent: bool,
        /// The destination's `Retry-After`, in ms.
        retry_after_ms: Option<Millis>,
    },
}

/// How a push was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushSettled {
    /// Acked.
    Acked,
    /// Back in the queue for another attempt.
    Retried,
    /// Moved to the dead-letter queue.
    DeadLettered,
}

/// Whether a claimed message is past its attempts without any having had a result (the server
/// stopped during each): it goes to its dead-letter queue without another call. A queue
/// without a dead-letter queue retries for ever (docs/semantics.md), so its messages are
/// always called: answering them "out of attempts" without a request would leave them stuck
/// once the destination is back.
pub fn push_out_of_attempts(config: &QueueConfig, attempts: u32) -> bool {
    config.dead_letter_queue.is_some() && config.max_attempts > 0 && attempts > config.max_attempts
}

/// The wait before the next attempt of a push that failed: the queue's backoff for this
/// attempt, or the destination's `Retry-After` when that is longer.
pub fn push_retry_delay_ms(
    config: &QueueConfig,
    attempts: u32,
    retry_after_ms: Option<Millis>,
) -> Millis {
    let backoff_ms = sluice_core::rules::backoff::random_delay_ms(&config.backoff, attempts);
    retry_after_ms.map_or(backoff_ms, |ms| ms.max(backoff_ms))
}

impl Ops {
    /// Pauses or resumes a queue's push delivery, durably and for every node of a shared
    /// store (consumers' receives are not paused).
    pub async fn queue_push_pause(&self, queue: &str, paused: bool) -> OpsResult<()> {
        Ok(self.store.queue_push_pause(queue, paused).await?)
    }

    /// Waits, as `policy` says, for messages of `queue` and leases up to `max()` of them (asked
    /// at each look, at most 100) for `lease_ms`. The attempt is on disk before this returns
    /// ([`sluice_core::Store::message_claim_recorded`]), so a message during whose delivery the
    /// server dies counts that attempt.
    pub async fn push_claim(
        &self,
        queue: &str,
        lease_ms: Millis,
        policy: &Wait<'_>,
        max: impl Fn() -> usize,
    ) -> OpsResult<Vec<ClaimedMessage>> {
        let notifier = self.store.notifier();
        let look = |now_ms| {
            let params = ClaimParams {
                queue: queue.to_owned(),
                max: max().clamp(1, 100),
                lease_ms: Some(lease_ms),
                lane_runs: false,
                now_ms,
            };
            async move {
                let claim = self
                    .store
                    .message_claim_recorded(params)
                    .await
                    .inspect_err(|error| {
                        tracing::warn!(%queue, %error, "push worker cannot claim");
                    })?;
                Ok::<_, sluice_core::StoreError>(if claim.messages.is_empty() {
                    Look::Pending {
                        current: claim.messages,
                        next_change_at_ms: claim.next_change_at_ms,
                    }
                } else {
                    Look::Ready(claim.messages)
                })
            }
        };
        Ok(wait::until(&notifier, queue, self.clock.as_ref(), policy, look).await?)
    }

    /// Settles a pushed message by its destination's answer: a delivery acks it; a failure is
    /// retried after [`push_retry_delay_ms`], or dead-lettered when permanent or out of
    /// attempts, except on a queue without a dead-letter queue, which retries even permanent
    /// failures. `delivery` is the request and answer for the message's delivery log.
    pub async fn push_settle(
        &self,
        config: &QueueConfig,
        queue: String,
        message: &ClaimedMessage,
        answer: PushAnswer,
        delivery: Option<DeliveryLogEntry>,
    ) -> OpsResult<PushSettled> {
        let now_ms = self.now_ms();
        match answer {
            PushAnswer::Delivered => {
                self.store
                    .message_ack(AckParams {
                        queue,
                        receipts: vec![message.receipt],
                        result: None,
                        delivery,
                        now_ms,
                    })
                    .await?;
                Ok(PushSettled::Acked)
            }
            PushAnswer::Failed {
                error,
                permanent,
                retry_after_ms,
            } => {
                let outcome = self
                    .store
                    .message_nack(NackParams {
                        queue,
                        receipt: message.receipt,
                        error: Some(error_text(error)),
                        delay_ms: Some(push_retry_delay_ms(
                            config,
                            message.attempts,
                            retry_after_ms,
                        )),
                        permanent: permanent && config.dead_letter_queue.is_some(),
                        delivery,
                        now_ms,
                    })
                    .await?;
                Ok(match outcome {
                    NackOutcome::Retry { .. } => PushSettled::Retried,
                    NackOutcome::DeadLettered { .. } => PushSettled::DeadLettered,
                })
            }
        }
    }
}
