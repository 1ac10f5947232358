//! [`Amqp`]: RabbitMQ (AMQP 0.9.1) as a backend, over `lapin`.
//!
//! The topology of a queue `q` (all durable; created by [`Backend::ensure_queue_with`]):
//!
//! | queue | holds |
//! |---|---|
//! | `q` | messages ready for delivery |
//! | `q.retry.<ms>` | retries waiting for their delay, each with a per-message TTL (`expiration`); when it runs out RabbitMQ dead-letters the message back to `q` through the default exchange (`x-dead-letter-exchange: ""`, `x-dead-letter-routing-key: q`) |
//! | `q.dlq` | dead letters, with their error, attempts and failure time in headers |
//!
//! RabbitMQ expires messages only at the head of a queue, so a short delay must not wait
//! behind a long one: retry queues come in buckets of doubling delays (1 s, 2 s, 4 s, ... 4096
//! s) and a retry goes to the smallest bucket that holds its delay. A retry therefore comes
//! back after its delay and at most about that long again later; delays past the last bucket
//! share it.
//!
//! Attempts are counted in the `x-sluice-attempts` header (failed deliveries so far): a nack
//! publishes a copy with the count raised (to a retry queue, back to `q` when there is no
//! delay, or to `q.dlq` when the attempts are used up or the failure is permanent), waits for
//! the broker's confirm, then acks the delivery. A message whose channel closed before it was
//! settled is redelivered by RabbitMQ with the `redelivered` flag, which counts as one more
//! attempt. Messages are received by `basic.get`.
//!
//! What AMQP cannot do is refused with [`Error::Unsupported`] (see [`Amqp::CAPABILITIES`]): a
//! lease has no deadline (a leased message comes back only when the backend's connection
//! closes, or when the broker's consumer timeout closes its channel), so it cannot be extended,
//! and a lease longer than that timeout is refused; there is no pause, cancel, lookup, per-key
//! order (a `per_key` queue is refused), deduplication (a `dedup` queue and an enqueue with an
//! idempotency id are refused: an id is never silently ignored), delayed
//! enqueue or priority, and messages in flight are not counted (so `drain` is refused too).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use uuid::Uuid;

use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, Outgoing, QueueOptions, QueueStats,
};
use crate::{Error, ErrorCode, Result};

/// `max_attempts` when neither the queue options nor the message name one (sluice's default).
const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// RabbitMQ's default `consumer_timeout`: an unacked delivery older than this closes its
/// channel.
const DEFAULT_CONSUMER_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// The longest a single broker round trip may take before the backend gives up on it.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How often an empty queue is asked again while a lease waits (`basic.get` cannot wait).
const POLL_INTERVAL: Duration = Duration::from_millis(50);
/// The retry buckets: a queue per delay of 1 s · 2^k.
const BUCKETS: u32 = 13;

/// Headers the backend writes and reads.
mod header {
    /// Failed deliveries so far.
    pub const ATTEMPTS: &str = "x-sluice-attempts";
    /// The queue's `max_attempts` when the message was enqueued.
    pub const MAX_ATTEMPTS: &str = "x-sluice-max-attempts";
    /// Enqueue time, ms since the epoch.
    pub const ENQUEUED_AT: &str = "x-sluice-enqueued-at-ms";
    /// The idempotency id (carried; RabbitMQ does not deduplicate).
    pub const ID: &str = "x-sluice-id";
    /// The ordering key (carried; a classic queue does not order by it).
    pub const KEY: &str = "x-sluice-key";
    /// The error of the last failed attempt.
    pub const LAST_ERROR: &str = "x-sluice-last-error";
    /// On a dead letter: when it was dead-lettered, ms since the epoch.
    pub const FAILED_AT: &str = "x-sluice-failed-at-ms";
}

/// RabbitMQ, over one connection.
pub struct Amqp {
    uri: String,
    consumer_timeout: Duration,
    channels: tokio::sync::Mutex<Option<Channels>>,
    /// Deliveries leased on the current get channel and not settled yet, by delivery tag.
    held: Mutex<Held>,
    /// Queues known to exist, with their `max_attempts` when this value created them.
    queues: Mutex<HashMap<String, Option<u32>>>,
    /// Retry buckets declared by this value.
    buckets: Mutex<HashSet<String>>,
    /// Acks made through this value, per queue.
    processed: Mutex<HashMap<String, u64>>,
}

