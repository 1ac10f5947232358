//! Losing and regaining the database (docs/design/postgres-store.md §5.3): whether this node
//! can reach its database now, and the way to it that every part of the store shares.
//!
//! The database counts as lost from the first failure to get a connection (a pooled one that
//! cannot be made, the listener's that cannot reconnect) until a connection is made again. While
//! it is lost:
//! - every call fails at once with `Unavailable(reason)` ([`Database::client`], and the writers
//!   before they queue a batch), rather than each waiting out the connect timeout: a 503 with
//!   `Retry-After` that tells a client and a load balancer to go elsewhere, never a 2xx;
//! - `write_state()` is `Unavailable(reason)` (`/readyz` 503, `sluice_storage_unavailable`);
//! - every waiter is woken once, so long polls look again and end with the error instead of an
//!   empty answer;
//! - the prober ([`spawn_prober`]) tries a pooled connection with a jittered backoff, 100 ms
//!   doubling to 5 s; the first that is made ends the outage: waiters are woken again (and the
//!   listener stops waiting out its own backoff), and calls go through as before. Nothing needs
//!   a restart.
//!
//! A connection that breaks while in use fails its call (`Unavailable`) without declaring the
//! database lost: one backend ended by an operator is not an outage, and the next connection
//! made (or not) decides.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Object, Pool, PoolError};
use sluice_core::notify::Notifier;
use sluice_core::store::{StoreError, StoreResult, WriteState};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::DbError;

/// The first wait before trying to connect again.
pub(crate) const RECONNECT_MIN: Duration = Duration::from_millis(100);
/// The longest wait before trying to connect again.
pub(crate) const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// `backoff` with equal jitter (between half of it and all of it): nodes that lost the database
/// together do not come back together.
pub(crate) fn jittered(backoff: Duration) -> Duration {
    let ms = backoff.as_millis() as i64;
    Duration::from_millis(sluice_core::rules::backoff::random_draw(ms / 2..=ms) as u64)
}

/// Whether this node reaches its database, shared by the store, its writers, its listener and
/// its session store.
pub(crate) struct Health {
    /// `Some(reason)` while the database is lost.
    lost: watch::Sender<Option<String>>,
    notifier: Arc<Notifier>,
}

impl Health {
    pub(crate) fn new(notifier: Arc<Notifier>) -> Self {
        Self {
            lost: watch::Sender::new(None),
            notifier,
        }
    }

    /// `Unavailable(reason)` while the database is lost.
    pub(crate) fn check(&self) -> StoreResult<()> {
        match &*self.lost.borrow() {
            None => Ok(()),
            Some(reason) => Err(StoreError::Unavailable(reason.clone())),
        }
    }

    /// What `/readyz` reports.
    pub(crate) fn write_state(&self) -> WriteState {
        match &*self.lost.borrow() {
            None => WriteState::Accepting,
            Some(reason) => WriteState::Unavailable(reason.clone()),
        }
    }

    /// A connection could not be made: the database is lost (from now, if it was not already).
    pub(crate) fn lost(&self, error: &str) {
        let reason = format!("the database cannot be reached: {error}");
        let newly = self.lost.send_if_modified(|lost| {
            if lost.is_some() {
                return false;
            }
            *lost = Some(reason.clone());
            true
        });
        if newly {
            tracing::error!(%reason, "the PostgreSQL store lost its database; requests are answered 503 until it is back");
            // Long polls look again and end with the error.
            self.notifier.wake_all();
        }
    }

    /// A connection was made: the database is back.
    pub(crate) fn regained(&self) {
        let newly = self.lost.send_if_modified(|lost| lost.take().is_some());
        if newly {
            tracing::info!("the PostgreSQL store reaches its database again");
            self.notifier.wake_all();
        }
    }

    /// Returns once the database is lost.
    async fn until_lost(&self) {
        let mut lost = self.lost.subscribe();
        let _ = lost.wait_for(Option::is_some).await;
    }

    /// Returns once the database is not lost (at once when it is not).
    pub(crate) async fn until_regained(&self) {
        let mut lost = self.lost.subscribe();
        let _ = lost.wait_for(Option::is_none).await;
    }
}

/// The way to the database: a pool behind the health check. Cloned into whatever outlives a
/// borrow of the store (the writers, the session store the server keeps).
#[derive(Clone)]
pub(crate) struct Database {
    pool: Pool,
    health: Arc<Health>,
}

impl Database {
    pub(crate) fn new(pool: Pool, health: Arc<Health>) -> Self {
        Self { pool, health }
    }

    /// A pooled connection: `Unavailable` at once while the database is lost, once the store
    /// is closed (its pool with it), or when none comes within the connect timeout. A
    /// connection that cannot be made declares the database lost.
    pub(crate) async fn client(&self) -> StoreResult<Object> {
        self.health.check()?;
        match self.pool.get().await {
            Ok(client) => Ok(client),
            Err(error) => {
                let cannot_connect = cannot_connect(&error);
                let error = StoreError::from(DbError::from(error));
                if cannot_connect {
                    self.health.lost(&reason(&error));
                }
                Err(error)
            }
        }
    }

    /// The pool itself, for the node's own timers (its `nodes` row, counters, size and clock
    /// checks), which report their failures in the log rather than to a caller.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Closes the pool: later calls fail with `Unavailable` ("closed").
    pub(crate) fn close(&self) {
        self.pool.close();
    }
}

/// What an error says, without `StoreError`'s own prefix.
pub(crate) fn reason(error: &StoreError) -> String {
    match error {
        StoreError::Unavailable(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Whether a pool error says no connection can be made (as opposed to all of them being busy,
/// or the pool closed).
fn cannot_connect(error: &PoolError) -> bool {
    matches!(
        error,
        PoolError::Backend(_)
            | PoolError::PostCreateHook(_)
            | PoolError::Timeout(deadpool_postgres::TimeoutType::Create)
    )
}

/// Starts the prober: each time the database is lost, it tries a pooled connection after a
/// jittered backoff (100 ms doubling to 5 s) until one is made, then declares it regained. Runs
/// until the handle is aborted (the store's close).
pub(crate) fn spawn_prober(database: Database) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            database.health.until_lost().await;
            let mut backoff = RECONNECT_MIN;
            loop {
                tokio::time::sleep(jittered(backoff)).await;
                // Not through `client()`, which refuses while the database is lost.
                match database.pool.get().await {
                    Ok(_client) => {
                        database.health.regained();
                        break;
                    }
                    Err(error) => {
                        let error = StoreError::from(DbError::from(error));
                        tracing::debug!(error = %reason(&error), ?backoff, "the database is still unreachable");
                        backoff = (backoff * 2).min(RECONNECT_MAX);
                    }
                }
            }
        }
    })
}
