//! OpenTelemetry traces (`[tracing]`): a server exporting over OTLP/HTTP to an in-process
//! collector that decodes the protobuf requests with `opentelemetry-proto`; the trace context
//! of an enqueue request goes on through the message to its push delivery and its consumers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::support::TestServer;
use crate::support::destination::Destination;

/// Longest wait for something the server does in the background (exports are batched).
const WAIT: Duration = Duration::from_secs(20);
/// The caller's trace: the enqueue request arrives with this `traceparent`.
const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Exported {
    service: String,
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
}

/// A minimal OTLP/HTTP collector: `POST /v1/traces` with protobuf bodies.
struct Collector {
    url: String,
    spans: Arc<Mutex<Vec<Exported>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Collector {
    async fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(receive))
            .with_state(spans.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Collector { url, spans, task }
    }

    /// Waits until the span with this id arrived.
    async fn wait_for_span(&self, span_id: &str) -> Exported {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let found = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .find(|s| s.span_id == span_id)
                .cloned();
            if let Some(span) = found {
                return span;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no span {span_id}: {:#?}",
                self.spans.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until spans named `names` all arrived; returns every span so far.
    async fn wait_for(&self, names: &[&str]) -> Vec<Exported> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let spans = self.spans.lock().unwrap().clone();
            if names
                .iter()
                .all(|name| spans.iter().any(|s| s.name == *name))
                || tokio::time::Instant::now() >= deadline
            {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn receive(
    State(spans): State<Arc<Mutex<Vec<Exported>>>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    assert_eq!(
        headers.get("content-type").map(|v| v.to_str().unwrap()),
        Some("application/x-protobuf")
    );
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf request");
    let mut spans = spans.lock().unwrap();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(name) => Some(name.clone()),
                _ => None,
            })
            .unwrap_or_default();
        for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
            spans.push(Exported {
                service: service.clone(),
                name: span.name,
                kind: span.kind,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
            });
        }
    }
    StatusCode::OK
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `traceparent` → (trace id, parent span id).
fn parse_traceparent(value: &str) -> (String, String) {
    let parts: Vec<&str> = value.split('-').collect();
    assert_eq!(parts.len(), 4, "{value}");
    assert_eq!(parts[0], "00", "{value}");
    assert_eq!(parts[3], "01", "sampled: {value}");
    (parts[1].to_owned(), parts[2].to_owned())
}

/// The one span named `name` in the caller's trace.
fn span<'a>(spans: &'a [Exported], name: &str) -> &'a Exported {
    let found: Vec<&Exported> = spans
        .iter()
        .filter(|s| s.name == name && s.trace_id == CALLER_TRACE)
        .collect();
    assert_eq!(found.len(), 1, "{name}: {spans:#?}");
    found[0]
}

