//! Fixed-bucket cumulative histograms, for metrics that are scraped (`GET /metrics`).
//!
//! A histogram counts observations (integers in a unit its owner chooses: ms, µs, operations)
//! into buckets with fixed upper bounds, plus one bucket above the last bound, and keeps their
//! sum. Counts only grow, from the start of the process, which is what a Prometheus histogram
//! wants; the exporter converts the unit (e.g. ms to seconds) when it renders.
//!
//! Recording costs a binary search over a handful of bounds and two additions:
//! [`Histogram`] for state already behind a lock (the dispatch index), [`AtomicHistogram`]
//! (relaxed atomics, no lock) for hot paths shared between threads.

use std::sync::atomic::{AtomicU64, Ordering};

/// Enqueue-to-ack latency bounds, in ms: 5 ms to one day.
pub const ACK_LATENCY_BOUNDS_MS: &[u64] = &[
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000,
    3_600_000, 21_600_000, 86_400_000,
];

/// Counts of observations by bucket, and their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    bounds: &'static [u64],
    /// Per bucket (not cumulative): `bounds.len() + 1` entries once anything was recorded, the
    /// last for values above every bound; empty before.
    counts: Vec<u64>,
    sum: u64,
}

impl Histogram {
    /// An empty histogram with these upper bounds (inclusive, ascending).
    pub const fn new(bounds: &'static [u64]) -> Self {
        Self {
            bounds,
            counts: Vec::new(),
            sum: 0,
        }
    }

    /// Counts one observation.
    pub fn record(&mut self, value: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; self.bounds.len() + 1];
        }
        self.counts[bucket_of(self.bounds, value)] += 1;
        self.sum = self.sum.saturating_add(value);
    }

    /// The upper bounds (inclusive, ascending); a last bucket above them is implied.
    pub fn bounds(&self) -> &'static [u64] {
        self.bounds
    }

    /// Observations per bucket (not cumulative), `bounds().len() + 1` of them, the last for
    /// values above every bound.
    pub fn counts(&self) -> Vec<u64> {
        if self.counts.is_empty() {
            vec![0; self.bounds.len() + 1]
        } else {
            self.counts.clone()
        }
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of the observed values.
    pub fn sum(&self) -> u64 {
        self.sum
    }
}

/// A [`Histogram`] recorded through shared references with relaxed atomics.
///
/// A snapshot taken while others record may see a bucket count and the sum from slightly
/// different moments; the count is always the sum of the buckets.
#[derive(Debug)]
pub struct AtomicHistogram {
    bounds: &'static [u64],
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl AtomicHistogram {
    /// An empty histogram with these upper bounds (inclusive, ascending).
    pub fn new(bounds: &'static [u64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Counts one observation.
    pub fn record(&self, value: u64) {
        self.counts[bucket_of(self.bounds, value)].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> Histogram {
        Histogram {
            bounds: self.bounds,
            counts: self
                .counts
                .iter()
                .map(|count| count.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// The bucket a value falls in: the first bound at or above it, or the last bucket.
fn bucket_of(bounds: &[u64], value: u64) -> usize {
    bounds.partition_point(|&bound| bound < value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_fall_in_the_first_bucket_whose_bound_holds_them() {
        const BOUNDS: &[u64] = &[10, 100];
        let mut histogram = Histogram::new(BOUNDS);
        assert_eq!(histogram.counts(), vec![0, 0, 0]);
        assert_eq!(histogram.count(), 0);
        for value in [0, 10, 11, 100, 101, 5_000] {
            histogram.record(value);
        }
        assert_eq!(histogram.counts(), vec![2, 2, 2]);
        assert_eq!(histogram.count(), 6);
        assert_eq!(histogram.sum(), 5_222);
        assert_eq!(histogram.bounds(), BOUNDS);

        let atomic = AtomicHistogram::new(BOUNDS);
        for value in [0, 10, 11, 100, 101, 5_000] {
            atomic.record(value);
        }
        assert_eq!(atomic.snapshot(), histogram);
    }

    #[test]
    fn bounds_ascend() {
        assert!(ACK_LATENCY_BOUNDS_MS.windows(2).all(|w| w[0] < w[1]));
    }
}
