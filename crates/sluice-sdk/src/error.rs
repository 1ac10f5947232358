//! Errors by meaning, whatever the backend: the server's JSON errors, its gRPC refusals (by the
//! sluice code in their `sluice-error-code` metadata) and the embedded store's errors map onto
//! the same variants.

use sluice_client::{Code, ErrorCode};

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The queue does not exist.
    #[error("queue {0:?} does not exist")]
    QueueNotFound(String),
    /// The queue is at its `max_depth`; nothing was stored. Retry after `retry_after`.
    #[error("queue is full; retry in {retry_after:?}")]
    QueueFull {
        /// When a retry may find room.
        retry_after: std::time::Duration,
    },
    /// The lease is gone (it ran out and the message went out again, or it was settled).
    #[error("the lease is no longer held: {0}")]
    StaleLease(String),
    /// The request was refused as invalid (a field, a schema violation, a size limit).
    #[error("{code}: {message}")]
    Invalid {
        /// The server's stable code (`invalid_field`, `schema_violation`, `too_large`, ...).
        code: Code,
        /// What is wrong.
        message: String,
    },
    /// A message body does not encode to JSON, or does not decode into the event type.
    #[error("cannot (de)serialize the event: {0}")]
    Serde(#[from] serde_json::Error),
    /// The backend cannot serve now (server unreachable, store closed, disk full, too many new
    /// messages waiting to be stored).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The backend cannot do this (see [`crate::Capabilities`]): an SQS queue cannot be
    /// paused, a RabbitMQ lease cannot be extended, and so on. Nothing was done.
    #[error("unsupported by this backend: {0}")]
    Unsupported(String),
    /// Anything else the server said, with its code.
    #[error("{code}: {message} (HTTP {status})")]
    Other {
        /// HTTP status (over gRPC: the HTTP status of the sluice code, as the HTTP API would
        /// answer; 0 for the embedded backend).
        status: u16,
        /// Stable code (possibly one this build does not know, from a newer server).
        code: Code,
        /// Message.
        message: String,
    },
}

impl From<sluice_client::Error> for Error {
    fn from(error: sluice_client::Error) -> Self {
        match error {
            sluice_client::Error::Api {
                status,
                code,
                message,
                retry_after,
                ..
            } => match (status, code.known()) {
                (_, Some(ErrorCode::QueueNotFound)) => Error::QueueNotFound(message),
                (_, Some(ErrorCode::QueueFull)) => Error::QueueFull {
                    retry_after: std::time::Duration::from_secs(retry_after.unwrap_or(1)),
                },
                (_, Some(ErrorCode::StaleReceipt)) => Error::StaleLease(message),
                (400 | 413 | 422, _) => Error::Invalid { code, message },
                (503, _) => Error::Unavailable(message),
                _ => Error::Other {
                    status,
                    code,
                    message,
                },
            },
            other => Error::Unavailable(other.to_string()),
        }
    }
}

#[cfg(feature = "embedded")]
impl From<sluice_ops::OpsError> for Error {
    fn from(error: sluice_ops::OpsError) -> Self {
        let status = error.code.status();
        match error.code {
            ErrorCode::QueueNotFound => Error::QueueNotFound(error.message),
            ErrorCode::QueueFull => Error::QueueFull {
                retry_after: std::time::Duration::from_secs(error.retry_after_s.unwrap_or(1)),
            },
            ErrorCode::StaleReceipt => Error::StaleLease(error.message),
            code if matches!(status, 400 | 413 | 422) => Error::Invalid {
                code: code.into(),
                message: error.message,
            },
            _ if status == 503 => Error::Unavailable(error.message),
            code => Error::Other {
                status,
                code: code.into(),
                message: error.message,
            },
        }
    }
}

#[cfg(feature = "embedded")]
impl From<sluice_core::StoreError> for Error {
    fn from(error: sluice_core::StoreError) -> Self {
        use sluice_core::StoreError;
        match error {
            StoreError::QueueNotFound(queue) => Error::QueueNotFound(queue),
            StoreError::QueueFull { retry_after_s, .. } => Error::QueueFull {
                retry_after: std::time::Duration::from_secs(retry_after_s),
            },
            StoreError::Lease(sluice_core::store::LeaseError::NoDeadLetterQueue) => {
                Error::Invalid {
                    code: ErrorCode::InvalidField.into(),
                    message: "permanent: the queue has no dead-letter queue".into(),
                }
            }
            StoreError::Lease(lease) => Error::StaleLease(lease.to_string()),
            StoreError::Conflict(message) => Error::Other {
                status: 409,
                code: ErrorCode::Conflict.into(),
                message,
            },
            StoreError::Unavailable(message) => Error::Unavailable(message),
            error @ (StoreError::DiskFull(_)
            | StoreError::WritesStopped(_)
            | StoreError::Overloaded { .. }) => Error::Unavailable(error.to_string()),
            StoreError::Other(source) => Error::Unavailable(source.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_map_by_code() {
        let api = |status, code: &str, retry_after| sluice_client::Error::Api {
            status,
            code: Code::parse(code),
            message: "m".into(),
            details: None,
            retry_after,
        };
        assert!(matches!(
            Error::from(api(404, "queue_not_found", None)),
            Error::QueueNotFound(_)
        ));
        assert!(matches!(
            Error::from(api(503, "queue_full", Some(7))),
            Error::QueueFull { retry_after } if retry_after.as_secs() == 7
        ));
        assert!(matches!(
            Error::from(api(409, "stale_receipt", None)),
            Error::StaleLease(_)
        ));
        assert!(matches!(
            Error::from(api(422, "schema_violation", None)),
            Error::Invalid { code, .. } if code == ErrorCode::SchemaViolation
        ));
        assert!(matches!(
            Error::from(api(503, "unavailable", None)),
            Error::Unavailable(_)
        ));
        // A code from a newer server still sorts by its status, and keeps its text.
        assert!(matches!(
            Error::from(api(422, "too_deep", None)),
            Error::Invalid { code: Code::Unknown(text), .. } if text == "too_deep"
        ));
        assert!(matches!(
            Error::from(api(409, "already_done", None)),
            Error::Other {
                status: 409,
                code: Code::Unknown(_),
                ..
            }
        ));
    }
}
