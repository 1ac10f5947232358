//! Recent history for the dashboard's charts: every queue's depth and rates and every webhook
//! endpoint's rates, sampled by the server at a fixed interval and kept for a window (by default
//! every 5 s for 15 minutes: 181 points a series), so a page opened now shows the past
//! (`GET /v1/history`, `GET /v1/queues/{queue}/history`).
//!
//! Memory is bounded: `window / interval` points (at most [`POINTS_MAX`]) for at most
//! `history_queues_max` queues and `history_webhooks_max` endpoints, the first by name. A deleted
//! queue's or endpoint's series goes at the next sample (a deleted queue's at once). Nothing is
//! stored on disk: after a restart the charts start again.
//!
//! Rates are per second over the interval that ends at the point, from the counters' growth
//! since the previous sample. Counters start at zero when the server starts and when a queue is
//! created, so a new series counts from zero: a queue created and filled between two samples
//! shows that traffic in its first point.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_core::Millis;
use sluice_core::stuck::StuckThresholds;
use utoipa::ToSchema;

/// Most points a series may hold (`history_window_ms / history_interval_ms`).
pub const POINTS_MAX: u64 = 10_000;
/// The smallest sampling interval.
pub const INTERVAL_MS_MIN: u64 = 100;

/// `[dashboard]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDashboard {
    /// How often the server samples, in ms (default 5000).
    pub history_interval_ms: Option<u64>,
    /// How far back samples are kept, in ms (default 15 minutes).
    pub history_window_ms: Option<u64>,
    /// Queues with a history, the first by name (default 1000).
    pub history_queues_max: Option<usize>,
    /// Webhook endpoints with a history, the first by name (default 1000).
    pub history_webhooks_max: Option<usize>,
    /// Messages held from which a queue is stuck (default 10000).
    pub stuck_depth: Option<u64>,
    /// Age of the oldest ready message from which a queue is stuck, in ms (default 5 minutes).
    pub stuck_age_ms: Option<u64>,
}

/// `[dashboard]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryConfig {
    /// Time between samples.
    pub interval: Duration,
    /// How long a sample is kept.
    pub window: Duration,
    /// Queues with a history.
    pub queues_max: usize,
    /// Webhook endpoints with a history.
    pub webhooks_max: usize,
    /// When the overview and `stats.stuck` call a queue stuck.
    pub stuck: StuckThresholds,
}

impl HistoryConfig {
    /// The defaults, as in `config.default.toml`.
    pub const DEFAULT: Self = Self {
        interval: Duration::from_secs(5),
        window: Duration::from_secs(15 * 60),
        queues_max: 1000,
        webhooks_max: 1000,
        stuck: StuckThresholds::DEFAULT,
    };

    /// Checks `[dashboard]`.
    pub fn from_raw(raw: RawDashboard) -> Result<Self, String> {
        let d = Self::DEFAULT;
        let config = Self {
            interval: raw
                .history_interval_ms
                .map_or(d.interval, Duration::from_millis),
            window: raw
                .history_window_ms
                .map_or(d.window, Duration::from_millis),
            queues_max: raw.history_queues_max.unwrap_or(d.queues_max),
            webhooks_max: raw.history_webhooks_max.unwrap_or(d.webhooks_max),
            stuck: StuckThresholds {
                depth: raw.stuck_depth.unwrap_or(d.stuck.depth),
                age_ms: match raw.stuck_age_ms {
                    Some(ms) => Millis::try_from(ms)
                        .map_err(|_| format!("[dashboard] stuck_age_ms is too large: {ms}"))?,
                    None => d.stuck.age_ms,
                },
            },
        };
        let interval_ms = config.interval.as_millis() as u64;
        let window_ms = config.window.as_millis() as u64;
        if interval_ms < INTERVAL_MS_MIN {
            return Err(format!(
                "[dashboard] history_interval_ms must be at least {INTERVAL_MS_MIN}, got {interval_ms}"
            ));
        }
        if window_ms < interval_ms {
            return Err(format!(
                "[dashboard] history_window_ms ({window_ms}) must be at least history_interval_ms ({interval_ms})"
            ));
        }
        if window_ms / interval_ms > POINTS_MAX {
            return Err(format!(
                "[dashboard] history_window_ms / history_interval_ms must be at most {POINTS_MAX} points, got {}",
                window_ms / interval_ms
            ));
        }
        Ok(config)
    }

