//! Message routes: enqueue (one or a batch) and lookups by id or idempotency key.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use sluice_core::message::{BodyKind, MessageStatus, NewMessage, Payload};
use sluice_core::queue::{QueueConfig, limits};
use sluice_core::store::{CancelOutcome, EnqueueParams, MessageGetParams, MessageRef};
use sluice_core::wire::{
    CancelIn, CancelOut, DeadLetterOut, EnqueueBatchOut, EnqueueOut, MessageBatchIn, MessageIn,
    MessageStatusOut, SchemaViolationOut, time_out,
};
use sluice_core::{Millis, clock::parse_rfc3339};
use tracing::Instrument;
use uuid::Uuid;

use super::{ApiPath, ApiQuery, AppState, json_shape, parse_json};
use crate::error::ApiError;

/// `POST /v1/queues/{queue}/messages`: one message, or `{"messages": [...]}`.
#[utoipa::path(post, operation_id = "message_enqueue", path = "/v1/queues/{queue}/messages", params(("queue" = String, Path)),
    request_body(content = sluice_core::wire::EnqueueIn, description = "One MessageIn, or a MessageBatchIn (a body with a `messages` field)"),
    responses(
        (status = 200, description = "Stored durably: EnqueueOut for one message, EnqueueBatchOut for a batch", body = sluice_core::wire::EnqueueAnswerOut),
        (status = 400, body = sluice_core::wire::ErrorBody), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 413, body = sluice_core::wire::ErrorBody),
        (status = 422, description = "invalid_field, or schema_violation with every violation in details.violations", body = sluice_core::wire::ErrorBody),
        (status = 503, description = "queue_full (with Retry-After) or unavailable", body = sluice_core::wire::ErrorBody)))]
pub async fn enqueue(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let now_ms = app.now_ms();
    let config = app.store.queue_config(&queue).await?;
    let (inputs, is_batch) = parse_enqueue(&body)?;
    let mut messages = Vec::with_capacity(inputs.len());
    let mut batch_bytes = 0usize;
    for (position, input) in inputs.into_iter().enumerate() {
        let prefix = if is_batch {
            format!("messages[{position}].")
        } else {
            String::new()
        };
        let message = validate(input, &config, now_ms, &prefix)?;
        batch_bytes += message.payload.body_bytes.len();
        messages.push(message);
    }
    if batch_bytes > limits::BATCH_BYTES_MAX {
        return Err(ApiError::too_large(format!(
            "messages: the batch holds {batch_bytes} body bytes; at most {} are allowed",
            limits::BATCH_BYTES_MAX
        )));
    }
    if let Some(schema) = &config.schema {
        // Off the async threads: a batch can hold 10 MiB of strings for the patterns.
        let schema = schema.clone();
        let (checked, result) = tokio::task::spawn_blocking(move || {
            let result = check_schema(&schema, &messages);
            (messages, result)
        })
        .await
        .map_err(|_| ApiError::unavailable("the schema check failed; see the server log"))?;
        result?;
        messages = checked;
    }
    let queue_name = queue.clone();
    let keys: Vec<Option<String>> = messages.iter().map(|m| m.idempotency_key.clone()).collect();
    // The trace goes on with each message: to its push deliveries and its consumers.
    let span = crate::telemetry::enqueue_span(&queue, messages.len());
    if let Some(traceparent) = crate::telemetry::traceparent(&span) {
        for message in &mut messages {
            crate::telemetry::carry(&mut message.payload, &traceparent);
        }
    }
    let results = app
        .store
        .message_enqueue(EnqueueParams {
            queue,
            messages,
            now_ms,
        })
        .instrument(span)
        .await?;
    let mut out = Vec::with_capacity(results.len());
    for (result, key) in results.into_iter().zip(keys) {
        out.push(if result.created {
            EnqueueOut {
                message_id: result.message_id,
                created: true,
                position: Some(result.position),
                state: None,
                result: None,
            }
        } else {
            duplicate_out(&app, &queue_name, result.message_id, key).await?
        });
    }
    let results = out;
    Ok(if is_batch {
        Json(EnqueueBatchOut { results }).into_response()
    } else {
        Json(results.into_iter().next()).into_response()
    })
}

