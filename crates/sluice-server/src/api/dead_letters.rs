//! Dead-letter routes of a source queue: list, show, replay, delete, purge.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use sluice_core::Millis;
use sluice_core::clock::parse_rfc3339;
use sluice_core::dispatch::{DeadLetterFilter, Seq};
use sluice_core::store::{DeadLetter, DeadLetterQuery, DeadLetterSelection, ReplayParams};
use sluice_core::wire::{
    DeadLetterDeleteOut, DeadLetterEntryOut, DeadLetterListOut, ReplayIn, ReplayOneIn, ReplayOut,
    ReplayedOut, time_out,
};
use uuid::Uuid;

use super::{ApiBytes, ApiPath, ApiQuery, AppState, parse_json};
use crate::error::ApiError;

/// Default page size of a listing.
const LIST_LIMIT_DEFAULT: usize = 50;
/// Largest page of a listing.
const LIST_LIMIT_MAX: usize = 1000;
/// Default and largest number of entries one replay call takes.
const REPLAY_LIMIT_DEFAULT: usize = 1000;
const REPLAY_LIMIT_MAX: usize = 10_000;

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

fn parse_time(field: &str, text: Option<&str>) -> Result<Option<Millis>, ApiError> {
    text.map(|text| {
        parse_rfc3339(text).ok_or_else(|| {
            ApiError::invalid_field(format!("{field}: {text:?} is not an RFC 3339 time"))
        })
    })
    .transpose()
}

fn filter(
    queue: &str,
    error: Option<String>,
    since: Option<&str>,
    until: Option<&str>,
) -> Result<DeadLetterFilter, ApiError> {
    Ok(DeadLetterFilter {
        source_queue: queue.to_owned(),
        error_contains: error.filter(|e| !e.is_empty()),
        since_ms: parse_time("since", since)?,
        until_ms: parse_time("until", until)?,
    })
}

/// A cursor is the position of the next entry: `<dead-letter time ms>.<seq>`.
fn parse_cursor(text: &str) -> Result<(Millis, Seq), ApiError> {
    let invalid = || {
        ApiError::invalid_field(format!(
            "cursor: {text:?} is not a cursor from a previous page"
        ))
    };
    let (at, seq) = text.split_once('.').ok_or_else(invalid)?;
    Ok((
        at.parse().map_err(|_| invalid())?,
        seq.parse().map_err(|_| invalid())?,
    ))
}

fn parse_id(text: &str) -> Result<Uuid, ApiError> {
    Uuid::try_parse(text)
        .map_err(|_| ApiError::message_not_found(format!("{text:?} is not a message id")))
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
        enqueued_at: time_out(status.enqueued_at_ms),
        first_seen_at: time_out(info.first_seen_at_ms),
        last_seen_at: time_out(info.last_seen_at_ms),
        id: status.idempotency_key,
        key: status.key,
        priority: status.priority,
        body_bytes,
        body,
        body_base64,
        headers,
        replayed_at: status.finished_at_ms.filter(|_| replayed).map(time_out),
        replayed_as: status.replayed_as,
    }
}

