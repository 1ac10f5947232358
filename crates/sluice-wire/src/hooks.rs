//! The JSON (and TOML) shapes of webhook endpoints and push destinations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::LatencyOut;

/// Where a secret comes from: an environment variable or a file (its contents, trimmed).
/// Secrets themselves never appear in definitions, answers or logs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    /// Name of an environment variable of the server process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// Path of a file readable by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// How an endpoint verifies its sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifySpec {
    /// `standard_webhooks`, `github`, `stripe`, `slack`, `shopify`, `pagerduty`, `twilio`,
    /// `hmac` (generic), or `none` (no verification: anyone who can reach the URL can enqueue).
    pub scheme: String,
    /// One secret, or several while rotating (each is tried).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretRef>,
    /// Largest clock difference accepted for schemes with a timestamp, in seconds (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_s: Option<i64>,
    /// `hmac` only: the header carrying the signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// `hmac` only: `sha1`, `sha256` (default) or `sha512`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    /// `hmac` only: `hex` (default) or `base64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    /// `hmac` only: a prefix before the signature, such as `sha256=`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// Where a webhook's idempotency key comes from (default: the scheme's delivery id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IdempotencySpec {
    /// A request header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A jq expression over the event (see `WebhookSpec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression: Option<String>,
}

/// A webhook endpoint: `POST /hooks/{name}` verifies, shapes and enqueues into `queue`.
///
/// Expressions are jq programs run on the event
/// `{"body": <JSON body, or form fields as an object, or the text>, "headers": {<lowercase name>: <value>}, "query": {...}, "source_ip": "...", "received_at": "<RFC 3339>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhookSpec {
    /// The queue events go to (it must exist). With `topic`, the queue whose dead-letter queue
    /// keeps the events that cannot become a message.
    pub queue: String,
    /// Publish each accepted event to this topic (it must exist) instead of storing it in
    /// `queue`: a copy in each subscribed queue whose filter takes it, in one commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Signature verification.
    pub verify: VerifySpec,
    /// Idempotency key source; by default the scheme's delivery id (`webhook-id`,
    /// `X-GitHub-Delivery`, Stripe `.body.id`, ...), none for `hmac` and `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency: Option<IdempotencySpec>,
    /// Keep the event only when this expression's first output is neither false nor null (and
    /// it has one); others are answered `200 {"ignored": true}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// The stored message body is this expression's first output (default: the body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// The message key (for `per_key` queues), from an expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The message priority, from an expression giving an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// Largest request body in bytes (default 1048576).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<usize>,
    /// The URL the sender calls, when sluice is behind a proxy (Twilio signs it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_url: Option<String>,
    /// Keep the sender's signature headers (and their timestamps) with the message, so a
    /// consumer can check the stored body against them itself (default false: they are
    /// dropped, since anyone who can read the queue could post the delivery again with them).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_signature_headers: bool,
}

/// Counts of what an endpoint did since the server started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookStatsOut {
    /// Requests received.
    pub received: u64,
    /// Stored as new messages (202).
    pub accepted: u64,
    /// Duplicates of an earlier delivery (200, nothing stored).
    pub duplicates: u64,
    /// Dropped by the filter (200).
    pub ignored: u64,
    /// Stored straight into the dead-letter queue (malformed body, schema violation).
    pub dead_lettered: u64,
    /// Refused, by reason (`signature_mismatch`, `missing_header`, `too_large`, `queue_full`, ...).
    pub rejected: BTreeMap<String, u64>,
}

/// A webhook endpoint as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookOut {
    /// Name.
    pub name: String,
    /// Where senders post: `/hooks/{name}`.
    pub path: String,
    /// Its definition (secret references only).
    pub spec: WebhookSpec,
    /// What it did.
    pub stats: WebhookStatsOut,
}

/// `GET /v1/webhooks`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookListOut {
    /// Every endpoint, by name.
    pub webhooks: Vec<WebhookOut>,
}

