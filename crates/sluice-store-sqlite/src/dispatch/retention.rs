//! Retention in the index: finds the messages [`sluice_core::rules::retention`] says have expired,
//! oldest first and within a budget, and drops or dead-letters them.

use std::sync::Arc;

use sluice_core::clock::Millis;
use sluice_core::rules::retention::{self, Expiry};

use super::{Change, Entry, Index, MAX_AGE_ERROR, Seq};

impl Index {
    /// Retention: removes (or dead-letters, as the queue says) messages older than their
    /// queue's `max_age_ms`, looking at no more than `budget` messages. Leased messages are left
    /// to their consumer and looked at again once their lease ends.
    pub fn expire(&mut self, now_ms: Millis, budget: usize) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut looked = 0;
        let mut names = self.queue_names();
        if let Some(from) = self.expire_from.take() {
            let start = names.partition_point(|name| *name <= from);
            names.rotate_left(start);
        }
        for name in names {
            let Some(state) = self.queues.get(&*name) else {
                continue;
            };
            let config = state.config.clone();
            let due: Vec<Seq> = state
                .members
                .iter()
                .take_while(|&&(aged_from, _)| retention::is_expired(&config, aged_from, now_ms))
                .take(budget - looked)
                .map(|&(_, seq)| seq)
                .collect();
            looked += due.len();
            for seq in due {
                if self.entries.get(&seq).is_none_or(Entry::is_leased) {
                    continue;
                }
                if let Some(state) = self.queues.get_mut(&*name) {
                    state.counters.expired += 1;
                }
                match retention::on_expiry(&config) {
                    Expiry::DeadLetter { queue: dlq } => changes.extend(
                        self.dead_letter(seq, dlq, Arc::from(MAX_AGE_ERROR), now_ms)
                            .map(|(change, _)| change),
                    ),
                    Expiry::Drop => {
                        if self.remove(seq, now_ms).is_some() {
                            changes.push(Change::Expired { seq });
                        }
                    }
                }
            }
            if looked >= budget {
                self.expire_from = Some(name);
                break;
            }
        }
        changes
    }
}
