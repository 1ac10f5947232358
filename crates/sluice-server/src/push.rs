//! Push delivery: for every queue with a `push` destination, a worker leases messages and calls
//! the destination, so a team needs no consumer code.
//!
//! A worker claims through the store like any consumer, so `max_in_flight`, `rate_limit`,
//! per-key order and pause hold for pushes too; it waits on the queue's wake-ups like a long
//! poll. 2xx acks. 408, 429, 5xx, redirects, timeouts and connection errors are retried with the
//! queue's backoff (a longer `Retry-After` wins); other 4xx dead-letter at once unless the
//! destination sets `retry_client_errors`. The status and the first bytes of the answer become
//! the message's `last_error`. A supervisor starts, restarts (on a configuration change) and
//! stops workers as queues change.
//!
//! A worker claims with [`Store::message_claim_recorded`]: the attempt is on disk before the
//! transform runs or the destination is called, so a message during whose delivery the server
//! dies counts that attempt, and once a claim finds it past `max_attempts` (every earlier
//! attempt ended without a result) it goes to the dead-letter queue instead of being tried
//! again. Push can be off for the whole server (`--no-push`, `[push] enabled = false`) or
//! paused per queue ([`crate::push_pauses`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use sluice_core::dispatch::NackOutcome;
use sluice_core::histogram::{AtomicHistogram, Histogram};
use sluice_core::message::{BodyKind, ClaimedMessage};
use sluice_core::meter::Meter;
use sluice_core::queue::QueueConfig;
use sluice_core::store::{AckParams, ClaimParams, NackParams};
use sluice_core::wire::{LatencyOut, PushMethod, PushSpec, PushStatsOut, time_out};
use sluice_core::{Clock, Store};
use sluice_ops::wait::{self, Look, Wait};
use sluice_webhooks::expr::Expr;
use sluice_webhooks::sign::StandardSigner;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::expr::{EvalError, ExprPool};
use crate::push_log::{DeliveryLogLimits, Recording};
use crate::push_pauses::PushPauses;
use crate::secrets;

/// How often the supervisor looks for queues whose push settings changed.
const SUPERVISE_INTERVAL: Duration = Duration::from_millis(500);
/// Default requests in flight per destination.
const CONCURRENCY_DEFAULT: u32 = 16;
/// Default request timeout.
const TIMEOUT_MS_DEFAULT: i64 = 10_000;
/// Bytes of a failed answer kept in `last_error`.
const ERROR_BODY_BYTES: usize = 256;
/// Longest `Retry-After` honoured.
const RETRY_AFTER_MAX_MS: i64 = 24 * 60 * 60 * 1000;

/// What a destination did since start.
#[derive(Debug, Default)]
pub struct PushStats {
    delivered: AtomicU64,
    retried: AtomicU64,
    failed_permanently: AtomicU64,
    in_flight: AtomicU64,
    last: Mutex<(Option<u16>, Option<String>)>,
    latency: Mutex<Meter>,
    /// Every request's time since start, in µs (metrics).
    request_latency_us: RequestLatency,
}

impl PushStats {
    fn out(&self, now_ms: i64, enabled: bool, paused: bool) -> PushStatsOut {
        let (last_status, last_error) = self.last.lock().clone();
        let latency = self.latency.lock().recent(now_ms).latency;
        PushStatsOut {
            enabled,
            paused,
            delivered: self.delivered.load(Ordering::Relaxed),
            retried: self.retried.load(Ordering::Relaxed),
            failed_permanently: self.failed_permanently.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            last_status,
            last_error,
            latency_ms: (latency.samples > 0).then_some(LatencyOut {
                samples: latency.samples,
                p50: latency.p50_ms,
                p95: latency.p95_ms,
                p99: latency.p99_ms,
            }),
        }
    }
}

