//! Pull delivery: receive, and the answers a consumer gives for a lease (ack, nack, extend).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::ErrorDetail;

/// `POST /v1/queues/{queue}/receive`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiveIn {
    /// 1..=100 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<i64>,
    /// Long poll: wait up to this long for a message, 0..=20000 (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<i64>,
    /// Lease length for these messages (default: the queue's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visibility_timeout_ms: Option<i64>,
}

/// One delivered message.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReceivedMessage {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// Lease handle for ack, nack and extend.
    pub receipt: String,
    /// JSON body, when it was enqueued as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Value)]
    pub body: Option<Box<RawValue>>,
    /// Byte body in base64, when it was enqueued as bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers.
    pub headers: BTreeMap<String, String>,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ordering key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// This delivery's attempt number, from 1.
    pub attempts: u32,
    /// RFC 3339.
    pub enqueued_at: String,
    /// RFC 3339.
    pub first_received_at: String,
    /// RFC 3339.
    pub lease_expires_at: String,
    /// Error of the previous attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Where a dead-lettered message came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterOut>,
}

/// Dead-letter metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DeadLetterOut {
    /// The queue it failed in.
    pub source_queue: String,
    /// Error of the last attempt.
    pub last_error: Option<String>,
    /// Attempts made there.
    pub attempts: u32,
    /// RFC 3339.
    pub first_seen_at: String,
    /// RFC 3339.
    pub last_seen_at: String,
}

/// Answer to receive.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReceiveOut {
    /// Zero or more messages.
    pub messages: Vec<ReceivedMessage>,
}

/// `POST /v1/queues/{queue}/ack`: one receipt or many.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AckIn {
    /// One receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// Many receipts (up to 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipts: Option<Vec<String>>,
    /// A small JSON result (up to 64 KiB) kept with the message: a later enqueue with the same
    /// idempotency key gets it back. Only with a single receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<Box<RawValue>>,
    /// Next steps, enqueued in the same commit as the ack: both happen or neither (a crash in
    /// between can neither lose a next step nor run it twice). Only with a single receipt; at
    /// most 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<Vec<NextStepIn>>,
}

/// One next step of an ack: a message and the queue it goes to.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NextStepIn {
    /// The queue the next step goes to (any queue the caller may produce to).
    pub queue: String,
    /// Idempotency key: the same key within the queue's dedup window returns the first message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Any JSON value.
    #[serde(
        default,
        deserialize_with = "super::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Value)]
    pub body: Option<Box<RawValue>>,
    /// Bytes, standard base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// String headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Ordering key for `per_key` queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Higher first (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Invisible for this long, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<i64>,
    /// Invisible until this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<String>,
}

impl NextStepIn {
    /// `message` as a next step to `queue` (what [`NextStepIn::split`] takes apart).
    pub fn new(queue: String, message: super::MessageIn) -> Self {
        Self {
            queue,
            id: message.id,
            body: message.body,
            body_base64: message.body_base64,
            headers: message.headers,
            key: message.key,
            priority: message.priority,
            delay_ms: message.delay_ms,
            not_before: message.not_before,
        }
    }

    /// Its queue, and the message as an enqueue takes it.
    pub fn split(self) -> (String, super::MessageIn) {
        (
            self.queue,
            super::MessageIn {
                id: self.id,
                body: self.body,
                body_base64: self.body_base64,
                headers: self.headers,
                key: self.key,
                priority: self.priority,
                delay_ms: self.delay_ms,
                not_before: self.not_before,
            },
        )
    }
}

/// The result for one receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AckResult {
    /// The receipt.
    pub receipt: String,
    /// True when acked.
    pub acked: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
}

/// Answer to ack (200 when every receipt was acked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AckOut {
    /// How many were acked.
    pub acked: usize,
    /// Per receipt, in order.
    pub results: Vec<AckResult>,
    /// The next steps the ack enqueued, in the order given (a duplicate of an idempotency key
    /// answers with its first message, as an enqueue does). Only when the ack had `then`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub then: Option<Vec<super::EnqueueOut>>,
}

/// `POST /v1/queues/{queue}/nack`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NackIn {
    /// The lease.
    pub receipt: String,
    /// What went wrong (kept as `last_error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Retry after this many ms instead of the backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<i64>,
    /// Dead-letter at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permanent: Option<bool>,
}

/// Answer to nack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct NackOut {
    /// `delayed`, `ready` or `dead`.
    pub state: String,
    /// When it is visible again (RFC 3339), for a retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_at: Option<String>,
    /// The dead-letter queue it went to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
}

/// `POST /v1/queues/{queue}/extend`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExtendIn {
    /// The lease.
    pub receipt: String,
    /// New lease length from now, in ms; 0 gives the message back at once (a release: no
    /// failure counted).
    pub visibility_timeout_ms: i64,
    /// With `visibility_timeout_ms` 0 only: the message was never started (a worker paused or
    /// stopped before running it), so its delivery is not counted in its attempts either.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unstarted: bool,
}

/// Answer to extend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExtendOut {
    /// RFC 3339.
    pub lease_expires_at: String,
}
