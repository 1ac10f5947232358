//! The SQS errors, rendered in either protocol (docs/design/sqs-compat.md §2).
//!
//! Each kind carries two names and both are load-bearing: the Smithy shape name in JSON's
//! `__type` (botocore picks the modeled exception from it) and the legacy query code in the
//! `x-amzn-query-error` header and the XML `<Code>` (the Rust SDK matches on it only).

use http::StatusCode;

use crate::xml;

/// Who is at fault, as the query protocol's `<Type>` and the header's second part say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Sender,
    Receiver,
}

impl Fault {
    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Sender => "Sender",
            Fault::Receiver => "Receiver",
        }
    }
}

/// Every error the SQS API answers with (the table of §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    QueueDoesNotExist,
    QueueNameExists,
    QueueDeletedRecently,
    InvalidParameterValue,
    MissingParameter,
    InvalidAttributeName,
    InvalidAttributeValue,
    ReceiptHandleIsInvalid,
    MessageNotInflight,
    TooManyEntriesInBatchRequest,
    EmptyBatchRequest,
    BatchEntryIdsNotDistinct,
    InvalidBatchEntryId,
    BatchRequestTooLong,
    PurgeQueueInProgress,
    InvalidMessageContents,
    UnsupportedOperation,
    OverLimit,
    ResourceNotFound,
    InvalidAction,
    MissingAction,
    RequestThrottled,
    InvalidClientTokenId,
    SignatureDoesNotMatch,
    MissingAuthenticationToken,
    IncompleteSignature,
    RequestExpired,
    AccessDenied,
    InternalFailure,
    /// A query request to a queue URL path that names no action: AWS answers 404 with the
    /// bare body `<UnknownOperationException/>` (§1.1, rule 3).
    UnknownOperation,
}

impl ErrorKind {
    /// The shape name after `#` in JSON's `__type`.
    pub fn shape(self) -> &'static str {
        use ErrorKind::*;
        match self {
            QueueDoesNotExist => "QueueDoesNotExist",
            QueueNameExists => "QueueNameExists",
            QueueDeletedRecently => "QueueDeletedRecently",
            InvalidParameterValue => "InvalidParameterValueException",
            MissingParameter => "MissingRequiredParameterException",
            InvalidAttributeName => "InvalidAttributeName",
            InvalidAttributeValue => "InvalidAttributeValue",
            ReceiptHandleIsInvalid => "ReceiptHandleIsInvalid",
            MessageNotInflight => "MessageNotInflight",
            TooManyEntriesInBatchRequest => "TooManyEntriesInBatchRequest",
            EmptyBatchRequest => "EmptyBatchRequest",
            BatchEntryIdsNotDistinct => "BatchEntryIdsNotDistinct",
            InvalidBatchEntryId => "InvalidBatchEntryId",
            BatchRequestTooLong => "BatchRequestTooLong",
            PurgeQueueInProgress => "PurgeQueueInProgress",
            InvalidMessageContents => "InvalidMessageContents",
            UnsupportedOperation => "UnsupportedOperation",
            OverLimit => "OverLimit",
            ResourceNotFound => "ResourceNotFoundException",
            InvalidAction => "InvalidAction",
            MissingAction => "MissingAction",
            RequestThrottled => "RequestThrottled",
            InvalidClientTokenId => "InvalidClientTokenId",
            SignatureDoesNotMatch => "SignatureDoesNotMatch",
            MissingAuthenticationToken => "MissingAuthenticationToken",
            IncompleteSignature => "IncompleteSignature",
            RequestExpired => "RequestExpired",
            AccessDenied => "AccessDeniedException",
            InternalFailure => "InternalFailure",
            UnknownOperation => "UnknownOperationException",
        }
    }

    /// The full JSON `__type`. Every shape is in `com.amazonaws.sqs` but the missing-parameter
    /// one, which AWS reports from its service framework's namespace (§2.2); SDKs read only
    /// the part after `#`, so the namespace never decides anything.
    pub fn json_type(self) -> String {
        let namespace = match self {
            ErrorKind::MissingParameter => "com.amazon.coral.service",
            _ => "com.amazonaws.sqs",
        };
        format!("{namespace}#{}", self.shape())
    }

    /// The legacy query code: the header's first part and the XML `<Code>`.
    pub fn code(self) -> &'static str {
        use ErrorKind::*;
        match self {
            QueueDoesNotExist => "AWS.SimpleQueueService.NonExistentQueue",
            QueueNameExists => "QueueAlreadyExists",
            QueueDeletedRecently => "AWS.SimpleQueueService.QueueDeletedRecently",
            InvalidParameterValue => "InvalidParameterValue",
            MissingParameter => "MissingParameter",
            MessageNotInflight => "AWS.SimpleQueueService.MessageNotInflight",
            TooManyEntriesInBatchRequest => "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
            EmptyBatchRequest => "AWS.SimpleQueueService.EmptyBatchRequest",
            BatchEntryIdsNotDistinct => "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
            InvalidBatchEntryId => "AWS.SimpleQueueService.InvalidBatchEntryId",
            BatchRequestTooLong => "AWS.SimpleQueueService.BatchRequestTooLong",
            PurgeQueueInProgress => "AWS.SimpleQueueService.PurgeQueueInProgress",
            UnsupportedOperation => "AWS.SimpleQueueService.UnsupportedOperation",
            AccessDenied => "AccessDenied",
            // The rest use their shape name as their code.
            other => other.shape(),
        }
    }

    pub fn status(self) -> StatusCode {
        use ErrorKind::*;
        match self {
            PurgeQueueInProgress
            | OverLimit
            | InvalidClientTokenId
            | SignatureDoesNotMatch
            | MissingAuthenticationToken
            | AccessDenied => StatusCode::FORBIDDEN,
            ResourceNotFound | UnknownOperation => StatusCode::NOT_FOUND,
            InternalFailure => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_REQUEST,
        }
    }

    pub fn fault(self) -> Fault {
        if self.status().is_server_error() {
            Fault::Receiver
        } else {
            Fault::Sender
        }
    }
}

