//! Statements prepared once per connection: deadpool keeps a cache of prepared statements on
//! each pooled connection, and a statement sent as text is parsed and described again on every
//! call, one round trip more. The message path's statements go through these methods; the
//! rarer ones (definitions, migrations) are sent as text.

use deadpool_postgres::{ClientWrapper, Transaction};
use sluice_core::store::StoreResult;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::Db;

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// `execute`, `query`, `query_one` and `query_opt` through the connection's statement cache,
/// their errors sorted by meaning.
pub(crate) trait Cached {
    async fn execute_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<u64>;
    async fn query_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<Vec<Row>>;
    async fn query_one_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<Row>;
    async fn query_opt_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<Option<Row>>;
}

macro_rules! cached {
    ($type:ty) => {
        impl Cached for $type {
            async fn execute_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<u64> {
                let statement = self.prepare_cached(sql).await.db()?;
                self.execute(&statement, params).await.db()
            }

            async fn query_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<Vec<Row>> {
                let statement = self.prepare_cached(sql).await.db()?;
                self.query(&statement, params).await.db()
            }

            async fn query_one_cached(&self, sql: &str, params: Params<'_>) -> StoreResult<Row> {
                let statement = self.prepare_cached(sql).await.db()?;
                self.query_one(&statement, params).await.db()
            }

            async fn query_opt_cached(
                &self,
                sql: &str,
                params: Params<'_>,
            ) -> StoreResult<Option<Row>> {
                let statement = self.prepare_cached(sql).await.db()?;
                self.query_opt(&statement, params).await.db()
            }
        }
    };
}

cached!(Transaction<'_>);
cached!(ClientWrapper);
