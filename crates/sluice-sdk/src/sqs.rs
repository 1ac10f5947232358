//! [`Sqs`]: Amazon SQS (or sluice's SQS-compatible API) as a backend, over `aws-sdk-sqs`.
//!
//! How sluice's terms map onto SQS:
//!
//! | sluice | SQS |
//! |---|---|
//! | a queue | a standard queue; a FIFO queue (`<name>.fifo`) when it is `per_key` or `dedup` |
//! | its dead-letter queue | `<name>-dlq` (`<name>-dlq.fifo` for FIFO), named by a `RedrivePolicy` whose `maxReceiveCount` is `max_attempts` |
//! | key | `MessageGroupId` (a keyless message on a FIFO queue gets a group of its own); a receive that brings several messages of one group (AWS's runs) gives them out one at a time, the next once the previous is acked ([`crate::sqs_runs`]) |
//! | idempotency id | `MessageDeduplicationId` on a FIFO queue; a standard queue cannot deduplicate, so an enqueue with an id is refused there (`Error::Unsupported`), never ignored |
//! | lease, extend | `VisibilityTimeout`, `ChangeMessageVisibility` (whole seconds, rounded up) |
//! | attempt | `ApproximateReceiveCount` |
//! | nack with a delay | `ChangeMessageVisibility(delay)` |
//! | nack, dead-lettering | reported to the server: on sluice, a `ChangeMessageVisibility` carrying the failure (`x-sluice-failure`) is a nack, so sluice retries or dead-letters the message with its error, counts it and alerts, as for any consumer; a server that does not know the header (AWS) only changes the visibility, and the backend then dead-letters by itself: the message is sent to the DLQ with its error and attempts as message attributes, then deleted (SQS itself moves a message only on a later receive, with no error) |
//!
//! A nack needs the message it settles (to copy it to the DLQ when the server does not), so the
//! backend remembers what it leased until it is settled or its lease runs out: a nack must come
//! from the same [`Sqs`] value that leased the message. SQS cannot pause a queue, cancel or look up a message, or
//! report a priority; those calls fail with [`Error::Unsupported`] (see [`Sqs::CAPABILITIES`]).
//! Its counts are approximate (`ApproximateNumberOfMessages...`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
};
use aws_sdk_sqs::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_sqs::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sqs::types::{
    Message, MessageAttributeValue, MessageSystemAttributeName, QueueAttributeName,
    SendMessageBatchRequestEntry,
};
use tokio::time::Instant;
use uuid::Uuid;

use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, Outgoing, QueueOptions, QueueStats,
};
use crate::sqs_runs::GroupRuns;
use crate::{Code, Error, ErrorCode, Result};

/// Entries per SendMessageBatch and messages per ReceiveMessage: SQS's limit.
const BATCH_MAX: usize = 10;
/// The longest long poll SQS allows.
const WAIT_MAX_S: i32 = 20;
/// The longest visibility timeout SQS allows (12 hours).
const VISIBILITY_MAX_S: i32 = 43_200;
/// `max_attempts` of a queue created without one (sluice's default).
const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Leases remembered at most; past this, those whose lease ran out are forgotten first.
const HELD_PRUNE_AT: usize = 4096;

/// Message attributes the backend writes and reads.
mod attr {
    /// The idempotency id (also the `MessageDeduplicationId` on FIFO queues).
    pub const ID: &str = "sluice-id";
    /// The ordering key (also the `MessageGroupId` on FIFO queues).
    pub const KEY: &str = "sluice-key";
    /// On a dead letter: the error of the last attempt.
    pub const ERROR: &str = "sluice-error";
    /// On a dead letter: deliveries made.
    pub const ATTEMPTS: &str = "sluice-attempts";
    /// On a dead letter: when it was dead-lettered, ms since the epoch.
    pub const FAILED_AT: &str = "sluice-failed-at-ms";
    /// On a dead letter: when the original was enqueued, ms since the epoch.
    pub const ENQUEUED_AT: &str = "sluice-enqueued-at-ms";
    /// On a dead letter: the original message's id.
    pub const MESSAGE_ID: &str = "sluice-message-id";
}

/// Amazon SQS, or any SQS-compatible API (sluice's own, moto, ElasticMQ).
pub struct Sqs {
    client: Client,
    /// Queues resolved so far, by the name the caller uses.
    queues: Mutex<HashMap<String, Arc<SqsQueue>>>,
    /// What this value leased and has not settled, by receipt handle.
    held: Mutex<HashMap<String, Held>>,
    /// Acks made through this value, per queue.
    processed: Mutex<HashMap<String, u64>>,
    /// Per FIFO queue: runs of a group received together, given out one at a time.
    runs: Mutex<HashMap<String, GroupRuns>>,
}

