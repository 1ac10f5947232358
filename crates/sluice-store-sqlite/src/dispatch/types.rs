//! The values the dispatch index hands out and takes: entries, the changes a store persists,
//! counters, depths and the results of its operations.

use std::sync::Arc;

use uuid::Uuid;

use sluice_core::clock::Millis;
use sluice_core::message::{ClaimedMessage, DeadLetterInfo, Payload};
use sluice_core::rules::retention;
use sluice_core::store::{DeadLetterFilter, Seq};

/// One message as the index knows it (no body unless cached).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Enqueue order.
    pub seq: Seq,
    /// Server-assigned id.
    pub id: Uuid,
    /// Current queue.
    pub queue: Arc<str>,
    /// Client idempotency key.
    pub idempotency_key: Option<Arc<str>>,
    /// Ordering key.
    pub key: Option<Arc<str>>,
    /// Higher first.
    pub priority: i32,
    /// Enqueue time.
    pub enqueued_at_ms: Millis,
    /// Invisible before this time.
    pub visible_at_ms: Millis,
    /// When it first became (or becomes) visible: its enqueue, or the end of the delay it was
    /// enqueued with. Retention counts from here, so a long delay does not eat into it.
    pub first_visible_at_ms: Millis,
    /// Deliveries in the current queue.
    pub attempts: u32,
    /// Leases ever granted (never reset), part of every receipt.
    pub lease_number: u32,
    /// First delivery in the current queue.
    pub first_received_at_ms: Option<Millis>,
    /// Error of the last failed attempt.
    pub last_error: Option<Arc<str>>,
    /// Body and headers, when the store chose to keep them in memory.
    pub payload: Option<Arc<Payload>>,
    /// Set once dead-lettered.
    pub dead_letter: Option<Arc<DeadLetterInfo>>,
    /// The token of a lease that ran out, which may still ack until the next delivery.
    pub(super) expired_lease_token: Option<u32>,
    /// When the current (or last) lease began.
    pub(super) leased_at_ms: Option<Millis>,
    pub(super) place: Place,
}

impl Entry {
    /// A new entry in `queue`; it is placed when inserted.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        seq: Seq,
        id: Uuid,
        queue: Arc<str>,
        priority: i32,
        key: Option<Arc<str>>,
        enqueued_at_ms: Millis,
        visible_at_ms: Millis,
    ) -> Self {
        Self {
            seq,
            id,
            queue,
            idempotency_key: None,
            key,
            priority,
            enqueued_at_ms,
            visible_at_ms,
            first_visible_at_ms: retention::first_visible_ms(enqueued_at_ms, visible_at_ms),
            attempts: 0,
            lease_number: 0,
            first_received_at_ms: None,
            last_error: None,
            payload: None,
            dead_letter: None,
            expired_lease_token: None,
            leased_at_ms: None,
            place: Place::Waiting,
        }
    }

    /// The time retention counts from: when it was dead-lettered for a dead-letter entry, when
    /// it first became visible otherwise.
    pub fn aged_from_ms(&self) -> Millis {
        retention::counts_from_ms(
            self.first_visible_at_ms,
            self.dead_letter.as_ref().map(|dead| dead.last_seen_at_ms),
        )
    }

    /// True while leased to a consumer.
    pub fn is_leased(&self) -> bool {
        matches!(self.place, Place::Leased { .. })
    }
}

/// Which of its queue's sets a message is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Ready,
    Delayed,
    Leased {
        deadline_ms: Millis,
        token: u32,
    },
    /// Behind the active message of its lane.
    Waiting,
}

/// A state change the store must make durable.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A failed attempt (nack or expired lease): visible again at `visible_at_ms`.
    Retried {
        seq: Seq,
        attempts: u32,
        visible_at_ms: Millis,
        last_error: Option<Arc<str>>,
    },
    /// Moved to the dead-letter queue `queue`, with attempts reset.
    DeadLettered {
        seq: Seq,
        queue: Arc<str>,
        info: Arc<DeadLetterInfo>,
    },
    /// Removed by retention.
    Expired { seq: Seq },
}

impl Change {
    /// The message the change is about.
    pub fn seq(&self) -> Seq {
        match self {
            Change::Retried { seq, .. }
            | Change::DeadLettered { seq, .. }
            | Change::Expired { seq } => *seq,
        }
    }
}

/// Why a cancel did not remove a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelRefused {
    /// The index holds no such message in that queue.
    NotHere,
    /// It is leased to a consumer right now.
    InFlight,
}

/// A page of dead-letter entries, newest first.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterPage {
    /// Matching entries.
    pub entries: Vec<Entry>,
    /// Where the next page starts, when the scan stopped before the end.
    pub next: Option<(Millis, Seq)>,
}

/// Whether `entry` is a dead letter `filter` selects.
pub(super) fn dead_letter_matches(filter: &DeadLetterFilter, entry: &Entry) -> bool {
    let Some(dead) = &entry.dead_letter else {
        return false;
    };
    if dead.source_queue != filter.source_queue {
        return false;
    }
    if filter
        .since_ms
        .is_some_and(|since| dead.last_seen_at_ms < since)
        || filter
            .until_ms
            .is_some_and(|until| dead.last_seen_at_ms >= until)
    {
        return false;
    }
    match &filter.error_contains {
        None => true,
        Some(needle) => dead
            .last_error
            .as_deref()
            .is_some_and(|error| error.to_lowercase().contains(&needle.to_lowercase())),
    }
}

/// One message leased by [`super::Index::claim`].
#[derive(Debug, Clone)]
pub struct Claimed {
    /// Its seq, for the store's records.
    pub seq: Seq,
    /// False when the payload was not held in memory: the store must fill it in.
    pub payload_cached: bool,
    /// The delivery.
    pub message: ClaimedMessage,
}
