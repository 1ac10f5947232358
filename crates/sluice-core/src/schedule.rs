//! Schedules: when a recurring message is due. A [`Schedule`] is a checked [`ScheduleSpec`];
//! its [`Timing`] answers "which run times lie in this span", the one question the missed-run
//! rule ([`crate::rules::schedule`]) asks.
//!
//! A run is named by its time (epoch ms, UTC), never by a counter: two nodes, or one node
//! before and after a restart, compute the same run times from the same definition, and the
//! run's idempotency key ([`Schedule::run_key`]) is made from it.

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::Millis;
use crate::queue::{limits, validate_queue_name};
use sluice_wire::{MissedRuns, ScheduleSpec};

/// Limits of a schedule's definition.
pub mod schedule_limits {
    use crate::Millis;

    /// Shortest `every_ms`: one second, the finest a cron pattern can say too.
    pub const EVERY_MS_MIN: Millis = 1000;
    /// Longest `every_ms`, `jitter_ms` and `grace_ms`: 100 years, as a delay.
    pub const SPAN_MS_MAX: Millis = crate::queue::limits::DELAY_MS_MAX;
    /// Default `missed_max`.
    pub const MISSED_MAX_DEFAULT: u32 = 100;
    /// Largest `missed_max`: a pass makes at most this many runs of one schedule.
    pub const MISSED_MAX_MAX: u32 = 10_000;
    /// Most bytes one catch-up (`missed = "run_all"`) may enqueue: `missed_max` runs of the
    /// message. 10,000 runs of a 100 KB body wrote 1 GB in 38 s after a clock jump.
    pub const CATCH_UP_BYTES_MAX: u64 = 64 << 20;
    /// Default `grace_ms`: a run up to a minute late is still made under `skip`.
    pub const GRACE_MS_DEFAULT: Millis = 60_000;
    /// Longest cron pattern, in bytes.
    pub const CRON_BYTES_MAX: usize = 256;
    /// Most run times counted one by one when a cron schedule missed many: beyond it the
    /// skipped count says "at least this many" (an every-second pattern missed for ~3 hours).
    pub const COUNT_MAX: u64 = 10_000;
}

use schedule_limits::*;

/// When a schedule's runs are.
#[derive(Debug, Clone)]
pub enum Timing {
    /// A cron pattern read in a time zone.
    Cron { cron: Box<Cron>, zone: TimeZone },
    /// Every multiple of `every_ms` since the Unix epoch.
    Every { every_ms: Millis },
}

impl Timing {
    /// The latest run time at or before `at`.
    pub fn at_or_before(&self, at: Millis) -> Option<Millis> {
        match self {
            Timing::Every { every_ms } => Some(at - at.rem_euclid(*every_ms)),
            Timing::Cron { cron, zone } => {
                // Cron runs fall on whole seconds, so the search starts from one: croner rounds
                // a fraction up, which in the hour a DST change repeats can carry it past the
                // change and answer a time after `at`.
                let zoned = zoned(whole_second(at), zone)?;
                let found = cron.find_previous_occurrence(&zoned, true).ok()?;
                Some(found.timestamp().as_millisecond()).filter(|&t| t <= at)
            }
        }
    }

    /// The latest run time strictly before `at`.
    pub fn before(&self, at: Millis) -> Option<Millis> {
        self.at_or_before(at.checked_sub(1)?)
    }

    /// The first run time strictly after `at`.
    pub fn after(&self, at: Millis) -> Option<Millis> {
        match self {
            Timing::Every { every_ms } => Some(at - at.rem_euclid(*every_ms) + every_ms),
            Timing::Cron { cron, zone } => {
                let zoned = zoned(whole_second(at), zone)?;
                let found = cron.find_next_occurrence(&zoned, false).ok()?;
                Some(found.timestamp().as_millisecond()).filter(|&t| t > at)
            }
        }
    }

    /// How many run times lie in `(from, to]`, counting at most [`COUNT_MAX`] one by one.
    pub fn count_between(&self, from: Millis, to: Millis) -> u64 {
        if to <= from {
            return 0;
        }
        match self {
            Timing::Every { every_ms } => {
                (to.div_euclid(*every_ms) - from.div_euclid(*every_ms)).max(0) as u64
            }
            Timing::Cron { .. } => {
                let mut count = 0;
                let mut at = from;
                while count < COUNT_MAX {
                    match self.after(at) {
                        Some(next) if next <= to => {
                            count += 1;
                            at = next;
                        }
                        _ => break,
                    }
                }
                count
            }
        }
    }
}

fn whole_second(at: Millis) -> Millis {
    at - at.rem_euclid(1000)
}

fn zoned(at: Millis, zone: &TimeZone) -> Option<jiff::Zoned> {
    Some(Timestamp::from_millisecond(at).ok()?.to_zoned(zone.clone()))
}

/// A checked schedule definition.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Its name.
    pub name: String,
    /// The definition as given (what is stored and shown).
    pub spec: ScheduleSpec,
    /// When runs are.
    pub timing: Timing,
    /// Up to this much later than its run a message becomes visible.
    pub jitter_ms: Millis,
    /// No runs while paused.
    pub paused: bool,
    /// What happens to runs not made on time.
    pub missed: MissedRuns,
    /// `run_all`: most runs made at once.
    pub missed_max: u32,
    /// `skip`: how late a run may still be made.
    pub grace_ms: Millis,
}

