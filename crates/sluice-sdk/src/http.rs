//! [`Http`]: the backend of a sluice server, over its HTTP API.

use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use base64::Engine;
use serde_json::value::RawValue;
use sluice_client::Client;
use sluice_client::wire::{
    CancelIn, ExtendIn, MessageIn, NackIn, NextStepIn, QueueSpec, ReceiveIn,
};

use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, NextStep, Outgoing, QueueOptions, QueueStats, WAIT_MAX, millis, system_time,
};
use crate::{Error, ErrorCode, Result};

/// Most messages one enqueue request carries (the server's batch limit).
const BATCH_MAX: usize = 1000;

/// A sluice server.
#[derive(Debug, Clone)]
pub struct Http {
    client: Client,
}

impl Http {
    /// The environment variable [`Http::with_env_token`] reads the token from.
    pub const TOKEN_ENV: &str = "SLUICE_TOKEN";

    /// A backend for the server at `url` (e.g. `http://127.0.0.1:7566`).
    pub fn new(url: &str) -> Result<Self> {
        Ok(Self {
            client: Client::new(url)?,
        })
    }

    /// A backend for the server at `url` that sends `token` as `Authorization: Bearer <token>`
    /// with every request (needed when the server's access control is on; see
    /// docs/access-control.md). The token is never shown by `Debug` or in errors.
    pub fn with_token(url: &str, token: impl AsRef<str>) -> Result<Self> {
        Ok(Self {
            client: Client::with_token(url, token)?,
        })
    }

    /// A backend for the server at `url`, with the token of the environment variable
    /// [`Http::TOKEN_ENV`] (`SLUICE_TOKEN`, as the `sluice` CLI reads it) when that is set and not
    /// empty; without a token otherwise.
    pub fn with_env_token(url: &str) -> Result<Self> {
        match std::env::var(Self::TOKEN_ENV) {
            Ok(token) if !token.is_empty() => Self::with_token(url, token),
            _ => Self::new(url),
        }
    }

    /// A backend over a [`Client`] built by the caller (`Client::builder`: own
    /// `reqwest::Client`, token).
    pub fn from_client(client: Client) -> Self {
        Self { client }
    }

