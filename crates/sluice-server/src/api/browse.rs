//! Browsing routes for operators (and the dashboard): a queue's messages page by page in each
//! state, and one message's body. The rules (limits, cursors, previews) are
//! [`sluice_ops::Ops`]'s; these parse and render.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use sluice_ops::{AckedSearchRequest, BrowseRequest};
use sluice_wire::{BrowseCountsOut, BrowseOut, BrowsedMessageOut, MessageBodyOut, format_rfc3339};

use super::{ApiPath, ApiQuery, AppState};
use crate::error::ApiError;
use crate::views::status_out;

/// Query of `GET /v1/queues/{queue}/browse`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BrowseParams {
    /// `ready` (default), `waiting`, `delayed`, `in_flight`, or `acked`: the acked messages
    /// a queue with `keep_acked_ms` keeps with their body, newest ack first, which the five
    /// fields below search.
    #[param(pattern = "^(ready|waiting|delayed|in_flight|acked)$")]
    pub state: Option<String>,
    /// 1..=1000 (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// 0..=1024 (default 0: none): give each message a `body_preview` of the first this many
    /// bytes of its body (JSON text as stored; bytes as base64).
    #[param(minimum = 0, maximum = 1024)]
    pub preview_bytes: Option<usize>,
    /// With `state=acked`: this message (its server id).
    pub message_id: Option<String>,
    /// With `state=acked`: messages sent with this idempotency key.
    pub id: Option<String>,
    /// With `state=acked`: messages sent with this ordering key.
    pub key: Option<String>,
    /// With `state=acked`, RFC 3339: acked at or after this time.
    pub since: Option<String>,
    /// With `state=acked`, RFC 3339: acked before this time.
    pub until: Option<String>,
}

/// `GET /v1/queues/{queue}/browse`: one state's messages in the order dispatch takes them, or
/// the acked messages kept with their body (`state=acked`, newest first, searchable).
#[utoipa::path(get, operation_id = "queue_browse", path = "/v1/queues/{queue}/browse", params(("queue" = String, Path), BrowseParams),
    responses((status = 200, body = BrowseOut), (status = 404, body = sluice_wire::ErrorBody),
        (status = 422, body = sluice_wire::ErrorBody)))]
pub async fn browse(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(params): ApiQuery<BrowseParams>,
) -> Result<Json<BrowseOut>, ApiError> {
    let page = app
        .ops
        .browse(BrowseRequest {
            queue: queue.clone(),
            state: params.state,
            limit: params.limit,
            cursor: params.cursor,
            preview_bytes: params.preview_bytes,
            search: AckedSearchRequest {
                message_id: params.message_id,
                id: params.id,
                key: params.key,
                since: params.since,
                until: params.until,
            },
        })
        .await?;
    let now_ms = page.now_ms;
    let messages = page
        .messages
        .into_iter()
        .map(|(message, body_preview)| BrowsedMessageOut {
            leased_at: message.leased_at_ms.map(format_rfc3339),
            lease_age_ms: message.leased_at_ms.map(|at| (now_ms - at).max(0)),
            age_ms: (now_ms - message.status.enqueued_at_ms).max(0),
            body_bytes: message.body_bytes,
            body_preview,
            status: status_out(message.status),
        })
        .collect();
    let counts = page.counts;
    Ok(Json(BrowseOut {
        queue,
        state: page.state.as_str().to_owned(),
        messages,
        next_cursor: page.next_cursor,
        counts: BrowseCountsOut {
            ready: counts.ready,
            waiting: counts.waiting,
            delayed: counts.delayed,
            in_flight: counts.in_flight,
        },
    }))
}

/// `GET /v1/queues/{queue}/messages/{message_id}/body`: a message with its body and headers
/// (found as `GET /v1/queues/{queue}/messages/{message_id}` finds it, so also in its DLQ).
#[utoipa::path(get, operation_id = "message_body", path = "/v1/queues/{queue}/messages/{message_id}/body", params(("queue" = String, Path), ("message_id" = String, Path)),
    responses((status = 200, body = MessageBodyOut), (status = 404, body = sluice_wire::ErrorBody)))]
pub async fn body(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<MessageBodyOut>, ApiError> {
    let found = app.ops.message_body(queue, &message_id).await?;
    let mut out = MessageBodyOut {
        message_id: found.status.message_id,
        queue: found.status.queue,
        state: found.status.state.as_str().to_owned(),
        available: found.payload.is_some(),
        body_bytes: None,
        body: None,
        body_base64: None,
        headers: None,
    };
    if let Some(payload) = found.payload {
        out.body_bytes = Some(payload.body_bytes.len() as u64);
        (out.body, out.body_base64) = super::body_out(&payload);
        out.headers = Some(payload.headers);
    }
    Ok(Json(out))
}

/// The dashboard's read routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("browse")
        .documented(Need::Read, routes!(browse))
        .documented(Need::Read, routes!(body))
}
