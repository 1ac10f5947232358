//! [`Grpc`]: the backend of a sluice server, over its gRPC API (`proto/sluice/v1/sluice.proto`,
//! the unary calls). It keeps every rule the [`crate::Http`] backend keeps, since the server
//! runs the same operations behind both protocols, and its errors map onto the same
//! [`Error`] variants: the sluice code comes from the `sluice-error-code` metadata of the
//! refused call.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::value::RawValue;
use sluice_client::wire::QueueSpec;
use sluice_client::{CONNECT_TIMEOUT, Code, RECEIVE_TIMEOUT_MARGIN, REQUEST_TIMEOUT};
use sluice_core::queue::limits::{BATCH_MESSAGES_MAX, RECEIVE_MAX};
use sluice_grpc::v1;
use sluice_grpc::v1::queues_client::QueuesClient;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Response, Status};
use uuid::Uuid;

use crate::backend::{
    Backend, CancelOutcome, Capabilities, DeadLetter, Delivery, Enqueued, MessageInfo, MessageRef,
    Nack, NackOutcome, NextStep, Outgoing, QueueOptions, QueueStats, WAIT_MAX, millis, system_time,
};
use crate::{Error, ErrorCode, Result};

/// A sluice server, over gRPC.
#[derive(Clone)]
pub struct Grpc {
    client: QueuesClient<Channel>,
    /// `Bearer <token>`, marked sensitive; sent as `authorization` with every call.
    authorization: Option<AsciiMetadataValue>,
}

impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc")
            .field("token", &self.authorization.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Grpc {
    /// The environment variable [`Grpc::connect_with_env_token`] reads the token from.
    pub const TOKEN_ENV: &str = "SLUICE_TOKEN";

    /// A backend for the server at `url` (e.g. `http://127.0.0.1:7566`, the port of the HTTP
    /// API: the server answers gRPC there in HTTP/2 cleartext). Connects before it returns, so a
    /// server that cannot be reached is [`Error::Unavailable`] here; once connected, a broken
    /// connection is made again by the next call.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(url, None).await
    }

    /// Like [`Grpc::connect`], sending `token` as `authorization: Bearer <token>` with every call
    /// (needed when the server's access control is on; see docs/access-control.md). The token
    /// is never shown by `Debug` or in errors; one metadata cannot carry (empty, line breaks,
    /// control characters) is refused before connecting.
    pub async fn connect_with_token(url: &str, token: impl AsRef<str>) -> Result<Self> {
        let authorization = bearer(token.as_ref())?;
        Self::open(url, Some(authorization)).await
    }

    /// Like [`Grpc::connect`], with the token of the environment variable [`Grpc::TOKEN_ENV`]
    /// (`SLUICE_TOKEN`, as the `sluice` CLI reads it) when that is set and not empty; without a
    /// token otherwise.
    pub async fn connect_with_env_token(url: &str) -> Result<Self> {
        match std::env::var(Self::TOKEN_ENV) {
            Ok(token) if !token.is_empty() => Self::connect_with_token(url, token).await,
            _ => Self::connect(url).await,
        }
    }

    /// A backend over a channel built by the caller (`Endpoint::connect_lazy` for a server
    /// that may not be up yet, other timeouts or TLS where tonic's features allow), with an
    /// optional token as in [`Grpc::connect_with_token`].
    pub fn from_channel(channel: Channel, token: Option<&str>) -> Result<Self> {
        let authorization = token.map(bearer).transpose()?;
        Ok(Self {
            client: QueuesClient::new(channel)
                // A receive of many large messages may exceed tonic's 4 MiB default; the
                // server bounds what it sends (and what it accepts) itself.
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX),
            authorization,
        })
    }

    /// The generated client underneath, for the calls this trait does not cover (the
    /// `Publish` and `Pull` streams, replays); pass each message through [`Grpc::request`] so
    /// it carries the token.
    pub fn client(&self) -> QueuesClient<Channel> {
        self.client.clone()
    }

    /// `message` as a request with this backend's `authorization` metadata, if it has a token.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(authorization) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", authorization.clone());
        }
        request
    }

    async fn open(url: &str, authorization: Option<AsciiMetadataValue>) -> Result<Self> {
        let endpoint = endpoint(url)?;
        let channel = endpoint
            .connect()
            .await
            .map_err(|error| Error::Unavailable(format!("cannot connect to {url}: {error}")))?;
        Ok(Self {
            authorization,
            ..Self::from_channel(channel, None)?
        })
    }

    /// One unary call, bounded by `timeout`; a refusal becomes the SDK's [`Error`].
    async fn call<T>(
        &self,
        timeout: Duration,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T> {
        send(timeout, call).await.map_err(error)
    }

    async fn get_queue(&self, queue: &str) -> Result<v1::Queue, Status> {
        let request = self.request(v1::GetQueueRequest {
            name: queue.to_owned(),
        });
        send(REQUEST_TIMEOUT, self.client().get_queue(request)).await
    }
}

