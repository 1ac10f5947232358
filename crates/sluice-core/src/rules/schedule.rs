//! Which runs of a schedule to make now, and which were missed: the one decision every node
//! makes the same way from the schedule, the time of its last run done, and `now`.
//!
//! Runs up to `last_run_ms` are done (made, skipped, or passed while paused). The runs due are
//! those in `(last_run_ms, now]`. On time, that is one run (a pass comes every half second);
//! after downtime or a clock jump forward there can be many, and the schedule's
//! [`MissedRuns`] policy picks which to make. A clock that goes back makes nothing due until it
//! passes `last_run_ms` again, so no run is made twice.

use crate::Millis;
use crate::schedule::Schedule;
use crate::schedule::schedule_limits::MISSED_MAX_MAX;
use sluice_wire::MissedRuns;

/// What a pass does for one schedule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// The run times to make, oldest first.
    pub runs: Vec<Millis>,
    /// Runs due but not made (counted up to [`crate::schedule::schedule_limits::COUNT_MAX`]).
    pub skipped: u64,
    /// The last run time this pass settles: the schedule's `last_run_ms` once its runs are made.
    pub done_through: Option<Millis>,
}

/// The runs of `schedule` to make at `now_ms`, its last run done being `last_run_ms`.
pub fn plan(schedule: &Schedule, last_run_ms: Millis, now_ms: Millis) -> Plan {
    let timing = &schedule.timing;
    let Some(latest) = timing.at_or_before(now_ms).filter(|&t| t > last_run_ms) else {
        return Plan::default();
    };
    if schedule.paused {
        return Plan {
            runs: Vec::new(),
            skipped: 0,
            done_through: Some(latest),
        };
    }
    // Newest first, walking back from the latest due run while the policy wants more.
    let keep = |run: Millis, taken: usize| match schedule.missed {
        MissedRuns::RunOnce => taken < 1,
        MissedRuns::RunAll => taken < schedule.missed_max as usize,
        MissedRuns::Skip => now_ms - run <= schedule.grace_ms && taken < MISSED_MAX_MAX as usize,
    };
    let mut runs = Vec::new();
    let mut at = Some(latest);
    while let Some(run) = at.filter(|&t| t > last_run_ms) {
        if !keep(run, runs.len()) {
            break;
        }
        runs.push(run);
        // `before` answers a time before `run` or nothing, so the walk ends.
        at = timing.before(run);
    }
    runs.reverse();
    let oldest_made = runs.first().copied().unwrap_or(latest + 1);
    // Everything due before the oldest run made was skipped.
    let skipped = timing.count_between(last_run_ms, oldest_made - 1);
    Plan {
        runs,
        skipped,
        done_through: Some(latest),
    }
}