impl std::fmt::Debug for Amqp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Amqp")
            .field("consumer_timeout", &self.consumer_timeout)
            .finish_non_exhaustive()
    }
}

/// The connection and its channels: one that publishes (in confirm mode), one that receives
/// and settles (its deliveries live as long as it does), one for declarations (a failed
/// declaration closes its channel, which must not take deliveries with it).
#[derive(Clone)]
struct Channels {
    connection: std::sync::Arc<Connection>,
    publish: Channel,
    get: Channel,
    admin: Channel,
    /// Which get channel this is: receipts name it, so one from a closed channel is stale.
    epoch: u64,
}

#[derive(Default)]
struct Held {
    epoch: u64,
    deliveries: HashMap<u64, HeldDelivery>,
}

/// What a nack needs to publish the copy.
struct HeldDelivery {
    queue: String,
    delivery: Delivery,
    headers: FieldTable,
    max_attempts: u32,
}

impl Amqp {
    /// What RabbitMQ can do through this backend.
    pub const CAPABILITIES: Capabilities = Capabilities {
        extend: false,
        lease_expiry: false,
        pause: false,
        cancel: false,
        lookup: false,
        per_key_order: false,
        dedup: false,
        delays: false,
        priority: false,
        in_flight_stats: false,
        chaining: false,
    };

    /// Connects to `uri` (e.g. `amqp://guest:guest@127.0.0.1:5672/%2f`).
    pub async fn connect(uri: &str) -> Result<Self> {
        let amqp = Self {
            uri: uri.to_owned(),
            consumer_timeout: DEFAULT_CONSUMER_TIMEOUT,
            channels: tokio::sync::Mutex::new(None),
            held: Mutex::default(),
            queues: Mutex::default(),
            buckets: Mutex::default(),
            processed: Mutex::default(),
        };
        amqp.channels().await?;
        Ok(amqp)
    }

    /// The broker's `consumer_timeout` (default 30 minutes, RabbitMQ's default): leases longer
    /// than this are refused, because the broker would take the message back before.
    pub fn consumer_timeout(mut self, timeout: Duration) -> Self {
        self.consumer_timeout = timeout;
        self
    }

    /// Deletes the queue, its retry queues and its dead-letter queue, with their messages.
    pub async fn delete_queue(&self, queue: &str) -> Result<()> {
        let channels = self.channels().await?;
        let mut names = vec![queue.to_owned(), dead_letter_queue(queue)];
        names.extend((0..BUCKETS).map(|k| bucket_queue(queue, bucket_ms(k))));
        for name in names {
            call(
                "queue.delete",
                channels
                    .admin
                    .queue_delete(name.as_str().into(), QueueDeleteOptions::default()),
            )
            .await?;
        }
        self.queues.lock().expect("queues").remove(queue);
        self.buckets
            .lock()
            .expect("buckets")
            .retain(|name| !name.starts_with(&format!("{queue}.retry.")));
        Ok(())
    }

    /// The live channels, reopened (with a new connection if need be) when one has closed.
    async fn channels(&self) -> Result<Channels> {
        let mut guard = self.channels.lock().await;
        if let Some(channels) = guard.as_mut() {
            let connected = channels.connection.status().connected();
            if connected
                && channels.publish.status().connected()
                && channels.get.status().connected()
                && channels.admin.status().connected()
            {
                return Ok(channels.clone());
            }
            if connected {
                // Reopen only what closed: the get channel's deliveries survive an admin error.
                if !channels.admin.status().connected() {
                    channels.admin = open(&channels.connection).await?;
                }
                if !channels.publish.status().connected() {
                    channels.publish = open_confirming(&channels.connection).await?;
                }
                if !channels.get.status().connected() {
                    channels.get = open(&channels.connection).await?;
                    channels.epoch += 1;
                }
                self.forget_held_before(channels.epoch);
                return Ok(channels.clone());
            }
        }
        let epoch = guard.as_ref().map_or(0, |c| c.epoch + 1);
        let connection = call(
            "connect",
            Connection::connect(&self.uri, ConnectionProperties::default()),
        )
        .await?;
        let connection = std::sync::Arc::new(connection);
        let channels = Channels {
            publish: open_confirming(&connection).await?,
            get: open(&connection).await?,
            admin: open(&connection).await?,
            connection,
            epoch,
        };
        self.forget_held_before(epoch);
        *guard = Some(channels.clone());
        Ok(channels)
    }

