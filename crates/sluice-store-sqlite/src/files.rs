//! The data directory and the files in it: private to the server's user, created in one place.
//!
//! Message bodies are whatever producers sent (personal data, credentials in payloads), so the
//! directory is 0700 and every file of the store 0600, whatever the umask. A directory or file
//! left laxer by an earlier version or by hand is tightened at start, with a log line.
//!
//! SQLite creates the WAL and shared-memory files itself, with the mode of the database file; so
//! the database file is created here first, 0600, and they follow it.
//!
//! Every file the store creates goes through [`create_private_file`], so anything that must
//! happen after a creation (such as syncing the directory entry) has one place to go.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::dir_sync;

/// Mode of the data directory: only its owner may list or enter it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file of the store: only its owner may read or write it.
pub const FILE_MODE: u32 = 0o600;

/// The database file's name in the data directory.
pub const DB_FILE: &str = "sluice.db";
/// SQLite's write-ahead log, next to the database.
pub const WAL_FILE: &str = "sluice.db-wal";
/// SQLite's shared-memory index of the WAL.
pub const SHM_FILE: &str = "sluice.db-shm";
/// The space kept back for acks when the disk fills (`space.rs`).
pub const RESERVE_FILE: &str = "sluice.reserve";

/// Every file the store (or SQLite for it) creates in the data directory.
const STORE_FILES: &[&str] = &[
    DB_FILE,
    WAL_FILE,
    SHM_FILE,
    "sluice.db-journal",
    RESERVE_FILE,
];

/// Creates the data directory (0700) if missing, tightens it and the store's files in it if they
/// are laxer, and creates the database file (0600) so SQLite's own files inherit its mode.
/// Returns the database file's path.
pub fn prepare_data_dir(dir: &Path) -> io::Result<PathBuf> {
    let missing = dir_sync::missing_ancestors(dir);
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    // The new directories' names must survive a power cut too (dir_sync.rs).
    dir_sync::sync_created(&missing)?;
    let metadata = std::fs::metadata(dir)?;
    if !metadata.is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    tighten(dir, metadata.permissions().mode(), DIR_MODE)?;
    for name in STORE_FILES {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(metadata) if metadata.is_file() => {
                tighten(&path, metadata.permissions().mode(), FILE_MODE)?
            }
            Ok(_) => {
                return Err(io::Error::other(format!(
                    "{} is not a regular file",
                    path.display()
                )));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
    }
    let db_path = dir.join(DB_FILE);
    create_private_file(&db_path)?;
    Ok(db_path)
}

/// Opens `path` for writing, creating it 0600 if missing (never truncating it). The one place
/// the store creates a file.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)
}

/// Removes group and other permissions that `wanted` does not grant; logs when it does.
fn tighten(path: &Path, mode: u32, wanted: u32) -> io::Result<()> {
    let mode = mode & 0o7777;
    if mode & !wanted == 0 {
        return Ok(());
    }
    let tightened = mode & wanted;
    std::fs::set_permissions(path, Permissions::from_mode(tightened))?;
    tracing::warn!(
        path = %path.display(),
        was = %format_args!("{mode:o}"),
        now = %format_args!("{tightened:o}"),
        "tightened the permissions of a data file: only the server's user may read the data"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_data_dir_is_private_and_so_is_the_database_file() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b/data");
        let db = prepare_data_dir(&dir).unwrap();
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&db), FILE_MODE);
    }

    #[test]
    fn an_existing_lax_dir_and_its_store_files_are_tightened_and_others_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        for name in [DB_FILE, WAL_FILE, "notes.txt"] {
            std::fs::write(dir.join(name), b"").unwrap();
            std::fs::set_permissions(dir.join(name), Permissions::from_mode(0o644)).unwrap();
        }
        prepare_data_dir(&dir).unwrap();
        assert_eq!(mode(&dir), DIR_MODE);
        assert_eq!(mode(&dir.join(DB_FILE)), FILE_MODE);
        assert_eq!(mode(&dir.join(WAL_FILE)), FILE_MODE);
        assert_eq!(mode(&dir.join("notes.txt")), 0o644);
    }
}
