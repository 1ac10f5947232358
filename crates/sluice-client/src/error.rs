//! The client's error type: what went wrong with one request, sorted by who is to blame.
//!
//! The server's JSON error body becomes [`Error::Api`] with its stable `code`; everything that
//! prevented a well-formed answer (connection, timeout, a body of the wrong shape) has a variant
//! of its own, so callers can match on meaning rather than on strings.

use sluice_wire::{AckResult, ErrorBody, ErrorCode};

/// A server's error code as this client reads it.
///
/// The server's codes are the closed [`ErrorCode`]; the client adds [`Code::Unknown`] because a
/// server newer than this client may send a code added after it was built, and that answer
/// must still be an [`Error::Api`] with its status and message, not a decode failure. Match on
/// [`Code::Known`] (or use [`Error::has_code`]); treat `Unknown` like its HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Code {
    /// A code of this client's API version.
    Known(ErrorCode),
    /// A code this client does not know, as sent.
    Unknown(String),
}

impl Code {
    /// Reads a code as sent.
    pub fn parse(text: &str) -> Self {
        text.parse()
            .map_or_else(|_| Self::Unknown(text.to_owned()), Self::Known)
    }

    /// The code as sent, e.g. `queue_not_found`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Known(code) => code.as_str(),
            Self::Unknown(text) => text,
        }
    }

    /// The [`ErrorCode`], when this client knows it.
    pub fn known(&self) -> Option<ErrorCode> {
        match self {
            Self::Known(code) => Some(*code),
            Self::Unknown(_) => None,
        }
    }
}

impl From<ErrorCode> for Code {
    fn from(code: ErrorCode) -> Self {
        Self::Known(code)
    }
}

impl PartialEq<ErrorCode> for Code {
    fn eq(&self, other: &ErrorCode) -> bool {
        self.known() == Some(*other)
    }
}

/// Compares with the wire form, known or not (`code == "queue_not_found"`).
impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `Result` with the client's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status and its JSON error body
    /// `{"error": {"code", "message", "details"}}`.
    #[error("{code}: {message}")]
    Api {
        /// HTTP status, e.g. 404.
        status: u16,
        /// Stable machine code, e.g. `queue_not_found` or `stale_receipt`.
        code: Code,
        /// What to fix, in words.
        message: String,
        /// Per-item results where a batch was partly refused (e.g. the per-receipt results of
        /// an ack that met a stale receipt, or the depth of a full queue).
        details: Option<serde_json::Value>,
        /// The `Retry-After` header in seconds, when the server sent one (e.g. with
        /// `503 queue_full`: when a retry may find room).
        retry_after: Option<u64>,
    },
    /// The request did not get an answer: the connection failed, timed out or broke.
    #[error("request to the sluice server failed")]
    Transport(#[source] reqwest::Error),
    /// The server answered, but the body was not the JSON the API promises for that status.
    #[error("cannot decode the server's answer (HTTP {status}): {body}")]
    Decode {
        /// HTTP status of the answer.
        status: u16,
        /// The start of the body as text, for the error message.
        body: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A base URL the client cannot use.
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// Why it does not work.
        reason: String,
    },
    /// A token the client cannot send (empty, or with characters an HTTP header cannot carry).
    /// The message never contains the token.
    #[error("invalid token: {reason}")]
    InvalidToken {
        /// Why it cannot be sent.
        reason: &'static str,
    },
    /// A queue name or id that cannot be put in a URL path (empty, `.` or `..`).
    #[error("{what} {value:?} cannot be used in a URL path")]
    InvalidPathSegment {
        /// What the value is, e.g. `queue name`.
        what: &'static str,
        /// The value as given.
        value: String,
    },
}

impl Error {
    /// The API error code (`queue_not_found`, `stale_receipt`, ...), for [`Error::Api`] only.
    pub fn code(&self) -> Option<&Code> {
        match self {
            Self::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether this is an [`Error::Api`] with `code`.
    pub fn has_code(&self, code: ErrorCode) -> bool {
        self.code().is_some_and(|own| *own == code)
    }

    /// The HTTP status of the answer, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Api { status, .. } | Self::Decode { status, .. } => Some(*status),
            Self::Transport(error) => error.status().map(|status| status.as_u16()),
            Self::InvalidUrl { .. }
            | Self::InvalidPathSegment { .. }
            | Self::InvalidToken { .. } => None,
        }
    }

