//! Operator actions on a queue's messages: pause and resume, purge, cancel.

use crate::dispatch::CancelRefused;
use sluice_core::Millis;
use sluice_core::message::MessageState;
use sluice_core::store::Seq;
use sluice_core::store::{CancelOutcome, MessageGetParams, MessageRef, StoreError, StoreResult};
use tokio::sync::oneshot;

use crate::schema::{STATE_CANCELLED, STATE_PURGED};
use crate::writer::{self, IdempotencyRecord, PauseKind, WriteOp};
use crate::{PURGE_CHUNK_ROWS, SharedSqliteStore, SqliteStore};

/// Entries a purge takes out of the index per lock: deliveries go on between chunks.
const PURGE_INDEX_CHUNK: usize = 10_000;

impl SharedSqliteStore {
    /// The message a lookup names, resolving an idempotency key through its durable record
    /// (which also remembers the ack and result).
    pub(crate) async fn resolve(
        &self,
        queue: &str,
        by: MessageRef,
        now_ms: Millis,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        match by {
            MessageRef::Id(message_id) => Ok(Some(IdempotencyRecord {
                message_id,
                acked_at_ms: None,
                result: None,
            })),
            MessageRef::IdempotencyKey(key) => {
                let queue = queue.to_owned();
                self.0
                    .read(move |conn| writer::find_idempotent(conn, &queue, &key, now_ms))
                    .await
            }
        }
    }

    pub(crate) async fn pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        let store = &self.0;
        if store.index.lock().queue_config(name).is_none() {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        }
        let (reply, wait) = oneshot::channel();
        store.send(WriteOp::QueuePause {
            name: name.to_owned(),
            pause: PauseKind::Deliveries,
            paused,
            reply,
        })?;
        SqliteStore::wait(wait).await?;
        store.index.lock().set_paused(name, paused);
        if !paused {
            store.notifier.wake(name);
        }
        Ok(())
    }

    /// Pauses or resumes the server's push delivery of a queue, durably
    /// (`Store::queue_push_pause`).
    pub(crate) async fn push_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        let store = &self.0;
        if store.index.lock().queue_config(name).is_none() {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        }
        let (reply, wait) = oneshot::channel();
        store.send(WriteOp::QueuePause {
            name: name.to_owned(),
            pause: PauseKind::Push,
            paused,
            reply,
        })?;
        SqliteStore::wait(wait).await?;
        // Under the index lock, as a deletion clears it: a queue deleted meanwhile is not
        // marked again.
        let index = store.index.lock();
        let mut push_paused = store.push_paused.lock();
        if paused && index.queue_config(name).is_some() {
            push_paused.insert(name.to_owned());
        } else {
            push_paused.remove(name);
        }
        Ok(())
    }

    /// Removes every message of `name` not in flight, from a snapshot taken at the call: later
    /// enqueues stay. The index lets go in chunks, so deliveries of other queues go on.
    pub(crate) async fn purge(&self, name: &str, now_ms: Millis) -> StoreResult<u64> {
        let store = &self.0;
        let (snapshot, cold) = {
            let mut index = store.index.lock();
            if index.queue_config(name).is_none() {
                return Err(StoreError::QueueNotFound(name.to_owned()));
            }
            // What waits on disk goes too (`paging.rs`), taken in the same instant.
            (index.members(name), index.take_cold(name))
        };
        let mut purged = 0;
        let mut waits = Vec::new();
        for chunk in snapshot.chunks(PURGE_INDEX_CHUNK) {
            let mut index = store.index.lock();
            let mut seqs: Vec<Seq> = index
                .remove_unleased(name, chunk, now_ms)
                .iter()
                .map(|entry| entry.seq)
                .collect();
            index.count_purged(name, seqs.len() as u64);
            purged += seqs.len() as u64;
            seqs.sort_unstable();
            // Sent under the lock, so the disk sees the removals in index order.
            for rows in seqs.chunks(PURGE_CHUNK_ROWS) {
                let (reply, wait) = oneshot::channel();
                store.send(WriteOp::Finish {
                    seqs: rows.to_vec(),
                    state: STATE_PURGED,
                    reason: None,
                    now_ms,
                    reply: Some(reply),
                })?;
                waits.push(wait);
            }
        }
        // Every chunk's answer: a failed one must not hide behind a later one that succeeded.
        for wait in waits {
            SqliteStore::wait(wait).await?;
        }
        if !cold.is_empty() {
            let cold_purged = self.purge_cold(name, cold, now_ms).await?;
            store.index.lock().count_purged(name, cold_purged);
            purged += cold_purged;
        }
        Ok(purged)
    }

    pub(crate) async fn cancel(
        &self,
        params: MessageGetParams,
        reason: Option<String>,
    ) -> StoreResult<CancelOutcome> {
        let store = &self.0;
        if store.index.lock().queue_config(&params.queue).is_none() {
            return Err(StoreError::QueueNotFound(params.queue));
        }
        let Some(id) = self
            .resolve(&params.queue, params.by.clone(), params.now_ms)
            .await?
            .map(|record| record.message_id)
        else {
            return Ok(CancelOutcome::NotFound);
        };
        let wait = {
            let mut index = store.index.lock();
            match index.cancel(&params.queue, &id, params.now_ms) {
                Ok(entry) => {
                    let (reply, wait) = oneshot::channel();
                    store.send(WriteOp::Finish {
                        seqs: vec![entry.seq],
                        state: STATE_CANCELLED,
                        reason: reason.clone(),
                        now_ms: params.now_ms,
                        reply: Some(reply),
                    })?;
                    Some(wait)
                }
                Err(CancelRefused::InFlight) => {
                    return Ok(CancelOutcome::AlreadyProcessing { message_id: id });
                }
                Err(CancelRefused::NotHere) => None,
            }
        };
        if wait.is_none()
            && self
                .cancel_cold(&params.queue, id, reason, params.now_ms)
                .await?
        {
            return Ok(CancelOutcome::Cancelled { message_id: id });
        }
        if let Some(wait) = wait {
            SqliteStore::wait(wait).await?;
            // The next message of its lane may be ready now.
            store.notifier.wake(&params.queue);
            return Ok(CancelOutcome::Cancelled { message_id: id });
        }
        // Not live in this queue: dead-lettered, finished, or not this queue's at all.
        let status = sluice_core::Store::message_get(
            self,
            MessageGetParams {
                queue: params.queue,
                by: MessageRef::Id(id),
                now_ms: params.now_ms,
            },
        )
        .await?;
        Ok(match status {
            // A dead letter someone is consuming from the dead-letter queue.
            Some(status) if status.state == MessageState::InFlight => {
                CancelOutcome::AlreadyProcessing { message_id: id }
            }
            Some(status) => CancelOutcome::AlreadyCompleted {
                message_id: id,
                state: status.state,
            },
            None => CancelOutcome::NotFound,
        })
    }
}
