//! Counting what a JSON body holds before parsing it into owned values.
//!
//! serde builds every element of a list before a handler can see how many there are, and an
//! element can cost far more memory than its text: `{}` is 3 bytes of a batch and a few hundred
//! as a `MessageIn`, so 9 MB of them took 850 MB before the batch's count was checked. These
//! passes walk the body and keep nothing but counts, so a body over a cap is refused with memory
//! that does not grow with it; only a body within the caps is then parsed for real.

use std::fmt;

use serde::Deserializer as _;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::ApiError;

/// What an enqueue body holds, counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EnqueueShape {
    /// The number of messages of a batch (`{"messages": [...]}`); `None` for one message.
    pub batch_len: Option<usize>,
    /// The first message (its position in the batch, 0 for one message) with more than
    /// `headers_max` headers, and how many it has.
    pub too_many_headers: Option<(usize, usize)>,
}

/// Counts an enqueue body's messages and each message's headers (up to `headers_max` apart).
/// A body that is empty or not an object yields the default shape; its real parse reports it.
pub fn enqueue(body: &[u8], headers_max: usize) -> Result<EnqueueShape, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(EnqueueShape::default());
    }
    walk(body, EnqueueVisitor { headers_max })
}

/// The number of elements of the array at `field` of a top-level object (`None` when the
/// field is absent or `null`, or the body is empty).
pub fn array_len(body: &[u8], field: &'static str) -> Result<Option<usize>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    walk(body, FieldLenVisitor { field })
}

/// The array of messages at `field` of a top-level object (an ack's `then`): its length and
/// the first of them with more than `headers_max` headers (`None` when the field is absent or
/// `null`, or the body is empty).
pub fn message_list(
    body: &[u8],
    field: &'static str,
    headers_max: usize,
) -> Result<Option<MessageList>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    walk(body, MessageListVisitor { field, headers_max })
}

/// An array of messages, counted: its length, and the first message (position, headers) with
/// too many headers.
pub type MessageList = (usize, Option<(usize, usize)>);

struct MessageListVisitor {
    field: &'static str,
    headers_max: usize,
}

impl<'de> Visitor<'de> for MessageListVisitor {
    type Value = Option<MessageList>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let names = [self.field];
        let mut list = None;
        while let Some(found) = map.next_key_seed(KeyIs(&names))? {
            match found {
                Some(_) => {
                    list = map.next_value_seed(OptionalMessages(Messages {
                        headers_max: self.headers_max,
                    }))?;
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(list)
    }
}

/// [`Messages`], or `null`.
struct OptionalMessages(Messages);

impl<'de> DeserializeSeed<'de> for OptionalMessages {
    type Value = Option<MessageList>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OptionalMessages {
    type Value = Option<MessageList>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(seq).map(Some)
    }
}

fn walk<'de, V: Visitor<'de>>(body: &'de [u8], visitor: V) -> Result<V::Value, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = deserializer
        .deserialize_any(visitor)
        .and_then(|value| deserializer.end().map(|()| value))
        .map_err(|e| ApiError::malformed_json(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

/// A key compared with the names we look for, without allocating it.
#[derive(Clone, Copy)]
struct KeyIs<'a>(&'a [&'static str]);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    /// The index of the name it matched.
    type Value = Option<usize>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|name| *name == key))
    }
}

/// Entries of an object (`null` counts as none).
struct EntryCount;

impl<'de> DeserializeSeed<'de> for EntryCount {
    type Value = usize;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for EntryCount {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of headers")
    }
    fn visit_unit<E>(self) -> Result<usize, E> {
        Ok(0)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let mut count = 0;
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
            count += 1;
        }
        Ok(count)
    }
}

/// Elements of an array (`null` counts as none).
struct ElementCount;

impl<'de> DeserializeSeed<'de> for ElementCount {
    type Value = Option<usize>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ElementCount {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut count = 0;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            count += 1;
        }
        Ok(Some(count))
    }
}

struct FieldLenVisitor {
    field: &'static str,
}

