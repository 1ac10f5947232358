//! A queue's settings as given (a [`QueueSpec`], from any door or the config file) checked and
//! applied to a [`QueueConfig`]: the one place a setting's range and form are decided.

use std::collections::BTreeMap;

use sluice_wire::{BackoffSpec, PushMethod, PushSpec, QueueSpec, RateLimitSpec};

use super::{
    Backoff, Dedup, MessageSchema, OnExpire, Ordering, QueueConfig, RateLimit, limits,
    validate_queue_name,
};

impl QueueConfig {
    /// Applies `spec` on top of these settings, validating every field. Errors name the field.
    pub fn apply(self, spec: &QueueSpec) -> Result<QueueConfig, String> {
        let mut base = self;
        if let Some(ms) = spec.visibility_timeout_ms {
            check_range(
                "visibility_timeout_ms",
                ms,
                1,
                limits::VISIBILITY_TIMEOUT_MS_MAX,
            )?;
            base.visibility_timeout_ms = ms;
        }
        if let Some(max_attempts) = spec.max_attempts {
            base.max_attempts = max_attempts;
        }
        if let Some(backoff) = &spec.backoff {
            base.backoff = apply_backoff(backoff, base.backoff)?;
        }
        if let Some(dlq) = &spec.dead_letter_queue {
            if dlq.is_empty() {
                base.dead_letter_queue = None;
            } else {
                validate_queue_name(dlq).map_err(|e| format!("dead_letter_queue: {e}"))?;
                base.dead_letter_queue = Some(dlq.clone());
            }
        }
        if let Some(bytes) = spec.max_message_bytes {
            check_range(
                "max_message_bytes",
                bytes as i64,
                1,
                limits::MESSAGE_BYTES_MAX as i64,
            )?;
            base.max_message_bytes = bytes;
        }
        if let Some(ordering) = &spec.ordering {
            base.ordering = Ordering::parse(ordering).ok_or_else(|| {
                format!("ordering: {ordering:?} is not one of unordered, fifo, per_key")
            })?;
        }
        if let Some(ms) = spec.dedup_window_ms {
            check_range("dedup_window_ms", ms, 0, limits::DEDUP_WINDOW_MS_MAX)?;
            base.dedup_window_ms = ms;
        }
        if let Some(dedup) = &spec.dedup {
            base.dedup = Dedup::parse(dedup)
                .ok_or_else(|| format!("dedup: {dedup:?} is not one of id, content"))?;
        }
        if let Some(ms) = spec.max_age_ms {
            check_range(
                "max_age_ms",
                ms,
                limits::MAX_AGE_MS_MIN,
                limits::MAX_AGE_MS_MAX,
            )?;
            base.max_age_ms = ms;
        }
        if let Some(on_expire) = &spec.on_expire {
            base.on_expire = OnExpire::parse(on_expire).ok_or_else(|| {
                format!("on_expire: {on_expire:?} is not one of drop, dead_letter")
            })?;
        }
        if let Some(ms) = spec.keep_acked_ms {
            check_range("keep_acked_ms", ms, 0, limits::KEEP_ACKED_MS_MAX)?;
            base.keep_acked_ms = ms;
        }
        if let Some(depth) = spec.max_depth {
            base.max_depth = (depth > 0).then_some(depth);
        }
        if let Some(in_flight) = spec.max_in_flight {
            base.max_in_flight = (in_flight > 0).then_some(in_flight);
        }
        if let Some(rate) = &spec.rate_limit {
            base.rate_limit = rate_limit(rate)?;
        }
        if let Some(schema) = &spec.schema {
            base.schema = match schema {
                serde_json::Value::Null => None,
                schema => {
                    if schema.to_string().len() > limits::SCHEMA_BYTES_MAX {
                        return Err(format!(
                            "schema: larger than {} bytes",
                            limits::SCHEMA_BYTES_MAX
                        ));
                    }
                    Some(std::sync::Arc::new(MessageSchema::compile(schema.clone())?))
                }
            };
        }
        if let Some(ms) = spec.delay_ms {
            check_range("delay_ms", ms, 0, limits::DELAY_MS_MAX)?;
            base.delay_ms = ms;
        }
        if let Some(tags) = &spec.tags {
            validate_tags(tags)?;
            base.tags = tags.clone();
        }
        if let Some(push) = &spec.push {
            base.push = match push {
                None => None,
                Some(push) => {
                    validate_push(push)?;
                    Some(std::sync::Arc::new(push.clone()))
                }
            };
        }
        Ok(base)
    }
}

/// Checks a queue's tags against the limits in [`limits`].
pub fn validate_tags(tags: &BTreeMap<String, String>) -> Result<(), String> {
    if tags.len() > limits::TAGS_MAX {
        return Err(format!(
            "tags: {} tags; at most {} per queue",
            tags.len(),
            limits::TAGS_MAX
        ));
    }
    for (key, value) in tags {
        let chars = key.chars().count();
        if chars == 0 || chars > limits::TAG_KEY_CHARS_MAX {
            return Err(format!(
                "tags: a key must be 1 to {} characters, got {chars}",
                limits::TAG_KEY_CHARS_MAX
            ));
        }
        if value.chars().count() > limits::TAG_VALUE_CHARS_MAX {
            return Err(format!(
                "tags: the value of {key:?} is longer than {} characters",
                limits::TAG_VALUE_CHARS_MAX
            ));
        }
    }
    Ok(())
}

