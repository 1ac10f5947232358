//! Definitions of other kinds (topics), kept as their JSON spec by kind and name, and
//! schedules: the definition kept as its JSON spec (ops parses it) and the progress as
//! `ScheduleState`'s JSON, with the last run done in a column of its own for the compare a
//! pass advances from.

use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use sluice_core::Millis;
use sluice_core::store::DefinitionStore;
use sluice_core::store::{DefinitionKind, ScheduleRow, ScheduleState, StoreResult};
use tokio::sync::oneshot;

use crate::writer::WriteOp;
use crate::{SharedSqliteStore, SqliteStore};

/// A change to the `schedules` or `definitions` table, applied by the writer.
#[derive(Debug)]
pub(crate) enum ScheduleWrite {
    /// A definition of another kind, defined or replaced.
    DefinitionPut {
        kind: &'static str,
        name: String,
        spec: String,
        now_ms: Millis,
    },
    DefinitionDelete {
        kind: &'static str,
        name: String,
    },
    /// A definition replaced only while it is still `expected` (created only while absent).
    DefinitionSwap {
        kind: &'static str,
        name: String,
        expected: Option<String>,
        spec: String,
        now_ms: Millis,
    },
    /// Define or replace; `state` replaces the progress when given (a new row starts at
    /// `now_ms` otherwise).
    Put {
        name: String,
        spec: String,
        state: Option<ScheduleState>,
        now_ms: Millis,
    },
    Delete {
        name: String,
    },
    /// The progress, when the row's last run is still `from_run_ms`.
    Advance {
        name: String,
        from_run_ms: Millis,
        state: ScheduleState,
    },
}

/// Applies one change inside the writer's transaction.
pub(crate) fn apply(tx: &rusqlite::Transaction<'_>, write: &ScheduleWrite) -> rusqlite::Result<()> {
    match write {
        ScheduleWrite::DefinitionPut {
            kind,
            name,
            spec,
            now_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO definitions (kind, name, spec, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (kind, name) DO UPDATE SET spec = excluded.spec",
            )?
            .execute(params![kind, name, spec, now_ms])?;
        }
        ScheduleWrite::DefinitionDelete { kind, name } => {
            tx.prepare_cached("DELETE FROM definitions WHERE kind = ?1 AND name = ?2")?
                .execute(params![kind, name])?;
        }
        ScheduleWrite::DefinitionSwap {
            kind,
            name,
            expected: None,
            spec,
            now_ms,
        } => {
            tx.prepare_cached(
                "INSERT INTO definitions (kind, name, spec, created_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (kind, name) DO NOTHING",
            )?
            .execute(params![kind, name, spec, now_ms])?;
        }
        ScheduleWrite::DefinitionSwap {
            kind,
            name,
            expected: Some(expected),
            spec,
            now_ms: _,
        } => {
            tx.prepare_cached(
                "UPDATE definitions SET spec = ?3 WHERE kind = ?1 AND name = ?2 AND spec = ?4",
            )?
            .execute(params![kind, name, spec, expected])?;
        }
        ScheduleWrite::Put {
            name,
            spec,
            state,
            now_ms,
        } => {
            let exists = tx
                .prepare_cached("SELECT 1 FROM schedules WHERE name = ?1")?
                .query_row(params![name], |_| Ok(()))
                .optional()?
                .is_some();
            match (exists, state) {
                (true, None) => {
                    tx.prepare_cached("UPDATE schedules SET spec = ?2 WHERE name = ?1")?
                        .execute(params![name, spec])?;
                }
                (_, state) => {
                    let state = state
                        .clone()
                        .unwrap_or_else(|| ScheduleState::starting(*now_ms));
                    tx.prepare_cached(
                        "INSERT INTO schedules (name, spec, state, last_run, created_at)
                         VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT (name) DO UPDATE SET spec = excluded.spec,
                           state = excluded.state, last_run = excluded.last_run",
                    )?
                    .execute(params![
                        name,
                        spec,
                        state.to_json(),
                        state.last_run_ms,
                        now_ms
                    ])?;
                }
            }
        }
        ScheduleWrite::Delete { name } => {
            tx.prepare_cached("DELETE FROM schedules WHERE name = ?1")?
                .execute(params![name])?;
        }
        ScheduleWrite::Advance {
            name,
            from_run_ms,
            state,
        } => {
            tx.prepare_cached(
                "UPDATE schedules SET state = ?3, last_run = ?4 WHERE name = ?1 AND last_run = ?2",
            )?
            .execute(params![
                name,
                from_run_ms,
                state.to_json(),
                state.last_run_ms
            ])?;
        }
    }
    Ok(())
}

