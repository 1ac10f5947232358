//! Deferred claim records: attempt counts written a moment after the claim, unless an ack comes
//! first.
//!
//! Most messages are acked within milliseconds of their claim. Writing the attempt count of each
//! claim at once would cost the writer a row update per delivery that the ack then overwrites, so
//! claims wait here for [`CLAIM_RECORD_DELAY`]. An ack, a retry or a dead-letter move of the same
//! message drops the pending record (those writes carry the attempt count themselves). What is
//! still pending after the delay is written in the next group. The cost: a crash within the
//! delay after a delivery may forget that delivery's attempt (delivery stays at least once).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;
use sluice_core::Millis;
use sluice_core::store::Seq;

/// How long a claim record waits for its ack before it is written.
pub const CLAIM_RECORD_DELAY: Duration = Duration::from_secs(1);

/// Claim records waiting to be written.
#[derive(Debug, Default)]
pub struct DeferredClaims {
    /// Latest attempt count and first receive time per message.
    records: FxHashMap<Seq, (u32, Millis)>,
    /// When each record falls due, in claim order.
    due: VecDeque<(Instant, Seq)>,
}

impl DeferredClaims {
    /// Notes a claim made at `now`.
    pub fn record(&mut self, seq: Seq, attempts: u32, first_received_at_ms: Millis, now: Instant) {
        self.records.insert(seq, (attempts, first_received_at_ms));
        self.due.push_back((now + CLAIM_RECORD_DELAY, seq));
    }

    /// Drops the record of a message whose next write carries its attempts anyway.
    pub fn forget(&mut self, seq: Seq) {
        self.records.remove(&seq);
    }

    /// Records due at `now` (all of them when `everything`), to write now.
    pub fn take_due(&mut self, now: Instant, everything: bool) -> Vec<(Seq, u32, Millis)> {
        let mut due = Vec::new();
        while let Some(&(at, seq)) = self.due.front() {
            if !everything && at > now {
                break;
            }
            self.due.pop_front();
            if let Some((attempts, first)) = self.records.remove(&seq) {
                due.push((seq, attempts, first));
            }
        }
        due
    }

    /// Puts back records taken for a group that was not stored, due at once.
    pub fn restore(&mut self, records: Vec<(Seq, u32, Millis)>) {
        let now = Instant::now();
        for (seq, attempts, first_received_at_ms) in records.into_iter().rev() {
            self.records.insert(seq, (attempts, first_received_at_ms));
            self.due.push_front((now, seq));
        }
    }

    /// When the next record falls due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|&(at, _)| at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acked_claims_are_never_written_and_the_rest_wait_their_delay() {
        let start = Instant::now();
        let mut claims = DeferredClaims::default();
        claims.record(1, 1, 10, start);
        claims.record(2, 1, 10, start);
        claims.record(1, 2, 10, start + Duration::from_millis(10));
        claims.forget(2);
        assert!(
            claims
                .take_due(start + CLAIM_RECORD_DELAY - Duration::from_millis(1), false)
                .is_empty()
        );
        assert_eq!(
            claims.take_due(start + CLAIM_RECORD_DELAY, false),
            vec![(1, 2, 10)],
            "the latest attempt count, once"
        );
        assert!(
            claims
                .take_due(start + CLAIM_RECORD_DELAY * 2, true)
                .is_empty()
        );
        assert_eq!(claims.next_due(), None);
    }
}