/// Checks what can be checked without IO: the URL's scheme, the method and the ranges.
/// (Transforms and secrets are checked by the server, which compiles and reads them.)
fn validate_push(push: &PushSpec) -> Result<(), String> {
    let url = push.url.to_ascii_lowercase();
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        // The URL is not echoed: it may hold credentials.
        .ok_or("push.url: not an http:// or https:// URL")?;
    if host.is_empty() || host.starts_with('/') {
        return Err("push.url: the URL has no host".into());
    }
    PushMethod::of_spec(push.method.as_deref())?;
    if let Some(ms) = push.timeout_ms {
        check_range("push.timeout_ms", ms, 1, 300_000)?;
    }
    if let Some(concurrency) = push.concurrency {
        check_range("push.concurrency", i64::from(concurrency), 1, 1000)?;
    }
    for name in push.headers.iter().flat_map(|headers| headers.keys()) {
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!("push.headers: {name:?} is not a header name"));
        }
    }
    Ok(())
}

fn rate_limit(spec: &RateLimitSpec) -> Result<Option<RateLimit>, String> {
    if !spec.per_second.is_finite() || !(0.0..=1_000_000.0).contains(&spec.per_second) {
        return Err(format!(
            "rate_limit.per_second must be between 0 and 1000000, got {}",
            spec.per_second
        ));
    }
    if spec.per_second == 0.0 {
        return Ok(None);
    }
    let burst = match spec.burst {
        Some(0) => return Err("rate_limit.burst must be at least 1".into()),
        Some(burst) => burst,
        None => spec.per_second.ceil().max(1.0) as u32,
    };
    Ok(Some(RateLimit {
        per_second: spec.per_second,
        burst,
    }))
}

fn apply_backoff(spec: &BackoffSpec, mut base: Backoff) -> Result<Backoff, String> {
    if let Some(ms) = spec.initial_ms {
        check_range("backoff.initial_ms", ms, 0, limits::BACKOFF_MS_MAX)?;
        base.initial_ms = ms;
    }
    if let Some(ms) = spec.max_ms {
        check_range("backoff.max_ms", ms, 0, limits::BACKOFF_MS_MAX)?;
        base.max_ms = ms;
    }
    if let Some(factor) = spec.factor {
        if !(1.0..=100.0).contains(&factor) {
            return Err(format!(
                "backoff.factor must be between 1 and 100, got {factor}"
            ));
        }
        base.factor = factor;
    }
    if let Some(jitter) = spec.jitter {
        base.jitter = jitter;
    }
    if base.max_ms < base.initial_ms {
        return Err(format!(
            "backoff.max_ms ({}) is less than backoff.initial_ms ({})",
            base.max_ms, base.initial_ms
        ));
    }
    Ok(base)
}

fn check_range(field: &str, value: i64, min: i64, max: i64) -> Result<(), String> {
    if value < min || value > max {
        return Err(format!(
            "{field} must be between {min} and {max}, got {value}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(spec: serde_json::Value) -> Result<QueueConfig, String> {
        let spec: QueueSpec = serde_json::from_value(spec).map_err(|e| e.to_string())?;
        QueueConfig::defaults_for("q").apply(&spec)
    }

    #[test]
    fn an_empty_spec_gives_the_documented_defaults() {
        let config = check(serde_json::json!({})).unwrap();
        assert_eq!(config.visibility_timeout_ms, 30_000);
        assert_eq!(config.max_attempts, 5);
        assert_eq!(config.dead_letter_queue.as_deref(), Some("q.dlq"));
        assert_eq!(config.max_message_bytes, 1 << 20);
        assert_eq!(config.dedup_window_ms, 86_400_000);
        assert_eq!(
            config.backoff,
            Backoff {
                initial_ms: 1_000,
                max_ms: 60_000,
                factor: 2.0,
                jitter: true
            }
        );
    }

    #[test]
    fn invalid_fields_are_named_in_the_error() {
        for (spec, field) in [
            (
                serde_json::json!({"visibility_timeout_ms": 0}),
                "visibility_timeout_ms",
            ),
            (serde_json::json!({"ordering": "random"}), "ordering"),
            (
                serde_json::json!({"backoff": {"factor": 0.5}}),
                "backoff.factor",
            ),
            (
                serde_json::json!({"backoff": {"initial_ms": 5000, "max_ms": 10}}),
                "backoff.max_ms",
            ),
            (
                serde_json::json!({"dead_letter_queue": "bad name"}),
                "dead_letter_queue",
            ),
            (
                serde_json::json!({"max_message_bytes": 0}),
                "max_message_bytes",
            ),
            (serde_json::json!({"colour": "red"}), "colour"),
        ] {
            let error = check(spec.clone()).unwrap_err();
            assert!(error.contains(field), "{spec} gave {error}");
        }
    }
}
