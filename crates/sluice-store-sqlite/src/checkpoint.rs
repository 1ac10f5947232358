//! Checkpoints: copying committed WAL frames into the database file, and keeping the WAL
//! bounded.
//!
//! SQLite's automatic checkpoint runs inside a commit, on the writer thread, and stalls every
//! request waiting for that group. Here the writer never checkpoints in a commit; a thread of
//! its own runs a `PASSIVE` checkpoint (which never blocks the writer) whenever the writer has
//! committed since the last one, at most every [`CHECKPOINT_INTERVAL`]. Waiting between runs
//! lets a page that is rewritten many times (a message enqueued, claimed and acked) be copied
//! once.
//!
//! A passive checkpoint never lets the WAL start over while writes keep coming: SQLite only
//! rewinds the WAL when a writer finds every frame copied, and by then the next group has
//! appended more. Left alone the WAL grows for as long as the load lasts (gigabytes on a slow
//! disk), and a start after a crash reads all of it. So once the WAL is past `max_wal_bytes`,
//! the writer itself runs a `RESTART` checkpoint ([`WalLimit::restart`]): it copies what the
//! passive checkpoints have not, waits for readers still on old frames, and the next commit
//! writes from the start of the file again. Writes pause for that long, so the moment matters:
//! the checkpointer asks for it right after a passive pass (`restart_wanted`), when what is
//! left to copy is the little written during that pass. Asked for at any other moment it
//! copied up to a whole interval of frames and paused writes 25 ms, once a second at 2,000
//! single-message enqueues a second: that was the p99 of the latency scenario. The file keeps
//! its size (so a WAL sync never has to write a new size to the filesystem's journal);
//! `journal_size_limit` (the same limit) cuts it back whenever SQLite rewinds it. If the WAL
//! reaches twice the limit anyway (the checkpointer is stuck), the writer truncates it at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::health::{Failure, WriteHealth, classify};

/// Pause between checkpoints.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(200);
/// Longest wait of a truncating checkpoint for readers on old frames; writes pause meanwhile.
const TRUNCATE_WAIT: Duration = Duration::from_secs(1);
/// How long one try of a truncating checkpoint waits for a lock.
const TRUNCATE_TRY_WAIT_MS: u64 = 50;
/// After a truncating checkpoint that readers kept from finishing, the next try waits this long.
const TRUNCATE_RETRY: Duration = Duration::from_millis(250);
/// The writer's usual busy timeout (`schema.rs`), restored after a truncating checkpoint.
const WRITER_BUSY_TIMEOUT_MS: u64 = 5_000;

/// Shared between the writer (which sets `dirty`), the checkpointer and metrics.
#[derive(Debug, Default)]
pub struct CheckpointSignal {
    /// The writer committed since the last checkpoint.
    pub dirty: AtomicBool,
    /// The store is closing: stop.
    pub stop: AtomicBool,
    /// WAL frames not yet copied into the database file, as of the last checkpoint.
    pub lag_frames: AtomicU64,
    /// Truncating checkpoints done because the WAL passed its limit.
    pub truncations: AtomicU64,
    /// The WAL is past its limit and a passive pass just copied it: the writer should start it
    /// over now ([`WalLimit::restart`]).
    pub restart_wanted: AtomicBool,
    /// The checkpointer's thread, woken early when the WAL passes its limit.
    thread: std::sync::OnceLock<std::thread::Thread>,
}

impl CheckpointSignal {
    /// Has the checkpointer make a pass now instead of at its next interval.
    fn wake(&self) {
        self.dirty.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

impl CheckpointSignal {
    /// Notes the result of a checkpoint: `(busy, frames in the WAL, frames copied)`.
    fn record(&self, (_, log, copied): (i64, i64, i64)) {
        let lag = (log - copied).max(0) as u64;
        self.lag_frames.store(lag, Ordering::Relaxed);
    }
}

/// Runs `PRAGMA wal_checkpoint(<mode>)` and returns its row.
fn checkpoint(conn: &Connection, mode: &str) -> rusqlite::Result<(i64, i64, i64)> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?))
    })
}

