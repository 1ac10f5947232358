//! The HTTP API v1: one module per resource, each with its handlers and its `routes()` (the
//! route table, [`route`]); [`router`] joins them, and [`document`] describes them.

pub mod alerts;
mod browse;
mod dead_letters;
mod deliveries;
mod delivery;
pub(crate) mod health;
mod history;
mod json_shape;
pub(crate) mod messages;
mod openapi;
pub(crate) mod queues;
pub(crate) mod route;
pub mod schedules;
mod test_clock;
pub mod topics;
pub mod webhooks;

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request};
use serde::de::DeserializeOwned;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa::{Modify, OpenApi};

use self::openapi::SharedAnswers;
use self::route::Routes;
use crate::auth::{Guard, Need};
use crate::error::ApiError;

pub use crate::body_budget::REQUEST_BYTES_MAX;
pub use crate::state::{AppState, Shared};

/// A stored body as the API shows it: JSON text as `body`, bytes as `body_base64`.
pub fn body_out(
    payload: &sluice_core::message::Payload,
) -> (Option<Box<serde_json::value::RawValue>>, Option<String>) {
    use base64::Engine;
    if payload.body_kind == sluice_core::message::BodyKind::Json {
        let text = String::from_utf8_lossy(&payload.body_bytes).into_owned();
        (serde_json::value::RawValue::from_string(text).ok(), None)
    } else {
        (
            None,
            Some(base64::engine::general_purpose::STANDARD.encode(&payload.body_bytes)),
        )
    }
}

/// JSON body extractor that ignores the content type (so `curl -d` works) and answers with our
/// error shape.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await?;
        parse_json(&bytes).map(ApiJson)
    }
}

/// The raw body, with our error shape when it cannot be read (for handlers that look at the
/// body before parsing it).
pub struct ApiBytes(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        Ok(ApiBytes(Bytes::from_request(request, state).await?))
    }
}

/// Parses JSON, mapping serde's message into a 400.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::malformed_json(
            "the request body is empty; a JSON object is required",
        ));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::malformed_json(format!("invalid JSON body: {e}")))
}

/// Path extractor with our error shape.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// Query extractor with our error shape.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// The OpenAPI document's title and description; its operations come from the route table.
#[derive(OpenApi)]
#[openapi(info(title = "sluice", description = "Durable queue server: HTTP API v1"))]
struct ApiInfo;

/// Every route behind the access check, each with its rule: the API's resources, the webhook
/// ingress, the dashboard's pages and `/metrics`, and in test-clock mode the clock.
pub(crate) fn routes(test_clock: bool) -> Routes {
    let routes = Routes::new("meta")
        .documented(Need::Public, utoipa_axum::routes!(openapi_json))
        .merge(queues::routes())
        .merge(messages::routes())
        .merge(dead_letters::routes())
        .merge(browse::routes())
        .merge(deliveries::routes())
        .merge(delivery::routes())
        .merge(webhooks::routes())
        .merge(schedules::routes())
        .merge(topics::routes())
        .merge(alerts::routes())
        .merge(history::routes())
        .merge(crate::webhooks::ingress::routes())
        .merge(health::routes())
        .merge(crate::dashboard::routes())
        .merge(crate::metrics::routes());
    if test_clock {
        routes.merge(test_clock::routes())
    } else {
        routes
    }
}

/// The OpenAPI document of every documented route, with the answers they all share
/// ([`SharedAnswers`], which reads each route's access rule). Built once.
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOCUMENT: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| {
        let (_, operations, rules) = routes(false).split();
        let mut document = ApiInfo::openapi();
        document.merge(operations);
        SharedAnswers(&rules).modify(&mut document);
        document
    });
    &DOCUMENT
}

/// `GET /v1/openapi.json`.
#[utoipa::path(get, operation_id = "openapi", path = "/v1/openapi.json", tag = "meta",
    responses((status = 200, description = "This document (OpenAPI 3.1)", body = Object)))]
async fn openapi_json() -> axum::Json<&'static utoipa::openapi::OpenApi> {
    axum::Json(document())
}

