//! The Amazon SQS-compatible API on the main listener (docs/sqs.md): a second renderer over
//! `sluice_ops`, as the native API is one. `sluice_sqs` parses and renders the two wire
//! protocols; this module authenticates a request, maps the operation onto `ops` and maps the
//! answer back. Queues created here are ordinary sluice queues, and the other way round.
//!
//! - [`intercept`]: the middleware that takes SQS requests before the native routes see them;
//! - [`queues`]: queue operations (create, URL, list, attributes, tags, permissions, purge);
//! - [`messages`]: send, receive, delete, visibility;
//! - [`move_tasks`]: dead-letter redrive as SQS's message move tasks, over replay;
//! - [`attributes`], [`content`], [`names`], [`receipts`]: the mappings they share.

mod attempts;
pub mod attributes;
pub mod config;
pub mod content;
mod errors;
pub mod failure;
mod messages;
pub mod move_tasks;
pub mod names;
mod queues;
pub mod receipts;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use sluice_sqs::sigv4::{self, SignedRequest};
use sluice_sqs::{Answer, ErrorKind, Protocol, SqsError, Wire};

use crate::auth::{Caller, Need};
use crate::body_budget::Refusal;
use crate::state::AppState;
use sluice_ops::OpsError;
use sluice_wire::ErrorCode;

pub use config::{RawSqs, SqsConfig};
pub use errors::from_ops;

/// What the SQS API keeps between requests.
#[derive(Debug, Default)]
pub struct SqsState {
    /// `[sqs]`.
    pub config: SqsConfig,
    /// When each queue was last purged through SQS (one purge per 60 s, as SQS allows).
    purged_at: Mutex<HashMap<String, Instant>>,
    /// Running and finished message move tasks.
    pub move_tasks: move_tasks::MoveTasks,
    /// Recent FIFO receives by `ReceiveRequestAttemptId`.
    receive_attempts: attempts::ReceiveAttempts,
}

impl SqsState {
    /// The API's state for `config`.
    pub fn new(config: SqsConfig) -> Self {
        Self {
            receive_attempts: attempts::ReceiveAttempts::new(config.max_receive_attempts_bytes),
            config,
            ..Self::default()
        }
    }
}

/// What [`intercept`] holds: the server's state and its browser guard.
pub struct Layer {
    pub app: AppState,
    pub guard: Arc<crate::browser_guard::BrowserGuard>,
}

/// One SQS request being served: who asks, and the base of the queue URLs it gets back.
pub struct Ctx<'a> {
    pub app: &'a AppState,
    pub sqs: &'a SqsState,
    /// The base of queue URLs for this client.
    pub base: String,
    /// The token behind the signature; `None` when access control is off.
    pub caller: Option<Caller>,
    /// A failure the client reports with a visibility change (`failure.rs`).
    pub failure: Option<failure::Reported>,
    /// Headers the answer carries beside the protocol's own.
    pub reply_headers: Mutex<Vec<(&'static str, HeaderValue)>>,
}

impl Ctx<'_> {
    /// Refuses the request unless the caller may do `need` on `queue`.
    pub async fn allow(&self, need: Need, queue: Option<&str>) -> Result<(), SqsError> {
        let Some(caller) = &self.caller else {
            return Ok(());
        };
        match crate::auth::allows(self.app, caller, need, queue).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(SqsError::new(
                ErrorKind::AccessDenied,
                format!(
                    "Access to the resource {} is denied.",
                    queue.map_or_else(
                        || "this operation".to_owned(),
                        |q| names::queue_arn(&self.sqs.config, q)
                    )
                ),
            )),
            Err(error) => Err(from_ops(error)),
        }
    }

    /// The URL of `queue` for this client.
    pub fn queue_url(&self, queue: &str) -> String {
        names::queue_url(&self.base, &self.sqs.config, queue)
    }

    /// The queue a `QueueUrl` member names.
    pub fn queue_of(&self, url: &str) -> Result<String, SqsError> {
        names::queue_of_url(&self.sqs.config, url)
    }

    /// Who sent a message, for its `SenderId`: the token's name, else the account.
    pub fn sender_id(&self) -> String {
        match &self.caller {
            Some(caller) => sluice_ops::Caller::name(caller).to_owned(),
            None => self.sqs.config.account_id.clone(),
        }
    }

    /// Now, by the server's clock.
    pub fn now_ms(&self) -> i64 {
        self.app.now_ms()
    }
}

