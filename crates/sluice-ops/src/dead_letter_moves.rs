//! Moving a dead-letter queue's messages out: every message in it, however it got there. SQS's
//! message move task is built on it (AWS moves "the messages of the source queue", not only
//! those its redrive policy put there).
//!
//! A step moves what it can in one go, in this order:
//! 1. the dead letters of each queue whose dead-letter queue this is, by replay (each becomes
//!    a new message of the destination, or of the queue it failed in, and its record names the
//!    new message: `replayed_as`);
//! 2. with a destination, whatever else is ready in the queue (messages sent straight to it,
//!    dead letters of a queue that no longer names it): each is received and acked with the
//!    copy as its next step, so the copy and the removal are one commit and a crash between
//!    the two leaves the message where it was (its lease ends and the next step takes it).
//!
//! Without a destination, what is left after step 1 has no queue to go back to: it stays, and
//! the step says how many such messages are ready (SQS's `CouldNotDetermineMessageSource`).

use sluice_core::message::ClaimedMessage;
use sluice_core::queue::limits;

use crate::dead_letters::{DeadLetterMatch, ReplayRequest};
use crate::delivery::{AckRequest, NextStep, ReceiveRequest};
use crate::enqueue::MessageRequest;
use crate::{Anyone, Caller, Ops, OpsResult};

/// Lease of a message step 2 moves: long enough for one ack with its next step.
const MOVE_LEASE_MS: i64 = 30_000;

/// One step of a move.
#[derive(Debug, Clone)]
pub struct MoveRequest {
    /// The dead-letter queue whose messages move.
    pub dead_letter_queue: String,
    /// Where every message goes; `None`: each dead letter back to the queue it failed in.
    pub destination: Option<String>,
    /// Most messages this step moves (1 to [`crate::REPLAY_LIMIT_MAX`]).
    pub limit: usize,
}

/// What one step of a move did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MoveStep {
    /// Messages moved by this step.
    pub moved: u64,
    /// Messages ready in the queue that have nowhere to go: no destination was given and no
    /// queue names this one as its dead-letter queue for them. Counted only when nothing else
    /// was left to move.
    pub unplaced: u64,
}

impl MoveStep {
    /// True when the move is over: nothing was moved by this step.
    pub fn is_last(&self) -> bool {
        self.moved == 0
    }
}

impl Ops {
    /// The queues whose dead-letter queue is `dead_letter_queue` that `caller` may read, by
    /// name.
    pub async fn dead_letter_sources(
        &self,
        caller: &dyn Caller,
        dead_letter_queue: &str,
    ) -> OpsResult<Vec<String>> {
        Ok(self
            .queue_list(caller)
            .await?
            .into_iter()
            .filter(|info| info.config.dead_letter_queue.as_deref() == Some(dead_letter_queue))
            .map(|info| info.name)
            .collect())
    }

    /// Messages a move of `dead_letter_queue` would take now: those ready in it.
    pub async fn dead_letter_queue_movable(&self, dead_letter_queue: &str) -> OpsResult<u64> {
        Ok(self.queue_get(dead_letter_queue).await?.depth.ready)
    }

    /// Moves up to `limit` messages of a dead-letter queue (the module's rule). A move runs
    /// steps until one [`MoveStep::is_last`].
    pub async fn dead_letter_queue_move(&self, request: MoveRequest) -> OpsResult<MoveStep> {
        let limit = request.limit.clamp(1, crate::REPLAY_LIMIT_MAX);
        for source in self
            .dead_letter_sources(&Anyone, &request.dead_letter_queue)
            .await?
        {
            let replayed = self
                .dead_letter_replay(ReplayRequest {
                    queue: source,
                    ids: None,
                    matching: DeadLetterMatch::default(),
                    limit: Some(limit),
                    dry_run: false,
                    target_queue: request.destination.clone(),
                })
                .await?
                .replayed;
            if replayed > 0 {
                return Ok(MoveStep {
                    moved: replayed,
                    unplaced: 0,
                });
            }
        }
        let Some(destination) = request.destination else {
            return Ok(MoveStep {
                moved: 0,
                unplaced: self
                    .dead_letter_queue_movable(&request.dead_letter_queue)
                    .await?,
            });
        };
        let claimed = self
            .receive(ReceiveRequest {
                lane_runs: false,
                queue: request.dead_letter_queue.clone(),
                max: Some(limit.min(limits::RECEIVE_MAX) as i64),
                wait_ms: None,
                visibility_timeout_ms: Some(MOVE_LEASE_MS),
            })
            .await?;
        let mut moved = 0;
        let mut claimed = claimed.into_iter();
        while let Some(message) = claimed.next() {
            let receipt = message.receipt.to_string();
            if let Err(error) = self
                .move_one(&request.dead_letter_queue, &destination, message)
                .await
            {
                // The destination refused it (full, its schema, gone): what this step holds
                // goes back at once rather than when its lease ends, without a failure counted.
                for receipt in std::iter::once(receipt)
                    .chain(claimed.map(|message| message.receipt.to_string()))
                {
                    let _ = self
                        .extend(request.dead_letter_queue.clone(), &receipt, 0)
                        .await;
                }
                return Err(error);
            }
            moved += 1;
        }
        Ok(MoveStep { moved, unplaced: 0 })
    }

    /// Acks `message` with its copy in `destination` as the next step: one commit.
    async fn move_one(
        &self,
        from: &str,
        destination: &str,
        message: ClaimedMessage,
    ) -> OpsResult<()> {
        let payload = &message.payload;
        let copy = MessageRequest {
            body: (payload.body_bytes.clone(), payload.body_kind),
            // Its idempotency id stays behind: the destination may still remember it, and
            // would take the copy for a duplicate.
            id: None,
            key: message.key.clone(),
            headers: Some(payload.headers.clone()).filter(|headers| !headers.is_empty()),
            priority: Some(message.priority),
            delay_ms: None,
            not_before: None,
        };
        self.ack(AckRequest {
            queue: from.to_owned(),
            receipts: vec![message.receipt.to_string()],
            result: None,
            then: vec![NextStep {
                queue: destination.to_owned(),
                message: copy,
            }],
        })
        .await?;
        Ok(())
    }
}