/// One unary call, bounded by `timeout` (past it, a `DEADLINE_EXCEEDED` without a sluice code).
async fn send<T>(
    timeout: Duration,
    call: impl Future<Output = Result<Response<T>, Status>>,
) -> Result<T, Status> {
    match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer.map(Response::into_inner),
        Err(_) => Err(Status::deadline_exceeded(format!(
            "the server did not answer within {timeout:?}"
        ))),
    }
}

/// The endpoint of `url`: `http://host:port`, nothing after the authority (gRPC's paths are
/// the service's), no TLS (this build's tonic has none: use the HTTP backend over `https`).
fn endpoint(url: &str) -> Result<Endpoint> {
    let invalid = |reason: &str| -> Error {
        sluice_client::Error::InvalidUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        }
        .into()
    };
    let uri: tonic::codegen::http::Uri =
        url.parse().map_err(|error| invalid(&format!("{error}")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(invalid(
                "the gRPC backend speaks HTTP/2 in cleartext only (no TLS in this build); use an http:// URL, or the Http backend for https",
            ));
        }
        _ => return Err(invalid("the scheme must be http")),
    }
    if uri.host().is_none() {
        return Err(invalid("the URL has no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(invalid(
            "a gRPC URL is scheme, host and port only (no path or query)",
        ));
    }
    Ok(Endpoint::from(uri).connect_timeout(CONNECT_TIMEOUT))
}