    fn forget_held_before(&self, epoch: u64) {
        let mut held = self.held.lock().expect("held");
        if held.epoch != epoch {
            held.epoch = epoch;
            held.deliveries.clear();
        }
    }

    /// Makes sure `queue` exists before a `basic.get` on the get channel: a get from a missing
    /// queue would close that channel and hand every delivery on it back to the broker.
    async fn known(&self, queue: &str) -> Result<Option<u32>> {
        if let Some(max_attempts) = self.queues.lock().expect("queues").get(queue) {
            return Ok(*max_attempts);
        }
        let channels = self.channels().await?;
        declare(&channels.admin, queue, true, FieldTable::default())
            .await
            .map_err(|error| not_found_as(error, queue))?;
        let mut queues = self.queues.lock().expect("queues");
        if queues.len() >= 1024 {
            queues.clear();
        }
        queues.insert(queue.to_owned(), None);
        Ok(None)
    }

    /// Declares the retry bucket of `delay` for `queue` (once per value); its name.
    async fn bucket(&self, channels: &Channels, queue: &str, delay: Duration) -> Result<String> {
        let name = bucket_queue(queue, bucket_ms(bucket_for(delay)));
        if self.buckets.lock().expect("buckets").contains(&name) {
            return Ok(name);
        }
        declare(&channels.admin, &name, false, retry_arguments(queue)).await?;
        let mut buckets = self.buckets.lock().expect("buckets");
        if buckets.len() >= 4096 {
            buckets.clear();
        }
        buckets.insert(name.clone());
        Ok(name)
    }

