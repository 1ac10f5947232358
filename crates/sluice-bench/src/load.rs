//! The load generators behind `sluice bench`: one function per kind of load, each bounded by a
//! message count and a deadline.
//!
//! They reach the server only through [`sluice_client`], share one client (one connection pool)
//! per task group, and do little work per message, because they share the machine with the
//! server they measure. They never panic on a failed request: failures are counted, the first
//! one is kept for the report, and the figures say how many messages actually got through.

use std::collections::HashSet;
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

    /// The send time stamped into a body by [`Bodies::message`].
    fn sent_us(body: &RawValue) -> Option<u64> {
        let text = body.get().strip_prefix('"')?;
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

/// Failed requests: how many, and the first one in words.
#[derive(Debug, Default)]
struct Failures {
    count: AtomicU64,
    first: Mutex<Option<String>>,
}

impl Failures {
    fn record(&self, what: &str, error: &sluice_client::Error) {
        if self.count.fetch_add(1, Ordering::Relaxed) == 0 {
            let mut text = format!("{what}: {error}");
            let mut source = std::error::Error::source(error);
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
    /// Failed requests.
    pub errors: u64,
    /// The first failure.
    pub first_error: Option<String>,
    /// True when the time limit stopped it before all messages were sent.
    pub hit_time_limit: bool,
}

/// Sends `load.messages` messages to `queue` from `load.clients` concurrent clients, each with
/// one request in flight, and times every request.
pub async fn enqueue_load(
    client: &Client,
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
            let (client, queue, bodies) = (client.clone(), queue.clone(), bodies.clone());
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
                    let sent = Instant::now();
                    let stored = if count == 1 && load.batch_size <= 1 {
                        client
                            .enqueue(&queue, &bodies.message(first))
                            .await
                            .map(|_| 1)
                    } else {
                        let batch = (first..first + count)
                            .map(|seq| bodies.message(seq))
                            .collect();
                        client
                            .enqueue_batch(&queue, batch)
                            .await
                            .map(|out| out.results.len() as u64)
                    };
                    match stored {
                        Ok(stored) => {
                            latency.saturating_record(micros(sent.elapsed()));
                            messages += stored;
                            requests += 1;
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
pub async fn end_to_end(
    client: &Client,
    queue: &str,
    bodies: &Bodies,
    load: EndToEndLoad,
) -> EndToEndReport {
    let started = Instant::now();
    let deadline = started + load.time_limit;
    let shared = Arc::new(Shared::new(queue, deadline, started, load.consumers, 0));
    let consumer_client = own_pool(client);
    let consumers = spawn_consumers(&consumer_client, &shared);

    let next = Arc::new(AtomicU64::new(0));
    let batch = load.batch_size.max(1) as u64;
    let producers: Vec<_> = (0..load.producers.max(1))
        .map(|_| {
            let (client, bodies, shared, next) =
                (client.clone(), bodies.clone(), shared.clone(), next.clone());
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
                        let count = batch.min(load.messages - first);
                        let messages: Vec<_> = (first..first + count)
                            .map(|seq| bodies.message(seq))
                            .collect();
                        let (client, queue) = (client.clone(), shared.queue.clone());
                        async move { client.enqueue_batch(&queue, messages).await }
                    })
                    .buffer_unordered(load.inflight.max(1))
                    .for_each(|result| {
                        match result {
                            Ok(out) => {
                                shared
                                    .enqueued
                                    .fetch_add(out.results.len() as u64, Ordering::Release);
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

    let enqueued = shared.enqueued.load(Ordering::Acquire);
    let tracker = shared.tracker.lock().expect("never poisoned");
    let delivery = shared.delivery(&tracker);
    let elapsed_s = shared.last_ack_us.load(Ordering::Relaxed) as f64 / 1e6;
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
        errors: shared.failures.count(),
        first_error: shared.failures.first(),
        hit_time_limit: Instant::now() >= deadline,
    }
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
    let consumer_client = own_pool(client);
    let consumers = spawn_consumers(&consumer_client, &shared);

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
                let message = bodies.message(seq);
                let sent_us = now_us();
                match client.enqueue(&shared.queue, &message).await {
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

/// A client for the same server with a connection pool of its own, so the consumers' long polls
/// never hold a connection a producer waits for.
fn own_pool(client: &Client) -> Client {
    Client::new(client.base_url().as_str()).unwrap_or_else(|_| client.clone())
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

fn spawn_consumers(client: &Client, shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    (0..shared.consumers.count.max(1))
        .map(|_| tokio::spawn(consume(client.clone(), shared.clone())))
        .collect()
}

/// One consumer: receive with a long poll, note what arrived, ack the whole batch in one call
/// (in the background, up to `acks_in_flight` at once);
/// until every confirmed message has arrived, or the deadline, or the producers are done and the
/// queue stays empty.
async fn consume(client: Client, shared: Arc<Shared>) {
    let request = ReceiveIn {
        max: Some(shared.consumers.receive_max),
        wait_ms: Some(shared.consumers.wait_ms),
        visibility_timeout_ms: None,
    };
    let mut empty_polls_after_done = 0;
    let acks = Arc::new(tokio::sync::Semaphore::new(
        shared.consumers.acks_in_flight.max(1),
    ));
    let mut pending_acks = tokio::task::JoinSet::new();
    while Instant::now() < shared.deadline && !shared.all_received() {
        let done = shared.producers_done.load(Ordering::Acquire);
        let receive_sent = Instant::now();
        let messages = match client.receive(&shared.queue, &request).await {
            Ok(out) => out.messages,
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
        let received_us = now_us();
        let mut receipts = Vec::with_capacity(messages.len());
        {
            let mut tracker = shared.tracker.lock().expect("never poisoned");
            tracker
                .receive_latency
                .saturating_record(micros(receive_sent.elapsed()));
            for message in messages {
                tracker.deliveries += 1;
                if !tracker.ids.insert(message.message_id) {
                    tracker.duplicates += 1;
                }
                if let Some(sent_us) = message.body.as_deref().and_then(Bodies::sent_us)
                    && sent_us >= tracker.measure_from_us
                {
                    tracker
                        .latency
                        .saturating_record(received_us.saturating_sub(sent_us).max(1));
                }
                receipts.push(message.receipt);
            }
        }
        // Wait for a free ack slot, then ack in the background and go on receiving.
        let permit = match acks.clone().acquire_owned().await {
            Ok(permit) => permit,
            Err(_) => break,
        };
        let (client, ack_shared) = (client.clone(), shared.clone());
        pending_acks.spawn(async move {
            let _permit = permit;
            ack_batch(&client, &ack_shared, receipts).await;
        });
        while pending_acks.try_join_next().is_some() {}
    }
    while pending_acks.join_next().await.is_some() {}
}

/// Acks one batch and records how long it took.
async fn ack_batch(client: &Client, shared: &Shared, receipts: Vec<String>) {
    let ack_sent = Instant::now();
    match client.ack(&shared.queue, receipts).await {
        Ok(out) => {
            shared.acked.fetch_add(out.acked as u64, Ordering::Relaxed);
            let took = micros(ack_sent.elapsed());
            shared
                .tracker
                .lock()
                .expect("never poisoned")
                .ack_latency
                .saturating_record(took);
        }
        Err(error) => shared.failures.record("ack", &error),
    }
    shared.last_ack_us.fetch_max(
        shared.started.elapsed().as_micros() as u64,
        Ordering::Relaxed,
    );
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
    fn small_bodies_grow_to_fit_the_stamp() {
        let body = Bodies::new(4).message(123).body.expect("a JSON body");
        assert!(
            body.get().starts_with('"') && body.get().ends_with(":123:\""),
            "{}",
            body.get()
        );
    }
}
