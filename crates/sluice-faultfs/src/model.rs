//! What a program sees (the live state) and what would survive a power cut (the durable state).
//!
//! The durable state is the backing directory itself: a file's durable content is one *object*
//! file in [`OBJECTS_DIR`], and each durable name of it is a hard link to that object in the
//! backing tree. The live state adds, in memory:
//! - per file, the pages written since its last `fsync` (reads see them) and its live size;
//! - per directory, its live entries; the durable entries change only when the directory itself
//!   is synced, and then become exactly the live ones (creations, renames, removals together).
//!
//! So a file created and fsynced but whose directory was never synced has its data in an object
//! and no name: after a power cut it is gone, as an orphan inode on a real disk. The model
//! follows what POSIX promises, not what one filesystem happens to do; ext4, for one, often makes
//! a new name durable together with the file's data.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use fuser::Errno;
use rand::Rng;

/// Where the durable content of every file is kept, at the top of the backing directory. Hidden
/// from the mounted view and removed after a power cut (what is left there has no durable name).
pub const OBJECTS_DIR: &str = ".faultfs-objects";
/// The inode number of the mounted root.
pub const ROOT: u64 = 1;
/// Unsynced writes are kept in pages of this size.
const PAGE: u64 = 4096;
/// With torn writes, each unsynced sector independently reaches the disk or not.
const SECTOR: u64 = 512;

type Result<T> = std::result::Result<T, Errno>;

/// One file or directory.
#[derive(Debug)]
pub struct Node {
    pub kind: Kind,
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub mtime: SystemTime,
    pub ctime: SystemTime,
    /// Names in the live namespace (a directory counts 1).
    pub links: u32,
}

#[derive(Debug)]
pub enum Kind {
    File(FileData),
    Dir(DirData),
}

#[derive(Debug)]
pub struct FileData {
    object: File,
    object_path: PathBuf,
    /// Length of the object: the durable length.
    durable_len: u64,
    /// Object bytes at and after this offset read as zeros (a truncation not yet synced).
    visible_len: u64,
    /// The live size.
    pub size: u64,
    /// Pages written since the last sync, by page number; reads see them.
    dirty: BTreeMap<u64, Box<[u8]>>,
    /// When the latest write or size change since the last sync came (`None`: none since).
    last_unsynced_change: Option<Instant>,
}

#[derive(Debug)]
pub struct DirData {
    pub live: BTreeMap<OsString, u64>,
    durable: BTreeMap<OsString, u64>,
    /// The live parent, for `..`.
    pub parent: u64,
    /// The durable entry naming this directory, if any (the root has none and needs none).
    durable_at: Option<(u64, OsString)>,
}

/// What a power cut threw away.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CutReport {
    /// Files that had unsynced writes.
    pub files_with_unsynced_data: usize,
    /// Each of those files, so a test can tell what was dropped (a database's log written while
    /// it answered) from what may always be (start-up files, a shared-memory index).
    pub dropped_files: Vec<DroppedFile>,
    /// Unsynced bytes dropped (whole pages).
    pub unsynced_bytes: u64,
    /// Directories whose live entries differed from their durable ones.
    pub dirs_with_unsynced_entries: usize,
    /// With torn writes: unsynced sectors that reached the disk anyway.
    pub torn_sectors_written: u64,
}

/// One file whose unsynced writes a power cut dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedFile {
    /// Its live path, relative to the mount point; `None` for a file that had no name left.
    pub path: Option<PathBuf>,
    /// Unsynced bytes dropped (whole pages; 0 for a size change alone).
    pub unsynced_bytes: u64,
    /// When its latest unsynced write or size change came.
    pub last_change: Option<Instant>,
}

impl CutReport {
    /// Whether the cut dropped anything at all.
    pub fn dropped_anything(&self) -> bool {
        self.files_with_unsynced_data > 0 || self.dirs_with_unsynced_entries > 0
    }
}

/// The whole filesystem.
#[derive(Debug)]
pub struct Model {
    backing: PathBuf,
    objects: PathBuf,
    nodes: HashMap<u64, Node>,
    next_ino: u64,
    /// Set by a power cut: every later operation fails with EIO.
    pub powered_off: bool,
}

fn io_errno(error: std::io::Error) -> Errno {
    Errno::from(error)
}

