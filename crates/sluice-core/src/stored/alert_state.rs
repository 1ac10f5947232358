//! Where an alert stands, as every store keeps it (a [`crate::store::DefinitionKind::AlertState`]
//! row beside the definition): per watched queue, the dead letters already counted and the
//! thresholds' firing state, plus what the alert has sent. The field names are a format at
//! rest; a field a row lacks takes its default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Millis;

/// An alert's progress.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AlertState {
    /// When the alert was defined: dead letters from then on are its to count, in a queue it
    /// watches from then or from later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<Millis>,
    /// Per watched queue.
    #[serde(default)]
    pub queues: BTreeMap<String, QueueMarks>,
    /// Notifications made, by kind.
    #[serde(default)]
    pub sent: SentCounts,
    /// When the last one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sent_ms: Option<Millis>,
}

/// Notifications made, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SentCounts {
    #[serde(default)]
    pub dead_letters: u64,
    #[serde(default)]
    pub dead_letters_counted: u64,
    #[serde(default)]
    pub depth: u64,
    #[serde(default)]
    pub oldest_ready_age: u64,
}

/// One queue's marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct QueueMarks {
    /// Dead letters dead-lettered before this time are counted (or came before the alert).
    pub dead_letters_from_ms: Millis,
    /// When the last dead-letter notification was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letters_sent_ms: Option<Millis>,
    /// A dead-letter notification decided by a pass and not yet made: the next pass (any
    /// node's) makes exactly this one, so the count sent and the count recorded are the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingDeadLetters>,
    /// The depth threshold.
    #[serde(default)]
    pub depth: ThresholdMark,
    /// The oldest-ready-age threshold.
    #[serde(default)]
    pub oldest_ready_age: ThresholdMark,
}

/// A dead-letter notification decided and not yet made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingDeadLetters {
    /// The span counted: dead-lettered at or after this time...
    pub since_ms: Millis,
    /// ... and before this one.
    pub until_ms: Millis,
    /// How many.
    pub count: u64,
    /// More than could be counted.
    #[serde(default)]
    pub capped: bool,
    /// When it was decided (the notification's time).
    pub decided_ms: Millis,
}

/// Where a threshold stands for one queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ThresholdMark {
    /// Passed at the last notification.
    #[serde(default)]
    pub firing: bool,
    /// When the last notification was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<Millis>,
}

impl AlertState {
    /// The JSON kept at rest.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an alert state is plain data")
    }

    /// Reads the JSON kept at rest; a text that does not read starts over (no queue marked, so
    /// each queue's dead letters count from the next pass, never the whole past).
    pub fn from_json(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }
}
