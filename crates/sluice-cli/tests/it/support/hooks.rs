//! Webhook helpers: the signed requests recorded by the senders' own libraries
//! (`sluice-webhooks/tests/vectors/vectors.json`), raw posts to `/hooks/{name}`, endpoint
//! definitions, and fresh Standard Webhooks signatures.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sluice_webhooks::sign::StandardSigner;

use super::{Reply, TestServer};

/// The recorded vectors, as checked in.
const VECTORS: &str = include_str!("../../../../sluice-webhooks/tests/vectors/vectors.json");

/// Schemes whose requests carry a timestamp checked against the tolerance.
pub const TIMESTAMPED: [&str; 3] = ["standard_webhooks", "stripe", "slack"];

/// One recorded request and what a correct verifier answers to it.
#[derive(Debug, Clone, Deserialize)]
pub struct Vector {
    pub name: String,
    /// The `verify` object without secrets: `{"scheme": ...}` plus the `hmac` fields.
    pub scheme: Map<String, Value>,
    /// The secrets to configure (the signing one last in rotation cases).
    pub secrets: Vec<String>,
    /// A well-formed secret that did not sign the request.
    pub wrong_secret: Option<String>,
    pub tolerance_s: i64,
    /// Unix seconds at which the request is fresh.
    pub now: i64,
    /// The URL the sender called (Twilio signs it).
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Headers without which the request is refused with `missing_header`.
    pub required_headers: Vec<String>,
    /// `ok`, or the code of the refusal.
    pub expect: String,
    /// The code when the body is changed.
    pub tampered_body_code: String,
}

/// What a message stored from a webhook holds.
#[derive(Debug, Clone, PartialEq)]
pub enum StoredBody {
    Json(Value),
    Bytes(Vec<u8>),
}

impl Vector {
    /// Every recorded vector.
    pub fn all() -> Vec<Vector> {
        #[derive(Deserialize)]
        struct File {
            cases: Vec<Vector>,
        }
        let file: File = serde_json::from_str(VECTORS).expect("parse vectors.json");
        assert!(!file.cases.is_empty(), "vectors.json has no cases");
        file.cases
    }

    /// The vector called `name`.
    pub fn named(name: &str) -> Vector {
        Self::all()
            .into_iter()
            .find(|vector| vector.name == name)
            .unwrap_or_else(|| panic!("no vector {name:?} in vectors.json"))
    }

    /// The scheme's configuration name.
    pub fn scheme_name(&self) -> &str {
        self.scheme["scheme"].as_str().expect("scheme name")
    }

    pub fn is_valid(&self) -> bool {
        self.expect == "ok"
    }

    pub fn is_timestamped(&self) -> bool {
        TIMESTAMPED.contains(&self.scheme_name())
    }

    /// The value of a recorded header (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The recorded headers without `name` (any case).
    pub fn headers_without(&self, name: &str) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter(|(n, _)| !n.eq_ignore_ascii_case(name))
            .cloned()
            .collect()
    }

    /// The URL without its query: an endpoint's `public_url`.
    pub fn public_url(&self) -> &str {
        self.url.split_once('?').map_or(&self.url, |(url, _)| url)
    }

    /// `/hooks/{endpoint}` with the recorded URL's query string.
    pub fn hook_path(&self, endpoint: &str) -> String {
        match self.url.split_once('?') {
            Some((_, query)) => format!("/hooks/{endpoint}?{query}"),
            None => format!("/hooks/{endpoint}"),
        }
    }

    /// The `verify` object of an endpoint taking its secrets from `envs`.
    pub fn verify(&self, envs: &[String]) -> Value {
        let mut verify = self.scheme.clone();
        verify.insert(
            "secrets".into(),
            envs.iter().map(|env| json!({ "env": env })).collect(),
        );
        verify.insert("tolerance_s".into(), json!(self.tolerance_s));
        Value::Object(verify)
    }

    /// Posts the recorded request (its query, headers and body) to `endpoint`.
    pub async fn post(&self, server: &TestServer, endpoint: &str) -> Reply {
        post_hook(
            server,
            &self.hook_path(endpoint),
            &self.headers,
            self.body.clone(),
        )
        .await
    }

    /// The idempotency key the scheme's delivery id gives (none for generic HMAC, nor for Slack
    /// requests without an Events API `event_id`).
    pub fn delivery_id(&self) -> Option<String> {
        let body = || serde_json::from_str::<Value>(&self.body).ok();
        let header = |name: &str| self.header(name).map(str::to_owned);
        match self.scheme_name() {
            "standard_webhooks" => header("webhook-id"),
            "github" => header("x-github-delivery"),
            "shopify" => header("x-shopify-webhook-id"),
            "twilio" => header("i-twilio-idempotency-token"),
            "stripe" => body()?["id"].as_str().map(str::to_owned),
            "pagerduty" => body()?["event"]["id"].as_str().map(str::to_owned),
            "slack" => body()?["event_id"].as_str().map(str::to_owned),
            _ => None,
        }
    }

    /// The body the message must hold: JSON as parsed, form fields as an object, else the bytes.
    pub fn stored_body(&self) -> StoredBody {
        let content_type = self
            .header("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("application/x-www-form-urlencoded") {
            return StoredBody::Json(Value::Object(form_fields(&self.body)));
        }
        match serde_json::from_str(&self.body) {
            Ok(value) => StoredBody::Json(value),
            Err(e) => {
                assert!(
                    !content_type.contains("json"),
                    "{}: labelled JSON but is not: {e}",
                    self.name
                );
                StoredBody::Bytes(self.body.as_bytes().to_vec())
            }
        }
    }
}

