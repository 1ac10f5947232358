//! Browsing a queue: a page of one state's messages in dispatch order.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::MessageStatusOut;

/// One message of `GET /v1/queues/{queue}/browse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BrowsedMessageOut {
    /// Where it is and what happened to it so far.
    #[serde(flatten)]
    pub status: MessageStatusOut,
    /// RFC 3339: when its current lease began (in flight only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leased_at: Option<String>,
    /// How long it has been leased, ms (in flight only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_age_ms: Option<i64>,
    /// How long since it was enqueued, ms.
    pub age_ms: i64,
    /// Body size in bytes, when known without a read from disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
    /// The start of the body (with `preview_bytes`): its JSON text as stored, bytes as base64,
    /// ending in `…` when cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_preview: Option<String>,
}

/// How many messages a queue holds in each browsable state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BrowseCountsOut {
    /// Claimable now.
    pub ready: u64,
    /// Visible but behind the active message of their lane (ordered queues).
    pub waiting: u64,
    /// Waiting for a delay or backoff to end.
    pub delayed: u64,
    /// Leased to consumers.
    pub in_flight: u64,
}

/// `GET /v1/queues/{queue}/browse`: a page of one state's messages in dispatch order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BrowseOut {
    /// The queue.
    pub queue: String,
    /// `ready`, `waiting`, `delayed`, `in_flight` or `acked`.
    pub state: String,
    /// In order: ready by priority then enqueue order, waiting oldest first, delayed by visible
    /// time, in flight by lease deadline, acked newest ack first.
    pub messages: Vec<BrowsedMessageOut>,
    /// Pass as `cursor` for the next page; absent at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Sizes of every live state now (kept acked messages are not counted).
    pub counts: BrowseCountsOut,
}
