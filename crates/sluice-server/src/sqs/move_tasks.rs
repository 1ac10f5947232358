//! Message move tasks (SQS's dead-letter redrive) over the operations' move of a dead-letter
//! queue (`sluice_ops::MoveRequest`; docs/design/sqs-compat.md §3.15).
//!
//! A task moves every message of a dead-letter queue, however it got there: dead letters back
//! to the queues they failed in, or everything to one destination, at an optional rate, in the
//! background; it can be listed and cancelled. Each message moves in one commit, so it is
//! never in two queues and never lost. Without a destination, a message with no queue to go
//! back to (sent straight to the dead-letter queue) stays, and the task fails with AWS's
//! `CouldNotDetermineMessageSource` once the rest moved. Tasks live in the server's memory:
//! after a restart the messages not moved yet are still in the dead-letter queue, and a new
//! task moves them (docs/sqs.md says so).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parking_lot::Mutex;
use sluice_ops::{MoveRequest, Ops};
use sluice_sqs::request::{CancelMessageMoveTask, ListMessageMoveTasks, StartMessageMoveTask};
use sluice_sqs::response::{
    CancelMessageMoveTaskResult, ListMessageMoveTasksResult, ListMessageMoveTasksResultEntry,
    StartMessageMoveTaskResult,
};
use sluice_sqs::{ErrorKind, Response, SqsError};
use sluice_wire::ErrorCode;
use tokio_util::sync::CancellationToken;

use super::{Ctx, from_ops, names};
use crate::auth::Need;

/// Tasks kept per source queue (the newest; SQS lists at most 10).
const TASKS_PER_SOURCE: usize = 10;
/// Tasks kept in all.
const TASKS_MAX: usize = 1000;
/// Messages moved per step when no rate is given.
const BATCH: usize = 100;
/// Why a task without a destination failed: messages with no queue to go back to (AWS's
/// failure reason for messages sent straight to a dead-letter queue).
const NO_SOURCE: &str = "CouldNotDetermineMessageSource";

/// The tasks, newest last.
#[derive(Debug, Default)]
pub struct MoveTasks {
    tasks: Mutex<Vec<Arc<Task>>>,
}

#[derive(Debug)]
struct Task {
    id: String,
    source: String,
    destination: Option<String>,
    rate: Option<i64>,
    started_at_ms: i64,
    cancel: CancellationToken,
    progress: Mutex<Progress>,
}

#[derive(Debug, Clone)]
struct Progress {
    status: &'static str,
    moved: i64,
    to_move: i64,
    failure: Option<String>,
}

impl Task {
    fn handle(&self, sqs: &super::SqsConfig) -> String {
        let json = serde_json::json!({
            "taskId": self.id,
            "sourceArn": names::queue_arn(sqs, &self.source),
        });
        URL_SAFE_NO_PAD.encode(json.to_string())
    }
}

pub async fn start(ctx: &Ctx<'_>, request: StartMessageMoveTask) -> Result<Response, SqsError> {
    let config = &ctx.sqs.config;
    let source = names::queue_of_arn(config, &request.source_arn, "SourceArn")?;
    ctx.allow(Need::Admin, Some(&source)).await?;
    exists(ctx, &source, "SourceArn").await?;
    let sources = ctx
        .app
        .ops
        .dead_letter_sources(&sluice_ops::Anyone, &source)
        .await
        .map_err(from_ops)?;
    if sources.is_empty() {
        return Err(invalid(
            "Source queue must be configured as a Dead Letter Queue.",
        ));
    }
    let destination = match &request.destination_arn {
        Some(arn) => {
            let name = names::queue_of_arn(config, arn, "DestinationArn")?;
            // A tenant admin moves dead letters within its tenant.
            ctx.allow(Need::Admin, Some(&name)).await?;
            exists(ctx, &name, "DestinationArn").await?;
            Some(name)
        }
        None => None,
    };
    if let Some(rate) = request.max_number_of_messages_per_second
        && !(1..=500).contains(&rate)
    {
        return Err(invalid(format!(
            "Value {rate} for parameter MaxNumberOfMessagesPerSecond is invalid. Reason: Must be between 1 and 500."
        )));
    }
    let to_move = ctx
        .app
        .ops
        .dead_letter_queue_movable(&source)
        .await
        .map_err(from_ops)? as i64;
    let task = Arc::new(Task {
        id: uuid::Uuid::new_v4().to_string(),
        source: source.clone(),
        destination,
        rate: request.max_number_of_messages_per_second,
        started_at_ms: ctx.now_ms(),
        cancel: ctx.app.shutdown.child_token(),
        progress: Mutex::new(Progress {
            status: "RUNNING",
            moved: 0,
            to_move,
            failure: None,
        }),
    });
    {
        let mut tasks = ctx.sqs.move_tasks.tasks.lock();
        if tasks
            .iter()
            .any(|t| t.source == source && t.progress.lock().status == "RUNNING")
        {
            return Err(invalid(
                "There is already a task running. Only one active task is allowed for a source queue arn at a given time.",
            ));
        }
        tasks.push(task.clone());
        trim(&mut tasks);
    }
    tokio::spawn(run(ctx.app.ops.clone(), task.clone()));
    Ok(Response::StartMessageMoveTask(StartMessageMoveTaskResult {
        task_handle: task.handle(config),
    }))
}