impl<'de> Visitor<'de> for FieldLenVisitor {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let names = [self.field];
        let mut len = None;
        while let Some(found) = map.next_key_seed(KeyIs(&names))? {
            match found {
                Some(_) => len = map.next_value_seed(ElementCount)?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(len)
    }
}

/// One message object: its header count.
struct MessageHeaders;

impl<'de> DeserializeSeed<'de> for MessageHeaders {
    type Value = usize;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageHeaders {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<usize, A::Error> {
        let mut headers = 0;
        while let Some(found) = map.next_key_seed(KeyIs(&["headers"]))? {
            match found {
                Some(_) => headers = map.next_value_seed(EntryCount)?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(headers)
    }
}

/// The `messages` array: its length and the first message with too many headers.
struct Messages {
    headers_max: usize,
}

impl<'de> DeserializeSeed<'de> for Messages {
    type Value = (usize, Option<(usize, usize)>);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Messages {
    type Value = (usize, Option<(usize, usize)>);
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of messages")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut len: usize = 0;
        let mut too_many = None;
        while let Some(headers) = seq.next_element_seed(MessageHeaders)? {
            if too_many.is_none() && headers > self.headers_max {
                too_many = Some((len, headers));
            }
            len += 1;
        }
        Ok((len, too_many))
    }
}

struct EnqueueVisitor {
    headers_max: usize,
}

impl<'de> Visitor<'de> for EnqueueVisitor {
    type Value = EnqueueShape;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"a message object, or {"messages": [...]}"#)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<EnqueueShape, A::Error> {
        let mut shape = EnqueueShape::default();
        while let Some(found) = map.next_key_seed(KeyIs(&["messages", "headers"]))? {
            match found {
                Some(0) => {
                    let (len, too_many) = map.next_value_seed(Messages {
                        headers_max: self.headers_max,
                    })?;
                    shape.batch_len = Some(len);
                    shape.too_many_headers = too_many;
                }
                Some(_) => {
                    let headers = map.next_value_seed(EntryCount)?;
                    if headers > self.headers_max {
                        shape.too_many_headers = Some((0, headers));
                    }
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn batches_and_headers_are_counted() {
        let shape = |text: &str| enqueue(text.as_bytes(), 2).unwrap();
        assert_eq!(shape(r#"{"body": 1}"#), EnqueueShape::default());
        assert_eq!(shape("  "), EnqueueShape::default());
        assert_eq!(
            shape(
                r#"{"messages": [{}, {"body": [1, {"headers": {"a": 1, "b": 2, "c": 3}}]}, {}]}"#
            ),
            EnqueueShape {
                batch_len: Some(3),
                too_many_headers: None
            },
            "headers inside a body are the body's"
        );
        assert_eq!(
            shape(r#"{"messages": [{"headers": null}, {"headers": {"a": "", "b": "", "c": ""}}]}"#),
            EnqueueShape {
                batch_len: Some(2),
                too_many_headers: Some((1, 3))
            }
        );
        assert_eq!(
            shape(r#"{"body": 1, "headers": {"a": "", "b": "", "c": ""}}"#).too_many_headers,
            Some((0, 3))
        );
        assert_eq!(shape(r#"{"messages": []}"#).batch_len, Some(0));
    }

    #[test]
    fn keys_with_escapes_are_compared_by_their_value() {
        let shape = enqueue(br#"{"mess\u0061ges": [{}, {}]}"#, 64).unwrap();
        assert_eq!(shape.batch_len, Some(2));
    }

    #[test]
    fn malformed_bodies_are_a_400_like_the_real_parse() {
        for text in [
            r#"{"messages": [{}, {}"#,
            r#"{"messages": 5}"#,
            "[1, 2]",
            r#"{"body": 1} trailing"#,
        ] {
            let error = enqueue(text.as_bytes(), 64).unwrap_err();
            assert_eq!(error.code, ErrorCode::MalformedJson, "{text}");
        }
    }

    #[test]
    fn an_array_field_is_counted() {
        let len = |text: &str| array_len(text.as_bytes(), "receipts").unwrap();
        assert_eq!(len(r#"{"receipts": ["a", "b"], "receipt": "c"}"#), Some(2));
        assert_eq!(len(r#"{"receipt": "c"}"#), None);
        assert_eq!(len(r#"{"receipts": null}"#), None);
        assert_eq!(len(""), None);
        assert!(array_len(br#"{"receipts": "x"}"#, "receipts").is_err());
    }

    #[test]
    fn counting_a_huge_batch_keeps_nothing() {
        // 3 million empty messages: counted, never built.
        let mut body = String::from(r#"{"messages":["#);
        body.push_str(&"{},".repeat(3_000_000));
        body.push_str("{}]}");
        let shape = enqueue(body.as_bytes(), 64).unwrap();
        assert_eq!(shape.batch_len, Some(3_000_001));
    }
}
