//! `POST /hooks/{name}`: verify, shape, enqueue, answer `202 Accepted`.
//!
//! The order matters: the size limit and the signature are checked on the raw bytes before
//! anything is parsed or stored; a body that cannot become a valid message (not JSON where JSON
//! is required, a failing expression, a schema violation) is stored in the queue's dead-letter
//! queue with the reason instead of being bounced, so nothing a sender delivered is lost.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sluice_core::Millis;
use sluice_core::message::BodyKind;
use sluice_core::queue::limits;
use sluice_ops::{DeadLettered, Enqueue, EventOutcome, EventRequest, MessageRequest, OpsError};
use sluice_webhooks::verify::{Request, slack_challenge};
use sluice_wire::{WebhookReceiptOut, format_rfc3339};

use super::{Endpoint, IdSource, Outcome};
use crate::error::{ApiError, ErrorCode};
use crate::expr::{self, EvalError, ProgramResult};
use crate::state::AppState;
/// The senders' signature headers and the timestamps they sign: dropped unless the endpoint has
/// `keep_signature_headers`, since they would let anyone who can read the queue post the same
/// delivery again (schemes without a timestamp never go stale). A generic `hmac` endpoint's own
/// header is dropped alike.
const SIGNATURE_HEADERS: [&str; 12] = [
    "webhook-signature",
    "webhook-timestamp",
    "svix-signature",
    "svix-timestamp",
    "x-hub-signature",
    "x-hub-signature-256",
    "stripe-signature",
    "x-slack-signature",
    "x-slack-request-timestamp",
    "x-shopify-hmac-sha256",
    "x-pagerduty-signature",
    "x-twilio-signature",
];
/// Request headers never stored with a message: credentials, and what only concerned the
/// connection.
const HEADERS_NOT_STORED: [&str; 14] = [
    "authorization",
    "cookie",
    "proxy-authorization",
    "x-api-key",
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "accept-encoding",
    "keep-alive",
    "te",
    "upgrade",
    "expect",
    "proxy-connection",
];
/// Most headers stored with a message (the message limits).
const STORED_HEADERS_MAX: usize = 64;
const STORED_HEADER_BYTES_MAX: usize = 64 * 1024;

/// What the expressions made of an event.
#[derive(Debug, Default)]
struct Shaped {
    keep: bool,
    idempotency_key: Option<String>,
    body: Option<Value>,
    key: Option<String>,
    priority: Option<i32>,
}

/// `POST /hooks/{name}`
#[utoipa::path(post, operation_id = "webhook_receive", path = "/hooks/{name}", tag = "hooks", params(("name" = String, Path, description = "Webhook endpoint")),
    request_body(description = "The sender's payload, as it signs it: JSON, a form, or any bytes",
        content((serde_json::Value = "application/json"),
            (std::collections::BTreeMap<String, String> = "application/x-www-form-urlencoded"),
            (String = "text/plain"))),
    responses(
        (status = 202, description = "Stored (or dead-lettered, see `dead_lettered`)", body = WebhookReceiptOut),
        (status = 200, description = "A duplicate delivery, or ignored by the filter (JSON); for Slack's `url_verification` handshake, its `challenge` (text)",
            content((WebhookReceiptOut = "application/json"), (String = "text/plain"))),
        (status = 401, description = "Signature missing, wrong or stale", body = sluice_wire::ErrorBody),
        (status = 404, body = sluice_wire::ErrorBody), (status = 413, body = sluice_wire::ErrorBody),
        (status = 422, description = "The event cannot become a message and the queue has no dead-letter queue to keep it in", body = sluice_wire::ErrorBody),
        (status = 503, description = "queue_full, with Retry-After", body = sluice_wire::ErrorBody)))]
