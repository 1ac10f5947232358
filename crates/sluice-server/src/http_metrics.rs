//! HTTP request metrics: every request counted by route, method and status, and timed by route
//! and method, for `sluice_http_requests_total` and `sluice_http_request_duration_seconds`.
//!
//! The `route` label is the matched route template (`/v1/queues/{queue}/messages`), never the
//! path as sent, so the number of series is bounded by the router, not by clients: a request no
//! route matches is counted under [`UNMATCHED`], and a method outside the standard ones under
//! `other`. The same middleware opens the request's trace span when traces are exported
//! ([`crate::telemetry`]), as both need the matched route.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use parking_lot::{Mutex, RwLock};
use sluice_core::histogram::{AtomicHistogram, Histogram};
use tracing::Instrument;

/// The `route` label of a request that matched no route.
pub const UNMATCHED: &str = "unmatched";

/// Request duration bounds, in µs: 1 ms to 60 s (a long poll waits up to 20 s).
const DURATION_BOUNDS_US: &[u64] = &[
    1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// Counts and times of the requests of one route and method.
struct RouteStats {
    /// Requests by response status.
    statuses: Mutex<BTreeMap<u16, u64>>,
    /// Time until the response head, in µs.
    duration_us: AtomicHistogram,
}

/// What [`HttpMetrics::snapshot`] shows of one route and method.
#[derive(Debug, Clone)]
pub struct RouteMetrics {
    /// The matched route template, or [`UNMATCHED`].
    pub route: Arc<str>,
    /// The request method (standard ones), or `other`.
    pub method: &'static str,
    /// Requests by response status.
    pub statuses: Vec<(u16, u64)>,
    /// Time until the response head, in µs.
    pub duration_us: Histogram,
}

/// Requests served since start, by route template, then method label. Keyed by the template's
/// text so a request looks its counters up by `&str`, with no allocation.
#[derive(Default)]
pub struct HttpMetrics {
    routes: RwLock<HashMap<Arc<str>, ByMethod>>,
}

/// One route template's counters by method label.
type ByMethod = HashMap<&'static str, Arc<RouteStats>>;

impl std::fmt::Debug for HttpMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpMetrics")
            .field("routes", &self.routes.read().len())
            .finish()
    }
}

impl HttpMetrics {
    /// Counts one answered request.
    pub(crate) fn observe(&self, route: &str, method: &'static str, status: u16, elapsed_us: u64) {
        let found = self
            .routes
            .read()
            .get(route)
            .and_then(|methods| methods.get(method))
            .cloned();
        let stats = match found {
            Some(stats) => stats,
            None => self
                .routes
                .write()
                .entry(Arc::from(route))
                .or_default()
                .entry(method)
                .or_insert_with(|| {
                    Arc::new(RouteStats {
                        statuses: Mutex::default(),
                        duration_us: AtomicHistogram::new(DURATION_BOUNDS_US),
                    })
                })
                .clone(),
        };
        *stats.statuses.lock().entry(status).or_default() += 1;
        stats.duration_us.record(elapsed_us);
    }

    /// Every route and method seen so far, sorted.
    pub fn snapshot(&self) -> Vec<RouteMetrics> {
        let mut routes: Vec<RouteMetrics> = self
            .routes
            .read()
            .iter()
            .flat_map(|(route, methods)| {
                methods
                    .iter()
                    .map(move |(method, stats)| (route, *method, stats))
            })
            .map(|(route, method, stats)| RouteMetrics {
                route: route.clone(),
                method,
                statuses: stats
                    .statuses
                    .lock()
                    .iter()
                    .map(|(&status, &count)| (status, count))
                    .collect(),
                duration_us: stats.duration_us.snapshot(),
            })
            .collect();
        routes.sort_by(|a, b| (&a.route, a.method).cmp(&(&b.route, b.method)));
        routes
    }
}

/// `app` with every request counted into `metrics` (and traced when traces are exported).
///
/// `Router::layer` wraps each route (and the fallback) on its own, after routing, so the
/// middleware sees the matched route; added last, it is the outermost layer of each, so it
/// counts the answers of every other layer too (401s, 413s, 429s).
pub fn layer(app: Router, metrics: Arc<HttpMetrics>) -> Router {
    app.layer(axum::middleware::from_fn_with_state(metrics, track))
}

/// The middleware: time the request, count its answer, trace it.
async fn track(State(metrics): State<Arc<HttpMetrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    // A clone of the matched path shares its text: nothing is allocated per request.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
    let method = method_label(request.method());
    let response = match crate::telemetry::http_span(&request, route) {
        Some(span) => {
            let response = next.run(request).instrument(span.clone()).await;
            crate::telemetry::record_status(&span, response.status());
            response
        }
        None => next.run(request).await,
    };
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    metrics.observe(route, method, response.status().as_u16(), elapsed_us);
    response
}

/// The `method` label: a standard method's name, else `other` (bounded, like the routes).
pub(crate) fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_by_route_method_and_status() {
        let metrics = HttpMetrics::default();
        metrics.observe("/v1/queues/{queue}", "GET", 200, 1_500);
        metrics.observe("/v1/queues/{queue}", "GET", 200, 70_000_000);
        metrics.observe("/v1/queues/{queue}", "GET", 404, 10);
        metrics.observe(UNMATCHED, "other", 404, 10);
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.len(), 2);
        let queue = &snapshot[0];
        assert_eq!(&*queue.route, "/v1/queues/{queue}");
        assert_eq!(queue.statuses, vec![(200, 2), (404, 1)]);
        assert_eq!(queue.duration_us.count(), 3);
        assert_eq!(queue.duration_us.counts().last(), Some(&1), "above 60 s");
        assert_eq!(&*snapshot[1].route, UNMATCHED);
    }

    #[test]
    fn unknown_methods_share_one_label() {
        assert_eq!(method_label(&Method::from_bytes(b"BREW").unwrap()), "other");
        assert_eq!(method_label(&Method::DELETE), "DELETE");
    }
}
