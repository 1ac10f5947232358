//! Scenario 13: the workload of `shared/bench-peers` (the load generator that drives Redis, NATS
//! JetStream, RabbitMQ and PostgreSQL the same way), on both of sluice's protocols, so its
//! figures sit beside the peers' in one table:
//!
//! 1. produce: `messages` bodies from `producers` producers, each keeping `window` single-message
//!    sends in flight; a send counts once the server answered it (stored durably). Over HTTP one
//!    `POST /v1/queues/{q}/messages` per message; over gRPC one publish stream per producer,
//!    each message a `PublishRequest`.
//! 2. consume: `consumers` consumers take batches of `batch` and ack each batch at once, until
//!    every message is acked; every body carries its number, so distinct, duplicate and lost
//!    messages are counted. HTTP: `receive` (`max` = batch, `wait_ms` 1000) and one ack of the
//!    batch's receipts; gRPC: a pull stream granting `batch` credit, acking each batch on the
//!    stream and granting as much again.
//! 3. latency: consumers running, producers send at `rate` messages per second in all for
//!    `latency` (after a second of the same, unmeasured); each body carries its send time, and the
//!    consumers record enqueue-to-receive latency.
//!
//! The server's CPU time per produced (and per consumed) message is its CPU seconds over the
//! phase divided by the messages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use hdrhistogram::Histogram;
use serde::Serialize;
use sluice_client::Client;
use sluice_client::wire::{MessageIn, QueueSpec};
use sluice_grpc::v1::queues_client::QueuesClient;
use sluice_grpc::v1::{self, publish_response, pull_request, pull_response};
use tokio::sync::{Mutex, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

use crate::load::{Bodies, LatencySummary, histogram, micros, now_us};
use crate::server::{CpuSample, ServerProcess};

/// The sizes of the workload (bench-peers' defaults).
#[derive(Debug, Clone, Copy)]
pub struct PeersLoad {
    pub messages: u64,
    /// With N > 0, a `per_key` queue and message `seq` under key `k<seq mod N>`.
    pub keys: u64,
    pub producers: usize,
    pub window: usize,
    pub consumers: usize,
    pub batch: u32,
    pub rate: u64,
    pub latency: Duration,
    pub time_limit: Duration,
}

/// Which of sluice's protocols carries the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// One HTTP request per message sent; receive and ack requests.
    Http,
    /// Publish and pull streams.
    Grpc,
}

/// One protocol's run.
#[derive(Debug, Serialize)]
pub struct PeersReport {
    pub protocol: Protocol,
    pub produced: u64,
    pub produce_per_s: f64,
    /// Send to answer, per message.
    pub confirm: Option<LatencySummary>,
    pub consumed: u64,
    pub consume_per_s: f64,
    pub distinct: u64,
    pub duplicates: u64,
    pub lost: u64,
    /// Enqueue-to-receive at `rate`.
    pub latency: Option<LatencySummary>,
    /// Server CPU per produced message, in µs.
    pub produce_cpu_us: Option<f64>,
    /// Server CPU per consumed (received and acked) message, in µs.
    pub consume_cpu_us: Option<f64>,
    pub failure: Option<String>,
}

/// Runs the workload over `protocol` on a fresh queue, deleted after.
pub async fn run(
    url: &str,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    protocol: Protocol,
    load: PeersLoad,
) -> PeersReport {
    let mut report = PeersReport {
        protocol,
        produced: 0,
        produce_per_s: 0.0,
        confirm: None,
        consumed: 0,
        consume_per_s: 0.0,
        distinct: 0,
        duplicates: 0,
        lost: 0,
        latency: None,
        produce_cpu_us: None,
        consume_cpu_us: None,
        failure: None,
    };
    if let Err(error) = phases(url, server, bodies, protocol, load, &mut report).await {
        report.failure = Some(format!("{error:#}"));
    }
    report
}

