//! Alerts: list, define, show, delete. The notifications are made by the upkeep task
//! (`crate::maintenance`) through `sluice_ops::Ops::alerts_pass`, and delivered through each
//! alert's queue.

use axum::Json;
use axum::extract::State;
use sluice_ops::alerts::AlertOrigin;
use sluice_wire::{AlertDeleteOut, AlertListOut, AlertOut, AlertPutOut, AlertSpec};

use super::{ApiJson, ApiPath, AppState};
use crate::error::ApiError;

/// The delivery queue's stats beside the alert.
async fn with_delivery(app: &AppState, mut alert: AlertOut) -> AlertOut {
    if let Ok(info) = app.ops.queue_get(&alert.queue).await {
        alert.delivery = Some(crate::views::stats_out(app, &info));
    }
    alert
}

/// `GET /v1/alerts`
#[utoipa::path(get, operation_id = "alert_list", path = "/v1/alerts", responses((status = 200, body = AlertListOut)))]
pub async fn list(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
) -> Result<Json<AlertListOut>, ApiError> {
    let mut alerts = Vec::new();
    for alert in app.ops.alert_list().await? {
        if !crate::auth::manages(&caller, &alert.name) {
            continue;
        }
        alerts.push(with_delivery(&app, crate::views::alert_out(alert)).await);
    }
    Ok(Json(AlertListOut { alerts }))
}

/// `PUT /v1/alerts/{name}`: define or replace an alert (and its queue, `sluice.alerts.<name>`,
/// whose push destination is the alert's).
#[utoipa::path(put, operation_id = "alert_put", path = "/v1/alerts/{name}", params(("name" = String, Path)), request_body = AlertSpec,
    responses((status = 200, body = AlertPutOut), (status = 400, body = sluice_wire::ErrorBody),
        (status = 422, description = "a field is wrong (the message says which); a command destination is refused here (the config file may name one)", body = sluice_wire::ErrorBody)))]
pub async fn put(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<AlertSpec>,
) -> Result<Json<AlertPutOut>, ApiError> {
    // A tenant admin's alert watches the tenant's queues only: it names them.
    let patterns = spec.queues.clone().unwrap_or_else(|| vec!["*".into()]);
    for (index, pattern) in patterns.iter().enumerate() {
        crate::auth::check_manages_pattern(&caller, &format!("queues[{index}]"), pattern)?;
    }
    // Nor does it name the server's secrets or make the server call internal addresses.
    let who = caller.as_deref().map(|caller| &**caller);
    let destination = &spec.destination;
    for (field, url) in [
        ("destination.slack_url", &destination.slack_url),
        ("destination.webhook_url", &destination.webhook_url),
    ] {
        if let Some(url) = url {
            crate::auth::check_destination_url(who, field, url)?;
        }
    }
    if let Some(secret) = &destination.signing_secret {
        crate::auth::check_secret(who, "destination.signing_secret", secret)?;
    }
    let put = app
        .ops
        .alert_put(&name, spec, AlertOrigin::Api, crate::push::validate)
        .await?;
    app.push.refresh();
    Ok(Json(AlertPutOut {
        created: put.created,
        alert: with_delivery(&app, crate::views::alert_out(put.alert)).await,
    }))
}

/// `GET /v1/alerts/{name}`: the definition, what it sent, and its deliveries.
#[utoipa::path(get, operation_id = "alert_get", path = "/v1/alerts/{name}", params(("name" = String, Path)),
    responses((status = 200, body = AlertOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<AlertOut>, ApiError> {
    let alert = app.ops.alert_get(&name).await?;
    Ok(Json(
        with_delivery(&app, crate::views::alert_out(alert)).await,
    ))
}

/// `DELETE /v1/alerts/{name}`: the alert, its progress and its queue (notifications not yet
/// delivered with it).
#[utoipa::path(delete, operation_id = "alert_delete", path = "/v1/alerts/{name}", params(("name" = String, Path)),
    responses((status = 200, body = AlertDeleteOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn delete(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<AlertDeleteOut>, ApiError> {
    app.ops.alert_delete(&name).await?;
    app.push.refresh();
    Ok(Json(AlertDeleteOut { deleted: true }))
}

/// The alerts' routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("alerts")
        .documented(Need::Administrators, routes!(list))
        .documented(Need::Admin, routes!(get_one))
        .documented(Need::Admin, routes!(put))
        .documented(Need::Admin, routes!(delete))
}
