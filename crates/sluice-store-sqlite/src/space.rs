//! The disk reserve: space kept back in the data directory so acks can still commit when the
//! disk fills.
//!
//! A full disk refuses new messages, but consumers must be able to drain: an ack, nack or delete
//! writes WAL frames before it frees anything. So the store keeps a preallocated file of
//! `disk_reserve_bytes`; when a write hits a full disk it deletes that file, which gives the
//! writes that free space room to commit. The writer then probes every [`PROBE_INTERVAL`]: once
//! the filesystem has room for the reserve twice over, the reserve is allocated again and new
//! messages are taken again. The reserve is at most an eighth of the volume, so on a small
//! volume it can be allocated and the store can resume.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::files;

/// How often a full store checks whether space is back.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(1);
/// Free space a full store waits for at least before it takes new data again; a start with
/// less is a start on a full disk.
pub const RESUME_FREE_MIN: u64 = 1 << 20;
/// Written at a time where the filesystem cannot preallocate.
const ZERO_CHUNK: usize = 1 << 20;

/// The reserve file and the probe schedule. Owned by the writer thread.
#[derive(Debug)]
pub struct Reserve {
    path: PathBuf,
    bytes: u64,
    /// When a full store next looks for space.
    next_probe: Option<Instant>,
}

/// The most of a volume the reserve takes: an eighth. A reserve sized for a big disk (64 MiB by
/// default) on a small volume could never be allocated, and a store that waits for twice the
/// reserve free before it takes new data would wait for ever (issue 30, finding 13).
const VOLUME_SHARE_MAX: u64 = 8;

impl Reserve {
    /// The reserve of `bytes` (0: none) in `dir`, at most an eighth of the volume's size.
    pub fn new(dir: &std::path::Path, bytes: u64) -> Self {
        let path = dir.join(files::RESERVE_FILE);
        let bytes = match volume_bytes(&path) {
            Ok(volume) if bytes > volume / VOLUME_SHARE_MAX => {
                let sized = volume / VOLUME_SHARE_MAX;
                tracing::info!(
                    configured = bytes,
                    volume,
                    reserve = sized,
                    "the disk reserve is sized to the volume (an eighth of it)"
                );
                sized
            }
            _ => bytes,
        };
        Self {
            path,
            bytes,
            next_probe: None,
        }
    }

