//! A message's push delivery log at rest: one JSON object per attempt, kept as a JSON array
//! of the last few attempts in the message's row (the SQLite store's `deliveries` text column,
//! the PostgreSQL store's `deliveries` JSONB column). One serde type for both stores, so a row
//! reads the same whichever store wrote it; the wire form is `wire::DeliveryOut`, which may
//! change with the API while this one changes only with the schema.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::message::DeliveryAttempt;

/// An attempt as stored. Field names are fixed to what earlier versions wrote.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    attempt: u32,
    at: Millis,
    method: String,
    url: String,
    #[serde(default)]
    request_headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default)]
    response_headers: BTreeMap<String, String>,
    #[serde(default)]
    response_headers_truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_excerpt: Option<String>,
    #[serde(default)]
    body_truncated: bool,
    latency_ms: u64,
}

/// One attempt as the JSON text a log keeps (its fields in the order earlier versions wrote
/// them).
pub fn encode(attempt: DeliveryAttempt) -> String {
    let stored = Stored {
        attempt: attempt.attempt,
        at: attempt.at_ms,
        method: attempt.method,
        url: attempt.url,
        request_headers: attempt.request_headers,
        status: attempt.status,
        error: attempt.error,
        response_headers: attempt.response_headers,
        response_headers_truncated: attempt.response_headers_truncated,
        body_excerpt: attempt.body_excerpt,
        body_truncated: attempt.body_truncated,
        latency_ms: attempt.latency_ms,
    };
    serde_json::to_string(&stored).unwrap_or_else(|_| "null".into())
}

/// One stored attempt; `None` when it does not read (it is skipped, not fatal: the log is a
/// diagnostic, never a rule).
pub fn decode(entry: serde_json::Value) -> Option<DeliveryAttempt> {
    let stored: Stored = serde_json::from_value(entry).ok()?;
    Some(DeliveryAttempt {
        attempt: stored.attempt,
        at_ms: stored.at,
        method: stored.method,
        url: stored.url,
        request_headers: stored.request_headers,
        status: stored.status,
        error: stored.error,
        response_headers: stored.response_headers,
        response_headers_truncated: stored.response_headers_truncated,
        body_excerpt: stored.body_excerpt,
        body_truncated: stored.body_truncated,
        latency_ms: stored.latency_ms,
    })
}

/// A whole stored log (a JSON array), oldest first; entries that do not read are skipped, and
/// a log that is not an array reads as empty.
pub fn decode_log(log: serde_json::Value) -> Vec<DeliveryAttempt> {
    match log {
        serde_json::Value::Array(entries) => entries.into_iter().filter_map(decode).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt() -> DeliveryAttempt {
        DeliveryAttempt {
            attempt: 2,
            at_ms: 1_000,
            method: "POST".into(),
            url: "http://127.0.0.1:9/in".into(),
            request_headers: [("content-type".to_owned(), "application/json".to_owned())].into(),
            status: Some(503),
            error: Some("HTTP 503".into()),
            body_excerpt: Some("busy".into()),
            latency_ms: 7,
            ..DeliveryAttempt::default()
        }
    }

    #[test]
    fn an_attempt_is_written_as_earlier_versions_wrote_it() {
        let written = encode(attempt());
        assert_eq!(
            written,
            "{\"attempt\":2,\"at\":1000,\"method\":\"POST\",\"url\":\"http://127.0.0.1:9/in\",\
             \"request_headers\":{\"content-type\":\"application/json\"},\"status\":503,\
             \"error\":\"HTTP 503\",\"response_headers\":{},\"response_headers_truncated\":false,\
             \"body_excerpt\":\"busy\",\"body_truncated\":false,\"latency_ms\":7}"
        );
        let read = decode(serde_json::from_str(&written).unwrap());
        assert_eq!(read, Some(attempt()));
    }

    #[test]
    fn entries_that_do_not_read_are_skipped() {
        let entry: serde_json::Value = serde_json::from_str(&encode(attempt())).unwrap();
        let log = serde_json::json!([{"attempt": 1}, entry, "garbage"]);
        assert_eq!(decode_log(log), vec![attempt()]);
        assert_eq!(decode_log(serde_json::json!({"not": "a log"})), Vec::new());
    }
}