    /// Publishes to `queue` through the default exchange and waits for the broker's confirm.
    async fn publish(
        &self,
        channels: &Channels,
        queue: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<()> {
        let confirm = call(
            "basic.publish",
            channels.publish.basic_publish(
                ShortString::from(""),
                queue.into(),
                BasicPublishOptions {
                    mandatory: true,
                    immediate: false,
                },
                body,
                properties,
            ),
        )
        .await?;
        match call("publisher confirm", confirm).await? {
            Confirmation::Ack(None) => Ok(()),
            // Mandatory and unroutable: the default exchange found no queue of that name.
            Confirmation::Ack(Some(_)) => Err(Error::QueueNotFound(queue.to_owned())),
            Confirmation::Nack(_) => Err(Error::Unavailable(format!(
                "RabbitMQ refused to store a message for {queue:?}"
            ))),
            Confirmation::NotRequested => Err(Error::Unavailable(
                "the publish channel is not in confirm mode".into(),
            )),
        }
    }

    fn count_ack(&self, queue: &str) {
        let mut processed = self.processed.lock().expect("processed");
        if let Some(count) = processed.get_mut(queue) {
            *count += 1;
        } else if processed.len() < 1024 {
            processed.insert(queue.to_owned(), 1);
        }
    }

    /// The held delivery of `queue` named by `receipt`, taken out of the table, with the
    /// receipt's channel epoch; a receipt of another queue is left where it is.
    fn take_of(&self, queue: &str, receipt: &str) -> Result<(u64, u64, HeldDelivery)> {
        let (epoch, _) = parse_receipt(receipt)?;
        let (tag, held) = self.take(receipt)?;
        if held.queue != queue {
            self.put_back(receipt, held);
            return Err(stale());
        }
        Ok((epoch, tag, held))
    }

    /// The held delivery named by `receipt`, taken out of the table.
    fn take(&self, receipt: &str) -> Result<(u64, HeldDelivery)> {
        let (epoch, tag) = parse_receipt(receipt)?;
        let mut held = self.held.lock().expect("held");
        if held.epoch != epoch {
            return Err(stale());
        }
        let delivery = held.deliveries.remove(&tag).ok_or_else(stale)?;
        Ok((tag, delivery))
    }

    fn put_back(&self, receipt: &str, delivery: HeldDelivery) {
        if let Ok((epoch, tag)) = parse_receipt(receipt) {
            let mut held = self.held.lock().expect("held");
            if held.epoch == epoch {
                held.deliveries.insert(tag, delivery);
            }
        }
    }

    async fn ack_tag(&self, channels: &Channels, epoch_of_receipt: u64, tag: u64) -> Result<()> {
        if channels.epoch != epoch_of_receipt {
            return Err(stale());
        }
        call(
            "basic.ack",
            channels.get.basic_ack(tag, BasicAckOptions::default()),
        )
        .await
    }
}

#[async_trait]
impl Backend for Amqp {
    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    async fn ensure_queue_with(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        if options.per_key {
            return Err(Error::Unsupported(
                "per_key: a classic RabbitMQ queue has no ordering key".into(),
            ));
        }
        if options.dedup {
            return Err(Error::Unsupported(
                "dedup: RabbitMQ does not deduplicate".into(),
            ));
        }
        let channels = self.channels().await?;
        declare(&channels.admin, queue, false, FieldTable::default()).await?;
        declare(
            &channels.admin,
            &dead_letter_queue(queue),
            false,
            FieldTable::default(),
        )
        .await?;
        for k in 0..BUCKETS {
            self.bucket(&channels, queue, Duration::from_millis(bucket_ms(k)))
                .await?;
        }
        self.queues
            .lock()
            .expect("queues")
            .insert(queue.to_owned(), options.max_attempts);
        Ok(())
    }

    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>> {
        for message in &messages {
            if message.delay.is_some_and(|d| !d.is_zero()) {
                return Err(Error::Unsupported(
                    "delay: delayed enqueue on RabbitMQ needs a TTL queue per delay; this \
                     backend delays retries only"
                        .into(),
                ));
            }
            if message.priority != 0 {
                return Err(Error::Unsupported(
                    "priority: a classic RabbitMQ queue has no priorities".into(),
                ));
            }
            if message.id.is_some() {
                return Err(Error::Unsupported(
                    "dedup: RabbitMQ does not deduplicate, so an idempotency id would be \
                     ignored; enqueue without an id"
                        .into(),
                ));
            }
        }
        let max_attempts = self.known(queue).await?.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        let channels = self.channels().await?;
        let now = SystemTime::now();
        let mut results = Vec::with_capacity(messages.len());
        for message in messages {
            let message_id = Uuid::now_v7();
            let mut headers = FieldTable::default();
            headers.insert(header::ATTEMPTS.into(), AMQPValue::LongLongInt(0));
            headers.insert(
                header::MAX_ATTEMPTS.into(),
                AMQPValue::LongLongInt(max_attempts.into()),
            );
            headers.insert(
                header::ENQUEUED_AT.into(),
                AMQPValue::LongLongInt(millis_since_epoch(now) as i64),
            );
            if let Some(key) = &message.key {
                headers.insert(header::KEY.into(), long_string(key));
            }
            let properties = BasicProperties::default()
                .with_message_id(message_id.to_string().into())
                .with_delivery_mode(2)
                .with_content_type("application/json".into())
                .with_timestamp(millis_since_epoch(now) / 1000)
                .with_headers(headers);
            self.publish(&channels, queue, &message.body, properties)
                .await?;
            results.push(Enqueued {
                message_id,
                created: true,
                // RabbitMQ does not say where a message is in its queue.
                position: 0,
            });
        }
        Ok(results)
    }