    /// How long the server asked the caller to wait before retrying (its `Retry-After`
    /// header), e.g. for `503 queue_full`; [`Error::Api`] only.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            Self::Api {
                retry_after: Some(seconds),
                ..
            } => Some(std::time::Duration::from_secs(*seconds)),
            _ => None,
        }
    }

    /// The `details` of an [`Error::Api`], when the server sent any.
    pub fn details(&self) -> Option<&serde_json::Value> {
        match self {
            Self::Api { details, .. } => details.as_ref(),
            _ => None,
        }
    }

    /// For a `409 stale_receipt` answer to an ack: the per-receipt results from `details`
    /// (the receipts that were current have been acked all the same).
    pub fn ack_results(&self) -> Option<Vec<AckResult>> {
        let Self::Api {
            details: Some(details),
            ..
        } = self
        else {
            return None;
        };
        let results = details.get("results").unwrap_or(details);
        serde_json::from_value(results.clone()).ok()
    }

    /// Builds the error for a non-2xx answer from its status, `Retry-After` seconds and body.
    pub(crate) fn from_response(status: u16, retry_after: Option<u64>, body: &[u8]) -> Self {
        match serde_json::from_slice::<ErrorBody>(body) {
            Ok(ErrorBody { error }) => Self::Api {
                status,
                code: Code::parse(error.code()),
                message: error.message,
                details: error.details,
                retry_after,
            },
            Err(source) => Self::Decode {
                status,
                body: snippet(body),
                source,
            },
        }
    }
}

/// Reads a `Retry-After` header given in seconds (the form sluice sends); an HTTP date or
/// anything else gives `None`.
pub(crate) fn parse_retry_after(value: &str) -> Option<u64> {
    value.trim().parse().ok()
}

/// The first few hundred bytes of a body as text, for error messages.
pub(crate) fn snippet(body: &[u8]) -> String {
    const SNIPPET_BYTES_MAX: usize = 300;
    let text = String::from_utf8_lossy(&body[..body.len().min(SNIPPET_BYTES_MAX)]);
    let mut text = text.trim().to_owned();
    if body.len() > SNIPPET_BYTES_MAX {
        text.push_str("...");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_becomes_an_api_error_with_its_code() {
        let error = Error::from_response(
            404,
            None,
            br#"{"error": {"code": "queue_not_found", "message": "no queue \"q\""}}"#,
        );
        assert_eq!(error.code(), Some(&Code::Known(ErrorCode::QueueNotFound)));
        assert!(error.has_code(ErrorCode::QueueNotFound));
        assert_eq!(error.status(), Some(404));
        assert_eq!(error.to_string(), r#"queue_not_found: no queue "q""#);
    }

    /// A code from a newer server is kept as sent, with its status and message, and matches no
    /// known code.
    #[test]
    fn an_unknown_code_is_kept_as_sent() {
        let error = Error::from_response(
            429,
            Some(2),
            br#"{"error": {"code": "rate_limited", "message": "slow down"}}"#,
        );
        assert_eq!(error.code(), Some(&Code::Unknown("rate_limited".into())));
        assert_eq!(error.code().and_then(Code::known), None);
        assert!(!error.has_code(ErrorCode::TooLarge));
        assert_eq!(error.status(), Some(429));
        assert_eq!(error.retry_after(), Some(std::time::Duration::from_secs(2)));
        assert_eq!(error.to_string(), "rate_limited: slow down");
    }

    /// Every code the server can send is read as that code.
    #[test]
    fn every_known_code_is_read_as_itself() {
        for &code in ErrorCode::ALL {
            assert_eq!(Code::parse(code.as_str()), Code::Known(code));
            assert_eq!(Code::from(code).as_str(), code.as_str());
        }
    }

    #[test]
    fn a_body_that_is_not_an_error_body_is_a_decode_error() {
        let error = Error::from_response(502, None, b"<html>Bad Gateway</html>");
        assert!(
            matches!(error, Error::Decode { status: 502, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("Bad Gateway"));
    }

    #[test]
    fn the_ack_results_of_a_stale_receipt_answer_are_readable() {
        let error = Error::from_response(
            409,
            None,
            br#"{"error": {"code": "stale_receipt", "message": "m", "details": {"results": [
                {"receipt": "a", "acked": true},
                {"receipt": "b", "acked": false, "error": {"code": "stale_receipt", "message": "x"}}
            ]}}}"#,
        );
        let results = error.ack_results().unwrap();
        assert_eq!(results.len(), 2);
        assert!(results[0].acked);
        assert!(!results[1].acked);
    }

    #[test]
    fn a_full_queue_error_keeps_its_retry_after_and_details() {
        let error = Error::from_response(
            503,
            parse_retry_after(" 7 "),
            br#"{"error": {"code": "queue_full", "message": "full", "details":
                {"accepted": 0, "refused": 2, "depth": 10, "max_depth": 10}}}"#,
        );
        assert!(error.has_code(ErrorCode::QueueFull));
        assert_eq!(error.retry_after(), Some(std::time::Duration::from_secs(7)));
        assert_eq!(error.details().unwrap()["refused"], 2);
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }
}
