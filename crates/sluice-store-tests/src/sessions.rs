//! What every [`SessionStore`] must do the same way: the one in a node's memory and the ones a
//! shared store keeps for every node. A backend's tests call [`check`] on a fresh, empty
//! session store.

use sluice_core::store::sessions::{
    Digest, NewSession, SessionLimits, SessionStartError, SessionStore,
};

use crate::{Millis, T0};

/// A session lasts this long in these checks (as long as the dashboard's, 12 hours).
const TTL_MS: Millis = 12 * 60 * 60 * 1000;

fn id(n: u8) -> Digest {
    [n; 32]
}

fn token(n: u8) -> Digest {
    let mut digest = [0xee; 32];
    digest[0] = n;
    digest
}

async fn start(
    store: &dyn SessionStore,
    session: u8,
    by: u8,
    at: Millis,
    limits: SessionLimits,
) -> Result<(), SessionStartError> {
    let session = NewSession {
        id_digest: id(session),
        token_digest: token(by),
        now_ms: at,
        expires_at_ms: at + TTL_MS,
    };
    store.start(session, limits).await
}

async fn token_of(store: &dyn SessionStore, session: u8, at: Millis) -> Option<Digest> {
    store.token_digest(id(session), at).await.unwrap()
}

/// Runs every rule on `store`, which must hold no session: a session maps to its token until it
/// ends or expires; a token at its cap loses its own oldest session and no one else's; a full
/// table refuses logins and signs no one out; expired sessions make room.
pub async fn check(store: &dyn SessionStore) {
    let roomy = SessionLimits {
        per_token: 10,
        max: 100,
    };
    // A session maps to its token until it ends or expires.
    start(store, 1, 1, T0, roomy).await.unwrap();
    start(store, 2, 2, T0, roomy).await.unwrap();
    assert_eq!(token_of(store, 1, T0).await, Some(token(1)));
    assert_eq!(token_of(store, 2, T0).await, Some(token(2)));
    assert_eq!(token_of(store, 3, T0).await, None, "never started");
    store.end(id(1)).await.unwrap();
    store.end(id(1)).await.unwrap(); // ending it again is no error
    assert_eq!(token_of(store, 1, T0).await, None, "ended");
    assert_eq!(token_of(store, 2, T0 + TTL_MS - 1).await, Some(token(2)));
    assert_eq!(
        token_of(store, 2, T0 + TTL_MS).await,
        None,
        "expired at its TTL"
    );

    // From here the time is past those two: they no longer count.
    let now = T0 + TTL_MS;
    let capped = SessionLimits {
        per_token: 3,
        max: 6,
    };
    // A token at its cap loses its own oldest session, and no one else's.
    start(store, 10, 9, now, capped).await.unwrap();
    for n in 0..6 {
        start(store, 20 + n, 1, now + 1 + Millis::from(n), capped)
            .await
            .unwrap();
    }
    let later = now + 10;
    assert_eq!(token_of(store, 10, later).await, Some(token(9)));
    for n in 0..6u8 {
        assert_eq!(
            token_of(store, 20 + n, later).await.is_some(),
            n >= 3,
            "only the newest 3 of token 1's sessions are kept ({n})"
        );
    }
    // A full table refuses a new login and ends no one's session: 1 + 3 + 2 = 6.
    start(store, 30, 2, later, capped).await.unwrap();
    start(store, 31, 2, later, capped).await.unwrap();
    let refused = start(store, 40, 3, later, capped).await;
    assert!(
        matches!(refused, Err(SessionStartError::Full(6))),
        "{refused:?}"
    );
    for session in [10, 23, 24, 25, 30, 31] {
        assert!(
            token_of(store, session, later).await.is_some(),
            "{session} still signed in"
        );
    }
    assert_eq!(token_of(store, 40, later).await, None);
    // A token at its own cap may still sign in: it replaces its own oldest session.
    start(store, 26, 1, later + 1, capped).await.unwrap();
    assert_eq!(
        token_of(store, 23, later + 1).await,
        None,
        "token 1's oldest made room"
    );
    assert_eq!(token_of(store, 26, later + 1).await, Some(token(1)));
    // Expired sessions make room.
    start(store, 41, 3, later + TTL_MS + 1, capped)
        .await
        .unwrap();
    assert_eq!(
        token_of(store, 41, later + TTL_MS + 1).await,
        Some(token(3))
    );
}

#[cfg(test)]
mod tests {
    use sluice_core::store::sessions::MemorySessions;

    #[tokio::test]
    async fn memory_sessions_keep_every_rule() {
        super::check(&MemorySessions::default()).await;
    }
}
