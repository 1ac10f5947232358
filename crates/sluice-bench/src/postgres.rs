//! The PostgreSQL side of the bench: a fresh schema for a server on the PostgreSQL store
//! (`--store-url`), and scenario 12, `pg-baseline`, the yardstick the PostgreSQL store is
//! measured against: a plain `SKIP LOCKED` table, one `INSERT` per transaction to produce and
//! one `DELETE … RETURNING` per transaction to consume, as a user would write a queue by hand.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio_postgres::{Client, NoTls};

use crate::server::{CpuSample, CpuUse};

/// The database the bench uses when `--store-url` is not given (this repository's test
/// database).
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A schema made for one bench run, dropped by [`BenchSchema::drop`].
pub struct BenchSchema {
    pub url: String,
    pub name: String,
}

impl BenchSchema {
    /// A fresh name; the schema itself is made by the server (or the baseline) that uses it.
    pub fn new(url: &str, purpose: &str) -> Self {
        Self {
            url: url.to_owned(),
            name: format!("sluice_bench_{purpose}_{:08x}", rand::random::<u32>()),
        }
    }

    /// A config file in `dir` that puts a server's store in this schema.
    pub fn write_config(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let path = dir.join("sluice-postgres.toml");
        let url = toml_string(&self.url);
        let schema = toml_string(&self.name);
        std::fs::write(
            &path,
            format!("[store]\nkind = \"postgres\"\nurl = {url}\nschema = {schema}\n"),
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    /// Drops the schema and everything in it.
    pub async fn drop(self) -> anyhow::Result<()> {
        let client = connect(&self.url).await?;
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name))
            .await
            .with_context(|| format!("cannot drop schema {}", self.name))?;
        Ok(())
    }
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// Where the database's WAL and transaction ids stand, read before and after a scenario on the
/// PostgreSQL store. Both are exact at once (`pg_current_wal_lsn()`, the next transaction id),
/// where `pg_stat_wal` and `pg_stat_database` lag behind by up to ten seconds.
#[derive(Debug, Clone, Copy)]
pub struct DatabaseCounters {
    wal_lsn: i64,
    next_xid: i64,
}

/// What the database wrote during a scenario: WAL bytes and transactions that wrote (each
/// takes a transaction id; a claim that leased nothing does not), the whole database's, so
/// anything else writing meanwhile counts too.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct DatabaseWork {
    pub wal_bytes: i64,
    pub write_transactions: i64,
}

impl DatabaseCounters {
    /// The counters now; `None` when the database cannot be asked (the figure is then left
    /// out, not the scenario).
    pub async fn read(url: &str) -> Option<Self> {
        let client = connect(url).await.ok()?;
        let row = client
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
                        pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
                &[],
            )
            .await
            .ok()?;
        Some(Self {
            wal_lsn: row.get(0),
            next_xid: row.get(1),
        })
    }

    /// The work done since `before`.
    pub fn since(&self, before: &Self) -> DatabaseWork {
        DatabaseWork {
            wal_bytes: self.wal_lsn - before.wal_lsn,
            write_transactions: self.next_xid - before.next_xid,
        }
    }
}

async fn connect(url: &str) -> anyhow::Result<Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .with_context(|| format!("cannot connect to PostgreSQL at {}", redacted(url)))?;
    tokio::spawn(connection);
    Ok(client)
}

/// The URL without its password, for messages.
fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The sizes of scenario 12.
#[derive(Debug, Clone, Copy)]
pub struct BaselineLoad {
    pub messages: u64,
    pub producers: usize,
    pub consumers: usize,
    pub body_bytes: usize,
    pub time_limit: Duration,
}

/// What scenario 12 measured.
#[derive(Debug, Serialize)]
pub struct BaselineReport {
    pub messages: u64,
    pub producers: usize,
    pub consumers: usize,
    pub produced: u64,
    pub produce_wall_s: f64,
    pub produce_rate: f64,
    pub produce_cpu: CpuUse,
    pub consumed: u64,
    pub consume_wall_s: f64,
    pub consume_rate: f64,
    pub consume_cpu: CpuUse,
    pub hit_time_limit: bool,
}

/// Scenario 12: `producers` connections insert `messages` rows one per transaction, then
/// `consumers` connections delete them one per transaction with `FOR UPDATE SKIP LOCKED`.
pub async fn baseline(url: &str, load: BaselineLoad) -> anyhow::Result<BaselineReport> {
    let schema = BenchSchema::new(url, "baseline");
    let result = baseline_in(&schema, load).await;
    let dropped = schema.drop().await;
    let report = result?;
    dropped?;
    Ok(report)
}

