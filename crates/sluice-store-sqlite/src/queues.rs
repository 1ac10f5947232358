//! Queues: define or update, look up, list and delete; pause and resume (deliveries or push);
//! purge.
//!
//! The index changes and the write is queued under one lock, so the disk sees definitions and
//! deletions in the order the index made them.

use crate::schema::STATE_PURGED;
use crate::writer::PauseKind;
use async_trait::async_trait;
use sluice_core::store::{PurgeScope, QueueStore, Seq};
use std::sync::Arc;

use crate::dispatch::Index;
use sluice_core::Millis;
use sluice_core::queue::QueueConfig;
use sluice_core::store::{
    QueueBytes, QueueInfo, QueuePut, QueuePutParams, StoreError, StoreResult,
};
use tokio::sync::oneshot;

use crate::writer::WriteOp;
use crate::{PURGE_CHUNK_ROWS, SharedSqliteStore, SqliteStore};
use sluice_core::stored::StoredQueueConfig;

/// Entries a purge takes out of the index per lock: deliveries go on between chunks.
const PURGE_INDEX_CHUNK: usize = 10_000;

impl SqliteStore {
    fn queue_info(&self, index: &Index, name: &str, now_ms: Millis) -> StoreResult<QueueInfo> {
        let config = index
            .queue_config(name)
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))?;
        let depth = index.depth(name, now_ms).unwrap_or_default();
        let dead_letter_depth = config
            .dead_letter_queue
            .as_deref()
            .map(|dlq| index.queue_len(dlq));
        Ok(QueueInfo {
            name: name.to_owned(),
            config: (*config).clone(),
            depth,
            dead_letter_depth,
            is_push_paused: self.push_paused.lock().contains(name),
        })
    }
}

impl SharedSqliteStore {
    /// Writes a pause or resume of a queue's deliveries or push (refused for a queue that does
    /// not exist); returns once it is durable.
    async fn write_pause(&self, name: &str, pause: PauseKind, paused: bool) -> StoreResult<()> {
        let store = &self.0;
        if store.index.lock().queue_config(name).is_none() {
            return Err(StoreError::QueueNotFound(name.to_owned()));
        }
        let (reply, wait) = oneshot::channel();
        store.send(WriteOp::QueuePause {
            name: name.to_owned(),
            pause,
            paused,
            reply,
        })?;
        SqliteStore::wait(wait).await
    }
}

#[async_trait]
impl QueueStore for SharedSqliteStore {
    /// Whether another queue names this one as its dead-letter queue.
    async fn queue_is_dead_letter_queue(&self, name: &str) -> StoreResult<bool> {
        Ok(self.0.index.lock().is_dead_letter_queue(name))
    }

