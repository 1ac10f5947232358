//! The in-memory dispatch index of a single-node store.
//!
//! Dispatch never scans storage: everything a claim needs (ready order by priority, the per-key
//! lanes, the delayed set, lease deadlines) lives here, and a store keeps it in step with what it
//! writes. The index does no IO and never reads the clock: every call takes `now_ms`, and the
//! changes a store must persist come back as [`Change`] values.
//!
//! Ordering: an ordered queue (`fifo`, or `per_key` for messages with a key) puts each message in a
//! *lane*. Only the lane's active message can be ready, delayed (retrying) or in flight; the
//! others wait behind it, so at most one message of a key is in flight and a retry blocks the key.

use std::cmp::Reverse;
use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::clock::Millis;
use crate::message::{
    ClaimedMessage, DeadLetterInfo, MessageState, MessageStatus, Payload, Receipt,
};
use crate::queue::{Ordering, QueueConfig};

/// Position in global enqueue order, assigned by the store; FIFO order within a priority.
pub type Seq = u64;

/// The error text recorded when a lease runs out.
pub const LEASE_EXPIRED_ERROR: &str = "visibility timeout expired";

/// One message as the index knows it (no body unless cached).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Enqueue order.
    pub seq: Seq,
    /// Server-assigned id.
    pub id: Uuid,
    /// Current queue.
    pub queue: Arc<str>,
    /// Client idempotency key.
    pub idempotency_key: Option<Arc<str>>,
    /// Ordering key.
    pub key: Option<Arc<str>>,
    /// Higher first.
    pub priority: i32,
    /// Enqueue time.
    pub enqueued_at_ms: Millis,
    /// Invisible before this time.
    pub visible_at_ms: Millis,
    /// Deliveries in the current queue.
    pub attempts: u32,
    /// Leases ever granted (never reset), part of every receipt.
    pub lease_number: u32,
    /// First delivery in the current queue.
    pub first_received_at_ms: Option<Millis>,
    /// Error of the last failed attempt.
    pub last_error: Option<Arc<str>>,
    /// Body and headers, when the store chose to keep them in memory.
    pub payload: Option<Arc<Payload>>,
    /// Set once dead-lettered.
    pub dead_letter: Option<Arc<DeadLetterInfo>>,
    /// The token of a lease that ran out, which may still ack until the next delivery.
    expired_lease_token: Option<u32>,
    place: Place,
}

impl Entry {
    /// A new entry in `queue`; it is placed when inserted.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        seq: Seq,
        id: Uuid,
        queue: Arc<str>,
        priority: i32,
        key: Option<Arc<str>>,
        enqueued_at_ms: Millis,
        visible_at_ms: Millis,
    ) -> Self {
        Self {
            seq,
            id,
            queue,
            idempotency_key: None,
            key,
            priority,
            enqueued_at_ms,
            visible_at_ms,
            attempts: 0,
            lease_number: 0,
            first_received_at_ms: None,
            last_error: None,
            payload: None,
            dead_letter: None,
            expired_lease_token: None,
            place: Place::Waiting,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Ready,
    Delayed,
    Leased {
        deadline_ms: Millis,
        token: u32,
    },
    /// Behind the active message of its lane.
    Waiting,
}

/// A state change the store must make durable.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A failed attempt (nack or expired lease): visible again at `visible_at_ms`.
    Retried {
        seq: Seq,
        attempts: u32,
        visible_at_ms: Millis,
        last_error: Option<Arc<str>>,
    },
    /// Moved to the dead-letter queue `queue`, with attempts reset.
    DeadLettered {
        seq: Seq,
        queue: Arc<str>,
        info: Arc<DeadLetterInfo>,
    },
}

/// Why a lease operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// The receipt is not the message's current lease (expired and redelivered, or already done).
    #[error("the receipt is stale: the message is no longer leased with it")]
    Stale,
    /// The message is not in the queue the request named.
    #[error("no such message in this queue")]
    NotInQueue,
    /// A permanent failure on a queue without a dead-letter queue.
    #[error("the queue has no dead-letter queue")]
    NoDeadLetterQueue,
}

/// Counters since start, per queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages accepted (not counting duplicates).
    pub enqueued: u64,
    /// Deliveries handed out.
    pub delivered: u64,
    /// Acks.
    pub acked: u64,
    /// Nacks.
    pub nacked: u64,
    /// Messages moved to the dead-letter queue.
    pub dead_lettered: u64,
    /// Leases that ran out.
    pub lease_expired: u64,
}