    /// Points a series holds at most: the window's worth, plus the one at its start.
    pub fn points(&self) -> usize {
        (self.window.as_millis() / self.interval.as_millis()) as usize + 1
    }
}

/// One sample of a queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct QueuePointOut {
    /// When it was taken, ms since the Unix epoch (server clock).
    pub at_ms: Millis,
    /// Claimable messages (including those waiting behind their lane).
    pub ready: u64,
    /// Waiting for a delay or backoff to end.
    pub delayed: u64,
    /// Leased to consumers.
    pub in_flight: u64,
    /// Messages in its dead-letter queue (absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dead_lettered: Option<u64>,
    /// Messages enqueued per second over the interval that ends here.
    pub enqueued_per_s: f64,
    /// Acks per second over the interval.
    pub acked_per_s: f64,
    /// Failed attempts (nacks, leases that ran out) per second over the interval.
    pub failed_per_s: f64,
    /// Push deliveries (absent without a push destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub push: Option<PushPointOut>,
}

/// Push deliveries of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct PushPointOut {
    /// Requests answered 2xx, per second.
    pub delivered_per_s: f64,
    /// Failed requests (retried or final), per second.
    pub failed_per_s: f64,
}

/// One sample of a webhook endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, ToSchema)]
pub struct WebhookPointOut {
    /// When it was taken, ms since the Unix epoch (server clock).
    pub at_ms: Millis,
    /// Requests received per second over the interval that ends here.
    pub received_per_s: f64,
    /// Requests stored as new messages per second.
    pub accepted_per_s: f64,
    /// Requests refused or dead-lettered per second.
    pub failed_per_s: f64,
}

/// Counters a queue's rates come from.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueCounts {
    /// Depth now.
    pub ready: u64,
    /// Depth now.
    pub delayed: u64,
    /// Depth now.
    pub in_flight: u64,
    /// Depth of its dead-letter queue now.
    pub dead_lettered: Option<u64>,
    /// Since start.
    pub enqueued: u64,
    /// Since start.
    pub acked: u64,
    /// Since start: nacks and leases that ran out.
    pub failed: u64,
    /// Push counters since start (with a push destination).
    pub push: Option<(u64, u64)>,
}

/// Counters a webhook endpoint's rates come from.
#[derive(Debug, Clone, Copy, Default)]
pub struct WebhookCounts {
    /// Since it was defined.
    pub received: u64,
    /// Since it was defined.
    pub accepted: u64,
    /// Since it was defined: refused and dead-lettered.
    pub failed: u64,
}

struct Series<P, C> {
    points: VecDeque<P>,
    last: C,
}

struct Inner {
    queues: BTreeMap<String, Series<QueuePointOut, QueueCounts>>,
    webhooks: BTreeMap<String, Series<WebhookPointOut, WebhookCounts>>,
    /// The previous sample (at first, the start), by the monotonic clock: rates divide by the
    /// real time between samples.
    previous: std::time::Instant,
}

/// Every series, shared by the sampler and the API.
pub struct History {
    config: HistoryConfig,
    inner: Mutex<Inner>,
}

/// Per second, rounded to the millisecond.
fn rate(now: u64, before: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    // A counter that went down started again (an endpoint redefined): count from zero.
    let grew = if now >= before { now - before } else { now };
    (grew as f64 / seconds * 1000.0).round() / 1000.0
}

