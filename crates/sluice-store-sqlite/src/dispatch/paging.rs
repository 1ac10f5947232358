//! Paging: a deep backlog waits on disk, not in memory.
//!
//! In a queue without ordering, the index keeps at most `resident_max` ready messages of each
//! priority: the head, which dispatch takes from. A message that arrives while its priority's head
//! is full, or while older messages of its priority already wait on disk, is not inserted: it is
//! counted in that priority's [`Cold`] range and stays only on disk, where its enqueue put it.
//! As the head drains, the store reads the next cold messages back in seq order ([`PageIn`])
//! and hands them to [`Index::page_in`].
//!
//! Why every rule holds with messages paged out:
//! - **Order.** A priority's cold messages all come after `after` in seq, and every message of
//!   that priority at or before `after` is in the index. A claim never takes a message that a
//!   cold one should go before: it stops at a ready message of a lower priority than some cold
//!   range, or of the same priority past `after` (a delay that ended), and asks for a page-in
//!   instead ([`QueueState::blocked_by_cold`]).
//! - **Delays.** A message delayed at enqueue is always inserted, so the delayed set sees it come
//!   due. A cold message is paged in to the delayed set if its delay has not ended.
//! - **Depth and `max_depth`.** Cold messages count in the depth, the position and admission.
//! - **Lookups, cancels, purges** read and change cold rows on disk. A page-in reads rows on
//!   another connection, so a row it read as live may have changed since: a cancelled cold seq,
//!   and any seq past `after` that entered the index another way, is remembered until the range
//!   passes it, and a page-in skips those and what the index holds. A purge takes the whole
//!   range (a page-in for a range that is gone is dropped).
//! - **Retention** removes the oldest messages first, and those are in the head; as the head
//!   expires, the next messages are paged in and expire in turn.
//! - **Dead letters and ordered queues** (`fifo`, `per_key`: a lane must see all its members)
//!   are never paged out.

use std::collections::BTreeSet;
use std::sync::Arc;

use sluice_core::clock::Millis;
use sluice_core::queue::Ordering;

use super::{Entry, Index, QueueState, Seq};

/// Messages of one queue and priority that are on disk only.
#[derive(Debug, Clone, Default)]
pub(super) struct Cold {
    /// How many.
    count: u64,
    /// Every live message of this queue and priority with a seq up to here is in the index;
    /// the cold ones come after it.
    after: Seq,
    /// The highest seq counted into this range (at start: the highest seq stored).
    last: Seq,
    /// Told apart from a later range of the same priority (after a purge took this one).
    generation: u64,
    /// A page-in for this range is under way.
    paging: bool,
    /// A claim stopped at this range: page in even if the head is not low.
    wanted: bool,
    /// Seqs past `after` that a page-in must not take although their rows may read as live:
    /// cold messages cancelled on disk, and messages that entered the index without being
    /// paged in (a delayed enqueue, a dead letter), which may have left it (acked) before their
    /// row's change is written.
    skip: BTreeSet<Seq>,
}

/// A page-in the store should make: read the live messages of `queue` with `priority` and a seq
/// in `after + 1 ..= upto`, in seq order, at most `limit`, and hand them to [`Index::page_in`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageIn {
    /// The queue.
    pub queue: Arc<str>,
    /// The priority.
    pub priority: i32,
    /// Only messages after this seq.
    pub after: Seq,
    /// Only messages up to this seq: later ones may not be decided yet (still being made
    /// durable, then inserted or counted cold).
    pub upto: Seq,
    /// Most messages to read.
    pub limit: usize,
    generation: u64,
}

/// One queue's cold range of one priority, taken away whole by [`Index::take_cold`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColdRange {
    /// The priority.
    pub priority: i32,
    /// Messages after this seq...
    pub after: Seq,
    /// ...up to this one, not in the index, are the range's.
    pub upto: Seq,
}

impl Cold {
    /// A message entered the index without a page-in: if it is past `after`, a page-in must
    /// not take its row.
    pub(super) fn skip_if_past(&mut self, seq: Seq) {
        if seq > self.after {
            self.skip.insert(seq);
        }
    }
}

impl QueueState {
    /// True when the ready message `(priority, seq)` must not be delivered yet because a cold
    /// message goes before it; the range it waits for is marked wanted.
    pub(super) fn blocked_by_cold(&mut self, priority: i32, seq: Seq) -> bool {
        if self.cold.is_empty() {
            return false;
        }
        if let Some(above) = priority.checked_add(1)
            && let Some((_, higher)) = self.cold.range_mut(above..).next_back()
        {
            higher.wanted = true;
            return true;
        }
        match self.cold.get_mut(&priority) {
            Some(same) if seq > same.after => {
                same.wanted = true;
                true
            }
            _ => false,
        }
    }

