//! A message's way through a queue (`MessageStore`): enqueue, claim, the answers to a lease
//! (ack, nack, extend, give back), and cancel. Pause and purge are the queue's (`queues.rs`).

use crate::dispatch::CancelRefused;
use crate::schema::STATE_CANCELLED;
use async_trait::async_trait;
use sluice_core::message::MessageState;
use sluice_core::store::{CancelOutcome, LookupStore, MessageGetParams, MessageRef, MessageStore};
use std::sync::Arc;

use sluice_core::Millis;
use sluice_core::rules::backpressure::queue_full_retry_after_s;
use sluice_core::store::{
    AckParams, Claim, ClaimParams, EnqueueParams, Enqueued, ExtendParams, GiveBackParams,
    NackParams, StoreError, StoreResult,
};
use sluice_core::store::{LeaseError, NackOutcome, Seq};
use tokio::sync::oneshot;

use crate::reads::read_payloads;
use crate::writer::WriteOp;
use crate::{SharedSqliteStore, SqliteStore};

/// Page-ins one claim may wait for (`claim_paging`).
const CLAIM_PAGE_INS_MAX: u8 = 8;

impl SharedSqliteStore {
    /// Claims; with `record_now` the attempt counts are durable before the claim returns
    /// (otherwise they wait in `claims.rs` for an ack).
    pub(crate) async fn claim(&self, params: ClaimParams, record_now: bool) -> StoreResult<Claim> {
        self.claim_paging(params, record_now, CLAIM_PAGE_INS_MAX)
            .await
    }

    /// A claim; when it comes up short while messages of the queue wait on disk, it pages them
    /// in and claims again for the rest, at most `rounds` times (each brings in the range the
    /// claim stopped at, so a few are enough for a claim that meets several priorities).
    async fn claim_paging(
        &self,
        params: ClaimParams,
        record_now: bool,
        rounds: u8,
    ) -> StoreResult<Claim> {
        let store = &self.0;
        let mut recorded = None;
        let (claimed, next_change_at_ms, short, page_ins) = {
            let mut index = store.index.lock();
            let config = index
                .queue_config(&params.queue)
                .ok_or_else(|| StoreError::QueueNotFound(params.queue.clone()))?;
            let changes = index.tick_queue(&params.queue, params.now_ms);
            if !changes.is_empty() {
                if let Some(dlq) = &config.dead_letter_queue {
                    store.notifier.wake(dlq);
                }
                store.send(WriteOp::Apply {
                    changes,
                    now_ms: params.now_ms,
                    reply: None,
                })?;
            }
            let lease_ms = params.lease_ms.unwrap_or(config.visibility_timeout_ms);
            let claimed = index.claim(
                &params.queue,
                params.max,
                params.lane_runs,
                lease_ms,
                params.now_ms,
                rand::random,
            );
            if !claimed.is_empty() {
                let records = claimed
                    .iter()
                    .map(|c| (c.seq, c.message.attempts, c.message.first_received_at_ms))
                    .collect();
                let reply = record_now.then(|| {
                    let (reply, wait) = oneshot::channel();
                    recorded = Some(wait);
                    reply
                });
                store.send(WriteOp::Claimed { records, reply })?;
            }
            // Paging (`paging.rs`): a short claim with messages on disk pages in now and tries
            // again; otherwise a head that ran low is refilled in the background.
            let short = claimed.len() < params.max && index.cold_count(&params.queue) > 0;
            let page_ins = if short {
                Vec::new()
            } else {
                index.page_ins_wanted(&params.queue)
            };
            (
                claimed,
                index.next_change_at(&params.queue),
                short,
                page_ins,
            )
        };
        self.page_in_soon(page_ins, params.now_ms);
        if let Some(wait) = recorded {
            SqliteStore::wait(wait).await?;
        }
        let missing: Vec<Seq> = claimed
            .iter()
            .filter(|c| !c.payload_cached)
            .map(|c| c.seq)
            .collect();
        let mut payloads = if missing.is_empty() {
            Vec::new()
        } else {
            self.0
                .read(move |conn| read_payloads(conn, &missing))
                .await?
        };
        let messages = claimed
            .into_iter()
            .map(|mut c| {
                if !c.payload_cached
                    && let Some(position) = payloads.iter().position(|(seq, _)| *seq == c.seq)
                {
                    c.message.payload = Arc::new(payloads.swap_remove(position).1);
                }
                c.message
            })
            .collect::<Vec<_>>();
        if short && rounds > 0 {
            self.page_in_now(&params.queue, params.now_ms).await;
            let rest = ClaimParams {
                max: params.max - messages.len(),
                ..params
            };
            let mut more = Box::pin(self.claim_paging(rest, record_now, rounds - 1)).await?;
            let mut messages = messages;
            messages.append(&mut more.messages);
            return Ok(Claim {
                messages,
                next_change_at_ms: more.next_change_at_ms,
            });
        }
        Ok(Claim {
            messages,
            next_change_at_ms,
        })
    }
}

