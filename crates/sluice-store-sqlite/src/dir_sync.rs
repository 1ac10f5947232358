//! Directory entries made durable: a file's name is on disk only once its directory is synced.
//!
//! Syncing a file (the syncer's `fdatasync` of the WAL) makes its data durable, not its name;
//! POSIX asks for an `fsync` of the directory for that, and a power cut before it can take the
//! whole file with it. SQLite syncs the directory for a journal or WAL file only at that file's
//! first sync on the same connection, which for the WAL is the checkpointer's first checkpoint,
//! 200 ms or more after the first answers, and it never syncs the directory above the data
//! directory, nor a removal (the rollback journal it deletes while a new database is set up).
//! So the store opens its files first and syncs the names here, before any answer depends on
//! them: the data directory (and the directories above it that it created), the database, the
//! WAL (created when the writer connection first reads) and the removed journal.

use std::fs::File;
use std::io;
use std::path::Path;

/// `fsync` of a directory: its entries (creations, renames, removals) become durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and any missing parents, and makes each new directory's name durable.
pub fn create_dir_durable(dir: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = dir.ancestors().take_while(|path| !path.exists()).collect();
    std::fs::create_dir_all(dir)?;
    for created in missing {
        let parent = match created.parent() {
            Some(parent) if parent.as_os_str().is_empty() => Path::new("."),
            Some(parent) => parent,
            None => continue,
        };
        fsync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_missing_directories_and_syncs_existing_ones() {
        let root = tempfile::tempdir().unwrap();
        let nested = root.path().join("a/b/c");
        create_dir_durable(&nested).unwrap();
        assert!(nested.is_dir());
        create_dir_durable(&nested).unwrap();
        fsync_dir(&nested).unwrap();
        assert!(fsync_dir(&root.path().join("missing")).is_err());
    }
}
