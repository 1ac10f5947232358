//! Webhook endpoint definitions, kept as their JSON spec (the server parses them).

use async_trait::async_trait;
use sluice_core::Millis;
use sluice_core::store::StoreResult;
use sluice_core::store::WebhookStore;
use tokio::sync::oneshot;

use crate::writer::WriteOp;
use crate::{SharedSqliteStore, SqliteStore};

#[async_trait]
impl WebhookStore for SharedSqliteStore {
    /// Stores an endpoint definition, replacing one of the same name.
    async fn webhook_put(&self, name: &str, spec: String, now_ms: Millis) -> StoreResult<()> {
        let (reply, wait) = oneshot::channel();
        self.0.send(WriteOp::WebhookPut {
            name: name.to_owned(),
            spec,
            now_ms,
            reply,
        })?;
        SqliteStore::wait(wait).await
    }

    /// Deletes an endpoint definition; false when there was none.
    async fn webhook_delete(&self, name: &str) -> StoreResult<bool> {
        let exists = self
            .webhook_list()
            .await?
            .iter()
            .any(|(existing, _)| existing == name);
        if !exists {
            return Ok(false);
        }
        let (reply, wait) = oneshot::channel();
        self.0.send(WriteOp::WebhookDelete {
            name: name.to_owned(),
            reply,
        })?;
        SqliteStore::wait(wait).await?;
        Ok(true)
    }

    /// Every endpoint definition as `(name, spec)`, by name.
    async fn webhook_list(&self) -> StoreResult<Vec<(String, String)>> {
        self.0
            .read(|conn| {
                let mut statement =
                    conn.prepare_cached("SELECT name, spec FROM webhooks ORDER BY name")?;
                let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
                rows.collect()
            })
            .await
    }
}
