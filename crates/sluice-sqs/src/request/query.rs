//! Folding the query protocol's flattened parameters back into the JSON request shape
//! (docs/design/sqs-compat.md §1.2), so both protocols share one deserialiser.
//!
//! The flattened names are the same in every operation, so one table maps them: a parameter
//! `Attribute.1.Name` becomes the key of `Attributes`, `SendMessageBatchRequestEntry.2.Id` the
//! `Id` of the second of `Entries`, and so on, recursively inside batch entries.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::action::Action;

/// How a flattened member folds back.
enum Shape {
    /// `Name.N` → a list of strings.
    List(&'static str),
    /// `Name.N.<key>` / `Name.N.<value>` → a map of strings.
    Map {
        json: &'static str,
        key: &'static str,
        value: &'static str,
    },
    /// `Name.N.Name` / `Name.N.Value.DataType`… → a map of `MessageAttributeValue`.
    MessageAttributes(&'static str),
    /// `Name.N.<Member>` → a list of structs, whose members fold by the same table.
    Entries,
}

/// The query form of each structured member and its JSON name.
fn shape(query_name: &str) -> Option<Shape> {
    Some(match query_name {
        "Attribute" => Shape::Map {
            json: "Attributes",
            key: "Name",
            value: "Value",
        },
        "Tag" => Shape::Map {
            json: "Tags",
            key: "Key",
            value: "Value",
        },
        "AttributeName" => Shape::List("AttributeNames"),
        "MessageSystemAttributeName" => Shape::List("MessageSystemAttributeNames"),
        "MessageAttributeName" => Shape::List("MessageAttributeNames"),
        "TagKey" => Shape::List("TagKeys"),
        "AWSAccountId" => Shape::List("AWSAccountIds"),
        "ActionName" => Shape::List("Actions"),
        "MessageAttribute" => Shape::MessageAttributes("MessageAttributes"),
        "MessageSystemAttribute" => Shape::MessageAttributes("MessageSystemAttributes"),
        "SendMessageBatchRequestEntry"
        | "DeleteMessageBatchRequestEntry"
        | "ChangeMessageVisibilityBatchRequestEntry" => Shape::Entries,
        _ => return None,
    })
}

/// Integer members: the query protocol sends them as text, JSON as numbers.
fn is_integer(name: &str) -> bool {
    matches!(
        name,
        "DelaySeconds"
            | "MaxNumberOfMessages"
            | "VisibilityTimeout"
            | "WaitTimeSeconds"
            | "MaxResults"
            | "MaxNumberOfMessagesPerSecond"
    )
}

/// The parameters as a tree split on `.`: `A.1.B=x` is node A, child 1, child B, value x.
#[derive(Default)]
struct Node {
    value: Option<String>,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn child_text(&self, name: &str) -> Option<&str> {
        self.children
            .get(name)
            .and_then(|node| node.value.as_deref())
    }

    /// The children named by 1-based indexes, in numeric order (`10` after `9`).
    fn indexed(&self) -> Vec<&Node> {
        let mut items: Vec<(u32, &Node)> = self
            .children
            .iter()
            .filter_map(|(index, node)| index.parse::<u32>().ok().map(|index| (index, node)))
            .collect();
        items.sort_by_key(|(index, _)| *index);
        items.into_iter().map(|(_, node)| node).collect()
    }
}

pub(super) fn to_json(action: Action, params: &[(String, String)]) -> Value {
    let mut root = Node::default();
    for (name, value) in params {
        // `detect` refuses such names; the tree's depth is bounded here too, whoever calls.
        if name.split('.').count() > crate::protocol::PARAMETER_NAME_PARTS_MAX {
            continue;
        }
        let mut node = &mut root;
        for part in name.split('.') {
            node = node.children.entry(part.to_owned()).or_default();
        }
        node.value = Some(value.clone());
    }
    let mut object = fold_struct(&root);
    // CreateQueue's tag map alone is lower-case in JSON (§1.2).
    if action == Action::CreateQueue
        && let Some(tags) = object.remove("Tags")
    {
        object.insert("tags".to_owned(), tags);
    }
    Value::Object(object)
}

fn fold_struct(node: &Node) -> Map<String, Value> {
    let mut object = Map::new();
    for (name, child) in &node.children {
        match shape(name) {
            None => {
                if let Some(text) = &child.value {
                    object.insert(name.clone(), scalar(name, text));
                }
            }
            Some(Shape::List(json)) => {
                let items = child
                    .indexed()
                    .into_iter()
                    .filter_map(|item| item.value.clone());
                object.insert(
                    json.to_owned(),
                    Value::Array(items.map(Value::String).collect()),
                );
            }
            Some(Shape::Map { json, key, value }) => {
                let map = child
                    .indexed()
                    .into_iter()
                    .filter_map(|item| {
                        Some((item.child_text(key)?.to_owned(), item.child_text(value)?))
                    })
                    .map(|(k, v)| (k, Value::String(v.to_owned())))
                    .collect();
                object.insert(json.to_owned(), Value::Object(map));
            }
            Some(Shape::MessageAttributes(json)) => {
                let map = child
                    .indexed()
                    .into_iter()
                    .filter_map(|item| {
                        let name = item.child_text("Name")?.to_owned();
                        Some((
                            name,
                            Value::Object(fold_attribute_value(item.children.get("Value")?)),
                        ))
                    })
                    .collect();
                object.insert(json.to_owned(), Value::Object(map));
            }
            Some(Shape::Entries) => {
                let entries = child
                    .indexed()
                    .into_iter()
                    .map(|item| Value::Object(fold_struct(item)));
                object.insert("Entries".to_owned(), Value::Array(entries.collect()));
            }
        }
    }
    object
}

/// `Value.DataType`, `Value.StringValue`, `Value.BinaryValue`, `Value.StringListValue.M`,
/// `Value.BinaryListValue.M` → a `MessageAttributeValue` object.
fn fold_attribute_value(node: &Node) -> Map<String, Value> {
    let mut object = Map::new();
    for (query, json) in [
        ("DataType", "DataType"),
        ("StringValue", "StringValue"),
        ("BinaryValue", "BinaryValue"),
    ] {
        if let Some(text) = node.child_text(query) {
            object.insert(json.to_owned(), Value::String(text.to_owned()));
        }
    }
    for (query, json) in [
        ("StringListValue", "StringListValues"),
        ("BinaryListValue", "BinaryListValues"),
    ] {
        if let Some(list) = node.children.get(query) {
            let items = list
                .indexed()
                .into_iter()
                .filter_map(|item| item.value.clone());
            object.insert(
                json.to_owned(),
                Value::Array(items.map(Value::String).collect()),
            );
        }
    }
    object
}

/// A scalar member: a number where the JSON shape has one and the text is one; otherwise
/// the text, which the deserialiser then refuses as a value of the wrong type.
fn scalar(name: &str, text: &str) -> Value {
    if is_integer(name)
        && let Ok(number) = text.trim().parse::<i64>()
    {
        return Value::from(number);
    }
    Value::String(text.to_owned())
}
