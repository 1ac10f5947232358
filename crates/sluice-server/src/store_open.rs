//! Opening the store that `[store] kind` names: the one place the server knows a backend's
//! concrete type. Everything after it speaks to `dyn Store` only, so another backend is a crate
//! implementing [`Store`] (and passing `sluice-store-tests`), a variant of
//! [`StoreConfig`] and one arm here.

use std::sync::Arc;

use sluice_core::clock::Millis;
use sluice_core::{Store, StoreError};

use crate::config::{Config, Durability, StoreConfig};

/// Opens the store of `config` (creating it when new) and loads what it holds; `now_ms` is the
/// server clock's time, which rules applied while loading (retention, lease expiry) read.
pub async fn open_store(config: &Config, now_ms: Millis) -> Result<Arc<dyn Store>, StoreError> {
    match &config.store {
        StoreConfig::Sqlite(sqlite) => {
            use sluice_store_sqlite::{
                Durability as SqliteDurability, SharedSqliteStore, SqliteOptions,
            };
            let mut options = SqliteOptions::new(&config.data_dir);
            options.durability = match config.durability {
                Durability::Fsync => SqliteDurability::Fsync,
                Durability::Os => SqliteDurability::Os,
            };
            options.acked_retention_ms = config.acked_retention_ms;
            options.payload_cache_bytes = sqlite.payload_cache_bytes;
            options.wal_max_bytes = sqlite.wal_max_bytes;
            options.disk_reserve_bytes = sqlite.disk_reserve_bytes;
            options.writer_queue_bytes = sqlite.writer_queue_bytes;
            // Opening reads the whole database to rebuild the index: not on a runtime thread.
            let store =
                tokio::task::spawn_blocking(move || SharedSqliteStore::open(options, now_ms))
                    .await
                    .map_err(|e| StoreError::Other(Box::new(e)))??;
            Ok(Arc::new(store))
        }
    }
}
