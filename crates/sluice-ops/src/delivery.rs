//! Taking messages and settling them: receive (with long polling), ack, nack, extend.

use std::time::Duration;

use crate::enqueue::EnqueueAnswer;
use crate::error::Details;
use sluice_core::Millis;
use sluice_core::message::{ClaimedMessage, Receipt};
use sluice_core::queue::limits;
use sluice_core::store::NackOutcome;
use sluice_core::store::{AckParams, ExtendParams, GiveBackParams, NackParams};
use tokio::time::Instant;

use crate::enqueue::MessageRequest;
use crate::wait::{self, Wait};
use crate::{Ops, OpsError, OpsResult};

/// What an ack did: every receipt's result, in order, and the next steps it enqueued.
#[derive(Debug, Clone, PartialEq)]
pub struct Acked {
    /// How many receipts were acked.
    pub acked: usize,
    /// Per receipt, in the order given.
    pub results: Vec<ReceiptAcked>,
    /// The next steps the ack enqueued, in the order given; only when it had `then`.
    pub then: Option<Vec<EnqueueAnswer>>,
}

/// The result of one receipt of an ack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptAcked {
    /// The receipt as given.
    pub receipt: String,
    /// Why it was not acked: it is stale (the lease is gone). `None`: acked.
    pub stale: Option<String>,
}

/// Most receipts in one ack.
pub const ACK_RECEIPTS_MAX: usize = 1000;

/// Take up to `max` messages, waiting up to `wait_ms` for the first.
#[derive(Debug, Clone)]
pub struct ReceiveRequest {
    /// The queue.
    pub queue: String,
    /// 1 to [`limits::RECEIVE_MAX`]; 1 when `None`.
    pub max: Option<i64>,
    /// 0 to [`limits::WAIT_MS_MAX`]; 0 (answer at once) when `None`.
    pub wait_ms: Option<i64>,
    /// The lease's length; the queue's visibility timeout when `None`.
    pub visibility_timeout_ms: Option<i64>,
    /// Take runs of a lane's messages in order (`ClaimParams::lane_runs`): SQS's FIFO
    /// receive. The native doors take one message of a lane at a time.
    pub lane_runs: bool,
}

/// Settle leases as done, with an optional result kept for duplicates to read.
#[derive(Debug, Clone)]
pub struct AckRequest {
    /// The queue.
    pub queue: String,
    /// Receipt texts as receive gave them, in the order results are wanted.
    pub receipts: Vec<String>,
    /// JSON text kept as the message's result (one receipt only).
    pub result: Option<String>,
    /// Next steps enqueued in the same commit as the ack (one receipt only).
    pub then: Vec<NextStep>,
}

/// A message an ack enqueues as the next step, and its queue.
#[derive(Debug, Clone)]
pub struct NextStep {
    /// The queue it goes to.
    pub queue: String,
    /// The message.
    pub message: MessageRequest,
}

/// Most next steps one ack may enqueue.
pub const NEXT_STEPS_MAX: usize = 100;

/// Settle a lease as failed: retry (after a delay) or dead-letter.
#[derive(Debug, Clone)]
pub struct NackRequest {
    /// The queue.
    pub queue: String,
    /// Receipt text as receive gave it.
    pub receipt: String,
    /// Why it failed (kept as `last_error`).
    pub error: Option<String>,
    /// Wait before the retry; the queue's backoff when `None`.
    pub delay_ms: Option<i64>,
    /// Dead-letter now rather than retry.
    pub permanent: bool,
}

/// What a nack did to the message, in the operations' terms (each protocol renders it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nacked {
    /// It is delivered again from `visible_at_ms`: after a delay (a backoff, or the nack's own)
    /// when `delayed`, else at once.
    Retry {
        /// When it is visible again.
        visible_at_ms: Millis,
        /// True when that is later than the nack.
        delayed: bool,
    },
    /// It went to this dead-letter queue.
    DeadLettered {
        /// The dead-letter queue.
        queue: String,
    },
}

impl Ops {
    /// Claims up to `max` messages; with `wait_ms`, waits for the first as a long poll.
    ///
    /// The first look registers no wake-up: it answers at once when there are messages, and
    /// refuses a queue that does not exist before the notifier keeps anything for the name.
    /// Shutdown ends the wait with what there is (nothing).
    pub async fn receive(&self, request: ReceiveRequest) -> OpsResult<Vec<ClaimedMessage>> {
        let max = request.max.unwrap_or(1);
        if !(1..=limits::RECEIVE_MAX as i64).contains(&max) {
            return Err(OpsError::invalid_field(format!(
                "max must be between 1 and {}, got {max}",
                limits::RECEIVE_MAX
            )));
        }
        let wait_ms = request.wait_ms.unwrap_or(0);
        if !(0..=limits::WAIT_MS_MAX).contains(&wait_ms) {
            return Err(OpsError::invalid_field(format!(
                "wait_ms must be between 0 and {}, got {wait_ms}",
                limits::WAIT_MS_MAX
            )));
        }
        if let Some(ms) = request.visibility_timeout_ms
            && !(1..=limits::VISIBILITY_TIMEOUT_MS_MAX).contains(&ms)
        {
            return Err(OpsError::invalid_field(format!(
                "visibility_timeout_ms must be between 1 and {}, got {ms}",
                limits::VISIBILITY_TIMEOUT_MS_MAX
            )));
        }
        let deadline = Instant::now() + Duration::from_millis(wait_ms as u64);
        let mut policy = Wait::long_poll(deadline, &self.shutdown);
        if self.manual_clock {
            policy = policy.on_manual_clock();
        }
        let queue = &request.queue;
        let messages = wait::claim(
            self.store.as_ref(),
            self.clock.as_ref(),
            &policy,
            queue,
            wait::Take {
                max: max as usize,
                lease_ms: request.visibility_timeout_ms,
                lane_runs: request.lane_runs,
            },
        )
        .await?;
        Ok(messages)
    }

