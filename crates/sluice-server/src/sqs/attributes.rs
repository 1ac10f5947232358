//! SQS queue attributes over a sluice queue's configuration (docs/sqs.md "Attributes").
//!
//! Attributes with a native meaning are the configuration itself: `VisibilityTimeout` is
//! `visibility_timeout_ms`, `RedrivePolicy` is `dead_letter_queue` + `max_attempts`, and so
//! on, so a queue reads the same through both APIs. The rest (`Policy`, `RedriveAllowPolicy`,
//! KMS settings, FIFO options, `ReceiveMessageWaitTimeSeconds`) are kept as the queue's
//! protocol attributes under `sqs.<Name>`, as given.

use std::collections::BTreeMap;

use sluice_core::queue::{Backoff, Dedup, Ordering, QueueConfig};
use sluice_core::store::QueueInfo;
use sluice_sqs::{ErrorKind, SqsError};

use super::config::SqsConfig;
use super::names;

/// Key prefix of the SQS API's protocol attributes.
pub const PREFIX: &str = "sqs.";
/// SQS's deduplication interval for FIFO queues: five minutes.
pub const FIFO_DEDUP_WINDOW_MS: i64 = 5 * 60 * 1000;

/// Attributes a client may set.
const SETTABLE: &[&str] = &[
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
    "RedrivePolicy",
    "RedriveAllowPolicy",
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
    "Policy",
    "KmsMasterKeyId",
    "KmsDataKeyReusePeriodSeconds",
    "SqsManagedSseEnabled",
];
/// Attributes only FIFO queues have.
const FIFO_ONLY: &[&str] = &[
    "FifoQueue",
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "FifoThroughputLimit",
];
/// Attributes computed from the queue, never set.
const READ_ONLY: &[&str] = &[
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "CreatedTimestamp",
    "LastModifiedTimestamp",
    "QueueArn",
];

/// True for a queue SQS clients see as FIFO: a `.fifo` name and per-key order (the group is
/// the key). A native queue named `x.fifo` without per-key order is a standard queue.
pub fn is_fifo(name: &str, config: &QueueConfig) -> bool {
    name.ends_with(".fifo") && config.ordering == Ordering::PerKey
}

/// A protocol attribute of the queue.
pub fn kept<'c>(config: &'c QueueConfig, name: &str) -> Option<&'c str> {
    config
        .protocol_attributes
        .get(&format!("{PREFIX}{name}"))
        .map(String::as_str)
}

/// A new queue as SQS defines one: no dead-letter queue and no limit on receives until a
/// `RedrivePolicy` says so, no backoff (a message is visible again when its visibility timeout
/// ends), SQS's message size, and for FIFO per-key order with the 5-minute dedup window.
pub fn new_queue(name: &str, fifo: bool, sqs: &SqsConfig, now_ms: i64) -> QueueConfig {
    let mut config = QueueConfig::defaults_for(name);
    config.dead_letter_queue = None;
    config.max_attempts = 0;
    config.backoff = Backoff {
        initial_ms: 0,
        max_ms: 0,
        factor: 1.0,
        jitter: false,
    };
    config.max_message_bytes = sqs.max_message_bytes;
    config.dedup_window_ms = FIFO_DEDUP_WINDOW_MS;
    if fifo {
        config.ordering = Ordering::PerKey;
    }
    let seconds = (now_ms / 1000).to_string();
    config
        .protocol_attributes
        .insert(format!("{PREFIX}CreatedTimestamp"), seconds.clone());
    config
        .protocol_attributes
        .insert(format!("{PREFIX}LastModifiedTimestamp"), seconds);
    config
}

/// A parsed `RedrivePolicy`: the dead-letter queue and the receives before a message goes there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redrive {
    pub dead_letter_queue: String,
    pub max_receive_count: u32,
}

/// Parses a `RedrivePolicy` value; `""` removes the policy (`None`).
pub fn parse_redrive(sqs: &SqsConfig, text: &str) -> Result<Option<Redrive>, SqsError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let invalid = |why: &str| {
        SqsError::new(
            ErrorKind::InvalidParameterValue,
            format!("Value {text} for parameter RedrivePolicy is invalid. Reason: {why}"),
        )
    };
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|_| invalid("Redrive policy is not a valid JSON map."))?;
    let arn = value
        .get("deadLetterTargetArn")
        .and_then(|v| v.as_str())
        .ok_or_else(|| {
            invalid("Redrive policy does not contain mandatory attribute: deadLetterTargetArn.")
        })?;
    let count = match value.get("maxReceiveCount") {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<u64>().ok(),
        None => {
            return Err(invalid(
                "Redrive policy does not contain mandatory attribute: maxReceiveCount.",
            ));
        }
        _ => None,
    }
    .filter(|n| (1..=1000).contains(n))
    .ok_or_else(|| {
        invalid("Invalid value for maxReceiveCount: must be an integer from 1 to 1000.")
    })?;
    Ok(Some(Redrive {
        dead_letter_queue: names::queue_of_arn(sqs, arn, "RedrivePolicy")?,
        max_receive_count: count as u32,
    }))
}

