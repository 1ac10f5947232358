//! Browsing for operators (and the dashboard): a queue's messages page by page in each state,
//! in the order dispatch takes them, each with an optional preview of its body.

use sluice_core::Millis;
use sluice_core::message::BodyKind;
use sluice_core::store::{
    AckedSearch, BrowseCounts, BrowseCursor, BrowseQuery, BrowseState, BrowsedMessage,
    MessageGetParams, MessageRef,
};

use crate::{Ops, OpsError, OpsResult};

/// Default page size.
const LIMIT_DEFAULT: usize = 50;
/// Largest page.
const LIMIT_MAX: usize = 1000;
/// Longest body preview, in bytes of the body's text.
const PREVIEW_BYTES_MAX: usize = 1024;

/// One page of one state.
#[derive(Debug, Clone)]
pub struct BrowseRequest {
    /// The queue.
    pub queue: String,
    /// `ready` (default), `waiting`, `delayed` or `in_flight`.
    pub state: Option<String>,
    /// 1..=1000 (default 50).
    pub limit: Option<usize>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// 0..=1024 (default 0: none): bytes of each body's preview.
    pub preview_bytes: Option<usize>,
    /// What a browse of `acked` keeps; refused with any other state.
    pub search: AckedSearchRequest,
}

/// A search among acked messages as a client gives it: each condition given must hold.
#[derive(Debug, Clone, Default)]
pub struct AckedSearchRequest {
    /// The server id.
    pub message_id: Option<String>,
    /// The idempotency key.
    pub id: Option<String>,
    /// The ordering key.
    pub key: Option<String>,
    /// RFC 3339: acked at or after.
    pub since: Option<String>,
    /// RFC 3339: acked before.
    pub until: Option<String>,
}

/// A page of messages.
#[derive(Debug, Clone)]
pub struct Browsed {
    /// The state browsed.
    pub state: BrowseState,
    /// This page, each message with its preview when asked for (and the body still there).
    pub messages: Vec<(BrowsedMessage, Option<String>)>,
    /// Where the next page starts, if there is one.
    pub next_cursor: Option<String>,
    /// How many messages each state holds.
    pub counts: BrowseCounts,
    /// The time the page was read at (ages are counted from it).
    pub now_ms: Millis,
}

impl Ops {
    /// One page of a queue's messages in one state. Pages come from a cursor, so a page
    /// costs the same with a million messages in the queue as with ten.
    pub async fn browse(&self, request: BrowseRequest) -> OpsResult<Browsed> {
        let state_text = request.state.as_deref().unwrap_or("ready");
        let state = BrowseState::parse(state_text).ok_or_else(|| {
            OpsError::invalid_field(format!(
                "state must be ready, waiting, delayed, in_flight or acked, got {state_text:?}"
            ))
        })?;
        let search = acked_search(request.search)?;
        if state != BrowseState::Acked && search != AckedSearch::default() {
            return Err(OpsError::invalid_field(format!(
                "message_id, id, key, since and until search acked messages: give state=acked, not {state_text:?}"
            )));
        }
        let limit = request.limit.unwrap_or(LIMIT_DEFAULT);
        if !(1..=LIMIT_MAX).contains(&limit) {
            return Err(OpsError::invalid_field(format!(
                "limit must be between 1 and {LIMIT_MAX}, got {limit}"
            )));
        }
        let after = request.cursor.as_deref().map(parse_cursor).transpose()?;
        let preview_bytes = request.preview_bytes.unwrap_or(0);
        if preview_bytes > PREVIEW_BYTES_MAX {
            return Err(OpsError::invalid_field(format!(
                "preview_bytes must be between 0 and {PREVIEW_BYTES_MAX}, got {preview_bytes}"
            )));
        }
        let now_ms = self.now_ms();
        let page = self
            .store
            .message_browse(BrowseQuery {
                queue: request.queue.clone(),
                state,
                after,
                limit,
                search,
                now_ms,
            })
            .await?;
        let mut messages = Vec::with_capacity(page.messages.len());
        for message in page.messages {
            let preview = if preview_bytes > 0 {
                self.preview(&request.queue, &message, preview_bytes)
                    .await?
            } else {
                None
            };
            messages.push((message, preview));
        }
        Ok(Browsed {
            state,
            messages,
            next_cursor: page.next.map(|(key, seq)| format!("{key}.{seq}")),
            counts: page.counts,
            now_ms,
        })
    }

    /// The start of a message's body: its JSON text as stored (bytes as base64), cut at `max`
    /// bytes on a character boundary and then ending in `…`. `None` when the body is gone
    /// (the message was taken meanwhile).
    async fn preview(
        &self,
        queue: &str,
        message: &BrowsedMessage,
        max: usize,
    ) -> OpsResult<Option<String>> {
        // Enough bytes for `max` characters of text, or of base64 (4 characters per 3 bytes),
        // plus the cut's look-ahead.
        let prefix = max + 4;
        let found = self
            .store
            .message_body_prefix(
                MessageGetParams {
                    queue: queue.to_owned(),
                    by: MessageRef::Id(message.status.message_id),
                    now_ms: self.now_ms(),
                },
                prefix,
            )
            .await?;
        let Some(payload) = found.and_then(|found| found.payload) else {
            return Ok(None);
        };
        let text = if payload.body_kind == BodyKind::Json {
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
}

/// The store's form of a search: times parsed, a message id that is not a UUID refused (a
/// search for it would find nothing anyway, but a typo deserves to be told).
fn acked_search(request: AckedSearchRequest) -> OpsResult<AckedSearch> {
    // An empty field (a search form's blank box) asks for nothing.
    let given = |text: Option<String>| text.filter(|text| !text.is_empty());
    let message_id = given(request.message_id)
        .map(|text| {
            uuid::Uuid::try_parse(&text).map_err(|_| {
                OpsError::invalid_field(format!("message_id: {text:?} is not a message id"))
            })
        })
        .transpose()?;
    Ok(AckedSearch {
        message_id,
        idempotency_key: given(request.id),
        key: given(request.key),
        since_ms: crate::parse_time("since", given(request.since).as_deref())?,
        until_ms: crate::parse_time("until", given(request.until).as_deref())?,
    })
}

/// A cursor is the position of the last message of the previous page: `<sort key>.<seq>`.
fn parse_cursor(text: &str) -> OpsResult<BrowseCursor> {
    let invalid = || {
        OpsError::invalid_field(format!(
            "cursor: {text:?} is not a cursor from a previous page"
        ))
    };
    let (key, seq) = text.rsplit_once('.').ok_or_else(invalid)?;
    Ok((
        key.parse().map_err(|_| invalid())?,
        seq.parse().map_err(|_| invalid())?,
    ))
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