/// `GET /v1/queues/{queue}/dlq`: dead letters from this queue, newest first.
#[utoipa::path(get, operation_id = "dead_letter_list", path = "/v1/queues/{queue}/dlq", params(("queue" = String, Path), ListQuery),
    responses((status = 200, body = DeadLetterListOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_core::wire::ErrorBody),
        (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn list(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<DeadLetterListOut>, ApiError> {
    let limit = query.limit.unwrap_or(LIST_LIMIT_DEFAULT);
    if !(1..=LIST_LIMIT_MAX).contains(&limit) {
        return Err(ApiError::invalid_field(format!(
            "limit must be between 1 and {LIST_LIMIT_MAX}, got {limit}"
        )));
    }
    let before = query.cursor.as_deref().map(parse_cursor).transpose()?;
    let filter = filter(
        &queue,
        query.error,
        query.since.as_deref(),
        query.until.as_deref(),
    )?;
    let page = app
        .store
        .dead_letter_list(DeadLetterQuery {
            queue,
            filter,
            before,
            limit,
        })
        .await?;
    Ok(Json(DeadLetterListOut {
        dead_letter_queue: page.dead_letter_queue,
        entries: page.entries.into_iter().map(entry_out).collect(),
        next_cursor: page.next.map(|(at, seq)| format!("{at}.{seq}")),
    }))
}

/// `GET /v1/queues/{queue}/dlq/{message_id}`: one dead letter with its body and headers.
#[utoipa::path(get, operation_id = "dead_letter_get", path = "/v1/queues/{queue}/dlq/{message_id}", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = DeadLetterEntryOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_core::wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<DeadLetterEntryOut>, ApiError> {
    let id = parse_id(&message_id)?;
    let entry = app
        .store
        .dead_letter_get(&queue, id)
        .await?
        .ok_or_else(|| {
            ApiError::message_not_found(format!("no dead letter {message_id} from queue {queue:?}"))
        })?;
    Ok(Json(entry_out(entry)))
}

/// `DELETE /v1/queues/{queue}/dlq/{message_id}`
#[utoipa::path(delete, operation_id = "dead_letter_delete", path = "/v1/queues/{queue}/dlq/{message_id}", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = DeadLetterDeleteOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_core::wire::ErrorBody)))]
pub async fn delete_one(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<DeadLetterDeleteOut>, ApiError> {
    let id = parse_id(&message_id)?;
    let deleted = app
        .store
        .dead_letter_delete(&queue, DeadLetterSelection::Ids(vec![id]), app.now_ms())
        .await?;
    if deleted == 0 {
        return Err(ApiError::message_not_found(format!(
            "no dead letter {message_id} from queue {queue:?} (or it is in flight)"
        )));
    }
    Ok(Json(DeadLetterDeleteOut { deleted }))
}

/// `DELETE /v1/queues/{queue}/dlq`: purges every dead letter from this queue.
#[utoipa::path(delete, operation_id = "dead_letter_purge", path = "/v1/queues/{queue}/dlq", params(("queue" = String, Path)),
    responses((status = 200, body = DeadLetterDeleteOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_core::wire::ErrorBody)))]
pub async fn purge(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
) -> Result<Json<DeadLetterDeleteOut>, ApiError> {
    let everything = DeadLetterSelection::Matching(DeadLetterFilter {
        source_queue: queue.clone(),
        ..DeadLetterFilter::default()
    });
    let deleted = app
        .store
        .dead_letter_delete(&queue, everything, app.now_ms())
        .await?;
    Ok(Json(DeadLetterDeleteOut { deleted }))
}

/// `POST /v1/queues/{queue}/dlq/replay`: replay dead letters by id or by filter.
#[utoipa::path(post, operation_id = "dead_letter_replay", path = "/v1/queues/{queue}/dlq/replay", params(("queue" = String, Path)), request_body = ReplayIn,
    responses((status = 200, body = ReplayOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn replay(
    State(app): State<AppState>,
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
    let limit = input.limit.unwrap_or(REPLAY_LIMIT_DEFAULT);
    if !(1..=REPLAY_LIMIT_MAX).contains(&limit) {
        return Err(ApiError::invalid_field(format!(
            "limit must be between 1 and {REPLAY_LIMIT_MAX}, got {limit}"
        )));
    }
    let selection = match input.ids {
        Some(ids) => {
            if input.error.is_some() || input.since.is_some() || input.until.is_some() {
                return Err(ApiError::invalid_field(
                    "ids: give ids or filters (error, since, until), not both",
                ));
            }
            if ids.is_empty() || ids.len() > limit {
                return Err(ApiError::invalid_field(format!(
                    "ids: give 1 to {limit} ids"
                )));
            }
            let ids = ids
                .iter()
                .map(|id| {
                    Uuid::try_parse(id).map_err(|_| {
                        ApiError::invalid_field(format!("ids: {id:?} is not a message id"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            DeadLetterSelection::Ids(ids)
        }
        None => DeadLetterSelection::Matching(filter(
            &queue,
            input.error,
            input.since.as_deref(),
            input.until.as_deref(),
        )?),
    };
    run_replay(
        &app,
        queue,
        selection,
        limit,
        input.dry_run.unwrap_or(false),
        input.target_queue,
    )
    .await
}

/// `POST /v1/queues/{queue}/dlq/{message_id}/replay`
#[utoipa::path(post, operation_id = "dead_letter_replay_one", path = "/v1/queues/{queue}/dlq/{message_id}/replay", params(("queue" = String, Path), ("message_id" = String, Path)), request_body = ReplayOneIn,
    responses((status = 200, body = ReplayOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 409, description = "the queue has no dead-letter queue", body = sluice_core::wire::ErrorBody)))]
pub async fn replay_one(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
    body: Bytes,
) -> Result<Json<ReplayOut>, ApiError> {
    let input: ReplayOneIn = if body.iter().all(u8::is_ascii_whitespace) {
        ReplayOneIn::default()
    } else {
        parse_json(&body)?
    };
    let id = parse_id(&message_id)?;
    let out = run_replay(
        &app,
        queue.clone(),
        DeadLetterSelection::Ids(vec![id]),
        1,
        false,
        input.target_queue,
    )
    .await?;
    if out.replayed == 0 {
        return Err(ApiError::message_not_found(format!(
            "no dead letter {message_id} from queue {queue:?} to replay (replayed already, deleted, or in flight)"
        )));
    }
    Ok(out)
}

async fn run_replay(
    app: &AppState,
    queue: String,
    selection: DeadLetterSelection,
    limit: usize,
    dry_run: bool,
    target_queue: Option<String>,
) -> Result<Json<ReplayOut>, ApiError> {
    let target = target_queue.clone().unwrap_or_else(|| queue.clone());
    let replay = app
        .store
        .dead_letter_replay(ReplayParams {
            queue,
            selection,
            limit,
            dry_run,
            target_queue,
            now_ms: app.now_ms(),
        })
        .await?;
    Ok(Json(ReplayOut {
        dry_run,
        matched: replay.matched,
        replayed: replay.replayed.len() as u64,
        more: replay.more,
        target_queue: target,
        results: replay
            .replayed
            .into_iter()
            .map(|(dead_letter_id, message_id)| ReplayedOut {
                dead_letter_id,
                message_id,
            })
            .collect(),
    }))
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
