//! The way to the database that parts of the store other than [`crate::PgStore`] itself
//! share: the pool, behind the checks every call makes first.

use deadpool_postgres::{Object, Pool};
use sluice_core::store::StoreResult;

use crate::error::Db;

/// A handle on the store's pool, cloned into what outlives a borrow of the store (the session
/// store the server keeps).
#[derive(Clone)]
pub(crate) struct Database {
    pool: Pool,
}

impl Database {
    pub(crate) fn new(pool: Pool) -> Self {
        Self { pool }
    }

    /// A pooled connection; `Unavailable` once the store is closed (its pool with it) or when
    /// none comes within the connect timeout.
    pub(crate) async fn client(&self) -> StoreResult<Object> {
        self.pool.get().await.db()
    }
}
