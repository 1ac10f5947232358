//! Whether the store takes writes: shared by the writer, the syncer, the checkpointer and the
//! request paths, which read it without a lock.
//!
//! Two conditions stop writes, and they are different:
//! - **Disk full** (`SQLITE_FULL`, `ENOSPC`) is temporary. New messages are refused with
//!   [`StoreError::DiskFull`], everything else (acks, nacks, deletes, which free space) goes on
//!   with the reserve the store gives back (`space.rs`), and the writer probes for free space
//!   and resumes by itself.
//! - **Stopped** is for good: a failed WAL sync (the kernel may have dropped the unsynced pages,
//!   so the page cache can no longer be trusted to reach the disk) or a write error nobody
//!   understands. Every write is refused with [`StoreError::WritesStopped`] until a restart,
//!   which reloads the truth from disk.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_core::store::{StoreError, WriteState};

/// The write state of one store.
#[derive(Debug, Default)]
pub struct WriteHealth {
    full: AtomicBool,
    stopped: OnceLock<String>,
}

impl WriteHealth {
    /// The disk is full now (true) or has room again (false); returns what it was.
    pub fn set_full(&self, full: bool) -> bool {
        self.full.swap(full, Ordering::SeqCst)
    }

    /// The disk was full at the last attempt to write, and no probe found room since.
    pub fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// Stops writes for good; the first reason is kept (and logged).
    pub fn stop(&self, reason: String) {
        let mut first = false;
        self.stopped.get_or_init(|| {
            first = true;
            reason.clone()
        });
        if first {
            tracing::error!(%reason, "the store takes no more writes until a restart");
        }
    }

    /// Why writes stopped for good, if they did.
    pub fn stopped(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// The error for a write refused now, if one is.
    pub fn refusal(&self, adds_data: bool) -> Option<StoreError> {
        if let Some(reason) = self.stopped() {
            return Some(StoreError::WritesStopped(reason.to_owned()));
        }
        (adds_data && self.is_full()).then(disk_full)
    }

    /// For readiness and metrics.
    pub fn state(&self) -> WriteState {
        match self.stopped() {
            Some(reason) => WriteState::Stopped(reason.to_owned()),
            None if self.is_full() => WriteState::DiskFull,
            None => WriteState::Accepting,
        }
    }
}

/// The refusal of new data while the disk is full.
pub fn disk_full() -> StoreError {
    StoreError::DiskFull(
        "no space left in the data directory's filesystem; new messages are refused until space is freed (acks still work)".into(),
    )
}

/// What a failed SQLite call means for the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No space left: temporary, retried once space is free.
    DiskFull,
    /// Another connection holds a lock a moment longer than the busy timeout: retried.
    Busy,
    /// Anything else: writes stop for good.
    Fatal,
}

/// Sorts a SQLite error by what the store does about it.
pub fn classify(error: &rusqlite::Error) -> Failure {
    use rusqlite::ErrorCode;
    match error.sqlite_error_code() {
        Some(ErrorCode::DiskFull) => Failure::DiskFull,
        // Growing the shared-memory index or truncating a file can fail with ENOSPC too,
        // reported as an I/O error of that step.
        Some(ErrorCode::SystemIoFailure)
            if matches!(
                error,
                rusqlite::Error::SqliteFailure(e, _)
                    if e.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE
            ) =>
        {
            Failure::DiskFull
        }
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Failure::Busy,
        _ => Failure::Fatal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite_error(extended_code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(extended_code), None)
    }

    #[test]
    fn a_full_disk_is_not_a_failed_write() {
        use rusqlite::ffi;
        assert_eq!(classify(&sqlite_error(ffi::SQLITE_FULL)), Failure::DiskFull);
        assert_eq!(
            classify(&sqlite_error(ffi::SQLITE_IOERR_SHMSIZE)),
            Failure::DiskFull
        );
        assert_eq!(classify(&sqlite_error(ffi::SQLITE_BUSY)), Failure::Busy);
        assert_eq!(
            classify(&sqlite_error(ffi::SQLITE_IOERR_WRITE)),
            Failure::Fatal
        );
        assert_eq!(
            classify(&sqlite_error(ffi::SQLITE_IOERR_FSYNC)),
            Failure::Fatal
        );
        assert_eq!(classify(&sqlite_error(ffi::SQLITE_CORRUPT)), Failure::Fatal);
    }

    #[test]
    fn full_refuses_new_data_only_and_stopped_refuses_everything_for_good() {
        let health = WriteHealth::default();
        assert!(health.refusal(true).is_none());
        assert!(!health.set_full(true));
        assert!(matches!(
            health.refusal(true),
            Some(StoreError::DiskFull(_))
        ));
        assert!(health.refusal(false).is_none());
        assert_eq!(health.state(), WriteState::DiskFull);
        health.set_full(false);
        health.stop("fdatasync of the WAL failed: Input/output error".into());
        health.stop("a later reason".into());
        assert!(matches!(
            health.refusal(false),
            Some(StoreError::WritesStopped(reason)) if reason.contains("fdatasync")
        ));
        assert!(matches!(health.state(), WriteState::Stopped(_)));
    }
}
