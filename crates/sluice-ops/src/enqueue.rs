//! Enqueue: the message rules (sizes, keys, headers, delays), the batch's byte limit, the
//! queue's JSON Schema, and the answer to a duplicate.
//!
//! An enqueue is built in two steps so that every refusal comes in the order a client sees it
//! today: [`Ops::enqueue_to`] looks up the queue (a missing queue is refused before the body
//! is even read), then the protocol adds its messages one by one ([`Enqueue::add`]), each
//! checked as it comes, and [`Ops::enqueue`] checks the batch and stores it.
//!
//! What a refused message does to the others is one rule with two shapes, each door taking
//! the one that matches what its client sent:
//! - a batch sent as one request (HTTP `messages`, gRPC `EnqueueBatch`) is one decision,
//!   [`Ops::enqueue`]: a message refused for any reason (its size, a field, the queue's
//!   schema) refuses the batch, nothing is stored, and every schema violation is listed by
//!   the message's index;
//! - messages each answered on their own (a gRPC `Publish` stream, which the server
//!   coalesces into one commit; SQS `SendMessageBatch`, whose entries succeed or fail one by
//!   one as AWS documents) are decided one by one, [`Ops::enqueue_each`]: a refused message
//!   gets its own error and the others are stored.

use std::collections::BTreeMap;

use base64::Engine as _;
use std::sync::Arc;

use sha2::{Digest, Sha256};
use sluice_core::message::{BodyKind, MessageState, NewMessage, Payload};
use sluice_core::queue::{Dedup, MessageSchema, QueueConfig, limits};
use sluice_core::store::{EnqueueParams, Enqueued, MessageGetParams, MessageRef};
use sluice_core::{Millis, StoreError};
use sluice_wire::parse_rfc3339;
use uuid::Uuid;

use crate::error::Details;
use crate::{Ops, OpsError, OpsResult};

/// What an enqueue did with one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueueAnswer {
    /// The new message's id, or the first one's for a duplicate.
    pub message_id: Uuid,
    /// False for a duplicate idempotency key within the window.
    pub created: bool,
    /// For a new message: how many messages the queue held when it was stored.
    pub position: Option<u64>,
    /// For a duplicate: where the first message is now, when it is still known.
    pub state: Option<MessageState>,
    /// For a duplicate whose first message was acked with a result: that result.
    pub result: Option<serde_json::Value>,
}

/// What a queue's schema finds wrong with one message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// Position of the message in its batch (0 for a single message).
    pub index: usize,
    /// JSON Pointer into the body.
    pub path: String,
    /// Why it fails.
    pub reason: String,
}

/// A message as a protocol hands it over, its body already decoded.
#[derive(Debug, Clone)]
pub struct MessageRequest {
    /// The body's bytes, and whether they are JSON text.
    pub body: (Vec<u8>, BodyKind),
    /// Idempotency key.
    pub id: Option<String>,
    /// Per-key order key.
    pub key: Option<String>,
    /// Headers kept with the message.
    pub headers: Option<BTreeMap<String, String>>,
    /// Higher first; 0 when `None`.
    pub priority: Option<i32>,
    /// Visible after this wait.
    pub delay_ms: Option<i64>,
    /// Visible from this RFC 3339 time.
    pub not_before: Option<String>,
}

