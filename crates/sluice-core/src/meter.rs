//! Recent throughput and enqueue-to-ack latency of one queue, for stats.
//!
//! Throughput is counted in one-second buckets over the last five minutes; latency goes into an
//! HDR histogram per minute, of which the current one and the five before it are kept. Both are
//! driven by the caller's `now_ms`, so the test clock moves them like everything else. Memory is
//! only taken by queues that see traffic.

use std::collections::VecDeque;

use hdrhistogram::Histogram;

use crate::clock::Millis;

/// Seconds of throughput kept.
const THROUGHPUT_SECONDS: i64 = 300;
/// Length of one latency window.
const LATENCY_WINDOW_MS: Millis = 60_000;
/// Latency windows merged for a snapshot: the current one and the five before it.
const LATENCY_WINDOWS: i64 = 6;
/// Longest latency tracked (one year); longer ones are counted at this value.
const LATENCY_MS_MAX: u64 = 365 * 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Copy, Default)]
struct Second {
    at: i64,
    enqueued: u64,
    acked: u64,
    failed: u64,
}

/// Counts over a recent span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throughput {
    /// Messages accepted.
    pub enqueued: u64,
    /// Messages acked.
    pub acked: u64,
    /// Failed attempts: nacks and leases that ran out.
    pub failed: u64,
}

/// Enqueue-to-ack latency percentiles, in ms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Acks measured.
    pub samples: u64,
    /// Median.
    pub p50_ms: u64,
    /// 95th percentile.
    pub p95_ms: u64,
    /// 99th percentile.
    pub p99_ms: u64,
}

/// A snapshot of a queue's recent activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recent {
    /// Over the last 60 seconds.
    pub last_1m: Throughput,
    /// Over the last 300 seconds.
    pub last_5m: Throughput,
    /// Over the last five minutes (whole minutes plus the current one).
    pub latency: Latency,
}

/// The recent-activity meter of one queue.
#[derive(Debug, Default)]
pub struct Meter {
    seconds: VecDeque<Second>,
    latency: VecDeque<(i64, Histogram<u32>)>,
}

impl Meter {
    fn second(&mut self, now_ms: Millis) -> &mut Second {
        let at = now_ms.div_euclid(1000);
        if self.seconds.back().is_none_or(|s| s.at < at) {
            self.seconds.push_back(Second {
                at,
                ..Second::default()
            });
        }
        while self
            .seconds
            .front()
            .is_some_and(|s| s.at <= at - THROUGHPUT_SECONDS)
        {
            self.seconds.pop_front();
        }
        // A clock that stepped back counts into the newest bucket.
        self.seconds.back_mut().expect("pushed above")
    }

    /// Counts accepted messages.
    pub fn enqueued(&mut self, count: u64, now_ms: Millis) {
        self.second(now_ms).enqueued += count;
    }

    /// Counts a failed attempt.
    pub fn failed(&mut self, now_ms: Millis) {
        self.second(now_ms).failed += 1;
    }

    /// Counts an ack of a message enqueued at `enqueued_at_ms`.
    pub fn acked(&mut self, enqueued_at_ms: Millis, now_ms: Millis) {
        self.second(now_ms).acked += 1;
        let window = now_ms.div_euclid(LATENCY_WINDOW_MS);
        if self.latency.back().is_none_or(|(at, _)| *at < window) {
            let Ok(histogram) = Histogram::new_with_bounds(1, LATENCY_MS_MAX, 2) else {
                return;
            };
            self.latency.push_back((window, histogram));
        }
        while self
            .latency
            .front()
            .is_some_and(|(at, _)| *at <= window - LATENCY_WINDOWS)
        {
            self.latency.pop_front();
        }
        let latency = (now_ms - enqueued_at_ms).clamp(1, LATENCY_MS_MAX as i64) as u64;
        if let Some((_, histogram)) = self.latency.back_mut() {
            histogram.saturating_record(latency);
        }
    }

    /// What happened recently, as of `now_ms`.
    pub fn recent(&self, now_ms: Millis) -> Recent {
        let now_s = now_ms.div_euclid(1000);
        let sum = |span: i64| {
            self.seconds.iter().filter(|s| s.at > now_s - span).fold(
                Throughput::default(),
                |total, s| Throughput {
                    enqueued: total.enqueued + s.enqueued,
                    acked: total.acked + s.acked,
                    failed: total.failed + s.failed,
                },
            )
        };
        let window = now_ms.div_euclid(LATENCY_WINDOW_MS);
        let mut merged: Option<Histogram<u32>> = None;
        for (_, histogram) in self
            .latency
            .iter()
            .filter(|(at, _)| *at > window - LATENCY_WINDOWS)
        {
            match &mut merged {
                Some(total) => {
                    let _ = total.add(histogram);
                }
                None => merged = Some(histogram.clone()),
            }
        }
        let latency = merged
            .filter(|h| !h.is_empty())
            .map(|h| Latency {
                samples: h.len(),
                p50_ms: h.value_at_quantile(0.50),
                p95_ms: h.value_at_quantile(0.95),
                p99_ms: h.value_at_quantile(0.99),
            })
            .unwrap_or_default();
        Recent {
            last_1m: sum(60),
            last_5m: sum(THROUGHPUT_SECONDS),
            latency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_counts_only_the_recent_span() {
        let mut meter = Meter::default();
        let start = 1_000_000_000;
        meter.enqueued(10, start);
        meter.enqueued(5, start + 120_000);
        meter.acked(start, start + 121_000);
        meter.failed(start + 121_500);
        let recent = meter.recent(start + 150_000);
        assert_eq!(
            recent.last_1m,
            Throughput {
                enqueued: 5,
                acked: 1,
                failed: 1
            }
        );
        assert_eq!(recent.last_5m.enqueued, 15);
        let later = meter.recent(start + 420_000);
        assert_eq!(later.last_5m.enqueued, 0, "older than 5 minutes");
        assert_eq!(later.last_5m.acked, 1, "299 s ago, the enqueue 300 s ago");
        assert_eq!(meter.recent(start + 421_000).last_5m, Throughput::default());
    }

    #[test]
    fn latency_percentiles_follow_the_samples() {
        let mut meter = Meter::default();
        let now = 5_000_000_000;
        for latency in 1..=100 {
            meter.acked(now - latency * 10, now);
        }
        let latency = meter.recent(now).latency;
        assert_eq!(latency.samples, 100);
        assert!((495..=505).contains(&latency.p50_ms), "{latency:?}");
        assert!((945..=955).contains(&latency.p95_ms), "{latency:?}");
        assert!((985..=995).contains(&latency.p99_ms), "{latency:?}");
        let much_later = meter.recent(now + 10 * 60_000);
        assert_eq!(much_later.latency, Latency::default());
    }
}