    async fn receive(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Delivery>> {
        if lease > self.consumer_timeout {
            return Err(Error::Unsupported(format!(
                "lease: {lease:?} is longer than the broker's consumer timeout ({:?}), which \
                 would take the message back first",
                self.consumer_timeout
            )));
        }
        let queue_max_attempts = self.known(queue).await?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut deliveries = Vec::new();
        loop {
            let channels = self.channels().await?;
            while deliveries.len() < max.max(1) {
                let got = call(
                    "basic.get",
                    channels
                        .get
                        .basic_get(queue.into(), BasicGetOptions { no_ack: false }),
                )
                .await
                .map_err(|error| not_found_as(error, queue))?;
                let Some(got) = got else { break };
                let message = got.delivery;
                let tag = message.delivery_tag;
                let headers = message.properties.headers().clone().unwrap_or_default();
                let failed = integer(&headers, header::ATTEMPTS).unwrap_or(0);
                let attempt = (failed + 1 + u64::from(message.redelivered)) as u32;
                let max_attempts = integer(&headers, header::MAX_ATTEMPTS)
                    .map(|n| n as u32)
                    .or(queue_max_attempts)
                    .unwrap_or(DEFAULT_MAX_ATTEMPTS);
                let delivery = Delivery {
                    message_id: message
                        .properties
                        .message_id()
                        .as_ref()
                        .and_then(|id| Uuid::parse_str(id.as_str()).ok())
                        .unwrap_or_default(),
                    receipt: format!("{}.{tag}", channels.epoch),
                    body: message.data,
                    id: text(&headers, header::ID),
                    key: text(&headers, header::KEY),
                    attempt,
                    enqueued_at: integer(&headers, header::ENQUEUED_AT)
                        .map(from_millis)
                        .or_else(|| {
                            message
                                .properties
                                .timestamp()
                                .map(|s| from_millis(s * 1000))
                        })
                        .unwrap_or(UNIX_EPOCH),
                    last_error: text(&headers, header::LAST_ERROR),
                };
                let mut held = self.held.lock().expect("held");
                if held.epoch == channels.epoch {
                    held.deliveries.insert(
                        tag,
                        HeldDelivery {
                            queue: queue.to_owned(),
                            delivery: delivery.clone(),
                            headers,
                            max_attempts,
                        },
                    );
                }
                drop(held);
                deliveries.push(delivery);
            }
            let now = tokio::time::Instant::now();
            if !deliveries.is_empty() || now >= deadline {
                return Ok(deliveries);
            }
            tokio::time::sleep(POLL_INTERVAL.min(deadline - now)).await;
        }
    }

    async fn ack(&self, queue: &str, receipt: &str) -> Result<()> {
        let (epoch, _) = parse_receipt(receipt)?;
        let (tag, held) = self.take(receipt)?;
        let channels = self.channels().await?;
        if let Err(error) = self.ack_tag(&channels, epoch, tag).await {
            self.put_back(receipt, held);
            return Err(error);
        }
        self.count_ack(queue);
        Ok(())
    }

    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome> {
        let (epoch, tag, held) = self.take_of(queue, receipt)?;
        let channels = self.channels().await?;
        let attempt = held.delivery.attempt;
        let dead = nack.permanent || attempt >= held.max_attempts;
        let mut headers = held.headers.clone();
        headers.insert(
            header::ATTEMPTS.into(),
            AMQPValue::LongLongInt(attempt.into()),
        );
        headers.insert(header::LAST_ERROR.into(), long_string(&nack.error));
        let mut properties = BasicProperties::default()
            .with_message_id(held.delivery.message_id.to_string().into())
            .with_delivery_mode(2)
            .with_content_type("application/json".into());
        let target = if dead {
            headers.insert(
                header::FAILED_AT.into(),
                AMQPValue::LongLongInt(millis_since_epoch(SystemTime::now()) as i64),
            );
            dead_letter_queue(queue)
        } else {
            let delay = nack.delay.unwrap_or_else(|| default_backoff(attempt));
            if delay.is_zero() {
                queue.to_owned()
            } else {
                properties = properties.with_expiration(delay.as_millis().to_string().into());
                match self.bucket(&channels, queue, delay).await {
                    Ok(bucket) => bucket,
                    Err(error) => {
                        self.put_back(receipt, held);
                        return Err(error);
                    }
                }
            }
        };
        let properties = properties.with_headers(headers);
        // The copy first: a crash between the two delivers the message twice, never zero times.
        if let Err(error) = self
            .publish(&channels, &target, &held.delivery.body, properties)
            .await
        {
            self.put_back(receipt, held);
            return Err(error);
        }
        self.ack_tag(&channels, epoch, tag).await?;
        Ok(if dead {
            NackOutcome::DeadLettered
        } else {
            NackOutcome::Retried
        })
    }

    /// A requeue: the broker delivers it again with its headers, so its attempt count as they
    /// were.
    async fn release(&self, queue: &str, receipt: &str) -> Result<()> {
        let (epoch, tag, _) = self.take_of(queue, receipt)?;
        let channels = self.channels().await?;
        if channels.epoch != epoch {
            return Err(stale());
        }
        call(
            "basic.nack",
            channels.get.basic_nack(
                tag,
                BasicNackOptions {
                    multiple: false,
                    requeue: true,
                },
            ),
        )
        .await
    }

    async fn extend(&self, _queue: &str, _receipt: &str, _lease: Duration) -> Result<()> {
        Err(Error::Unsupported(
            "extend: an AMQP delivery has no lease to extend; it is held until it is settled or \
             its channel closes"
                .into(),
        ))
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        self.known(queue).await?;
        let channels = self.channels().await?;
        let ready = declare(&channels.admin, queue, true, FieldTable::default())
            .await
            .map_err(|error| not_found_as(error, queue))?;
        let mut delayed = 0;
        for k in 0..BUCKETS {
            // Declared, not merely looked up: a missing bucket would close the channel.
            let name = bucket_queue(queue, bucket_ms(k));
            delayed += declare(&channels.admin, &name, false, retry_arguments(queue)).await?;
        }
        let dead_lettered = declare(
            &channels.admin,
            &dead_letter_queue(queue),
            false,
            FieldTable::default(),
        )
        .await?;
        let processed = self
            .processed
            .lock()
            .expect("processed")
            .get(queue)
            .copied()
            .unwrap_or(0);
        Ok(QueueStats {
            ready,
            delayed,
            in_flight: None,
            processed,
            dead_lettered,
            paused: false,
        })
    }

    async fn set_paused(&self, _queue: &str, _paused: bool) -> Result<()> {
        Err(Error::Unsupported(
            "pause: RabbitMQ has no pause of a queue".into(),
        ))
    }

    async fn cancel(&self, _queue: &str, _message: MessageRef) -> Result<CancelOutcome> {
        Err(Error::Unsupported(
            "cancel: RabbitMQ cannot remove one message from a queue".into(),
        ))
    }

    async fn get(&self, _queue: &str, _message: MessageRef) -> Result<Option<MessageInfo>> {
        Err(Error::Unsupported(
            "get: RabbitMQ cannot look a message up by id".into(),
        ))
    }

    async fn drain(&self, _queue: &str, _timeout: Duration) -> Result<bool> {
        Err(Error::Unsupported(
            "drain: RabbitMQ does not count messages delivered and not yet acked, so emptiness \
             cannot be known"
                .into(),
        ))
    }

    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>> {
        self.known(queue).await?;
        let channels = self.channels().await?;
        // Read on a channel of their own, then closed: RabbitMQ puts every letter back.
        let peek = open(&channels.connection).await?;
        let mut letters = Vec::new();
        let name = dead_letter_queue(queue);
        let listed = async {
            while letters.len() < max.clamp(1, 1000) {
                let got = call(
                    "basic.get",
                    peek.basic_get(name.as_str().into(), BasicGetOptions { no_ack: false }),
                )
                .await?;
                let Some(got) = got else { break };
                let message = got.delivery;
                let headers = message.properties.headers().clone().unwrap_or_default();
                let enqueued_at = integer(&headers, header::ENQUEUED_AT)
                    .map(from_millis)
                    .unwrap_or(UNIX_EPOCH);
                letters.push(DeadLetter {
                    message_id: message
                        .properties
                        .message_id()
                        .as_ref()
                        .and_then(|id| Uuid::parse_str(id.as_str()).ok())
                        .unwrap_or_default(),
                    body: message.data,
                    id: text(&headers, header::ID),
                    key: text(&headers, header::KEY),
                    error: text(&headers, header::LAST_ERROR),
                    attempts: integer(&headers, header::ATTEMPTS).unwrap_or(0) as u32,
                    enqueued_at,
                    failed_at: integer(&headers, header::FAILED_AT)
                        .map(from_millis)
                        .unwrap_or(enqueued_at),
                });
            }
            Ok::<(), Error>(())
        }
        .await;
        let _ = call("channel.close", peek.close(200, "peeked".into())).await;
        listed?;
        letters.sort_by_key(|letter| letter.failed_at);
        Ok(letters)
    }
}

async fn open(connection: &Connection) -> Result<Channel> {
    call("channel.open", connection.create_channel()).await
}

async fn open_confirming(connection: &Connection) -> Result<Channel> {
    let channel = open(connection).await?;
    call(
        "confirm.select",
        channel.confirm_select(ConfirmSelectOptions::default()),
    )
    .await?;
    Ok(channel)
}

/// Declares a durable queue (or, `passive`, checks that it exists); its ready messages.
async fn declare(
    channel: &Channel,
    name: &str,
    passive: bool,
    arguments: FieldTable,
) -> Result<u64> {
    let queue = call(
        "queue.declare",
        channel.queue_declare(
            name.into(),
            QueueDeclareOptions {
                passive,
                durable: true,
                ..QueueDeclareOptions::default()
            },
            arguments,
        ),
    )
    .await?;
    Ok(queue.message_count().into())
}

/// A retry bucket's arguments: expired messages go back to `queue`.
fn retry_arguments(queue: &str) -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert("x-dead-letter-exchange".into(), long_string(""));
    arguments.insert("x-dead-letter-routing-key".into(), long_string(queue));
    arguments
}

fn dead_letter_queue(queue: &str) -> String {
    format!("{queue}.dlq")
}

fn bucket_queue(queue: &str, ms: u64) -> String {
    format!("{queue}.retry.{ms}")
}

/// The delay of bucket `k`: 1 s · 2^k.
fn bucket_ms(k: u32) -> u64 {
    1000 << k
}

/// The smallest bucket that holds `delay` (the last one for longer delays).
fn bucket_for(delay: Duration) -> u32 {
    let ms = delay.as_millis();
    (0..BUCKETS)
        .find(|k| u128::from(bucket_ms(*k)) >= ms)
        .unwrap_or(BUCKETS - 1)
}

/// The delay after failed attempt `attempt` when the nack names none: 1 s doubling, at most
/// the last bucket.
fn default_backoff(attempt: u32) -> Duration {
    Duration::from_millis(bucket_ms(attempt.saturating_sub(1).min(BUCKETS - 1)))
}

fn parse_receipt(receipt: &str) -> Result<(u64, u64)> {
    receipt
        .split_once('.')
        .and_then(|(epoch, tag)| Some((epoch.parse().ok()?, tag.parse().ok()?)))
        .ok_or_else(|| Error::Invalid {
            code: ErrorCode::MalformedReceipt.into(),
            message: format!("{receipt:?} is not a receipt of the AMQP backend"),
        })
}

fn stale() -> Error {
    Error::StaleLease(
        "the delivery is not held: it was settled, or its channel closed and RabbitMQ took it \
         back"
            .into(),
    )
}

fn long_string(text: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(text.as_bytes().to_vec()))
}

