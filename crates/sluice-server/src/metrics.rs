//! Prometheus metrics at `GET /metrics`, in the Prometheus text format 0.0.4.
//!
//! Every number already exists elsewhere, counted since start by the part that owns it: the
//! store's dispatch index (depths, counters and the enqueue-to-ack latency histogram of every
//! queue), the webhook registry (requests by outcome), the push dispatcher (requests by outcome
//! and their time) and the store's writer (ops per group commit, WAL sync time). A scrape
//! reads them all once and renders them; nothing is recorded on the way for metrics alone
//! beyond those few histograms (fixed buckets, [`sluice_core::histogram`]).
//!
//! Why `prometheus-client` with a custom [`Collector`], and not the `metrics` facade with
//! `metrics-exporter-prometheus`: the facade records observations as they happen into a
//! process-wide recorder, so every counter the index keeps anyway would be counted twice, the
//! per-queue histograms (already aggregated into buckets under the index's lock) could not be
//! handed over at all (`histogram!` takes single observations), and all servers of one process
//! (the tests, the SDK's embedded mode) would share one recorder. `prometheus-client` lets a
//! collector write scrape-time values, including a histogram's bucket counts
//! (`MetricEncoder::encode_histogram`), and renders the classic text format that every
//! Prometheus-compatible scraper reads (`encoding::prometheus_text`).
//!
//! Units are Prometheus base units: durations in seconds (kept in ms or µs internally and
//! converted here), counters end in `_total`. The list with meanings is `docs/metrics.md`.
//! This route is not part of the OpenAPI document of API v1.

