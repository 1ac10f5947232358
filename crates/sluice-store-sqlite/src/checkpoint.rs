//! The checkpointer: copies committed WAL frames into the database file on its own thread.
//!
//! SQLite's automatic checkpoint runs inside a commit, on the writer thread, and stalls every
//! request waiting for that group. Here the writer never checkpoints; this thread runs a
//! `PASSIVE` checkpoint (which never blocks the writer) whenever the writer has committed since
//! the last one, at most every [`CHECKPOINT_INTERVAL`]. Waiting between runs lets a page that is
//! rewritten many times (a message enqueued, claimed and acked) be copied once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rusqlite::Connection;

/// Pause between checkpoints.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(200);

/// Shared between the writer (which sets `dirty`) and the checkpointer.
#[derive(Debug, Default)]
pub struct CheckpointSignal {
    /// The writer committed since the last checkpoint.
    pub dirty: AtomicBool,
    /// The store is closing: stop.
    pub stop: AtomicBool,
}

/// Runs until `signal.stop` is set.
pub fn run(db_path: PathBuf, signal: Arc<CheckpointSignal>) {
    let conn = match Connection::open(&db_path) {
        Ok(conn) => conn,
        Err(error) => {
            tracing::error!(%error, "checkpointer cannot open the database; the WAL will grow until restart");
            return;
        }
    };
    let _ = conn.pragma_update(None, "busy_timeout", 5_000);
    // FULL: sync the WAL before copying it, and the database before the WAL may be reused. The
    // writer's commits rely on this (they do not sync themselves).
    if let Err(error) = conn.pragma_update(None, "synchronous", "FULL") {
        tracing::error!(%error, "checkpointer cannot turn syncing on");
        return;
    }
    while !signal.stop.load(Ordering::SeqCst) {
        // Woken early by close (unpark), so shutdown does not wait out the interval.
        std::thread::park_timeout(CHECKPOINT_INTERVAL);
        if signal.dirty.swap(false, Ordering::SeqCst)
            && let Err(error) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        {
            tracing::warn!(%error, "checkpoint failed");
        }
    }
}
