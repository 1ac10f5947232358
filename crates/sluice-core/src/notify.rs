//! Wake-ups for long polls: one [`tokio::sync::Notify`] per queue that someone waits on.
//!
//! A store wakes a queue's waiters after it commits something that may be claimable (an enqueue,
//! a retry, an expired lease). Waiters register before they look, so no wake-up is lost between
//! an empty claim and going to sleep.
//!
//! The map holds weak references: a signal lives as long as a waiter holds it, and entries
//! whose waiters are all gone are swept out as the map grows. So the map is bounded by the
//! waiters of the moment, whatever names callers ask for (a name is client input: a long poll on
//! a queue that does not exist must not leave anything behind).

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Entries kept before the first sweep; small maps are never swept.
const SWEEP_FLOOR: usize = 64;

/// Per-queue wake-up signals.
#[derive(Debug, Default)]
pub struct Notifier {
    signals: Mutex<Signals>,
}

#[derive(Debug, Default)]
struct Signals {
    queues: HashMap<String, Weak<Notify>>,
    /// The map's size that triggers the next sweep: twice what the last sweep kept, so the
    /// sweeps' cost per insert stays constant.
    sweep_at: usize,
}

impl Notifier {
    /// The signal of `queue`, shared by everyone waiting on it. Hold it while waiting: once
    /// every holder drops it, the queue has no signal until someone asks again.
    pub fn queue(&self, queue: &str) -> Arc<Notify> {
        let mut signals = self.signals.lock();
        if let Some(notify) = signals.queues.get(queue).and_then(Weak::upgrade) {
            return notify;
        }
        let notify = Arc::new(Notify::new());
        signals
            .queues
            .insert(queue.to_owned(), Arc::downgrade(&notify));
        if signals.queues.len() >= signals.sweep_at.max(SWEEP_FLOOR) {
            signals.queues.retain(|_, weak| weak.strong_count() > 0);
            signals.queues.shrink_to_fit();
            signals.sweep_at = signals.queues.len() * 2;
        }
        notify
    }

    /// Wakes everyone waiting on `queue`.
    pub fn wake(&self, queue: &str) {
        let notify = self
            .signals
            .lock()
            .queues
            .get(queue)
            .and_then(Weak::upgrade);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter of every queue (after a clock jump, or at shutdown).
    pub fn wake_all(&self) {
        let live: Vec<Arc<Notify>> = self
            .signals
            .lock()
            .queues
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        for notify in live {
            notify.notify_waiters();
        }
    }

    /// Queues with an entry in the map (live or not yet swept).
    pub fn len(&self) -> usize {
        self.signals.lock().queues.len()
    }

    /// True when no queue has an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_nobody_waits_on_do_not_pile_up() {
        let notifier = Notifier::default();
        for i in 0..10_000 {
            // A long poll on a made-up name: asked for, then dropped at once (the 404).
            drop(notifier.queue(&format!("no-such-queue-{i}")));
        }
        assert!(
            notifier.len() <= SWEEP_FLOOR,
            "{} entries left behind",
            notifier.len()
        );
    }

    #[test]
    fn waiters_share_a_signal_and_keep_it_while_they_wait() {
        let notifier = Notifier::default();
        let held: Vec<Arc<Notify>> = (0..200).map(|i| notifier.queue(&format!("q{i}"))).collect();
        let again = notifier.queue("q7");
        assert!(Arc::ptr_eq(&again, &held[7]), "one signal per queue");
        for i in 0..10_000 {
            drop(notifier.queue(&format!("gone-{i}")));
        }
        assert!(
            notifier.len() <= 2 * 200 + SWEEP_FLOOR,
            "{}",
            notifier.len()
        );
        assert!(Arc::ptr_eq(&notifier.queue("q199"), &held[199]), "kept");
        drop(held);
        drop(again);
        for i in 0..1_000 {
            drop(notifier.queue(&format!("later-{i}")));
        }
        assert!(notifier.len() <= SWEEP_FLOOR, "{}", notifier.len());
    }

    #[tokio::test]
    async fn a_wake_reaches_a_registered_waiter() {
        let notifier = Arc::new(Notifier::default());
        let notify = notifier.queue("q");
        let woken = notify.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        notifier.wake("q");
        tokio::time::timeout(std::time::Duration::from_secs(5), woken)
            .await
            .expect("woken");
        notifier.wake("nobody-waits-here");
        notifier.wake_all();
    }
}
