//! Queue definitions cached on this node (docs/design/postgres-store.md §4.4): every message
//! call resolves its queue's name to an id and a configuration, and asking the database each
//! time would add a round trip to every request.
//!
//! The database stays the truth; an entry is only a copy, dropped when it may be stale:
//! - this node's own change drops its entry once committed;
//! - another node's change arrives as a `<schema>.config` notification ([`crate::listen`]),
//!   which drops the entry it names;
//! - while the listener is not connected, notifications may be lost: an entry then serves only
//!   within [`UNSURE_REUSE`] of its last check, and is re-checked by its version after that;
//!   when the listener connects again it drops every entry.
//!
//! A read that raced an invalidation must not put back what it read before the change: every
//! invalidation bumps a generation, and a read stores its result only if the generation is
//! still the one it started with.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_core::queue::QueueConfig;

/// How long an entry is used without a check while invalidations may be missed.
pub(crate) const UNSURE_REUSE: Duration = Duration::from_secs(1);

/// One queue as the node knows it.
#[derive(Debug, Clone)]
pub(crate) struct CachedQueue {
    /// `queues.id`: what message rows carry instead of the name.
    pub id: i32,
    /// `queues.config_version` when read.
    pub version: i64,
    /// The definition.
    pub config: Arc<QueueConfig>,
}

/// Queue definitions by name.
#[derive(Debug, Default)]
pub(crate) struct QueueCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    queues: HashMap<String, Entry>,
    /// Bumped by every invalidation (see the module doc).
    generation: u64,
    /// True while the listener is connected, so invalidations arrive.
    is_listening: bool,
}

#[derive(Debug)]
struct Entry {
    queue: CachedQueue,
    checked_at: Instant,
}

/// What a lookup found.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// A current entry.
    Fresh(CachedQueue),
    /// An entry that must be checked by its version first (invalidations may have been
    /// missed), with the generation to store the check's result under.
    Unsure(CachedQueue, u64),
    /// Nothing: read the row, and store it under this generation.
    Miss(u64),
}

impl QueueCache {
    /// The entry for `name`, and whether it can be used as is.
    pub(crate) fn lookup(&self, name: &str) -> Lookup {
        let inner = self.inner.lock();
        match inner.queues.get(name) {
            Some(entry) if inner.is_listening || entry.checked_at.elapsed() < UNSURE_REUSE => {
                Lookup::Fresh(entry.queue.clone())
            }
            Some(entry) => Lookup::Unsure(entry.queue.clone(), inner.generation),
            None => Lookup::Miss(inner.generation),
        }
    }

    /// Stores what a read found at `generation`, unless an invalidation came since.
    pub(crate) fn store(&self, name: &str, queue: CachedQueue, generation: u64) {
        let mut inner = self.inner.lock();
        if inner.generation == generation {
            inner.queues.insert(
                name.to_owned(),
                Entry {
                    queue,
                    checked_at: Instant::now(),
                },
            );
        }
    }

    /// Drops the entry of `name` (changed or deleted, here or on another node).
    pub(crate) fn invalidate(&self, name: &str) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner.queues.remove(name);
    }

    /// The listener connected (every entry is dropped: changes made while it was away were not
    /// announced to it) or lost its connection.
    pub(crate) fn set_listening(&self, is_listening: bool) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        if is_listening {
            inner.queues.clear();
        }
        inner.is_listening = is_listening;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(version: i64) -> CachedQueue {
        CachedQueue {
            id: 1,
            version,
            config: Arc::new(QueueConfig::defaults_for("q")),
        }
    }

    fn generation(lookup: Lookup) -> u64 {
        match lookup {
            Lookup::Miss(generation) | Lookup::Unsure(_, generation) => generation,
            Lookup::Fresh(_) => panic!("expected a miss or an unsure entry"),
        }
    }

    #[test]
    fn a_read_that_raced_an_invalidation_is_not_stored() {
        let cache = QueueCache::default();
        cache.set_listening(true);
        let before = generation(cache.lookup("q"));
        // Another node changes q while this node reads its old row.
        cache.invalidate("q");
        cache.store("q", queue(1), before);
        assert!(
            matches!(cache.lookup("q"), Lookup::Miss(_)),
            "the old row is not kept"
        );
        let now = generation(cache.lookup("q"));
        cache.store("q", queue(2), now);
        assert!(matches!(cache.lookup("q"), Lookup::Fresh(found) if found.version == 2));
    }

    #[test]
    fn entries_are_checked_again_while_the_listener_is_away_and_dropped_when_it_returns() {
        let cache = QueueCache::default();
        cache.set_listening(true);
        let at = generation(cache.lookup("q"));
        cache.store("q", queue(1), at);
        cache.set_listening(false);
        assert!(
            matches!(cache.lookup("q"), Lookup::Fresh(_)),
            "used for a moment after the listener went away"
        );
        cache.inner.lock().queues.get_mut("q").unwrap().checked_at -= UNSURE_REUSE;
        assert!(matches!(cache.lookup("q"), Lookup::Unsure(found, _) if found.version == 1));
        cache.set_listening(true);
        assert!(matches!(cache.lookup("q"), Lookup::Miss(_)));
    }
}
