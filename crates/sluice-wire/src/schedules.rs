//! The JSON (and TOML) shapes of schedules: recurring messages enqueued by the server.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a schedule does with runs it could not make on time (the server was down, or the clock
/// jumped forward).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MissedRuns {
    /// Make none of them: a run more than `grace_ms` late is counted in `skipped_runs`.
    #[default]
    Skip,
    /// Make the latest one; the others are counted in `skipped_runs`.
    RunOnce,
    /// Make each of them, oldest first, up to `missed_max` (the latest ones); the rest are
    /// counted in `skipped_runs`.
    RunAll,
}

impl MissedRuns {
    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            MissedRuns::Skip => "skip",
            MissedRuns::RunOnce => "run_once",
            MissedRuns::RunAll => "run_all",
        }
    }
}

/// The message each run enqueues. Give `body` (any JSON) or `body_base64` (bytes), not both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleMessage {
    /// Any JSON value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Value)]
    pub body: Option<serde_json::Value>,
    /// Bytes, standard base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// String headers; each run adds `sluice-schedule` (the schedule's name) and
    /// `sluice-scheduled-at` (the run's time, RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Ordering key for `per_key` queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Higher first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
}

/// A schedule: `PUT /v1/schedules/{name}` or `[schedules.<name>]` in the config file.
///
/// Give `cron` or `every_ms`, not both. Each run enqueues one message into `queue` with the
/// idempotency key `schedule:<name>:<run time in ms>`, so a restart, a clock jump or several
/// nodes never enqueue one run twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// The queue runs enqueue into (it must exist).
    pub queue: String,
    /// A cron pattern: `min hour day-of-month month day-of-week`, with an optional leading
    /// seconds field (`L`, `W`, `#` and names such as `MON` or `JAN` are understood).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A fixed interval in ms (at least 1000): runs at every multiple of it since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_ms: Option<u64>,
    /// The IANA time zone `cron` is read in (default `UTC`), e.g. `Europe/Berlin`. A run whose
    /// local time a DST change skips is made right after the change; one that a DST change
    /// repeats is made once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// The message each run enqueues.
    pub message: ScheduleMessage,
    /// Each run's message becomes visible up to this long after the run's time (a fixed part
    /// of it for each run, so a run made again is the same), spreading schedules that share
    /// a time. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    /// A paused schedule makes no runs; those it passes are not missed runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// What to do with runs that could not be made on time (default `skip`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<MissedRuns>,
    /// `run_all`: at most this many missed runs are made at once (default 100, at most 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed_max: Option<u32>,
    /// How late a run may still be made under `skip`, in ms (default 60000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
}

/// A schedule, its definition and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleOut {
    /// Its name.
    pub name: String,
    /// The definition, as given.
    pub spec: ScheduleSpec,
    /// True when paused.
    pub paused: bool,
    /// When the next run is due (RFC 3339); absent when paused or when the pattern has no
    /// further time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at: Option<String>,
    /// The time of the last run made or passed (skipped by the `missed` policy): runs up to it
    /// are done. `null` before the first.
    pub last_run_at: Option<String>,
    /// When the last run's message was enqueued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_enqueued_at: Option<String>,
    /// The last run's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub last_message_id: Option<uuid::Uuid>,
    /// Runs made since the schedule was defined.
    pub runs: u64,
    /// Runs not made because of the `missed` policy.
    pub skipped_runs: u64,
    /// Why the last attempt to make a run failed (the queue is gone or full...); cleared by the
    /// next run made. A failed run is tried again on the next pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Answer to `GET /v1/schedules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleListOut {
    /// Every schedule, by name.
    pub schedules: Vec<ScheduleOut>,
}

/// Answer to `PUT /v1/schedules/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SchedulePutOut {
    /// False when an existing schedule was replaced.
    pub created: bool,
    /// The schedule as it is now.
    pub schedule: ScheduleOut,
}

/// Answer to `DELETE /v1/schedules/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ScheduleDeleteOut {
    /// Always true.
    pub deleted: bool,
}
