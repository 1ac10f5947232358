//! The threads jq expressions run on.
//!
//! An expression is a program: it recurses on the native stack (so it needs a bigger stack than
//! tokio's 2 MiB, [`RUN_STACK_SIZE`]), and it can loop forever, which nothing can interrupt. So
//! expressions never run on the async workers: they go to this pool, and the caller waits with a
//! time limit. A thread stuck in a runaway program is abandoned; the pool starts another one
//! while fewer than [`THREADS_MAX`] exist, and logs when it cannot.
//!
//! Expressions are defined by whoever may define endpoints and queues (an operator), and they
//! are part of the server's trusted configuration: a program that recurses without end can
//! still exhaust even the big stack and end the process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use parking_lot::Mutex;
use sluice_webhooks::expr::RUN_STACK_SIZE;
use tokio::sync::oneshot;

/// Most threads the pool starts (stuck ones included).
const THREADS_MAX: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// A growing pool of big-stack threads.
pub struct ExprPool {
    jobs: Mutex<Sender<Job>>,
    receiver: Arc<Mutex<Receiver<Job>>>,
    threads: AtomicUsize,
    idle: Arc<AtomicUsize>,
}

impl ExprPool {
    /// The process-wide pool.
    pub fn global() -> &'static ExprPool {
        static POOL: OnceLock<ExprPool> = OnceLock::new();
        POOL.get_or_init(|| {
            let (jobs, receiver) = channel();
            ExprPool {
                jobs: Mutex::new(jobs),
                receiver: Arc::new(Mutex::new(receiver)),
                threads: AtomicUsize::new(0),
                idle: Arc::new(AtomicUsize::new(0)),
            }
        })
    }

    /// Runs `work` on a pool thread; an error when it takes longer than `limit` or panics.
    pub async fn run<T: Send + 'static>(
        &self,
        limit: Duration,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, String> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let _ = reply.send(outcome);
        });
        self.grow_if_busy();
        self.jobs
            .lock()
            .send(job)
            .map_err(|_| "the expression threads are gone".to_owned())?;
        match tokio::time::timeout(limit, answer).await {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(_))) => Err("the expression panicked".into()),
            Ok(Err(_)) => Err("the expression thread stopped".into()),
            Err(_) => Err(format!(
                "the expression ran longer than {} ms and was abandoned",
                limit.as_millis()
            )),
        }
    }

    fn grow_if_busy(&self) {
        if self.idle.load(Ordering::SeqCst) > 0 {
            return;
        }
        let started = self.threads.fetch_add(1, Ordering::SeqCst);
        if started >= THREADS_MAX {
            self.threads.fetch_sub(1, Ordering::SeqCst);
            tracing::error!(
                threads = THREADS_MAX,
                "every expression thread is busy (runaway programs?); requests wait"
            );
            return;
        }
        let receiver = self.receiver.clone();
        let idle = self.idle.clone();
        let spawned = std::thread::Builder::new()
            .name("sluice-expr".into())
            .stack_size(RUN_STACK_SIZE)
            .spawn(move || {
                loop {
                    idle.fetch_add(1, Ordering::SeqCst);
                    let job = receiver.lock().recv();
                    idle.fetch_sub(1, Ordering::SeqCst);
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
        if let Err(error) = spawned {
            self.threads.fetch_sub(1, Ordering::SeqCst);
            tracing::error!(%error, "cannot start an expression thread");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn results_come_back_and_a_stuck_job_does_not_block_the_next() {
        let pool = ExprPool::global();
        assert_eq!(pool.run(Duration::from_secs(5), || 6 * 7).await, Ok(42));
        let stuck = pool
            .run(Duration::from_millis(50), || {
                std::thread::sleep(Duration::from_millis(2_000));
            })
            .await;
        assert!(stuck.unwrap_err().contains("longer than"));
        // Another thread takes the next job while the first one is still stuck.
        assert_eq!(
            pool.run(Duration::from_secs(1), || "next").await,
            Ok("next")
        );
        let panicked = pool.run(Duration::from_secs(5), || panic!("boom")).await;
        assert_eq!(panicked, Err::<(), _>("the expression panicked".into()));
    }
}
