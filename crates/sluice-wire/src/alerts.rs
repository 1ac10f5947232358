//! The JSON (and TOML) shapes of alerts: operations told when messages are dead-lettered or a
//! queue backs up, at most once per queue and kind per window.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{QueueStatsOut, SecretRef};

/// Where an alert's notifications go. At most one of `slack_url`, `webhook_url` and
/// `command`; with none, notifications wait in the alert's queue for a consumer of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertDestinationSpec {
    /// A Slack incoming-webhook URL: each notification is a Slack message. Its path is a
    /// secret: tokens that are not admins see it hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slack_url: Option<String>,
    /// A URL each notification is sent to as JSON (an [`AlertEventOut`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// With `webhook_url`: sign each request with Standard Webhooks headers using this
    /// `whsec_` secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<SecretRef>,
    /// With `webhook_url`: extra request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// A program and its arguments, run with each notification's JSON on its standard input;
    /// exit status 0 is delivered. Only the config file may name one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
}

/// An alert: `PUT /v1/alerts/{name}` or `[alerts.<name>]` in the config file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlertSpec {
    /// The queues watched: names, or prefixes ending in `*` (default `["*"]`, every queue).
    /// Dead-letter queues and alerts' own queues are never watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queues: Option<Vec<String>>,
    /// Notify when messages are dead-lettered (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letters: Option<bool>,
    /// Notify while a queue holds more than this many messages (ready, delayed and in
    /// flight), and once when it is back at or under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth_above: Option<u64>,
    /// Notify while a queue's oldest ready message is older than this (ms), and once when it
    /// is no longer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_ready_age_above_ms: Option<i64>,
    /// At most one notification per queue and kind per window, in ms (default 300000; at
    /// least 1000). Dead letters arriving in between are counted into the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<i64>,
    /// Errors quoted in a dead-letter notification, newest first (default 5; at most 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_size: Option<u32>,
    /// Where notifications go.
    #[serde(default)]
    pub destination: AlertDestinationSpec,
    /// Delivery attempts of one notification before it is dead-lettered in the alert's
    /// queue (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
}

/// What an alert has sent, per kind, since it was defined.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertSentOut {
    /// Dead-letter notifications.
    pub dead_letters: u64,
    /// Dead letters those notifications counted.
    pub dead_letters_counted: u64,
    /// Depth notifications (firing and resolved).
    pub depth: u64,
    /// Oldest-ready-age notifications (firing and resolved).
    pub oldest_ready_age: u64,
}

/// An alert, its definition and what it did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertOut {
    /// Its name.
    pub name: String,
    /// The definition (a Slack URL hidden from tokens that are not admins).
    pub spec: AlertSpec,
    /// The queue its notifications go through (`sluice.alerts.<name>`): retried with backoff
    /// and dead-lettered there like any message.
    pub queue: String,
    /// Notifications made.
    pub sent: AlertSentOut,
    /// When the last notification was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sent_at: Option<String>,
    /// Queues whose depth or oldest-ready age is over a threshold now.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub firing: Vec<String>,
    /// The delivery queue's stats: notifications waiting, failing, delivered, dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<QueueStatsOut>,
}

/// Answer to `GET /v1/alerts`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertListOut {
    /// Every alert, by name.
    pub alerts: Vec<AlertOut>,
}

/// Answer to `PUT /v1/alerts/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertPutOut {
    /// False when an existing alert was replaced.
    pub created: bool,
    /// The alert as it is now.
    pub alert: AlertOut,
}

/// Answer to `DELETE /v1/alerts/{name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertDeleteOut {
    /// Always true.
    pub deleted: bool,
}

/// One dead letter quoted in a notification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlertSampleOut {
    /// The dead letter's id.
    pub message_id: String,
    /// The error of its last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Attempts it had.
    pub attempts: u32,
    /// When it was dead-lettered.
    pub dead_lettered_at: String,
}

/// One notification, as a webhook or a command receives it (a Slack destination gets its
/// `text`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AlertEventOut {
    /// `dead_letters`, `depth` or `oldest_ready_age`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `firing`, or `resolved` once a threshold is no longer passed (dead letters always fire).
    pub status: String,
    /// The alert's name.
    pub alert: String,
    /// The queue it is about.
    pub queue: String,
    /// When the notification was made.
    pub timestamp: String,
    /// A one-paragraph summary for people.
    pub text: String,
    /// Dead letters: how many were dead-lettered in `[since, until)` and are still in the
    /// dead-letter queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Dead letters: true when there were more than could be counted (`count` is a floor).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count_capped: bool,
    /// Dead letters: the start of the span counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Dead letters: the end of the span counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// Dead letters: the queue they are in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<String>,
    /// Dead letters: the newest ones' errors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sample: Vec<AlertSampleOut>,
    /// Thresholds: the value now (messages, or ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// Thresholds: the threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<i64>,
    /// The dashboard page to look at, when the server knows its address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dashboard_url: Option<String>,
}
