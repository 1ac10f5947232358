//! The load generators behind `sluice bench`: one function per kind of load, each bounded by a
//! message count and a deadline.
//!
//! They make their requests through an [`Api`]: the native one is [`sluice_client`]'s client,
//! the SQS scenario brings another ([`super::sqs`]), so both APIs are measured by the same
//! loops and their figures mean the same. They share one client (one connection pool) per task
//! group, and do little work per message, because they share the machine with the server they
//! measure. They never panic on a failed request: failures are counted, the first one is kept
//! for the report, and the figures say how many messages actually got through.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::value::RawValue;
use sluice_client::Client;
use sluice_client::wire::{MessageIn, ReceiveIn};
use tokio::sync::Semaphore;
use uuid::Uuid;

/// Most enqueues the paced producer keeps in flight; past it the pacer waits, so a stalled server
/// shows up as a lower achieved rate instead of an ever-growing pile of tasks.
const PACED_INFLIGHT_MAX: usize = 512;

/// Empty long polls a consumer accepts after the producers are done before it gives up on the
/// messages still missing.
const EMPTY_POLLS_AFTER_DONE_MAX: u32 = 3;

/// Pause after a failed receive, so a server that refuses everything is not hammered.
const RECEIVE_ERROR_PAUSE: Duration = Duration::from_millis(20);

/// Microseconds since the first call: the clock written into message bodies.
///
/// Producers and consumers run in this process, so one monotonic clock serves both ends.
pub fn now_us() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_micros() as u64
}

/// Makes message bodies of a fixed size: a JSON string `"<sent_us>:<seq>:xxx…"` whose JSON text
/// (quotes included) is exactly `bytes` long, or just long enough for the stamp when `bytes` is
/// smaller than that.
#[derive(Debug, Clone)]
pub struct Bodies {
    bytes: usize,
    padding: Arc<str>,
}

impl Bodies {
    /// Bodies of `bytes` bytes of JSON text.
    pub fn new(bytes: usize) -> Self {
        Self {
            bytes,
            padding: "x".repeat(bytes).into(),
        }
    }

    /// A message with body number `seq`, stamped with the current [`now_us`].
    pub fn message(&self, seq: u64) -> MessageIn {
        use std::fmt::Write;
        let mut text = String::with_capacity(self.bytes.max(48));
        let _ = write!(text, "\"{}:{seq}:", now_us());
        let padding = self.bytes.saturating_sub(text.len() + 1);
        text.push_str(&self.padding[..padding]);
        text.push('"');
        let body = RawValue::from_string(text).expect("a quoted ASCII string is valid JSON");
        MessageIn::json(body)
    }

    /// The same body as plain text, the form SQS carries (`MessageBody` is a string):
    /// `<sent_us>:<seq>:xxx…`, exactly `bytes` long (or just long enough for the stamp). Stored,
    /// it takes as many bytes as the JSON text of [`Bodies::message`].
    pub fn text(&self, seq: u64) -> String {
        use std::fmt::Write;
        let mut text = String::with_capacity(self.bytes.max(48));
        let _ = write!(text, "{}:{seq}:", now_us());
        let padding = self.bytes.saturating_sub(text.len());
        text.push_str(&self.padding[..padding]);
        text
    }

    /// The send time stamped into a body by [`Bodies::message`].
    fn sent_us(body: &RawValue) -> Option<u64> {
        Self::sent_us_of_text(body.get().strip_prefix('"')?)
    }

    /// The send time stamped into a body by [`Bodies::text`].
    pub fn sent_us_of_text(text: &str) -> Option<u64> {
        text[..text.find(':')?].parse().ok()
    }
}

/// Percentiles of one histogram, in µs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

impl LatencySummary {
    /// `None` for an empty histogram.
    pub fn of(histogram: &Histogram<u64>) -> Option<Self> {
        (!histogram.is_empty()).then(|| Self {
            count: histogram.len(),
            p50_us: histogram.value_at_quantile(0.50),
            p90_us: histogram.value_at_quantile(0.90),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
            mean_us: histogram.mean(),
        })
    }
}

