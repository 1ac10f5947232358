//! What a [`crate::PgStore`] is opened with: the database, the schema, the connection counts
//! and the durability of a commit. Checked once, by [`PgOptions::check`], before anything
//! connects; nothing here touches the network.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// The default schema (`[store] schema`).
pub const DEFAULT_SCHEMA: &str = "sluice";
/// The default pool size (`[store] pool_size`): claims, reads, nacks and operator calls.
pub const DEFAULT_POOL_SIZE: usize = 16;
/// The default writer connections of each kind (`[store] writer_connections`).
pub const DEFAULT_WRITER_CONNECTIONS: usize = 2;
/// The default time to set up one connection, in ms (`[store] connect_timeout_ms`).
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The default time final records are kept, in ms (`[server] acked_retention_ms`): an hour.
pub const DEFAULT_ACKED_RETENTION_MS: i64 = 60 * 60 * 1000;
/// The longest schema name: the notification channels are `<schema>.wake`, `<schema>.config`
/// and `<schema>.leader`, and PostgreSQL cuts identifiers at 63 bytes.
pub const SCHEMA_BYTES_MAX: usize = 55;
/// The most connections one pool may hold; far above what one node needs, below what one
/// PostgreSQL serves (`max_connections` is 100 by default).
pub const POOL_SIZE_MAX: usize = 1_000;
/// The most writer connections of each kind.
pub const WRITER_CONNECTIONS_MAX: usize = 16;
/// The longest node name: PostgreSQL keeps 63 bytes of `application_name`, which is
/// `sluice/<node name>`.
pub const NODE_NAME_BYTES_MAX: usize = 56;

/// When a commit counts as done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// The commit waits for the database's WAL flush (`synchronous_commit = on`, or the
    /// server's own setting when it is stronger: `remote_write`, `remote_apply`).
    #[default]
    Fsync,
    /// The commit returns before the flush (`synchronous_commit = off`): a crash of the
    /// database server may undo the last few hundred milliseconds of commits.
    Os,
}

/// How to open a [`crate::PgStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgOptions {
    /// The database, as a `postgres://` URL or a `key=value` string (tokio-postgres's forms).
    pub url: DatabaseUrl,
    /// The PostgreSQL schema holding every table of the store (created when missing).
    pub schema: String,
    /// Pooled connections (claims, reads, nacks, operator calls).
    pub pool_size: usize,
    /// Writers of each kind (enqueue, ack), each with a connection of its own on top of
    /// `pool_size` (group commit, docs/design/postgres-store.md §2.1).
    pub writer_connections: usize,
    /// Longest time to set up one connection; also how long a call waits for a pooled one.
    pub connect_timeout: Duration,
    /// Apply missing migrations at open (true), or only check that the schema is current.
    pub migrate: bool,
    /// This node's name (`[store] node_name`): the connections' `application_name` is
    /// `sluice/<name>`, so an operator finds them in `pg_stat_activity`; also in the `nodes`
    /// row and the migration record. 1 to [`NODE_NAME_BYTES_MAX`] bytes of printable ASCII.
    pub node_name: String,
    /// When a commit counts as done.
    pub durability: Durability,
    /// How long final records (acked, expired, cancelled, ...) are kept for lookups, in ms,
    /// before the leader's cleanup removes them (`[server] acked_retention_ms`).
    pub acked_retention_ms: i64,
    /// PEM certificates the database's certificate must be signed by (`[store] ca_file`):
    /// checked under every `sslmode` but `disable`; without it `verify-ca` and `verify-full`
    /// trust the platform's roots and `prefer` and `require` check nothing ([`crate::tls`]).
    pub ca_file: Option<PathBuf>,
}

impl PgOptions {
    /// The defaults for `url` and `schema`.
    pub fn new(url: impl Into<String>, schema: impl Into<String>) -> Self {
        Self {
            url: DatabaseUrl::new(url),
            schema: schema.into(),
            pool_size: DEFAULT_POOL_SIZE,
            writer_connections: DEFAULT_WRITER_CONNECTIONS,
            connect_timeout: Duration::from_millis(DEFAULT_CONNECT_TIMEOUT_MS),
            migrate: true,
            node_name: "sluice".to_owned(),
            durability: Durability::Fsync,
            acked_retention_ms: DEFAULT_ACKED_RETENTION_MS,
            ca_file: None,
        }
    }

    /// Checks the options without connecting: the URL parses, the schema name is one this
    /// store can template into SQL and channel names, the counts are within their bounds. The
    /// error names the `[store]` key.
    pub fn check(&self) -> Result<(), String> {
        let (url, ssl_mode) = crate::tls::split_ssl_mode(self.url.expose());
        url.parse::<tokio_postgres::Config>()
            .map_err(|e| format!("[store] url {} is not a database URL: {e}", self.url))?;
        if let Some(mode) = ssl_mode {
            crate::tls::SslMode::parse(&mode)
                .map_err(|e| format!("[store] url {}: {e}", self.url))?;
        }
        check_schema(&self.schema)?;
        if !(1..=POOL_SIZE_MAX).contains(&self.pool_size) {
            return Err(format!(
                "[store] pool_size {} is not between 1 and {POOL_SIZE_MAX}",
                self.pool_size
            ));
        }
        if !(1..=WRITER_CONNECTIONS_MAX).contains(&self.writer_connections) {
            return Err(format!(
                "[store] writer_connections {} is not between 1 and {WRITER_CONNECTIONS_MAX}",
                self.writer_connections
            ));
        }
        if self.connect_timeout.is_zero() {
            return Err("[store] connect_timeout_ms must be above 0".into());
        }
        if self.acked_retention_ms < 0 {
            return Err(format!(
                "[server] acked_retention_ms {} must not be negative",
                self.acked_retention_ms
            ));
        }
        check_node_name(&self.node_name)?;
        Ok(())
    }
}