pub async fn receive(
    State(app): State<AppState>,
    Path(name): Path<String>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(endpoint) = app.webhooks.get(&name) else {
        return ApiError::new(
            ErrorCode::WebhookNotFound,
            format!("no webhook endpoint {name:?}"),
        )
        .into_response();
    };
    let bytes = match read_verified(&app, &endpoint, &uri, &headers, body).await {
        Ok(bytes) => bytes,
        Err((reason, error)) => {
            endpoint.stats.count(Outcome::Rejected(reason));
            return error.into_response();
        }
    };
    // Slack's handshake, answered once the signature holds; it is no event, so nothing is
    // stored (counted with the ignored requests).
    if endpoint.answers_slack_handshake()
        && let Some(challenge) = slack_challenge(&bytes)
    {
        endpoint.stats.count(Outcome::Ignored);
        return (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            ],
            challenge,
        )
            .into_response();
    }
    match handle(&app, &endpoint, peer, &uri, &headers, bytes).await {
        Ok((status, outcome, receipt)) => {
            endpoint.stats.count(outcome);
            (status, Json(receipt)).into_response()
        }
        Err((reason, error)) => {
            endpoint.stats.count(Outcome::Rejected(reason));
            error.into_response()
        }
    }
}

type Handled = Result<(StatusCode, Outcome, WebhookReceiptOut), (&'static str, ApiError)>;

/// The body within the endpoint's size limit, once its signature holds.
async fn read_verified(
    app: &AppState,
    endpoint: &Endpoint,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, (&'static str, ApiError)> {
    let bytes = match axum::body::to_bytes(body, endpoint.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return Err((
                ErrorCode::TooLarge.as_str(),
                ApiError::too_large(format!(
                    "the body is larger than this endpoint's max_body_bytes ({})",
                    endpoint.max_body_bytes
                )),
            ));
        }
    };
    if let Some(verifier) = &endpoint.verifier {
        let url = signed_url(endpoint, uri, headers, app.tls);
        let request = Request {
            url: &url,
            headers,
            body: &bytes,
        };
        if let Err(error) = verifier.verify(&request, app.now_ms().div_euclid(1000)) {
            let error = ApiError::signature_refused(&error);
            return Err((error.code.as_str(), error));
        }
    }
    Ok(bytes)
}

async fn handle(
    app: &AppState,
    endpoint: &Arc<Endpoint>,
    peer: SocketAddr,
    uri: &Uri,
    headers: &HeaderMap,
    bytes: Bytes,
) -> Handled {
    let now_ms = app.now_ms();
    let to = app
        .ops
        .enqueue_to(endpoint.spec.queue.clone())
        .await
        .map_err(|e| (ErrorCode::QueueNotFound.as_str(), ApiError::from(e)))?;
    let event = Event::new(
        (headers, uri, &bytes, peer),
        now_ms,
        to.has_schema() || endpoint.id_from_body(),
        endpoint.has_expressions(),
    );
    if let Some(parse_error) = &event.parse_error {
        return dead_letter(app, endpoint, to, &bytes, headers, parse_error.clone()).await;
    }
    let shaped = match shape(app, endpoint, &event).await {
        Ok(shaped) => shaped,
        Err(EvalError::Stopped(error)) => {
            return dead_letter(app, endpoint, to, &bytes, headers, error).await;
        }
        // Busy workers say nothing about the event: the sender retries later.
        Err(EvalError::Unavailable(error)) => {
            return Err((
                ErrorCode::Unavailable.as_str(),
                ApiError::unavailable(format!("the endpoint's expressions did not run: {error}")),
            ));
        }
    };
    if !shaped.keep {
        return Ok((
            StatusCode::OK,
            Outcome::Ignored,
            WebhookReceiptOut {
                ignored: Some(true),
                ..WebhookReceiptOut::default()
            },
        ));
    }
    // What the queue's schema checks: the transformed body, else the body as parsed.
    let schema_body = to
        .has_schema()
        .then(|| shaped.body.clone().or_else(|| event.body.clone()))
        .flatten();
    let body = match (&shaped.body, event.form) {
        (Some(transformed), _) => (
            serde_json::to_vec(transformed).unwrap_or_default(),
            BodyKind::Json,
        ),
        (None, BodyForm::Json) => (bytes.to_vec(), BodyKind::Json),
        (None, BodyForm::Form) => (
            serde_json::to_vec(event.body.as_ref().unwrap_or(&Value::Null)).unwrap_or_default(),
            BodyKind::Json,
        ),
        (None, BodyForm::Raw) => (bytes.to_vec(), BodyKind::Bytes),
    };
    let request = EventRequest {
        message: MessageRequest {
            body,
            id: shaped.idempotency_key.clone(),
            key: shaped.key,
            headers: Some(stored_headers(endpoint, headers)),
            priority: shaped.priority,
            delay_ms: None,
            not_before: None,
        },
        schema_body,
        received: bytes.to_vec(),
    };
    if let Some(topic) = &endpoint.spec.topic {
        let idempotency_key = shaped.idempotency_key;
        return publish(app, endpoint, to, topic, request, headers, idempotency_key).await;
    }
    let outcome = app.ops.enqueue_event(to, request).await.map_err(refusal)?;
    Ok(match outcome {
        EventOutcome::Enqueued {
            message_id,
            created: true,
            ..
        } => (
            StatusCode::ACCEPTED,
            Outcome::Accepted,
            WebhookReceiptOut {
                queued: true,
                message_id: Some(message_id),
                idempotency_key: shaped.idempotency_key,
                ..WebhookReceiptOut::default()
            },
        ),
        EventOutcome::Enqueued {
            message_id,
            created: false,
            state,
            result,
        } => (
            StatusCode::OK,
            Outcome::Duplicate,
            WebhookReceiptOut {
                queued: true,
                message_id: Some(message_id),
                idempotency_key: shaped.idempotency_key,
                duplicate: Some(true),
                state: state.map(|state| state.as_str().to_owned()),
                result,
                ..WebhookReceiptOut::default()
            },
        ),
        EventOutcome::DeadLettered(kept) => dead_lettered(kept),
    })
}

/// Publishes an accepted event to the endpoint's topic. A publish the topic refuses for what
/// the event is (a copy's schema or size, a filter that failed) keeps the event in the
/// endpoint queue's dead-letter queue with the reason, as an event that cannot become a
/// message; one refused for now (a full queue, workers busy) is answered so the sender retries.
async fn publish(
    app: &AppState,
    endpoint: &Endpoint,
    to: Enqueue,
    topic: &str,
    request: EventRequest,
    headers: &HeaderMap,
    idempotency_key: Option<String>,
) -> Handled {
    let topic = match crate::topics::find(app, topic) {
        Ok(topic) => topic,
        // Deleted since the endpoint was defined: the event is kept, not bounced (a sender
        // may never send it again).
        Err(error) => {
            let bytes = Bytes::from(request.received);
            return dead_letter(app, endpoint, to, &bytes, headers, error.message).await;
        }
    };
    let copies = match crate::topics::publish(app, &topic, request.message).await {
        Ok(copies) => copies,
        Err(error)
            if matches!(
                error.code,
                ErrorCode::InvalidField | ErrorCode::SchemaViolation | ErrorCode::TooLarge
            ) =>
        {
            let bytes = Bytes::from(request.received);
            let reason = format!("the topic refused the event: {}", error.message);
            return dead_letter(app, endpoint, to, &bytes, headers, reason).await;
        }
        Err(error) => return Err((error.code.as_str(), error)),
    };
    let duplicate = !copies.is_empty() && copies.iter().all(|copy| !copy.created);
    let receipt = WebhookReceiptOut {
        queued: !copies.is_empty(),
        message_id: copies.first().map(|copy| copy.message_id),
        idempotency_key,
        duplicate: duplicate.then_some(true),
        copies: Some(copies),
        ..WebhookReceiptOut::default()
    };
    Ok(if duplicate {
        (StatusCode::OK, Outcome::Duplicate, receipt)
    } else {
        (StatusCode::ACCEPTED, Outcome::Accepted, receipt)
    })
}

/// Keeps an event that cannot become a message in the queue's dead-letter queue, with the
/// reason (see [`sluice_ops::Ops::dead_letter_event`]).
async fn dead_letter(
    app: &AppState,
    endpoint: &Endpoint,
    to: Enqueue,
    bytes: &Bytes,
    headers: &HeaderMap,
    error: String,
) -> Handled {
    let stored = stored_headers(endpoint, headers);
    let kept = app
        .ops
        .dead_letter_event(to, bytes.to_vec(), stored, error)
        .await
        .map_err(refusal)?;
    Ok(dead_lettered(kept))
}

fn dead_lettered(kept: DeadLettered) -> (StatusCode, Outcome, WebhookReceiptOut) {
    let DeadLettered { message_id, reason } = kept;
    (
        StatusCode::ACCEPTED,
        Outcome::DeadLettered,
        WebhookReceiptOut {
            queued: false,
            message_id: Some(message_id),
            dead_lettered: Some(true),
            error: Some(reason),
            ..WebhookReceiptOut::default()
        },
    )
}

/// An ops refusal as ingress answers it, with the label its stats count it under: an event
/// with nowhere to go is an `invalid_event`; a store that cannot take it now, `unavailable`.
fn refusal(error: OpsError) -> (&'static str, ApiError) {
    let reason = match error.code {
        ErrorCode::InvalidField => "invalid_event",
        ErrorCode::QueueFull | ErrorCode::QueueNotFound => error.code.as_str(),
        _ => ErrorCode::Unavailable.as_str(),
    };
    (reason, ApiError::from(error))
}

/// The URL the sender signed (Twilio): the configured public URL, or this server's own, with
/// the request's query.
fn signed_url(endpoint: &Endpoint, uri: &Uri, headers: &HeaderMap, tls: bool) -> String {
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    match &endpoint.spec.public_url {
        Some(public) => format!("{}{query}", public.trim_end_matches('?')),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("localhost");
            // Behind a proxy the public scheme is in X-Forwarded-Proto (set `public_url` when it
            // is not).
            let scheme = headers
                .get("x-forwarded-proto")
                .and_then(|h| h.to_str().ok())
                .filter(|proto| matches!(*proto, "http" | "https"))
                .unwrap_or(if tls { "https" } else { "http" });
            format!("{scheme}://{host}{}{query}", uri.path())
        }
    }
}

