//! Messages as the core and the stores see them (not serializable: the API's shapes are `sluice_wire`'s).

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::clock::Millis;

/// Position in global enqueue order, assigned by the store; FIFO order within a priority.
pub type Seq = u64;

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary (error
/// texts and keys are cut to their limits this way, never inside a UTF-8 sequence).
pub fn cut_utf8(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// String headers carried with a message.
pub type Headers = BTreeMap<String, String>;

/// What a message body is: it decides how the API shows it (`body` or `body_base64`), the
/// content type of a push, and whether a schema can check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BodyKind {
    /// JSON text (`body`), valid when it was stored.
    #[default]
    Json,
    /// Opaque bytes (`body_base64`).
    Bytes,
}

/// What a consumer receives besides the delivery metadata: body and headers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Payload {
    /// The body exactly as stored.
    pub body_bytes: Vec<u8>,
    /// JSON text or opaque bytes.
    pub body_kind: BodyKind,
    /// Headers given at enqueue.
    pub headers: Headers,
}

impl Payload {
    /// Size of the body plus headers, for memory accounting.
    pub fn weight_bytes(&self) -> usize {
        self.body_bytes.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
    }
}

/// A message to enqueue, validated.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// Client idempotency key.
    pub idempotency_key: Option<String>,
    /// Body and headers.
    pub payload: Arc<Payload>,
    /// Ordering key for `per_key` queues.
    pub key: Option<String>,
    /// Higher first.
    pub priority: i32,
    /// Invisible before this time.
    pub visible_at_ms: Millis,
    /// Set to store the message straight into a dead-letter queue (e.g. a webhook whose body
    /// fails its queue's schema): enqueue it to that DLQ with this metadata.
    pub dead_letter: Option<DeadLetterInfo>,
}

/// Where a message is now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageState {
    /// Visible and waiting for a consumer.
    Ready,
    /// Not visible until a later time (a delay or a retry backoff).
    Delayed,
    /// Leased to a consumer.
    InFlight,
    /// Acknowledged: done.
    Acked,
    /// Moved to a dead-letter queue.
    Dead,
    /// Removed by retention (`max_age_ms`).
    Expired,
    /// Cancelled before delivery.
    Cancelled,
    /// Removed by a purge.
    Purged,
    /// A dead letter that was replayed as a new message (`replayed_as`).
    Replayed,
    /// A dead letter an operator deleted.
    Deleted,
}

impl MessageState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MessageState::Ready => "ready",
            MessageState::Delayed => "delayed",
            MessageState::InFlight => "in_flight",
            MessageState::Acked => "acked",
            MessageState::Dead => "dead",
            MessageState::Expired => "expired",
            MessageState::Cancelled => "cancelled",
            MessageState::Purged => "purged",
            MessageState::Replayed => "replayed",
            MessageState::Deleted => "deleted",
        }
    }

    /// True for states a message never leaves.
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            MessageState::Ready
                | MessageState::Delayed
                | MessageState::InFlight
                | MessageState::Dead
        )
    }
}

/// Where a dead-lettered message came from and why it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterInfo {
    /// The queue it failed in.
    pub source_queue: String,
    /// The error of the last failed attempt.
    pub last_error: Option<String>,
    /// Attempts made in the source queue.
    pub attempts: u32,
    /// First delivery in the source queue (or enqueue time if never delivered).
    pub first_seen_at_ms: Millis,
    /// When it was dead-lettered.
    pub last_seen_at_ms: Millis,
}

/// A lease handle given with each delivery.
///
/// Text form: `<message uuid>.<lease number>.<token>`. The lease number grows with every
/// delivery of the message and the token is random, so a receipt from an earlier delivery never
/// matches the current lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Receipt {
    /// The message it leases.
    pub message_id: Uuid,
    /// Which delivery of the message this is (counts every lease since enqueue).
    pub lease_number: u32,
    /// Random, so receipts cannot be guessed from ids.
    pub token: u32,
}

impl Receipt {
    /// Parses the text form; `None` when it is not a receipt at all.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.');
        let message_id = Uuid::try_parse(parts.next()?).ok()?;
        let lease_number = parts.next()?.parse().ok()?;
        let token = u32::from_str_radix(parts.next()?, 16).ok()?;
        if parts.next().is_some() {
            return None;
        }
        Some(Self {
            message_id,
            lease_number,
            token,
        })
    }
}

impl std::fmt::Display for Receipt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}.{}.{:08x}",
            self.message_id.as_simple(),
            self.lease_number,
            self.token
        )
    }
}

