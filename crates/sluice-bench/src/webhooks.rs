//! Scenario 9 of `sluice bench`: webhooks. Signed ingress, then push delivery.
//!
//! 1. Ingress: a queue and a `standard_webhooks` endpoint whose secret the server reads from
//!    [`WEBHOOK_SECRET_ENV`] (set by the bench when it starts the server, so the scenario needs
//!    a server of the bench's own). Concurrent senders post signed JSON events to `/hooks/bench`,
//!    each with a fresh `webhook-id` and the current time, as a real sender would; every answer
//!    must be `202 Accepted`.
//! 2. Push: a destination served by the bench itself on loopback answers `204` at once and
//!    counts what it receives; the queue gets it as its push destination and the bench times
//!    how long the server takes to push every stored message to it.
//!
//! Webhook ingress has no method in `sluice_client` (it is the senders' side, not the API's),
//! so the scenario speaks plain HTTP for the endpoint definition and the senders; queues and
//! stats still go through the client. Every loop is bounded by a count and by the time limit.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use serde::Serialize;
use sluice_client::Client;
use sluice_client::wire::{
    PushSpec, QueueSpec, QueueStatsOut, SecretRef, VerifySpec, WebhookOut, WebhookSpec,
};
use sluice_webhooks::sign::StandardSigner;
use uuid::Uuid;

use super::load::{self, LatencySummary};
use super::server::{CpuSample, CpuUse, ServerProcess, WEBHOOK_SECRET_ENV};
use super::{cpu_use_line, failure_lines, latency_text, mib, progress, thousands};

/// The queue the scenario uses (deleted, with its dead-letter queue, before and after).
pub const QUEUE: &str = "bench-hooks";

/// The webhook endpoint: senders post to `/hooks/bench`.
pub const ENDPOINT: &str = "bench";

/// What ingress should reach on the reference machine, printed next to the figure.
pub const TARGET_PER_S: u64 = 20_000;

/// `concurrency` of the push destination.
const PUSH_CONCURRENCY: u32 = 64;

/// The path of the in-process destination.
const PUSH_PATH: &str = "/in";

/// Timeout of one sender request.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Timeout of the admin requests the client has no method for.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// How often the bench looks whether the destination has seen every message.
const PUSH_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Most time to wait, after the destination has seen every id, for the server's acks to show
/// in `stats.push.delivered`.
const SETTLE_MAX: Duration = Duration::from_secs(10);