use axum::extract::State;
use axum::http::{Method, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::encoding::{MetricEncoder, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sluice_core::histogram::Histogram;
use sluice_core::store::Counters;
use sluice_core::store::{QueueInfo, StorageMetrics, StoreMetricValue, WriteState};
use sluice_wire::WebhookStatsOut;

use crate::api::route::Routes;
use crate::auth::Need;
use crate::error::ApiError;
use crate::http_metrics::RouteMetrics;
use crate::process_metrics::ProcessMetrics;
use crate::push::PushMetrics;
use crate::state::AppState;

/// The metrics route: an admin's, unless `[auth] metrics_public` opens it.
pub fn routes() -> Routes {
    Routes::new("metrics").undocumented(Need::Metrics, Method::GET, "/metrics", metrics)
}

/// `GET /metrics`. A tenant admin gets its tenant's series only: those of its queues, webhook
/// endpoints and topics, none of the server's own.
async fn metrics(State(state): State<AppState>, caller: crate::auth::CallerExt) -> Response {
    let queues = match state.ops.queue_list(&sluice_ops::Anyone).await {
        Ok(queues) => queues,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let mut snapshot = Snapshot {
        queues,
        webhooks: state
            .webhooks
            .list()
            .iter()
            .map(|endpoint| (endpoint.name.clone(), endpoint.stats.out()))
            .collect(),
        topics: state
            .topics
            .list()
            .iter()
            .map(|topic| (topic.name.clone(), topic.stats.out()))
            .collect(),
        push: state.push.metrics(),
        storage: state.ops.storage_metrics(),
        expressions: ExprCounts::of(state.expr.metrics()),
        http: state.http_metrics.snapshot(),
        body_bytes_held: state.body_budget.held() as u64,
        process: ProcessMetrics::read(),
        tenant_only: false,
    };
    if caller.as_ref().is_some_and(|caller| !caller.is_admin()) {
        let mine = |name: &str| crate::auth::manages(&caller, name);
        snapshot.queues.retain(|queue| mine(&queue.name));
        snapshot.webhooks.retain(|(name, _)| mine(name));
        snapshot.topics.retain(|(name, _)| mine(name));
        snapshot.push.retain(|push| mine(&push.queue));
        snapshot.tenant_only = true;
    }
    match render(snapshot) {
        Ok(text) => (
            [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
            text,
        )
            .into_response(),
        Err(_) => ApiError::unavailable("cannot render the metrics").into_response(),
    }
}

/// Everything one scrape shows, read once.
#[derive(Debug, Default)]
struct Snapshot {
    queues: Vec<QueueInfo>,
    /// By endpoint name.
    webhooks: Vec<(String, WebhookStatsOut)>,
    /// By topic name.
    topics: Vec<(String, sluice_wire::TopicStatsOut)>,
    push: Vec<PushMetrics>,
    expressions: ExprCounts,
    storage: StorageMetrics,
    /// Requests by route and method.
    http: Vec<RouteMetrics>,
    /// Bytes of request bodies held now, of `[limits] body_bytes_in_flight`.
    body_bytes_held: u64,
    /// This process (Linux only).
    process: Option<ProcessMetrics>,
    /// Leave out the server's own series (expressions, storage, HTTP, process): for a tenant.
    tenant_only: bool,
}

/// The text exposition of a snapshot.
fn render(snapshot: Snapshot) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(snapshot));
    let mut text = String::new();
    prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

type Fmt = Result<(), std::fmt::Error>;

/// Per-queue counters: family name (without `_total`), help, value.
type QueueCounter = (&'static str, &'static str, fn(&Counters) -> u64);

const QUEUE_COUNTERS: &[QueueCounter] = &[
    (
        "sluice_messages_enqueued",
        "Messages stored in the queue (duplicates of an idempotency key not counted).",
        |c| c.enqueued,
    ),
    (
        "sluice_messages_delivered",
        "Deliveries handed out (leases granted).",
        |c| c.delivered,
    ),
    ("sluice_messages_acked", "Messages acked.", |c| c.acked),
    (
        "sluice_messages_nacked",
        "Nacks (failed attempts reported by consumers).",
        |c| c.nacked,
    ),
    (
        "sluice_messages_dead_lettered",
        "Messages moved from the queue to its dead-letter queue.",
        |c| c.dead_lettered,
    ),
    (
        "sluice_messages_expired",
        "Messages removed or dead-lettered by retention (max_age_ms).",
        |c| c.expired,
    ),
    (
        "sluice_messages_rejected",
        "Messages refused because the queue was at max_depth.",
        |c| c.rejected,
    ),
    (
        "sluice_messages_cancelled",
        "Messages cancelled before delivery.",
        |c| c.cancelled,
    ),
    (
        "sluice_messages_purged",
        "Messages removed by purges.",
        |c| c.purged,
    ),
    (
        "sluice_messages_deduplicated",
        "Messages not stored because their idempotency key (given, or made from the content) was seen within the dedup window: idempotency hits, on every path.",
        |c| c.deduplicated,
    ),
    (
        "sluice_leases_expired",
        "Leases that ran out before an ack or nack (each a failed attempt).",
        |c| c.lease_expired,
    ),
];

impl Collector for Snapshot {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Fmt {
        let mut info = encoder.encode_descriptor(
            "sluice_build",
            "The running sluice: always 1, with its version.",
            None,
            MetricType::Info,
        )?;
        info.encode_info(&[("version", env!("CARGO_PKG_VERSION"))])?;
        self.encode_queues(&mut encoder)?;
        self.encode_webhooks(&mut encoder)?;
        self.encode_topics(&mut encoder)?;
        self.encode_push(&mut encoder)?;
        if self.tenant_only {
            return Ok(());
        }
        self.encode_expressions(&mut encoder)?;
        self.encode_storage(&mut encoder)?;
        self.encode_http(&mut encoder)?;
        self.encode_process(&mut encoder)
    }
}

/// What the expression workers did since start.
#[derive(Debug, Default)]
struct ExprCounts {
    evaluations: u64,
    started: u64,
    start_failures: u64,
    stopped: Vec<(&'static str, u64)>,
}

impl ExprCounts {
    fn of(metrics: &crate::expr::ExprMetrics) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        Self {
            evaluations: metrics.evaluations.load(Relaxed),
            started: metrics.started.load(Relaxed),
            start_failures: metrics.start_failures.load(Relaxed),
            stopped: metrics.stopped().to_vec(),
        }
    }
}

impl Snapshot {
    fn encode_queues(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let queues = &self.queues;
        let mut family = gauge(
            encoder,
            "sluice_queue_messages",
            "Messages in the queue by state: ready (visible, including those waiting behind their ordering lane), delayed (until a delay or backoff ends), in_flight (leased).",
        )?;
        for queue in queues {
            let depth = &queue.depth;
            for (state, value) in [
                ("ready", depth.ready),
                ("delayed", depth.delayed),
                ("in_flight", depth.in_flight),
            ] {
                family
                    .encode_family(&[("queue", queue.name.as_str()), ("state", state)])?
                    .encode_gauge(&value)?;
            }
        }
        let mut family = gauge(
            encoder,
            "sluice_queue_dead_letter_messages",
            "Messages in the queue's dead-letter queue (queues with one only).",
        )?;
        for queue in queues {
            if let Some(depth) = queue.dead_letter_depth {
                family
                    .encode_family(&queue_label(queue))?
                    .encode_gauge(&depth)?;
            }
        }
        let mut family = gauge(
            encoder,
            "sluice_queue_oldest_ready_age_seconds",
            "Time since the oldest ready message was enqueued; 0 when none is ready.",
        )?;
        for queue in queues {
            let age_ms = queue.depth.oldest_ready_age_ms.unwrap_or(0);
            family
                .encode_family(&queue_label(queue))?
                .encode_gauge(&(age_ms as f64 / 1e3))?;
        }
        let mut family = gauge(
            encoder,
            "sluice_queue_paused",
            "1 while deliveries of the queue are paused, else 0.",
        )?;
        for queue in queues {
            family
                .encode_family(&queue_label(queue))?
                .encode_gauge(&u64::from(queue.depth.paused))?;
        }
        for (name, help, value) in QUEUE_COUNTERS {
            let mut family = counter(encoder, name, help)?;
            for queue in queues {
                family
                    .encode_family(&queue_label(queue))?
                    .encode_counter::<NoLabelSet, _, u64>(&value(&queue.depth.counters), None)?;
            }
        }
        let mut family = histogram(
            encoder,
            "sluice_message_ack_latency_seconds",
            "Time from enqueue to ack of each acked message.",
        )?;
        for queue in queues {
            encode_histogram(
                &mut family.encode_family(&queue_label(queue))?,
                &queue.depth.ack_latency_ms,
                1e3,
            )?;
        }
        Ok(())
    }

    fn encode_webhooks(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let mut family = counter(
            encoder,
            "sluice_webhook_requests",
            "Requests to a webhook endpoint by outcome: accepted (stored), duplicate (a known delivery id), ignored (filtered out), dead_lettered (stored in the dead-letter queue, e.g. unparseable), rejected (refused, with the reason).",
        )?;
        for (endpoint, stats) in &self.webhooks {
            for (outcome, value) in [
                ("accepted", stats.accepted),
                ("duplicate", stats.duplicates),
                ("ignored", stats.ignored),
                ("dead_lettered", stats.dead_lettered),
            ] {
                family
                    .encode_family(&[("endpoint", endpoint.as_str()), ("outcome", outcome)])?
                    .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
            }
            for (reason, value) in &stats.rejected {
                family
                    .encode_family(&[
                        ("endpoint", endpoint.as_str()),
                        ("outcome", "rejected"),
                        ("reason", reason.as_str()),
                    ])?
                    .encode_counter::<NoLabelSet, _, u64>(value, None)?;
            }
        }
        Ok(())
    }

    fn encode_topics(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let mut published = counter(
            encoder,
            "sluice_topic_published",
            "Messages published to a topic on this node (duplicates included).",
        )?;
        for (topic, stats) in &self.topics {
            published
                .encode_family(&[("topic", topic.as_str())])?
                .encode_counter::<NoLabelSet, _, u64>(&stats.published, None)?;
        }
        let mut copies = counter(
            encoder,
            "sluice_topic_copies",
            "Copies of a topic's messages by outcome: stored (in a subscribed queue), duplicate (the publish's idempotency key was seen), filtered (a subscription's filter dropped the message).",
        )?;
        for (topic, stats) in &self.topics {
            for (outcome, value) in [
                ("stored", stats.copies),
                ("duplicate", stats.duplicates),
                ("filtered", stats.filtered),
            ] {
                copies
                    .encode_family(&[("topic", topic.as_str()), ("outcome", outcome)])?
                    .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
            }
        }
        Ok(())
    }

    fn encode_push(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let mut family = counter(
            encoder,
            "sluice_push_requests",
            "Requests to a queue's push destination by outcome: delivered (2xx, acked), retried (failed, the message is retried), failed_permanently (failed, the message was dead-lettered).",
        )?;
        for push in &self.push {
            for (outcome, value) in [
                ("delivered", push.delivered),
                ("retried", push.retried),
                ("failed_permanently", push.failed_permanently),
            ] {
                family
                    .encode_family(&[("queue", push.queue.as_str()), ("outcome", outcome)])?
                    .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
            }
        }
        let mut family = gauge(
            encoder,
            "sluice_push_in_flight_requests",
            "Requests to a queue's push destination under way.",
        )?;
        for push in &self.push {
            family
                .encode_family(&[("queue", push.queue.as_str())])?
                .encode_gauge(&push.in_flight)?;
        }
        let mut family = histogram(
            encoder,
            "sluice_push_request_duration_seconds",
            "Time of each request to a queue's push destination, until its answer or error.",
        )?;
        for push in &self.push {
            encode_histogram(
                &mut family.encode_family(&[("queue", push.queue.as_str())])?,
                &push.request_latency_us,
                1e6,
            )?;
        }
        Ok(())
    }

    fn encode_expressions(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let expressions = &self.expressions;
        for (name, help, value) in [
            (
                "sluice_expr_evaluations",
                "Evaluations of jq expressions (webhooks, push transforms) sent to a worker process.",
                expressions.evaluations,
            ),
            (
                "sluice_expr_workers_started",
                "Expression worker processes started.",
                expressions.started,
            ),
            (
                "sluice_expr_worker_start_failures",
                "Expression worker processes that could not be started.",
                expressions.start_failures,
            ),
        ] {
            counter(encoder, name, help)?.encode_counter::<NoLabelSet, _, u64>(&value, None)?;
        }
        let mut family = counter(
            encoder,
            "sluice_expr_workers_stopped",
            "Expression worker processes ended during an evaluation, by reason: timeout (killed at [expressions] timeout_ms), died (stack overflow, memory or CPU limit), protocol (killed for a garbled answer).",
        )?;
        for (reason, value) in &expressions.stopped {
            family
                .encode_family(&[("reason", *reason)])?
                .encode_counter::<NoLabelSet, _, u64>(value, None)?;
        }
        Ok(())
    }

    /// The write state, which every store has, then what the store reports of itself, as it
    /// names and explains it.
    fn encode_storage(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        self.encode_write_state(encoder)?;
        for metric in &self.storage.reported {
            match &metric.value {
                // A whole number is written as one (bytes, counts), as before stores named
                // their own metrics.
                StoreMetricValue::Gauge(value) if value.fract() == 0.0 && value.abs() < 9.0e15 => {
                    gauge(encoder, metric.name, metric.help)?.encode_gauge(&(*value as i64))?;
                }
                StoreMetricValue::Gauge(value) => {
                    gauge(encoder, metric.name, metric.help)?.encode_gauge(value)?;
                }
                StoreMetricValue::Counter(value) => {
                    counter(encoder, metric.name, metric.help)?
                        .encode_counter::<NoLabelSet, _, u64>(value, None)?;
                }
                StoreMetricValue::Histogram {
                    histogram: counts,
                    per_unit,
                } => {
                    let mut family = histogram(encoder, metric.name, metric.help)?;
                    encode_histogram(&mut family, counts, *per_unit)?;
                }
            }
        }
        Ok(())
    }

    /// Requests answered, by matched route template (bounded; `unmatched` for the rest).
    fn encode_http(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let mut family = counter(
            encoder,
            "sluice_http_requests",
            "HTTP requests answered, by route (the matched route template, or unmatched), method and status.",
        )?;
        for route in &self.http {
            for (status, count) in &route.statuses {
                family
                    .encode_family(&[
                        ("route", &*route.route),
                        ("method", route.method),
                        ("status", status.to_string().as_str()),
                    ])?
                    .encode_counter::<NoLabelSet, _, u64>(count, None)?;
            }
        }
        let mut family = histogram(
            encoder,
            "sluice_http_request_duration_seconds",
            "Time from a request's arrival to its response head, by route and method (a long poll's wait included).",
        )?;
        for route in &self.http {
            encode_histogram(
                &mut family.encode_family(&[("route", &*route.route), ("method", route.method)])?,
                &route.duration_us,
                1e6,
            )?;
        }
        gauge(
            encoder,
            "sluice_http_request_body_held_bytes",
            "Bytes of request bodies held in memory now (every protocol's), of [limits] body_bytes_in_flight; beyond it requests get 503 overloaded.",
        )?
        .encode_gauge(&self.body_bytes_held)?;
        Ok(())
    }

    /// The standard `process_*` families of Prometheus clients.
    fn encode_process(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let Some(process) = &self.process else {
            return Ok(());
        };
        counter(
            encoder,
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
        )?
        .encode_counter::<NoLabelSet, _, f64>(&process.cpu_seconds, None)?;
        gauge(
            encoder,
            "process_open_fds",
            "Number of open file descriptors.",
        )?
        .encode_gauge(&process.open_fds)?;
        if let Some(max_fds) = process.max_fds {
            gauge(
                encoder,
                "process_max_fds",
                "Maximum number of open file descriptors.",
            )?
            .encode_gauge(&max_fds)?;
        }
        gauge(
            encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
        )?
        .encode_gauge(&process.virtual_memory_bytes)?;
        gauge(
            encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
        )?
        .encode_gauge(&process.resident_memory_bytes)?;
        gauge(
            encoder,
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
        )?
        .encode_gauge(&process.start_time_seconds)?;
        Ok(())
    }

    /// Why writes stop: a full disk, a failed sync, a database out of reach.
    fn encode_write_state(&self, encoder: &mut DescriptorEncoder) -> Fmt {
        let storage = &self.storage;
        let full = storage.write_state == WriteState::DiskFull;
        gauge(
            encoder,
            "sluice_storage_disk_full",
            "1 while the disk is full (new messages refused with 507, acks go on), else 0.",
        )?
        .encode_gauge(&u64::from(full))?;
        let stopped = matches!(storage.write_state, WriteState::Stopped(_));
        gauge(
            encoder,
            "sluice_storage_writes_stopped",
            "1 after a failed WAL sync or write stopped all writes until a restart, else 0.",
        )?
        .encode_gauge(&u64::from(stopped))?;
        let unavailable = matches!(storage.write_state, WriteState::Unavailable(_));
        gauge(
            encoder,
            "sluice_storage_unavailable",
            "1 while the store cannot reach its database (calls answer 503 until it reconnects), else 0.",
        )?
        .encode_gauge(&u64::from(unavailable))?;
        Ok(())
    }
}

fn queue_label(queue: &QueueInfo) -> [(&'static str, &str); 1] {
    [("queue", queue.name.as_str())]
}

fn counter<'a>(
    encoder: &'a mut DescriptorEncoder,
    name: &'a str,
    help: &str,
) -> Result<MetricEncoder<'a>, std::fmt::Error> {
    encoder.encode_descriptor(name, help, None, MetricType::Counter)
}

fn gauge<'a>(
    encoder: &'a mut DescriptorEncoder,
    name: &'a str,
    help: &str,
) -> Result<MetricEncoder<'a>, std::fmt::Error> {
    encoder.encode_descriptor(name, help, None, MetricType::Gauge)
}

