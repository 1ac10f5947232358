//! [`OpsError`]: the one error every operation returns, whatever protocol asked.
//!
//! Its code is the closed [`ErrorCode`] the HTTP API already sends, so a renderer never invents
//! a code: the native API turns it into a status and a body, another protocol maps the same
//! codes onto its own (an SQS error name, a gRPC status).

use sluice_core::store::LeaseError;
use sluice_core::store::StoreError;
use sluice_wire::ErrorCode;

/// `Retry-After` of a write refused because the disk is full: the store looks for free space
/// every second.
pub const DISK_FULL_RETRY_AFTER_S: u64 = 5;
/// What `Retry-After` says when the store cannot serve now (a lost database connection, a
/// store closing): a second, then the client tries again.
pub const UNAVAILABLE_RETRY_AFTER_S: u64 = 1;

/// What a refusal says beyond its code and message, in ops' own terms; each protocol renders
/// it (the HTTP API and gRPC as the JSON `details`, SQS as per-entry failures).
#[derive(Debug, Clone, PartialEq)]
pub enum Details {
    /// A partly stale ack: every receipt's result.
    Acks(crate::Acked),
    /// Every schema violation of a refused batch.
    Violations(Vec<crate::SchemaViolation>),
    /// A full queue: how many messages were refused, how many it holds, and its limit.
    QueueFull {
        /// Messages refused (the whole batch).
        refused: u64,
        /// Messages the queue held.
        depth: u64,
        /// Its `max_depth`.
        max_depth: u64,
    },
}

/// Why an operation was refused or failed.
#[derive(Debug, Clone, PartialEq)]
pub struct OpsError {
    /// What went wrong, from the closed set every protocol renders.
    pub code: ErrorCode,
    /// What to fix, for a person.
    pub message: String,
    /// Per-item results (a partly stale ack), every schema violation, a full queue's depth.
    pub details: Option<Details>,
    /// A wait the caller should keep before trying again (full disk, full queue, busy store).
    pub retry_after_s: Option<u64>,
}

impl std::fmt::Display for OpsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for OpsError {}

impl OpsError {
    /// An error with `code` and nothing else.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
            retry_after_s: None,
        }
    }

    /// A field out of range or of the wrong form; the message names it.
    pub fn invalid_field(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidField, message)
    }

    /// A body, batch or list over its limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::TooLarge, message)
    }

    /// A receipt that is not a receipt at all.
    pub fn malformed_receipt(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::MalformedReceipt, message)
    }

    /// A receipt that is no longer the message's lease.
    pub fn stale_receipt(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::StaleReceipt, message)
    }

    /// No such message.
    pub fn message_not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::MessageNotFound, message)
    }

    /// The server cannot serve now.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unavailable, message)
    }

    /// Attaches per-item details.
    pub fn with_details(mut self, details: Details) -> Self {
        self.details = Some(details);
        self
    }

    fn retry_after(mut self, seconds: u64) -> Self {
        self.retry_after_s = Some(seconds);
        self
    }
}

impl From<StoreError> for OpsError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::QueueNotFound(queue) => Self::new(
                ErrorCode::QueueNotFound,
                format!("queue {queue:?} does not exist"),
            ),
            StoreError::Conflict(message) => Self::new(ErrorCode::Conflict, message),
            StoreError::Lease(error) => error.into(),
            StoreError::QueueFull {
                depth,
                max_depth,
                refused,
                retry_after_s,
                ..
            } => Self::new(ErrorCode::QueueFull, error.to_string())
                .with_details(Details::QueueFull {
                    refused,
                    depth,
                    max_depth,
                })
                .retry_after(retry_after_s),
            StoreError::DiskFull(_) => Self::new(ErrorCode::DiskFull, error.to_string())
                .retry_after(DISK_FULL_RETRY_AFTER_S),
            StoreError::Overloaded { retry_after_s, .. } => {
                Self::new(ErrorCode::Overloaded, error.to_string()).retry_after(retry_after_s)
            }
            StoreError::WritesStopped(_) => {
                let message = error.to_string();
                tracing::error!(%message, "store refused a write");
                Self::new(ErrorCode::StorageFailed, message)
            }
            StoreError::Unavailable(message) => {
                tracing::warn!(%message, "store unavailable");
                // Temporary by meaning (a lost connection, a store shutting down): clients
                // and load balancers retry after a second rather than give up.
                Self::unavailable(message).retry_after(UNAVAILABLE_RETRY_AFTER_S)
            }
            StoreError::Other(source) => {
                tracing::error!(error = %source, "internal store error");
                Self::new(ErrorCode::Internal, "internal error; see the server log")
            }
        }
    }
}

impl From<LeaseError> for OpsError {
    fn from(error: LeaseError) -> Self {
        match error {
            LeaseError::Stale | LeaseError::NotInQueue => Self::stale_receipt(error.to_string()),
            LeaseError::NoDeadLetterQueue => {
                Self::invalid_field("permanent: the queue has no dead-letter queue")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk and a failed sync are told apart: one is temporary (retry later), the other
    /// needs a restart.
    #[test]
    fn a_full_disk_and_stopped_writes_get_their_own_codes() {
        let full = OpsError::from(StoreError::DiskFull("no space left".into()));
        assert_eq!(
            (full.code, full.retry_after_s),
            (ErrorCode::DiskFull, Some(DISK_FULL_RETRY_AFTER_S))
        );
        let stopped = OpsError::from(StoreError::WritesStopped("fdatasync failed".into()));
        assert_eq!(stopped.code, ErrorCode::StorageFailed);
        assert!(stopped.message.contains("fdatasync failed"));
    }

    /// A store that cannot serve now says when to come back.
    #[test]
    fn an_unavailable_store_says_retry_after() {
        let unavailable = OpsError::from(StoreError::Unavailable("connection lost".into()));
        assert_eq!(
            (unavailable.code, unavailable.retry_after_s),
            (ErrorCode::Unavailable, Some(UNAVAILABLE_RETRY_AFTER_S))
        );
    }
}