impl History {
    /// An empty history.
    pub fn new(config: HistoryConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            inner: Mutex::new(Inner {
                queues: BTreeMap::new(),
                webhooks: BTreeMap::new(),
                previous: std::time::Instant::now(),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &HistoryConfig {
        &self.config
    }

    /// Records one sample of every queue and endpoint (each list sorted by name); series of
    /// those not listed are dropped.
    pub fn record(
        &self,
        at_ms: Millis,
        queues: Vec<(String, QueueCounts)>,
        webhooks: Vec<(String, WebhookCounts)>,
    ) {
        let mut inner = self.inner.lock();
        let now = std::time::Instant::now();
        // At least one interval: the first sample comes at once after the start, and a rate over
        // a sliver of time would be noise.
        let seconds = now
            .duration_since(inner.previous)
            .max(self.config.interval)
            .as_secs_f64();
        inner.previous = now;
        let points_max = self.config.points();

        let queues: BTreeMap<_, _> = queues.into_iter().take(self.config.queues_max).collect();
        inner.queues.retain(|name, _| queues.contains_key(name));
        for (name, counts) in queues {
            let series = inner.queues.entry(name).or_insert_with(|| Series {
                points: VecDeque::new(),
                last: QueueCounts::default(),
            });
            let last = series.last;
            let point = QueuePointOut {
                at_ms,
                ready: counts.ready,
                delayed: counts.delayed,
                in_flight: counts.in_flight,
                dead_lettered: counts.dead_lettered,
                enqueued_per_s: rate(counts.enqueued, last.enqueued, seconds),
                acked_per_s: rate(counts.acked, last.acked, seconds),
                failed_per_s: rate(counts.failed, last.failed, seconds),
                push: counts.push.map(|(delivered, failed)| {
                    let (delivered_before, failed_before) = last.push.unwrap_or((0, 0));
                    PushPointOut {
                        delivered_per_s: rate(delivered, delivered_before, seconds),
                        failed_per_s: rate(failed, failed_before, seconds),
                    }
                }),
            };
            series.last = counts;
            push_bounded(&mut series.points, point, points_max);
        }

        let webhooks: BTreeMap<_, _> = webhooks
            .into_iter()
            .take(self.config.webhooks_max)
            .collect();
        inner.webhooks.retain(|name, _| webhooks.contains_key(name));
        for (name, counts) in webhooks {
            let series = inner.webhooks.entry(name).or_insert_with(|| Series {
                points: VecDeque::new(),
                last: WebhookCounts::default(),
            });
            let last = series.last;
            let point = WebhookPointOut {
                at_ms,
                received_per_s: rate(counts.received, last.received, seconds),
                accepted_per_s: rate(counts.accepted, last.accepted, seconds),
                failed_per_s: rate(counts.failed, last.failed, seconds),
            };
            series.last = counts;
            push_bounded(&mut series.points, point, points_max);
        }
    }

    /// Drops a queue's series (the queue was deleted).
    pub fn forget_queue(&self, name: &str) {
        self.inner.lock().queues.remove(name);
    }

    /// A queue's points taken after `since_ms`, oldest first; `None` when it has no series.
    pub fn queue(&self, name: &str, since_ms: Millis) -> Option<Vec<QueuePointOut>> {
        let inner = self.inner.lock();
        let series = inner.queues.get(name)?;
        Some(after(&series.points, since_ms, |p| p.at_ms))
    }

    /// Every queue's points after `since_ms` for the queues `visible` lets through, by name.
    pub fn queues(
        &self,
        since_ms: Millis,
        visible: impl Fn(&str) -> bool,
    ) -> Vec<(String, Vec<QueuePointOut>)> {
        let inner = self.inner.lock();
        inner
            .queues
            .iter()
            .filter(|(name, _)| visible(name))
            .map(|(name, s)| (name.clone(), after(&s.points, since_ms, |p| p.at_ms)))
            .collect()
    }

    /// Every webhook endpoint's points after `since_ms`, by name.
    pub fn webhooks(&self, since_ms: Millis) -> Vec<(String, Vec<WebhookPointOut>)> {
        let inner = self.inner.lock();
        inner
            .webhooks
            .iter()
            .map(|(name, s)| (name.clone(), after(&s.points, since_ms, |p| p.at_ms)))
            .collect()
    }
}

fn push_bounded<P>(points: &mut VecDeque<P>, point: P, max: usize) {
    while points.len() >= max {
        points.pop_front();
    }
    points.push_back(point);
}

fn after<P: Copy>(points: &VecDeque<P>, since_ms: Millis, at: impl Fn(&P) -> Millis) -> Vec<P> {
    // Points are in time order: skip the old ones from the front.
    let start = points.partition_point(|p| at(p) <= since_ms);
    points.range(start..).copied().collect()
}

/// Samples every `interval` until the server stops.
pub async fn run(app: crate::state::AppState) {
    let mut ticks = tokio::time::interval(app.history.config.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = app.shutdown.cancelled() => return,
        }
        if let Err(error) = sample(&app).await {
            tracing::warn!(%error, "the dashboard's history sample failed");
        }
    }
}

/// Takes one sample of every queue and webhook endpoint.
async fn sample(app: &crate::state::AppState) -> sluice_ops::OpsResult<()> {
    let at_ms = app.now_ms();
    let infos = app.ops.queue_list(&sluice_ops::Anyone).await?;
    let mut queues: Vec<(String, QueueCounts)> = infos
        .iter()
        .map(|info| {
            let depth = &info.depth;
            let c = depth.counters;
            let push = info.config.push.as_ref().map(|_| {
                let push = app.push.stats(info);
                (push.delivered, push.retried + push.failed_permanently)
            });
            let counts = QueueCounts {
                ready: depth.ready,
                delayed: depth.delayed,
                in_flight: depth.in_flight,
                dead_lettered: info.dead_letter_depth,
                enqueued: c.enqueued,
                acked: c.acked,
                failed: c.nacked + c.lease_expired,
                push,
            };
            (info.name.clone(), counts)
        })
        .collect();
    queues.sort_by(|a, b| a.0.cmp(&b.0));
    let webhooks = app
        .webhooks
        .list()
        .iter()
        .map(|endpoint| {
            let stats = endpoint.stats.out();
            let rejected: u64 = stats.rejected.values().sum();
            let counts = WebhookCounts {
                received: stats.received,
                accepted: stats.accepted,
                failed: rejected + stats.dead_lettered,
            };
            (endpoint.name.clone(), counts)
        })
        .collect();
    app.history.record(at_ms, queues, webhooks);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(interval_ms: u64, window_ms: u64) -> HistoryConfig {
        HistoryConfig {
            interval: Duration::from_millis(interval_ms),
            window: Duration::from_millis(window_ms),
            queues_max: 2,
            webhooks_max: 2,
            stuck: StuckThresholds::DEFAULT,
        }
    }

    fn counts(ready: u64, enqueued: u64) -> QueueCounts {
        QueueCounts {
            ready,
            enqueued,
            ..QueueCounts::default()
        }
    }

    #[test]
    fn a_series_keeps_one_window_and_forgets_queues_that_went() {
        let history = History::new(config(100, 500));
        assert_eq!(history.config().points(), 6);
        for n in 0..10 {
            history.record(
                n * 100,
                vec![
                    ("a".into(), counts(n as u64, 0)),
                    ("b".into(), counts(1, 0)),
                ],
                vec![],
            );
        }
        let a = history.queue("a", -1).unwrap();
        assert_eq!(a.len(), 6, "bounded to the window");
        assert_eq!(a.first().unwrap().at_ms, 400);
        assert_eq!(a.last().unwrap().ready, 9);
        assert_eq!(history.queue("a", 800).unwrap().len(), 1, "since");
        history.record(1000, vec![("a".into(), counts(0, 0))], vec![]);
        assert!(history.queue("b", -1).is_none(), "b is gone");
        history.forget_queue("a");
        assert!(history.queue("a", -1).is_none());
    }

    #[test]
    fn only_the_first_queues_by_name_get_a_series() {
        let history = History::new(config(100, 500));
        let names = ["a", "b", "c"].map(|n| (n.to_owned(), counts(0, 0)));
        history.record(0, names.to_vec(), vec![]);
        let kept: Vec<_> = history
            .queues(-1, |_| true)
            .into_iter()
            .map(|q| q.0)
            .collect();
        assert_eq!(kept, ["a", "b"]);
    }

    #[test]
    fn rates_come_from_counter_growth() {
        assert_eq!(rate(150, 50, 2.0), 50.0);
        assert_eq!(rate(5, 50, 1.0), 5.0, "a counter that started again");
        assert_eq!(rate(10, 0, 0.0), 0.0);
    }

    #[test]
    fn limits_are_checked() {
        let raw = |interval, window| RawDashboard {
            history_interval_ms: Some(interval),
            history_window_ms: Some(window),
            ..RawDashboard::default()
        };
        assert!(HistoryConfig::from_raw(raw(50, 1000)).is_err());
        assert!(HistoryConfig::from_raw(raw(1000, 500)).is_err());
        assert!(HistoryConfig::from_raw(raw(100, 100 * (POINTS_MAX + 1))).is_err());
        assert_eq!(
            HistoryConfig::from_raw(RawDashboard::default()).unwrap(),
            HistoryConfig::DEFAULT
        );
    }
}
