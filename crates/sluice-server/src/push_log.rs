//! The push delivery log: what each push attempt sent and got back (as Svix and Hookdeck show
//! it), recorded by [`crate::push`] with the ack or nack the attempt ends with and kept with the
//! message's record by the store (`Store::message_deliveries`).
//!
//! Nothing secret is kept: the URL as non-admins see it ([`crate::redact::url_for_non_admins`]),
//! the values of the destination's configured headers replaced by `(hidden)`, and every other
//! value, the answer's headers and body excerpt passed through the destination's
//! [`Scrubber`](crate::redact::Scrubber) (an answer may echo the request). Everything kept is
//! bounded: the attempts per message, the bytes of the body excerpt and of the answer's headers
//! (`[push] delivery_log_*`).

use std::collections::BTreeMap;

use sluice_core::Millis;
use sluice_core::message::{DeliveryAttempt, DeliveryLogEntry};
use sluice_wire::PushSpec;

use crate::redact::{HIDDEN, Scrubber};

/// Request headers whose values are never shown, besides the destination's configured ones.
const ALWAYS_HIDDEN: [&str; 3] = ["authorization", "proxy-authorization", "cookie"];

/// `[push] delivery_log_*`: how much of each message's push attempts is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryLogLimits {
    /// Attempts kept per message (the last ones); 0 turns the log off.
    pub attempts: usize,
    /// Bytes of each answer's body kept as its excerpt.
    pub body_bytes: usize,
    /// Bytes of each answer's headers kept (names and values); the rest are left out.
    pub header_bytes: usize,
}

impl DeliveryLogLimits {
    /// The defaults, as in `config.default.toml`.
    pub const DEFAULT: Self = Self {
        attempts: 10,
        body_bytes: 1024,
        header_bytes: 4096,
    };

    /// True when attempts are recorded at all.
    pub fn enabled(&self) -> bool {
        self.attempts > 0
    }

    /// The entry to hand the store, or none with the log off.
    pub fn entry(&self, attempt: Option<DeliveryAttempt>) -> Option<DeliveryLogEntry> {
        attempt
            .filter(|_| self.enabled())
            .map(|attempt| DeliveryLogEntry {
                attempt,
                keep: self.attempts,
            })
    }
}

impl Default for DeliveryLogLimits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One attempt being recorded: the request part is filled when it is sent, the answer part
/// when it comes.
pub struct Recording {
    attempt: DeliveryAttempt,
    started: std::time::Instant,
}

impl Recording {
    /// The request as it goes out (secrets hidden).
    pub fn start(
        request: &reqwest::Request,
        spec: &PushSpec,
        scrubber: &Scrubber,
        attempt: u32,
        now_ms: Millis,
    ) -> Self {
        // Credentials whatever their source: the client makes `authorization` from the URL's
        // user info, where the scrubber would not recognise them (base64).
        let hidden: Vec<String> = spec
            .headers
            .iter()
            .flatten()
            .map(|(name, _)| name.to_ascii_lowercase())
            .chain(ALWAYS_HIDDEN.iter().map(|name| (*name).to_owned()))
            .collect();
        let mut request_headers = BTreeMap::new();
        // Added by the client when the request is sent, so not in `request.headers()`.
        request_headers.insert(
            "user-agent".to_owned(),
            concat!("sluice/", env!("CARGO_PKG_VERSION")).to_owned(),
        );
        for (name, value) in request.headers() {
            let shown = if hidden.iter().any(|h| h == name.as_str()) {
                HIDDEN.to_owned()
            } else {
                scrubber.scrub(&String::from_utf8_lossy(value.as_bytes()))
            };
            join_header(&mut request_headers, name.as_str(), shown);
        }
        Self {
            attempt: DeliveryAttempt {
                attempt,
                at_ms: now_ms,
                method: request.method().to_string(),
                url: crate::redact::url_for_non_admins(
                    &spec.url,
                    spec.secret_path.unwrap_or(false),
                ),
                request_headers,
                ..DeliveryAttempt::default()
            },
            started: std::time::Instant::now(),
        }
    }

    /// The answer's status and headers (within `limits.header_bytes`).
    pub fn response(
        &mut self,
        response: &reqwest::Response,
        limits: &DeliveryLogLimits,
        scrubber: &Scrubber,
    ) {
        self.attempt.status = Some(response.status().as_u16());
        let mut used = 0usize;
        for (name, value) in response.headers() {
            let value = scrubber.scrub(&String::from_utf8_lossy(value.as_bytes()));
            used += name.as_str().len() + value.len();
            if used > limits.header_bytes {
                self.attempt.response_headers_truncated = true;
                break;
            }
            join_header(&mut self.attempt.response_headers, name.as_str(), value);
        }
    }