fn integer(headers: &FieldTable, name: &str) -> Option<u64> {
    match headers.inner().get(name)? {
        AMQPValue::LongLongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongInt(n) => u64::try_from(*n).ok(),
        AMQPValue::LongUInt(n) => Some((*n).into()),
        AMQPValue::ShortInt(n) => u64::try_from(*n).ok(),
        AMQPValue::Timestamp(n) => Some(*n),
        _ => None,
    }
}

fn text(headers: &FieldTable, name: &str) -> Option<String> {
    match headers.inner().get(name)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_owned()),
        _ => None,
    }
}

fn millis_since_epoch(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// One broker call, bounded in time; its error by meaning.
async fn call<T>(
    operation: &str,
    future: impl std::future::Future<Output = lapin::Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, future).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(broker_error(operation, &error)),
        Err(_) => Err(Error::Unavailable(format!(
            "{operation}: RabbitMQ did not answer within {CALL_TIMEOUT:?}"
        ))),
    }
}

fn broker_error(operation: &str, error: &lapin::Error) -> Error {
    Error::Unavailable(format!("{operation}: {error}"))
}

/// A NOT_FOUND from the broker as a missing queue.
fn not_found_as(error: Error, queue: &str) -> Error {
    match error {
        Error::Unavailable(message) if message.contains("NOT_FOUND") || message.contains("404") => {
            Error::QueueNotFound(queue.to_owned())
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_goes_to_the_smallest_bucket_that_holds_its_delay() {
        let bucket = |ms| bucket_ms(bucket_for(Duration::from_millis(ms)));
        assert_eq!(bucket(1), 1000);
        assert_eq!(bucket(1000), 1000);
        assert_eq!(bucket(1001), 2000);
        assert_eq!(bucket(10_000), 16_000);
        assert_eq!(bucket(u64::MAX), bucket_ms(BUCKETS - 1));
    }

    #[test]
    fn receipts_name_their_channel() {
        assert_eq!(parse_receipt("3.17").unwrap(), (3, 17));
        assert!(parse_receipt("17").is_err());
        assert!(parse_receipt("a.b").is_err());
    }
}