/// Pause between two stats requests while settling.
const SETTLE_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A fresh random `whsec_` secret (32 bytes) for one bench run.
pub fn new_secret() -> String {
    let key: [u8; 32] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// How to run [`run`].
#[derive(Debug, Clone)]
pub struct WebhooksLoad {
    /// Webhook requests to send (and messages to push).
    pub requests: u64,
    /// Concurrent senders, each with one request in flight.
    pub clients: usize,
    /// Most time of the ingress and of the push.
    pub time_limit: Duration,
    /// The endpoint's and the push destination's transform.
    pub transform: Option<String>,
}

/// Scenario 9.
#[derive(Debug, Serialize)]
pub struct WebhooksReport {
    pub queue: &'static str,
    pub endpoint: &'static str,
    /// `standard_webhooks`.
    pub scheme: &'static str,
    /// Requests asked for.
    pub requests: u64,
    pub clients: usize,
    /// Bytes of each event's JSON text.
    pub body_bytes: usize,
    /// Webhooks per second the ingress should reach.
    pub target_per_s: u64,
    /// The endpoint's and the push destination's transform (`--webhook-transform`).
    pub transform: Option<String>,
    pub ingress: Option<IngressReport>,
    pub push: Option<PushReport>,
    /// Of the server, read at the end (the peak covers whatever ran before too).
    pub server_memory_after: Option<super::server::Memory>,
    /// What went wrong, in words; `None` when every step ran and every check held.
    pub failure: Option<String>,
}

/// Step 1: signed requests to `/hooks/bench`.
#[derive(Debug, Serialize)]
pub struct IngressReport {
    /// Requests sent (answered or not).
    pub sent: u64,
    /// Answered `202 Accepted`.
    pub accepted: u64,
    /// Other answers, by status code.
    pub other_statuses: BTreeMap<u16, u64>,
    /// Requests with no answer (connection errors, timeouts).
    pub transport_errors: u64,
    /// The first answer other than 202 or the first transport error, in words.
    pub first_failure: Option<String>,
    /// From the first request sent to the last answer.
    pub elapsed_s: f64,
    /// `accepted / elapsed_s`.
    pub requests_per_s: f64,
    /// Time of one request answered 202, from sending to the whole answer read.
    pub request_latency: Option<LatencySummary>,
    /// True when the time limit stopped it before every request was sent.
    pub hit_time_limit: bool,
    /// The endpoint's own counters afterwards (`GET /v1/webhooks/bench`).
    pub endpoint_stats: Option<EndpointStats>,
    /// `ready` of the queue afterwards.
    pub ready_after: Option<u64>,
    pub cpu: CpuUse,
}

/// The counters of the endpoint, as the server reports them.
#[derive(Debug, Serialize)]
pub struct EndpointStats {
    pub received: u64,
    pub accepted: u64,
    pub duplicates: u64,
    pub dead_lettered: u64,
    pub rejected: BTreeMap<String, u64>,
}

/// Step 2: pushing the stored messages to the in-process destination.
#[derive(Debug, Serialize)]
pub struct PushReport {
    /// `concurrency` of the destination.
    pub concurrency: u32,
    /// Messages expected (the ones ingress stored).
    pub messages: u64,
    /// The `PUT` that set the destination (included in `elapsed_s`).
    pub put_s: f64,
    /// From sending that `PUT` until the destination had seen every message id; the whole
    /// time limit when it never did.
    pub elapsed_s: f64,
    /// `distinct_ids / elapsed_s`.
    pub pushes_per_s: f64,
    /// Requests the destination received.
    pub requests_seen: u64,
    /// Distinct `sluice-message-id` headers among them.
    pub distinct_ids: u64,
    /// Requests whose id had been seen before.
    pub duplicates: u64,
    /// Requests without a `sluice-message-id` header.
    pub without_id: u64,
    /// True when the time limit ended the wait.
    pub hit_time_limit: bool,
    /// `stats.push` once settled (or when the settle wait ran out).
    pub delivered: Option<u64>,
    pub retried: Option<u64>,
    pub failed_permanently: Option<u64>,
    /// `stats.push.latency_ms.p50`/`p99`: the server's view of a push request.
    pub server_latency_p50_ms: Option<u64>,
    pub server_latency_p99_ms: Option<u64>,
    /// From every id seen until `delivered` reached `messages` (to within one poll).
    pub settle_s: f64,
    /// The queue once settled.
    pub ready_after: Option<u64>,
    pub in_flight_after: Option<u64>,
    pub cpu: CpuUse,
}

/// Runs scenario 9 against the bench's own server. Deletes the endpoint, the queue and its
/// dead-letter queue before (leftovers of an earlier run) and after.
pub async fn run(
    client: &Client,
    server: &ServerProcess,
    secret: &str,
    body_bytes: usize,
    load: WebhooksLoad,
) -> WebhooksReport {
    let mut report = WebhooksReport {
        queue: QUEUE,
        endpoint: ENDPOINT,
        scheme: "standard_webhooks",
        requests: load.requests,
        clients: load.clients,
        body_bytes,
        target_per_s: TARGET_PER_S,
        transform: load.transform.clone(),
        ingress: None,
        push: None,
        server_memory_after: None,
        failure: None,
    };
    let http = match reqwest::Client::builder()
        .connect_timeout(sluice_client::CONNECT_TIMEOUT)
        .pool_max_idle_per_host(load.clients.max(1) + 4)
        .build()
    {
        Ok(http) => http,
        Err(error) => {
            report.failure = Some(format!("cannot build an HTTP client: {error}"));
            return report;
        }
    };
    let base = client.base_url().as_str().trim_end_matches('/').to_owned();
    clean_up(&http, client, &base).await;
    let mut problems = Vec::new();
    if let Err(error) = steps(
        &http,
        client,
        &base,
        server,
        secret,
        body_bytes,
        load,
        &mut report,
        &mut problems,
    )
    .await
    {
        problems.push(format!("{error:#}"));
    }
    if !problems.is_empty() {
        let failure = problems.join("; ");
        progress(&format!("9. failed: {failure}"));
        report.failure = Some(failure);
    }
    report.server_memory_after = server.memory();
    clean_up(&http, client, &base).await;
    report
}

/// Deletes the endpoint, then the queue, then its dead-letter queue.
async fn clean_up(http: &reqwest::Client, client: &Client, base: &str) {
    match http
        .delete(format!("{base}/v1/webhooks/{ENDPOINT}"))
        .timeout(ADMIN_TIMEOUT)
        .send()
        .await
    {
        Ok(response) if response.status().is_success() => {}
        Ok(response) if response.status() == StatusCode::NOT_FOUND => {}
        Ok(response) => progress(&format!(
            "cannot delete webhook endpoint {ENDPOINT}: HTTP {}",
            response.status()
        )),
        Err(error) => progress(&format!(
            "cannot delete webhook endpoint {ENDPOINT}: {error}"
        )),
    }
    for name in [QUEUE.to_owned(), format!("{QUEUE}.dlq")] {
        match client.queue_delete(&name).await {
            Ok(_) => {}
            Err(error) if error.has_code(sluice_client::ErrorCode::QueueNotFound) => {}
            Err(error) => progress(&format!("cannot delete queue {name}: {error}")),
        }
    }
}

/// The steps; an error ends the scenario, a failed check is added to `problems` and the next
/// step still runs when it can.
#[allow(clippy::too_many_arguments)]
async fn steps(
    http: &reqwest::Client,
    client: &Client,
    base: &str,
    server: &ServerProcess,
    secret: &str,
    body_bytes: usize,
    load: WebhooksLoad,
    report: &mut WebhooksReport,
    problems: &mut Vec<String>,
) -> anyhow::Result<()> {
    anyhow::ensure!(load.requests > 0, "--webhook-requests must be at least 1");
    let signer = StandardSigner::new(secret)
        .map_err(|error| anyhow::anyhow!("the bench's webhook secret: {error}"))?;

    // 1. Ingress.
    progress("9. defining the queue and the webhook endpoint");
    client
        .queue_put(QUEUE, &QueueSpec::default())
        .await
        .with_context(|| format!("cannot create queue {QUEUE}"))?;
    define_endpoint(http, base, load.transform.clone()).await?;
    progress(&format!(
        "9. ingress: {} signed webhooks from {} clients",
        thousands(load.requests),
        load.clients
    ));
    let mut ingress = ingress(http, base, server, &signer, body_bytes, load.clone()).await;
    ingress.endpoint_stats = endpoint_stats(http, base).await;
    ingress.ready_after = client.queue_stats(QUEUE).await.ok().map(|s| s.ready);
    let stored = ingress.accepted;
    if stored != load.requests {
        let others: Vec<String> = ingress
            .other_statuses
            .iter()
            .map(|(status, count)| format!("{count} × {status}"))
            .collect();
        problems.push(format!(
            "ingress: {} of {} requests answered 202 (other answers: {}; no answer: {}){}",
            stored,
            load.requests,
            if others.is_empty() {
                "none".to_owned()
            } else {
                others.join(", ")
            },
            ingress.transport_errors,
            if ingress.hit_time_limit {
                "; stopped by the time limit"
            } else {
                ""
            }
        ));
    }
    if let Some(ready) = ingress.ready_after
        && ready != stored
    {
        problems.push(format!(
            "ingress: {stored} requests answered 202 but the queue holds {ready} ready messages"
        ));
    }
    report.ingress = Some(ingress);
    anyhow::ensure!(stored > 0, "no webhook was accepted; nothing to push");

    // 2. Push.
    progress(&format!(
        "9. push: {} messages to a destination in the bench, concurrency {PUSH_CONCURRENCY}",
        thousands(stored)
    ));
    let push = push(
        client,
        server,
        stored,
        load.time_limit,
        load.transform.clone(),
    )
    .await?;
    if push.hit_time_limit {
        problems.push(format!(
            "push: the destination saw {} of {stored} message ids within the time limit",
            push.distinct_ids
        ));
    }
    if push.duplicates > 0 || push.without_id > 0 {
        problems.push(format!(
            "push: {} duplicate requests, {} without a sluice-message-id",
            push.duplicates, push.without_id
        ));
    }
    match push.delivered {
        Some(delivered) if delivered == stored => {}
        Some(delivered) => problems.push(format!(
            "push: stats.push.delivered is {delivered}, not {stored}"
        )),
        None => problems.push("push: the queue's stats have no push figures".into()),
    }
    if push.ready_after != Some(0) || push.in_flight_after != Some(0) {
        problems.push(format!(
            "push: the queue still holds messages afterwards (ready {:?}, in flight {:?})",
            push.ready_after, push.in_flight_after
        ));
    }
    report.push = Some(push);
    Ok(())
}

/// `PUT /v1/webhooks/bench`: Standard Webhooks with the secret in [`WEBHOOK_SECRET_ENV`].
async fn define_endpoint(
    http: &reqwest::Client,
    base: &str,
    transform: Option<String>,
) -> anyhow::Result<()> {
    let spec = WebhookSpec {
        queue: QUEUE.into(),
        topic: None,
        verify: VerifySpec {
            scheme: "standard_webhooks".into(),
            secrets: vec![SecretRef {
                env: Some(WEBHOOK_SECRET_ENV.into()),
                file: None,
            }],
            tolerance_s: None,
            header: None,
            algorithm: None,
            encoding: None,
            prefix: None,
        },
        idempotency: None,
        filter: None,
        transform,
        key: None,
        priority: None,
        max_body_bytes: None,
        public_url: None,
        keep_signature_headers: false,
    };
    let response = http
        .put(format!("{base}/v1/webhooks/{ENDPOINT}"))
        .timeout(ADMIN_TIMEOUT)
        .json(&spec)
        .send()
        .await
        .with_context(|| format!("cannot define webhook endpoint {ENDPOINT}"))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        anyhow::bail!("defining webhook endpoint {ENDPOINT}: HTTP {status}: {text}");
    }
    Ok(())
}