/// Runs until `signal.stop` is set.
pub fn run(
    db_path: PathBuf,
    max_wal_bytes: u64,
    signal: Arc<CheckpointSignal>,
    health: Arc<WriteHealth>,
) {
    let _ = signal.thread.set(std::thread::current());
    let conn = match Connection::open(&db_path) {
        Ok(conn) => conn,
        Err(error) => {
            tracing::error!(%error, "checkpointer cannot open the database; only the WAL limit bounds the WAL now");
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
    // A WAL frame: a page and its 24-byte header.
    let frame_bytes = conn
        .pragma_query_value(None, "page_size", |row| row.get::<_, i64>(0))
        .map_or(16_384, |size| size.max(512) as u64)
        + 24;
    while !signal.stop.load(Ordering::SeqCst) {
        // Woken early by close (unpark), so shutdown does not wait out the interval.
        std::thread::park_timeout(CHECKPOINT_INTERVAL);
        if !signal.dirty.swap(false, Ordering::SeqCst) {
            continue;
        }
        match checkpoint(&conn, "PASSIVE") {
            Ok(result) => {
                signal.record(result);
                // By the frames the WAL holds, not the file's size: after a restart the file
                // keeps its size while it is written from the start again.
                let (_, frames, _) = result;
                if frames.max(0) as u64 * frame_bytes > max_wal_bytes {
                    signal.restart_wanted.store(true, Ordering::SeqCst);
                }
            }
            Err(error) if classify(&error) == Failure::DiskFull => {
                // Copying frames can grow the database file. The writer gives back the reserve
                // and refuses new messages until there is room again.
                signal.dirty.store(true, Ordering::SeqCst);
                if !health.set_full(true) {
                    tracing::error!(%error, "checkpoint found the disk full: new messages are refused until space is freed");
                }
            }
            Err(error) => tracing::warn!(%error, "checkpoint failed"),
        }
    }
}

/// The size of the WAL file (0 when there is none).
fn wal_bytes(wal_path: &std::path::Path) -> u64 {
    std::fs::metadata(wal_path).map_or(0, |m| m.len())
}

/// The WAL's size limit, enforced by the writer after its commits.
#[derive(Debug)]
pub struct WalLimit {
    wal_path: PathBuf,
    max_bytes: u64,
    /// Not before then: readers kept the last try from finishing.
    retry_at: Option<Instant>,
}

impl WalLimit {
    /// A limit of `max_bytes` on the WAL at `wal_path`.
    pub fn new(wal_path: PathBuf, max_bytes: u64) -> Self {
        Self {
            wal_path,
            max_bytes,
            retry_at: None,
        }
    }

    /// What the writer does after a commit: start the WAL over when the checkpointer asks
    /// (right after a passive pass); past the limit, ask the checkpointer for that pass now;
    /// past twice the limit (the checkpointer is stuck), truncate it at once.
    pub fn after_commit(&mut self, conn: &Connection, signal: &CheckpointSignal) {
        if self.retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        if signal.restart_wanted.swap(false, Ordering::SeqCst) {
            self.restart(conn, signal);
            return;
        }
        let bytes = wal_bytes(&self.wal_path);
        if bytes > self.max_bytes.saturating_mul(2) {
            self.truncate(conn, signal);
        } else if bytes > self.max_bytes {
            signal.wake();
        }
    }

    /// Copies what is left of the WAL into the database file so the next commit writes from
    /// its start again ([`WalLimit::whole`] in `RESTART` mode).
    fn restart(&mut self, conn: &Connection, signal: &CheckpointSignal) {
        self.whole(conn, signal, "RESTART");
    }

    /// Copies the whole WAL into the database file and empties the file (a full disk: the
    /// space goes back at once).
    pub fn truncate(&mut self, conn: &Connection, signal: &CheckpointSignal) {
        self.whole(conn, signal, "TRUNCATE");
    }

    /// Copies the whole WAL into the database file, on the writer's connection (so no lock is
    /// fought over with the writer), with syncing on for the checkpoint: the database is synced
    /// before the WAL is reused or cut. Waits at most [`TRUNCATE_WAIT`] for readers.
    fn whole(&mut self, conn: &Connection, signal: &CheckpointSignal, mode: &str) {
        let started = Instant::now();
        let deadline = started + TRUNCATE_WAIT;
        let result = (|| {
            conn.pragma_update(None, "synchronous", "FULL")?;
            conn.pragma_update(None, "busy_timeout", TRUNCATE_TRY_WAIT_MS)?;
            // One try gives up on the first reader it finds on old frames; with the writes
            // paused, new readers start on the last frame, so the old ones are soon gone.
            let result = loop {
                match checkpoint(conn, mode) {
                    Ok((1, _, _)) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(1))
                    }
                    other => break other,
                }
            };
            conn.pragma_update(None, "busy_timeout", WRITER_BUSY_TIMEOUT_MS)?;
            conn.pragma_update(None, "synchronous", "OFF")?;
            result
        })();
        match result {
            Ok((0, _, _)) => {
                signal.lag_frames.store(0, Ordering::Relaxed);
                signal.truncations.fetch_add(1, Ordering::Relaxed);
                self.retry_at = None;
                tracing::debug!(
                    took_ms = started.elapsed().as_millis() as u64,
                    mode,
                    "WAL past its limit: checkpointed whole"
                );
            }
            Ok(result) => {
                signal.record(result);
                self.retry_at = Some(Instant::now() + TRUNCATE_RETRY);
                tracing::warn!(
                    "WAL past its limit, but readers kept the checkpoint from finishing; trying again soon"
                );
            }
            Err(error) => {
                self.retry_at = Some(Instant::now() + TRUNCATE_RETRY);
                tracing::warn!(%error, "truncating checkpoint failed");
            }
        }
    }
}
