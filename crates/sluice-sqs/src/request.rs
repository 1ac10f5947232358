//! One request struct per SQS operation, read from either protocol into the same value.
//!
//! JSON 1.0 bodies deserialise directly (members are PascalCase, but for CreateQueue's
//! `tags`). Query parameters are flattened (`Attribute.1.Name`, `SendMessageBatchRequestEntry.2.
//! MessageAttribute.1.Value.DataType`, docs/design/sqs-compat.md §1.2): [`query`] folds them back
//! into the JSON shape first, so both protocols share one deserialiser and one set of rules for
//! what is required. A missing required member is `MissingParameter` with AWS's message.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::action::Action;
use crate::error::{ErrorKind, SqsError};

mod query;

/// A `blob` member: base64 text on the wire in both protocols, bytes here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Blob(pub Vec<u8>);

impl Serialize for Blob {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Blob {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .map(Blob)
            .map_err(|_| serde::de::Error::custom("a binary value is not valid base64"))
    }
}

/// A message attribute's value (`MessageAttributeValue`, also used for system attributes).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MessageAttributeValue {
    pub data_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string_value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_value: Option<Blob>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub string_list_values: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binary_list_values: Vec<Blob>,
}

/// Message attributes by name.
pub type MessageAttributes = BTreeMap<String, MessageAttributeValue>;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CreateQueue {
    pub queue_name: String,
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Lower-case in JSON, unlike every other member (§3).
    #[serde(default, rename = "tags")]
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueUrl {
    pub queue_name: String,
    #[serde(default, rename = "QueueOwnerAWSAccountId")]
    pub queue_owner_aws_account_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListQueues {
    #[serde(default)]
    pub queue_name_prefix: Option<String>,
    #[serde(default)]
    pub next_token: Option<String>,
    #[serde(default)]
    pub max_results: Option<i64>,
}

/// DeleteQueue, PurgeQueue and ListQueueTags name only their queue.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct QueueOnly {
    pub queue_url: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GetQueueAttributes {
    pub queue_url: String,
    #[serde(default)]
    pub attribute_names: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SetQueueAttributes {
    pub queue_url: String,
    pub attributes: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessage {
    pub queue_url: String,
    #[serde(flatten)]
    pub message: MessageToSend,
}

/// A message as SendMessage and each SendMessageBatch entry carry it (the same members in
/// AWS's model).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct MessageToSend {
    pub message_body: String,
    #[serde(default)]
    pub delay_seconds: Option<i64>,
    #[serde(default)]
    pub message_attributes: MessageAttributes,
    #[serde(default)]
    pub message_system_attributes: MessageAttributes,
    #[serde(default)]
    pub message_deduplication_id: Option<String>,
    #[serde(default)]
    pub message_group_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageBatch {
    pub queue_url: String,
    pub entries: Vec<SendMessageBatchEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct SendMessageBatchEntry {
    pub id: String,
    #[serde(flatten)]
    pub message: MessageToSend,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReceiveMessage {
    pub queue_url: String,
    /// Deprecated by AWS in favour of `MessageSystemAttributeNames`; the two are united.
    #[serde(default)]
    pub attribute_names: Vec<String>,
    #[serde(default)]
    pub message_system_attribute_names: Vec<String>,
    #[serde(default)]
    pub message_attribute_names: Vec<String>,
    #[serde(default)]
    pub max_number_of_messages: Option<i64>,
    #[serde(default)]
    pub visibility_timeout: Option<i64>,
    #[serde(default)]
    pub wait_time_seconds: Option<i64>,
    #[serde(default)]
    pub receive_request_attempt_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessage {
    pub queue_url: String,
    pub receipt_handle: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessageBatch {
    pub queue_url: String,
    pub entries: Vec<DeleteMessageBatchEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct DeleteMessageBatchEntry {
    pub id: String,
    pub receipt_handle: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibility {
    pub queue_url: String,
    pub receipt_handle: String,
    pub visibility_timeout: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibilityBatch {
    pub queue_url: String,
    pub entries: Vec<ChangeMessageVisibilityBatchEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ChangeMessageVisibilityBatchEntry {
    pub id: String,
    pub receipt_handle: String,
    #[serde(default)]
    pub visibility_timeout: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListDeadLetterSourceQueues {
    pub queue_url: String,
    #[serde(default)]
    pub next_token: Option<String>,
    #[serde(default)]
    pub max_results: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TagQueue {
    pub queue_url: String,
    pub tags: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct UntagQueue {
    pub queue_url: String,
    pub tag_keys: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct StartMessageMoveTask {
    pub source_arn: String,
    #[serde(default)]
    pub destination_arn: Option<String>,
    #[serde(default)]
    pub max_number_of_messages_per_second: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ListMessageMoveTasks {
    pub source_arn: String,
    #[serde(default)]
    pub max_results: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CancelMessageMoveTask {
    pub task_handle: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AddPermission {
    pub queue_url: String,
    pub label: String,
    #[serde(rename = "AWSAccountIds")]
    pub aws_account_ids: Vec<String>,
    pub actions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct RemovePermission {
    pub queue_url: String,
    pub label: String,
}

macro_rules! requests {
    ($($action:ident($ty:ty)),+ $(,)?) => {
        /// A parsed request: the operation and its members.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Request {
            $($action($ty)),+
        }

        impl Request {
            fn from_value(action: Action, value: serde_json::Value) -> Result<Request, SqsError> {
                match action {
                    $(Action::$action => serde_json::from_value(value).map(Request::$action),)+
                }
                .map_err(|error| from_serde(&error))
            }

            /// Straight from the bytes, without a `Value` tree in between (a batch's bodies are
            /// then copied once).
            fn from_slice(action: Action, body: &[u8]) -> Result<Request, serde_json::Error> {
                match action {
                    $(Action::$action => serde_json::from_slice(body).map(Request::$action),)+
                }
            }
        }
    };
}

requests! {
    CreateQueue(CreateQueue),
    GetQueueUrl(GetQueueUrl),
    ListQueues(ListQueues),
    DeleteQueue(QueueOnly),
    GetQueueAttributes(GetQueueAttributes),
    SetQueueAttributes(SetQueueAttributes),
    PurgeQueue(QueueOnly),
    SendMessage(SendMessage),
    SendMessageBatch(SendMessageBatch),
    ReceiveMessage(ReceiveMessage),
    DeleteMessage(DeleteMessage),
    DeleteMessageBatch(DeleteMessageBatch),
    ChangeMessageVisibility(ChangeMessageVisibility),
    ChangeMessageVisibilityBatch(ChangeMessageVisibilityBatch),
    ListDeadLetterSourceQueues(ListDeadLetterSourceQueues),
    TagQueue(TagQueue),
    UntagQueue(UntagQueue),
    ListQueueTags(QueueOnly),
    StartMessageMoveTask(StartMessageMoveTask),
    ListMessageMoveTasks(ListMessageMoveTasks),
    CancelMessageMoveTask(CancelMessageMoveTask),
    AddPermission(AddPermission),
    RemovePermission(RemovePermission),
}

impl Request {
    /// A JSON 1.0 request body. An empty body counts as `{}`: every member is then missing.
    pub fn from_json(action: Action, body: &[u8]) -> Result<Request, SqsError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Request::from_value(action, serde_json::Value::Object(serde_json::Map::new()));
        }
        Request::from_slice(action, body).map_err(|error| {
            if error.is_syntax() || error.is_eof() {
                SqsError::new(
                    ErrorKind::InvalidParameterValue,
                    format!("The request body is not valid JSON: {error}."),
                )
            } else {
                from_serde(&error)
            }
        })
    }

    /// Query parameters (the query string and the form body together). Parameters the
    /// operation does not know, such as `Action`, `Version` and SigV4's, are ignored.
    pub fn from_query(action: Action, params: &[(String, String)]) -> Result<Request, SqsError> {
        Request::from_value(action, query::to_json(action, params))
    }
}

/// A serde failure in SQS's terms: a missing member is `MissingParameter` naming it, anything
/// else a value of the wrong type.
fn from_serde(error: &serde_json::Error) -> SqsError {
    let text = error.to_string();
    if let Some(rest) = text.strip_prefix("missing field `")
        && let Some((name, _)) = rest.split_once('`')
    {
        return SqsError::missing_parameter(name);
    }
    SqsError::new(
        ErrorKind::InvalidParameterValue,
        format!("Invalid request: {text}."),
    )
}

#[cfg(test)]
mod tests;
