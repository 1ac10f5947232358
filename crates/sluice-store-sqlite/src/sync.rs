//! The syncer: makes committed groups durable, then answers them.
//!
//! The writer commits with `synchronous=OFF`, so a commit only writes WAL frames to the OS. This
//! thread takes every group committed so far, calls `fdatasync` once on the WAL file (which covers
//! all frames written before the call), and then publishes and answers those groups in commit
//! order. While it syncs, the writer applies the next group: the two overlap instead of
//! alternating.
//!
//! Why this is as safe as `synchronous=FULL`: nothing is published or answered before the sync
//! that covers it returns, and the checkpointer (its own connection, `synchronous=FULL`) syncs
//! the WAL before it copies frames into the database and syncs the database before the WAL can
//! be reused. If a sync fails, the page cache can no longer be trusted to reach the disk, so the
//! store stops taking writes for good (the failed callers get 503 `storage_failed`) rather than
//! retrying. That holds for a sync that fails with `ENOSPC` too: the kernel may have dropped the
//! pages it could not write, and SQLite believes those frames are in the WAL. (A full disk is
//! normally met earlier, by the writer's `write` calls, and is temporary: see `health.rs`.)

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Receiver;

use std::time::{Duration, Instant};

use sluice_core::store::StoreError;

use crate::health::WriteHealth;
use crate::publish::Publisher;
use crate::writer::Pending;

/// A sync slower than this is logged: every caller of those groups waited for it.
const SLOW_SYNC: Duration = Duration::from_millis(50);

/// Runs until the writer drops its sender.
pub fn run(
    wal_path: PathBuf,
    groups: Receiver<Vec<Pending>>,
    publisher: Arc<Publisher>,
    health: Arc<WriteHealth>,
    stats: Arc<crate::metrics::WriteStats>,
) {
    let mut wal: Option<File> = None;
    while let Ok(first) = groups.recv() {
        let mut batch = vec![first];
        while let Ok(group) = groups.try_recv() {
            batch.push(group);
        }
        let started = Instant::now();
        let synced = match health.stopped() {
            // Committed before writes stopped, but nothing after the failure is trusted.
            Some(reason) => Err(reason.to_owned()),
            None => sync_wal(&mut wal, &wal_path),
        };
        let took = started.elapsed();
        if took >= SLOW_SYNC {
            tracing::warn!(
                groups = batch.len(),
                sync_ms = took.as_millis() as u64,
                "slow WAL sync"
            );
        }
        match synced {
            Ok(()) => {
                stats.wal_sync_us.record(took.as_micros() as u64);
                for group in batch {
                    publisher.publish(group);
                }
            }
            Err(reason) => {
                health.stop(reason.clone());
                for group in batch {
                    publisher.fail(group, || StoreError::WritesStopped(reason.clone()));
                }
            }
        }
    }
}

fn sync_wal(wal: &mut Option<File>, wal_path: &PathBuf) -> Result<(), String> {
    if wal.is_none() {
        // SQLite creates the WAL with the first write; open it once, keep it open.
        *wal = Some(
            File::open(wal_path).map_err(|e| format!("cannot open {}: {e}", wal_path.display()))?,
        );
    }
    let file = wal.as_ref().expect("opened above");
    file.sync_data()
        .map_err(|e| format!("fdatasync of the WAL failed: {e}"))
}