/// A duration in whole µs, at least 1 (the histograms start at 1).
pub fn micros(duration: Duration) -> u64 {
    (duration.as_micros() as u64).max(1)
}

/// A histogram of µs from 1 µs to 10 min, 3 significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("the bounds are valid")
}

/// The requests the loads make, so the same loops drive the native API and the SQS API.
pub trait Api: Clone + Send + Sync + 'static {
    /// Why a request failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// A client for the same server with a connection pool of its own, so the consumers' long
    /// polls never hold a connection a producer waits for.
    fn own_pool(&self) -> Self;

    /// Sends the messages numbered `seqs` (made by `bodies`, so each carries its send time) to
    /// `queue` in one request; with `single`, `seqs` holds one message and the API's
    /// single-message request is used.
    fn send(
        &self,
        queue: &str,
        bodies: &Bodies,
        seqs: Range<u64>,
        single: bool,
    ) -> impl Future<Output = Result<Outcome<Self::Error>, Self::Error>> + Send;

    /// Receives up to `max` messages, waiting up to `wait_ms` for the first (long polling).
    fn receive(
        &self,
        queue: &str,
        max: i64,
        wait_ms: i64,
    ) -> impl Future<Output = Result<Vec<Received>, Self::Error>> + Send;

    /// Acks (deletes) the messages of `receipts` in one request.
    fn ack(
        &self,
        queue: &str,
        receipts: Vec<String>,
    ) -> impl Future<Output = Result<Outcome<Self::Error>, Self::Error>> + Send;
}

/// An answered send or ack: how many messages it stored or acked, and why the others were
/// refused (an SQS batch answers entry by entry, so a request can do both).
#[derive(Debug)]
pub struct Outcome<E> {
    pub done: u64,
    pub refused: Option<E>,
}

impl<E> Outcome<E> {
    /// Every message of the request went through.
    pub fn all(done: u64) -> Self {
        Self {
            done,
            refused: None,
        }
    }
}

/// A received message, as the loads need it.
#[derive(Debug)]
pub struct Received {
    /// Its id, which counts it once however often it arrives.
    pub id: Uuid,
    /// The send time stamped in its body, if the body has one.
    pub sent_us: Option<u64>,
    /// What acks it.
    pub receipt: String,
}

/// The native API.
impl Api for Client {
    type Error = sluice_client::Error;

    fn own_pool(&self) -> Self {
        Client::new(self.base_url().as_str()).unwrap_or_else(|_| self.clone())
    }

    async fn send(
        &self,
        queue: &str,
        bodies: &Bodies,
        seqs: Range<u64>,
        single: bool,
    ) -> Result<Outcome<Self::Error>, Self::Error> {
        if single {
            self.enqueue(queue, &bodies.message(seqs.start)).await?;
            return Ok(Outcome::all(1));
        }
        let batch = seqs.map(|seq| bodies.message(seq)).collect();
        let out = self.enqueue_batch(queue, batch).await?;
        Ok(Outcome::all(out.results.len() as u64))
    }

    async fn receive(
        &self,
        queue: &str,
        max: i64,
        wait_ms: i64,
    ) -> Result<Vec<Received>, Self::Error> {
        let request = ReceiveIn {
            max: Some(max),
            wait_ms: Some(wait_ms),
            visibility_timeout_ms: None,
        };
        let out = self.receive(queue, &request).await?;
        Ok(out
            .messages
            .into_iter()
            .map(|message| Received {
                id: message.message_id,
                sent_us: message.body.as_deref().and_then(Bodies::sent_us),
                receipt: message.receipt,
            })
            .collect())
    }

    async fn ack(
        &self,
        queue: &str,
        receipts: Vec<String>,
    ) -> Result<Outcome<Self::Error>, Self::Error> {
        let out = Client::ack(self, queue, receipts).await?;
        Ok(Outcome::all(out.acked as u64))
    }
}

/// Failed requests: how many, and the first one in words.
#[derive(Debug, Default)]
struct Failures {
    count: AtomicU64,
    first: Mutex<Option<String>>,
}

