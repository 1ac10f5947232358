//! Schedules: defining them, and the pass that makes their runs.
//!
//! A pass ([`Ops::schedules_pass`]) reads every schedule, asks the missed-run rule
//! ([`sluice_core::rules::schedule::plan`]) which runs are due, enqueues each through the
//! ordinary enqueue (the queue's limits and schema apply) with the run's idempotency key, and
//! then records how far the schedule got, from the run it read. So a crash between the enqueue
//! and the record makes the run again as a duplicate (the key answers with the first message),
//! and several nodes passing at once enqueue each run once.

use sluice_core::Millis;
use sluice_core::rules::schedule::plan;
use sluice_core::schedule::Schedule;
use sluice_core::store::{ScheduleRow, ScheduleState};
use sluice_wire as wire;
use sluice_wire::format_rfc3339;
use sluice_wire::{ErrorCode, ScheduleSpec};

use crate::enqueue::MessageRequest;
use crate::{Ops, OpsError, OpsResult};

/// The header naming the schedule a run's message came from.
pub const SCHEDULE_HEADER: &str = "sluice-schedule";
/// The header carrying a run's time (RFC 3339), the time it was due, not when it was made.
pub const SCHEDULED_AT_HEADER: &str = "sluice-scheduled-at";

/// A schedule and where it stands, in the operations' terms (times in epoch ms; each
/// protocol renders it).
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleView {
    /// Its name.
    pub name: String,
    /// The definition, as given (an empty one when the stored definition no longer reads).
    pub spec: ScheduleSpec,
    /// True when paused.
    pub paused: bool,
    /// When the next run is due; `None` when paused or when the pattern has no further time.
    pub next_run_ms: Option<Millis>,
    /// The time of the last run made or passed by the `missed` policy; `None` before the first.
    pub last_run_ms: Option<Millis>,
    /// When the last run's message was enqueued.
    pub last_enqueued_ms: Option<Millis>,
    /// The last run's message.
    pub last_message_id: Option<uuid::Uuid>,
    /// Runs made since the schedule was defined.
    pub runs: u64,
    /// Runs not made because of the `missed` policy.
    pub skipped_runs: u64,
    /// Why the last attempt to make a run failed; cleared by the next run made.
    pub last_error: Option<String>,
}

/// A schedule put: whether it was new, and the schedule as it now is.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulePut {
    /// False when an existing schedule was replaced.
    pub created: bool,
    /// The schedule.
    pub schedule: ScheduleView,
}

/// What one pass did, over every schedule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedulesPassed {
    /// Runs enqueued (duplicates of a run already made included).
    pub runs: u64,
    /// Runs skipped by a missed-run policy.
    pub skipped: u64,
    /// Runs that could not be enqueued (tried again next pass).
    pub failed: u64,
}

impl Ops {
    /// Defines or replaces a schedule. Its message is checked as an enqueue to its queue
    /// would be (the queue exists, sizes, headers, the schema), so a schedule that is taken
    /// can make its runs. A schedule whose timing changes starts over from now (its runs
    /// before now are not missed runs); other changes keep where it stands.
    pub async fn schedule_put(&self, name: &str, spec: ScheduleSpec) -> OpsResult<SchedulePut> {
        let schedule = Schedule::compile(name, spec).map_err(OpsError::invalid_field)?;
        let now_ms = self.now_ms();
        let mut check = self.enqueue_to(schedule.spec.queue.clone()).await?;
        check.add(run_request(&schedule, now_ms, now_ms)?, "message.")?;
        check.checked().await?;

        let existing = self.schedule_row(name).await?;
        if existing.is_none() {
            crate::room_for_definition("schedules", self.store.schedule_list().await?.len())?;
        }
        let state = existing.as_ref().and_then(|row| {
            let same = compile_row(row).is_some_and(|old| old.same_timing(&schedule.spec));
            (!same).then(|| ScheduleState {
                last_run_ms: now_ms,
                last_error: None,
                ..row.state.clone()
            })
        });
        let text = serde_json::to_string(&schedule.spec)
            .map_err(|e| OpsError::invalid_field(format!("cannot store the schedule: {e}")))?;
        self.store.schedule_put(name, text, state, now_ms).await?;
        Ok(SchedulePut {
            created: existing.is_none(),
            schedule: self.schedule_get(name).await?,
        })
    }