/// Depth and counters of one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueDepth {
    /// Visible messages (including those waiting behind their lane).
    pub ready: u64,
    /// Invisible until a delay or backoff ends.
    pub delayed: u64,
    /// Leased.
    pub in_flight: u64,
    /// Age of the oldest ready message.
    pub oldest_ready_age_ms: Option<Millis>,
    /// Since start.
    pub counters: Counters,
}

/// One message leased by [`Index::claim`].
#[derive(Debug, Clone)]
pub struct Claimed {
    /// Its seq, for the store's records.
    pub seq: Seq,
    /// False when the payload was not held in memory: the store must fill it in.
    pub payload_cached: bool,
    /// The delivery.
    pub message: ClaimedMessage,
}

/// What the result of a nack was.
#[derive(Debug, Clone, PartialEq)]
pub enum NackOutcome {
    /// Visible again at this time.
    Retry { visible_at_ms: Millis },
    /// Moved to this dead-letter queue.
    DeadLettered { queue: Arc<str> },
}

#[derive(Debug, Default)]
struct Lane {
    members: BTreeSet<Seq>,
    active: Option<Seq>,
}

#[derive(Debug)]
struct QueueState {
    config: Arc<QueueConfig>,
    ready: BTreeSet<(Reverse<i32>, Seq)>,
    delayed: BTreeSet<(Millis, Seq)>,
    leased: BTreeSet<(Millis, Seq)>,
    lanes: HashMap<Arc<str>, Lane>,
    total: u64,
    counters: Counters,
}

impl QueueState {
    fn new(config: Arc<QueueConfig>) -> Self {
        Self {
            config,
            ready: BTreeSet::new(),
            delayed: BTreeSet::new(),
            leased: BTreeSet::new(),
            lanes: HashMap::default(),
            total: 0,
            counters: Counters::default(),
        }
    }

    fn lane_of(&self, key: Option<&Arc<str>>) -> Option<Arc<str>> {
        match self.config.ordering {
            Ordering::Unordered => None,
            Ordering::Fifo => Some(Arc::from("")),
            Ordering::PerKey => key.cloned(),
        }
    }
}

/// The dispatch index: all live messages of all queues.
#[derive(Debug, Default)]
pub struct Index {
    queues: HashMap<Arc<str>, QueueState>,
    entries: HashMap<Seq, Entry>,
    by_id: HashMap<Uuid, Seq>,
    cached_payload_bytes: usize,
}

impl Index {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a queue or replaces its configuration. Changing the ordering of a queue that holds
    /// messages is refused (its lanes would have to be rebuilt under consumers' feet).
    pub fn queue_put(&mut self, name: &str, config: QueueConfig) -> Result<(), String> {
        let config = Arc::new(config);
        match self.queues.get_mut(name) {
            Some(state) => {
                if state.config.ordering != config.ordering && state.total > 0 {
                    return Err(format!(
                        "cannot change ordering from {} to {} while the queue holds {} messages",
                        state.config.ordering.as_str(),
                        config.ordering.as_str(),
                        state.total
                    ));
                }
                state.config = config;
            }
            None => {
                self.queues.insert(Arc::from(name), QueueState::new(config));
            }
        }
        Ok(())
    }

    /// The configuration of a queue.
    pub fn queue_config(&self, name: &str) -> Option<Arc<QueueConfig>> {
        self.queues.get(name).map(|state| state.config.clone())
    }

    /// The names of all queues, sorted.
    pub fn queue_names(&self) -> Vec<Arc<str>> {
        let mut names: Vec<_> = self.queues.keys().cloned().collect();
        names.sort();
        names
    }

    /// The interned name of a queue.
    pub fn queue_name(&self, name: &str) -> Option<Arc<str>> {
        self.queues
            .get_key_value(name)
            .map(|(name, _)| name.clone())
    }

    /// Removes a queue and every message in it; returns the seqs of the messages that went.
    pub fn queue_remove(&mut self, name: &str) -> Vec<Seq> {
        if self.queues.remove(name).is_none() {
            return Vec::new();
        }
        let seqs: Vec<Seq> = self
            .entries
            .values()
            .filter(|e| &*e.queue == name)
            .map(|e| e.seq)
            .collect();
        for seq in &seqs {
            if let Some(entry) = self.entries.remove(seq) {
                self.forget(&entry);
            }
        }
        seqs
    }

