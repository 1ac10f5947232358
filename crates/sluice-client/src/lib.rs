//! sluice-client: a typed async client for the sluice HTTP API v1 (`docs/http-api.md`).
//!
//! [`Client`] has one method per route. Requests and answers are the serde types of
//! [`sluice_wire`] (re-exported as [`wire`]), so client and server cannot drift apart.
//! A non-2xx answer becomes [`Error::Api`] with the server's stable error `code`.
//!
//! With access control on (docs/access-control.md), give the client a token:
//! `Client::builder(url).token(token).build()?` sends `Authorization: Bearer <token>` with every
//! request. The token is kept as a sensitive header value: `Debug` shows it as `Sensitive`.
//!
//! This crate only speaks HTTP: it holds no state beyond a connection pool and knows nothing of
//! stores or the server's internals.

pub mod duration;
mod error;

use std::time::Duration;

use reqwest::header::HeaderValue;
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_wire::{
    AckIn, AckOut, AlertDeleteOut, AlertListOut, AlertOut, AlertPutOut, AlertSpec, BrowseOut,
    CancelIn, CancelOut, DeadLetterDeleteOut, DeadLetterEntryOut, DeadLetterListOut,
    DeadLettersOnDelete, DeliveriesOut, DrainIn, DrainOut, EnqueueBatchOut, EnqueueOut, ExtendIn,
    ExtendOut, HealthOut, MessageBatchIn, MessageIn, MessageStatusOut, NackIn, NackOut, NextStepIn,
    PurgeOut, QueueDeleteOut, QueueListOut, QueueOut, QueuePutOut, QueueSpec, QueueStatsOut,
    ReceiveIn, ReceiveOut, ReplayIn, ReplayOneIn, ReplayOut, ScheduleDeleteOut, ScheduleListOut,
    ScheduleOut, SchedulePutOut, ScheduleSpec, TopicDeleteOut, TopicListOut, TopicOut,
    TopicPublishOut, TopicPutOut, TopicSpec,
};

pub use error::{Code, Error, Result};
pub use sluice_wire as wire;
pub use sluice_wire::ErrorCode;

/// Where `sluice serve` listens unless told otherwise.
pub const DEFAULT_URL: &str = "http://127.0.0.1:7566";

/// Timeout of every request except receive, from sending to the whole answer read.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Added to a receive's `wait_ms` to get its timeout, so a long poll is never cut short.
pub const RECEIVE_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// Timeout for establishing a TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Timeout of requests that may touch many messages at once (purges and replays).
pub const BULK_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a drain waits when no timeout is given (the server's default, in ms).
pub const DRAIN_DEFAULT_TIMEOUT_MS: i64 = 30_000;

/// The longest drain the server accepts, in ms.
pub const DRAIN_MAX_TIMEOUT_MS: i64 = 900_000;

/// Added to a drain's timeout to get its request timeout, so the server always answers first.
pub const DRAIN_TIMEOUT_MARGIN: Duration = Duration::from_secs(10);

/// Filters and paging of [`Client::dlq_list`]; every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqListQuery {
    /// Entries per page, 1..=1000 (server default 50).
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Case-insensitive substring of the entry's last error.
    pub error: Option<String>,
    /// Dead-lettered at or after this RFC 3339 time.
    pub since: Option<String>,
    /// Dead-lettered before this RFC 3339 time.
    pub until: Option<String>,
}

/// What [`Client::browse`] lists: one state's messages, a page at a time; every field is
/// optional.
///
/// The five search fields (`message_id`, `id`, `key`, `since`, `until`) search the acked
/// messages a queue with `keep_acked_ms` keeps: they need `state` `acked` (the server refuses
/// them with another state, `invalid_field`), and each one given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrowseQuery {
    /// `ready` (server default), `waiting`, `delayed`, `in_flight` or `acked`.
    pub state: Option<String>,
    /// Messages per page, 1..=1000 (server default 50).
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// 0..=1024 (server default 0): a preview of this many bytes of each body.
    pub preview_bytes: Option<usize>,
    /// Acked only: this message (its server id).
    pub message_id: Option<String>,
    /// Acked only: messages sent with this idempotency key.
    pub id: Option<String>,
    /// Acked only: messages sent with this ordering key.
    pub key: Option<String>,
    /// Acked only: acked at or after this RFC 3339 time.
    pub since: Option<String>,
    /// Acked only: acked before this RFC 3339 time.
    pub until: Option<String>,
}

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
    /// `Bearer <token>`, marked sensitive so `Debug` never shows it (in an `Arc` to keep the
    /// client small; clones share it).
    authorization: Option<std::sync::Arc<HeaderValue>>,
}