/// Checks attribute names for a queue of this type: unknown, read-only, or FIFO-only on a
/// standard queue are `InvalidAttributeName` (AWS's wording).
pub fn check_names(attributes: &BTreeMap<String, String>, fifo: bool) -> Result<(), SqsError> {
    for name in attributes.keys() {
        let known = SETTABLE.contains(&name.as_str());
        if !known || (!fifo && FIFO_ONLY.contains(&name.as_str())) {
            let message = match name.as_str() {
                "DeduplicationScope" | "FifoThroughputLimit" => {
                    format!("You can specify the {name} only when FifoQueue is set to true.")
                }
                _ => format!("Unknown Attribute {name}."),
            };
            return Err(SqsError::new(ErrorKind::InvalidAttributeName, message));
        }
    }
    Ok(())
}

/// Applies settable attributes to `config` (names already checked). `redrive` is the parsed
/// `RedrivePolicy` when one was given (its target checked by the caller).
pub fn apply(
    config: &mut QueueConfig,
    attributes: &BTreeMap<String, String>,
    redrive: Option<Option<Redrive>>,
    sqs: &SqsConfig,
    now_ms: i64,
) -> Result<(), SqsError> {
    for (name, value) in attributes {
        match name.as_str() {
            "DelaySeconds" => config.delay_ms = seconds(name, value, 0, 900)? * 1000,
            "MaximumMessageSize" => {
                config.max_message_bytes =
                    number(name, value, 1024, sqs.max_message_bytes as i64)? as usize;
            }
            "MessageRetentionPeriod" => {
                config.max_age_ms = seconds(name, value, 60, 1_209_600)? * 1000;
            }
            "ReceiveMessageWaitTimeSeconds" => {
                keep(config, name, seconds(name, value, 0, 20)?.to_string());
            }
            // A lease of 0 ms cannot be: 0 s becomes the shortest lease, 1 ms.
            "VisibilityTimeout" => {
                config.visibility_timeout_ms = (seconds(name, value, 0, 43_200)? * 1000).max(1);
            }
            "RedrivePolicy" => {}
            // `FifoQueue` cannot change: `true` on a FIFO queue is accepted as it is.
            "FifoQueue" if !boolean(name, value)? => {
                return Err(invalid_value(
                    name,
                    "Modifying queue type is not supported.",
                ));
            }
            // The queue's own rule, the same for every door: `dedup = "content"`.
            "ContentBasedDeduplication" => {
                config.dedup = if boolean(name, value)? {
                    Dedup::Content
                } else {
                    Dedup::Id
                };
                config
                    .protocol_attributes
                    .remove(&format!("{PREFIX}{name}"));
            }
            "SqsManagedSseEnabled" => {
                keep(config, name, boolean(name, value)?.to_string());
            }
            "DeduplicationScope" => {
                one_of(name, value, &["messageGroup", "queue"])?;
                keep(config, name, value.clone());
            }
            "FifoThroughputLimit" => {
                one_of(name, value, &["perQueue", "perMessageGroupId"])?;
                keep(config, name, value.clone());
            }
            "KmsDataKeyReusePeriodSeconds" => {
                keep(config, name, seconds(name, value, 60, 86_400)?.to_string());
            }
            "KmsMasterKeyId" => {
                keep(config, name, value.clone());
                keep(config, "SqsManagedSseEnabled", "false".into());
            }
            "Policy" | "RedriveAllowPolicy" => {
                if value.is_empty() {
                    config
                        .protocol_attributes
                        .remove(&format!("{PREFIX}{name}"));
                } else {
                    serde_json::from_str::<serde_json::Value>(value)
                        .map_err(|_| invalid_value(name, "not a valid JSON document."))?;
                    keep(config, name, value.clone());
                }
            }
            _ => {}
        }
    }
    match redrive {
        Some(Some(redrive)) => {
            config.dead_letter_queue = Some(redrive.dead_letter_queue);
            config.max_attempts = redrive.max_receive_count;
        }
        Some(None) => {
            config.dead_letter_queue = None;
            config.max_attempts = 0;
        }
        None => {}
    }
    keep(config, "LastModifiedTimestamp", (now_ms / 1000).to_string());
    Ok(())
}

fn keep(config: &mut QueueConfig, name: &str, value: String) {
    config
        .protocol_attributes
        .insert(format!("{PREFIX}{name}"), value);
}