    /// Total bytes of payloads held in memory.
    pub fn cached_payload_bytes(&self) -> usize {
        self.cached_payload_bytes
    }

    /// Adds a message (a new enqueue, or one loaded at start). Its queue must exist.
    pub fn insert(&mut self, mut entry: Entry, now_ms: Millis) {
        if let Some(payload) = &entry.payload {
            self.cached_payload_bytes += payload.weight_bytes();
        }
        let Some(interned) = self.queue_name(&entry.queue) else {
            debug_assert!(false, "insert into unknown queue {}", entry.queue);
            return;
        };
        entry.queue = interned;
        let state = self.queues.get_mut(&*entry.queue).expect("interned above");
        let seq = entry.seq;
        state.total += 1;
        let lane = state.lane_of(entry.key.as_ref());
        entry.place = Place::Waiting;
        self.by_id.insert(entry.id, seq);
        self.entries.insert(seq, entry);
        match lane {
            Some(lane_key) => {
                let lane = state.lanes.entry(lane_key).or_default();
                lane.members.insert(seq);
                if lane.active.is_none() {
                    lane.active = Some(seq);
                    Self::activate(
                        state,
                        self.entries.get_mut(&seq).expect("just inserted"),
                        now_ms,
                    );
                }
            }
            None => Self::activate(
                state,
                self.entries.get_mut(&seq).expect("just inserted"),
                now_ms,
            ),
        }
    }

