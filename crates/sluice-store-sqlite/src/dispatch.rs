//! The in-memory dispatch index of a single-node store.
//!
//! Dispatch never scans storage: everything a claim needs (ready order by priority, the per-key
//! lanes, the delayed set, lease deadlines) lives here, and a store keeps it in step with what it
//! writes. The index does no IO and never reads the clock: every call takes `now_ms`, and the
//! changes a store must persist come back as [`Change`] values.
//!
//! Ordering: an ordered queue (`fifo`, or `per_key` for messages with a key) puts each message in a
//! *lane*. Only the lane's out members can be ready, delayed (retrying) or in flight; the others
//! wait, so at most one message of a key is in flight and a retry blocks the key, unless a claim
//! asks for runs (SQS's FIFO receive), which lends the members after the one it leased
//! ([`sluice_core::rules::lanes`]).
//!
//! The decisions every store makes the same way (retry or dead-letter, backoff, the token
//! bucket, lanes, retention) are pure functions in [`sluice_core::rules`]; the index keeps the sets
//! that find messages fast and calls those rules. This module holds the [`Index`], its queues
//! and the placing of messages into their sets; the rest is split along its seams:
//! - `types`: the values the index hands out and takes ([`Entry`], [`Change`], results);
//! - `leases`: claim, ack, nack, extend, lease expiry and the failure path;
//! - `pace`: flow control (pause, `max_depth` admission, `max_in_flight`, the rate limit);
//! - `queries`: depth, status, browsing and dead-letter listings;
//! - `retention`: expiring messages older than their queue's `max_age_ms`;
//! - `invariants`: [`Index::check_invariants`].

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;
use uuid::Uuid;

use sluice_core::clock::Millis;
use sluice_core::histogram::{ACK_LATENCY_BOUNDS_MS, Histogram};
use sluice_core::message::Payload;
use sluice_core::meter::Meter;
use sluice_core::queue::QueueConfig;
use sluice_core::rules::lanes::{self, Lane};
use sluice_core::rules::token_bucket::TokenBucket;

mod invariants;
mod leases;
mod pace;
mod paging;
mod queries;
mod ready;
mod retention;
mod types;

#[cfg(test)]
mod tests;

use paging::Cold;
pub use paging::{ColdRange, PageIn};
use ready::ReadySet;
pub use sluice_core::rules::failure::LEASE_EXPIRED_ERROR;
pub use sluice_core::rules::retention::MAX_AGE_ERROR;
use types::Place;
pub use types::{CancelRefused, Change, Claimed, DeadLetterPage, Entry};
// The store's own types (`sluice_core::store`), which the index hands out and takes.
use sluice_core::store::{Counters, DeadLetterFilter, LeaseError, NackOutcome, QueueDepth, Seq};

/// One queue in the index: its configuration, the sets dispatch takes from, its lanes, and its
/// flow-control state and counters.
#[derive(Debug)]
struct QueueState {
    config: Arc<QueueConfig>,
    ready: ReadySet,
    delayed: BTreeSet<(Millis, Seq)>,
    leased: BTreeSet<(Millis, Seq)>,
    lanes: HashMap<Arc<str>, Lane>,
    /// Every message of the queue by (the time its retention counts from, seq): retention takes
    /// from the front, dead-letter listings read from the back.
    members: BTreeSet<(Millis, Seq)>,
    total: u64,
    /// Messages on disk only, by priority (`paging.rs`); not in `total` or any set.
    cold: std::collections::BTreeMap<i32, Cold>,
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
            ready: ReadySet::default(),
            delayed: BTreeSet::new(),
            leased: BTreeSet::new(),
            lanes: HashMap::default(),
            members: BTreeSet::new(),
            total: 0,
            cold: Default::default(),
            reserved: 0,
            paused: false,
            bucket: None,
            counters: Counters::default(),
            meter: Meter::default(),
            ack_latency_ms: Histogram::new(ACK_LATENCY_BOUNDS_MS),
        }
    }

    /// The lane a message with ordering key `key` joins in this queue, if any.
    fn lane_of(&self, key: Option<&Arc<str>>) -> Option<Arc<str>> {
        lanes::lane_key(self.config.ordering, key)
    }
}

