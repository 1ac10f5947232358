//! Where the dashboard's sessions live: the [`SessionStore`] seam, and [`MemorySessions`], the
//! one a single node keeps in its own memory.
//!
//! Only digests are kept: the SHA-256 of a session id and of the token that signed in, never
//! either value, so what a store holds cannot be replayed as a cookie or a token. A store shared
//! by several nodes ([`crate::Store::session_store`]) keeps sessions where every node sees them,
//! so a request that lands on another node is still signed in, a logout ends the session
//! everywhere, and both caps hold in all rather than per node.

use std::collections::HashMap;

use async_trait::async_trait;
use parking_lot::Mutex;

use super::StoreError;
use crate::clock::Millis;

/// A SHA-256 digest.
pub type Digest = [u8; 32];

/// A session to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewSession {
    /// The digest of the session id (the cookie's value).
    pub id_digest: Digest,
    /// The digest of the token that signed in.
    pub token_digest: Digest,
    pub now_ms: Millis,
    /// It ends here unless a logout ends it first.
    pub expires_at_ms: Millis,
}

/// How many sessions may be live: both caps keep one identity from crowding out another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Most sessions of one token: at the cap, its oldest session ends to make room.
    pub per_token: usize,
    /// Most sessions in all: a full table refuses new logins rather than end someone's session.
    pub max: usize,
}

/// Why a session was not started.
#[derive(Debug, thiserror::Error)]
pub enum SessionStartError {
    /// `limits.max` sessions (the number held) are live.
    #[error("{0} sessions are live, the most allowed")]
    Full(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where sessions live.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Starts a session within `limits` (expired sessions do not count): a token at its cap
    /// loses its oldest sessions; when `limits.max` are live the login is refused.
    async fn start(
        &self,
        session: NewSession,
        limits: SessionLimits,
    ) -> Result<(), SessionStartError>;
    /// The digest of the token behind a session live at `now_ms`.
    async fn token_digest(
        &self,
        id_digest: Digest,
        now_ms: Millis,
    ) -> Result<Option<Digest>, StoreError>;
    /// Ends a session (logout); a session that is not there is no error.
    async fn end(&self, id_digest: Digest) -> Result<(), StoreError>;
}

#[derive(Debug, Clone, Copy)]
struct Live {
    token_digest: Digest,
    started_at_ms: Millis,
    expires_at_ms: Millis,
}

/// Sessions in this process's memory: a restart signs everyone out, which costs a login and
/// keeps no credential on disk.
#[derive(Debug, Default)]
pub struct MemorySessions {
    live: Mutex<HashMap<Digest, Live>>,
}

impl MemorySessions {
    /// Sessions held, expired ones included until the next start drops them.
    pub fn len(&self) -> usize {
        self.live.lock().len()
    }

    /// True when none are held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait]
impl SessionStore for MemorySessions {
    async fn start(
        &self,
        session: NewSession,
        limits: SessionLimits,
    ) -> Result<(), SessionStartError> {
        let per_token = limits.per_token.max(1);
        let mut live = self.live.lock();
        live.retain(|_, held| held.expires_at_ms > session.now_ms);
        let mut own: Vec<(Digest, Millis)> = live
            .iter()
            .filter(|(_, held)| held.token_digest == session.token_digest)
            .map(|(id, held)| (*id, held.started_at_ms))
            .collect();
        if own.len() >= per_token {
            own.sort_unstable_by_key(|(_, started_at_ms)| *started_at_ms);
            for (id, _) in &own[..=own.len() - per_token] {
                live.remove(id);
            }
        } else if live.len() >= limits.max.max(1) {
            return Err(SessionStartError::Full(live.len()));
        }
        live.insert(
            session.id_digest,
            Live {
                token_digest: session.token_digest,
                started_at_ms: session.now_ms,
                expires_at_ms: session.expires_at_ms,
            },
        );
        Ok(())
    }

    async fn token_digest(
        &self,
        id_digest: Digest,
        now_ms: Millis,
    ) -> Result<Option<Digest>, StoreError> {
        Ok(self
            .live
            .lock()
            .get(&id_digest)
            .filter(|held| held.expires_at_ms > now_ms)
            .map(|held| held.token_digest))
    }

    async fn end(&self, id_digest: Digest) -> Result<(), StoreError> {
        self.live.lock().remove(&id_digest);
        Ok(())
    }
}