async fn phases(
    url: &str,
    server: Option<&ServerProcess>,
    bodies: &Bodies,
    protocol: Protocol,
    load: PeersLoad,
    report: &mut PeersReport,
) -> anyhow::Result<()> {
    let client = Client::new(url)?;
    let queue = format!("bench-peers-{:08x}", rand::random::<u32>());
    let spec = QueueSpec {
        ordering: (load.keys > 0).then(|| "per_key".to_owned()),
        ..QueueSpec::default()
    };
    client.queue_put(&queue, &spec).await?;
    let target = Target {
        url: url.to_owned(),
        queue: queue.clone(),
        bodies: bodies.clone(),
        keys: load.keys,
    };
    let result = async {
        // 1. produce
        let cpu = CpuSample::take(server);
        let started = Instant::now();
        let produced = tokio::time::timeout(load.time_limit, produce(&target, protocol, load))
            .await
            .map_err(|_| anyhow::anyhow!("produce ran past --time-limit"))??;
        let wall = started.elapsed();
        report.produced = produced.count;
        report.produce_per_s = produced.count as f64 / wall.as_secs_f64();
        report.confirm = LatencySummary::of(&produced.confirm);
        report.produce_cpu_us = cpu_us(server, &cpu, wall, produced.count);

        // 2. consume
        let seen = Arc::new(Seen::new(load.messages));
        let cpu = CpuSample::take(server);
        let started = Instant::now();
        let consumed = tokio::time::timeout(
            load.time_limit,
            consume(&target, protocol, load, seen.clone(), None),
        )
        .await
        .map_err(|_| anyhow::anyhow!("consume ran past --time-limit"))??;
        let wall = started.elapsed();
        report.consumed = consumed;
        report.consume_per_s = consumed as f64 / wall.as_secs_f64();
        report.distinct = seen.distinct.load(Ordering::Relaxed);
        report.duplicates = seen.duplicates.load(Ordering::Relaxed);
        report.lost = load.messages.saturating_sub(report.distinct);
        report.consume_cpu_us = cpu_us(server, &cpu, wall, consumed);

        // 3. latency at a steady rate
        report.latency = tokio::time::timeout(
            load.latency + load.time_limit,
            paced(&target, protocol, load),
        )
        .await
        .map_err(|_| anyhow::anyhow!("the latency phase ran past --time-limit"))??;
        anyhow::Ok(())
    }
    .await;
    for name in [queue.clone(), format!("{queue}.dlq")] {
        let _ = client.queue_delete(&name).await;
    }
    result
}

fn cpu_us(
    server: Option<&ServerProcess>,
    before: &CpuSample,
    wall: Duration,
    messages: u64,
) -> Option<f64> {
    let percent = CpuSample::take(server).since(before).server_percent?;
    (messages > 0).then(|| percent / 100.0 * wall.as_secs_f64() * 1e6 / messages as f64)
}

#[derive(Clone)]
struct Target {
    url: String,
    queue: String,
    bodies: Bodies,
    /// Keys of a `per_key` queue (0: unordered).
    keys: u64,
}

impl Target {
    async fn grpc(&self) -> anyhow::Result<QueuesClient<Channel>> {
        let channel = Channel::from_shared(self.url.clone())?.connect().await?;
        Ok(QueuesClient::new(channel))
    }

    /// Message `seq`'s ordering key, on a `per_key` queue.
    fn key(&self, seq: u64) -> Option<String> {
        (self.keys > 0).then(|| format!("k{}", seq % self.keys))
    }

    fn outgoing(&self, seq: u64) -> v1::OutgoingMessage {
        let message = self.bodies.message(seq);
        let text = message
            .body
            .map(|body| body.get().to_owned())
            .unwrap_or_default();
        v1::OutgoingMessage {
            body: Some(v1::outgoing_message::Body::Json(text)),
            key: self.key(seq),
            ..Default::default()
        }
    }

    /// Sends message `seq` over HTTP, one request.
    async fn send_http(&self, client: &Client, seq: u64) -> anyhow::Result<()> {
        let message = MessageIn {
            key: self.key(seq),
            ..self.bodies.message(seq)
        };
        client.enqueue(&self.queue, &message).await?;
        Ok(())
    }
}

struct Produced {
    count: u64,
    confirm: Histogram<u64>,
}

/// Phase 1: every producer keeps `window` single-message sends in flight until `messages` are
/// answered.
async fn produce(target: &Target, protocol: Protocol, load: PeersLoad) -> anyhow::Result<Produced> {
    let next = Arc::new(AtomicU64::new(0));
    let mut producers = Vec::new();
    for _ in 0..load.producers {
        let (target, next) = (target.clone(), next.clone());
        producers.push(tokio::spawn(async move {
            match protocol {
                Protocol::Http => produce_http(&target, next, load).await,
                Protocol::Grpc => produce_grpc(&target, next, load).await,
            }
        }));
    }
    let mut produced = Produced {
        count: 0,
        confirm: histogram(),
    };
    for producer in producers {
        let (count, confirm) = producer.await??;
        produced.count += count;
        produced.confirm.add(confirm)?;
    }
    Ok(produced)
}

