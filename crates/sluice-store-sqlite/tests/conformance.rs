//! The store conformance suite (`sluice-store-tests`) against the SQLite store: one test per
//! case, each on a fresh store in its own temporary directory. It runs three times: with the
//! payload cache (bodies served from memory), without it (every body read back from disk), and
//! paging (at most two ready messages of a queue and priority in memory, the rest read back from
//! disk as they are needed), so every rule is shown to hold whatever is paged out. After
//! each case the closed store must open again and pass SQLite's integrity check: no case may
//! leave a store that cannot restart.

use std::sync::Arc;

use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
use sluice_store_tests::{Clock, ManualClock, Opened};

/// A fresh store at the clock's time, keeping `payload_cache_bytes` of bodies in memory.
fn open(clock: &ManualClock, payload_cache_bytes: usize) -> Opened {
    open_with(
        clock,
        payload_cache_bytes,
        SqliteOptions::new("unused").resident_messages,
    )
}

/// As [`open`], keeping at most `resident_messages` ready messages of each queue and priority in
/// memory.
fn open_with(clock: &ManualClock, payload_cache_bytes: usize, resident_messages: usize) -> Opened {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut options = SqliteOptions::new(dir.path());
    // What is checked here is behaviour, not crash safety (the crash tests cover that): the
    // OS-level durability keeps hundreds of small commits fast on any disk.
    options.durability = Durability::Os;
    options.disk_reserve_bytes = 0;
    options.payload_cache_bytes = payload_cache_bytes;
    options.resident_messages = resident_messages;
    let store = SharedSqliteStore::open(options.clone(), clock.now_ms()).expect("the store opens");
    let path = dir.path().to_owned();
    let now_ms = clock.now_ms();
    let reopen_options = options.clone();
    let reopen_clock = clock.clone();
    Opened::new(Arc::new(store))
        .reopening(move || {
            let store = SharedSqliteStore::open(reopen_options.clone(), reopen_clock.now_ms())
                .expect("the store opens again");
            async move { Arc::new(store) as Arc<dyn sluice_store_tests::Store> }
        })
        .after_close(async move {
            let reopened = SharedSqliteStore::open(options, now_ms)
                .expect("the store the case left opens again");
            sluice_store_tests::Store::close(&reopened)
                .await
                .expect("and closes");
            let conn = rusqlite::Connection::open(path.join("sluice.db")).expect("the database");
            let check: String = conn
                .query_row("PRAGMA integrity_check", [], |row| row.get(0))
                .expect("integrity_check runs");
            assert_eq!(check, "ok", "the database the case left is intact");
        })
        .keeping(dir)
}

mod cached {
    sluice_store_tests::store_conformance!(|clock| async move { super::open(&clock, 64 << 20) });
}

mod uncached {
    sluice_store_tests::store_conformance!(|clock| async move { super::open(&clock, 0) });
}

mod paged {
    sluice_store_tests::store_conformance!(
        |clock| async move { super::open_with(&clock, 64 << 20, 2) }
    );
}
