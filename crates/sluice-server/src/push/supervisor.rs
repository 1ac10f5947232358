//! The supervisor (a worker per queue with a push destination, started, restarted on a
//! configuration change and stopped as queues change) and each worker's claim loop.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sluice_core::message::ClaimedMessage;
use sluice_core::queue::QueueConfig;
use sluice_ops::wait::Wait;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::{Destination, Dispatcher, Worker, compile};

/// How often the supervisor looks for queues whose push settings changed.
const SUPERVISE_INTERVAL: Duration = Duration::from_millis(500);
/// Default requests in flight per destination.
const CONCURRENCY_DEFAULT: u32 = 16;
/// Default request timeout.
const TIMEOUT_MS_DEFAULT: i64 = 10_000;

impl Dispatcher {
    /// Supervises workers until shutdown, then stops them and returns once they stopped
    /// claiming (deliveries already started go on: [`Dispatcher::wait_idle`]). Returns at once
    /// when push is off.
    pub async fn run(self: Arc<Self>) {
        if !self.enabled {
            tracing::warn!("push delivery is off (--no-push or [push] enabled = false)");
            return;
        }
        while !self.shutdown.is_cancelled() {
            self.supervise().await;
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(SUPERVISE_INTERVAL) => {}
                () = self.shutdown.cancelled() => {}
            }
        }
        let workers: Vec<Worker> = self.workers.lock().drain().map(|(_, w)| w).collect();
        for worker in workers {
            // Cancelled with the shutdown token already (a child); said for clarity.
            worker.stop.cancel();
            let _ = worker.task.await;
        }
    }

    async fn supervise(self: &Arc<Self>) {
        let queues = match self.ops.queue_list(&sluice_ops::Anyone).await {
            Ok(queues) => queues,
            Err(error) => {
                tracing::warn!(%error, "push supervisor cannot list queues");
                return;
            }
        };
        let mut workers = self.workers.lock();
        let wanted: HashMap<&str, &QueueConfig> = queues
            .iter()
            .filter(|info| info.config.push.is_some() && !info.is_push_paused)
            .map(|info| (info.name.as_str(), &info.config))
            .collect();
        workers.retain(|name, worker| {
            let keep =
                wanted.get(name.as_str()) == Some(&&worker.config) && !worker.task.is_finished();
            if !keep {
                worker.stop.cancel();
            }
            keep
        });
        for (name, config) in wanted {
            if workers.contains_key(name) {
                continue;
            }
            let Some(spec) = config.push.clone() else {
                continue;
            };
            let (method, transform, signer) = match compile(&spec) {
                Ok(compiled) => compiled,
                Err(error) => {
                    tracing::error!(queue = name, %error, "push destination cannot start");
                    continue;
                }
            };
            let stats = self
                .stats
                .lock()
                .entry(name.to_owned())
                .or_default()
                .clone();
            let destination = Arc::new(Destination {
                queue: name.to_owned(),
                method,
                timeout: Duration::from_millis(
                    spec.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT).max(1) as u64,
                ),
                scrubber: crate::redact::Scrubber::for_destination(&spec),
                spec,
                config: config.clone(),
                transform,
                signer,
                stats,
            });
            let stop = self.shutdown.child_token();
            let task = tokio::spawn(self.clone().work(destination, stop.clone()));
            tracing::info!(queue = name, "push worker started");
            workers.insert(
                name.to_owned(),
                Worker {
                    config: config.clone(),
                    stop,
                    task,
                },
            );
        }
    }

    /// Leases messages and hands each to a delivery task, keeping at most `concurrency` out.
    /// Runs until `stop` is cancelled (a configuration change, a pause, shutdown).
    async fn work(self: Arc<Self>, destination: Arc<Destination>, stop: CancellationToken) {
        let concurrency = destination
            .spec
            .concurrency
            .or(destination.config.max_in_flight)
            .unwrap_or(CONCURRENCY_DEFAULT)
            .max(1) as usize;
        let slots = Arc::new(Semaphore::new(concurrency));
        // The lease outlasts the request, so a slow destination is not called twice at once.
        let lease_ms = destination
            .config
            .visibility_timeout_ms
            .max(destination.timeout.as_millis() as i64 + 5_000);
        let policy = Wait::push(&stop);
        while !stop.is_cancelled() {
            let first = tokio::select! {
                // The wait for a slot may outlive this worker (a config change, shutdown).
                biased;
                () = stop.cancelled() => break,
                first = slots.clone().acquire_owned() => first.expect("never closed"),
            };
            // Holds the slot while it waits: only this loop takes slots, so holding one
            // leaves the others free for the claim's count.
            let messages = match self
                .ops
                .push_claim(&destination.queue, lease_ms, &policy, || {
                    1 + slots.available_permits()
                })
                .await
            {
                Ok(messages) if !messages.is_empty() => messages,
                // Stopped while waiting (with nothing, or after a failed claim).
                _ => continue,
            };
            if stop.is_cancelled() {
                // Stopped while this claim ran (a pause): what it took goes back, ready for
                // whoever delivers next, without a failure.
                self.give_back(&destination.queue, &messages).await;
                break;
            }
            let mut first = Some(first);
            for message in messages {
                // Only this loop takes slots, so the ones counted above are still free.
                let permit = match first.take() {
                    Some(permit) => permit,
                    None => match slots.clone().try_acquire_owned() {
                        Ok(permit) => permit,
                        Err(_) => slots.clone().acquire_owned().await.expect("never closed"),
                    },
                };
                let dispatcher = self.clone();
                let destination = destination.clone();
                tokio::spawn(async move {
                    dispatcher.deliver(&destination, message).await;
                    drop(permit);
                });
            }
        }
    }

    /// Releases claimed messages that will not be delivered (`Ops::extend` to 0).
    async fn give_back(&self, queue: &str, messages: &[ClaimedMessage]) {
        for message in messages {
            let receipt = message.receipt.to_string();
            if let Err(error) = self.ops.extend(queue.to_owned(), &receipt, 0).await {
                // Its lease runs out instead, and it is delivered again then.
                tracing::warn!(%queue, %error, "a claimed message was not given back");
            }
        }
    }

    /// One request to the destination, and the ack or nack that follows from its answer.
    async fn deliver(&self, destination: &Destination, message: ClaimedMessage) {
        self.delivering.fetch_add(1, Ordering::SeqCst);
        self.deliver_one(destination, message).await;
        self.delivering.fetch_sub(1, Ordering::SeqCst);
    }
}
