//! The retry policy of a [`Worker`](super::Worker): how long to wait after a failed attempt
//! ([`Backoff`]), how many attempts to make, and which errors are worth another one. Pure: the
//! worker asks it for a [`Decision`] and acts on it.

use std::sync::Arc;
use std::time::Duration;

use super::BoxError;

type Retryable = Arc<dyn Fn(&BoxError) -> bool + Send + Sync>;

/// Delay between attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backoff {
    /// The same delay after every failure.
    Fixed(Duration),
    /// `initial · factor^(attempt-1)`, at most `max`.
    Exponential {
        /// After the first failure.
        initial: Duration,
        /// The cap.
        max: Duration,
        /// Growth per failure.
        factor: f64,
    },
}

impl Backoff {
    /// The delay after failed attempt `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        match *self {
            Backoff::Fixed(delay) => delay,
            Backoff::Exponential {
                initial,
                max,
                factor,
            } => {
                let grown = initial.as_secs_f64()
                    * factor
                        .max(1.0)
                        .powi(attempt.saturating_sub(1).min(64) as i32);
                // Past `Duration`'s range (a long run of failures) the cap applies, instead of
                // a panic in the worker's failure path.
                Duration::try_from_secs_f64(grown).map_or(max, |delay| delay.min(max))
            }
        }
    }
}

/// When and how often to retry.
///
/// The queue's own `max_attempts` still applies on the broker: a message is dead-lettered when
/// either limit is reached, so give the queue at least as many attempts as the policy (or 0,
/// "retry forever", and let the policy decide). A queue without a dead-letter queue keeps
/// retrying what the policy would dead-letter.
#[derive(Clone)]
pub struct RetryPolicy {
    max_attempts: u32,
    backoff: Backoff,
    retryable: Retryable,
}

impl std::fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl Default for RetryPolicy {
    /// 5 attempts, exponential backoff from 1 s doubling to 60 s, every error retryable.
    fn default() -> Self {
        Self {
            max_attempts: 5,
            backoff: Backoff::Exponential {
                initial: Duration::from_secs(1),
                max: Duration::from_secs(60),
                factor: 2.0,
            },
            retryable: Arc::new(|_| true),
        }
    }
}

impl RetryPolicy {
    /// Up to `max_attempts` deliveries (at least 1), with the default backoff.
    pub fn new(max_attempts: u32) -> Self {
        Self {
            max_attempts: max_attempts.max(1),
            ..Self::default()
        }
    }

    /// The delay between attempts.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Errors for which `retryable` is false go to the dead-letter queue at once.
    pub fn retry_if(
        mut self,
        retryable: impl Fn(&BoxError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.retryable = Arc::new(retryable);
        self
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Decision {
    /// Wait before the next attempt (also sent with a dead-letter nack, where the server
    /// ignores it).
    pub delay: Duration,
    /// Give up: the error is not retryable or the attempts are used up.
    pub dead_letter: bool,
}

impl RetryPolicy {
    /// The decision after failed attempt `attempt` (1-based) ended with `error`.
    pub(super) fn decide(&self, attempt: u32, error: &BoxError) -> Decision {
        let retryable = (self.retryable)(error);
        Decision {
            delay: self.backoff.delay(attempt),
            dead_letter: !retryable || attempt >= self.max_attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> BoxError {
        text.to_owned().into()
    }

    #[test]
    fn exponential_backoff_grows_to_its_cap() {
        let backoff = Backoff::Exponential {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(10),
            factor: 2.0,
        };
        let delays: Vec<u64> = (1..=6).map(|n| backoff.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff.delay(66), Duration::from_secs(10));
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn the_last_attempt_or_an_error_not_retryable_dead_letters() {
        let policy = RetryPolicy::new(3)
            .backoff(Backoff::Fixed(Duration::from_millis(50)))
            .retry_if(|error| !error.to_string().contains("fatal"));
        let retry = policy.decide(2, &error("timeout"));
        assert_eq!(
            retry,
            Decision {
                delay: Duration::from_millis(50),
                dead_letter: false
            }
        );
        assert!(policy.decide(3, &error("timeout")).dead_letter);
        assert!(policy.decide(1, &error("fatal: bad input")).dead_letter);
    }
}
