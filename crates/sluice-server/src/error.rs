//! `ApiError`: the one place an error becomes an HTTP status and a stable code.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use sluice_core::dispatch::LeaseError;
use sluice_core::store::StoreError;
use sluice_core::wire::{ErrorBody, ErrorDetail};

/// `Retry-After` of a write refused because the disk is full: the store looks for free space
/// every second.
const DISK_FULL_RETRY_AFTER_S: u64 = 5;

/// Every `code` the server sends in an error body, wherever the answer is made (this module,
/// access control, the browser guard, the body budget, webhook verification...). docs/http-api.md
/// has a row for each; the tests below keep both this list and that table complete.
pub const ERROR_CODES: &[&str] = &[
    "malformed_json",
    "malformed_receipt",
    "malformed_query",
    "malformed_path",
    "unauthorized",
    "missing_header",
    "malformed_signature",
    "signature_mismatch",
    "timestamp_out_of_tolerance",
    "body_hash_mismatch",
    "forbidden",
    "cross_site_request",
    "not_found",
    "queue_not_found",
    "message_not_found",
    "webhook_not_found",
    "method_not_allowed",
    "request_timeout",
    "stale_receipt",
    "conflict",
    "no_push_destination",
    "too_large",
    "unsupported_media_type",
    "unknown_host",
    "invalid_field",
    "schema_violation",
    "internal",
    "unavailable",
    "overloaded",
    "queue_full",
    "storage_failed",
    "disk_full",
];

/// An error answer: status, stable code, human message, optional details.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine code.
    pub code: &'static str,
    /// What to fix.
    pub message: String,
    /// Per-item results for partly refused batches.
    pub details: Option<serde_json::Value>,
    /// Seconds for a `Retry-After` header.
    pub retry_after_s: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after_s: None,
        }
    }

    /// Any status with a code of its own.
    pub fn with_status(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self::new(status, code, message)
    }

    /// 422: bodies fail the queue's JSON Schema.
    pub fn schema_violation(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "schema_violation",
            message,
        )
    }

    /// 400: the body is not JSON of the expected shape.
    pub fn malformed_json(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed_json", message)
    }

    /// 400: a receipt that is not a receipt.
    pub fn malformed_receipt(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed_receipt", message)
    }

    /// 404: no such queue.
    pub fn queue_not_found(queue: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "queue_not_found",
            format!("queue {queue:?} does not exist"),
        )
    }

    /// 404: no such message.
    pub fn message_not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "message_not_found", message)
    }

    /// 404 with a code of its own (e.g. `webhook_not_found`).
    pub fn not_found_code(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    /// 401: a webhook's signature is missing, wrong or stale; `code` says which.
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, code, message)
    }

    /// 404: no such route.
    pub fn route_not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such route; see GET /v1/openapi.json",
        )
    }

    /// 405.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method",
        )
    }

    /// 409: stale receipt.
    pub fn stale_receipt(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "stale_receipt", message)
    }

    /// 413.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 422: a field is out of range or of the wrong form; the message names it.
    pub fn invalid_field(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_field", message)
    }

    /// 503.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    /// Attaches per-item details.
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_owned(),
                message: self.message,
                details: self.details,
            },
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

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::QueueNotFound(queue) => Self::queue_not_found(&queue),
            StoreError::Conflict(message) => Self::new(StatusCode::CONFLICT, "conflict", message),
            StoreError::Lease(error) => error.into(),
            StoreError::QueueFull {
                depth,
                max_depth,
                refused,
                retry_after_s,
                ..
            } => {
                let message = error.to_string();
                let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, "queue_full", message)
                    .with_details(serde_json::json!({
                        "accepted": 0,
                        "refused": refused,
                        "depth": depth,
                        "max_depth": max_depth,
                    }));
                error.retry_after_s = Some(retry_after_s);
                error
            }
            StoreError::DiskFull(_) => {
                let mut api = Self::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "disk_full",
                    error.to_string(),
                );
                api.retry_after_s = Some(DISK_FULL_RETRY_AFTER_S);
                api
            }
            StoreError::Overloaded { retry_after_s, .. } => {
                let mut api = Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "overloaded",
                    error.to_string(),
                );
                api.retry_after_s = Some(retry_after_s);
                api
            }
            StoreError::WritesStopped(_) => {
                let message = error.to_string();
                tracing::error!(%message, "store refused a write");
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "storage_failed", message)
            }
            StoreError::Unavailable(message) => {
                tracing::warn!(%message, "store unavailable");
                Self::unavailable(message)
            }
            StoreError::Other(source) => {
                tracing::error!(error = %source, "internal store error");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error; see the server log",
                )
            }
        }
    }
}