impl std::fmt::Debug for Sqs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sqs").finish_non_exhaustive()
    }
}

/// One SQS queue as the backend found or made it.
#[derive(Debug)]
struct SqsQueue {
    url: String,
    fifo: bool,
    /// The dead-letter queue's URL, when the queue has a `RedrivePolicy`.
    dead_letter_url: Option<String>,
    /// `maxReceiveCount` of the `RedrivePolicy`; `None`: retried for ever.
    max_attempts: Option<u32>,
}

/// A leased message, kept until it is settled so that a nack can copy it to the DLQ.
struct Held {
    delivery: Delivery,
    group: Option<String>,
    expires: Instant,
}

impl Sqs {
    /// What SQS can do.
    pub const CAPABILITIES: Capabilities = Capabilities {
        extend: true,
        lease_expiry: true,
        pause: false,
        cancel: false,
        lookup: false,
        per_key_order: true,
        dedup: true,
        delays: true,
        priority: false,
        in_flight_stats: true,
        chaining: false,
    };

    /// A backend over a client configured by the caller (credentials, region, endpoint: e.g.
    /// from `aws-config`).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            queues: Mutex::default(),
            held: Mutex::default(),
            processed: Mutex::default(),
            runs: Mutex::default(),
        }
    }

    /// A backend for the SQS API at `endpoint` (e.g. a sluice server's `http://127.0.0.1:7566`)
    /// with static credentials, over HTTPS (rustls) or plain HTTP. Without access control sluice
    /// accepts any key and secret (docs/sqs.md).
    pub fn endpoint(endpoint: &str, region: &str, access_key_id: &str, secret: &str) -> Self {
        use aws_sdk_sqs::config::{BehaviorVersion, Credentials, Region};
        use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
        let http_client = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .endpoint_url(endpoint)
            .region(Region::new(region.to_owned()))
            .credentials_provider(Credentials::new(
                access_key_id.to_owned(),
                secret.to_owned(),
                None,
                None,
                "static",
            ))
            .http_client(http_client)
            .build();
        Self::new(Client::from_conf(config))
    }

    /// The SDK client underneath, for what the [`Backend`] trait does not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The queue `name` (or `name.fifo`), resolved once and then remembered.
    async fn queue(&self, name: &str) -> Result<Arc<SqsQueue>> {
        if let Some(queue) = self.queues.lock().expect("queues").get(name) {
            return Ok(queue.clone());
        }
        let url = match self.url_of(name).await? {
            Some(url) => url,
            None if !name.ends_with(".fifo") => self
                .url_of(&format!("{name}.fifo"))
                .await?
                .ok_or_else(|| Error::QueueNotFound(name.to_owned()))?,
            None => return Err(Error::QueueNotFound(name.to_owned())),
        };
        let queue = Arc::new(self.describe(url).await?);
        let mut queues = self.queues.lock().expect("queues");
        // The caller names its queues; a program uses a handful. The bound only guards against
        // a runaway loop of names.
        if queues.len() >= 1024 {
            queues.clear();
        }
        queues.insert(name.to_owned(), queue.clone());
        Ok(queue)
    }

    async fn url_of(&self, name: &str) -> Result<Option<String>> {
        match self.client.get_queue_url().queue_name(name).send().await {
            Ok(out) => Ok(out.queue_url),
            Err(error) if is_missing_queue(&error) => Ok(None),
            Err(error) => Err(sdk_error("GetQueueUrl", error)),
        }
    }

    /// Reads a queue's FIFO flag and redrive policy.
    async fn describe(&self, url: String) -> Result<SqsQueue> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::FifoQueue)
            .attribute_names(QueueAttributeName::RedrivePolicy)
            .send()
            .await
            .map_err(|e| sdk_error("GetQueueAttributes", e))?;
        let attributes = out.attributes.unwrap_or_default();
        let fifo = attributes
            .get(&QueueAttributeName::FifoQueue)
            .is_some_and(|v| v == "true");
        let mut dead_letter_url = None;
        let mut max_attempts = None;
        if let Some(policy) = attributes
            .get(&QueueAttributeName::RedrivePolicy)
            .filter(|p| !p.is_empty())
        {
            let policy: serde_json::Value = serde_json::from_str(policy)?;
            max_attempts = match &policy["maxReceiveCount"] {
                serde_json::Value::Number(n) => n.as_u64().map(|n| n as u32),
                serde_json::Value::String(s) => s.parse().ok(),
                _ => None,
            };
            if let Some(arn) = policy["deadLetterTargetArn"].as_str() {
                let name = arn.rsplit(':').next().unwrap_or(arn);
                dead_letter_url = self.url_of(name).await?;
            }
        }
        Ok(SqsQueue {
            url,
            fifo,
            dead_letter_url,
            max_attempts,
        })
    }

    /// Creates `name` (with `attributes`) or finds it; its URL.
    async fn create(
        &self,
        name: &str,
        attributes: Vec<(QueueAttributeName, String)>,
    ) -> Result<String> {
        let mut request = self.client.create_queue().queue_name(name);
        for (key, value) in attributes {
            request = request.attributes(key, value);
        }
        match request.send().await {
            Ok(out) => out
                .queue_url
                .ok_or_else(|| Error::Unavailable("CreateQueue answered no QueueUrl".into())),
            // It exists with other settings: it keeps them.
            Err(error) if error.code() == Some("QueueNameExists") => self
                .url_of(name)
                .await?
                .ok_or_else(|| Error::QueueNotFound(name.to_owned())),
            Err(error) => Err(sdk_error("CreateQueue", error)),
        }
    }

    async fn arn_of(&self, url: &str) -> Result<String> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(|e| sdk_error("GetQueueAttributes", e))?;
        out.attributes
            .and_then(|mut a| a.remove(&QueueAttributeName::QueueArn))
            .ok_or_else(|| Error::Unavailable(format!("no QueueArn for {url}")))
    }

    fn remember(&self, receipt: &str, held: Held) {
        let mut table = self.held.lock().expect("held");
        if table.len() >= HELD_PRUNE_AT {
            let now = Instant::now();
            table.retain(|_, held| held.expires > now);
        }
        table.insert(receipt.to_owned(), held);
    }

    fn count_ack(&self, queue: &str) {
        let mut processed = self.processed.lock().expect("processed");
        if let Some(count) = processed.get_mut(queue) {
            *count += 1;
        } else if processed.len() < 1024 {
            processed.insert(queue.to_owned(), 1);
        }
    }

    /// Runs `f` on the runs of `queue` (a FIFO queue's groups given out one at a time).
    fn runs_of<T>(&self, queue: &str, f: impl FnOnce(&mut GroupRuns) -> T) -> T {
        let mut runs = self.runs.lock().expect("runs");
        f(runs.entry(queue.to_owned()).or_default())
    }

    /// `receipt` comes back (a retry, a release): what waited behind it in its run goes back.
    async fn back_off(&self, queue: &str, url: &str, receipt: &str) {
        let waiting = self.runs_of(queue, |runs| runs.back_off(receipt));
        for delivery in waiting {
            self.held.lock().expect("held").remove(&delivery.receipt);
            let given_back = self
                .client
                .change_message_visibility()
                .queue_url(url)
                .receipt_handle(&delivery.receipt)
                .visibility_timeout(0)
                .send()
                .await;
            if let Err(error) = given_back {
                tracing::warn!(message = %delivery.message_id, "giving back failed: {error}");
            }
        }
    }

    /// Sends a copy of a failed message to the DLQ with its error and attempts, then deletes
    /// the original.
    async fn dead_letter(
        &self,
        queue: &SqsQueue,
        dead_letter_url: &str,
        receipt: &str,
        held: &Held,
        error: &str,
    ) -> Result<()> {
        let delivery = &held.delivery;
        let body = String::from_utf8(delivery.body.clone()).map_err(|_| not_text())?;
        let failed_at = millis_since_epoch(SystemTime::now());
        let mut request = self
            .client
            .send_message()
            .queue_url(dead_letter_url)
            .message_body(body)
            .message_attributes(attr::ERROR, string_attribute(error))
            .message_attributes(attr::ATTEMPTS, number_attribute(delivery.attempt.into()))
            .message_attributes(attr::FAILED_AT, number_attribute(failed_at))
            .message_attributes(
                attr::ENQUEUED_AT,
                number_attribute(millis_since_epoch(delivery.enqueued_at)),
            )
            .message_attributes(
                attr::MESSAGE_ID,
                string_attribute(&delivery.message_id.to_string()),
            );
        if let Some(id) = &delivery.id {
            request = request.message_attributes(attr::ID, string_attribute(id));
        }
        if let Some(key) = &delivery.key {
            request = request.message_attributes(attr::KEY, string_attribute(key));
        }
        if queue.fifo {
            // The original's id deduplicates a retried copy; the group keeps the key's order.
            request = request
                .message_group_id(
                    held.group
                        .clone()
                        .unwrap_or_else(|| Uuid::now_v7().to_string()),
                )
                .message_deduplication_id(delivery.message_id.to_string());
        }
        request
            .send()
            .await
            .map_err(|e| sdk_error("SendMessage (dead-letter queue)", e))?;
        self.client
            .delete_message()
            .queue_url(&queue.url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| sdk_error("DeleteMessage", e))?;
        Ok(())
    }
}

