//! A message's push delivery log: its last push attempts, each with the request as sent
//! (secrets hidden), the answer's status or the transport error, the answer's headers and the
//! first bytes of its body, and the latency (`crate::push_log`). Found as the message lookup
//! finds it, so a dead letter's log is read through its source queue too.

use axum::Json;
use axum::extract::State;
use sluice_core::message::DeliveryAttempt;
use sluice_wire::{DeliveriesOut, DeliveryOut, format_rfc3339};

use super::{ApiPath, AppState};
use crate::error::ApiError;

/// `GET /v1/queues/{queue}/messages/{message_id}/deliveries`
#[utoipa::path(get, operation_id = "message_deliveries", path = "/v1/queues/{queue}/messages/{message_id}/deliveries",
    params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = DeliveriesOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn list(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<DeliveriesOut>, ApiError> {
    let (status, deliveries) = app.ops.message_deliveries(queue, &message_id).await?;
    Ok(Json(DeliveriesOut {
        message_id: status.message_id,
        queue: status.queue,
        state: status.state.as_str().to_owned(),
        deliveries: deliveries.into_iter().map(delivery_out).collect(),
    }))
}

fn delivery_out(attempt: DeliveryAttempt) -> DeliveryOut {
    DeliveryOut {
        attempt: attempt.attempt,
        at: format_rfc3339(attempt.at_ms),
        method: attempt.method,
        url: attempt.url,
        request_headers: attempt.request_headers,
        status: attempt.status,
        error: attempt.error,
        response_headers: attempt.response_headers,
        response_headers_truncated: attempt.response_headers_truncated,
        body_excerpt: attempt.body_excerpt,
        body_truncated: attempt.body_truncated,
        latency_ms: attempt.latency_ms,
    }
}

/// The delivery-log route and who may call it.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("deliveries").documented(Need::Read, routes!(list))
}