impl From<LeaseError> for ApiError {
    fn from(error: LeaseError) -> Self {
        match error {
            LeaseError::Stale | LeaseError::NotInQueue => Self::stale_receipt(error.to_string()),
            LeaseError::NoDeadLetterQueue => {
                Self::invalid_field("permanent: the queue has no dead-letter queue")
            }
        }
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
        Self::new(
            StatusCode::BAD_REQUEST,
            "malformed_path",
            rejection.body_text(),
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "malformed_query",
            rejection.body_text(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes written in the source where error answers are made: the string after a
    /// `StatusCode::X,` (`ApiError::new`, `with_status`), `not_found_code("..."` and
    /// `code: "...".into()`, and the webhook signature codes of `VerifyError::code`.
    fn codes_in_source() -> std::collections::BTreeSet<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("../sluice-webhooks/src/verify.rs")];
        let mut dirs = vec![root.join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
        let mut codes = std::collections::BTreeSet::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            // Test modules build answers to compare with, not answers the server sends.
            let text = text.split("#[cfg(test)]").next().unwrap();
            let literal_after = |rest: &str| -> Option<String> {
                let rest = rest.trim_start().strip_prefix('"')?;
                let code = &rest[..rest.find('"')?];
                (!code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
                    .then(|| code.to_owned())
            };
            for (i, _) in text.match_indices("StatusCode::") {
                let rest = text[i + "StatusCode::".len()..]
                    .trim_start_matches(|c: char| c.is_ascii_uppercase() || c == '_');
                if let Some(rest) = rest.trim_start().strip_prefix(',') {
                    codes.extend(literal_after(rest));
                }
            }
            for marker in ["not_found_code(", "code: "] {
                for (i, _) in text.match_indices(marker) {
                    codes.extend(literal_after(&text[i + marker.len()..]));
                }
            }
            if let Some(body) = text.split("pub fn code(&self)").nth(1) {
                let body = &body[..body.find("\n    }").unwrap_or(body.len())];
                for (i, _) in body.match_indices("=> ") {
                    codes.extend(literal_after(&body[i + 3..]));
                }
            }
        }
        codes
    }

    /// Every code made anywhere in the source is in `ERROR_CODES`, and the scan is not blind.
    #[test]
    fn every_code_the_source_makes_is_listed() {
        let found = codes_in_source();
        for known in [
            "queue_full",
            "unauthorized",
            "cross_site_request",
            "signature_mismatch",
        ] {
            assert!(found.contains(known), "the scan missed {known}: {found:?}");
        }
        let unlisted: Vec<&String> = found
            .iter()
            .filter(|code| !ERROR_CODES.contains(&code.as_str()))
            .collect();
        assert!(
            unlisted.is_empty(),
            "codes missing from ERROR_CODES: {unlisted:?}"
        );
    }

    /// docs/http-api.md's error table has a row for every code, with its status.
    #[test]
    fn every_code_is_in_the_error_table() {
        let doc = include_str!("../../../docs/http-api.md");
        let table = doc.split("## Errors").nth(1).expect("an Errors section");
        let table = &table[..table.find("\n## ").unwrap_or(table.len())];
        let missing: Vec<&&str> = ERROR_CODES
            .iter()
            .filter(|code| {
                !table
                    .lines()
                    .any(|line| line.starts_with("| ") && line.contains(&format!("`{code}`")))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "docs/http-api.md's error table lacks {missing:?}"
        );
    }

    /// A full disk and a failed sync are told apart: one is temporary (507, retry later), the
    /// other needs a restart.
    #[test]
    fn a_full_disk_and_stopped_writes_get_their_own_codes() {
        let full = ApiError::from(StoreError::DiskFull("no space left".into()));
        assert_eq!(
            (full.status.as_u16(), full.code, full.retry_after_s),
            (507, "disk_full", Some(DISK_FULL_RETRY_AFTER_S))
        );
        let stopped = ApiError::from(StoreError::WritesStopped("fdatasync failed".into()));
        assert_eq!(
            (stopped.status.as_u16(), stopped.code),
            (503, "storage_failed")
        );
        assert!(stopped.message.contains("fdatasync failed"));
    }
}