/// `Bearer <token>` as sensitive metadata, or the same [`sluice_client::Error::InvalidToken`]
/// the HTTP client gives (without the token).
fn bearer(token: &str) -> Result<AsciiMetadataValue> {
    if token.is_empty() {
        return Err(sluice_client::Error::InvalidToken {
            reason: "the token is empty",
        }
        .into());
    }
    let mut value = AsciiMetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
        Error::from(sluice_client::Error::InvalidToken {
            reason: "the token has characters gRPC metadata cannot carry (line breaks, control characters)",
        })
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The sluice code of a refused call: the `sluice-error-code` metadata, or else the reason of
/// the status's `ErrorInfo` in the domain `sluice`.
fn sluice_code(status: &Status) -> Option<Code> {
    use tonic_types::StatusExt;
    if let Some(code) = status
        .metadata()
        .get(sluice_grpc::ERROR_CODE_TRAILER)
        .and_then(|value| value.to_str().ok())
    {
        return Some(Code::parse(code));
    }
    status
        .get_details_error_info()
        .filter(|info| info.domain == sluice_grpc::ERROR_DOMAIN)
        .map(|info| Code::parse(&info.reason))
}

/// The HTTP status a refusal with a code this build does not know stands for, by its gRPC
/// code (a known code has its own: [`ErrorCode::status`]).
fn http_status(code: tonic::Code) -> u16 {
    use tonic::Code as C;
    match code {
        C::InvalidArgument | C::OutOfRange => 400,
        C::Unauthenticated => 401,
        C::PermissionDenied => 403,
        C::NotFound => 404,
        C::AlreadyExists | C::Aborted | C::FailedPrecondition => 409,
        C::ResourceExhausted => 429,
        C::Unimplemented => 501,
        C::Unavailable => 503,
        C::DeadlineExceeded => 504,
        _ => 500,
    }
}

/// A refusal as the HTTP client reports it (status, code, message, details, retry-after), so
/// it maps onto [`Error`] as the [`crate::Http`] backend's does; `None` for a failure without a
/// sluice code (no connection, a broken stream, a server that is not sluice).
fn api_error(status: &Status) -> Option<sluice_client::Error> {
    use tonic_types::StatusExt;
    let code = sluice_code(status)?;
    let http = code
        .known()
        .map_or_else(|| http_status(status.code()), ErrorCode::status);
    let retry_after = status
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .map(|delay| delay.as_secs() + u64::from(delay.subsec_nanos() > 0));
    let details = status.get_details_error_info().and_then(|info| {
        info.metadata
            .get("details")
            .and_then(|text| serde_json::from_str(text).ok())
    });
    Some(sluice_client::Error::Api {
        status: http,
        code,
        message: status.message().to_owned(),
        details,
        retry_after,
    })
}

/// The SDK's error for a failed call: by its sluice code as on HTTP, or
/// [`Error::Unavailable`] when it has none (as an HTTP request that got no answer).
fn error(status: Status) -> Error {
    match api_error(&status) {
        Some(api) => api.into(),
        None => Error::Unavailable(format!(
            "gRPC call failed ({:?}): {}",
            status.code(),
            status.message()
        )),
    }
}

fn message_id(text: &str) -> Result<Uuid> {
    Uuid::parse_str(text).map_err(|_| {
        Error::Unavailable(format!(
            "cannot decode the server's answer: message id {text:?} is not a UUID"
        ))
    })
}

fn delivery_body(body: Option<v1::delivery::Body>) -> Vec<u8> {
    match body {
        Some(v1::delivery::Body::Json(text)) => text.into_bytes(),
        Some(v1::delivery::Body::Bytes(bytes)) => bytes,
        None => Vec::new(),
    }
}

fn dead_letter_body(body: Option<v1::dead_letter::Body>) -> Vec<u8> {
    match body {
        Some(v1::dead_letter::Body::Json(text)) => text.into_bytes(),
        Some(v1::dead_letter::Body::Bytes(bytes)) => bytes,
        None => Vec::new(),
    }
}

#[async_trait]
impl Backend for Grpc {
    fn capabilities(&self) -> Capabilities {
        Capabilities::ALL
    }

    async fn ensure_queue_with(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        match self.get_queue(queue).await {
            Ok(_) => Ok(()),
            Err(status)
                if sluice_code(&status).is_some_and(|code| code == ErrorCode::QueueNotFound) =>
            {
                // `dedup`: every sluice queue deduplicates by idempotency id.
                let spec = QueueSpec {
                    max_attempts: options.max_attempts,
                    ordering: options.per_key.then(|| "per_key".to_owned()),
                    ..QueueSpec::default()
                };
                let request = self.request(v1::PutQueueRequest {
                    name: queue.to_owned(),
                    settings_json: serde_json::to_string(&spec)?,
                });
                self.call(REQUEST_TIMEOUT, self.client().put_queue(request))
                    .await?;
                Ok(())
            }
            Err(status) => Err(error(status)),
        }
    }

    async fn enqueue(&self, queue: &str, messages: Vec<Outgoing>) -> Result<Vec<Enqueued>> {
        let mut inputs = Vec::with_capacity(messages.len());
        for message in messages {
            inputs.push(outgoing(message)?);
        }
        let mut results = Vec::with_capacity(inputs.len());
        let mut inputs = inputs.into_iter().peekable();
        while inputs.peek().is_some() {
            let request = self.request(v1::EnqueueRequest {
                queue: queue.to_owned(),
                messages: inputs.by_ref().take(BATCH_MESSAGES_MAX).collect(),
            });
            let out = self
                .call(REQUEST_TIMEOUT, self.client().enqueue(request))
                .await?;
            for out in out.results {
                results.push(Enqueued {
                    message_id: message_id(&out.message_id)?,
                    created: out.created,
                    position: out.position.unwrap_or(0),
                });
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
        let wait = wait.min(WAIT_MAX);
        let request = self.request(v1::ReceiveRequest {
            queue: queue.to_owned(),
            max: Some(max.clamp(1, RECEIVE_MAX) as i64),
            wait_ms: Some(millis(wait)),
            visibility_timeout_ms: Some(millis(lease).max(1)),
        });
        let out = self
            .call(
                wait + RECEIVE_TIMEOUT_MARGIN,
                self.client().receive(request),
            )
            .await?;
        out.messages
            .into_iter()
            .map(|message| {
                Ok(Delivery {
                    message_id: message_id(&message.message_id)?,
                    receipt: message.receipt,
                    body: delivery_body(message.body),
                    id: message.id,
                    key: message.key,
                    attempt: message.attempt,
                    enqueued_at: system_time(message.enqueued_at_ms),
                    last_error: message.last_error,
                })
            })
            .collect()
    }

    async fn ack(&self, queue: &str, receipt: &str) -> Result<()> {
        let request = self.request(v1::AckRequest {
            queue: queue.to_owned(),
            receipts: vec![receipt.to_owned()],
            result_json: None,
            then: Vec::new(),
        });
        self.call(REQUEST_TIMEOUT, self.client().ack(request))
            .await?;
        Ok(())
    }

    async fn ack_then(&self, queue: &str, receipt: &str, then: Vec<NextStep>) -> Result<()> {
        let then = then
            .into_iter()
            .map(|step| {
                Ok(v1::NextStep {
                    queue: step.queue,
                    message: Some(outgoing(step.message)?),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let request = self.request(v1::AckRequest {
            queue: queue.to_owned(),
            receipts: vec![receipt.to_owned()],
            result_json: None,
            then,
        });
        self.call(REQUEST_TIMEOUT, self.client().ack(request))
            .await?;
        Ok(())
    }

    async fn nack(&self, queue: &str, receipt: &str, nack: Nack) -> Result<NackOutcome> {
        let request = self.request(v1::NackRequest {
            queue: queue.to_owned(),
            receipt: receipt.to_owned(),
            error: Some(nack.error),
            delay_ms: nack.delay.map(millis),
            permanent: nack.permanent,
        });
        let out = self
            .call(REQUEST_TIMEOUT, self.client().nack(request))
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
        let request = self.request(v1::ExtendRequest {
            queue: queue.to_owned(),
            receipt: receipt.to_owned(),
            visibility_timeout_ms: 0,
            unstarted: true,
        });
        self.call(REQUEST_TIMEOUT, self.client().extend(request))
            .await?;
        Ok(())
    }

    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> Result<()> {
        let request = self.request(v1::ExtendRequest {
            queue: queue.to_owned(),
            receipt: receipt.to_owned(),
            visibility_timeout_ms: millis(lease),
            unstarted: false,
        });
        self.call(REQUEST_TIMEOUT, self.client().extend(request))
            .await?;
        Ok(())
    }

    async fn stats(&self, queue: &str) -> Result<QueueStats> {
        let found = self.get_queue(queue).await.map_err(error)?;
        let stats = found.stats.unwrap_or_default();
        Ok(QueueStats {
            ready: stats.ready,
            delayed: stats.delayed,
            in_flight: Some(stats.in_flight),
            processed: stats.acked,
            dead_lettered: stats.dead_lettered.unwrap_or(0),
            paused: stats.paused,
        })
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> Result<()> {
        let request = self.request(v1::SetPausedRequest {
            name: queue.to_owned(),
            paused,
        });
        self.call(REQUEST_TIMEOUT, self.client().set_paused(request))
            .await?;
        Ok(())
    }

    async fn cancel(&self, queue: &str, message: MessageRef) -> Result<CancelOutcome> {
        let by = match message {
            MessageRef::Id(id) => v1::cancel_request::By::MessageId(id.to_string()),
            MessageRef::IdempotencyId(key) => v1::cancel_request::By::Id(key),
        };
        let request = self.request(v1::CancelRequest {
            queue: queue.to_owned(),
            by: Some(by),
            reason: None,
        });
        let out = self
            .call(REQUEST_TIMEOUT, self.client().cancel(request))
            .await?;
        Ok(match out.outcome.as_str() {
            "cancelled" => CancelOutcome::Cancelled,
            "already_processing" => CancelOutcome::AlreadyProcessing,
            "already_completed" => CancelOutcome::AlreadyCompleted(out.state.unwrap_or_default()),
            _ => CancelOutcome::NotFound,
        })
    }

    async fn get(&self, queue: &str, message: MessageRef) -> Result<Option<MessageInfo>> {
        let by = match message {
            MessageRef::Id(id) => v1::get_message_request::By::MessageId(id.to_string()),
            MessageRef::IdempotencyId(key) => v1::get_message_request::By::Id(key),
        };
        let request = self.request(v1::GetMessageRequest {
            queue: queue.to_owned(),
            by: Some(by),
        });
        match send(REQUEST_TIMEOUT, self.client().get_message(request)).await {
            Ok(status) => Ok(Some(MessageInfo {
                message_id: message_id(&status.message_id)?,
                state: status.state,
                attempts: status.attempts,
                last_error: status.last_error,
            })),
            Err(status)
                if sluice_code(&status).is_some_and(|code| code == ErrorCode::MessageNotFound) =>
            {
                Ok(None)
            }
            Err(status) => Err(error(status)),
        }
    }

    async fn dead_letters(&self, queue: &str, max: usize) -> Result<Vec<DeadLetter>> {
        let request = self.request(v1::ListDeadLettersRequest {
            queue: queue.to_owned(),
            limit: Some(max.clamp(1, 1000) as u32),
            cursor: None,
            error: None,
        });
        let page = self
            .call(REQUEST_TIMEOUT, self.client().list_dead_letters(request))
            .await?;
        // The list is newest first; the trait's order is oldest failure first.
        page.entries
            .into_iter()
            .rev()
            .map(|entry| {
                Ok(DeadLetter {
                    message_id: message_id(&entry.message_id)?,
                    body: dead_letter_body(entry.body),
                    id: entry.id,
                    key: entry.key,
                    error: entry.last_error,
                    attempts: entry.attempts,
                    enqueued_at: system_time(entry.enqueued_at_ms),
                    failed_at: system_time(entry.failed_at_ms),
                })
            })
            .collect()
    }
}

/// A message as the protocol takes it: JSON text, checked here.
fn outgoing(message: Outgoing) -> Result<v1::OutgoingMessage> {
    let text = String::from_utf8(message.body).map_err(|_| Error::Invalid {
        code: ErrorCode::InvalidField.into(),
        message: "body: not UTF-8 JSON text".into(),
    })?;
    serde_json::from_str::<&RawValue>(&text)?;
    Ok(v1::OutgoingMessage {
        body: Some(v1::outgoing_message::Body::Json(text)),
        id: message.id,
        key: message.key,
        headers: Default::default(),
        priority: (message.priority != 0).then_some(message.priority),
        delay_ms: message.delay.map(millis),
        not_before: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: tonic::Code, sluice: &str) -> Status {
        let mut status = Status::new(code, "m");
        status.metadata_mut().insert(
            sluice_grpc::ERROR_CODE_TRAILER,
            sluice.parse().expect("ASCII"),
        );
        status
    }

    #[test]
    fn refusals_map_by_their_sluice_code_as_on_http() {
        assert!(matches!(
            error(refused(tonic::Code::NotFound, "queue_not_found")),
            Error::QueueNotFound(_)
        ));
        assert!(matches!(
            error(refused(tonic::Code::FailedPrecondition, "stale_receipt")),
            Error::StaleLease(_)
        ));
        assert!(matches!(
            error(refused(tonic::Code::InvalidArgument, "schema_violation")),
            Error::Invalid { code, .. } if code == ErrorCode::SchemaViolation
        ));
        assert!(matches!(
            error(refused(tonic::Code::Unavailable, "unavailable")),
            Error::Unavailable(_)
        ));
        assert!(matches!(
            error(refused(tonic::Code::Unauthenticated, "unauthorized")),
            Error::Other { status: 401, code, .. } if code == ErrorCode::Unauthorized
        ));
        assert!(matches!(
            error(refused(tonic::Code::NotFound, "message_not_found")),
            Error::Other { status: 404, code, .. } if code == ErrorCode::MessageNotFound
        ));
        // A code from a newer server sorts by its gRPC code, and keeps its text.
        assert!(matches!(
            error(refused(tonic::Code::InvalidArgument, "too_deep")),
            Error::Invalid { code: Code::Unknown(text), .. } if text == "too_deep"
        ));
        assert!(matches!(
            error(refused(tonic::Code::FailedPrecondition, "already_done")),
            Error::Other {
                status: 409,
                code: Code::Unknown(_),
                ..
            }
        ));
        // No sluice code: the call got no answer from sluice.
        assert!(matches!(
            error(Status::unavailable("connection refused")),
            Error::Unavailable(_)
        ));
    }

    #[test]
    fn a_full_queue_keeps_its_retry_info() {
        use tonic_types::{ErrorDetails, StatusExt};
        let mut details = ErrorDetails::with_error_info(
            "queue_full",
            sluice_grpc::ERROR_DOMAIN,
            std::collections::HashMap::new(),
        );
        details.set_retry_info(Some(Duration::from_secs(7)));
        // Without the trailer (a proxy dropped it) the ErrorInfo still names the code.
        let status = Status::with_error_details(tonic::Code::ResourceExhausted, "full", details);
        assert!(matches!(
            error(status),
            Error::QueueFull { retry_after } if retry_after == Duration::from_secs(7)
        ));
    }

    #[test]
    fn urls_and_tokens_are_checked_without_showing_the_token() {
        assert!(endpoint("http://127.0.0.1:7566").is_ok());
        assert!(endpoint("http://127.0.0.1:7566/").is_ok());
        for url in [
            "https://127.0.0.1:7566",
            "ftp://h:1",
            "http://h:1/prefix",
            "127.0.0.1:7566",
            "not a url",
        ] {
            assert!(endpoint(url).is_err(), "{url}");
        }
        for token in ["", "line\nbreak-0123456789", "nul\0-0123456789"] {
            let error = bearer(token).unwrap_err();
            let text = format!("{error} {error:?}");
            assert!(token.is_empty() || !text.contains(token), "{text}");
        }
    }
}