    /// Defines or updates a queue, creating the dead-letter queue it names when missing
    /// (`Store::queue_put`).
    async fn queue_put(&self, params: QueuePutParams) -> StoreResult<QueuePut> {
        let store = &self.0;
        // The index changes and the write is queued under one lock, so concurrent definitions
        // and deletions reach the disk in the order the index saw them (a deletion cannot slip
        // between a definition's write and its index update and leave a queue only in memory).
        // Enqueues to the new definition are queued behind its row.
        let (created, dead_letter_created, wait) = {
            let mut index = store.index.lock();
            let created = index.queue_config(&params.name).is_none();
            let dlq = params
                .config
                .dead_letter_queue
                .clone()
                .filter(|dlq| index.queue_config(dlq).is_none() && dlq != &params.name);
            if dlq.is_none()
                && index
                    .queue_config(&params.name)
                    .is_some_and(|stored| *stored == params.config)
            {
                // Nothing changes (a start applying the same config file): no write, so a start
                // on a full disk does not wait for one.
                return Ok(QueuePut {
                    created: false,
                    dead_letter_created: false,
                });
            }
            let mut queues = vec![(params.name.clone(), params.config.clone())];
            if let Some(dlq) = &dlq {
                queues.push((dlq.clone(), QueueConfig::for_dead_letter_queue(dlq)));
            }
            let rows = queues
                .iter()
                .map(|(name, config)| (name.clone(), StoredQueueConfig::to_json(config)))
                .collect();
            // Refuses an ordering change while messages are queued; nothing is written then.
            for (name, config) in queues {
                index
                    .queue_put(&name, config)
                    .map_err(StoreError::Conflict)?;
            }
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::QueuePut {
                queues: rows,
                now_ms: params.now_ms,
                reply,
            })?;
            (created, dlq.is_some(), wait)
        };
        SqliteStore::wait(wait).await?;
        Ok(QueuePut {
            created,
            dead_letter_created,
        })
    }

    /// A queue with its settings and depth.
    async fn queue_get(&self, name: &str, now_ms: Millis) -> StoreResult<QueueInfo> {
        let index = self.0.index.lock();
        self.0.queue_info(&index, name, now_ms)
    }

    /// A queue's settings.
    async fn queue_config(&self, name: &str) -> StoreResult<Arc<QueueConfig>> {
        self.0
            .index
            .lock()
            .queue_config(name)
            .ok_or_else(|| StoreError::QueueNotFound(name.to_owned()))
    }

    /// Every queue, by name.
    async fn queue_list(&self, now_ms: Millis) -> StoreResult<Vec<QueueInfo>> {
        let index = self.0.index.lock();
        index
            .queue_names()
            .iter()
            .map(|name| self.0.queue_info(&index, name, now_ms))
            .collect()
    }

    /// The body bytes of every queue that stores any. `length` of a blob reads its size from the
    /// record header, not its pages (the body is the row's last column since schema 9).
    async fn queue_bytes(&self, now_ms: Millis) -> StoreResult<Vec<QueueBytes>> {
        self.0
            .read(move |conn| {
                let mut statement = conn.prepare_cached(
                    "SELECT queue,
                        COALESCE(SUM(CASE WHEN state = ?1 THEN length(body) END), 0),
                        COALESCE(SUM(CASE WHEN state = ?2 AND kept_until > ?3 THEN length(body) END), 0)
                     FROM messages WHERE state = ?1 OR (state = ?2 AND kept_until > ?3)
                     GROUP BY queue ORDER BY queue",
                )?;
                let rows = statement.query_map(
                    rusqlite::params![crate::schema::STATE_LIVE, crate::schema::STATE_ACKED, now_ms],
                    |row| {
                        Ok(QueueBytes {
                            queue: row.get(0)?,
                            held: row.get::<_, i64>(1)?.max(0) as u64,
                            kept: row.get::<_, i64>(2)?.max(0) as u64,
                        })
                    },
                )?;
                rows.collect()
            })
            .await
    }

    /// Deletes a queue and its messages; refused while another queue dead-letters into it.
    /// Returns the messages removed.
    async fn queue_delete(&self, name: &str) -> StoreResult<u64> {
        let store = &self.0;
        let wait = {
            let mut index = store.index.lock();
            if index.queue_config(name).is_none() {
                return Err(StoreError::QueueNotFound(name.to_owned()));
            }
            let users: Vec<_> = index
                .queue_names()
                .into_iter()
                .filter(|other| {
                    &**other != name
                        && index
                            .queue_config(other)
                            .and_then(|c| c.dead_letter_queue.clone())
                            .as_deref()
                            == Some(name)
                })
                .collect();
            if !users.is_empty() {
                let users: Vec<&str> = users.iter().map(|u| &**u).collect();
                return Err(StoreError::Conflict(format!(
                    "queue {name:?} is the dead-letter queue of {}; delete those first",
                    users.join(", ")
                )));
            }
            // The rows go by primary key, a chunk per transaction, so a big queue never holds
            // the writer for long; the index already knows which rows are live. The queue row
            // goes with the first chunk: rows of a deleted queue left by a crash are removed at
            // the next start. Sent under the lock, so no later write can come between them.
            // What waits on disk (`paging.rs`) goes after the rows the index knows.
            let cold = index.take_cold(name);
            let mut seqs = index.queue_remove(name);
            store.push_paused.lock().remove(name);
            // In table order, each chunk touches few pages (the index hands them out unordered).
            seqs.sort_unstable();
            let mut chunks = seqs.chunks(PURGE_CHUNK_ROWS);
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::QueueDelete {
                name: name.to_owned(),
                seqs: chunks.next().unwrap_or_default().to_vec(),
                reply,
            })?;
            for chunk in chunks {
                store.send(WriteOp::Purge {
                    seqs: chunk.to_vec(),
                    reply: None,
                })?;
            }
            (wait, seqs.len() as u64, cold)
        };
        SqliteStore::wait(wait.0).await?;
        let cold = self.delete_cold(name, wait.2).await?;
        store.notifier.wake(name);
        Ok(wait.1 + cold)
    }

    async fn queue_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        let store = &self.0;
        self.write_pause(name, PauseKind::Deliveries, paused)
            .await?;
        store.index.lock().set_paused(name, paused);
        if !paused {
            store.notifier.wake(name);
        }
        Ok(())
    }

    /// Pauses or resumes the server's push delivery of a queue, durably
    /// (`Store::queue_push_pause`).
    async fn queue_push_pause(&self, name: &str, paused: bool) -> StoreResult<()> {
        let store = &self.0;
        self.write_pause(name, PauseKind::Push, paused).await?;
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

    /// Removes the messages of `name` that `scope` names, from a snapshot taken at the call:
    /// later enqueues stay. The index lets go in chunks, so deliveries of other queues go on.
    /// A purge of everything forgets the queue's idempotency ids after its messages went.
    async fn queue_purge(&self, name: &str, scope: PurgeScope, now_ms: Millis) -> StoreResult<u64> {
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
            let removed = match scope {
                PurgeScope::Waiting => index.remove_unleased(name, chunk, now_ms),
                PurgeScope::Everything => index.remove_members(name, chunk, now_ms),
            };
            let mut seqs: Vec<Seq> = removed.iter().map(|entry| entry.seq).collect();
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
        if scope == PurgeScope::Everything {
            let (reply, wait) = oneshot::channel();
            store.send(WriteOp::ForgetIds {
                queue: name.to_owned(),
                reply,
            })?;
            waits.push(wait);
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
}
