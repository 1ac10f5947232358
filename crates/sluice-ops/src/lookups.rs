//! Finding one message: its status (by id or by idempotency key), its body, its push
//! delivery log; and cancelling one.

use sluice_core::message::{DeliveryAttempt, MessageState, MessageStatus};
use sluice_core::store::{CancelOutcome, MessageBody, MessageGetParams, MessageRef};
use uuid::Uuid;

use crate::{Ops, OpsError, OpsResult};

/// Which message to cancel, as a client names it: by server id or by idempotency key.
#[derive(Debug, Clone)]
pub struct CancelRequest {
    /// The queue.
    pub queue: String,
    /// The server id (text: one that is not a UUID names no message).
    pub message_id: Option<String>,
    /// The idempotency key.
    pub id: Option<String>,
    /// Why: kept as the message's `last_error`.
    pub reason: Option<String>,
}

impl Ops {
    /// A message's status by its server id.
    pub async fn message_by_id(&self, queue: String, message_id: &str) -> OpsResult<MessageStatus> {
        let id = parse_message_id(message_id)?;
        self.lookup(queue, MessageRef::Id(id), message_id).await
    }

    /// A message's status by its idempotency key (`None`: the client gave none).
    pub async fn message_by_key(
        &self,
        queue: String,
        key: Option<String>,
    ) -> OpsResult<MessageStatus> {
        let key =
            key.ok_or_else(|| OpsError::invalid_field("id: give the idempotency key as ?id=..."))?;
        let shown = format!("idempotency key {key:?}");
        self.lookup(queue, MessageRef::IdempotencyKey(key), &shown)
            .await
    }

    async fn lookup(&self, queue: String, by: MessageRef, shown: &str) -> OpsResult<MessageStatus> {
        let mut status = self
            .store
            .message_get(MessageGetParams {
                queue: queue.clone(),
                by,
                now_ms: self.now_ms(),
            })
            .await?
            .ok_or_else(|| {
                OpsError::message_not_found(format!("no message {shown} in queue {queue:?}"))
            })?;
        // A dead letter waiting in its dead-letter queue has had no delivery there: its
        // attempts are the ones it failed in its source queue, the same count `dead_letter`
        // and the dead-letter list show (0 beside them read as a second answer).
        if status.state == MessageState::Dead
            && let Some(dead_letter) = &status.dead_letter
        {
            status.attempts = dead_letter.attempts;
        }
        Ok(status)
    }

    /// A message with its body and headers (found as [`Ops::message_by_id`] finds it, so also
    /// in its dead-letter queue); the payload is `None` once the body is gone.
    pub async fn message_body(&self, queue: String, message_id: &str) -> OpsResult<MessageBody> {
        let found = self
            .store
            .message_body(self.by_id(&queue, message_id)?)
            .await?;
        found.ok_or_else(|| no_message(message_id, &queue))
    }

    /// A message's push delivery log, oldest attempt first.
    pub async fn message_deliveries(
        &self,
        queue: String,
        message_id: &str,
    ) -> OpsResult<(MessageStatus, Vec<DeliveryAttempt>)> {
        let found = self
            .store
            .message_deliveries(self.by_id(&queue, message_id)?)
            .await?;
        found.ok_or_else(|| no_message(message_id, &queue))
    }

    /// The store's lookup of `message_id` in `queue`, now.
    fn by_id(&self, queue: &str, message_id: &str) -> OpsResult<MessageGetParams> {
        Ok(MessageGetParams {
            queue: queue.to_owned(),
            by: MessageRef::Id(parse_message_id(message_id)?),
            now_ms: self.now_ms(),
        })
    }

    /// Cancels a message that is not being processed; the outcome says what happened.
    pub async fn cancel(&self, request: CancelRequest) -> OpsResult<CancelOutcome> {
        let by = match (request.message_id, request.id) {
            (Some(id), None) => match Uuid::try_parse(&id) {
                Ok(id) => MessageRef::Id(id),
                // No message has an id that is not a UUID.
                Err(_) => {
                    self.store.queue_get(&request.queue, self.now_ms()).await?;
                    return Ok(CancelOutcome::NotFound);
                }
            },
            (None, Some(key)) => MessageRef::IdempotencyKey(key),
            (Some(_), Some(_)) => {
                return Err(OpsError::invalid_field(
                    "give message_id or id (the idempotency key), not both",
                ));
            }
            (None, None) => {
                return Err(OpsError::invalid_field(
                    "name the message: give message_id, or id (its idempotency key)",
                ));
            }
        };
        Ok(self
            .store
            .message_cancel(
                MessageGetParams {
                    queue: request.queue,
                    by,
                    now_ms: self.now_ms(),
                },
                request.reason.map(crate::error_text),
            )
            .await?)
    }
}

/// A message id as a client gives it; one that is not a UUID names no message.
pub(crate) fn parse_message_id(text: &str) -> OpsResult<Uuid> {
    Uuid::try_parse(text)
        .map_err(|_| OpsError::message_not_found(format!("{text:?} is not a message id")))
}

/// The answer when a queue has no message by that id.
fn no_message(message_id: &str, queue: &str) -> OpsError {
    OpsError::message_not_found(format!("no message {message_id} in queue {queue:?}"))
}