/// An SQS error: its kind and the human message AWS would give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", kind.code())]
pub struct SqsError {
    pub kind: ErrorKind,
    pub message: String,
}

/// The JSON message of a missing queue; the query protocol words it differently (§2.1).
const NO_QUEUE_JSON: &str = "The specified queue does not exist.";
const NO_QUEUE_QUERY: &str = "The specified queue does not exist for this wsdl version.";

impl SqsError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        SqsError {
            kind,
            message: message.into(),
        }
    }

    pub fn queue_does_not_exist() -> Self {
        SqsError::new(ErrorKind::QueueDoesNotExist, NO_QUEUE_JSON)
    }

    /// A required member is absent, with AWS's wording.
    pub fn missing_parameter(name: &str) -> Self {
        SqsError::new(
            ErrorKind::MissingParameter,
            format!("The request must contain the parameter {name}."),
        )
    }

    /// An operation name that is not SQS's, with AWS's wording.
    pub fn invalid_action(name: &str) -> Self {
        SqsError::new(
            ErrorKind::InvalidAction,
            format!("The action {name} is not valid for this endpoint."),
        )
    }

    pub fn missing_action() -> Self {
        SqsError::new(
            ErrorKind::MissingAction,
            "Action is missing in the request parameters.",
        )
    }

    /// The `x-amzn-query-error` header value of the JSON rendering: `<code>;<fault>`.
    pub fn query_error_header(&self) -> String {
        format!("{};{}", self.kind.code(), self.kind.fault().as_str())
    }

    /// The JSON rendering's body.
    pub fn json_body(&self) -> String {
        serde_json::json!({ "__type": self.kind.json_type(), "message": self.message }).to_string()
    }

    /// The query rendering's body, an `ErrorResponse` naming the request.
    pub fn xml_body(&self, request_id: &str) -> String {
        if self.kind == ErrorKind::UnknownOperation {
            return "<UnknownOperationException/>".to_owned();
        }
        let message = match (self.kind, self.message.as_str()) {
            (ErrorKind::QueueDoesNotExist, NO_QUEUE_JSON) => NO_QUEUE_QUERY,
            (_, message) => message,
        };
        let mut out = format!(
            "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"{}\"><Error>",
            xml::NAMESPACE
        );
        xml::element(&mut out, "Type", self.kind.fault().as_str());
        xml::element(&mut out, "Code", self.kind.code());
        xml::element(&mut out, "Message", message);
        out.push_str("<Detail/></Error>");
        xml::element(&mut out, "RequestId", request_id);
        out.push_str("</ErrorResponse>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_does_not_exist_in_both_renderings() {
        let error = SqsError::queue_does_not_exist();
        assert_eq!(error.kind.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            error.query_error_header(),
            "AWS.SimpleQueueService.NonExistentQueue;Sender"
        );
        assert_eq!(
            error.json_body(),
            r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#
        );
        assert_eq!(
            error.xml_body("req-1"),
            "<?xml version=\"1.0\"?><ErrorResponse xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\">\
             <Error><Type>Sender</Type><Code>AWS.SimpleQueueService.NonExistentQueue</Code>\
             <Message>The specified queue does not exist for this wsdl version.</Message><Detail/></Error>\
             <RequestId>req-1</RequestId></ErrorResponse>"
        );
    }

    #[test]
    fn every_kind_names_its_type_header_and_status() {
        use ErrorKind::*;
        // (kind, __type, header, status): the table of docs/design/sqs-compat.md §2.2.
        let table = [
            (
                QueueDoesNotExist,
                "com.amazonaws.sqs#QueueDoesNotExist",
                "AWS.SimpleQueueService.NonExistentQueue;Sender",
                400,
            ),
            (
                QueueNameExists,
                "com.amazonaws.sqs#QueueNameExists",
                "QueueAlreadyExists;Sender",
                400,
            ),
            (
                QueueDeletedRecently,
                "com.amazonaws.sqs#QueueDeletedRecently",
                "AWS.SimpleQueueService.QueueDeletedRecently;Sender",
                400,
            ),
            (
                InvalidParameterValue,
                "com.amazonaws.sqs#InvalidParameterValueException",
                "InvalidParameterValue;Sender",
                400,
            ),
            (
                MissingParameter,
                "com.amazon.coral.service#MissingRequiredParameterException",
                "MissingParameter;Sender",
                400,
            ),
            (
                InvalidAttributeName,
                "com.amazonaws.sqs#InvalidAttributeName",
                "InvalidAttributeName;Sender",
                400,
            ),
            (
                InvalidAttributeValue,
                "com.amazonaws.sqs#InvalidAttributeValue",
                "InvalidAttributeValue;Sender",
                400,
            ),
            (
                ReceiptHandleIsInvalid,
                "com.amazonaws.sqs#ReceiptHandleIsInvalid",
                "ReceiptHandleIsInvalid;Sender",
                400,
            ),
            (
                MessageNotInflight,
                "com.amazonaws.sqs#MessageNotInflight",
                "AWS.SimpleQueueService.MessageNotInflight;Sender",
                400,
            ),
            (
                TooManyEntriesInBatchRequest,
                "com.amazonaws.sqs#TooManyEntriesInBatchRequest",
                "AWS.SimpleQueueService.TooManyEntriesInBatchRequest;Sender",
                400,
            ),
            (
                EmptyBatchRequest,
                "com.amazonaws.sqs#EmptyBatchRequest",
                "AWS.SimpleQueueService.EmptyBatchRequest;Sender",
                400,
            ),
            (
                BatchEntryIdsNotDistinct,
                "com.amazonaws.sqs#BatchEntryIdsNotDistinct",
                "AWS.SimpleQueueService.BatchEntryIdsNotDistinct;Sender",
                400,
            ),
            (
                InvalidBatchEntryId,
                "com.amazonaws.sqs#InvalidBatchEntryId",
                "AWS.SimpleQueueService.InvalidBatchEntryId;Sender",
                400,
            ),
            (
                BatchRequestTooLong,
                "com.amazonaws.sqs#BatchRequestTooLong",
                "AWS.SimpleQueueService.BatchRequestTooLong;Sender",
                400,
            ),
            (
                PurgeQueueInProgress,
                "com.amazonaws.sqs#PurgeQueueInProgress",
                "AWS.SimpleQueueService.PurgeQueueInProgress;Sender",
                403,
            ),
            (
                InvalidMessageContents,
                "com.amazonaws.sqs#InvalidMessageContents",
                "InvalidMessageContents;Sender",
                400,
            ),
            (
                UnsupportedOperation,
                "com.amazonaws.sqs#UnsupportedOperation",
                "AWS.SimpleQueueService.UnsupportedOperation;Sender",
                400,
            ),
            (
                OverLimit,
                "com.amazonaws.sqs#OverLimit",
                "OverLimit;Sender",
                403,
            ),
            (
                ResourceNotFound,
                "com.amazonaws.sqs#ResourceNotFoundException",
                "ResourceNotFoundException;Sender",
                404,
            ),
            (
                InvalidAction,
                "com.amazonaws.sqs#InvalidAction",
                "InvalidAction;Sender",
                400,
            ),
            (
                MissingAction,
                "com.amazonaws.sqs#MissingAction",
                "MissingAction;Sender",
                400,
            ),
            (
                RequestThrottled,
                "com.amazonaws.sqs#RequestThrottled",
                "RequestThrottled;Sender",
                400,
            ),
            (
                InvalidClientTokenId,
                "com.amazonaws.sqs#InvalidClientTokenId",
                "InvalidClientTokenId;Sender",
                403,
            ),
            (
                SignatureDoesNotMatch,
                "com.amazonaws.sqs#SignatureDoesNotMatch",
                "SignatureDoesNotMatch;Sender",
                403,
            ),
            (
                MissingAuthenticationToken,
                "com.amazonaws.sqs#MissingAuthenticationToken",
                "MissingAuthenticationToken;Sender",
                403,
            ),
            (
                IncompleteSignature,
                "com.amazonaws.sqs#IncompleteSignature",
                "IncompleteSignature;Sender",
                400,
            ),
            (
                RequestExpired,
                "com.amazonaws.sqs#RequestExpired",
                "RequestExpired;Sender",
                400,
            ),
            (
                AccessDenied,
                "com.amazonaws.sqs#AccessDeniedException",
                "AccessDenied;Sender",
                403,
            ),
            (
                InternalFailure,
                "com.amazonaws.sqs#InternalFailure",
                "InternalFailure;Receiver",
                500,
            ),
            (
                UnknownOperation,
                "com.amazonaws.sqs#UnknownOperationException",
                "UnknownOperationException;Sender",
                404,
            ),
        ];
        for (kind, json_type, header, status) in table {
            let error = SqsError::new(kind, "m");
            assert_eq!(kind.json_type(), json_type, "{kind:?}");
            assert_eq!(error.query_error_header(), header, "{kind:?}");
            assert_eq!(kind.status().as_u16(), status, "{kind:?}");
            let body: serde_json::Value = serde_json::from_str(&error.json_body()).expect("json");
            assert_eq!(body["__type"], json_type);
            assert_eq!(body["message"], "m");
            if kind != UnknownOperation {
                let code = header.split(';').next().unwrap_or_default();
                let fault = header.split(';').nth(1).unwrap_or_default();
                let xml = error.xml_body("r");
                assert!(
                    xml.contains(&format!(
                        "<Type>{fault}</Type><Code>{code}</Code><Message>m</Message>"
                    )),
                    "{xml}"
                );
            }
        }
    }

    #[test]
    fn missing_parameter_and_invalid_action_use_aws_wording() {
        assert_eq!(
            SqsError::missing_parameter("MessageBody").message,
            "The request must contain the parameter MessageBody."
        );
        assert_eq!(
            SqsError::invalid_action("FooBar").message,
            "The action FooBar is not valid for this endpoint."
        );
    }

    #[test]
    fn unknown_operation_is_a_bare_element() {
        let error = SqsError::new(ErrorKind::UnknownOperation, "");
        assert_eq!(error.xml_body("r"), "<UnknownOperationException/>");
        assert_eq!(error.kind.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn messages_are_escaped_in_xml() {
        let error = SqsError::new(ErrorKind::InvalidParameterValue, "a <b> & \"c\"");
        assert!(
            error
                .xml_body("r")
                .contains("<Message>a &lt;b&gt; &amp; &quot;c&quot;</Message>")
        );
    }
}
