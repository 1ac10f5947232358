//! Webhook endpoints: definitions compiled into verifiers and expressions ([`Endpoint`]), the
//! set of them the server serves ([`Registry`]), and the ingress route ([`ingress`]).
//!
//! Definitions come from the config file (applied at every start) and the admin API; both are
//! stored, so endpoints defined over the API survive restarts. Secrets are read from their
//! environment variables or files when a definition is compiled.

pub mod ingress;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use sluice_core::queue::validate_queue_name;
use sluice_webhooks::expr::Expr;
use sluice_webhooks::verify::{
    DeliveryId, HmacAlgorithm, SCHEME_NAMES, Scheme, SignatureEncoding, Verifier,
};
use sluice_wire::{IdempotencySpec, VerifySpec, WebhookSpec, WebhookStatsOut};

use crate::secrets;

/// Default largest webhook body.
pub const MAX_BODY_BYTES_DEFAULT: usize = 1024 * 1024;
/// Largest body an endpoint may accept.
pub const MAX_BODY_BYTES_MAX: usize = 10 * 1024 * 1024;
/// Default clock tolerance of timestamped schemes.
pub const TOLERANCE_S_DEFAULT: i64 = 300;

/// Where an endpoint takes a message's idempotency key from.
#[derive(Debug, Clone)]
pub enum IdSource {
    /// A request header (case-insensitive).
    Header(String),
    /// An expression over the event.
    Expression(Expr),
    /// The sender's own delivery id (the default: see [`Scheme::delivery_id`]).
    Delivery(DeliveryId),
    /// No key: every delivery is a new message.
    None,
}

/// Counts of one endpoint since start.
#[derive(Debug, Default)]
pub struct EndpointStats {
    received: AtomicU64,
    accepted: AtomicU64,
    duplicates: AtomicU64,
    ignored: AtomicU64,
    dead_lettered: AtomicU64,
    rejected: Mutex<BTreeMap<String, u64>>,
}

/// What became of one request.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    Accepted,
    Duplicate,
    Ignored,
    DeadLettered,
    Rejected(&'static str),
}