impl SharedSqliteStore {
    pub(crate) async fn write_schedule(&self, write: ScheduleWrite) -> StoreResult<()> {
        let (reply, wait) = oneshot::channel();
        self.0.send(WriteOp::Schedule { write, reply })?;
        SqliteStore::wait(wait).await
    }
}

#[async_trait]
impl DefinitionStore for SharedSqliteStore {
    async fn definition_put(
        &self,
        kind: DefinitionKind,
        name: &str,
        spec: String,
        now_ms: Millis,
    ) -> StoreResult<()> {
        self.write_schedule(ScheduleWrite::DefinitionPut {
            kind: kind.as_str(),
            name: name.to_owned(),
            spec,
            now_ms,
        })
        .await
    }

    async fn definition_swap(
        &self,
        kind: DefinitionKind,
        name: &str,
        expected: Option<String>,
        spec: String,
        now_ms: Millis,
    ) -> StoreResult<()> {
        self.write_schedule(ScheduleWrite::DefinitionSwap {
            kind: kind.as_str(),
            name: name.to_owned(),
            expected,
            spec,
            now_ms,
        })
        .await
    }

    async fn schedule_put(
        &self,
        name: &str,
        spec: String,
        state: Option<ScheduleState>,
        now_ms: Millis,
    ) -> StoreResult<()> {
        self.write_schedule(ScheduleWrite::Put {
            name: name.to_owned(),
            spec,
            state,
            now_ms,
        })
        .await
    }

    async fn schedule_advance(
        &self,
        name: &str,
        from_run_ms: Millis,
        state: ScheduleState,
    ) -> StoreResult<()> {
        self.write_schedule(ScheduleWrite::Advance {
            name: name.to_owned(),
            from_run_ms,
            state,
        })
        .await
    }

    /// Deletes a schedule; false when there was none.
    async fn schedule_delete(&self, name: &str) -> StoreResult<bool> {
        let exists = self
            .schedule_list()
            .await?
            .iter()
            .any(|row| row.name == name);
        if !exists {
            return Ok(false);
        }
        self.write_schedule(ScheduleWrite::Delete {
            name: name.to_owned(),
        })
        .await?;
        Ok(true)
    }

    /// Every definition of `kind` as `(name, spec)`, by name.
    async fn definition_list(&self, kind: DefinitionKind) -> StoreResult<Vec<(String, String)>> {
        self.0
            .read(move |conn| {
                let mut statement = conn.prepare_cached(
                    "SELECT name, spec FROM definitions WHERE kind = ?1 ORDER BY name",
                )?;
                let rows =
                    statement.query_map([kind.as_str()], |row| Ok((row.get(0)?, row.get(1)?)))?;
                rows.collect()
            })
            .await
    }

    /// Deletes a definition; false when there was none.
    async fn definition_delete(&self, kind: DefinitionKind, name: &str) -> StoreResult<bool> {
        let exists = self
            .definition_list(kind)
            .await?
            .iter()
            .any(|(existing, _)| existing == name);
        if !exists {
            return Ok(false);
        }
        self.write_schedule(ScheduleWrite::DefinitionDelete {
            kind: kind.as_str(),
            name: name.to_owned(),
        })
        .await?;
        Ok(true)
    }

    /// Every schedule, by name.
    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRow>> {
        self.0
            .read(|conn| {
                let mut statement = conn.prepare_cached(
                    "SELECT name, spec, state, last_run FROM schedules ORDER BY name",
                )?;
                let rows = statement.query_map([], |row| {
                    let state: String = row.get(2)?;
                    Ok(ScheduleRow {
                        name: row.get(0)?,
                        spec: row.get(1)?,
                        state: ScheduleState::from_json(&state, row.get(3)?),
                    })
                })?;
                rows.collect()
            })
            .await
    }
}
