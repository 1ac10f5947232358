//! Push delivery: for every queue with a `push` destination, a worker leases messages and calls
//! the destination, so a team needs no consumer code.
//!
//! A worker claims and settles through the operations layer like any consumer
//! (`Ops::push_claim`, `Ops::push_settle`, where the retry rules below are decided), so
//! `max_in_flight`, `rate_limit`, per-key order and pause hold for pushes too; it waits on the
//! queue's wake-ups like a long poll. 2xx acks. 408, 429, 5xx, redirects, timeouts and connection errors are retried with the
//! queue's backoff (a longer `Retry-After` wins); other 4xx dead-letter at once unless the
//! destination sets `retry_client_errors`. The status and the first bytes of the answer become
//! the message's `last_error`. A supervisor starts, restarts (on a configuration change) and
//! stops workers as queues change.
//!
//! A worker's claim is recorded (`Store::message_claim_recorded`): the attempt is on disk before the
//! transform runs or the destination is called, so a message during whose delivery the server
//! dies counts that attempt, and once a claim finds it past `max_attempts` (every earlier
//! attempt ended without a result) it goes to the dead-letter queue instead of being tried
//! again. Push can be off for the whole server (`--no-push`, `[push] enabled = false`) or
//! paused per queue (`Ops::queue_push_pause`: the pause is kept by the store, so every node
//! of a shared store sees it; the supervisor reads it with the queues it lists, and looks again
//! when the store reports a change made on another node).
//!
//! `supervisor.rs` starts and stops the workers and holds their claim loop; `delivery.rs`
//! makes one request and records its ack or nack.

mod delivery;
mod supervisor;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use sluice_core::Clock;
use sluice_core::histogram::{AtomicHistogram, Histogram};
use sluice_core::meter::Meter;
use sluice_core::queue::QueueConfig;
use sluice_core::store::QueueInfo;
use sluice_webhooks::expr::Expr;
use sluice_webhooks::sign::StandardSigner;
use sluice_wire::{LatencyOut, PushMethod, PushSpec, PushStatsOut};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::expr::ExprPool;
use crate::push_log::DeliveryLogLimits;
use crate::secrets;

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
    ops: Arc<sluice_ops::Ops>,
    clock: Arc<dyn Clock>,
    http: reqwest::Client,
    /// For the destinations of tenants' queues: connects only to public addresses
    /// (crate::egress).
    tenant_http: reqwest::Client,
    /// Whether a queue is a tenant's.
    auth: Arc<crate::auth::Auth>,
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
        ops: Arc<sluice_ops::Ops>,
        clock: Arc<dyn Clock>,
        shutdown: CancellationToken,
        expr: Arc<ExprPool>,
        enabled: bool,
        delivery_log: DeliveryLogLimits,
        auth: Arc<crate::auth::Auth>,
    ) -> Result<Arc<Self>, String> {
        let builder = || {
            reqwest::Client::builder()
                // A redirect is a failure (Standard Webhooks' advice): the destination moved.
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(Duration::from_secs(5))
        };
        let http = builder()
            .build()
            .map_err(|e| format!("cannot build the push HTTP client: {e}"))?;
        let tenant_http = builder()
            .dns_resolver(Arc::new(crate::egress::PublicOnly))
            // A proxy would connect for us, to wherever it is told.
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot build the push HTTP client: {e}"))?;
        Ok(Arc::new(Self {
            ops,
            clock,
            http,
            tenant_http,
            auth,
            workers: Mutex::new(HashMap::new()),
            stats: Mutex::new(HashMap::new()),
            changed: Notify::new(),
            delivering: AtomicU64::new(0),
            shutdown,
            expr,
            enabled,
            delivery_log,
        }))
    }

    /// The stats of a queue's destination (call it for queues that have one).
    pub fn stats(&self, queue: &QueueInfo) -> PushStatsOut {
        let stats = self
            .stats
            .lock()
            .get(&queue.name)
            .cloned()
            .unwrap_or_default();
        stats.out(self.clock.now_ms(), self.enabled, queue.is_push_paused)
    }

    /// True when the server delivers pushes at all.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Pauses or resumes a queue's push delivery (kept by the store, across restarts and for
    /// every node); other nodes' workers stop or start when their store reports the change.
    /// Requests already sent finish. This node's worker is stopped before the pause answers,
    /// not at the supervisor's next look: a message sent after the answer is never pushed
    /// (one the stopped worker had just claimed is given back, `work`).
    pub async fn set_paused(&self, queue: &str, paused: bool) -> sluice_ops::OpsResult<()> {
        self.ops.queue_push_pause(queue, paused).await?;
        if paused && let Some(worker) = self.workers.lock().remove(queue) {
            worker.stop.cancel();
        }
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

    /// Waits (bounded) for requests in flight to finish and record their ack or nack, so a
    /// graceful stop does not send them again after the restart.
    pub async fn wait_idle(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.delivering.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
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