/// A running worker and what it was started with.
struct Worker {
    config: QueueConfig,
    /// A child of the server's shutdown token: cancelled alone when the queue's push changes.
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// All push workers of the server.
pub struct Dispatcher {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    http: reqwest::Client,
    workers: Mutex<HashMap<String, Worker>>,
    /// Stats outlive worker restarts, so counters do not reset on a config change.
    stats: Mutex<HashMap<String, Arc<PushStats>>>,
    /// Wakes the supervisor after a queue changed.
    changed: Notify,
    /// Requests in flight, across destinations.
    delivering: AtomicU64,
    /// Cancelled at shutdown: the supervisor stops every worker and ends.
    shutdown: CancellationToken,
    /// Where transforms run.
    expr: Arc<ExprPool>,
    /// Queues whose push delivery is paused.
    pauses: PushPauses,
    /// False when the server runs with push delivery off.
    enabled: bool,
    /// What each message's delivery log keeps.
    delivery_log: DeliveryLogLimits,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher").finish_non_exhaustive()
    }
}

/// What a worker needs, compiled once.
struct Destination {
    queue: String,
    spec: Arc<PushSpec>,
    config: QueueConfig,
    method: reqwest::Method,
    timeout: Duration,
    transform: Option<Expr>,
    signer: Option<StandardSigner>,
    stats: Arc<PushStats>,
    /// Takes the destination's secrets out of failure texts, which non-admins read.
    scrubber: crate::redact::Scrubber,
}

/// Checks a push destination the way a worker will use it: the transform compiles and the
/// signing secret can be read and decoded. Called when a queue is defined.
pub fn validate(spec: &PushSpec) -> Result<(), String> {
    compile(spec).map(|_| ())
}

type Compiled = (reqwest::Method, Option<Expr>, Option<StandardSigner>);

fn compile(spec: &PushSpec) -> Result<Compiled, String> {
    // A definition refused at definition is refused here too (say, one stored by an older
    // version): the worker does not start rather than guess a method.
    let method = match PushMethod::of_spec(spec.method.as_deref())? {
        PushMethod::Post => reqwest::Method::POST,
        PushMethod::Put => reqwest::Method::PUT,
        PushMethod::Patch => reqwest::Method::PATCH,
    };
    let transform = spec
        .transform
        .as_deref()
        .map(|source| Expr::compile(source).map_err(|e| format!("push.transform: {e}")))
        .transpose()?;
    let signer = spec
        .signing_secret
        .as_ref()
        .map(|reference| {
            let secret = secrets::resolve(reference, "push.signing_secret")?;
            StandardSigner::new(&secret).map_err(|e| format!("push.signing_secret: {e}"))
        })
        .transpose()?;
    Ok((method, transform, signer))
}

