//! [`Worker`]: runs a handler over a queue's events with a fixed concurrency.
//!
//! Each of the `concurrency` slots leases one message at a time, decodes it, and runs the
//! handler while a heartbeat keeps the lease. Success acks; failure is retried with the
//! worker's [`RetryPolicy`] (a backoff per attempt) or dead-lettered when the error is not
//! retryable or the attempts are used up, and then `on_dead_letter` runs. A body that does not
//! decode into the event type is dead-lettered with the decode error. On shutdown (SIGTERM,
//! ctrl-c, or the future given to [`Worker::run_until`]) slots stop leasing, running handlers get
//! a grace period, and whatever is still running after it is released back to the queue.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::backend::{Delivery, Nack, NackOutcome, NextStep, Outgoing};
use crate::{Error, ErrorCode, Queue, Result};

mod handle;
mod retry;

pub use handle::{SlotState, WorkerHandle, WorkerStatus};
pub use retry::{Backoff, RetryPolicy};

/// An error returned by a handler.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a stopping worker waits for acks and nacks already on their way.
const SETTLE_WAIT: Duration = Duration::from_secs(10);
type DeadLetterHook<T> = Arc<dyn Fn(T, String, DeadLetterContext) -> BoxFuture + Send + Sync>;
type EmptyHook = Arc<dyn Fn(EmptyContext) -> BoxFuture + Send + Sync>;

/// What a handler gets with each event.
#[derive(Debug, Clone)]
pub struct Context<T> {
    /// The decoded event.
    pub event: T,
    /// The message.
    pub message_id: Uuid,
    /// Its idempotency id, if it was enqueued with one.
    pub idempotency_id: Option<String>,
    /// This delivery's number, from 1.
    pub attempt: u32,
    /// When it was enqueued.
    pub enqueued_at: SystemTime,
    /// When this attempt started.
    pub processing_started_at: SystemTime,
    /// Which slot runs it, `0..concurrency` (the instance index of the TypeScript design).
    pub slot: usize,
    /// Events this worker instance finished (acked) before this one: exact, counted in the
    /// process.
    pub processed_count: u64,
    /// Other events this worker instance holds leased right now (running in other slots, or
    /// being acked or nacked): exact, counted in the process. Together with `processed_count`
    /// it is this instance's share of the queue; [`Context::queue_pending`] is the queue's.
    pub pending_count: u64,
    /// Messages waiting in the queue (ready or delayed), as the worker last saw them (it looks
    /// every 500 ms): an estimate for progress, not a count to rely on.
    pub queue_pending: u64,
    /// Next steps added with [`Context::add_next_step`], enqueued with the ack.
    next_steps: NextSteps,
}

/// The next steps a handler adds to its message, shared by the clones of its [`Context`].
#[derive(Debug, Clone, Default)]
struct NextSteps {
    steps: Arc<std::sync::Mutex<Vec<NextStep>>>,
    /// Whether the backend can enqueue them in the ack's commit ([`Capabilities::chaining`]).
    supported: bool,
}

impl<T> Context<T> {
    /// Adds a next step: `event` goes to `queue` in the same commit as this message's ack, so
    /// it is stored exactly when the message is done (never lost to a crash between the two,
    /// never stored twice because the message ran again). Nothing is enqueued when the handler
    /// fails. Fails with [`Error::Unsupported`] on a backend without
    /// [`Capabilities::chaining`] (SQS, RabbitMQ), or when the event does not serialize.
    pub fn add_next_step<E>(&self, queue: &Queue<E>, event: &E) -> Result<()>
    where
        E: Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        self.then_message(queue.name(), event, None)
    }

    /// [`Context::add_next_step`] with an idempotency id for the next step: the same id within its
    /// queue's dedup window is stored once.
    pub fn add_next_step_with_id<E>(
        &self,
        queue: &Queue<E>,
        event: &E,
        id: impl Into<String>,
    ) -> Result<()>
    where
        E: Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        self.then_message(queue.name(), event, Some(id.into()))
    }

    fn then_message<E: Serialize>(&self, queue: &str, event: &E, id: Option<String>) -> Result<()> {
        if !self.next_steps.supported {
            return Err(Error::Unsupported(
                "next steps (Context::add_next_step): this backend cannot enqueue them in the ack's commit"
                    .into(),
            ));
        }
        let message = Outgoing {
            body: serde_json::to_vec(event)?,
            id,
            ..Outgoing::default()
        };
        self.next_steps
            .steps
            .lock()
            .expect("next steps")
            .push(NextStep {
                queue: queue.to_owned(),
                message,
            });
        Ok(())
    }
}

