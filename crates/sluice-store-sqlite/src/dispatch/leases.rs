//! The life of a lease: claim, ack, nack, extend, lease expiry, and the failure path that
//! retries or dead-letters as [`sluice_core::rules::failure::decide`] says.

use std::cmp::Reverse;
use std::sync::Arc;

use sluice_core::clock::Millis;
use sluice_core::message::{ClaimedMessage, DeadLetterInfo, Payload, Receipt};
use sluice_core::queue::QueueConfig;
use sluice_core::rules::backoff::random_draw;
use sluice_core::rules::failure::{self, Failure, FailureDecision, NoDeadLetterQueue};

use super::{
    Change, Claimed, Index, LEASE_EXPIRED_ERROR, LeaseError, NackOutcome, Place, QueueState, Seq,
};

impl Index {
    /// Makes due delayed messages ready and handles expired leases of one queue.
    pub fn tick_queue(&mut self, queue: &str, now_ms: Millis) -> Vec<Change> {
        let mut changes = Vec::new();
        let Some(state) = self.queues.get_mut(queue) else {
            return changes;
        };
        while let Some(&(visible_at_ms, seq)) = state.delayed.first() {
            if visible_at_ms > now_ms {
                break;
            }
            state.delayed.pop_first();
            if let Some(entry) = self.entries.get_mut(&seq) {
                entry.place = Place::Ready;
                state.ready.insert((Reverse(entry.priority), seq));
            }
        }
        let mut expired = Vec::new();
        while let Some(&(deadline_ms, seq)) = state.leased.first() {
            if deadline_ms > now_ms {
                break;
            }
            expired.push(seq);
            state.leased.pop_first();
            if let Some(entry) = self.entries.get_mut(&seq) {
                if let Place::Leased { token, .. } = entry.place {
                    entry.expired_lease_token = Some(token);
                }
                // Put it back in the ready set so the failure path below finds it where it expects.
                entry.place = Place::Ready;
                state.ready.insert((Reverse(entry.priority), seq));
            }
        }
        for seq in expired {
            if let Some(state) = self.queues.get_mut(queue) {
                state.counters.lease_expired += 1;
                state.meter.failed(now_ms);
            }
            changes.extend(
                self.fail(
                    seq,
                    Arc::from(LEASE_EXPIRED_ERROR),
                    Failure::LeaseExpired,
                    now_ms,
                )
                .ok()
                .map(|(change, _)| change),
            );
        }
        changes
    }

    /// Ticks every queue; returns the changes to persist.
    pub fn tick_all(&mut self, now_ms: Millis) -> Vec<Change> {
        let names = self.queue_names();
        names
            .iter()
            .flat_map(|name| self.tick_queue(name, now_ms))
            .collect()
    }

    /// Leases up to `max` ready messages of `queue` for `lease_ms`. `token` makes each receipt
    /// unguessable. With `runs`, a message leased from a lane brings the members that follow
    /// it, in order, while they are visible ([`sluice_core::rules::lanes`]: SQS's FIFO receive).
    /// The caller must have ticked the queue first.
    pub fn claim(
        &mut self,
        queue: &str,
        max: usize,
        runs: bool,
        lease_ms: Millis,
        now_ms: Millis,
        mut token: impl FnMut() -> u32,
    ) -> Vec<Claimed> {
        let mut claimed = Vec::new();
        let Some(state) = self.queues.get_mut(queue) else {
            return claimed;
        };
        let max = state.claimable(max, now_ms);
        let deadline_ms = now_ms + lease_ms;
        debug_assert!(deadline_ms > now_ms || lease_ms == 0);
        while claimed.len() < max {
            let Some(&(Reverse(priority), seq)) = state.ready.first() else {
                break;
            };
            // A message on disk goes first: stop, and let the store page it in.
            if state.blocked_by_cold(priority, seq) {
                break;
            }
            state.ready.pop_first();
            let Some(entry) = self.entries.get_mut(&seq) else {
                continue;
            };
            claimed.push(lease(
                &mut state.leased,
                &mut state.counters,
                entry,
                deadline_ms,
                token(),
                now_ms,
            ));
            let lane_key = match runs {
                true => state.lane_of(entry.key.as_ref()),
                false => None,
            };
            let Some(lane) = lane_key.and_then(|key| state.lanes.get_mut(&key)) else {
                continue;
            };
            let mut last = seq;
            while claimed.len() < max {
                let Some(next) = lane.next_after(last) else {
                    break;
                };
                let Some(entry) = self.entries.get_mut(&next) else {
                    break;
                };
                if entry.place != Place::Waiting || entry.visible_at_ms > now_ms {
                    break;
                }
                lane.lend(next);
                claimed.push(lease(
                    &mut state.leased,
                    &mut state.counters,
                    entry,
                    deadline_ms,
                    token(),
                    now_ms,
                ));
                last = next;
            }
        }
        if let Some(bucket) = &mut state.bucket {
            // claimable() allowed no more than the bucket's whole tokens, so all are taken.
            bucket.take(claimed.len());
        }
        claimed
    }