async fn produce_http(
    target: &Target,
    next: Arc<AtomicU64>,
    load: PeersLoad,
) -> anyhow::Result<(u64, Histogram<u64>)> {
    let client = Client::new(&target.url)?;
    let sends = (0..load.window).map(|_| {
        let (client, next, target) = (client.clone(), next.clone(), target.clone());
        async move {
            let mut confirm = histogram();
            let mut count = 0;
            loop {
                let seq = next.fetch_add(1, Ordering::Relaxed);
                if seq >= load.messages {
                    return anyhow::Ok((count, confirm));
                }
                let started = Instant::now();
                target.send_http(&client, seq).await?;
                confirm.record(micros(started.elapsed()))?;
                count += 1;
            }
        }
    });
    let mut total = (0, histogram());
    for result in futures::future::join_all(sends).await {
        let (count, confirm) = result?;
        total.0 += count;
        total.1.add(confirm)?;
    }
    Ok(total)
}

async fn produce_grpc(
    target: &Target,
    next: Arc<AtomicU64>,
    load: PeersLoad,
) -> anyhow::Result<(u64, Histogram<u64>)> {
    let mut client = target.grpc().await?;
    let window = Arc::new(Semaphore::new(load.window));
    let (sender, outbound) = mpsc::channel(load.window);
    let sent_at = Arc::new(std::sync::Mutex::new(std::collections::HashMap::new()));
    let feeder = {
        let (target, window, sent_at) = (target.clone(), window.clone(), sent_at.clone());
        tokio::spawn(async move {
            loop {
                let Ok(permit) = window.acquire().await else {
                    return;
                };
                permit.forget();
                let seq = next.fetch_add(1, Ordering::Relaxed);
                if seq >= load.messages {
                    return;
                }
                let request = v1::PublishRequest {
                    seq,
                    queue: target.queue.clone(),
                    message: Some(target.outgoing(seq)),
                };
                sent_at
                    .lock()
                    .expect("not poisoned")
                    .insert(seq, Instant::now());
                if sender.send(request).await.is_err() {
                    return;
                }
            }
        })
    };
    let mut answers = client
        .publish(ReceiverStream::new(outbound))
        .await?
        .into_inner();
    let mut confirm = histogram();
    let mut count = 0;
    while let Some(answer) = answers.message().await? {
        window.add_permits(1);
        if let Some(publish_response::Outcome::Error(error)) = answer.outcome {
            anyhow::bail!(
                "message {} refused: {} {}",
                answer.seq,
                error.code,
                error.message
            );
        }
        if let Some(sent) = sent_at.lock().expect("not poisoned").remove(&answer.seq) {
            confirm.record(micros(sent.elapsed()))?;
        }
        count += 1;
    }
    feeder.await?;
    Ok((count, confirm))
}

/// Which message numbers were received: distinct and duplicates.
struct Seen {
    bits: Vec<AtomicBool>,
    distinct: AtomicU64,
    duplicates: AtomicU64,
}

impl Seen {
    fn new(messages: u64) -> Self {
        Self {
            bits: (0..messages).map(|_| AtomicBool::new(false)).collect(),
            distinct: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
        }
    }

