//! Verification of inbound webhook signatures.
//!
//! A [`Verifier`] holds one [`Scheme`], the secrets a source may be signed with (more than one
//! during a rotation: all are tried) and the timestamp tolerance. [`Verifier::verify`] checks one
//! [`Request`] (public URL, headers, raw body bytes exactly as received) against the current time
//! and answers `Ok(())` or a [`VerifyError`] with a stable [`code`](VerifyError::code).
//!
//! Supported senders and what is checked:
//!
//! | Scheme | Signature header | Signed content | MAC, encoding | Timestamp |
//! |---|---|---|---|---|
//! | [`Scheme::StandardWebhooks`] | `webhook-signature: v1,<b64> [v1,<b64> …]` (or Svix's `svix-signature`, with `svix-id`, `svix-timestamp`) | `<webhook-id>.<webhook-timestamp>.<body>` | HMAC-SHA256, base64; key = base64-decoded `whsec_` secret | `webhook-timestamp` |
//! | [`Scheme::GitHub`] | `X-Hub-Signature-256: sha256=<hex>` | body | HMAC-SHA256, hex | none |
//! | [`Scheme::Stripe`] | `Stripe-Signature: t=<unix>,v1=<hex>[,v1=…][,v0=…]` (only `v1` counts) | `<t>.<body>` | HMAC-SHA256, hex; key = whole `whsec_…` string | `t` |
//! | [`Scheme::Slack`] | `X-Slack-Signature: v0=<hex>` | `v0:<X-Slack-Request-Timestamp>:<body>` | HMAC-SHA256, hex | `X-Slack-Request-Timestamp` |
//! | [`Scheme::Shopify`] | `X-Shopify-Hmac-Sha256: <b64>` | body | HMAC-SHA256, base64 | none |
//! | [`Scheme::PagerDuty`] | `X-PagerDuty-Signature: v1=<hex>[,v1=<hex>…]` | body | HMAC-SHA256, hex | none |
//! | [`Scheme::Twilio`] | `X-Twilio-Signature: <b64>` | URL, then form parameters sorted | HMAC-SHA1 (or SHA-256, see below), base64 | none |
//! | [`Scheme::Hmac`] | configured | body | configured | none |
//!
//! Timestamps are refused when they are more than the tolerance away from `now` in either
//! direction, whether or not the signature is valid.
//!
//! Secrets are the UTF-8 bytes of the configured string for every scheme except Standard Webhooks,
//! whose `whsec_<base64>` secret is base64-decoded (see [`crate::sign::decode_standard_secret`]).
//! Stripe secrets look alike (`whsec_…`) but are used whole, undecoded.
//!
//! Nothing here logs, and no error message contains a secret or an expected signature.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use subtle::ConstantTimeEq as _;

use crate::sign::{self, B64, StandardSigner};

/// HMAC hash function of a [`GenericHmac`] scheme. Written `"sha1"`, `"sha256"` or `"sha512"` in
/// configuration; the default is SHA-256.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HmacAlgorithm {
    /// HMAC-SHA1 (20-byte MAC). Still sound as a MAC; used by Twilio and legacy GitHub hooks.
    Sha1,
    /// HMAC-SHA256 (32-byte MAC).
    #[default]
    Sha256,
    /// HMAC-SHA512 (64-byte MAC).
    Sha512,
}

/// How a [`GenericHmac`] signature is written in its header. Written `"hex"` (either case
/// accepted on input) or `"base64"` (standard alphabet, padding optional) in configuration; the
/// default is hex.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignatureEncoding {
    /// Hexadecimal.
    #[default]
    Hex,
    /// Standard base64 (never the URL-safe alphabet).
    Base64,
}

impl std::str::FromStr for HmacAlgorithm {
    type Err = String;

    /// The configuration name: `sha1`, `sha256` or `sha512`.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "sha1" => Ok(Self::Sha1),
            "sha256" => Ok(Self::Sha256),
            "sha512" => Ok(Self::Sha512),
            other => Err(format!("{other:?} is not one of sha1, sha256, sha512")),
        }
    }
}

impl std::str::FromStr for SignatureEncoding {
    type Err = String;

    /// The configuration name: `hex` or `base64`.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "hex" => Ok(Self::Hex),
            "base64" => Ok(Self::Base64),
            other => Err(format!("{other:?} is not one of hex, base64")),
        }
    }
}

/// A sender not covered by a named scheme that signs the raw body with an HMAC and sends it in one
/// header, optionally behind a fixed prefix such as `sha256=`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenericHmac {
    /// The header carrying the signature (any case).
    pub header: String,
    /// The HMAC hash function.
    pub algorithm: HmacAlgorithm,
    /// How the MAC is encoded in the header.
    pub encoding: SignatureEncoding,
    /// A literal prefix in front of the encoded MAC (e.g. `sha256=`), which must be present.
    pub prefix: Option<String>,
}

/// A webhook signature scheme: which sender's convention a source's requests are checked with.
///
/// In configuration a scheme is written through [`VerifySpec`]: `scheme = "github"` etc., and for
/// the generic HMAC the extra fields, e.g. in TOML
///
/// ```toml
/// scheme = "hmac"
/// header = "X-Signature"
/// algorithm = "sha256"   # sha1 | sha256 | sha512, default sha256
/// encoding = "hex"       # hex | base64, default hex
/// prefix = "sha256="     # optional
/// ```
///
/// `Scheme` (de)serializes through [`VerifySpec`], so it can be a field of a configuration struct
/// directly, or `#[serde(flatten)]`ed into one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "VerifySpec", into = "VerifySpec")]
pub enum Scheme {
    /// [Standard Webhooks](https://www.standardwebhooks.com/) (Svix and others): `webhook-id`,
    /// `webhook-timestamp`, `webhook-signature`, each also taken under Svix's name (`svix-id`,
    /// `svix-timestamp`, `svix-signature`), which wins when both are present, as in Svix's own
    /// libraries. Configuration name `standard_webhooks`.
    StandardWebhooks,
    /// GitHub: `X-Hub-Signature-256: sha256=<hex>`. Configuration name `github`. (The legacy
    /// SHA-1 `X-Hub-Signature` header is not used; configure [`Scheme::Hmac`] for it if needed.)
    GitHub,
    /// Stripe: `Stripe-Signature: t=…,v1=…`. Configuration name `stripe`.
    Stripe,
    /// Slack: `X-Slack-Signature`, `X-Slack-Request-Timestamp`. Configuration name `slack`.
    Slack,
    /// Shopify: `X-Shopify-Hmac-Sha256`. Configuration name `shopify`.
    Shopify,
    /// PagerDuty webhooks v3: `X-PagerDuty-Signature`. Configuration name `pagerduty`.
    PagerDuty,
    /// Twilio: `X-Twilio-Signature` over the public URL and the form parameters, or over the URL
    /// alone with a `bodySHA256` query parameter for JSON bodies. Configuration name `twilio`.
    Twilio,
    /// A generic HMAC of the raw body. Configuration name `hmac`.
    Hmac(GenericHmac),
}

