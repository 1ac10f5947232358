//! Webhook endpoint definitions, kept as their JSON spec (the server parses them;
//! docs/design/postgres-store.md §2.13). Each change bumps the row's version and announces
//! `webhook:<name>` on `<schema>.config` in the same statement, so it is announced exactly when
//! it commits.

use async_trait::async_trait;
use sluice_core::Millis;
use sluice_core::store::StoreResult;
use sluice_core::store::WebhookStore;

use crate::PgStore;
use crate::error::Db;

#[async_trait]
impl WebhookStore for PgStore {
    /// Stores an endpoint definition, replacing one of the same name (`Store::webhook_put`).
    async fn webhook_put(&self, name: &str, spec: String, now_ms: Millis) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute(
                "WITH put AS ( \
                     INSERT INTO webhooks (name, spec, created_at_ms) VALUES ($1, $2, $3) \
                     ON CONFLICT (name) DO UPDATE \
                         SET spec = excluded.spec, version = webhooks.version + 1 \
                     RETURNING name) \
                 SELECT pg_notify($4, 'webhook:' || name) FROM put",
                &[&name, &spec, &now_ms, &self.config_channel],
            )
            .await
            .db()?;
        Ok(())
    }

    /// Deletes an endpoint definition; false when there was none (`Store::webhook_delete`).
    async fn webhook_delete(&self, name: &str) -> StoreResult<bool> {
        let client = self.client().await?;
        let deleted = client
            .execute(
                "WITH deleted AS (DELETE FROM webhooks WHERE name = $1 RETURNING name) \
                 SELECT pg_notify($2, 'webhook:' || name) FROM deleted",
                &[&name, &self.config_channel],
            )
            .await
            .db()?;
        Ok(deleted > 0)
    }

    /// Every endpoint definition as `(name, spec)`, by name as Rust orders strings
    /// (`Store::webhook_list`).
    async fn webhook_list(&self) -> StoreResult<Vec<(String, String)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name, spec FROM webhooks ORDER BY name COLLATE \"C\"",
                &[],
            )
            .await
            .db()?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }
}