    /// Checks that `receipt` is the current lease of a message in `queue`.
    pub(super) fn leased_entry(&self, queue: &str, receipt: &Receipt) -> Result<Seq, LeaseError> {
        let seq = self.seq_of(&receipt.message_id).ok_or(LeaseError::Stale)?;
        let entry = &self.entries[&seq];
        if &*entry.queue != queue {
            return Err(LeaseError::NotInQueue);
        }
        match entry.place {
            Place::Leased { token, .. }
                if token == receipt.token && entry.lease_number == receipt.lease_number =>
            {
                Ok(seq)
            }
            _ => Err(LeaseError::Stale),
        }
    }

    /// Acks a lease: the message is done and leaves the index. Returns its seq.
    pub fn ack(
        &mut self,
        queue: &str,
        receipt: &Receipt,
        now_ms: Millis,
    ) -> Result<Seq, LeaseError> {
        // A lease that ran out still acks until the message is handed out again (or
        // dead-lettered): the work was done, and nobody else holds the message.
        let seq = match self.leased_entry(queue, receipt) {
            Ok(seq) => seq,
            Err(LeaseError::Stale) => self
                .expired_entry(queue, receipt)
                .ok_or(LeaseError::Stale)?,
            Err(error) => return Err(error),
        };
        let entry = self.remove(seq, now_ms);
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.acked += 1;
            if let Some(entry) = entry {
                state.meter.acked(entry.enqueued_at_ms, now_ms);
                state
                    .ack_latency_ms
                    .record((now_ms - entry.enqueued_at_ms).max(0) as u64);
            }
        }
        Ok(seq)
    }

    /// The seq of a message whose lease `receipt` ran out and which nobody holds since.
    pub(super) fn expired_entry(&self, queue: &str, receipt: &Receipt) -> Option<Seq> {
        let seq = self.seq_of(&receipt.message_id)?;
        let entry = self.entries.get(&seq)?;
        let not_leased = !matches!(entry.place, Place::Leased { .. });
        let same_lease = entry.lease_number == receipt.lease_number
            && entry.expired_lease_token == Some(receipt.token);
        (&*entry.queue == queue && not_leased && same_lease).then_some(seq)
    }

    /// Nacks a lease: the message is retried after `delay_ms` (or the queue's backoff), or
    /// dead-lettered when `permanent` or out of attempts, as [`failure::decide`] says.
    pub fn nack(
        &mut self,
        queue: &str,
        receipt: &Receipt,
        error: Option<Arc<str>>,
        delay_ms: Option<Millis>,
        permanent: bool,
        now_ms: Millis,
    ) -> Result<(Change, NackOutcome), LeaseError> {
        let seq = self.leased_entry(queue, receipt)?;
        let failure = if permanent {
            Failure::Rejected
        } else {
            Failure::Nacked { delay_ms }
        };
        let error = error.unwrap_or_else(|| Arc::from("nacked"));
        let outcome = self.fail(seq, error, failure, now_ms)?;
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.nacked += 1;
            state.meter.failed(now_ms);
        }
        Ok(outcome)
    }

    /// A failed attempt of a leased message: retried later or dead-lettered, as
    /// [`failure::decide`] says. Refused, changing nothing, when a rejection finds no
    /// dead-letter queue.
    pub(super) fn fail(
        &mut self,
        seq: Seq,
        error: Arc<str>,
        failure: Failure,
        now_ms: Millis,
    ) -> Result<(Change, NackOutcome), LeaseError> {
        let entry = self.entries.get(&seq).ok_or(LeaseError::Stale)?;
        let config = self
            .queues
            .get(&*entry.queue)
            .ok_or(LeaseError::NotInQueue)?
            .config
            .clone();
        let decision = failure::decide(&config, entry.attempts, failure, now_ms, random_draw)
            .map_err(|NoDeadLetterQueue| LeaseError::NoDeadLetterQueue)?;
        match decision {
            FailureDecision::DeadLetter { queue, .. } => self
                .dead_letter(seq, queue, error, now_ms)
                .map(|(change, queue)| (change, NackOutcome::DeadLettered { queue })),
            FailureDecision::Retry { at_ms } => self.retry(seq, error, at_ms, now_ms),
        }
        .ok_or(LeaseError::Stale)
    }

    /// Makes a failed message visible again at `at_ms`, recording its error.
    pub(super) fn retry(
        &mut self,
        seq: Seq,
        error: Arc<str>,
        at_ms: Millis,
        now_ms: Millis,
    ) -> Option<(Change, NackOutcome)> {
        let entry = self.entries.get_mut(&seq)?;
        let state = self.queues.get_mut(&*entry.queue)?;
        match entry.place {
            Place::Ready => {
                state.ready.remove(&(Reverse(entry.priority), seq));
            }
            Place::Leased { deadline_ms, .. } => {
                state.leased.remove(&(deadline_ms, seq));
            }
            Place::Delayed | Place::Waiting => {}
        }
        entry.last_error = Some(error.clone());
        entry.visible_at_ms = at_ms;
        entry.place = Place::Waiting;
        let change = Change::Retried {
            seq,
            attempts: entry.attempts,
            visible_at_ms: at_ms,
            last_error: Some(error),
        };
        self.come_back(seq, now_ms);
        Some((
            change,
            NackOutcome::Retry {
                visible_at_ms: at_ms,
            },
        ))
    }

    /// Moves a message to a dead-letter queue, creating that queue's index if needed.
    pub(super) fn dead_letter(
        &mut self,
        seq: Seq,
        dlq: &str,
        error: Arc<str>,
        now_ms: Millis,
    ) -> Option<(Change, Arc<str>)> {
        if !self.queues.contains_key(dlq) {
            self.queues.insert(
                Arc::from(dlq),
                QueueState::new(Arc::new(QueueConfig::for_dead_letter_queue(dlq))),
            );
        }
        let mut entry = self.entries.remove(&seq)?;
        let source = entry.queue.clone();
        let state = self.queues.get_mut(&*source)?;
        state.counters.dead_lettered += 1;
        let next = Self::detach(state, &mut entry);
        if let Some(next) = next {
            self.activate_waiting(&source, next, now_ms);
        }
        let info = Arc::new(DeadLetterInfo {
            source_queue: source.to_string(),
            last_error: Some(error.to_string()),
            attempts: entry.attempts,
            first_seen_at_ms: entry.first_received_at_ms.unwrap_or(entry.enqueued_at_ms),
            last_seen_at_ms: now_ms,
        });
        let dlq_name = self.queue_name(dlq)?;
        entry.queue = dlq_name.clone();
        entry.dead_letter = Some(info.clone());
        entry.attempts = 0;
        entry.first_received_at_ms = None;
        entry.last_error = Some(error);
        entry.visible_at_ms = now_ms;
        if let Some(payload) = &entry.payload {
            // insert() counts the payload again.
            self.cached_payload_bytes = self
                .cached_payload_bytes
                .saturating_sub(payload.weight_bytes());
        }
        self.insert(entry, now_ms);
        if let Some(state) = self.queues.get_mut(&*dlq_name) {
            state.counters.enqueued += 1;
            state.meter.enqueued(1, now_ms);
        }
        Some((
            Change::DeadLettered {
                seq,
                queue: dlq_name.clone(),
                info,
            },
            dlq_name,
        ))
    }

    /// Pushes a lease's deadline to `now + timeout_ms`; returns the new deadline.
    pub fn extend(
        &mut self,
        queue: &str,
        receipt: &Receipt,
        timeout_ms: Millis,
        now_ms: Millis,
    ) -> Result<Millis, LeaseError> {
        let seq = self.leased_entry(queue, receipt)?;
        let state = self.queues.get_mut(queue).ok_or(LeaseError::NotInQueue)?;
        let entry = self.entries.get_mut(&seq).ok_or(LeaseError::Stale)?;
        let Place::Leased { deadline_ms, token } = entry.place else {
            return Err(LeaseError::Stale);
        };
        state.leased.remove(&(deadline_ms, seq));
        let deadline_ms = now_ms + timeout_ms;
        entry.place = Place::Leased { deadline_ms, token };
        state.leased.insert((deadline_ms, seq));
        Ok(deadline_ms)
    }

    /// Gives a lease back without counting a failure: the message is ready again at once, with
    /// no error and no backoff (SQS's `ChangeMessageVisibility` to 0). Its attempt count keeps
    /// this delivery, as SQS's receive count does, so `max_attempts` still bounds how often a
    /// message that keeps being given back is delivered. Like an expired lease, the receipt
    /// still acks until the message is handed out again.
    ///
    /// `unstarted`: the message was never handed to a handler, so the delivery is not counted
    /// either: its attempts (and first receive) are as before the claim. Returns the record to
    /// persist then: (seq, attempts, first receive).
    pub fn give_back(
        &mut self,
        queue: &str,
        receipt: &Receipt,
        unstarted: bool,
        now_ms: Millis,
    ) -> Result<Option<(Seq, u32, Option<Millis>)>, LeaseError> {
        let seq = self.leased_entry(queue, receipt)?;
        let state = self.queues.get_mut(queue).ok_or(LeaseError::NotInQueue)?;
        let entry = self.entries.get_mut(&seq).ok_or(LeaseError::Stale)?;
        let Place::Leased { deadline_ms, token } = entry.place else {
            return Err(LeaseError::Stale);
        };
        state.leased.remove(&(deadline_ms, seq));
        entry.expired_lease_token = Some(token);
        entry.visible_at_ms = now_ms;
        entry.place = Place::Waiting;
        let uncounted = unstarted.then(|| {
            entry.attempts = entry.attempts.saturating_sub(1);
            if entry.attempts == 0 {
                entry.first_received_at_ms = None;
            }
            (seq, entry.attempts, entry.first_received_at_ms)
        });
        self.come_back(seq, now_ms);
        Ok(uncounted)
    }
}

