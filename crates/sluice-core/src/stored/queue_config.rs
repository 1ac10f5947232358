//! A queue's settings at rest: the JSON every store keeps for a queue (the SQLite store's
//! `queues.config` column).
//!
//! The API's shapes (`QueueSpec`, `QueueConfigOut`, `PushSpec` in `sluice_wire`) may
//! change with the API; this form changes only with the schema version, so a renamed or
//! retyped API field can neither change what is written nor make an existing row unreadable.
//! Field names and their order are fixed to what earlier versions wrote (the keys of every
//! object sorted, `dead_letter_queue: ""` for none, `null` for an unset limit); the tests below
//! hold literal rows to that.
//!
//! Reading is lenient where old rows need it: a field a row lacks (written before the field
//! existed) takes the queue's default. Values are not range-checked again: they were checked
//! when the queue was defined, and a limit tightened since must not reset a stored queue.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::queue::{Backoff, Dedup, MessageSchema, OnExpire, Ordering, QueueConfig, RateLimit};
use serde::{Deserialize, Serialize};
use sluice_wire::{PushSpec, SecretRef};

/// One `queues.config` value. Fields are in key order, which is the order they are written in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredQueueConfig {
    #[serde(default)]
    backoff: Option<StoredBackoff>,
    /// The dead-letter queue; `""` for none (a missing field means the default `<name>.dlq`).
    #[serde(default)]
    dead_letter_queue: Option<String>,
    /// `content`; absent for `id` (the default, and rows written before the option).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dedup: Option<String>,
    #[serde(default)]
    dedup_window_ms: Option<i64>,
    /// Absent (0) in rows written before queues had a default delay, and when it is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delay_ms: Option<i64>,
    /// Absent when 0 (and in rows written before the option).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_acked_ms: Option<i64>,
    #[serde(default)]
    max_age_ms: Option<i64>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    max_depth: Option<u64>,
    #[serde(default)]
    max_in_flight: Option<u32>,
    #[serde(default)]
    max_message_bytes: Option<usize>,
    /// `drop` or `dead_letter`.
    #[serde(default)]
    on_expire: Option<String>,
    /// `unordered`, `fifo` or `per_key`.
    #[serde(default)]
    ordering: Option<String>,
    /// Absent when empty (and in rows written before there were any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    protocol_attributes: BTreeMap<String, String>,
    #[serde(default)]
    push: Option<StoredPush>,
    #[serde(default)]
    rate_limit: Option<StoredRateLimit>,
    /// The JSON Schema document as given.
    #[serde(default)]
    schema: Option<serde_json::Value>,
    /// Absent when empty (and in rows written before there were any).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tags: BTreeMap<String, String>,
    #[serde(default)]
    visibility_timeout_ms: Option<i64>,
}

/// Retry backoff as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredBackoff {
    #[serde(default)]
    factor: Option<f64>,
    #[serde(default)]
    initial_ms: Option<i64>,
    #[serde(default)]
    jitter: Option<bool>,
    #[serde(default)]
    max_ms: Option<i64>,
}

/// Delivery rate limit as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredRateLimit {
    /// Missing in a row: one second's worth, at least 1 (the API's default).
    #[serde(default)]
    burst: Option<u32>,
    per_second: f64,
}

/// A push destination as stored: unset fields are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredPush {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    headers: Option<BTreeMap<String, String>>,
    /// The method's name as defined (checked when the destination is defined and when its
    /// worker starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_client_errors: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret_path: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    signing_secret: Option<StoredSecretRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    transform: Option<String>,
    url: String,
}

/// Where a push signing secret comes from (never the secret itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredSecretRef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file: Option<String>,
}

impl StoredQueueConfig {
    /// The column's text for `config`.
    pub fn to_json(config: &QueueConfig) -> String {
        // Infallible: string keys, no maps with other keys, no custom serializers.
        serde_json::to_string(&Self::from(config)).unwrap_or_default()
    }