impl MessageRequest {
    /// A message's body as the API takes it: JSON text as `body`, or bytes as `body_base64`
    /// (standard base64), one of the two. `prefix` names the message in refusals.
    pub fn decode_body(
        json: Option<Vec<u8>>,
        base64: Option<&str>,
        prefix: &str,
    ) -> OpsResult<(Vec<u8>, BodyKind)> {
        let invalid =
            |field: &str, why: &str| OpsError::invalid_field(format!("{prefix}{field}: {why}"));
        match (json, base64) {
            (Some(text), None) => match crate::check_json_body(&text) {
                Ok(()) => Ok((text, BodyKind::Json)),
                Err(error) => Err(invalid(
                    "body",
                    &format!(
                        "not JSON every reader can read: {error} (lone surrogate escapes and nesting deeper than 128 levels are refused; send such bytes as body_base64)"
                    ),
                )),
            },
            (None, Some(text)) => base64::engine::general_purpose::STANDARD
                .decode(text.as_bytes())
                .map(|bytes| (bytes, BodyKind::Bytes))
                .map_err(|e| invalid("body_base64", &format!("not valid base64: {e}"))),
            (Some(_), Some(_)) => Err(invalid("body", "give body or body_base64, not both")),
            (None, None) => Err(invalid(
                "body",
                "a message needs body (any JSON) or body_base64",
            )),
        }
    }
}

/// An enqueue under way: the queue's configuration, and the messages checked so far.
#[derive(Debug)]
pub struct Enqueue {
    pub(crate) queue: String,
    pub(crate) config: Arc<QueueConfig>,
    pub(crate) now_ms: Millis,
    messages: Vec<NewMessage>,
    batch_bytes: usize,
    admission: Option<Arc<dyn crate::Admission>>,
    /// The schema was checked already ([`Ops::enqueue_each`] checks each message alone).
    schema_checked: bool,
}

/// How many messages one enqueue may carry: at least one, at most
/// [`limits::BATCH_MESSAGES_MAX`]. Checked for every enqueue; a protocol that can count a
/// request's messages before decoding them (the HTTP body's shape, a gRPC request) asks this
/// first too, so an oversized batch is refused before it is read.
pub fn check_batch_len(count: usize) -> OpsResult<()> {
    if count == 0 {
        return Err(OpsError::invalid_field(
            "messages: a batch needs at least one message",
        ));
    }
    if count > limits::BATCH_MESSAGES_MAX {
        return Err(OpsError::too_large(format!(
            "messages: {count} messages in one batch; at most {} are allowed",
            limits::BATCH_MESSAGES_MAX
        )));
    }
    Ok(())
}

impl Ops {
    /// Starts an enqueue to `queue`: refuses a queue that does not exist.
    pub async fn enqueue_to(&self, queue: String) -> OpsResult<Enqueue> {
        let now_ms = self.now_ms();
        let config = self.store.queue_config(&queue).await?;
        Ok(Enqueue {
            queue,
            config,
            now_ms,
            messages: Vec::new(),
            batch_bytes: 0,
            admission: self.admission.clone(),
            schema_checked: false,
        })
    }

    /// Checks the batch (its bytes, the queue's schema, off the async threads) and stores it;
    /// one answer per message, in order. A duplicate's answer says where the first message
    /// is now and, once acked, its result, so a retried request learns the first outcome
    /// instead of causing a second run.
    pub async fn enqueue(&self, enqueue: Enqueue) -> OpsResult<Vec<EnqueueAnswer>> {
        let params = enqueue.checked().await?;
        let queue = params.queue.clone();
        let keys: Vec<Option<String>> = params
            .messages
            .iter()
            .map(|m| m.idempotency_key.clone())
            .collect();
        let results = self.store.message_enqueue(params).await?;
        self.enqueue_outs(&queue, results, keys).await
    }

