//! The token bucket of a rate-limited queue, as a plain value: `per_second` tokens flow in, at
//! most `burst` are kept, and each delivery takes one.

use crate::clock::Millis;
use crate::queue::RateLimit;

/// The delivery budget of a rate-limited queue at one moment. A store keeps one per queue (in
/// memory, or as two columns) and brings it up to date with [`TokenBucket::refill`] before it
/// asks how many deliveries may go out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    /// Tokens in the bucket (fractions accumulate between deliveries).
    pub tokens: f64,
    /// The time `tokens` was counted at.
    pub updated_at_ms: Millis,
}

impl TokenBucket {
    /// A full bucket at `now_ms`: a queue that has not delivered yet may deliver a burst.
    pub fn full(limit: &RateLimit, now_ms: Millis) -> Self {
        Self {
            tokens: capacity(limit),
            updated_at_ms: now_ms,
        }
    }

    /// Adds the tokens that flowed in since the last count, up to the burst. Time never runs
    /// backwards for the bucket: an earlier `now_ms` adds nothing and keeps its time.
    pub fn refill(&mut self, now_ms: Millis, limit: &RateLimit) {
        let elapsed_ms = (now_ms - self.updated_at_ms).max(0) as f64;
        self.tokens = (self.tokens + elapsed_ms * limit.per_second / 1000.0).min(capacity(limit));
        self.updated_at_ms = self.updated_at_ms.max(now_ms);
    }

    /// Whole tokens available: the most deliveries that may go out now.
    pub fn available(&self) -> usize {
        self.tokens.floor() as usize
    }

    /// Takes up to `wanted` whole tokens; returns how many were taken.
    pub fn take(&mut self, wanted: usize) -> usize {
        let taken = wanted.min(self.available());
        self.tokens -= taken as f64;
        taken
    }

    /// When the next whole token will be in the bucket, if there is none now (at least 1 ms
    /// after the last count, so a waiter never spins at the same instant).
    pub fn next_token_at(&self, limit: &RateLimit) -> Option<Millis> {
        if self.tokens >= 1.0 {
            return None;
        }
        let wait_ms = ((1.0 - self.tokens) * 1000.0 / limit.per_second).ceil() as Millis;
        Some(self.updated_at_ms + wait_ms.max(1))
    }
}

/// The most tokens the bucket holds: the burst, and never less than one.
fn capacity(limit: &RateLimit) -> f64 {
    f64::from(limit.burst.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: RateLimit = RateLimit {
        per_second: 2.0,
        burst: 3,
    };

    #[test]
    fn a_new_bucket_holds_the_burst_and_refills_at_the_rate_up_to_it() {
        let mut bucket = TokenBucket::full(&LIMIT, 0);
        assert_eq!(bucket.take(5), 3);
        assert_eq!(bucket.available(), 0);
        bucket.refill(250, &LIMIT);
        assert_eq!((bucket.tokens, bucket.available()), (0.5, 0));
        bucket.refill(500, &LIMIT);
        assert_eq!(bucket.take(2), 1);
        bucket.refill(60_000, &LIMIT);
        assert_eq!(bucket.tokens, 3.0);
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let mut bucket = TokenBucket::full(&LIMIT, 1_000);
        bucket.take(3);
        bucket.refill(500, &LIMIT);
        assert_eq!(
            bucket,
            TokenBucket {
                tokens: 0.0,
                updated_at_ms: 1_000
            }
        );
    }

    #[test]
    fn the_next_token_comes_when_the_fraction_fills_up() {
        let mut bucket = TokenBucket::full(&LIMIT, 0);
        assert_eq!(bucket.next_token_at(&LIMIT), None);
        bucket.take(3);
        assert_eq!(bucket.next_token_at(&LIMIT), Some(500));
        bucket.refill(400, &LIMIT);
        assert_eq!(bucket.next_token_at(&LIMIT), Some(500));
        // Never at the very moment of the count.
        let fast = RateLimit {
            per_second: 1e9,
            burst: 1,
        };
        let empty = TokenBucket {
            tokens: 0.999_999_999,
            updated_at_ms: 7,
        };
        assert_eq!(empty.next_token_at(&fast), Some(8));
    }

    #[test]
    fn a_burst_of_zero_still_lets_one_through() {
        let limit = RateLimit {
            per_second: 1.0,
            burst: 0,
        };
        assert_eq!(TokenBucket::full(&limit, 0).available(), 1);
    }
}
