//! OpenTelemetry traces, exported over OTLP/HTTP (protobuf) when `[tracing] otlp_endpoint` is
//! set; off by default, and then nothing here costs more than one atomic load per request.
//!
//! Spans are ordinary `tracing` spans turned into OpenTelemetry spans by `tracing-opentelemetry`
//! (the layer is installed by `sluice serve` with its log subscriber, see [`otlp_layer`]):
//! - `http_request` (server) for every request, the child of the caller's span when the request
//!   carries a W3C `traceparent` header;
//! - `enqueue` (producer) for storing messages; its trace context is stored with each message
//!   as the message header [`TRACEPARENT`] (unless the message already has one), so a consumer
//!   sees it among the received message's headers and can continue the trace;
//! - `push_attempt` (client) for each request to a push destination, a child of the stored
//!   context, which the request carries on to the destination in its own `traceparent` header.
//!
//! Why a message header and not a new column: messages already carry string headers end to end
//! (stored, received, given to push transforms), so the context survives restarts and reaches
//! every consumer with no change to the store's schema.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use serde::Deserialize;
use sluice_core::message::{ClaimedMessage, Payload};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// The W3C trace context header, on requests and as a message header.
pub const TRACEPARENT: &str = "traceparent";
/// The default `[tracing] service_name`.
pub const DEFAULT_SERVICE_NAME: &str = "sluice";
/// The default `[tracing] export_timeout_ms`.
pub const DEFAULT_EXPORT_TIMEOUT_MS: u64 = 10_000;
/// Bytes of a collector's answer read at most (it is a small protobuf message).
const RESPONSE_BYTES_MAX: usize = 64 * 1024;

/// Set once the OTLP layer is installed: spans are made only then. Process-wide, like the
/// tracing subscriber it stands for.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// `[tracing]` as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TracingSpec {
    /// The collector's OTLP/HTTP base URL, e.g. `http://127.0.0.1:4318`.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans.
    pub service_name: Option<String>,
    /// Share of new traces sampled, 0.0 to 1.0.
    pub sample_ratio: Option<f64>,
    /// Time one export request may take, in ms.
    pub export_timeout_ms: Option<u64>,
}

/// `[tracing]`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TracingConfig {
    /// Where spans are sent (the `/v1/traces` URL); `None`: tracing off.
    pub traces_url: Option<reqwest::Url>,
    /// `service.name` of the exported spans.
    pub service_name: String,
    /// Share of new traces sampled (a request with a `traceparent` follows its caller's choice).
    pub sample_ratio: f64,
    /// Time one export request may take.
    pub export_timeout: Duration,
}

impl Default for TracingConfig {
    fn default() -> Self {
        Self {
            traces_url: None,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            sample_ratio: 1.0,
            export_timeout: Duration::from_millis(DEFAULT_EXPORT_TIMEOUT_MS),
        }
    }
}

impl TracingConfig {
    /// Validates `[tracing]`.
    pub fn from_spec(spec: TracingSpec) -> Result<Self, String> {
        let defaults = Self::default();
        let traces_url = match spec.otlp_endpoint.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(endpoint) => Some(traces_url(endpoint)?),
        };
        let service_name = spec.service_name.unwrap_or(defaults.service_name);
        if service_name.trim().is_empty() || service_name.len() > 255 {
            return Err("[tracing] service_name: must be 1 to 255 bytes long".into());
        }
        let sample_ratio = spec.sample_ratio.unwrap_or(defaults.sample_ratio);
        if !(0.0..=1.0).contains(&sample_ratio) {
            return Err(format!(
                "[tracing] sample_ratio {sample_ratio} is not between 0.0 and 1.0"
            ));
        }
        let export_timeout_ms = spec.export_timeout_ms.unwrap_or(DEFAULT_EXPORT_TIMEOUT_MS);
        if !(1..=600_000).contains(&export_timeout_ms) {
            return Err(format!(
                "[tracing] export_timeout_ms {export_timeout_ms} is not between 1 and 600000"
            ));
        }
        Ok(Self {
            traces_url,
            service_name,
            sample_ratio,
            export_timeout: Duration::from_millis(export_timeout_ms),
        })
    }
}

