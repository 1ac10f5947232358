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

/// When a receive answered, what, and what that costs in memory.
struct Answered {
    at: Instant,
    messages: Vec<Message>,
    bytes: usize,
}

/// Recent receives by queue and attempt id, within `[sqs] max_receive_attempts_bytes` bytes:
/// each receive keeps a copy of its messages (bodies included), so a consumer sending a new
/// attempt id with every receive must not make the server keep everything it ever read.
#[derive(Debug)]
pub struct ReceiveAttempts {
    kept: Mutex<Kept>,
    bytes_max: usize,
}

#[derive(Debug, Default)]
struct Kept {
    by_id: HashMap<AttemptKey, Answered>,
    bytes: usize,
}

impl std::fmt::Debug for Answered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answered")
            .field("messages", &self.messages.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// What a kept receive costs: its strings, its key, and a fixed overhead per message.
fn cost(key: &AttemptKey, messages: &[Message]) -> usize {
    const PER_ENTRY: usize = 128;
    let strings: usize = messages
        .iter()
        .map(|m| {
            let attributes: usize = m.attributes.iter().map(|(k, v)| k.len() + v.len()).sum();
            let message_attributes: usize = m
                .message_attributes
                .iter()
                .map(|(k, v)| {
                    k.len()
                        + v.data_type.len()
                        + v.string_value.as_ref().map_or(0, String::len)
                        + v.binary_value.as_ref().map_or(0, |b| b.0.len())
                        + v.string_list_values.iter().map(String::len).sum::<usize>()
                        + v.binary_list_values
                            .iter()
                            .map(|b| b.0.len())
                            .sum::<usize>()
                })
                .sum();
            m.message_id.len()
                + m.receipt_handle.len()
                + m.md5_of_body.len()
                + m.body.len()
                + m.md5_of_message_attributes.as_ref().map_or(0, String::len)
                + attributes
                + message_attributes
                + PER_ENTRY
        })
        .sum();
    key.0.len() + key.1.len() + PER_ENTRY + strings
}

impl Default for ReceiveAttempts {
    fn default() -> Self {
        Self::new(super::SqsConfig::default().max_receive_attempts_bytes)
    }
}

impl ReceiveAttempts {
    /// Kept receives may hold at most `bytes_max` bytes.
    pub fn new(bytes_max: usize) -> Self {
        Self {
            kept: Mutex::default(),
            bytes_max,
        }
    }

    /// The messages an earlier receive with this attempt id returned, if it was recent.
    pub fn get(&self, queue: &str, attempt: &str) -> Option<Vec<Message>> {
        let kept = self.kept.lock();
        let answered = kept.by_id.get(&(queue.to_owned(), attempt.to_owned()))?;
        (answered.at.elapsed() < KEPT_FOR).then(|| answered.messages.clone())
    }

    /// Remembers what a receive with this attempt id returned, forgetting the oldest receives
    /// as needed to stay within the bytes and the count. A receive larger than the whole
    /// budget is not kept: a retry of it is answered as a new receive.
    pub fn put(&self, queue: &str, attempt: &str, messages: Vec<Message>) {
        let key = (queue.to_owned(), attempt.to_owned());
        let bytes = cost(&key, &messages);
        let mut kept = self.kept.lock();
        kept.remove(&key);
        let Kept { by_id, bytes: held } = &mut *kept;
        by_id.retain(|_, answered| {
            let keep = answered.at.elapsed() < KEPT_FOR;
            if !keep {
                *held -= answered.bytes;
            }
            keep
        });
        if bytes > self.bytes_max {
            return;
        }
        while by_id.len() >= ATTEMPTS_MAX || *held + bytes > self.bytes_max {
            let Some(oldest) = by_id
                .iter()
                .min_by_key(|(_, answered)| answered.at)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            if let Some(gone) = by_id.remove(&oldest) {
                *held -= gone.bytes;
            }
        }
        *held += bytes;
        by_id.insert(
            key,
            Answered {
                at: Instant::now(),
                messages,
                bytes,
            },
        );
    }

    /// Forgets an attempt whose messages no longer hold (one was deleted or changed).
    pub fn forget(&self, queue: &str, attempt: &str) {
        self.kept
            .lock()
            .remove(&(queue.to_owned(), attempt.to_owned()));
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.kept.lock().bytes
    }
}

impl Kept {
    fn remove(&mut self, key: &AttemptKey) {
        if let Some(gone) = self.by_id.remove(key) {
            self.bytes -= gone.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_answer_per_queue_and_stay_bounded() {
        let attempts = ReceiveAttempts::new(1 << 30);
        let message = Message {
            message_id: "m".into(),
            ..Message::default()
        };
        attempts.put("q", "a", vec![message.clone()]);
        assert_eq!(attempts.get("q", "a"), Some(vec![message]));
        assert_eq!(attempts.get("other", "a"), None);
        attempts.forget("q", "a");
        assert_eq!(attempts.get("q", "a"), None);
        assert_eq!(attempts.held(), 0);
        for i in 0..ATTEMPTS_MAX + 5 {
            attempts.put("q", &i.to_string(), Vec::new());
        }
        assert_eq!(attempts.kept.lock().by_id.len(), ATTEMPTS_MAX);
    }

    /// Issue 30, finding 6: 400 receives of 10 × 900 KB, each with a new attempt id, were all
    /// kept (bodies included), up to 10,000 of them: 3.77 GB after 400.
    #[test]
    fn kept_receives_stay_within_their_bytes_forgetting_the_oldest() {
        let budget = 10 * 1024 * 1024;
        let attempts = ReceiveAttempts::new(budget);
        let big = |id: usize| Message {
            message_id: format!("m{id}"),
            body: "x".repeat(900 * 1024),
            ..Message::default()
        };
        for i in 0..400 {
            attempts.put(
                "q.fifo",
                &format!("attempt-{i}"),
                (0..10).map(|j| big(i * 10 + j)).collect(),
            );
            assert!(attempts.held() <= budget, "{} > {budget}", attempts.held());
        }
        assert!(attempts.held() > 0, "the newest receive that fits is kept");
        assert!(attempts.get("q.fifo", "attempt-399").is_some());
        assert!(attempts.get("q.fifo", "attempt-0").is_none());
        // One receive larger than the whole budget is not kept at all.
        let small = ReceiveAttempts::new(1024);
        small.put("q.fifo", "huge", vec![big(0)]);
        assert_eq!(small.held(), 0);
        assert!(small.get("q.fifo", "huge").is_none());
    }
}
