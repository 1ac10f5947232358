//! Queues: names, their validated configuration, and the retry backoff.
//!
//! [`QueueConfig`] is the typed, validated form; the wire and TOML forms live in
//! [`sluice_wire::QueueSpec`], which every field of this module can be built from.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::clock::Millis;

mod spec;
pub use spec::validate_tags;

/// The longest queue name accepted.
pub const QUEUE_NAME_LEN_MAX: usize = 80;
/// Suffix of the dead-letter queue created with a queue when none is named.
pub const DEAD_LETTER_SUFFIX: &str = ".dlq";

/// Default retention: 4 days, as SQS.
pub const DEFAULT_MAX_AGE_MS: Millis = 4 * 24 * 60 * 60 * 1000;
/// Default retention of a dead-letter queue: 14 days, so failures outlive a long weekend.
pub const DEAD_LETTER_MAX_AGE_MS: Millis = 14 * 24 * 60 * 60 * 1000;

/// Checks a queue name: 1 to 80 characters of `[A-Za-z0-9_.-]`.
pub fn validate_queue_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("queue name must not be empty".into());
    }
    if name.len() > QUEUE_NAME_LEN_MAX {
        return Err(format!(
            "queue name is {} characters long; at most {QUEUE_NAME_LEN_MAX} are allowed",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return Err(format!(
            "queue name {name:?} is reserved: URLs cannot carry it as a path segment"
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "queue name contains {bad:?}; only A-Z, a-z, 0-9, '_', '.' and '-' are allowed"
        ));
    }
    Ok(())
}

/// How a queue orders deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ordering {
    /// Any order: priority first, then enqueue order, many in flight at once.
    #[default]
    Unordered,
    /// One ordering domain for the whole queue: at most one message in flight, in enqueue order.
    Fifo,
    /// FIFO within each message key, keys in parallel; messages without a key are unordered.
    PerKey,
}

impl Ordering {
    /// The wire name: `unordered`, `fifo` or `per_key`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ordering::Unordered => "unordered",
            Ordering::Fifo => "fifo",
            Ordering::PerKey => "per_key",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "unordered" => Some(Ordering::Unordered),
            "fifo" => Some(Ordering::Fifo),
            "per_key" => Some(Ordering::PerKey),
            _ => None,
        }
    }
}

/// Exponential backoff between failed attempts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// Delay after the first failure.
    pub initial_ms: Millis,
    /// The delay never grows past this.
    pub max_ms: Millis,
    /// Growth per further failure (at least 1).
    pub factor: f64,
    /// With jitter the delay is drawn uniformly from `[d/2, d]` ("equal jitter"), so a burst of
    /// failures does not come back as a burst.
    pub jitter: bool,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial_ms: 1_000,
            max_ms: 60_000,
            factor: 2.0,
            jitter: true,
        }
    }
}