/// The endpoint's counters, or `None` when they cannot be read.
async fn endpoint_stats(http: &reqwest::Client, base: &str) -> Option<EndpointStats> {
    let response = http
        .get(format!("{base}/v1/webhooks/{ENDPOINT}"))
        .timeout(ADMIN_TIMEOUT)
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let out: WebhookOut = response.json().await.ok()?;
    Some(EndpointStats {
        received: out.stats.received,
        accepted: out.stats.accepted,
        duplicates: out.stats.duplicates,
        dead_lettered: out.stats.dead_lettered,
        rejected: out.stats.rejected,
    })
}

/// Event bodies: a JSON object whose text is `bytes` long (or just long enough for the fields),
/// `{"type":"bench.event","seq":N,"sent_us":T,"data":"xxx…"}`.
#[derive(Debug, Clone)]
struct Events {
    bytes: usize,
    padding: Arc<str>,
}

impl Events {
    fn new(bytes: usize) -> Self {
        Self {
            bytes,
            padding: "x".repeat(bytes).into(),
        }
    }

    fn body(&self, seq: u64) -> Vec<u8> {
        let head = format!(
            r#"{{"type":"bench.event","seq":{seq},"sent_us":{},"data":""#,
            load::now_us()
        );
        let padding = self.bytes.saturating_sub(head.len() + 2);
        let mut body = String::with_capacity(head.len() + padding + 2);
        body.push_str(&head);
        body.push_str(&self.padding[..padding]);
        body.push_str("\"}");
        body.into_bytes()
    }
}