/// The configuration form of a [`Scheme`]: a scheme name plus the fields only `hmac` takes.
///
/// `scheme` is one of `standard_webhooks`, `github`, `stripe`, `slack`, `shopify`, `pagerduty`,
/// `twilio`, `hmac`. `header` is required for `hmac`; `algorithm` (default `sha256`), `encoding`
/// (default `hex`) and `prefix` (default none) are optional. The four extra fields are refused for
/// the named schemes, so a misplaced `header` is an error instead of being silently ignored.
/// Unknown fields are left to the enclosing struct (this struct can be flattened).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifySpec {
    /// The scheme name.
    pub scheme: String,
    /// `hmac` only: the signature header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// `hmac` only: the hash function.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<HmacAlgorithm>,
    /// `hmac` only: the signature encoding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<SignatureEncoding>,
    /// `hmac` only: the literal prefix before the encoded signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// Configuration names of the schemes, in declaration order.
pub const SCHEME_NAMES: [&str; 8] = [
    "standard_webhooks",
    "github",
    "stripe",
    "slack",
    "shopify",
    "pagerduty",
    "twilio",
    "hmac",
];

impl Scheme {
    /// Builds a scheme from its configuration form; the error says what is wrong with the spec.
    pub fn from_spec(spec: &VerifySpec) -> Result<Scheme, String> {
        let named = match spec.scheme.as_str() {
            "standard_webhooks" => Scheme::StandardWebhooks,
            "github" => Scheme::GitHub,
            "stripe" => Scheme::Stripe,
            "slack" => Scheme::Slack,
            "shopify" => Scheme::Shopify,
            "pagerduty" => Scheme::PagerDuty,
            "twilio" => Scheme::Twilio,
            "hmac" => {
                let header = spec.header.clone().ok_or_else(|| {
                    "scheme \"hmac\" needs a `header` field naming the signature header".to_string()
                })?;
                let generic = GenericHmac {
                    header,
                    algorithm: spec.algorithm.unwrap_or_default(),
                    encoding: spec.encoding.unwrap_or_default(),
                    prefix: spec.prefix.clone().filter(|p| !p.is_empty()),
                };
                check_header_name(&generic.header)?;
                return Ok(Scheme::Hmac(generic));
            }
            other => {
                return Err(format!(
                    "unknown signature scheme {other:?}; expected one of {}",
                    SCHEME_NAMES.join(", ")
                ));
            }
        };
        let extra: Vec<&str> = [
            ("header", spec.header.is_some()),
            ("algorithm", spec.algorithm.is_some()),
            ("encoding", spec.encoding.is_some()),
            ("prefix", spec.prefix.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, set)| set.then_some(name))
        .collect();
        if !extra.is_empty() {
            return Err(format!(
                "scheme {:?} does not take {}: those fields only apply to scheme \"hmac\"",
                spec.scheme,
                extra.join(", ")
            ));
        }
        Ok(named)
    }

    /// The configuration form of this scheme (inverse of [`Scheme::from_spec`]).
    pub fn to_spec(&self) -> VerifySpec {
        let mut spec = VerifySpec {
            scheme: self.name().to_string(),
            ..VerifySpec::default()
        };
        if let Scheme::Hmac(generic) = self {
            spec.header = Some(generic.header.clone());
            spec.algorithm = Some(generic.algorithm);
            spec.encoding = Some(generic.encoding);
            spec.prefix = generic.prefix.clone();
        }
        spec
    }

    /// The configuration name of the scheme (one of [`SCHEME_NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::StandardWebhooks => "standard_webhooks",
            Scheme::GitHub => "github",
            Scheme::Stripe => "stripe",
            Scheme::Slack => "slack",
            Scheme::Shopify => "shopify",
            Scheme::PagerDuty => "pagerduty",
            Scheme::Twilio => "twilio",
            Scheme::Hmac(_) => "hmac",
        }
    }

    /// Where the sender puts the id that stays the same across its retries of one delivery: the
    /// default idempotency key of an endpoint with this scheme. `None` for generic HMAC.
    ///
    /// | scheme | id |
    /// |---|---|
    /// | Standard Webhooks | `svix-id`, else `webhook-id` (the id the signature covers) |
    /// | GitHub | `X-GitHub-Delivery` (kept by redeliveries) |
    /// | Stripe | `.id` of the body (the event id; retries resend the event) |
    /// | Slack | `.event_id` of the body (Events API; retries carry `X-Slack-Retry-Num`) |
    /// | Shopify | `X-Shopify-Webhook-Id` (kept by retries) |
    /// | PagerDuty | `.event.id` of the body (v3 webhooks) |
    /// | Twilio | `I-Twilio-Idempotency-Token` (kept by retries) |
    pub fn delivery_id(&self) -> Option<DeliveryId> {
        Some(match self {
            Scheme::StandardWebhooks => {
                DeliveryId::Header(&[sign::SVIX_HEADER_ID, sign::HEADER_ID])
            }
            Scheme::GitHub => DeliveryId::Header(&["x-github-delivery"]),
            Scheme::Shopify => DeliveryId::Header(&["x-shopify-webhook-id"]),
            Scheme::Twilio => DeliveryId::Header(&["i-twilio-idempotency-token"]),
            Scheme::Stripe => DeliveryId::BodyField(&["id"]),
            Scheme::Slack => DeliveryId::BodyField(&["event_id"]),
            Scheme::PagerDuty => DeliveryId::BodyField(&["event", "id"]),
            Scheme::Hmac(_) => return None,
        })
    }

    /// Whether the scheme carries a timestamp that is checked against the tolerance.
    pub fn has_timestamp(&self) -> bool {
        matches!(
            self,
            Scheme::StandardWebhooks | Scheme::Stripe | Scheme::Slack
        )
    }
}

/// Where a sender puts the id of a delivery (see [`Scheme::delivery_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryId {
    /// The first of these request headers that is present (lowercase names).
    Header(&'static [&'static str]),
    /// A string or number in the JSON body, at this path of object keys.
    BodyField(&'static [&'static str]),
}

impl DeliveryId {
    /// The id in a request: the header's value, or the body field (a string, or a number as its
    /// text). `None` when absent or empty, or when the body is not JSON.
    pub fn find(
        &self,
        headers: &http::HeaderMap,
        body: Option<&serde_json::Value>,
    ) -> Option<String> {
        match self {
            DeliveryId::Header(names) => names
                .iter()
                .find_map(|name| headers.get(*name))
                .and_then(|value| value.to_str().ok())
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_owned),
            DeliveryId::BodyField(path) => {
                let value = path.iter().try_fold(body?, |value, key| value.get(key))?;
                match value {
                    serde_json::Value::String(text) if !text.is_empty() => Some(text.clone()),
                    serde_json::Value::Number(number) => Some(number.to_string()),
                    _ => None,
                }
            }
        }
    }
}

/// Slack's `url_verification` handshake: the `challenge` to answer when `body` is one (a JSON
/// object with `"type": "url_verification"` and a string `challenge`). Slack sends it, signed
/// like every request, when an Events API Request URL is saved, and accepts the URL only when the
/// answer is `200` with the challenge.
pub fn slack_challenge(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Handshake {
        #[serde(rename = "type")]
        kind: String,
        challenge: String,
    }
    let handshake: Handshake = serde_json::from_slice(body).ok()?;
    (handshake.kind == "url_verification").then_some(handshake.challenge)
}

