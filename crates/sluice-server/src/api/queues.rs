//! Queue routes: list, create or update, get, delete, stats.

use axum::Json;
use axum::extract::State;
use sluice_core::queue::{QueueConfig, validate_queue_name};
use sluice_core::store::{QueueInfo, QueuePutParams};
use sluice_core::wire::{
    CountersOut, QueueConfigOut, QueueDeleteOut, QueueListOut, QueueOut, QueuePutOut, QueueSpec,
    QueueStatsOut,
};

use super::{ApiJson, ApiPath, AppState};
use crate::error::ApiError;

/// The wire form of a queue.
pub fn queue_out(info: &QueueInfo) -> QueueOut {
    QueueOut {
        name: info.name.clone(),
        config: QueueConfigOut::from(&info.config),
        stats: stats_out(info),
    }
}

fn stats_out(info: &QueueInfo) -> QueueStatsOut {
    let depth = &info.depth;
    let counters = depth.counters;
    QueueStatsOut {
        ready: depth.ready,
        delayed: depth.delayed,
        in_flight: depth.in_flight,
        dead_lettered: info.dead_letter_depth,
        oldest_ready_age_ms: depth.oldest_ready_age_ms,
        counters: CountersOut {
            enqueued: counters.enqueued,
            delivered: counters.delivered,
            acked: counters.acked,
            nacked: counters.nacked,
            dead_lettered: counters.dead_lettered,
            lease_expired: counters.lease_expired,
        },
    }
}

/// `GET /v1/queues`
#[utoipa::path(get, path = "/v1/queues", responses((status = 200, body = QueueListOut)))]
pub async fn list(State(app): State<AppState>) -> Result<Json<QueueListOut>, ApiError> {
    let queues = app.store.queue_list(app.now_ms()).await?;
    Ok(Json(QueueListOut {
        queues: queues.iter().map(queue_out).collect(),
    }))
}

/// `PUT /v1/queues/{queue}`: create, or update the fields given.
#[utoipa::path(put, path = "/v1/queues/{queue}", request_body = QueueSpec,
    params(("queue" = String, Path, description = "Queue name: [A-Za-z0-9_.-], at most 80 characters")),
    responses((status = 200, body = QueuePutOut), (status = 400, body = sluice_core::wire::ErrorBody), (status = 409, body = sluice_core::wire::ErrorBody), (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn put(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<QueueSpec>,
) -> Result<Json<QueuePutOut>, ApiError> {
    validate_queue_name(&name).map_err(ApiError::invalid_field)?;
    let now_ms = app.now_ms();
    let base = match app.store.queue_get(&name, now_ms).await {
        Ok(info) => info.config,
        Err(sluice_core::StoreError::QueueNotFound(_)) => QueueConfig::defaults_for(&name),
        Err(error) => return Err(error.into()),
    };
    let config = spec.apply_to(base).map_err(ApiError::invalid_field)?;
    if config.dead_letter_queue.as_deref() == Some(name.as_str()) {
        return Err(ApiError::invalid_field(
            "dead_letter_queue: a queue cannot be its own dead-letter queue",
        ));
    }
    let put = app
        .store
        .queue_put(QueuePutParams {
            name: name.clone(),
            config,
            now_ms,
        })
        .await?;
    let info = app.store.queue_get(&name, now_ms).await?;
    Ok(Json(QueuePutOut {
        created: put.created,
        queue: queue_out(&info),
    }))
}

/// `GET /v1/queues/{queue}`
#[utoipa::path(get, path = "/v1/queues/{queue}", params(("queue" = String, Path)),
    responses((status = 200, body = QueueOut), (status = 404, body = sluice_core::wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueOut>, ApiError> {
    let info = app.store.queue_get(&name, app.now_ms()).await?;
    Ok(Json(queue_out(&info)))
}

/// `DELETE /v1/queues/{queue}`: the queue and its messages; its dead-letter queue stays.
#[utoipa::path(delete, path = "/v1/queues/{queue}", params(("queue" = String, Path)),
    responses((status = 200, body = QueueDeleteOut), (status = 404, body = sluice_core::wire::ErrorBody), (status = 409, body = sluice_core::wire::ErrorBody)))]
pub async fn delete(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueDeleteOut>, ApiError> {
    let messages_removed = app.store.queue_delete(&name).await?;
    Ok(Json(QueueDeleteOut {
        deleted: true,
        messages_removed,
    }))
}

/// `GET /v1/queues/{queue}/stats`
#[utoipa::path(get, path = "/v1/queues/{queue}/stats", params(("queue" = String, Path)),
    responses((status = 200, body = QueueStatsOut), (status = 404, body = sluice_core::wire::ErrorBody)))]
pub async fn stats(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<QueueStatsOut>, ApiError> {
    let info = app.store.queue_get(&name, app.now_ms()).await?;
    Ok(Json(stats_out(&info)))
}