/// What the senders saw.
#[derive(Debug, Default)]
struct Answers {
    accepted: u64,
    other_statuses: BTreeMap<u16, u64>,
    transport_errors: u64,
    first_failure: Option<String>,
}

impl Answers {
    fn fail(&mut self, what: impl FnOnce() -> String) {
        if self.first_failure.is_none() {
            self.first_failure = Some(what());
        }
    }

    fn add(&mut self, other: Answers) {
        self.accepted += other.accepted;
        for (status, count) in other.other_statuses {
            *self.other_statuses.entry(status).or_default() += count;
        }
        self.transport_errors += other.transport_errors;
        if self.first_failure.is_none() {
            self.first_failure = other.first_failure;
        }
    }
}

/// Sends `load.requests` signed events from `load.clients` senders, each with one request in
/// flight, and times every request answered 202.
async fn ingress(
    http: &reqwest::Client,
    base: &str,
    server: &ServerProcess,
    signer: &StandardSigner,
    body_bytes: usize,
    load: WebhooksLoad,
) -> IngressReport {
    let url: Arc<str> = format!("{base}/hooks/{ENDPOINT}").into();
    let events = Events::new(body_bytes);
    let next = Arc::new(AtomicU64::new(0));
    let cpu_before = CpuSample::take(Some(server));
    let started = Instant::now();
    let deadline = started + load.time_limit;
    let senders: Vec<_> = (0..load.clients.max(1))
        .map(|_| {
            let (http, url, events, signer, next) = (
                http.clone(),
                url.clone(),
                events.clone(),
                signer.clone(),
                next.clone(),
            );
            tokio::spawn(async move {
                let mut latency = load::histogram();
                let mut answers = Answers::default();
                while Instant::now() < deadline {
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    if seq >= load.requests {
                        break;
                    }
                    let body = events.body(seq);
                    let id = format!("msg_{}", Uuid::now_v7().simple());
                    let timestamp_s = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |since| since.as_secs() as i64);
                    let mut request = http
                        .post(&*url)
                        .timeout(SEND_TIMEOUT)
                        .header("content-type", "application/json");
                    for (name, value) in signer.headers(&id, timestamp_s, &body) {
                        request = request.header(name, value);
                    }
                    let sent = Instant::now();
                    match request.body(body).send().await {
                        Ok(response) => {
                            let status = response.status();
                            let answer = response.bytes().await;
                            match (status, answer) {
                                (StatusCode::ACCEPTED, Ok(_)) => {
                                    latency.saturating_record(load::micros(sent.elapsed()));
                                    answers.accepted += 1;
                                }
                                (StatusCode::ACCEPTED, Err(error)) => {
                                    answers.transport_errors += 1;
                                    answers
                                        .fail(|| format!("202 with an unreadable answer: {error}"));
                                }
                                (status, answer) => {
                                    *answers.other_statuses.entry(status.as_u16()).or_default() +=
                                        1;
                                    answers.fail(|| {
                                        let text = answer
                                            .map(|bytes| {
                                                String::from_utf8_lossy(&bytes)
                                                    .chars()
                                                    .take(300)
                                                    .collect::<String>()
                                            })
                                            .unwrap_or_default();
                                        format!("HTTP {status}: {text}")
                                    });
                                }
                            }
                        }
                        Err(error) => {
                            answers.transport_errors += 1;
                            answers.fail(|| format!("request failed: {}", error_chain(&error)));
                        }
                    }
                }
                (latency, answers)
            })
        })
        .collect();
    let mut latency = load::histogram();
    let mut answers = Answers::default();
    for sender in senders {
        let (sender_latency, sender_answers) = sender.await.expect("senders do not panic");
        latency
            .add(&sender_latency)
            .expect("histograms with the same bounds add up");
        answers.add(sender_answers);
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu = CpuSample::take(Some(server)).since(&cpu_before);
    let sent = next.load(Ordering::Relaxed).min(load.requests);
    IngressReport {
        sent,
        accepted: answers.accepted,
        other_statuses: answers.other_statuses,
        transport_errors: answers.transport_errors,
        first_failure: answers.first_failure,
        elapsed_s,
        requests_per_s: answers.accepted as f64 / elapsed_s.max(1e-9),
        request_latency: LatencySummary::of(&latency),
        hit_time_limit: sent < load.requests,
        endpoint_stats: None,
        ready_after: None,
        cpu,
    }
}

