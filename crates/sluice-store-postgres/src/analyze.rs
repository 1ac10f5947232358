//! Fresh planner statistics for the store's busy tables, kept by the leader's upkeep
//! (docs/design/postgres-store.md §4.3).
//!
//! Why not leave it to autovacuum: it looks at a table at most once a `autovacuum_naptime`
//! (a minute by default), and until its first `ANALYZE` a new schema's tables look empty to the
//! planner. Prepared statements made then keep their plans, and with every table "empty" the
//! planner may find a message by `seq` through a partial index whose leading columns the
//! statement does not fix (seen: an ack group reading the queue's whole `messages_by_age` index
//! for each receipt), a cost that grows with the queue. `ANALYZE` invalidates those plans.
//!
//! The rule: a table is analyzed when more rows changed since its last `ANALYZE` than it had
//! then, plus [`CHANGED_ROWS_MIN`]. So the statistics follow a table while it grows from
//! nothing (a few `ANALYZE`s, each of a sample, not the table) and are left to autovacuum once
//! its size settles. Only a table this node's role may analyze (its owner's role, or a
//! superuser) is: nodes running with `[store] migrate = false` under a role that does not own the
//! schema leave it to autovacuum, rather than have PostgreSQL log a refusal every second.

use sluice_core::store::StoreResult;

use crate::cached::Cached;
use crate::error::Db;

/// The tables whose plans depend on their size.
const TABLES: &[&str] = &["messages", "lanes", "idempotency"];

/// Changed rows below which a table is never analyzed by this rule.
const CHANGED_ROWS_MIN: i64 = 1_000;

/// Analyzes each of [`TABLES`] that changed by more than its rows at the last `ANALYZE` plus
/// [`CHANGED_ROWS_MIN`]; returns the tables analyzed.
pub(crate) async fn refresh(client: &deadpool_postgres::Client) -> StoreResult<Vec<String>> {
    let tables: Vec<String> = TABLES.iter().map(|table| (*table).to_owned()).collect();
    let stale = client
        .query_cached(
            "SELECT s.relname::text FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid \
             WHERE s.schemaname = current_schema() AND s.relname = ANY($1) \
               AND s.n_mod_since_analyze > greatest(c.reltuples, 0)::bigint + $2 \
               AND pg_has_role(c.relowner, 'USAGE')",
            &[&tables, &CHANGED_ROWS_MIN],
        )
        .await?;
    let mut analyzed = Vec::new();
    for row in stale {
        let table: String = row.get(0);
        // The name is one of TABLES, matched above; the schema is the search path's.
        client
            .batch_execute(&format!("ANALYZE \"{table}\""))
            .await
            .db()?;
        analyzed.push(table);
    }
    Ok(analyzed)
}

/// Warns when the database does not vacuum on its own: every lease and ack leaves a dead row
/// version, and without autovacuum (or `track_counts`, which it and [`refresh`] read) they stay
/// until someone runs `VACUUM`, so claims walk more dead index entries every minute and the
/// tables grow without end. The store does not vacuum for itself; this says so at start.
pub(crate) async fn warn_without_autovacuum(client: &deadpool_postgres::Client) -> StoreResult<()> {
    let row = client
        .query_one(
            "SELECT current_setting('autovacuum')::boolean, \
                    current_setting('track_counts')::boolean",
            &[],
        )
        .await
        .db()?;
    let (autovacuum, track_counts): (bool, bool) = (row.get(0), row.get(1));
    if !autovacuum || !track_counts {
        tracing::warn!(
            autovacuum,
            track_counts,
            "this PostgreSQL does not vacuum on its own (autovacuum or track_counts is off): \
             the store's tables keep every dead row version until a manual VACUUM, and claims \
             slow down as they grow; turn autovacuum on, or VACUUM the store's schema often"
        );
    }
    Ok(())
}
