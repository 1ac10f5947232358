//! What every case needs: the store, the clock, and short forms of the common calls.

use std::sync::Arc;

use sluice_core::clock::{Clock, ManualClock, Millis};
use sluice_core::message::{ClaimedMessage, MessageStatus, NewMessage, Payload, Receipt};
use sluice_core::queue::{Backoff, QueueConfig};
use sluice_core::store::{
    AckParams, Claim, ClaimParams, EnqueueParams, Enqueued, MessageGetParams, MessageRef,
    NackParams, QueuePutParams, Store, StoreResult,
};
use sluice_core::store::{GiveBackParams, LeaseError, NackOutcome};
use uuid::Uuid;

/// A store under test and the clock the case moves.
pub struct Harness {
    /// The store, seen only through its trait.
    pub store: Arc<dyn Store>,
    /// The case's time; it moves only when the case says.
    pub clock: ManualClock,
    reopen: Option<crate::Reopen>,
}

impl Harness {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        clock: ManualClock,
        reopen: Option<crate::Reopen>,
    ) -> Self {
        Self {
            store,
            clock,
            reopen,
        }
    }

    /// Closes the store and opens it again on what it keeps (a restart of the server): the
    /// store to go on with, which the case closes at its end. Panics when the backend did not
    /// say how ([`crate::Opened::reopening`]).
    pub async fn reopen(&self) -> Arc<dyn Store> {
        let reopen = self
            .reopen
            .as_ref()
            .expect("this case reopens the store: the backend's open must give Opened::reopening");
        self.store.close().await.expect("the store closes");
        reopen().await
    }

    /// Now, as the case's clock says.
    pub fn now(&self) -> Millis {
        self.clock.now_ms()
    }

    /// Moves the clock forward; returns the new time.
    pub fn advance(&self, ms: Millis) -> Millis {
        self.clock.advance(ms)
    }

    /// Creates `name` with the defaults (and so its `<name>.dlq`), a backoff without jitter
    /// (1 s, doubling) so retry times are exact, then whatever `edit` changes.
    pub async fn queue(&self, name: &str, edit: impl FnOnce(&mut QueueConfig)) {
        let mut config = QueueConfig::defaults_for(name);
        config.backoff = Backoff {
            jitter: false,
            ..Backoff::default()
        };
        edit(&mut config);
        self.store
            .queue_put(QueuePutParams {
                name: name.to_owned(),
                config,
                now_ms: self.now(),
            })
            .await
            .unwrap_or_else(|error| panic!("creating queue {name:?}: {error}"));
    }

    /// A message with `body`, a header, visible now, priority 0, no key.
    pub fn message(&self, body: &str) -> NewMessage {
        NewMessage {
            idempotency_key: None,
            payload: Arc::new(Payload {
                body_bytes: body.as_bytes().to_vec(),
                headers: [("origin".to_owned(), format!("conformance {body}"))].into(),
                ..Payload::default()
            }),
            key: None,
            priority: 0,
            visible_at_ms: self.now(),
            dead_letter: None,
        }
    }

    /// Enqueues, as one batch; the store's answer.
    pub async fn try_enqueue(
        &self,
        queue: &str,
        messages: Vec<NewMessage>,
    ) -> StoreResult<Vec<Enqueued>> {
        self.store
            .message_enqueue(EnqueueParams {
                queue: queue.to_owned(),
                messages,
                now_ms: self.now(),
            })
            .await
    }

    /// Enqueues, as one batch, which must succeed.
    pub async fn enqueue(&self, queue: &str, messages: Vec<NewMessage>) -> Vec<Enqueued> {
        self.try_enqueue(queue, messages)
            .await
            .unwrap_or_else(|error| panic!("enqueue to {queue:?}: {error}"))
    }

    /// Enqueues one message per body; their ids, in order.
    pub async fn send(&self, queue: &str, bodies: &[&str]) -> Vec<Uuid> {
        let messages = bodies.iter().map(|body| self.message(body)).collect();
        self.enqueue(queue, messages)
            .await
            .iter()
            .map(|enqueued| enqueued.message_id)
            .collect()
    }

    /// Claims up to `max` with the queue's visibility timeout.
    pub async fn claim(&self, queue: &str, max: usize) -> Claim {
        self.claim_with(queue, max, None).await
    }

    /// Claims up to `max` with a lease of `lease_ms`.
    pub async fn claim_for(&self, queue: &str, max: usize, lease_ms: Millis) -> Claim {
        self.claim_with(queue, max, Some(lease_ms)).await
    }

    /// Claims up to `max` with the queue's visibility timeout, taking runs of a lane's
    /// messages (`ClaimParams::lane_runs`, SQS's FIFO receive).
    pub async fn claim_runs(&self, queue: &str, max: usize) -> Claim {
        self.claim_params(queue, max, None, true).await
    }

    async fn claim_with(&self, queue: &str, max: usize, lease_ms: Option<Millis>) -> Claim {
        self.claim_params(queue, max, lease_ms, false).await
    }

    async fn claim_params(
        &self,
        queue: &str,
        max: usize,
        lease_ms: Option<Millis>,
        lane_runs: bool,
    ) -> Claim {
        self.store
            .message_claim(ClaimParams {
                lane_runs,
                queue: queue.to_owned(),
                max,
                lease_ms,
                now_ms: self.now(),
            })
            .await
            .unwrap_or_else(|error| panic!("claim from {queue:?}: {error}"))
    }

    /// Claims up to `max`; the bodies, as text, in delivery order.
    pub async fn claim_bodies(&self, queue: &str, max: usize) -> Vec<String> {
        bodies(&self.claim(queue, max).await.messages)
    }

    /// Acks one receipt; the store's answer for it.
    pub async fn ack(&self, queue: &str, receipt: Receipt) -> Result<(), LeaseError> {
        let mut results = self
            .store
            .message_ack(AckParams {
                queue: queue.to_owned(),
                receipts: vec![receipt],
                result: None,
                delivery: None,
                now_ms: self.now(),
            })
            .await
            .unwrap_or_else(|error| panic!("ack in {queue:?}: {error}"));
        assert_eq!(results.len(), 1, "one result per receipt");
        results.remove(0)
    }

    /// Gives every message's lease back (a release: no failure counted).
    pub async fn give_back_all(&self, queue: &str, messages: &[ClaimedMessage]) {
        for message in messages {
            self.store
                .message_give_back(GiveBackParams {
                    unstarted: false,
                    queue: queue.to_owned(),
                    receipt: message.receipt,
                    now_ms: self.now(),
                })
                .await
                .unwrap_or_else(|error| panic!("give back in {queue:?}: {error}"));
        }
    }

    /// Nacks one receipt with an error text.
    pub async fn nack(
        &self,
        queue: &str,
        receipt: Receipt,
        error: &str,
        delay_ms: Option<Millis>,
        permanent: bool,
    ) -> StoreResult<NackOutcome> {
        self.store
            .message_nack(NackParams {
                queue: queue.to_owned(),
                receipt,
                error: Some(error.to_owned()),
                delay_ms,
                permanent,
                delivery: None,
                now_ms: self.now(),
            })
            .await
    }

    /// Looks a message up through `queue`.
    pub async fn status(&self, queue: &str, by: MessageRef) -> Option<MessageStatus> {
        self.store
            .message_get(MessageGetParams {
                queue: queue.to_owned(),
                by,
                now_ms: self.now(),
            })
            .await
            .unwrap_or_else(|error| panic!("lookup in {queue:?}: {error}"))
    }

    /// Looks a message up by id through `queue`; it must be known.
    pub async fn status_of(&self, queue: &str, id: Uuid) -> MessageStatus {
        self.status(queue, MessageRef::Id(id))
            .await
            .unwrap_or_else(|| panic!("message {id} is unknown to {queue:?}"))
    }

    /// Runs the store's upkeep at the current time.
    pub async fn maintain(&self) {
        self.store
            .maintain(self.now())
            .await
            .unwrap_or_else(|error| panic!("maintain: {error}"));
    }
}

/// The bodies of claimed messages, as text, in order.
pub fn bodies(messages: &[ClaimedMessage]) -> Vec<String> {
    messages
        .iter()
        .map(|message| String::from_utf8_lossy(&message.payload.body_bytes).into_owned())
        .collect()
}
