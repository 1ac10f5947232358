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

/// Messages made claimable at once from which [`Notifier::wake_for`] wakes every waiter
/// instead of one per message.
pub const WAKE_EVERYONE_FROM: u64 = 64;

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

    /// Removes `queue`'s entry when nobody holds its signal any more, rather than leaving it
    /// for the next sweep: what a waiter calls after dropping its signal because the queue
    /// turned out not to exist.
    pub fn release(&self, queue: &str) {
        let mut signals = self.signals.lock();
        if signals
            .queues
            .get(queue)
            .is_some_and(|weak| weak.strong_count() == 0)
        {
            signals.queues.remove(queue);
        }
    }

    /// The signal of `queue` if someone holds it.
    fn held(&self, queue: &str) -> Option<Arc<Notify>> {
        self.signals
            .lock()
            .queues
            .get(queue)
            .and_then(Weak::upgrade)
    }

    /// Wakes everyone waiting on `queue`.
    pub fn wake(&self, queue: &str) {
        if let Some(notify) = self.held(queue) {
            notify.notify_waiters();
        }
    }

    /// Wakes as many waiters on `queue` as `messages` became claimable, or everyone when
    /// there are no more waiters than that, or from [`WAKE_EVERYONE_FROM`] messages on. A
    /// store that knows how many messages it made ready calls this instead of
    /// [`Notifier::wake`]: with many long polls on a queue, a message wakes one of them rather
    /// than all, and the others do not each run a claim that finds nothing (on a shared
    /// database those empty claims were more than half of all claims at a steady 2,000
    /// msgs/s). A waiter that leaves without taking its wake-up, or is cancelled on it, passes
    /// it to the next (`tokio::sync::Notify::notify_one`, `wait::until`).
    ///
    /// The waiters are counted as the holders of the queue's signal (each waiter holds it while
    /// it waits), so a wake-up is kept for later (tokio's permit) only when a holder was
    /// between two looks; the next look then finds nothing at worst.
    pub fn wake_for(&self, queue: &str, messages: u64) {
        let Some(notify) = self.held(queue) else {
            return;
        };
        let holders = Arc::strong_count(&notify) as u64 - 1;
        if messages >= holders || messages >= WAKE_EVERYONE_FROM {
            notify.notify_waiters();
        } else {
            for _ in 0..messages {
                notify.notify_one();
            }
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

    #[test]
    fn a_few_messages_wake_as_many_waiters_and_a_dropped_wake_passes_on() {
        let notifier = Notifier::default();
        // Waiters as `wait::until` makes them: each holds the queue's signal while it waits.
        let waiter = || Box::pin(notifier.queue("q").notified_owned());
        let mut waiters: Vec<_> = (0..4).map(|_| waiter()).collect();
        for waiter in &mut waiters {
            assert!(!waiter.as_mut().enable(), "nothing woke it yet");
        }
        notifier.wake_for("q", 2);
        // `enable` on a registered waiter says whether it was woken (and takes the wake-up).
        let woken: Vec<bool> = waiters.iter_mut().map(|w| w.as_mut().enable()).collect();
        assert_eq!(woken.iter().filter(|&&w| w).count(), 2, "{woken:?}");
        let mut left: Vec<_> = waiters
            .into_iter()
            .zip(woken)
            .filter(|(_, woken)| !woken)
            .map(|(waiter, _)| waiter)
            .collect();
        let third = waiter();
        left.push(third);
        for waiter in &mut left {
            waiter.as_mut().enable();
        }

        // One wake-up for three waiters. The first (whom it reaches: tokio wakes in order)
        // leaves without taking it, so it passes to another.
        notifier.wake_for("q", 1);
        drop(left.remove(0));
        let woken = left
            .iter_mut()
            .map(|w| w.as_mut().enable())
            .filter(|&w| w)
            .count();
        assert_eq!(woken, 1, "the wake-up was lost or doubled");

        // As many messages as waiters, or more than `WAKE_EVERYONE_FROM`: everyone.
        let mut all: Vec<_> = (0..3).map(|_| waiter()).collect();
        for waiter in &mut all {
            waiter.as_mut().enable();
        }
        notifier.wake_for("q", 4);
        assert!(all.iter_mut().all(|waiter| waiter.as_mut().enable()));
    }

    #[test]
    fn a_wake_up_is_not_kept_when_nobody_waits() {
        let notifier = Notifier::default();
        let held = notifier.queue("q");
        notifier.wake_for("q", 1);
        let mut later = Box::pin(held.notified());
        assert!(!later.as_mut().enable(), "a wake-up from before it waited");
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
