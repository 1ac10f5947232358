//! Dead-letter operations: list, inspect, replay, delete.
//!
//! A queue's dead letters are the entries of its dead-letter queue that came from it. Listing
//! and selecting read the in-memory index (newest first by dead-letter time); bodies come from
//! disk. A replay copies the body row to row inside SQLite, so no body crosses the API.

use async_trait::async_trait;
use sluice_core::store::DeadLetterStore;
use std::sync::Arc;

use crate::dispatch::{Entry, Index};
use sluice_core::Millis;
use sluice_core::message::MessageState;
use sluice_core::store::Seq;
use sluice_core::store::{
    DeadLetter, DeadLetterQuery, DeadLetterSelection, DeadLetters, Replay, ReplayParams,
    StoreError, StoreResult,
};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::reads::{read_payloads, read_status};
use crate::schema::STATE_DELETED;
use crate::writer::{ReplayItem, WriteOp};
use crate::{PURGE_CHUNK_ROWS, SharedSqliteStore, SqliteStore};
use sluice_core::stored::ids;

/// Entries one list call looks at before it answers with a cursor.
const LIST_SCAN_MAX: usize = 100_000;

/// The interned dead-letter queue of `queue`.
fn dead_letter_queue(index: &Index, queue: &str) -> StoreResult<Arc<str>> {
    let config = index
        .queue_config(queue)
        .ok_or_else(|| StoreError::QueueNotFound(queue.to_owned()))?;
    let dlq = config
        .dead_letter_queue
        .as_deref()
        .ok_or_else(|| StoreError::Conflict(format!("queue {queue:?} has no dead-letter queue")))?;
    // Created lazily by the first dead-letter move when it was deleted meanwhile.
    Ok(index.queue_name(dlq).unwrap_or_else(|| Arc::from(dlq)))
}

/// The live, unleased dead letters of `queue` a selection names, oldest first, at most `limit`;
/// and whether more match.
fn select(
    index: &Index,
    dlq: &str,
    queue: &str,
    selection: &DeadLetterSelection,
    limit: usize,
) -> (Vec<Entry>, bool) {
    match selection {
        DeadLetterSelection::Ids(ids) => {
            let mut entries: Vec<Entry> = ids
                .iter()
                .filter_map(|id| index.entry(index.seq_of(id)?))
                .filter(|entry| {
                    &*entry.queue == dlq
                        && !entry.is_leased()
                        && entry
                            .dead_letter
                            .as_ref()
                            .is_some_and(|dead| dead.source_queue == queue)
                })
                .cloned()
                .collect();
            entries.sort_by_key(|entry| (entry.aged_from_ms(), entry.seq));
            entries.dedup_by_key(|entry| entry.seq);
            let more = entries.len() > limit;
            entries.truncate(limit);
            (entries, more)
        }
        DeadLetterSelection::Matching(filter) => {
            let mut entries = index.dead_letters_oldest_first(dlq, filter, limit.saturating_add(1));
            entries.retain(|entry| !entry.is_leased());
            let more = entries.len() > limit;
            entries.truncate(limit);
            (entries, more)
        }
    }
}

fn body_sizes(conn: &rusqlite::Connection, seqs: &[Seq]) -> rusqlite::Result<Vec<(Seq, u64)>> {
    let mut statement = conn.prepare_cached("SELECT length(body) FROM messages WHERE seq = ?1")?;
    let mut sizes = Vec::with_capacity(seqs.len());
    for &seq in seqs {
        let size: Option<i64> = statement
            .query_row([seq as i64], |row| row.get(0))
            .unwrap_or(None);
        sizes.push((seq, size.unwrap_or(0) as u64));
    }
    Ok(sizes)
}

#[async_trait]
impl DeadLetterStore for SharedSqliteStore {
    async fn dead_letter_list(&self, query: DeadLetterQuery) -> StoreResult<DeadLetters> {
        let store = &self.0;
        let (dlq, mut entries, next) = {
            let index = store.index.lock();
            let dlq = dead_letter_queue(&index, &query.queue)?;
            let page = index.dead_letters(
                &dlq,
                &query.filter,
                query.before,
                query.limit,
                LIST_SCAN_MAX,
            );
            let entries: Vec<(Seq, DeadLetter)> = page
                .entries
                .iter()
                .filter_map(|entry| {
                    let status = index.status(&entry.id)?;
                    Some((
                        entry.seq,
                        DeadLetter {
                            status,
                            payload: None,
                            body_bytes: entry.payload.as_ref().map(|p| p.body_bytes.len() as u64),
                        },
                    ))
                })
                .collect();
            (dlq, entries, page.next)
        };
        let unsized_seqs: Vec<Seq> = entries
            .iter()
            .filter(|(_, entry)| entry.body_bytes.is_none())
            .map(|(seq, _)| *seq)
            .collect();
        if !unsized_seqs.is_empty() {
            let sizes = store
                .read(move |conn| body_sizes(conn, &unsized_seqs))
                .await?;
            for (seq, entry) in &mut entries {
                if entry.body_bytes.is_none() {
                    entry.body_bytes = sizes.iter().find(|(s, _)| s == seq).map(|(_, n)| *n);
                }
            }
        }
        Ok(DeadLetters {
            dead_letter_queue: dlq.to_string(),
            entries: entries.into_iter().map(|(_, entry)| entry).collect(),
            next,
        })
    }

