//! `ApiError`: the one place an error becomes an HTTP status and a stable code.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sluice_core::store::StoreError;
use sluice_ops::OpsError;
use sluice_webhooks::verify::VerifyError;
pub use sluice_wire::ErrorCode;
use sluice_wire::{ErrorBody, ErrorDetail};

/// An error answer: status, stable code, human message, optional details.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine code; it decides `status`.
    pub code: ErrorCode,
    /// What to fix.
    pub message: String,
    /// Per-item results for partly refused batches.
    pub details: Option<serde_json::Value>,
    /// Seconds for a `Retry-After` header.
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    /// An answer with `code`, and the HTTP status that code always has.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::from_u16(code.status())
                .expect("every ErrorCode has a valid HTTP status"),
            code,
            message: message.into(),
            details: None,
            retry_after_s: None,
        }
    }

    /// 400: the body is not JSON of the expected shape.
    pub fn malformed_json(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::MalformedJson, message)
    }

    /// 401: a webhook's signature is missing, wrong or stale; the code says which.
    pub fn signature_refused(error: &VerifyError) -> Self {
        Self::new(signature_code(error), error.to_string())
    }

    /// 404: no such route.
    pub fn route_not_found() -> Self {
        Self::new(
            ErrorCode::NotFound,
            "no such route; see GET /v1/openapi.json",
        )
    }

    /// 405.
    pub fn method_not_allowed() -> Self {
        Self::new(
            ErrorCode::MethodNotAllowed,
            "this route does not take that method",
        )
    }

    /// 413.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, message)
    }

    /// 422: a field is out of range or of the wrong form; the message names it.
    pub fn invalid_field(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidField, message)
    }

    /// 503.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail::new(self.code, self.message).with_details(self.details),
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after_s {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// The code of a refused webhook signature. sluice-webhooks keeps its own string codes (it
/// does not depend on sluice-core); this match is exhaustive, so a new `VerifyError` cannot
/// reach a client without a code of its own, and a test keeps both strings equal.
fn signature_code(error: &VerifyError) -> ErrorCode {
    match error {
        VerifyError::MissingHeader { .. } => ErrorCode::MissingHeader,
        VerifyError::MalformedSignature { .. } => ErrorCode::MalformedSignature,
        VerifyError::SignatureMismatch => ErrorCode::SignatureMismatch,
        VerifyError::TimestampOutOfTolerance { .. } => ErrorCode::TimestampOutOfTolerance,
        VerifyError::BodyHashMismatch => ErrorCode::BodyHashMismatch,
    }
}

impl From<OpsError> for ApiError {
    fn from(error: OpsError) -> Self {
        let mut api = Self::new(error.code, error.message);
        api.details = error.details.map(crate::views::details_json);
        api.retry_after_s = error.retry_after_s;
        api
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        OpsError::from(error).into()
    }
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::too_large("the request body is larger than 16 MiB")
        } else {
            Self::malformed_json(rejection.body_text())
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::new(ErrorCode::MalformedPath, rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::new(ErrorCode::MalformedQuery, rejection.body_text())
    }
}

#[cfg(test)]
mod tests {
    use sluice_ops::error::DISK_FULL_RETRY_AFTER_S;

    use super::*;

    /// docs/http-api.md's error table, as (status, code) pairs: a row may list several codes
    /// of one status.
    fn documented_codes() -> Vec<(u16, String)> {
        let doc = include_str!("../../../docs/http-api.md");
        let table = doc.split("## Errors").nth(1).expect("an Errors section");
        let table = &table[..table.find("\n## ").unwrap_or(table.len())];
        let mut rows = Vec::new();
        for line in table.lines().filter(|line| line.starts_with("| ")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let Ok(status) = cells[1].parse::<u16>() else {
                continue; // the header row
            };
            for code in cells[2].split(',') {
                let code = code.trim().trim_matches('`');
                rows.push((status, code.to_owned()));
            }
        }
        rows
    }

    /// The table and the enum are the same set, each code once, with the same status: a code
    /// added to the enum without a row (or a row left behind by a removed code) fails here.
    #[test]
    fn the_error_table_lists_every_code_with_its_status() {
        let documented = documented_codes();
        assert!(
            documented.len() > 20,
            "the table was not read: {documented:?}"
        );
        let mut seen = std::collections::BTreeSet::new();
        for (status, code) in &documented {
            let parsed: ErrorCode = code
                .parse()
                .unwrap_or_else(|_| panic!("docs/http-api.md lists {code:?}, not an ErrorCode"));
            assert_eq!(parsed.status(), *status, "{code}: status in the docs");
            assert!(seen.insert(parsed), "{code} has two rows");
        }
        let missing: Vec<&ErrorCode> = ErrorCode::ALL
            .iter()
            .filter(|code| !seen.contains(code))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/http-api.md's error table lacks {missing:?}"
        );
    }

    /// An answer's status comes from its code, and the body is the JSON the API always sent.
    #[tokio::test]
    async fn an_answer_takes_its_status_from_its_code() {
        let mut error = ApiError::new(ErrorCode::NoPushDestination, "no destination");
        error.retry_after_s = Some(3);
        let response = error.into_response();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        assert_eq!(response.headers()[axum::http::header::RETRY_AFTER], "3");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            serde_json::json!({"error": {"code": "no_push_destination", "message": "no destination"}})
        );
    }

    /// A refused signature keeps the code sluice-webhooks gives it, for every kind of refusal.
    #[test]
    fn signature_refusals_keep_their_codes() {
        for error in [
            VerifyError::MissingHeader { header: "x".into() },
            VerifyError::MalformedSignature {
                header: "x".into(),
                reason: "r",
            },
            VerifyError::SignatureMismatch,
            VerifyError::TimestampOutOfTolerance {
                timestamp: 0,
                now: 1000,
                tolerance_s: 300,
            },
            VerifyError::BodyHashMismatch,
        ] {
            let api = ApiError::signature_refused(&error);
            assert_eq!(api.code.as_str(), error.code());
            assert_eq!(api.status, StatusCode::UNAUTHORIZED);
        }
    }

    /// A full disk and a failed sync are told apart: one is temporary (507, retry later), the
    /// other needs a restart.
    #[test]
    fn a_full_disk_and_stopped_writes_get_their_own_codes() {
        let full = ApiError::from(StoreError::DiskFull("no space left".into()));
        assert_eq!(
            (full.status.as_u16(), full.code, full.retry_after_s),
            (507, ErrorCode::DiskFull, Some(DISK_FULL_RETRY_AFTER_S))
        );
        let stopped = ApiError::from(StoreError::WritesStopped("fdatasync failed".into()));
        assert_eq!(
            (stopped.status.as_u16(), stopped.code),
            (503, ErrorCode::StorageFailed)
        );
        assert!(stopped.message.contains("fdatasync failed"));
    }
}
