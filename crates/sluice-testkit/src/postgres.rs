//! The test database: where it is, whether a test may run without it, and a fresh schema per
//! test (docs/design/postgres-store.md §6.4).
//!
//! The database is `SLUICE_TEST_POSTGRES_URL`, by default the local PostgreSQL with trust
//! authentication (`postgres://postgres@127.0.0.1:5432/test`). When it cannot be reached a
//! test says it is skipped and passes, unless `CI` (or `SLUICE_REQUIRE_POSTGRES`) is set: then
//! it fails, naming the URL. Every test works in a schema of its own, `sluice_test_<uuid v7>`,
//! dropped when the test ends; schemas of that prefix older than an hour (left by a killed
//! run) are dropped by the first look at the database of a run.

use std::time::Duration;

use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

/// The database when `SLUICE_TEST_POSTGRES_URL` is not set.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
/// Schemas made by tests start with this.
pub const SCHEMA_PREFIX: &str = "sluice_test_";
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

/// Whether a test that needs the database must fail without it.
pub fn is_required() -> bool {
    std::env::var_os("CI").is_some() || std::env::var_os("SLUICE_REQUIRE_POSTGRES").is_some()
}

/// A schema name no other test uses.
pub fn fresh_schema() -> String {
    format!("{SCHEMA_PREFIX}{}", Uuid::now_v7().simple())
}

/// A connection of the test's own (beside a store's); gives up after 5 s.
pub async fn connect(url: &str) -> Result<Client, String> {
    let connecting = tokio_postgres::connect(url, NoTls);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(5), connecting)
        .await
        .map_err(|_| "no answer within 5 s".to_owned())?
        .map_err(|e| match std::error::Error::source(&e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        })?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Drops a test's schema with everything in it.
pub async fn drop_schema(url: String, schema: String) {
    let client = connect(&url).await.expect("the test database");
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .expect("the test schema is dropped");
}

/// Drops test schemas older than [`ABANDONED_AFTER`], by the time in their UUIDv7. Another run
/// may drop one at the same moment; either is enough.
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
            let _ = client
                .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .await;
        }
    }
}
