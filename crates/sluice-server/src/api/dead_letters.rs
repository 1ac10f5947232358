//! Dead-letter routes of a source queue: list, show, replay, delete, purge. The rules are
//! [`sluice_ops::Ops`]'s; these parse and render.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use sluice_core::store::DeadLetter;
use sluice_ops::{DeadLetterListRequest, DeadLetterMatch, REPLAY_LIMIT_MAX, ReplayRequest};
use sluice_wire::{
    DeadLetterDeleteOut, DeadLetterEntryOut, DeadLetterListOut, ReplayIn, ReplayOneIn, ReplayOut,
    format_rfc3339,
};

use super::{ApiBytes, ApiPath, ApiQuery, AppState, parse_json};
use crate::error::ApiError;

/// Query of `GET /v1/queues/{queue}/dlq`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// 1..=1000 (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Case-insensitive substring of the last error.
    pub error: Option<String>,
    /// RFC 3339: dead-lettered at or after.
    pub since: Option<String>,
    /// RFC 3339: dead-lettered before.
    pub until: Option<String>,
}

fn entry_out(dead_letter: DeadLetter) -> DeadLetterEntryOut {
    let DeadLetter {
        status,
        payload,
        body_bytes,
    } = dead_letter;
    let info = status
        .dead_letter
        .clone()
        .unwrap_or_else(|| sluice_core::message::DeadLetterInfo {
            source_queue: String::new(),
            last_error: status.last_error.clone(),
            attempts: status.attempts,
            first_seen_at_ms: status.enqueued_at_ms,
            last_seen_at_ms: status.enqueued_at_ms,
        });
    let (mut body, mut body_base64, mut headers) = (None, None, None);
    if let Some(payload) = payload {
        (body, body_base64) = super::body_out(&payload);
        headers = Some(payload.headers);
    }
    let replayed = status.state == sluice_core::message::MessageState::Replayed;
    DeadLetterEntryOut {
        message_id: status.message_id,
        queue: status.queue,
        source_queue: info.source_queue,
        state: status.state.as_str().to_owned(),
        last_error: info.last_error,
        attempts: info.attempts,
        enqueued_at: format_rfc3339(status.enqueued_at_ms),
        first_seen_at: format_rfc3339(info.first_seen_at_ms),
        last_seen_at: format_rfc3339(info.last_seen_at_ms),
        id: status.idempotency_key,
        key: status.key,
        priority: status.priority,
        body_bytes,
        body,
        body_base64,
        headers,
        replayed_at: status
            .finished_at_ms
            .filter(|_| replayed)
            .map(format_rfc3339),
        replayed_as: status.replayed_as,
    }
}

