//! What a producer refused by a full queue (`max_depth`) is told to wait: `Retry-After`.

/// Seconds a producer whose batch of `count` messages a full queue refused should wait: the
/// time the queue takes to drain that many at its recent ack rate (`acks_per_s`, over the last
/// minute), between 1 and 60; 10 when nothing is being acked or the store does not measure
/// the rate. Every store answers `queue_full` with this.
pub fn queue_full_retry_after_s(count: u64, acks_per_s: f64) -> u64 {
    if acks_per_s <= 0.0 || !acks_per_s.is_finite() {
        return 10;
    }
    ((count as f64 / acks_per_s).ceil() as u64).clamp(1, 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_the_time_to_drain_the_batch_within_a_minute() {
        assert_eq!(queue_full_retry_after_s(10, 0.0), 10, "nothing acked");
        assert_eq!(queue_full_retry_after_s(10, f64::NAN), 10);
        assert_eq!(queue_full_retry_after_s(10, 100.0), 1, "at least 1 s");
        assert_eq!(queue_full_retry_after_s(30, 2.0), 15);
        assert_eq!(queue_full_retry_after_s(1000, 1.0), 60, "at most a minute");
    }
}