/// What `on_dead_letter` gets besides the event and the error.
#[derive(Debug, Clone)]
pub struct DeadLetterContext {
    /// The message.
    pub message_id: Uuid,
    /// Its idempotency id.
    pub idempotency_id: Option<String>,
    /// The attempt that failed last.
    pub attempt: u32,
    /// The slot that ran it.
    pub slot: usize,
    /// When it was enqueued.
    pub enqueued_at: SystemTime,
    /// When it was dead-lettered (by the backend's clock).
    pub failed_at: SystemTime,
}

/// What `on_empty` gets.
#[derive(Debug, Clone, Copy)]
pub struct EmptyContext {
    /// Events this worker finished so far.
    pub processed: u64,
}

/// What a finished run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Events acked.
    pub processed: u64,
    /// Failed attempts that will be retried.
    pub retried: u64,
    /// Events sent to the dead-letter queue.
    pub dead_lettered: u64,
    /// Events still running at the end of the grace period, put back in the queue.
    pub released: u64,
}

/// State shared by the slots.
struct Shared {
    stopping: AtomicBool,
    stop: Notify,
    processed: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    released: AtomicU64,
    pending: AtomicU64,
    /// Messages leased and not yet acked or nacked.
    unsettled: AtomicU64,
    /// Acks and nacks on their way (they outlive an aborted slot).
    settling: AtomicU64,
    /// Set after each finished event: the next empty lease checks whether the queue emptied.
    empty_armed: AtomicBool,
    slots: Mutex<Vec<SlotState>>,
    /// This instance stops leasing ([`WorkerHandle::pause`]); the queue is not paused.
    paused: AtomicBool,
    /// Wakes paused slots on resume.
    resumed: Notify,
    /// What this instance holds leased, by message id: the slot that leased it.
    leased: std::sync::Mutex<BTreeMap<Uuid, usize>>,
}

impl Shared {
    fn hold(&self, message_id: Uuid, slot: usize) {
        self.leased.lock().expect("leased").insert(message_id, slot);
    }

    fn release_hold(&self, message_id: &Uuid) {
        self.leased.lock().expect("leased").remove(message_id);
    }

    fn held(&self) -> usize {
        self.leased.lock().expect("leased").len()
    }
}

/// Runs a handler over a queue's events.
pub struct Worker<T> {
    queue: Queue<T>,
    concurrency: usize,
    retry: RetryPolicy,
    visibility_timeout: Duration,
    poll_wait: Duration,
    grace: Duration,
    on_dead_letter: Option<DeadLetterHook<T>>,
    on_empty: Option<EmptyHook>,
    shared: Arc<Shared>,
}

impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> Worker<T> {
    /// A worker running at most `concurrency` handlers at once (there is no default: pick what
    /// the work and its downstream can take). `concurrency` 0 is refused when it runs.
    pub fn new(queue: Queue<T>, concurrency: usize) -> Self {
        let slots = (0..concurrency)
            .map(|slot| SlotState {
                slot,
                ..SlotState::default()
            })
            .collect();
        Self {
            queue,
            concurrency,
            retry: RetryPolicy::default(),
            visibility_timeout: Duration::from_secs(30),
            poll_wait: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            on_dead_letter: None,
            on_empty: None,
            shared: Arc::new(Shared {
                stopping: AtomicBool::new(false),
                stop: Notify::new(),
                processed: AtomicU64::new(0),
                retried: AtomicU64::new(0),
                dead_lettered: AtomicU64::new(0),
                released: AtomicU64::new(0),
                pending: AtomicU64::new(0),
                unsettled: AtomicU64::new(0),
                settling: AtomicU64::new(0),
                empty_armed: AtomicBool::new(false),
                slots: Mutex::new(slots),
                paused: AtomicBool::new(false),
                resumed: Notify::new(),
                leased: std::sync::Mutex::default(),
            }),
        }
    }

    /// How failures are retried (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The visibility timeout of each message received: how long its lease lasts (default
    /// 30 s, at least 30 ms); a heartbeat renews the lease every third of that while the
    /// handler runs, so a slow handler keeps its message.
    pub fn visibility_timeout(mut self, timeout: Duration) -> Self {
        self.visibility_timeout = timeout.max(Duration::from_millis(30));
        self
    }

    /// The earlier name of [`Worker::visibility_timeout`].
    #[deprecated(note = "use `visibility_timeout`")]
    pub fn lease(self, lease: Duration) -> Self {
        self.visibility_timeout(lease)
    }

    /// How long running handlers may take to finish after shutdown starts (default 30 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// How long an idle slot waits in one long poll (default 1 s); it also bounds how long
    /// shutdown waits for idle slots.
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait;
        self
    }

    /// Runs after an event went to the dead-letter queue, with the event and the last error.
    /// (A body that does not decode into the event type is dead-lettered without it: there is
    /// no event to hand over.)
    pub fn on_dead_letter<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(T, String, DeadLetterContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_dead_letter = Some(Arc::new(move |event, error, ctx| {
            Box::pin(hook(event, error, ctx))
        }));
        self
    }

    /// Runs when the queue has emptied after the worker processed events.
    pub fn on_empty<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(EmptyContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.on_empty = Some(Arc::new(move |ctx| Box::pin(hook(ctx))));
        self
    }

    /// A handle to watch the worker's slots or stop it.
    pub fn handle(&self) -> WorkerHandle {
        WorkerHandle {
            shared: self.shared.clone(),
            queue: self.queue.backend().clone(),
            name: Arc::from(self.queue.name()),
        }
    }

    /// Runs until SIGTERM or ctrl-c.
    pub async fn run<H, Fut>(self, handler: H) -> Result<WorkerReport>
    where
        H: Fn(Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
    {
        self.run_until(handler, shutdown_signal()).await
    }

    /// Runs until `shutdown` completes (or [`WorkerHandle::shutdown`] is called).
    pub async fn run_until<H, Fut, S>(self, handler: H, shutdown: S) -> Result<WorkerReport>
    where
        H: Fn(Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
        S: Future<Output = ()> + Send,
    {
        if self.concurrency == 0 {
            return Err(Error::Invalid {
                code: ErrorCode::InvalidField.into(),
                message: "concurrency must be at least 1".into(),
            });
        }
        let worker = Arc::new(self);
        let handler = Arc::new(handler);
        let mut slots = JoinSet::new();
        for slot in 0..worker.concurrency {
            slots.spawn(worker.clone().slot(slot, handler.clone()));
        }
        let pending = tokio::spawn(worker.clone().watch_pending());
        let shared = worker.shared.clone();
        tokio::select! {
            _ = shutdown => {}
            _ = stop_requested(&shared) => {}
            _ = async { while slots.join_next().await.is_some() {} } => {}
        }
        shared.stopping.store(true, Ordering::SeqCst);
        shared.stop.notify_waiters();
        // Running handlers get the grace period; slots still busy after it are aborted and
        // their messages released.
        let graceful = tokio::time::timeout(worker.grace, async {
            while slots.join_next().await.is_some() {}
        })
        .await;
        if graceful.is_err() {
            slots.shutdown().await;
        }
        // Acks and nacks already sent finish (bounded), so the report counts them.
        let settled = tokio::time::timeout(SETTLE_WAIT, async {
            while shared.settling.load(Ordering::SeqCst) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        if settled.is_err() {
            tracing::warn!("some acks or nacks did not finish before the worker stopped");
        }
        pending.abort();
        Ok(WorkerReport {
            processed: shared.processed.load(Ordering::SeqCst),
            retried: shared.retried.load(Ordering::SeqCst),
            dead_lettered: shared.dead_lettered.load(Ordering::SeqCst),
            released: shared.released.load(Ordering::SeqCst),
        })
    }

    /// Keeps `pending` roughly current for the handlers' context.
    async fn watch_pending(self: Arc<Self>) {
        loop {
            if let Ok(stats) = self.queue.stats().await {
                self.shared
                    .pending
                    .store(stats.ready + stats.delayed, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn slot<H, Fut>(self: Arc<Self>, slot: usize, handler: Arc<H>)
    where
        H: Fn(Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
    {
        let backend = self.queue.backend().clone();
        let name = self.queue.name().to_owned();
        while !self.shared.stopping.load(Ordering::SeqCst) {
            if self.shared.paused.load(Ordering::SeqCst) {
                handle::wait_resumed(&self.shared).await;
                continue;
            }
            let received = backend
                .receive(&name, 1, self.visibility_timeout, self.poll_wait)
                .await;
            let deliveries = match received {
                Ok(deliveries) => deliveries,
                Err(error) => {
                    tracing::warn!(queue = %name, %error, "receive failed; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            if deliveries.is_empty() {
                self.maybe_empty().await;
                continue;
            }
            self.shared
                .unsettled
                .fetch_add(deliveries.len() as u64, Ordering::SeqCst);
            for delivery in &deliveries {
                self.shared.hold(delivery.message_id, slot);
            }
            for delivery in deliveries {
                // Released on drop if the slot is aborted after the grace period.
                let guard = Release {
                    backend: backend.clone(),
                    queue: name.clone(),
                    receipt: Some(delivery.receipt.clone()),
                    message_id: delivery.message_id,
                    shared: self.shared.clone(),
                };
                self.clone()
                    .process(slot, delivery, handler.as_ref(), guard)
                    .await;
            }
        }
    }

    async fn maybe_empty(&self) {
        let Some(hook) = &self.on_empty else {
            return;
        };
        // Only once every leased message is settled and counted, so the hook sees final counts.
        if self.shared.unsettled.load(Ordering::SeqCst) > 0
            || !self.shared.empty_armed.swap(false, Ordering::SeqCst)
        {
            return;
        }
        match self.queue.stats().await {
            Ok(stats) if stats.outstanding() == 0 => {
                hook(EmptyContext {
                    processed: self.shared.processed.load(Ordering::SeqCst),
                })
                .await;
            }
            // Not empty yet (another slot is still busy): look again at the next empty lease.
            _ => self.shared.empty_armed.store(true, Ordering::SeqCst),
        }
    }

    async fn process<H, Fut>(
        self: Arc<Self>,
        slot: usize,
        delivery: Delivery,
        handler: &H,
        mut guard: Release,
    ) where
        H: Fn(Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), BoxError>> + Send + 'static,
    {
        let backend = self.queue.backend().clone();
        let name = self.queue.name();
        let event: T = match serde_json::from_slice(&delivery.body) {
            Ok(event) => event,
            Err(error) => {
                let nack = Nack {
                    error: format!("cannot decode the event: {error}"),
                    delay: None,
                    permanent: true,
                };
                guard.receipt = None;
                if let Err(error) = backend.nack(name, &delivery.receipt, nack).await {
                    tracing::warn!(queue = %name, %error, "nack of an undecodable event failed");
                }
                self.shared.dead_lettered.fetch_add(1, Ordering::SeqCst);
                self.shared.release_hold(&delivery.message_id);
                self.shared.empty_armed.store(true, Ordering::SeqCst);
                self.shared.unsettled.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        };
        let processing_started_at = backend.now();
        self.set_current(
            slot,
            Some((delivery.message_id, delivery.attempt, processing_started_at)),
        )
        .await;
        let ctx = Context {
            event,
            message_id: delivery.message_id,
            idempotency_id: delivery.id.clone(),
            attempt: delivery.attempt,
            enqueued_at: delivery.enqueued_at,
            processing_started_at,
            slot,
            processed_count: self.shared.processed.load(Ordering::SeqCst),
            pending_count: (self.shared.held() as u64).saturating_sub(1),
            queue_pending: self.shared.pending.load(Ordering::Relaxed),
            next_steps: NextSteps {
                steps: Arc::default(),
                supported: backend.capabilities().chaining,
            },
        };
        let next_steps = ctx.next_steps.steps.clone();
        // The heartbeat keeps the lease while the handler runs, where leases can be extended
        // (elsewhere, RabbitMQ, a delivery is held until it is settled).
        let extends = backend.capabilities().extend;
        let heartbeat = tokio::spawn({
            let backend = backend.clone();
            let name = name.to_owned();
            let receipt = delivery.receipt.clone();
            let lease = self.visibility_timeout;
            async move {
                if !extends {
                    return;
                }
                loop {
                    tokio::time::sleep(lease / 3).await;
                    if let Err(error) = backend.extend(&name, &receipt, lease).await {
                        tracing::warn!(queue = %name, %error, "lease extension failed");
                        return;
                    }
                }
            }
        });
        let _heartbeat = AbortOnDrop(heartbeat.abort_handle());
        // A panicking handler is a failed attempt, not a dead slot. If the slot is aborted at
        // the end of the grace period, the handler is aborted with it.
        let task = tokio::spawn(handler(ctx));
        let _handler = AbortOnDrop(task.abort_handle());
        let outcome = task.await;
        heartbeat.abort();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(join) => Err(format!("the handler panicked: {join}").into()),
        };
        // From here the message is settled by a task of its own, which the end of the grace
        // period does not abort: an ack or nack on its way always lands and is counted.
        guard.receipt = None;
        let worker = self.clone();
        self.shared.settling.fetch_add(1, Ordering::SeqCst);
        let settle = tokio::spawn(async move {
            let backend = worker.queue.backend();
            let name = worker.queue.name();
            let then = std::mem::take(&mut *next_steps.lock().expect("next steps"));
            match outcome {
                Ok(()) => match backend.ack_then(name, &delivery.receipt, then).await {
                    Ok(()) => {
                        worker.shared.processed.fetch_add(1, Ordering::SeqCst);
                        worker.count_slot(slot).await;
                    }
                    Err(error) => {
                        tracing::warn!(queue = %name, %error, "ack failed; the message will come back")
                    }
                },
                Err(error) => worker.fail(slot, &delivery, error).await,
            }
            worker.set_current(slot, None).await;
            worker.shared.release_hold(&delivery.message_id);
            worker.shared.empty_armed.store(true, Ordering::SeqCst);
            worker.shared.unsettled.fetch_sub(1, Ordering::SeqCst);
            worker.shared.settling.fetch_sub(1, Ordering::SeqCst);
        });
        let _ = settle.await;
    }

    async fn fail(&self, slot: usize, delivery: &Delivery, error: BoxError) {
        let backend = self.queue.backend();
        let name = self.queue.name();
        let decision = self.retry.decide(delivery.attempt, &error);
        let text = error.to_string();
        let delay = Some(decision.delay);
        let nack = Nack {
            error: text.clone(),
            delay,
            permanent: decision.dead_letter,
        };
        let mut nacked = backend.nack(name, &delivery.receipt, nack).await;
        if let Err(Error::Invalid { message, .. }) = &nacked {
            // A queue without a dead-letter queue keeps every message: retry instead.
            tracing::warn!(queue = %name, %message, "cannot dead-letter; the message will be retried");
            let retry = Nack {
                error: text.clone(),
                delay,
                permanent: false,
            };
            nacked = backend.nack(name, &delivery.receipt, retry).await;
        }
        match nacked {
            Ok(NackOutcome::Retried) => {
                self.shared.retried.fetch_add(1, Ordering::SeqCst);
            }
            Ok(NackOutcome::DeadLettered) => {
                let failed_at = backend.now();
                self.shared.dead_lettered.fetch_add(1, Ordering::SeqCst);
                if let Some(hook) = &self.on_dead_letter
                    && let Ok(event) = serde_json::from_slice::<T>(&delivery.body)
                {
                    hook(
                        event,
                        text,
                        DeadLetterContext {
                            message_id: delivery.message_id,
                            idempotency_id: delivery.id.clone(),
                            attempt: delivery.attempt,
                            slot,
                            enqueued_at: delivery.enqueued_at,
                            failed_at,
                        },
                    )
                    .await;
                }
            }
            Err(error) => {
                tracing::warn!(queue = %name, %error, "nack failed; the lease will run out and the message comes back")
            }
        }
    }

    /// What `slot` runs now: (message, attempt, since), or nothing.
    async fn set_current(&self, slot: usize, current: Option<(Uuid, u32, SystemTime)>) {
        if let Some(state) = self.shared.slots.lock().await.get_mut(slot) {
            state.current = current.map(|c| c.0);
            state.attempt = current.map(|c| c.1);
            state.since = current.map(|c| c.2);
        }
    }

    async fn count_slot(&self, slot: usize) {
        if let Some(state) = self.shared.slots.lock().await.get_mut(slot) {
            state.processed += 1;
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Completes once [`WorkerHandle::shutdown`] was called (before or after this started).
async fn stop_requested(shared: &Shared) {
    loop {
        let notified = shared.stop.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        notified.await;
    }
}

/// Puts a message back in the queue if its slot is aborted before settling it.
struct Release {
    backend: Arc<dyn crate::Backend>,
    queue: String,
    receipt: Option<String>,
    message_id: Uuid,
    shared: Arc<Shared>,
}

impl Drop for Release {
    fn drop(&mut self) {
        let Some(receipt) = self.receipt.take() else {
            return;
        };
        self.shared.released.fetch_add(1, Ordering::SeqCst);
        self.shared.release_hold(&self.message_id);
        let backend = self.backend.clone();
        let queue = std::mem::take(&mut self.queue);
        // Visible again at once, and not a failure: the handler did not fail, the worker
        // stopped. The delivery still counts in the message's attempts.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = backend.release(&queue, &receipt).await {
                    tracing::warn!(%queue, %error, "release failed; the lease will run out instead");
                }
            });
        }
    }
}

/// Completes on SIGTERM or ctrl-c.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