/// The body of a received (or dead-lettered) message.
pub fn stored_body(message: &Value) -> StoredBody {
    if let Some(encoded) = message["body_base64"].as_str() {
        return StoredBody::Bytes(
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .unwrap_or_else(|e| panic!("body_base64 is not base64 ({e}): {message}")),
        );
    }
    match message.get("body") {
        Some(body) => StoredBody::Json(body.clone()),
        None => StoredBody::Bytes(Vec::new()),
    }
}

/// `application/x-www-form-urlencoded` fields, the later of a repeated name winning.
pub fn form_fields(body: &str) -> Map<String, Value> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                    match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                        Some(byte) => {
                            out.push(byte);
                            i += 2;
                        }
                        None => out.push(b'%'),
                    }
                }
                byte => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    body.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), Value::String(decode(value)))
        })
        .collect()
}

/// `POST path` with exactly these headers and body bytes.
pub async fn post_hook(
    server: &TestServer,
    path: &str,
    headers: &[(String, String)],
    body: impl Into<Vec<u8>>,
) -> Reply {
    let mut request = server.client().post(format!("{}{path}", server.url()));
    for (name, value) in headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let response = request
        .body(body.into())
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    read_reply(format!("POST {path}"), response).await
}

/// A response read whole into a [`Reply`].
pub async fn read_reply(request: String, response: reqwest::Response) -> Reply {
    let status = response.status();
    let headers = response.headers().clone();
    let text = response
        .text()
        .await
        .unwrap_or_else(|e| panic!("{request}: reading the body: {e}"));
    Reply {
        request,
        status,
        text,
        headers,
    }
}

/// `PUT /v1/webhooks/{name}` (asserts 200) → the `webhook` object.
pub async fn define(server: &TestServer, name: &str, spec: Value) -> Value {
    let mut answer = server.put(&format!("/v1/webhooks/{name}"), spec).await.ok();
    answer["webhook"].take()
}

/// `GET /v1/webhooks/{name}` → its `stats`, checked against the wire type.
pub async fn hook_stats(server: &TestServer, name: &str) -> sluice_wire::WebhookStatsOut {
    let reply = server.get(&format!("/v1/webhooks/{name}")).await;
    reply.ok();
    let out: sluice_wire::WebhookOut = reply.parse();
    out.stats
}

/// Messages stored in `queue` in any state (ready, delayed, in flight).
pub async fn held(server: &TestServer, queue: &str) -> u64 {
    let stats = server.stats(queue).await;
    ["ready", "delayed", "in_flight"]
        .iter()
        .map(|field| stats[field].as_u64().unwrap_or_else(|| panic!("{stats}")))
        .sum()
}

/// A Standard Webhooks delivery signed with `signer` at `timestamp_s`, plus `extra` headers.
pub fn standard_headers(
    signer: &StandardSigner,
    id: &str,
    timestamp_s: i64,
    body: &[u8],
    extra: &[(&str, &str)],
) -> Vec<(String, String)> {
    signer
        .headers(id, timestamp_s, body)
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .chain(
            extra
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned())),
        )
        .collect()
}