impl TryFrom<VerifySpec> for Scheme {
    type Error = String;

    fn try_from(spec: VerifySpec) -> Result<Self, Self::Error> {
        Scheme::from_spec(&spec)
    }
}

impl From<Scheme> for VerifySpec {
    fn from(scheme: Scheme) -> Self {
        scheme.to_spec()
    }
}

fn check_header_name(name: &str) -> Result<(), String> {
    http::HeaderName::from_bytes(name.as_bytes())
        .map(|_| ())
        .map_err(|_| format!("{name:?} is not a valid HTTP header name"))
}

/// One inbound webhook request, as received.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The public URL the sender called, with the query string (scheme, host, optional port,
    /// path, query). Only Twilio signs it; behind a proxy this is the public URL, not the
    /// upstream one.
    pub url: &'a str,
    /// The request headers.
    pub headers: &'a http::HeaderMap,
    /// The raw body bytes, exactly as received (before any parsing).
    pub body: &'a [u8],
}

/// Why a request was refused. [`code`](VerifyError::code) is stable for APIs and metrics; the
/// `Display` message says what is wrong and never contains a secret or an expected signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A header the scheme requires is absent.
    #[error("missing {header} header")]
    MissingHeader {
        /// The header name (lowercase); a Standard Webhooks header with its Svix name:
        /// `webhook-id (or svix-id)`.
        header: String,
    },
    /// A signature or timestamp header is present but cannot be parsed.
    #[error("malformed {header} header: {reason}")]
    MalformedSignature {
        /// The header name (lowercase).
        header: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No signature in the request matches any configured secret.
    #[error("signature does not match any configured secret")]
    SignatureMismatch,
    /// The signed timestamp is too far from the current time (either direction).
    #[error(
        "timestamp {timestamp} is {} s {} now ({now}); tolerance is {tolerance_s} s",
        timestamp.abs_diff(*now),
        if timestamp < now { "before" } else { "after" }
    )]
    TimestampOutOfTolerance {
        /// The timestamp the request carries (Unix seconds).
        timestamp: i64,
        /// The current time passed to [`Verifier::verify`].
        now: i64,
        /// The configured tolerance in seconds.
        tolerance_s: i64,
    },
    /// Twilio JSON body: the body's SHA-256 differs from the signed `bodySHA256` query parameter.
    #[error("body does not match the signed bodySHA256 query parameter")]
    BodyHashMismatch,
}

impl VerifyError {
    /// Stable machine-readable code: `missing_header`, `malformed_signature`,
    /// `signature_mismatch`, `timestamp_out_of_tolerance` or `body_hash_mismatch`.
    pub fn code(&self) -> &'static str {
        match self {
            VerifyError::MissingHeader { .. } => "missing_header",
            VerifyError::MalformedSignature { .. } => "malformed_signature",
            VerifyError::SignatureMismatch => "signature_mismatch",
            VerifyError::TimestampOutOfTolerance { .. } => "timestamp_out_of_tolerance",
            VerifyError::BodyHashMismatch => "body_hash_mismatch",
        }
    }
}

fn malformed(header: &str, reason: &'static str) -> VerifyError {
    VerifyError::MalformedSignature {
        header: header.to_ascii_lowercase(),
        reason,
    }
}

/// Key material, decoded once at construction.
#[derive(Clone)]
enum Keys {
    /// Standard Webhooks: base64-decoded `whsec_` secrets.
    Standard(Vec<StandardSigner>),
    /// Everyone else: the secret's UTF-8 bytes.
    Raw(Vec<Vec<u8>>),
}

/// Checks requests of one source: a scheme, its secrets (all tried, for rotation) and the
/// timestamp tolerance. `Debug` prints no key material.
#[derive(Clone)]
pub struct Verifier {
    scheme: Scheme,
    keys: Keys,
    tolerance_s: i64,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = match &self.keys {
            Keys::Standard(signers) => signers.len(),
            Keys::Raw(keys) => keys.len(),
        };
        f.debug_struct("Verifier")
            .field("scheme", &self.scheme)
            .field("secrets", &format_args!("<{count} redacted>"))
            .field("tolerance_s", &self.tolerance_s)
            .finish()
    }
}

/// Twilio's header naming the signature algorithm of SharedKey-signed webhooks
/// (`key=<id>,algorithm=HMAC_SHA256`); absent means HMAC-SHA1 with the auth token.
const TWILIO_SETTINGS_HEADER: &str = "x-twilio-webhooks-signature-settings";

