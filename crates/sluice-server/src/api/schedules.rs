//! Schedules: list, define, show, pause, resume, delete. The runs themselves are made by the
//! upkeep task (`crate::maintenance`), through `sluice_ops::Ops::schedules_pass`.

use axum::Json;
use axum::extract::State;
use sluice_wire::{ScheduleDeleteOut, ScheduleListOut, ScheduleOut, SchedulePutOut, ScheduleSpec};

use super::{ApiJson, ApiPath, AppState};
use crate::error::ApiError;
use crate::views::schedule_out;

/// `GET /v1/schedules`
#[utoipa::path(get, operation_id = "schedule_list", path = "/v1/schedules", responses((status = 200, body = ScheduleListOut)))]
pub async fn list(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
) -> Result<Json<ScheduleListOut>, ApiError> {
    let schedules = app.ops.schedule_list().await?;
    Ok(Json(ScheduleListOut {
        schedules: schedules
            .into_iter()
            .filter(|schedule| crate::auth::manages(&caller, &schedule.name))
            .map(schedule_out)
            .collect(),
    }))
}

/// `PUT /v1/schedules/{name}`: define or replace a schedule.
#[utoipa::path(put, operation_id = "schedule_put", path = "/v1/schedules/{name}", params(("name" = String, Path)), request_body = ScheduleSpec,
    responses((status = 200, body = SchedulePutOut), (status = 400, body = sluice_wire::ErrorBody),
        (status = 404, description = "the queue does not exist", body = sluice_wire::ErrorBody),
        (status = 413, description = "the message is larger than the queue takes", body = sluice_wire::ErrorBody),
        (status = 422, description = "a field is wrong (the message says which), or the message fails the queue's schema", body = sluice_wire::ErrorBody)))]
pub async fn put(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<ScheduleSpec>,
) -> Result<Json<SchedulePutOut>, ApiError> {
    crate::auth::check_manages(&caller, "queue", &spec.queue)?;
    let put = app.ops.schedule_put(&name, spec).await?;
    Ok(Json(SchedulePutOut {
        created: put.created,
        schedule: schedule_out(put.schedule),
    }))
}

/// `GET /v1/schedules/{name}`: the definition, the next run and the last.
#[utoipa::path(get, operation_id = "schedule_get", path = "/v1/schedules/{name}", params(("name" = String, Path)),
    responses((status = 200, body = ScheduleOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ScheduleOut>, ApiError> {
    Ok(Json(schedule_out(app.ops.schedule_get(&name).await?)))
}

/// `POST /v1/schedules/{name}/pause`: no runs until resumed; runs passed meanwhile are not
/// missed runs.
#[utoipa::path(post, operation_id = "schedule_pause", path = "/v1/schedules/{name}/pause", params(("name" = String, Path)),
    responses((status = 200, body = ScheduleOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn pause(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ScheduleOut>, ApiError> {
    Ok(Json(schedule_out(
        app.ops.schedule_pause(&name, true).await?,
    )))
}

/// `POST /v1/schedules/{name}/resume`
#[utoipa::path(post, operation_id = "schedule_resume", path = "/v1/schedules/{name}/resume", params(("name" = String, Path)),
    responses((status = 200, body = ScheduleOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn resume(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ScheduleOut>, ApiError> {
    Ok(Json(schedule_out(
        app.ops.schedule_pause(&name, false).await?,
    )))
}

/// `DELETE /v1/schedules/{name}`
#[utoipa::path(delete, operation_id = "schedule_delete", path = "/v1/schedules/{name}", params(("name" = String, Path)),
    responses((status = 200, body = ScheduleDeleteOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn delete(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<ScheduleDeleteOut>, ApiError> {
    app.ops.schedule_delete(&name).await?;
    Ok(Json(ScheduleDeleteOut { deleted: true }))
}

/// The schedules' routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("schedules")
        .documented(Need::Administrators, routes!(list))
        .documented(Need::Admin, routes!(get_one))
        .documented(Need::Admin, routes!(put))
        .documented(Need::Admin, routes!(pause))
        .documented(Need::Admin, routes!(resume))
        .documented(Need::Admin, routes!(delete))
}
