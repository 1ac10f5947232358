//! When a queue is stuck, and why: the one rule behind `stats.stuck` in `GET /v1/queues` (and
//! so the dashboard's overview, which lists stuck queues first) and `sluice queue list`.
//!
//! A queue is stuck when work sits in it that nobody is doing: messages parked in its
//! dead-letter queue, deliveries paused, more messages waiting than the operator's threshold
//! (or the queue's own `max_depth`), or a ready message older than the age threshold. The
//! thresholds are the server's (`[dashboard] stuck_depth`, `stuck_age_ms`).

use sluice_wire::StuckReason;

use crate::clock::Millis;
use crate::store::QueueInfo;

/// The server's thresholds for [`StuckReason::Depth`] and [`StuckReason::Age`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StuckThresholds {
    /// Messages held (ready + delayed + in flight) from which a queue is stuck.
    pub depth: u64,
    /// Age of the oldest ready message from which a queue is stuck, in ms.
    pub age_ms: Millis,
}

impl StuckThresholds {
    /// The defaults, as in `config.default.toml`: 10,000 messages, 5 minutes.
    pub const DEFAULT: Self = Self {
        depth: 10_000,
        age_ms: 5 * 60 * 1000,
    };
}

/// Why `info` is stuck; empty when it is not.
pub fn stuck_reasons(info: &QueueInfo, thresholds: &StuckThresholds) -> Vec<StuckReason> {
    let depth = &info.depth;
    let held = depth.ready + depth.delayed + depth.in_flight;
    let depth_limit = info
        .config
        .max_depth
        .map_or(thresholds.depth, |max| max.min(thresholds.depth));
    let mut reasons = Vec::new();
    if info.dead_letter_depth.unwrap_or(0) > 0 {
        reasons.push(StuckReason::DeadLetters);
    }
    if depth.paused || info.is_push_paused {
        reasons.push(StuckReason::Paused);
    }
    if held > 0 && held >= depth_limit {
        reasons.push(StuckReason::Depth);
    }
    if depth
        .oldest_ready_age_ms
        .is_some_and(|age| age >= thresholds.age_ms)
    {
        reasons.push(StuckReason::Age);
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::QueueConfig;

    fn queue() -> QueueInfo {
        QueueInfo {
            name: "orders".into(),
            config: QueueConfig::defaults_for("orders"),
            depth: Default::default(),
            dead_letter_depth: Some(0),
            is_push_paused: false,
        }
    }

    const T: StuckThresholds = StuckThresholds {
        depth: 100,
        age_ms: 60_000,
    };

    #[test]
    fn the_names_are_the_wire_names() {
        use StuckReason::*;
        for reason in [DeadLetters, Paused, Depth, Age] {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }

    #[test]
    fn an_idle_queue_is_not_stuck() {
        assert!(stuck_reasons(&queue(), &T).is_empty());
    }

    #[test]
    fn each_reason_on_its_own_and_all_in_order() {
        let mut q = queue();
        q.dead_letter_depth = Some(1);
        assert_eq!(stuck_reasons(&q, &T), [StuckReason::DeadLetters]);

        let mut q = queue();
        q.is_push_paused = true;
        assert_eq!(stuck_reasons(&q, &T), [StuckReason::Paused]);
        q.is_push_paused = false;
        q.depth.paused = true;
        assert_eq!(stuck_reasons(&q, &T), [StuckReason::Paused]);

        let mut q = queue();
        q.depth.ready = 60;
        q.depth.delayed = 39;
        assert!(stuck_reasons(&q, &T).is_empty(), "99 held is under 100");
        q.depth.in_flight = 1;
        assert_eq!(stuck_reasons(&q, &T), [StuckReason::Depth]);

        let mut q = queue();
        q.depth.oldest_ready_age_ms = Some(59_999);
        assert!(stuck_reasons(&q, &T).is_empty());
        q.depth.oldest_ready_age_ms = Some(60_000);
        assert_eq!(stuck_reasons(&q, &T), [StuckReason::Age]);

        q.dead_letter_depth = Some(3);
        q.depth.paused = true;
        q.depth.ready = 500;
        assert_eq!(
            stuck_reasons(&q, &T),
            [
                StuckReason::DeadLetters,
                StuckReason::Paused,
                StuckReason::Depth,
                StuckReason::Age
            ]
        );
    }

    #[test]
    fn a_queue_at_its_own_max_depth_is_stuck_below_the_server_threshold() {
        let mut q = queue();
        q.config.max_depth = Some(10);
        q.depth.ready = 10;
        assert_eq!(stuck_reasons(&q, &T), [StuckReason::Depth]);
    }
}