/// True when `id` is the one `stored::ids` made for `seq`, so the seq is found from the id.
fn carries_seq(id: &Uuid, seq: Seq) -> bool {
    sluice_core::stored::ids::decode(id) == Some(seq)
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
    /// Ids that do not carry their seq (`stored::ids`; made by an older version): the rest
    /// are found by decoding, so they cost no map entry.
    foreign_ids: HashMap<Uuid, Seq>,
    cached_payload_bytes: usize,
    /// Where the last retention pass ran out of budget: the next one starts there, so one
    /// queue's backlog of expiries cannot starve the others.
    expire_from: Option<Arc<str>>,
    /// Ready messages of each queue and priority kept in memory; 0: all (`paging.rs`).
    resident_max: usize,
    /// Every message up to this seq is in the index or counted cold.
    decided_hi: Seq,
    next_generation: u64,
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
                let held = state.total + state.cold_total();
                if state.config.ordering != config.ordering && held > 0 {
                    return Err(format!(
                        "cannot change ordering from {} to {} while the queue holds {} messages",
                        state.config.ordering.as_str(),
                        config.ordering.as_str(),
                        held
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
        self.decided_hi = self.decided_hi.max(seq);
        if let Some(range) = state.cold.get_mut(&entry.priority) {
            range.skip_if_past(seq);
        }
        state.total += 1;
        state.members.insert((entry.aged_from_ms(), seq));
        let lane = state.lane_of(entry.key.as_ref());
        entry.place = Place::Waiting;
        if !carries_seq(&entry.id, seq) {
            self.foreign_ids.insert(entry.id, seq);
        }
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

    /// Counts messages not stored because their idempotency key was seen within the window.
    pub fn count_deduplicated(&mut self, queue: &str, count: u64) {
        if let Some(state) = self.queues.get_mut(queue) {
            state.counters.deduplicated += count;
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
        if !carries_seq(&entry.id, entry.seq) {
            self.foreign_ids.remove(&entry.id);
        }
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

    /// A message that was out (in flight) comes back, out of every set: unordered, it is ready
    /// or delayed again; in a lane it waits, and the lane says who goes out
    /// ([`Lane::come_back`]: the lane's first member once nothing else is out).
    fn come_back(&mut self, seq: Seq, now_ms: Millis) {
        let Some(entry) = self.entries.get_mut(&seq) else {
            return;
        };
        let Some(state) = self.queues.get_mut(&*entry.queue) else {
            return;
        };
        let lane_key = state.lane_of(entry.key.as_ref());
        let Some(lane) = lane_key.and_then(|key| state.lanes.get_mut(&key)) else {
            Self::activate(state, entry, now_ms);
            return;
        };
        entry.place = Place::Waiting;
        if let Some(next) = lane.come_back(seq) {
            let queue = entry.queue.clone();
            self.activate_waiting(&queue, next, now_ms);
        }
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

    /// Gives back the memory of maps a burst grew: a hash map keeps its capacity when entries
    /// leave, so after a flood of a million messages drains the index would hold on to the
    /// flood's size for good. A map is shrunk (to twice its length) once it is at most a quarter
    /// full; only while it holds at most [`COMPACT_LEN_MAX`] entries, which bounds the rehash
    /// done under the index lock to a few milliseconds.
    pub fn compact(&mut self) {
        shrink_if_sparse(&mut self.entries);
        shrink_if_sparse(&mut self.foreign_ids);
        for state in self.queues.values_mut() {
            shrink_if_sparse(&mut state.lanes);
        }
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

    /// Removes those of `seqs` that are still in `queue` and not leased (a purge, or an operator
    /// deleting dead letters); returns the removed entries.
    pub fn remove_unleased(&mut self, queue: &str, seqs: &[Seq], now_ms: Millis) -> Vec<Entry> {
        self.remove_of(queue, seqs, false, now_ms)
    }

    /// Removes the given messages of `queue`, leased ones too (their leases end: an ack with
    /// their receipts finds nothing); returns those removed.
    pub fn remove_members(&mut self, queue: &str, seqs: &[Seq], now_ms: Millis) -> Vec<Entry> {
        self.remove_of(queue, seqs, true, now_ms)
    }

    fn remove_of(
        &mut self,
        queue: &str,
        seqs: &[Seq],
        leased_too: bool,
        now_ms: Millis,
    ) -> Vec<Entry> {
        let mut removed = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            let Some(entry) = self.entries.get(&seq) else {
                continue;
            };
            if &*entry.queue != queue || (entry.is_leased() && !leased_too) {
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
}