impl Failures {
    /// Counts a failed request; keeps `what` and the error's chain of causes if it is the first.
    fn record(&self, what: &str, error: &(impl std::error::Error + ?Sized)) {
        if self.count.fetch_add(1, Ordering::Relaxed) == 0 {
            let mut text = format!("{what}: {error}");
            let mut source = error.source();
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            *self.first.lock().expect("never poisoned") = Some(text);
        }
    }

    fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn first(&self) -> Option<String> {
        self.first.lock().expect("never poisoned").clone()
    }
}

/// How to run [`enqueue_load`].
#[derive(Debug, Clone, Copy)]
pub struct EnqueueLoad {
    /// Messages to send in all.
    pub messages: u64,
    /// Concurrent clients, each with one request in flight.
    pub clients: usize,
    /// Messages per request; 1 sends the single-message form.
    pub batch_size: usize,
    /// Stop starting requests after this long.
    pub time_limit: Duration,
}

/// What [`enqueue_load`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct EnqueueReport {
    /// Concurrent clients.
    pub clients: usize,
    /// Messages per request.
    pub batch_size: usize,
    /// Messages the server confirmed.
    pub messages: u64,
    /// Requests answered with success.
    pub requests: u64,
    /// From the first request sent to the last answer.
    pub elapsed_s: f64,
    /// `messages / elapsed_s`.
    pub msgs_per_s: f64,
    /// Time of one request, from sending to the whole answer read.
    pub request_latency: Option<LatencySummary>,
    /// Failed requests, and answered ones that refused some of their messages.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// True when the time limit stopped it before all messages were sent.
    pub hit_time_limit: bool,
}