    /// Counts one received body (`"<sent_us>:<seq>:…`).
    fn record(&self, text: &str) {
        let seq = text
            .trim_start_matches('"')
            .split(':')
            .nth(1)
            .and_then(|seq| seq.parse::<usize>().ok());
        match seq.and_then(|seq| self.bits.get(seq)) {
            Some(bit) if !bit.swap(true, Ordering::Relaxed) => {
                self.distinct.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn all(&self) -> bool {
        self.distinct.load(Ordering::Relaxed) >= self.bits.len() as u64
    }
}

/// Phase 2 (and the consumers of phase 3, with `latency`): consumers take batches and ack
/// them until every message was seen (or, for phase 3, until `stop`).
async fn consume(
    target: &Target,
    protocol: Protocol,
    load: PeersLoad,
    seen: Arc<Seen>,
    latency: LatencyProbe,
) -> anyhow::Result<u64> {
    let acked = Arc::new(AtomicU64::new(0));
    let mut consumers = Vec::new();
    for _ in 0..load.consumers {
        let (target, seen, acked, latency) =
            (target.clone(), seen.clone(), acked.clone(), latency.clone());
        consumers.push(tokio::spawn(async move {
            match protocol {
                Protocol::Http => consume_http(&target, load, &seen, &acked, latency).await,
                Protocol::Grpc => consume_grpc(&target, load, &seen, &acked, latency).await,
            }
        }));
    }
    for consumer in consumers {
        consumer.await??;
    }
    Ok(acked.load(Ordering::Relaxed))
}

type LatencyProbe = Option<(Arc<Mutex<Histogram<u64>>>, Arc<AtomicBool>)>;

fn done(seen: &Seen, latency: &LatencyProbe) -> bool {
    match latency {
        Some((_, stop)) => stop.load(Ordering::Relaxed),
        None => seen.all(),
    }
}

async fn record_latency(latency: &LatencyProbe, text: &str) {
    if let Some((histogram, _)) = latency
        && let Some(sent) = Bodies::sent_us_of_text(text.trim_start_matches('"'))
    {
        let _ = histogram
            .lock()
            .await
            .record(now_us().saturating_sub(sent).max(1));
    }
}

async fn consume_http(
    target: &Target,
    load: PeersLoad,
    seen: &Seen,
    acked: &AtomicU64,
    latency: LatencyProbe,
) -> anyhow::Result<()> {
    let client = Client::new(&target.url)?;
    while !done(seen, &latency) {
        let request = sluice_client::wire::ReceiveIn {
            max: Some(i64::from(load.batch)),
            wait_ms: Some(1000),
            visibility_timeout_ms: None,
        };
        let messages = client.receive(&target.queue, &request).await?.messages;
        if messages.is_empty() {
            continue;
        }
        let mut receipts = Vec::with_capacity(messages.len());
        for message in messages {
            let text = message.body.as_deref().map_or("", |body| body.get());
            record_latency(&latency, text).await;
            seen.record(text);
            receipts.push(message.receipt);
        }
        let out = client.ack(&target.queue, receipts).await?;
        acked.fetch_add(out.acked as u64, Ordering::Relaxed);
    }
    Ok(())
}

async fn consume_grpc(
    target: &Target,
    load: PeersLoad,
    seen: &Seen,
    acked: &AtomicU64,
    latency: LatencyProbe,
) -> anyhow::Result<()> {
    let mut client = target.grpc().await?;
    let (sender, outbound) = mpsc::channel(64);
    sender
        .send(v1::PullRequest {
            request: Some(pull_request::Request::Start(v1::PullStart {
                queue: target.queue.clone(),
                credit: load.batch,
                visibility_timeout_ms: None,
            })),
        })
        .await?;
    let mut answers = client
        .pull(ReceiverStream::new(outbound))
        .await?
        .into_inner();
    let mut request_id = 0;
    let mut outstanding = 0u64;
    loop {
        if done(seen, &latency) && outstanding == 0 {
            return Ok(());
        }
        // A quiet stream is looked at again, so the end is seen without a message.
        let next = match tokio::time::timeout(Duration::from_millis(200), answers.next()).await {
            Err(_) => continue,
            Ok(None) => anyhow::bail!("the pull stream ended"),
            Ok(Some(answer)) => answer?,
        };
        match next.response {
            Some(pull_response::Response::Messages(batch)) => {
                let mut receipts = Vec::with_capacity(batch.messages.len());
                for message in batch.messages {
                    if let Some(v1::delivery::Body::Json(text)) = &message.body {
                        record_latency(&latency, text).await;
                        seen.record(text);
                    }
                    receipts.push(message.receipt);
                }
                let count = receipts.len() as u32;
                request_id += 1;
                outstanding += 1;
                sender
                    .send(v1::PullRequest {
                        request: Some(pull_request::Request::Ack(v1::PullAck {
                            request_id,
                            receipts,
                            result_json: None,
                            then: Vec::new(),
                        })),
                    })
                    .await?;
                sender
                    .send(v1::PullRequest {
                        request: Some(pull_request::Request::Credit(count)),
                    })
                    .await?;
            }
            Some(pull_response::Response::Settled(settled)) => {
                outstanding = outstanding.saturating_sub(1);
                match settled.outcome {
                    Some(v1::settled::Outcome::Acked(ack)) => {
                        acked.fetch_add(ack.acked, Ordering::Relaxed);
                    }
                    other => anyhow::bail!("an ack failed: {other:?}"),
                }
            }
            None => {}
        }
    }
}

/// Phase 3: `rate` messages per second for a second unmeasured, then for `latency`, with
/// consumers running; enqueue-to-receive latency of the measured ones.
async fn paced(
    target: &Target,
    protocol: Protocol,
    load: PeersLoad,
) -> anyhow::Result<Option<LatencySummary>> {
    let warmup = Duration::from_secs(1);
    let total = (load.rate as f64 * (warmup + load.latency).as_secs_f64()) as u64;
    let histogram = Arc::new(Mutex::new(histogram()));
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Seen::new(total));
    let consumers = {
        let (target, seen, probe) = (
            target.clone(),
            seen.clone(),
            Some((histogram.clone(), stop.clone())),
        );
        tokio::spawn(async move { consume(&target, protocol, load, seen, probe).await })
    };
    let interval = Duration::from_secs_f64(1.0 / load.rate.max(1) as f64);
    let started = tokio::time::Instant::now();
    let mut grpc = match protocol {
        Protocol::Grpc => {
            let mut client = target.grpc().await?;
            let (sender, outbound) = mpsc::channel(1024);
            let mut answers = client
                .publish(ReceiverStream::new(outbound))
                .await?
                .into_inner();
            let drained = tokio::spawn(async move {
                while let Ok(Some(answer)) = answers.message().await {
                    if let Some(publish_response::Outcome::Error(error)) = answer.outcome {
                        return Err(anyhow::anyhow!("refused: {} {}", error.code, error.message));
                    }
                }
                Ok(())
            });
            Some((sender, drained))
        }
        Protocol::Http => None,
    };
    let client = Client::new(&target.url)?;
    let in_flight = Arc::new(Semaphore::new(256));
    let mut measured_from = None;
    for seq in 0..total {
        tokio::time::sleep_until(started + interval.mul_f64(seq as f64)).await;
        if measured_from.is_none() && started.elapsed() >= warmup {
            measured_from = Some(now_us());
            histogram.lock().await.reset();
        }
        match &mut grpc {
            Some((sender, _)) => {
                sender
                    .send(v1::PublishRequest {
                        seq,
                        queue: target.queue.clone(),
                        message: Some(target.outgoing(seq)),
                    })
                    .await?;
            }
            None => {
                let permit = in_flight.clone().acquire_owned().await?;
                let (client, target) = (client.clone(), target.clone());
                tokio::spawn(async move {
                    let _ = target.send_http(&client, seq).await;
                    drop(permit);
                });
            }
        }
    }
    // Until every message was received (bounded by the caller's timeout), then stop.
    while !seen.all() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    if let Some((sender, drained)) = grpc {
        drop(sender);
        drained.await??;
    }
    consumers.await??;
    let summary = LatencySummary::of(&*histogram.lock().await);
    Ok(summary)
}

/// The table of scenario 13: bench-peers' columns, one row per protocol.
pub fn text_lines(out: &mut Vec<String>, reports: &[PeersReport]) {
    out.push(String::new());
    out.push(
        "13. the peers' workload (shared/bench-peers): single-message sends, 32 in flight per producer; batches of 32 acked together; latency at a steady rate"
            .into(),
    );
    out.push(
        "   | protocol | produce msgs/s | consume+ack msgs/s | p99 at rate | server CPU per produced msg | per consumed msg | distinct / dup / lost |"
            .into(),
    );
    out.push("   |---|---:|---:|---:|---:|---:|---|".into());
    let us = |value: Option<f64>| value.map_or("-".to_owned(), |us| format!("{us:.1} µs"));
    for report in reports {
        let name = match report.protocol {
            Protocol::Http => "HTTP, one message per POST",
            Protocol::Grpc => "gRPC streams",
        };
        out.push(format!(
            "   | {name} | {:.0} | {:.0} | {} | {} | {} | {} / {} / {} |",
            report.produce_per_s,
            report.consume_per_s,
            report
                .latency
                .as_ref()
                .map_or("-".to_owned(), |latency| format!(
                    "{:.2} ms",
                    latency.p99_us as f64 / 1000.0
                )),
            us(report.produce_cpu_us),
            us(report.consume_cpu_us),
            report.distinct,
            report.duplicates,
            report.lost
        ));
        if let Some(failure) = &report.failure {
            out.push(format!("   {name} failed: {failure}"));
        }
    }
}
