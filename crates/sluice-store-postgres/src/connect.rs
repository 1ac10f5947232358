//! Connections: the pool every call takes one from, and the dedicated connections (the
//! migration's, the listener's) that live outside it. Every connection, pooled or not, gets the
//! same session settings when it is made (docs/design/postgres-store.md §2.0), so no statement
//! names the schema and no call can run unbounded.
//!
//! TLS (`sslmode=require`, `verify-full`) is build step 5's; until then connections are plain,
//! which a URL asking for TLS is refused for at open.

use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use sluice_core::store::{StoreError, StoreResult};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::{Client, Config, Connection, NoTls, Socket};

use crate::error::Db;
use crate::options::{Durability, PgOptions};

/// A connection not from the pool: the client, and the connection that must be polled for the
/// client to make progress (and that delivers notifications, [`crate::listen`]).
pub(crate) type Dedicated = (Client, Connection<Socket, NoTlsStream>);

/// The pool of `options.pool_size` connections, made lazily: opening the pool connects to
/// nothing (the migration's connection is the first).
pub(crate) fn pool(options: &PgOptions) -> StoreResult<Pool> {
    pool_of(options, options.pool_size)
}

/// The writers' own pool: one connection per writer (`writer_connections` of each kind), so
/// groups never wait behind claims for a connection, nor claims behind groups.
pub(crate) fn writer_pool(options: &PgOptions) -> StoreResult<Pool> {
    pool_of(options, 2 * options.writer_connections)
}

/// A pool of `size` connections with the store's session settings.
fn pool_of(options: &PgOptions, size: usize) -> StoreResult<Pool> {
    let config = config(options)?;
    let manager = Manager::from_config(
        config,
        NoTls,
        ManagerConfig {
            // A connection whose server went away is noticed when it is taken, not by the
            // caller's statement (`is_closed` misses a half-open TCP connection).
            recycling_method: RecyclingMethod::Verified,
        },
    );
    let session = session_settings(options);
    Pool::builder(manager)
        .max_size(size)
        .runtime(Runtime::Tokio1)
        // A call waits this long for a free connection, and a new one this long to be made:
        // past it the database counts as unreachable (`Unavailable`), not as slow.
        .wait_timeout(Some(options.connect_timeout))
        .create_timeout(Some(options.connect_timeout))
        .recycle_timeout(Some(options.connect_timeout))
        .post_create(Hook::async_fn(move |client, _metrics| {
            let session = session.clone();
            Box::pin(async move {
                client
                    .batch_execute(&session)
                    .await
                    .map_err(HookError::Backend)
            })
        }))
        .build()
        .map_err(|e| StoreError::Other(Box::new(e)))
}

/// A new connection outside the pool, with the session settings applied. The connection half
/// must be polled (spawned, or driven by the listener) for the client to work.
pub(crate) async fn dedicated(options: &PgOptions) -> StoreResult<Dedicated> {
    let config = config(options)?;
    let (client, connection) = config.connect(NoTls).await.db()?;
    Ok((client, connection))
}

/// A dedicated connection whose connection half runs on its own task, for work that does not
/// read notifications (migrations); the task ends when the client is dropped.
pub(crate) async fn dedicated_client(options: &PgOptions) -> StoreResult<Client> {
    let (client, connection) = dedicated(options).await?;
    tokio::spawn(async move {
        // Its errors reach the client's calls; nothing to report here.
        let _ = connection.await;
    });
    client
        .batch_execute(&session_settings(options))
        .await
        .db()?;
    Ok(client)
}

/// The driver's settings from the URL, with sluice's on top: a connect timeout, TCP keepalives
/// (a vanished server is noticed in seconds, not the kernel's hours), and the application name
/// that identifies this node's connections in `pg_stat_activity`.
fn config(options: &PgOptions) -> StoreResult<Config> {
    let mut config: Config = options
        .url
        .expose()
        .parse()
        .map_err(|e| StoreError::Other(format!("[store] url {}: {e}", options.url).into()))?;
    if !matches!(config.get_ssl_mode(), SslMode::Disable | SslMode::Prefer) {
        return Err(StoreError::Other(
            format!(
                "[store] url {} asks for TLS (sslmode=require), which this build's PostgreSQL store does not offer yet",
                options.url
            )
            .into(),
        ));
    }
    // `prefer` (the driver's default) falls back to a plain connection, which is what it gets.
    config.ssl_mode(SslMode::Disable);
    config
        .connect_timeout(options.connect_timeout)
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(5))
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(3)
        .application_name(format!("sluice/{}", options.node_name));
    Ok(config)
}

/// What every session runs once it is made (§2.0): the schema, bounds on statements, lock
/// waits and idle transactions, and the durability of a commit.
pub(crate) fn session_settings(options: &PgOptions) -> String {
    let synchronous_commit = match options.durability {
        // `on`, unless the server is set to wait for more (a replica's write or apply), which
        // is kept: sluice never lowers an operator's durability.
        Durability::Fsync => {
            "CASE WHEN current_setting('synchronous_commit') IN ('remote_write', 'remote_apply') \
             THEN current_setting('synchronous_commit') ELSE 'on' END"
        }
        Durability::Os => "'off'",
    };
    format!(
        "SET search_path = \"{schema}\"; \
         SET statement_timeout = '30s'; \
         SET lock_timeout = '10s'; \
         SET idle_in_transaction_session_timeout = '60s'; \
         SELECT set_config('synchronous_commit', {synchronous_commit}, false);",
        schema = options.schema
    )
}