/// The answer to a sender.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebhookReceiptOut {
    /// True when the event is stored in the endpoint's queue.
    pub queued: bool,
    /// The stored message (the first one, for a duplicate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub message_id: Option<uuid::Uuid>,
    /// The idempotency key used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Set for a duplicate delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
    /// For a duplicate: the first message's state now (`ready`, `in_flight`, `acked`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// For a duplicate whose first message was acked with a result: that result (the memo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Value>)]
    pub result: Option<serde_json::Value>,
    /// Set when the filter dropped the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignored: Option<bool>,
    /// Set when the event went straight to the dead-letter queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_lettered: Option<bool>,
    /// Why it was dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For an endpoint that publishes to a topic: the copies stored (or found stored, for a
    /// duplicate), one per subscribed queue whose filter took the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copies: Option<Vec<super::TopicCopyOut>>,
}

/// The HTTP method of a push request. The definition keeps the name as given (`PushSpec`
/// stays the JSON it was); this is what the name must parse into, at definition (422 for any
/// other) and again when a worker starts, which refuses to start rather than guess a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PushMethod {
    /// `POST`, the default.
    #[default]
    Post,
    /// `PUT`.
    Put,
    /// `PATCH`.
    Patch,
}

impl PushMethod {
    /// Every method a destination may use.
    pub const ALL: [PushMethod; 3] = [PushMethod::Post, PushMethod::Put, PushMethod::Patch];

    /// The method's name as sent (and as given in a definition): `POST`, `PUT`, `PATCH`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PushMethod::Post => "POST",
            PushMethod::Put => "PUT",
            PushMethod::Patch => "PATCH",
        }
    }

    /// The method of a definition's `method` field: the default for none, an error naming the
    /// field for a name that is not exactly one of [`PushMethod::ALL`].
    pub fn of_spec(method: Option<&str>) -> Result<PushMethod, String> {
        let Some(name) = method else {
            return Ok(PushMethod::default());
        };
        PushMethod::ALL
            .into_iter()
            .find(|known| known.as_str() == name)
            .ok_or_else(|| format!("push.method: {name:?} is not one of POST, PUT, PATCH"))
    }
}

/// A queue's push destination: a dispatcher leases its messages and calls this URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushSpec {
    /// `http://` or `https://` URL.
    pub url: String,
    /// `POST` (default), `PUT` or `PATCH` (see [`PushMethod`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Extra request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Per request, in ms (default 10000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    /// A jq expression shaping the request body from
    /// `{"body", "headers", "message_id", "attempts", "enqueued_at", "key", "id"}` (default: the body as stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// Sign each request with Standard Webhooks headers using this `whsec_` secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<SecretRef>,
    /// Retry 4xx answers other than 408 and 429 instead of dead-lettering them (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_client_errors: Option<bool>,
    /// Most requests in flight at once (default: the queue's `max_in_flight`, else 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// The URL's path is a secret (a capability URL such as a chat webhook's): tokens that are
    /// not admins see it as `(hidden)`, as they always see the user info and the query (default
    /// false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_path: Option<bool>,
}

/// What a push destination did since the server started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PushStatsOut {
    /// False when the server runs with push delivery off (`--no-push`, `[push] enabled =
    /// false`).
    #[serde(default = "enabled_default")]
    pub enabled: bool,
    /// True while an operator paused this queue's push delivery
    /// (`POST /v1/queues/{queue}/push/pause`; kept across restarts).
    #[serde(default)]
    pub paused: bool,
    /// Requests answered 2xx (acked).
    pub delivered: u64,
    /// Failed attempts that will be retried.
    pub retried: u64,
    /// Failures that sent the message to the dead-letter queue: a permanent answer, or the
    /// last attempt.
    pub failed_permanently: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Status of the last answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    /// The last failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Request latency over the last five minutes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<LatencyOut>,
}

fn enabled_default() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each method is read from its own name only; no name means POST; anything else (another
    /// HTTP method, another case) is refused naming the field.
    #[test]
    fn push_methods_are_read_exactly() {
        for method in PushMethod::ALL {
            assert_eq!(PushMethod::of_spec(Some(method.as_str())), Ok(method));
        }
        assert_eq!(PushMethod::of_spec(None), Ok(PushMethod::Post));
        for wrong in ["GET", "DELETE", "post", "", "POST "] {
            let error = PushMethod::of_spec(Some(wrong)).unwrap_err();
            assert!(error.starts_with("push.method:"), "{wrong:?}: {error}");
        }
    }
}
