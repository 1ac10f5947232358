//! Retention: when a message has been kept long enough, and what becomes of it then.
//!
//! A message expires once its queue's `max_age_ms` has passed since the time its retention
//! counts from: when it first became visible (its enqueue, or the end of the delay it was
//! enqueued with, so a message delayed for a year is not expired before anyone could see it),
//! or for a message in a dead-letter queue the moment it was dead-lettered (so a failure gets
//! the dead-letter queue's full retention to be looked at). A retry's backoff does not restart
//! it. A leased message is left to its consumer and looked at again once its lease ends.

use crate::clock::Millis;
use crate::queue::{OnExpire, QueueConfig};

/// The error text recorded when retention moves a message to the dead-letter queue.
pub const MAX_AGE_ERROR: &str = "expired: older than the queue's max_age_ms";

/// The time a message's retention counts from: when it was dead-lettered, for a message in a
/// dead-letter queue; when it first became visible otherwise.
pub fn counts_from_ms(first_visible_at_ms: Millis, dead_lettered_at_ms: Option<Millis>) -> Millis {
    dead_lettered_at_ms.unwrap_or(first_visible_at_ms)
}

/// When a message enqueued at `enqueued_at_ms` to become visible at `visible_at_ms` first
/// becomes visible: a delay in the past counts as none.
pub fn first_visible_ms(enqueued_at_ms: Millis, visible_at_ms: Millis) -> Millis {
    visible_at_ms.max(enqueued_at_ms)
}

/// The latest retention start that has expired at `now_ms` in a queue configured as `config`:
/// a store selects the messages whose retention counts from at or before it.
pub fn cutoff_ms(config: &QueueConfig, now_ms: Millis) -> Millis {
    now_ms.saturating_sub(config.max_age_ms)
}

/// True when a message whose retention counts from `counts_from_ms` has expired at `now_ms`.
pub fn is_expired(config: &QueueConfig, counts_from_ms: Millis, now_ms: Millis) -> bool {
    counts_from_ms <= cutoff_ms(config, now_ms)
}

/// What becomes of an expired message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry<'a> {
    /// It is removed.
    Drop,
    /// It moves to this dead-letter queue, with [`MAX_AGE_ERROR`] as its error.
    DeadLetter {
        /// The queue's dead-letter queue.
        queue: &'a str,
    },
}

/// What the queue's `on_expire` does with an expired message: dead-letter it when asked to and
/// the queue has a dead-letter queue, drop it otherwise.
pub fn on_expiry(config: &QueueConfig) -> Expiry<'_> {
    match (config.on_expire, config.dead_letter_queue.as_deref()) {
        (OnExpire::DeadLetter, Some(queue)) => Expiry::DeadLetter { queue },
        (OnExpire::DeadLetter, None) | (OnExpire::Drop, _) => Expiry::Drop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_age_ms: Millis) -> QueueConfig {
        QueueConfig {
            max_age_ms,
            ..QueueConfig::defaults_for("q")
        }
    }

    #[test]
    fn a_message_expires_once_max_age_has_passed_since_its_retention_start() {
        let config = config(60_000);
        assert!(!is_expired(&config, 1_000, 60_999));
        assert!(is_expired(&config, 1_000, 61_000));
        assert_eq!(cutoff_ms(&config, 61_000), 1_000);
    }

    #[test]
    fn a_dead_letter_counts_from_when_it_was_dead_lettered() {
        assert_eq!(counts_from_ms(1_000, None), 1_000);
        assert_eq!(counts_from_ms(1_000, Some(50_000)), 50_000);
    }

    #[test]
    fn the_cutoff_does_not_overflow_near_the_start_of_time() {
        assert_eq!(cutoff_ms(&config(60_000), Millis::MIN + 5), Millis::MIN);
    }

    #[test]
    fn on_expire_dead_letters_only_when_there_is_a_dead_letter_queue() {
        let mut config = config(60_000);
        assert_eq!(on_expiry(&config), Expiry::Drop);
        config.on_expire = OnExpire::DeadLetter;
        assert_eq!(on_expiry(&config), Expiry::DeadLetter { queue: "q.dlq" });
        config.dead_letter_queue = None;
        assert_eq!(on_expiry(&config), Expiry::Drop);
    }
}