async fn baseline_in(schema: &BenchSchema, load: BaselineLoad) -> anyhow::Result<BaselineReport> {
    let table = format!("\"{}\".queue", schema.name);
    connect(&schema.url)
        .await?
        .batch_execute(&format!(
            "CREATE SCHEMA \"{}\"; CREATE TABLE {table} (id bigserial PRIMARY KEY, body bytea NOT NULL)",
            schema.name
        ))
        .await
        .context("cannot create the baseline table")?;
    let deadline = Instant::now() + load.time_limit;
    let body = Arc::new(vec![b'x'; load.body_bytes]);

    // Every connection is open before the clock starts, and stays open until it stops (the CPU
    // of backends that ended would not be counted).
    let mut producers = Vec::new();
    for _ in 0..load.producers.max(1) {
        producers.push(connect(&schema.url).await?);
    }
    let left = Arc::new(AtomicU64::new(load.messages));
    let cpu_before = CpuSample::take(None);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in producers {
        let (left, body, table) = (left.clone(), body.clone(), table.clone());
        tasks.push(tokio::spawn(async move {
            let insert = client
                .prepare(&format!("INSERT INTO {table} (body) VALUES ($1)"))
                .await?;
            let mut produced = 0u64;
            while Instant::now() < deadline
                && left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
            {
                client.execute(&insert, &[&*body]).await?;
                produced += 1;
            }
            Ok::<_, tokio_postgres::Error>((produced, client))
        }));
    }
    let mut produced = 0;
    let mut kept = Vec::new();
    for task in tasks {
        let (count, client) = task.await?.context("a baseline producer failed")?;
        produced += count;
        kept.push(client);
    }
    let produce_wall = started.elapsed();
    let produce_cpu = CpuSample::take(None).since(&cpu_before);
    drop(kept);

    let mut consumers = Vec::new();
    for _ in 0..load.consumers.max(1) {
        consumers.push(connect(&schema.url).await?);
    }
    let cpu_before = CpuSample::take(None);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for client in consumers {
        let table = table.clone();
        tasks.push(tokio::spawn(async move {
            let take = client
                .prepare(&format!(
                    "DELETE FROM {table} WHERE id = \
                     (SELECT id FROM {table} ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) \
                     RETURNING body"
                ))
                .await?;
            let mut consumed = 0u64;
            while Instant::now() < deadline {
                if client.query_opt(&take, &[]).await?.is_none() {
                    break;
                }
                consumed += 1;
            }
            Ok::<_, tokio_postgres::Error>((consumed, client))
        }));
    }
    let mut consumed = 0;
    let mut kept = Vec::new();
    for task in tasks {
        let (count, client) = task.await?.context("a baseline consumer failed")?;
        consumed += count;
        kept.push(client);
    }
    let consume_wall = started.elapsed();
    let consume_cpu = CpuSample::take(None).since(&cpu_before);
    drop(kept);

    let rate = |count: u64, wall: Duration| count as f64 / wall.as_secs_f64().max(1e-9);
    Ok(BaselineReport {
        messages: load.messages,
        producers: load.producers,
        consumers: load.consumers,
        produced,
        produce_wall_s: produce_wall.as_secs_f64(),
        produce_rate: rate(produced, produce_wall),
        produce_cpu,
        consumed,
        consume_wall_s: consume_wall.as_secs_f64(),
        consume_rate: rate(consumed, consume_wall),
        consume_cpu,
        hit_time_limit: Instant::now() >= deadline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_kept_out_of_messages() {
        assert_eq!(
            redacted("postgres://sluice:secret@db:5432/sluice"),
            "postgres://sluice:***@db:5432/sluice"
        );
        assert_eq!(
            redacted("postgres://postgres@127.0.0.1/test"),
            "postgres://postgres@127.0.0.1/test"
        );
    }

    #[test]
    fn the_config_names_the_store_and_its_schema() {
        let dir = tempfile::tempdir().unwrap();
        let schema = BenchSchema::new("postgres://a\"b@h/d", "run");
        let text = std::fs::read_to_string(schema.write_config(dir.path()).unwrap()).unwrap();
        assert!(text.contains("kind = \"postgres\""));
        assert!(text.contains("url = \"postgres://a\\\"b@h/d\""));
        assert!(text.contains(&format!("schema = \"{}\"", schema.name)));
    }
}
