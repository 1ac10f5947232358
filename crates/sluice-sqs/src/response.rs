//! One response struct per SQS operation, rendered as JSON 1.0 or as query XML
//! (docs/design/sqs-compat.md §1.1, §1.3).
//!
//! JSON comes from serde: PascalCase members in the model's order, absent optional members
//! and empty optional lists and maps omitted (SDK users write `resp.get("QueueUrls", [])` for
//! this), required ones (a batch's `Successful` and `Failed`, `queueUrls`) always present. XML is written by
//! hand, because the query protocol flattens lists and maps into repeated elements
//! (`<QueueUrl>`×N, `<Attribute><Name>…</Name><Value>…</Value></Attribute>`×N) inside
//! `<XResponse xmlns=…><XResult>…</XResult><ResponseMetadata>…</XResponse>`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::action::Action;
use crate::request::{MessageAttributeValue, MessageAttributes};
use crate::xml::{self, element};

/// The `Content-Type` of a JSON answer, success or error.
pub const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.0";
/// The `Content-Type` of a query answer, success or error.
pub const XML_CONTENT_TYPE: &str = "text/xml";

/// CreateQueue's and GetQueueUrl's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct QueueUrlResult {
    pub queue_url: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListQueuesResult {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queue_urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// GetQueueAttributes's answer; no attributes asked, none answered (no `Attributes` key).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueAttributesResult {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageResult {
    #[serde(rename = "MD5OfMessageBody")]
    pub md5_of_message_body: String,
    /// Only when the message had attributes (§3.7).
    #[serde(
        rename = "MD5OfMessageAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub md5_of_message_attributes: Option<String>,
    #[serde(
        rename = "MD5OfMessageSystemAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub md5_of_message_system_attributes: Option<String>,
    pub message_id: String,
    /// FIFO queues only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageBatchResultEntry {
    pub id: String,
    pub message_id: String,
    #[serde(rename = "MD5OfMessageBody")]
    pub md5_of_message_body: String,
    #[serde(
        rename = "MD5OfMessageAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub md5_of_message_attributes: Option<String>,
    #[serde(
        rename = "MD5OfMessageSystemAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub md5_of_message_system_attributes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence_number: Option<String>,
}

/// A batch entry that failed while the call itself succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchResultErrorEntry {
    pub id: String,
    pub sender_fault: bool,
    /// The legacy code the single call would have answered with.
    pub code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageBatchResult {
    pub successful: Vec<SendMessageBatchResultEntry>,
    pub failed: Vec<BatchResultErrorEntry>,
}

/// A successful entry of DeleteMessageBatch or ChangeMessageVisibilityBatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchResultEntry {
    pub id: String,
}

/// DeleteMessageBatch's and ChangeMessageVisibilityBatch's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct BatchResult {
    pub successful: Vec<BatchResultEntry>,
    pub failed: Vec<BatchResultErrorEntry>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Message {
    pub message_id: String,
    pub receipt_handle: String,
    #[serde(rename = "MD5OfBody")]
    pub md5_of_body: String,
    pub body: String,
    /// The system attributes asked for (epoch-ms timestamps and counts as strings).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
    /// Over the returned attributes only (§3.7).
    #[serde(
        rename = "MD5OfMessageAttributes",
        skip_serializing_if = "Option::is_none"
    )]
    pub md5_of_message_attributes: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub message_attributes: MessageAttributes,
}

/// ReceiveMessage's answer; no messages, no `Messages` key (§3.9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReceiveMessageResult {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListDeadLetterSourceQueuesResult {
    /// Lower-case and required in JSON (§3.6).
    #[serde(rename = "queueUrls")]
    pub queue_urls: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_token: Option<String>,
}