/// How a webhook body was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyForm {
    /// JSON: stored as the bytes received (keys, spacing and big numbers untouched).
    Json,
    /// `application/x-www-form-urlencoded`: stored as a JSON object of its fields.
    Form,
    /// Anything else: stored as bytes.
    Raw,
}

/// The request as expressions and checks see it. Parsing costs, so what nobody needs is not
/// built: the body as a value only for expressions, a schema or a form; the event object only
/// for expressions.
struct Event {
    form: BodyForm,
    /// The body: JSON, form fields as an object, or the text (when needed).
    body: Option<Value>,
    /// `{"body", "headers", "query", "source_ip", "received_at"}` (for expressions).
    value: Option<Value>,
    /// Why a body that had to be JSON is not.
    parse_error: Option<String>,
    headers_map: HeaderMap,
}

impl Event {
    fn new(
        request: (&HeaderMap, &Uri, &[u8], SocketAddr),
        now_ms: Millis,
        needs_body: bool,
        needs_event: bool,
    ) -> Self {
        let (headers, uri, bytes, peer) = request;
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let text = || Value::String(String::from_utf8_lossy(bytes).into_owned());
        let needs_body = needs_body || needs_event;
        let mut parse_error = None;
        let (form, body) = if content_type.starts_with("application/x-www-form-urlencoded") {
            let fields = form_urlencoded::parse(bytes)
                .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                .collect();
            (BodyForm::Form, Some(Value::Object(fields)))
        } else {
            let json_required = content_type.contains("json");
            let parsed = if needs_body {
                serde_json::from_slice::<Value>(bytes).map(Some)
            } else {
                serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map(|_| None)
            };
            match parsed {
                Ok(body) => (BodyForm::Json, body),
                Err(error) => {
                    if json_required {
                        parse_error = Some(format!(
                            "the body is not valid JSON ({content_type}): {error}"
                        ));
                    }
                    (BodyForm::Raw, needs_body.then(text))
                }
            }
        };
        let value = needs_event.then(|| {
            let header_values: serde_json::Map<String, Value> = headers
                .iter()
                .filter_map(|(name, value)| {
                    Some((
                        name.as_str().to_owned(),
                        Value::String(value.to_str().ok()?.to_owned()),
                    ))
                })
                .collect();
            let query: serde_json::Map<String, Value> = uri
                .query()
                .map(|q| {
                    form_urlencoded::parse(q.as_bytes())
                        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
                        .collect()
                })
                .unwrap_or_default();
            serde_json::json!({
                "body": body.clone().unwrap_or(Value::Null),
                "headers": header_values,
                "query": query,
                "source_ip": peer.ip().to_string(),
                "received_at": format_rfc3339(now_ms),
            })
        });
        Self {
            form,
            body,
            value,
            parse_error,
            headers_map: headers.clone(),
        }
    }
}