    /// Counts a newly accepted message for the queue's counters.
    pub fn count_enqueued(&mut self, queue: &str, count: u64) {
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.enqueued += count;
        }
    }

    fn activate(state: &mut QueueState, entry: &mut Entry, now_ms: Millis) {
        if entry.visible_at_ms <= now_ms {
            entry.place = Place::Ready;
            state.ready.insert((Reverse(entry.priority), entry.seq));
        } else {
            entry.place = Place::Delayed;
            state.delayed.insert((entry.visible_at_ms, entry.seq));
        }
    }

    /// Takes a message out of its queue's sets and lane, leaving the entry itself alone.
    fn detach(state: &mut QueueState, entry: &mut Entry) -> Option<Seq> {
        match entry.place {
            Place::Ready => {
                state.ready.remove(&(Reverse(entry.priority), entry.seq));
            }
            Place::Delayed => {
                state.delayed.remove(&(entry.visible_at_ms, entry.seq));
            }
            Place::Leased { deadline_ms, .. } => {
                state.leased.remove(&(deadline_ms, entry.seq));
            }
            Place::Waiting => {}
        }
        entry.place = Place::Waiting;
        state.total = state.total.saturating_sub(1);
        // The next member of the lane becomes active when this one leaves.
        let lane_key = state.lane_of(entry.key.as_ref())?;
        let lane = state.lanes.get_mut(&lane_key)?;
        lane.members.remove(&entry.seq);
        if lane.active == Some(entry.seq) {
            lane.active = lane.members.first().copied();
        }
        let next = lane.active;
        if lane.members.is_empty() {
            state.lanes.remove(&lane_key);
        }
        next
    }

    fn forget(&mut self, entry: &Entry) {
        self.by_id.remove(&entry.id);
        if let Some(payload) = &entry.payload {
            self.cached_payload_bytes = self
                .cached_payload_bytes
                .saturating_sub(payload.weight_bytes());
        }
    }

    /// Removes a message entirely (it was acked, or removed by an operator).
    fn remove(&mut self, seq: Seq, now_ms: Millis) -> Option<Entry> {
        let mut entry = self.entries.remove(&seq)?;
        let state = self.queues.get_mut(&*entry.queue)?;
        let next = Self::detach(state, &mut entry);
        if let Some(next) = next {
            self.activate_waiting(&entry.queue.clone(), next, now_ms);
        }
        self.forget(&entry);
        Some(entry)
    }

    fn activate_waiting(&mut self, queue: &str, seq: Seq, now_ms: Millis) {
        let (Some(state), Some(entry)) = (self.queues.get_mut(queue), self.entries.get_mut(&seq))
        else {
            return;
        };
        if entry.place == Place::Waiting {
            Self::activate(state, entry, now_ms);
        }
    }

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
            }
            changes.extend(
                self.fail(seq, Arc::from(LEASE_EXPIRED_ERROR), Some(0), false, now_ms)
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
    /// unguessable. The caller must have ticked the queue first.
    pub fn claim(
        &mut self,
        queue: &str,
        max: usize,
        lease_ms: Millis,
        now_ms: Millis,
        mut token: impl FnMut() -> u32,
    ) -> Vec<Claimed> {
        let mut claimed = Vec::new();
        let Some(state) = self.queues.get_mut(queue) else {
            return claimed;
        };
        while claimed.len() < max {
            let Some((_, seq)) = state.ready.pop_first() else {
                break;
            };
            let Some(entry) = self.entries.get_mut(&seq) else {
                continue;
            };
            let deadline_ms = now_ms + lease_ms;
            let token = token();
            entry.attempts += 1;
            entry.lease_number += 1;
            entry.first_received_at_ms.get_or_insert(now_ms);
            entry.expired_lease_token = None;
            entry.place = Place::Leased { deadline_ms, token };
            state.leased.insert((deadline_ms, seq));
            state.counters.delivered += 1;
            debug_assert!(deadline_ms > now_ms || lease_ms == 0);
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
            claimed.push(Claimed {
                seq,
                payload_cached: entry.payload.is_some(),
                message,
            });
        }
        claimed
    }

    /// The seq of a message id.
    pub fn seq_of(&self, id: &Uuid) -> Option<Seq> {
        self.by_id.get(id).copied()
    }

    /// Checks that `receipt` is the current lease of a message in `queue`.
    fn leased_entry(&self, queue: &str, receipt: &Receipt) -> Result<Seq, LeaseError> {
        let seq = self
            .by_id
            .get(&receipt.message_id)
            .copied()
            .ok_or(LeaseError::Stale)?;
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
        self.remove(seq, now_ms);
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.acked += 1;
        }
        Ok(seq)
    }

    /// The seq of a message whose lease `receipt` ran out and which nobody holds since.
    fn expired_entry(&self, queue: &str, receipt: &Receipt) -> Option<Seq> {
        let seq = *self.by_id.get(&receipt.message_id)?;
        let entry = self.entries.get(&seq)?;
        let not_leased = !matches!(entry.place, Place::Leased { .. });
        let same_lease = entry.lease_number == receipt.lease_number
            && entry.expired_lease_token == Some(receipt.token);
        (&*entry.queue == queue && not_leased && same_lease).then_some(seq)
    }

    /// Nacks a lease: the message is retried after `delay_ms` (or the queue's backoff), or
    /// dead-lettered when `permanent` or out of attempts.
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
        let has_dlq = self
            .queues
            .get(queue)
            .and_then(|s| s.config.dead_letter_queue.as_ref())
            .is_some();
        if permanent && !has_dlq {
            return Err(LeaseError::NoDeadLetterQueue);
        }
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.nacked += 1;
        }
        let error = error.unwrap_or_else(|| Arc::from("nacked"));
        Ok(self
            .fail(seq, error, delay_ms, permanent, now_ms)
            .expect("entry checked above"))
    }

    /// A failed attempt of a leased message: retry later, or dead-letter.
    fn fail(
        &mut self,
        seq: Seq,
        error: Arc<str>,
        delay_ms: Option<Millis>,
        permanent: bool,
        now_ms: Millis,
    ) -> Option<(Change, NackOutcome)> {
        let entry = self.entries.get(&seq)?;
        let config = self.queues.get(&*entry.queue)?.config.clone();
        let out_of_attempts = config.max_attempts > 0 && entry.attempts >= config.max_attempts;
        if let Some(dlq) = config
            .dead_letter_queue
            .as_deref()
            .filter(|_| permanent || out_of_attempts)
        {
            return self
                .dead_letter(seq, dlq, error, now_ms)
                .map(|(change, queue)| (change, NackOutcome::DeadLettered { queue }));
        }
        let delay_ms = delay_ms.unwrap_or_else(|| config.backoff.delay_ms(entry.attempts));
        let state = self.queues.get_mut(&*entry.queue)?;
        let entry = self.entries.get_mut(&seq)?;
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
        entry.visible_at_ms = now_ms + delay_ms.max(0);
        Self::activate(state, entry, now_ms);
        let change = Change::Retried {
            seq,
            attempts: entry.attempts,
            visible_at_ms: entry.visible_at_ms,
            last_error: Some(error),
        };
        Some((
            change,
            NackOutcome::Retry {
                visible_at_ms: entry.visible_at_ms,
            },
        ))
    }

    /// Moves a message to a dead-letter queue, creating that queue's index if needed.
    fn dead_letter(
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

    /// The payload of a message held in memory, if any.
    pub fn payload_of(&self, seq: Seq) -> Option<Arc<Payload>> {
        self.entries
            .get(&seq)
            .and_then(|entry| entry.payload.clone())
    }

    /// Drops a cached payload (to bound memory); the store reads it from disk instead.
    pub fn evict_payload(&mut self, seq: Seq) {
        if let Some(payload) = self
            .entries
            .get_mut(&seq)
            .and_then(|entry| entry.payload.take())
        {
            self.cached_payload_bytes = self
                .cached_payload_bytes
                .saturating_sub(payload.weight_bytes());
        }
    }

    /// When something in `queue` next becomes claimable on its own: a delay ending or a lease
    /// running out.
    pub fn next_change_at(&self, queue: &str) -> Option<Millis> {
        let state = self.queues.get(queue)?;
        let delayed = state.delayed.first().map(|&(at, _)| at);
        let leased = state.leased.first().map(|&(at, _)| at);
        delayed.into_iter().chain(leased).min()
    }

    /// Depth and counters of a queue.
    pub fn depth(&self, queue: &str, now_ms: Millis) -> Option<QueueDepth> {
        let state = self.queues.get(queue)?;
        let in_flight = state.leased.len() as u64;
        let delayed = state.delayed.len() as u64;
        Some(QueueDepth {
            ready: state.total.saturating_sub(in_flight + delayed),
            delayed,
            in_flight,
            oldest_ready_age_ms: self
                .oldest_ready_enqueued_at(state)
                .map(|at| (now_ms - at).max(0)),
            counters: state.counters,
        })
    }

    /// The enqueue time of the oldest ready message: the first of each priority in the ready set.
    fn oldest_ready_enqueued_at(&self, state: &QueueState) -> Option<Millis> {
        let mut oldest: Option<Millis> = None;
        let mut cursor = state.ready.first().copied();
        while let Some((Reverse(priority), seq)) = cursor {
            if let Some(entry) = self.entries.get(&seq) {
                oldest = Some(oldest.map_or(entry.enqueued_at_ms, |o| o.min(entry.enqueued_at_ms)));
            }
            let Some(lower) = priority.checked_sub(1) else {
                break;
            };
            cursor = state.ready.range((Reverse(lower), 0)..).next().copied();
        }
        oldest
    }

    /// What the index knows of a live message (ready, delayed, in flight, or dead in a DLQ).
    pub fn status(&self, id: &Uuid) -> Option<MessageStatus> {
        let entry = self.entries.get(self.by_id.get(id)?)?;
        let (state, lease_expires_at_ms) = match entry.place {
            Place::Leased { deadline_ms, .. } => (MessageState::InFlight, Some(deadline_ms)),
            Place::Delayed => (MessageState::Delayed, None),
            Place::Ready | Place::Waiting => (MessageState::Ready, None),
        };
        Some(MessageStatus {
            message_id: entry.id,
            queue: entry.queue.to_string(),
            state: if entry.dead_letter.is_some() && state != MessageState::InFlight {
                MessageState::Dead
            } else {
                state
            },
            idempotency_key: entry.idempotency_key.as_deref().map(str::to_owned),
            key: entry.key.as_deref().map(str::to_owned),
            priority: entry.priority,
            attempts: entry.attempts,
            enqueued_at_ms: entry.enqueued_at_ms,
            first_received_at_ms: entry.first_received_at_ms,
            visible_at_ms: entry.visible_at_ms,
            lease_expires_at_ms,
            last_error: entry.last_error.as_deref().map(str::to_owned),
            acked_at_ms: None,
            dead_letter: entry.dead_letter.as_deref().cloned(),
        })
    }

    /// How many messages a queue holds in every state.
    pub fn queue_len(&self, queue: &str) -> u64 {
        self.queues.get(queue).map_or(0, |state| state.total)
    }
}

#[cfg(test)]
mod tests;
