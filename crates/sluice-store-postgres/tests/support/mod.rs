//! What the PostgreSQL store's tests share beyond the test kit (`sluice-testkit`: the test
//! database, a fresh schema per test, the proxy): a test store's options, and the store's
//! invariants checked in SQL after a test.

#![allow(dead_code, reason = "the tests use their own parts of the support")]

pub use sluice_testkit::postgres::{
    connect, database_url, database_url_or_skip, drop_schema, fresh_schema,
};
pub use sluice_testkit::proxy;

use sluice_store_postgres::PgOptions;
use tokio_postgres::Client;

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

/// Options for a test store on `schema`: a small pool, and a node name saying it is a test.
pub fn options(url: &str, schema: &str) -> PgOptions {
    let mut options = PgOptions::new(url, schema);
    options.pool_size = 4;
    options.writer_connections = 1;
    options.node_name = "test".into();
    options
}

/// The store's invariants as one query over a schema (docs/design/postgres-store.md §2.15, the
/// twin of `Index::check_invariants`): each row names a broken rule and how many rows break it.
/// No migration holds it (migration 0002 is another change's); the tests run it from here.
///
/// - a lane row counts its live messages, and no live laned message is without its lane row;
/// - a lane with members has an active member (ready, delayed or leased; several only with a
///   run, `rules::lanes`), no waiting member comes before an active one, and a waiting
///   message has a lane;
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
    SELECT 'a lane with members has no active member', count(*) FROM lanes l \
    WHERE l.members > 0 AND NOT EXISTS (SELECT 1 FROM messages m \
                             WHERE m.queue_id = l.queue_id AND m.lane_key = l.lane_key \
                               AND m.state IN ('ready', 'delayed', 'leased')) \
    UNION ALL \
    SELECT 'a waiting message comes before an active one of its lane', count(*) \
    FROM messages w WHERE w.state = 'waiting' AND EXISTS ( \
        SELECT 1 FROM messages a WHERE a.queue_id = w.queue_id AND a.lane_key = w.lane_key \
          AND a.state IN ('ready', 'delayed', 'leased') AND a.seq > w.seq) \
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