/// Runs the endpoint's expressions in an expression worker process, under the limits of
/// `[expressions]` (see [`crate::expr`]). A program's error or a limit it exceeded is
/// [`EvalError::Stopped`]: the event goes to the dead-letter queue with the reason.
async fn shape(
    app: &AppState,
    endpoint: &Arc<Endpoint>,
    event: &Event,
) -> Result<Shaped, EvalError> {
    let default_key = default_key(endpoint, event).map_err(EvalError::Stopped)?;
    if !endpoint.has_expressions() {
        return Ok(Shaped {
            keep: true,
            idempotency_key: default_key,
            ..Shaped::default()
        });
    }
    let input = event.value.as_ref().unwrap_or(&Value::Null);
    let programs = Programs::of(endpoint);
    let results = app.expr.eval_for_webhook(&programs.specs, input).await?;
    let mut shaped = programs.interpret(results).map_err(EvalError::Stopped)?;
    if shaped.idempotency_key.is_none() {
        shaped.idempotency_key = default_key;
    }
    Ok(shaped)
}

/// The idempotency key read without an expression: the configured header, or the sender's
/// delivery id (a header, or a field of the JSON body). Longer than a key may be: an error.
fn default_key(endpoint: &Endpoint, event: &Event) -> Result<Option<String>, String> {
    let (key, source) = match &endpoint.id_source {
        IdSource::Header(name) => (
            event
                .headers_map
                .get(name)
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(str::to_owned),
            name.as_str(),
        ),
        IdSource::Delivery(delivery) => (
            delivery.find(&event.headers_map, event.body.as_ref()),
            "the sender's delivery id",
        ),
        IdSource::Expression(_) | IdSource::None => (None, ""),
    };
    match key {
        Some(key) if key.len() > limits::KEY_BYTES_MAX => Err(format!(
            "the idempotency key in {source} is longer than {} bytes",
            limits::KEY_BYTES_MAX
        )),
        key => Ok(key),
    }
}