    /// Stores messages that are each answered on their own, in one commit: a message the
    /// queue's schema refuses gets its violations as its answer (indexed 0, the message
    /// itself) and the others are stored. Refusals of the whole enqueue (a full queue, a full
    /// disk, a quota) still answer for all. One answer per message, in order.
    pub async fn enqueue_each(
        &self,
        mut enqueue: Enqueue,
    ) -> OpsResult<Vec<OpsResult<EnqueueAnswer>>> {
        let refusals = match enqueue.config.schema.clone() {
            Some(schema) => {
                let messages = std::mem::take(&mut enqueue.messages);
                let (messages, refusals) = schema_check(move || {
                    let refusals: Vec<Option<OpsError>> = messages
                        .iter()
                        .map(|message| refusal(violations(&schema, 0, message)))
                        .collect();
                    (messages, refusals)
                })
                .await?;
                let mut kept = Vec::with_capacity(messages.len());
                for (message, refused) in messages.into_iter().zip(&refusals) {
                    if refused.is_some() {
                        enqueue.batch_bytes -= message.payload.body_bytes.len();
                    } else {
                        kept.push(message);
                    }
                }
                enqueue.messages = kept;
                enqueue.schema_checked = true;
                refusals
            }
            None => vec![None; enqueue.messages.len()],
        };
        let mut stored = if enqueue.is_empty() {
            Vec::new()
        } else {
            self.enqueue(enqueue).await?
        }
        .into_iter();
        Ok(refusals
            .into_iter()
            .map(|refused| match refused {
                Some(error) => Err(error),
                None => stored.next().ok_or_else(|| {
                    OpsError::unavailable("the store answered fewer messages than it was given")
                }),
            })
            .collect())
    }

    /// Stores several enqueues, to one queue or several, in one commit: every message or none
    /// (a topic's copies). Each is checked as [`Ops::enqueue`] checks one; the answers come
    /// per enqueue, in order.
    pub async fn enqueue_together(
        &self,
        enqueues: Vec<Enqueue>,
    ) -> OpsResult<Vec<Vec<EnqueueAnswer>>> {
        let mut batches = Vec::with_capacity(enqueues.len());
        for enqueue in enqueues {
            batches.push(enqueue.checked().await?);
        }
        let keys: Vec<(String, Vec<Option<String>>)> = batches
            .iter()
            .map(|batch| {
                let keys = batch
                    .messages
                    .iter()
                    .map(|m| m.idempotency_key.clone())
                    .collect();
                (batch.queue.clone(), keys)
            })
            .collect();
        let results = self.store.message_enqueue_together(batches).await?;
        let mut outs = Vec::with_capacity(results.len());
        for (result, (queue, keys)) in results.into_iter().zip(keys) {
            outs.push(self.enqueue_outs(&queue, result, keys).await?);
        }
        Ok(outs)
    }

    /// The answer for each message a store took: where a duplicate's first message is now.
    pub(crate) async fn enqueue_outs(
        &self,
        queue: &str,
        results: Vec<Enqueued>,
        keys: Vec<Option<String>>,
    ) -> OpsResult<Vec<EnqueueAnswer>> {
        let mut out = Vec::with_capacity(results.len());
        for (result, key) in results.into_iter().zip(keys) {
            out.push(if result.created {
                EnqueueAnswer {
                    message_id: result.message_id,
                    created: true,
                    position: Some(result.position),
                    state: None,
                    result: None,
                }
            } else {
                self.duplicate_out(queue, result.message_id, key).await?
            });
        }
        Ok(out)
    }

    pub(crate) async fn duplicate_out(
        &self,
        queue: &str,
        message_id: Uuid,
        key: Option<String>,
    ) -> Result<EnqueueAnswer, StoreError> {
        // By key: the key remembers the ack and result even after the message's record is gone.
        let by = key.map_or(MessageRef::Id(message_id), MessageRef::IdempotencyKey);
        let status = self
            .store
            .message_get(MessageGetParams {
                queue: queue.to_owned(),
                by,
                now_ms: self.now_ms(),
            })
            .await?
            .filter(|status| status.message_id == message_id);
        Ok(EnqueueAnswer {
            message_id,
            created: false,
            position: None,
            state: status.as_ref().map(|s| s.state),
            result: status
                .and_then(|s| s.result)
                .and_then(|text| serde_json::from_str(&text).ok()),
        })
    }
}