/// `POST /v1/queues/{queue}/messages` with the caller's `traceparent`.
async fn enqueue_traced(server: &TestServer, queue: &str, message: Value) -> Value {
    let response = server
        .client()
        .post(format!("{}/v1/queues/{queue}/messages", server.url()))
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .json(&message)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

#[tokio::test]
async fn an_enqueue_to_push_round_trip_is_one_trace() {
    // Proves: with [tracing] otlp_endpoint set, an enqueue request carrying a traceparent is
    // exported as a server span that is the child of the caller's span, with an enqueue span
    // under it; the push delivery is a client span, child of the enqueue span, in the same
    // trace, and the request to the destination carries a traceparent naming that push span;
    // a received message carries the enqueue's context as its traceparent header; a message
    // that brings its own traceparent keeps it; spans name the configured service.
    let collector = Collector::start().await;
    let destination = Destination::start().await;
    let config = format!(
        "[tracing]\notlp_endpoint = \"{}\"\nservice_name = \"sluice-under-test\"\nsample_ratio = 1.0\n",
        collector.url
    );
    let server = TestServer::builder()
        .config(&config)
        // Export every 100 ms instead of every 5 s (an OpenTelemetry SDK variable).
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start()
        .await;
    server
        .put_queue("traced", json!({"push": {"url": destination.url("/in")}}))
        .await;
    server.put_queue("pulled", json!({})).await;

    enqueue_traced(&server, "traced", json!({"body": {"n": 1}})).await;
    let pushed = destination.wait_for(1, WAIT).await;
    // Spans are exported under their OpenTelemetry names (docs/tracing.md).
    let spans = collector
        .wait_for(&[
            "POST /v1/queues/{queue}/messages",
            "enqueue traced",
            "push traced",
        ])
        .await;
    let request = span(&spans, "POST /v1/queues/{queue}/messages");
    assert_eq!(request.parent_span_id, CALLER_SPAN, "{request:?}");
    assert_eq!(request.kind, SpanKind::Server as i32);
    assert_eq!(request.service, "sluice-under-test");
    // Between them, the `request` span of the log lines (with the request id).
    let inner = span(&spans, "request");
    assert_eq!(inner.parent_span_id, request.span_id, "{spans:#?}");
    let enqueue = span(&spans, "enqueue traced");
    assert_eq!(enqueue.parent_span_id, inner.span_id, "{spans:#?}");
    assert_eq!(enqueue.kind, SpanKind::Producer as i32);
    let push = span(&spans, "push traced");
    assert_eq!(push.parent_span_id, enqueue.span_id, "{spans:#?}");
    assert_eq!(push.kind, SpanKind::Client as i32);

    let (trace, parent) = parse_traceparent(pushed[0].expect_header("traceparent"));
    assert_eq!(trace, CALLER_TRACE);
    assert_eq!(
        parent, push.span_id,
        "the destination's parent is the push span"
    );

    // A consumer receives the context of the enqueue as a message header.
    enqueue_traced(&server, "pulled", json!({"body": "a"})).await;
    let own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    enqueue_traced(
        &server,
        "pulled",
        json!({"body": "b", "headers": {"traceparent": own}}),
    )
    .await;
    let received = server.receive("pulled", json!({"max": 2})).await;
    assert_eq!(received.len(), 2, "{received:?}");
    let header = |body: &str| {
        let message = received
            .iter()
            .find(|m| m["body"] == body)
            .unwrap_or_else(|| panic!("{body}: {received:?}"));
        message["headers"]["traceparent"]
            .as_str()
            .unwrap_or_else(|| panic!("no traceparent: {message}"))
            .to_owned()
    };
    let (trace, parent) = parse_traceparent(&header("a"));
    assert_eq!(trace, CALLER_TRACE);
    let carried = collector.wait_for_span(&parent).await;
    assert_eq!(carried.name, "enqueue pulled", "{carried:?}");
    assert_eq!(carried.trace_id, CALLER_TRACE);
    assert_eq!(header("b"), own, "a message's own traceparent is kept");
}

#[tokio::test]
async fn without_an_endpoint_nothing_is_traced_or_added() {
    // Proves: a [tracing] section without otlp_endpoint is valid and leaves tracing off, as
    // it is by default: a message keeps exactly the headers it was given and a push request
    // carries no traceparent, even when the enqueue request had one.
    let destination = Destination::start().await;
    let server = TestServer::builder()
        .config("[tracing]\nservice_name = \"quiet\"\nsample_ratio = 0.5\n")
        .start()
        .await;
    server
        .put_queue("plain", json!({"push": {"url": destination.url("/in")}}))
        .await;
    server.put_queue("plain-pulled", json!({})).await;
    enqueue_traced(&server, "plain", json!({"body": 1})).await;
    let pushed = destination.wait_for(1, WAIT).await;
    assert_eq!(pushed[0].header("traceparent"), None, "{:?}", pushed[0]);
    enqueue_traced(
        &server,
        "plain-pulled",
        json!({"body": 2, "headers": {"x": "y"}}),
    )
    .await;
    let received = server.receive("plain-pulled", json!({"max": 1})).await;
    assert_eq!(received[0]["headers"], json!({"x": "y"}), "{received:?}");
}