/// Sends `load.messages` messages to `queue` from `load.clients` concurrent clients, each with
/// one request in flight, and times every request.
pub async fn enqueue_load<A: Api>(
    api: &A,
    queue: &str,
    bodies: &Bodies,
    load: EnqueueLoad,
) -> EnqueueReport {
    let next = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(Failures::default());
    let queue: Arc<str> = queue.into();
    let batch = load.batch_size.max(1) as u64;
    let started = Instant::now();
    let deadline = started + load.time_limit;
    let workers: Vec<_> = (0..load.clients.max(1))
        .map(|_| {
            let (api, queue, bodies) = (api.clone(), queue.clone(), bodies.clone());
            let (next, failures) = (next.clone(), failures.clone());
            tokio::spawn(async move {
                let mut latency = histogram();
                let (mut messages, mut requests) = (0u64, 0u64);
                while Instant::now() < deadline {
                    let first = next.fetch_add(batch, Ordering::Relaxed);
                    if first >= load.messages {
                        break;
                    }
                    let count = batch.min(load.messages - first);
                    let single = count == 1 && load.batch_size <= 1;
                    let sent = Instant::now();
                    match api
                        .send(&queue, &bodies, first..first + count, single)
                        .await
                    {
                        Ok(outcome) => {
                            latency.saturating_record(micros(sent.elapsed()));
                            messages += outcome.done;
                            requests += 1;
                            if let Some(refused) = outcome.refused {
                                failures.record("enqueue", &refused);
                            }
                        }
                        Err(error) => failures.record("enqueue", &error),
                    }
                }
                (latency, messages, requests)
            })
        })
        .collect();
    let mut latency = histogram();
    let (mut messages, mut requests) = (0u64, 0u64);
    for worker in workers {
        let (worker_latency, worker_messages, worker_requests) =
            worker.await.expect("enqueue workers do not panic");
        latency
            .add(&worker_latency)
            .expect("histograms with the same bounds add up");
        messages += worker_messages;
        requests += worker_requests;
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    EnqueueReport {
        clients: load.clients,
        batch_size: load.batch_size,
        messages,
        requests,
        elapsed_s,
        msgs_per_s: messages as f64 / elapsed_s,
        request_latency: LatencySummary::of(&latency),
        errors: failures.count(),
        first_error: failures.first(),
        hit_time_limit: next.load(Ordering::Relaxed) < load.messages,
    }
}

/// How consumers receive and ack, in [`end_to_end`] and [`paced_latency`].
#[derive(Debug, Clone, Copy)]
pub struct Consumers {
    /// Concurrent consumers, each with one receive in flight.
    pub count: usize,
    /// Acks each consumer may have in flight while it receives the next batch (at least 1).
    /// A worker that processes a batch while fetching the next one behaves like this; with 1,
    /// every receive waits for the previous batch's durable ack.
    pub acks_in_flight: usize,
    /// `max` of each receive.
    pub receive_max: i64,
    /// `wait_ms` of each receive (long polling).
    pub wait_ms: i64,
}

/// How to run [`end_to_end`].
#[derive(Debug, Clone, Copy)]
pub struct EndToEndLoad {
    /// Messages to send in all.
    pub messages: u64,
    /// Producer tasks.
    pub producers: usize,
    /// Requests each producer keeps in flight.
    pub inflight: usize,
    /// Messages per enqueue request.
    pub batch_size: usize,
    /// The consumers.
    pub consumers: Consumers,
    /// Stop after this long, delivered or not.
    pub time_limit: Duration,
}

/// What [`end_to_end`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct EndToEndReport {
    /// Producer tasks.
    pub producers: usize,
    /// Requests in flight per producer.
    pub inflight_per_producer: usize,
    /// Messages per enqueue request.
    pub batch_size: usize,
    /// Consumer tasks.
    pub consumers: usize,
    /// Acks each consumer keeps in flight.
    pub acks_in_flight: usize,
    /// `max` of each receive.
    pub receive_max: i64,
    /// `wait_ms` of each receive.
    pub wait_ms: i64,
    /// Messages the server confirmed.
    pub enqueued: u64,
    /// From the start until the last enqueue was answered.
    pub produce_elapsed_s: f64,
    /// `enqueued / produce_elapsed_s`.
    pub produce_msgs_per_s: f64,
    /// The delivery counts.
    #[serde(flatten)]
    pub delivery: Delivery,
    /// From the start until the last ack was answered.
    pub elapsed_s: f64,
    /// `distinct / elapsed_s`: messages enqueued, received and acked per second.
    pub msgs_per_s: f64,
    /// From a message's send time to its arrival at a consumer (includes queueing under load).
    pub enqueue_to_receive: Option<LatencySummary>,
    /// The consumers' requests.
    #[serde(flatten)]
    pub consumer_requests: ConsumerRequests,
    /// Failed requests (enqueue, receive or ack).
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// True when the time limit ended it.
    pub hit_time_limit: bool,
}

/// How long the consumers' requests took.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ConsumerRequests {
    /// Receives that brought messages (empty long polls left out).
    pub receive_request: Option<LatencySummary>,
    /// Acks.
    pub ack_request: Option<LatencySummary>,
}

/// What the consumers saw.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Delivery {
    /// Messages received, counting redeliveries.
    pub deliveries: u64,
    /// Distinct message ids received.
    pub distinct: u64,
    /// Deliveries of an id received before.
    pub duplicates: u64,
    /// Confirmed enqueues never received.
    pub missing: u64,
    /// Messages acked (per the ack answers).
    pub acked: u64,
}