#[async_trait]
impl Backend for Sqs {
    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    async fn ensure_queue_with(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        let fifo = options.per_key || options.dedup || queue.ends_with(".fifo");
        let base = queue.strip_suffix(".fifo").unwrap_or(queue);
        let suffix = if fifo { ".fifo" } else { "" };
        let fifo_attributes = || {
            if fifo {
                vec![(QueueAttributeName::FifoQueue, "true".to_owned())]
            } else {
                Vec::new()
            }
        };
        let dead_letter_url = self
            .create(&format!("{base}-dlq{suffix}"), fifo_attributes())
            .await?;
        let arn = self.arn_of(&dead_letter_url).await?;
        let policy = serde_json::json!({
            "deadLetterTargetArn": arn,
            "maxReceiveCount": options.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS).max(1),
        });
        let mut attributes = fifo_attributes();
        attributes.push((QueueAttributeName::RedrivePolicy, policy.to_string()));
        let url = self.create(&format!("{base}{suffix}"), attributes).await?;
        let described = Arc::new(self.describe(url).await?);
        self.queues
            .lock()
            .expect("queues")
            .insert(queue.to_owned(), described);
        Ok(())
    }

    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>> {
        let target = self.queue(queue).await?;
        let mut entries = Vec::with_capacity(messages.len());
        for (index, message) in messages.into_iter().enumerate() {
            entries.push(entry(&target, index, message)?);
        }
        let mut results = Vec::with_capacity(entries.len());
        let mut entries = entries.into_iter().peekable();
        while entries.peek().is_some() {
            let chunk: Vec<SendMessageBatchRequestEntry> =
                entries.by_ref().take(BATCH_MAX).collect();
            let first = results.len();
            let out = self
                .client
                .send_message_batch()
                .queue_url(&target.url)
                .set_entries(Some(chunk))
                .send()
                .await
                .map_err(|e| sdk_error("SendMessageBatch", e))?;
            if let Some(failed) = out.failed().first() {
                return Err(Error::Other {
                    status: if failed.sender_fault() { 400 } else { 500 },
                    code: Code::parse(failed.code()),
                    message: format!(
                        "SendMessageBatch entry {}: {} ({} stored before it)",
                        failed.id(),
                        failed.message().unwrap_or_default(),
                        first
                    ),
                });
            }
            let mut successful: Vec<_> = out.successful().to_vec();
            successful.sort_by_key(|entry| entry.id().parse::<usize>().unwrap_or(usize::MAX));
            results.extend(successful.iter().map(|entry| Enqueued {
                message_id: Uuid::parse_str(entry.message_id()).unwrap_or_default(),
                // SQS answers a duplicate like a new message and says nothing of positions.
                created: true,
                position: 0,
            }));
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
        let source = self.queue(queue).await?;
        let max = max.clamp(1, BATCH_MAX);
        let visibility = seconds(lease).clamp(1, VISIBILITY_MAX_S);
        let mut deliveries = Vec::new();
        if source.fifo {
            let waiting = self.runs_of(queue, |runs| runs.ready(max));
            for delivery in waiting {
                // It waited under its lease: the lease starts again now, or it is stale and
                // comes back from SQS.
                let renewed = self
                    .client
                    .change_message_visibility()
                    .queue_url(&source.url)
                    .receipt_handle(&delivery.receipt)
                    .visibility_timeout(visibility)
                    .send()
                    .await;
                match renewed {
                    Ok(_) => deliveries.push(delivery),
                    Err(_) => {
                        self.runs_of(queue, |runs| runs.done(&delivery.receipt));
                        self.held.lock().expect("held").remove(&delivery.receipt);
                    }
                }
            }
            if deliveries.len() >= max {
                return Ok(deliveries);
            }
        }
        let wait = if deliveries.is_empty() {
            seconds(wait).min(WAIT_MAX_S)
        } else {
            0
        };
        let out = self
            .client
            .receive_message()
            .queue_url(&source.url)
            .max_number_of_messages((max - deliveries.len()) as i32)
            .visibility_timeout(visibility)
            .wait_time_seconds(wait)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| sdk_error("ReceiveMessage", e))?;
        let expires = Instant::now() + lease;
        let mut received = Vec::new();
        for message in out.messages.unwrap_or_default() {
            let (delivery, group) = delivery(message)?;
            self.remember(
                &delivery.receipt,
                Held {
                    delivery: delivery.clone(),
                    group: group.clone(),
                    expires,
                },
            );
            received.push((group.filter(|_| source.fifo), delivery));
        }
        if source.fifo {
            deliveries.extend(self.runs_of(queue, |runs| runs.take(received)));
        } else {
            deliveries.extend(received.into_iter().map(|(_, delivery)| delivery));
        }
        Ok(deliveries)
    }

    async fn ack(&self, queue: &str, receipt: &str) -> Result<()> {
        let source = self.queue(queue).await?;
        self.client
            .delete_message()
            .queue_url(&source.url)
            .receipt_handle(receipt)
            .send()
            .await
            .map_err(|e| sdk_error("DeleteMessage", e))?;
        self.held.lock().expect("held").remove(receipt);
        self.runs_of(queue, |runs| runs.done(receipt));
        self.count_ack(queue);
        Ok(())
    }

    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome> {
        let source = self.queue(queue).await?;
        let held = self.held.lock().expect("held").remove(receipt);
        let Some(held) = held else {
            return Err(Error::StaleLease(
                "this backend holds no lease with that receipt (it was settled, it ran out, or \
                 another process leased the message)"
                    .into(),
            ));
        };
        let attempt = held.delivery.attempt;
        let out_of_attempts = source.max_attempts.is_some_and(|max| attempt >= max);
        let dead_letter = (nack.permanent || out_of_attempts) && source.dead_letter_url.is_some();
        if nack.permanent && source.dead_letter_url.is_none() {
            self.remember(receipt, held);
            return Err(Error::Invalid {
                code: ErrorCode::InvalidField.into(),
                message: "permanent: the queue has no dead-letter queue (RedrivePolicy)".into(),
            });
        }
        // Held a minute while the backend dead-letters by itself; the retry's delay otherwise.
        let visibility = if dead_letter {
            60
        } else {
            seconds(nack.delay.unwrap_or_else(|| default_backoff(attempt))).min(VISIBILITY_MAX_S)
        };
        let report = ReportFailure::new(&nack.error, nack.permanent);
        let changed = self
            .client
            .change_message_visibility()
            .queue_url(&source.url)
            .receipt_handle(receipt)
            .visibility_timeout(visibility)
            .customize()
            .interceptor(report.clone())
            .send()
            .await;
        if let Err(error) = changed {
            // Still leased: a later nack may try again.
            self.remember(receipt, held);
            return Err(sdk_error("ChangeMessageVisibility", error));
        }
        match report.outcome().as_deref() {
            // sluice took it as a nack: it retried or dead-lettered the message itself.
            Some(OUTCOME_DEAD_LETTERED) => {
                self.runs_of(queue, |runs| runs.done(receipt));
                return Ok(NackOutcome::DeadLettered);
            }
            Some(_) => {
                self.back_off(queue, &source.url, receipt).await;
                return Ok(NackOutcome::Retried);
            }
            None => {}
        }
        if let (true, Some(dead_letter_url)) = (dead_letter, &source.dead_letter_url) {
            let dead = self
                .dead_letter(&source, dead_letter_url, receipt, &held, &nack.error)
                .await;
            if let Err(error) = dead {
                self.remember(receipt, held);
                return Err(error);
            }
            self.runs_of(queue, |runs| runs.done(receipt));
            return Ok(NackOutcome::DeadLettered);
        }
        self.back_off(queue, &source.url, receipt).await;
        Ok(NackOutcome::Retried)
    }

    async fn release(&self, queue: &str, receipt: &str) -> Result<()> {
        let source = self.queue(queue).await?;
        self.client
            .change_message_visibility()
            .queue_url(&source.url)
            .receipt_handle(receipt)
            .visibility_timeout(0)
            .send()
            .await
            .map_err(|e| sdk_error("ChangeMessageVisibility", e))?;
        self.held.lock().expect("held").remove(receipt);
        self.back_off(queue, &source.url, receipt).await;
        Ok(())
    }

    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()> {
        let source = self.queue(queue).await?;
        self.client
            .change_message_visibility()
            .queue_url(&source.url)
            .receipt_handle(receipt)
            .visibility_timeout(seconds(lease).clamp(1, VISIBILITY_MAX_S))
            .send()
            .await
            .map_err(|e| sdk_error("ChangeMessageVisibility", e))?;
        if let Some(held) = self.held.lock().expect("held").get_mut(receipt) {
            held.expires = Instant::now() + lease;
        }
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let source = self.queue(queue).await?;
        let counts = self.counts(&source.url).await?;
        let dead_lettered = match &source.dead_letter_url {
            Some(url) => {
                let dead = self.counts(url).await?;
                dead.0 + dead.1 + dead.2
            }
            None => 0,
        };
        let processed = self
            .processed
            .lock()
            .expect("processed")
            .get(queue)
            .copied()
            .unwrap_or(0);
        Ok(QueueStats {
            ready: counts.0,
            delayed: counts.2,
            in_flight: Some(counts.1),
            processed,
            dead_lettered,
            paused: false,
        })
    }

    async fn set_paused(&self, _queue: &str, _paused: bool) -> Result<()> {
        Err(Error::Unsupported(
            "pause: SQS has no pause of a queue".into(),
        ))
    }

    async fn cancel(&self, _queue: &str, _message: MessageRef) -> Result<CancelOutcome> {
        Err(Error::Unsupported(
            "cancel: SQS deletes a message only by the receipt handle of a receive".into(),
        ))
    }

    async fn get(&self, _queue: &str, _message: MessageRef) -> Result<Option<MessageInfo>> {
        Err(Error::Unsupported(
            "get: SQS cannot look a message up by id".into(),
        ))
    }

    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>> {
        let source = self.queue(queue).await?;
        let Some(url) = &source.dead_letter_url else {
            return Ok(Vec::new());
        };
        // SQS can only receive: each letter is received and given back at once (visibility 0),
        // so it stays in the dead-letter queue.
        let mut letters = Vec::new();
        let mut handles = Vec::new();
        let max = max.clamp(1, 1000);
        let listed = async {
            while letters.len() < max {
                let out = self
                    .client
                    .receive_message()
                    .queue_url(url)
                    .max_number_of_messages((max - letters.len()).min(BATCH_MAX) as i32)
                    .visibility_timeout(30)
                    .wait_time_seconds(if letters.is_empty() { 1 } else { 0 })
                    .message_system_attribute_names(MessageSystemAttributeName::All)
                    .message_attribute_names("All")
                    .send()
                    .await
                    .map_err(|e| sdk_error("ReceiveMessage (dead-letter queue)", e))?;
                let messages = out.messages.unwrap_or_default();
                if messages.is_empty() {
                    break;
                }
                for message in messages {
                    if let Some(handle) = &message.receipt_handle {
                        handles.push(handle.clone());
                    }
                    letters.push(dead_letter_of(message, source.max_attempts)?);
                }
            }
            Ok::<(), Error>(())
        }
        .await;
        for handle in handles {
            let _ = self
                .client
                .change_message_visibility()
                .queue_url(url)
                .receipt_handle(handle)
                .visibility_timeout(0)
                .send()
                .await;
        }
        listed?;
        letters.sort_by_key(|letter| letter.failed_at);
        Ok(letters)
    }
}