/// Takes the requests that are SQS (docs/design/sqs-compat.md §1.1) and answers them; every
/// other request goes on to the native routes untouched (its body is read only when the
/// request could be SQS: `POST /`, a queue URL path, or AWS's headers).
pub async fn intercept(State(layer): State<Arc<Layer>>, request: Request, next: Next) -> Response {
    let app = &layer.app;
    // Every request of the native API passes here: it is looked at without a copy.
    let uri = request.uri();
    if !app.sqs.config.enabled
        || !sluice_sqs::protocol::may_be_sqs(
            request.method(),
            uri.path(),
            uri.query(),
            request.headers(),
        )
    {
        return next.run(request).await;
    }
    // What the browser guard refuses on the native routes it refuses here too: a cross-site
    // form posting `Action=PurgeQueue` is a browser acting for another site.
    // Unlike the native API, SQS's query protocol changes state over GET too (`GET
    // /?Action=DeleteQueue`, an `<img>` on any page), so a cross-site request is refused
    // whatever its method: no SQS client is another site's page.
    match crate::browser_guard::judge(&layer.guard, &request) {
        Err(refused) => return refused.into_response(),
        Ok(Some(crate::browser_guard::Provenance::CrossSite)) => {
            return crate::browser_guard::cross_site_refusal().into_response();
        }
        Ok(_) => {}
    }
    let sqs = app.sqs.clone();
    let (method, path, query) = (
        request.method().clone(),
        uri.path().to_owned(),
        uri.query().map(str::to_owned),
    );
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let request_id = parts
        .headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| uuid::Uuid::new_v4().to_string(), str::to_owned);
    // Read within the server's budget for bodies in flight, as the native routes are: SQS
    // requests must not hold memory (or a slow upload's connection) outside it.
    let (bytes, charge) = match app
        .body_budget
        .read(
            &parts.headers,
            crate::body_budget::peer_of(&parts.extensions),
            body,
            sqs.config.max_request_bytes,
        )
        .await
    {
        Ok(read) => read,
        Err(refusal) => {
            let error = match refusal {
                Refusal::TooLarge => SqsError::new(
                    ErrorKind::InvalidParameterValue,
                    format!(
                        "The request body is larger than {} bytes ([sqs] max_request_bytes).",
                        sqs.config.max_request_bytes
                    ),
                ),
                Refusal::Spent => errors::from_ops(OpsError::new(
                    ErrorCode::Overloaded,
                    app.body_budget.spent_message(),
                )),
                Refusal::Unreadable(error) => {
                    errors::from_ops(OpsError::new(error.code, error.message))
                }
            };
            return render(Answer::error(Wire::Json, &error, &request_id), &request_id);
        }
    };
    let protocol = sluice_sqs::detect(&method, &path, query.as_deref(), &parts.headers, &bytes);
    // The metrics' route label: the operation, so the series stay bounded by SQS's 23.
    let route = match &protocol {
        Protocol::Json { action } | Protocol::Query { action, .. } => format!("sqs:{action}"),
        _ => "sqs".to_owned(),
    };
    let wire = match &protocol {
        Protocol::NotSqs => {
            // The native routes charge the body again themselves.
            drop(charge);
            return next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
        }
        Protocol::Refused { wire, .. } => *wire,
        Protocol::Json { .. } => Wire::Json,
        Protocol::Query { .. } => Wire::Query,
    };
    let answer = async {
        // The signature first: a caller who is not one is refused before its members are
        // decoded into anything (a request's tree and strings can be many times its bytes).
        let caller = authenticate(
            app,
            &method,
            &path,
            query.as_deref(),
            &parts.headers,
            &bytes,
        )?;
        let request = match protocol {
            Protocol::NotSqs => unreachable!("answered by the native routes above"),
            Protocol::Refused { error, .. } => Err(error),
            Protocol::Json { action } => sluice_sqs::Request::from_json(action, &bytes),
            Protocol::Query { action, params } => sluice_sqs::Request::from_query(action, &params),
        }?;
        let ctx = Ctx {
            app,
            sqs: &sqs,
            base: names::base_url(&sqs.config, &parts.headers, app.tls),
            caller,
            failure: failure::Reported::from_headers(&parts.headers)?,
            reply_headers: Mutex::default(),
        };
        let answer = serve(&ctx, request).await;
        Ok::<_, SqsError>((answer, ctx.reply_headers.into_inner()))
    }
    .await;
    let (answer, reply_headers) = match answer {
        Ok((answer, headers)) => (answer, headers),
        Err(error) => (Err(error), Vec::new()),
    };
    let answer = match answer {
        Ok(response) => Answer::success(wire, &response, &request_id),
        Err(error) => {
            if error.kind.status().is_server_error() {
                tracing::error!(code = error.kind.code(), message = %error.message, "SQS request failed");
            }
            Answer::error(wire, &error, &request_id)
        }
    };
    let mut response = render(answer, &request_id);
    for (name, value) in reply_headers {
        response.headers_mut().insert(name, value);
    }
    drop(charge);
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    app.http_metrics.observe(
        &route,
        crate::http_metrics::method_label(&method),
        response.status().as_u16(),
        elapsed_us,
    );
    response
}