/// Producers send `load.messages` in batches while consumers receive and ack them; checks that
/// every confirmed message arrives.
pub async fn end_to_end<A: Api>(
    api: &A,
    queue: &str,
    bodies: &Bodies,
    load: EndToEndLoad,
) -> EndToEndReport {
    let started = Instant::now();
    let deadline = started + load.time_limit;
    let shared = Arc::new(Shared::new(queue, deadline, started, load.consumers, 0));
    let consumers = spawn_consumers(&api.own_pool(), &shared);

    let next = Arc::new(AtomicU64::new(0));
    let batch = load.batch_size.max(1) as u64;
    let producers: Vec<_> = (0..load.producers.max(1))
        .map(|_| {
            let (api, bodies, shared, next) =
                (api.clone(), bodies.clone(), shared.clone(), next.clone());
            tokio::spawn(async move {
                let firsts = futures::stream::iter(std::iter::from_fn(|| {
                    if Instant::now() >= deadline {
                        return None;
                    }
                    let first = next.fetch_add(batch, Ordering::Relaxed);
                    (first < load.messages).then_some(first)
                }));
                firsts
                    .map(|first| {
                        let seqs = first..first + batch.min(load.messages - first);
                        let (api, queue, bodies) =
                            (api.clone(), shared.queue.clone(), bodies.clone());
                        async move { api.send(&queue, &bodies, seqs, false).await }
                    })
                    .buffer_unordered(load.inflight.max(1))
                    .for_each(|result| {
                        match result {
                            Ok(outcome) => {
                                shared.enqueued.fetch_add(outcome.done, Ordering::Release);
                                if let Some(refused) = outcome.refused {
                                    shared.failures.record("enqueue", &refused);
                                }
                            }
                            Err(error) => shared.failures.record("enqueue", &error),
                        }
                        async {}
                    })
                    .await;
            })
        })
        .collect();
    for producer in producers {
        producer.await.expect("producers do not panic");
    }
    let produce_elapsed_s = started.elapsed().as_secs_f64();
    shared.producers_done.store(true, Ordering::Release);
    for consumer in consumers {
        consumer.await.expect("consumers do not panic");
    }

    shared.end_to_end_report(load, produce_elapsed_s)
}

/// How to run [`paced_latency`].
#[derive(Debug, Clone, Copy)]
pub struct PacedLoad {
    /// Messages per second, sent one per request.
    pub rate: u64,
    /// Measured time.
    pub duration: Duration,
    /// Time before it, sent at the same rate but not measured (connections, caches).
    pub warmup: Duration,
    /// The consumers.
    pub consumers: Consumers,
    /// Stop after this long, delivered or not.
    pub time_limit: Duration,
}

/// What [`paced_latency`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    /// Asked-for messages per second.
    pub target_rate: u64,
    /// Messages sent per second, as achieved.
    pub achieved_rate: f64,
    /// Measured seconds (after the warm-up).
    pub duration_s: f64,
    /// Unmeasured seconds before.
    pub warmup_s: f64,
    /// Consumer tasks.
    pub consumers: usize,
    /// Acks each consumer keeps in flight.
    pub acks_in_flight: usize,
    /// `max` of each receive.
    pub receive_max: i64,
    /// `wait_ms` of each receive.
    pub wait_ms: i64,
    /// Messages the server confirmed.
    pub enqueued: u64,
    /// The delivery counts.
    #[serde(flatten)]
    pub delivery: Delivery,
    /// From the send time in the body to the consumer holding the message, for messages sent
    /// after the warm-up.
    pub enqueue_to_receive: Option<LatencySummary>,
    /// One enqueue request, sent after the warm-up.
    pub enqueue_request: Option<LatencySummary>,
    /// The consumers' requests.
    #[serde(flatten)]
    pub consumer_requests: ConsumerRequests,
    /// Failed requests.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// True when the time limit ended it.
    pub hit_time_limit: bool,
}

