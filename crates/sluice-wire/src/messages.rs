//! Messages by themselves: enqueue (one or a batch, and the answers), where a message is now,
//! cancel, and a message's body.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::{DeadLetterOut, present};

/// One message to enqueue. Give `body` (any JSON) or `body_base64` (bytes), not both.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageIn {
    /// Idempotency key: the same key within the dedup window returns the first message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Any JSON value.
    #[serde(
        default,
        deserialize_with = "present",
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

impl MessageIn {
    /// A message with this JSON body and nothing else set.
    pub fn json(body: Box<RawValue>) -> Self {
        Self {
            id: None,
            body: Some(body),
            body_base64: None,
            headers: None,
            key: None,
            priority: None,
            delay_ms: None,
            not_before: None,
        }
    }
}

/// `{"messages": [...]}`: a batch of up to 1000 messages or 10 MiB.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageBatchIn {
    /// The messages.
    pub messages: Vec<MessageIn>,
}

/// The result for one enqueued message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EnqueueOut {
    /// Server id (the original's for a duplicate).
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// False for a duplicate idempotency key within the window.
    pub created: bool,
    /// For a new message: how many messages the queue held when it was stored (ahead of it,
    /// give or take priorities and delays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// For a duplicate: where the first message is now (`ready`, `in_flight`, `acked`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// For a duplicate whose first message was acked with a result: that result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<serde_json::Value>,
}

/// Answer to a batch enqueue: one result per message, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EnqueueBatchOut {
    /// Per message.
    pub results: Vec<EnqueueOut>,
}

/// The body of `POST /v1/queues/{queue}/messages`: one message, or a batch. A body with a
/// `messages` field is a batch.
#[derive(Debug, Deserialize, Serialize, ToSchema)]
#[serde(untagged)]
pub enum EnqueueIn {
    /// `{"messages": [...]}`.
    Batch(MessageBatchIn),
    /// One message.
    One(MessageIn),
}

/// The answer to `POST /v1/queues/{queue}/messages`: `EnqueueOut` for one message,
/// `EnqueueBatchOut` for a batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum EnqueueAnswerOut {
    /// For a batch.
    Batch(EnqueueBatchOut),
    /// For one message.
    One(EnqueueOut),
}

/// Where a message is now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageStatusOut {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The queue it is in now (its DLQ once dead).
    pub queue: String,
    /// `ready`, `delayed`, `in_flight`, `acked`, `dead`, `expired`, `cancelled`, `purged`,
    /// `replayed` or `deleted`.
    pub state: String,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Ordering key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// Deliveries so far.
    pub attempts: u32,
    /// RFC 3339.
    pub enqueued_at: String,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_received_at: Option<String>,
    /// RFC 3339.
    pub visible_at: String,
    /// RFC 3339, while in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_expires_at: Option<String>,
    /// Error of the last failed attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// RFC 3339, once acked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_at: Option<String>,
    /// RFC 3339, once in a final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// RFC 3339: until when an acked message keeps its body (its queue's `keep_acked_ms`);
    /// absent once the body is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_until: Option<String>,
    /// Set once dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter: Option<DeadLetterOut>,
    /// The result its consumer acked it with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<serde_json::Value>,
    /// For a replayed dead letter: the new message's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub replayed_as: Option<uuid::Uuid>,
    /// Failed attempts, oldest first: nacks, leases that ran out, the move to the DLQ.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<FailureOut>,
}

/// One failed attempt of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FailureOut {
    /// The attempt's number.
    pub attempt: u32,
    /// RFC 3339.
    pub at: String,
    /// Its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// True when it sent the message to the dead-letter queue.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dead_lettered: bool,
}

/// `POST /v1/queues/{queue}/cancel`: name the message by `message_id` or by idempotency `id`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelIn {
    /// Server id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Why it was cancelled: kept as the message's `last_error`, shown by lookups (cut to
    /// 4096 bytes, as a nack's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Answer to cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CancelOut {
    /// `cancelled`, `not_found`, `already_processing` or `already_completed`.
    pub outcome: String,
    /// The message, when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub message_id: Option<uuid::Uuid>,
    /// Its state now (`cancelled`, `in_flight`, `acked`, `dead`, ...), when found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// One way a body fails its queue's schema (in the `details` of a 422 `schema_violation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SchemaViolationOut {
    /// Position of the message in a batch (0 for a single message).
    pub index: usize,
    /// JSON Pointer into the body.
    pub path: String,
    /// Why it fails.
    pub reason: String,
}

/// `GET /v1/queues/{queue}/messages/{message_id}/body`: a message with its body and headers.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MessageBodyOut {
    /// Server id.
    #[schema(value_type = String)]
    pub message_id: uuid::Uuid,
    /// The queue it is in now.
    pub queue: String,
    /// Its state (see `MessageStatusOut.state`).
    pub state: String,
    /// False once the body was dropped (acked, expired, cancelled, purged, deleted).
    pub available: bool,
    /// Body size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_bytes: Option<u64>,
    /// JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub body: Option<Box<RawValue>>,
    /// Byte body in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
    /// Headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_body_is_present_but_a_missing_one_is_not() {
        let null: MessageIn = serde_json::from_str(r#"{"body": null}"#).unwrap();
        assert_eq!(
            null.body.map(|raw| raw.get().to_owned()).as_deref(),
            Some("null")
        );
        let missing: MessageIn = serde_json::from_str(r#"{"body_base64": "AA=="}"#).unwrap();
        assert!(missing.body.is_none());
    }
}
