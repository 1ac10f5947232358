//! Dashboard sessions: the login form trades a token for a random session id.
//!
//! The cookie holds the session id, never the token, so a leaked cookie is worth one session
//! (ended by logging out or by its expiry) rather than the token itself. Sessions live in memory:
//! a restart signs everyone out, which costs a login and keeps no credential on disk.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

/// How long a session lasts from its login.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// Live sessions kept at most; beyond it a login ends the session closest to expiring.
const MAX_SESSIONS: usize = 10_000;

struct Session {
    /// The digest of the token that signed in.
    token_digest: [u8; 32],
    expires_at: Instant,
}

/// The live sessions, keyed by the SHA-256 of their id (the id itself is not kept).
#[derive(Default)]
pub struct Sessions {
    live: Mutex<HashMap<[u8; 32], Session>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("live", &self.live.lock().len())
            .finish()
    }
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// Starts a session for the token with this digest and returns its id (256 random bits).
    pub fn start(&self, token_digest: [u8; 32], now: Instant) -> String {
        let id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        let mut live = self.live.lock();
        live.retain(|_, session| session.expires_at > now);
        if live.len() >= MAX_SESSIONS
            && let Some(soonest) = live
                .iter()
                .min_by_key(|(_, session)| session.expires_at)
                .map(|(key, _)| *key)
        {
            live.remove(&soonest);
        }
        live.insert(
            key(&id),
            Session {
                token_digest,
                expires_at: now + SESSION_TTL,
            },
        );
        id
    }

    /// The digest of the token behind a live session.
    pub fn token_digest(&self, id: &str, now: Instant) -> Option<[u8; 32]> {
        let live = self.live.lock();
        live.get(&key(id))
            .filter(|session| session.expires_at > now)
            .map(|session| session.token_digest)
    }

    /// Ends a session (logout).
    pub fn end(&self, id: &str) {
        self.live.lock().remove(&key(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_maps_to_its_token_until_it_ends_or_expires() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let first = sessions.start([1; 32], now);
        let second = sessions.start([2; 32], now);
        assert_ne!(first, second, "ids are random");
        assert!(first.len() >= 43, "256 bits of id: {first}");
        assert_eq!(sessions.token_digest(&first, now), Some([1; 32]));
        assert_eq!(sessions.token_digest(&second, now), Some([2; 32]));
        assert_eq!(sessions.token_digest("made-up", now), None);

        sessions.end(&first);
        assert_eq!(sessions.token_digest(&first, now), None);
        assert_eq!(sessions.token_digest(&second, now), Some([2; 32]));
        assert_eq!(
            sessions.token_digest(&second, now + SESSION_TTL),
            None,
            "expired at its TTL"
        );
    }

    #[test]
    fn the_number_of_sessions_is_bounded() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let oldest = sessions.start([0; 32], now);
        for i in 1..=MAX_SESSIONS {
            sessions.start([1; 32], now + Duration::from_millis(i as u64));
        }
        assert_eq!(sessions.live.lock().len(), MAX_SESSIONS);
        assert_eq!(
            sessions.token_digest(&oldest, now),
            None,
            "the session closest to expiry made room"
        );
    }
}