/// A queue's validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// How long a receive leases a message (default 30 s).
    pub visibility_timeout_ms: Millis,
    /// Deliveries before a message is dead-lettered (default 5); 0 means retry forever.
    pub max_attempts: u32,
    /// Delay between failed attempts.
    pub backoff: Backoff,
    /// Where failures go; `None` for a queue that keeps retrying (dead-letter queues themselves).
    pub dead_letter_queue: Option<String>,
    /// Largest accepted body in bytes (default 1 MiB).
    pub max_message_bytes: usize,
    /// Delivery order.
    pub ordering: Ordering,
    /// How long an idempotency key keeps answering with its first message (default 24 h).
    pub dedup_window_ms: Millis,
    /// What makes two messages the same one: only the `id` a producer gives (default), or
    /// also their content when no `id` is given.
    pub dedup: Dedup,
    /// Messages older than this are removed (default 4 days, as SQS; 14 days for a DLQ).
    pub max_age_ms: Millis,
    /// What happens to a message that reaches `max_age_ms`.
    pub on_expire: OnExpire,
    /// How long an acked message keeps its body, headers and result for people to browse
    /// and search (default 0: dropped at the ack). Fixed at the ack: changing it later
    /// moves only later acks.
    pub keep_acked_ms: Millis,
    /// Most messages the queue may hold (ready + delayed + in flight); enqueues beyond it are
    /// refused with 503. `None`: unbounded.
    pub max_depth: Option<u64>,
    /// Most leases out at once. `None`: unbounded.
    pub max_in_flight: Option<u32>,
    /// Deliveries per second, as a token bucket. `None`: unlimited.
    pub rate_limit: Option<RateLimit>,
    /// JSON Schema every JSON body enqueued through the API must satisfy.
    pub schema: Option<Arc<MessageSchema>>,
    /// Push destination: the server delivers the queue's messages to this URL itself.
    pub push: Option<Arc<sluice_wire::PushSpec>>,
    /// Delay given to a message enqueued without one (default 0: visible at once).
    pub delay_ms: Millis,
    /// Labels people attach to the queue (SQS calls them tags); the rules never read them.
    pub tags: BTreeMap<String, String>,
    /// Settings a protocol keeps for the queue that the queue's rules do not use, keyed
    /// `<protocol>.<name>` (the SQS API's `sqs.Policy`, `sqs.ContentBasedDeduplication`, …).
    /// Kept and shown as given; only the protocol that wrote them reads them.
    pub protocol_attributes: BTreeMap<String, String>,
}

/// What a queue takes as a message's idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dedup {
    /// The `id` the producer gives; a message without one is never a duplicate.
    #[default]
    Id,
    /// The `id` when given, else a digest of the message's content (its ordering key and
    /// body): the same body sent twice within the window is stored once (SQS FIFO's
    /// `ContentBasedDeduplication`).
    Content,
}

impl Dedup {
    /// The wire name: `id` or `content`.
    pub fn as_str(self) -> &'static str {
        match self {
            Dedup::Id => "id",
            Dedup::Content => "content",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "id" => Some(Dedup::Id),
            "content" => Some(Dedup::Content),
            _ => None,
        }
    }
}

/// What to do with a message that reached the queue's `max_age_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnExpire {
    /// Remove it (counted as expired).
    #[default]
    Drop,
    /// Move it to the dead-letter queue (dropped when the queue has none).
    DeadLetter,
}

impl OnExpire {
    /// The wire name: `drop` or `dead_letter`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnExpire::Drop => "drop",
            OnExpire::DeadLetter => "dead_letter",
        }
    }

    /// Parses a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "drop" => Some(OnExpire::Drop),
            "dead_letter" => Some(OnExpire::DeadLetter),
            _ => None,
        }
    }
}

/// A token bucket: `per_second` tokens flow in, at most `burst` are kept, a delivery takes one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained deliveries per second (> 0).
    pub per_second: f64,
    /// Deliveries allowed at once after a quiet spell (>= 1).
    pub burst: u32,
}

/// A compiled JSON Schema for message bodies, with the document it came from.
pub struct MessageSchema {
    source: serde_json::Value,
    validator: jsonschema::Validator,
}

/// One way a body fails its queue's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaViolation {
    /// JSON Pointer into the body (`""` is the whole body).
    pub path: String,
    /// Why it fails.
    pub reason: String,
}

/// Largest compiled program of one `pattern`, in bytes (the `regex` crate's own default).
pub const SCHEMA_REGEX_SIZE_LIMIT_BYTES: usize = 10 << 20;
/// Largest lazy-DFA cache of one `pattern`, in bytes (the `regex` crate's own default).
pub const SCHEMA_REGEX_DFA_SIZE_LIMIT_BYTES: usize = 2 << 20;

