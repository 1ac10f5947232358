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

/// Why a login got no session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} dashboard sessions are open, the most allowed ([limits] sessions_max); sign out elsewhere or try again later"
)]
pub struct SessionsFull(pub usize);

struct Session {
    /// The digest of the token that signed in.
    token_digest: [u8; 32],
    expires_at: Instant,
}

/// The live sessions, keyed by the SHA-256 of their id (the id itself is not kept).
///
/// Both caps keep one identity from crowding out another: a token at its own cap loses its
/// oldest session, and a full table refuses new logins rather than ending someone's session.
pub struct Sessions {
    live: Mutex<HashMap<[u8; 32], Session>>,
    /// Most sessions of one token.
    per_token: usize,
    /// Most sessions in all.
    max: usize,
}

impl Default for Sessions {
    fn default() -> Self {
        let defaults = crate::config::Limits::DEFAULT;
        Self::new(defaults.sessions_per_token, defaults.sessions_max)
    }
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
    /// No live sessions; at most `per_token` per token and `max` in all.
    pub fn new(per_token: usize, max: usize) -> Self {
        Self {
            live: Mutex::new(HashMap::new()),
            per_token: per_token.max(1),
            max: max.max(1),
        }
    }

    /// Starts a session for the token with this digest and returns its id (256 random bits).
    /// A token at its cap loses its oldest session; when all sessions are taken the login is
    /// refused.
    pub fn start(&self, token_digest: [u8; 32], now: Instant) -> Result<String, SessionsFull> {
        let mut live = self.live.lock();
        live.retain(|_, session| session.expires_at > now);
        let mut own: Vec<([u8; 32], Instant)> = live
            .iter()
            .filter(|(_, session)| session.token_digest == token_digest)
            .map(|(key, session)| (*key, session.expires_at))
            .collect();
        if own.len() >= self.per_token {
            // Sessions all last SESSION_TTL, so the soonest to expire is the oldest.
            own.sort_unstable_by_key(|(_, expires_at)| *expires_at);
            for (key, _) in &own[..=own.len() - self.per_token] {
                live.remove(key);
            }
        } else if live.len() >= self.max {
            return Err(SessionsFull(live.len()));
        }
        let id = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        live.insert(
            key(&id),
            Session {
                token_digest,
                expires_at: now + SESSION_TTL,
            },
        );
        Ok(id)
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
        let first = sessions.start([1; 32], now).unwrap();
        let second = sessions.start([2; 32], now).unwrap();
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
    fn a_token_at_its_cap_loses_its_own_oldest_session_and_no_one_elses() {
        let sessions = Sessions::new(3, 100);
        let now = Instant::now();
        let admin = sessions.start([9; 32], now).unwrap();
        let at = |i: u64| now + Duration::from_millis(i);
        let flood: Vec<String> = (1..=10)
            .map(|i| sessions.start([1; 32], at(i)).unwrap())
            .collect();
        assert_eq!(
            sessions.live.lock().len(),
            4,
            "3 of the flood and the admin"
        );
        assert_eq!(sessions.token_digest(&admin, at(11)), Some([9; 32]));
        for (i, id) in flood.iter().enumerate() {
            let kept = sessions.token_digest(id, at(11)).is_some();
            assert_eq!(
                kept,
                i >= 7,
                "only the newest 3 of the flood are kept ({i})"
            );
        }
    }

    #[test]
    fn a_full_table_refuses_logins_and_signs_no_one_out() {
        let sessions = Sessions::new(2, 4);
        let now = Instant::now();
        let ids: Vec<String> = [0u8, 0, 1, 1]
            .into_iter()
            .map(|token| sessions.start([token; 32], now).unwrap())
            .collect();
        assert_eq!(sessions.start([7; 32], now), Err(SessionsFull(4)));
        for id in &ids {
            assert!(sessions.token_digest(id, now).is_some(), "still signed in");
        }
        // A token at its own cap may still sign in: it replaces its own oldest session.
        let later = now + Duration::from_millis(1);
        let again = sessions.start([0; 32], later).unwrap();
        assert!(sessions.token_digest(&again, later).is_some());
        assert_eq!(
            ids.iter()
                .filter(|id| sessions.token_digest(id, later).is_some())
                .count(),
            3,
            "one of token 0's first two sessions made room"
        );
        assert_eq!(sessions.live.lock().len(), 4);
        // Expired sessions make room.
        assert!(sessions.start([7; 32], now + SESSION_TTL).is_ok());
    }
}
