//! Dead letters: listing, replaying and deleting them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

/// One dead letter.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterEntryOut {
    /// Its id (the id it had in the source queue).
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The dead-letter queue holding it.
    pub queue: String,
    /// The queue it failed in.
    pub source_queue: String,
    /// `dead`, `in_flight` (someone consumes the DLQ), `replayed` or `deleted`.
    pub state: String,
    /// Error of the last attempt.
    pub last_error: Option<String>,
    /// Attempts made in the source queue.
    pub attempts: u32,
    /// RFC 3339: first enqueued.
    pub enqueued_at: String,
    /// RFC 3339: first delivery in the source queue.
    pub first_seen_at: String,
    /// RFC 3339: when it was dead-lettered.
    pub last_seen_at: String,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ordering key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// Body size in bytes, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
    /// JSON body (`GET .../dlq/{message_id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub body: Option<Box<RawValue>>,
    /// Byte body in base64 (`GET .../dlq/{message_id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers (`GET .../dlq/{message_id}` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// RFC 3339, once replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replayed_at: Option<String>,
    /// The new message a replay created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub replayed_as: Option<uuid::Uuid>,
}

/// `GET /v1/queues/{queue}/dlq`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterListOut {
    /// The dead-letter queue.
    pub dead_letter_queue: String,
    /// Newest first.
    pub entries: Vec<DeadLetterEntryOut>,
    /// Pass as `cursor` for the next page; absent at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `POST /v1/queues/{queue}/dlq/replay`: which dead letters to replay (all of this queue's when
/// no filter is given).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayIn {
    /// These entries only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<String>>,
    /// Case-insensitive substring of the last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Dead-lettered at or after this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Dead-lettered before this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Most entries replayed by this call, 1..=10000 (default 1000); call again for more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Only count what matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Replay into this queue instead of the source queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_queue: Option<String>,
}

/// One replayed entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplayedOut {
    /// The dead letter.
    #[schema(value_type = String)]
    pub dead_letter_id: uuid::Uuid,
    /// The new message.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
}

/// Answer to replay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplayOut {
    /// True when nothing was replayed, only counted.
    pub dry_run: bool,
    /// Entries matching (for a dry run: all of them; otherwise those taken by this call).
    pub matched: u64,
    /// Entries replayed by this call.
    pub replayed: u64,
    /// True when more matching entries are left (call again).
    pub more: bool,
    /// The queue they went to.
    pub target_queue: String,
    /// Per entry.
    pub results: Vec<ReplayedOut>,
}

/// `POST /v1/queues/{queue}/dlq/{message_id}/replay`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayOneIn {
    /// Replay into this queue instead of the source queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_queue: Option<String>,
}

/// Answer to deleting dead letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterDeleteOut {
    /// Entries deleted.
    pub deleted: u64,
}
