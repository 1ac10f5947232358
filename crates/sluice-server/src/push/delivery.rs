//! One push: the request (body or transform output, signature, trace context) and the ack
//! or nack its answer decides.

use std::sync::atomic::Ordering;

use serde_json::Value;
use sluice_core::message::{BodyKind, ClaimedMessage};
use sluice_ops::{PushAnswer, PushSettled};
use sluice_wire::{PushSpec, format_rfc3339};

use super::{Destination, Dispatcher};
use crate::expr::EvalError;
use crate::push_log::Recording;

/// Bytes of a failed answer kept in `last_error`.
const ERROR_BODY_BYTES: usize = 256;
/// Longest `Retry-After` honoured.
const RETRY_AFTER_MAX_MS: i64 = 24 * 60 * 60 * 1000;

impl Dispatcher {
    pub(super) async fn deliver_one(&self, destination: &Destination, message: ClaimedMessage) {
        let stats = &destination.stats;
        stats.in_flight.fetch_add(1, Ordering::Relaxed);
        let started_ms = self.clock.now_ms();
        let started = std::time::Instant::now();
        let (mut outcome, recording) = if sluice_ops::push_out_of_attempts(
            &destination.config,
            message.attempts,
        ) {
            let outcome = Outcome::Failed {
                status: None,
                error: format!(
                    "out of attempts: the server stopped during {} earlier deliveries before they had a result",
                    message.attempts - 1
                ),
                permanent: true,
                retry_after_ms: None,
            };
            // No request is sent: the failure log says why.
            (outcome, None)
        } else {
            let span = crate::telemetry::push_span(&destination.queue, &message);
            let (outcome, recording) =
                tracing::Instrument::instrument(self.call(destination, &message), span.clone())
                    .await;
            let (status, failed) = match &outcome {
                Outcome::Delivered { status } => (Some(*status), false),
                Outcome::Failed { status, .. } => (*status, true),
            };
            crate::telemetry::record_push(&span, status, failed);
            (outcome, recording)
        };
        if let Outcome::Failed { error, .. } = &mut outcome {
            *error = destination.scrubber.scrub(error);
        }
        let delivery = self.delivery_log.entry(recording.map(|recording| {
            recording.finish(match &outcome {
                Outcome::Failed { error, .. } => Some(error.clone()),
                Outcome::Delivered { .. } => None,
            })
        }));
        stats
            .request_latency_us
            .0
            .record(started.elapsed().as_micros() as u64);
        stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        let now_ms = self.clock.now_ms();
        stats.latency.lock().acked(started_ms, now_ms);
        let (status, error) = match &outcome {
            Outcome::Delivered { status } => (Some(*status), None),
            Outcome::Failed { status, error, .. } => (*status, Some(error.clone())),
        };
        {
            let mut last = stats.last.lock();
            last.0 = status.or(last.0);
            if error.is_some() {
                last.1 = error;
            }
        }
        let answer = match outcome {
            Outcome::Delivered { .. } => {
                stats.delivered.fetch_add(1, Ordering::Relaxed);
                PushAnswer::Delivered
            }
            Outcome::Failed {
                error,
                permanent,
                retry_after_ms,
                ..
            } => PushAnswer::Failed {
                error,
                permanent,
                retry_after_ms,
            },
        };
        let failed = answer != PushAnswer::Delivered;
        let settled = self
            .ops
            .push_settle(
                &destination.config,
                destination.queue.clone(),
                &message,
                answer,
                delivery,
            )
            .await;
        // Out of attempts counts as a permanent failure, not a retry.
        match &settled {
            Ok(PushSettled::Acked) => {}
            Ok(PushSettled::DeadLettered) => {
                stats.failed_permanently.fetch_add(1, Ordering::Relaxed);
            }
            Ok(PushSettled::Retried) => {
                stats.retried.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) if failed => {
                stats.retried.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {}
        }
        if let Err(error) = settled {
            tracing::warn!(queue = %destination.queue, message_id = %message.message_id, %error, "push result not recorded; the lease will run out and the message goes out again");
        }
    }

    /// Sends one request; with the log on, also what it sent and got ([`Recording`]; none when
    /// the transform failed and nothing was sent).
    async fn call(
        &self,
        destination: &Destination,
        message: &ClaimedMessage,
    ) -> (Outcome, Option<Recording>) {
        let spec = &destination.spec;
        let (body, content_type) = match self.request_body(destination, message).await {
            Ok(body) => body,
            Err(TransformError { error, permanent }) => {
                let outcome = Outcome::Failed {
                    status: None,
                    error,
                    permanent,
                    retry_after_ms: None,
                };
                return (outcome, None);
            }
        };
        let tenant = self.auth.is_tenant_owned(&destination.queue);
        let client = if tenant {
            &self.tenant_http
        } else {
            &self.http
        };
        if tenant
            && reqwest::Url::parse(&spec.url)
                .is_ok_and(|url| crate::egress::names_internal_host(&url))
        {
            let outcome = Outcome::Failed {
                status: None,
                error:
                    "the destination is an internal address, which a tenant's queue may not call"
                        .to_owned(),
                permanent: true,
                retry_after_ms: None,
            };
            return (outcome, None);
        }
        let mut request = client
            .request(destination.method.clone(), request_url(spec))
            .timeout(destination.timeout)
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .header("sluice-message-id", message.message_id.to_string())
            .header("sluice-attempt", message.attempts.to_string())
            .header("sluice-queue", destination.queue.as_str());
        if let Some(key) = &message.idempotency_key {
            request = request.header("idempotency-key", key.as_str());
        }
        // This attempt's span (crate::telemetry), so the destination can continue the trace.
        if let Some(traceparent) = crate::telemetry::traceparent(&tracing::Span::current()) {
            request = request.header(crate::telemetry::TRACEPARENT, traceparent);
        }
        for (name, value) in spec.headers.iter().flatten() {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(signer) = &destination.signer {
            let timestamp_s = self.clock.now_ms().div_euclid(1000);
            for (name, value) in signer.headers(&message.message_id.to_string(), timestamp_s, &body)
            {
                request = request.header(name, value);
            }
        }
        let (sent, mut recording) = match request.body(body).build() {
            Ok(request) => {
                let recording = self.delivery_log.enabled().then(|| {
                    Recording::start(
                        &request,
                        spec,
                        &destination.scrubber,
                        message.attempts,
                        self.clock.now_ms(),
                    )
                });
                (client.execute(request).await, recording)
            }
            Err(error) => (Err(error), None),
        };
        let response = match sent {
            Ok(response) => response,
            Err(error) => {
                // Only the URL's origin: the rest may hold secrets (crate::redact).
                let error = error.without_url();
                let error = if error.is_timeout() {
                    format!("timed out after {} ms", destination.timeout.as_millis())
                } else if error.is_connect() {
                    format!(
                        "cannot connect to {}: {}",
                        crate::redact::url_origin(&spec.url),
                        root_cause(&error)
                    )
                } else {
                    format!("request failed: {}", root_cause(&error))
                };
                let outcome = Outcome::Failed {
                    status: None,
                    error,
                    permanent: false,
                    retry_after_ms: None,
                };
                return (outcome, recording);
            }
        };
        let status = response.status();
        if let Some(recording) = &mut recording {
            recording.response(&response, &self.delivery_log, &destination.scrubber);
        }
        // A success's body is read only for the log; a failure's also for `last_error`.
        let read_bytes = if recording.is_some() {
            self.delivery_log.body_bytes + 1
        } else {
            0
        };
        if status.is_success() {
            if let Some(recording) = &mut recording
                && read_bytes > 0
            {
                let body = read_bytes_prefix(response, read_bytes).await;
                recording.body(&body, &self.delivery_log, &destination.scrubber);
            }
            let outcome = Outcome::Delivered {
                status: status.as_u16(),
            };
            return (outcome, recording);
        }
        let retry_after_ms = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map(|seconds| seconds.saturating_mul(1000).clamp(0, RETRY_AFTER_MAX_MS));
        let body = read_bytes_prefix(response, read_bytes.max(ERROR_BODY_BYTES)).await;
        if let Some(recording) = &mut recording {
            recording.body(&body, &self.delivery_log, &destination.scrubber);
        }
        let snippet = one_line(&body[..body.len().min(ERROR_BODY_BYTES)]);
        let code = status.as_u16();
        let retryable =
            matches!(code, 408 | 429) || status.is_server_error() || status.is_redirection();
        let outcome = Outcome::Failed {
            status: Some(code),
            error: if snippet.is_empty() {
                format!("HTTP {code}")
            } else {
                format!("HTTP {code}: {snippet}")
            },
            permanent: !retryable && !spec.retry_client_errors.unwrap_or(false),
            retry_after_ms,
        };
        (outcome, recording)
    }

    /// The request body: the message body as stored, or the transform's output.
    async fn request_body(
        &self,
        destination: &Destination,
        message: &ClaimedMessage,
    ) -> Result<(Vec<u8>, &'static str), TransformError> {
        let payload = &message.payload;
        let Some(transform) = &destination.transform else {
            let content_type = if payload.body_kind == BodyKind::Json {
                "application/json"
            } else {
                "application/octet-stream"
            };
            return Ok((payload.body_bytes.clone(), content_type));
        };
        let body: Value = if payload.body_kind == BodyKind::Json {
            serde_json::from_slice(&payload.body_bytes).unwrap_or(Value::Null)
        } else {
            use base64::Engine;
            Value::String(base64::engine::general_purpose::STANDARD.encode(&payload.body_bytes))
        };
        let input = serde_json::json!({
            "body": body,
            "headers": payload.headers,
            "message_id": message.message_id.to_string(),
            "attempts": message.attempts,
            "enqueued_at": format_rfc3339(message.enqueued_at_ms),
            "key": message.key,
            "id": message.idempotency_key,
        });
        let failed = |error: String| TransformError {
            error,
            permanent: true,
        };
        let output = match self
            .expr
            .eval(&[crate::expr::program(transform)], &input)
            .await
        {
            Ok(mut results) if !results.is_empty() => results.swap_remove(0),
            Ok(_) => Ok(None),
            // Busy workers say nothing about the message: try it again later.
            Err(EvalError::Unavailable(error)) => {
                return Err(TransformError {
                    error: format!("push transform not run: {error}"),
                    permanent: false,
                });
            }
            Err(EvalError::Stopped(error)) => {
                return Err(failed(format!("push transform: {error}")));
            }
        }
        .map_err(|e| failed(format!("push transform failed: {e}")))?
        .ok_or_else(|| failed("push transform produced no output".into()))?;
        let bytes = serde_json::to_vec(&output).map_err(|e| failed(e.to_string()))?;
        Ok((bytes, "application/json"))
    }
}

/// Why a transform gave no body: permanent unless the expression workers were busy.
struct TransformError {
    error: String,
    permanent: bool,
}

enum Outcome {
    Delivered {
        status: u16,
    },
    Failed {
        status: Option<u16>,
        error: String,
        permanent: bool,
        retry_after_ms: Option<i64>,
    },
}

/// The first `max` bytes of an answer's body (fewer when it is shorter or breaks off).
async fn read_bytes_prefix(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            _ => break,
        }
    }
    bytes.truncate(max);
    bytes
}

/// Bytes as text on one line (for `last_error`).
fn one_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// The URL a push request goes to. A configured `authorization` header is the credential:
/// the URL's user info (which the HTTP client would turn into a second, Basic one) is left
/// out then, so the destination sees one Authorization header, the configured one.
fn request_url(spec: &PushSpec) -> String {
    let configured = spec
        .headers
        .iter()
        .flatten()
        .any(|(name, _)| name.eq_ignore_ascii_case("authorization"));
    match reqwest::Url::parse(&spec.url) {
        Ok(mut url) if configured && (!url.username().is_empty() || url.password().is_some()) => {
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.into()
        }
        // A URL that does not parse fails when the request is built, as it always did.
        _ => spec.url.clone(),
    }
}