impl Model {
    /// Takes over `backing`: everything in it is durable and live. A leftover objects directory
    /// (from a power cut that was not cleaned up) holds nothing with a name and is removed.
    pub fn open(backing: &Path) -> std::io::Result<Model> {
        let backing = backing.canonicalize()?;
        let objects = backing.join(OBJECTS_DIR);
        if objects.exists() {
            std::fs::remove_dir_all(&objects)?;
        }
        std::fs::create_dir(&objects)?;
        let meta = std::fs::metadata(&backing)?;
        let now = SystemTime::now();
        let mut model = Model {
            backing: backing.clone(),
            objects,
            nodes: HashMap::new(),
            next_ino: ROOT + 1,
            powered_off: false,
        };
        model.nodes.insert(
            ROOT,
            Node {
                kind: Kind::Dir(DirData {
                    live: BTreeMap::new(),
                    durable: BTreeMap::new(),
                    parent: ROOT,
                    durable_at: None,
                }),
                perm: (meta.permissions().mode() & 0o7777) as u16,
                uid: meta.uid(),
                gid: meta.gid(),
                mtime: now,
                ctime: now,
                links: 1,
            },
        );
        let mut seen = HashMap::new();
        model.import(ROOT, &backing, &mut seen)?;
        Ok(model)
    }

