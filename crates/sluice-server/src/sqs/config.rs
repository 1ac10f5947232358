//! `[sqs]`: the SQS-compatible API's settings (docs/sqs.md).

use serde::Deserialize;

/// `[sqs]` as written; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSqs {
    /// Serve the SQS API on the main listener (default true).
    pub enabled: Option<bool>,
    /// The account id in queue URLs and ARNs (default `000000000000`).
    pub account_id: Option<String>,
    /// The region in ARNs (default `us-east-1`).
    pub region: Option<String>,
    /// The base of queue URLs, e.g. `https://queues.example.com` (default: from each request's
    /// `X-Forwarded-Proto`/`X-Forwarded-Host`, else its `Host`).
    pub public_url: Option<String>,
    /// Largest message (body plus attributes) a queue created through SQS may allow, and its
    /// default `MaximumMessageSize` (default 1048576, SQS's).
    pub max_message_bytes: Option<usize>,
    /// Most entries in one batch request (default 10, SQS's).
    pub batch_entries_max: Option<usize>,
    /// Largest SQS request body read (default 4 MiB: a full batch, encoded).
    pub request_bytes_max: Option<usize>,
    /// Bytes of FIFO receives kept for retries with the same `ReceiveRequestAttemptId`
    /// (default 64 MiB); the oldest are forgotten first beyond it.
    pub receive_attempts_bytes_max: Option<usize>,
}

/// `[sqs]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqsConfig {
    /// Serve the API.
    pub enabled: bool,
    /// Account id of every queue.
    pub account_id: String,
    /// Region of every ARN.
    pub region: String,
    /// Base of queue URLs, without a trailing `/`.
    pub public_url: Option<String>,
    /// Largest message through SQS.
    pub max_message_bytes: usize,
    /// Most entries per batch.
    pub batch_entries_max: usize,
    /// Largest request body.
    pub request_bytes_max: usize,
    /// Bytes of receives kept for `ReceiveRequestAttemptId` retries.
    pub receive_attempts_bytes_max: usize,
}

impl Default for SqsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
            public_url: None,
            max_message_bytes: 1024 * 1024,
            batch_entries_max: 10,
            request_bytes_max: 4 * 1024 * 1024,
            receive_attempts_bytes_max: 64 * 1024 * 1024,
        }
    }
}

impl SqsConfig {
    /// Validates `[sqs]`.
    pub fn from_raw(raw: RawSqs) -> Result<Self, String> {
        let d = Self::default();
        let config = Self {
            enabled: raw.enabled.unwrap_or(d.enabled),
            account_id: raw.account_id.unwrap_or(d.account_id),
            region: raw.region.unwrap_or(d.region),
            public_url: raw
                .public_url
                .map(|url| url.trim_end_matches('/').to_owned()),
            max_message_bytes: raw.max_message_bytes.unwrap_or(d.max_message_bytes),
            batch_entries_max: raw.batch_entries_max.unwrap_or(d.batch_entries_max),
            request_bytes_max: raw.request_bytes_max.unwrap_or(d.request_bytes_max),
            receive_attempts_bytes_max: raw
                .receive_attempts_bytes_max
                .unwrap_or(d.receive_attempts_bytes_max),
        };
        if config.account_id.is_empty() || !config.account_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!(
                "[sqs] account_id: {:?} is not all digits (queue URLs are /<account>/<queue>)",
                config.account_id
            ));
        }
        if config.region.is_empty() || config.region.contains(':') {
            return Err(format!("[sqs] region: {:?} is not a region", config.region));
        }
        if let Some(url) = &config.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!("[sqs] public_url: {url:?} is not an http(s) URL"));
        }
        let message_max = sluice_core::queue::limits::MESSAGE_BYTES_MAX;
        if !(1024..=message_max).contains(&config.max_message_bytes) {
            return Err(format!(
                "[sqs] max_message_bytes must be between 1024 and {message_max}"
            ));
        }
        if !(1..=sluice_core::queue::limits::BATCH_MESSAGES_MAX).contains(&config.batch_entries_max)
        {
            return Err("[sqs] batch_entries_max must be between 1 and 1000".into());
        }
        if config.request_bytes_max < 1024 {
            return Err("[sqs] request_bytes_max must be at least 1024".into());
        }
        Ok(config)
    }
}