impl EndpointStats {
    /// Counts a request and its outcome.
    pub fn count(&self, outcome: Outcome) {
        self.received.fetch_add(1, Ordering::Relaxed);
        let counter = match outcome {
            Outcome::Accepted => &self.accepted,
            Outcome::Duplicate => &self.duplicates,
            Outcome::Ignored => &self.ignored,
            Outcome::DeadLettered => &self.dead_lettered,
            Outcome::Rejected(reason) => {
                *self.rejected.lock().entry(reason.to_owned()).or_default() += 1;
                return;
            }
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The wire form.
    pub fn out(&self) -> WebhookStatsOut {
        WebhookStatsOut {
            received: self.received.load(Ordering::Relaxed),
            accepted: self.accepted.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            ignored: self.ignored.load(Ordering::Relaxed),
            dead_lettered: self.dead_lettered.load(Ordering::Relaxed),
            rejected: self.rejected.lock().clone(),
        }
    }
}

/// A compiled endpoint.
#[derive(Debug)]
pub struct Endpoint {
    /// Its name (the path segment of `/hooks/{name}`).
    pub name: String,
    /// The definition it was compiled from.
    pub spec: WebhookSpec,
    /// `None` for `scheme = "none"`.
    pub verifier: Option<Verifier>,
    /// Idempotency key source.
    pub id_source: IdSource,
    /// Keep events whose first output is truthy.
    pub filter: Option<Expr>,
    /// The stored body.
    pub transform: Option<Expr>,
    /// The message key.
    pub key: Option<Expr>,
    /// The message priority.
    pub priority: Option<Expr>,
    /// Largest body.
    pub max_body_bytes: usize,
    /// Counters.
    pub stats: EndpointStats,
}

impl Endpoint {
    /// True when any expression runs on the event.
    pub fn has_expressions(&self) -> bool {
        self.filter.is_some()
            || self.transform.is_some()
            || self.key.is_some()
            || self.priority.is_some()
            || matches!(self.id_source, IdSource::Expression(_))
    }

    /// True when the idempotency key is read from the JSON body (which must then be parsed).
    pub fn id_from_body(&self) -> bool {
        matches!(self.id_source, IdSource::Delivery(DeliveryId::BodyField(_)))
    }

    /// True for Slack endpoints, which answer Slack's `url_verification` handshake.
    pub fn answers_slack_handshake(&self) -> bool {
        self.verifier
            .as_ref()
            .is_some_and(|verifier| *verifier.scheme() == Scheme::Slack)
    }

    /// Compiles a definition: the scheme, its secrets (read now), every expression. The error
    /// names the field and what is wrong with it.
    pub fn compile(name: &str, spec: WebhookSpec) -> Result<Self, String> {
        validate_queue_name(name).map_err(|e| e.replace("queue name", "webhook name"))?;
        validate_queue_name(&spec.queue).map_err(|e| format!("queue: {e}"))?;
        if let Some(topic) = &spec.topic {
            validate_queue_name(topic)
                .map_err(|e| format!("topic: {}", e.replace("queue name", "topic name")))?;
        }
        let (scheme, verifier) = compile_verify(&spec.verify)?;
        let compile = |field: &str, source: &Option<String>| {
            source
                .as_deref()
                .map(|source| Expr::compile(source).map_err(|e| format!("{field}: {e}")))
                .transpose()
        };
        let id_source = match &spec.idempotency {
            Some(IdempotencySpec {
                header: Some(header),
                expression: None,
            }) => IdSource::Header(header.to_ascii_lowercase()),
            Some(IdempotencySpec {
                header: None,
                expression: Some(source),
            }) => IdSource::Expression(
                Expr::compile(source).map_err(|e| format!("idempotency.expression: {e}"))?,
            ),
            Some(_) => {
                return Err("idempotency: give header or expression, not both".into());
            }
            // Read natively, not by an expression: no worker round trip per event.
            None => scheme
                .as_ref()
                .and_then(Scheme::delivery_id)
                .map_or(IdSource::None, IdSource::Delivery),
        };
        let max_body_bytes = spec.max_body_bytes.unwrap_or(MAX_BODY_BYTES_DEFAULT);
        if !(1..=MAX_BODY_BYTES_MAX).contains(&max_body_bytes) {
            return Err(format!(
                "max_body_bytes must be between 1 and {MAX_BODY_BYTES_MAX}, got {max_body_bytes}"
            ));
        }
        if let Some(url) = &spec.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "public_url: {url:?} is not an http:// or https:// URL"
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            filter: compile("filter", &spec.filter)?,
            transform: compile("transform", &spec.transform)?,
            key: compile("key", &spec.key)?,
            priority: compile("priority", &spec.priority)?,
            verifier,
            id_source,
            max_body_bytes,
            spec,
            stats: EndpointStats::default(),
        })
    }
}

/// The scheme and its verifier (`None` for `scheme = "none"`). The scheme itself is parsed by
/// sluice-webhooks (`Scheme::from_spec`), the one parser of verification specs; this adds only
/// what the server's definition has beyond it: `none`, secrets and the tolerance.
fn compile_verify(spec: &VerifySpec) -> Result<(Option<Scheme>, Option<Verifier>), String> {
    let scheme = match spec.scheme.as_str() {
        "none" => {
            if let Some(field) = hmac_only_fields(spec).first() {
                return Err(format!("verify.{field}: only for scheme \"hmac\""));
            }
            if !spec.secrets.is_empty() {
                return Err("verify.secrets: scheme \"none\" takes no secrets".into());
            }
            return Ok((None, None));
        }
        name if !SCHEME_NAMES.contains(&name) => {
            return Err(format!(
                "verify.scheme: {name:?} is not one of {}, none",
                SCHEME_NAMES.join(", ")
            ));
        }
        _ => Scheme::from_spec(&scheme_spec(spec)?).map_err(|e| format!("verify: {e}"))?,
    };
    if spec.secrets.is_empty() {
        return Err(format!(
            "verify.secrets: scheme {:?} needs at least one secret ({{env = \"NAME\"}} or {{file = \"PATH\"}})",
            spec.scheme
        ));
    }
    let secrets = secrets::resolve_all(&spec.secrets, "verify.secrets")?;
    let tolerance_s = spec.tolerance_s.unwrap_or(TOLERANCE_S_DEFAULT);
    if !(1..=86_400).contains(&tolerance_s) {
        return Err(format!(
            "verify.tolerance_s must be between 1 and 86400, got {tolerance_s}"
        ));
    }
    let verifier = Verifier::new(scheme.clone(), secrets, tolerance_s)
        .map_err(|e| format!("verify.secrets: {e}"))?;
    Ok((Some(scheme), Some(verifier)))
}