    /// Acks every receipt; answers per receipt, in order. When some receipt is stale, the
    /// error carries every receipt's result as details.
    pub async fn ack(&self, request: AckRequest) -> OpsResult<Acked> {
        let texts = request.receipts;
        if texts.is_empty() {
            return Err(OpsError::invalid_field(
                "receipts: give receipt or a non-empty receipts list",
            ));
        }
        if texts.len() > ACK_RECEIPTS_MAX {
            return Err(too_many_receipts(texts.len()));
        }
        let receipts = texts
            .iter()
            .map(|text| parse_receipt(text))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(result) = &request.result {
            if texts.len() != 1 {
                return Err(OpsError::invalid_field(
                    "result: give a result with a single receipt",
                ));
            }
            if result.len() > limits::RESULT_BYTES_MAX {
                return Err(OpsError::too_large(format!(
                    "result: {} bytes; at most {} are kept",
                    result.len(),
                    limits::RESULT_BYTES_MAX
                )));
            }
        }
        let params = AckParams {
            queue: request.queue,
            receipts,
            result: request.result,
            delivery: None,
            now_ms: self.now_ms(),
        };
        if !request.then.is_empty() {
            return self.ack_then(params, texts, request.then).await;
        }
        let outcomes = self.store.message_ack(params).await?;
        let results: Vec<ReceiptAcked> = texts
            .into_iter()
            .zip(outcomes)
            .map(|(receipt, outcome)| match outcome {
                Ok(()) => ReceiptAcked {
                    receipt,
                    stale: None,
                },
                Err(error) => ReceiptAcked {
                    receipt,
                    stale: Some(error.to_string()),
                },
            })
            .collect();
        let acked = results.iter().filter(|r| r.stale.is_none()).count();
        if acked == results.len() {
            return Ok(Acked {
                acked,
                results,
                then: None,
            });
        }
        let message = format!(
            "{} of {} receipts are stale: those messages are no longer leased with them",
            results.len() - acked,
            results.len()
        );
        Err(stale_receipts(message, acked, results))
    }

    /// Acks one receipt and enqueues its next steps in the same commit. Each next step is
    /// checked as an enqueue to its queue is (the queue exists, limits, schema), before
    /// anything changes.
    async fn ack_then(
        &self,
        params: AckParams,
        texts: Vec<String>,
        then: Vec<NextStep>,
    ) -> OpsResult<Acked> {
        if texts.len() != 1 {
            return Err(OpsError::invalid_field(
                "then: give next steps with a single receipt",
            ));
        }
        if then.len() > NEXT_STEPS_MAX {
            return Err(too_many_next_steps(then.len()));
        }
        let mut batches = Vec::with_capacity(then.len());
        for (index, step) in then.into_iter().enumerate() {
            let mut enqueue = self.enqueue_to(step.queue).await?;
            enqueue.add(step.message, &format!("then[{index}]."))?;
            batches.push(enqueue.checked().await?);
        }
        let keys: Vec<(String, Option<String>)> = batches
            .iter()
            .map(|batch| {
                (
                    batch.queue.clone(),
                    batch.messages[0].idempotency_key.clone(),
                )
            })
            .collect();
        let outcome = self.store.message_ack_then(params, batches).await?;
        let receipt = texts.into_iter().next().unwrap_or_default();
        match outcome {
            Ok(enqueued) => {
                let mut outs = Vec::with_capacity(enqueued.len());
                for (results, (queue, key)) in enqueued.into_iter().zip(keys) {
                    outs.extend(self.enqueue_outs(&queue, results, vec![key]).await?);
                }
                Ok(Acked {
                    acked: 1,
                    results: vec![ReceiptAcked {
                        receipt,
                        stale: None,
                    }],
                    then: Some(outs),
                })
            }
            Err(error) => Err(stale_receipts(
                "1 of 1 receipts are stale: that message is no longer leased with it; no next step was enqueued".into(),
                0,
                vec![ReceiptAcked {
                    receipt,
                    stale: Some(error.to_string()),
                }],
            )),
        }
    }

