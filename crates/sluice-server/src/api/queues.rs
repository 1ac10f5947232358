//! Queue routes: list, create or update, get, delete, stats.

use axum::Json;
use axum::extract::State;
use sluice_ops::{Drained, Purged, QueuePutRequest};
use sluice_wire::{
    DeadLettersOnDelete, DrainIn, DrainOut, PurgeOut, QueueDeleteOut, QueueListOut, QueueOut,
    QueuePutOut, QueueSpec, QueueStatsOut,
};

use super::{ApiJson, ApiPath, ApiQuery, AppState};
use crate::error::{ApiError, ErrorCode};
use crate::views::{queue_out, redacted_for, stats_out};

/// `GET /v1/queues`
#[utoipa::path(get, operation_id = "queue_list", path = "/v1/queues", responses((status = 200, body = QueueListOut)))]
pub async fn list(
    State(app): State<AppState>,
    caller: Option<axum::Extension<std::sync::Arc<crate::auth::Caller>>>,
) -> Result<Json<QueueListOut>, ApiError> {
    // With access control on, a token sees only the queues it may read.
    let who = crate::auth::ops_caller(caller.as_deref().map(|caller| &**caller));
    let queues = app.ops.queue_list(who).await?;
    Ok(Json(QueueListOut {
        queues: queues
            .iter()
            .map(|info| redacted_for(caller.as_deref(), queue_out(&app, info)))
            .collect(),
    }))
}

/// `PUT /v1/queues/{queue}`: create, or update the fields given.
#[utoipa::path(put, operation_id = "queue_put", path = "/v1/queues/{queue}", request_body = QueueSpec,
    params(("queue" = String, Path, description = "Queue name: [A-Za-z0-9_.-], at most 80 characters")),
    responses((status = 200, body = QueuePutOut), (status = 400, body = sluice_wire::ErrorBody), (status = 409, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn put(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<QueueSpec>,
) -> Result<Json<QueuePutOut>, ApiError> {
    crate::auth::check_tenant_put(
        &app,
        caller.as_deref().map(|caller| &**caller),
        &name,
        &spec,
    )
    .await?;
    let put = app
        .ops
        .queue_put(QueuePutRequest { name, spec }, |push| {
            crate::push::validate(push)
        })
        .await?;
    app.push.refresh();
    Ok(Json(QueuePutOut {
        created: put.created,
        queue: redacted_for(caller.as_deref(), queue_out(&app, &put.queue)),
    }))
}

/// `GET /v1/queues/{queue}`
#[utoipa::path(get, operation_id = "queue_get", path = "/v1/queues/{queue}", params(("queue" = String, Path)),
    responses((status = 200, body = QueueOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
    caller: Option<axum::Extension<std::sync::Arc<crate::auth::Caller>>>,
) -> Result<Json<QueueOut>, ApiError> {
    let info = app.ops.queue_get(&name).await?;
    Ok(Json(redacted_for(
        caller.as_deref(),
        queue_out(&app, &info),
    )))
}

/// Query of `DELETE /v1/queues/{queue}`.
#[derive(Debug, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// `delete` (default): its dead-letter queue and dead letters go too, unless another queue
    /// dead-letters into it; `keep`: they stay.
    #[param(inline)]
    pub dead_letters: Option<DeadLettersOnDelete>,
}

/// `DELETE /v1/queues/{queue}`: the queue and its messages, and its dead-letter queue unless
/// `?dead_letters=keep` (one rule, `Ops::queue_delete`).
#[utoipa::path(delete, operation_id = "queue_delete", path = "/v1/queues/{queue}", params(("queue" = String, Path), DeleteQuery),
    responses((status = 200, body = QueueDeleteOut), (status = 400, body = sluice_wire::ErrorBody), (status = 404, body = sluice_wire::ErrorBody), (status = 409, body = sluice_wire::ErrorBody)))]