/// Every attribute the queue has, as `GetQueueAttributes` with `All` shows them.
pub fn all(info: &QueueInfo, sqs: &SqsConfig) -> BTreeMap<String, String> {
    let config = &info.config;
    let mut out = BTreeMap::new();
    let mut put = |name: &str, value: String| {
        out.insert(name.to_owned(), value);
    };
    put("ApproximateNumberOfMessages", info.depth.ready.to_string());
    put(
        "ApproximateNumberOfMessagesNotVisible",
        info.depth.in_flight.to_string(),
    );
    put(
        "ApproximateNumberOfMessagesDelayed",
        info.depth.delayed.to_string(),
    );
    put("DelaySeconds", (config.delay_ms / 1000).to_string());
    put("MaximumMessageSize", config.max_message_bytes.to_string());
    put(
        "MessageRetentionPeriod",
        (config.max_age_ms / 1000).to_string(),
    );
    put("QueueArn", names::queue_arn(sqs, &info.name));
    put(
        "ReceiveMessageWaitTimeSeconds",
        kept(config, "ReceiveMessageWaitTimeSeconds")
            .unwrap_or("0")
            .to_owned(),
    );
    put(
        "VisibilityTimeout",
        (config.visibility_timeout_ms / 1000).to_string(),
    );
    put(
        "SqsManagedSseEnabled",
        kept(config, "SqsManagedSseEnabled")
            .unwrap_or("true")
            .to_owned(),
    );
    for name in [
        "CreatedTimestamp",
        "LastModifiedTimestamp",
        "Policy",
        "RedriveAllowPolicy",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
    ] {
        if let Some(value) = kept(config, name) {
            put(name, value.to_owned());
        }
    }
    if let Some(dlq) = &config.dead_letter_queue
        && config.max_attempts > 0
    {
        put(
            "RedrivePolicy",
            serde_json::json!({
                "deadLetterTargetArn": names::queue_arn(sqs, dlq),
                "maxReceiveCount": config.max_attempts,
            })
            .to_string(),
        );
    }
    if is_fifo(&info.name, config) {
        put("FifoQueue", "true".into());
        put(
            "ContentBasedDeduplication",
            content_based(config).to_string(),
        );
        for (name, default) in [
            ("DeduplicationScope", "queue"),
            ("FifoThroughputLimit", "perQueue"),
        ] {
            put(name, kept(config, name).unwrap_or(default).to_owned());
        }
    }
    out
}

/// Whether a send without a deduplication id is deduplicated by its body: the queue's
/// `dedup = "content"`, or the attribute as a queue made before it set that kept it.
pub fn content_based(config: &QueueConfig) -> bool {
    config.dedup == Dedup::Content || kept(config, "ContentBasedDeduplication") == Some("true")
}

/// The attributes `names` ask for (`All` for every one); an unknown name is refused.
pub fn select(
    info: &QueueInfo,
    sqs: &SqsConfig,
    names: &[String],
) -> Result<BTreeMap<String, String>, SqsError> {
    for name in names {
        if name != "All"
            && !SETTABLE.contains(&name.as_str())
            && !READ_ONLY.contains(&name.as_str())
        {
            return Err(SqsError::new(
                ErrorKind::InvalidAttributeName,
                format!("Unknown Attribute {name}."),
            ));
        }
    }
    let mut every = all(info, sqs);
    if !names.iter().any(|name| name == "All") {
        every.retain(|name, _| names.contains(name));
    }
    Ok(every)
}

/// The first given attribute whose value differs from the queue's (CreateQueue on an existing
/// name succeeds only when every given attribute matches).
pub fn first_difference(
    current: &BTreeMap<String, String>,
    given: &BTreeMap<String, String>,
    sqs: &SqsConfig,
) -> Option<String> {
    given
        .iter()
        .find(|(name, value)| {
            let now = current.get(*name).map(String::as_str);
            match name.as_str() {
                "RedrivePolicy" => {
                    let parse = |text: &str| parse_redrive(sqs, text).ok().flatten();
                    parse(value) != now.and_then(parse)
                }
                _ => normalise(value) != now.map(normalise).unwrap_or_else(|| normalise("")),
            }
        })
        .map(|(name, _)| name.clone())
}

fn normalise(value: &str) -> String {
    let trimmed = value.trim();
    if let Ok(number) = trimmed.parse::<i64>() {
        return number.to_string();
    }
    if trimmed.eq_ignore_ascii_case("true") || trimmed.eq_ignore_ascii_case("false") {
        return trimmed.to_ascii_lowercase();
    }
    trimmed.to_owned()
}

fn invalid_value(name: &str, why: &str) -> SqsError {
    SqsError::new(
        ErrorKind::InvalidAttributeValue,
        format!("Invalid value for the parameter {name}. Reason: {why}"),
    )
}

fn number(name: &str, value: &str, min: i64, max: i64) -> Result<i64, SqsError> {
    value
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| invalid_value(name, &format!("Must be between {min} and {max}.")))
}

fn seconds(name: &str, value: &str, min: i64, max: i64) -> Result<i64, SqsError> {
    number(name, value, min, max)
}

fn boolean(name: &str, value: &str) -> Result<bool, SqsError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid_value(name, "Must be true or false.")),
    }
}

fn one_of(name: &str, value: &str, allowed: &[&str]) -> Result<(), SqsError> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(invalid_value(
            name,
            &format!("Must be one of {}.", allowed.join(", ")),
        ))
    }
}

#[cfg(test)]
mod tests;
