//! A message's push delivery log: each request as sent and the answer it got.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/queues/{queue}/messages/{message_id}/deliveries`: a message's push delivery log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveriesOut {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The queue it is in now (its dead-letter queue once dead).
    pub queue: String,
    /// Its state (see `MessageStatusOut.state`).
    pub state: String,
    /// Its last push attempts, oldest first (at most `[push] delivery_log_attempts`).
    pub deliveries: Vec<DeliveryOut>,
}

/// One push delivery attempt: the request as sent (secrets hidden) and the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryOut {
    /// The attempt's number (in the queue it was delivered from).
    pub attempt: u32,
    /// RFC 3339: when the request was sent.
    pub at: String,
    /// HTTP method.
    pub method: String,
    /// The destination URL, with user info and query (and a `secret_path`) shown as `(hidden)`.
    pub url: String,
    /// Request headers; values of the destination's configured headers are `(hidden)`.
    pub request_headers: BTreeMap<String, String>,
    /// The answer's HTTP status; absent when none came (connection error, timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why the attempt failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The answer's headers (repeated names joined with `, `).
    pub response_headers: BTreeMap<String, String>,
    /// True when headers were left out past `[push] delivery_log_header_bytes`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub response_headers_truncated: bool,
    /// The first bytes of the answer's body (`[push] delivery_log_body_bytes`), as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_excerpt: Option<String>,
    /// True when the body was longer than the excerpt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
    /// From sending the request to reading the excerpt, in ms.
    pub latency_ms: u64,
}
