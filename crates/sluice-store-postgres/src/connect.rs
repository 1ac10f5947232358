//! Connections: the pool every call takes one from, and the dedicated connections (the
//! migration's, the listener's) that live outside it, all made by one [`Connector`]. Every
//! connection, pooled or not, gets the same session settings when it is made
//! (docs/design/postgres-store.md §2.0), so no statement names the schema and no call can run
//! unbounded, and the TLS the URL's `sslmode` asks for ([`crate::tls`]).

use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use sluice_core::store::{StoreError, StoreResult};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::Db;
use crate::options::{Durability, PgOptions};
use crate::tls::{self, SslMode};

/// A connection not from the pool: the client, and the connection that must be polled for the
/// client to make progress (and that delivers notifications, [`crate::listen`]).
pub(crate) type Dedicated = (
    Client,
    Connection<Socket, <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream>,
);

/// How this node connects: the driver's settings from the URL with sluice's on top, the TLS
/// connector, and the session settings. Made once at open (it reads the trusted certificates)
/// and cloned into whatever connects later (the listener, the pools).
#[derive(Clone)]
pub(crate) struct Connector {
    config: Config,
    tls: MakeRustlsConnect,
    session: String,
}

impl Connector {
    /// The connector of `options`: the URL parsed, its `sslmode` applied, the certificates of
    /// `[store] ca_file` (or the platform's) read. Connects to nothing.
    pub(crate) fn new(options: &PgOptions) -> StoreResult<Self> {
        let (url, mode) = tls::split_ssl_mode(options.url.expose());
        let mode = mode
            .as_deref()
            .map(SslMode::parse)
            .transpose()
            .map_err(|e| StoreError::Other(format!("[store] url {}: {e}", options.url).into()))?
            .unwrap_or_default();
        let mut config: Config = url
            .parse()
            .map_err(|e| StoreError::Other(format!("[store] url {}: {e}", options.url).into()))?;
        config
            .ssl_mode(mode.driver())
            .connect_timeout(options.connect_timeout)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(2))
            .keepalives_retries(3)
            .application_name(format!("sluice/{}", options.node_name));
        let tls = tls::connector(mode, options.ca_file.as_deref())
            .map_err(|e| StoreError::Other(e.into()))?;
        Ok(Self {
            config,
            tls,
            session: session_settings(options),
        })
    }

    /// A pool of up to `size` connections with the session settings, made lazily (opening it
    /// connects to nothing). A call waits `timeout` for a free connection, and a new one this
    /// long to be made: past it the database counts as unreachable (`Unavailable`), not slow.
    pub(crate) fn pool(&self, size: usize, timeout: Duration) -> StoreResult<Pool> {
        let manager = Manager::from_config(
            self.config.clone(),
            self.tls.clone(),
            ManagerConfig {
                // A connection whose server went away is noticed when it is taken, not by the
                // caller's statement (`is_closed` misses a half-open TCP connection).
                recycling_method: RecyclingMethod::Verified,
            },
        );
        let session = self.session.clone();
        Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
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

    /// A new connection outside the pool. The connection half must be polled (spawned, or
    /// driven by the listener) for the client to work; the session settings are the caller's
    /// to send.
    pub(crate) async fn dedicated(&self) -> StoreResult<Dedicated> {
        self.config.connect(self.tls.clone()).await.db()
    }

    /// A dedicated connection with the session settings, whose connection half runs on its own
    /// task (for work that does not read notifications: migrations); the task ends when the
    /// client is dropped.
    pub(crate) async fn dedicated_client(&self) -> StoreResult<Client> {
        let (client, connection) = self.dedicated().await?;
        tokio::spawn(async move {
            // Its errors reach the client's calls; nothing to report here.
            let _ = connection.await;
        });
        client.batch_execute(&self.session).await.db()?;
        Ok(client)
    }
}

/// A dedicated client for `options` with a connector of its own, for a connection made once
/// (the migration's): see [`Connector::dedicated_client`].
pub(crate) async fn dedicated_client(options: &PgOptions) -> StoreResult<Client> {
    Connector::new(options)?.dedicated_client().await
}

/// What every session runs once it is made (§2.0): the schema, bounds on statements, lock
/// waits and idle transactions, the durability of a commit, and no JIT compilation.
///
/// JIT is off because the planner's cost of the queue listing (correlated counts behind
/// `coalesce`, never run while the leader's counts are there) passes `jit_above_cost`, and
/// compiling it took ~400 ms of the database's CPU per call, every 500 ms per node; no statement
/// of the store runs long enough for compiled code to pay for itself.
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
         SET jit = off; \
         SELECT set_config('synchronous_commit', {synchronous_commit}, false);",
        schema = options.schema
    )
}