/// A message handed out by a claim.
#[derive(Debug, Clone)]
pub struct ClaimedMessage {
    /// Server-assigned id.
    pub message_id: Uuid,
    /// The lease handle for ack, nack and extend.
    pub receipt: Receipt,
    /// Body and headers.
    pub payload: Arc<Payload>,
    /// Client idempotency key.
    pub idempotency_key: Option<String>,
    /// Ordering key.
    pub key: Option<String>,
    /// Priority it was enqueued with.
    pub priority: i32,
    /// This delivery's attempt number (1-based).
    pub attempts: u32,
    /// Enqueue time.
    pub enqueued_at_ms: Millis,
    /// First delivery time.
    pub first_received_at_ms: Millis,
    /// Error of the previous attempt, if any.
    pub last_error: Option<String>,
    /// When the lease runs out.
    pub lease_expires_at_ms: Millis,
    /// Set for messages in a dead-letter queue.
    pub dead_letter: Option<DeadLetterInfo>,
}

/// Everything known about one message, for lookups.
#[derive(Debug, Clone)]
pub struct MessageStatus {
    /// Server-assigned id.
    pub message_id: Uuid,
    /// The queue it is in now (a dead-letter queue once dead).
    pub queue: String,
    /// Where it is.
    pub state: MessageState,
    /// Client idempotency key.
    pub idempotency_key: Option<String>,
    /// Ordering key.
    pub key: Option<String>,
    /// Priority.
    pub priority: i32,
    /// Deliveries so far.
    pub attempts: u32,
    /// Enqueue time.
    pub enqueued_at_ms: Millis,
    /// First delivery, if delivered.
    pub first_received_at_ms: Option<Millis>,
    /// When it becomes (or became) visible.
    pub visible_at_ms: Millis,
    /// Lease deadline while in flight.
    pub lease_expires_at_ms: Option<Millis>,
    /// Error of the last failed attempt.
    pub last_error: Option<String>,
    /// When it was acked.
    pub acked_at_ms: Option<Millis>,
    /// When it reached its final state (acked, expired, cancelled, purged, replayed, deleted).
    pub finished_at_ms: Option<Millis>,
    /// Set when it was dead-lettered.
    pub dead_letter: Option<DeadLetterInfo>,
    /// The result JSON its consumer acked it with.
    pub result: Option<String>,
    /// While an acked message keeps its body (its queue's `keep_acked_ms`): until when.
    pub kept_until_ms: Option<Millis>,
    /// For a replayed dead letter: the id of the new message.
    pub replayed_as: Option<Uuid>,
    /// Its failed attempts, oldest first (filled in by lookups that read the record).
    pub failures: Vec<Failure>,
}

impl MessageStatus {
    /// The status as a read at `now_ms` reports it, from a record read as stored: a keep that
    /// ended is none, whether or not the store's cleanup has dropped the body yet.
    pub fn kept_as_of(mut self, now_ms: Millis) -> Self {
        self.kept_until_ms = self.kept_until_ms.filter(|&until| until > now_ms);
        self
    }
}

/// One failed attempt, as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Failure {
    /// The attempt's number (in the queue it failed in).
    pub attempt: u32,
    /// When it was recorded, epoch ms.
    pub at: Millis,
    /// Its error.
    pub error: Option<String>,
    /// True when this failure sent the message to the dead-letter queue.
    #[serde(default)]
    pub dead_lettered: bool,
}

/// One push delivery attempt, as the delivery log keeps it: what was sent (secrets already
/// taken out by the server) and what came back. A message keeps its last few attempts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeliveryAttempt {
    /// The attempt's number (in the queue it was delivered from).
    pub attempt: u32,
    /// When the request was sent, epoch ms.
    pub at_ms: Millis,
    /// HTTP method.
    pub method: String,
    /// The destination URL without its secrets.
    pub url: String,
    /// Request headers, secret values hidden.
    pub request_headers: BTreeMap<String, String>,
    /// The answer's status; `None` when no answer came (a transport error, a timeout).
    pub status: Option<u16>,
    /// Why the attempt failed, when it did.
    pub error: Option<String>,
    /// The answer's headers (bounded).
    pub response_headers: BTreeMap<String, String>,
    /// True when some response headers were left out to keep the bound.
    pub response_headers_truncated: bool,
    /// The first bytes of the answer's body, as text.
    pub body_excerpt: Option<String>,
    /// True when the body was longer than the excerpt.
    pub body_truncated: bool,
    /// From sending the request to reading the excerpt, in ms.
    pub latency_ms: u64,
}

/// A delivery attempt to append to a message's delivery log, which keeps its last `keep`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryLogEntry {
    /// The attempt.
    pub attempt: DeliveryAttempt,
    /// Attempts the log keeps (older ones are dropped); at least 1.
    pub keep: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_round_trip_and_reject_garbage() {
        let receipt = Receipt {
            message_id: Uuid::now_v7(),
            lease_number: 3,
            token: 0xdead_beef,
        };
        assert_eq!(Receipt::parse(&receipt.to_string()), Some(receipt));
        for garbage in [
            "",
            "x",
            "abc.1.2",
            &format!("{}.x.1", Uuid::nil()),
            &format!("{}.1.zz", Uuid::nil()),
            &format!("{receipt}.1"),
        ] {
            assert_eq!(Receipt::parse(garbage), None, "{garbage}");
        }
    }
}