/// Every route of the server (but the login form's, `auth::router`).
pub fn router(state: AppState) -> Router {
    let (routes, _, rules) = routes(state.manual_clock.is_some()).split();
    let guard = Guard {
        app: state.clone(),
        rules: Arc::new(rules),
    };
    routes
        .fallback(|| async { ApiError::route_not_found() })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        // Bodies are read within the budget once the caller is authorized (below).
        .route_layer(axum::middleware::from_fn_with_state(
            state.body_budget.clone(),
            crate::body_budget::hold,
        ))
        // After routing, so the check knows the matched route and its queue.
        .route_layer(axum::middleware::from_fn_with_state(
            guard,
            crate::auth::authorize,
        ))
        .layer(DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .layer(CatchPanicLayer::custom(|_| {
            use axum::response::IntoResponse;
            tracing::error!("a request handler panicked");
            ApiError::unavailable("internal error; see the server log").into_response()
        }))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every route the router serves is in the OpenAPI document, with the methods it takes.
    #[test]
    fn the_openapi_document_describes_every_route() {
        let doc = serde_json::to_value(document()).unwrap();
        let expected = [
            ("/v1/queues", "get"),
            ("/v1/queues/{queue}", "get"),
            ("/v1/queues/{queue}", "put"),
            ("/v1/queues/{queue}", "delete"),
            ("/v1/queues/{queue}/stats", "get"),
            ("/v1/queues/{queue}/history", "get"),
            ("/v1/history", "get"),
            ("/v1/queues/{queue}/messages", "post"),
            ("/v1/queues/{queue}/messages", "get"),
            ("/v1/queues/{queue}/messages/{message_id}", "get"),
            ("/v1/queues/{queue}/messages/{message_id}/body", "get"),
            ("/v1/queues/{queue}/messages/{message_id}/deliveries", "get"),
            ("/v1/queues/{queue}/browse", "get"),
            ("/v1/queues/{queue}/receive", "post"),
            ("/v1/queues/{queue}/ack", "post"),
            ("/v1/queues/{queue}/nack", "post"),
            ("/v1/queues/{queue}/extend", "post"),
            ("/v1/queues/{queue}/pause", "post"),
            ("/v1/queues/{queue}/resume", "post"),
            ("/v1/queues/{queue}/push/pause", "post"),
            ("/v1/queues/{queue}/push/resume", "post"),
            ("/v1/queues/{queue}/purge", "post"),
            ("/v1/queues/{queue}/drain", "post"),
            ("/v1/queues/{queue}/cancel", "post"),
            ("/v1/queues/{queue}/dlq", "get"),
            ("/v1/queues/{queue}/dlq", "delete"),
            ("/v1/queues/{queue}/dlq/replay", "post"),
            ("/v1/queues/{queue}/dlq/{message_id}", "get"),
            ("/v1/queues/{queue}/dlq/{message_id}", "delete"),
            ("/v1/queues/{queue}/dlq/{message_id}/replay", "post"),
            ("/v1/webhooks", "get"),
            ("/v1/webhooks/{name}", "get"),
            ("/v1/webhooks/{name}", "put"),
            ("/v1/webhooks/{name}", "delete"),
            ("/v1/schedules", "get"),
            ("/v1/schedules/{name}", "get"),
            ("/v1/schedules/{name}", "put"),
            ("/v1/schedules/{name}", "delete"),
            ("/v1/schedules/{name}/pause", "post"),
            ("/v1/schedules/{name}/resume", "post"),
            ("/v1/topics", "get"),
            ("/v1/topics/{name}", "get"),
            ("/v1/topics/{name}", "put"),
            ("/v1/topics/{name}", "delete"),
            ("/v1/topics/{name}/messages", "post"),
            ("/v1/alerts", "get"),
            ("/v1/alerts/{name}", "get"),
            ("/v1/alerts/{name}", "put"),
            ("/v1/alerts/{name}", "delete"),
            ("/hooks/{name}", "post"),
            ("/v1/openapi.json", "get"),
            ("/healthz", "get"),
            ("/readyz", "get"),
        ];
        for (path, method) in expected {
            assert!(
                doc["paths"][path][method].is_object(),
                "{method} {path} is missing from the OpenAPI document"
            );
        }
        assert_eq!(
            doc["paths"].as_object().unwrap().len(),
            40,
            "a route was added: list it above"
        );
        for schema in ["MessageIn", "ReceivedMessage", "QueueSpec", "ErrorBody"] {
            assert!(
                doc["components"]["schemas"][schema].is_object(),
                "schema {schema} is missing"
            );
        }
    }
}
