//! Rebuilding the dispatch index from disk at start.
//!
//! Reads only what dispatch needs (no bodies). A queue without ordering loads the head of each
//! priority (`[store] resident_messages`) and counts the rest, which stays on disk until paged
//! in (`paging.rs`), so a restart with millions queued reads a few thousand rows per queue;
//! ordered queues and dead-letter queues load whole, in seq order. Leases were never written,
//! so every message that was in flight comes back visible.

use std::sync::Arc;

use crate::dispatch::Index;
use rusqlite::{Connection, params};
use sluice_core::Millis;
use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::Seq;

use crate::paging::{ENTRY_COLUMNS, entry_from_row};
use crate::schema::STATE_LIVE;
use sluice_core::stored::StoredQueueConfig;

/// Loads queues and live messages into `index`; returns the next free seq.
pub fn load(conn: &Connection, index: &mut Index, now_ms: Millis) -> rusqlite::Result<Seq> {
    let mut statement = conn.prepare("SELECT name, config, paused FROM queues")?;
    let queues = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, bool>(2)?,
        ))
    })?;
    for queue in queues {
        let (name, config, paused) = queue?;
        let config = StoredQueueConfig::from_json(&config)
            .and_then(|stored| stored.into_config(&name))
            .unwrap_or_else(|error| {
                tracing::warn!(queue = %name, %error, "stored queue config is unreadable; using defaults");
                QueueConfig::defaults_for(&name)
            });
        index
            .queue_put(&name, config)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
        index.set_paused(&name, paused);
    }
    // A dead-letter queue a config names but that has no row (created on the fly by a
    // dead-letter move after it was deleted): give it one, or its messages would look like
    // leftovers of a deleted queue below.
    for name in index.queue_names() {
        let Some(dlq) = index
            .queue_config(&name)
            .and_then(|config| config.dead_letter_queue.clone())
        else {
            continue;
        };
        if index.queue_config(&dlq).is_some() {
            continue;
        }
        let config = QueueConfig::for_dead_letter_queue(&dlq);
        conn.execute(
            "INSERT OR IGNORE INTO queues (name, config, created_at) VALUES (?1, ?2, ?3)",
            params![dlq, StoredQueueConfig::to_json(&config), now_ms],
        )?;
        index
            .queue_put(&dlq, config)
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
    }
    // Each queue's live messages by priority, counted through `messages_live` without reading
    // a row: a queue's backlog past its head stays on disk (`paging.rs`).
    let mut buckets: Vec<(String, i32, u64)> = Vec::new();
    {
        let mut statement = conn.prepare(
            "SELECT queue, priority, COUNT(*) FROM messages WHERE state = ?1 GROUP BY queue, priority",
        )?;
        let mut rows = statement.query(params![STATE_LIVE])?;
        while let Some(row) = rows.next()? {
            buckets.push((row.get(0)?, row.get(1)?, row.get::<_, i64>(2)? as u64));
        }
    }
    let resident_max = index.resident_max();
    let max_seq: Option<i64> =
        conn.query_row("SELECT MAX(seq) FROM messages", [], |row| row.get(0))?;
    let highest = max_seq.unwrap_or(0).max(0) as Seq;
    let mut loaded = 0u64;
    let mut cold = 0u64;
    let mut orphans: Vec<String> = Vec::new();
    let mut whole: Vec<Arc<str>> = Vec::new();
    for (queue, priority, count) in buckets {
        let Some(name) = index.queue_name(&queue) else {
            // Left by a queue deletion that a crash interrupted.
            if !orphans.contains(&queue) {
                orphans.push(queue);
            }
            continue;
        };
        let pages = resident_max > 0
            && index
                .queue_config(&name)
                .is_some_and(|config| config.ordering == Ordering::Unordered)
            && !index.is_dead_letter_queue(&name);
        if !pages {
            // Loaded whole below, in seq order (a lane must see its members in order).
            if !whole.contains(&name) {
                whole.push(name);
            }
            continue;
        }
        let mut statement = conn.prepare_cached(&format!(
            "SELECT {ENTRY_COLUMNS} FROM messages WHERE queue = ?1 AND priority = ?2 AND state = ?3 ORDER BY seq LIMIT ?4"
        ))?;
        let rows = statement.query(params![&*name, priority, STATE_LIVE, resident_max as i64])?;
        let (taken, last) = insert_rows(rows, &name, index, now_ms)?;
        loaded += taken;
        if count > taken {
            index.load_cold(&name, priority, last, count - taken, highest);
            cold += count - taken;
        }
    }
    for name in whole {
        let mut statement = conn.prepare_cached(&format!(
            "SELECT {ENTRY_COLUMNS} FROM messages WHERE queue = ?1 AND state = ?2 ORDER BY seq"
        ))?;
        let rows = statement.query(params![&*name, STATE_LIVE])?;
        loaded += insert_rows(rows, &name, index, now_ms)?.0;
    }
    if !orphans.is_empty() {
        let tx = conn.unchecked_transaction()?;
        let mut removed = 0;
        for queue in &orphans {
            removed += tx.execute(
                "DELETE FROM messages WHERE queue = ?1 AND state = ?2",
                params![queue, STATE_LIVE],
            )?;
        }
        tx.commit()?;
        tracing::info!(rows = removed, "removed rows of deleted queues");
    }
    let next_seq = max_seq.map_or(1, |max| max as Seq + 1);
    index.set_decided(next_seq - 1);
    tracing::info!(
        messages = loaded,
        paged_out = cold,
        "dispatch index rebuilt"
    );
    Ok(next_seq)
}

/// Inserts the index entries of `rows` (read with [`ENTRY_COLUMNS`]) into `queue`; returns how
/// many rows there were and the last seq inserted (0 for none).
fn insert_rows(
    mut rows: rusqlite::Rows<'_>,
    queue: &Arc<str>,
    index: &mut Index,
    now_ms: Millis,
) -> rusqlite::Result<(u64, Seq)> {
    let (mut count, mut last) = (0, 0);
    while let Some(row) = rows.next()? {
        count += 1;
        if let Some(entry) = entry_from_row(row, queue.clone())? {
            last = entry.seq;
            index.insert(entry, now_ms);
        }
    }
    Ok((count, last))
}