    /// Messages of the queue on disk only (a few ranges at most: one per priority in use).
    pub(super) fn cold_total(&self) -> u64 {
        self.cold.values().map(|range| range.count).sum()
    }

    /// No cold range is empty but kept, and an ordered queue has none.
    pub(super) fn check_cold(&self, name: &str) -> Result<(), String> {
        if let Some((priority, _)) = self
            .cold
            .iter()
            .find(|(_, range)| range.count == 0 && !range.paging)
        {
            return Err(format!(
                "{name:?} keeps an empty cold range of priority {priority}"
            ));
        }
        if !self.cold.is_empty() && self.config.ordering != Ordering::Unordered {
            return Err(format!("{name:?} is ordered but has messages paged out"));
        }
        Ok(())
    }

    fn pages_out(&self, entry: &Entry, resident_max: usize, now_ms: Millis) -> bool {
        resident_max > 0
            && self.config.ordering == Ordering::Unordered
            && entry.dead_letter.is_none()
            && entry.visible_at_ms <= now_ms
            && (self.cold.contains_key(&entry.priority)
                || self.ready.count_of(entry.priority) >= resident_max as u64)
    }
}

impl Index {
    /// Keeps at most `max` ready messages of each queue and priority in memory (0: all).
    pub fn set_resident_max(&mut self, max: usize) {
        self.resident_max = max;
    }

    /// Ready messages of each queue and priority kept in memory (0: all).
    pub fn resident_max(&self) -> usize {
        self.resident_max
    }

    /// Messages of `queue` on disk only.
    pub fn cold_count(&self, queue: &str) -> u64 {
        self.queues.get(queue).map_or(0, QueueState::cold_total)
    }

    /// Messages the index holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the index holds no message.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Messages on disk only, over all queues.
    pub fn cold_total(&self) -> u64 {
        self.queues.values().map(QueueState::cold_total).sum()
    }

    /// Adds a newly stored message: into the index, or counted cold when its priority's head is
    /// full or older messages of its priority are cold. Returns true when it went into the index.
    /// Messages must come in seq order.
    pub fn admit(&mut self, entry: Entry, now_ms: Millis) -> bool {
        let resident_max = self.resident_max;
        let seq = entry.seq;
        let cold = self
            .queues
            .get(&*entry.queue)
            .is_some_and(|state| state.pages_out(&entry, resident_max, now_ms));
        if !cold {
            self.insert(entry, now_ms);
            return true;
        }
        self.decided_hi = self.decided_hi.max(seq);
        let range = self
            .cold_range(&entry.queue, entry.priority, seq - 1)
            .expect("checked by pages_out");
        range.count += 1;
        range.last = seq;
        false
    }

    /// The cold range of `queue` and `priority`, opened after `after` when there is none.
    fn cold_range(&mut self, queue: &str, priority: i32, after: Seq) -> Option<&mut Cold> {
        let state = self.queues.get_mut(queue)?;
        let next_generation = &mut self.next_generation;
        Some(state.cold.entry(priority).or_insert_with(|| {
            *next_generation += 1;
            Cold {
                after,
                generation: *next_generation,
                ..Cold::default()
            }
        }))
    }

    /// Counts a message found on disk at start as cold (it comes after every message of its
    /// queue and priority loaded so far).
    pub fn load_cold(&mut self, queue: &str, priority: i32, after: Seq, count: u64, last: Seq) {
        if let Some(range) = self.cold_range(queue, priority, after) {
            range.count += count;
            range.last = range.last.max(last);
        }
    }

    /// Notes that every message up to `seq` has been decided (loaded at start).
    pub fn set_decided(&mut self, seq: Seq) {
        self.decided_hi = self.decided_hi.max(seq);
    }

