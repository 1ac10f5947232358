//! Flow control: how many messages a claim may take now (pause, `max_in_flight`, the rate
//! limit's [`TokenBucket`]), admission against `max_depth`, and when a queue next has something
//! to deliver.

use sluice_core::clock::Millis;
use sluice_core::rules::token_bucket::TokenBucket;

use super::{Index, QueueState};

impl QueueState {
    /// How many messages a claim may take now: paused, in-flight and rate limits applied.
    pub(super) fn claimable(&mut self, max: usize, now_ms: Millis) -> usize {
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
}

impl Index {
    /// Admits `count` more messages against the queue's `max_depth`, counting them until
    /// [`Index::release`]. Refused with the depth (stored plus admitted) when they do not fit,
    /// and counted as rejected.
    pub fn reserve(&mut self, queue: &str, count: u64) -> Result<(), u64> {
        let Some(state) = self.queues.get_mut(queue) else {
            return Ok(());
        };
        let depth = state.total + state.cold_total() + state.reserved;
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
}
