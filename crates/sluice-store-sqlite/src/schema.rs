//! The SQLite schema and the connection settings every connection gets.
//!
//! `messages` is the durable record of every live message (state 0) and, for a while, of acked
//! ones (state 1, body dropped unless the queue keeps acked bodies: then until `kept_until`). `seq` is the global enqueue order the dispatch index sorts by.

use rusqlite::Connection;

use crate::Durability;

/// Bumped with every migration below; `PRAGMA user_version` records what a file has.
pub(crate) const SCHEMA_VERSION: i64 = 9;

pub(crate) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS queues (
    name        TEXT PRIMARY KEY,
    config      TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    seq                 INTEGER PRIMARY KEY,
    id                  BLOB NOT NULL,
    queue               TEXT NOT NULL,
    state               INTEGER NOT NULL,
    priority            INTEGER NOT NULL,
    msg_key             TEXT,
    idempotency_key     TEXT,
    visible_at          INTEGER NOT NULL,
    enqueued_at         INTEGER NOT NULL,
    attempts            INTEGER NOT NULL,
    first_received_at   INTEGER,
    last_error          TEXT,
    body                BLOB,
    body_kind           INTEGER NOT NULL,
    headers             TEXT,
    acked_at            INTEGER,
    dead_source_queue   TEXT,
    dead_last_error     TEXT,
    dead_attempts       INTEGER,
    dead_first_seen_at  INTEGER,
    dead_last_seen_at   INTEGER
);
CREATE INDEX IF NOT EXISTS messages_acked ON messages(acked_at) WHERE state = 1;
CREATE TABLE IF NOT EXISTS idempotency (
    queue       TEXT NOT NULL,
    key         TEXT NOT NULL,
    message_id  BLOB NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (queue, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_by_expiry ON idempotency(expires_at);
";

/// Version 2: a message's failed attempts (`failures`, a JSON array appended on the failure path
/// only), webhook endpoint definitions, paused queues, ack results, replay records, and every final state (not only acked)
/// found by the cleanup through one index. `acked_at` holds the time of the final state. An
/// idempotency key also remembers its message's ack and result for the whole dedup window, which
/// can outlast the message's own record.
pub(crate) const MIGRATION_2: &str = "
ALTER TABLE queues ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN result TEXT;
ALTER TABLE messages ADD COLUMN replayed_as BLOB;
ALTER TABLE messages ADD COLUMN failures TEXT;
ALTER TABLE idempotency ADD COLUMN acked_at INTEGER;
ALTER TABLE idempotency ADD COLUMN result TEXT;
DROP INDEX IF EXISTS messages_acked;
CREATE INDEX IF NOT EXISTS messages_finished ON messages(acked_at) WHERE state > 0;
CREATE TABLE IF NOT EXISTS webhooks (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
";

/// Version 3: a message's push delivery log (`deliveries`, a JSON array of its last attempts,
/// `delivery_log.rs`), kept with the failure log and removed with the row.
const MIGRATION_3: &str = "
ALTER TABLE messages ADD COLUMN deliveries TEXT;
";

/// Version 4: a queue's push pause (`push_pauses.rs`), kept by the server in
/// `push-paused.json` before; the store carries that file over when it opens.
const MIGRATION_4: &str = "
ALTER TABLE queues ADD COLUMN push_paused INTEGER NOT NULL DEFAULT 0;
";

/// Version 5: live messages by queue, priority and seq, so a queue's backlog can wait on disk
/// and be read back in dispatch order (`load.rs`, `paging.rs`), and counted at start without
/// reading the rows.
const MIGRATION_5: &str = "
CREATE INDEX IF NOT EXISTS messages_live ON messages(queue, priority, seq) WHERE state = 0;
";

/// Version 6: when a message first becomes visible, for one enqueued with a delay (NULL means
/// its enqueue): retention counts from there (`rules::retention`), and a retry's backoff, which
/// moves `visible_at`, must not move it. Live rows never delivered still hold their delay in
/// `visible_at`, so they carry it over.
const MIGRATION_6: &str = "
ALTER TABLE messages ADD COLUMN first_visible_at INTEGER;
UPDATE messages SET first_visible_at = visible_at
 WHERE state = 0 AND attempts = 0 AND visible_at > enqueued_at;
";

/// Version 7: definitions of other kinds (`definitions`: topics; the kind, the name, the spec
/// as given), and schedules, their definition (`spec`, JSON as given) and progress (`state`,
/// `sluice_core::stored::ScheduleState`), with the last run done also in `last_run` so that a
/// pass advances a schedule only from where it read it.
const MIGRATION_7: &str = "
CREATE TABLE IF NOT EXISTS schedules (
    name        TEXT PRIMARY KEY,
    spec        TEXT NOT NULL,
    state       TEXT NOT NULL,
    last_run    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS definitions (
    kind        TEXT NOT NULL,
    name        TEXT NOT NULL,
    spec        TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (kind, name)
);
";

/// Version 8: acked messages kept with their body (a queue's `keep_acked_ms`) until
/// `kept_until`, found by queue and ack time, ordering key or idempotency key, and by the end
/// of their keep; the cleanup of final rows skips them until their keep ends.
const MIGRATION_8: &str = "
ALTER TABLE messages ADD COLUMN kept_until INTEGER;
DROP INDEX IF EXISTS messages_finished;
CREATE INDEX messages_finished ON messages(acked_at) WHERE state > 0 AND kept_until IS NULL;
CREATE INDEX messages_kept ON messages(queue, acked_at, seq) WHERE kept_until IS NOT NULL;
CREATE INDEX messages_kept_until ON messages(kept_until) WHERE kept_until IS NOT NULL;
CREATE INDEX messages_kept_key ON messages(queue, msg_key, acked_at, seq) WHERE kept_until IS NOT NULL;
CREATE INDEX messages_kept_idempotency ON messages(queue, idempotency_key, acked_at, seq) WHERE kept_until IS NOT NULL;
";

/// Version 9: `messages` rebuilt with its big columns last (`deliveries`, `headers`, `body`).
/// SQLite stores a row's columns in order and a body past a page in a chain of overflow pages,
/// so reading any column after the body (`body_kind`, `acked_at`, `result`, `kept_until`…)
/// read the whole chain: a status lookup or a page of kept acked messages read every body in
/// full (issue 30, finding 12: a page of 1,000 previews of 1 MB bodies read 1 GB). With the
/// body last, a status reads none of it, and a preview reads its first pages only
/// (`substr` over the start of a chain). The copy runs once, in one transaction, at the first
/// start of this version: its time and its temporary disk space grow with the file.
const MIGRATION_9: &str = "
CREATE TABLE messages_v9 (
    seq                 INTEGER PRIMARY KEY,
    id                  BLOB NOT NULL,
    queue               TEXT NOT NULL,
    state               INTEGER NOT NULL,
    priority            INTEGER NOT NULL,
    msg_key             TEXT,
    idempotency_key     TEXT,
    visible_at          INTEGER NOT NULL,
    enqueued_at         INTEGER NOT NULL,
    attempts            INTEGER NOT NULL,
    first_received_at   INTEGER,
    first_visible_at    INTEGER,
    body_kind           INTEGER NOT NULL,
    acked_at            INTEGER,
    kept_until          INTEGER,
    dead_source_queue   TEXT,
    dead_attempts       INTEGER,
    dead_first_seen_at  INTEGER,
    dead_last_seen_at   INTEGER,
    replayed_as         BLOB,
    last_error          TEXT,
    dead_last_error     TEXT,
    result              TEXT,
    failures            TEXT,
    deliveries          TEXT,
    headers             TEXT,
    body                BLOB
);
INSERT INTO messages_v9 (seq, id, queue, state, priority, msg_key, idempotency_key, visible_at,
    enqueued_at, attempts, first_received_at, first_visible_at, body_kind, acked_at, kept_until,
    dead_source_queue, dead_attempts, dead_first_seen_at, dead_last_seen_at, replayed_as,
    last_error, dead_last_error, result, failures, deliveries, headers, body)
SELECT seq, id, queue, state, priority, msg_key, idempotency_key, visible_at,
    enqueued_at, attempts, first_received_at, first_visible_at, body_kind, acked_at, kept_until,
    dead_source_queue, dead_attempts, dead_first_seen_at, dead_last_seen_at, replayed_as,
    last_error, dead_last_error, result, failures, deliveries, headers, body
FROM messages;
DROP TABLE messages;
ALTER TABLE messages_v9 RENAME TO messages;
CREATE INDEX messages_finished ON messages(acked_at) WHERE state > 0 AND kept_until IS NULL;
CREATE INDEX messages_live ON messages(queue, priority, seq) WHERE state = 0;
CREATE INDEX messages_kept ON messages(queue, acked_at, seq) WHERE kept_until IS NOT NULL;
CREATE INDEX messages_kept_until ON messages(kept_until) WHERE kept_until IS NOT NULL;
CREATE INDEX messages_kept_key ON messages(queue, msg_key, acked_at, seq) WHERE kept_until IS NOT NULL;
CREATE INDEX messages_kept_idempotency ON messages(queue, idempotency_key, acked_at, seq) WHERE kept_until IS NOT NULL;
";

/// Message states in the `state` column.
pub const STATE_LIVE: i64 = 0;
/// Acked; body and headers dropped (or kept until `kept_until`).
pub const STATE_ACKED: i64 = 1;
/// Removed by retention.
pub const STATE_EXPIRED: i64 = 2;
/// Cancelled before delivery.
pub const STATE_CANCELLED: i64 = 3;
/// Removed by a purge.
pub const STATE_PURGED: i64 = 4;
/// A dead letter replayed as a new message (body kept for inspection).
pub const STATE_REPLAYED: i64 = 5;
/// A dead letter deleted by an operator.
pub const STATE_DELETED: i64 = 6;

/// The core's name for a stored state.
pub fn message_state(state: i64) -> sluice_core::message::MessageState {
    use sluice_core::message::MessageState;
    match state {
        STATE_ACKED => MessageState::Acked,
        STATE_EXPIRED => MessageState::Expired,
        STATE_CANCELLED => MessageState::Cancelled,
        STATE_PURGED => MessageState::Purged,
        STATE_REPLAYED => MessageState::Replayed,
        STATE_DELETED => MessageState::Deleted,
        // Live rows not in the index do not exist while the store runs.
        _ => MessageState::Ready,
    }
}

/// Settings for the writer connection, then the schema.
pub fn open_writer(
    conn: &Connection,
    durability: Durability,
    max_wal_bytes: u64,
) -> rusqlite::Result<()> {
    // Only takes effect on a new, empty file.
    conn.pragma_update(None, "page_size", 16_384)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // The writer never syncs: with durability "fsync" the syncer thread fsyncs the WAL after
    // each group commit and before anyone is answered; with "os" nobody waits for a sync. The
    // checkpointer syncs before and after it copies the WAL into the database file.
    let _ = durability;
    conn.pragma_update(None, "synchronous", "OFF")?;
    conn.pragma_update(None, "busy_timeout", 5_000)?;
    conn.pragma_update(None, "cache_size", -65_536)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // The checkpointer thread copies the WAL into the database file; commits never do.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    // When SQLite rewinds a fully copied WAL, it cuts the file back to this size; a WAL past it
    // is checkpointed whole and truncated by the writer (`checkpoint.rs`).
    conn.pragma_update(None, "journal_size_limit", max_wal_bytes as i64)?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    if version < 1 {
        conn.execute_batch(SCHEMA)?;
        conn.pragma_update(None, "user_version", 1)?;
    }
    // Each migration bumps the version in its own transaction, so a crash never leaves one
    // half done.
    if version < 2 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_2} PRAGMA user_version = 2; COMMIT;"
        ))?;
    }
    if version < 3 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_3} PRAGMA user_version = 3; COMMIT;"
        ))?;
    }
    if version < 4 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_4} PRAGMA user_version = 4; COMMIT;"
        ))?;
    }
    if version < 5 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_5} PRAGMA user_version = 5; COMMIT;"
        ))?;
    }
    if version < 6 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_6} PRAGMA user_version = 6; COMMIT;"
        ))?;
    }
    if version < 7 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_7} PRAGMA user_version = 7; COMMIT;"
        ))?;
    }
    if version < 8 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_8} PRAGMA user_version = 8; COMMIT;"
        ))?;
    }
    if version < 9 {
        conn.execute_batch(&format!(
            "BEGIN; {MIGRATION_9} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
        ))?;
    }
    Ok(())
}

