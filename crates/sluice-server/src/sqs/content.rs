//! What an SQS message carries besides its body, checked as SQS checks it and kept with the
//! sluice message: message attributes and system attributes ride in headers of their own
//! (JSON), so a message keeps them through retries, the dead-letter queue and replay.

use std::collections::BTreeMap;

use sluice_core::message::Headers;
use sluice_sqs::request::{MessageAttributeValue, MessageAttributes};
use sluice_sqs::{ErrorKind, SqsError};

/// The header holding a message's SQS message attributes (JSON).
pub const ATTRIBUTES_HEADER: &str = "sqs-message-attributes";
/// The header holding a message's SQS system attributes (`AWSTraceHeader`), JSON.
pub const SYSTEM_ATTRIBUTES_HEADER: &str = "sqs-message-system-attributes";
/// The header naming who sent the message (`SenderId`).
pub const SENDER_HEADER: &str = "sqs-sender-id";
/// The header with a FIFO message's deduplication id.
pub const DEDUPLICATION_HEADER: &str = "sqs-message-deduplication-id";
/// Most message attributes on one message (SQS's limit).
pub const ATTRIBUTES_MAX: usize = 10;

/// SQS's allowed characters: `#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF`.
pub fn allowed_text(text: &str) -> bool {
    text.chars().all(|c| {
        matches!(c, '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
    })
}

/// The body check: not empty, allowed characters only.
pub fn check_body(body: &str) -> Result<(), SqsError> {
    if body.is_empty() {
        return Err(SqsError::missing_parameter("MessageBody"));
    }
    if !allowed_text(body) {
        return Err(SqsError::new(
            ErrorKind::InvalidMessageContents,
            "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF",
        ));
    }
    Ok(())
}

/// Checks message attributes as SQS does (names, types, values, count); returns their size
/// as SQS counts it toward the message size (name, type and value bytes).
pub fn check_attributes(attributes: &MessageAttributes) -> Result<usize, SqsError> {
    if attributes.len() > ATTRIBUTES_MAX {
        return Err(invalid(format!(
            "Number of message attributes [{}] exceeds the allowed maximum [{ATTRIBUTES_MAX}].",
            attributes.len()
        )));
    }
    let mut size = 0;
    for (name, value) in attributes {
        check_attribute_name(name)?;
        size += name.len() + value.data_type.len() + check_value(name, value)?;
    }
    Ok(size)
}

fn check_attribute_name(name: &str) -> Result<(), SqsError> {
    let lower = name.to_ascii_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 256
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        && !lower.starts_with("aws.")
        && !lower.starts_with("amazon.")
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..");
    if valid {
        Ok(())
    } else {
        Err(invalid(format!(
            "Message (user) attribute name '{name}' is invalid: use 1 to 256 of A-Z a-z 0-9 _ - ., not starting with AWS. or Amazon., without a leading, trailing or repeated period."
        )))
    }
}

fn check_value(name: &str, value: &MessageAttributeValue) -> Result<usize, SqsError> {
    let data_type = value.data_type.as_str();
    let base = data_type.split('.').next().unwrap_or_default();
    if data_type.len() > 256 || !matches!(base, "String" | "Number" | "Binary") {
        return Err(invalid(format!(
            "The type of message (user) attribute '{name}' is invalid. You must use only the following supported type prefixes: Binary, Number, String."
        )));
    }
    let empty = || {
        invalid(format!(
            "Message (user) attribute '{name}' must contain a non-empty value of type '{base}'."
        ))
    };
    if base == "Binary" {
        let bytes = value
            .binary_value
            .as_ref()
            .map(|blob| blob.0.len())
            .or_else(|| {
                (!value.binary_list_values.is_empty())
                    .then(|| value.binary_list_values.iter().map(|b| b.0.len()).sum())
            })
            .ok_or_else(empty)?;
        return Ok(bytes);
    }
    let text = match &value.string_value {
        Some(text) if !text.is_empty() => text.len(),
        _ if !value.string_list_values.is_empty() => {
            value.string_list_values.iter().map(String::len).sum()
        }
        _ => return Err(empty()),
    };
    let texts = value.string_value.iter().chain(&value.string_list_values);
    if texts.clone().any(|text| !allowed_text(text)) {
        return Err(SqsError::new(
            ErrorKind::InvalidMessageContents,
            format!("Message (user) attribute '{name}' has characters SQS does not allow."),
        ));
    }
    if base == "Number" {
        for text in texts {
            if text.trim().parse::<f64>().is_err() {
                return Err(invalid(format!(
                    "Can't cast the value of message (user) attribute '{name}' to a number."
                )));
            }
        }
    }
    Ok(text)
}

fn invalid(message: String) -> SqsError {
    SqsError::new(ErrorKind::InvalidParameterValue, message)
}

/// Stores attributes in `headers` under `header` (nothing for none).
pub fn store(headers: &mut Headers, header: &str, attributes: &MessageAttributes) {
    if !attributes.is_empty()
        && let Ok(json) = serde_json::to_string(attributes)
    {
        headers.insert(header.to_owned(), json);
    }
}

/// The attributes stored under `header`; none when absent or unreadable.
pub fn load(headers: &Headers, header: &str) -> MessageAttributes {
    headers
        .get(header)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// The attributes a receive asks for (`MessageAttributeNames`): `All`, `.*` or `*` for every
/// one, exact names, and `prefix.*` for names starting with `prefix.`; names that match
/// nothing are ignored, as SQS does.
pub fn filter(attributes: MessageAttributes, wanted: &[String]) -> MessageAttributes {
    if wanted.iter().any(|w| w == "All" || w == ".*" || w == "*") {
        return attributes;
    }
    attributes
        .into_iter()
        .filter(|(name, _)| {
            wanted.iter().any(|w| match w.strip_suffix(".*") {
                Some(prefix) => name.starts_with(prefix),
                None => w == name,
            })
        })
        .collect::<BTreeMap<_, _>>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_sqs::request::Blob;

    fn string(value: &str) -> MessageAttributeValue {
        MessageAttributeValue {
            data_type: "String".into(),
            string_value: Some(value.into()),
            binary_value: None,
            string_list_values: Vec::new(),
            binary_list_values: Vec::new(),
        }
    }

    #[test]
    fn bodies_with_characters_outside_sqs_set_are_refused() {
        assert!(check_body("a\r\n\tb \u{10000}").is_ok());
        for bad in ["\0", "\u{8}", "\u{FFFF}", "a\u{13}"] {
            assert_eq!(
                check_body(bad).unwrap_err().kind,
                ErrorKind::InvalidMessageContents
            );
        }
        assert_eq!(
            check_body("").unwrap_err().kind,
            ErrorKind::MissingParameter
        );
    }

    #[test]
    fn attributes_are_checked_and_sized_as_sqs_does() {
        let mut attributes = MessageAttributes::new();
        attributes.insert("Hello".into(), string("There"));
        assert_eq!(check_attributes(&attributes).unwrap(), 5 + 6 + 5);
        for name in ["AWS.x", "amazon.y", ".a", "a.", "a..b", "a b", ""] {
            let mut bad = MessageAttributes::new();
            bad.insert(name.into(), string("v"));
            assert!(check_attributes(&bad).is_err(), "{name:?}");
        }
        let mut empty = MessageAttributes::new();
        empty.insert("e".into(), string(""));
        assert!(check_attributes(&empty).is_err());
        let mut number = MessageAttributes::new();
        number.insert(
            "n".into(),
            MessageAttributeValue {
                data_type: "Number.float".into(),
                ..string("x1")
            },
        );
        assert!(check_attributes(&number).is_err());
        let mut binary = MessageAttributes::new();
        binary.insert(
            "b".into(),
            MessageAttributeValue {
                data_type: "Binary".into(),
                string_value: None,
                binary_value: Some(Blob(vec![1, 2, 3])),
                ..string("")
            },
        );
        assert_eq!(check_attributes(&binary).unwrap(), 1 + 6 + 3);
        let eleven: MessageAttributes = (0..11).map(|i| (format!("a{i}"), string("v"))).collect();
        assert!(check_attributes(&eleven).is_err());
    }

    #[test]
    fn receive_filters_by_name_and_prefix() {
        let attributes: MessageAttributes = ["General", "Hello", "Help.Me"]
            .iter()
            .map(|n| ((*n).to_owned(), string("v")))
            .collect();
        let names = |wanted: &[&str]| -> Vec<String> {
            let wanted: Vec<String> = wanted.iter().map(|w| (*w).to_owned()).collect();
            filter(attributes.clone(), &wanted).into_keys().collect()
        };
        assert_eq!(names(&["All"]).len(), 3);
        assert_eq!(names(&[".*"]).len(), 3);
        assert_eq!(names(&["Hel.*"]), ["Hello", "Help.Me"]);
        assert_eq!(names(&["Hello", "Nope"]), ["Hello"]);
        assert!(names(&[]).is_empty());
    }
}