impl Dispatcher {
    /// A dispatcher with no workers yet; [`Dispatcher::run`] supervises them.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        shutdown: CancellationToken,
        expr: Arc<ExprPool>,
        pauses: PushPauses,
        enabled: bool,
        delivery_log: DeliveryLogLimits,
    ) -> Result<Arc<Self>, String> {
        let http = reqwest::Client::builder()
            // A redirect is a failure (Standard Webhooks' advice): the destination moved.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("cannot build the push HTTP client: {e}"))?;
        Ok(Arc::new(Self {
            store,
            clock,
            http,
            workers: Mutex::new(HashMap::new()),
            stats: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            delivering: AtomicU64::new(0),
            shutdown,
            expr,
            pauses,
            enabled,
            delivery_log,
        }))
    }

    /// The stats of a queue's destination (call it for queues that have one).
    pub fn stats(&self, queue: &str) -> PushStatsOut {
        let stats = self.stats.lock().get(queue).cloned().unwrap_or_default();
        stats.out(
            self.clock.now_ms(),
            self.enabled,
            self.pauses.is_paused(queue),
        )
    }

    /// True when the server delivers pushes at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Pauses or resumes a queue's push delivery (kept across restarts); the worker stops or
    /// starts at once. Requests already sent finish.
    pub async fn set_paused(&self, queue: &str, paused: bool) -> Result<(), String> {
        self.pauses.set(queue, paused).await?;
        self.refresh();
        Ok(())
    }

    /// What every running destination did since start, by queue (for metrics).
    pub fn metrics(&self) -> Vec<PushMetrics> {
        let workers = self.workers.lock();
        let mut all: Vec<PushMetrics> = self
            .stats
            .lock()
            .iter()
            .filter(|(queue, _)| workers.contains_key(*queue))
            .map(|(queue, stats)| PushMetrics {
                queue: queue.clone(),
                delivered: stats.delivered.load(Ordering::Relaxed),
                retried: stats.retried.load(Ordering::Relaxed),
                failed_permanently: stats.failed_permanently.load(Ordering::Relaxed),
                in_flight: stats.in_flight.load(Ordering::Relaxed),
                request_latency_us: stats.request_latency_us.0.snapshot(),
            })
            .collect();
        all.sort_by(|a, b| a.queue.cmp(&b.queue));
        all
    }

    /// Asks the supervisor to look at the queues now (after a queue was changed).
    pub fn refresh(&self) {
        self.changed.notify_one();
    }

    /// Supervises workers until shutdown, then stops them and returns once they stopped
    /// claiming (deliveries already started go on: [`Dispatcher::wait_idle`]). Returns at once
    /// when push is off.
    pub async fn run(self: Arc<Self>) {
        if !self.enabled {
            tracing::warn!("push delivery is off (--no-push or [push] enabled = false)");
            return;
        }
        while !self.shutdown.is_cancelled() {
            self.supervise().await;
            tokio::select! {
                _ = self.changed.notified() => {}
                _ = tokio::time::sleep(SUPERVISE_INTERVAL) => {}
                () = self.shutdown.cancelled() => {}
            }
        }
        let workers: Vec<Worker> = self.workers.lock().drain().map(|(_, w)| w).collect();
        for worker in workers {
            // Cancelled with the shutdown token already (a child); said for clarity.
            worker.stop.cancel();
            let _ = worker.task.await;
        }
    }

    async fn supervise(self: &Arc<Self>) {
        let queues = match self.store.queue_list(self.clock.now_ms()).await {
            Ok(queues) => queues,
            Err(error) => {
                tracing::warn!(%error, "push supervisor cannot list queues");
                return;
            }
        };
        let mut workers = self.workers.lock();
        let wanted: HashMap<&str, &QueueConfig> = queues
            .iter()
            .filter(|info| info.config.push.is_some() && !self.pauses.is_paused(&info.name))
            .map(|info| (info.name.as_str(), &info.config))
            .collect();
        workers.retain(|name, worker| {
            let keep =
                wanted.get(name.as_str()) == Some(&&worker.config) && !worker.task.is_finished();
            if !keep {
                worker.stop.cancel();
            }
            keep
        });
        for (name, config) in wanted {
            if workers.contains_key(name) {
                continue;
            }
            let Some(spec) = config.push.clone() else {
                continue;
            };
            let (method, transform, signer) = match compile(&spec) {
                Ok(compiled) => compiled,
                Err(error) => {
                    tracing::error!(queue = name, %error, "push destination cannot start");
                    continue;
                }
            };
            let stats = self
                .stats
                .lock()
                .entry(name.to_owned())
                .or_default()
                .clone();
            let destination = Arc::new(Destination {
                queue: name.to_owned(),
                method,
                timeout: Duration::from_millis(
                    spec.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT).max(1) as u64,
                ),
                scrubber: crate::redact::Scrubber::for_destination(&spec),
                spec,
                config: config.clone(),
                transform,
                signer,
                stats,
            });
            let stop = self.shutdown.child_token();
            let task = tokio::spawn(self.clone().work(destination, stop.clone()));
            tracing::info!(queue = name, "push worker started");
            workers.insert(
                name.to_owned(),
                Worker {
                    config: config.clone(),
                    stop,
                    task,
                },
            );
        }
    }

    /// Leases messages and hands each to a delivery task, keeping at most `concurrency` out.
    /// Runs until `stop` is cancelled (a configuration change, a pause, shutdown).
    async fn work(self: Arc<Self>, destination: Arc<Destination>, stop: CancellationToken) {
        let concurrency = destination
            .spec
            .concurrency
            .or(destination.config.max_in_flight)
            .unwrap_or(CONCURRENCY_DEFAULT)
            .max(1) as usize;
        let slots = Arc::new(Semaphore::new(concurrency));
        // The lease outlasts the request, so a slow destination is not called twice at once.
        let lease_ms = destination
            .config
            .visibility_timeout_ms
            .max(destination.timeout.as_millis() as i64 + 5_000);
        let notifier = self.store.notifier();
        let policy = Wait::push(&stop);
        while !stop.is_cancelled() {
            let first = tokio::select! {
                // The wait for a slot may outlive this worker (a config change, shutdown).
                biased;
                () = stop.cancelled() => break,
                first = slots.clone().acquire_owned() => first.expect("never closed"),
            };
            // Holds the slot while it waits: only this loop takes slots, so holding one
            // leaves the others free for the claim's count.
            let claim = |now_ms| {
                let (store, slots, destination) = (&self.store, &slots, &destination);
                async move {
                    let claim = store
                        .message_claim_recorded(ClaimParams {
                            queue: destination.queue.clone(),
                            max: (1 + slots.available_permits()).min(100),
                            lease_ms: Some(lease_ms),
                            now_ms,
                        })
                        .await
                        .inspect_err(|error| {
                            tracing::warn!(queue = %destination.queue, %error, "push worker cannot claim");
                        })?;
                    Ok::<_, sluice_core::StoreError>(if claim.messages.is_empty() {
                        Look::Pending {
                            current: claim.messages,
                            next_change_at_ms: claim.next_change_at_ms,
                        }
                    } else {
                        Look::Ready(claim.messages)
                    })
                }
            };
            let messages = match wait::until(
                &notifier,
                &destination.queue,
                self.clock.as_ref(),
                &policy,
                claim,
            )
            .await
            {
                Ok(messages) if !messages.is_empty() => messages,
                // Stopped while waiting (with nothing, or after a failed claim).
                _ => continue,
            };
            let mut first = Some(first);
            for message in messages {
                // Only this loop takes slots, so the ones counted above are still free.
                let permit = match first.take() {
                    Some(permit) => permit,
                    None => match slots.clone().try_acquire_owned() {
                        Ok(permit) => permit,
                        Err(_) => slots.clone().acquire_owned().await.expect("never closed"),
                    },
                };
                let dispatcher = self.clone();
                let destination = destination.clone();
                tokio::spawn(async move {
                    dispatcher.deliver(&destination, message).await;
                    drop(permit);
                });
            }
        }
    }

    /// One request to the destination, and the ack or nack that follows from its answer.
    async fn deliver(&self, destination: &Destination, message: ClaimedMessage) {
        self.delivering.fetch_add(1, Ordering::SeqCst);
        self.deliver_one(destination, message).await;
        self.delivering.fetch_sub(1, Ordering::SeqCst);
    }

    /// Waits (bounded) for requests in flight to finish and record their ack or nack, so a
    /// graceful stop does not send them again after the restart.
    pub async fn wait_idle(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.delivering.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn deliver_one(&self, destination: &Destination, message: ClaimedMessage) {
        let stats = &destination.stats;
        stats.in_flight.fetch_add(1, Ordering::Relaxed);
        let started_ms = self.clock.now_ms();
        let started = std::time::Instant::now();
        let max_attempts = destination.config.max_attempts;
        let (mut outcome, recording) = if max_attempts > 0 && message.attempts > max_attempts {
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
        let result = match outcome {
            Outcome::Delivered { .. } => {
                stats.delivered.fetch_add(1, Ordering::Relaxed);
                self.store
                    .message_ack(AckParams {
                        queue: destination.queue.clone(),
                        receipts: vec![message.receipt],
                        result: None,
                        delivery,
                        now_ms,
                    })
                    .await
                    .map(|_| ())
            }
            Outcome::Failed {
                error,
                permanent,
                retry_after_ms,
                ..
            } => {
                let backoff_ms = destination.config.backoff.delay_ms(message.attempts);
                let nacked = self
                    .store
                    .message_nack(NackParams {
                        queue: destination.queue.clone(),
                        receipt: message.receipt,
                        error: Some(error),
                        delay_ms: Some(retry_after_ms.map_or(backoff_ms, |ms| ms.max(backoff_ms))),
                        // A queue without a DLQ retries even "permanent" failures.
                        permanent: permanent && destination.config.dead_letter_queue.is_some(),
                        delivery,
                        now_ms,
                    })
                    .await;
                // Out of attempts counts as a permanent failure, not a retry.
                match &nacked {
                    Ok(NackOutcome::DeadLettered { .. }) => {
                        stats.failed_permanently.fetch_add(1, Ordering::Relaxed)
                    }
                    _ => stats.retried.fetch_add(1, Ordering::Relaxed),
                };
                nacked.map(|_| ())
            }
        };
        if let Err(error) = result {
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
        let mut request = self
            .http
            .request(destination.method.clone(), &spec.url)
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
                (self.http.execute(request).await, recording)
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
            "enqueued_at": time_out(message.enqueued_at_ms),
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

// ---- metrics --------------------------------------------------------------------------------

/// Push request time bounds, in µs: 0.5 ms to 30 s.
const REQUEST_LATENCY_BOUNDS_US: &[u64] = &[
    500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
    2_500_000, 5_000_000, 10_000_000, 30_000_000,
];

/// The time of every push request since start (a fixed-bucket histogram, relaxed atomics).
#[derive(Debug)]
struct RequestLatency(AtomicHistogram);

impl Default for RequestLatency {
    fn default() -> Self {
        Self(AtomicHistogram::new(REQUEST_LATENCY_BOUNDS_US))
    }
}

/// What one destination did since start, for `GET /metrics`.
#[derive(Debug, Clone)]
pub struct PushMetrics {
    /// The queue it delivers.
    pub queue: String,
    /// Requests answered 2xx (acked).
    pub delivered: u64,
    /// Failed requests whose message was retried.
    pub retried: u64,
    /// Failed requests whose message was dead-lettered.
    pub failed_permanently: u64,
    /// Requests under way.
    pub in_flight: u64,
    /// Time of each request (transform, signing and the HTTP call), in µs.
    pub request_latency_us: Histogram,
}

#[cfg(test)]
mod method_tests {
    use super::*;

    fn spec(method: Option<&str>) -> PushSpec {
        serde_json::from_value(serde_json::json!({
            "url": "http://127.0.0.1:9/hook",
            "method": method,
        }))
        .unwrap()
    }

    /// A worker sends the method of its definition, and one whose method is not a push method
    /// (a definition that skipped validation) does not start: it is never sent as a POST.
    #[test]
    fn a_worker_uses_its_method_or_does_not_start() {
        for (given, sent) in [
            (None, reqwest::Method::POST),
            (Some("PUT"), reqwest::Method::PUT),
            (Some("PATCH"), reqwest::Method::PATCH),
        ] {
            assert_eq!(compile(&spec(given)).unwrap().0, sent, "{given:?}");
        }
        for wrong in ["GET", "DELETE", "put"] {
            let error = compile(&spec(Some(wrong))).map(|_| ()).unwrap_err();
            assert!(error.contains("push.method"), "{wrong}: {error}");
        }
    }
}
