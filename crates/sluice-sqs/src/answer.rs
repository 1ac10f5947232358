//! An SQS answer as HTTP parts, in the protocol the request came in: what the server will
//! write once the API is wired in, so no handler repeats which content type, status and
//! header go with which protocol (docs/design/sqs-compat.md §1.1, §2.1).

use http::StatusCode;

use crate::error::SqsError;
use crate::protocol::Wire;
use crate::response::{JSON_CONTENT_TYPE, Response, XML_CONTENT_TYPE};

/// The header every SQS answer carries with the request id, in both protocols, next to
/// sluice's own `x-request-id` (same value).
pub const REQUEST_ID_HEADER: &str = "x-amzn-requestid";
/// The header of a JSON error naming its legacy code and fault (`<code>;Sender`).
pub const QUERY_ERROR_HEADER: &str = "x-amzn-query-error";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: &'static str,
    /// The value of [`QUERY_ERROR_HEADER`], on JSON errors only.
    pub query_error: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn success(wire: Wire, response: &Response, request_id: &str) -> Answer {
        let (content_type, body) = match wire {
            Wire::Json => (JSON_CONTENT_TYPE, response.json_body()),
            Wire::Query => (XML_CONTENT_TYPE, response.xml_body(request_id)),
        };
        Answer {
            status: StatusCode::OK,
            content_type,
            query_error: None,
            body,
        }
    }

    pub fn error(wire: Wire, error: &SqsError, request_id: &str) -> Answer {
        let status = error.kind.status();
        match wire {
            Wire::Json => Answer {
                status,
                content_type: JSON_CONTENT_TYPE,
                query_error: Some(error.query_error_header()),
                body: error.json_body(),
            },
            Wire::Query => Answer {
                status,
                content_type: XML_CONTENT_TYPE,
                query_error: None,
                body: error.xml_body(request_id),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::error::ErrorKind;

    #[test]
    fn errors_carry_the_query_error_header_in_json_only() {
        let error = SqsError::queue_does_not_exist();
        let json = Answer::error(Wire::Json, &error, "r");
        assert_eq!(json.status, StatusCode::BAD_REQUEST);
        assert_eq!(json.content_type, "application/x-amz-json-1.0");
        assert_eq!(
            json.query_error.as_deref(),
            Some("AWS.SimpleQueueService.NonExistentQueue;Sender")
        );
        let xml = Answer::error(Wire::Query, &error, "r");
        assert_eq!((xml.content_type, xml.query_error), ("text/xml", None));
        assert!(
            xml.body
                .starts_with("<?xml version=\"1.0\"?><ErrorResponse")
        );
        let purge = Answer::error(
            Wire::Json,
            &SqsError::new(ErrorKind::PurgeQueueInProgress, "m"),
            "r",
        );
        assert_eq!(purge.status, StatusCode::FORBIDDEN);
    }

    #[test]
    fn successes_are_200_in_the_request_protocol() {
        let response = Response::Empty(Action::PurgeQueue);
        let json = Answer::success(Wire::Json, &response, "r");
        assert_eq!(
            (json.status, json.content_type, json.body.as_str()),
            (StatusCode::OK, "application/x-amz-json-1.0", "{}")
        );
        let xml = Answer::success(Wire::Query, &response, "r");
        assert_eq!(xml.content_type, "text/xml");
        assert!(xml.body.starts_with("<PurgeQueueResponse "));
    }
}