impl Verifier {
    /// A verifier for `scheme` with `secrets` as the user configured them (at least one; all are
    /// tried, so old and new secrets can overlap during a rotation) and a timestamp tolerance in
    /// seconds (ignored by schemes without a timestamp; 300 is what the senders' libraries use).
    ///
    /// Fails on: no secrets, an empty secret, an undecodable Standard Webhooks secret, a negative
    /// tolerance, an invalid generic HMAC header name. Errors name secrets by position only.
    pub fn new(scheme: Scheme, secrets: Vec<String>, tolerance_s: i64) -> Result<Verifier, String> {
        if secrets.is_empty() {
            return Err("at least one secret is required".to_string());
        }
        if tolerance_s < 0 {
            return Err(format!(
                "timestamp tolerance must not be negative (got {tolerance_s})"
            ));
        }
        if let Scheme::Hmac(generic) = &scheme {
            check_header_name(&generic.header)?;
        }
        let keys = if scheme == Scheme::StandardWebhooks {
            let signers = secrets
                .iter()
                .enumerate()
                .map(|(i, secret)| {
                    StandardSigner::new(secret).map_err(|e| format!("secret #{}: {e}", i + 1))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Keys::Standard(signers)
        } else {
            if let Some(i) = secrets.iter().position(|s| s.is_empty()) {
                return Err(format!("secret #{} is empty", i + 1));
            }
            Keys::Raw(secrets.into_iter().map(String::into_bytes).collect())
        };
        Ok(Verifier {
            scheme,
            keys,
            tolerance_s,
        })
    }

    /// The scheme this verifier checks.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The timestamp tolerance in seconds.
    pub fn tolerance_s(&self) -> i64 {
        self.tolerance_s
    }

    /// Checks `request` at time `now_unix_s` (Unix seconds). `Ok(())` means the request was signed
    /// with one of the configured secrets, and, for timestamped schemes, within the tolerance.
    pub fn verify(&self, request: &Request<'_>, now_unix_s: i64) -> Result<(), VerifyError> {
        match &self.scheme {
            Scheme::StandardWebhooks => self.verify_standard(request, now_unix_s),
            Scheme::GitHub => {
                let value = header(request, "x-hub-signature-256")?;
                let hex_sig = value
                    .strip_prefix("sha256=")
                    .ok_or_else(|| malformed("x-hub-signature-256", "expected sha256=<hex>"))?;
                let sig = decode_hex("x-hub-signature-256", hex_sig)?;
                self.check_raw(HmacAlgorithm::Sha256, &[request.body], &[sig])
            }
            Scheme::Stripe => self.verify_stripe(request, now_unix_s),
            Scheme::Slack => {
                let ts_raw = header(request, "x-slack-request-timestamp")?;
                let value = header(request, "x-slack-signature")?;
                let timestamp = parse_timestamp("x-slack-request-timestamp", ts_raw)?;
                let hex_sig = value
                    .strip_prefix("v0=")
                    .ok_or_else(|| malformed("x-slack-signature", "expected v0=<hex>"))?;
                let sig = decode_hex("x-slack-signature", hex_sig)?;
                self.check_timestamp(timestamp, now_unix_s)?;
                // Slack signs the timestamp exactly as sent in the header.
                self.check_raw(
                    HmacAlgorithm::Sha256,
                    &[b"v0:", ts_raw.as_bytes(), b":", request.body],
                    &[sig],
                )
            }
            Scheme::Shopify => {
                let value = header(request, "x-shopify-hmac-sha256")?;
                let sig = decode_b64("x-shopify-hmac-sha256", value)?;
                self.check_raw(HmacAlgorithm::Sha256, &[request.body], &[sig])
            }
            Scheme::PagerDuty => {
                let value = header(request, "x-pagerduty-signature")?;
                // One `v1=<hex>` per active secret, comma-separated. Other versions are ignored,
                // entries that are not hex can never match.
                let sigs: Vec<Vec<u8>> = value
                    .split(',')
                    .filter_map(|entry| entry.trim().strip_prefix("v1="))
                    .filter_map(|h| hex::decode(h).ok())
                    .collect();
                if sigs.is_empty() {
                    return Err(malformed(
                        "x-pagerduty-signature",
                        "no v1=<hex> signature found",
                    ));
                }
                self.check_raw(HmacAlgorithm::Sha256, &[request.body], &sigs)
            }
            Scheme::Twilio => self.verify_twilio(request),
            Scheme::Hmac(generic) => {
                let value = header(request, &generic.header)?;
                let encoded = match generic.prefix.as_deref() {
                    Some(prefix) => value.strip_prefix(prefix).ok_or_else(|| {
                        malformed(&generic.header, "the configured prefix is missing")
                    })?,
                    None => value,
                };
                let sig = match generic.encoding {
                    SignatureEncoding::Hex => decode_hex(&generic.header, encoded)?,
                    SignatureEncoding::Base64 => decode_b64(&generic.header, encoded)?,
                };
                self.check_raw(generic.algorithm, &[request.body], &[sig])
            }
        }
    }

    fn verify_standard(&self, request: &Request<'_>, now: i64) -> Result<(), VerifyError> {
        // Svix sends `svix-*` names, other senders `webhook-*`; like Svix's own libraries, each
        // header is taken under its `svix-` name when present, else under its `webhook-` name.
        let (msg_id, _) = standard_header(request, sign::SVIX_HEADER_ID, sign::HEADER_ID)?;
        let (ts_raw, ts_name) =
            standard_header(request, sign::SVIX_HEADER_TIMESTAMP, sign::HEADER_TIMESTAMP)?;
        let (value, signature_name) =
            standard_header(request, sign::SVIX_HEADER_SIGNATURE, sign::HEADER_SIGNATURE)?;
        let timestamp = parse_timestamp(ts_name, ts_raw)?;
        // Space-separated `<version>,<base64>` entries; only `v1` (HMAC-SHA256) is ours, `v1a`
        // (ed25519) and unknown versions are skipped, as are entries that are not base64.
        let sigs: Vec<Vec<u8>> = value
            .split(' ')
            .filter_map(|entry| entry.split_once(','))
            .filter(|(version, _)| *version == "v1")
            .filter_map(|(_, b64)| B64.decode(b64).ok())
            .collect();
        if sigs.is_empty() {
            return Err(malformed(signature_name, "no v1,<base64> signature found"));
        }
        self.check_timestamp(timestamp, now)?;
        let Keys::Standard(signers) = &self.keys else {
            unreachable!("Standard Webhooks verifiers hold decoded keys");
        };
        let matched = signers.iter().any(|signer| {
            let expected = signer.mac(msg_id, timestamp, request.body);
            any_equal(&expected, &sigs)
        });
        if matched {
            Ok(())
        } else {
            Err(VerifyError::SignatureMismatch)
        }
    }

    fn verify_stripe(&self, request: &Request<'_>, now: i64) -> Result<(), VerifyError> {
        const NAME: &str = "stripe-signature";
        let value = header(request, NAME)?;
        let mut timestamp = None;
        let mut sigs = Vec::new();
        let mut any_v1 = false;
        for entry in value.split(',') {
            let Some((key, val)) = entry.trim().split_once('=') else {
                continue;
            };
            match key {
                "t" => {
                    if timestamp.is_some() {
                        return Err(malformed(NAME, "more than one t= timestamp"));
                    }
                    timestamp = Some(parse_timestamp(NAME, val)?);
                }
                // Only v1 counts; v0 (test mode legacy) and anything else are ignored.
                "v1" => {
                    any_v1 = true;
                    if let Ok(sig) = hex::decode(val) {
                        sigs.push(sig);
                    }
                }
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or_else(|| malformed(NAME, "no t= timestamp"))?;
        if !any_v1 {
            return Err(malformed(NAME, "no v1= signature"));
        }
        self.check_timestamp(timestamp, now)?;
        let t = timestamp.to_string();
        self.check_raw(
            HmacAlgorithm::Sha256,
            &[t.as_bytes(), b".", request.body],
            &sigs,
        )
    }

    fn verify_twilio(&self, request: &Request<'_>) -> Result<(), VerifyError> {
        const NAME: &str = "x-twilio-signature";
        let value = header(request, NAME)?;
        let sig = decode_b64(NAME, value)?;
        let algorithm = match request.headers.get(TWILIO_SETTINGS_HEADER) {
            None => HmacAlgorithm::Sha1,
            Some(settings) => {
                let settings = settings
                    .to_str()
                    .map_err(|_| malformed(TWILIO_SETTINGS_HEADER, "not visible ASCII"))?;
                twilio_algorithm(settings)?
            }
        };

        // JSON (non-form) bodies: the URL carries bodySHA256 = hex SHA-256 of the body, and the
        // signature covers the URL alone.
        let query = request
            .url
            .split_once('?')
            .map(|(_, q)| q.split_once('#').map_or(q, |(q, _)| q))
            .unwrap_or("");
        let body_hash = form_urlencoded::parse(query.as_bytes())
            .find(|(name, _)| name == "bodySHA256")
            .map(|(_, value)| value.into_owned());
        let params: BTreeSet<(String, String)> = match &body_hash {
            Some(expected_hex) => {
                let actual = sha2::Sha256::digest(request.body);
                // A value that is not hex cannot be the body's hash either.
                let expected = hex::decode(expected_hex).unwrap_or_default();
                if !bool::from(actual.as_slice().ct_eq(&expected)) {
                    return Err(VerifyError::BodyHashMismatch);
                }
                BTreeSet::new()
            }
            // Form POSTs (and bodiless GETs): every parameter, sorted by name then value, with
            // duplicate name/value pairs counted once, as the official validators do.
            None => form_urlencoded::parse(request.body)
                .map(|(name, value)| (name.into_owned(), value.into_owned()))
                .collect(),
        };
        let mut suffix = String::new();
        for (name, value) in &params {
            suffix.push_str(name);
            suffix.push_str(value);
        }
        let matched = twilio_url_variants(request.url).iter().any(|url| {
            let Keys::Raw(keys) = &self.keys else {
                unreachable!("only Standard Webhooks decodes keys");
            };
            keys.iter().any(|key| {
                let expected = sign::hmac(algorithm, key, &[url.as_bytes(), suffix.as_bytes()]);
                any_equal(&expected, std::slice::from_ref(&sig))
            })
        });
        if matched {
            Ok(())
        } else {
            Err(VerifyError::SignatureMismatch)
        }
    }

    fn check_timestamp(&self, timestamp: i64, now: i64) -> Result<(), VerifyError> {
        if timestamp.abs_diff(now) > self.tolerance_s.unsigned_abs() {
            return Err(VerifyError::TimestampOutOfTolerance {
                timestamp,
                now,
                tolerance_s: self.tolerance_s,
            });
        }
        Ok(())
    }

    /// HMAC of `parts` under each raw key, compared in constant time with each of `sigs`.
    fn check_raw(
        &self,
        algorithm: HmacAlgorithm,
        parts: &[&[u8]],
        sigs: &[Vec<u8>],
    ) -> Result<(), VerifyError> {
        let Keys::Raw(keys) = &self.keys else {
            unreachable!("only Standard Webhooks decodes keys");
        };
        let matched = keys.iter().any(|key| {
            let expected = sign::hmac(algorithm, key, parts);
            any_equal(&expected, sigs)
        });
        if matched {
            Ok(())
        } else {
            Err(VerifyError::SignatureMismatch)
        }
    }
}

/// Whether `expected` equals one of `candidates`, each comparison in constant time.
fn any_equal(expected: &[u8], candidates: &[Vec<u8>]) -> bool {
    candidates.iter().fold(false, |found, candidate| {
        found | bool::from(expected.ct_eq(candidate.as_slice()))
    })
}

/// A Standard Webhooks header under its Svix name or, when that is absent, its standard name;
/// the value and the name it was found under. Missing under both → `missing_header` naming both.
fn standard_header<'a>(
    request: &Request<'a>,
    svix: &'static str,
    standard: &'static str,
) -> Result<(&'a str, &'static str), VerifyError> {
    if request.headers.contains_key(svix) {
        return Ok((header(request, svix)?, svix));
    }
    match header(request, standard) {
        Ok(value) => Ok((value, standard)),
        Err(VerifyError::MissingHeader { .. }) => Err(VerifyError::MissingHeader {
            header: format!("{standard} (or {svix})"),
        }),
        Err(other) => Err(other),
    }
}

/// The first value of header `name`, trimmed; missing → `missing_header`, not visible ASCII →
/// `malformed_signature`.
fn header<'a>(request: &Request<'a>, name: &str) -> Result<&'a str, VerifyError> {
    let value = request
        .headers
        .get(name)
        .ok_or_else(|| VerifyError::MissingHeader {
            header: name.to_ascii_lowercase(),
        })?;
    value
        .to_str()
        .map(str::trim)
        .map_err(|_| malformed(name, "not visible ASCII"))
}

fn parse_timestamp(name: &str, value: &str) -> Result<i64, VerifyError> {
    let value = value.trim();
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed(name, "timestamp is not Unix seconds"));
    }
    value
        .parse()
        .map_err(|_| malformed(name, "timestamp is out of range"))
}