    /// Parses a column's text.
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The settings of queue `name`: what the row sets over the queue's defaults. A schema
    /// this version no longer compiles (a pattern only a backtracking regex engine could run,
    /// stored by an older version) is dropped with an error in the log, so the queue keeps
    /// every other setting (its dead-letter queue, its push destination) until an admin defines
    /// a schema again. Fails only on an ordering or expiry action this version does not know.
    pub fn into_config(self, name: &str) -> Result<QueueConfig, String> {
        let mut config = QueueConfig::defaults_for(name);
        if let Some(ms) = self.visibility_timeout_ms {
            config.visibility_timeout_ms = ms;
        }
        if let Some(max_attempts) = self.max_attempts {
            config.max_attempts = max_attempts;
        }
        if let Some(backoff) = self.backoff {
            config.backoff = backoff.over(config.backoff);
        }
        if let Some(dlq) = self.dead_letter_queue {
            config.dead_letter_queue = (!dlq.is_empty()).then_some(dlq);
        }
        if let Some(bytes) = self.max_message_bytes {
            config.max_message_bytes = bytes;
        }
        if let Some(ordering) = self.ordering {
            config.ordering = Ordering::parse(&ordering)
                .ok_or_else(|| format!("ordering: {ordering:?} is not known"))?;
        }
        if let Some(ms) = self.dedup_window_ms {
            config.dedup_window_ms = ms;
        }
        if let Some(dedup) = self.dedup {
            config.dedup =
                Dedup::parse(&dedup).ok_or_else(|| format!("dedup: {dedup:?} is not known"))?;
        }
        if let Some(ms) = self.max_age_ms {
            config.max_age_ms = ms;
        }
        config.keep_acked_ms = self.keep_acked_ms.unwrap_or(0);
        if let Some(on_expire) = self.on_expire {
            config.on_expire = OnExpire::parse(&on_expire)
                .ok_or_else(|| format!("on_expire: {on_expire:?} is not known"))?;
        }
        config.max_depth = self.max_depth.filter(|depth| *depth > 0);
        config.max_in_flight = self.max_in_flight.filter(|in_flight| *in_flight > 0);
        config.rate_limit = self.rate_limit.and_then(StoredRateLimit::into_limit);
        config.schema = self.schema.and_then(|schema| compile_schema(name, schema));
        config.push = self.push.map(|push| Arc::new(push.into()));
        config.delay_ms = self.delay_ms.unwrap_or(0);
        config.tags = self.tags;
        config.protocol_attributes = self.protocol_attributes;
        Ok(config)
    }
}

/// A stored schema compiled; `null` is none, and one that no longer compiles is dropped.
fn compile_schema(name: &str, schema: serde_json::Value) -> Option<Arc<MessageSchema>> {
    if schema.is_null() {
        return None;
    }
    match MessageSchema::compile(schema) {
        Ok(schema) => Some(Arc::new(schema)),
        Err(error) => {
            tracing::error!(queue = %name, %error, "stored schema no longer accepted; the queue runs without a schema until it is defined again");
            None
        }
    }
}

impl From<&QueueConfig> for StoredQueueConfig {
    fn from(config: &QueueConfig) -> Self {
        let backoff = &config.backoff;
        Self {
            backoff: Some(StoredBackoff {
                factor: Some(backoff.factor),
                initial_ms: Some(backoff.initial_ms),
                jitter: Some(backoff.jitter),
                max_ms: Some(backoff.max_ms),
            }),
            dead_letter_queue: Some(config.dead_letter_queue.clone().unwrap_or_default()),
            dedup: (config.dedup != Dedup::Id).then(|| config.dedup.as_str().to_owned()),
            dedup_window_ms: Some(config.dedup_window_ms),
            delay_ms: (config.delay_ms != 0).then_some(config.delay_ms),
            keep_acked_ms: (config.keep_acked_ms != 0).then_some(config.keep_acked_ms),
            max_age_ms: Some(config.max_age_ms),
            max_attempts: Some(config.max_attempts),
            max_depth: config.max_depth,
            max_in_flight: config.max_in_flight,
            max_message_bytes: Some(config.max_message_bytes),
            on_expire: Some(config.on_expire.as_str().to_owned()),
            ordering: Some(config.ordering.as_str().to_owned()),
            protocol_attributes: config.protocol_attributes.clone(),
            push: config.push.as_deref().map(StoredPush::from),
            rate_limit: config.rate_limit.map(|limit| StoredRateLimit {
                burst: Some(limit.burst),
                per_second: limit.per_second,
            }),
            schema: config.schema.as_ref().map(|schema| schema.source().clone()),
            tags: config.tags.clone(),
            visibility_timeout_ms: Some(config.visibility_timeout_ms),
        }
    }
}

impl StoredBackoff {
    /// The stored fields over `base` (the default backoff).
    fn over(self, base: Backoff) -> Backoff {
        Backoff {
            initial_ms: self.initial_ms.unwrap_or(base.initial_ms),
            max_ms: self.max_ms.unwrap_or(base.max_ms),
            factor: self.factor.unwrap_or(base.factor),
            jitter: self.jitter.unwrap_or(base.jitter),
        }
    }
}