/// The write an ack sends once the index has let the messages go, and its answer.
type AckWrite = (WriteOp, oneshot::Receiver<StoreResult<()>>);

/// What acking in the index gives: an answer per receipt, and the write, if any was acked.
type AckedInIndex = (Vec<Result<(), LeaseError>>, Option<AckWrite>);

impl SqliteStore {
    /// Acks each receipt in the index; the results per receipt, in order, and the write that
    /// makes the acked ones durable (none when every receipt was stale). The caller sends it
    /// while it still holds the index lock, so the disk sees changes in the index's order.
    fn ack_in_index(
        &self,
        index: &mut crate::dispatch::Index,
        params: &mut AckParams,
    ) -> StoreResult<AckedInIndex> {
        let Some(config) = index.queue_config(&params.queue) else {
            return Err(StoreError::QueueNotFound(params.queue.clone()));
        };
        let kept_until = config.kept_until(params.now_ms);
        let mut results = Vec::with_capacity(params.receipts.len());
        let mut seqs = Vec::new();
        let mut memos = Vec::new();
        for receipt in &params.receipts {
            let entry = index
                .seq_of(&receipt.message_id)
                .and_then(|seq| index.entry(seq));
            // The acked record keeps the delivery count the lease had.
            let attempts = entry.map(|entry| (entry.attempts, entry.first_received_at_ms));
            let memo = entry.and_then(|entry| {
                let key = entry.idempotency_key.clone()?;
                Some((entry.queue.clone(), key, entry.id))
            });
            match index.ack(&params.queue, receipt, params.now_ms) {
                Ok(seq) => {
                    self.log_delivery(seq, params.delivery.take())?;
                    let (attempts, first_received_at_ms) = attempts.unwrap_or_default();
                    seqs.push((seq, attempts, first_received_at_ms));
                    memos.extend(memo);
                    results.push(Ok(()));
                }
                Err(error) => results.push(Err(error)),
            }
        }
        if seqs.is_empty() {
            return Ok((results, None));
        }
        let (reply, wait) = oneshot::channel();
        let op = WriteOp::Ack {
            seqs,
            memos,
            result: params.result.take(),
            kept_until,
            now_ms: params.now_ms,
            reply,
        };
        Ok((results, Some((op, wait))))
    }
}

/// Checks that every batch's queue exists and reserves room under each `max_depth` (noted in
/// `reserved`, for the caller to release once the batches are stored or failed); the first
/// refusal ends it.
fn reserve_batches(
    index: &mut crate::dispatch::Index,
    batches: &[EnqueueParams],
    now_ms: Millis,
    reserved: &mut Vec<(Arc<str>, u64)>,
) -> StoreResult<()> {
    for batch in batches {
        let config = index
            .queue_config(&batch.queue)
            .ok_or_else(|| StoreError::QueueNotFound(batch.queue.clone()))?;
        let count = batch.messages.len() as u64;
        if let Some(max_depth) = config.max_depth {
            if let Err(depth) = index.reserve(&batch.queue, count) {
                let drain_rate = index.ack_rate(&batch.queue, now_ms);
                return Err(StoreError::QueueFull {
                    queue: batch.queue.clone(),
                    depth,
                    max_depth,
                    refused: count,
                    retry_after_s: queue_full_retry_after_s(count, drain_rate),
                });
            }
            let name = index.queue_name(&batch.queue).expect("config found");
            reserved.push((name, count));
        }
    }
    Ok(())
}

