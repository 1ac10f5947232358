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
            let mut options = SqliteOptions::new(&config.data_dir).with_settings(sqlite);
            options.durability = match config.durability {
                Durability::Fsync => SqliteDurability::Fsync,
                Durability::Os => SqliteDurability::Os,
            };
            options.acked_retention_ms = config.acked_retention_ms;
            // Opening reads the whole database to rebuild the index: not on a runtime thread.
            let store =
                tokio::task::spawn_blocking(move || SharedSqliteStore::open(options, now_ms))
                    .await
                    .map_err(|e| StoreError::Other(Box::new(e)))??;
            Ok(Arc::new(store))
        }
        StoreConfig::Postgres(postgres) => {
            let options = postgres_options(config, postgres);
            Ok(Arc::new(
                sluice_store_postgres::PgStore::open(options).await?,
            ))
        }
    }
}

/// Brings the store of `config` to the schema this build needs, then closes it (`sluice
/// migrate`): what a start does first, as a step of its own, so an operator can migrate with a
/// role that may change the schema and start the nodes with `[store] migrate = false` and a
/// role that may not. Returns a line saying what was done.
pub async fn migrate_store(config: &Config, now_ms: Millis) -> Result<String, StoreError> {
    match &config.store {
        StoreConfig::Postgres(postgres) => {
            let options = postgres_options(config, postgres);
            let migrated = sluice_store_postgres::migrate(&options).await?;
            Ok(if migrated.applied.is_empty() {
                format!(
                    "schema {:?} of {} is at version {}: nothing to do",
                    options.schema, options.url, migrated.to_version
                )
            } else {
                format!(
                    "schema {:?} of {} migrated from version {} to {}",
                    options.schema, options.url, migrated.from_version, migrated.to_version
                )
            })
        }
        // The SQLite store migrates its file when it opens (and has no other way to).
        StoreConfig::Sqlite(_) => {
            let store = open_store(config, now_ms).await?;
            store.close().await?;
            Ok(format!(
                "the SQLite database in {} is current",
                config.data_dir.display()
            ))
        }
    }
}

/// The PostgreSQL store's options from `[store]` and the server's settings: durability maps to
/// `synchronous_commit`, and the node is named by `[store] node_name`, else by the host and the
/// port it listens on.
fn postgres_options(
    config: &Config,
    postgres: &sluice_store_postgres::PgSettings,
) -> sluice_store_postgres::PgOptions {
    use sluice_store_postgres::Durability as PgDurability;
    let durability = match config.durability {
        Durability::Fsync => PgDurability::Fsync,
        Durability::Os => PgDurability::Os,
    };
    postgres.options(durability, config.acked_retention_ms, || {
        crate::config::default_node_name(config.listen)
    })
}
