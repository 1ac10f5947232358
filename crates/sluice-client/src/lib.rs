//! sluice-client: a typed async client for the sluice HTTP API v1 (`docs/http-api.md`).
//!
//! [`Client`] has one method per route. Requests and answers are the serde types of
//! [`sluice_core::wire`] (re-exported as [`wire`]), so client and server cannot drift apart.
//! A non-2xx answer becomes [`Error::Api`] with the server's stable error `code`.
//!
//! This crate only speaks HTTP: it holds no state beyond a connection pool and knows nothing of
//! stores or the server's internals.

mod error;

use std::time::Duration;

use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_core::wire::{
    AckIn, AckOut, EnqueueBatchOut, EnqueueOut, ExtendIn, ExtendOut, HealthOut, MessageBatchIn,
    MessageIn, MessageStatusOut, NackIn, NackOut, QueueDeleteOut, QueueListOut, QueueOut,
    QueuePutOut, QueueSpec, QueueStatsOut, ReceiveIn, ReceiveOut,
};

pub use error::{Error, Result};
pub use sluice_core::wire;

/// Where `sluice serve` listens unless told otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7566";

/// Timeout of every request except receive, from sending to the whole answer read.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Added to a receive's `wait_ms` to get its timeout, so a long poll is never cut short.
pub const RECEIVE_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// Timeout for establishing a TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A handle to one sluice server.
///
/// Cloning is cheap and clones share one connection pool, so make one and pass it around.
/// Every method is cancellation safe in the HTTP sense: dropping its future abandons the
/// request, but the server may already have acted on it (an enqueue may be stored; use an
/// idempotency `id` to retry safely).
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
}

impl Client {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7566`; a path prefix such
    /// as `http://host/sluice/` is kept).
    ///
    /// Errors with [`Error::InvalidUrl`] when the URL does not parse or is not `http(s)`.
    pub fn new(base_url: &str) -> Result<Self> {
        // No overall timeout: receive long-polls for up to 20 s, so each request sets its own.
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(Error::Transport)?;
        Self::with_http_client(base_url, http)
    }

    /// Like [`Client::new`], with a `reqwest::Client` configured by the caller (proxies, pool
    /// sizes, TLS where the feature is enabled). Per-request timeouts are still applied.
    pub fn with_http_client(base_url: &str, http: reqwest::Client) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidUrl {
            url: base_url.to_owned(),
            reason: reason.to_owned(),
        };
        let base = Url::parse(base_url).map_err(|error| invalid(&error.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid("the scheme must be http or https"));
        }
        if base.cannot_be_a_base() || base.host().is_none() {
            return Err(invalid("the URL has no host"));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(invalid("the URL must not have a query or fragment"));
        }
        Ok(Self { http, base })
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    // ---- queues ----

