//! `[store]` with `kind = "postgres"`: this store's settings as written in the server's config
//! file, read and checked here (the server reads `kind` and hands the rest of the table to
//! [`PgSection`]), and made into [`PgOptions`] with what only the server knows.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::options::{
    DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_POOL_SIZE, DEFAULT_SCHEMA, DEFAULT_WRITER_CONNECTIONS,
    DatabaseUrl, Durability, PgOptions,
};

/// `[store]` as written, without `kind`: every key optional but `url`. Keys of another store's
/// kind are the server's to allow (a config file may carry both kinds' keys); this store reads
/// its own.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct PgSection {
    /// The database URL (`--store-url` / `SLUICE_STORE_URL` win).
    pub url: Option<String>,
    /// The schema holding the store's tables (default `sluice`).
    pub schema: Option<String>,
    /// Pooled connections (default 16).
    pub pool_size: Option<usize>,
    /// Writer connections of each kind (default 2).
    pub writer_connections: Option<usize>,
    /// Longest time to make one connection, in ms (default 5000).
    pub connect_timeout_ms: Option<u64>,
    /// Apply missing migrations at start (default true).
    pub migrate: Option<bool>,
    /// This server's name among the nodes (default: the server's, `<hostname>:<port>`).
    pub node_name: Option<String>,
    /// PEM certificates the database's certificate must be signed by.
    pub ca_file: Option<PathBuf>,
    /// Accepted for configs shared with the SQLite store; this store does not apply it yet
    /// (a full writer channel makes callers wait; docs/design/postgres-store.md).
    pub writer_queue_bytes: Option<u64>,
}

/// The store's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSettings {
    /// The database; shown without its password.
    pub url: DatabaseUrl,
    /// The schema holding the store's tables.
    pub schema: String,
    /// Pooled connections.
    pub pool_size: usize,
    /// Writer connections of each kind (enqueue, ack).
    pub writer_connections: usize,
    /// Longest time to make one connection, in ms.
    pub connect_timeout_ms: u64,
    /// Apply missing migrations at start (false: only check that the schema is current).
    pub migrate: bool,
    /// This server's name among the nodes; `None`: the server names it.
    pub node_name: Option<String>,
    /// The certificates the database's must be signed by ([`crate::tls`]).
    pub ca_file: Option<PathBuf>,
}

impl PgSection {
    /// The keys this store reads from `[store]`.
    pub const KEYS: &[&str] = &[
        "url",
        "schema",
        "pool_size",
        "writer_connections",
        "connect_timeout_ms",
        "migrate",
        "node_name",
        "ca_file",
        "writer_queue_bytes",
    ];

    /// The settings, with `url` (a flag's, which wins over the file's) and the defaults for what
    /// is not written; an error names the key.
    pub fn check(self, url: Option<String>) -> Result<PgSettings, String> {
        let url = url.or(self.url).ok_or(
            "[store] kind = \"postgres\" needs [store] url (or --store-url, SLUICE_STORE_URL)",
        )?;
        let mut options = PgOptions::new(
            url,
            self.schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned()),
        );
        options.pool_size = self.pool_size.unwrap_or(DEFAULT_POOL_SIZE);
        options.writer_connections = self
            .writer_connections
            .unwrap_or(DEFAULT_WRITER_CONNECTIONS);
        let connect_timeout_ms = self
            .connect_timeout_ms
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT_MS);
        options.connect_timeout = Duration::from_millis(connect_timeout_ms);
        // Empty is the default (an environment variable set to nothing).
        let node_name = self.node_name.filter(|name| !name.is_empty());
        if let Some(name) = &node_name {
            options.node_name = name.clone();
        }
        options.check()?;
        Ok(PgSettings {
            url: options.url,
            schema: options.schema,
            pool_size: options.pool_size,
            writer_connections: options.writer_connections,
            connect_timeout_ms,
            migrate: self.migrate.unwrap_or(true),
            node_name,
            ca_file: self.ca_file,
        })
    }
}

impl PgSettings {
    /// The options to open the store with: these settings, and what the server decides for
    /// every store (durability, how long final records are kept) and the node's name when
    /// `[store] node_name` is not set.
    pub fn options(
        &self,
        durability: Durability,
        acked_retention_ms: i64,
        default_node_name: impl FnOnce() -> String,
    ) -> PgOptions {
        let mut options = PgOptions::new(self.url.expose(), self.schema.clone());
        options.pool_size = self.pool_size;
        options.writer_connections = self.writer_connections;
        options.connect_timeout = Duration::from_millis(self.connect_timeout_ms);
        options.migrate = self.migrate;
        options.acked_retention_ms = acked_retention_ms;
        options.node_name = self.node_name.clone().unwrap_or_else(default_node_name);
        options.durability = durability;
        options.ca_file = self.ca_file.clone();
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_the_fields() {
        let written = serde_json::to_value(PgSection::default()).unwrap();
        let mut fields: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut keys = PgSection::KEYS.to_vec();
        fields.sort_unstable();
        keys.sort_unstable();
        assert_eq!(fields, keys);
    }

    #[test]
    fn a_url_is_needed_and_the_flag_wins() {
        let error = PgSection::default().check(None).unwrap_err();
        assert!(error.contains("needs [store] url"), "{error}");
        let section = PgSection {
            url: Some("postgres://a@db/q".into()),
            node_name: Some(String::new()),
            ..PgSection::default()
        };
        let settings = section.check(Some("postgres://b@db/q".into())).unwrap();
        assert_eq!(settings.url.expose(), "postgres://b@db/q");
        assert_eq!(settings.node_name, None, "an empty name is the default");
        let options = settings.options(Durability::Os, 7, || "host:1".into());
        assert_eq!(
            (
                options.node_name.as_str(),
                options.durability,
                options.acked_retention_ms
            ),
            ("host:1", Durability::Os, 7)
        );
    }
}