/// An endpoint's expressions as the programs of one evaluation, in the order they run: the
/// filter (a gate: nothing after it runs when it drops the event), then the idempotency key,
/// transform, key and priority expressions.
struct Programs {
    specs: Vec<expr::ProgramSpec>,
    /// Which expression each spec is.
    roles: Vec<Role>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Filter,
    IdempotencyKey,
    Transform,
    Key,
    Priority,
}

impl Programs {
    fn of(endpoint: &Endpoint) -> Self {
        let mut programs = Programs {
            specs: Vec::new(),
            roles: Vec::new(),
        };
        if let Some(filter) = &endpoint.filter {
            programs.specs.push(expr::gate(filter));
            programs.roles.push(Role::Filter);
        }
        let id_expression = match &endpoint.id_source {
            IdSource::Expression(expr) => Some(expr),
            _ => None,
        };
        for (role, expression) in [
            (Role::IdempotencyKey, id_expression),
            (Role::Transform, endpoint.transform.as_ref()),
            (Role::Key, endpoint.key.as_ref()),
            (Role::Priority, endpoint.priority.as_ref()),
        ] {
            if let Some(expression) = expression {
                programs.specs.push(expr::program(expression));
                programs.roles.push(role);
            }
        }
        programs
    }

    /// What the outcomes make of the event; an error names the expression that failed.
    fn interpret(&self, results: Vec<ProgramResult>) -> Result<Shaped, String> {
        let mut shaped = Shaped {
            keep: true,
            ..Shaped::default()
        };
        let ran = results.len();
        for (role, result) in self.roles.iter().zip(results) {
            let what = match role {
                Role::Filter => "filter",
                Role::IdempotencyKey => "idempotency expression",
                Role::Transform => "transform",
                Role::Key => "key expression",
                Role::Priority => "priority expression",
            };
            let output = result.map_err(|e| format!("{what} failed: {e}"))?;
            match role {
                Role::Filter => {
                    if !output.is_some_and(|v| !matches!(v, Value::Null | Value::Bool(false))) {
                        return Ok(Shaped::default());
                    }
                }
                Role::IdempotencyKey => {
                    shaped.idempotency_key = output.and_then(|v| scalar_text(&v))
                }
                Role::Transform => {
                    shaped.body = Some(output.ok_or("transform produced no output")?);
                }
                Role::Key => shaped.key = output.and_then(|v| scalar_text(&v)),
                Role::Priority => {
                    shaped.priority = match output {
                        None | Some(Value::Null) => None,
                        Some(Value::Number(n)) => {
                            Some(n.as_i64().and_then(|n| i32::try_from(n).ok()).ok_or_else(
                                || format!("priority expression gave {n}, not a 32-bit integer"),
                            )?)
                        }
                        Some(other) => {
                            return Err(format!(
                                "priority expression gave {other}, not an integer"
                            ));
                        }
                    }
                }
            }
        }
        if ran < self.roles.len() {
            return Err("the expressions stopped early".into());
        }
        for (field, value) in [
            ("idempotency key", &shaped.idempotency_key),
            ("key", &shaped.key),
        ] {
            if value
                .as_ref()
                .is_some_and(|v| v.len() > limits::KEY_BYTES_MAX)
            {
                return Err(format!(
                    "the {field} is longer than {} bytes",
                    limits::KEY_BYTES_MAX
                ));
            }
        }
        Ok(shaped)
    }
}