/// An error and its causes on one line.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// What the in-process destination has seen.
#[derive(Debug)]
struct Destination {
    /// Distinct ids to wait for.
    target: u64,
    requests: AtomicU64,
    without_id: AtomicU64,
    duplicates: AtomicU64,
    ids: Mutex<HashSet<Uuid>>,
    /// When the `target`-th distinct id arrived.
    all_seen_at: OnceLock<Instant>,
}

impl Destination {
    fn distinct(&self) -> u64 {
        self.ids.lock().expect("never poisoned").len() as u64
    }
}

/// The destination's handler: count, answer 204 at once.
async fn receive(
    axum::extract::State(destination): axum::extract::State<Arc<Destination>>,
    headers: HeaderMap,
) -> StatusCode {
    destination.requests.fetch_add(1, Ordering::Relaxed);
    let id = headers
        .get("sluice-message-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<Uuid>().ok());
    match id {
        None => {
            destination.without_id.fetch_add(1, Ordering::Relaxed);
        }
        Some(id) => {
            let mut ids = destination.ids.lock().expect("never poisoned");
            if !ids.insert(id) {
                destination.duplicates.fetch_add(1, Ordering::Relaxed);
            } else if ids.len() as u64 == destination.target {
                let _ = destination.all_seen_at.set(Instant::now());
            }
        }
    }
    StatusCode::NO_CONTENT
}

/// Serves the destination, sets it as the queue's push destination and waits until it has seen
/// `messages` distinct ids, then until the server's stats show them delivered.
async fn push(
    client: &Client,
    server: &ServerProcess,
    messages: u64,
    time_limit: Duration,
    transform: Option<String>,
) -> anyhow::Result<PushReport> {
    let destination = Arc::new(Destination {
        target: messages,
        requests: AtomicU64::new(0),
        without_id: AtomicU64::new(0),
        duplicates: AtomicU64::new(0),
        ids: Mutex::new(HashSet::with_capacity(messages as usize)),
        all_seen_at: OnceLock::new(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot listen on 127.0.0.1 for the push destination")?;
    let port = listener.local_addr()?.port();
    let app = axum::Router::new()
        .route(PUSH_PATH, axum::routing::post(receive))
        .with_state(destination.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let result = push_steps(
        client,
        server,
        &destination,
        port,
        messages,
        time_limit,
        transform,
    )
    .await;
    let _ = stop.send(());
    // Open push connections may hold the graceful shutdown; do not wait long for it.
    if tokio::time::timeout(Duration::from_secs(2), serving)
        .await
        .is_err()
    {
        progress("9. the push destination did not stop within 2 s; left to the runtime");
    }
    result
}

async fn push_steps(
    client: &Client,
    server: &ServerProcess,
    destination: &Destination,
    port: u16,
    messages: u64,
    time_limit: Duration,
    transform: Option<String>,
) -> anyhow::Result<PushReport> {
    let spec = QueueSpec {
        push: Some(Some(PushSpec {
            url: format!("http://127.0.0.1:{port}{PUSH_PATH}"),
            method: None,
            headers: None,
            timeout_ms: None,
            transform,
            signing_secret: None,
            retry_client_errors: None,
            concurrency: Some(PUSH_CONCURRENCY),
            secret_path: None,
        })),
        ..QueueSpec::default()
    };
    let cpu_before = CpuSample::take(Some(server));
    let started = Instant::now();
    let deadline = started + time_limit;
    client
        .queue_put(QUEUE, &spec)
        .await
        .context("cannot set the push destination")?;
    let put_s = started.elapsed().as_secs_f64();
    while destination.all_seen_at.get().is_none() && Instant::now() < deadline {
        tokio::time::sleep(PUSH_POLL_INTERVAL).await;
    }
    let all_seen_at = destination.all_seen_at.get().copied();
    let elapsed = all_seen_at.map_or_else(|| started.elapsed(), |at| at - started);
    let cpu = CpuSample::take(Some(server)).since(&cpu_before);

    // The server acks after each answer: give its stats a bounded moment to catch up.
    let settle_started = Instant::now();
    let settle_deadline = settle_started + SETTLE_MAX.min(time_limit);
    let mut stats: Option<QueueStatsOut> = None;
    loop {
        if let Ok(now) = client.queue_stats(QUEUE).await {
            let settled = now.ready == 0
                && now.in_flight == 0
                && now
                    .push
                    .as_ref()
                    .is_some_and(|push| push.delivered >= messages);
            stats = Some(now);
            if settled {
                break;
            }
        }
        if Instant::now() + SETTLE_POLL_INTERVAL > settle_deadline {
            break;
        }
        tokio::time::sleep(SETTLE_POLL_INTERVAL).await;
    }
    let settle_s = settle_started.elapsed().as_secs_f64();
    let push_stats = stats.as_ref().and_then(|stats| stats.push.as_ref());
    let distinct_ids = destination.distinct();
    let elapsed_s = elapsed.as_secs_f64();
    Ok(PushReport {
        concurrency: PUSH_CONCURRENCY,
        messages,
        put_s,
        elapsed_s,
        pushes_per_s: distinct_ids.min(messages) as f64 / elapsed_s.max(1e-9),
        requests_seen: destination.requests.load(Ordering::Relaxed),
        distinct_ids,
        duplicates: destination.duplicates.load(Ordering::Relaxed),
        without_id: destination.without_id.load(Ordering::Relaxed),
        hit_time_limit: all_seen_at.is_none(),
        delivered: push_stats.map(|push| push.delivered),
        retried: push_stats.map(|push| push.retried),
        failed_permanently: push_stats.map(|push| push.failed_permanently),
        server_latency_p50_ms: push_stats
            .and_then(|push| push.latency_ms)
            .map(|latency| latency.p50),
        server_latency_p99_ms: push_stats
            .and_then(|push| push.latency_ms)
            .map(|latency| latency.p99),
        settle_s,
        ready_after: stats.as_ref().map(|stats| stats.ready),
        in_flight_after: stats.as_ref().map(|stats| stats.in_flight),
        cpu,
    })
}

/// The lines of scenario 9 in the text report.
pub fn text_lines(out: &mut Vec<String>, r: &WebhooksReport) {
    out.push(format!(
        "9. webhooks: signed ingress and push delivery ({} to /hooks/{}, queue {}, {}-byte JSON events)",
        r.scheme, r.endpoint, r.queue, r.body_bytes
    ));
    if let Some(ingress) = &r.ingress {
        let verdict = if ingress.requests_per_s >= r.target_per_s as f64 {
            "met"
        } else {
            "NOT met"
        };
        out.push(format!(
            "   ingress: {} clients, {} webhooks accepted in {:.2} s: {} webhooks/s (target {} webhooks/s: {verdict})",
            r.clients,
            thousands(ingress.accepted),
            ingress.elapsed_s,
            thousands(ingress.requests_per_s as u64),
            thousands(r.target_per_s)
        ));
        let others: Vec<String> = ingress
            .other_statuses
            .iter()
            .map(|(status, count)| format!("{} × {status}", thousands(*count)))
            .collect();
        out.push(format!(
            "   202 Accepted: {} of {} sent{}{}",
            thousands(ingress.accepted),
            thousands(ingress.sent),
            if others.is_empty() {
                String::new()
            } else {
                format!("; OTHER ANSWERS: {}", others.join(", "))
            },
            if ingress.transport_errors > 0 {
                format!("; NO ANSWER: {}", thousands(ingress.transport_errors))
            } else {
                String::new()
            }
        ));
        if let Some(latency) = &ingress.request_latency {
            out.push(format!("   request: {}", latency_text(latency)));
        }
        failure_lines(
            out,
            ingress.sent - ingress.accepted,
            ingress.first_failure.as_deref(),
            ingress.hit_time_limit,
        );
        cpu_use_line(out, &ingress.cpu);
        if let Some(stats) = &ingress.endpoint_stats {
            let rejected: Vec<String> = stats
                .rejected
                .iter()
                .map(|(reason, count)| format!("{reason} {}", thousands(*count)))
                .collect();
            out.push(format!(
                "   endpoint counters: received {}, accepted {}, duplicates {}, dead-lettered {}, rejected {}",
                thousands(stats.received),
                thousands(stats.accepted),
                thousands(stats.duplicates),
                thousands(stats.dead_lettered),
                if rejected.is_empty() {
                    "0".to_owned()
                } else {
                    rejected.join(", ")
                }
            ));
        }
        if let Some(ready) = ingress.ready_after {
            out.push(format!("   queue ready afterwards: {}", thousands(ready)));
        }
    }
    if let Some(push) = &r.push {
        out.push(format!(
            "   push: {} messages to a destination in the bench answering 204, concurrency {}: every id seen {:.2} s after the PUT ({:.3} s of it the PUT): {} pushes/s",
            thousands(push.messages),
            push.concurrency,
            push.elapsed_s,
            push.put_s,
            thousands(push.pushes_per_s as u64)
        ));
        if push.hit_time_limit {
            out.push(format!(
                "   stopped by the time limit with {} of {} ids seen",
                thousands(push.distinct_ids),
                thousands(push.messages)
            ));
        }
        out.push(format!(
            "   destination saw {} requests, {} distinct ids, {} duplicates, {} without an id",
            thousands(push.requests_seen),
            thousands(push.distinct_ids),
            thousands(push.duplicates),
            thousands(push.without_id)
        ));
        let figure = |value: Option<u64>| value.map_or_else(|| "?".to_owned(), thousands);
        let latency = match (push.server_latency_p50_ms, push.server_latency_p99_ms) {
            (Some(p50), Some(p99)) => format!(", request p50 {p50} ms, p99 {p99} ms"),
            _ => String::new(),
        };
        out.push(format!(
            "   stats.push: delivered {}, retried {}, failed permanently {}{latency}; queue then: ready {}, in flight {} ({:.2} s after the last id)",
            figure(push.delivered),
            figure(push.retried),
            figure(push.failed_permanently),
            figure(push.ready_after),
            figure(push.in_flight_after),
            push.settle_s
        ));
        cpu_use_line(out, &push.cpu);
    }
    if let Some(memory) = &r.server_memory_after {
        out.push(format!(
            "   server memory at the end: peak RSS (VmHWM) {}, RSS now {}",
            mib(memory.peak_rss_kib),
            mib(memory.rss_kib)
        ));
    }
    if let Some(failure) = &r.failure {
        out.push(format!("   FAILED: {failure}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_the_asked_size_and_are_json() {
        let events = Events::new(1024);
        let body = events.body(42);
        assert_eq!(body.len(), 1024);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["seq"], 42);
        let small = Events::new(10).body(7);
        assert!(serde_json::from_slice::<serde_json::Value>(&small).is_ok());
    }

    #[test]
    fn the_secret_signs() {
        let secret = new_secret();
        assert!(secret.starts_with("whsec_"));
        assert!(StandardSigner::new(&secret).is_ok());
        assert_ne!(secret, new_secret());
    }
}
