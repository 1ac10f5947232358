//! What counts as a JSON body: text every JSON reader can read, decided here once for every
//! door (the HTTP API's `body`, gRPC's `json`, SQS's bodies, webhook events, schedules).
//!
//! Checking only the syntax (serde_json's `RawValue` or `IgnoredAny`) lets through two things
//! no typed reader takes: `\u` escapes of lone surrogates (no `String` can hold one) and nesting
//! deeper than serde_json's `Value` reads (128 levels). Stored as JSON, such a body fails later
//! and far away: at a schema check, in the SDK's worker ("cannot decode the event"), in a
//! client whose parser recurses (Python's `json` raises `RecursionError` on the whole receive
//! answer that holds it). So it is refused at the door instead (a raw body goes through
//! `body_base64`, or is stored as bytes where the door decides the kind itself).
//!
//! The check walks the text with serde_json's own parser and keeps nothing: strings are
//! decoded (so their escapes are checked) and dropped, and serde_json's recursion limit
//! applies to every array and object, as when reading a `Value`.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// `Ok` when `bytes` is one JSON value any JSON reader can read; serde_json's error otherwise
/// (syntax, a lone surrogate escape, or "recursion limit exceeded").
pub fn check_json_body(bytes: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Readable>(bytes).map(|_| ())
}

/// A JSON value walked to be checked, and not kept.
struct Readable;

impl<'de> Deserialize<'de> for Readable {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ReadableVisitor)
    }
}

struct ReadableVisitor;

impl<'de> Visitor<'de> for ReadableVisitor {
    type Value = Readable;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_i128<E>(self, _: i128) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_u128<E>(self, _: u128) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_str<E>(self, _: &str) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_unit<E>(self) -> Result<Readable, E> {
        Ok(Readable)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Readable, A::Error> {
        while seq.next_element::<Readable>()?.is_some() {}
        Ok(Readable)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Readable, A::Error> {
        while map.next_entry::<Readable, Readable>()?.is_some() {}
        Ok(Readable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_value_reads_is_a_json_body() {
        let deep_ok = format!("{}1{}", "[".repeat(127), "]".repeat(127));
        for text in [
            "1",
            "-1.5e300",
            "18446744073709551616",
            "\"a\\ud83d\\ude00b\"",
            "{\"k\": [null, true, {\"\\u00e9\": \"\"}]}",
            deep_ok.as_str(),
        ] {
            assert!(check_json_body(text.as_bytes()).is_ok(), "{text}");
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn lone_surrogates_and_deep_nesting_are_not() {
        let deep = format!("{}1{}", "[".repeat(129), "]".repeat(129));
        let deep_objects = format!("{}1{}", "{\"a\":".repeat(129), "}".repeat(129));
        for text in [
            "\"\\ud800\"",
            "[\"\\udc00\"]",
            "{\"\\ud800\\u0041\": 1}",
            deep.as_str(),
            deep_objects.as_str(),
            "{\"a\": 1",
            "1 2",
        ] {
            let error = check_json_body(text.as_bytes()).expect_err(text);
            assert!(
                serde_json::from_str::<serde_json::Value>(text).is_err(),
                "{text}"
            );
            let _ = error.to_string();
        }
    }
}
