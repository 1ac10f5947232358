//! History routes: the last minutes of every queue (and webhook endpoint) as the server sampled
//! them (`crate::history`), for charts that show the past as soon as they open.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use sluice_core::Millis;
use utoipa::ToSchema;

use super::{ApiPath, ApiQuery, AppState};
use crate::error::ApiError;
use crate::history::{QueuePointOut, WebhookPointOut};

/// Query of the history routes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct HistoryParams {
    /// Only points taken after this time, ms since the Unix epoch (the `at_ms` of the last point
    /// a client has): how a chart appends what is new.
    pub since_ms: Option<Millis>,
}

/// Answer to `GET /v1/history`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryOut {
    /// Time between samples, ms.
    pub interval_ms: u64,
    /// How far back points are kept, ms.
    pub window_ms: u64,
    /// The server's clock now, ms since the Unix epoch (a client lines its clock up with it).
    pub now_ms: Millis,
    /// Every queue the caller may read that has a history, by name.
    pub queues: Vec<QueueHistoryOut>,
    /// Every webhook endpoint with a history, by name (admin tokens only: empty for others).
    pub webhooks: Vec<WebhookHistoryOut>,
}

/// One queue's points, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueHistoryOut {
    /// The queue.
    pub name: String,
    /// Its samples, oldest first.
    pub points: Vec<QueuePointOut>,
}

/// One webhook endpoint's points, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookHistoryOut {
    /// The endpoint.
    pub name: String,
    /// Its samples, oldest first.
    pub points: Vec<WebhookPointOut>,
}

/// Answer to `GET /v1/queues/{queue}/history`.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueHistoryOnlyOut {
    /// The queue.
    pub queue: String,
    /// Time between samples, ms.
    pub interval_ms: u64,
    /// How far back points are kept, ms.
    pub window_ms: u64,
    /// The server's clock now, ms since the Unix epoch.
    pub now_ms: Millis,
    /// Its samples, oldest first (empty before the first sample, or past `[dashboard]
    /// history_queues_max`).
    pub points: Vec<QueuePointOut>,
}

fn millis(duration: std::time::Duration) -> u64 {
    duration.as_millis() as u64
}

/// `GET /v1/history`: every readable queue's and (for admins) every webhook endpoint's samples.
#[utoipa::path(get, operation_id = "history_list", path = "/v1/history", params(HistoryParams),
    responses((status = 200, body = HistoryOut), (status = 400, body = sluice_wire::ErrorBody)))]
pub async fn list(
    State(app): State<AppState>,
    ApiQuery(params): ApiQuery<HistoryParams>,
    caller: Option<axum::Extension<std::sync::Arc<crate::auth::Caller>>>,
) -> Result<Json<HistoryOut>, ApiError> {
    let since_ms = params.since_ms.unwrap_or(Millis::MIN);
    let config = app.history.config();
    // With access control on, a token sees only the queues it may read, as in `GET /v1/queues`;
    // endpoints are admin business (`GET /v1/webhooks` is admin only).
    let may_read = |name: &str| caller.as_ref().is_none_or(|caller| caller.may_read(name));
    let is_admin = caller.as_ref().is_none_or(|caller| caller.is_admin());
    Ok(Json(HistoryOut {
        interval_ms: millis(config.interval),
        window_ms: millis(config.window),
        now_ms: app.now_ms(),
        queues: app
            .history
            .queues(since_ms, may_read)
            .into_iter()
            .map(|(name, points)| QueueHistoryOut { name, points })
            .collect(),
        webhooks: if is_admin {
            app.history
                .webhooks(since_ms)
                .into_iter()
                .map(|(name, points)| WebhookHistoryOut { name, points })
                .collect()
        } else {
            Vec::new()
        },
    }))
}

/// `GET /v1/queues/{queue}/history`: one queue's samples.
#[utoipa::path(get, operation_id = "queue_history", path = "/v1/queues/{queue}/history",
    params(("queue" = String, Path), HistoryParams),
    responses((status = 200, body = QueueHistoryOnlyOut), (status = 400, body = sluice_wire::ErrorBody),
        (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn queue(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
    ApiQuery(params): ApiQuery<HistoryParams>,
) -> Result<Json<QueueHistoryOnlyOut>, ApiError> {
    let now_ms = app.now_ms();
    // A queue that does not exist is a 404, even if its series has not been dropped yet.
    app.ops.queue_get(&name).await?;
    let config = app.history.config();
    let points = app
        .history
        .queue(&name, params.since_ms.unwrap_or(Millis::MIN))
        .unwrap_or_default();
    Ok(Json(QueueHistoryOnlyOut {
        queue: name,
        interval_ms: millis(config.interval),
        window_ms: millis(config.window),
        now_ms,
        points,
    }))
}

/// The history routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("history")
        .documented(Need::AnyToken, routes!(list))
        .documented(Need::Read, routes!(queue))
}