    async fn dead_letter_get(&self, queue: &str, id: Uuid) -> StoreResult<Option<DeadLetter>> {
        let store = &self.0;
        let (live, cached) = {
            let index = store.index.lock();
            dead_letter_queue(&index, queue)?;
            let live = index.status(&id);
            let cached = index.seq_of(&id).and_then(|seq| index.payload_of(seq));
            (live, cached)
        };
        let Some(seq) = ids::decode(&id) else {
            return Ok(None);
        };
        let (stored, payload) = store
            .read(move |conn| {
                let status = read_status(conn, id)?;
                let payload = read_payloads(conn, &[seq])?
                    .pop()
                    .map(|(_, payload)| payload);
                Ok((status, payload))
            })
            .await?;
        // The index knows live state (in flight, dead); the record knows final states.
        let status = match (live, stored) {
            (Some(live), _) => live,
            (None, Some(stored)) => stored,
            (None, None) => return Ok(None),
        };
        let is_dead_letter = status
            .dead_letter
            .as_ref()
            .is_some_and(|dead| dead.source_queue == queue);
        if !is_dead_letter || matches!(status.state, MessageState::Ready | MessageState::Delayed) {
            return Ok(None);
        }
        let payload = cached.map(|p| (*p).clone()).or(payload);
        Ok(Some(DeadLetter {
            body_bytes: payload.as_ref().map(|p| p.body_bytes.len() as u64),
            payload,
            status,
        }))
    }

    async fn dead_letter_replay(&self, params: ReplayParams) -> StoreResult<Replay> {
        let store = &self.0;
        let target_name = params
            .target_queue
            .clone()
            .unwrap_or_else(|| params.queue.clone());
        let (items, matched, more, target, dedup_window_ms, ids) = {
            let mut index = store.index.lock();
            let dlq = dead_letter_queue(&index, &params.queue)?;
            let target = index
                .queue_name(&target_name)
                .ok_or_else(|| StoreError::QueueNotFound(target_name.clone()))?;
            let dedup_window_ms = index
                .queue_config(&target)
                .map_or(0, |config| config.dedup_window_ms);
            if params.dry_run {
                let (all, _) = select(&index, &dlq, &params.queue, &params.selection, usize::MAX);
                return Ok(Replay {
                    matched: all.len() as u64,
                    replayed: Vec::new(),
                    more: false,
                });
            }
            // A replay copies bodies: refused on a full disk before the index lets go of them.
            if let Some(refused) = store.health.refusal(true) {
                return Err(refused);
            }
            let (chosen, more) =
                select(&index, &dlq, &params.queue, &params.selection, params.limit);
            let seqs: Vec<Seq> = chosen.iter().map(|entry| entry.seq).collect();
            // Out of the index at once, so a second replay cannot take them too.
            let taken = index.remove_unleased(&dlq, &seqs, params.now_ms);
            let ids: Vec<Uuid> = taken.iter().map(|entry| entry.id).collect();
            let items: Vec<ReplayItem> = taken
                .into_iter()
                .map(|entry| ReplayItem {
                    seq: entry.seq,
                    idempotency_key: entry.idempotency_key,
                    key: entry.key,
                    priority: entry.priority,
                    payload: entry.payload,
                })
                .collect();
            (
                items,
                chosen.len() as u64,
                more,
                target,
                dedup_window_ms,
                ids,
            )
        };
        if items.is_empty() {
            return Ok(Replay {
                matched,
                replayed: Vec::new(),
                more,
            });
        }
        let (reply, wait) = oneshot::channel();
        store.send(WriteOp::Replay {
            target,
            items,
            dedup_window_ms,
            now_ms: params.now_ms,
            reply,
        })?;
        let results = SqliteStore::wait(wait).await?;
        let replayed = ids
            .into_iter()
            .zip(results)
            .filter(|(_, result)| result.created)
            .map(|(dead, result)| (dead, result.message_id))
            .collect();
        Ok(Replay {
            matched,
            replayed,
            more,
        })
    }

    async fn dead_letter_delete(
        &self,
        queue: &str,
        selection: DeadLetterSelection,
        now_ms: Millis,
    ) -> StoreResult<u64> {
        let store = &self.0;
        let mut deleted = 0;
        let mut waits = Vec::new();
        loop {
            let more = {
                let mut index = store.index.lock();
                let dlq = dead_letter_queue(&index, queue)?;
                let (chosen, more) = select(&index, &dlq, queue, &selection, PURGE_CHUNK_ROWS);
                let seqs: Vec<Seq> = chosen.iter().map(|entry| entry.seq).collect();
                let mut seqs: Vec<Seq> = index
                    .remove_unleased(&dlq, &seqs, now_ms)
                    .iter()
                    .map(|entry| entry.seq)
                    .collect();
                seqs.sort_unstable();
                deleted += seqs.len() as u64;
                if !seqs.is_empty() {
                    let (reply, wait) = oneshot::channel();
                    store.send(WriteOp::Finish {
                        seqs,
                        state: STATE_DELETED,
                        reason: None,
                        now_ms,
                        reply: Some(reply),
                    })?;
                    waits.push(wait);
                }
                more
            };
            if !more {
                break;
            }
        }
        // Every chunk's answer: a failed one must not hide behind a later one that succeeded.
        for wait in waits {
            SqliteStore::wait(wait).await?;
        }
        Ok(deleted)
    }
}