/// A string or number as text; anything else is no key.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The request headers kept with the message (lowercase names), within the message limits,
/// without credentials, and without the signature headers unless the endpoint keeps them; plus
/// `sluice-webhook: <endpoint>`.
fn stored_headers(endpoint: &Endpoint, headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut stored = BTreeMap::new();
    stored.insert("sluice-webhook".to_owned(), endpoint.name.clone());
    let mut bytes = 0;
    for (name, value) in headers {
        let name = name.as_str();
        let generic_signature = match &endpoint.spec.verify.header {
            Some(header) => header.eq_ignore_ascii_case(name),
            None => false,
        };
        let signature = generic_signature || SIGNATURE_HEADERS.contains(&name);
        if HEADERS_NOT_STORED.contains(&name)
            || (signature && !endpoint.spec.keep_signature_headers)
            || stored.len() >= STORED_HEADERS_MAX
        {
            continue;
        }
        let Ok(value) = value.to_str() else {
            continue;
        };
        if bytes + name.len() + value.len() > STORED_HEADER_BYTES_MAX {
            continue;
        }
        bytes += name.len() + value.len();
        stored
            .entry(name.to_owned())
            .and_modify(|existing: &mut String| {
                existing.push_str(", ");
                existing.push_str(value);
            })
            .or_insert_with(|| value.to_owned());
    }
    stored
}

/// The ingress route: public, since each endpoint checks its sender's signature itself.
pub fn routes() -> crate::api::route::Routes {
    use crate::api::route::Routes;
    use crate::auth::Need;
    use utoipa_axum::routes;

    Routes::new("hooks").documented(Need::Public, routes!(receive))
}