/// Builds a [`Client`]: the base URL, then optional settings. See [`Client::builder`].
#[derive(Debug)]
pub struct ClientBuilder {
    base_url: String,
    token: Option<HeaderValue>,
    token_error: Option<Error>,
    http: Option<reqwest::Client>,
}

impl ClientBuilder {
    /// Sends `Authorization: Bearer <token>` with every request (the server's access control,
    /// docs/access-control.md). A token with characters an HTTP header cannot carry (line
    /// breaks, control characters) makes [`ClientBuilder::build`] fail with
    /// [`Error::InvalidToken`], which does not contain the token.
    pub fn token(mut self, token: impl AsRef<str>) -> Self {
        match bearer(token.as_ref()) {
            Ok(value) => {
                self.token = Some(value);
                self.token_error = None;
            }
            Err(error) => {
                self.token = None;
                self.token_error = Some(error);
            }
        }
        self
    }

    /// Uses a `reqwest::Client` configured by the caller (proxies, pool sizes, TLS where the
    /// feature is enabled) instead of the default one. Per-request timeouts are still applied.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// The client, or [`Error::InvalidUrl`] / [`Error::InvalidToken`].
    pub fn build(self) -> Result<Client> {
        if let Some(error) = self.token_error {
            return Err(error);
        }
        let http = match self.http {
            Some(http) => http,
            None => default_http_client()?,
        };
        let mut client = Client::with_http_client(&self.base_url, http)?;
        client.authorization = self.token.map(std::sync::Arc::new);
        Ok(client)
    }
}