/// A duplicate's answer: where the first message is now and, once acked, its result, so a
/// retried request learns the first outcome instead of causing a second run.
async fn duplicate_out(
    app: &AppState,
    queue: &str,
    message_id: Uuid,
    key: Option<String>,
) -> Result<EnqueueOut, ApiError> {
    // By key: the key remembers the ack and result even after the message's record is gone.
    let by = key.map_or(MessageRef::Id(message_id), MessageRef::IdempotencyKey);
    let status = app
        .store
        .message_get(MessageGetParams {
            queue: queue.to_owned(),
            by,
            now_ms: app.now_ms(),
        })
        .await?
        .filter(|status| status.message_id == message_id);
    Ok(EnqueueOut {
        message_id,
        created: false,
        position: None,
        state: status.as_ref().map(|s| s.state.as_str().to_owned()),
        result: status
            .and_then(|s| s.result)
            .and_then(|text| serde_json::from_str(&text).ok()),
    })
}

/// Every violation of every message of a batch, or nothing stored.
fn check_schema(
    schema: &sluice_core::queue::MessageSchema,
    messages: &[NewMessage],
) -> Result<(), ApiError> {
    let mut violations = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        if message.payload.body_kind != BodyKind::Json {
            violations.push(SchemaViolationOut {
                index,
                path: String::new(),
                reason: "this queue has a schema: give a JSON body, not body_base64".into(),
            });
            continue;
        }
        let body: serde_json::Value = match serde_json::from_slice(&message.payload.body_bytes) {
            Ok(body) => body,
            Err(error) => {
                violations.push(SchemaViolationOut {
                    index,
                    path: String::new(),
                    reason: format!("not JSON: {error}"),
                });
                continue;
            }
        };
        violations.extend(schema.violations(&body).into_iter().map(|violation| {
            SchemaViolationOut {
                index,
                path: violation.path,
                reason: violation.reason,
            }
        }));
    }
    if violations.is_empty() {
        return Ok(());
    }
    let summary: Vec<String> = violations
        .iter()
        .take(5)
        .map(|v| format!("message {} at {:?}: {}", v.index, v.path, v.reason))
        .collect();
    Err(ApiError::schema_violation(format!(
        "{} schema violation(s); nothing was stored: {}",
        violations.len(),
        summary.join("; ")
    ))
    .with_details(serde_json::json!({ "violations": violations })))
}

/// `POST /v1/queues/{queue}/cancel`: cancel a message that is not being processed.
#[utoipa::path(post, operation_id = "message_cancel", path = "/v1/queues/{queue}/cancel", params(("queue" = String, Path)), request_body = CancelIn,
    responses((status = 200, description = "outcome: cancelled, not_found, already_processing or already_completed", body = CancelOut),
        (status = 404, body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn cancel(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    super::ApiJson(input): super::ApiJson<CancelIn>,
) -> Result<Json<CancelOut>, ApiError> {
    let by = match (input.message_id, input.id) {
        (Some(id), None) => match Uuid::try_parse(&id) {
            Ok(id) => MessageRef::Id(id),
            // No message has an id that is not a UUID.
            Err(_) => {
                app.store.queue_get(&queue, app.now_ms()).await?;
                return Ok(Json(CancelOut {
                    outcome: "not_found".into(),
                    message_id: None,
                    state: None,
                }));
            }
        },
        (None, Some(key)) => MessageRef::IdempotencyKey(key),
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid_field(
                "give message_id or id (the idempotency key), not both",
            ));
        }
        (None, None) => {
            return Err(ApiError::invalid_field(
                "name the message: give message_id, or id (its idempotency key)",
            ));
        }
    };
    let outcome = app
        .store
        .message_cancel(MessageGetParams {
            queue,
            by,
            now_ms: app.now_ms(),
        })
        .await?;
    let (outcome, message_id, state) = match outcome {
        CancelOutcome::Cancelled { message_id } => {
            ("cancelled", Some(message_id), Some("cancelled"))
        }
        CancelOutcome::NotFound => ("not_found", None, None),
        CancelOutcome::AlreadyProcessing { message_id } => {
            ("already_processing", Some(message_id), Some("in_flight"))
        }
        CancelOutcome::AlreadyCompleted { message_id, state } => {
            ("already_completed", Some(message_id), Some(state.as_str()))
        }
    };
    Ok(Json(CancelOut {
        outcome: outcome.into(),
        message_id,
        state: state.map(str::to_owned),
    }))
}