pub async fn delete(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(name): ApiPath<String>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> Result<Json<QueueDeleteOut>, ApiError> {
    let on_delete = match query.dead_letters.unwrap_or_default() {
        DeadLettersOnDelete::Delete => sluice_ops::OnDelete::DeleteDeadLetters,
        DeadLettersOnDelete::Keep => sluice_ops::OnDelete::KeepDeadLetters,
    };
    let caller = caller.as_deref().map(|caller| &**caller);
    let deleted = app.delete_queue(caller, &name, on_delete).await?;
    Ok(Json(QueueDeleteOut {
        deleted: true,
        messages_removed: deleted.messages_removed,
        dead_letter_queue: deleted.dead_letter_queue,
        dead_letters_removed: deleted.dead_letters_removed,
    }))
}

/// `GET /v1/queues/{queue}/stats`
#[utoipa::path(get, operation_id = "queue_stats", path = "/v1/queues/{queue}/stats", params(("queue" = String, Path)),
    responses((status = 200, body = QueueStatsOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn stats(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueStatsOut>, ApiError> {
    let info = app.ops.queue_get(&name).await?;
    Ok(Json(stats_out(&app, &info)))
}

/// `POST /v1/queues/{queue}/pause`: deliveries stop; enqueues are still stored.
#[utoipa::path(post, operation_id = "queue_pause", path = "/v1/queues/{queue}/pause", params(("queue" = String, Path)),
    responses((status = 200, body = QueueOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn pause(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueOut>, ApiError> {
    set_paused(&app, &name, true).await
}

/// `POST /v1/queues/{queue}/resume`
#[utoipa::path(post, operation_id = "queue_resume", path = "/v1/queues/{queue}/resume", params(("queue" = String, Path)),
    responses((status = 200, body = QueueOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn resume(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueOut>, ApiError> {
    set_paused(&app, &name, false).await
}

async fn set_paused(app: &AppState, name: &str, paused: bool) -> Result<Json<QueueOut>, ApiError> {
    let info = app.ops.queue_set_paused(name, paused).await?;
    Ok(Json(queue_out(app, &info)))
}

/// `POST /v1/queues/{queue}/push/pause`: the server stops delivering this queue to its push
/// destination (requests under way finish); messages wait in the queue. Kept across restarts.
#[utoipa::path(post, path = "/v1/queues/{queue}/push/pause", params(("queue" = String, Path)),
    responses((status = 200, body = QueueOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "no_push_destination", body = sluice_wire::ErrorBody)))]
pub async fn push_pause(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueOut>, ApiError> {
    set_push_paused(&app, &name, true).await
}

/// `POST /v1/queues/{queue}/push/resume`
#[utoipa::path(post, path = "/v1/queues/{queue}/push/resume", params(("queue" = String, Path)),
    responses((status = 200, body = QueueOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 409, description = "no_push_destination", body = sluice_wire::ErrorBody)))]
pub async fn push_resume(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueOut>, ApiError> {
    set_push_paused(&app, &name, false).await
}

async fn set_push_paused(
    app: &AppState,
    name: &str,
    paused: bool,
) -> Result<Json<QueueOut>, ApiError> {
    let info = app.ops.queue_get(name).await?;
    if info.config.push.is_none() {
        return Err(ApiError::new(
            ErrorCode::NoPushDestination,
            format!("the queue {name:?} has no push destination"),
        ));
    }
    app.push.set_paused(name, paused).await?;
    let info = app.ops.queue_get(name).await?;
    Ok(Json(queue_out(app, &info)))
}

/// `POST /v1/queues/{queue}/purge`: removes every message that is not in flight.
#[utoipa::path(post, operation_id = "queue_purge", path = "/v1/queues/{queue}/purge", params(("queue" = String, Path)),
    responses((status = 200, body = PurgeOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn purge(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<PurgeOut>, ApiError> {
    let Purged { purged, in_flight } = app
        .ops
        .queue_purge(&name, sluice_core::store::PurgeScope::Waiting)
        .await?;
    Ok(Json(PurgeOut { purged, in_flight }))
}

/// `POST /v1/queues/{queue}/drain`: waits until the queue is empty, or the timeout.
#[utoipa::path(post, operation_id = "queue_drain", path = "/v1/queues/{queue}/drain", params(("queue" = String, Path)), request_body = DrainIn,
    responses((status = 200, body = DrainOut), (status = 404, body = sluice_wire::ErrorBody), (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn drain(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
    body: axum::body::Bytes,
) -> Result<Json<DrainOut>, ApiError> {
    let input: DrainIn = if body.iter().all(u8::is_ascii_whitespace) {
        DrainIn::default()
    } else {
        super::parse_json(&body)?
    };
    let Drained {
        drained,
        waited,
        depth,
    } = app.ops.queue_drain(&name, input.timeout_ms).await?;
    Ok(Json(DrainOut {
        drained,
        waited_ms: waited.as_millis() as u64,
        ready: depth.ready,
        delayed: depth.delayed,
        in_flight: depth.in_flight,
    }))
}

/// The queue routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("queues")
        .documented(Need::AnyToken, routes!(list))
        .documented(Need::Read, routes!(get_one))
        .documented(Need::Admin, routes!(put))
        .documented(Need::Admin, routes!(delete))
        .documented(Need::Read, routes!(stats))
        .documented(Need::Admin, routes!(pause))
        .documented(Need::Admin, routes!(resume))
        .documented(Need::Admin, routes!(push_pause))
        .documented(Need::Admin, routes!(push_resume))
        .documented(Need::Admin, routes!(purge))
        .documented(Need::Read, routes!(drain))
}
