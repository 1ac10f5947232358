//! Error answers: the closed set of codes the server sends, and the body that carries one.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

/// Declares [`ErrorCode`] from one table (variant, wire string, HTTP status, meaning), so the
/// string, the status and the list of every code cannot drift apart.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $text:literal, $status:literal;)+) => {
        /// Every `code` the server sends in an error body, with the HTTP status it goes with.
        ///
        /// Closed on purpose: the server cannot make a code that is not here, and
        /// docs/http-api.md has a row for each (a test in the server keeps the table and this
        /// enum equal). Clients that must survive codes from a newer server wrap it
        /// (`sluice_client::Code` has an `Unknown` fallback); this type never does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order of docs/http-api.md's table.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The wire form, e.g. `queue_not_found`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $text,)+
                }
            }

            /// The HTTP status every answer with this code has.
            pub const fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)+
                }
            }
        }

        impl std::str::FromStr for ErrorCode {
            type Err = UnknownErrorCode;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok(ErrorCode::$variant),)+
                    _ => Err(UnknownErrorCode(text.to_owned())),
                }
            }
        }
    };
}

error_codes! {
    /// The body is not JSON, or not the expected shape (wrong type, unknown field).
    MalformedJson = "malformed_json", 400;
    /// A receipt is not a receipt at all.
    MalformedReceipt = "malformed_receipt", 400;
    /// A query parameter of the wrong type (e.g. `limit=abc`).
    MalformedQuery = "malformed_query", 400;
    /// A path segment that cannot be read (e.g. not valid percent-encoding).
    MalformedPath = "malformed_path", 400;
    /// With access control on: no token, an unknown token, or an ended dashboard session.
    Unauthorized = "unauthorized", 401;
    /// `POST /hooks/{name}`: a header the signature scheme requires is absent.
    MissingHeader = "missing_header", 401;
    /// `POST /hooks/{name}`: a signature or timestamp header cannot be parsed.
    MalformedSignature = "malformed_signature", 401;
    /// `POST /hooks/{name}`: no signature matches a configured secret.
    SignatureMismatch = "signature_mismatch", 401;
    /// `POST /hooks/{name}`: the signed timestamp is too old or too new.
    TimestampOutOfTolerance = "timestamp_out_of_tolerance", 401;
    /// `POST /hooks/{name}` (Twilio): the body does not match the signed `bodySHA256`.
    BodyHashMismatch = "body_hash_mismatch", 401;
    /// The token is valid but does not allow this route on this queue.
    Forbidden = "forbidden", 403;
    /// A browser says another site's page sent this change.
    CrossSiteRequest = "cross_site_request", 403;
    /// The queue does not exist.
    QueueNotFound = "queue_not_found", 404;
    /// No such message.
    MessageNotFound = "message_not_found", 404;
    /// No such route.
    NotFound = "not_found", 404;
    /// No webhook endpoint of that name.
    WebhookNotFound = "webhook_not_found", 404;
    /// No schedule of that name.
    ScheduleNotFound = "schedule_not_found", 404;
    /// No topic of that name.
    TopicNotFound = "topic_not_found", 404;
    /// No alert of that name.
    AlertNotFound = "alert_not_found", 404;
    /// The route exists but does not take that method.
    MethodNotAllowed = "method_not_allowed", 405;
    /// The request body stopped arriving for `[limits] body_read_timeout_ms`.
    RequestTimeout = "request_timeout", 408;
    /// The receipt is not the message's current lease.
    StaleReceipt = "stale_receipt", 409;
    /// The change contradicts the current state (e.g. deleting a queue used as a DLQ).
    Conflict = "conflict", 409;
    /// Pausing or resuming push delivery of a queue without a push destination.
    NoPushDestination = "no_push_destination", 409;
    /// A body, batch or request over its limit.
    TooLarge = "too_large", 413;
    /// A browser sent a body not labelled `application/json`.
    UnsupportedMediaType = "unsupported_media_type", 415;
    /// Without tokens, the `Host` does not name the server (DNS rebinding).
    UnknownHost = "unknown_host", 421;
    /// A field has a value out of range or of the wrong form.
    InvalidField = "invalid_field", 422;
    /// A body fails the queue's JSON Schema.
    SchemaViolation = "schema_violation", 422;
    /// A store error of unknown cause.
    Internal = "internal", 500;
    /// The store cannot serve now, or the server is shutting down.
    Unavailable = "unavailable", 503;
    /// Request bodies in flight already hold `[limits] body_bytes_in_flight`.
    Overloaded = "overloaded", 503;
    /// The enqueue would take the queue beyond its `max_depth`.
    QueueFull = "queue_full", 503;
    /// Writes stopped for good after a failed WAL sync.
    StorageFailed = "storage_failed", 503;
    /// The disk is full: new messages are refused until space is freed.
    DiskFull = "disk_full", 507;
}