fn histogram<'a>(
    encoder: &'a mut DescriptorEncoder,
    name: &'a str,
    help: &str,
) -> Result<MetricEncoder<'a>, std::fmt::Error> {
    encoder.encode_descriptor(name, help, None, MetricType::Histogram)
}

/// A histogram whose values are `per_unit` to one base unit (1e3 for ms → s).
fn encode_histogram(encoder: &mut MetricEncoder, histogram: &Histogram, per_unit: f64) -> Fmt {
    let bounds = histogram
        .bounds()
        .iter()
        .map(|&bound| bound as f64 / per_unit)
        .chain([f64::INFINITY]);
    let buckets: Vec<(f64, u64)> = bounds.zip(histogram.counts()).collect();
    encoder.encode_histogram::<NoLabelSet>(
        histogram.sum() as f64 / per_unit,
        histogram.count(),
        &buckets,
        None,
    )
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use sluice_core::histogram::{ACK_LATENCY_BOUNDS_MS, AtomicHistogram};
    use sluice_core::queue::QueueConfig;
    use sluice_core::store::{QueueDepth, StoreMetric};

    use super::*;

    /// One of everything: a queue with a dead-letter queue, an endpoint with a rejection, a
    /// push destination, the storage histograms.
    fn full_snapshot() -> Snapshot {
        let mut ack_latency_ms = Histogram::new(ACK_LATENCY_BOUNDS_MS);
        ack_latency_ms.record(2_500);
        ack_latency_ms.record(90_000_000);
        let depth = QueueDepth {
            ready: 3,
            delayed: 2,
            in_flight: 1,
            oldest_ready_age_ms: Some(1_500),
            paused: true,
            counters: Counters {
                enqueued: 10,
                acked: 2,
                ..Counters::default()
            },
            ack_latency_ms,
            ..QueueDepth::default()
        };
        let push_latency = AtomicHistogram::new(&[1_000, 10_000]);
        push_latency.record(1_500);
        Snapshot {
            queues: vec![QueueInfo {
                name: "jobs".into(),
                config: QueueConfig::defaults_for("jobs"),
                depth,
                dead_letter_depth: Some(4),
                is_push_paused: false,
            }],
            topics: vec![(
                "orders".into(),
                sluice_wire::TopicStatsOut {
                    published: 5,
                    copies: 8,
                    filtered: 2,
                    duplicates: 1,
                },
            )],
            webhooks: vec![(
                "github".into(),
                WebhookStatsOut {
                    received: 3,
                    accepted: 2,
                    rejected: BTreeMap::from([("signature_mismatch".to_owned(), 1)]),
                    ..WebhookStatsOut::default()
                },
            )],
            push: vec![PushMetrics {
                queue: "out".into(),
                delivered: 5,
                retried: 1,
                failed_permanently: 0,
                in_flight: 0,
                request_latency_us: push_latency.snapshot(),
            }],
            storage: StorageMetrics {
                write_state: WriteState::DiskFull,
                // What the stores report is theirs (each tests its own against
                // docs/metrics.md); one of each kind, as a store names them.
                reported: vec![
                    StoreMetric::histogram(
                        "sluice_storage_group_commit_operations",
                        "Write operations committed together in one transaction (group commit).",
                        AtomicHistogram::new(&[1, 2, 4]).snapshot(),
                        1.0,
                    ),
                    StoreMetric::histogram(
                        "sluice_storage_wal_fsync_duration_seconds",
                        "Time of each fdatasync of the write-ahead log.",
                        AtomicHistogram::new(&[100, 1_000]).snapshot(),
                        1e6,
                    ),
                    StoreMetric::gauge(
                        "sluice_storage_database_bytes",
                        "Size of the database on disk.",
                        20_480.0,
                    ),
                    StoreMetric::counter(
                        "sluice_storage_wal_truncations",
                        "Checkpoints that emptied the WAL.",
                        1,
                    ),
                    StoreMetric::gauge(
                        "sluice_store_clock_skew_seconds",
                        "The database's clock minus this node's.",
                        -1.25,
                    ),
                ],
            },
            expressions: ExprCounts {
                evaluations: 7,
                started: 2,
                start_failures: 0,
                stopped: vec![("timeout", 1), ("died", 1), ("protocol", 0)],
            },
            body_bytes_held: 4096,
            http: vec![RouteMetrics {
                route: "/v1/queues/{queue}/messages".into(),
                method: "POST",
                statuses: vec![(200, 3), (404, 1)],
                duration_us: {
                    let mut duration = Histogram::new(&[1_000, 10_000]);
                    duration.record(2_000);
                    duration
                },
            }],
            process: Some(ProcessMetrics {
                resident_memory_bytes: 1 << 24,
                virtual_memory_bytes: 1 << 30,
                cpu_seconds: 1.25,
                open_fds: 12,
                max_fds: Some(1024),
                start_time_seconds: 1.7e9,
            }),
            tenant_only: false,
        }
    }

    /// The families of a rendering: name → (type, help present).
    fn families(text: &str) -> BTreeMap<String, (String, bool)> {
        let mut families = BTreeMap::new();
        let mut helped = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("HELP name text");
                assert!(!help.trim().is_empty(), "empty help of {name}");
                helped.insert(name.to_owned());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name type");
                let known =
                    families.insert(name.to_owned(), (kind.to_owned(), helped.contains(name)));
                assert!(known.is_none(), "{name} declared twice");
            }
        }
        families
    }

    #[test]
    fn every_metric_follows_the_prometheus_naming_conventions() {
        let text = render(full_snapshot()).unwrap();
        let families = families(&text);
        assert!(families.len() >= 20, "{text}");
        let valid_name = |name: &str| {
            (name.starts_with("sluice_") || name.starts_with("process_"))
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                && !name.contains("__")
                && !name.ends_with('_')
        };
        for (name, (kind, helped)) in &families {
            assert!(
                valid_name(name),
                "{name}: not sluice_ (or process_) and snake_case"
            );
            assert!(helped, "{name} has no HELP");
            // Base units only: seconds, never ms or µs; no unit words that are not base units.
            for bad in [
                "_ms",
                "_us",
                "millis",
                "micros",
                "_minutes",
                "_hours",
                "_bytes_total",
            ] {
                assert!(!name.contains(bad), "{name}: not in base units");
            }
            let timed = name
                .split('_')
                .any(|word| ["latency", "duration", "age", "time"].contains(&word));
            match kind.as_str() {
                "counter" => assert!(name.ends_with("_total"), "{name}: a counter ends in _total"),
                "gauge" => {
                    assert!(
                        !name.ends_with("_total"),
                        "{name}: only counters end in _total"
                    );
                    if timed {
                        assert!(name.ends_with("_seconds"), "{name}: a time is in seconds");
                    }
                }
                "histogram" => {
                    assert!(
                        name.ends_with("_seconds") || name.ends_with("_operations"),
                        "{name}: a histogram's name ends in its unit"
                    );
                    if timed {
                        assert!(name.ends_with("_seconds"), "{name}: a time is in seconds");
                    }
                }
                other => panic!("{name}: type {other}"),
            }
        }
        // Every sample belongs to a declared family, with valid label names.
        for line in text.lines().filter(|line| !line.starts_with('#')) {
            let name_end = line.find(['{', ' ']).expect("sample name");
            let name = &line[..name_end];
            let family = families.contains_key(name).then_some(name).or_else(|| {
                ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
                    let base = name.strip_suffix(suffix)?;
                    (families.get(base)?.0 == "histogram").then_some(base)
                })
            });
            assert!(family.is_some(), "sample of no declared family: {line}");
            if let Some(labels) = line[name_end..].strip_prefix('{') {
                let labels = &labels[..labels.rfind('}').expect("labels end")];
                for pair in labels.split("\",") {
                    let key = pair.split('=').next().unwrap_or_default();
                    assert!(
                        !key.is_empty()
                            && !key.starts_with("__")
                            && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                        "label {key:?} in {line}"
                    );
                }
            }
        }
    }

    #[test]
    fn every_metric_is_documented() {
        let docs = include_str!("../../../docs/metrics.md");
        let text = render(full_snapshot()).unwrap();
        for name in families(&text).keys() {
            assert!(
                docs.contains(&format!("`{name}`")),
                "{name} is not described in docs/metrics.md"
            );
        }
    }

    #[test]
    fn histograms_are_cumulative_in_base_units() {
        let text = render(full_snapshot()).unwrap();
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("sluice_message_ack_latency_seconds"))
            .collect();
        assert!(
            lines.contains(&r#"sluice_message_ack_latency_seconds_bucket{queue="jobs",le="1"} 0"#),
            "{lines:#?}"
        );
        assert!(
            lines
                .contains(&r#"sluice_message_ack_latency_seconds_bucket{queue="jobs",le="2.5"} 1"#),
            "{lines:#?}"
        );
        assert!(
            lines.contains(
                &r#"sluice_message_ack_latency_seconds_bucket{queue="jobs",le="86400"} 1"#
            ),
            "{lines:#?}"
        );
        assert!(
            lines.contains(
                &r#"sluice_message_ack_latency_seconds_bucket{queue="jobs",le="+Inf"} 2"#
            ),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&r#"sluice_message_ack_latency_seconds_sum{queue="jobs"} 90002.5"#),
            "{lines:#?}"
        );
        assert!(
            lines.contains(&r#"sluice_message_ack_latency_seconds_count{queue="jobs"} 2"#),
            "{lines:#?}"
        );
        assert!(
            text.contains(
                r#"sluice_push_request_duration_seconds_bucket{queue="out",le="0.01"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"sluice_queue_oldest_ready_age_seconds{queue="jobs"} 1.5"#));
        assert!(text.contains(
            r#"sluice_webhook_requests_total{endpoint="github",outcome="rejected",reason="signature_mismatch"} 1"#
        ));
        for line in [
            r#"sluice_topic_published_total{topic="orders"} 5"#,
            r#"sluice_topic_copies_total{topic="orders",outcome="stored"} 8"#,
            r#"sluice_topic_copies_total{topic="orders",outcome="duplicate"} 1"#,
            r#"sluice_topic_copies_total{topic="orders",outcome="filtered"} 2"#,
        ] {
            assert!(text.contains(line), "{line} missing:\n{text}");
        }
    }

    #[test]
    fn http_process_and_database_families_render_their_values() {
        let text = render(full_snapshot()).unwrap();
        for line in [
            r#"sluice_http_requests_total{route="/v1/queues/{queue}/messages",method="POST",status="200"} 3"#,
            r#"sluice_http_requests_total{route="/v1/queues/{queue}/messages",method="POST",status="404"} 1"#,
            r#"sluice_http_request_duration_seconds_bucket{route="/v1/queues/{queue}/messages",method="POST",le="0.001"} 0"#,
            r#"sluice_http_request_duration_seconds_bucket{route="/v1/queues/{queue}/messages",method="POST",le="0.01"} 1"#,
            r#"sluice_http_request_duration_seconds_count{route="/v1/queues/{queue}/messages",method="POST"} 1"#,
            "sluice_http_request_body_held_bytes 4096",
            "process_cpu_seconds_total 1.25",
            "process_open_fds 12",
            "process_max_fds 1024",
            "process_resident_memory_bytes 16777216",
            "process_virtual_memory_bytes 1073741824",
            "sluice_storage_database_bytes 20480",
            "sluice_storage_wal_truncations_total 1",
            "sluice_storage_disk_full 1",
            "sluice_storage_unavailable 0",
            "sluice_store_clock_skew_seconds -1.25",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in {text}");
        }
        let start: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("process_start_time_seconds "))
            .and_then(|value| value.parse().ok())
            .expect("process_start_time_seconds");
        assert_eq!(start, 1.7e9);
    }

    #[test]
    fn an_empty_server_renders_only_its_families() {
        let text = render(Snapshot::default()).unwrap();
        assert!(text.contains("sluice_build_info{version="), "{text}");
        // Only the write state, which every store has: nothing a store reports of itself.
        let storage: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with("sluice_storage_") || line.starts_with("sluice_store_"))
            .collect();
        assert_eq!(
            storage,
            [
                "sluice_storage_disk_full 0",
                "sluice_storage_writes_stopped 0",
                "sluice_storage_unavailable 0"
            ],
            "{text}"
        );
        assert!(!text.contains("sluice_http_requests_total{"), "{text}");
    }
}