    /// The reserve's size, as sized to the volume.
    #[cfg(test)]
    fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Allocates the reserve in full. `Ok(false)`: no room for it (the disk is full); nothing of
    /// it is left behind then.
    fn fill(&self) -> io::Result<bool> {
        if self.bytes == 0 {
            return match std::fs::remove_file(&self.path) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => Err(error),
                _ => Ok(true),
            };
        }
        let file = match files::create_private_file(&self.path) {
            Err(error) if is_no_space(&error) => return Ok(false),
            opened => opened?,
        };
        if file.metadata()?.len() >= self.bytes {
            return Ok(true);
        }
        match allocate(&file, self.bytes) {
            Ok(()) => Ok(true),
            Err(error) if is_no_space(&error) => {
                // Nothing of a reserve that does not fit is kept.
                drop(file);
                let _ = std::fs::remove_file(&self.path);
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    /// Frees the reserve for the writes that free space, and schedules the first probe.
    pub fn give_back(&self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => tracing::warn!(
                bytes = self.bytes,
                "gave back the disk reserve so acks can commit"
            ),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => tracing::error!(%error, "cannot delete the disk reserve"),
        }
    }

    /// The store found the disk full: give the reserve back and probe from now on.
    pub fn on_full(&mut self) {
        if self.next_probe.is_none() {
            self.give_back();
            self.next_probe = Some(Instant::now() + PROBE_INTERVAL);
        }
    }

    /// At start: allocates the reserve. False when the disk is full (less than
    /// [`RESUME_FREE_MIN`] free); with room for writes but not for the whole reserve, the store
    /// starts without one (it is taken again after the next full disk) rather than refusing
    /// new messages on a disk that still has room.
    pub fn at_start(&self) -> bool {
        match self.fill() {
            Ok(true) => true,
            Ok(false) => {
                let free = free_bytes(&self.path).unwrap_or(0);
                if free < RESUME_FREE_MIN {
                    return false;
                }
                tracing::warn!(
                    reserve = self.bytes,
                    free,
                    "not enough free space for the disk reserve; running without it"
                );
                true
            }
            Err(error) => {
                tracing::warn!(%error, "cannot allocate the disk reserve; running without it");
                true
            }
        }
    }

    /// When the next probe is due, while the disk is full.
    pub fn next_probe(&self) -> Option<Instant> {
        self.next_probe
    }

    /// If a probe is due: true when there is room for new data again: free space for the
    /// reserve and as much again, and the reserve allocated (the next probe is scheduled
    /// otherwise). Room for the reserve alone is not enough: right after it is given back
    /// there is exactly that much, and new data would fill the disk again at once.
    pub fn probe(&mut self, now: Instant) -> bool {
        match self.next_probe {
            Some(due) if due <= now => {}
            _ => return false,
        }
        let needed = (2 * self.bytes).max(RESUME_FREE_MIN);
        match free_bytes(&self.path) {
            Ok(free) if free >= needed => {}
            Ok(_) => {
                self.next_probe = Some(now + PROBE_INTERVAL);
                return false;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot read the free space of the data directory")
            }
        }
        match self.fill() {
            Ok(true) => {
                self.next_probe = None;
                true
            }
            Ok(false) => {
                self.next_probe = Some(now + PROBE_INTERVAL);
                false
            }
            Err(error) => {
                tracing::warn!(%error, "cannot allocate the disk reserve");
                self.next_probe = Some(now + PROBE_INTERVAL);
                false
            }
        }
    }
}

/// Allocates `bytes` for `file` for real (not a sparse file): `fallocate`, or zeros where the
/// filesystem cannot preallocate.
fn allocate(file: &std::fs::File, bytes: u64) -> io::Result<()> {
    use rustix::fs::{FallocateFlags, fallocate};
    match fallocate(file, FallocateFlags::empty(), 0, bytes) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => {
            use std::io::{Seek, Write};
            let mut file = file;
            file.seek(io::SeekFrom::Start(0))?;
            let zeros = vec![0u8; ZERO_CHUNK];
            let mut left = bytes;
            while left > 0 {
                let now = left.min(ZERO_CHUNK as u64) as usize;
                file.write_all(&zeros[..now])?;
                left -= now as u64;
            }
            file.sync_data()
        }
        Err(errno) => Err(errno.into()),
    }
}

/// The size of the filesystem holding `path`'s directory.
fn volume_bytes(path: &std::path::Path) -> io::Result<u64> {
    let dir = path.parent().unwrap_or(path);
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_blocks.saturating_mul(stats.f_frsize))
}

/// Bytes an unprivileged user may still write in the filesystem holding `path`'s directory.
pub fn free_bytes(path: &std::path::Path) -> io::Result<u64> {
    let dir = path.parent().unwrap_or(path);
    let stats = rustix::fs::statvfs(dir)?;
    Ok(stats.f_bavail.saturating_mul(stats.f_frsize))
}

fn is_no_space(error: &io::Error) -> bool {
    error.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
        || error.kind() == io::ErrorKind::StorageFull
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_at_most_an_eighth_of_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let volume = volume_bytes(&dir.path().join("x")).unwrap();
        assert_eq!(
            Reserve::new(dir.path(), 1 << 20).bytes(),
            (1 << 20).min(volume / 8)
        );
        assert_eq!(Reserve::new(dir.path(), u64::MAX).bytes(), volume / 8);
        assert_eq!(Reserve::new(dir.path(), 0).bytes(), 0);
    }
}
