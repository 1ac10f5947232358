//! The digests SQS answers with (docs/design/sqs-compat.md §3.7): `MD5OfMessageBody` and
//! `MD5OfMessageAttributes` (also `MD5OfMessageSystemAttributes`, same algorithm). SDKs check
//! them against what they sent, so they must be byte-exact.

use std::collections::BTreeMap;

use md5::{Digest, Md5};

use crate::request::MessageAttributeValue;

/// Lower-case hex MD5 of the body's UTF-8 bytes.
pub fn of_body(body: &str) -> String {
    hex(&Md5::digest(body.as_bytes()))
}

/// The MD5 of message attributes, or `None` when there are none (the field is then omitted).
///
/// Names in byte order; per attribute: length-prefixed name, length-prefixed full DataType,
/// one transport byte (1 string, 2 binary, 3 string list, 4 binary list), then the value(s),
/// each length-prefixed (binary values decoded). Lengths are 4-byte big-endian.
pub fn of_attributes(attributes: &BTreeMap<String, MessageAttributeValue>) -> Option<String> {
    if attributes.is_empty() {
        return None;
    }
    let mut digest = Md5::new();
    // BTreeMap<String, _> iterates in byte order of the names, which is the order AWS uses.
    for (name, value) in attributes {
        put(&mut digest, name.as_bytes());
        put(&mut digest, value.data_type.as_bytes());
        if let Some(text) = &value.string_value {
            digest.update([1]);
            put(&mut digest, text.as_bytes());
        } else if let Some(bytes) = &value.binary_value {
            digest.update([2]);
            put(&mut digest, &bytes.0);
        } else if !value.string_list_values.is_empty() {
            digest.update([3]);
            for text in &value.string_list_values {
                put(&mut digest, text.as_bytes());
            }
        } else if !value.binary_list_values.is_empty() {
            digest.update([4]);
            for bytes in &value.binary_list_values {
                put(&mut digest, &bytes.0);
            }
        }
    }
    Some(hex(&digest.finalize()))
}

fn put(digest: &mut Md5, bytes: &[u8]) {
    // Attribute names, types and values are bounded far below 4 GiB by the request limits.
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    digest.update(len.to_be_bytes());
    digest.update(bytes);
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Blob;

    fn string(data_type: &str, value: &str) -> MessageAttributeValue {
        MessageAttributeValue {
            data_type: data_type.to_owned(),
            string_value: Some(value.to_owned()),
            ..MessageAttributeValue::default()
        }
    }

    fn binary(value: &[u8]) -> MessageAttributeValue {
        MessageAttributeValue {
            data_type: "Binary".to_owned(),
            binary_value: Some(Blob(value.to_vec())),
            ..MessageAttributeValue::default()
        }
    }

    fn attrs(list: &[(&str, MessageAttributeValue)]) -> BTreeMap<String, MessageAttributeValue> {
        list.iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect()
    }

    #[test]
    fn body_vectors() {
        assert_eq!(of_body("msg"), "6e2baaf3b97dbeef01c0043275f9a0e7");
        assert_eq!(of_body("test"), "098f6bcd4621d373cade4e832627b4f6");
        assert_eq!(of_body("x"), "9dd4e461268c8034f5c8564e155c67a6");
    }

    #[test]
    fn attribute_vectors_recorded_from_aws() {
        let general = ("General", string("String", "Kenobi"));
        let hello = ("Hello", string("String", "There"));
        let help = ("Help.Me", string("String", "Me"));
        let cases = [
            (
                attrs(&[general.clone(), hello.clone(), help.clone()]),
                "4c360f3fdafd970e05fae2f149d997f5",
            ),
            (
                attrs(&[general, hello.clone()]),
                "fca026605781cb4126a1e9044df24232",
            ),
            (
                attrs(std::slice::from_ref(&hello)),
                "a311262e065454b75da111d535b8dacd",
            ),
            (attrs(&[hello, help]), "83fee93c1bcd8b9a5a923ffacdc636c7"),
            (
                attrs(&[(
                    "attr1",
                    binary(
                        b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01",
                    ),
                )]),
                "8cbe4db156db8a94db8b801b7addb984",
            ),
        ];
        for (attributes, expected) in cases {
            assert_eq!(of_attributes(&attributes).as_deref(), Some(expected));
        }
    }

    #[test]
    fn attribute_vectors_with_custom_types_and_lists() {
        let cases = [
            (
                attrs(&[("attribName1", string("String", "attribValue 1"))]),
                "19e27d4e946b072f3f58da80d94fd778",
            ),
            (
                attrs(&[(
                    "customNumberTypeAttrib",
                    string("Number.float", "4563442423554324324264524243.32543234"),
                )]),
                "9fe1b90bbd9965bdf77bac517c7d2495",
            ),
            (
                attrs(&[("binaryAttribute", binary(b"Hello binary world!"))]),
                "31a92b15d92f8db860eda32aceb656c3",
            ),
            (
                attrs(&[(
                    "a",
                    MessageAttributeValue {
                        data_type: "String".to_owned(),
                        string_list_values: vec!["x".to_owned(), "y".to_owned()],
                        ..MessageAttributeValue::default()
                    },
                )]),
                "9b30dab58df08a3e3fccee8f544f1c2d",
            ),
        ];
        for (attributes, expected) in cases {
            assert_eq!(of_attributes(&attributes).as_deref(), Some(expected));
        }
    }

    #[test]
    fn no_attributes_no_digest() {
        assert_eq!(of_attributes(&BTreeMap::new()), None);
    }
}