impl Schedule {
    /// Checks a definition; the error names the field.
    pub fn compile(name: &str, spec: ScheduleSpec) -> Result<Schedule, String> {
        validate_queue_name(name)
            .map_err(|e| format!("name: {}", e.replace("queue name", "schedule name")))?;
        validate_queue_name(&spec.queue).map_err(|e| format!("queue: {e}"))?;
        let timing = match (&spec.cron, spec.every_ms) {
            (Some(_), Some(_)) => return Err("cron: give cron or every_ms, not both".into()),
            (None, None) => return Err("cron: a schedule needs cron or every_ms".into()),
            (Some(pattern), None) => {
                if pattern.len() > CRON_BYTES_MAX {
                    return Err(format!(
                        "cron: the pattern is {} bytes long; at most {CRON_BYTES_MAX} are allowed",
                        pattern.len()
                    ));
                }
                let cron = CronParser::builder()
                    .seconds(Seconds::Optional)
                    .build()
                    .parse(pattern)
                    .map_err(|e| format!("cron: {pattern:?} is not a cron pattern: {e}"))?;
                let zone_name = spec.timezone.as_deref().unwrap_or("UTC");
                let zone = TimeZone::get(zone_name).map_err(|_| {
                    format!(
                        "timezone: {zone_name:?} is not an IANA time zone (such as Europe/Berlin)"
                    )
                })?;
                Timing::Cron {
                    cron: Box::new(cron),
                    zone,
                }
            }
            (None, Some(every_ms)) => {
                if spec.timezone.is_some() {
                    return Err(
                        "timezone: only a cron pattern is read in a time zone; every_ms counts from the Unix epoch"
                            .into(),
                    );
                }
                let every_ms = span("every_ms", every_ms)?;
                if every_ms < EVERY_MS_MIN {
                    return Err(format!(
                        "every_ms: {every_ms} is below the shortest interval, {EVERY_MS_MIN}"
                    ));
                }
                Timing::Every { every_ms }
            }
        };
        let missed_max = spec.missed_max.unwrap_or(MISSED_MAX_DEFAULT);
        if !(1..=MISSED_MAX_MAX).contains(&missed_max) {
            return Err(format!(
                "missed_max: {missed_max} is out of range; 1 to {MISSED_MAX_MAX}"
            ));
        }
        if spec.missed_max.is_some() && spec.missed != Some(MissedRuns::RunAll) {
            return Err("missed_max: only with missed = \"run_all\"".into());
        }
        if spec.missed == Some(MissedRuns::RunAll) {
            let bytes = message_bytes(&spec.message);
            let total = u64::from(missed_max).saturating_mul(bytes);
            if total > CATCH_UP_BYTES_MAX {
                return Err(format!(
                    "missed_max: {missed_max} runs of this {bytes}-byte message would enqueue {total} bytes at once after missed runs; at most {CATCH_UP_BYTES_MAX}: lower missed_max or the message"
                ));
            }
        }
        let jitter_ms = span("jitter_ms", spec.jitter_ms.unwrap_or(0))?;
        let grace_ms = span("grace_ms", spec.grace_ms.unwrap_or(GRACE_MS_DEFAULT as u64))?;
        let message = &spec.message;
        if let Some(key) = &message.key
            && key.len() > limits::KEY_BYTES_MAX
        {
            return Err(format!(
                "message.key: {} bytes; at most {} are allowed",
                key.len(),
                limits::KEY_BYTES_MAX
            ));
        }
        Ok(Schedule {
            name: name.to_owned(),
            timing,
            jitter_ms,
            paused: spec.paused.unwrap_or(false),
            missed: spec.missed.unwrap_or_default(),
            missed_max,
            grace_ms,
            spec,
        })
    }

    /// The idempotency key of the run at `run_ms`: the same on every node and after a restart.
    pub fn run_key(&self, run_ms: Millis) -> String {
        format!("schedule:{}:{run_ms}", self.name)
    }

    /// How long after its run time the run's message becomes visible: a fixed share of
    /// `jitter_ms` drawn from the name and the run time, so a run made again waits the same.
    pub fn jitter_for(&self, run_ms: Millis) -> Millis {
        if self.jitter_ms == 0 {
            return 0;
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.name.bytes().chain(run_ms.to_le_bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        (hash % (self.jitter_ms as u64 + 1)) as Millis
    }

    /// Whether a new definition changes when runs are (so the runs done so far start again).
    pub fn same_timing(&self, other: &ScheduleSpec) -> bool {
        self.spec.cron == other.cron
            && self.spec.every_ms == other.every_ms
            && self.spec.timezone == other.timezone
    }
}

/// The stored size of a run's message: its body (JSON text, or the bytes base64 stands for) and
/// headers.
fn message_bytes(message: &sluice_wire::ScheduleMessage) -> u64 {
    let body = match (&message.body, &message.body_base64) {
        (Some(body), _) => body.to_string().len(),
        (None, Some(text)) => text.len() / 4 * 3,
        (None, None) => 0,
    };
    let headers: usize = message
        .headers
        .iter()
        .flatten()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    (body + headers) as u64
}

fn span(field: &str, value: u64) -> Result<Millis, String> {
    match Millis::try_from(value) {
        Ok(ms) if ms <= SPAN_MS_MAX => Ok(ms),
        _ => Err(format!(
            "{field}: {value} is out of range; at most {SPAN_MS_MAX} (100 years)"
        )),
    }
}

#[cfg(test)]
mod tests;