/// The traces URL of an endpoint: a base URL (path `/`, as `OTEL_EXPORTER_OTLP_ENDPOINT`) gets
/// the OTLP/HTTP path `/v1/traces`; a URL with a path is used as it is.
fn traces_url(endpoint: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(endpoint)
        .map_err(|e| format!("[tracing] otlp_endpoint {endpoint:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(format!(
            "[tracing] otlp_endpoint {endpoint:?}: an http:// or https:// URL is needed (OTLP/HTTP)"
        ));
    }
    if url.path() == "/" {
        return url
            .join("v1/traces")
            .map_err(|e| format!("[tracing] otlp_endpoint {endpoint:?}: {e}"));
    }
    Ok(url)
}

/// Flushes and stops the exporter; keep it until the server stopped.
#[derive(Debug)]
pub struct TracingGuard {
    provider: SdkTracerProvider,
}

impl TracingGuard {
    /// Sends the spans still queued (within the export timeout) and stops exporting.
    pub async fn shutdown(self) {
        let provider = self.provider;
        // The batch processor's thread exports through this runtime: wait off its workers.
        let stopped = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(error)) = stopped {
            tracing::warn!(%error, "the last trace spans could not be exported");
        }
    }
}

/// The `tracing` layer that exports spans over OTLP/HTTP, or `None` when tracing is off.
/// Must run inside the Tokio runtime that will carry the exports.
///
/// Only this server's spans (at info level and above) and its warnings and errors (as span
/// events) are exported, whatever the log filter (`SLUICE_LOG`) lets through to the log.
#[allow(clippy::type_complexity)]
pub fn otlp_layer<S>(
    config: &TracingConfig,
) -> Result<Option<(Box<dyn Layer<S> + Send + Sync>, TracingGuard)>, String>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let Some(url) = &config.traces_url else {
        return Ok(None);
    };
    let client = ExportClient {
        http: reqwest::Client::builder()
            .timeout(config.export_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("[tracing]: cannot make the export client: {e}"))?,
        runtime: tokio::runtime::Handle::try_current()
            .map_err(|_| "[tracing]: the exporter needs a Tokio runtime".to_owned())?,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url.as_str())
        .with_timeout(config.export_timeout)
        .build()
        .map_err(|e| format!("[tracing] otlp_endpoint: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            config.sample_ratio,
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    let tracer = provider.tracer("sluice");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
            let level = *metadata.level();
            metadata.target().starts_with("sluice_server")
                && if metadata.is_span() {
                    level <= tracing::Level::INFO
                } else {
                    level <= tracing::Level::WARN
                }
        }));
    EXPORTING.store(true, Ordering::SeqCst);
    Ok(Some((Box::new(layer), TracingGuard { provider })))
}

/// True once spans are exported.
fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// The span of one HTTP request, child of the caller's `traceparent` if it sent one; `None`
/// when traces are not exported.
pub fn http_span(request: &Request, route: &str) -> Option<Span> {
    if !exporting() {
        return None;
    }
    let method = request.method().as_str();
    let span = tracing::info_span!(
        "http_request",
        otel.name = format!("{method} {route}"),
        otel.kind = "server",
        otel.status_code = Empty,
        http.request.method = method,
        http.route = route,
        url.path = request.uri().path(),
        http.response.status_code = Empty,
    );
    let parent = TraceContextPropagator::new()
        .extract(&opentelemetry_http::HeaderExtractor(request.headers()));
    adopt_parent(&span, parent);
    Some(span)
}

