//! Definitions of other kinds (topics) by kind and name, and schedules: the definition kept as
//! its JSON spec (ops parses it), the progress as
//! `ScheduleState`'s JSON with the last run done in `last_run_ms`, which a pass compares
//! before it advances, so of several nodes passing at once one records the pass.

use async_trait::async_trait;
use sluice_core::Millis;
use sluice_core::store::DefinitionStore;
use sluice_core::store::{DefinitionKind, ScheduleRow, ScheduleState, StoreResult};

use crate::PgStore;
use crate::error::Db;

#[async_trait]
impl DefinitionStore for PgStore {
    /// `Store::definition_put`: announced as `<kind>:<name>` on `<schema>.config` in the same
    /// statement, so every node reloads what it serves.
    async fn definition_put(
        &self,
        kind: DefinitionKind,
        name: &str,
        spec: String,
        now_ms: Millis,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute(
                "WITH put AS ( \
                     INSERT INTO definitions (kind, name, spec, created_at_ms) \
                     VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (kind, name) DO UPDATE SET spec = excluded.spec \
                     RETURNING kind, name) \
                 SELECT pg_notify($5, kind || ':' || name) FROM put",
                &[&kind.as_str(), &name, &spec, &now_ms, &self.config_channel],
            )
            .await
            .db()?;
        Ok(())
    }

    /// `Store::definition_swap`: no notification, since it is progress, not a definition.
    async fn definition_swap(
        &self,
        kind: DefinitionKind,
        name: &str,
        expected: Option<String>,
        spec: String,
        now_ms: Millis,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        let kind = kind.as_str();
        match expected {
            None => {
                client
                    .execute(
                        "INSERT INTO definitions (kind, name, spec, created_at_ms) \
                         VALUES ($1, $2, $3, $4) ON CONFLICT (kind, name) DO NOTHING",
                        &[&kind, &name, &spec, &now_ms],
                    )
                    .await
            }
            Some(expected) => {
                client
                    .execute(
                        "UPDATE definitions SET spec = $3 \
                         WHERE kind = $1 AND name = $2 AND spec = $4",
                        &[&kind, &name, &spec, &expected],
                    )
                    .await
            }
        }
        .db()?;
        Ok(())
    }

    /// `Store::definition_delete`.
    async fn definition_delete(&self, kind: DefinitionKind, name: &str) -> StoreResult<bool> {
        let client = self.client().await?;
        let deleted = client
            .execute(
                "WITH deleted AS ( \
                     DELETE FROM definitions WHERE kind = $1 AND name = $2 RETURNING kind, name) \
                 SELECT pg_notify($3, kind || ':' || name) FROM deleted",
                &[&kind.as_str(), &name, &self.config_channel],
            )
            .await
            .db()?;
        Ok(deleted > 0)
    }

    /// `Store::definition_list`, by name as Rust orders strings.
    async fn definition_list(&self, kind: DefinitionKind) -> StoreResult<Vec<(String, String)>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name, spec FROM definitions WHERE kind = $1 ORDER BY name COLLATE \"C\"",
                &[&kind.as_str()],
            )
            .await
            .db()?;
        Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
    }

    /// `Store::schedule_put`.
    async fn schedule_put(
        &self,
        name: &str,
        spec: String,
        state: Option<ScheduleState>,
        now_ms: Millis,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        // Without a state, an existing schedule keeps its progress; a new one starts now.
        let (keep, state) = match state {
            Some(state) => (false, state),
            None => (true, ScheduleState::starting(now_ms)),
        };
        client
            .execute(
                "INSERT INTO schedules (name, spec, state, last_run_ms, created_at_ms) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, \
                     state = CASE WHEN $6 THEN schedules.state ELSE excluded.state END, \
                     last_run_ms = CASE WHEN $6 THEN schedules.last_run_ms \
                                   ELSE excluded.last_run_ms END",
                &[
                    &name,
                    &spec,
                    &state.to_json(),
                    &state.last_run_ms,
                    &now_ms,
                    &keep,
                ],
            )
            .await
            .db()?;
        Ok(())
    }

    /// `Store::schedule_delete`.
    async fn schedule_delete(&self, name: &str) -> StoreResult<bool> {
        let client = self.client().await?;
        let deleted = client
            .execute("DELETE FROM schedules WHERE name = $1", &[&name])
            .await
            .db()?;
        Ok(deleted > 0)
    }

    /// `Store::schedule_list`, by name as Rust orders strings.
    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRow>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT name, spec, state, last_run_ms FROM schedules ORDER BY name COLLATE \"C\"",
                &[],
            )
            .await
            .db()?;
        Ok(rows
            .iter()
            .map(|row| ScheduleRow {
                name: row.get(0),
                spec: row.get(1),
                state: ScheduleState::from_json(row.get(2), row.get(3)),
            })
            .collect())
    }

    /// `Store::schedule_advance`.
    async fn schedule_advance(
        &self,
        name: &str,
        from_run_ms: Millis,
        state: ScheduleState,
    ) -> StoreResult<()> {
        let client = self.client().await?;
        client
            .execute(
                "UPDATE schedules SET state = $3, last_run_ms = $4 \
                 WHERE name = $1 AND last_run_ms = $2",
                &[&name, &from_run_ms, &state.to_json(), &state.last_run_ms],
            )
            .await
            .db()?;
        Ok(())
    }
}