/// Parses one message or a batch (`{"messages": [...]}`). The body is counted first
/// ([`json_shape::enqueue`]), so a batch over the message cap, or a message with too many
/// headers, is refused before anything is built for it.
fn parse_enqueue(body: &[u8]) -> Result<(Vec<MessageIn>, bool), ApiError> {
    let shape = json_shape::enqueue(body, limits::HEADERS_MAX)?;
    if let Some(count) = shape.batch_len {
        if count == 0 {
            return Err(ApiError::invalid_field(
                "messages: a batch needs at least one message",
            ));
        }
        if count > limits::BATCH_MESSAGES_MAX {
            return Err(ApiError::too_large(format!(
                "messages: {count} messages in one batch; at most {} are allowed",
                limits::BATCH_MESSAGES_MAX
            )));
        }
    }
    if let Some((position, count)) = shape.too_many_headers {
        let prefix = match shape.batch_len {
            Some(_) => format!("messages[{position}]."),
            None => String::new(),
        };
        return Err(ApiError::invalid_field(format!(
            "{prefix}headers: {count} headers; at most {} headers and {} bytes in all",
            limits::HEADERS_MAX,
            limits::HEADER_BYTES_MAX
        )));
    }
    if shape.batch_len.is_some() {
        let batch: MessageBatchIn = parse_json(body)?;
        return Ok((batch.messages, true));
    }
    Ok((vec![parse_json(body)?], false))
}

/// Checks one message against the queue's limits and builds what the store takes.
fn validate(
    input: MessageIn,
    config: &QueueConfig,
    now_ms: Millis,
    prefix: &str,
) -> Result<NewMessage, ApiError> {
    let invalid =
        |field: &str, why: String| ApiError::invalid_field(format!("{prefix}{field}: {why}"));
    let (body_bytes, body_kind) = match (input.body, input.body_base64) {
        (Some(raw), None) => (raw.get().as_bytes().to_vec(), BodyKind::Json),
        (None, Some(text)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.as_bytes())
                .map_err(|e| invalid("body_base64", format!("not valid base64: {e}")))?;
            (bytes, BodyKind::Bytes)
        }
        (Some(_), Some(_)) => {
            return Err(invalid("body", "give body or body_base64, not both".into()));
        }
        (None, None) => {
            return Err(invalid(
                "body",
                "a message needs body (any JSON) or body_base64".into(),
            ));
        }
    };
    if body_bytes.len() > config.max_message_bytes {
        return Err(ApiError::too_large(format!(
            "{prefix}body: {} bytes; the queue accepts at most {}",
            body_bytes.len(),
            config.max_message_bytes
        )));
    }
    for (field, value) in [("id", &input.id), ("key", &input.key)] {
        if let Some(value) = value
            && (value.is_empty() || value.len() > limits::KEY_BYTES_MAX)
        {
            return Err(invalid(
                field,
                format!("must be 1 to {} bytes long", limits::KEY_BYTES_MAX),
            ));
        }
    }
    let headers = input.headers.unwrap_or_default();
    let header_bytes: usize = headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    if headers.len() > limits::HEADERS_MAX || header_bytes > limits::HEADER_BYTES_MAX {
        return Err(invalid(
            "headers",
            format!(
                "at most {} headers and {} bytes in all",
                limits::HEADERS_MAX,
                limits::HEADER_BYTES_MAX
            ),
        ));
    }
    let visible_at_ms = match (input.delay_ms, input.not_before) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "delay_ms",
                "give delay_ms or not_before, not both".into(),
            ));
        }
        (Some(delay), None) => {
            if !(0..=limits::DELAY_MS_MAX).contains(&delay) {
                return Err(invalid(
                    "delay_ms",
                    format!("must be between 0 and {}", limits::DELAY_MS_MAX),
                ));
            }
            now_ms + delay
        }
        (None, Some(text)) => {
            let at = parse_rfc3339(&text).ok_or_else(|| {
                invalid("not_before", format!("{text:?} is not an RFC 3339 time"))
            })?;
            if at - now_ms > limits::DELAY_MS_MAX {
                return Err(invalid("not_before", "is more than 15 days away".into()));
            }
            at
        }
        (None, None) => now_ms,
    };
    Ok(NewMessage {
        idempotency_key: input.id,
        payload: Arc::new(Payload {
            body_bytes,
            body_kind,
            headers,
        }),
        key: input.key,
        priority: input.priority.unwrap_or(0),
        visible_at_ms,
        dead_letter: None,
    })
}

