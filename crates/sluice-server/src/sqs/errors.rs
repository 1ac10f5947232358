//! The operations layer's refusals in SQS's terms.

use sluice_ops::OpsError;
use sluice_sqs::{ErrorKind, SqsError};
use sluice_wire::ErrorCode;

/// An `OpsError` as the SQS error a client expects: a missing queue is `QueueDoesNotExist`,
/// a refused value `InvalidParameterValue` with sluice's explanation, backpressure
/// `RequestThrottled` (which every SDK retries with backoff), and a storage failure an
/// `InternalFailure` (a 5xx, also retried).
pub fn from_ops(error: OpsError) -> SqsError {
    let kind = match error.code {
        ErrorCode::QueueNotFound => return SqsError::queue_does_not_exist(),
        ErrorCode::InvalidField
        | ErrorCode::SchemaViolation
        | ErrorCode::MalformedJson
        | ErrorCode::MalformedQuery
        | ErrorCode::TooLarge
        | ErrorCode::Conflict
        | ErrorCode::MalformedReceipt
        | ErrorCode::StaleReceipt
        | ErrorCode::MessageNotFound => ErrorKind::InvalidParameterValue,
        ErrorCode::QueueFull | ErrorCode::Overloaded | ErrorCode::RequestTimeout => {
            ErrorKind::RequestThrottled
        }
        ErrorCode::Forbidden | ErrorCode::Unauthorized => ErrorKind::AccessDenied,
        _ => ErrorKind::InternalFailure,
    };
    SqsError::new(kind, error.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_map_to_the_codes_sdks_act_on() {
        let cases = [
            (ErrorCode::QueueNotFound, ErrorKind::QueueDoesNotExist),
            (ErrorCode::InvalidField, ErrorKind::InvalidParameterValue),
            (ErrorCode::QueueFull, ErrorKind::RequestThrottled),
            (ErrorCode::DiskFull, ErrorKind::InternalFailure),
        ];
        for (code, kind) in cases {
            assert_eq!(from_ops(OpsError::new(code, "m")).kind, kind, "{code:?}");
        }
    }
}
