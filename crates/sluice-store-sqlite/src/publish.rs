//! Answering a durable group: new messages enter the dispatch index, long polls are woken, and
//! the callers get their replies. Nothing is published before the group is on disk.

use std::sync::Arc;

use crate::dispatch::Index;
use parking_lot::Mutex;
use sluice_core::notify::Notifier;
use sluice_core::store::StoreError;

use crate::writer::Pending;

/// What publishing needs.
pub struct Publisher {
    pub index: Arc<Mutex<Index>>,
    pub notifier: Arc<Notifier>,
    /// Body bytes the index may hold in memory.
    pub payload_cache_bytes: usize,
}

impl Publisher {
    /// After commit: new messages enter the index, waiters are woken, callers answered.
    pub fn publish(&self, pendings: Vec<Pending>) {
        let mut pendings = Pending::flatten(pendings);
        let mut woken: Vec<(Arc<str>, u64)> = Vec::new();
        {
            let mut index = self.index.lock();
            for pending in &mut pendings {
                if let Pending::Enqueue {
                    entries,
                    results,
                    queue,
                    now_ms,
                    charge,
                    ..
                } = pending
                {
                    if index.queue_config(queue).is_none() {
                        continue; // deleted meanwhile
                    }
                    // An enqueue's uncreated results are idempotency hits (a replay's are rows
                    // that were gone).
                    if charge.is_some() {
                        let hits = results.iter().filter(|result| !result.created).count();
                        index.count_deduplicated(queue, hits as u64);
                    }
                    let count = entries.len() as u64;
                    // Entries are the created results, in order.
                    let mut created = results.iter_mut().filter(|result| result.created);
                    for mut entry in entries.drain(..) {
                        if index.cached_payload_bytes() > self.payload_cache_bytes {
                            entry.payload = None;
                        }
                        if let Some(result) = created.next() {
                            result.position = index.queue_len(&entry.queue);
                        }
                        index.admit(entry, *now_ms);
                    }
                    index.count_enqueued(queue, count, *now_ms);
                    if count > 0 {
                        match woken.iter_mut().find(|(name, _)| name == queue) {
                            Some((_, messages)) => *messages += count,
                            None => woken.push((queue.clone(), count)),
                        }
                    }
                }
            }
        }
        // One waiter per new message (everyone from a few on): a message at 2,000 msgs/s with
        // four consumers long-polling used to wake all four, and three claimed nothing.
        for (queue, messages) in &woken {
            self.notifier.wake_for(queue, *messages);
        }
        for pending in pendings {
            match pending {
                Pending::Enqueue {
                    reply,
                    results,
                    charge,
                    ..
                } => {
                    // The inbox room is free before the caller hears, so its next batch finds it.
                    drop(charge);
                    let _ = reply.send(Ok(results));
                }
                Pending::Unit(reply) => {
                    let _ = reply.send(Ok(()));
                }
                Pending::Nothing | Pending::Together(_) => {}
            }
        }
    }

    /// Answers every caller of a group that could not be made durable with `error()`.
    pub fn fail(&self, pendings: Vec<Pending>, error: impl Fn() -> StoreError) {
        for pending in Pending::flatten(pendings) {
            match pending {
                Pending::Enqueue { reply, charge, .. } => {
                    drop(charge);
                    let _ = reply.send(Err(error()));
                }
                Pending::Unit(reply) => {
                    let _ = reply.send(Err(error()));
                }
                Pending::Nothing | Pending::Together(_) => {}
            }
        }
    }
}
