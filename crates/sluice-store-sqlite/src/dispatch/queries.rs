//! Read-only views of the index: depth and counters, a message's status, browsing a queue's
//! sets in dispatch order, and dead-letter listings.

use std::cmp::Reverse;

use uuid::Uuid;

use sluice_core::clock::Millis;
use sluice_core::message::{MessageState, MessageStatus};

use super::types::dead_letter_matches;
use super::{DeadLetterFilter, DeadLetterPage, Entry, Index, Place, QueueDepth, QueueState, Seq};

impl Index {
    /// Acks per second over the last minute: how fast the queue drains.
    pub fn ack_rate(&self, queue: &str, now_ms: Millis) -> f64 {
        self.queues.get(queue).map_or(0.0, |state| {
            state.meter.recent(now_ms).last_1m.acked as f64 / 60.0
        })
    }

    /// The seq of a message id.
    pub fn seq_of(&self, id: &Uuid) -> Option<Seq> {
        match sluice_core::stored::ids::decode(id) {
            Some(seq) if self.entries.get(&seq).is_some_and(|entry| entry.id == *id) => Some(seq),
            _ => self.foreign_ids.get(id).copied(),
        }
    }

    /// Depth and counters of a queue.
    pub fn depth(&self, queue: &str, now_ms: Millis) -> Option<QueueDepth> {
        let state = self.queues.get(queue)?;
        let in_flight = state.leased.len() as u64;
        let delayed = state.delayed.len() as u64;
        Some(QueueDepth {
            ready: state.total.saturating_sub(in_flight + delayed) + state.cold_total(),
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
    pub(super) fn oldest_ready_enqueued_at(&self, state: &QueueState) -> Option<Millis> {
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
        let entry = self.entries.get(&self.seq_of(id)?)?;
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
            kept_until_ms: None,
            replayed_as: None,
            failures: Vec::new(),
        })
    }

    /// How many messages a queue holds in every state.
    pub fn queue_len(&self, queue: &str) -> u64 {
        self.queues
            .get(queue)
            .map_or(0, |state| state.total + state.cold_total())
    }

    /// The entry of a live message.
    pub fn entry(&self, seq: Seq) -> Option<&Entry> {
        self.entries.get(&seq)
    }

    /// The seqs of every message of `queue`, oldest first: a snapshot for a purge.
    pub fn members(&self, queue: &str) -> Vec<Seq> {
        self.queues.get(queue).map_or_else(Vec::new, |state| {
            state.members.iter().map(|&(_, seq)| seq).collect()
        })
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
            .filter(|entry| dead_letter_matches(filter, entry))
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
            // A dead letter ages from when it was dead-lettered: past `since`, every entry
            // further on is older, and none can match.
            if filter.since_ms.is_some_and(|since| aged_from < since) {
                return page;
            }
            if page.entries.len() >= limit || looked >= scan_max {
                // Resume at this very entry: `before` is exclusive, and nothing between this
                // entry and (aged_from, seq + 1) is left to look at.
                page.next = Some((aged_from, seq + 1));
                return page;
            }
            if let Some(entry) = self.entries.get(&seq)
                && dead_letter_matches(filter, entry)
            {
                page.entries.push(entry.clone());
            }
        }
        page
    }

    /// How many messages of `queue` are in each browsable set.
    pub fn browse_counts(&self, queue: &str) -> Option<sluice_core::store::BrowseCounts> {
        let state = self.queues.get(queue)?;
        let (ready, delayed, in_flight) = (
            state.ready.len() as u64,
            state.delayed.len() as u64,
            state.leased.len() as u64,
        );
        Some(sluice_core::store::BrowseCounts {
            // Messages paged out are ready too; a browse lists the head in memory.
            ready: ready + state.cold_total(),
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
        set: sluice_core::store::BrowseState,
        after: Option<sluice_core::store::BrowseCursor>,
        limit: usize,
        scan_max: usize,
    ) -> Option<(Vec<&Entry>, Option<sluice_core::store::BrowseCursor>)> {
        use sluice_core::store::BrowseState;
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
            // The index lets a message go at its ack: a store reads kept ones from disk.
            BrowseState::Acked => return Some((Vec::new(), None)),
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
