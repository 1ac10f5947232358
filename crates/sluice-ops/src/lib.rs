//! The queue operations of sluice, protocol-neutral.
//!
//! A protocol is a renderer; a store is a backend; the queue's rules live in ops and core.
//! Each operation here takes a typed request, applies every rule that is not pure (limits,
//! long polling, how a partly stale ack answers) over a [`Store`], and returns a typed
//! result or one [`OpsError`], whose code is the closed [`sluice_wire::ErrorCode`]. The
//! HTTP API parses, authorizes, calls [`Ops`] and renders; another protocol does the same.
//!
//! [`wait`] is the one "claim or wait" every waiting caller shares (receive, push, drain,
//! the embedded SDK), each with its own [`wait::Wait`] policy.
//!
//! `Ops` is the only way to the store above this crate: the server and the SDK's embedded
//! backend hand their store to [`Ops::new`] and keep no handle to it, so a protocol cannot
//! reach the store except through an operation here.

pub mod alerts;
mod browse;
pub mod caller;
mod dead_letter_moves;
mod dead_letters;
mod definitions;
mod delivery;
mod enqueue;
pub mod error;
mod events;
mod json_body;
mod lookups;
mod node;
mod push;
mod queues;
mod schedules;
pub mod wait;

pub use json_body::check_json_body;

use std::sync::Arc;

use sluice_core::{Clock, Millis, Store};
use tokio_util::sync::CancellationToken;

pub use browse::{AckedSearchRequest, BrowseRequest, Browsed};
pub use caller::{Anyone, Caller};
pub use dead_letter_moves::{MoveRequest, MoveStep};
pub use dead_letters::{
    DeadLetterListRequest, DeadLetterMatch, DeadLetterPage, REPLAY_LIMIT_MAX, ReplayRequest,
    Replayed,
};
pub use definitions::{Definable, DefinitionPut};
pub use delivery::{
    ACK_RECEIPTS_MAX, AckRequest, Acked, NEXT_STEPS_MAX, NackRequest, Nacked, NextStep,
    ReceiptAcked, ReceiveRequest, error_text, too_many_next_steps, too_many_receipts,
};
pub use enqueue::{
    Enqueue, EnqueueAnswer, MessageRequest, SchemaViolation, check_batch_len, content_key,
};
pub use error::{Details, OpsError};
pub use events::{DeadLettered, EventOutcome, EventRequest};
pub use lookups::CancelRequest;
pub use push::{PushAnswer, PushSettled, push_out_of_attempts, push_retry_delay_ms};
pub use queues::{
    Drained, OnDelete, Purged, QueueDeleted, QueuePutDone, QueuePutRequest,
    is_own_dead_letter_queue,
};
pub use schedules::{
    SCHEDULE_HEADER, SCHEDULED_AT_HEADER, SchedulePut, ScheduleView, SchedulesPassed,
};

/// What every operation returns.
pub type OpsResult<T> = Result<T, OpsError>;

/// The operations over one store, on one clock.
#[derive(Clone)]
pub struct Ops {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// Limits beyond a queue's own that an enqueue must pass (the server's tenant quotas).
    admission: Option<Arc<dyn Admission>>,
    /// Cancelled once shutdown begins: long polls and drains answer at once with what there
    /// is. Behind an `Arc` like the server's, since cloning a token locks its tree node.
    shutdown: Arc<CancellationToken>,
    /// The clock moves only when told (test-clock mode): waits do not follow the next change.
    manual_clock: bool,
}

impl std::fmt::Debug for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ops").finish_non_exhaustive()
    }
}

impl Ops {
    /// Operations over `store`, reading time from `clock`, ending waits on `shutdown`.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        shutdown: Arc<CancellationToken>,
    ) -> Self {
        Self {
            store,
            clock,
            admission: None,
            shutdown,
            manual_clock: false,
        }
    }

    /// These operations on a clock that moves only when told ([`sluice_core::ManualClock`]):
    /// a long poll then sleeps until a wake-up or its deadline, since nothing becomes due by
    /// itself.
    #[must_use]
    pub fn on_manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }

    /// These operations with `admission` deciding every enqueue made through
    /// [`Ops::enqueue_to`] (HTTP, gRPC, SQS, topics, next steps, schedules) after the queue's
    /// own limits.
    #[must_use]
    pub fn with_admission(mut self, admission: Arc<dyn Admission>) -> Self {
        self.admission = Some(admission);
        self
    }

    /// Now, by the operations' clock.
    pub fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }
}

/// An RFC 3339 time a client gave as `field`.
pub(crate) fn parse_time(field: &str, text: Option<&str>) -> OpsResult<Option<Millis>> {
    text.map(|text| {
        sluice_wire::parse_rfc3339(text).ok_or_else(|| {
            OpsError::invalid_field(format!("{field}: {text:?} is not an RFC 3339 time"))
        })
    })
    .transpose()
}

/// Refuses a new definition of `kind` when `defined` of them exist already
/// ([`sluice_core::queue::limits::DEFINITIONS_PER_KIND_MAX`]): 409 `conflict`, saying to delete
/// one first.
pub(crate) fn room_for_definition(kind: &str, defined: usize) -> OpsResult<()> {
    let max = sluice_core::queue::limits::DEFINITIONS_PER_KIND_MAX;
    if defined >= max {
        return Err(OpsError::new(
            sluice_wire::ErrorCode::Conflict,
            format!("{defined} {kind} are defined; at most {max} are allowed: delete one first"),
        ));
    }
    Ok(())
}

/// Decides whether a queue may take more messages beyond its own limits (`max_depth`,
/// message size): a quota over several queues, such as a tenant's `max_messages`,
/// `max_bytes` and `max_kept_bytes`.
pub trait Admission: Send + Sync + std::fmt::Debug {
    /// `Ok` when `queue` (configured as `config`) may take `count` more messages of `bytes`
    /// body bytes in all now; the refusal to answer otherwise.
    fn admit(
        &self,
        queue: &str,
        config: &sluice_core::queue::QueueConfig,
        count: usize,
        bytes: u64,
    ) -> OpsResult<()>;
}