/// ListQueueTags's answer; no tags, no `Tags` key (§3.12).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListQueueTagsResult {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct StartMessageMoveTaskResult {
    pub task_handle: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListMessageMoveTasksResultEntry {
    /// Only while the task runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_handle: Option<String>,
    pub status: String,
    pub source_arn: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_number_of_messages_per_second: Option<i64>,
    pub approximate_number_of_messages_moved: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approximate_number_of_messages_to_move: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Epoch milliseconds, a JSON number.
    pub started_timestamp: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListMessageMoveTasksResult {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub results: Vec<ListMessageMoveTasksResultEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct CancelMessageMoveTaskResult {
    pub approximate_number_of_messages_moved: i64,
}

/// A successful answer to one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    CreateQueue(QueueUrlResult),
    GetQueueUrl(QueueUrlResult),
    ListQueues(ListQueuesResult),
    GetQueueAttributes(GetQueueAttributesResult),
    SendMessage(SendMessageResult),
    SendMessageBatch(SendMessageBatchResult),
    ReceiveMessage(ReceiveMessageResult),
    DeleteMessageBatch(BatchResult),
    ChangeMessageVisibilityBatch(BatchResult),
    ListDeadLetterSourceQueues(ListDeadLetterSourceQueuesResult),
    ListQueueTags(ListQueueTagsResult),
    StartMessageMoveTask(StartMessageMoveTaskResult),
    ListMessageMoveTasks(ListMessageMoveTasksResult),
    CancelMessageMoveTask(CancelMessageMoveTaskResult),
    /// The operations that answer nothing: DeleteQueue, PurgeQueue, SetQueueAttributes,
    /// DeleteMessage, ChangeMessageVisibility, TagQueue, UntagQueue, AddPermission,
    /// RemovePermission.
    Empty(Action),
}

impl Response {
    pub fn action(&self) -> Action {
        match self {
            Response::CreateQueue(_) => Action::CreateQueue,
            Response::GetQueueUrl(_) => Action::GetQueueUrl,
            Response::ListQueues(_) => Action::ListQueues,
            Response::GetQueueAttributes(_) => Action::GetQueueAttributes,
            Response::SendMessage(_) => Action::SendMessage,
            Response::SendMessageBatch(_) => Action::SendMessageBatch,
            Response::ReceiveMessage(_) => Action::ReceiveMessage,
            Response::DeleteMessageBatch(_) => Action::DeleteMessageBatch,
            Response::ChangeMessageVisibilityBatch(_) => Action::ChangeMessageVisibilityBatch,
            Response::ListDeadLetterSourceQueues(_) => Action::ListDeadLetterSourceQueues,
            Response::ListQueueTags(_) => Action::ListQueueTags,
            Response::StartMessageMoveTask(_) => Action::StartMessageMoveTask,
            Response::ListMessageMoveTasks(_) => Action::ListMessageMoveTasks,
            Response::CancelMessageMoveTask(_) => Action::CancelMessageMoveTask,
            Response::Empty(action) => *action,
        }
    }

    /// The JSON 1.0 body; `{}` for an operation without output, which every SDK parses.
    pub fn json_body(&self) -> String {
        match self {
            Response::CreateQueue(r) | Response::GetQueueUrl(r) => json(r),
            Response::ListQueues(r) => json(r),
            Response::GetQueueAttributes(r) => json(r),
            Response::SendMessage(r) => json(r),
            Response::SendMessageBatch(r) => json(r),
            Response::ReceiveMessage(r) => json(r),
            Response::DeleteMessageBatch(r) | Response::ChangeMessageVisibilityBatch(r) => json(r),
            Response::ListDeadLetterSourceQueues(r) => json(r),
            Response::ListQueueTags(r) => json(r),
            Response::StartMessageMoveTask(r) => json(r),
            Response::ListMessageMoveTasks(r) => json(r),
            Response::CancelMessageMoveTask(r) => json(r),
            Response::Empty(_) => "{}".to_owned(),
        }
    }

    /// The query protocol's XML body: the envelope, the result (none for an operation
    /// without output) and the request id.
    pub fn xml_body(&self, request_id: &str) -> String {
        let name = self.action().name();
        let mut out = format!("<{name}Response xmlns=\"{}\">", xml::NAMESPACE);
        if !matches!(self, Response::Empty(_)) {
            let mut result = String::new();
            self.write_result(&mut result);
            if result.is_empty() {
                out.push_str(&format!("<{name}Result/>"));
            } else {
                out.push_str(&format!("<{name}Result>{result}</{name}Result>"));
            }
        }
        out.push_str("<ResponseMetadata>");
        element(&mut out, "RequestId", request_id);
        out.push_str(&format!("</ResponseMetadata></{name}Response>"));
        out
    }

    fn write_result(&self, out: &mut String) {
        match self {
            Response::CreateQueue(r) | Response::GetQueueUrl(r) => {
                element(out, "QueueUrl", &r.queue_url)
            }
            Response::ListQueues(r) => {
                for url in &r.queue_urls {
                    element(out, "QueueUrl", url);
                }
                optional(out, "NextToken", r.next_token.as_deref());
            }
            Response::GetQueueAttributes(r) => pairs(out, "Attribute", "Name", &r.attributes),
            Response::SendMessage(r) => {
                element(out, "MessageId", &r.message_id);
                element(out, "MD5OfMessageBody", &r.md5_of_message_body);
                optional(
                    out,
                    "MD5OfMessageAttributes",
                    r.md5_of_message_attributes.as_deref(),
                );
                optional(
                    out,
                    "MD5OfMessageSystemAttributes",
                    r.md5_of_message_system_attributes.as_deref(),
                );
                optional(out, "SequenceNumber", r.sequence_number.as_deref());
            }
            Response::SendMessageBatch(r) => {
                for entry in &r.successful {
                    out.push_str("<SendMessageBatchResultEntry>");
                    element(out, "Id", &entry.id);
                    element(out, "MessageId", &entry.message_id);
                    element(out, "MD5OfMessageBody", &entry.md5_of_message_body);
                    optional(
                        out,
                        "MD5OfMessageAttributes",
                        entry.md5_of_message_attributes.as_deref(),
                    );
                    optional(
                        out,
                        "MD5OfMessageSystemAttributes",
                        entry.md5_of_message_system_attributes.as_deref(),
                    );
                    optional(out, "SequenceNumber", entry.sequence_number.as_deref());
                    out.push_str("</SendMessageBatchResultEntry>");
                }
                failures(out, &r.failed);
            }
            Response::ReceiveMessage(r) => r
                .messages
                .iter()
                .for_each(|message| message_xml(out, message)),
            Response::DeleteMessageBatch(r) | Response::ChangeMessageVisibilityBatch(r) => {
                let entry_name = format!("{}ResultEntry", self.action().name());
                for entry in &r.successful {
                    out.push_str(&format!("<{entry_name}>"));
                    element(out, "Id", &entry.id);
                    out.push_str(&format!("</{entry_name}>"));
                }
                failures(out, &r.failed);
            }
            Response::ListDeadLetterSourceQueues(r) => {
                for url in &r.queue_urls {
                    element(out, "QueueUrl", url);
                }
                optional(out, "NextToken", r.next_token.as_deref());
            }
            Response::ListQueueTags(r) => pairs(out, "Tag", "Key", &r.tags),
            Response::StartMessageMoveTask(r) => element(out, "TaskHandle", &r.task_handle),
            Response::ListMessageMoveTasks(r) => {
                for task in &r.results {
                    out.push_str("<ListMessageMoveTasksResultEntry>");
                    optional(out, "TaskHandle", task.task_handle.as_deref());
                    element(out, "Status", &task.status);
                    element(out, "SourceArn", &task.source_arn);
                    optional(out, "DestinationArn", task.destination_arn.as_deref());
                    if let Some(rate) = task.max_number_of_messages_per_second {
                        element(out, "MaxNumberOfMessagesPerSecond", &rate.to_string());
                    }
                    element(
                        out,
                        "ApproximateNumberOfMessagesMoved",
                        &task.approximate_number_of_messages_moved.to_string(),
                    );
                    if let Some(to_move) = task.approximate_number_of_messages_to_move {
                        element(
                            out,
                            "ApproximateNumberOfMessagesToMove",
                            &to_move.to_string(),
                        );
                    }
                    optional(out, "FailureReason", task.failure_reason.as_deref());
                    element(out, "StartedTimestamp", &task.started_timestamp.to_string());
                    out.push_str("</ListMessageMoveTasksResultEntry>");
                }
            }
            Response::CancelMessageMoveTask(r) => element(
                out,
                "ApproximateNumberOfMessagesMoved",
                &r.approximate_number_of_messages_moved.to_string(),
            ),
            Response::Empty(_) => {}
        }
    }
}

/// A result in JSON, members in the model's order. These structs hold only strings,
/// numbers, booleans, lists and string-keyed maps, which always serialise.
fn json(result: &impl Serialize) -> String {
    serde_json::to_string(result).unwrap_or_else(|_| "{}".to_owned())
}

fn optional(out: &mut String, name: &str, text: Option<&str>) {
    if let Some(text) = text {
        element(out, name, text);
    }
}

/// A string map flattened: `<Attribute><Name>k</Name><Value>v</Value></Attribute>` or
/// `<Tag><Key>k</Key><Value>v</Value></Tag>`, one element per entry.
fn pairs(out: &mut String, entry: &str, key: &str, map: &BTreeMap<String, String>) {
    for (k, v) in map {
        out.push_str(&format!("<{entry}>"));
        element(out, key, k);
        element(out, "Value", v);
        out.push_str(&format!("</{entry}>"));
    }
}

fn failures(out: &mut String, failed: &[BatchResultErrorEntry]) {
    for entry in failed {
        out.push_str("<BatchResultErrorEntry>");
        element(out, "Id", &entry.id);
        element(
            out,
            "SenderFault",
            if entry.sender_fault { "true" } else { "false" },
        );
        element(out, "Code", &entry.code);
        optional(out, "Message", entry.message.as_deref());
        out.push_str("</BatchResultErrorEntry>");
    }
}

fn message_xml(out: &mut String, message: &Message) {
    out.push_str("<Message>");
    element(out, "MessageId", &message.message_id);
    element(out, "ReceiptHandle", &message.receipt_handle);
    element(out, "MD5OfBody", &message.md5_of_body);
    element(out, "Body", &message.body);
    pairs(out, "Attribute", "Name", &message.attributes);
    optional(
        out,
        "MD5OfMessageAttributes",
        message.md5_of_message_attributes.as_deref(),
    );
    for (name, value) in &message.message_attributes {
        out.push_str("<MessageAttribute>");
        element(out, "Name", name);
        out.push_str("<Value>");
        attribute_value_xml(out, value);
        out.push_str("</Value></MessageAttribute>");
    }
    out.push_str("</Message>");
}

fn attribute_value_xml(out: &mut String, value: &MessageAttributeValue) {
    use base64::Engine as _;
    let base64 = base64::engine::general_purpose::STANDARD;
    optional(out, "StringValue", value.string_value.as_deref());
    if let Some(bytes) = &value.binary_value {
        element(out, "BinaryValue", &base64.encode(&bytes.0));
    }
    for text in &value.string_list_values {
        element(out, "StringListValue", text);
    }
    for bytes in &value.binary_list_values {
        element(out, "BinaryListValue", &base64.encode(&bytes.0));
    }
    element(out, "DataType", &value.data_type);
}

#[cfg(test)]
mod tests;