/// The fields of `spec` given that only scheme `hmac` takes.
fn hmac_only_fields(spec: &VerifySpec) -> Vec<&'static str> {
    [
        ("header", spec.header.is_some()),
        ("algorithm", spec.algorithm.is_some()),
        ("encoding", spec.encoding.is_some()),
        ("prefix", spec.prefix.is_some()),
    ]
    .into_iter()
    .filter_map(|(field, given)| given.then_some(field))
    .collect()
}

/// The scheme part of a definition in sluice-webhooks' form; `algorithm` and `encoding` are
/// read by its own names (`FromStr`).
fn scheme_spec(spec: &VerifySpec) -> Result<sluice_webhooks::verify::VerifySpec, String> {
    Ok(sluice_webhooks::verify::VerifySpec {
        scheme: spec.scheme.clone(),
        header: spec.header.clone(),
        algorithm: spec
            .algorithm
            .as_deref()
            .map(str::parse::<HmacAlgorithm>)
            .transpose()
            .map_err(|e| format!("verify.algorithm: {e}"))?,
        encoding: spec
            .encoding
            .as_deref()
            .map(str::parse::<SignatureEncoding>)
            .transpose()
            .map_err(|e| format!("verify.encoding: {e}"))?,
        prefix: spec.prefix.clone(),
    })
}

/// The endpoints the server serves, by name.
#[derive(Debug, Default)]
pub struct Registry {
    endpoints: RwLock<HashMap<String, Arc<Endpoint>>>,
}

impl Registry {
    /// The endpoint called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Endpoint>> {
        self.endpoints.read().get(name).cloned()
    }

    /// Every endpoint, by name.
    pub fn list(&self) -> Vec<Arc<Endpoint>> {
        let mut all: Vec<_> = self.endpoints.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Adds or replaces an endpoint (its counters start again); true when it is new.
    pub fn insert(&self, endpoint: Endpoint) -> bool {
        self.endpoints
            .write()
            .insert(endpoint.name.clone(), Arc::new(endpoint))
            .is_none()
    }

    /// Removes an endpoint; true when it existed.
    pub fn remove(&self, name: &str) -> bool {
        self.endpoints.write().remove(name).is_some()
    }

    /// Serves exactly the `stored` definitions (name, definition as stored): an endpoint whose
    /// stored definition did not change is kept with its counters; a changed one is compiled
    /// again; one no longer stored stops being served. A definition that does not compile here
    /// (a secret's variable missing on this node) is not served, with an error in the log.
    pub fn reconcile(&self, stored: Vec<(String, String)>) {
        let mut next = HashMap::with_capacity(stored.len());
        for (name, text) in stored {
            let current = self.get(&name);
            let unchanged = current.as_ref().is_some_and(|endpoint| {
                serde_json::to_string(&endpoint.spec).ok().as_deref() == Some(text.as_str())
            });
            if let (true, Some(endpoint)) = (unchanged, current) {
                next.insert(name, endpoint);
                continue;
            }
            let compiled = serde_json::from_str(&text)
                .map_err(|e| e.to_string())
                .and_then(|spec| Endpoint::compile(&name, spec));
            match compiled {
                Ok(endpoint) => {
                    next.insert(name, Arc::new(endpoint));
                }
                Err(error) => {
                    tracing::error!(webhook = %name, %error, "stored webhook endpoint not served");
                }
            }
        }
        *self.endpoints.write() = next;
    }
}

