//! Events: a delivery a protocol received (a webhook) made into one message, or kept in the
//! queue's dead-letter queue with the reason when it cannot be one.
//!
//! Unlike [`Ops::enqueue`], which refuses a bad message to a client that can fix it, an
//! event's sender cannot: a body the queue's schema refuses, or one larger than the queue
//! accepts, is dead-lettered instead of bounced, so nothing a sender delivered is lost. Only a
//! queue without a dead-letter queue refuses it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use sluice_core::message::{BodyKind, DeadLetterInfo, NewMessage, Payload};
use sluice_core::store::EnqueueParams;
use uuid::Uuid;

use crate::{Enqueue, MessageRequest, Ops, OpsError, OpsResult};

/// An event to enqueue as one message, visible at once.
#[derive(Debug, Clone)]
pub struct EventRequest {
    /// The message the protocol made of the event (its delay fields are ignored).
    pub message: MessageRequest,
    /// The body as the queue's schema checks it (form fields as an object, the text of a body
    /// that is not JSON); `None` is checked as `null`. Only read when the queue has a schema.
    pub schema_body: Option<Value>,
    /// The body as received, kept in the dead-letter queue if the message is refused.
    pub received: Vec<u8>,
}

/// Where an event went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventOutcome {
    /// Stored in the queue; `created` is false for a duplicate idempotency key, whose
    /// `message_id` is the first message's.
    Enqueued {
        /// The message's id.
        message_id: Uuid,
        /// False for a duplicate.
        created: bool,
        /// For a duplicate: where the first message is now, as API enqueues answer it.
        state: Option<sluice_core::message::MessageState>,
        /// For a duplicate whose first message was acked with a result: that result.
        result: Option<serde_json::Value>,
    },
    /// Stored in the queue's dead-letter queue with the reason.
    DeadLettered(DeadLettered),
}

/// An event kept in the queue's dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLettered {
    /// The dead letter's id.
    pub message_id: Uuid,
    /// Why, cut to the longest error a message keeps.
    pub reason: String,
}

impl Enqueue {
    /// True when the queue checks message bodies against a JSON Schema.
    pub fn has_schema(&self) -> bool {
        self.config.schema.is_some()
    }
}

impl Ops {
    /// Enqueues the event's message, or dead-letters the event when the queue's schema or
    /// message size refuses it.
    pub async fn enqueue_event(&self, to: Enqueue, event: EventRequest) -> OpsResult<EventOutcome> {
        let EventRequest {
            message,
            schema_body,
            received,
        } = event;
        let headers = message.headers.unwrap_or_default();
        if let Some(schema) = to.config.schema.clone() {
            // Off the async threads, like a batch's schema check.
            let body = schema_body.unwrap_or(Value::Null);
            let violations = crate::enqueue::schema_check(move || schema.violations(&body)).await?;
            if !violations.is_empty() {
                let reasons: Vec<String> = violations
                    .iter()
                    .map(|v| format!("at {:?}: {}", v.path, v.reason))
                    .collect();
                let reason = format!("the body fails the queue's schema: {}", reasons.join("; "));
                return self
                    .dead_letter_event(to, received, headers, reason)
                    .await
                    .map(EventOutcome::DeadLettered);
            }
        }
        let (body_bytes, body_kind) = message.body;
        if body_bytes.len() > to.config.max_message_bytes {
            let reason = format!(
                "the message is {} bytes; the queue accepts at most {}",
                body_bytes.len(),
                to.config.max_message_bytes
            );
            return self
                .dead_letter_event(to, received, headers, reason)
                .await
                .map(EventOutcome::DeadLettered);
        }
        let message = NewMessage {
            idempotency_key: message.id,
            payload: Arc::new(Payload {
                body_bytes,
                body_kind,
                headers,
            }),
            key: message.key,
            priority: message.priority.unwrap_or(0),
            visible_at_ms: to.now_ms,
            dead_letter: None,
        };
        // The quota the other doors pass (a refused event is answered 503 to its sender, who
        // retries; it is not dead-lettered, since nothing is wrong with it).
        if let Some(admission) = &self.admission {
            let bytes = message.payload.body_bytes.len() as u64;
            admission.admit(&to.queue, &to.config, 1, bytes)?;
        }
        let key = message.idempotency_key.clone();
        let (message_id, created) = self.store_one(to.queue.clone(), message, to.now_ms).await?;
        if created {
            return Ok(EventOutcome::Enqueued {
                message_id,
                created,
                state: None,
                result: None,
            });
        }
        // A sender's retry learns the first delivery's outcome, as a retried enqueue does.
        let first = self.duplicate_out(&to.queue, message_id, key).await?;
        Ok(EventOutcome::Enqueued {
            message_id,
            created,
            state: first.state,
            result: first.result,
        })
    }

    /// Keeps an event that cannot become a message in the queue's dead-letter queue, its body
    /// as received (JSON when it parses) and `reason` as its error, so it can be inspected and
    /// replayed once the cause is fixed. Refused when the queue has no dead-letter queue.
    pub async fn dead_letter_event(
        &self,
        to: Enqueue,
        received: Vec<u8>,
        headers: BTreeMap<String, String>,
        reason: String,
    ) -> OpsResult<DeadLettered> {
        let Some(dlq) = to.config.dead_letter_queue.clone() else {
            return Err(OpsError::invalid_field(format!(
                "{reason} (the queue {:?} has no dead-letter queue to keep it in)",
                to.queue
            )));
        };
        let reason = crate::error_text(reason);
        let body_kind = match crate::check_json_body(&received) {
            Ok(()) => BodyKind::Json,
            Err(_) => BodyKind::Bytes,
        };
        let message = NewMessage {
            idempotency_key: None,
            payload: Arc::new(Payload {
                body_bytes: received,
                body_kind,
                headers,
            }),
            key: None,
            priority: 0,
            visible_at_ms: to.now_ms,
            dead_letter: Some(DeadLetterInfo {
                source_queue: to.queue,
                last_error: Some(reason.clone()),
                attempts: 0,
                first_seen_at_ms: to.now_ms,
                last_seen_at_ms: to.now_ms,
            }),
        };
        let (message_id, _) = self.store_one(dlq, message, to.now_ms).await?;
        Ok(DeadLettered { message_id, reason })
    }

    async fn store_one(
        &self,
        queue: String,
        message: NewMessage,
        now_ms: sluice_core::Millis,
    ) -> OpsResult<(Uuid, bool)> {
        let results = self
            .store
            .message_enqueue(EnqueueParams {
                queue,
                messages: vec![message],
                now_ms,
            })
            .await?;
        let enqueued = results
            .into_iter()
            .next()
            .ok_or_else(|| OpsError::unavailable("the store returned no result"))?;
        Ok((enqueued.message_id, enqueued.created))
    }
}