    /// Nacks one lease: the message is retried (now or after a delay) or dead-lettered.
    pub async fn nack(&self, request: NackRequest) -> OpsResult<Nacked> {
        let receipt = parse_receipt(&request.receipt)?;
        if let Some(delay) = request.delay_ms
            && !(0..=limits::DELAY_MS_MAX).contains(&delay)
        {
            return Err(OpsError::invalid_field(format!(
                "delay_ms must be between 0 and {}",
                limits::DELAY_MS_MAX
            )));
        }
        let now_ms = self.now_ms();
        let params = NackParams {
            queue: request.queue,
            receipt,
            error: request.error.map(error_text),
            delay_ms: request.delay_ms,
            permanent: request.permanent,
            delivery: None,
            now_ms,
        };
        Ok(match self.store.message_nack(params).await? {
            NackOutcome::Retry { visible_at_ms } => Nacked::Retry {
                visible_at_ms,
                delayed: visible_at_ms > now_ms,
            },
            NackOutcome::DeadLettered { queue } => Nacked::DeadLettered {
                queue: queue.to_string(),
            },
        })
    }

    /// Extends a lease, or with 0 releases it ([`Ops::give_back`]); returns when it now expires.
    pub async fn extend(
        &self,
        queue: String,
        receipt: &str,
        visibility_timeout_ms: i64,
    ) -> OpsResult<Millis> {
        let receipt = parse_receipt(receipt)?;
        if !(0..=limits::VISIBILITY_TIMEOUT_MS_MAX).contains(&visibility_timeout_ms) {
            return Err(OpsError::invalid_field(format!(
                "visibility_timeout_ms must be between 0 and {}",
                limits::VISIBILITY_TIMEOUT_MS_MAX
            )));
        }
        if visibility_timeout_ms == 0 {
            // Ending the lease now is a release, by every door (HTTP and gRPC extend, SQS's
            // ChangeMessageVisibility): the message is ready at once and no failure is counted,
            // where a lease left to run out would count one.
            self.give_back(queue, receipt, false).await?;
            return Ok(self.now_ms());
        }
        Ok(self
            .store
            .message_extend(ExtendParams {
                queue,
                receipt,
                timeout_ms: visibility_timeout_ms,
                now_ms: self.now_ms(),
            })
            .await?)
    }
}

impl Ops {
    /// Releases a lease (an extend to 0, by any door): ready again at once, no failure counted.
    /// `unstarted`: the message was never handed to a handler (a worker paused or stopped
    /// before it ran), so its delivery is not counted in its attempts either.
    pub async fn release(&self, queue: String, receipt: &str, unstarted: bool) -> OpsResult<()> {
        let receipt = parse_receipt(receipt)?;
        self.give_back(queue, receipt, unstarted).await
    }

    /// Gives a lease back without counting a failure: the message is ready again at once, with
    /// no error and no backoff, and a release never dead-letters it. The delivery still counts
    /// in its attempts unless `unstarted` (the SQLite store's `dispatch::Index::give_back`).
    async fn give_back(&self, queue: String, receipt: Receipt, unstarted: bool) -> OpsResult<()> {
        Ok(self
            .store
            .message_give_back(GiveBackParams {
                queue,
                receipt,
                unstarted,
                now_ms: self.now_ms(),
            })
            .await?)
    }
}

/// A failed attempt's error as it is kept (`last_error`, the failure log): cut to
/// [`limits::ERROR_BYTES_MAX`] bytes at a character boundary. One rule for every way a failure
/// is recorded (a nack by any door, a push, the embedded SDK), so no store decides it.
pub fn error_text(mut text: String) -> String {
    let kept = sluice_core::message::cut_utf8(&text, limits::ERROR_BYTES_MAX).len();
    text.truncate(kept);
    text
}

/// The refusal of an ack with more than [`ACK_RECEIPTS_MAX`] receipts (also given by a
/// protocol that counts them before parsing).
pub fn too_many_receipts(count: usize) -> OpsError {
    OpsError::too_large(format!(
        "receipts: {count} receipts; at most {ACK_RECEIPTS_MAX} per ack"
    ))
}

/// The refusal of an ack with more than [`NEXT_STEPS_MAX`] next steps (also given by a
/// protocol that counts them before parsing).
pub fn too_many_next_steps(count: usize) -> OpsError {
    OpsError::too_large(format!(
        "then: {count} next steps; at most {NEXT_STEPS_MAX} per ack"
    ))
}

fn parse_receipt(text: &str) -> OpsResult<Receipt> {
    Receipt::parse(text).ok_or_else(|| {
        OpsError::malformed_receipt(format!(
            "{:?} is not a receipt from receive",
            sluice_core::message::cut_utf8(text, 80)
        ))
    })
}

/// The refusal of an ack with stale receipts: every receipt's result in its details.
fn stale_receipts(message: String, acked: usize, results: Vec<ReceiptAcked>) -> OpsError {
    let out = Acked {
        acked,
        results,
        then: None,
    };
    OpsError::stale_receipt(message).with_details(Details::Acks(out))
}
