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
    /// (`batch_entries_max`, its earlier name, is read too.)
    #[serde(alias = "batch_entries_max")]
    pub max_batch_entries: Option<usize>,
    /// Largest SQS request body read (default 4 MiB: a full batch, encoded).
    /// (`request_bytes_max`, its earlier name, is read too.)
    #[serde(alias = "request_bytes_max")]
    pub max_request_bytes: Option<usize>,
    /// Bytes of FIFO receives kept for retries with the same `ReceiveRequestAttemptId`
    /// (default 64 MiB); the oldest are forgotten first beyond it.
    /// (`receive_attempts_bytes_max`, its earlier name, is read too.)
    #[serde(alias = "receive_attempts_bytes_max")]
    pub max_receive_attempts_bytes: Option<usize>,
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
    pub max_batch_entries: usize,
    /// Largest request body.
    pub max_request_bytes: usize,
    /// Bytes of receives kept for `ReceiveRequestAttemptId` retries.
    pub max_receive_attempts_bytes: usize,
}

impl Default for SqsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            account_id: "000000000000".into(),
            region: "us-east-1".into(),
            public_url: None,
            max_message_bytes: 1024 * 1024,
            max_batch_entries: 10,
            max_request_bytes: 4 * 1024 * 1024,
            max_receive_attempts_bytes: 64 * 1024 * 1024,
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
            max_batch_entries: raw.max_batch_entries.unwrap_or(d.max_batch_entries),
            max_request_bytes: raw.max_request_bytes.unwrap_or(d.max_request_bytes),
            max_receive_attempts_bytes: raw
                .max_receive_attempts_bytes
                .unwrap_or(d.max_receive_attempts_bytes),
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
        if !(1..=sluice_core::queue::limits::BATCH_MESSAGES_MAX).contains(&config.max_batch_entries)
        {
            return Err("[sqs] max_batch_entries must be between 1 and 1000".into());
        }
        if config.max_request_bytes < 1024 {
            return Err("[sqs] max_request_bytes must be at least 1024".into());
        }
        Ok(config)
    }
}