    /// Adds what is under `path` (the backing location of directory `dir`) as durable and live.
    fn import(
        &mut self,
        dir: u64,
        path: &Path,
        seen: &mut HashMap<(u64, u64), u64>,
    ) -> std::io::Result<()> {
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let name = entry.file_name();
            if dir == ROOT && name == OBJECTS_DIR {
                continue;
            }
            let meta = std::fs::symlink_metadata(entry.path())?;
            let ino = if meta.is_dir() {
                let ino = self.new_node(
                    Kind::Dir(DirData {
                        live: BTreeMap::new(),
                        durable: BTreeMap::new(),
                        parent: dir,
                        durable_at: Some((dir, name.clone())),
                    }),
                    &meta,
                );
                self.import(ino, &entry.path(), seen)?;
                let data = self.dir_mut(ino).expect("just made");
                data.live = data.durable.clone();
                ino
            } else if meta.is_file() {
                if let Some(&ino) = seen.get(&(meta.dev(), meta.ino())) {
                    self.node_mut(ino).expect("seen").links += 1;
                    ino
                } else {
                    let ino = self.next_ino;
                    let object_path = self.objects.join(ino.to_string());
                    std::fs::hard_link(entry.path(), &object_path)?;
                    let object = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&object_path)?;
                    let ino = self.new_node(
                        Kind::File(FileData {
                            object,
                            object_path,
                            durable_len: meta.len(),
                            visible_len: u64::MAX,
                            size: meta.len(),
                            dirty: BTreeMap::new(),
                            last_unsynced_change: None,
                        }),
                        &meta,
                    );
                    seen.insert((meta.dev(), meta.ino()), ino);
                    ino
                }
            } else {
                // Symlinks, sockets and the like are not part of the model.
                continue;
            };
            self.dir_mut(dir)
                .expect("importing into a directory")
                .durable
                .insert(name, ino);
        }
        if dir == ROOT {
            let root = self.dir_mut(ROOT).expect("root");
            root.live = root.durable.clone();
        }
        Ok(())
    }

    fn new_node(&mut self, kind: Kind, meta: &std::fs::Metadata) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        let mtime = meta.modified().unwrap_or_else(|_| SystemTime::now());
        self.nodes.insert(
            ino,
            Node {
                kind,
                perm: (meta.permissions().mode() & 0o7777) as u16,
                uid: meta.uid(),
                gid: meta.gid(),
                mtime,
                ctime: mtime,
                links: 1,
            },
        );
        ino
    }

    fn check_power(&self) -> Result<()> {
        if self.powered_off {
            Err(Errno::EIO)
        } else {
            Ok(())
        }
    }

    pub fn node(&self, ino: u64) -> Result<&Node> {
        self.check_power()?;
        self.nodes.get(&ino).ok_or(Errno::ENOENT)
    }

    fn node_mut(&mut self, ino: u64) -> Result<&mut Node> {
        self.check_power()?;
        self.nodes.get_mut(&ino).ok_or(Errno::ENOENT)
    }

    fn dir_mut(&mut self, ino: u64) -> Result<&mut DirData> {
        match &mut self.node_mut(ino)?.kind {
            Kind::Dir(dir) => Ok(dir),
            Kind::File(_) => Err(Errno::ENOTDIR),
        }
    }

    fn dir(&self, ino: u64) -> Result<&DirData> {
        match &self.node(ino)?.kind {
            Kind::Dir(dir) => Ok(dir),
            Kind::File(_) => Err(Errno::ENOTDIR),
        }
    }

    fn file_mut(&mut self, ino: u64) -> Result<&mut FileData> {
        match &mut self.node_mut(ino)?.kind {
            Kind::File(file) => Ok(file),
            Kind::Dir(_) => Err(Errno::EISDIR),
        }
    }

    // ---- namespace ---------------------------------------------------------------------------

    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<u64> {
        self.dir(parent)?
            .live
            .get(name)
            .copied()
            .ok_or(Errno::ENOENT)
    }

    /// The live entries of a directory, `.` and `..` first.
    pub fn entries(&self, dir: u64) -> Result<Vec<(u64, bool, OsString)>> {
        let data = self.dir(dir)?;
        let mut entries = vec![
            (dir, true, OsString::from(".")),
            (data.parent, true, OsString::from("..")),
        ];
        for (name, &ino) in &data.live {
            let is_dir = matches!(self.nodes[&ino].kind, Kind::Dir(_));
            entries.push((ino, is_dir, name.clone()));
        }
        Ok(entries)
    }

    fn check_new_name(&self, parent: u64, name: &OsStr) -> Result<()> {
        if self.dir(parent)?.live.contains_key(name) {
            return Err(Errno::EEXIST);
        }
        if name.len() > 255 {
            return Err(Errno::ENAMETOOLONG);
        }
        Ok(())
    }

    /// A new, empty regular file in the live namespace; its object exists at once (empty).
    pub fn create_file(
        &mut self,
        parent: u64,
        name: &OsStr,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> Result<u64> {
        self.check_new_name(parent, name)?;
        let ino = self.next_ino;
        let object_path = self.objects.join(ino.to_string());
        let object = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&object_path)
            .map_err(io_errno)?;
        self.next_ino += 1;
        let now = SystemTime::now();
        self.nodes.insert(
            ino,
            Node {
                kind: Kind::File(FileData {
                    object,
                    object_path,
                    durable_len: 0,
                    visible_len: u64::MAX,
                    size: 0,
                    dirty: BTreeMap::new(),
                    last_unsynced_change: None,
                }),
                perm,
                uid,
                gid,
                mtime: now,
                ctime: now,
                links: 1,
            },
        );
        self.dir_mut(parent)?.live.insert(name.to_owned(), ino);
        Ok(ino)
    }

    pub fn mkdir(
        &mut self,
        parent: u64,
        name: &OsStr,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> Result<u64> {
        self.check_new_name(parent, name)?;
        let ino = self.next_ino;
        self.next_ino += 1;
        let now = SystemTime::now();
        self.nodes.insert(
            ino,
            Node {
                kind: Kind::Dir(DirData {
                    live: BTreeMap::new(),
                    durable: BTreeMap::new(),
                    parent,
                    durable_at: None,
                }),
                perm,
                uid,
                gid,
                mtime: now,
                ctime: now,
                links: 1,
            },
        );
        self.dir_mut(parent)?.live.insert(name.to_owned(), ino);
        Ok(ino)
    }

    pub fn unlink(&mut self, parent: u64, name: &OsStr) -> Result<()> {
        let ino = self.lookup(parent, name)?;
        if matches!(self.node(ino)?.kind, Kind::Dir(_)) {
            return Err(Errno::EISDIR);
        }
        self.dir_mut(parent)?.live.remove(name);
        let node = self.node_mut(ino)?;
        node.links -= 1;
        node.ctime = SystemTime::now();
        Ok(())
    }

    pub fn rmdir(&mut self, parent: u64, name: &OsStr) -> Result<()> {
        let ino = self.lookup(parent, name)?;
        if !self.dir(ino)?.live.is_empty() {
            return Err(Errno::ENOTEMPTY);
        }
        self.dir_mut(parent)?.live.remove(name);
        self.node_mut(ino)?.links = 0;
        Ok(())
    }

    pub fn link(&mut self, ino: u64, parent: u64, name: &OsStr) -> Result<()> {
        if matches!(self.node(ino)?.kind, Kind::Dir(_)) {
            return Err(Errno::EPERM);
        }
        self.check_new_name(parent, name)?;
        self.dir_mut(parent)?.live.insert(name.to_owned(), ino);
        self.node_mut(ino)?.links += 1;
        Ok(())
    }

    pub fn rename(
        &mut self,
        parent: u64,
        name: &OsStr,
        new_parent: u64,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<()> {
        let ino = self.lookup(parent, name)?;
        let moving_dir = matches!(self.node(ino)?.kind, Kind::Dir(_));
        self.dir(new_parent)?;
        if moving_dir && self.is_ancestor(ino, new_parent) {
            return Err(Errno::EINVAL);
        }
        if let Ok(target) = self.lookup(new_parent, new_name) {
            if target == ino {
                return Ok(());
            }
            if no_replace {
                return Err(Errno::EEXIST);
            }
            match (&self.node(target)?.kind, moving_dir) {
                (Kind::Dir(dir), true) if dir.live.is_empty() => {}
                (Kind::Dir(_), true) => return Err(Errno::ENOTEMPTY),
                (Kind::Dir(_), false) => return Err(Errno::EISDIR),
                (Kind::File(_), true) => return Err(Errno::ENOTDIR),
                (Kind::File(_), false) => {}
            }
            let target_node = self.node_mut(target)?;
            target_node.links = target_node.links.saturating_sub(1);
        }
        self.dir_mut(parent)?.live.remove(name);
        self.dir_mut(new_parent)?
            .live
            .insert(new_name.to_owned(), ino);
        if moving_dir {
            self.dir_mut(ino)?.parent = new_parent;
        }
        self.node_mut(ino)?.ctime = SystemTime::now();
        Ok(())
    }

    /// Whether `ancestor` is `dir` or above it in the live tree.
    fn is_ancestor(&self, ancestor: u64, mut dir: u64) -> bool {
        loop {
            if dir == ancestor {
                return true;
            }
            if dir == ROOT {
                return false;
            }
            match &self.nodes[&dir].kind {
                Kind::Dir(data) => dir = data.parent,
                Kind::File(_) => return false,
            }
        }
    }

    // ---- file data ---------------------------------------------------------------------------

    pub fn read(&mut self, ino: u64, offset: u64, len: u32) -> Result<Vec<u8>> {
        let file = self.file_mut(ino)?;
        let end = file.size.min(offset.saturating_add(u64::from(len)));
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut at = offset;
        while at < end {
            let page = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = ((PAGE - at % PAGE).min(end - at)) as usize;
            match file.dirty.get(&page) {
                Some(data) => out.extend_from_slice(&data[within..within + take]),
                None => {
                    let mut buf = vec![0; take];
                    file.read_visible(at, &mut buf).map_err(io_errno)?;
                    out.extend_from_slice(&buf);
                }
            }
            at += take as u64;
        }
        Ok(out)
    }

    pub fn write(&mut self, ino: u64, offset: u64, data: &[u8]) -> Result<()> {
        let file = self.file_mut(ino)?;
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let page = at / PAGE;
            let within = (at % PAGE) as usize;
            let take = (PAGE as usize - within).min(rest.len());
            let buf = file.dirty_page(page).map_err(io_errno)?;
            buf[within..within + take].copy_from_slice(&rest[..take]);
            rest = &rest[take..];
            at += take as u64;
        }
        file.size = file.size.max(offset + data.len() as u64);
        file.last_unsynced_change = Some(Instant::now());
        self.node_mut(ino)?.mtime = SystemTime::now();
        Ok(())
    }

    /// `truncate`/`ftruncate`: the live size changes now, the durable one at the next sync.
    pub fn set_size(&mut self, ino: u64, size: u64) -> Result<()> {
        let file = self.file_mut(ino)?;
        if size < file.size {
            let first_gone = size.div_ceil(PAGE);
            file.dirty.split_off(&first_gone);
            if !size.is_multiple_of(PAGE)
                && let Some(page) = file.dirty.get_mut(&(size / PAGE))
            {
                page[(size % PAGE) as usize..].fill(0);
            }
            file.visible_len = file.visible_len.min(size);
        }
        file.size = size;
        file.last_unsynced_change = Some(Instant::now());
        self.node_mut(ino)?.mtime = SystemTime::now();
        Ok(())
    }

    pub fn set_attr(
        &mut self,
        ino: u64,
        perm: Option<u16>,
        uid: Option<u32>,
        gid: Option<u32>,
        mtime: Option<SystemTime>,
    ) -> Result<()> {
        let node = self.node_mut(ino)?;
        if let Some(perm) = perm {
            node.perm = perm;
        }
        if let Some(uid) = uid {
            node.uid = uid;
        }
        if let Some(gid) = gid {
            node.gid = gid;
        }
        if let Some(mtime) = mtime {
            node.mtime = mtime;
        }
        node.ctime = SystemTime::now();
        Ok(())
    }

    /// `fsync`/`fdatasync` of a file: its data and size become durable (not its names).
    pub fn sync_file(&mut self, ino: u64) -> Result<()> {
        self.file_mut(ino)?.sync().map_err(io_errno)
    }

    // ---- directories -------------------------------------------------------------------------

    /// The backing path of a directory, if its durable names reach the root.
    fn durable_path(&self, dir: u64) -> Option<PathBuf> {
        if dir == ROOT {
            return Some(self.backing.clone());
        }
        match &self.nodes.get(&dir)?.kind {
            Kind::Dir(DirData {
                durable_at: Some((parent, name)),
                ..
            }) => Some(self.durable_path(*parent)?.join(name)),
            _ => None,
        }
    }

    /// `fsync` of a directory: its durable entries become its live ones.
    pub fn sync_dir(&mut self, dir: u64) -> Result<()> {
        let live = self.dir(dir)?.live.clone();
        let durable = self.dir(dir)?.durable.clone();
        let path = self.durable_path(dir);
        for (name, &ino) in &durable {
            if live.get(name) == Some(&ino) {
                continue;
            }
            if let Some(path) = &path {
                remove_backing(&path.join(name)).map_err(io_errno)?;
            }
            if let Some(Node {
                kind: Kind::Dir(child),
                ..
            }) = self.nodes.get_mut(&ino)
                && child.durable_at.as_ref() == Some(&(dir, name.clone()))
            {
                child.durable_at = None;
            }
        }
        self.dir_mut(dir)?.durable = live.clone();
        for (name, &ino) in &live {
            if durable.get(name) == Some(&ino) {
                continue;
            }
            let child_is_dir = matches!(self.nodes[&ino].kind, Kind::Dir(_));
            if child_is_dir {
                // A directory has one durable place: a durable rename moves it whole.
                let old = self.dir(ino)?.durable_at.clone();
                if let Some((old_parent, old_name)) = old {
                    if let Some(old_path) = self.durable_path(ino) {
                        remove_backing(&old_path).map_err(io_errno)?;
                    }
                    self.dir_mut(old_parent)?.durable.remove(&old_name);
                }
                self.dir_mut(ino)?.durable_at = Some((dir, name.clone()));
            }
            if let Some(path) = &path {
                self.materialize(ino, &path.join(name)).map_err(io_errno)?;
            }
        }
        Ok(())
    }

    /// Writes a node's durable state at `path` in the backing tree: a hard link to a file's
    /// object, or a directory with its durable entries.
    fn materialize(&self, ino: u64, path: &Path) -> std::io::Result<()> {
        match &self.nodes[&ino].kind {
            Kind::File(file) => std::fs::hard_link(&file.object_path, path),
            Kind::Dir(dir) => {
                std::fs::create_dir(path)?;
                for (name, &child) in &dir.durable {
                    self.materialize(child, &path.join(name))?;
                }
                Ok(())
            }
        }
    }

    // ---- power -------------------------------------------------------------------------------

    /// Everything becomes durable, as if the machine stayed on long enough (a clean unmount).
    pub fn sync_all(&mut self) -> Result<()> {
        let files: Vec<u64> = self
            .nodes
            .iter()
            .filter(|(_, node)| matches!(node.kind, Kind::File(_)))
            .map(|(&ino, _)| ino)
            .collect();
        for ino in files {
            self.sync_file(ino)?;
        }
        let mut dirs = vec![ROOT];
        while let Some(dir) = dirs.pop() {
            self.sync_dir(dir)?;
            for &child in self.dir(dir)?.live.values() {
                if matches!(self.nodes[&child].kind, Kind::Dir(_)) {
                    dirs.push(child);
                }
            }
        }
        Ok(())
    }

    /// The power goes: unsynced state is dropped (with `torn`, each unsynced 512-byte sector
    /// reaches the disk or not at random first), and every later operation fails with EIO.
    pub fn power_cut(&mut self, torn: Option<&mut dyn rand::RngCore>) -> CutReport {
        let mut report = CutReport::default();
        let mut torn = torn;
        let paths = self.live_paths();
        for (ino, node) in self.nodes.iter_mut() {
            match &mut node.kind {
                Kind::File(file) => {
                    if file.dirty.is_empty()
                        && file.size == file.durable_len
                        && file.visible_len >= file.durable_len
                    {
                        continue;
                    }
                    report.files_with_unsynced_data += 1;
                    report.unsynced_bytes += file.dirty.len() as u64 * PAGE;
                    report.dropped_files.push(DroppedFile {
                        path: paths.get(ino).cloned(),
                        unsynced_bytes: file.dirty.len() as u64 * PAGE,
                        last_change: file.last_unsynced_change,
                    });
                    if let Some(rng) = torn.as_deref_mut() {
                        report.torn_sectors_written += file.write_torn(rng);
                    }
                    file.dirty.clear();
                }
                Kind::Dir(dir) => {
                    if dir.live != dir.durable {
                        report.dirs_with_unsynced_entries += 1;
                    }
                }
            }
        }
        self.powered_off = true;
        report
    }

    /// A live path (relative to the root) of every node that has one; the first name found for
    /// a file with several.
    fn live_paths(&self) -> HashMap<u64, PathBuf> {
        let mut paths = HashMap::new();
        let mut dirs = vec![(ROOT, PathBuf::new())];
        while let Some((dir, path)) = dirs.pop() {
            let Ok(data) = self.dir(dir) else { continue };
            for (name, &child) in &data.live {
                let child_path = path.join(name);
                if matches!(
                    self.nodes.get(&child).map(|node| &node.kind),
                    Some(Kind::Dir(_))
                ) {
                    dirs.push((child, child_path.clone()));
                }
                paths.entry(child).or_insert(child_path);
            }
        }
        paths
    }

    /// Removes the objects directory: after a power cut it holds only data without a durable
    /// name; after [`Model::sync_all`], only extra links to files that have one.
    pub fn discard_objects(&self) -> std::io::Result<()> {
        std::fs::remove_dir_all(&self.objects)
    }
}

