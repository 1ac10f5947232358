//! Versioned migrations under a session advisory lock (docs/design/postgres-store.md §1.6).
//!
//! Nodes starting at the same moment on one schema queue up on the lock: the first applies
//! what is missing, the others then find nothing to do. Each migration runs in its own
//! transaction together with its `schema_migrations` row, so a migration is applied whole or
//! not at all, and at most once. Migrations only add; a database migrated by a newer sluice is
//! refused, never written to. Nothing here runs outside [`migrate`] and [`check`]: no other
//! module issues DDL.

use tokio_postgres::Client;

use sluice_core::store::{StoreError, StoreResult};

use crate::connect;
use crate::error::Db;
use crate::options::PgOptions;

/// The first half of the migration lock's key: sluice's default port, so the lock is
/// recognisable in `pg_locks` (leadership, build step 5, takes 7567). The second half is the
/// schema's hash, so stores on different schemas of one database never wait for each other.
const MIGRATION_LOCK: i32 = 7566;

/// Every migration, in order: its version and its SQL (several files of one version run as one
/// transaction).
const MIGRATIONS: &[(i32, &[&str])] = &[
    (
        1,
        &[
            include_str!("../migrations/0001_initial.sql"),
            include_str!("../migrations/0001_functions.sql"),
        ],
    ),
    (2, &[include_str!("../migrations/0002_enqueue.sql")]),
    (3, &[include_str!("../migrations/0003_payloads.sql")]),
    (4, &[include_str!("../migrations/0004_first_visible.sql")]),
    (5, &[include_str!("../migrations/0005_schedules.sql")]),
    (6, &[include_str!("../migrations/0006_kept_acked.sql")]),
    (7, &[include_str!("../migrations/0007_lane_runs.sql")]),
];

/// The newest version this build knows.
pub fn latest_version() -> i32 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// What [`migrate`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// The schema's version before.
    pub from_version: i32,
    /// Its version now ([`latest_version`]).
    pub to_version: i32,
    /// The versions this call applied (none when another node had applied them).
    pub applied: Vec<i32>,
}

/// Brings `options.schema` to [`latest_version`] on a connection of its own, creating the schema
/// when missing. Safe to call from any number of nodes at once.
///
/// Errors: `Unavailable` when the database cannot be reached; `Other` when the schema was
/// migrated by a newer sluice or a migration fails (nothing of that migration is kept).
pub async fn migrate(options: &PgOptions) -> StoreResult<Migrated> {
    options.check().map_err(|e| StoreError::Other(e.into()))?;
    let mut client = connect::dedicated_client(options).await?;
    // The lock comes before `CREATE SCHEMA IF NOT EXISTS`: that statement is not safe against a
    // concurrent one (two sessions both find no schema, one fails on the catalog's unique index).
    client
        .execute(
            "SELECT pg_advisory_lock($1, hashtext($2))",
            &[&MIGRATION_LOCK, &options.schema],
        )
        .await
        .db()?;
    let migrated = apply_missing(&mut client, options).await;
    // On an error the lock goes with the connection, which is dropped with the client.
    client
        .execute(
            "SELECT pg_advisory_unlock($1, hashtext($2))",
            &[&MIGRATION_LOCK, &options.schema],
        )
        .await
        .db()?;
    migrated
}

/// Checks that `options.schema` is at [`latest_version`] without changing anything (for nodes
/// started with `[store] migrate = false`, whose role may have no DDL rights).
pub async fn check(options: &PgOptions) -> StoreResult<()> {
    let client = connect::dedicated_client(options).await?;
    let current = current_version(&client, &options.schema).await?;
    refuse_newer(current)?;
    if current < latest_version() {
        return Err(StoreError::Other(
            format!(
                "the database schema {:?} is at version {current}; this binary needs version {} (run `sluice migrate`, or start with [store] migrate = true)",
                options.schema,
                latest_version()
            )
            .into(),
        ));
    }
    Ok(())
}

async fn apply_missing(client: &mut Client, options: &PgOptions) -> StoreResult<Migrated> {
    client
        .batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS \"{schema}\"; SET search_path = \"{schema}\";",
            schema = options.schema
        ))
        .await
        .db()?;
    let from_version = current_version(client, &options.schema).await?;
    refuse_newer(from_version)?;
    let applied_by = format!("sluice {} {}", env!("CARGO_PKG_VERSION"), options.node_name);
    let mut applied = Vec::new();
    for (version, files) in MIGRATIONS {
        if *version <= from_version {
            continue;
        }
        let transaction = client.transaction().await.db()?;
        for sql in *files {
            transaction.batch_execute(sql).await.db()?;
        }
        transaction
            .execute(
                "INSERT INTO schema_migrations (version, applied_by) VALUES ($1, $2)",
                &[version, &applied_by],
            )
            .await
            .db()?;
        transaction.commit().await.db()?;
        tracing::info!(schema = %options.schema, version, "database migration applied");
        applied.push(*version);
    }
    Ok(Migrated {
        from_version,
        to_version: latest_version(),
        applied,
    })
}

/// The highest version applied to `schema`; 0 when it has no `schema_migrations` table yet
/// (migration 1 creates it, so the table is the schema's first migration like any other).
async fn current_version(client: &Client, schema: &str) -> StoreResult<i32> {
    let table = format!("\"{schema}\".schema_migrations");
    let exists: bool = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .await
        .db()?
        .get(0);
    if !exists {
        return Ok(0);
    }
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {table}"),
            &[],
        )
        .await
        .db()?;
    Ok(row.get(0))
}

/// Refuses a schema a newer sluice migrated: this binary would not know its tables' meaning.
fn refuse_newer(version: i32) -> StoreResult<()> {
    if version > latest_version() {
        return Err(StoreError::Other(
            format!(
                "the database was migrated by a newer sluice (version {version}); this binary knows up to {}",
                latest_version()
            )
            .into(),
        ));
    }
    Ok(())
}