fn decode_hex(name: &str, value: &str) -> Result<Vec<u8>, VerifyError> {
    hex::decode(value.trim()).map_err(|_| malformed(name, "signature is not hex"))
}

fn decode_b64(name: &str, value: &str) -> Result<Vec<u8>, VerifyError> {
    B64.decode(value.trim())
        .map_err(|_| malformed(name, "signature is not base64"))
}

/// The algorithm named in `X-Twilio-Webhooks-Signature-Settings` (`key=…,algorithm=HMAC_SHA256`);
/// no `algorithm=` means HMAC-SHA1, an unknown one is refused.
fn twilio_algorithm(settings: &str) -> Result<HmacAlgorithm, VerifyError> {
    for part in settings.split(',') {
        if let Some((name, value)) = part.split_once('=')
            && name.trim() == "algorithm"
            && !value.trim().is_empty()
        {
            return match value.trim().to_ascii_uppercase().as_str() {
                "HMAC_SHA1" => Ok(HmacAlgorithm::Sha1),
                "HMAC_SHA256" => Ok(HmacAlgorithm::Sha256),
                _ => Err(malformed(
                    TWILIO_SETTINGS_HEADER,
                    "unsupported signature algorithm",
                )),
            };
        }
    }
    Ok(HmacAlgorithm::Sha1)
}

