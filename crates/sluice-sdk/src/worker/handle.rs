//! [`WorkerHandle`]: one worker instance seen and steered from outside while it runs: its
//! status (what each slot runs, what it holds leased), pause and resume of this instance (the
//! queue is not paused: other workers go on), drain, and shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use uuid::Uuid;

use super::{Shared, stop_requested};
use crate::Result;
use crate::backend::QueueStats;

/// What one slot is doing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotState {
    /// Its index.
    pub slot: usize,
    /// The message it runs now.
    pub current: Option<Uuid>,
    /// The attempt it runs (with `current`).
    pub attempt: Option<u32>,
    /// When the handler started on it (with `current`; by the backend's clock).
    pub since: Option<SystemTime>,
    /// Events it finished.
    pub processed: u64,
}

/// A running worker instance's state.
#[derive(Debug, Clone)]
pub struct WorkerStatus {
    /// The queue's numbers (the whole queue: every worker's share).
    pub queue: QueueStats,
    /// Each slot.
    pub slots: Vec<SlotState>,
    /// Every message this instance holds leased: running in a slot, or being acked or nacked.
    pub leased: Vec<Uuid>,
    /// Events this instance finished (acked).
    pub processed_count: u64,
    /// This instance is paused ([`WorkerHandle::pause`]): it leases nothing new.
    pub paused: bool,
}

/// A handle on a worker instance, to watch it, pause, resume, drain or stop it while it runs.
#[derive(Clone)]
pub struct WorkerHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) queue: Arc<dyn crate::Backend>,
    pub(super) name: Arc<str>,
}

impl std::fmt::Debug for WorkerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerHandle")
            .field("queue", &self.name)
            .finish()
    }
}

/// How often [`WorkerHandle::drain`] looks again.
const DRAIN_POLL: Duration = Duration::from_millis(20);

impl WorkerHandle {
    /// This instance's slots and leases, with the queue's numbers.
    pub async fn status(&self) -> Result<WorkerStatus> {
        let queue = self.queue.stats(&self.name).await?;
        let slots = self.shared.slots.lock().await.clone();
        let leased = self
            .shared
            .leased
            .lock()
            .expect("leased")
            .keys()
            .copied()
            .collect();
        Ok(WorkerStatus {
            queue,
            slots,
            leased,
            processed_count: self.shared.processed.load(Ordering::SeqCst),
            paused: self.shared.paused.load(Ordering::SeqCst),
        })
    }

    /// This instance stops leasing: running handlers finish, idle slots wait (after their
    /// current long poll, at most the worker's `poll_wait`). The queue is not paused; other
    /// workers go on. Use [`crate::Queue::pause`] to stop every worker.
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
    }

    /// This instance leases again.
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
        self.shared.resumed.notify_waiters();
    }

    /// Whether this instance is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::SeqCst)
    }

    /// Waits until this instance holds nothing and the queue has nothing ready, delayed or in
    /// flight, or `timeout`; true when that happened. The worker keeps running. On a backend
    /// that does not count messages in flight (RabbitMQ), messages that other consumers hold
    /// are not seen.
    pub async fn drain(&self, timeout: Duration) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let idle = self.shared.held() == 0 && self.shared.settling.load(Ordering::SeqCst) == 0;
            if idle && self.queue.stats(&self.name).await?.outstanding() == 0 {
                return Ok(true);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(DRAIN_POLL.min(deadline - now)).await;
        }
    }

    /// Asks the worker to stop: like SIGTERM.
    pub fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.stop.notify_waiters();
    }
}

/// Returns once the instance is resumed or stopping.
pub(super) async fn wait_resumed(shared: &Shared) {
    loop {
        let resumed = shared.resumed.notified();
        tokio::pin!(resumed);
        resumed.as_mut().enable();
        if !shared.paused.load(Ordering::SeqCst) || shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        tokio::select! {
            _ = resumed => {}
            _ = stop_requested(shared) => return,
        }
    }
}
