//! Dashboard sessions in the `sessions` table (docs/design/postgres-store.md §2.13, §4.4), so a
//! request that lands on any node is signed in, a logout ends the session on every node, and
//! both caps (`per_token`, `max`) hold for all nodes together.
//!
//! Only digests are kept (`sluice_core::store::sessions`). A start is one transaction under a
//! transaction-level advisory lock of the schema ([`SESSIONS_LOCK`]): the caps count every
//! session of every node, and two logins counted at once on two nodes could both take the last
//! place; logins are rare, so serialising them costs nothing that matters. Expired sessions are
//! deleted by that same transaction (one range of `sessions_by_expiry`), so the table holds
//! at most `max` live sessions plus those that expired since the last login. Lookups and logouts
//! are one statement by primary key and take no lock.

use async_trait::async_trait;
use sluice_core::clock::Millis;
use sluice_core::store::sessions::{
    Digest, NewSession, SessionLimits, SessionStartError, SessionStore,
};
use sluice_core::store::{StoreError, StoreResult};

use crate::cached::Cached;
use crate::error::Db;
use crate::health::Database;

/// The first half of the advisory lock that serialises session starts (the second is the
/// schema's hash). Beside the migration lock (7566) and leadership (7567).
const SESSIONS_LOCK: i32 = 7568;

/// The sessions of one schema, shared by every node opened on it.
pub(crate) struct PgSessions {
    database: Database,
    schema: String,
}

impl PgSessions {
    pub(crate) fn new(database: Database, schema: String) -> Self {
        Self { database, schema }
    }
}

#[async_trait]
impl SessionStore for PgSessions {
    async fn start(
        &self,
        session: NewSession,
        limits: SessionLimits,
    ) -> Result<(), SessionStartError> {
        self.start_within(session, limits).await?
    }

    async fn token_digest(&self, id_digest: Digest, now_ms: Millis) -> StoreResult<Option<Digest>> {
        let client = self.database.client().await?;
        let row = client
            .query_opt_cached(
                "SELECT token_digest FROM sessions WHERE id_digest = $1 AND expires_at_ms > $2",
                &[&id_digest.as_slice(), &now_ms],
            )
            .await?;
        row.map(|row| digest(row.get(0))).transpose()
    }

    async fn end(&self, id_digest: Digest) -> StoreResult<()> {
        let client = self.database.client().await?;
        client
            .execute_cached(
                "DELETE FROM sessions WHERE id_digest = $1",
                &[&id_digest.as_slice()],
            )
            .await?;
        Ok(())
    }
}

impl PgSessions {
    /// The start's transaction: `Err` for the database, `Ok(Err(Full))` for a full table.
    async fn start_within(
        &self,
        session: NewSession,
        limits: SessionLimits,
    ) -> StoreResult<Result<(), SessionStartError>> {
        let per_token = limits.per_token.max(1);
        let max = limits.max.max(1);
        let mut client = self.database.client().await?;
        let transaction = client.transaction().await.db()?;
        transaction
            .execute_cached(
                "SELECT pg_advisory_xact_lock($1, hashtext($2))",
                &[&SESSIONS_LOCK, &self.schema],
            )
            .await?;
        transaction
            .execute_cached(
                "DELETE FROM sessions WHERE expires_at_ms <= $1",
                &[&session.now_ms],
            )
            .await?;
        let own: Vec<Vec<u8>> = transaction
            .query_cached(
                "SELECT id_digest FROM sessions WHERE token_digest = $1 \
                 ORDER BY created_at_ms, id_digest",
                &[&session.token_digest.as_slice()],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        if own.len() >= per_token {
            // The token makes room among its own sessions, oldest first; no one else's ends.
            let oldest = &own[..=own.len() - per_token];
            transaction
                .execute_cached("DELETE FROM sessions WHERE id_digest = ANY($1)", &[&oldest])
                .await?;
        } else {
            let held: i64 = transaction
                .query_one_cached("SELECT count(*) FROM sessions", &[])
                .await?
                .get(0);
            if held >= max as i64 {
                // Nothing was changed but expired rows; they go with the next start.
                transaction.commit().await.db()?;
                return Ok(Err(SessionStartError::Full(held as usize)));
            }
        }
        transaction
            .execute_cached(
                "INSERT INTO sessions (id_digest, token_digest, created_at_ms, expires_at_ms) \
                 VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (id_digest) DO UPDATE SET token_digest = excluded.token_digest, \
                     created_at_ms = excluded.created_at_ms, expires_at_ms = excluded.expires_at_ms",
                &[
                    &session.id_digest.as_slice(),
                    &session.token_digest.as_slice(),
                    &session.now_ms,
                    &session.expires_at_ms,
                ],
            )
            .await?;
        transaction.commit().await.db()?;
        Ok(Ok(()))
    }
}

/// A stored digest; a row of another length was not written by this store.
fn digest(bytes: Vec<u8>) -> StoreResult<Digest> {
    bytes.try_into().map_err(|bytes: Vec<u8>| {
        StoreError::Other(
            format!("a session's token digest has {} bytes, not 32", bytes.len()).into(),
        )
    })
}
