//! The test database: where it is, whether a test may run without it, and a fresh schema per
//! test (docs/design/postgres-store.md §6.4).
//!
//! The database is `SLUICE_TEST_POSTGRES_URL`, by default the local PostgreSQL with trust
//! authentication (`postgres://postgres@127.0.0.1:5432/test`). When it cannot be reached a
//! test says it is skipped and passes, unless `CI` (or `SLUICE_REQUIRE_POSTGRES`) is set: then
//! it fails, naming the URL. Every test works in a schema of its own, `sluice_test_<uuid v7>`,
//! dropped when the test ends; schemas of that prefix older than an hour (left by a killed
//! run) are dropped by the first test of a run.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the support"
)]

pub mod proxy;

use std::time::Duration;

use sluice_store_postgres::PgOptions;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

/// The database when `SLUICE_TEST_POSTGRES_URL` is not set.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Schemas made by tests start with this.
const SCHEMA_PREFIX: &str = "sluice_test_";
/// A test schema older than this was left by a run that did not finish.
const ABANDONED_AFTER: Duration = Duration::from_secs(60 * 60);

/// The test database's URL.
pub fn url() -> String {
    std::env::var("SLUICE_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// The URL once the database answers; `Err(why)` when it does not and the test may be
/// skipped. Panics when it does not and `CI` or `SLUICE_REQUIRE_POSTGRES` is set.
pub async fn database_url() -> Result<String, String> {
    let url = url();
    match connect(&url).await {
        Ok(client) => {
            drop_abandoned_schemas(&client).await;
            Ok(url)
        }
        Err(why) if !is_required() => Err(format!("no PostgreSQL at {url}: {why}")),
        Err(why) => {
            panic!("PostgreSQL at {url} is needed (CI or SLUICE_REQUIRE_POSTGRES is set): {why}")
        }
    }
}

/// [`database_url`], or `None` after saying the test is skipped.
pub async fn database_url_or_skip() -> Option<String> {
    match database_url().await {
        Ok(url) => Some(url),
        Err(why) => {
            eprintln!("skipped: {why}");
            None
        }
    }
}

fn is_required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("SLUICE_REQUIRE_POSTGRES").is_some()
}

/// A lane's invariants, as the index checks them (§2.15): every lane row counts its live
/// messages, a lane with members has exactly one active member, and no live laned message is
/// without its lane row. Returns how many violations there are (run it with the test's schema
/// on the search path).
pub const LANE_VIOLATIONS: &str = "SELECT \
     (SELECT count(*) FROM lanes l WHERE l.members <> ( \
          SELECT count(*) FROM messages m WHERE m.queue_id = l.queue_id AND m.lane_key = l.lane_key \
            AND m.state IN ('waiting', 'ready', 'delayed', 'leased'))) \
   + (SELECT count(*) FROM lanes l WHERE l.members > 0 AND ( \
          SELECT count(*) FROM messages m WHERE m.queue_id = l.queue_id AND m.lane_key = l.lane_key \
            AND m.state IN ('ready', 'delayed', 'leased')) <> 1) \
   + (SELECT count(*) FROM messages m WHERE m.lane_key IS NOT NULL \
          AND m.state IN ('waiting', 'ready', 'delayed', 'leased') \
          AND NOT EXISTS (SELECT 1 FROM lanes l \
                          WHERE l.queue_id = m.queue_id AND l.lane_key = m.lane_key))";

/// A schema name no other test uses.
pub fn fresh_schema() -> String {
    format!("{SCHEMA_PREFIX}{}", Uuid::now_v7().simple())
}

/// Options for a test store on `schema`: a small pool, and a node name saying it is a test.
pub fn options(url: &str, schema: &str) -> PgOptions {
    let mut options = PgOptions::new(url, schema);
    options.pool_size = 4;
    options.writer_connections = 1;
    options.node_name = "test".into();
    options
}

/// A connection of the test's own, beside the store's.
pub async fn connect(url: &str) -> Result<Client, String> {
    let connecting = tokio_postgres::connect(url, NoTls);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(5), connecting)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| {
            format!(
                "{e}: {}",
                std::error::Error::source(&e)
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            )
        })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// The store's invariants as one query over a schema (docs/design/postgres-store.md §2.15, the
