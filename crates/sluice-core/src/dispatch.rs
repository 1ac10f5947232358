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
use crate::histogram::{ACK_LATENCY_BOUNDS_MS, Histogram};
use crate::message::{
    ClaimedMessage, DeadLetterInfo, MessageState, MessageStatus, Payload, Receipt,
};
use crate::meter::{Meter, Recent};
use crate::queue::QueueConfig;
use crate::rules::backoff::random_draw;
use crate::rules::failure::{self, Failure, FailureDecision, NoDeadLetterQueue};
use crate::rules::lanes::{self, Lane};
use crate::rules::retention::{self, Expiry};
use crate::rules::token_bucket::TokenBucket;

/// Position in global enqueue order, assigned by the store; FIFO order within a priority.
pub type Seq = u64;

pub use crate::rules::failure::LEASE_EXPIRED_ERROR;
pub use crate::rules::retention::MAX_AGE_ERROR;

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
    /// When the current (or last) lease began.
    leased_at_ms: Option<Millis>,
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
            leased_at_ms: None,
            place: Place::Waiting,
        }
    }

    /// The time retention counts from: when it was dead-lettered for a dead-letter entry, its
    /// enqueue otherwise.
    pub fn aged_from_ms(&self) -> Millis {
        retention::counts_from_ms(
            self.enqueued_at_ms,
            self.dead_letter.as_ref().map(|dead| dead.last_seen_at_ms),
        )
    }

    /// True while leased to a consumer.
    pub fn is_leased(&self) -> bool {
        matches!(self.place, Place::Leased { .. })
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
    /// Removed by retention.
    Expired { seq: Seq },
}

impl Change {
    /// The message the change is about.
    pub fn seq(&self) -> Seq {
        match self {
            Change::Retried { seq, .. }
            | Change::DeadLettered { seq, .. }
            | Change::Expired { seq } => *seq,
        }
    }
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
    /// Messages removed (or dead-lettered) by retention.
    pub expired: u64,
    /// Messages refused because the queue was at `max_depth`.
    pub rejected: u64,
    /// Messages cancelled before delivery.
    pub cancelled: u64,
    /// Messages removed by purges.
    pub purged: u64,
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
    /// True while deliveries are paused.
    pub paused: bool,
    /// Since start.
    pub counters: Counters,
    /// Throughput and latency of the last minutes.
    pub recent: Recent,
    /// Enqueue-to-ack latency of every ack since start, in ms (for metrics).
    pub ack_latency_ms: Histogram,
}

/// Why a cancel did not remove a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelRefused {
    /// The index holds no such message in that queue.
    NotHere,
    /// It is leased to a consumer right now.
    InFlight,
}

/// A page of dead-letter entries, newest first.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterPage {
    /// Matching entries.
    pub entries: Vec<Entry>,
    /// Where the next page starts, when the scan stopped before the end.
    pub next: Option<(Millis, Seq)>,
}

/// Which dead-letter entries to select.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterFilter {
    /// Only entries that came from this queue.
    pub source_queue: String,
    /// Case-insensitive substring of the last error.
    pub error_contains: Option<String>,
    /// Dead-lettered at or after this time.
    pub since_ms: Option<Millis>,
    /// Dead-lettered before this time.
    pub until_ms: Option<Millis>,
}

impl DeadLetterFilter {
    fn matches(&self, entry: &Entry) -> bool {
        let Some(dead) = &entry.dead_letter else {
            return false;
        };
        if dead.source_queue != self.source_queue {
            return false;
        }
        if self
            .since_ms
            .is_some_and(|since| dead.last_seen_at_ms < since)
            || self
                .until_ms
                .is_some_and(|until| dead.last_seen_at_ms >= until)
        {
            return false;
        }
        match &self.error_contains {
            None => true,
            Some(needle) => dead
                .last_error
                .as_deref()
                .is_some_and(|error| error.to_lowercase().contains(&needle.to_lowercase())),
        }
    }
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

#[derive(Debug)]
struct QueueState {
    config: Arc<QueueConfig>,
    ready: BTreeSet<(Reverse<i32>, Seq)>,
    delayed: BTreeSet<(Millis, Seq)>,
    leased: BTreeSet<(Millis, Seq)>,
    lanes: HashMap<Arc<str>, Lane>,
    /// Every message of the queue by (the time its retention counts from, seq): retention takes
    /// from the front, dead-letter listings read from the back.
    members: BTreeSet<(Millis, Seq)>,
    total: u64,
    /// Enqueues admitted by the depth check but not yet in the index.
    reserved: u64,
    paused: bool,
    bucket: Option<TokenBucket>,
    counters: Counters,
    meter: Meter,
    /// Enqueue-to-ack latency since start, in ms (metrics).
    ack_latency_ms: Histogram,
}

impl QueueState {
    fn new(config: Arc<QueueConfig>) -> Self {
        Self {
            config,
            ready: BTreeSet::new(),
            delayed: BTreeSet::new(),
            leased: BTreeSet::new(),
            lanes: HashMap::default(),
            members: BTreeSet::new(),
            total: 0,
            reserved: 0,
            paused: false,
            bucket: None,
            counters: Counters::default(),
            meter: Meter::default(),
            ack_latency_ms: Histogram::new(ACK_LATENCY_BOUNDS_MS),
        }
    }