/// `GET /v1/queues/{queue}/dlq`: dead letters from this queue, newest first.
#[utoipa::path(get, operation_id = "dead_letter_list", path = "/v1/queues/{queue}/dlq", params(("queue" = String, Path), ListQuery),
    responses((status = 200, body = DeadLetterListOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_wire::ErrorBody),
        (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn list(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<DeadLetterListOut>, ApiError> {
    let page = app
        .ops
        .dead_letter_list(DeadLetterListRequest {
            queue,
            limit: query.limit,
            cursor: query.cursor,
            matching: DeadLetterMatch {
                error: query.error,
                since: query.since,
                until: query.until,
            },
        })
        .await?;
    Ok(Json(DeadLetterListOut {
        dead_letter_queue: page.dead_letter_queue,
        entries: page.entries.into_iter().map(entry_out).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `GET /v1/queues/{queue}/dlq/{message_id}`: one dead letter with its body and headers.
#[utoipa::path(get, operation_id = "dead_letter_get", path = "/v1/queues/{queue}/dlq/{message_id}", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = DeadLetterEntryOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<DeadLetterEntryOut>, ApiError> {
    let entry = app.ops.dead_letter_get(&queue, &message_id).await?;
    Ok(Json(entry_out(entry)))
}

/// `DELETE /v1/queues/{queue}/dlq/{message_id}`
#[utoipa::path(delete, operation_id = "dead_letter_delete", path = "/v1/queues/{queue}/dlq/{message_id}", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = DeadLetterDeleteOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_wire::ErrorBody)))]
pub async fn delete_one(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<DeadLetterDeleteOut>, ApiError> {
    let deleted = app.ops.dead_letter_delete(&queue, &message_id).await?;
    Ok(Json(DeadLetterDeleteOut { deleted }))
}

/// `DELETE /v1/queues/{queue}/dlq`: purges every dead letter from this queue.
#[utoipa::path(delete, operation_id = "dead_letter_purge", path = "/v1/queues/{queue}/dlq", params(("queue" = String, Path)),
    responses((status = 200, body = DeadLetterDeleteOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_wire::ErrorBody)))]
pub async fn purge(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Json<DeadLetterDeleteOut>, ApiError> {
    let deleted = app.ops.dead_letter_purge(&queue).await?;
    Ok(Json(DeadLetterDeleteOut { deleted }))
}

/// `POST /v1/queues/{queue}/dlq/replay`: replay dead letters by id or by filter.
#[utoipa::path(post, operation_id = "dead_letter_replay", path = "/v1/queues/{queue}/dlq/replay", params(("queue" = String, Path)), request_body = ReplayIn,
    responses((status = 200, body = ReplayOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn replay(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(queue): ApiPath<String>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<ReplayOut>, ApiError> {
    // Counted before parsing: an id costs several times its text once parsed.
    if let Some(count) = super::json_shape::array_len(&body, "ids")?
        && count > REPLAY_LIMIT_MAX
    {
        return Err(ApiError::invalid_field(format!(
            "ids: {count} ids; give 1 to {REPLAY_LIMIT_MAX} ids"
        )));
    }
    let input: ReplayIn = parse_json(&body)?;
    // A tenant admin replays within its tenant.
    if let Some(target) = &input.target_queue {
        crate::auth::check_manages(&caller, "target_queue", target)?;
    }
    let out = app
        .ops
        .dead_letter_replay(ReplayRequest {
            queue,
            ids: input.ids,
            matching: DeadLetterMatch {
                error: input.error,
                since: input.since,
                until: input.until,
            },
            limit: input.limit,
            dry_run: input.dry_run.unwrap_or(false),
            target_queue: input.target_queue,
        })
        .await?;
    Ok(Json(crate::views::replay_out(out)))
}

/// `POST /v1/queues/{queue}/dlq/{message_id}/replay`
#[utoipa::path(post, operation_id = "dead_letter_replay_one", path = "/v1/queues/{queue}/dlq/{message_id}/replay", params(("queue" = String, Path), ("message_id" = String, Path)), request_body = ReplayOneIn,
    responses((status = 200, body = ReplayOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_wire::ErrorBody)))]
pub async fn replay_one(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
    body: Bytes,
) -> Result<Json<ReplayOut>, ApiError> {
    let input: ReplayOneIn = if body.iter().all(u8::is_ascii_whitespace) {
        ReplayOneIn::default()
    } else {
        parse_json(&body)?
    };
    if let Some(target) = &input.target_queue {
        crate::auth::check_manages(&caller, "target_queue", target)?;
    }
    let out = app
        .ops
        .dead_letter_replay_one(queue, &message_id, input.target_queue)
        .await?;
    Ok(Json(crate::views::replay_out(out)))
}

/// The dead-letter routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("dead_letters")
        .documented(Need::Read, routes!(list))
        .documented(Need::Admin, routes!(purge))
        .documented(Need::Admin, routes!(replay))
        .documented(Need::Read, routes!(get_one))
        .documented(Need::Admin, routes!(delete_one))
        .documented(Need::Admin, routes!(replay_one))
}
