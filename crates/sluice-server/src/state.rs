//! The server's state, shared by every protocol it serves (the HTTP API, gRPC, the SQS API,
//! webhook ingress, the dashboard) and by its background tasks: the operations over the store,
//! the registries of what it serves, and its limits. Each protocol module imports it from here,
//! none from another protocol.

use std::sync::Arc;

use sluice_core::store::WriteState;
use sluice_core::{Clock, ManualClock, Millis};

/// What every handler shares: one pointer to [`Shared`], so the many clones a request makes
/// (each `State` extractor and middleware takes one) cost one reference count, not one per
/// field (a profile of single-message enqueues had 8% of the server's CPU in cloning and
/// dropping the fields one by one).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// The state, shared from here on.
    pub fn new(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The server's state, behind [`AppState`].
pub struct Shared {
    /// The queue operations over the store: the only way to it (no handler holds the store).
    pub ops: Arc<sluice_ops::Ops>,
    /// The clock every time-dependent rule reads.
    pub clock: Arc<dyn Clock>,
    /// Set in test-clock mode only.
    pub manual_clock: Option<ManualClock>,
    /// Cancelled once shutdown begins: long polls return, readiness fails, background tasks
    /// end. Behind an `Arc` because the state is cloned for every request and extractor, and
    /// cloning a token itself locks its tree node: under load that lock showed up in profiles.
    pub shutdown: Arc<tokio_util::sync::CancellationToken>,
    /// Webhook endpoints served at `/hooks/{name}`.
    pub webhooks: Arc<crate::webhooks::Registry>,
    /// Topics served at `/v1/topics/{name}`.
    pub topics: Arc<crate::topics::Registry>,
    /// Where jq expressions run (webhooks; push transforms have their own handle).
    pub expr: Arc<crate::expr::ExprPool>,
    /// Push workers (for their stats, and to wake them when a queue changes).
    pub push: Arc<crate::push::Dispatcher>,
    /// API tokens (empty: access control off).
    pub auth: Arc<crate::auth::Auth>,
    /// The dashboard's sessions (in the store when it shares them between nodes).
    pub sessions: Arc<crate::auth::Sessions>,
    /// True when serving HTTPS (session cookies are then `Secure`).
    pub tls: bool,
    /// Bytes of request bodies held at once (`[limits] body_bytes_in_flight`).
    pub body_budget: Arc<crate::body_budget::BodyBudget>,
    /// The dashboard's charts: recent samples of every queue and webhook endpoint.
    pub history: Arc<crate::history::History>,
    /// Requests by route, method and status (for `/metrics`).
    pub http_metrics: Arc<crate::http_metrics::HttpMetrics>,
    /// The SQS-compatible API's settings and what it keeps between requests.
    pub sqs: Arc<crate::sqs::SqsState>,
    /// Messages one gRPC stream may have in flight (`[limits] stream_messages_in_flight`).
    pub stream_messages_in_flight: usize,
    /// Bytes of leased messages a pull stream holds unread (`[limits] stream_unsent_bytes`).
    pub stream_unsent_bytes: usize,
    /// The dashboard's address for links in alerts (`https://host/ui/`), when known.
    pub dashboard_url: Option<String>,
    /// `[limits]`, for the rules that read them per request.
    pub limits: crate::config::Limits,
}

impl Shared {
    /// Now, by the server's clock.
    pub fn now_ms(&self) -> Millis {
        self.clock.now_ms()
    }

    /// Whether this node is ready (`/readyz`, and gRPC's `grpc.health.v1`): `Err` says why not.
    pub async fn readiness(&self) -> Result<(), String> {
        if self.is_shutting_down() {
            return Err("shutting down".into());
        }
        // A node that refuses new messages is not ready, so a load balancer sends producers
        // elsewhere; it still serves receives and acks.
        if let Some(status) = not_ready(&self.ops.write_state()) {
            return Err(status);
        }
        match self.ops.queue_list(&sluice_ops::Anyone).await {
            Ok(_) => Ok(()),
            Err(error) => Err(error.to_string()),
        }
    }

    /// True once shutdown began.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Deletes a queue by `Ops::queue_delete`'s rule, then forgets what the server keeps of it
    /// and of a dead-letter queue deleted with it (the charts' history, a push pause: a queue
    /// made again under the name starts afresh). Every door that deletes a queue comes here.
    pub async fn delete_queue(
        &self,
        caller: Option<&crate::auth::Caller>,
        name: &str,
        dead_letters: sluice_ops::OnDelete,
    ) -> sluice_ops::OpsResult<sluice_ops::QueueDeleted> {
        let who = crate::auth::ops_caller(caller);
        let deleted = self.ops.queue_delete(who, name, dead_letters).await?;
        self.history.forget_queue(name);
        if let Some(dlq) = &deleted.dead_letter_queue {
            self.history.forget_queue(dlq);
        }
        self.push.refresh();
        Ok(deleted)
    }
}

/// Why a node in this write state is not ready, if it is not.
fn not_ready(state: &WriteState) -> Option<String> {
    match state {
        WriteState::Accepting => None,
        WriteState::DiskFull => {
            Some("disk full: new messages are refused until space is freed".into())
        }
        WriteState::Stopped(reason) => Some(format!("writes stopped until a restart: {reason}")),
        WriteState::Unavailable(reason) => Some(format!(
            "the store cannot reach its database (it reconnects by itself): {reason}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_store_that_takes_writes_is_ready() {
        assert_eq!(not_ready(&WriteState::Accepting), None);
        for state in [
            WriteState::DiskFull,
            WriteState::Stopped("sync failed".into()),
            WriteState::Unavailable("connection refused".into()),
        ] {
            let status = not_ready(&state).expect("not ready");
            assert!(!status.is_empty());
        }
        assert!(
            not_ready(&WriteState::Unavailable("connection refused".into()))
                .unwrap()
                .contains("connection refused"),
            "says why"
        );
    }
}
