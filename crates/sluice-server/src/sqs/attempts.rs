//! `ReceiveRequestAttemptId` (FIFO queues): a receive retried with the same attempt id within
//! five minutes gets the same messages and receipt handles again, with their visibility
//! timeout started anew, as long as it still holds all of them; SQS's answer to a receive
//! whose reply was lost (docs/design/sqs-compat.md §4).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_sqs::response::Message;

/// How long an attempt id answers with its messages (SQS's five minutes).
const KEPT_FOR: Duration = Duration::from_secs(5 * 60);
/// Most attempts remembered; the oldest are forgotten first beyond it.
const ATTEMPTS_MAX: usize = 10_000;

/// A receive's queue and attempt id.
type AttemptKey = (String, String);

/// When a receive answered, and what.
type Answered = (Instant, Vec<Message>);

/// Recent receives by queue and attempt id.
#[derive(Debug, Default)]
pub struct ReceiveAttempts {
    by_id: Mutex<HashMap<AttemptKey, Answered>>,
}

impl ReceiveAttempts {
    /// The messages an earlier receive with this attempt id returned, if it was recent.
    pub fn get(&self, queue: &str, attempt: &str) -> Option<Vec<Message>> {
        let by_id = self.by_id.lock();
        let (at, messages) = by_id.get(&(queue.to_owned(), attempt.to_owned()))?;
        (at.elapsed() < KEPT_FOR).then(|| messages.clone())
    }

    /// Remembers what a receive with this attempt id returned.
    pub fn put(&self, queue: &str, attempt: &str, messages: Vec<Message>) {
        let mut by_id = self.by_id.lock();
        by_id.retain(|_, (at, _)| at.elapsed() < KEPT_FOR);
        if by_id.len() >= ATTEMPTS_MAX
            && let Some(oldest) = by_id
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(key, _)| key.clone())
        {
            by_id.remove(&oldest);
        }
        by_id.insert(
            (queue.to_owned(), attempt.to_owned()),
            (Instant::now(), messages),
        );
    }

    /// Forgets an attempt whose messages no longer hold (one was deleted or changed).
    pub fn forget(&self, queue: &str, attempt: &str) {
        self.by_id
            .lock()
            .remove(&(queue.to_owned(), attempt.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_answer_per_queue_and_stay_bounded() {
        let attempts = ReceiveAttempts::default();
        let message = Message {
            message_id: "m".into(),
            ..Message::default()
        };
        attempts.put("q", "a", vec![message.clone()]);
        assert_eq!(attempts.get("q", "a"), Some(vec![message]));
        assert_eq!(attempts.get("other", "a"), None);
        attempts.forget("q", "a");
        assert_eq!(attempts.get("q", "a"), None);
        for i in 0..ATTEMPTS_MAX + 5 {
            attempts.put("q", &i.to_string(), Vec::new());
        }
        assert_eq!(attempts.by_id.lock().len(), ATTEMPTS_MAX);
    }
}
