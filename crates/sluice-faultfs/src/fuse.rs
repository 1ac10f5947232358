//! The FUSE side: kernel requests mapped onto the [`Model`], one lock for all of it.
//!
//! Writes reach this process one by one (no writeback cache is asked for), so every `write`,
//! `fsync` and `fsyncdir` a program makes is seen here. File locks are left to the kernel (the
//! filesystem does not ask for `FUSE_POSIX_LOCKS`), which is what SQLite needs in one process.

use std::ffi::OsStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::model::{Kind, Model};

/// How long the kernel may cache names and attributes. Every change goes through this process,
/// so the kernel's own cache stays right; the layer is unmounted at a power cut.
const TTL: Duration = Duration::from_secs(1);
/// `fallocate` mode bit: do not change the size.
const FALLOC_FL_KEEP_SIZE: i32 = 0x01;

/// The filesystem served over FUSE.
pub struct FaultFs {
    pub model: Arc<Mutex<Model>>,
}

impl FaultFs {
    fn model(&self) -> MutexGuard<'_, Model> {
        // A panic while holding the lock already failed the request; keep serving.
        self.model
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn attr(model: &Model, ino: u64) -> Result<FileAttr, Errno> {
    let node = model.node(ino)?;
    let (kind, size) = match &node.kind {
        Kind::File(file) => (FileType::RegularFile, file.size),
        Kind::Dir(_) => (FileType::Directory, 0),
    };
    let nlink = match &node.kind {
        Kind::Dir(_) => 2,
        Kind::File(_) => node.links,
    };
    Ok(FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: node.mtime,
        mtime: node.mtime,
        ctime: node.ctime,
        crtime: node.ctime,
        kind,
        perm: node.perm,
        nlink,
        uid: node.uid,
        gid: node.gid,
        rdev: 0,
        blksize: 4096,
        flags: 0,
    })
}

fn time(value: TimeOrNow) -> SystemTime {
    match value {
        TimeOrNow::SpecificTime(time) => time,
        TimeOrNow::Now => SystemTime::now(),
    }
}

fn perm(mode: u32, umask: u32) -> u16 {
    ((mode & !umask) & 0o7777) as u16
}

impl Filesystem for FaultFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let model = self.model();
        match model
            .lookup(parent.0, name)
            .and_then(|ino| attr(&model, ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match attr(&self.model(), ino.0) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut model = self.model();
        let result = (|| {
            if let Some(size) = size {
                model.set_size(ino.0, size)?;
            }
            model.set_attr(
                ino.0,
                mode.map(|mode| (mode & 0o7777) as u16),
                uid,
                gid,
                mtime.map(time),
            )?;
            attr(&model, ino.0)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(error) => reply.error(error),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        // Only regular files are part of the model.
        if mode & 0o170000 != 0o100000 {
            reply.error(Errno::EPERM);
            return;
        }
        let mut model = self.model();
        match model
            .create_file(parent.0, name, perm(mode, umask), req.uid(), req.gid())
            .and_then(|ino| attr(&model, ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut model = self.model();
        match model
            .mkdir(parent.0, name, perm(mode, umask), req.uid(), req.gid())
            .and_then(|ino| attr(&model, ino))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.model().unlink(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.model().rmdir(parent.0, name) {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            reply.error(Errno::EINVAL);
            return;
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        match self
            .model()
            .rename(parent.0, name, newparent.0, newname, no_replace)
        {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }

    fn link(
        &self,
        _req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        let mut model = self.model();
        match model
            .link(ino.0, newparent.0, newname)
            .and_then(|()| attr(&model, ino.0))
        {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(error) => reply.error(error),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.model().node(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(error) => reply.error(error),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        match self.model().read(ino.0, offset, size) {
            Ok(data) => reply.data(&data),
            Err(error) => reply.error(error),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        match self.model().write(ino.0, offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(error) => reply.error(error),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() does not sync.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.model().sync_file(ino.0) {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.model().entries(ino.0) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(error) => reply.error(error),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let entries = match self.model().entries(ino.0) {
            Ok(entries) => entries,
            Err(error) => return reply.error(error),
        };
        for (i, (child, is_dir, name)) in entries.into_iter().enumerate().skip(offset as usize) {
            let kind = if is_dir {
                FileType::Directory
            } else {
                FileType::RegularFile
            };
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.model().sync_dir(ino.0) {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // Space is not modelled: plenty of it.
        reply.statfs(1 << 28, 1 << 27, 1 << 27, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        match self.model().node(ino.0) {
            Ok(_) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let mut model = self.model();
        match model
            .create_file(parent.0, name, perm(mode, umask), req.uid(), req.gid())
            .and_then(|ino| attr(&model, ino))
        {
            Ok(attr) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(0),
                FopenFlags::empty(),
            ),
            Err(error) => reply.error(error),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode & !FALLOC_FL_KEEP_SIZE != 0 {
            reply.error(Errno::EOPNOTSUPP);
            return;
        }
        let mut model = self.model();
        let result = (|| {
            let size = match &model.node(ino.0)?.kind {
                Kind::File(file) => file.size,
                Kind::Dir(_) => return Err(Errno::EISDIR),
            };
            // Space is not modelled; only the size can change (the new bytes read as zeros).
            let end = offset.saturating_add(length);
            if mode & FALLOC_FL_KEEP_SIZE == 0 && end > size {
                model.set_size(ino.0, end)?;
            }
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        }
    }
}
