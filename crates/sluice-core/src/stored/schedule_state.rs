//! Where a schedule stands, as every store keeps it beside the definition: a JSON text whose
//! field names are a format at rest (a field a row lacks takes its default), and the last run
//! done, kept apart too so a store can make "advance only from where I read it" one compare.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Millis;

/// A schedule's progress.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ScheduleState {
    /// Runs up to this time (epoch ms) are done: made, skipped, or passed while paused.
    pub last_run_ms: Millis,
    /// Runs made.
    #[serde(default)]
    pub runs: u64,
    /// Runs not made because of the missed-run policy.
    #[serde(default)]
    pub skipped_runs: u64,
    /// When the last run's message was enqueued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_enqueued_at_ms: Option<Millis>,
    /// The last run's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_message_id: Option<Uuid>,
    /// Why the last attempt to make a run failed; cleared by the next run made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl ScheduleState {
    /// A schedule starting now: runs before `now_ms` are not its runs, missed or otherwise.
    pub fn starting(now_ms: Millis) -> Self {
        Self {
            last_run_ms: now_ms,
            ..Self::default()
        }
    }

    /// The JSON kept at rest.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a schedule state is plain data")
    }

    /// Reads the JSON kept at rest; a text that does not read starts at `last_run_ms` with no
    /// counts, so a damaged row never fires a schedule's whole past.
    pub fn from_json(text: &str, last_run_ms: Millis) -> Self {
        serde_json::from_str::<Self>(text)
            .map(|state| Self {
                last_run_ms,
                ..state
            })
            .unwrap_or_else(|_| Self::starting(last_run_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_is_stable() {
        let state = ScheduleState {
            last_run_ms: 60_000,
            runs: 3,
            skipped_runs: 1,
            last_enqueued_at_ms: Some(60_004),
            last_message_id: None,
            last_error: Some("queue_full".into()),
        };
        let text = state.to_json();
        assert_eq!(
            text,
            r#"{"last_run_ms":60000,"runs":3,"skipped_runs":1,"last_enqueued_at_ms":60004,"last_error":"queue_full"}"#
        );
        assert_eq!(ScheduleState::from_json(&text, 60_000), state);
        // The column wins over the JSON; a damaged text keeps the column and nothing else.
        assert_eq!(
            ScheduleState::from_json(&text, 120_000).last_run_ms,
            120_000
        );
        assert_eq!(ScheduleState::from_json("{", 5), ScheduleState::starting(5));
    }
}