fn remove_backing(path: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

impl FileData {
    /// Reads durable bytes as the live view sees them (zeros past a pending truncation or the
    /// object's end).
    fn read_visible(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        buf.fill(0);
        let limit = self.durable_len.min(self.visible_len);
        if offset >= limit {
            return Ok(());
        }
        let take = ((limit - offset) as usize).min(buf.len());
        self.object.read_exact_at(&mut buf[..take], offset)
    }

    fn dirty_page(&mut self, page: u64) -> std::io::Result<&mut Box<[u8]>> {
        if !self.dirty.contains_key(&page) {
            let mut data = vec![0; PAGE as usize].into_boxed_slice();
            self.read_visible(page * PAGE, &mut data)?;
            self.dirty.insert(page, data);
        }
        Ok(self.dirty.get_mut(&page).expect("inserted above"))
    }

    fn sync(&mut self) -> std::io::Result<()> {
        if self.visible_len < self.durable_len {
            self.object.set_len(self.visible_len)?;
        }
        for (&page, data) in &self.dirty {
            let start = page * PAGE;
            if start >= self.size {
                break;
            }
            let len = (self.size - start).min(PAGE) as usize;
            self.object.write_all_at(&data[..len], start)?;
        }
        self.object.set_len(self.size)?;
        self.durable_len = self.size;
        self.visible_len = u64::MAX;
        self.dirty.clear();
        self.last_unsynced_change = None;
        Ok(())
    }

    /// Writes a random half of the unsynced sectors to the object; returns how many.
    fn write_torn(&mut self, rng: &mut dyn rand::RngCore) -> u64 {
        let mut written = 0;
        for (&page, data) in &self.dirty {
            for sector in 0..PAGE / SECTOR {
                let start = page * PAGE + sector * SECTOR;
                if start >= self.size || !rng.random_bool(0.5) {
                    continue;
                }
                let within = (sector * SECTOR) as usize;
                let len = (self.size - start).min(SECTOR) as usize;
                if self
                    .object
                    .write_all_at(&data[within..within + len], start)
                    .is_ok()
                {
                    written += 1;
                }
            }
        }
        written
    }
}