impl MessageSchema {
    /// Compiles a schema; the error says what is wrong with it.
    ///
    /// `pattern` and `patternProperties` run on the `regex` crate, whose matching time is
    /// linear in the text: a backtracking engine takes exponential time on patterns such as
    /// `^(a+)+$`, and a producer chooses the text. Lookaround and backreferences, which only a
    /// backtracking engine offers, are refused here, when the queue is defined.
    pub fn compile(source: serde_json::Value) -> Result<Self, String> {
        let validator = jsonschema::options()
            .with_pattern_options(
                jsonschema::PatternOptions::regex()
                    .size_limit(SCHEMA_REGEX_SIZE_LIMIT_BYTES)
                    .dfa_size_limit(SCHEMA_REGEX_DFA_SIZE_LIMIT_BYTES),
            )
            .build(&source)
            .map_err(|e| {
                let text = e.to_string();
                let hint = if text.contains("regex") {
                    " (patterns run on a linear-time engine: no lookaround, no backreferences)"
                } else {
                    ""
                };
                format!("schema: not a valid JSON Schema: {text}{hint}")
            })?;
        Ok(Self { source, validator })
    }

    /// The schema document.
    pub fn source(&self) -> &serde_json::Value {
        &self.source
    }

    /// Every violation of `body` (empty when it is valid).
    pub fn violations(&self, body: &serde_json::Value) -> Vec<SchemaViolation> {
        self.validator
            .iter_errors(body)
            .map(|error| SchemaViolation {
                path: error.instance_path().as_str().to_owned(),
                reason: error.to_string(),
            })
            .collect()
    }
}

impl std::fmt::Debug for MessageSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MessageSchema").field(&self.source).finish()
    }
}

impl PartialEq for MessageSchema {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl QueueConfig {
    /// The defaults for a queue named `name`: its dead-letter queue is `<name>.dlq`.
    pub fn defaults_for(name: &str) -> Self {
        Self {
            visibility_timeout_ms: 30_000,
            max_attempts: 5,
            backoff: Backoff::default(),
            dead_letter_queue: Some(format!("{name}{DEAD_LETTER_SUFFIX}")),
            max_message_bytes: 1024 * 1024,
            ordering: Ordering::Unordered,
            dedup_window_ms: 24 * 60 * 60 * 1000,
            dedup: Dedup::Id,
            max_age_ms: DEFAULT_MAX_AGE_MS,
            on_expire: OnExpire::Drop,
            keep_acked_ms: 0,
            max_depth: None,
            max_in_flight: None,
            rate_limit: None,
            schema: None,
            push: None,
            delay_ms: 0,
            tags: BTreeMap::new(),
            protocol_attributes: BTreeMap::new(),
        }
    }

    /// Until when a message acked at `acked_at_ms` keeps its body: `None` when the queue
    /// keeps none.
    pub fn kept_until(&self, acked_at_ms: Millis) -> Option<Millis> {
        (self.keep_acked_ms > 0).then(|| acked_at_ms.saturating_add(self.keep_acked_ms))
    }

    /// The configuration given to a dead-letter queue created on behalf of another queue: it
    /// has no dead-letter queue of its own and never gives up on a message.
    pub fn for_dead_letter_queue(name: &str) -> Self {
        Self {
            dead_letter_queue: None,
            max_attempts: 0,
            max_age_ms: DEAD_LETTER_MAX_AGE_MS,
            ..Self::defaults_for(name)
        }
    }
}

/// Limits that hold for every queue, whatever its configuration says.
pub mod limits {
    use crate::clock::Millis;

