//! `[store]` with `kind = "sqlite"`: this store's settings as written in the server's config
//! file, read and checked here, with their defaults, so the server knows none of them. The
//! server reads `kind` and hands the rest of the table to [`SqliteSection`].

use serde::{Deserialize, Serialize};

use crate::SqliteOptions;

/// The default `max_wal_bytes`.
pub const DEFAULT_WAL_MAX_BYTES: u64 = 64 << 20;
/// The smallest `max_wal_bytes`: below it, checkpoints would pause writes all the time.
pub const MIN_WAL_MAX_BYTES: u64 = 1 << 20;
/// The default `disk_reserve_bytes`.
pub const DEFAULT_DISK_RESERVE_BYTES: u64 = 64 << 20;
/// The default `writer_queue_bytes`: as much as the server's `[limits] body_bytes_in_flight`,
/// so producers over HTTP meet that budget first unless their requests are abandoned.
pub const DEFAULT_WRITER_QUEUE_BYTES: u64 = 128 << 20;
/// The smallest `writer_queue_bytes`: below it, batches would be stored one at a time.
pub const MIN_WRITER_QUEUE_BYTES: u64 = 1 << 20;
/// The default `resident_messages`.
pub const DEFAULT_RESIDENT_MESSAGES: usize = 10_000;
/// The default `[server] payload_cache_bytes`.
pub const DEFAULT_PAYLOAD_CACHE_BYTES: usize = 64 << 20;

/// `[store]` as written, without `kind`: every key optional. Keys of another store's kind are
/// the server's to allow (a config file may carry both kinds' keys); this store reads its own.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct SqliteSection {
    /// Past this size the WAL is checkpointed whole and truncated.
    /// (`wal_max_bytes`, its earlier name, is read too.)
    #[serde(alias = "wal_max_bytes")]
    pub max_wal_bytes: Option<u64>,
    /// Space kept back for acks when the disk fills (0: none).
    pub disk_reserve_bytes: Option<u64>,
    /// Bytes of new messages that may wait for the writer.
    pub writer_queue_bytes: Option<u64>,
    /// Ready messages of each queue and priority kept in memory (0: all).
    pub resident_messages: Option<usize>,
}

/// The store's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteSettings {
    /// Bytes of message bodies kept in memory, so deliveries need no disk read (`[server]
    /// payload_cache_bytes`, where it was before stores had a kind).
    pub payload_cache_bytes: usize,
    /// WAL size past which it is checkpointed whole and truncated.
    pub max_wal_bytes: u64,
    /// Space kept back for acks when the disk fills.
    pub disk_reserve_bytes: u64,
    /// Bytes of new messages that may wait for the writer; more is refused (503 `overloaded`).
    pub writer_queue_bytes: u64,
    /// Ready messages of each queue and priority kept in memory (0: all).
    pub resident_messages: usize,
}

impl Default for SqliteSettings {
    fn default() -> Self {
        Self {
            payload_cache_bytes: DEFAULT_PAYLOAD_CACHE_BYTES,
            max_wal_bytes: DEFAULT_WAL_MAX_BYTES,
            disk_reserve_bytes: DEFAULT_DISK_RESERVE_BYTES,
            writer_queue_bytes: DEFAULT_WRITER_QUEUE_BYTES,
            resident_messages: DEFAULT_RESIDENT_MESSAGES,
        }
    }
}

impl SqliteSection {
    /// The keys this store reads from `[store]`.
    pub const KEYS: &[&str] = &[
        "max_wal_bytes",
        "wal_max_bytes",
        "disk_reserve_bytes",
        "writer_queue_bytes",
        "resident_messages",
    ];

    /// The settings, with the defaults for what is not written; an error names the key.
    pub fn check(self, payload_cache_bytes: Option<usize>) -> Result<SqliteSettings, String> {
        let defaults = SqliteSettings::default();
        let max_wal_bytes = self.max_wal_bytes.unwrap_or(defaults.max_wal_bytes);
        if max_wal_bytes < MIN_WAL_MAX_BYTES {
            return Err(format!(
                "[store] max_wal_bytes {max_wal_bytes} is below the minimum {MIN_WAL_MAX_BYTES}"
            ));
        }
        let writer_queue_bytes = self
            .writer_queue_bytes
            .unwrap_or(defaults.writer_queue_bytes);
        if writer_queue_bytes < MIN_WRITER_QUEUE_BYTES {
            return Err(format!(
                "[store] writer_queue_bytes {writer_queue_bytes} is below the minimum {MIN_WRITER_QUEUE_BYTES}"
            ));
        }
        Ok(SqliteSettings {
            payload_cache_bytes: payload_cache_bytes.unwrap_or(defaults.payload_cache_bytes),
            max_wal_bytes,
            disk_reserve_bytes: self
                .disk_reserve_bytes
                .unwrap_or(defaults.disk_reserve_bytes),
            writer_queue_bytes,
            resident_messages: self.resident_messages.unwrap_or(defaults.resident_messages),
        })
    }
}

impl SqliteOptions {
    /// These options with `settings` (from `[store]`).
    pub fn with_settings(mut self, settings: &SqliteSettings) -> Self {
        self.payload_cache_bytes = settings.payload_cache_bytes;
        self.max_wal_bytes = settings.max_wal_bytes;
        self.disk_reserve_bytes = settings.disk_reserve_bytes;
        self.writer_queue_bytes = settings.writer_queue_bytes;
        self.resident_messages = settings.resident_messages;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwritten_keys_take_the_defaults_and_small_ones_are_refused_by_name() {
        let settings = SqliteSection::default().check(None).unwrap();
        assert_eq!(settings, SqliteSettings::default());
        let options = SqliteOptions::new("d").with_settings(&settings);
        assert_eq!(options, SqliteOptions::new("d"), "one set of defaults");
        let small = SqliteSection {
            max_wal_bytes: Some(1000),
            ..SqliteSection::default()
        };
        assert!(small.check(None).unwrap_err().contains("max_wal_bytes"));
        let small = SqliteSection {
            writer_queue_bytes: Some(1000),
            ..SqliteSection::default()
        };
        assert!(
            small
                .check(None)
                .unwrap_err()
                .contains("writer_queue_bytes")
        );
    }

    #[test]
    fn the_keys_are_the_fields() {
        let written = serde_json::to_value(SqliteSection::default()).unwrap();
        let mut fields: Vec<&str> = written
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut keys: Vec<&str> = SqliteSection::KEYS
            .iter()
            .copied()
            .filter(|key| *key != "wal_max_bytes")
            .collect();
        fields.sort_unstable();
        keys.sort_unstable();
        assert_eq!(fields, keys);
    }
}
