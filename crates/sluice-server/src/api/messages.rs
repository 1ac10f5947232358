//! Message routes: enqueue (one or a batch), cancel, and lookups by id or idempotency key.
//! The rules are [`sluice_ops::Ops`]'s; these parse and render.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use sluice_core::queue::limits;
use sluice_ops::{CancelRequest, MessageRequest};
use sluice_wire::{
    CancelIn, CancelOut, EnqueueBatchOut, MessageBatchIn, MessageIn, MessageStatusOut,
};
use tracing::Instrument;

use super::{ApiPath, ApiQuery, AppState, json_shape, parse_json};
use crate::error::ApiError;
use crate::views::{cancel_out, status_out};

/// `POST /v1/queues/{queue}/messages`: one message, or `{"messages": [...]}`.
#[utoipa::path(post, operation_id = "message_enqueue", path = "/v1/queues/{queue}/messages", params(("queue" = String, Path)),
    request_body(content = sluice_wire::EnqueueIn, description = "One MessageIn, or a MessageBatchIn (a body with a `messages` field)"),
    responses(
        (status = 200, description = "Stored durably: EnqueueOut for one message, EnqueueBatchOut for a batch", body = sluice_wire::EnqueueAnswerOut),
        (status = 400, body = sluice_wire::ErrorBody), (status = 404, body = sluice_wire::ErrorBody),
        (status = 413, body = sluice_wire::ErrorBody),
        (status = 422, description = "invalid_field, or schema_violation with every violation in details.violations", body = sluice_wire::ErrorBody),
        (status = 503, description = "queue_full (with Retry-After) or unavailable", body = sluice_wire::ErrorBody)))]
pub async fn enqueue(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut enqueue = app.ops.enqueue_to(queue.clone()).await?;
    let (inputs, is_batch) = parse_enqueue(&body)?;
    for (position, input) in inputs.into_iter().enumerate() {
        let prefix = if is_batch {
            format!("messages[{position}].")
        } else {
            String::new()
        };
        enqueue.add(message_request(input, &prefix)?, &prefix)?;
    }
    // The trace goes on with each message: to its push deliveries and its consumers.
    let span = crate::telemetry::enqueue_span(&queue, enqueue.len());
    if let Some(traceparent) = crate::telemetry::traceparent(&span) {
        for payload in enqueue.payloads_mut() {
            crate::telemetry::carry(payload, &traceparent);
        }
    }
    let results: Vec<_> = (app.ops.enqueue(enqueue).instrument(span).await?)
        .into_iter()
        .map(crate::views::enqueue_out)
        .collect();
    Ok(if is_batch {
        Json(EnqueueBatchOut { results }).into_response()
    } else {
        Json(results.into_iter().next()).into_response()
    })
}

/// `POST /v1/queues/{queue}/cancel`: cancel a message that is not being processed.
#[utoipa::path(post, operation_id = "message_cancel", path = "/v1/queues/{queue}/cancel", params(("queue" = String, Path)), request_body = CancelIn,
    responses((status = 200, description = "outcome: cancelled, not_found, already_processing or already_completed", body = CancelOut),
        (status = 404, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn cancel(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    super::ApiJson(input): super::ApiJson<CancelIn>,
) -> Result<Json<CancelOut>, ApiError> {
    let outcome = app
        .ops
        .cancel(CancelRequest {
            queue,
            message_id: input.message_id,
            id: input.id,
            reason: input.reason,
        })
        .await?;
    Ok(Json(cancel_out(outcome)))
}

/// Parses one message or a batch (`{"messages": [...]}`). The body is counted first
/// ([`json_shape::enqueue`]), so a batch over the message cap, or a message with too many
/// headers, is refused before anything is built for it.
fn parse_enqueue(body: &[u8]) -> Result<(Vec<MessageIn>, bool), ApiError> {
    let shape = json_shape::enqueue(body, limits::HEADERS_MAX)?;
    check_shape(shape)?;
    if shape.batch_len.is_some() {
        let batch: MessageBatchIn = parse_json(body)?;
        return Ok((batch.messages, true));
    }
    Ok((vec![parse_json(body)?], false))
}

/// Parses one message (a topic's publish), its headers counted first as an enqueue's are.
pub(crate) fn parse_one(body: &[u8]) -> Result<MessageIn, ApiError> {
    check_shape(json_shape::enqueue(body, limits::HEADERS_MAX)?)?;
    parse_json(body)
}

/// An enqueue body's counted shape within the batch and header caps.
fn check_shape(shape: json_shape::EnqueueShape) -> Result<(), ApiError> {
    if let Some(count) = shape.batch_len {
        sluice_ops::check_batch_len(count)?;
    }
    if let Some((position, count)) = shape.too_many_headers {
        let prefix = match shape.batch_len {
            Some(_) => format!("messages[{position}]."),
            None => String::new(),
        };
        return Err(too_many_headers(&prefix, count));
    }
    Ok(())
}

/// The refusal of a message with `count` headers, its field named with `prefix`.
pub(crate) fn too_many_headers(prefix: &str, count: usize) -> ApiError {
    ApiError::invalid_field(format!(
        "{prefix}headers: {count} headers; at most {} headers and {} bytes in all",
        limits::HEADERS_MAX,
        limits::HEADER_BYTES_MAX
    ))
}

/// One message's body as the API takes it (JSON as `body`, bytes as `body_base64`), decoded;
/// the rest of the message is checked by [`sluice_ops::Enqueue::add`].
pub(crate) fn message_request(input: MessageIn, prefix: &str) -> Result<MessageRequest, ApiError> {
    let json = input.body.map(|raw| raw.get().as_bytes().to_vec());
    let body = MessageRequest::decode_body(json, input.body_base64.as_deref(), prefix)?;
    Ok(MessageRequest {
        body,
        id: input.id,
        key: input.key,
        headers: input.headers,
        priority: input.priority,
        delay_ms: input.delay_ms,
        not_before: input.not_before,
    })
}

/// `GET /v1/queues/{queue}/messages/{message_id}`
#[utoipa::path(get, operation_id = "message_get", path = "/v1/queues/{queue}/messages/{message_id}", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = MessageStatusOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn get_by_id(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<MessageStatusOut>, ApiError> {
    let status = app.ops.message_by_id(queue, &message_id).await?;
    Ok(Json(status_out(status)))
}

/// The `?id=` query.
#[derive(Debug, Deserialize)]
pub struct IdempotencyQuery {
    /// The idempotency key.
    pub id: Option<String>,
}

/// `GET /v1/queues/{queue}/messages?id={idempotency key}`
#[utoipa::path(get, operation_id = "message_get_by_idempotency_key", path = "/v1/queues/{queue}/messages", params(("queue" = String, Path), ("id" = String, Query, description = "Idempotency key")),
    responses((status = 200, body = MessageStatusOut), (status = 404, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn get_by_idempotency_key(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(query): ApiQuery<IdempotencyQuery>,
) -> Result<Json<MessageStatusOut>, ApiError> {
    let status = app.ops.message_by_key(queue, query.id).await?;
    Ok(Json(status_out(status)))
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