    /// One schedule and where it stands.
    pub async fn schedule_get(&self, name: &str) -> OpsResult<ScheduleView> {
        let row = self
            .schedule_row(name)
            .await?
            .ok_or_else(|| not_found(name))?;
        Ok(schedule_view(&row))
    }

    /// Every schedule, by name.
    pub async fn schedule_list(&self) -> OpsResult<Vec<ScheduleView>> {
        Ok(self
            .store
            .schedule_list()
            .await?
            .iter()
            .map(schedule_view)
            .collect())
    }

    /// Deletes a schedule: no run is made after this returns.
    pub async fn schedule_delete(&self, name: &str) -> OpsResult<()> {
        if !self.store.schedule_delete(name).await? {
            return Err(not_found(name));
        }
        Ok(())
    }

    /// Pauses or resumes a schedule (its definition's `paused`). Runs passed while paused are
    /// not missed runs.
    pub async fn schedule_pause(&self, name: &str, paused: bool) -> OpsResult<ScheduleView> {
        let row = self
            .schedule_row(name)
            .await?
            .ok_or_else(|| not_found(name))?;
        let mut spec: ScheduleSpec = serde_json::from_str(&row.spec).map_err(|e| {
            OpsError::new(
                ErrorCode::Internal,
                format!("the stored schedule {name:?} does not read: {e}"),
            )
        })?;
        spec.paused = paused.then_some(true);
        Ok(self.schedule_put(name, spec).await?.schedule)
    }

    /// Makes every schedule's due runs. Called by the server's upkeep on a timer, on every node.
    pub async fn schedules_pass(&self) -> OpsResult<SchedulesPassed> {
        let mut passed = SchedulesPassed::default();
        for row in self.store.schedule_list().await? {
            let Some(schedule) = compile_row(&row) else {
                continue;
            };
            self.pass_one(&schedule, row.state, &mut passed).await?;
        }
        Ok(passed)
    }

    async fn pass_one(
        &self,
        schedule: &Schedule,
        read: ScheduleState,
        passed: &mut SchedulesPassed,
    ) -> OpsResult<()> {
        let now_ms = self.now_ms();
        let plan = plan(schedule, read.last_run_ms, now_ms);
        let Some(done_through) = plan.done_through else {
            return Ok(());
        };
        let mut state = read.clone();
        for &run_ms in &plan.runs {
            match self.make_run(schedule, run_ms).await {
                Ok(message_id) => {
                    passed.runs += 1;
                    state.runs += 1;
                    state.last_run_ms = run_ms;
                    state.last_message_id = Some(message_id);
                    state.last_enqueued_at_ms = Some(self.now_ms());
                    state.last_error = None;
                }
                Err(error) => {
                    passed.failed += 1;
                    let why = format!("{}: {}", error.code.as_str(), error.message);
                    if read.last_error.as_deref() != Some(why.as_str()) {
                        tracing::warn!(schedule = %schedule.name, run = %format_rfc3339(run_ms), error = %why, "a schedule's run was not made; it is tried again");
                    }
                    state.last_error = Some(why);
                    // Runs before this one are done; this one and later are tried next pass.
                    if state != read {
                        self.store
                            .schedule_advance(&schedule.name, read.last_run_ms, state)
                            .await?;
                    }
                    return Ok(());
                }
            }
        }
        if plan.skipped > 0 {
            tracing::warn!(schedule = %schedule.name, skipped = plan.skipped, policy = schedule.missed.as_str(), "a schedule missed runs");
        }
        passed.skipped += plan.skipped;
        state.skipped_runs += plan.skipped;
        state.last_run_ms = done_through;
        self.store
            .schedule_advance(&schedule.name, read.last_run_ms, state)
            .await?;
        Ok(())
    }