/// Leases `entry` (out of every set already) until `deadline_ms` under `token`.
fn lease(
    leased: &mut std::collections::BTreeSet<(Millis, Seq)>,
    counters: &mut sluice_core::store::Counters,
    entry: &mut super::Entry,
    deadline_ms: Millis,
    token: u32,
    now_ms: Millis,
) -> Claimed {
    entry.attempts += 1;
    entry.lease_number += 1;
    entry.first_received_at_ms.get_or_insert(now_ms);
    entry.expired_lease_token = None;
    entry.leased_at_ms = Some(now_ms);
    entry.place = Place::Leased { deadline_ms, token };
    leased.insert((deadline_ms, entry.seq));
    counters.delivered += 1;
    let message = ClaimedMessage {
        message_id: entry.id,
        receipt: Receipt {
            message_id: entry.id,
            lease_number: entry.lease_number,
            token,
        },
        payload: entry
            .payload
            .clone()
            .unwrap_or_else(|| Arc::new(Payload::default())),
        idempotency_key: entry.idempotency_key.as_deref().map(str::to_owned),
        key: entry.key.as_deref().map(str::to_owned),
        priority: entry.priority,
        attempts: entry.attempts,
        enqueued_at_ms: entry.enqueued_at_ms,
        first_received_at_ms: entry.first_received_at_ms.unwrap_or(now_ms),
        last_error: entry.last_error.as_deref().map(str::to_owned),
        lease_expires_at_ms: deadline_ms,
        dead_letter: entry.dead_letter.as_deref().cloned(),
    };
    Claimed {
        seq: entry.seq,
        payload_cached: entry.payload.is_some(),
        message,
    }
}