impl Enqueue {
    /// Checks the batch as a whole (its bytes, the queue's schema, off the async threads):
    /// what the store takes.
    pub(crate) async fn checked(self) -> OpsResult<EnqueueParams> {
        let Enqueue {
            queue,
            config,
            now_ms,
            mut messages,
            batch_bytes,
            admission,
            schema_checked,
        } = self;
        check_batch_len(messages.len())?;
        if batch_bytes > limits::BATCH_BYTES_MAX {
            return Err(OpsError::too_large(format!(
                "messages: the batch holds {batch_bytes} body bytes; at most {} are allowed",
                limits::BATCH_BYTES_MAX
            )));
        }
        if let Some(admission) = &admission {
            admission.admit(&queue, &config, messages.len(), batch_bytes as u64)?;
        }
        if let Some(schema) = config.schema.as_ref().filter(|_| !schema_checked) {
            // Off the async threads: a batch can hold 10 MiB of strings for the patterns.
            let schema = schema.clone();
            let (checked, result) = schema_check(move || {
                let result = check_schema(&schema, &messages);
                (messages, result)
            })
            .await?;
            result?;
            messages = checked;
        }
        Ok(EnqueueParams {
            queue,
            messages,
            now_ms,
        })
    }

    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Messages added so far.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// True before the first message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Checks one message against the queue's limits and adds it. `prefix` names the
    /// message in refusals (`messages[3].` in a batch, nothing for one message).
    pub fn add(&mut self, input: MessageRequest, prefix: &str) -> OpsResult<()> {
        let message = build(input, &self.config, self.now_ms, prefix)?;
        self.batch_bytes += message.payload.body_bytes.len();
        self.messages.push(message);
        Ok(())
    }

    /// Lets the protocol add headers of its own to every payload (e.g. a trace context).
    pub fn payloads_mut(&mut self) -> impl Iterator<Item = &mut Arc<Payload>> {
        self.messages.iter_mut().map(|message| &mut message.payload)
    }
}

/// Checks one message against the queue's limits and builds what the store takes.
fn build(
    input: MessageRequest,
    config: &QueueConfig,
    now_ms: Millis,
    prefix: &str,
) -> OpsResult<NewMessage> {
    let invalid =
        |field: &str, why: String| OpsError::invalid_field(format!("{prefix}{field}: {why}"));
    let (body_bytes, body_kind) = input.body;
    if body_bytes.len() > config.max_message_bytes {
        return Err(OpsError::too_large(format!(
            "{prefix}body: {} bytes; the queue accepts at most {}",
            body_bytes.len(),
            config.max_message_bytes
        )));
    }
    for (field, value) in [("id", &input.id), ("key", &input.key)] {
        if let Some(value) = value
            && (value.is_empty() || value.len() > limits::KEY_BYTES_MAX)
        {
            return Err(invalid(
                field,
                format!("must be 1 to {} bytes long", limits::KEY_BYTES_MAX),
            ));
        }
    }
    let headers = input.headers.unwrap_or_default();
    let header_bytes: usize = headers.iter().map(|(k, v)| k.len() + v.len()).sum();
    if headers.len() > limits::HEADERS_MAX || header_bytes > limits::HEADER_BYTES_MAX {
        return Err(invalid(
            "headers",
            format!(
                "at most {} headers and {} bytes in all",
                limits::HEADERS_MAX,
                limits::HEADER_BYTES_MAX
            ),
        ));
    }
    let visible_at_ms = match (input.delay_ms, input.not_before) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "delay_ms",
                "give delay_ms or not_before, not both".into(),
            ));
        }
        (Some(delay), None) => {
            if !(0..=limits::DELAY_MS_MAX).contains(&delay) {
                return Err(invalid(
                    "delay_ms",
                    format!("must be between 0 and {}", limits::DELAY_MS_MAX),
                ));
            }
            now_ms + delay
        }
        (None, Some(text)) => {
            let at = parse_rfc3339(&text).ok_or_else(|| {
                invalid("not_before", format!("{text:?} is not an RFC 3339 time"))
            })?;
            if at.saturating_sub(now_ms) > limits::DELAY_MS_MAX {
                return Err(invalid(
                    "not_before",
                    format!("is more than {} ms (100 years) away", limits::DELAY_MS_MAX),
                ));
            }
            at
        }
        (None, None) => now_ms + config.delay_ms,
    };
    let idempotency_key = match (input.id, config.dedup) {
        (Some(id), _) => Some(id),
        (None, Dedup::Content) => Some(content_key(input.key.as_deref(), &body_bytes)),
        (None, Dedup::Id) => None,
    };
    Ok(NewMessage {
        idempotency_key,
        payload: Arc::new(Payload {
            body_bytes,
            body_kind,
            headers,
        }),
        key: input.key,
        priority: input.priority.unwrap_or(0),
        visible_at_ms,
        dead_letter: None,
    })
}

