//! Rebuilding the dispatch index from disk at start.
//!
//! One pass over the live rows in `seq` order, reading only what dispatch needs (no bodies), so
//! a restart with a million queued messages takes seconds. Leases were never written, so every
//! message that was in flight comes back visible.

use std::sync::Arc;

use rusqlite::{Connection, params};
use sluice_core::Millis;
use sluice_core::dispatch::{Entry, Index, Seq};
use sluice_core::message::DeadLetterInfo;
use sluice_core::queue::QueueConfig;
use uuid::Uuid;

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
    let mut statement = conn.prepare(
        "SELECT seq, id, queue, priority, msg_key, idempotency_key, visible_at, enqueued_at, attempts, first_received_at, last_error,
                dead_source_queue, dead_last_error, dead_attempts, dead_first_seen_at, dead_last_seen_at
         FROM messages WHERE state = ?1 ORDER BY seq",
    )?;
    let mut rows = statement.query(params![STATE_LIVE])?;
    let mut loaded = 0u64;
    let mut orphans = Vec::new();
    while let Some(row) = rows.next()? {
        let queue: String = row.get(2)?;
        let Some(queue) = index.queue_name(&queue) else {
            // Left by a queue deletion that a crash interrupted.
            orphans.push(row.get::<_, i64>(0)? as Seq);
            continue;
        };
        let id: Vec<u8> = row.get(1)?;
        let Ok(id) = Uuid::from_slice(&id) else {
            continue;
        };
        let key: Option<String> = row.get(4)?;
        let mut entry = Entry::new(
            row.get::<_, i64>(0)? as Seq,
            id,
            queue,
            row.get(3)?,
            key.map(Arc::from),
            row.get(7)?,
            row.get(6)?,
        );
        entry.idempotency_key = row.get::<_, Option<String>>(5)?.map(Arc::from);
        entry.attempts = row.get(8)?;
        entry.lease_number = entry.attempts;
        entry.first_received_at_ms = row.get(9)?;
        entry.last_error = row.get::<_, Option<String>>(10)?.map(Arc::from);
        if let Some(source_queue) = row.get::<_, Option<String>>(11)? {
            entry.dead_letter = Some(Arc::new(DeadLetterInfo {
                source_queue,
                last_error: row.get(12)?,
                attempts: row.get(13)?,
                first_seen_at_ms: row.get(14)?,
                last_seen_at_ms: row.get(15)?,
            }));
        }
        index.insert(entry, now_ms);
        loaded += 1;
    }
    drop(rows);
    drop(statement);
    if !orphans.is_empty() {
        tracing::info!(rows = orphans.len(), "removing rows of deleted queues");
        let tx = conn.unchecked_transaction()?;
        crate::writer::delete_rows(&tx, &orphans)?;
        tx.commit()?;
    }
    let max_seq: Option<i64> =
        conn.query_row("SELECT MAX(seq) FROM messages", [], |row| row.get(0))?;
    tracing::info!(messages = loaded, "dispatch index rebuilt");
    Ok(max_seq.map_or(1, |max| max as Seq + 1))
}
