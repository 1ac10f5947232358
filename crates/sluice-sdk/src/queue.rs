//! [`Queue`]: a typed handle on one queue, for producers and operators.

use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::Result;
use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Enqueued, MessageInfo, MessageRef, Outgoing,
    QueueOptions, QueueStats,
};

/// A queue of events of type `T`, on some [`Backend`]. Cheap to clone.
pub struct Queue<T> {
    backend: Arc<dyn Backend>,
    name: Arc<str>,
    _event: PhantomData<fn() -> T>,
}

impl<T> Clone for Queue<T> {
    fn clone(&self) -> Self {
        Self {
            backend: self.backend.clone(),
            name: self.name.clone(),
            _event: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue").field("name", &self.name).finish()
    }
}

/// One event with its options, for [`Queue::enqueue_many`].
#[derive(Debug, Clone)]
pub struct Envelope<T> {
    /// The event.
    pub event: T,
    /// Idempotency id.
    pub id: Option<String>,
    /// Ordering key.
    pub key: Option<String>,
    /// Higher first.
    pub priority: i32,
    /// Invisible for this long.
    pub delay: Option<Duration>,
}

impl<T> Envelope<T> {
    /// An event with no options.
    pub fn new(event: T) -> Self {
        Self {
            event,
            id: None,
            key: None,
            priority: 0,
            delay: None,
        }
    }

    /// Sets the idempotency id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Sets the ordering key.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

/// What [`Queue::enqueue_many`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnqueuedMany {
    /// New messages stored.
    pub enqueued: usize,
    /// Ids seen before within the dedup window: nothing stored for them.
    pub duplicates: usize,
    /// One result per event, in order.
    pub results: Vec<Enqueued>,
}

/// An enqueue being built: set options, then `.await` it.
#[must_use = "an enqueue does nothing until awaited"]
pub struct Enqueue<'a, T> {
    queue: &'a Queue<T>,
    body: serde_json::Result<Vec<u8>>,
    message: Outgoing,
}

impl<T> Enqueue<'_, T> {
    /// Idempotency id: enqueueing the same id again within the queue's dedup window stores
    /// nothing and answers `created: false` with the first message's id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.message.id = Some(id.into());
        self
    }

    /// Ordering key: in a `per_key` queue, messages of one key are delivered one at a time, in
    /// order.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.message.key = Some(key.into());
        self
    }

    /// Priority: higher first (default 0).
    pub fn priority(mut self, priority: i32) -> Self {
        self.message.priority = priority;
        self
    }

    /// Invisible for this long before its first delivery.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.message.delay = Some(delay);
        self
    }
}

impl<'a, T: Send + Sync + 'static> IntoFuture for Enqueue<'a, T> {
    type Output = Result<Enqueued>;
    type IntoFuture = Pin<Box<dyn Future<Output = Result<Enqueued>> + Send + 'a>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let mut message = self.message;
            message.body = self.body?;
            let mut results = self
                .queue
                .backend
                .enqueue(&self.queue.name, vec![message])
                .await?;
            results
                .pop()
                .ok_or_else(|| crate::Error::Unavailable("no result for the enqueue".into()))
        })
    }
}

impl<T: Serialize + DeserializeOwned + Send + Sync + 'static> Queue<T> {
    /// A handle on the queue `name`, which must exist.
    pub fn new(backend: Arc<dyn Backend>, name: &str) -> Self {
        Self {
            backend,
            name: Arc::from(name),
            _event: PhantomData,
        }
    }

    /// A handle on the queue `name`, created with default settings if it does not exist.
    pub async fn open(backend: Arc<dyn Backend>, name: &str) -> Result<Self> {
        backend.ensure_queue(name).await?;
        Ok(Self::new(backend, name))
    }

    /// A handle on the queue `name`, created with `options` if it does not exist (an existing
    /// queue keeps its settings). Options the backend cannot keep fail with
    /// [`crate::Error::Unsupported`].
    pub async fn open_with(
        backend: Arc<dyn Backend>,
        name: &str,
        options: &QueueOptions,
    ) -> Result<Self> {
        backend.ensure_queue_with(name, options).await?;
        Ok(Self::new(backend, name))
    }

    /// What the backend can do.
    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// The queue's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The backend it lives on.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Enqueues one event; set options on the returned builder, then `.await` it. Resolves once
    /// the message is stored durably.
    pub fn enqueue(&self, event: &T) -> Enqueue<'_, T> {
        Enqueue {
            queue: self,
            body: serde_json::to_vec(event),
            message: Outgoing::default(),
        }
    }

    /// Enqueues many events, in batches; one result per event, in order.
    pub async fn enqueue_many(
        &self,
        events: impl IntoIterator<Item = Envelope<T>>,
    ) -> Result<EnqueuedMany> {
        let messages = events
            .into_iter()
            .map(|envelope| {
                Ok(Outgoing {
                    body: serde_json::to_vec(&envelope.event)?,
                    id: envelope.id,
                    key: envelope.key,
                    priority: envelope.priority,
                    delay: envelope.delay,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let results = self.backend.enqueue(&self.name, messages).await?;
        let enqueued = results.iter().filter(|r| r.created).count();
        Ok(EnqueuedMany {
            enqueued,
            duplicates: results.len() - enqueued,
            results,
        })
    }

    /// Ready, delayed, in flight, processed (acked), dead-lettered, paused.
    pub async fn stats(&self) -> Result<QueueStats> {
        self.backend.stats(&self.name).await
    }

    /// The earlier name of [`Queue::stats`].
    #[deprecated(note = "use `stats`")]
    pub async fn status(&self) -> Result<QueueStats> {
        self.stats().await
    }

    /// Stops deliveries; enqueues are still stored.
    pub async fn pause(&self) -> Result<()> {
        self.backend.set_paused(&self.name, true).await
    }

    /// Starts deliveries again.
    pub async fn resume(&self) -> Result<()> {
        self.backend.set_paused(&self.name, false).await
    }

    /// Cancels a message that is not being processed, by message id or idempotency id.
    pub async fn cancel(&self, message: impl Into<MessageRef>) -> Result<CancelOutcome> {
        self.backend.cancel(&self.name, message.into()).await
    }

    /// Waits until the queue holds no ready, delayed or in-flight message, or `timeout`; true
    /// when it emptied.
    pub async fn drain(&self, timeout: Duration) -> Result<bool> {
        self.backend.drain(&self.name, timeout).await
    }

    /// Up to `max` dead letters of this queue, oldest failure first, left where they are.
    pub async fn dead_letters(&self, max: usize) -> Result<Vec<DeadLetter>> {
        self.backend.dead_letters(&self.name, max).await
    }

    /// Where a message is now.
    pub async fn get(&self, message: impl Into<MessageRef>) -> Result<Option<MessageInfo>> {
        self.backend.get(&self.name, message.into()).await
    }
}

impl From<Uuid> for MessageRef {
    fn from(id: Uuid) -> Self {
        MessageRef::Id(id)
    }
}

impl From<&str> for MessageRef {
    /// An idempotency id.
    fn from(id: &str) -> Self {
        MessageRef::IdempotencyId(id.to_owned())
    }
}
