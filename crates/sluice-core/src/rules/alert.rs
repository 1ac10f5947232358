//! When an alert notifies: at most once per queue and kind per window, dead letters counted
//! from where the last notification stopped, thresholds on crossing, again each window while
//! passed, and once when no longer passed.

use crate::Millis;
use crate::stored::alert_state::ThresholdMark;

/// Whether a notification may be made now: none of its kind was made within the window.
pub fn window_allows(sent_ms: Option<Millis>, now_ms: Millis, window_ms: Millis) -> bool {
    sent_ms.is_none_or(|sent| now_ms.saturating_sub(sent) >= window_ms)
}

/// What a threshold does on this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdStep {
    /// Passed: notify (the first time, or again a window after the last).
    Fire,
    /// No longer passed after a firing notification: notify once that it is over.
    Resolve,
    /// Nothing to say.
    Quiet,
}

/// The step for a threshold that is `passed` now.
pub fn threshold_step(
    mark: ThresholdMark,
    passed: bool,
    now_ms: Millis,
    window_ms: Millis,
) -> ThresholdStep {
    // Firing, first or again, waits a window after the last notification of either kind, so
    // a value flapping around the threshold sends at most a firing and a resolve per window.
    let window_passed = window_allows(mark.sent_ms, now_ms, window_ms);
    match (passed, mark.firing) {
        (true, _) if window_passed => ThresholdStep::Fire,
        (false, true) => ThresholdStep::Resolve,
        _ => ThresholdStep::Quiet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Millis = 300_000;

    #[test]
    fn dead_letters_notify_once_per_window() {
        assert!(window_allows(None, 1_000, WINDOW));
        assert!(!window_allows(Some(1_000), 1_000 + WINDOW - 1, WINDOW));
        assert!(window_allows(Some(1_000), 1_000 + WINDOW, WINDOW));
    }

    #[test]
    fn a_threshold_fires_on_crossing_repeats_each_window_and_resolves_once() {
        let quiet = ThresholdMark::default();
        assert_eq!(
            threshold_step(quiet, false, 0, WINDOW),
            ThresholdStep::Quiet
        );
        assert_eq!(threshold_step(quiet, true, 0, WINDOW), ThresholdStep::Fire);
        let firing = ThresholdMark {
            firing: true,
            sent_ms: Some(10),
        };
        assert_eq!(
            threshold_step(firing, true, 11, WINDOW),
            ThresholdStep::Quiet
        );
        assert_eq!(
            threshold_step(firing, true, 10 + WINDOW, WINDOW),
            ThresholdStep::Fire
        );
        // Resolving does not wait for the window: the all-clear is news.
        assert_eq!(
            threshold_step(firing, false, 11, WINDOW),
            ThresholdStep::Resolve
        );
        // Crossing again right after a resolve waits for the window: flapping is not spam.
        let resolved = ThresholdMark {
            firing: false,
            sent_ms: Some(11),
        };
        assert_eq!(
            threshold_step(resolved, true, 12, WINDOW),
            ThresholdStep::Quiet
        );
        assert_eq!(
            threshold_step(resolved, true, 11 + WINDOW, WINDOW),
            ThresholdStep::Fire
        );
    }
}