/// The idempotency key a `dedup: "content"` queue gives a message sent without an `id`:
/// `sha256:` and the hex SHA-256 of its ordering key and body, each preceded by its length so
/// no two different (key, body) pairs are hashed as the same bytes. Headers are not part of it:
/// a trace id a client adds must not make a retry a new message.
pub fn content_key(key: Option<&str>, body: &[u8]) -> String {
    let mut digest = Sha256::new();
    match key {
        Some(key) => {
            digest.update([1]);
            digest.update((key.len() as u64).to_be_bytes());
            digest.update(key.as_bytes());
        }
        None => digest.update([0]),
    }
    digest.update((body.len() as u64).to_be_bytes());
    digest.update(body);
    format!("sha256:{}", hex::encode(digest.finalize()))
}

/// Every violation of every message of a batch, or nothing stored.
fn check_schema(schema: &MessageSchema, messages: &[NewMessage]) -> OpsResult<()> {
    let found = messages
        .iter()
        .enumerate()
        .flat_map(|(index, message)| violations(schema, index, message))
        .collect();
    refusal(found).map_or(Ok(()), Err)
}

/// What the schema finds wrong with one message, which is `index` in its batch.
fn violations(schema: &MessageSchema, index: usize, message: &NewMessage) -> Vec<SchemaViolation> {
    if message.payload.body_kind != BodyKind::Json {
        return vec![SchemaViolation {
            index,
            path: String::new(),
            reason: "this queue has a schema: give a JSON body, not body_base64".into(),
        }];
    }
    let body: serde_json::Value = match serde_json::from_slice(&message.payload.body_bytes) {
        Ok(body) => body,
        Err(error) => {
            return vec![SchemaViolation {
                index,
                path: String::new(),
                reason: format!("not JSON: {error}"),
            }];
        }
    };
    schema
        .violations(&body)
        .into_iter()
        .map(|violation| SchemaViolation {
            index,
            path: violation.path,
            reason: violation.reason,
        })
        .collect()
}

/// The refusal of `violations` (every one in its details, the first five in its message);
/// `None` when there are none.
fn refusal(violations: Vec<SchemaViolation>) -> Option<OpsError> {
    if violations.is_empty() {
        return None;
    }
    let summary: Vec<String> = violations
        .iter()
        .take(5)
        .map(|v| format!("message {} at {:?}: {}", v.index, v.path, v.reason))
        .collect();
    Some(
        OpsError::new(
            sluice_wire::ErrorCode::SchemaViolation,
            format!(
                "{} schema violation(s); nothing was stored: {}",
                violations.len(),
                summary.join("; ")
            ),
        )
        .with_details(Details::Violations(violations)),
    )
}

/// Runs a schema check on a blocking thread: a schema's patterns may run over megabytes of
/// strings, which must not hold an async thread. A check that panicked is `unavailable`.
pub(crate) async fn schema_check<T: Send + 'static>(
    check: impl FnOnce() -> T + Send + 'static,
) -> OpsResult<T> {
    tokio::task::spawn_blocking(check)
        .await
        .map_err(|_| OpsError::unavailable("the schema check failed; see the server log"))
}
