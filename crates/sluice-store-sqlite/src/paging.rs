//! Reading a paged-out backlog back into the dispatch index (`sluice_core::dispatch`,
//! `paging.rs`, says which messages wait on disk and why every rule still holds).
//!
//! A page-in reads the next live messages of one queue and priority in seq order through the
//! `messages_live` index, on a reader connection, without the index lock; the index then takes
//! what is still cold. One page-in runs at a time (`pager`), so a claim that came up short
//! waits for the one under way instead of reading the same rows again.

use std::sync::Arc;

use crate::dispatch::{ColdRange, Entry, PageIn};
use rusqlite::{Connection, OptionalExtension, Row, params};
use sluice_core::Millis;
use sluice_core::store::Seq;
use sluice_core::store::StoreResult;
use uuid::Uuid;

use crate::SharedSqliteStore;
use crate::reads::{dead_letter_at, payload_at};
use crate::schema::{STATE_CANCELLED, STATE_LIVE, STATE_PURGED};
use crate::writer::WriteOp;

/// The columns [`entry_from_row`] reads, in its order.
pub(crate) const ENTRY_COLUMNS: &str = "seq, id, priority, msg_key, idempotency_key, visible_at, enqueued_at, attempts, first_received_at, last_error,
     dead_source_queue, dead_last_error, dead_attempts, dead_first_seen_at, dead_last_seen_at, first_visible_at";

/// The live rows of one queue and priority in a seq range, in seq order, at most a limit
/// (parameters: queue, priority, live state, after, up to, limit): what `messages_live` finds.
const RANGE_ROWS: &str = "FROM messages
     WHERE queue = ?1 AND priority = ?2 AND state = ?3 AND seq > ?4 AND seq <= ?5
     ORDER BY seq LIMIT ?6";

/// Rows a purge or a queue deletion takes from a cold range per write.
const COLD_REMOVAL_CHUNK: usize = 5_000;

/// The index entry of a live row of `queue` read with [`ENTRY_COLUMNS`]; `None` for an id this
/// store cannot read.
pub(crate) fn entry_from_row(row: &Row<'_>, queue: Arc<str>) -> rusqlite::Result<Option<Entry>> {
    let id: Vec<u8> = row.get(1)?;
    let Ok(id) = Uuid::from_slice(&id) else {
        return Ok(None);
    };
    let mut entry = Entry::new(
        row.get::<_, i64>(0)? as Seq,
        id,
        queue,
        row.get(2)?,
        row.get::<_, Option<String>>(3)?.map(Arc::from),
        row.get(6)?,
        row.get(5)?,
    );
    entry.idempotency_key = row.get::<_, Option<String>>(4)?.map(Arc::from);
    entry.attempts = row.get(7)?;
    entry.lease_number = entry.attempts;
    entry.first_received_at_ms = row.get(8)?;
    entry.last_error = row.get::<_, Option<String>>(9)?.map(Arc::from);
    entry.dead_letter = dead_letter_at(row, 10)?.map(Arc::new);
    entry.first_visible_at_ms = row
        .get::<_, Option<Millis>>(15)?
        .unwrap_or(entry.enqueued_at_ms);
    Ok(Some(entry))
}

