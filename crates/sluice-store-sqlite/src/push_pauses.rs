//! Push pauses (`Store::queue_push_pause`): the column `queues.push_paused` (migration 4), and
//! a copy of the paused names in memory for `QueueInfo::is_push_paused`.
//!
//! Before the store kept them, the server kept them in `push-paused.json` in the data directory
//! (a JSON array of queue names). That directory is the store's too, so the store carries the
//! file over when it opens: the names of queues it has are marked in the column (synced before
//! anything else happens), then the file is deleted. A name without a queue is dropped with a
//! warning: its queue was deleted while paused, and a queue made again under that name starts
//! with push running, as it would now. An unreadable file stops the open, as it stopped the
//! server before, rather than resume a push an operator paused.

use std::collections::BTreeSet;
use std::path::Path;

use rusqlite::{Connection, params};
use sluice_core::store::{StoreError, StoreResult};

use crate::dir_sync;

/// The file the server kept push pauses in, up to this version of the store.
pub const LEGACY_FILE: &str = "push-paused.json";
/// What the server wrote before renaming it into place; a crash could leave it behind.
const LEGACY_TEMPORARY_FILE: &str = "push-paused.json.tmp";

/// Carries `push-paused.json` in `data_dir` over into `queues.push_paused`, then deletes it.
/// Nothing to do without the file. Runs on the writer's connection before its thread starts.
pub fn carry_over(conn: &Connection, data_dir: &Path) -> StoreResult<()> {
    let path = data_dir.join(LEGACY_FILE);
    let names: BTreeSet<String> = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::Other(
                format!(
                    "{} is not a JSON list of queue names: {e}; fix or remove it",
                    path.display()
                )
                .into(),
            )
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            remove_if_present(&data_dir.join(LEGACY_TEMPORARY_FILE))?;
            return Ok(());
        }
        Err(error) => {
            return Err(StoreError::Unavailable(format!(
                "cannot read {}: {error}",
                path.display()
            )));
        }
    };
    let sql_error = |e: rusqlite::Error| {
        StoreError::Other(format!("carrying {LEGACY_FILE} over into the database: {e}").into())
    };
    // The writer's connection never syncs (the syncer thread does, after each group): this one
    // transaction is synced on commit, so the pauses are on disk before the file goes.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(sql_error)?;
    let mut dropped = Vec::new();
    let applied = (|| {
        let transaction = conn.unchecked_transaction()?;
        for name in &names {
            let marked = transaction.execute(
                "UPDATE queues SET push_paused = 1 WHERE name = ?1",
                params![name],
            )?;
            if marked == 0 {
                dropped.push(name.as_str());
            }
        }
        transaction.commit()
    })();
    conn.pragma_update(None, "synchronous", "OFF")
        .map_err(sql_error)?;
    applied.map_err(sql_error)?;
    if !dropped.is_empty() {
        tracing::warn!(queues = ?dropped, file = LEGACY_FILE, "push pauses of queues that no longer exist were dropped");
    }
    remove_if_present(&path)?;
    remove_if_present(&data_dir.join(LEGACY_TEMPORARY_FILE))?;
    dir_sync::fsync_dir(data_dir)
        .map_err(|e| StoreError::Unavailable(format!("cannot sync {}: {e}", data_dir.display())))?;
    tracing::info!(
        paused = names.len() - dropped.len(),
        file = LEGACY_FILE,
        "push pauses carried over into the database; the file is deleted"
    );
    Ok(())
}

/// The queues whose push is paused.
pub fn load(conn: &Connection) -> rusqlite::Result<BTreeSet<String>> {
    let mut statement = conn.prepare("SELECT name FROM queues WHERE push_paused = 1")?;
    let names = statement.query_map([], |row| row.get(0))?;
    names.collect()
}

fn remove_if_present(path: &Path) -> StoreResult<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(StoreError::Unavailable(format!(
            "cannot remove {}: {error}",
            path.display()
        ))),
    }
}