    /// How many messages a claim may take now: paused, in-flight and rate limits applied.
    fn claimable(&mut self, max: usize, now_ms: Millis) -> usize {
        if self.paused {
            return 0;
        }
        let mut allowed = max;
        if let Some(limit) = self.config.max_in_flight {
            allowed = allowed.min((limit as usize).saturating_sub(self.leased.len()));
        }
        if let Some(bucket) = self.refilled_bucket(now_ms) {
            allowed = allowed.min(bucket.available());
        }
        allowed
    }

    /// The token bucket brought up to `now_ms` (full when first used).
    fn refilled_bucket(&mut self, now_ms: Millis) -> Option<TokenBucket> {
        let limit = self.config.rate_limit?;
        let bucket = self
            .bucket
            .get_or_insert_with(|| TokenBucket::full(&limit, now_ms));
        bucket.refill(now_ms, &limit);
        Some(*bucket)
    }

    /// When the rate limit lets the next delivery through, if it is what holds one back.
    fn next_token_at(&self) -> Option<Millis> {
        let limit = self.config.rate_limit?;
        if self.ready.is_empty() || self.paused {
            return None;
        }
        self.bucket?.next_token_at(&limit)
    }

    fn lane_of(&self, key: Option<&Arc<str>>) -> Option<Arc<str>> {
        lanes::lane_key(self.config.ordering, key)
    }
}

/// Most entries a map may hold for [`Index::compact`] to shrink it.
pub const COMPACT_LEN_MAX: usize = 100_000;

/// Smallest capacity worth shrinking from.
const COMPACT_CAPACITY_MIN: usize = 4_096;

fn shrink_if_sparse<K: Eq + std::hash::Hash, V, S: std::hash::BuildHasher>(
    map: &mut std::collections::HashMap<K, V, S>,
) {
    let (len, capacity) = (map.len(), map.capacity());
    if capacity >= COMPACT_CAPACITY_MIN
        && len <= COMPACT_LEN_MAX
        && len.saturating_mul(4) <= capacity
    {
        map.shrink_to(len * 2);
    }
}

/// The dispatch index: all live messages of all queues.
#[derive(Debug, Default)]
pub struct Index {
    queues: HashMap<Arc<str>, QueueState>,
    entries: HashMap<Seq, Entry>,
    by_id: HashMap<Uuid, Seq>,
    cached_payload_bytes: usize,
    /// Where the last retention pass ran out of budget: the next one starts there, so one
    /// queue's backlog of expiries cannot starve the others.
    expire_from: Option<Arc<str>>,
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
                if state.config.rate_limit != config.rate_limit {
                    state.bucket = None;
                }
                state.config = config;
            }
            None => {
                self.queues.insert(Arc::from(name), QueueState::new(config));
            }
        }
        Ok(())
    }

    /// True when some queue names `name` as its dead-letter queue.
    pub fn is_dead_letter_queue(&self, name: &str) -> bool {
        self.queues
            .values()
            .any(|state| state.config.dead_letter_queue.as_deref() == Some(name))
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
        let Some(state) = self.queues.remove(name) else {
            return Vec::new();
        };
        let seqs: Vec<Seq> = state.members.iter().map(|&(_, seq)| seq).collect();
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
        state.members.insert((entry.aged_from_ms(), seq));
        let lane = state.lane_of(entry.key.as_ref());
        entry.place = Place::Waiting;
        self.by_id.insert(entry.id, seq);
        self.entries.insert(seq, entry);
        match lane {
            Some(lane_key) => {
                if state.lanes.entry(lane_key).or_default().join(seq) {
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

    /// Counts newly accepted messages for the queue's counters.
    pub fn count_enqueued(&mut self, queue: &str, count: u64, now_ms: Millis) {
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.enqueued += count;
            state.meter.enqueued(count, now_ms);
        }
    }

    /// Admits `count` more messages against the queue's `max_depth`, counting them until
    /// [`Index::release`]. Refused with the depth (stored plus admitted) when they do not fit,
    /// and counted as rejected.
    pub fn reserve(&mut self, queue: &str, count: u64) -> Result<(), u64> {
        let Some(state) = self.queues.get_mut(queue) else {
            return Ok(());
        };
        let depth = state.total + state.reserved;
        if let Some(max_depth) = state.config.max_depth
            && depth + count > max_depth
        {
            state.counters.rejected += count;
            return Err(depth);
        }
        state.reserved += count;
        Ok(())
    }

    /// Ends a reservation made by [`Index::reserve`] (the messages are in the index now, or
    /// were not stored).
    pub fn release(&mut self, queue: &str, count: u64) {
        if let Some(state) = self.queues.get_mut(queue) {
            state.reserved = state.reserved.saturating_sub(count);
        }
    }

    /// Acks per second over the last minute: how fast the queue drains.
    pub fn ack_rate(&self, queue: &str, now_ms: Millis) -> f64 {
        self.queues.get(queue).map_or(0.0, |state| {
            state.meter.recent(now_ms).last_1m.acked as f64 / 60.0
        })
    }

    /// Pauses or resumes deliveries; returns false for an unknown queue.
    pub fn set_paused(&mut self, queue: &str, paused: bool) -> bool {
        match self.queues.get_mut(queue) {
            Some(state) => {
                state.paused = paused;
                true
            }
            None => false,
        }
    }

    /// True while the queue's deliveries are paused.
    pub fn is_paused(&self, queue: &str) -> bool {
        self.queues.get(queue).is_some_and(|state| state.paused)
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
        state.members.remove(&(entry.aged_from_ms(), entry.seq));
        // The next member of the lane becomes active when this one leaves.
        let lane_key = state.lane_of(entry.key.as_ref())?;
        let lane = state.lanes.get_mut(&lane_key)?;
        let next = lane.leave(entry.seq);
        if lane.is_empty() {
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
                state.meter.failed(now_ms);
            }
            changes.extend(
                self.fail(seq, Arc::from(LEASE_EXPIRED_ERROR), Failure::LeaseExpired, now_ms)
                    .ok()
                    .map(|(change, _)| change),
            );
        }
        changes
    }

    /// Gives back the memory of maps a burst grew: a hash map keeps its capacity when entries
    /// leave, so after a flood of a million messages drains the index would hold on to the
    /// flood's size for good. A map is shrunk (to twice its length) once it is at most a quarter
    /// full; only while it holds at most [`COMPACT_LEN_MAX`] entries, which bounds the rehash
    /// done under the index lock to a few milliseconds.
    pub fn compact(&mut self) {
        shrink_if_sparse(&mut self.entries);
        shrink_if_sparse(&mut self.by_id);
        for state in self.queues.values_mut() {
            shrink_if_sparse(&mut state.lanes);
        }
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
        let max = state.claimable(max, now_ms);
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
            entry.leased_at_ms = Some(now_ms);
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
        if let Some(bucket) = &mut state.bucket {
            // claimable() allowed no more than the bucket's whole tokens, so all are taken.
            bucket.take(claimed.len());
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
    fn expired_entry(&self, queue: &str, receipt: &Receipt) -> Option<Seq> {
        let seq = *self.by_id.get(&receipt.message_id)?;
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
    fn fail(
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
    fn retry(
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
        delayed
            .into_iter()
            .chain(leased)
            .chain(state.next_token_at())
            .min()
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
            paused: state.paused,
            counters: state.counters,
            recent: state.meter.recent(now_ms),
            ack_latency_ms: state.ack_latency_ms.clone(),
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
            finished_at_ms: None,
            dead_letter: entry.dead_letter.as_deref().cloned(),
            result: None,
            replayed_as: None,
            failures: Vec::new(),
        })
    }

    /// How many messages a queue holds in every state.
    pub fn queue_len(&self, queue: &str) -> u64 {
        self.queues.get(queue).map_or(0, |state| state.total)
    }

    /// The entry of a live message.
    pub fn entry(&self, seq: Seq) -> Option<&Entry> {
        self.entries.get(&seq)
    }

    /// Retention: removes (or dead-letters, as the queue says) messages older than their
    /// queue's `max_age_ms`, looking at no more than `budget` messages. Leased messages are left
    /// to their consumer and looked at again once their lease ends.
    pub fn expire(&mut self, now_ms: Millis, budget: usize) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut looked = 0;
        let mut names = self.queue_names();
        if let Some(from) = self.expire_from.take() {
            let start = names.partition_point(|name| *name <= from);
            names.rotate_left(start);
        }
        for name in names {
            let Some(state) = self.queues.get(&*name) else {
                continue;
            };
            let config = state.config.clone();
            let due: Vec<Seq> = state
                .members
                .iter()
                .take_while(|&&(aged_from, _)| retention::is_expired(&config, aged_from, now_ms))
                .take(budget - looked)
                .map(|&(_, seq)| seq)
                .collect();
            looked += due.len();
            for seq in due {
                if self.entries.get(&seq).is_none_or(Entry::is_leased) {
                    continue;
                }
                if let Some(state) = self.queues.get_mut(&*name) {
                    state.counters.expired += 1;
                }
                match retention::on_expiry(&config) {
                    Expiry::DeadLetter { queue: dlq } => changes.extend(
                        self.dead_letter(seq, dlq, Arc::from(MAX_AGE_ERROR), now_ms)
                            .map(|(change, _)| change),
                    ),
                    Expiry::Drop => {
                        if self.remove(seq, now_ms).is_some() {
                            changes.push(Change::Expired { seq });
                        }
                    }
                }
            }
            if looked >= budget {
                self.expire_from = Some(name);
                break;
            }
        }
        changes
    }

    /// Cancels a message of `queue` that is not leased: it leaves the index.
    pub fn cancel(
        &mut self,
        queue: &str,
        id: &Uuid,
        now_ms: Millis,
    ) -> Result<Entry, CancelRefused> {
        let seq = self.seq_of(id).ok_or(CancelRefused::NotHere)?;
        let entry = self.entries.get(&seq).ok_or(CancelRefused::NotHere)?;
        if &*entry.queue != queue {
            return Err(CancelRefused::NotHere);
        }
        if entry.is_leased() {
            return Err(CancelRefused::InFlight);
        }
        let entry = self.remove(seq, now_ms).ok_or(CancelRefused::NotHere)?;
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.cancelled += 1;
        }
        Ok(entry)
    }

    /// The seqs of every message of `queue`, oldest first: a snapshot for a purge.
    pub fn members(&self, queue: &str) -> Vec<Seq> {
        self.queues.get(queue).map_or_else(Vec::new, |state| {
            state.members.iter().map(|&(_, seq)| seq).collect()
        })
    }

    /// Removes those of `seqs` that are still in `queue` and not leased (a purge, or an operator
    /// deleting dead letters); returns the removed entries.
    pub fn remove_unleased(&mut self, queue: &str, seqs: &[Seq], now_ms: Millis) -> Vec<Entry> {
        let mut removed = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            let Some(entry) = self.entries.get(&seq) else {
                continue;
            };
            if &*entry.queue != queue || entry.is_leased() {
                continue;
            }
            removed.extend(self.remove(seq, now_ms));
        }
        removed
    }

    /// Counts messages removed by a purge.
    pub fn count_purged(&mut self, queue: &str, count: u64) {
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.purged += count;
        }
    }

    /// Dead-letter entries of `dlq` matching `filter`, oldest first, at most `limit`: the order
    /// a replay re-enqueues them in.
    pub fn dead_letters_oldest_first(
        &self,
        dlq: &str,
        filter: &DeadLetterFilter,
        limit: usize,
    ) -> Vec<Entry> {
        let Some(state) = self.queues.get(dlq) else {
            return Vec::new();
        };
        state
            .members
            .iter()
            .filter_map(|(_, seq)| self.entries.get(seq))
            .filter(|entry| filter.matches(entry))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Dead-letter entries of the dead-letter queue `dlq` matching `filter`, newest first,
    /// starting below `before` (a previous page's `next`). Stops after `limit` matches or after
    /// looking at `scan_max` entries, so one call never holds the index for long.
    pub fn dead_letters(
        &self,
        dlq: &str,
        filter: &DeadLetterFilter,
        before: Option<(Millis, Seq)>,
        limit: usize,
        scan_max: usize,
    ) -> DeadLetterPage {
        let mut page = DeadLetterPage::default();
        let Some(state) = self.queues.get(dlq) else {
            return page;
        };
        let range = match before {
            Some(before) => state.members.range(..before),
            None => state.members.range(..),
        };
        for (looked, &(aged_from, seq)) in range.rev().enumerate() {
            if page.entries.len() >= limit || looked >= scan_max {
                // Resume at this very entry: `before` is exclusive, and nothing between this
                // entry and (aged_from, seq + 1) is left to look at.
                page.next = Some((aged_from, seq + 1));
                return page;
            }
            if let Some(entry) = self.entries.get(&seq)
                && filter.matches(entry)
            {
                page.entries.push(entry.clone());
            }
        }
        page
    }

    /// How many messages of `queue` are in each browsable set.
    pub fn browse_counts(&self, queue: &str) -> Option<crate::store::BrowseCounts> {
        let state = self.queues.get(queue)?;
        let (ready, delayed, in_flight) = (
            state.ready.len() as u64,
            state.delayed.len() as u64,
            state.leased.len() as u64,
        );
        Some(crate::store::BrowseCounts {
            ready,
            waiting: state.total.saturating_sub(ready + delayed + in_flight),
            delayed,
            in_flight,
        })
    }

    /// Pages through one state of `queue` in the order dispatch takes from it, starting after
    /// `after` (a previous page's cursor): ready by priority then seq (cursor key: the negated
    /// priority), delayed by visible time, in flight by lease deadline, waiting by the time its
    /// retention counts from. Returns at most `limit` entries and the cursor of the next page
    /// when more may follow. Waiting messages are found by looking at the queue's members, at
    /// most `scan_max` of them per call. `None` for an unknown queue.
    pub fn browse(
        &self,
        queue: &str,
        set: crate::store::BrowseState,
        after: Option<crate::store::BrowseCursor>,
        limit: usize,
        scan_max: usize,
    ) -> Option<(Vec<&Entry>, Option<crate::store::BrowseCursor>)> {
        use crate::store::BrowseState;
        use std::ops::Bound::{Excluded, Unbounded};
        let state = self.queues.get(queue)?;
        let positions: Box<dyn Iterator<Item = (i64, Seq)> + '_> = match set {
            BrowseState::Ready => {
                let start = after.map_or(Unbounded, |(key, seq)| {
                    let priority = (-key).clamp(i64::from(i32::MIN), i64::from(i32::MAX));
                    Excluded((Reverse(priority as i32), seq))
                });
                Box::new(
                    state
                        .ready
                        .range((start, Unbounded))
                        .map(|&(Reverse(priority), seq)| (-i64::from(priority), seq)),
                )
            }
            BrowseState::Delayed | BrowseState::InFlight | BrowseState::Waiting => {
                let sorted = match set {
                    BrowseState::Delayed => &state.delayed,
                    BrowseState::InFlight => &state.leased,
                    _ => &state.members,
                };
                let start = after.map_or(Unbounded, Excluded);
                Box::new(sorted.range((start, Unbounded)).copied())
            }
        };
        let mut entries = Vec::with_capacity(limit.min(1000));
        let mut last = None;
        for (looked, (key, seq)) in positions.enumerate() {
            if entries.len() >= limit || looked >= scan_max {
                return Some((entries, last));
            }
            last = Some((key, seq));
            let Some(entry) = self.entries.get(&seq) else {
                continue;
            };
            if set != BrowseState::Waiting || entry.place == Place::Waiting {
                entries.push(entry);
            }
        }
        Some((entries, None))
    }

    /// When the current lease of a message began (in flight only).
    pub fn leased_at(&self, seq: Seq) -> Option<Millis> {
        let entry = self.entries.get(&seq)?;
        entry.leased_at_ms.filter(|_| entry.is_leased())
    }
}

mod invariants;

#[cfg(test)]
mod tests;
