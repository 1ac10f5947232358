//! Dashboard sessions: the login form trades a token for a random session id.
//!
//! The cookie holds the session id, never the token, so a leaked cookie is worth one session
//! (ended by logging out or by its expiry) rather than the token itself. Where sessions live is
//! the store's choice ([`sluice_core::Store::session_store`]): a store shared by several nodes
//! keeps them where every node sees them; otherwise they live in this process's memory
//! ([`MemorySessions`]), and a restart signs everyone out, which costs a login and keeps no
//! credential on disk.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use sluice_core::Millis;
use sluice_core::store::StoreError;
use sluice_core::store::sessions::{
    MemorySessions, NewSession, SessionLimits, SessionStartError, SessionStore,
};

/// How long a session lasts from its login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// Why a login got no session.
#[derive(Debug, thiserror::Error)]
pub enum LoginRefused {
    #[error(
        "{0} dashboard sessions are open, the most allowed ([limits] max_sessions); sign out elsewhere or try again later"
    )]
    Full(usize),
    /// The store failed (the page does not show why: the log does).
    #[error("sessions cannot be stored now; try again in a moment")]
    Store(StoreError),
}

/// The dashboard's sessions, with their caps, over the store that keeps them.
pub struct Sessions {
    store: Arc<dyn SessionStore>,
    limits: SessionLimits,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("limits", &self.limits)
            .finish()
    }
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// Sessions in `store` (this process's memory when `None`), at most `per_token` per token
    /// and `max` in all.
    pub fn new(store: Option<Arc<dyn SessionStore>>, per_token: usize, max: usize) -> Self {
        Self {
            store: store.unwrap_or_else(|| Arc::new(MemorySessions::default())),
            limits: SessionLimits {
                per_token: per_token.max(1),
                max: max.max(1),
            },
        }
    }

    /// Starts a session for the token with this digest and returns its id (256 random bits).
    /// A token at its cap loses its oldest session; when all sessions are taken the login is
    /// refused.
    pub async fn start(
        &self,
        token_digest: [u8; 32],
        now_ms: Millis,
    ) -> Result<String, LoginRefused> {
        let id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let session = NewSession {
            id_digest: key(&id),
            token_digest,
            now_ms,
            expires_at_ms: now_ms.saturating_add(SESSION_TTL.as_millis() as Millis),
        };
        match self.store.start(session, self.limits).await {
            Ok(()) => Ok(id),
            Err(SessionStartError::Full(held)) => Err(LoginRefused::Full(held)),
            Err(SessionStartError::Store(error)) => Err(LoginRefused::Store(error)),
        }
    }

    /// The digest of the token behind a live session.
    pub async fn token_digest(
        &self,
        id: &str,
        now_ms: Millis,
    ) -> Result<Option<[u8; 32]>, StoreError> {
        self.store.token_digest(key(id), now_ms).await
    }

    /// Ends a session (logout).
    pub async fn end(&self, id: &str) -> Result<(), StoreError> {
        self.store.end(key(id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL_MS: Millis = SESSION_TTL.as_millis() as Millis;

    #[tokio::test]
    async fn a_session_maps_to_its_token_until_it_ends_or_expires() {
        let sessions = Sessions::new(None, 5, 100);
        let now = 1_000;
        let first = sessions.start([1; 32], now).await.unwrap();
        let second = sessions.start([2; 32], now).await.unwrap();
        assert_ne!(first, second, "ids are random");
        assert!(first.len() >= 43, "256 bits of id: {first}");
        let digest = |id: &str, at| {
            let sessions = &sessions;
            let id = id.to_owned();
            async move { sessions.token_digest(&id, at).await.unwrap() }
        };
        assert_eq!(digest(&first, now).await, Some([1; 32]));
        assert_eq!(digest(&second, now).await, Some([2; 32]));
        assert_eq!(digest("made-up", now).await, None);

        sessions.end(&first).await.unwrap();
        assert_eq!(digest(&first, now).await, None);
        assert_eq!(digest(&second, now).await, Some([2; 32]));
        assert_eq!(
            digest(&second, now + TTL_MS).await,
            None,
            "expired at its TTL"
        );
    }

    /// The rules of the caps are the session store's (`sluice_store_tests::sessions` checks
    /// them); here, that this wrapper passes its limits on and maps a full table.
    #[tokio::test]
    async fn a_full_table_refuses_logins_and_signs_no_one_out() {
        let memory = Arc::new(MemorySessions::default());
        let sessions = Sessions::new(Some(memory.clone()), 2, 4);
        let now = 1_000;
        let mut ids = Vec::new();
        for token in [0u8, 0, 1, 1] {
            ids.push(sessions.start([token; 32], now).await.unwrap());
        }
        assert!(matches!(
            sessions.start([7; 32], now).await,
            Err(LoginRefused::Full(4))
        ));
        for id in &ids {
            assert!(
                sessions.token_digest(id, now).await.unwrap().is_some(),
                "still signed in"
            );
        }
        // A token at its own cap may still sign in: it replaces its own oldest session.
        let later = now + 1;
        let again = sessions.start([0; 32], later).await.unwrap();
        assert!(
            sessions
                .token_digest(&again, later)
                .await
                .unwrap()
                .is_some()
        );
        let mut kept = 0;
        for id in &ids {
            kept += usize::from(sessions.token_digest(id, later).await.unwrap().is_some());
        }
        assert_eq!(kept, 3, "one of token 0's first two sessions made room");
        assert_eq!(memory.len(), 4);
        // Expired sessions make room.
        assert!(sessions.start([7; 32], now + TTL_MS).await.is_ok());
    }
}
