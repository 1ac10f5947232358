//! Wake-ups for long polls: one [`tokio::sync::Notify`] per queue.
//!
//! A store wakes a queue's waiters after it commits something that may be claimable (an enqueue,
//! a retry, an expired lease). Waiters register before they look, so no wake-up is lost between
//! an empty claim and going to sleep.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Per-queue wake-up signals.
#[derive(Debug, Default)]
pub struct Notifier {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
}

impl Notifier {
    /// The signal of `queue`, created on first use.
    pub fn queue(&self, queue: &str) -> Arc<Notify> {
        let mut queues = self.queues.lock();
        if let Some(notify) = queues.get(queue) {
            return notify.clone();
        }
        let notify = Arc::new(Notify::new());
        queues.insert(queue.to_owned(), notify.clone());
        notify
    }

    /// Wakes everyone waiting on `queue`.
    pub fn wake(&self, queue: &str) {
        if let Some(notify) = self.queues.lock().get(queue) {
            notify.notify_waiters();
        }
    }

    /// Wakes every waiter of every queue (after a clock jump, or at shutdown).
    pub fn wake_all(&self) {
        for notify in self.queues.lock().values() {
            notify.notify_waiters();
        }
    }
}