    /// The first bytes of the answer's body (`body` holds what was read, up to one byte past
    /// the excerpt, so a longer body is marked as cut).
    pub fn body(&mut self, body: &[u8], limits: &DeliveryLogLimits, scrubber: &Scrubber) {
        if body.is_empty() || limits.body_bytes == 0 {
            self.attempt.body_truncated = !body.is_empty();
            return;
        }
        let kept = &body[..body.len().min(limits.body_bytes)];
        self.attempt.body_truncated = body.len() > limits.body_bytes;
        self.attempt.body_excerpt = Some(scrubber.scrub(&String::from_utf8_lossy(kept)));
    }

    /// The attempt, timed until now, with the failure text it ended with (already scrubbed).
    pub fn finish(mut self, error: Option<String>) -> DeliveryAttempt {
        self.attempt.latency_ms = self.started.elapsed().as_millis() as u64;
        self.attempt.error = error;
        self.attempt
    }
}

/// Adds a header to a map, joining a repeated name's values with `, ` (as HTTP allows).
fn join_header(headers: &mut BTreeMap<String, String>, name: &str, value: String) {
    headers
        .entry(name.to_owned())
        .and_modify(|joined| {
            joined.push_str(", ");
            joined.push_str(&value);
        })
        .or_insert(value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> PushSpec {
        serde_json::from_value(serde_json::json!({
            "url": "http://user:pa55word@127.0.0.1:9/hook?token=abcd1234",
            "headers": {"Authorization": "Bearer header-secret", "x-team": "payments"},
        }))
        .unwrap()
    }

    #[test]
    fn the_request_is_kept_without_its_secrets() {
        let spec = spec();
        let scrubber = Scrubber::for_destination(&spec);
        // The URL's user info would add a second `authorization` (Basic); the test at
        // `tests/it/delivery_log.rs` covers that one.
        let request = reqwest::Client::new()
            .post("http://127.0.0.1:9/hook")
            .header("authorization", "Bearer header-secret")
            .header("x-team", "payments")
            .header("cookie", "session=s1")
            .header("x-echo", "token abcd1234")
            .header("content-type", "application/json")
            .build()
            .unwrap();
        let attempt = Recording::start(&request, &spec, &scrubber, 2, 1_000).finish(None);
        assert_eq!(attempt.url, "http://(hidden)@127.0.0.1:9/hook?(hidden)");
        assert_eq!(attempt.method, "POST");
        assert_eq!(attempt.attempt, 2);
        assert_eq!(attempt.request_headers["authorization"], HIDDEN);
        assert_eq!(attempt.request_headers["x-team"], HIDDEN);
        assert_eq!(attempt.request_headers["cookie"], HIDDEN);
        assert_eq!(attempt.request_headers["x-echo"], "token (hidden)");
        assert_eq!(attempt.request_headers["content-type"], "application/json");
    }

    #[test]
    fn the_answer_headers_are_bounded_and_scrubbed() {
        let spec = spec();
        let scrubber = Scrubber::for_destination(&spec);
        let request = reqwest::Client::new().post(&spec.url).build().unwrap();
        let answer = axum::http::Response::builder()
            .status(500)
            .header("a-first", "echo abcd1234")
            .header("b-second", "2")
            .header("b-second", "3")
            .header("c-third", "x".repeat(100))
            .body("")
            .unwrap();
        let response = reqwest::Response::from(answer);
        let limits = DeliveryLogLimits {
            header_bytes: 40,
            ..DeliveryLogLimits::DEFAULT
        };
        let mut recording = Recording::start(&request, &spec, &scrubber, 1, 0);
        recording.response(&response, &limits, &scrubber);
        let attempt = recording.finish(None);
        assert_eq!(attempt.status, Some(500));
        assert_eq!(attempt.response_headers["a-first"], "echo (hidden)");
        assert_eq!(attempt.response_headers["b-second"], "2, 3");
        assert!(!attempt.response_headers.contains_key("c-third"));
        assert!(attempt.response_headers_truncated);
    }

    #[test]
    fn the_body_excerpt_is_bounded() {
        let spec = spec();
        let scrubber = Scrubber::for_destination(&spec);
        let request = reqwest::Client::new().post(&spec.url).build().unwrap();
        let limits = DeliveryLogLimits {
            body_bytes: 8,
            ..DeliveryLogLimits::DEFAULT
        };
        let mut recording = Recording::start(&request, &spec, &scrubber, 1, 0);
        recording.body(b"0123456789", &limits, &scrubber);
        let attempt = recording.finish(Some("HTTP 500".into()));
        assert_eq!(attempt.body_excerpt.as_deref(), Some("01234567"));
        assert!(attempt.body_truncated);
        assert_eq!(attempt.error.as_deref(), Some("HTTP 500"));
        assert_eq!(
            DeliveryLogLimits {
                attempts: 0,
                ..DeliveryLogLimits::DEFAULT
            }
            .entry(Some(attempt)),
            None
        );
    }
}
