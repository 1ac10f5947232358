//! Secrets of push destinations kept out of what the server shows.
//!
//! A destination URL can carry credentials (`https://user:password@host/`), a capability in its
//! query (`?token=…`) or, for chat and similar webhooks, in its path; header values can hold API
//! keys. None of it belongs in a failure's text: `last_error` reaches producers and consumers
//! through stats, message lookups and dead-letter entries, and is stored with the message. So:
//!
//! - error texts never contain the URL, only its origin ([`url_origin`], `scheme://host:port`);
//! - whatever else goes into an error (a library's cause, the first bytes of the destination's
//!   answer, which may echo the request) passes through a [`Scrubber`] that replaces every
//!   secret of the destination with `(hidden)`;
//! - the queue's settings show non-admins the URL without user info and query, and without the
//!   path when the destination declares `secret_path` ([`url_for_non_admins`]).

use reqwest::Url;
use sluice_wire::PushSpec;

/// What a secret is replaced with.
pub const HIDDEN: &str = "(hidden)";

/// Secrets shorter than this are not searched for in error texts: they would match all over an
/// ordinary text (a header value `1`), and a secret that short protects nothing anyway.
const SCRUB_MIN_CHARS: usize = 4;

/// `scheme://host[:port]` of a destination: all of its URL an error text shows.
pub fn url_origin(url: &str) -> String {
    match Url::parse(url) {
        Ok(url) => url.origin().ascii_serialization(),
        Err(_) => "the destination".into(),
    }
}

/// A destination URL as tokens that are not admins see it: user info and query hidden, and the
/// path too when it is declared secret.
pub fn url_for_non_admins(url: &str, secret_path: bool) -> String {
    let Ok(url) = Url::parse(url) else {
        return HIDDEN.into();
    };
    let mut shown = format!("{}://", url.scheme());
    if !url.username().is_empty() || url.password().is_some() {
        shown.push_str(HIDDEN);
        shown.push('@');
    }
    shown.push_str(url.host_str().unwrap_or_default());
    if let Some(port) = url.port() {
        shown.push_str(&format!(":{port}"));
    }
    if secret_path && url.path() != "/" {
        shown.push('/');
        shown.push_str(HIDDEN);
    } else {
        shown.push_str(url.path());
    }
    if url.query().is_some() {
        shown.push('?');
        shown.push_str(HIDDEN);
    }
    shown
}

/// The secrets of one destination, to take out of texts.
#[derive(Debug, Default, Clone)]
pub struct Scrubber {
    /// Longest first, so a secret that contains another is replaced whole.
    secrets: Vec<String>,
}

impl Scrubber {
    /// The user name, password, query (whole and each value), the path when it is declared
    /// secret, and every header value, each as written and percent-decoded.
    pub fn for_destination(spec: &PushSpec) -> Self {
        let mut secrets: Vec<String> = Vec::new();
        if let Ok(url) = Url::parse(&spec.url) {
            secrets.push(url.username().to_owned());
            secrets.extend(url.password().map(str::to_owned));
            secrets.extend(url.query().map(str::to_owned));
            secrets.extend(url.query_pairs().map(|(_, value)| value.into_owned()));
            if spec.secret_path.unwrap_or(false) {
                secrets.push(url.path().to_owned());
                secrets.extend(url.path_segments().into_iter().flatten().map(str::to_owned));
            }
        }
        secrets.extend(
            spec.headers
                .iter()
                .flatten()
                .map(|(_, value)| value.clone()),
        );
        let decoded: Vec<String> = secrets
            .iter()
            .map(|secret| {
                percent_encoding::percent_decode_str(secret)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        secrets.extend(decoded);
        secrets.retain(|secret| secret.chars().count() >= SCRUB_MIN_CHARS);
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every secret replaced by `(hidden)`.
    pub fn scrub(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), HIDDEN);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str, secret_path: bool) -> PushSpec {
        serde_json::from_value(serde_json::json!({
            "url": url,
            "secret_path": secret_path,
            "headers": {"authorization": "Bearer header-secret", "x-v": "1"},
        }))
        .unwrap()
    }

    #[test]
    fn errors_show_only_the_origin() {
        assert_eq!(
            url_origin("http://user:pa55word@127.0.0.1:9/hook?token=abcd"),
            "http://127.0.0.1:9"
        );
        assert_eq!(url_origin("https://Example.com/x"), "https://example.com");
        assert_eq!(url_origin("https://[::1]:8443/"), "https://[::1]:8443");
        assert_eq!(url_origin("not a url"), "the destination");
    }

    #[test]
    fn non_admins_see_the_url_without_its_secrets() {
        assert_eq!(
            url_for_non_admins("http://user:pa55word@host:81/p/q?token=abcd#f", false),
            "http://(hidden)@host:81/p/q?(hidden)"
        );
        assert_eq!(
            url_for_non_admins("https://hooks.example.com/services/T0/B0/XyZ", true),
            "https://hooks.example.com/(hidden)"
        );
        assert_eq!(url_for_non_admins("https://host/", true), "https://host/");
    }

    #[test]
    fn every_secret_of_a_destination_is_scrubbed_from_texts() {
        let scrubber = Scrubber::for_destination(&spec(
            "http://user:pa%2F55word@h/T0/cap-9f3e?token=abcd&x=1",
            true,
        ));
        let text = "HTTP 500: user pa/55word pa%2F55word token=abcd T0/cap-9f3e Bearer header-secret x-v 1";
        let scrubbed = scrubber.scrub(text);
        for secret in [
            "user",
            "pa/55word",
            "pa%2F55word",
            "abcd",
            "cap-9f3e",
            "header-secret",
        ] {
            assert!(!scrubbed.contains(secret), "{secret} in {scrubbed}");
        }
        assert!(scrubbed.starts_with("HTTP 500: "), "{scrubbed}");
        assert!(scrubbed.ends_with("x-v 1"), "short values stay: {scrubbed}");
    }
}