/// `GET /v1/queues/{queue}/messages/{message_id}`
#[utoipa::path(get, operation_id = "message_get", path = "/v1/queues/{queue}/messages/{message_id}", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = MessageStatusOut), (status = 404, body = sluice_core::wire::ErrorBody)))]
pub async fn get_by_id(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<MessageStatusOut>, ApiError> {
    let id = Uuid::try_parse(&message_id)
        .map_err(|_| ApiError::message_not_found(format!("{message_id:?} is not a message id")))?;
    lookup(&app, queue, MessageRef::Id(id), &message_id).await
}

/// The `?id=` query.
#[derive(Debug, Deserialize)]
pub struct IdempotencyQuery {
    /// The idempotency key.
    pub id: Option<String>,
}

/// `GET /v1/queues/{queue}/messages?id={idempotency key}`
#[utoipa::path(get, operation_id = "message_get_by_idempotency_key", path = "/v1/queues/{queue}/messages", params(("queue" = String, Path), ("id" = String, Query, description = "Idempotency key")),
    responses((status = 200, body = MessageStatusOut), (status = 404, body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn get_by_idempotency_key(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(query): ApiQuery<IdempotencyQuery>,
) -> Result<Json<MessageStatusOut>, ApiError> {
    let key = query
        .id
        .ok_or_else(|| ApiError::invalid_field("id: give the idempotency key as ?id=..."))?;
    let shown = format!("idempotency key {key:?}");
    lookup(&app, queue, MessageRef::IdempotencyKey(key), &shown).await
}

async fn lookup(
    app: &AppState,
    queue: String,
    by: MessageRef,
    shown: &str,
) -> Result<Json<MessageStatusOut>, ApiError> {
    let status = app
        .store
        .message_get(MessageGetParams {
            queue: queue.clone(),
            by,
            now_ms: app.now_ms(),
        })
        .await?;
    let status = status.ok_or_else(|| {
        ApiError::message_not_found(format!("no message {shown} in queue {queue:?}"))
    })?;
    Ok(Json(status_out(status)))
}

/// The wire form of a message's status.
pub fn status_out(status: MessageStatus) -> MessageStatusOut {
    MessageStatusOut {
        message_id: status.message_id,
        queue: status.queue,
        state: status.state.as_str().to_owned(),
        id: status.idempotency_key,
        key: status.key,
        priority: status.priority,
        attempts: status.attempts,
        enqueued_at: time_out(status.enqueued_at_ms),
        first_received_at: status.first_received_at_ms.map(time_out),
        visible_at: time_out(status.visible_at_ms),
        lease_expires_at: status.lease_expires_at_ms.map(time_out),
        last_error: status.last_error,
        acked_at: status.acked_at_ms.map(time_out),
        finished_at: status.finished_at_ms.map(time_out),
        dead_letter: status.dead_letter.as_ref().map(dead_letter_out),
        result: status
            .result
            .and_then(|text| serde_json::from_str(&text).ok()),
        replayed_as: status.replayed_as,
        failures: status
            .failures
            .into_iter()
            .map(|failure| sluice_core::wire::FailureOut {
                attempt: failure.attempt,
                at: time_out(failure.at),
                error: failure.error,
                dead_lettered: failure.dead_lettered,
            })
            .collect(),
    }
}

/// The wire form of dead-letter metadata.
pub fn dead_letter_out(info: &sluice_core::message::DeadLetterInfo) -> DeadLetterOut {
    DeadLetterOut {
        source_queue: info.source_queue.clone(),
        last_error: info.last_error.clone(),
        attempts: info.attempts,
        first_seen_at: time_out(info.first_seen_at_ms),
        last_seen_at: time_out(info.last_seen_at_ms),
    }
}

/// The message routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("messages")
        .documented(Need::Produce, routes!(enqueue))
        .documented(Need::Read, routes!(get_by_idempotency_key))
        .documented(Need::Read, routes!(get_by_id))
        .documented(Need::Produce, routes!(cancel))
}