    /// `PUT /v1/queues/{name}`: creates the queue, or updates the fields given in `spec`.
    /// Creating a queue also creates its dead-letter queue.
    pub async fn queue_put(&self, name: &str, spec: &QueueSpec) -> Result<QueuePutOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?])?;
        self.send(Method::PUT, url, Some(spec), REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{name}`: settings and stats of one queue (`queue_not_found` if absent).
    pub async fn queue_get(&self, name: &str) -> Result<QueueOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues`: every queue, by name.
    pub async fn queue_list(&self) -> Result<QueueListOut> {
        let url = self.url(&["v1", "queues"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `DELETE /v1/queues/{name}`: deletes the queue and its messages; its dead-letter queue
    /// stays. Errors with `conflict` when another queue uses it as its dead-letter queue.
    pub async fn queue_delete(&self, name: &str) -> Result<QueueDeleteOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?])?;
        self.send(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{name}/stats`: depth and counters since the server started.
    pub async fn queue_stats(&self, name: &str) -> Result<QueueStatsOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "stats"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    // ---- messages ----

    /// `POST /v1/queues/{queue}/messages` with one message. A success means it is on disk.
    /// A repeated idempotency `id` within the dedup window answers the first message's id with
    /// `created: false`.
    pub async fn enqueue(&self, queue: &str, message: &MessageIn) -> Result<EnqueueOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "messages"])?;
        self.send(Method::POST, url, Some(message), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/messages` with `{"messages": [...]}` (1 to 1000 messages, at
    /// most 10 MiB of bodies). The batch is validated whole: one bad message refuses all of
    /// them. Results come back in order.
    pub async fn enqueue_batch(
        &self,
        queue: &str,
        messages: Vec<MessageIn>,
    ) -> Result<EnqueueBatchOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "messages"])?;
        let batch = MessageBatchIn { messages };
        self.send(Method::POST, url, Some(&batch), REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{queue}/messages/{message_id}`: where a message is now.
    pub async fn message_get(
        &self,
        queue: &str,
        message_id: uuid::Uuid,
    ) -> Result<MessageStatusOut> {
        let id = message_id.to_string();
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "messages", &id])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{queue}/messages?id={key}`: a message found by its idempotency key
    /// within the dedup window.
    pub async fn message_get_by_idempotency_key(
        &self,
        queue: &str,
        key: &str,
    ) -> Result<MessageStatusOut> {
        let mut url = self.url(&["v1", "queues", queue_segment(queue)?, "messages"])?;
        url.query_pairs_mut().append_pair("id", key);
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    // ---- delivery ----

    /// `POST /v1/queues/{queue}/receive`: claims up to `max` messages, waiting up to `wait_ms`
    /// for one to become claimable. The request times out `wait_ms` + 10 s after it is sent.
    ///
    /// Not cancellation safe in effect: if the future is dropped after the server answered,
    /// the claimed messages stay leased until their visibility timeout runs out.
    pub async fn receive(&self, queue: &str, request: &ReceiveIn) -> Result<ReceiveOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "receive"])?;
        let wait = Duration::from_millis(request.wait_ms.unwrap_or(0).clamp(0, i64::MAX) as u64);
        self.send(
            Method::POST,
            url,
            Some(request),
            wait + RECEIVE_TIMEOUT_MARGIN,
        )
        .await
    }

    /// `POST /v1/queues/{queue}/ack` with `{"receipts": [...]}` (up to 1000).
    ///
    /// When some receipt is stale the answer is [`Error::Api`] with code `stale_receipt`; the
    /// receipts that were current are acked all the same, and [`Error::ack_results`] tells
    /// which. A malformed receipt (`malformed_receipt`) refuses the whole request.
    pub async fn ack(&self, queue: &str, receipts: Vec<String>) -> Result<AckOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "ack"])?;
        let body = AckIn {
            receipt: None,
            receipts: Some(receipts),
        };
        self.send(Method::POST, url, Some(&body), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/nack`: gives a message back for a retry after `delay_ms` (or the
    /// queue's backoff), or dead-letters it when `permanent` or out of attempts.
    pub async fn nack(&self, queue: &str, request: &NackIn) -> Result<NackOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "nack"])?;
        self.send(Method::POST, url, Some(request), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/extend`: the lease now ends `visibility_timeout_ms` after now.
    pub async fn extend(&self, queue: &str, request: &ExtendIn) -> Result<ExtendOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "extend"])?;
        self.send(Method::POST, url, Some(request), REQUEST_TIMEOUT)
            .await
    }

    // ---- health ----

    /// `GET /healthz`: `ok` while the server process runs.
    pub async fn healthz(&self) -> Result<HealthOut> {
        let url = self.url(&["healthz"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /readyz`: `ok` when the store accepts writes; an [`Error::Api`] with status 503
    /// otherwise.
    pub async fn readyz(&self) -> Result<HealthOut> {
        let url = self.url(&["readyz"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    // ---- helpers ----

    /// The base URL with `segments` appended, each percent-encoded as one path segment.
    fn url(&self, segments: &[&str]) -> Result<Url> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Error::InvalidUrl {
                url: self.base.to_string(),
                reason: "the URL has no host".into(),
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// Sends one request with an optional JSON body and decodes a 2xx answer as `T`, or any
    /// other answer as the API's error body.
    async fn send<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<T> {
        let mut request = self.http.request(method, url).timeout(timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(Error::Transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(Error::Transport)?;
        if !status.is_success() {
            return Err(Error::from_response(status.as_u16(), &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
            status: status.as_u16(),
            body: error::snippet(&bytes),
            source,
        })
    }
}

/// Checks that a queue name survives as one URL path segment.
///
/// The URL standard drops `.` and `..` segments (even percent-encoded), so such a name would
/// silently address a different route; an empty one would too.
fn queue_segment(name: &str) -> Result<&str> {
    if name.is_empty() || name == "." || name == ".." {
        return Err(Error::InvalidPathSegment {
            what: "queue name",
            value: name.to_owned(),
        });
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(base: &str, segments: &[&str], expected: &str) {
        let client = Client::new(base).unwrap();
        assert_eq!(client.url(segments).unwrap().as_str(), expected);
    }

    #[test]
    fn paths_are_appended_to_the_base_url_and_escaped() {
        check(
            "http://127.0.0.1:7566",
            &["v1", "queues"],
            "http://127.0.0.1:7566/v1/queues",
        );
        check(
            "http://h:1/",
            &["v1", "queues", "a.b-c_d"],
            "http://h:1/v1/queues/a.b-c_d",
        );
        check("http://h/prefix/", &["healthz"], "http://h/prefix/healthz");
        check("http://h/prefix", &["healthz"], "http://h/prefix/healthz");
        check(
            "http://h",
            &["v1", "queues", "a/b?c#d e"],
            "http://h/v1/queues/a%2Fb%3Fc%23d%20e",
        );
    }

    #[test]
    fn unusable_base_urls_are_refused() {
        for base in [
            "",
            "127.0.0.1:7566",
            "mailto:a@b",
            "ftp://h",
            "http://h/?x=1",
        ] {
            assert!(
                matches!(Client::new(base), Err(Error::InvalidUrl { .. })),
                "{base}"
            );
        }
    }

    #[test]
    fn dot_segments_are_refused_as_queue_names() {
        for name in ["", ".", ".."] {
            assert!(queue_segment(name).is_err(), "{name:?}");
        }
        assert!(queue_segment("...").is_ok());
    }
}