impl StoredRateLimit {
    /// The limit; none for `per_second` 0 (the API's way to turn it off).
    fn into_limit(self) -> Option<RateLimit> {
        if self.per_second <= 0.0 {
            return None;
        }
        let burst = self
            .burst
            .unwrap_or_else(|| self.per_second.ceil().max(1.0) as u32);
        Some(RateLimit {
            per_second: self.per_second,
            burst,
        })
    }
}

impl From<&PushSpec> for StoredPush {
    fn from(push: &PushSpec) -> Self {
        Self {
            concurrency: push.concurrency,
            headers: push.headers.clone(),
            method: push.method.clone(),
            retry_client_errors: push.retry_client_errors,
            secret_path: push.secret_path,
            signing_secret: push.signing_secret.as_ref().map(|secret| StoredSecretRef {
                env: secret.env.clone(),
                file: secret.file.clone(),
            }),
            timeout_ms: push.timeout_ms,
            transform: push.transform.clone(),
            url: push.url.clone(),
        }
    }
}

impl From<StoredPush> for PushSpec {
    fn from(push: StoredPush) -> Self {
        PushSpec {
            url: push.url,
            method: push.method,
            headers: push.headers,
            timeout_ms: push.timeout_ms,
            transform: push.transform,
            signing_secret: push.signing_secret.map(|secret| SecretRef {
                env: secret.env,
                file: secret.file,
            }),
            retry_client_errors: push.retry_client_errors,
            concurrency: push.concurrency,
            secret_path: push.secret_path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row as the previous code wrote it (the API's `QueueConfigOut` through a JSON value)
    /// for a queue with every setting used.
    const FULL_ROW: &str = r#"{"backoff":{"factor":1.5,"initial_ms":250,"jitter":false,"max_ms":90000},"dead_letter_queue":"orders-failed","dedup_window_ms":3600000,"max_age_ms":604800000,"max_attempts":7,"max_depth":10000,"max_in_flight":50,"max_message_bytes":65536,"on_expire":"dead_letter","ordering":"per_key","push":{"concurrency":4,"headers":{"Authorization-Hint":"none","X-Team":"payments"},"method":"PUT","retry_client_errors":true,"secret_path":false,"signing_secret":{"env":"ORDERS_WHSEC"},"timeout_ms":5000,"transform":"{id: .body.id}","url":"https://hooks.example.com/orders"},"rate_limit":{"burst":20,"per_second":12.5},"schema":{"properties":{"id":{"pattern":"^o-[0-9]+$","type":"string"}},"required":["id"],"type":"object"},"visibility_timeout_ms":45000}"#;
    /// The previous code's row for a queue with the defaults.
    const DEFAULT_ROW: &str = r#"{"backoff":{"factor":2.0,"initial_ms":1000,"jitter":true,"max_ms":60000},"dead_letter_queue":"orders.dlq","dedup_window_ms":86400000,"max_age_ms":345600000,"max_attempts":5,"max_depth":null,"max_in_flight":null,"max_message_bytes":1048576,"on_expire":"drop","ordering":"unordered","push":null,"rate_limit":null,"schema":null,"visibility_timeout_ms":30000}"#;
    /// The previous code's row for a dead-letter queue made on another's behalf (no
    /// dead-letter queue of its own: `""`).
    const DEAD_LETTER_ROW: &str = r#"{"backoff":{"factor":2.0,"initial_ms":1000,"jitter":true,"max_ms":60000},"dead_letter_queue":"","dedup_window_ms":86400000,"max_age_ms":1209600000,"max_attempts":0,"max_depth":null,"max_in_flight":null,"max_message_bytes":1048576,"on_expire":"drop","ordering":"unordered","push":null,"rate_limit":null,"schema":null,"visibility_timeout_ms":30000}"#;

    fn read(name: &str, row: &str) -> QueueConfig {
        StoredQueueConfig::from_json(row)
            .and_then(|stored| stored.into_config(name))
            .unwrap()
    }

    #[test]
    fn a_full_row_reads_into_every_setting() {
        let config = read("orders", FULL_ROW);
        assert_eq!(config.visibility_timeout_ms, 45_000);
        assert_eq!(config.max_attempts, 7);
        assert_eq!(
            config.backoff,
            Backoff {
                initial_ms: 250,
                max_ms: 90_000,
                factor: 1.5,
                jitter: false
            }
        );
        assert_eq!(config.dead_letter_queue.as_deref(), Some("orders-failed"));
        assert_eq!(config.max_message_bytes, 65_536);
        assert_eq!(config.ordering, Ordering::PerKey);
        assert_eq!(config.dedup_window_ms, 3_600_000);
        assert_eq!(config.max_age_ms, 604_800_000);
        assert_eq!(config.on_expire, OnExpire::DeadLetter);
        assert_eq!(config.max_depth, Some(10_000));
        assert_eq!(config.max_in_flight, Some(50));
        assert_eq!(
            config.rate_limit,
            Some(RateLimit {
                per_second: 12.5,
                burst: 20
            })
        );
        let schema = config.schema.as_ref().expect("schema");
        assert_eq!(schema.source()["required"], serde_json::json!(["id"]));
        assert!(
            !schema
                .violations(&serde_json::json!({"id": "x"}))
                .is_empty()
        );
        let push = config.push.as_deref().expect("push");
        assert_eq!(push.url, "https://hooks.example.com/orders");
        assert_eq!(push.method.as_deref(), Some("PUT"));
        assert_eq!(
            push.headers.as_ref().and_then(|h| h.get("X-Team")),
            Some(&"payments".to_owned())
        );
        assert_eq!(push.timeout_ms, Some(5_000));
        assert_eq!(push.transform.as_deref(), Some("{id: .body.id}"));
        assert_eq!(
            push.signing_secret,
            Some(SecretRef {
                env: Some("ORDERS_WHSEC".into()),
                file: None
            })
        );
        assert_eq!(push.retry_client_errors, Some(true));
        assert_eq!(push.concurrency, Some(4));
        assert_eq!(push.secret_path, Some(false));
    }

    #[test]
    fn rows_of_defaults_and_of_dead_letter_queues_read_back_as_written() {
        assert_eq!(
            read("orders", DEFAULT_ROW),
            QueueConfig::defaults_for("orders")
        );
        assert_eq!(
            read("orders.dlq", DEAD_LETTER_ROW),
            QueueConfig::for_dead_letter_queue("orders.dlq")
        );
    }

    #[test]
    fn the_same_config_is_written_as_the_same_row() {
        for (name, row) in [
            ("orders", FULL_ROW),
            ("orders", DEFAULT_ROW),
            ("orders.dlq", DEAD_LETTER_ROW),
        ] {
            assert_eq!(StoredQueueConfig::to_json(&read(name, row)), row);
        }
        assert_eq!(
            StoredQueueConfig::to_json(&QueueConfig::defaults_for("orders")),
            DEFAULT_ROW
        );
        assert_eq!(
            StoredQueueConfig::to_json(&QueueConfig::for_dead_letter_queue("orders.dlq")),
            DEAD_LETTER_ROW
        );
    }

    #[test]
    fn a_partial_row_takes_the_defaults_for_what_it_lacks() {
        let config = read(
            "pay",
            r#"{"max_attempts": 3, "backoff": {"max_ms": 5000}, "rate_limit": {"per_second": 2.5}}"#,
        );
        let defaults = QueueConfig::defaults_for("pay");
        assert_eq!(config.max_attempts, 3);
        assert_eq!(config.dead_letter_queue.as_deref(), Some("pay.dlq"));
        assert_eq!(config.backoff.max_ms, 5_000);
        assert_eq!(config.backoff.initial_ms, defaults.backoff.initial_ms);
        assert_eq!(
            config.rate_limit,
            Some(RateLimit {
                per_second: 2.5,
                burst: 3
            })
        );
        assert_eq!(config.visibility_timeout_ms, defaults.visibility_timeout_ms);
    }

    #[test]
    fn a_stored_schema_this_version_refuses_drops_only_the_schema() {
        let config = read(
            "pay",
            r#"{"max_attempts": 3, "dead_letter_queue": "pay-failed", "schema": {"type": "string", "pattern": "(?=a)a"}}"#,
        );
        assert_eq!(config.max_attempts, 3);
        assert_eq!(config.dead_letter_queue.as_deref(), Some("pay-failed"));
        assert!(config.schema.is_none());
    }

    #[test]
    fn an_unknown_field_or_ordering_is_refused() {
        assert!(StoredQueueConfig::from_json(r#"{"colour": "red"}"#).is_err());
        let stored = StoredQueueConfig::from_json(r#"{"ordering": "random"}"#).unwrap();
        assert!(stored.into_config("q").is_err());
    }
}
