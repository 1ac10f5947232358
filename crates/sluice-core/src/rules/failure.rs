//! The failure decision: after a failed attempt, is a message retried (and when), or moved to
//! its queue's dead-letter queue?

use std::ops::RangeInclusive;

use crate::clock::Millis;
use crate::queue::QueueConfig;

/// The error text recorded when a lease runs out.
pub const LEASE_EXPIRED_ERROR: &str = "visibility timeout expired";

/// How an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The consumer nacked, optionally asking for a delay instead of the queue's backoff.
    Nacked {
        /// Retry after this many ms; `None` waits the backoff of the attempt.
        delay_ms: Option<Millis>,
    },
    /// The consumer nacked and asked for no retry: the message is dead-lettered at once.
    Rejected,
    /// The lease ran out before the consumer acked: the message is visible again at once (the
    /// timeout already was the wait), unless it is out of attempts.
    LeaseExpired,
}

/// Why a failure ends in the dead-letter queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterReason {
    /// The consumer asked for no retry ([`Failure::Rejected`]).
    Rejected,
    /// The attempt was the queue's `max_attempts`-th.
    OutOfAttempts,
}

/// What happens to a message after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureDecision<'a> {
    /// It becomes visible again at `at_ms`, its attempts kept.
    Retry {
        /// When it may be delivered again.
        at_ms: Millis,
    },
    /// It moves to the dead-letter queue `queue`.
    DeadLetter {
        /// The queue's dead-letter queue.
        queue: &'a str,
        /// Why.
        reason: DeadLetterReason,
    },
}

/// A [`Failure::Rejected`] on a queue without a dead-letter queue: there is nowhere to put the
/// message, so the nack is refused and the lease stays as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the queue has no dead-letter queue")]
pub struct NoDeadLetterQueue;

