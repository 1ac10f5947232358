//! The model's rules without FUSE, then one round trip through a real mount (skipped where
//! FUSE cannot be mounted).

use std::ffi::OsStr;

use crate::model::{Model, OBJECTS_DIR, ROOT};

fn name(text: &str) -> &OsStr {
    OsStr::new(text)
}

fn backing_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != OBJECTS_DIR)
        .collect();
    names.sort();
    names
}

#[test]
fn unsynced_data_and_names_are_lost_synced_ones_stay() {
    let backing = tempfile::tempdir().unwrap();
    let mut model = Model::open(backing.path()).unwrap();
    let kept = model.create_file(ROOT, name("kept"), 0o600, 0, 0).unwrap();
    let empty = model.create_file(ROOT, name("empty"), 0o600, 0, 0).unwrap();
    model.write(kept, 0, b"durable").unwrap();
    model.sync_file(kept).unwrap();
    model.sync_dir(ROOT).unwrap();
    // Name synced, later data not.
    model.write(kept, 7, b" and lost").unwrap();
    assert_eq!(model.read(kept, 0, 100).unwrap(), b"durable and lost");
    // Name synced, data never.
    model.write(empty, 0, b"lost").unwrap();
    // Data synced, name never: an orphan.
    let orphan = model
        .create_file(ROOT, name("orphan"), 0o600, 0, 0)
        .unwrap();
    model.write(orphan, 0, b"synced").unwrap();
    model.sync_file(orphan).unwrap();

    let before_cut = std::time::Instant::now();
    let report = model.power_cut(None);
    assert!(report.dropped_anything(), "{report:?}");
    // Each file with dropped writes is named, with when its last unsynced write came; the
    // orphan, synced, is not among them.
    let mut dropped: Vec<_> = report
        .dropped_files
        .iter()
        .map(|file| {
            assert!(
                file.last_change.is_some_and(|at| at <= before_cut),
                "{file:?}"
            );
            file.path.clone().unwrap()
        })
        .collect();
    dropped.sort();
    assert_eq!(
        dropped,
        [std::path::Path::new("empty"), std::path::Path::new("kept")]
    );
    assert_eq!(backing_files(backing.path()), ["empty", "kept"]);
    assert_eq!(
        std::fs::read(backing.path().join("kept")).unwrap(),
        b"durable"
    );
    assert!(
        std::fs::read(backing.path().join("empty"))
            .unwrap()
            .is_empty()
    );
    assert!(
        model.read(kept, 0, 1).is_err(),
        "the layer works after the cut"
    );
}

#[test]
fn renames_and_removals_wait_for_the_directory_sync() {
    let backing = tempfile::tempdir().unwrap();
    std::fs::write(backing.path().join("old"), b"content").unwrap();
    std::fs::write(backing.path().join("doomed"), b"x").unwrap();
    let mut model = Model::open(backing.path()).unwrap();
    model
        .rename(ROOT, name("old"), ROOT, name("new"), false)
        .unwrap();
    model.unlink(ROOT, name("doomed")).unwrap();
    assert!(model.lookup(ROOT, name("old")).is_err());
    assert_eq!(backing_files(backing.path()), ["doomed", "old"]);
    model.sync_dir(ROOT).unwrap();
    assert_eq!(backing_files(backing.path()), ["new"]);
    assert_eq!(
        std::fs::read(backing.path().join("new")).unwrap(),
        b"content"
    );
}

#[test]
fn a_truncation_is_seen_at_once_and_durable_after_a_sync() {
    let backing = tempfile::tempdir().unwrap();
    std::fs::write(backing.path().join("f"), b"0123456789").unwrap();
    let mut model = Model::open(backing.path()).unwrap();
    let file = model.lookup(ROOT, name("f")).unwrap();
    model.set_size(file, 4).unwrap();
    model.set_size(file, 8).unwrap();
    assert_eq!(model.read(file, 0, 100).unwrap(), b"0123\0\0\0\0");
    assert_eq!(
        std::fs::read(backing.path().join("f")).unwrap(),
        b"0123456789"
    );
    model.sync_file(file).unwrap();
    assert_eq!(
        std::fs::read(backing.path().join("f")).unwrap(),
        b"0123\0\0\0\0"
    );
}

#[test]
fn directories_become_durable_with_their_parent() {
    let backing = tempfile::tempdir().unwrap();
    let mut model = Model::open(backing.path()).unwrap();
    let dir = model.mkdir(ROOT, name("data"), 0o700, 0, 0).unwrap();
    let file = model.create_file(dir, name("db"), 0o600, 0, 0).unwrap();
    model.write(file, 0, b"rows").unwrap();
    model.sync_file(file).unwrap();
    model.sync_dir(dir).unwrap();
    // The parent was not synced: `data` has no durable name yet.
    assert!(backing_files(backing.path()).is_empty());
    model.sync_dir(ROOT).unwrap();
    assert_eq!(
        std::fs::read(backing.path().join("data/db")).unwrap(),
        b"rows"
    );
}

#[test]
fn torn_writes_let_some_unsynced_sectors_through() {
    let backing = tempfile::tempdir().unwrap();
    let mut model = Model::open(backing.path()).unwrap();
    let file = model.create_file(ROOT, name("wal"), 0o600, 0, 0).unwrap();
    model.sync_dir(ROOT).unwrap();
    model.write(file, 0, &vec![7u8; 64 * 1024]).unwrap();
    let mut rng = rand::rng();
    let report = model.power_cut(Some(&mut rng));
    let sectors = 64 * 1024 / 512;
    assert!(
        report.torn_sectors_written > 0 && report.torn_sectors_written < sectors,
        "{report:?}"
    );
    let on_disk = std::fs::read(backing.path().join("wal")).unwrap();
    let sevens = on_disk.iter().filter(|&&byte| byte == 7).count() as u64;
    assert_eq!(sevens, report.torn_sectors_written * 512);
}

/// A real mount: what the kernel sends (write, fsync, fsyncdir) reaches the model.
#[test]
fn through_a_mount_only_synced_state_survives_a_power_cut() {
    let backing = tempfile::tempdir().unwrap();
    let mountpoint = tempfile::tempdir().unwrap();
    let mounted = match crate::FaultFs::mount(backing.path(), mountpoint.path()) {
        Ok(mounted) => mounted,
        Err(error) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: FUSE cannot be mounted here ({error})");
            return;
        }
        Err(error) => panic!("FUSE cannot be mounted (CI is set): {error}"),
    };
    let root = mountpoint.path();
    use std::io::Write;
    let mut synced = std::fs::File::create(root.join("synced")).unwrap();
    synced.write_all(b"on disk").unwrap();
    synced.sync_data().unwrap();
    std::fs::File::open(root).unwrap().sync_all().unwrap();
    synced.write_all(b", not this").unwrap();
    std::fs::write(root.join("unnamed"), b"lost").unwrap();
    assert_eq!(
        std::fs::read(root.join("synced")).unwrap(),
        b"on disk, not this"
    );
    drop(synced);
    let report = mounted.power_cut(crate::TornWrites::None).unwrap();
    assert!(report.dropped_anything(), "{report:?}");
    assert_eq!(backing_files(backing.path()), ["synced"]);
    assert_eq!(
        std::fs::read(backing.path().join("synced")).unwrap(),
        b"on disk"
    );
    assert!(!backing.path().join(OBJECTS_DIR).exists());
}
