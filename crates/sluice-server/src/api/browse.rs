//! Browsing routes for operators (and the dashboard): a queue's messages page by page in each
//! state, and one message's body. Pages come from the in-memory index from a cursor, so a page
//! costs the same with a million messages in the queue as with ten.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use sluice_core::store::{BrowseCursor, BrowseQuery, BrowseState, MessageGetParams, MessageRef};
use sluice_core::wire::{BrowseCountsOut, BrowseOut, BrowsedMessageOut, MessageBodyOut, time_out};
use uuid::Uuid;

use super::messages::status_out;
use super::{ApiPath, ApiQuery, AppState};
use crate::error::ApiError;

/// Default page size.
const LIMIT_DEFAULT: usize = 50;
/// Largest page.
const LIMIT_MAX: usize = 1000;

/// Query of `GET /v1/queues/{queue}/browse`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BrowseParams {
    /// `ready` (default), `waiting`, `delayed` or `in_flight`.
    #[param(pattern = "^(ready|waiting|delayed|in_flight)$")]
    pub state: Option<String>,
    /// 1..=1000 (default 50).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A cursor is the position of the last message of the previous page: `<sort key>.<seq>`.
fn parse_cursor(text: &str) -> Result<BrowseCursor, ApiError> {
    let invalid = || {
        ApiError::invalid_field(format!(
            "cursor: {text:?} is not a cursor from a previous page"
        ))
    };
    let (key, seq) = text.rsplit_once('.').ok_or_else(invalid)?;
    Ok((
        key.parse().map_err(|_| invalid())?,
        seq.parse().map_err(|_| invalid())?,
    ))
}

/// `GET /v1/queues/{queue}/browse`: one state's messages in the order dispatch takes them.
#[utoipa::path(get, operation_id = "queue_browse", path = "/v1/queues/{queue}/browse", params(("queue" = String, Path), BrowseParams),
    responses((status = 200, body = BrowseOut), (status = 404, body = sluice_core::wire::ErrorBody),
        (status = 422, body = sluice_core::wire::ErrorBody)))]
pub async fn browse(
    State(app): State<AppState>,
    ApiPath(queue): ApiPath<String>,
    ApiQuery(params): ApiQuery<BrowseParams>,
) -> Result<Json<BrowseOut>, ApiError> {
    let state_text = params.state.as_deref().unwrap_or("ready");
    let state = BrowseState::parse(state_text).ok_or_else(|| {
        ApiError::invalid_field(format!(
            "state must be ready, waiting, delayed or in_flight, got {state_text:?}"
        ))
    })?;
    let limit = params.limit.unwrap_or(LIMIT_DEFAULT);
    if !(1..=LIMIT_MAX).contains(&limit) {
        return Err(ApiError::invalid_field(format!(
            "limit must be between 1 and {LIMIT_MAX}, got {limit}"
        )));
    }
    let after = params.cursor.as_deref().map(parse_cursor).transpose()?;
    let now_ms = app.now_ms();
    let page = app
        .store
        .message_browse(BrowseQuery {
            queue: queue.clone(),
            state,
            after,
            limit,
            now_ms,
        })
        .await?;
    let messages = page
        .messages
        .into_iter()
        .map(|message| {
            let enqueued_at_ms = message.status.enqueued_at_ms;
            BrowsedMessageOut {
                leased_at: message.leased_at_ms.map(time_out),
                lease_age_ms: message.leased_at_ms.map(|at| (now_ms - at).max(0)),
                age_ms: (now_ms - enqueued_at_ms).max(0),
                body_bytes: message.body_bytes,
                status: status_out(message.status),
            }
        })
        .collect();
    let counts = page.counts;
    Ok(Json(BrowseOut {
        queue,
        state: state.as_str().to_owned(),
        messages,
        next_cursor: page.next.map(|(key, seq)| format!("{key}.{seq}")),
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
    responses((status = 200, body = MessageBodyOut), (status = 404, body = sluice_core::wire::ErrorBody)))]
pub async fn body(
    State(app): State<AppState>,
    ApiPath((queue, message_id)): ApiPath<(String, String)>,
) -> Result<Json<MessageBodyOut>, ApiError> {
    let id = Uuid::try_parse(&message_id)
        .map_err(|_| ApiError::message_not_found(format!("{message_id:?} is not a message id")))?;
    let found = app
        .store
        .message_body(MessageGetParams {
            queue: queue.clone(),
            by: MessageRef::Id(id),
            now_ms: app.now_ms(),
        })
        .await?
        .ok_or_else(|| {
            ApiError::message_not_found(format!("no message {message_id} in queue {queue:?}"))
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_with_negative_keys() {
        assert_eq!(parse_cursor("-5.42").unwrap(), (-5, 42));
        assert_eq!(
            parse_cursor("1700000000000.7").unwrap(),
            (1_700_000_000_000, 7)
        );
        assert!(parse_cursor("nope").is_err());
        assert!(parse_cursor("1.x").is_err());
    }
}