/// `Bearer <token>` as a sensitive header value.
fn bearer(token: &str) -> Result<HeaderValue> {
    if token.is_empty() {
        return Err(Error::InvalidToken {
            reason: "the token is empty",
        });
    }
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
        Error::InvalidToken {
            reason: "the token has characters an HTTP header cannot carry (line breaks, control characters)",
        }
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The default `reqwest::Client`: no overall timeout (receive long-polls for up to 20 s, so
/// each request sets its own), and idle connections dropped before the server's idle limit
/// (`[limits] header_read_timeout_ms`, 30 s by default) closes them, so a request is not sent
/// on a connection the server is closing at that moment.
fn default_http_client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .build()
        .map_err(Error::Transport)
}

/// How long an idle pooled connection is kept: under the server's default idle limit (30 s).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(20);

impl Client {
    /// A client for the server at `base_url` (e.g. `http://127.0.0.1:7566`; a path prefix such
    /// as `http://host/sluice/` is kept).
    ///
    /// Errors with [`Error::InvalidUrl`] when the URL does not parse or is not `http(s)`.
    pub fn new(base_url: &str) -> Result<Self> {
        Self::with_http_client(base_url, default_http_client()?)
    }

    /// A client for the server at `base_url` that sends `token` with every request; the same
    /// as `Client::builder(base_url).token(token).build()`.
    pub fn with_token(base_url: &str, token: impl AsRef<str>) -> Result<Self> {
        Self::builder(base_url).token(token).build()
    }

    /// A [`ClientBuilder`] for the server at `base_url`, for a token or an own HTTP client.
    pub fn builder(base_url: &str) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.to_owned(),
            token: None,
            token_error: None,
            http: None,
        }
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
        Ok(Self {
            http,
            base,
            authorization: None,
        })
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

    /// `DELETE /v1/queues/{name}`: deletes the queue and its messages, and its dead-letter
    /// queue with its dead letters unless another queue uses that too. Errors with `conflict`
    /// when another queue uses this one as its dead-letter queue.
    pub async fn queue_delete(&self, name: &str) -> Result<QueueDeleteOut> {
        self.queue_delete_with(name, DeadLettersOnDelete::Delete)
            .await
    }

    /// As [`Client::queue_delete`], saying what happens to the dead-letter queue
    /// (`?dead_letters=delete|keep`).
    pub async fn queue_delete_with(
        &self,
        name: &str,
        dead_letters: DeadLettersOnDelete,
    ) -> Result<QueueDeleteOut> {
        let mut url = self.url(&["v1", "queues", queue_segment(name)?])?;
        let value = match dead_letters {
            DeadLettersOnDelete::Delete => "delete",
            DeadLettersOnDelete::Keep => "keep",
        };
        url.query_pairs_mut().append_pair("dead_letters", value);
        self.send(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{name}/stats`: depth and counters since the server started.
    pub async fn queue_stats(&self, name: &str) -> Result<QueueStatsOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "stats"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{name}/pause`: receives return nothing (long polls wait) until
    /// [`Client::queue_resume`]; enqueues are still stored and leases already out can still be
    /// settled. The paused state survives a restart.
    pub async fn queue_pause(&self, name: &str) -> Result<QueueOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "pause"])?;
        self.send(Method::POST, url, Some(&EmptyBody {}), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{name}/resume`: deliveries start again; waiting long polls are woken.
    pub async fn queue_resume(&self, name: &str) -> Result<QueueOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "resume"])?;
        self.send(Method::POST, url, Some(&EmptyBody {}), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{name}/push/pause` (admin): the server stops calling the queue's push
    /// destination until [`Client::queue_push_resume`]; messages wait in the queue. Survives a
    /// restart.
    pub async fn queue_push_pause(&self, name: &str) -> Result<QueueOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "push", "pause"])?;
        self.send(Method::POST, url, Some(&EmptyBody {}), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{name}/push/resume` (admin): push delivery starts again.
    pub async fn queue_push_resume(&self, name: &str) -> Result<QueueOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "push", "resume"])?;
        self.send(Method::POST, url, Some(&EmptyBody {}), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{name}/purge`: removes every ready and delayed message; in-flight ones
    /// stay with their consumers (counted in `in_flight`).
    pub async fn queue_purge(&self, name: &str) -> Result<PurgeOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "purge"])?;
        self.send(Method::POST, url, Some(&EmptyBody {}), BULK_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{name}/drain`: waits until the queue holds no ready, delayed or
    /// in-flight message, or `timeout_ms` (0..=900000, server default 30000) has passed.
    /// `drained` in the answer tells which. It does not stop enqueues.
    ///
    /// The request's own timeout is the drain timeout plus [`DRAIN_TIMEOUT_MARGIN`], so the
    /// server always answers before the client gives up.
    pub async fn queue_drain(&self, name: &str, timeout_ms: Option<i64>) -> Result<DrainOut> {
        let url = self.url(&["v1", "queues", queue_segment(name)?, "drain"])?;
        let wait = timeout_ms
            .unwrap_or(DRAIN_DEFAULT_TIMEOUT_MS)
            .clamp(0, DRAIN_MAX_TIMEOUT_MS);
        let body = DrainIn { timeout_ms };
        self.send(
            Method::POST,
            url,
            Some(&body),
            Duration::from_millis(wait as u64) + DRAIN_TIMEOUT_MARGIN,
        )
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

    /// `GET /v1/queues/{queue}/messages/{message_id}/deliveries`: a message's push delivery
    /// log, its last attempts oldest first.
    pub async fn message_deliveries(
        &self,
        queue: &str,
        message_id: uuid::Uuid,
    ) -> Result<DeliveriesOut> {
        let id = message_id.to_string();
        let url = self.url(&[
            "v1",
            "queues",
            queue_segment(queue)?,
            "messages",
            &id,
            "deliveries",
        ])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{queue}/browse`: one page of a state's messages in dispatch order, or
    /// of the acked messages the queue keeps (`state` `acked`: newest ack first, searched by
    /// [`BrowseQuery`]'s search fields). Follow `next_cursor` (as [`BrowseQuery::cursor`])
    /// until it is absent.
    pub async fn browse(&self, queue: &str, query: &BrowseQuery) -> Result<BrowseOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "browse"])?;
        let url = with_query(
            url,
            [
                ("state", query.state.clone()),
                ("limit", query.limit.map(|limit| limit.to_string())),
                ("cursor", query.cursor.clone()),
                ("preview_bytes", query.preview_bytes.map(|b| b.to_string())),
                ("message_id", query.message_id.clone()),
                ("id", query.id.clone()),
                ("key", query.key.clone()),
                ("since", query.since.clone()),
                ("until", query.until.clone()),
            ],
        );
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
            result: None,
            then: None,
        };
        self.send(Method::POST, url, Some(&body), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/ack` with one `receipt` and a `result` (any JSON, up to 64 KiB)
    /// kept with the message: a later enqueue with the same idempotency key gets it back, and
    /// so does a lookup by key.
    pub async fn ack_with_result(
        &self,
        queue: &str,
        receipt: &str,
        result: &serde_json::Value,
    ) -> Result<AckOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "ack"])?;
        // A `Value` has string keys only, so serializing it cannot fail.
        let result =
            serde_json::value::to_raw_value(result).expect("a serde_json::Value always serializes");
        let body = AckIn {
            receipt: Some(receipt.to_owned()),
            receipts: None,
            result: Some(result),
            then: None,
        };
        self.send(Method::POST, url, Some(&body), REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/ack` with one `receipt`, an optional `result` and next steps
    /// (`then`, at most 100) enqueued in the same commit as the ack: both happen or neither.
    /// The answer's `then` holds each next step's enqueue result, in order.
    pub async fn ack_then(
        &self,
        queue: &str,
        receipt: &str,
        result: Option<&serde_json::Value>,
        then: Vec<NextStepIn>,
    ) -> Result<AckOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "ack"])?;
        let result = result.map(|result| {
            serde_json::value::to_raw_value(result).expect("a serde_json::Value always serializes")
        });
        let body = AckIn {
            receipt: Some(receipt.to_owned()),
            receipts: None,
            result,
            then: Some(then),
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

    /// `POST /v1/queues/{queue}/cancel`: removes a message that is not delivered yet, named by
    /// `message_id` or by idempotency `id`. The answer's `outcome` is `cancelled`, `not_found`,
    /// `already_processing` (in flight) or `already_completed` (`state` says how).
    pub async fn cancel(&self, queue: &str, request: &CancelIn) -> Result<CancelOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "cancel"])?;
        self.send(Method::POST, url, Some(request), REQUEST_TIMEOUT)
            .await
    }

    // ---- dead letters ----

    /// `GET /v1/queues/{queue}/dlq`: one page of the dead letters that came from `queue`,
    /// newest first. Follow `next_cursor` (as [`DlqListQuery::cursor`]) until it is absent; a
    /// page may stop early, even empty, on a rare filter.
    pub async fn dlq_list(&self, queue: &str, query: &DlqListQuery) -> Result<DeadLetterListOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "dlq"])?;
        let url = with_query(
            url,
            [
                ("limit", query.limit.map(|limit| limit.to_string())),
                ("cursor", query.cursor.clone()),
                ("error", query.error.clone()),
                ("since", query.since.clone()),
                ("until", query.until.clone()),
            ],
        );
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/queues/{queue}/dlq/{message_id}`: one dead letter with its body and headers
    /// (and, once replayed, `replayed_at` and `replayed_as`).
    pub async fn dlq_get(&self, queue: &str, message_id: uuid::Uuid) -> Result<DeadLetterEntryOut> {
        let id = message_id.to_string();
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "dlq", &id])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/dlq/replay`: replays the dead letters named by `ids`, or those
    /// matching the filters, at most `limit` (1..=10000, default 1000) per call: call again
    /// while `more` is true. With `dry_run` it only counts every match.
    pub async fn dlq_replay(&self, queue: &str, request: &ReplayIn) -> Result<ReplayOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "dlq", "replay"])?;
        self.send(Method::POST, url, Some(request), BULK_TIMEOUT)
            .await
    }

    /// `POST /v1/queues/{queue}/dlq/{message_id}/replay`: replays one dead letter as a fresh
    /// message in `queue`, or in `target_queue` when given.
    pub async fn dlq_replay_one(
        &self,
        queue: &str,
        message_id: uuid::Uuid,
        target_queue: Option<&str>,
    ) -> Result<ReplayOut> {
        let id = message_id.to_string();
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "dlq", &id, "replay"])?;
        let body = ReplayOneIn {
            target_queue: target_queue.map(str::to_owned),
        };
        self.send(Method::POST, url, Some(&body), REQUEST_TIMEOUT)
            .await
    }

    /// `DELETE /v1/queues/{queue}/dlq/{message_id}`: deletes one dead letter
    /// (`message_not_found` when there is no such entry).
    pub async fn dlq_delete(
        &self,
        queue: &str,
        message_id: uuid::Uuid,
    ) -> Result<DeadLetterDeleteOut> {
        let id = message_id.to_string();
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "dlq", &id])?;
        self.send(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `DELETE /v1/queues/{queue}/dlq`: deletes every dead letter that came from `queue`
    /// (entries in flight stay).
    pub async fn dlq_purge(&self, queue: &str) -> Result<DeadLetterDeleteOut> {
        let url = self.url(&["v1", "queues", queue_segment(queue)?, "dlq"])?;
        self.send(Method::DELETE, url, None::<&()>, BULK_TIMEOUT)
            .await
    }

    // ---- schedules ----

    /// `PUT /v1/schedules/{name}` (admin): defines or replaces a schedule.
    pub async fn schedule_put(&self, name: &str, spec: &ScheduleSpec) -> Result<SchedulePutOut> {
        let url = self.url(&["v1", "schedules", queue_segment(name)?])?;
        self.send(Method::PUT, url, Some(spec), REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/schedules/{name}` (admin): the definition, the next run and the last.
    pub async fn schedule_get(&self, name: &str) -> Result<ScheduleOut> {
        let url = self.url(&["v1", "schedules", queue_segment(name)?])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/schedules` (admin): every schedule, by name.
    pub async fn schedule_list(&self) -> Result<ScheduleListOut> {
        let url = self.url(&["v1", "schedules"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/schedules/{name}/pause` or `/resume` (admin).
    pub async fn schedule_pause(&self, name: &str, paused: bool) -> Result<ScheduleOut> {
        let verb = if paused { "pause" } else { "resume" };
        let url = self.url(&["v1", "schedules", queue_segment(name)?, verb])?;
        self.send(Method::POST, url, Some(&EmptyBody {}), REQUEST_TIMEOUT)
            .await
    }

    /// `DELETE /v1/schedules/{name}` (admin): no run is made after it answers.
    pub async fn schedule_delete(&self, name: &str) -> Result<ScheduleDeleteOut> {
        let url = self.url(&["v1", "schedules", queue_segment(name)?])?;
        self.send(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    // ---- topics ----

    /// `PUT /v1/topics/{name}` (admin): defines or replaces a topic.
    pub async fn topic_put(&self, name: &str, spec: &TopicSpec) -> Result<TopicPutOut> {
        let url = self.url(&["v1", "topics", queue_segment(name)?])?;
        self.send(Method::PUT, url, Some(spec), REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/topics/{name}` (admin): the definition and its counts.
    pub async fn topic_get(&self, name: &str) -> Result<TopicOut> {
        let url = self.url(&["v1", "topics", queue_segment(name)?])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/topics` (admin): every topic, by name.
    pub async fn topic_list(&self) -> Result<TopicListOut> {
        let url = self.url(&["v1", "topics"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `DELETE /v1/topics/{name}` (admin): its queues and their messages stay.
    pub async fn topic_delete(&self, name: &str) -> Result<TopicDeleteOut> {
        let url = self.url(&["v1", "topics", queue_segment(name)?])?;
        self.send(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `POST /v1/topics/{name}/messages`: a copy in each subscribed queue whose filter takes
    /// it, all stored in one commit.
    pub async fn topic_publish(&self, name: &str, message: &MessageIn) -> Result<TopicPublishOut> {
        let url = self.url(&["v1", "topics", queue_segment(name)?, "messages"])?;
        self.send(Method::POST, url, Some(message), REQUEST_TIMEOUT)
            .await
    }

    // ---- alerts ----

    /// `PUT /v1/alerts/{name}` (admin): defines or replaces an alert, and its queue
    /// `sluice.alerts.<name>`, through which its notifications are delivered. A `command`
    /// destination is refused (`invalid_field`): only the config file may name one.
    pub async fn alert_put(&self, name: &str, spec: &AlertSpec) -> Result<AlertPutOut> {
        let url = self.url(&["v1", "alerts", queue_segment(name)?])?;
        self.send(Method::PUT, url, Some(spec), REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/alerts/{name}` (admin): the definition, what it sent, the queues firing now and
    /// its deliveries (`alert_not_found` if absent).
    pub async fn alert_get(&self, name: &str) -> Result<AlertOut> {
        let url = self.url(&["v1", "alerts", queue_segment(name)?])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `GET /v1/alerts` (admin): every alert, by name.
    pub async fn alert_list(&self) -> Result<AlertListOut> {
        let url = self.url(&["v1", "alerts"])?;
        self.send(Method::GET, url, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    /// `DELETE /v1/alerts/{name}` (admin): the alert and its queue, with the notifications not
    /// yet delivered.
    pub async fn alert_delete(&self, name: &str) -> Result<AlertDeleteOut> {
        let url = self.url(&["v1", "alerts", queue_segment(name)?])?;
        self.send(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
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
        if let Some(authorization) = &self.authorization {
            request = request.header(
                reqwest::header::AUTHORIZATION,
                HeaderValue::clone(authorization),
            );
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(Error::Transport)?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(error::parse_retry_after);
        let bytes = response.bytes().await.map_err(Error::Transport)?;
        if !status.is_success() {
            return Err(Error::from_response(status.as_u16(), retry_after, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
            status: status.as_u16(),
            body: error::snippet(&bytes),
            source,
        })
    }
}

/// `{}`: the body of POST routes that take no parameters, so a server reading JSON gets JSON.
#[derive(Serialize)]
struct EmptyBody {}

/// `url` with each given `(name, value)` as a query pair, in order; without `?` when none is.
fn with_query<const N: usize>(mut url: Url, pairs: [(&str, Option<String>); N]) -> Url {
    {
        let mut query = url.query_pairs_mut();
        for (name, value) in pairs {
            if let Some(value) = value {
                query.append_pair(name, &value);
            }
        }
    }
    if url.query() == Some("") {
        url.set_query(None);
    }
    url
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
    fn the_token_is_sent_as_bearer_and_never_shown() {
        let token = "secret-token-0123456789";
        let client = Client::with_token("http://h:1", token).unwrap();
        let authorization = client.authorization.as_ref().unwrap();
        assert_eq!(
            authorization.to_str().unwrap(),
            "Bearer secret-token-0123456789"
        );
        assert!(authorization.is_sensitive());
        let debug = format!(
            "{client:?} {:?}",
            Client::builder("http://h:1").token(token)
        );
        assert!(!debug.contains(token), "{debug}");
        assert!(Client::new("http://h:1").unwrap().authorization.is_none());
    }

    #[test]
    fn a_token_a_header_cannot_carry_is_refused_without_showing_it() {
        for token in ["", "line\nbreak-0123456789", "nul\0-0123456789"] {
            let error = Client::with_token("http://h:1", token).unwrap_err();
            assert!(matches!(error, Error::InvalidToken { .. }), "{error:?}");
            let text = format!("{error} {error:?}");
            assert!(token.is_empty() || !text.contains(token), "{text}");
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