/// One writer op per batch (their queues checked by [`reserve_batches`]), and the answers to
/// wait for.
#[allow(clippy::type_complexity)]
fn enqueue_ops(
    index: &crate::dispatch::Index,
    batches: Vec<EnqueueParams>,
    charges: Vec<crate::inbox::Charge>,
) -> (
    Vec<WriteOp>,
    Vec<oneshot::Receiver<StoreResult<Vec<Enqueued>>>>,
) {
    let mut ops = Vec::with_capacity(batches.len() + 1);
    let mut waits = Vec::with_capacity(batches.len());
    for (batch, charge) in batches.into_iter().zip(charges) {
        let queue = index
            .queue_name(&batch.queue)
            .expect("checked by reserve_batches");
        let dedup_window_ms = index
            .queue_config(&batch.queue)
            .map_or(0, |config| config.dedup_window_ms);
        let (reply, wait) = oneshot::channel();
        ops.push(WriteOp::Enqueue {
            queue,
            dedup_window_ms,
            now_ms: batch.now_ms,
            messages: batch.messages,
            reply,
            charge,
        });
        waits.push(wait);
    }
    (ops, waits)
}

#[async_trait]
impl MessageStore for SharedSqliteStore {
    async fn message_claim(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, false).await
    }

    async fn message_claim_recorded(&self, params: ClaimParams) -> StoreResult<Claim> {
        self.claim(params, true).await
    }

    /// Stores new messages. A batch that would pass the queue's `max_depth`, or the bound on
    /// the writer's inbox, is refused whole, with nothing changed.
    async fn message_enqueue(&self, params: EnqueueParams) -> StoreResult<Vec<Enqueued>> {
        let store = &self.0;
        if let Some(refused) = store.health.refusal(true) {
            return Err(refused);
        }
        let count = params.messages.len() as u64;
        // New work is refused while too much of it waits for the writer; nothing has changed
        // yet, so the caller can simply try again.
        let charge = store.inbox.charge(&params.messages)?;
        let (queue, dedup_window_ms, reserved) = {
            let mut index = store.index.lock();
            let config = index
                .queue_config(&params.queue)
                .ok_or_else(|| StoreError::QueueNotFound(params.queue.clone()))?;
            // The depth check counts messages on their way to disk too, so concurrent batches
            // cannot overshoot the limit together. All or nothing for a batch.
            if let Some(max_depth) = config.max_depth {
                index.reserve(&params.queue, count).map_err(|depth| {
                    let drain_rate = index.ack_rate(&params.queue, params.now_ms);
                    StoreError::QueueFull {
                        queue: params.queue.clone(),
                        depth,
                        max_depth,
                        refused: count,
                        retry_after_s: queue_full_retry_after_s(count, drain_rate),
                    }
                })?;
            }
            (
                index.queue_name(&params.queue).expect("config found"),
                config.dedup_window_ms,
                config.max_depth.is_some(),
            )
        };
        let (reply, wait) = oneshot::channel();
        let sent = store.send(WriteOp::Enqueue {
            queue: queue.clone(),
            dedup_window_ms,
            now_ms: params.now_ms,
            messages: params.messages,
            reply,
            charge,
        });
        let result = match sent {
            Ok(()) => SqliteStore::wait(wait).await,
            Err(error) => Err(error),
        };
        if reserved {
            // Published by now (or failed): the index counts what was stored.
            store.index.lock().release(&queue, count);
        }
        result
    }

    /// Acks each receipt on its own; the results are per receipt, in order.
    async fn message_ack(&self, mut params: AckParams) -> StoreResult<Vec<Result<(), LeaseError>>> {
        let store = &self.0;
        let (results, wait) = {
            let mut index = store.index.lock();
            let (results, ack) = store.ack_in_index(&mut index, &mut params)?;
            let wait = match ack {
                Some((op, wait)) => {
                    // Sent under the index lock so the disk sees changes in the order the
                    // index made them.
                    store.send(op)?;
                    Some(wait)
                }
                None => None,
            };
            (results, wait)
        };
        if let Some(wait) = wait {
            SqliteStore::wait(wait).await?;
            // An ack can unblock the next message of a lane.
            store.notifier.wake(&params.queue);
        }
        Ok(results)
    }

    /// Acks one lease and enqueues `then` in one op the writer applies in one transaction
    /// (`WriteOp::Together`): both are on disk, or neither. The next steps are checked first
    /// (queues, `max_depth`, room in the inbox, a full disk), so a refusal leaves the lease.
    async fn message_ack_then(
        &self,
        mut params: AckParams,
        then: Vec<EnqueueParams>,
    ) -> StoreResult<Result<Vec<Vec<Enqueued>>, LeaseError>> {
        let store = &self.0;
        if let Some(refused) = store.health.refusal(true) {
            return Err(refused);
        }
        let charges = then
            .iter()
            .map(|batch| store.inbox.charge(&batch.messages))
            .collect::<StoreResult<Vec<_>>>()?;
        let mut reserved: Vec<(Arc<str>, u64)> = Vec::new();
        let release = |reserved: &[(Arc<str>, u64)]| {
            let mut index = store.index.lock();
            for (queue, count) in reserved {
                index.release(queue, *count);
            }
        };
        let sent = {
            let mut index = store.index.lock();
            let refusal = reserve_batches(&mut index, &then, params.now_ms, &mut reserved).err();
            let acked = match refusal {
                Some(error) => Err(error),
                None => store.ack_in_index(&mut index, &mut params),
            };
            match acked {
                Ok((_, Some((ack, acked)))) => {
                    let (mut ops, waits) = enqueue_ops(&index, then, charges);
                    ops.insert(0, ack);
                    store
                        .send(WriteOp::Together(ops))
                        .map(|()| Ok((acked, waits)))
                }
                Ok((mut results, None)) => Ok(Err(results
                    .pop()
                    .and_then(Result::err)
                    .unwrap_or(LeaseError::Stale))),
                Err(error) => Err(error),
            }
        };
        let outcome = match sent {
            Ok(Ok((acked, waits))) => {
                let mut answers = Vec::with_capacity(waits.len());
                let mut outcome = SqliteStore::wait(acked).await;
                for wait in waits {
                    match SqliteStore::wait(wait).await {
                        Ok(results) => answers.push(results),
                        Err(error) => outcome = outcome.and(Err(error)),
                    }
                }
                store.notifier.wake(&params.queue);
                outcome.map(|()| Ok(answers))
            }
            Ok(Err(stale)) => Ok(Err(stale)),
            Err(error) => Err(error),
        };
        release(&reserved);
        outcome
    }

    /// Enqueues several batches, to one queue or several, in one commit: every message is
    /// stored or none is (a topic's copies).
    async fn message_enqueue_together(
        &self,
        batches: Vec<EnqueueParams>,
    ) -> StoreResult<Vec<Vec<Enqueued>>> {
        let store = &self.0;
        if let Some(refused) = store.health.refusal(true) {
            return Err(refused);
        }
        let charges = batches
            .iter()
            .map(|batch| store.inbox.charge(&batch.messages))
            .collect::<StoreResult<Vec<_>>>()?;
        let mut reserved: Vec<(Arc<str>, u64)> = Vec::new();
        let sent = {
            let mut index = store.index.lock();
            let now_ms = batches.first().map_or(0, |batch| batch.now_ms);
            reserve_batches(&mut index, &batches, now_ms, &mut reserved).and_then(|()| {
                let (ops, waits) = enqueue_ops(&index, batches, charges);
                store.send(WriteOp::Together(ops)).map(|()| waits)
            })
        };
        let outcome = match sent {
            Ok(waits) => {
                let mut answers = Vec::with_capacity(waits.len());
                let mut outcome = Ok(());
                for wait in waits {
                    match SqliteStore::wait(wait).await {
                        Ok(results) => answers.push(results),
                        Err(error) => outcome = outcome.and(Err(error)),
                    }
                }
                outcome.map(|()| answers)
            }
            Err(error) => Err(error),
        };
        let mut index = store.index.lock();
        for (queue, count) in &reserved {
            index.release(queue, *count);
        }
        outcome
    }

    /// Fails an attempt: the index decides between a retry and the dead-letter queue.
    async fn message_nack(&self, params: NackParams) -> StoreResult<NackOutcome> {
        let store = &self.0;
        // Cut by the caller (`sluice_ops::error_text`), like every store's.
        let error = params.error.map(Arc::from);
        let (outcome, wait) = {
            let mut index = store.index.lock();
            if index.queue_config(&params.queue).is_none() {
                return Err(StoreError::QueueNotFound(params.queue));
            }
            let (change, outcome) = index.nack(
                &params.queue,
                &params.receipt,
                error,
                params.delay_ms,
                params.permanent,
                params.now_ms,
            )?;
            // Before the change, so its answer means the attempt is on disk too.
            store.log_delivery(change.seq(), params.delivery)?;
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::Apply {
                changes: vec![change],
                now_ms: params.now_ms,
                reply: Some(reply),
            })?;
            (outcome, wait)
        };
        SqliteStore::wait(wait).await?;
        store.notifier.wake(&params.queue);
        if let NackOutcome::DeadLettered { queue } = &outcome {
            store.notifier.wake(queue);
        }
        Ok(outcome)
    }

    /// Renews a lease (in memory only: leases are not written).
    async fn message_extend(&self, params: ExtendParams) -> StoreResult<Millis> {
        let mut index = self.0.index.lock();
        if index.queue_config(&params.queue).is_none() {
            return Err(StoreError::QueueNotFound(params.queue));
        }
        Ok(index.extend(
            &params.queue,
            &params.receipt,
            params.timeout_ms,
            params.now_ms,
        )?)
    }

    /// Gives a lease back (in memory only, like every lease: after a restart the message is
    /// ready anyway), then wakes the queue's waiting receivers.
    async fn message_give_back(&self, params: GiveBackParams) -> StoreResult<()> {
        {
            let mut index = self.0.index.lock();
            if index.queue_config(&params.queue).is_none() {
                return Err(StoreError::QueueNotFound(params.queue));
            }
            let uncounted = index.give_back(
                &params.queue,
                &params.receipt,
                params.unstarted,
                params.now_ms,
            )?;
            if let Some((seq, attempts, first_received_at_ms)) = uncounted {
                // The claim's record (deferred, or written already) is replaced by this one.
                self.0.send(WriteOp::Claimed {
                    records: vec![(seq, attempts, first_received_at_ms.unwrap_or(0))],
                    reply: None,
                })?;
            }
        }
        self.0.notifier.wake(&params.queue);
        Ok(())
    }

    async fn message_cancel(
        &self,
        params: MessageGetParams,
        reason: Option<String>,
    ) -> StoreResult<CancelOutcome> {
        let store = &self.0;
        if store.index.lock().queue_config(&params.queue).is_none() {
            return Err(StoreError::QueueNotFound(params.queue));
        }
        let Some(id) = self
            .resolve(&params.queue, params.by.clone(), params.now_ms)
            .await?
            .map(|record| record.message_id)
        else {
            return Ok(CancelOutcome::NotFound);
        };
        let wait = {
            let mut index = store.index.lock();
            match index.cancel(&params.queue, &id, params.now_ms) {
                Ok(entry) => {
                    let (reply, wait) = oneshot::channel();
                    store.send(WriteOp::Finish {
                        seqs: vec![entry.seq],
                        state: STATE_CANCELLED,
                        reason: reason.clone(),
                        now_ms: params.now_ms,
                        reply: Some(reply),
                    })?;
                    Some(wait)
                }
                Err(CancelRefused::InFlight) => {
                    return Ok(CancelOutcome::AlreadyProcessing { message_id: id });
                }
                Err(CancelRefused::NotHere) => None,
            }
        };
        if wait.is_none()
            && self
                .cancel_cold(&params.queue, id, reason, params.now_ms)
                .await?
        {
            return Ok(CancelOutcome::Cancelled { message_id: id });
        }
        if let Some(wait) = wait {
            SqliteStore::wait(wait).await?;
            // The next message of its lane may be ready now.
            store.notifier.wake(&params.queue);
            return Ok(CancelOutcome::Cancelled { message_id: id });
        }
        // Not live in this queue: dead-lettered, finished, or not this queue's at all.
        let status = LookupStore::message_get(
            self,
            MessageGetParams {
                queue: params.queue,
                by: MessageRef::Id(id),
                now_ms: params.now_ms,
            },
        )
        .await?;
        Ok(match status {
            // A dead letter someone is consuming from the dead-letter queue.
            Some(status) if status.state == MessageState::InFlight => {
                CancelOutcome::AlreadyProcessing { message_id: id }
            }
            Some(status) => CancelOutcome::AlreadyCompleted {
                message_id: id,
                state: status.state,
            },
            None => CancelOutcome::NotFound,
        })
    }
}