    /// Enqueues the run at `run_ms`; its message's id (the first one's, for a run made again).
    async fn make_run(&self, schedule: &Schedule, run_ms: Millis) -> OpsResult<uuid::Uuid> {
        let mut enqueue = self.enqueue_to(schedule.spec.queue.clone()).await?;
        let mut request = run_request(schedule, run_ms, enqueue.now_ms)?;
        request.id = Some(schedule.run_key(run_ms));
        enqueue.add(request, "message.")?;
        let answer = self.enqueue(enqueue).await?;
        answer
            .first()
            .map(|out| out.message_id)
            .ok_or_else(|| OpsError::unavailable("the store answered no message"))
    }

    async fn schedule_row(&self, name: &str) -> OpsResult<Option<ScheduleRow>> {
        Ok(self
            .store
            .schedule_list()
            .await?
            .into_iter()
            .find(|row| row.name == name))
    }
}

/// The message of the run at `run_ms`: the template, the run's headers, and the jitter's wait.
fn run_request(schedule: &Schedule, run_ms: Millis, now_ms: Millis) -> OpsResult<MessageRequest> {
    let message = &schedule.spec.message;
    let json = message
        .body
        .as_ref()
        .map(serde_json::to_vec)
        .transpose()
        .map_err(|e| OpsError::invalid_field(format!("message.body: {e}")))?;
    let body = MessageRequest::decode_body(json, message.body_base64.as_deref(), "message.")?;
    let mut headers = message.headers.clone().unwrap_or_default();
    headers.insert(SCHEDULE_HEADER.to_owned(), schedule.name.clone());
    headers.insert(SCHEDULED_AT_HEADER.to_owned(), format_rfc3339(run_ms));
    let visible_at = run_ms + schedule.jitter_for(run_ms);
    Ok(MessageRequest {
        body,
        id: None,
        key: message.key.clone(),
        headers: Some(headers),
        priority: message.priority,
        delay_ms: (visible_at > now_ms).then_some(visible_at - now_ms),
        not_before: None,
    })
}

/// A stored schedule compiled again; one that no longer compiles (a time zone this build does
/// not know) is left alone with an error in the log.
fn compile_row(row: &ScheduleRow) -> Option<Schedule> {
    let spec = serde_json::from_str::<ScheduleSpec>(&row.spec)
        .map_err(|e| e.to_string())
        .and_then(|spec| Schedule::compile(&row.name, spec));
    match spec {
        Ok(schedule) => Some(schedule),
        Err(error) => {
            tracing::error!(schedule = %row.name, %error, "a stored schedule does not compile; it makes no runs");
            None
        }
    }
}

fn schedule_view(row: &ScheduleRow) -> ScheduleView {
    let schedule = compile_row(row);
    let spec = schedule
        .as_ref()
        .map(|s| s.spec.clone())
        .or_else(|| serde_json::from_str(&row.spec).ok());
    let state = &row.state;
    let paused = schedule.as_ref().is_some_and(|s| s.paused);
    ScheduleView {
        name: row.name.clone(),
        spec: spec.unwrap_or_else(unreadable_spec),
        paused,
        next_run_ms: schedule
            .as_ref()
            .filter(|s| !s.paused)
            .and_then(|s| s.timing.after(state.last_run_ms)),
        // Before the first run the cursor is the definition's time, which is no run.
        last_run_ms: (state.runs + state.skipped_runs > 0).then_some(state.last_run_ms),
        last_enqueued_ms: state.last_enqueued_at_ms,
        last_message_id: state.last_message_id,
        runs: state.runs,
        skipped_runs: state.skipped_runs,
        last_error: match &schedule {
            Some(_) => state.last_error.clone(),
            None => Some("the stored definition does not compile; it makes no runs".into()),
        },
    }
}

/// What a definition that no longer reads shows: nothing it could run.
fn unreadable_spec() -> ScheduleSpec {
    ScheduleSpec {
        queue: String::new(),
        cron: None,
        every_ms: None,
        timezone: None,
        message: wire::ScheduleMessage {
            body: None,
            body_base64: None,
            headers: None,
            key: None,
            priority: None,
        },
        jitter_ms: None,
        paused: None,
        missed: None,
        missed_max: None,
        grace_ms: None,
    }
}

fn not_found(name: &str) -> OpsError {
    OpsError::new(ErrorCode::ScheduleNotFound, format!("no schedule {name:?}"))
}