impl Sqs {
    /// (ready, in flight, delayed) of one queue.
    async fn counts(&self, url: &str) -> Result<(u64, u64, u64)> {
        let out = self
            .client
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .map_err(|e| sdk_error("GetQueueAttributes", e))?;
        let attributes = out.attributes.unwrap_or_default();
        let count = |name: &QueueAttributeName| {
            attributes
                .get(name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok((
            count(&QueueAttributeName::ApproximateNumberOfMessages),
            count(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
            count(&QueueAttributeName::ApproximateNumberOfMessagesDelayed),
        ))
    }
}

/// One SendMessageBatch entry; refuses what the queue cannot take.
fn entry(
    queue: &SqsQueue,
    index: usize,
    message: Outgoing,
) -> Result<SendMessageBatchRequestEntry> {
    if message.priority != 0 {
        return Err(Error::Unsupported("priority: SQS has no priorities".into()));
    }
    let body = String::from_utf8(message.body).map_err(|_| not_text())?;
    let mut entry = SendMessageBatchRequestEntry::builder()
        .id(index.to_string())
        .message_body(body);
    if let Some(delay) = message.delay.filter(|d| !d.is_zero()) {
        if queue.fifo {
            return Err(Error::Unsupported(
                "delay: a FIFO SQS queue takes no per-message delay".into(),
            ));
        }
        entry = entry.delay_seconds(seconds(delay).min(900));
    }
    // A standard queue deduplicates nothing, so an id there would be silently ignored: it is
    // refused instead; deduplication takes a `dedup` queue (FIFO).
    if message.id.is_some() && !queue.fifo {
        return Err(Error::Unsupported(
            "dedup: a standard SQS queue does not deduplicate, so an idempotency id would be \
             ignored; open the queue with `dedup` (a FIFO queue) to enqueue with ids"
                .into(),
        ));
    }
    if let Some(id) = &message.id {
        entry = entry.message_attributes(attr::ID, string_attribute(id));
    }
    if let Some(key) = &message.key {
        entry = entry.message_attributes(attr::KEY, string_attribute(key));
    }
    if queue.fifo {
        // A keyless message waits for nobody: a group of its own. Without an id, a fresh
        // deduplication id keeps two equal bodies two messages.
        let group = message.key.unwrap_or_else(|| Uuid::now_v7().to_string());
        let dedup = message.id.unwrap_or_else(|| Uuid::now_v7().to_string());
        entry = entry
            .message_group_id(group)
            .message_deduplication_id(dedup);
    }
    entry
        .build()
        .map_err(|e| Error::Unavailable(format!("SendMessageBatch entry: {e}")))
}

/// A received message as a [`Delivery`], with its `MessageGroupId`.
fn delivery(message: Message) -> Result<(Delivery, Option<String>)> {
    let system = message.attributes.unwrap_or_default();
    let attributes = message.message_attributes.unwrap_or_default();
    let text = |name: &str| {
        attributes
            .get(name)
            .and_then(|value| value.string_value.clone())
    };
    let receipt = message
        .receipt_handle
        .ok_or_else(|| Error::Unavailable("a received message without a ReceiptHandle".into()))?;
    let delivery = Delivery {
        message_id: message
            .message_id
            .as_deref()
            .and_then(|id| Uuid::parse_str(id).ok())
            .unwrap_or_default(),
        receipt,
        body: message.body.unwrap_or_default().into_bytes(),
        id: text(attr::ID),
        key: text(attr::KEY),
        attempt: system
            .get(&MessageSystemAttributeName::ApproximateReceiveCount)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1),
        enqueued_at: system
            .get(&MessageSystemAttributeName::SentTimestamp)
            .and_then(|v| v.parse().ok())
            .map_or(UNIX_EPOCH, from_millis),
        // SQS keeps no error with a message.
        last_error: None,
    };
    let group = system
        .get(&MessageSystemAttributeName::MessageGroupId)
        .cloned();
    Ok((delivery, group))
}

/// What sluice answers a reported failure with (`x-sluice-outcome`) when it dead-lettered it.
const OUTCOME_DEAD_LETTERED: &str = "dead-lettered";

/// Reports a failed attempt with a visibility change (docs/sqs.md, "Reporting a failure"): adds
/// the failure's headers before the request is signed, and keeps the outcome sluice answers
/// with (another SQS server answers none).
#[derive(Debug, Clone)]
struct ReportFailure {
    error: String,
    permanent: bool,
    outcome: Arc<Mutex<Option<String>>>,
}

impl ReportFailure {
    fn new(error: &str, permanent: bool) -> Self {
        let error = if error.is_empty() { "failed" } else { error };
        Self {
            error: percent_encoding::utf8_percent_encode(error, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
            permanent,
            outcome: Arc::default(),
        }
    }

    /// What sluice did, when the server is sluice.
    fn outcome(&self) -> Option<String> {
        self.outcome.lock().expect("outcome").clone()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Intercept for ReportFailure {
    fn name(&self) -> &'static str {
        "ReportFailure"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        let headers = context.request_mut().headers_mut();
        headers.insert("x-sluice-failure", self.error.clone());
        if self.permanent {
            headers.insert("x-sluice-failure-permanent", "true");
        }
        Ok(())
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        _: &mut ConfigBag,
    ) -> std::result::Result<(), BoxError> {
        if let Some(outcome) = context.response().headers().get("x-sluice-outcome") {
            *self.outcome.lock().expect("outcome") = Some(outcome.to_owned());
        }
        Ok(())
    }
}

/// A message received from a dead-letter queue as a [`DeadLetter`]; `max_attempts` is its
/// source queue's `maxReceiveCount`.
fn dead_letter_of(message: Message, max_attempts: Option<u32>) -> Result<DeadLetter> {
    let attributes = message.message_attributes.clone().unwrap_or_default();
    let value = |name: &str| {
        attributes
            .get(name)
            .and_then(|value| value.string_value.clone())
    };
    let (delivery, _) = delivery(message)?;
    Ok(DeadLetter {
        message_id: value(attr::MESSAGE_ID)
            .and_then(|id| Uuid::parse_str(&id).ok())
            .unwrap_or(delivery.message_id),
        body: delivery.body,
        id: delivery.id,
        key: delivery.key,
        error: value(attr::ERROR),
        // A letter that SQS moved itself (by the source's RedrivePolicy) carries no attributes
        // of ours: SQS moves a message once it was delivered `maxReceiveCount` times (its
        // receive count in the dead-letter queue also counts the looks, so it is not used). The
        // TypeScript and Python SDKs say the same.
        attempts: value(attr::ATTEMPTS)
            .and_then(|v| v.parse().ok())
            .or(max_attempts)
            .unwrap_or(delivery.attempt),
        enqueued_at: value(attr::ENQUEUED_AT)
            .and_then(|v| v.parse().ok())
            .map_or(delivery.enqueued_at, from_millis),
        failed_at: value(attr::FAILED_AT)
            .and_then(|v| v.parse().ok())
            .map_or(delivery.enqueued_at, from_millis),
    })
}

/// The delay after failed attempt `attempt` when the nack names none: 1 s doubling, at most
/// 15 minutes (SQS queues have no backoff of their own).
fn default_backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.saturating_sub(1).min(10)).min(Duration::from_secs(900))
}

/// Whole seconds, rounded up (SQS counts in seconds; a shorter lease or delay would shrink).
fn seconds(duration: Duration) -> i32 {
    duration.as_millis().div_ceil(1000).min(i32::MAX as u128) as i32
}

fn millis_since_epoch(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn from_millis(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn string_attribute(value: &str) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .expect("data_type is set")
}

fn number_attribute(value: u64) -> MessageAttributeValue {
    MessageAttributeValue::builder()
        .data_type("Number")
        .string_value(value.to_string())
        .build()
        .expect("data_type is set")
}

fn not_text() -> Error {
    Error::Invalid {
        code: ErrorCode::InvalidField.into(),
        message: "body: SQS message bodies are text; this one is not UTF-8".into(),
    }
}

fn is_missing_queue<E: ProvideErrorMetadata>(error: &SdkError<E>) -> bool {
    matches!(
        error.code(),
        Some("QueueDoesNotExist" | "AWS.SimpleQueueService.NonExistentQueue")
    )
}

/// An SDK error by meaning: a missing queue, a stale receipt handle, throttling, a refusal, or
/// the service out of reach.
fn sdk_error<E>(operation: &str, error: SdkError<E>) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let status = error.raw_response().map(|r| r.status().as_u16());
    let Some(code) = error.code().map(str::to_owned) else {
        return Error::Unavailable(format!("{operation}: {}", DisplayChain(&error)));
    };
    let message = format!("{operation}: {}", error.message().unwrap_or("no message"));
    let stale = code == "ReceiptHandleIsInvalid"
        || (code == "InvalidParameterValue"
            && (message.contains("expired") || message.contains("not available")));
    match code.as_str() {
        "QueueDoesNotExist" | "AWS.SimpleQueueService.NonExistentQueue" => {
            Error::QueueNotFound(message)
        }
        _ if stale => Error::StaleLease(message),
        "RequestThrottled" | "ThrottlingException" | "InternalFailure" | "ServiceUnavailable" => {
            Error::Unavailable(message)
        }
        _ => Error::Other {
            status: status.unwrap_or(0),
            code: Code::parse(&code),
            message,
        },
    }
}

/// An error with its sources, on one line.
struct DisplayChain<'a>(&'a dyn std::error::Error);

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_up_to_whole_seconds() {
        assert_eq!(seconds(Duration::ZERO), 0);
        assert_eq!(seconds(Duration::from_millis(1)), 1);
        assert_eq!(seconds(Duration::from_millis(1000)), 1);
        assert_eq!(seconds(Duration::from_millis(1500)), 2);
    }

    #[test]
    fn the_default_backoff_doubles_to_its_cap() {
        let delays: Vec<u64> = [1, 2, 3, 11, 40]
            .iter()
            .map(|a| default_backoff(*a).as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 900, 900]);
    }
}