/// Sends single-message enqueues at a steady `load.rate` while long-polling consumers receive and
/// ack them, and records how long each message took from its send to its arrival.
///
/// A pacer wakes every millisecond and starts one task per message that is due, so a slow answer
/// never delays the next send (no coordinated omission) until [`PACED_INFLIGHT_MAX`] are in
/// flight.
pub async fn paced_latency(
    client: &Client,
    queue: &str,
    bodies: &Bodies,
    load: PacedLoad,
) -> LatencyReport {
    let started = Instant::now();
    let deadline = started + load.time_limit;
    let measure_from_us = now_us() + load.warmup.as_micros() as u64;
    let shared = Arc::new(Shared::new(
        queue,
        deadline,
        started,
        load.consumers,
        measure_from_us,
    ));
    let consumers = spawn_consumers(&client.own_pool(), &shared);

    let total = (load.rate as f64 * (load.warmup + load.duration).as_secs_f64()) as u64;
    let interval = Duration::from_secs_f64(1.0 / load.rate.max(1) as f64);
    let inflight = Arc::new(Semaphore::new(PACED_INFLIGHT_MAX));
    let enqueue_latency = Arc::new(Mutex::new(histogram()));
    let mut ticker = tokio::time::interval(Duration::from_millis(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sends = tokio::task::JoinSet::new();
    let paced_from = Instant::now();
    let mut sent = 0u64;
    while sent < total && Instant::now() < deadline {
        ticker.tick().await;
        let due =
            total.min(paced_from.elapsed().as_nanos() as u64 / interval.as_nanos() as u64 + 1);
        while sent < due {
            let permit = inflight
                .clone()
                .acquire_owned()
                .await
                .expect("the semaphore is never closed");
            let (client, bodies, shared) = (client.clone(), bodies.clone(), shared.clone());
            let enqueue_latency = enqueue_latency.clone();
            let seq = sent;
            sends.spawn(async move {
                let sent_us = now_us();
                match Api::send(&client, &shared.queue, &bodies, seq..seq + 1, true).await {
                    Ok(_) => {
                        shared.enqueued.fetch_add(1, Ordering::Release);
                        if sent_us >= measure_from_us {
                            let took = (now_us() - sent_us).max(1);
                            enqueue_latency
                                .lock()
                                .expect("never poisoned")
                                .saturating_record(took);
                        }
                    }
                    Err(error) => shared.failures.record("enqueue", &error),
                }
                drop(permit);
            });
            sent += 1;
        }
    }
    let pacing_s = paced_from.elapsed().as_secs_f64();
    while sends.join_next().await.is_some() {}
    shared.producers_done.store(true, Ordering::Release);
    for consumer in consumers {
        consumer.await.expect("consumers do not panic");
    }

    let tracker = shared.tracker.lock().expect("never poisoned");
    let enqueue_latency = enqueue_latency.lock().expect("never poisoned");
    LatencyReport {
        target_rate: load.rate,
        achieved_rate: sent as f64 / pacing_s,
        duration_s: load.duration.as_secs_f64(),
        warmup_s: load.warmup.as_secs_f64(),
        consumers: load.consumers.count,
        acks_in_flight: load.consumers.acks_in_flight,
        receive_max: load.consumers.receive_max,
        wait_ms: load.consumers.wait_ms,
        enqueued: shared.enqueued.load(Ordering::Acquire),
        delivery: shared.delivery(&tracker),
        enqueue_to_receive: LatencySummary::of(&tracker.latency),
        enqueue_request: LatencySummary::of(&enqueue_latency),
        consumer_requests: tracker.consumer_requests(),
        errors: shared.failures.count(),
        first_error: shared.failures.first(),
        hit_time_limit: Instant::now() >= deadline,
    }
}

/// State the producers and consumers of one scenario share.
#[derive(Debug)]
struct Shared {
    queue: Arc<str>,
    consumers: Consumers,
    deadline: Instant,
    started: Instant,
    /// Messages confirmed by the server.
    enqueued: AtomicU64,
    /// Set once no more enqueues will be confirmed.
    producers_done: AtomicBool,
    /// Messages acked, per the ack answers.
    acked: AtomicU64,
    /// When the latest ack was answered, in µs since `started`.
    last_ack_us: AtomicU64,
    tracker: Mutex<Tracker>,
    failures: Failures,
}

/// What the consumers received.
#[derive(Debug)]
struct Tracker {
    ids: HashSet<Uuid>,
    deliveries: u64,
    duplicates: u64,
    /// Send-to-receive time of messages sent at or after `measure_from_us`.
    latency: Histogram<u64>,
    /// Time of each receive that brought messages.
    receive_latency: Histogram<u64>,
    /// Time of each ack.
    ack_latency: Histogram<u64>,
    measure_from_us: u64,
}

impl Tracker {
    fn consumer_requests(&self) -> ConsumerRequests {
        ConsumerRequests {
            receive_request: LatencySummary::of(&self.receive_latency),
            ack_request: LatencySummary::of(&self.ack_latency),
        }
    }
}

impl Shared {
    fn new(
        queue: &str,
        deadline: Instant,
        started: Instant,
        consumers: Consumers,
        measure_from_us: u64,
    ) -> Self {
        Self {
            queue: queue.into(),
            consumers,
            deadline,
            started,
            enqueued: AtomicU64::new(0),
            producers_done: AtomicBool::new(false),
            acked: AtomicU64::new(0),
            last_ack_us: AtomicU64::new(0),
            tracker: Mutex::new(Tracker {
                ids: HashSet::new(),
                deliveries: 0,
                duplicates: 0,
                latency: histogram(),
                receive_latency: histogram(),
                ack_latency: histogram(),
                measure_from_us,
            }),
            failures: Failures::default(),
        }
    }

    /// True once the producers are done and every confirmed message has been received.
    fn all_received(&self) -> bool {
        // Read `producers_done` first: once it is set, `enqueued` no longer grows.
        self.producers_done.load(Ordering::Acquire)
            && self.tracker.lock().expect("never poisoned").ids.len() as u64
                >= self.enqueued.load(Ordering::Acquire)
    }

    /// Notes a receive that brought `messages`, sent at `sent`; returns their receipts.
    fn note_received(&self, sent: Instant, messages: Vec<Received>) -> Vec<String> {
        let received_us = now_us();
        let mut receipts = Vec::with_capacity(messages.len());
        let mut tracker = self.tracker.lock().expect("never poisoned");
        tracker
            .receive_latency
            .saturating_record(micros(sent.elapsed()));
        for message in messages {
            tracker.deliveries += 1;
            if !tracker.ids.insert(message.id) {
                tracker.duplicates += 1;
            }
            if let Some(sent_us) = message.sent_us
                && sent_us >= tracker.measure_from_us
            {
                tracker
                    .latency
                    .saturating_record(received_us.saturating_sub(sent_us).max(1));
            }
            receipts.push(message.receipt);
        }
        receipts
    }

    /// Notes the answer to an ack sent at `sent`.
    fn note_ack<E: std::error::Error>(&self, sent: Instant, answer: Result<Outcome<E>, E>) {
        match answer {
            Ok(outcome) => {
                self.acked.fetch_add(outcome.done, Ordering::Relaxed);
                let took = micros(sent.elapsed());
                self.tracker
                    .lock()
                    .expect("never poisoned")
                    .ack_latency
                    .saturating_record(took);
                if let Some(refused) = outcome.refused {
                    self.failures.record("ack", &refused);
                }
            }
            Err(error) => self.failures.record("ack", &error),
        }
        self.last_ack_us
            .fetch_max(self.started.elapsed().as_micros() as u64, Ordering::Relaxed);
    }

    /// The figures of [`end_to_end`]: from the start to the last ack answered, the delivery
    /// counts, the latencies and failures.
    fn end_to_end_report(&self, load: EndToEndLoad, produce_elapsed_s: f64) -> EndToEndReport {
        let enqueued = self.enqueued.load(Ordering::Acquire);
        let tracker = self.tracker.lock().expect("never poisoned");
        let delivery = self.delivery(&tracker);
        let elapsed_s = self.last_ack_us.load(Ordering::Relaxed) as f64 / 1e6;
        EndToEndReport {
            producers: load.producers,
            inflight_per_producer: load.inflight,
            batch_size: load.batch_size,
            consumers: load.consumers.count,
            acks_in_flight: load.consumers.acks_in_flight,
            receive_max: load.consumers.receive_max,
            wait_ms: load.consumers.wait_ms,
            enqueued,
            produce_elapsed_s,
            produce_msgs_per_s: enqueued as f64 / produce_elapsed_s,
            delivery,
            elapsed_s,
            msgs_per_s: if elapsed_s > 0.0 {
                delivery.distinct as f64 / elapsed_s
            } else {
                0.0
            },
            enqueue_to_receive: LatencySummary::of(&tracker.latency),
            consumer_requests: tracker.consumer_requests(),
            errors: self.failures.count(),
            first_error: self.failures.first(),
            hit_time_limit: Instant::now() >= self.deadline,
        }
    }

    fn delivery(&self, tracker: &Tracker) -> Delivery {
        let distinct = tracker.ids.len() as u64;
        Delivery {
            deliveries: tracker.deliveries,
            distinct,
            duplicates: tracker.duplicates,
            missing: self
                .enqueued
                .load(Ordering::Acquire)
                .saturating_sub(distinct),
            acked: self.acked.load(Ordering::Relaxed),
        }
    }
}

fn spawn_consumers<A: Api>(api: &A, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..shared.consumers.count.max(1))
        .map(|_| tokio::spawn(consume(api.clone(), shared.clone())))
        .collect()
}

/// One consumer: receive with a long poll, note what arrived, ack the whole batch in one call
/// (in the background, up to `acks_in_flight` at once);
/// until every confirmed message has arrived, or the deadline, or the producers are done and the
/// queue stays empty.
async fn consume<A: Api>(api: A, shared: Arc<Shared>) {
    let (max, wait_ms) = (shared.consumers.receive_max, shared.consumers.wait_ms);
    let mut empty_polls_after_done = 0;
    let acks = Arc::new(tokio::sync::Semaphore::new(
        shared.consumers.acks_in_flight.max(1),
    ));
    let mut pending_acks = tokio::task::JoinSet::new();
    while Instant::now() < shared.deadline && !shared.all_received() {
        let done = shared.producers_done.load(Ordering::Acquire);
        let receive_sent = Instant::now();
        let messages = match api.receive(&shared.queue, max, wait_ms).await {
            Ok(messages) => messages,
            Err(error) => {
                shared.failures.record("receive", &error);
                tokio::time::sleep(RECEIVE_ERROR_PAUSE).await;
                continue;
            }
        };
        if messages.is_empty() {
            if done {
                empty_polls_after_done += 1;
                if empty_polls_after_done >= EMPTY_POLLS_AFTER_DONE_MAX {
                    break;
                }
            }
            continue;
        }
        empty_polls_after_done = 0;
        let receipts = shared.note_received(receive_sent, messages);
        // Wait for a free ack slot, then ack in the background and go on receiving.
        let permit = match acks.clone().acquire_owned().await {
            Ok(permit) => permit,
            Err(_) => break,
        };
        let (api, ack_shared) = (api.clone(), shared.clone());
        pending_acks.spawn(async move {
            let _permit = permit;
            let sent = Instant::now();
            let answer = api.ack(&ack_shared.queue, receipts).await;
            ack_shared.note_ack(sent, answer);
        });
        while pending_acks.try_join_next().is_some() {}
    }
    while pending_acks.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_the_asked_size_and_carry_their_send_time() {
        let bodies = Bodies::new(1024);
        let message = bodies.message(7);
        let body = message.body.expect("a JSON body");
        assert_eq!(body.get().len(), 1024);
        let sent_us = Bodies::sent_us(&body).expect("a stamp");
        assert!(sent_us <= now_us());
        assert!(serde_json::from_str::<String>(body.get()).is_ok());
    }

    #[test]
    fn text_bodies_are_the_same_size_as_the_json_ones_and_carry_their_send_time() {
        let bodies = Bodies::new(1024);
        let text = bodies.text(7);
        assert_eq!(text.len(), 1024);
        assert!(text.contains(":7:"), "{text}");
        let sent_us = Bodies::sent_us_of_text(&text).expect("a stamp");
        assert!(sent_us <= now_us());
        assert!(Bodies::new(4).text(123).ends_with(":123:"));
    }

    #[test]
    fn small_bodies_grow_to_fit_the_stamp() {
        let body = Bodies::new(4).message(123).body.expect("a JSON body");
        assert!(
            body.get().starts_with('"') && body.get().ends_with(":123:\""),
            "{}",
            body.get()
        );
    }
}