#[cfg(test)]
mod tests {
    use sluice_webhooks::verify::GenericHmac;

    use super::*;

    fn spec(json: serde_json::Value) -> VerifySpec {
        serde_json::from_value(json).unwrap()
    }

    fn refusal(json: serde_json::Value) -> String {
        compile_verify(&spec(json)).map(|_| ()).unwrap_err()
    }

    /// A generic HMAC definition becomes the scheme sluice-webhooks' own parser makes, with the
    /// algorithm and encoding read by their configuration names.
    #[test]
    fn an_hmac_definition_is_read_by_the_webhooks_parser() {
        let definition = spec(serde_json::json!({
            "scheme": "hmac", "header": "X-Sig", "algorithm": "sha512", "encoding": "base64",
            "prefix": "v1="
        }));
        let scheme = Scheme::from_spec(&scheme_spec(&definition).unwrap()).unwrap();
        assert_eq!(
            scheme,
            Scheme::Hmac(GenericHmac {
                header: "X-Sig".into(),
                algorithm: HmacAlgorithm::Sha512,
                encoding: SignatureEncoding::Base64,
                prefix: Some("v1=".into()),
            })
        );
    }

    /// Each mistake is refused naming its field, before any secret is read.
    #[test]
    fn wrong_definitions_name_their_field() {
        let cases = [
            (serde_json::json!({"scheme": "svix"}), "verify.scheme"),
            (
                serde_json::json!({"scheme": "github", "header": "x"}),
                "header",
            ),
            (
                serde_json::json!({"scheme": "none", "prefix": "x"}),
                "verify.prefix",
            ),
            (
                serde_json::json!({"scheme": "none", "secrets": [{"env": "X"}]}),
                "verify.secrets",
            ),
            (serde_json::json!({"scheme": "hmac"}), "header"),
            (
                serde_json::json!({"scheme": "hmac", "header": "x", "algorithm": "md5"}),
                "verify.algorithm",
            ),
            (
                serde_json::json!({"scheme": "hmac", "header": "x", "encoding": "hex64"}),
                "verify.encoding",
            ),
            (
                serde_json::json!({"scheme": "hmac", "header": "bad header"}),
                "header",
            ),
        ];
        for (definition, field) in cases {
            let error = refusal(definition.clone());
            assert!(error.contains(field), "{definition}: {error}");
        }
        assert!(refusal(serde_json::json!({"scheme": "svix"})).contains("none"));
        assert!(matches!(
            compile_verify(&spec(serde_json::json!({"scheme": "none"}))),
            Ok((None, None))
        ));
    }

    /// What a node serves follows what the store holds: unchanged endpoints keep their
    /// counters, changed ones are compiled again, removed ones go, new ones come.
    #[test]
    fn reconcile_serves_exactly_the_stored_definitions() {
        let text = |queue: &str| {
            serde_json::json!({"queue": queue, "verify": {"scheme": "none"}}).to_string()
        };
        let registry = Registry::default();
        registry.reconcile(vec![
            ("kept".into(), text("a")),
            ("changed".into(), text("a")),
            ("gone".into(), text("a")),
        ]);
        let kept = registry.get("kept").unwrap();
        kept.stats.count(Outcome::Accepted);
        let stored_as = serde_json::to_string(&kept.spec).unwrap();
        registry.reconcile(vec![
            ("kept".into(), stored_as),
            ("changed".into(), text("b")),
            ("new".into(), text("c")),
            ("broken".into(), "{not json".into()),
        ]);
        assert!(
            Arc::ptr_eq(&kept, &registry.get("kept").unwrap()),
            "kept with its counters"
        );
        assert_eq!(registry.get("changed").unwrap().spec.queue, "b");
        assert_eq!(registry.get("new").unwrap().spec.queue, "c");
        let names: Vec<String> = registry.list().iter().map(|e| e.name.clone()).collect();
        assert_eq!(
            names,
            ["changed", "kept", "new"],
            "gone and broken are not served"
        );
    }
}
