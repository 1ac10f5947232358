//! Webhook endpoint administration: list, define, show, delete. Senders post to `/hooks/{name}`
//! (`crate::webhooks::ingress`).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use sluice_ops::{Definable, DefinitionPut};
use sluice_wire::{WebhookListOut, WebhookOut, WebhookSpec};

use super::{ApiJson, ApiPath, AppState};
use crate::error::{ApiError, ErrorCode};
use crate::webhooks::Endpoint;

/// Answer to `PUT /v1/webhooks/{name}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookPutOut {
    /// False when an existing endpoint was replaced (its counters start again).
    pub created: bool,
    /// The endpoint as it is now.
    pub webhook: WebhookOut,
}

/// Answer to `DELETE /v1/webhooks/{name}`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookDeleteOut {
    /// Always true.
    pub deleted: bool,
}

/// The wire form of an endpoint.
pub fn webhook_out(endpoint: &Endpoint) -> WebhookOut {
    WebhookOut {
        name: endpoint.name.clone(),
        path: format!("/hooks/{}", endpoint.name),
        spec: endpoint.spec.clone(),
        stats: endpoint.stats.out(),
    }
}

/// Compiles, stores and serves a definition. Shared by the API and the config file.
pub async fn define(app: &AppState, name: &str, spec: WebhookSpec) -> Result<bool, ApiError> {
    let endpoint = Endpoint::compile(name, spec).map_err(ApiError::invalid_field)?;
    let stored = serde_json::to_string(&endpoint.spec)
        .map_err(|e| ApiError::invalid_field(format!("cannot store the definition: {e}")))?;
    app.ops
        .definition_put(DefinitionPut {
            kind: Definable::WebhookEndpoint,
            name,
            spec: stored,
            queues: vec![&endpoint.spec.queue],
            topics: endpoint.spec.topic.iter().map(String::as_str).collect(),
        })
        .await?;
    Ok(app.webhooks.insert(endpoint))
}

/// `GET /v1/webhooks`
#[utoipa::path(get, operation_id = "webhook_list", path = "/v1/webhooks", responses((status = 200, body = WebhookListOut)))]
pub async fn list(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
) -> Json<WebhookListOut> {
    Json(WebhookListOut {
        webhooks: app
            .webhooks
            .list()
            .iter()
            .filter(|endpoint| crate::auth::manages(&caller, &endpoint.name))
            .map(|endpoint| webhook_out(endpoint))
            .collect(),
    })
}

/// `PUT /v1/webhooks/{name}`: define or replace an endpoint.
#[utoipa::path(put, operation_id = "webhook_put", path = "/v1/webhooks/{name}", params(("name" = String, Path)), request_body = WebhookSpec,
    responses((status = 200, body = WebhookPutOut), (status = 400, body = sluice_wire::ErrorBody),
        (status = 404, description = "the queue or the topic does not exist", body = sluice_wire::ErrorBody),
        (status = 422, description = "a field, expression or secret is wrong; the message says which", body = sluice_wire::ErrorBody)))]
pub async fn put(
    State(app): State<AppState>,
    caller: crate::auth::CallerExt,
    ApiPath(name): ApiPath<String>,
    ApiJson(spec): ApiJson<WebhookSpec>,
) -> Result<Json<WebhookPutOut>, ApiError> {
    crate::auth::check_manages(&caller, "queue", &spec.queue)?;
    if let Some(topic) = &spec.topic {
        crate::auth::check_manages(&caller, "topic", topic)?;
    }
    let who = caller.as_deref().map(|caller| &**caller);
    for (index, secret) in spec.verify.secrets.iter().enumerate() {
        crate::auth::check_secret(who, &format!("verify.secrets[{index}]"), secret)?;
    }
    let created = define(&app, &name, spec).await?;
    let endpoint = app
        .webhooks
        .get(&name)
        .ok_or_else(|| ApiError::unavailable("the endpoint vanished while it was defined"))?;
    Ok(Json(WebhookPutOut {
        created,
        webhook: webhook_out(&endpoint),
    }))
}

/// `GET /v1/webhooks/{name}`: the definition and its counters.
#[utoipa::path(get, operation_id = "webhook_get", path = "/v1/webhooks/{name}", params(("name" = String, Path)),
    responses((status = 200, body = WebhookOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn get_one(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<WebhookOut>, ApiError> {
    let endpoint = app.webhooks.get(&name).ok_or_else(|| not_found(&name))?;
    Ok(Json(webhook_out(&endpoint)))
}

/// `DELETE /v1/webhooks/{name}`
#[utoipa::path(delete, operation_id = "webhook_delete", path = "/v1/webhooks/{name}", params(("name" = String, Path)),
    responses((status = 200, body = WebhookDeleteOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn delete(
    State(app): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<WebhookDeleteOut>, ApiError> {
    let stored = app
        .ops
        .definition_delete(Definable::WebhookEndpoint, &name)
        .await?;
    let served = app.webhooks.remove(&name);
    if !stored && !served {
        return Err(not_found(&name));
    }
    Ok(Json(WebhookDeleteOut { deleted: true }))
}

fn not_found(name: &str) -> ApiError {
    ApiError::new(
        ErrorCode::WebhookNotFound,
        format!("no webhook endpoint {name:?}"),
    )
}

/// The webhook endpoints' definition routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("webhooks")
        .documented(Need::Administrators, routes!(list))
        .documented(Need::Admin, routes!(get_one))
        .documented(Need::Admin, routes!(put))
        .documented(Need::Admin, routes!(delete))
}
