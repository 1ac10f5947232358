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
use std::path::{Path, PathBuf};

/// `fsync` of a directory: its entries (creations, renames, removals) become durable.
pub fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// The directories of `dir`'s path that do not exist yet, deepest first: call before creating
/// them, then [`sync_created`] after.
pub fn missing_ancestors(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .take_while(|path| !path.as_os_str().is_empty() && !path.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Makes the names of directories just created durable, by syncing each one's parent.
pub fn sync_created(created: &[PathBuf]) -> io::Result<()> {
    for dir in created {
        let parent = match dir.parent() {
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
    fn names_the_missing_directories_and_syncs_their_parents() {
        let root = tempfile::tempdir().unwrap();
        let nested = root.path().join("a/b/c");
        let missing = missing_ancestors(&nested);
        assert_eq!(
            missing,
            [
                nested.clone(),
                root.path().join("a/b"),
                root.path().join("a")
            ]
        );
        std::fs::create_dir_all(&nested).unwrap();
        sync_created(&missing).unwrap();
        assert!(missing_ancestors(&nested).is_empty());
        fsync_dir(&nested).unwrap();
        assert!(fsync_dir(&root.path().join("missing")).is_err());
    }
}
