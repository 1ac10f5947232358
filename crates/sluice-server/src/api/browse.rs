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
/// Longest body preview, in bytes of the body's text.
const PREVIEW_BYTES_MAX: usize = 1024;

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
    /// 0..=1024 (default 0: none): give each message a `body_preview` of the first this many
    /// bytes of its body (JSON text as stored; bytes as base64).
    #[param(minimum = 0, maximum = 1024)]
    pub preview_bytes: Option<usize>,
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
    let preview_bytes = params.preview_bytes.unwrap_or(0);
    if preview_bytes > PREVIEW_BYTES_MAX {
        return Err(ApiError::invalid_field(format!(
            "preview_bytes must be between 0 and {PREVIEW_BYTES_MAX}, got {preview_bytes}"
        )));
    }
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
    let mut messages = Vec::with_capacity(page.messages.len());
    for message in page.messages {
        let enqueued_at_ms = message.status.enqueued_at_ms;
        let body_preview = if preview_bytes > 0 {
            preview(&app, &queue, message.status.message_id, preview_bytes).await?
        } else {
            None
        };
        messages.push(BrowsedMessageOut {
            leased_at: message.leased_at_ms.map(time_out),
            lease_age_ms: message.leased_at_ms.map(|at| (now_ms - at).max(0)),
            age_ms: (now_ms - enqueued_at_ms).max(0),
            body_bytes: message.body_bytes,
            body_preview,
            status: status_out(message.status),
        });
    }
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

/// The start of a message's body: its JSON text as stored (bytes as base64), cut at `max`
/// bytes on a character boundary and then ending in `…`. `None` when the body is gone (the
/// message was taken meanwhile).
async fn preview(
    app: &AppState,
    queue: &str,
    id: Uuid,
    max: usize,
) -> Result<Option<String>, ApiError> {
    let found = app
        .store
        .message_body(MessageGetParams {
            queue: queue.to_owned(),
            by: MessageRef::Id(id),
            now_ms: app.now_ms(),
        })
        .await?;
    let Some(payload) = found.and_then(|found| found.payload) else {
        return Ok(None);
    };
    let text = if payload.body_kind == sluice_core::message::BodyKind::Json {
        String::from_utf8_lossy(&payload.body_bytes[..payload.body_bytes.len().min(max + 4)])
            .into_owned()
    } else {
        use base64::Engine;
        // Base64 of `max` bytes is longer than `max`: the cut below decides.
        let head = &payload.body_bytes[..payload.body_bytes.len().min(max)];
        base64::engine::general_purpose::STANDARD.encode(head)
    };
    Ok(Some(cut(&text, max)))
}

/// `text` cut to at most `max` bytes on a character boundary, with `…` when something was cut.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
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

/// The dashboard's read routes and who may call each.
pub fn routes() -> super::route::Routes {
    use super::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("browse")
        .documented(Need::Read, routes!(browse))
        .documented(Need::Read, routes!(body))
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

    #[test]
    fn previews_are_cut_on_character_boundaries() {
        assert_eq!(cut("short", 10), "short");
        assert_eq!(cut("abcdef", 3), "abc…");
        // "é" is two bytes: a cut in its middle goes back before it.
        assert_eq!(cut("aéb", 2), "a…");
    }
}