/// With access control on, the request's SigV4 signature names a token (its name is the
/// access key id, the token the secret) and must verify; with it off, any signature or none is
/// accepted, as ElasticMQ and moto do.
fn authenticate(
    app: &AppState,
    method: &axum::http::Method,
    path: &str,
    query: Option<&str>,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<Option<Caller>, SqsError> {
    if !app.auth.enabled() {
        return Ok(None);
    }
    let mut caller = None;
    let signed = SignedRequest {
        method,
        path,
        query,
        headers,
        body,
    };
    sigv4::verify(
        &signed,
        |access_key_id| {
            let (secret, found) = app.auth.by_access_key(access_key_id)?;
            caller = Some(found);
            Some(secret)
        },
        time::OffsetDateTime::from_unix_timestamp(app.now_ms().div_euclid(1000))
            .unwrap_or_else(|_| time::OffsetDateTime::now_utc()),
    )?;
    Ok(caller)
}

async fn serve(
    ctx: &Ctx<'_>,
    request: sluice_sqs::Request,
) -> Result<sluice_sqs::Response, SqsError> {
    use sluice_sqs::Request as R;
    match request {
        R::CreateQueue(r) => queues::create(ctx, r).await,
        R::GetQueueUrl(r) => queues::get_url(ctx, r).await,
        R::ListQueues(r) => queues::list(ctx, r).await,
        R::DeleteQueue(r) => queues::delete(ctx, r).await,
        R::GetQueueAttributes(r) => queues::get_attributes(ctx, r).await,
        R::SetQueueAttributes(r) => queues::set_attributes(ctx, r).await,
        R::PurgeQueue(r) => queues::purge(ctx, r).await,
        R::ListDeadLetterSourceQueues(r) => queues::dead_letter_sources(ctx, r).await,
        R::TagQueue(r) => queues::tag(ctx, r).await,
        R::UntagQueue(r) => queues::untag(ctx, r).await,
        R::ListQueueTags(r) => queues::list_tags(ctx, r).await,
        R::AddPermission(r) => queues::add_permission(ctx, r).await,
        R::RemovePermission(r) => queues::remove_permission(ctx, r).await,
        R::SendMessage(r) => messages::send(ctx, r).await,
        R::SendMessageBatch(r) => messages::send_batch(ctx, r).await,
        R::ReceiveMessage(r) => messages::receive(ctx, r).await,
        R::DeleteMessage(r) => messages::delete(ctx, r).await,
        R::DeleteMessageBatch(r) => messages::delete_batch(ctx, r).await,
        R::ChangeMessageVisibility(r) => messages::change_visibility(ctx, r).await,
        R::ChangeMessageVisibilityBatch(r) => messages::change_visibility_batch(ctx, r).await,
        R::StartMessageMoveTask(r) => move_tasks::start(ctx, r).await,
        R::ListMessageMoveTasks(r) => move_tasks::list(ctx, r).await,
        R::CancelMessageMoveTask(r) => move_tasks::cancel(ctx, r).await,
    }
}

fn render(answer: Answer, request_id: &str) -> Response {
    let mut response = (answer.status, answer.body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(answer.content_type),
    );
    if let Ok(value) = HeaderValue::from_str(request_id) {
        headers.insert(sluice_sqs::answer::REQUEST_ID_HEADER, value.clone());
        headers.insert("x-request-id", value);
    }
    if let Some(query_error) = answer.query_error
        && let Ok(value) = HeaderValue::from_str(&query_error)
    {
        headers.insert(sluice_sqs::answer::QUERY_ERROR_HEADER, value);
    }
    response
}

/// Remembers a purge of `queue` through SQS; refuses a second within 60 s, as SQS does.
fn note_purge(sqs: &SqsState, queue: &str) -> Result<(), SqsError> {
    let mut purged = sqs.purged_at.lock();
    let now = Instant::now();
    purged.retain(|_, at| now.duration_since(*at).as_secs() < 60);
    if purged.contains_key(queue) {
        return Err(SqsError::new(
            ErrorKind::PurgeQueueInProgress,
            format!("Only one PurgeQueue operation on {queue} is allowed every 60 seconds."),
        ));
    }
    purged.insert(queue.to_owned(), now);
    Ok(())
}