    /// The typed HTTP client underneath, for the routes this trait does not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

fn time(rfc3339: &str) -> SystemTime {
    system_time(sluice_wire::parse_rfc3339(rfc3339).unwrap_or(0))
}

#[async_trait]
impl Backend for Http {
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn ensure_queue_with(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        match self.client.queue_get(queue).await {
            Ok(_) => Ok(()),
            Err(error) if error.has_code(ErrorCode::QueueNotFound) => {
                // `dedup`: every sluice queue deduplicates by idempotency id.
                let spec = QueueSpec {
                    max_attempts: options.max_attempts,
                    ordering: options.per_key.then(|| "per_key".to_owned()),
                    ..QueueSpec::default()
                };
                self.client.queue_put(queue, &spec).await?;
                Ok(())
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>> {
        let mut results = Vec::with_capacity(messages.len());
        let mut inputs = Vec::with_capacity(messages.len());
        for message in messages {
            inputs.push(message_in(message)?);
        }
        let mut inputs = inputs.into_iter().peekable();
        while inputs.peek().is_some() {
            let chunk: Vec<MessageIn> = inputs.by_ref().take(BATCH_MAX).collect();
            if chunk.len() == 1 {
                let message = chunk.into_iter().next().expect("one");
                let out = self.client.enqueue(queue, &message).await?;
                results.push(Enqueued {
                    message_id: out.message_id,
                    created: out.created,
                    position: out.position.unwrap_or(0),
                });
            } else {
                let out = self.client.enqueue_batch(queue, chunk).await?;
                results.extend(out.results.into_iter().map(|out| Enqueued {
                    message_id: out.message_id,
                    created: out.created,
                    position: out.position.unwrap_or(0),
                }));
            }
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
        let out = self
            .client
            .receive(
                queue,
                &ReceiveIn {
                    max: Some(max.clamp(1, 100) as i64),
                    wait_ms: Some(millis(wait.min(WAIT_MAX))),
                    visibility_timeout_ms: Some(millis(lease).max(1)),
                },
            )
            .await?;
        Ok(out
            .messages
            .into_iter()
            .map(|message| Delivery {
                message_id: message.message_id,
                receipt: message.receipt,
                body: match (message.body, message.body_base64) {
                    (Some(raw), _) => raw.get().as_bytes().to_vec(),
                    (None, Some(text)) => base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .unwrap_or_default(),
                    (None, None) => Vec::new(),
                },
                id: message.id,
                key: message.key,
                attempt: message.attempts,
                enqueued_at: time(&message.enqueued_at),
                last_error: message.last_error,
            })
            .collect())
    }

    async fn ack(&self, queue: &str, receipt: &str) -> Result<()> {
        self.client.ack(queue, vec![receipt.to_owned()]).await?;
        Ok(())
    }

    async fn ack_then(&self, queue: &str, receipt: &str, then: Vec<NextStep>) -> Result<()> {
        if then.is_empty() {
            return self.ack(queue, receipt).await;
        }
        let mut steps = Vec::with_capacity(then.len());
        for step in then {
            steps.push(NextStepIn::new(step.queue, message_in(step.message)?));
        }
        self.client.ack_then(queue, receipt, None, steps).await?;
        Ok(())
    }

    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome> {
        let out = self
            .client
            .nack(
                queue,
                &NackIn {
                    receipt: receipt.to_owned(),
                    error: Some(nack.error),
                    delay_ms: nack.delay.map(millis),
                    permanent: nack.permanent.then_some(true),
                },
            )
            .await?;
        Ok(if out.state == "dead" {
            NackOutcome::DeadLettered
        } else {
            NackOutcome::Retried
        })
    }

    async fn release(&self, queue: &str, receipt: &str) -> Result<()> {
        // An extend to 0 is the server's release.
        self.extend(queue, receipt, Duration::ZERO).await
    }

    async fn release_unstarted(&self, queue: &str, receipt: &str) -> Result<()> {
        self.client
            .extend(
                queue,
                &ExtendIn {
                    unstarted: true,
                    receipt: receipt.to_owned(),
                    visibility_timeout_ms: 0,
                },
            )
            .await?;
        Ok(())
    }

    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()> {
        self.client
            .extend(
                queue,
                &ExtendIn {
                    unstarted: false,
                    receipt: receipt.to_owned(),
                    visibility_timeout_ms: millis(lease),
                },
            )
            .await?;
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let stats = self.client.queue_stats(queue).await?;
        Ok(QueueStats {
            ready: stats.ready,
            delayed: stats.delayed,
            in_flight: Some(stats.in_flight),
            processed: stats.counters.acked,
            dead_lettered: stats.dead_lettered.unwrap_or(0),
            paused: stats.paused,
        })
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        if paused {
            self.client.queue_pause(queue).await?;
        } else {
            self.client.queue_resume(queue).await?;
        }
        Ok(())
    }

    async fn cancel(&self, queue: &str, message: MessageRef) -> Result<CancelOutcome> {
        let request = match message {
            MessageRef::Id(id) => CancelIn {
                message_id: Some(id.to_string()),
                id: None,
                reason: None,
            },
            MessageRef::IdempotencyId(key) => CancelIn {
                message_id: None,
                id: Some(key),
                reason: None,
            },
        };
        let out = self.client.cancel(queue, &request).await?;
        Ok(match out.outcome.as_str() {
            "cancelled" => CancelOutcome::Cancelled,
            "already_processing" => CancelOutcome::AlreadyProcessing,
            "already_completed" => CancelOutcome::AlreadyCompleted(out.state.unwrap_or_default()),
            _ => CancelOutcome::NotFound,
        })
    }

    async fn get(&self, queue: &str, message: MessageRef) -> Result<Option<MessageInfo>> {
        let found = match message {
            MessageRef::Id(id) => self.client.message_get(queue, id).await,
            MessageRef::IdempotencyId(key) => {
                self.client
                    .message_get_by_idempotency_key(queue, &key)
                    .await
            }
        };
        match found {
            Ok(status) => Ok(Some(MessageInfo {
                message_id: status.message_id,
                state: status.state,
                attempts: status.attempts,
                last_error: status.last_error,
            })),
            Err(error) if error.has_code(ErrorCode::MessageNotFound) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>> {
        let page = self
            .client
            .dlq_list(
                queue,
                &sluice_client::DlqListQuery {
                    limit: Some(max.clamp(1, 1000)),
                    ..Default::default()
                },
            )
            .await?;
        let mut letters = Vec::with_capacity(page.entries.len());
        // The list is newest first and carries no bodies: each entry is read in full.
        for entry in page.entries.into_iter().rev() {
            let full = match self.client.dlq_get(queue, entry.message_id).await {
                Ok(full) => full,
                Err(error) if error.has_code(ErrorCode::MessageNotFound) => continue,
                Err(error) => return Err(error.into()),
            };
            letters.push(DeadLetter {
                message_id: full.message_id,
                body: match (full.body, full.body_base64) {
                    (Some(raw), _) => raw.get().as_bytes().to_vec(),
                    (None, Some(text)) => base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .unwrap_or_default(),
                    (None, None) => Vec::new(),
                },
                id: full.id,
                key: full.key,
                error: full.last_error,
                attempts: full.attempts,
                enqueued_at: time(&full.enqueued_at),
                failed_at: time(&full.last_seen_at),
            });
        }
        Ok(letters)
    }

    async fn drain(&self, queue: &str, timeout: Duration) -> Result<bool> {
        let timeout_ms = millis(timeout).min(sluice_client::DRAIN_MAX_TIMEOUT_MS);
        Ok(self
            .client
            .queue_drain(queue, Some(timeout_ms))
            .await?
            .drained)
    }
}

/// A message as the API takes it.
fn message_in(message: Outgoing) -> Result<MessageIn> {
    let text = String::from_utf8(message.body).map_err(|_| Error::Invalid {
        code: ErrorCode::InvalidField.into(),
        message: "body: not UTF-8 JSON text".into(),
    })?;
    let body = RawValue::from_string(text)?;
    let mut input = MessageIn::json(body);
    input.id = message.id;
    input.key = message.key;
    input.priority = (message.priority != 0).then_some(message.priority);
    input.delay_ms = message.delay.map(millis);
    Ok(input)
}