    /// The queues that have cold messages.
    pub fn queues_with_cold(&self) -> Vec<Arc<str>> {
        self.queues
            .iter()
            .filter(|(_, state)| !state.cold.is_empty())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The page-ins `queue` needs now: for each cold range whose head is down to half of
    /// `resident_max`, or that a claim stopped at, and that no page-in is reading yet.
    pub fn page_ins_wanted(&mut self, queue: &str) -> Vec<PageIn> {
        let (resident_max, upto) = (self.resident_max as u64, self.decided_hi);
        let Some(name) = self.queue_name(queue) else {
            return Vec::new();
        };
        let state = self.queues.get_mut(queue).expect("named above");
        let mut wanted = Vec::new();
        for (&priority, range) in state.cold.iter_mut() {
            let head = state.ready.count_of(priority);
            if range.paging || !(range.wanted || head * 2 < resident_max) {
                continue;
            }
            range.paging = true;
            range.wanted = false;
            wanted.push(PageIn {
                queue: name.clone(),
                priority,
                after: range.after,
                upto,
                limit: resident_max
                    .saturating_sub(head)
                    .max(resident_max / 2)
                    .max(1) as usize,
                generation: range.generation,
            });
        }
        wanted
    }

    /// Takes in what a page-in read: the live messages of `request`'s range, in seq order. A
    /// message already in the index, or cancelled since, is skipped; a range that is gone (a
    /// purge took it) takes nothing. Returns how many messages came in.
    pub fn page_in(&mut self, request: &PageIn, rows: Vec<Entry>, now_ms: Millis) -> usize {
        let exhausted = rows.len() < request.limit;
        let Some(state) = self.queues.get_mut(&*request.queue) else {
            return 0;
        };
        let Some(range) = state
            .cold
            .get_mut(&request.priority)
            .filter(|range| range.generation == request.generation)
        else {
            return 0;
        };
        range.paging = false;
        let mut through = request.after;
        let mut taken = Vec::with_capacity(rows.len());
        for row in rows {
            through = through.max(row.seq);
            if range.skip.contains(&row.seq) || self.entries.contains_key(&row.seq) {
                continue;
            }
            taken.push(row);
        }
        if exhausted {
            through = through.max(request.upto);
        }
        let loaded = taken.len() as u64;
        range.after = range.after.max(through);
        let after = range.after;
        range.skip.retain(|&seq| seq > after);
        range.count = range.count.saturating_sub(loaded);
        if exhausted && request.upto >= range.last {
            // Every message counted into the range was there to read: none is left, whatever
            // the count says (it cannot drift, but a range that reads empty must not be asked
            // for again and again).
            range.count = 0;
        }
        if range.count == 0 {
            state.cold.remove(&request.priority);
        }
        let count = taken.len();
        for entry in taken {
            self.insert(entry, now_ms);
        }
        count
    }

    /// Drops a page-in that failed to read: its range may be asked for again.
    pub fn page_in_failed(&mut self, request: &PageIn) {
        if let Some(range) = self
            .queues
            .get_mut(&*request.queue)
            .and_then(|state| state.cold.get_mut(&request.priority))
            .filter(|range| range.generation == request.generation)
        {
            range.paging = false;
        }
    }

    /// True when the live message `seq` of `queue` with `priority` is cold: not in the index,
    /// decided, and inside its priority's cold range.
    pub fn is_cold(&self, queue: &str, priority: i32, seq: Seq) -> bool {
        !self.entries.contains_key(&seq)
            && seq <= self.decided_hi
            && self
                .queues
                .get(queue)
                .and_then(|state| state.cold.get(&priority))
                .is_some_and(|range| seq > range.after && !range.skip.contains(&seq))
    }

    /// A cold message was removed on disk (cancelled): it no longer counts, and a page-in that
    /// read it before will skip it.
    pub fn cold_removed(&mut self, queue: &str, priority: i32, seq: Seq) {
        let Some(state) = self.queues.get_mut(queue) else {
            return;
        };
        let Some(range) = state.cold.get_mut(&priority) else {
            return;
        };
        range.skip.insert(seq);
        range.count = range.count.saturating_sub(1);
        if range.count == 0 && !range.paging {
            state.cold.remove(&priority);
        }
    }

    /// Takes every cold range of `queue` away (a purge or deletion removes them on disk).
    pub fn take_cold(&mut self, queue: &str) -> Vec<ColdRange> {
        let upto = self.decided_hi;
        let Some(state) = self.queues.get_mut(queue) else {
            return Vec::new();
        };
        std::mem::take(&mut state.cold)
            .into_iter()
            .map(|(priority, range)| ColdRange {
                priority,
                after: range.after,
                upto,
            })
            .collect()
    }

    /// True when the index holds the message `seq`.
    pub fn contains(&self, seq: Seq) -> bool {
        self.entries.contains_key(&seq)
    }
}