/// The URLs a Twilio signature is tried against: the URL as given, plus the same URL without its
/// port if it has one, or with the scheme's default port (`:443`/`:80`) if it has none, as the
/// official validators do (Twilio is inconsistent about including default ports).
fn twilio_url_variants(url: &str) -> Vec<String> {
    let mut variants = vec![url.to_string()];
    let Some(scheme_end) = url.find("://") else {
        return variants;
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    // host[:port] is what follows any userinfo.
    let host_start = authority.rfind('@').map_or(0, |at| at + 1);
    let host_port = &authority[host_start..];
    // Skip an IPv6 literal's colons.
    let search_from = if host_port.starts_with('[') {
        host_port.find(']').unwrap_or(0)
    } else {
        0
    };
    let port = host_port[search_from..]
        .rfind(':')
        .map(|i| search_from + i)
        .filter(|&colon| host_port[colon + 1..].bytes().all(|b| b.is_ascii_digit()));
    let host_port_start = authority_start + host_start;
    let host_port_end = authority_start + authority_len;
    match port {
        Some(colon) => {
            // Without the port (an empty port `host:` counts as a port here too).
            let colon_abs = host_port_start + colon;
            variants.push(format!("{}{}", &url[..colon_abs], &url[host_port_end..]));
        }
        None => {
            let default = match url[..scheme_end].to_ascii_lowercase().as_str() {
                "https" => Some("443"),
                "http" => Some("80"),
                _ => None,
            };
            if let Some(default) = default {
                variants.push(format!(
                    "{}:{}{}",
                    &url[..host_port_end],
                    default,
                    &url[host_port_end..]
                ));
            }
        }
    }
    variants
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names `FromStr` reads are the names serde writes, for every algorithm and encoding.
    #[test]
    fn configuration_names_parse_as_serde_writes_them() {
        for algorithm in [
            HmacAlgorithm::Sha1,
            HmacAlgorithm::Sha256,
            HmacAlgorithm::Sha512,
        ] {
            let name = serde_json::to_value(algorithm).unwrap();
            assert_eq!(name.as_str().unwrap().parse(), Ok(algorithm));
        }
        for encoding in [SignatureEncoding::Hex, SignatureEncoding::Base64] {
            let name = serde_json::to_value(encoding).unwrap();
            assert_eq!(name.as_str().unwrap().parse(), Ok(encoding));
        }
        assert!("md5".parse::<HmacAlgorithm>().is_err());
        assert!("HEX".parse::<SignatureEncoding>().is_err());
    }
    use http::{HeaderMap, HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn check(
        scheme: Scheme,
        secret: &str,
        url: &str,
        pairs: &[(&str, &str)],
        body: &[u8],
        now: i64,
    ) -> Result<(), VerifyError> {
        let verifier = Verifier::new(scheme, vec![secret.to_string()], 300).unwrap();
        let map = headers(pairs);
        verifier.verify(
            &Request {
                url,
                headers: &map,
                body,
            },
            now,
        )
    }

    // ---- Golden vectors of ecosystem.md §3 ----

    #[test]
    fn golden_standard_webhooks() {
        let pairs = [
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"),
            ("webhook-timestamp", "1614265330"),
            (
                "webhook-signature",
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
        ];
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            check(
                Scheme::StandardWebhooks,
                secret,
                "",
                &pairs,
                body,
                1614265330
            ),
            Ok(())
        );
        // Same request, different body.
        assert_eq!(
            check(
                Scheme::StandardWebhooks,
                secret,
                "",
                &pairs,
                b"{}",
                1614265330
            ),
            Err(VerifyError::SignatureMismatch)
        );
        // Valid signature, but stale.
        assert_eq!(
            check(
                Scheme::StandardWebhooks,
                secret,
                "",
                &pairs,
                body,
                1614265330 + 301
            )
            .unwrap_err()
            .code(),
            "timestamp_out_of_tolerance"
        );
    }

    #[test]
    fn golden_github() {
        let pairs = [(
            "X-Hub-Signature-256",
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        )];
        let secret = "It's a Secret to Everybody";
        assert_eq!(
            check(Scheme::GitHub, secret, "", &pairs, b"Hello, World!", 0),
            Ok(())
        );
        assert_eq!(
            check(Scheme::GitHub, secret, "", &pairs, b"Hello, World?", 0),
            Err(VerifyError::SignatureMismatch)
        );
        // Uppercase hex decodes to the same bytes.
        let upper = [(
            "X-Hub-Signature-256",
            "sha256=757107EA0EB2509FC211221CCE984B8A37570B6D7586C22C46F4379C8B043E17",
        )];
        assert_eq!(
            check(Scheme::GitHub, secret, "", &upper, b"Hello, World!", 0),
            Ok(())
        );
        let no_prefix = [(
            "X-Hub-Signature-256",
            "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        )];
        assert_eq!(
            check(Scheme::GitHub, secret, "", &no_prefix, b"Hello, World!", 0)
                .unwrap_err()
                .code(),
            "malformed_signature"
        );
    }

    #[test]
    fn golden_stripe() {
        let header =
            "t=1700000000,v1=c89214b5b5da833daed6f0b8c5bb6bd58cea9022bd80ccc78230f3942d632925";
        let pairs = [("Stripe-Signature", header)];
        let body = br#"{"id":"evt_1"}"#;
        // The whole whsec_ string is the key: this proves it is not base64-decoded.
        assert_eq!(
            check(Scheme::Stripe, "whsec_test", "", &pairs, body, 1700000000),
            Ok(())
        );
        assert_eq!(
            check(
                Scheme::Stripe,
                "whsec_test",
                "",
                &pairs,
                body,
                1700000000 - 301
            )
            .unwrap_err()
            .code(),
            "timestamp_out_of_tolerance"
        );
        // Only v0 with the right MAC: v0 does not count.
        let v0_only = [(
            "Stripe-Signature",
            "t=1700000000,v0=c89214b5b5da833daed6f0b8c5bb6bd58cea9022bd80ccc78230f3942d632925",
        )];
        assert_eq!(
            check(Scheme::Stripe, "whsec_test", "", &v0_only, body, 1700000000)
                .unwrap_err()
                .code(),
            "malformed_signature"
        );
    }

    #[test]
    fn golden_slack() {
        let pairs = [
            ("X-Slack-Request-Timestamp", "1531420618"),
            (
                "X-Slack-Signature",
                "v0=2abb93eb2a4c84c7a0c6bee974ec55ead7be6c67e71c1f78a343520bc07b0a07",
            ),
        ];
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        assert_eq!(
            check(
                Scheme::Slack,
                secret,
                "",
                &pairs,
                b"token=abc",
                1531420618 + 300
            ),
            Ok(())
        );
        assert_eq!(
            check(
                Scheme::Slack,
                secret,
                "",
                &pairs,
                b"token=abc",
                1531420618 + 301
            )
            .unwrap_err()
            .code(),
            "timestamp_out_of_tolerance"
        );
    }

    #[test]
    fn golden_twilio() {
        let pairs = [("X-Twilio-Signature", "ZbvFn4TPqIVpWK0nwvw+FeoyCJ0=")];
        // Parameter order in the body does not matter: they are sorted.
        let body = b"To=%2B1555&Body=hi&From=%2B1666";
        let url = "https://example.com/hook?x=1";
        assert_eq!(check(Scheme::Twilio, "12345", url, &pairs, body, 0), Ok(()));
        // The URL is signed.
        assert_eq!(
            check(
                Scheme::Twilio,
                "12345",
                "https://example.com/hook?x=2",
                &pairs,
                body,
                0
            ),
            Err(VerifyError::SignatureMismatch)
        );
        // Default port spelled out: still the same request.
        assert_eq!(
            check(
                Scheme::Twilio,
                "12345",
                "https://example.com:443/hook?x=1",
                &pairs,
                body,
                0
            ),
            Ok(())
        );
    }

    #[test]
    fn golden_shopify() {
        let pairs = [(
            "X-Shopify-Hmac-Sha256",
            "1GxccvotnkOedTjSm8S0m/VA3yAUKshyqT52ccNYHj4=",
        )];
        assert_eq!(
            check(Scheme::Shopify, "shpss_test", "", &pairs, br#"{"id":1}"#, 0),
            Ok(())
        );
        assert_eq!(
            check(Scheme::Shopify, "shpss_test", "", &pairs, br#"{"id":2}"#, 0),
            Err(VerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn golden_pagerduty() {
        let good = "v1=7410044ee7767def8e92192a5c4ef59d4a2ae7130e0550357e2ac884bc345c63";
        let other = "v1=0000000000000000000000000000000000000000000000000000000000000000";
        let body = br#"{"event":{"id":"01"}}"#;
        for value in [
            good.to_string(),
            format!("{other},{good}"),
            format!("{good}, {other}"),
        ] {
            let pairs = [("X-PagerDuty-Signature", value.as_str())];
            assert_eq!(
                check(Scheme::PagerDuty, "pd_secret", "", &pairs, body, 0),
                Ok(()),
                "{value}"
            );
        }
        let pairs = [("X-PagerDuty-Signature", other)];
        assert_eq!(
            check(Scheme::PagerDuty, "pd_secret", "", &pairs, body, 0),
            Err(VerifyError::SignatureMismatch)
        );
    }

    #[test]
    fn generic_hmac_github_legacy_sha1() {
        // GitHub's legacy header, configured as a generic scheme.
        let scheme = Scheme::Hmac(GenericHmac {
            header: "X-Hub-Signature".to_string(),
            algorithm: HmacAlgorithm::Sha1,
            encoding: SignatureEncoding::Hex,
            prefix: Some("sha1=".to_string()),
        });
        let mac = hex::encode(sign::hmac(
            HmacAlgorithm::Sha1,
            b"It's a Secret to Everybody",
            &[b"Hello, World!"],
        ));
        let secret = "It's a Secret to Everybody";
        let with_prefix = format!("sha1={mac}");
        let pairs = [("x-hub-signature", with_prefix.as_str())];
        assert_eq!(
            check(scheme.clone(), secret, "", &pairs, b"Hello, World!", 0),
            Ok(())
        );
        // The configured prefix is required.
        let pairs = [("x-hub-signature", mac.as_str())];
        assert_eq!(
            check(scheme, secret, "", &pairs, b"Hello, World!", 0)
                .unwrap_err()
                .code(),
            "malformed_signature"
        );
    }

    // ---- Configuration ----

    #[test]
    fn spec_round_trips_for_every_scheme() {
        for name in SCHEME_NAMES {
            let spec = VerifySpec {
                scheme: name.to_string(),
                header: (name == "hmac").then(|| "X-Sig".to_string()),
                ..VerifySpec::default()
            };
            let scheme = Scheme::from_spec(&spec).unwrap();
            assert_eq!(scheme.name(), name);
            assert_eq!(Scheme::from_spec(&scheme.to_spec()).unwrap(), scheme);
        }
    }

    #[test]
    fn spec_json_shape() {
        let scheme: Scheme = serde_json::from_str(r#"{"scheme":"stripe"}"#).unwrap();
        assert_eq!(scheme, Scheme::Stripe);
        assert_eq!(
            serde_json::to_string(&Scheme::GitHub).unwrap(),
            r#"{"scheme":"github"}"#
        );

        let scheme: Scheme =
            serde_json::from_str(r#"{"scheme":"hmac","header":"X-Signature"}"#).unwrap();
        assert_eq!(
            scheme,
            Scheme::Hmac(GenericHmac {
                header: "X-Signature".to_string(),
                algorithm: HmacAlgorithm::Sha256,
                encoding: SignatureEncoding::Hex,
                prefix: None,
            })
        );
        let scheme: Scheme = serde_json::from_str(
            r#"{"scheme":"hmac","header":"X-Sig","algorithm":"sha512","encoding":"base64","prefix":"sha512="}"#,
        )
        .unwrap();
        assert_eq!(
            scheme,
            Scheme::Hmac(GenericHmac {
                header: "X-Sig".to_string(),
                algorithm: HmacAlgorithm::Sha512,
                encoding: SignatureEncoding::Base64,
                prefix: Some("sha512=".to_string()),
            })
        );
        assert_eq!(
            serde_json::to_value(&scheme).unwrap(),
            serde_json::json!({"scheme":"hmac","header":"X-Sig","algorithm":"sha512","encoding":"base64","prefix":"sha512="})
        );
    }

    #[test]
    fn spec_flattens_into_a_source_config() {
        #[derive(Deserialize)]
        struct Source {
            secrets: Vec<String>,
            #[serde(flatten)]
            verify: Scheme,
        }
        let source: Source = serde_json::from_str(
            r#"{"secrets":["s"],"scheme":"hmac","header":"X-Sig","algorithm":"sha1"}"#,
        )
        .unwrap();
        assert_eq!(source.secrets, vec!["s".to_string()]);
        assert!(matches!(
            source.verify,
            Scheme::Hmac(GenericHmac {
                algorithm: HmacAlgorithm::Sha1,
                ..
            })
        ));
    }

    #[test]
    fn spec_errors() {
        let err = serde_json::from_str::<Scheme>(r#"{"scheme":"svix"}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown signature scheme"),
            "{err}"
        );
        let err = serde_json::from_str::<Scheme>(r#"{"scheme":"hmac"}"#).unwrap_err();
        assert!(err.to_string().contains("header"), "{err}");
        let err =
            serde_json::from_str::<Scheme>(r#"{"scheme":"github","header":"X"}"#).unwrap_err();
        assert!(err.to_string().contains("only apply"), "{err}");
        assert!(
            serde_json::from_str::<Scheme>(r#"{"scheme":"hmac","header":"X","algorithm":"md5"}"#)
                .is_err()
        );
        assert!(
            serde_json::from_str::<Scheme>(r#"{"scheme":"hmac","header":"bad header"}"#).is_err()
        );
    }

    #[test]
    fn verifier_construction_errors() {
        assert!(Verifier::new(Scheme::GitHub, vec![], 300).is_err());
        assert!(Verifier::new(Scheme::GitHub, vec![String::new()], 300).is_err());
        assert!(Verifier::new(Scheme::GitHub, vec!["s".into()], -1).is_err());
        let err = Verifier::new(
            Scheme::StandardWebhooks,
            vec![
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
                "whsec_%%secret%%".into(),
            ],
            300,
        )
        .unwrap_err();
        assert!(err.contains("#2"), "{err}");
        assert!(!err.contains("%%secret%%"), "{err}");
        // Stripe secrets are not decoded, so a non-base64 whsec_ secret is fine.
        assert!(Verifier::new(Scheme::Stripe, vec!["whsec_%%".into()], 300).is_ok());
        let verifier = Verifier::new(Scheme::Stripe, vec!["whsec_topsecret".into()], 300).unwrap();
        assert!(!format!("{verifier:?}").contains("topsecret"));
    }

    #[test]
    fn delivery_ids() {
        let id = |scheme: Scheme, pairs: &[(&str, &str)], body: &str| {
            let body = serde_json::from_str::<serde_json::Value>(body).ok();
            scheme
                .delivery_id()
                .and_then(|source| source.find(&headers(pairs), body.as_ref()))
        };
        // Standard Webhooks: Svix's name first, as its libraries read it, else the standard one.
        let both = [("svix-id", "msg_svix"), ("webhook-id", "msg_std")];
        assert_eq!(
            id(Scheme::StandardWebhooks, &both, ""),
            Some("msg_svix".into())
        );
        let standard = [("webhook-id", "msg_std")];
        assert_eq!(
            id(Scheme::StandardWebhooks, &standard, ""),
            Some("msg_std".into())
        );
        assert_eq!(id(Scheme::StandardWebhooks, &[], ""), None);
        let github = [("x-github-delivery", "72d3162e")];
        assert_eq!(id(Scheme::GitHub, &github, "{}"), Some("72d3162e".into()));
        let shopify = [
            ("x-shopify-webhook-id", "b54557e4"),
            ("x-shopify-event-id", "e1"),
        ];
        assert_eq!(id(Scheme::Shopify, &shopify, "{}"), Some("b54557e4".into()));
        let twilio = [("i-twilio-idempotency-token", "tok")];
        assert_eq!(id(Scheme::Twilio, &twilio, ""), Some("tok".into()));
        assert_eq!(
            id(Scheme::Stripe, &[], r#"{"id":"evt_1"}"#),
            Some("evt_1".into())
        );
        assert_eq!(
            id(Scheme::PagerDuty, &[], r#"{"event":{"id":"01ABC"}}"#),
            Some("01ABC".into())
        );
        let slack =
            r#"{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}"#;
        assert_eq!(id(Scheme::Slack, &[], slack), Some("Ev08MFMKH6".into()));
        // Numbers are ids too; anything else, or no JSON, is none.
        assert_eq!(id(Scheme::Stripe, &[], r#"{"id":42}"#), Some("42".into()));
        assert_eq!(id(Scheme::Stripe, &[], r#"{"id":""}"#), None);
        assert_eq!(id(Scheme::Stripe, &[], r#"{"id":{"a":1}}"#), None);
        assert_eq!(id(Scheme::Slack, &[], "payload=%7B%7D"), None);
        let generic = Scheme::Hmac(GenericHmac {
            header: "X-Sig".into(),
            algorithm: HmacAlgorithm::Sha256,
            encoding: SignatureEncoding::Hex,
            prefix: None,
        });
        assert_eq!(generic.delivery_id(), None);
    }

    #[test]
    fn slack_challenges() {
        let handshake = br#"{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
        assert_eq!(
            slack_challenge(handshake).as_deref(),
            Some("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
        );
        assert_eq!(
            slack_challenge(br#"{"type":"event_callback","challenge":"x"}"#),
            None
        );
        assert_eq!(slack_challenge(br#"{"type":"url_verification"}"#), None);
        assert_eq!(
            slack_challenge(br#"{"type":"url_verification","challenge":7}"#),
            None
        );
        assert_eq!(slack_challenge(b"type=url_verification&challenge=x"), None);
    }

    #[test]
    fn standard_webhooks_takes_svix_headers_each_before_its_standard_name() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let signer = StandardSigner::new(secret).unwrap();
        let body = br#"{"type":"ping"}"#;
        let good = signer.sign("msg_1", 1700000000, body);
        let other = signer.sign("msg_2", 1700000000, body);
        let run = |pairs: &[(&str, &str)]| {
            check(
                Scheme::StandardWebhooks,
                secret,
                "",
                pairs,
                body,
                1700000000,
            )
        };
        let svix = [
            ("svix-id", "msg_1"),
            ("svix-timestamp", "1700000000"),
            ("svix-signature", good.as_str()),
        ];
        assert_eq!(run(&svix), Ok(()));
        // Mixed names, as Svix's libraries allow.
        let mixed = [
            ("svix-id", "msg_1"),
            ("webhook-timestamp", "1700000000"),
            ("svix-signature", good.as_str()),
        ];
        assert_eq!(run(&mixed), Ok(()));
        // The svix- name wins: a valid webhook-* set does not rescue a wrong svix-signature, and
        // the id signed must be the one under svix-id.
        let shadowed = [
            ("svix-id", "msg_1"),
            ("svix-timestamp", "1700000000"),
            ("svix-signature", other.as_str()),
            ("webhook-id", "msg_1"),
            ("webhook-timestamp", "1700000000"),
            ("webhook-signature", good.as_str()),
        ];
        assert_eq!(run(&shadowed), Err(VerifyError::SignatureMismatch));
        let wrong_id = [
            ("svix-id", "msg_2"),
            ("webhook-id", "msg_1"),
            ("svix-timestamp", "1700000000"),
            ("svix-signature", good.as_str()),
        ];
        assert_eq!(run(&wrong_id), Err(VerifyError::SignatureMismatch));
        let err = run(&[
            ("svix-timestamp", "1700000000"),
            ("svix-signature", good.as_str()),
        ])
        .unwrap_err();
        assert_eq!(err.to_string(), "missing webhook-id (or svix-id) header");
        let err = run(&[
            ("svix-id", "msg_1"),
            ("svix-timestamp", "soon"),
            ("svix-signature", good.as_str()),
        ])
        .unwrap_err();
        assert_eq!(
            err,
            VerifyError::MalformedSignature {
                header: "svix-timestamp".into(),
                reason: "timestamp is not Unix seconds"
            }
        );
    }

    // ---- Details ----

    #[test]
    fn twilio_url_variants_cover_default_ports() {
        assert_eq!(
            twilio_url_variants("https://example.com/hook?x=1"),
            [
                "https://example.com/hook?x=1",
                "https://example.com:443/hook?x=1"
            ]
        );
        assert_eq!(
            twilio_url_variants("http://example.com?x=1"),
            ["http://example.com?x=1", "http://example.com:80?x=1"]
        );
        assert_eq!(
            twilio_url_variants("https://example.com:443/hook"),
            ["https://example.com:443/hook", "https://example.com/hook"]
        );
        assert_eq!(
            twilio_url_variants("https://user:pw@example.com/a"),
            [
                "https://user:pw@example.com/a",
                "https://user:pw@example.com:443/a"
            ]
        );
        assert_eq!(
            twilio_url_variants("https://[::1]:8443/a"),
            ["https://[::1]:8443/a", "https://[::1]/a"]
        );
        assert_eq!(
            twilio_url_variants("https://[::1]/a"),
            ["https://[::1]/a", "https://[::1]:443/a"]
        );
        assert_eq!(twilio_url_variants("not a url"), ["not a url"]);
    }

    #[test]
    fn twilio_settings_header() {
        assert_eq!(twilio_algorithm(""), Ok(HmacAlgorithm::Sha1));
        assert_eq!(
            twilio_algorithm("key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"),
            Ok(HmacAlgorithm::Sha256)
        );
        assert_eq!(
            twilio_algorithm("algorithm=hmac_sha1"),
            Ok(HmacAlgorithm::Sha1)
        );
        assert_eq!(
            twilio_algorithm("algorithm=HMAC_MD5").unwrap_err().code(),
            "malformed_signature"
        );
    }

    #[test]
    fn timestamp_error_message_and_bounds() {
        let verifier = Verifier::new(Scheme::Slack, vec!["s".into()], 300).unwrap();
        assert!(verifier.check_timestamp(1000, 1300).is_ok());
        assert!(verifier.check_timestamp(1300, 1000).is_ok());
        let err = verifier.check_timestamp(1000, 1301).unwrap_err();
        assert_eq!(
            err.to_string(),
            "timestamp 1000 is 301 s before now (1301); tolerance is 300 s"
        );
        let err = verifier.check_timestamp(1301, 1000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "timestamp 1301 is 301 s after now (1000); tolerance is 300 s"
        );
        // No overflow at the extremes.
        assert!(verifier.check_timestamp(i64::MAX, i64::MIN).is_err());
    }

    #[test]
    fn header_lookup_is_case_insensitive_and_timestamps_must_be_digits() {
        let secret = "8f742231b10e8888abcd99yyyzzz85a5";
        let sig = "v0=2abb93eb2a4c84c7a0c6bee974ec55ead7be6c67e71c1f78a343520bc07b0a07";
        let pairs = [
            ("x-slack-request-timestamp", "1531420618"),
            ("x-slack-signature", sig),
        ];
        assert_eq!(
            check(Scheme::Slack, secret, "", &pairs, b"token=abc", 1531420618),
            Ok(())
        );
        let pairs = [
            ("x-slack-request-timestamp", "-1"),
            ("x-slack-signature", sig),
        ];
        assert_eq!(
            check(Scheme::Slack, secret, "", &pairs, b"token=abc", 1531420618),
            Err(VerifyError::MalformedSignature {
                header: "x-slack-request-timestamp".into(),
                reason: "timestamp is not Unix seconds"
            })
        );
    }
}