/// twin of `Index::check_invariants`): each row names a broken rule and how many rows break it.
/// No migration holds it (migration 0002 is another change's); the tests run it from here.
///
/// - a lane row counts its live messages, and no live laned message is without its lane row;
/// - a lane with members has exactly one active member (ready, delayed or leased), and a
///   waiting message has a lane;
/// - a leased message has a deadline and a token; a live message has no finish time and a final
///   one has one;
/// - a live message has its payload, and every payload its message;
/// - only an acked message is kept (`kept_until_ms`, migration 6), a kept one has its payload
///   and an acked one no longer kept has none;
/// - a dead letter's metadata is whole; counters are never negative.
pub const CHECK_INVARIANTS: &str = "\
    SELECT 'a lane row does not count its live messages', count(*) FROM lanes l \
    WHERE l.members <> (SELECT count(*) FROM messages m \
                        WHERE m.queue_id = l.queue_id AND m.lane_key = l.lane_key \
                          AND m.state IN ('waiting', 'ready', 'delayed', 'leased')) \
    UNION ALL \
    SELECT 'a lane with members has no single active member', count(*) FROM lanes l \
    WHERE l.members > 0 AND (SELECT count(*) FROM messages m \
                             WHERE m.queue_id = l.queue_id AND m.lane_key = l.lane_key \
                               AND m.state IN ('ready', 'delayed', 'leased')) <> 1 \
    UNION ALL \
    SELECT 'a live laned message has no lane row', count(*) FROM messages m \
    WHERE m.lane_key IS NOT NULL AND m.state IN ('waiting', 'ready', 'delayed', 'leased') \
      AND NOT EXISTS (SELECT 1 FROM lanes l \
                      WHERE l.queue_id = m.queue_id AND l.lane_key = m.lane_key) \
    UNION ALL \
    SELECT 'a waiting message has no lane', count(*) FROM messages \
    WHERE state = 'waiting' AND lane_key IS NULL \
    UNION ALL \
    SELECT 'a lease has no deadline or token', count(*) FROM messages \
    WHERE state = 'leased' AND (lease_expires_at_ms IS NULL OR lease_token IS NULL) \
    UNION ALL \
    SELECT 'a live message has a finish time', count(*) FROM messages \
    WHERE state IN ('waiting', 'ready', 'delayed', 'leased') AND finished_at_ms IS NOT NULL \
    UNION ALL \
    SELECT 'a final message has no finish time', count(*) FROM messages \
    WHERE state NOT IN ('waiting', 'ready', 'delayed', 'leased') AND finished_at_ms IS NULL \
    UNION ALL \
    SELECT 'a live message has no payload', count(*) FROM messages m \
    WHERE m.state IN ('waiting', 'ready', 'delayed', 'leased') \
      AND NOT EXISTS (SELECT 1 FROM payloads p WHERE p.seq = m.seq) \
    UNION ALL \
    SELECT 'a payload has no message', count(*) FROM payloads p \
    WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.seq = p.seq) \
    UNION ALL \
    SELECT 'a kept message is not acked', count(*) FROM messages \
    WHERE kept_until_ms IS NOT NULL AND state <> 'acked' \
    UNION ALL \
    SELECT 'a kept message has no payload', count(*) FROM messages m \
    WHERE m.kept_until_ms IS NOT NULL \
      AND NOT EXISTS (SELECT 1 FROM payloads p WHERE p.seq = m.seq) \
    UNION ALL \
    SELECT 'an acked message no longer kept has a payload', count(*) FROM messages m \
    WHERE m.state = 'acked' AND m.kept_until_ms IS NULL \
      AND EXISTS (SELECT 1 FROM payloads p WHERE p.seq = m.seq) \
    UNION ALL \
    SELECT 'a dead letter''s metadata is not whole', count(*) FROM messages \
    WHERE dead_source_queue IS NOT NULL \
      AND (dead_attempts IS NULL OR dead_first_seen_at_ms IS NULL OR dead_last_seen_at_ms IS NULL) \
    UNION ALL \
    SELECT 'a counter is negative', count(*) FROM queue_counters \
    WHERE least(enqueued, delivered, acked, nacked, dead_lettered, lease_expired, expired, \
                rejected, cancelled, purged) < 0";

/// The invariants broken in `schema`, as (rule, rows breaking it); empty when all hold.
pub async fn broken_invariants(client: &Client, schema: &str) -> Vec<(String, i64)> {
    client
        .batch_execute(&format!("SET search_path = \"{schema}\""))
        .await
        .expect("the test schema");
    client
        .query(CHECK_INVARIANTS, &[])
        .await
        .expect("the invariants query runs")
        .iter()
        .map(|row| (row.get::<_, String>(0), row.get::<_, i64>(1)))
        .filter(|(_, count)| *count > 0)
        .collect()
}

/// Checks the store's invariants in `schema` (failing the test when one is broken), then
/// drops the schema: what every conformance case runs after its store closed.
pub async fn check_and_drop(url: String, schema: String) {
    let client = connect(&url).await.expect("the test database");
    let broken = broken_invariants(&client, &schema).await;
    drop_schema(url, schema.clone()).await;
    assert!(
        broken.is_empty(),
        "invariants broken in {schema}: {broken:?}"
    );
}

/// Drops a test's schema with everything in it.
pub async fn drop_schema(url: String, schema: String) {
    let client = connect(&url).await.expect("the test database");
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("the test schema is dropped");
}

/// Drops test schemas older than [`ABANDONED_AFTER`], by the time in their UUIDv7.
async fn drop_abandoned_schemas(client: &Client) {
    let Ok(rows) = client
        .query(
            "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname::text, $1)",
            &[&SCHEMA_PREFIX],
        )
        .await
    else {
        return;
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    for row in rows {
        let schema: String = row.get(0);
        let made_at = Uuid::try_parse(&schema[SCHEMA_PREFIX.len()..])
            .ok()
            .and_then(|id| id.get_timestamp())
            .map(|timestamp| Duration::from_secs(timestamp.to_unix().0));
        if made_at.is_some_and(|made_at| now.saturating_sub(made_at) > ABANDONED_AFTER) {
            // Another run may drop it at the same moment; either one is enough.
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await;
        }
    }
}