    /// Longest visibility timeout: 12 hours, as SQS.
    pub const VISIBILITY_TIMEOUT_MS_MAX: Millis = 12 * 60 * 60 * 1000;
    /// Largest `max_message_bytes` a queue may set.
    pub const MESSAGE_BYTES_MAX: usize = 10 * 1024 * 1024;
    /// Most messages in one enqueue batch.
    pub const BATCH_MESSAGES_MAX: usize = 1000;
    /// Most body bytes in one enqueue batch.
    pub const BATCH_BYTES_MAX: usize = 10 * 1024 * 1024;
    /// Most messages one receive returns.
    pub const RECEIVE_MAX: usize = 100;
    /// Longest long poll.
    pub const WAIT_MS_MAX: Millis = 20_000;
    /// Longest delay before a message becomes visible (`delay_ms`, `not_before`, a nack's
    /// delay): 100 years, in effect none. It keeps every sum of times far from overflowing.
    pub const DELAY_MS_MAX: Millis = 100 * 365 * 24 * 60 * 60 * 1000;
    /// Longest retry backoff (`backoff.initial_ms`, `backoff.max_ms`): 15 days.
    pub const BACKOFF_MS_MAX: Millis = 15 * 24 * 60 * 60 * 1000;
    /// Longest dedup window: 30 days.
    pub const DEDUP_WINDOW_MS_MAX: Millis = 30 * 24 * 60 * 60 * 1000;
    /// Longest `keep_acked_ms`: 90 days.
    pub const KEEP_ACKED_MS_MAX: Millis = 90 * 24 * 60 * 60 * 1000;
    /// Most definitions of one kind (schedules, webhook endpoints, topics, alerts): each is
    /// kept in memory and looked at by every pass, so their number is bounded like the rest.
    pub const DEFINITIONS_PER_KIND_MAX: usize = 1_000;
    /// Most headers of one message.
    pub const HEADERS_MAX: usize = 64;
    /// Most bytes of one message's headers (names and values).
    pub const HEADER_BYTES_MAX: usize = 64 * 1024;
    /// Longest idempotency key, message key or header value, in bytes.
    pub const KEY_BYTES_MAX: usize = 1024;
    /// Longest error text kept with a message; longer texts are cut.
    pub const ERROR_BYTES_MAX: usize = 4096;
    /// Longest retention: 365 days.
    pub const MAX_AGE_MS_MAX: Millis = 365 * 24 * 60 * 60 * 1000;
    /// Shortest retention: one second.
    pub const MAX_AGE_MS_MIN: Millis = 1000;
    /// Largest result an ack may carry, in bytes of JSON.
    pub const RESULT_BYTES_MAX: usize = 64 * 1024;
    /// Largest JSON Schema document, in bytes.
    pub const SCHEMA_BYTES_MAX: usize = 256 * 1024;
    /// Most tags on one queue (AWS's advice for SQS queues).
    pub const TAGS_MAX: usize = 50;
    /// Longest tag key, in characters.
    pub const TAG_KEY_CHARS_MAX: usize = 128;
    /// Longest tag value, in characters.
    pub const TAG_VALUE_CHARS_MAX: usize = 256;

    // A batch of one maximal message must fit in a batch.
    const _: () = assert!(MESSAGE_BYTES_MAX <= BATCH_BYTES_MAX);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_follow_the_documented_alphabet() {
        for good in ["a", "orders", "orders.dlq", "A-b_c.9", &"x".repeat(80)] {
            assert!(validate_queue_name(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "with space", "slash/y", "é", &"x".repeat(81)] {
            assert!(validate_queue_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn schema_patterns_run_in_linear_time_and_refuse_backtracking_features() {
        let schema = MessageSchema::compile(serde_json::json!({
            "type": "object",
            "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}},
            "patternProperties": {"^(x+x+)+y$": {"type": "integer"}}
        }))
        .unwrap();
        let evil = format!("{}!", "a".repeat(50_000));
        let started = std::time::Instant::now();
        for _ in 0..20 {
            assert_eq!(
                schema
                    .violations(
                        &serde_json::json!({"s": evil, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx": "1"})
                    )
                    .len(),
                1
            );
        }
        // A backtracking engine takes far longer (or gives up) on each; this bound is generous.
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
        assert!(
            schema
                .violations(&serde_json::json!({"s": "aaaa"}))
                .is_empty()
        );
        for refused in ["(?=a)a", "(?<=a)b", "(a)\\1", "(?!x)y"] {
            let error =
                MessageSchema::compile(serde_json::json!({"pattern": refused})).unwrap_err();
            assert!(error.contains("lookaround"), "{refused}: {error}");
        }
    }
}