/// Records the answer on a request's span (a 5xx marks it failed).
pub fn record_status(span: &Span, status: StatusCode) {
    span.record("http.response.status_code", status.as_u16());
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of storing messages in `queue` (disabled when traces are not exported).
pub fn enqueue_span(queue: &str, messages: usize) -> Span {
    if !exporting() {
        return Span::none();
    }
    tracing::info_span!(
        "enqueue",
        otel.name = format!("enqueue {queue}"),
        otel.kind = "producer",
        messaging.system = "sluice",
        messaging.operation.type = "send",
        messaging.destination.name = queue,
        messaging.batch.message_count = messages,
    )
}

/// The W3C `traceparent` of `span`, or `None` when it is not exported.
pub fn traceparent(span: &Span) -> Option<String> {
    if span.is_none() || !exporting() {
        return None;
    }
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove(TRACEPARENT)
}

/// Stores `traceparent` with a message, unless it already carries one of its own.
pub fn carry(payload: &mut std::sync::Arc<Payload>, traceparent: &str) {
    if !payload.headers.contains_key(TRACEPARENT) {
        std::sync::Arc::make_mut(payload)
            .headers
            .insert(TRACEPARENT.to_owned(), traceparent.to_owned());
    }
}

/// The span of one request to a push destination, child of the trace context stored with the
/// message (disabled when traces are not exported).
pub fn push_span(queue: &str, message: &ClaimedMessage) -> Span {
    if !exporting() {
        return Span::none();
    }
    let span = tracing::info_span!(
        "push_attempt",
        otel.name = format!("push {queue}"),
        otel.kind = "client",
        otel.status_code = Empty,
        messaging.system = "sluice",
        messaging.operation.type = "process",
        messaging.destination.name = queue,
        messaging.message.id = %message.message_id,
        sluice.attempt = message.attempts,
        http.response.status_code = Empty,
    );
    if let Some(traceparent) = message.payload.headers.get(TRACEPARENT) {
        let carrier = HashMap::from([(TRACEPARENT.to_owned(), traceparent.clone())]);
        adopt_parent(&span, TraceContextPropagator::new().extract(&carrier));
    }
    span
}

/// Records a push request's answer: its status if there was one, and whether it failed.
pub fn record_push(span: &Span, status: Option<u16>, failed: bool) {
    if let Some(status) = status {
        span.record("http.response.status_code", status);
    }
    if failed {
        span.record("otel.status_code", "ERROR");
    }
}

/// Makes `parent` the parent of `span` when it names a valid remote span.
fn adopt_parent(span: &Span, parent: opentelemetry::Context) {
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
}

/// Sends OTLP requests with the server's own HTTP client (reqwest with rustls) on the server's
/// runtime, as the batch processor exports from a thread of its own.
#[derive(Debug)]
struct ExportClient {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for ExportClient {
    async fn send_bytes(
        &self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> Result<
        opentelemetry_http::Response<opentelemetry_http::Bytes>,
        opentelemetry_http::HttpError,
    > {
        let request = reqwest::Request::try_from(request)?;
        let http = self.http.clone();
        let (status, headers, body) = self
            .runtime
            .spawn(async move {
                let mut response = http.execute(request).await?;
                let status = response.status();
                let headers = std::mem::take(response.headers_mut());
                let mut body = Vec::new();
                while let Some(chunk) = response.chunk().await? {
                    body.extend_from_slice(&chunk);
                    if body.len() >= RESPONSE_BYTES_MAX {
                        body.truncate(RESPONSE_BYTES_MAX);
                        break;
                    }
                }
                Ok::<_, reqwest::Error>((status, headers, body))
            })
            .await??;
        let mut response = opentelemetry_http::Response::new(opentelemetry_http::Bytes::from(body));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(endpoint: &str) -> TracingSpec {
        TracingSpec {
            otlp_endpoint: Some(endpoint.into()),
            ..TracingSpec::default()
        }
    }

    #[test]
    fn a_base_url_gets_the_otlp_traces_path() {
        let config = TracingConfig::from_spec(spec("http://127.0.0.1:4318")).unwrap();
        assert_eq!(
            config.traces_url.unwrap().as_str(),
            "http://127.0.0.1:4318/v1/traces"
        );
        let config = TracingConfig::from_spec(spec("https://otel.example/custom/traces")).unwrap();
        assert_eq!(
            config.traces_url.unwrap().as_str(),
            "https://otel.example/custom/traces"
        );
    }

    #[test]
    fn tracing_is_off_by_default_and_bad_values_are_refused() {
        assert_eq!(
            TracingConfig::from_spec(TracingSpec::default()).unwrap(),
            TracingConfig::default()
        );
        assert!(TracingConfig::default().traces_url.is_none());
        for bad in ["127.0.0.1:4318", "grpc://collector:4317", "not a url"] {
            let error = TracingConfig::from_spec(spec(bad)).unwrap_err();
            assert!(error.contains("otlp_endpoint"), "{bad}: {error}");
        }
        let error = TracingConfig::from_spec(TracingSpec {
            sample_ratio: Some(1.5),
            ..TracingSpec::default()
        })
        .unwrap_err();
        assert!(error.contains("sample_ratio"), "{error}");
        let error = TracingConfig::from_spec(TracingSpec {
            export_timeout_ms: Some(0),
            ..TracingSpec::default()
        })
        .unwrap_err();
        assert!(error.contains("export_timeout_ms"), "{error}");
    }

    #[test]
    fn a_message_keeps_its_own_traceparent() {
        let theirs = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let mut payload = std::sync::Arc::new(Payload::default());
        carry(&mut payload, theirs);
        carry(
            &mut payload,
            "00-11111111111111111111111111111111-2222222222222222-01",
        );
        assert_eq!(payload.headers[TRACEPARENT], theirs);
    }
}
