//! Backoff: how long a message waits after a failed attempt before it is delivered again.

use std::ops::RangeInclusive;

use rand::Rng;

use crate::clock::Millis;
use crate::queue::Backoff;

/// The longest delay after failed attempt number `attempt` (1-based), before jitter:
/// `initial_ms * factor^(attempt - 1)`, capped at `max_ms` (and at `max_ms` when the growth
/// overflows).
pub fn ceiling_ms(backoff: &Backoff, attempt: u32) -> Millis {
    let exponent = attempt.saturating_sub(1).min(64) as i32;
    let grown = backoff.initial_ms as f64 * backoff.factor.powi(exponent);
    if grown.is_finite() {
        (grown as Millis).min(backoff.max_ms)
    } else {
        backoff.max_ms
    }
}

/// The delay after failed attempt number `attempt` (1-based). Without jitter it is the
/// [`ceiling_ms`]; with jitter `draw` picks it from `[ceiling / 2, ceiling]` ("equal jitter"),
/// so that a burst of failures does not come back as a burst. `draw` is the only source of
/// chance, which keeps the rule itself deterministic: production passes [`random_draw`], a test
/// a fixed pick.
pub fn delay_ms(
    backoff: &Backoff,
    attempt: u32,
    draw: impl FnOnce(RangeInclusive<Millis>) -> Millis,
) -> Millis {
    let ceiling = ceiling_ms(backoff, attempt);
    if !backoff.jitter || ceiling < 2 {
        return ceiling;
    }
    draw(ceiling / 2..=ceiling)
}

/// The delay after failed attempt number `attempt`, jittered at random: what production waits.
pub fn random_delay_ms(backoff: &Backoff, attempt: u32) -> Millis {
    delay_ms(backoff, attempt, random_draw)
}

/// A uniform pick from `range`, from the thread's random generator: the `draw` of production.
pub fn random_draw(range: RangeInclusive<Millis>) -> Millis {
    rand::rng().random_range(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_jitter() -> Backoff {
        Backoff {
            jitter: false,
            ..Backoff::default()
        }
    }

    #[test]
    fn the_ceiling_grows_by_the_factor_up_to_the_cap() {
        let backoff = Backoff {
            initial_ms: 100,
            max_ms: 1_000,
            factor: 3.0,
            jitter: false,
        };
        let ceilings: Vec<_> = (1..=5).map(|n| ceiling_ms(&backoff, n)).collect();
        assert_eq!(ceilings, [100, 300, 900, 1_000, 1_000]);
        // Attempt 0 (never delivered) waits as long as the first failure.
        assert_eq!(ceiling_ms(&backoff, 0), 100);
        assert_eq!(ceiling_ms(&backoff, u32::MAX), 1_000);
    }

    #[test]
    fn without_jitter_the_delay_is_the_ceiling_and_nothing_is_drawn() {
        let delays: Vec<_> = (1..=3)
            .map(|n| delay_ms(&no_jitter(), n, |_| unreachable!("no draw without jitter")))
            .collect();
        assert_eq!(delays, [1_000, 2_000, 4_000]);
    }

    #[test]
    fn jitter_draws_between_half_and_the_whole_ceiling() {
        let backoff = Backoff::default();
        assert_eq!(delay_ms(&backoff, 2, |range| *range.start()), 1_000);
        assert_eq!(delay_ms(&backoff, 2, |range| *range.end()), 2_000);
        for _ in 0..100 {
            let delay = delay_ms(&backoff, 3, random_draw);
            assert!((2_000..=4_000).contains(&delay), "{delay}");
        }
    }

    #[test]
    fn a_ceiling_below_two_ms_is_not_jittered() {
        let backoff = Backoff {
            initial_ms: 1,
            max_ms: 1,
            factor: 1.0,
            jitter: true,
        };
        assert_eq!(delay_ms(&backoff, 4, |_| unreachable!()), 1);
    }

    #[test]
    fn a_random_delay_stays_between_half_and_the_full_ceiling() {
        let backoff = Backoff::default();
        for attempt in 1..10 {
            let ceiling = ceiling_ms(&backoff, attempt);
            for _ in 0..50 {
                let delay = random_delay_ms(&backoff, attempt);
                assert!(
                    delay >= ceiling / 2 && delay <= ceiling,
                    "{delay} vs {ceiling}"
                );
            }
        }
    }

    #[test]
    fn huge_attempt_numbers_do_not_overflow() {
        assert_eq!(ceiling_ms(&Backoff::default(), u32::MAX), 60_000);
    }
}