/// A code that is not an [`ErrorCode`] (e.g. one a newer server sends).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error code {0:?}")]
pub struct UnknownErrorCode(pub String);

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A stable code and a human message.
///
/// The code is a string here, not an [`ErrorCode`], because clients read this type too and
/// must not fail on a code from a newer server; it is private so that the only way to make
/// one is [`ErrorDetail::new`], from an [`ErrorCode`]. The OpenAPI document describes it as a
/// string for the same reason: a generated client with a closed enum would break on a new code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine code, e.g. `queue_not_found`, `stale_receipt`, `invalid_field`.
    code: String,
    /// What to fix.
    pub message: String,
    /// Per-item results where a batch was partly refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub details: Option<serde_json::Value>,
}

impl ErrorDetail {
    /// An error with `code` and `message`, without details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: code.as_str().to_owned(),
            message: message.into(),
            details: None,
        }
    }

    /// Attaches (or clears) the details.
    pub fn with_details(mut self, details: Option<serde_json::Value>) -> Self {
        self.details = details;
        self
    }

    /// The code as sent: an [`ErrorCode`]'s string, or from a newer server one this build
    /// does not know.
    pub fn code(&self) -> &str {
        &self.code
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code serialises to its documented string (a JSON string, as in an error body)
    /// and reads back as itself, by serde and by `FromStr`.
    #[test]
    fn every_code_round_trips_through_its_string() {
        for &code in ErrorCode::ALL {
            let text = code.as_str();
            assert!(
                !text.is_empty() && text.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{text:?} is not snake_case"
            );
            assert_eq!(serde_json::to_value(code).unwrap(), serde_json::json!(text));
            assert_eq!(
                serde_json::from_value::<ErrorCode>(serde_json::json!(text)).unwrap(),
                code
            );
            assert_eq!(text.parse::<ErrorCode>(), Ok(code));
            assert_eq!(code.to_string(), text);
            assert!((400..600).contains(&code.status()), "{code}");
        }
        let distinct: std::collections::BTreeSet<&str> =
            ErrorCode::ALL.iter().map(|code| code.as_str()).collect();
        assert_eq!(
            distinct.len(),
            ErrorCode::ALL.len(),
            "two codes share a string"
        );
        assert_eq!(ErrorCode::QueueNotFound.as_str(), "queue_not_found");
        assert_eq!(ErrorCode::TimestampOutOfTolerance.status(), 401);
    }

    /// A string that is no code is refused: the enum stays closed.
    #[test]
    fn an_unknown_code_is_refused() {
        assert_eq!(
            "rate_limited".parse::<ErrorCode>(),
            Err(UnknownErrorCode("rate_limited".into()))
        );
        assert!(serde_json::from_str::<ErrorCode>(r#""QueueNotFound""#).is_err());
    }

    /// An error body made from a code is the JSON the API has always sent.
    #[test]
    fn an_error_body_keeps_its_json() {
        let error = ErrorDetail::new(ErrorCode::QueueFull, "full")
            .with_details(Some(serde_json::json!({"refused": 1})));
        assert_eq!(
            serde_json::to_value(ErrorBody { error }).unwrap(),
            serde_json::json!({"error": {"code": "queue_full", "message": "full", "details": {"refused": 1}}})
        );
        let read: ErrorBody =
            serde_json::from_str(r#"{"error": {"code": "from_the_future", "message": "m"}}"#)
                .unwrap();
        assert_eq!(read.error.code(), "from_the_future");
    }
}
