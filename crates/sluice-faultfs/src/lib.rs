//! A filesystem that loses what was not synced when the power goes: test support for sluice's
//! durability promise ("a 2xx means it is on disk").
//!
//! [`FaultFs::mount`] serves a *backing* directory at a mount point over FUSE. Programs on the
//! mount see an ordinary filesystem, but what reaches the backing directory follows the
//! durability rules of POSIX, taken strictly:
//!
//! - **File data.** Bytes written to a file stay in this process's memory (reads see them) until
//!   the file is `fsync`ed or `fdatasync`ed; then its data and size reach the backing directory.
//!   `close` does not sync.
//! - **Names.** Creating, renaming, linking and removing a file or directory changes only the
//!   live view. The backing directory gets a directory's current entries when that directory is
//!   `fsync`ed (SQLite opens the directory `O_RDONLY` and fsyncs it; so does sluice). A file that
//!   was synced but never named durably is lost, like an orphan inode after a crash; a removal
//!   that was never made durable comes back.
//!
//! [`Mounted::power_cut`] is the simulated power cut: everything unsynced is dropped, the layer
//! fails every later request with EIO and is unmounted, and the backing directory is left with
//! exactly what was synced. Kill the program using the mount first (a power cut stops it too):
//! then restart it on the backing directory, directly or through a new mount. With
//! [`TornWrites::Random`], each unsynced 512-byte sector reaches the disk or not at random
//! before the cut, as a disk's write cache may do; unsynced directory changes are always lost.
//! [`Mounted::unmount`] is the clean end: everything is synced first.
//!
//! How the durable state is kept: each file's synced content is one *object* file in a hidden
//! directory of the backing directory (`.faultfs-objects`), and each durable name is a hard link
//! to it, so a file synced after it was named durably updates that name. The objects directory
//! is removed when the layer ends (what only it holds has no durable name).
//!
//! Not modelled: free space (writes never fail for it), timestamps and permissions (applied at
//! once, not at a sync), symlinks and special files (refused), and file locks (the kernel keeps
//! them, for one machine). A directory moved between two directories is made durable whole when
//! the directory it moved into is synced.
//!
//! Mounting needs `/dev/fuse` and either root or the `fusermount3` helper (Debian: `fuse3`).
//! The binary `sluice-faultfs` mounts a layer from the shell (see `src/main.rs`).

mod fuse;
mod model;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use model::{CutReport, DroppedFile};

use crate::fuse::FaultFs as Served;
use crate::model::Model;

/// Whether unsynced writes may partly reach the disk at a power cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TornWrites {
    /// Nothing unsynced survives.
    None,
    /// Each unsynced 512-byte sector survives with probability one half.
    Random,
}

/// Entry point: mounts a layer.
#[derive(Debug)]
pub struct FaultFs;

impl FaultFs {
    /// Serves `backing` at `mountpoint` (an existing, empty directory) until the returned handle
    /// is cut, unmounted or dropped (dropping unmounts cleanly).
    pub fn mount(backing: &Path, mountpoint: &Path) -> std::io::Result<Mounted> {
        let model = Arc::new(Mutex::new(Model::open(backing)?));
        let config = {
            let mut config = fuser::Config::default();
            config.mount_options = vec![
                fuser::MountOption::FSName("sluice-faultfs".into()),
                fuser::MountOption::Subtype("sluice-faultfs".into()),
            ];
            config
        };
        let served = Served {
            model: model.clone(),
        };
        let session = match fuser::spawn_mount(served, mountpoint, &config) {
            Ok(session) => session,
            Err(error) => {
                let _ = lock(&model).discard_objects();
                return Err(error);
            }
        };
        Ok(Mounted {
            session: Some(session),
            model,
            mountpoint: mountpoint.to_owned(),
        })
    }
}

/// A mounted layer.
#[derive(Debug)]
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
    model: Arc<Mutex<Model>>,
    mountpoint: PathBuf,
}

fn lock(model: &Mutex<Model>) -> std::sync::MutexGuard<'_, Model> {
    model
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Mounted {
    /// Where the layer is mounted.
    pub fn mountpoint(&self) -> &Path {
        &self.mountpoint
    }

    /// The simulated power cut: drops everything not synced (see [`TornWrites`]), then
    /// unmounts. The backing directory then holds only what was synced.
    pub fn power_cut(mut self, torn: TornWrites) -> std::io::Result<CutReport> {
        let report = {
            let mut model = lock(&self.model);
            let mut rng = rand::rng();
            match torn {
                TornWrites::None => model.power_cut(None),
                TornWrites::Random => model.power_cut(Some(&mut rng)),
            }
        };
        self.end()?;
        Ok(report)
    }

    /// The clean end: everything is synced, then the layer is unmounted.
    pub fn unmount(mut self) -> std::io::Result<()> {
        lock(&self.model)
            .sync_all()
            .map_err(|errno| std::io::Error::from_raw_os_error(errno.code()))?;
        self.end()
    }

    fn end(&mut self) -> std::io::Result<()> {
        if let Some(session) = self.session.take() {
            session.umount_and_join()?;
        }
        lock(&self.model).discard_objects()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.session.is_some() {
            let mut model = lock(&self.model);
            if !model.powered_off {
                let _ = model.sync_all();
            }
            drop(model);
            let _ = self.end();
        }
    }
}

#[cfg(test)]
mod tests;