/// Settings for a read-only connection.
pub fn open_reader(conn: &Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "busy_timeout", 5_000)?;
    conn.pragma_update(None, "cache_size", -16_384)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::{MIGRATION_2, MIGRATION_3, MIGRATION_4, MIGRATION_5, STATE_ACKED, STATE_LIVE};

    /// Version 6 carries the delay of a live message never delivered into `first_visible_at`
    /// (its `visible_at` still holds it) and leaves every other row NULL (its enqueue).
    #[test]
    fn version_6_keeps_when_waiting_messages_become_visible() {
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("sluice.db")).unwrap();
        conn.execute_batch(&format!(
            "{}; {MIGRATION_2}; {MIGRATION_3}; {MIGRATION_4}; {MIGRATION_5}; PRAGMA user_version = 5;",
            super::SCHEMA
        ))
        .unwrap();
        // seq, state, visible_at, enqueued_at, attempts: delayed; retried (its visible_at is a
        // backoff's); not delayed; acked.
        for (seq, state, visible, attempts) in [
            (1, STATE_LIVE, 9_000, 0),
            (2, STATE_LIVE, 9_000, 2),
            (3, STATE_LIVE, 1_000, 0),
            (4, STATE_ACKED, 9_000, 0),
        ] {
            conn.execute(
                "INSERT INTO messages (seq, id, queue, state, priority, visible_at, enqueued_at, attempts, body_kind)
                 VALUES (?1, x'00', 'q', ?2, 0, ?3, 1000, ?4, 0)",
                rusqlite::params![seq, state, visible, attempts],
            )
            .unwrap();
        }
        super::open_writer(&conn, crate::Durability::Fsync, 1 << 20).unwrap();
        let first_visible: Vec<Option<i64>> = conn
            .prepare("SELECT first_visible_at FROM messages ORDER BY seq")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(first_visible, [Some(9_000), None, None, None]);
    }

    /// Version 9 rebuilds `messages` with the big columns last: every column of every row
    /// comes through the copy as it was, and the indexes are there again.
    #[test]
    fn version_9_moves_the_body_last_and_keeps_every_value() {
        use super::{MIGRATION_6, MIGRATION_7, MIGRATION_8};
        let dir = tempfile::tempdir().unwrap();
        let conn = Connection::open(dir.path().join("sluice.db")).unwrap();
        conn.execute_batch(&format!(
            "{}; {MIGRATION_2}; {MIGRATION_3}; {MIGRATION_4}; {MIGRATION_5}; {MIGRATION_6}; {MIGRATION_7}; {MIGRATION_8}; PRAGMA user_version = 8;",
            super::SCHEMA
        ))
        .unwrap();
        let columns = "seq, id, queue, state, priority, msg_key, idempotency_key, visible_at, \
            enqueued_at, attempts, first_received_at, first_visible_at, body_kind, acked_at, \
            kept_until, dead_source_queue, dead_attempts, dead_first_seen_at, dead_last_seen_at, \
            replayed_as, last_error, dead_last_error, result, failures, deliveries, headers, body";
        conn.execute(
            &format!(
                "INSERT INTO messages ({columns}) VALUES (7, x'0102', 'q', 1, 3, 'k', 'i', 10, \
                 9, 2, 11, 12, 1, 13, 14, 'src', 4, 15, 16, x'03', 'e1', 'e2', 'r', '[1]', \
                 '[2]', '{{\"h\":\"v\"}}', zeroblob(100000))"
            ),
            [],
        )
        .unwrap();
        let read = |conn: &Connection| -> Vec<String> {
            conn.query_row(
                &format!(
                    "SELECT {} FROM messages WHERE seq = 7",
                    columns
                        .split(',')
                        .map(|c| format!("quote({})", c.trim()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                [],
                |row| (0..27).map(|i| row.get::<_, String>(i)).collect(),
            )
            .unwrap()
        };
        let before = read(&conn);
        super::open_writer(&conn, crate::Durability::Fsync, 1 << 20).unwrap();
        assert_eq!(read(&conn), before);
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, super::SCHEMA_VERSION);
        let last: String = conn
            .query_row(
                "SELECT name FROM pragma_table_info('messages') ORDER BY cid DESC LIMIT 1",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(last, "body");
        let indexes: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'messages' AND sql IS NOT NULL ORDER BY name")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            indexes,
            [
                "messages_finished",
                "messages_kept",
                "messages_kept_idempotency",
                "messages_kept_key",
                "messages_kept_until",
                "messages_live"
            ]
        );
    }
}
