//! A message's push delivery log: its last few attempts (request as sent, answer, latency), in
//! the `deliveries` column of its row next to the failure log, so it survives restarts, follows
//! the message into its dead-letter queue and goes with the row (retention, cleanup, purge).
//!
//! The store writes an attempt in the same group as the ack or nack it ends with
//! ([`WriteOp::LogDelivery`](crate::writer::WriteOp) is sent just before it, under the index
//! lock), so the answer to that ack or nack also means the attempt is on disk.

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use sluice_core::message::DeliveryAttempt;
use sluice_core::store::Seq;
use sluice_core::stored::delivery_log;

/// The JSON text of one attempt, made by the caller before it goes to the writer (the format
/// is `sluice_core::stored::delivery_log`'s, which the PostgreSQL store writes too).
pub fn encode(attempt: DeliveryAttempt) -> String {
    delivery_log::encode(attempt)
}

/// Appends `entry` (from [`encode`]) to the row's log and keeps its last `keep` attempts. A row
/// already gone (deleted queue) is left alone.
pub fn append(tx: &Transaction<'_>, seq: Seq, entry: &str, keep: usize) -> rusqlite::Result<()> {
    let current: Option<Option<String>> = tx
        .prepare_cached("SELECT deliveries FROM messages WHERE seq = ?1")?
        .query_row(params![seq as i64], |row| row.get(0))
        .optional()?;
    let Some(current) = current else {
        return Ok(());
    };
    // Entries are kept as JSON values: the writer never needs their fields.
    let mut log: Vec<serde_json::Value> = current
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let Ok(entry) = serde_json::from_str::<serde_json::Value>(entry) else {
        return Ok(());
    };
    log.push(entry);
    let keep = keep.max(1);
    if log.len() > keep {
        log.drain(..log.len() - keep);
    }
    let text = serde_json::Value::Array(log).to_string();
    tx.prepare_cached("UPDATE messages SET deliveries = ?2 WHERE seq = ?1")?
        .execute(params![seq as i64, text])?;
    Ok(())
}

/// The log of a row, oldest first; an unreadable entry is skipped.
pub fn read(conn: &Connection, seq: Seq) -> rusqlite::Result<Vec<DeliveryAttempt>> {
    let text: Option<Option<String>> = conn
        .prepare_cached("SELECT deliveries FROM messages WHERE seq = ?1")?
        .query_row(params![seq as i64], |row| row.get(0))
        .optional()?;
    let log: serde_json::Value = text
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    Ok(delivery_log::decode_log(log))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Millis;

    fn attempt(n: u32) -> DeliveryAttempt {
        DeliveryAttempt {
            attempt: n,
            at_ms: 1_000 + Millis::from(n),
            method: "POST".into(),
            url: "http://127.0.0.1:9/in".into(),
            status: Some(500),
            error: Some(format!("HTTP 500: try {n}")),
            body_excerpt: Some("down".into()),
            latency_ms: 7,
            ..DeliveryAttempt::default()
        }
    }

    /// A database as version 2 left it, with one message row.
    fn version_2_file(dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("sluice.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(crate::schema::SCHEMA).unwrap();
        conn.execute_batch(crate::schema::MIGRATION_2).unwrap();
        conn.pragma_update(None, "user_version", 2).unwrap();
        conn.execute(
            "INSERT INTO messages (seq, id, queue, state, priority, visible_at, enqueued_at, attempts, body_kind)
             VALUES (1, x'00', 'q', 0, 0, 0, 0, 0, 0)",
            [],
        )
        .unwrap();
        path
    }

    #[test]
    fn a_version_2_file_gains_the_log_and_keeps_the_last_attempts() {
        let dir = tempfile::tempdir().unwrap();
        let path = version_2_file(dir.path());
        let mut conn = Connection::open(&path).unwrap();
        crate::schema::open_writer(&conn, crate::Durability::Fsync, 1 << 20).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(
            version,
            crate::schema::SCHEMA_VERSION,
            "migrated to the latest"
        );
        assert_eq!(read(&conn, 1).unwrap(), Vec::new(), "no log before a push");

        let tx = conn.transaction().unwrap();
        for n in 1..=4 {
            append(&tx, 1, &encode(attempt(n)), 3).unwrap();
        }
        // A row that is gone is left alone.
        append(&tx, 99, &encode(attempt(1)), 3).unwrap();
        tx.commit().unwrap();
        assert_eq!(
            read(&conn, 1).unwrap(),
            vec![attempt(2), attempt(3), attempt(4)],
            "the last 3, oldest first, as written"
        );
        assert_eq!(read(&conn, 99).unwrap(), Vec::new());
    }
}
