//! The store conformance suite (`sluice-store-tests`) against the SQLite store: one test per
//! case, each on a fresh store in its own temporary directory. It runs twice: with the payload
//! cache (bodies served from memory) and without it (every body read back from disk).

use std::sync::Arc;

use sluice_store_sqlite::{Durability, SharedSqliteStore, SqliteOptions};
use sluice_store_tests::{Clock, ManualClock, Opened};

/// A fresh store at the clock's time, keeping `payload_cache_bytes` of bodies in memory.
fn open(clock: &ManualClock, payload_cache_bytes: usize) -> Opened {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut options = SqliteOptions::new(dir.path());
    // What is checked here is behaviour, not crash safety (the crash tests cover that): the
    // OS-level durability keeps hundreds of small commits fast on any disk.
    options.durability = Durability::Os;
    options.disk_reserve_bytes = 0;
    options.payload_cache_bytes = payload_cache_bytes;
    let store = SharedSqliteStore::open(options, clock.now_ms()).expect("the store opens");
    Opened::new(Arc::new(store)).keeping(dir)
}

mod cached {
    sluice_store_tests::store_conformance!(|clock| async move { super::open(&clock, 64 << 20) });
}

mod uncached {
    sluice_store_tests::store_conformance!(|clock| async move { super::open(&clock, 0) });
}