pub async fn list(ctx: &Ctx<'_>, request: ListMessageMoveTasks) -> Result<Response, SqsError> {
    let config = &ctx.sqs.config;
    let source = names::queue_of_arn(config, &request.source_arn, "SourceArn")?;
    ctx.allow(Need::Admin, Some(&source)).await?;
    exists(ctx, &source, "SourceArn").await?;
    let max = request.max_results.unwrap_or(1);
    if !(1..=10).contains(&max) {
        return Err(invalid(format!(
            "Value {max} for parameter MaxResults is invalid. Reason: Must be between 1 and 10."
        )));
    }
    let tasks = ctx.sqs.move_tasks.tasks.lock().clone();
    let results = tasks
        .iter()
        .rev()
        .filter(|task| task.source == source)
        .take(max as usize)
        .map(|task| {
            let progress = task.progress.lock().clone();
            ListMessageMoveTasksResultEntry {
                task_handle: (progress.status == "RUNNING").then(|| task.handle(config)),
                status: progress.status.to_owned(),
                source_arn: names::queue_arn(config, &task.source),
                destination_arn: task
                    .destination
                    .as_ref()
                    .map(|d| names::queue_arn(config, d)),
                max_number_of_messages_per_second: task.rate,
                approximate_number_of_messages_moved: progress.moved,
                approximate_number_of_messages_to_move: Some(progress.to_move),
                failure_reason: progress.failure,
                started_timestamp: task.started_at_ms,
            }
        })
        .collect();
    Ok(Response::ListMessageMoveTasks(ListMessageMoveTasksResult {
        results,
    }))
}

pub async fn cancel(ctx: &Ctx<'_>, request: CancelMessageMoveTask) -> Result<Response, SqsError> {
    let garbage = || invalid("Value for parameter TaskHandle is invalid.");
    let handle: serde_json::Value = URL_SAFE_NO_PAD
        .decode(request.task_handle.trim_end_matches('='))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(garbage)?;
    let id = handle["taskId"].as_str().ok_or_else(garbage)?;
    let task = ctx
        .sqs
        .move_tasks
        .tasks
        .lock()
        .iter()
        .find(|task| task.id == id)
        .cloned()
        .ok_or_else(|| SqsError::new(ErrorKind::ResourceNotFound, "Task does not exist."))?;
    ctx.allow(Need::Admin, Some(&task.source)).await?;
    {
        let mut progress = task.progress.lock();
        if progress.status != "RUNNING" {
            return Err(invalid("Only active tasks can be cancelled."));
        }
        progress.status = "CANCELLING";
    }
    task.cancel.cancel();
    let moved = task.progress.lock().moved;
    Ok(Response::CancelMessageMoveTask(
        CancelMessageMoveTaskResult {
            approximate_number_of_messages_moved: moved,
        },
    ))
}

/// Moves the messages in steps (one per second at a rate), until a step moves nothing, the
/// task is cancelled, or the server stops.
async fn run(ops: Arc<Ops>, task: Arc<Task>) {
    let limit = task.rate.map_or(BATCH, |rate| rate as usize);
    let mut failure = None;
    while !task.cancel.is_cancelled() {
        let step = match ops
            .dead_letter_queue_move(MoveRequest {
                dead_letter_queue: task.source.clone(),
                destination: task.destination.clone(),
                limit,
            })
            .await
        {
            Ok(step) => step,
            Err(error) => {
                failure = Some(match error.code {
                    ErrorCode::QueueNotFound => {
                        "AWS.SimpleQueueService.NonExistentQueue".to_owned()
                    }
                    _ => error.message,
                });
                break;
            }
        };
        task.progress.lock().moved += step.moved as i64;
        if step.is_last() {
            if step.unplaced > 0 {
                failure = Some(NO_SOURCE.to_owned());
            }
            break;
        }
        if task.rate.is_some() {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = task.cancel.cancelled() => break,
            }
        }
    }
    let mut progress = task.progress.lock();
    progress.status = match (&failure, task.cancel.is_cancelled()) {
        (Some(_), _) => "FAILED",
        (None, true) => "CANCELLED",
        (None, false) => "COMPLETED",
    };
    progress.failure = failure;
}

async fn exists(ctx: &Ctx<'_>, name: &str, parameter: &str) -> Result<(), SqsError> {
    match ctx.app.ops.queue_get(name).await {
        Ok(_) => Ok(()),
        Err(error) if error.code == ErrorCode::QueueNotFound => Err(SqsError::new(
            ErrorKind::ResourceNotFound,
            format!("The resource that you specified for the {parameter} parameter doesn't exist."),
        )),
        Err(error) => Err(from_ops(error)),
    }
}

/// Keeps the newest [`TASKS_PER_SOURCE`] of each source and [`TASKS_MAX`] in all; running
/// tasks are never dropped.
fn trim(tasks: &mut Vec<Arc<Task>>) {
    let mut kept_per_source = std::collections::HashMap::<String, usize>::new();
    let mut keep = vec![true; tasks.len()];
    for (index, task) in tasks.iter().enumerate().rev() {
        let count = kept_per_source.entry(task.source.clone()).or_default();
        *count += 1;
        let running = task.progress.lock().status == "RUNNING";
        keep[index] = running || *count <= TASKS_PER_SOURCE;
    }
    let mut index = 0;
    tasks.retain(|_| {
        index += 1;
        keep[index - 1]
    });
    while tasks.len() > TASKS_MAX {
        match tasks
            .iter()
            .position(|t| t.progress.lock().status != "RUNNING")
        {
            Some(oldest) => {
                tasks.remove(oldest);
            }
            None => break,
        }
    }
}

fn invalid(message: impl Into<String>) -> SqsError {
    SqsError::new(ErrorKind::InvalidParameterValue, message)
}