/// The live messages a page-in asks for, in seq order; with their bodies when `bodies` (the
/// payload cache has room), so their deliveries need no read of their own.
fn read_page(conn: &Connection, request: &PageIn, bodies: bool) -> rusqlite::Result<Vec<Entry>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {ENTRY_COLUMNS}, body, body_kind, headers {RANGE_ROWS}"
    ))?;
    let mut rows = statement.query(params![
        &*request.queue,
        request.priority,
        STATE_LIVE,
        request.after as i64,
        request.upto as i64,
        request.limit as i64
    ])?;
    let mut entries = Vec::with_capacity(request.limit.min(10_000));
    while let Some(row) = rows.next()? {
        let Some(mut entry) = entry_from_row(row, request.queue.clone())? else {
            continue;
        };
        if bodies {
            entry.payload = Some(Arc::new(payload_at(row, 16)?));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// The seqs of up to `limit` live messages of a cold range after `from`.
fn read_cold_seqs(
    conn: &Connection,
    queue: &str,
    range: &ColdRange,
    from: Seq,
    limit: usize,
) -> rusqlite::Result<Vec<Seq>> {
    let mut statement = conn.prepare_cached(&format!("SELECT seq {RANGE_ROWS}"))?;
    statement
        .query_map(
            params![
                queue,
                range.priority,
                STATE_LIVE,
                from as i64,
                range.upto as i64,
                limit as i64
            ],
            |row| row.get::<_, i64>(0).map(|seq| seq as Seq),
        )?
        .collect()
}

impl SharedSqliteStore {
    /// Runs `requests` one after another and wakes the queue's waiters for what came in.
    pub(crate) async fn page_in(&self, requests: Vec<PageIn>, now_ms: Millis) {
        if requests.is_empty() {
            return;
        }
        let store = &self.0;
        let _pager = store.pager.lock().await;
        for request in requests {
            let read = request.clone();
            let bodies =
                store.index.lock().cached_payload_bytes() < store.options.payload_cache_bytes;
            match store.read(move |conn| read_page(conn, &read, bodies)).await {
                Ok(rows) => {
                    let loaded = store.index.lock().page_in(&request, rows, now_ms);
                    if loaded > 0 {
                        store.notifier.wake_for(&request.queue, loaded as u64);
                    }
                }
                Err(error) => {
                    tracing::warn!(queue = %request.queue, %error, "reading a paged-out backlog failed; trying again at the next claim");
                    store.index.lock().page_in_failed(&request);
                }
            }
        }
    }

    /// Page-ins in the background (the head is low, but a claim was served).
    pub(crate) fn page_in_soon(&self, requests: Vec<PageIn>, now_ms: Millis) {
        if requests.is_empty() {
            return;
        }
        let store = self.clone();
        tokio::spawn(async move { store.page_in(requests, now_ms).await });
    }

    /// Waits for the page-in under way, if any, then runs what `queue` still needs.
    pub(crate) async fn page_in_now(&self, queue: &str, now_ms: Millis) {
        // The page-in under way, if any, finishes before this one looks.
        drop(self.0.pager.lock().await);
        let requests = self.0.index.lock().page_ins_wanted(queue);
        self.page_in(requests, now_ms).await;
    }

    /// Upkeep: page in for every queue whose head ran low without a claim (retention,
    /// purges, cancels).
    pub(crate) async fn page_in_all(&self, now_ms: Millis) {
        let queues = self.0.index.lock().queues_with_cold();
        for queue in queues {
            self.page_in_now(&queue, now_ms).await;
        }
    }

    /// Cancels the message `id` of `queue` if it waits on disk; true when it did.
    pub(crate) async fn cancel_cold(
        &self,
        queue: &str,
        id: Uuid,
        reason: Option<String>,
        now_ms: Millis,
    ) -> StoreResult<bool> {
        let store = &self.0;
        let Some(seq) = sluice_core::stored::ids::decode(&id) else {
            return Ok(false);
        };
        let name = queue.to_owned();
        let priority: Option<i32> = store
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT priority FROM messages WHERE seq = ?1 AND id = ?2 AND queue = ?3 AND state = ?4",
                )?
                .query_row(params![seq as i64, id.as_bytes(), name, STATE_LIVE], |row| row.get(0))
                .optional()
            })
            .await?;
        let Some(priority) = priority else {
            return Ok(false);
        };
        let wait = {
            let mut index = store.index.lock();
            // Checked again under the lock: a page-in may have taken it meanwhile.
            if !index.is_cold(queue, priority, seq) {
                return Ok(false);
            }
            index.cold_removed(queue, priority, seq);
            let (reply, wait) = tokio::sync::oneshot::channel();
            store.send(WriteOp::Finish {
                seqs: vec![seq],
                state: STATE_CANCELLED,
                reason,
                now_ms,
                reply: Some(reply),
            })?;
            wait
        };
        crate::SqliteStore::wait(wait).await?;
        Ok(true)
    }

    /// Marks the messages of `queue`'s cold ranges purged on disk, leaving whatever the index
    /// holds (those the purge of the index took, or left in flight). Returns how many.
    pub(crate) async fn purge_cold(
        &self,
        queue: &str,
        ranges: Vec<ColdRange>,
        now_ms: Millis,
    ) -> StoreResult<u64> {
        self.remove_cold(queue, ranges, Some(now_ms)).await
    }

    /// Deletes the rows of a deleted queue's cold ranges. Returns how many.
    pub(crate) async fn delete_cold(
        &self,
        queue: &str,
        ranges: Vec<ColdRange>,
    ) -> StoreResult<u64> {
        self.remove_cold(queue, ranges, None).await
    }

    /// Purges (`purged_at_ms`) or deletes the rows of cold ranges, a chunk per write, skipping
    /// what the index holds.
    async fn remove_cold(
        &self,
        queue: &str,
        ranges: Vec<ColdRange>,
        purged_at_ms: Option<Millis>,
    ) -> StoreResult<u64> {
        let store = &self.0;
        let mut removed = 0;
        for range in ranges {
            let mut from = range.after;
            loop {
                let (name, read_range) = (queue.to_owned(), range.clone());
                let seqs = store
                    .read(move |conn| {
                        read_cold_seqs(conn, &name, &read_range, from, COLD_REMOVAL_CHUNK)
                    })
                    .await?;
                let Some(&last) = seqs.last() else {
                    break;
                };
                from = last;
                let full = seqs.len() == COLD_REMOVAL_CHUNK;
                let wait = {
                    let index = store.index.lock();
                    let seqs: Vec<Seq> = seqs.into_iter().filter(|&s| !index.contains(s)).collect();
                    removed += seqs.len() as u64;
                    let (reply, wait) = tokio::sync::oneshot::channel();
                    store.send(match purged_at_ms {
                        Some(now_ms) => WriteOp::Finish {
                            seqs,
                            state: STATE_PURGED,
                            reason: None,
                            now_ms,
                            reply: Some(reply),
                        },
                        None => WriteOp::Purge {
                            seqs,
                            reply: Some(reply),
                        },
                    })?;
                    wait
                };
                crate::SqliteStore::wait(wait).await?;
                if !full {
                    break;
                }
            }
        }
        Ok(removed)
    }
}