/// Checks a node name: 1 to [`NODE_NAME_BYTES_MAX`] bytes of printable ASCII (what
/// `application_name` keeps as written; PostgreSQL replaces anything else with `?`).
pub fn check_node_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > NODE_NAME_BYTES_MAX
        || !name.bytes().all(|b| (b' '..=b'~').contains(&b))
    {
        return Err(format!(
            "[store] node_name {name:?} is not a node name: 1 to {NODE_NAME_BYTES_MAX} bytes of printable ASCII"
        ));
    }
    Ok(())
}

/// Checks a schema name: 1 to [`SCHEMA_BYTES_MAX`] bytes of `[a-z0-9_]`, not starting with a
/// digit or `pg_`. Lower case only, so the name means the same quoted (in SQL) and unquoted
/// (in an operator's `psql`), and needs no escaping anywhere it is templated.
pub fn check_schema(schema: &str) -> Result<(), String> {
    let valid_chars = schema
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if schema.is_empty()
        || schema.len() > SCHEMA_BYTES_MAX
        || !valid_chars
        || schema.as_bytes()[0].is_ascii_digit()
        || schema.starts_with("pg_")
    {
        return Err(format!(
            "[store] schema {schema:?} is not a schema name sluice uses: 1 to {SCHEMA_BYTES_MAX} bytes of a-z, 0-9 and '_', not starting with a digit or \"pg_\""
        ));
    }
    Ok(())
}

/// A database URL, which may carry a password: `Debug` and `Display` show it with the password
/// replaced by `***`, so it can be logged and put in errors.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// Wraps a URL.
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }

    /// The URL with its password, for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.0))
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", redact(&self.0))
    }
}

/// `url` with the password of its user part (`postgres://user:password@`) and of a `password`
/// parameter (`?password=`, or `password=` in the `key=value` form) replaced by `***`.
fn redact(url: &str) -> String {
    let mut text = url.to_owned();
    if let Some(scheme_end) = text.find("://") {
        let rest = scheme_end + 3;
        let authority_end = text[rest..]
            .find(['/', '?'])
            .map_or(text.len(), |at| rest + at);
        if let Some(at) = text[rest..authority_end].rfind('@')
            && let Some(colon) = text[rest..rest + at].find(':')
        {
            text.replace_range(rest + colon + 1..rest + at, "***");
        }
    }
    let mut from = 0;
    while let Some(found) = text[from..].find("password=") {
        let start = from + found + "password=".len();
        let end = text[start..]
            .find(['&', ' '])
            .map_or(text.len(), |end| start + end);
        text.replace_range(start..end, "***");
        from = start + 3;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(url: &str, expected: &str) {
        assert_eq!(DatabaseUrl::new(url).to_string(), expected, "{url}");
        assert_eq!(
            format!("{:?}", DatabaseUrl::new(url)),
            format!("{expected:?}")
        );
    }

    #[test]
    fn urls_are_shown_without_their_password() {
        check(
            "postgres://sluice:s3cret@db:5432/q",
            "postgres://sluice:***@db:5432/q",
        );
        check(
            "postgresql://sluice:p@ss:w@db/q?sslmode=require",
            "postgresql://sluice:***@db/q?sslmode=require",
        );
        check(
            "postgres://postgres@127.0.0.1/test",
            "postgres://postgres@127.0.0.1/test",
        );
        check(
            "postgres://db/q?user=a&password=b&sslmode=require",
            "postgres://db/q?user=a&password=***&sslmode=require",
        );
        check(
            "host=db user=a password=b dbname=q",
            "host=db user=a password=*** dbname=q",
        );
    }

    #[test]
    fn schema_names_are_plain_lower_case_identifiers_that_fit_the_channel_names() {
        for good in ["sluice", "sluice_test_0190abcd", "_x", &"s".repeat(55)] {
            assert_eq!(check_schema(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Sluice",
            "a-b",
            "a.b",
            "1x",
            "pg_x",
            "a\"b",
            &"s".repeat(56),
        ] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_are_checked_naming_the_key() {
        let good = PgOptions::new("postgres://postgres@127.0.0.1/test", "sluice");
        assert_eq!(good.check(), Ok(()));
        let mut bad = good.clone();
        bad.pool_size = 0;
        assert!(bad.check().unwrap_err().contains("pool_size"));
        let mut bad = good.clone();
        bad.writer_connections = WRITER_CONNECTIONS_MAX + 1;
        assert!(bad.check().unwrap_err().contains("writer_connections"));
        for name in ["", "n\u{e9}", "a\tb", &"n".repeat(NODE_NAME_BYTES_MAX + 1)] {
            let mut bad = good.clone();
            bad.node_name = name.into();
            assert!(bad.check().unwrap_err().contains("node_name"), "{name:?}");
        }
        let mut named = good.clone();
        named.node_name = format!("db-host-1:{}", "7".repeat(NODE_NAME_BYTES_MAX - 10));
        assert_eq!(named.check(), Ok(()));
        let mut verified = good.clone();
        verified.url = DatabaseUrl::new("postgres://u@db/x?sslmode=verify-full");
        assert_eq!(verified.check(), Ok(()));
        let mut bad = good.clone();
        bad.url = DatabaseUrl::new("postgres://u:secret@db/x?sslmode=verify");
        let error = bad.check().unwrap_err();
        assert!(
            error.contains("sslmode") && !error.contains("secret"),
            "{error}"
        );
        let mut bad = good.clone();
        bad.url = DatabaseUrl::new("postgres://u:secret@db:notaport/x");
        let error = bad.check().unwrap_err();
        assert!(
            error.contains("[store] url") && !error.contains("secret"),
            "{error}"
        );
    }
}