/// Decides the fate of a message of a queue configured as `config` whose attempt number
/// `attempts` (deliveries in this queue so far, the failed one included) failed as `failure` at
/// `now_ms`.
///
/// - With a dead-letter queue, a rejection or the `max_attempts`-th attempt (when `max_attempts`
///   is not 0, "retry forever") dead-letters it.
/// - Without one, a message out of attempts keeps retrying, and a rejection is refused.
/// - A retry waits the requested delay, or for a nack without one the backoff of that attempt
///   ([`super::backoff::delay_ms`], `draw` picking the jitter), or nothing after a lease
///   expiry. A negative delay counts as none.
pub fn decide<'a>(
    config: &'a QueueConfig,
    attempts: u32,
    failure: Failure,
    now_ms: Millis,
    draw: impl FnOnce(RangeInclusive<Millis>) -> Millis,
) -> Result<FailureDecision<'a>, NoDeadLetterQueue> {
    let out_of_attempts = config.max_attempts > 0 && attempts >= config.max_attempts;
    let retry_after = |delay_ms: Millis| {
        Ok(FailureDecision::Retry {
            at_ms: now_ms + delay_ms.max(0),
        })
    };
    match (failure, config.dead_letter_queue.as_deref()) {
        (Failure::Rejected, None) => Err(NoDeadLetterQueue),
        (Failure::Rejected, Some(queue)) => Ok(FailureDecision::DeadLetter {
            queue,
            reason: DeadLetterReason::Rejected,
        }),
        (_, Some(queue)) if out_of_attempts => Ok(FailureDecision::DeadLetter {
            queue,
            reason: DeadLetterReason::OutOfAttempts,
        }),
        (Failure::Nacked { delay_ms }, _) => retry_after(
            delay_ms.unwrap_or_else(|| super::backoff::delay_ms(&config.backoff, attempts, draw)),
        ),
        (Failure::LeaseExpired, _) => retry_after(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Backoff;

    const NOW: Millis = 1_000_000;

    fn config(max_attempts: u32, dead_letter_queue: Option<&str>) -> QueueConfig {
        QueueConfig {
            max_attempts,
            dead_letter_queue: dead_letter_queue.map(str::to_owned),
            backoff: Backoff {
                jitter: false,
                ..Backoff::default()
            },
            ..QueueConfig::defaults_for("q")
        }
    }

    fn decide_now(
        config: &QueueConfig,
        attempts: u32,
        failure: Failure,
    ) -> Result<FailureDecision<'_>, NoDeadLetterQueue> {
        decide(config, attempts, failure, NOW, |_| {
            unreachable!("no jitter")
        })
    }

    const NACK: Failure = Failure::Nacked { delay_ms: None };

    #[test]
    fn a_nack_waits_the_backoff_of_its_attempt() {
        let config = config(5, Some("q.dlq"));
        assert_eq!(
            decide_now(&config, 1, NACK),
            Ok(FailureDecision::Retry { at_ms: NOW + 1_000 })
        );
        assert_eq!(
            decide_now(&config, 3, NACK),
            Ok(FailureDecision::Retry { at_ms: NOW + 4_000 })
        );
    }

    #[test]
    fn a_requested_delay_replaces_the_backoff_and_never_goes_back_in_time() {
        let config = config(5, Some("q.dlq"));
        let nack = |delay_ms| Failure::Nacked {
            delay_ms: Some(delay_ms),
        };
        assert_eq!(
            decide_now(&config, 1, nack(250)),
            Ok(FailureDecision::Retry { at_ms: NOW + 250 })
        );
        assert_eq!(
            decide_now(&config, 1, nack(-5)),
            Ok(FailureDecision::Retry { at_ms: NOW })
        );
    }

    #[test]
    fn an_expired_lease_is_visible_again_at_once() {
        let config = config(5, Some("q.dlq"));
        assert_eq!(
            decide_now(&config, 2, Failure::LeaseExpired),
            Ok(FailureDecision::Retry { at_ms: NOW })
        );
    }

    #[test]
    fn the_last_attempt_dead_letters_whatever_failed() {
        let config = config(3, Some("q.dlq"));
        let out = Ok(FailureDecision::DeadLetter {
            queue: "q.dlq",
            reason: DeadLetterReason::OutOfAttempts,
        });
        for failure in [
            NACK,
            Failure::Nacked { delay_ms: Some(10) },
            Failure::LeaseExpired,
        ] {
            assert_eq!(decide_now(&config, 3, failure), out, "{failure:?}");
            assert_eq!(decide_now(&config, 4, failure), out, "{failure:?}");
            assert!(matches!(
                decide_now(&config, 2, failure),
                Ok(FailureDecision::Retry { .. })
            ));
        }
    }

    #[test]
    fn without_a_dead_letter_queue_or_with_max_attempts_0_it_retries_forever() {
        for config in [config(3, None), config(0, Some("q.dlq"))] {
            assert_eq!(
                decide_now(&config, 1_000, Failure::LeaseExpired),
                Ok(FailureDecision::Retry { at_ms: NOW })
            );
            assert_eq!(
                decide_now(&config, 1_000, NACK),
                Ok(FailureDecision::Retry {
                    at_ms: NOW + 60_000
                })
            );
        }
    }

    #[test]
    fn a_rejection_dead_letters_at_once_or_is_refused_without_a_dead_letter_queue() {
        assert_eq!(
            decide_now(&config(5, Some("q.dlq")), 1, Failure::Rejected),
            Ok(FailureDecision::DeadLetter {
                queue: "q.dlq",
                reason: DeadLetterReason::Rejected,
            })
        );
        assert_eq!(
            decide_now(&config(5, None), 1, Failure::Rejected),
            Err(NoDeadLetterQueue)
        );
    }

    #[test]
    fn the_jitter_comes_from_the_draw() {
        let config = QueueConfig {
            backoff: Backoff::default(),
            ..config(5, Some("q.dlq"))
        };
        let decision = decide(&config, 2, NACK, NOW, |range| *range.start());
        assert_eq!(decision, Ok(FailureDecision::Retry { at_ms: NOW + 1_000 }));
    }
}
