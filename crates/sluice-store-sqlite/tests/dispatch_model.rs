//! Model-based test of the dispatch index: random sequences of enqueue, claim, ack, nack,
//! extend, cancel, purge, retention, pause and clock moves against a `per_key` queue with
//! `max_in_flight`, checked after every step against a simple model of what must hold: nothing
//! is lost or invented, an acked message never comes back, a key never has two messages in
//! flight (unless a claim with runs took them together, in order), no more than
//! `max_in_flight` leases are out, a paused queue delivers nothing, each
//! key's messages are first delivered in enqueue order, a current receipt always acks while a
//! replaced one never does, and only unleased messages are cancelled, purged or expired (and
//! only old ones expire). After every step the index also checks its own consistency
//! ([`Index::check_invariants`]: every message in exactly one set, lanes with their out
//! members, totals and ids in step).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use proptest::prelude::*;
use sluice_core::message::Receipt;
use sluice_core::queue::{Backoff, Ordering, QueueConfig};
use sluice_core::store::NackOutcome;
use sluice_store_sqlite::dispatch::{CancelRefused, Change, Entry, Index};
use uuid::Uuid;

const LEASE_MS: i64 = 1_000;
const MAX_IN_FLIGHT: u32 = 3;
const MAX_AGE_MS: i64 = 20_000;

#[derive(Debug, Clone)]
enum Op {
    Enqueue {
        key: Option<u8>,
        priority: i32,
        delay_ms: i64,
    },
    Claim {
        max: usize,
        /// A claim that takes runs of a key's messages (SQS's FIFO receive).
        runs: bool,
    },
    Ack {
        pick: usize,
    },
    Nack {
        pick: usize,
        permanent: bool,
    },
    Extend {
        pick: usize,
    },
    Advance {
        ms: i64,
    },
    Cancel {
        pick: usize,
    },
    Purge,
    Expire,
    Pause {
        paused: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (proptest::option::of(0u8..4), 0i32..3, prop_oneof![Just(0i64), 1i64..3_000]).prop_map(|(key, priority, delay_ms)| Op::Enqueue { key, priority, delay_ms }),
        3 => (1usize..5, any::<bool>()).prop_map(|(max, runs)| Op::Claim { max, runs }),
        2 => any::<usize>().prop_map(|pick| Op::Ack { pick }),
        1 => (any::<usize>(), proptest::bool::weighted(0.2)).prop_map(|(pick, permanent)| Op::Nack { pick, permanent }),
        1 => any::<usize>().prop_map(|pick| Op::Extend { pick }),
        2 => (0i64..2_500).prop_map(|ms| Op::Advance { ms }),
        1 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        1 => Just(Op::Expire),
        1 => proptest::bool::weighted(0.3).prop_map(|paused| Op::Pause { paused }),
        // Rare, or nothing would be left to check.
        1 => proptest::bool::weighted(0.1).prop_map(|purge| if purge { Op::Purge } else { Op::Expire }),
    ]
}

/// What the model knows of one message.
struct Known {
    key: Option<u8>,
    order: usize,
    done: bool,
    delivered: bool,
    enqueued_at: i64,
}

/// Leases that ran out on their last attempt move messages to the DLQ; the model follows.
/// False when a message the model holds live is unknown to the index.
fn follow_dead_letters(index: &Index, known: &mut HashMap<Uuid, Known>) -> bool {
    for (id, message) in known.iter_mut().filter(|(_, m)| !m.done) {
        match index.status(id) {
            None => return false,
            Some(status) if status.queue == "q.dlq" => message.done = true,
            Some(_) => {}
        }
    }
    true
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn dispatch_keeps_its_promises(ops in proptest::collection::vec(op(), 1..150)) {
        let mut config = QueueConfig::defaults_for("q");
        config.ordering = Ordering::PerKey;
        config.max_attempts = 3;
        config.backoff = Backoff { initial_ms: 500, max_ms: 2_000, factor: 2.0, jitter: true };
        config.max_in_flight = Some(MAX_IN_FLIGHT);
        config.max_age_ms = MAX_AGE_MS;
        let mut index = Index::new();
        index.queue_put("q", config).unwrap();
        index.queue_put("q.dlq", QueueConfig::for_dead_letter_queue("q.dlq")).unwrap();

        let mut now = 1_000_000i64;
        let mut next_seq = 1u64;
        let mut known: HashMap<Uuid, Known> = HashMap::new();
        // Receipts handed out from q and not yet used: (receipt, lease deadline).
        let mut outstanding: Vec<(Receipt, i64)> = Vec::new();
        let mut enqueued_per_key: BTreeMap<u8, usize> = BTreeMap::new();
        let mut id_of_seq: HashMap<u64, Uuid> = HashMap::new();
        let mut paused = false;

        for op in ops {
            let op_text = format!("{op:?}");
            match op {
                Op::Enqueue { key, priority, delay_ms } => {
                    let id = Uuid::now_v7();
                    let order = key.map_or(0, |k| { let n = enqueued_per_key.entry(k).or_default(); *n += 1; *n });
                    let entry = Entry::new(next_seq, id, Arc::from("q"), priority, key.map(|k| Arc::from(k.to_string())), now, now + delay_ms);
                    id_of_seq.insert(next_seq, id);
                    next_seq += 1;
                    index.insert(entry, now);
                    known.insert(id, Known { key, order, done: false, delivered: false, enqueued_at: now });
                }
                Op::Claim { max, runs } => {
                    index.tick_queue("q", now);
                    prop_assert!(follow_dead_letters(&index, &mut known), "a message was lost");
                    // Leases that ran out are no longer held.
                    outstanding.retain(|(_, deadline)| *deadline > now);
                    let claimed = index.claim("q", max, runs, LEASE_MS, now, rand::random);
                    prop_assert!(!paused || claimed.is_empty(), "a paused queue delivered");
                    let in_flight = index.depth("q", now).unwrap().in_flight;
                    prop_assert!(in_flight <= u64::from(MAX_IN_FLIGHT), "{in_flight} leases out");
                    // A key in flight before this claim gets nothing; without runs a claim takes
                    // one message of a key, with runs the key's messages in order.
                    let held_keys: HashSet<u8> = outstanding.iter().filter_map(|(r, _)| known[&r.message_id].key).collect();
                    let mut taken: HashMap<u8, Vec<Uuid>> = HashMap::new();
                    for claim in claimed {
                        let id = claim.message.message_id;
                        let message = known.get_mut(&id).expect("claimed a message that was never enqueued");
                        prop_assert!(!message.done, "an acked or dead-lettered message was delivered again");
                        if let Some(key) = message.key {
                            prop_assert!(!held_keys.contains(&key), "key {key}: a message handed out while another is in flight");
                            let this_claim = taken.entry(key).or_default();
                            prop_assert!(runs || this_claim.is_empty(), "two messages of key {key} in one claim without runs");
                            if let Some(before) = this_claim.last() {
                                prop_assert!(known[before].order < known[&id].order, "key {key}: a run out of order");
                            }
                            this_claim.push(id);
                            if !known[&id].delivered {
                                let order = known[&id].order;
                                let earlier_pending = known.iter().any(|(other, m)| m.key == Some(key) && m.order < order && !m.done && !this_claim.contains(other));
                                prop_assert!(!earlier_pending, "key {key}: message {order} delivered before an earlier one finished");
                            }
                        }
                        known.get_mut(&id).unwrap().delivered = true;
                        outstanding.retain(|(r, _)| r.message_id != id);
                        outstanding.push((claim.message.receipt, now + LEASE_MS));
                    }
                }
                Op::Ack { pick } if !outstanding.is_empty() => {
                    let (receipt, deadline) = outstanding.remove(pick % outstanding.len());
                    let result = index.ack("q", &receipt, now);
                    if deadline > now {
                        prop_assert!(result.is_ok(), "a current receipt was refused: {result:?}");
                    }
                    if result.is_ok() {
                        known.get_mut(&receipt.message_id).unwrap().done = true;
                    }
                }
                Op::Nack { pick, permanent } if !outstanding.is_empty() => {
                    let (receipt, deadline) = outstanding.remove(pick % outstanding.len());
                    match index.nack("q", &receipt, None, None, permanent, now) {
                        Ok((_, NackOutcome::DeadLettered { .. })) => known.get_mut(&receipt.message_id).unwrap().done = true,
                        Ok((_, NackOutcome::Retry { visible_at_ms })) => prop_assert!(!permanent && visible_at_ms >= now + 250),
                        Err(error) => prop_assert!(deadline <= now, "a current receipt was refused: {error:?}"),
                    }
                }
                Op::Extend { pick } if !outstanding.is_empty() => {
                    let position = pick % outstanding.len();
                    let (receipt, deadline) = outstanding[position];
                    match index.extend("q", &receipt, LEASE_MS, now) {
                        Ok(new_deadline) => outstanding[position].1 = new_deadline,
                        Err(_) => { prop_assert!(deadline <= now); outstanding.remove(position); }
                    }
                }
                Op::Advance { ms } => now += ms,
                Op::Cancel { pick } => {
                    let live: Vec<Uuid> = known.iter().filter(|(_, m)| !m.done).map(|(id, _)| *id).collect();
                    if live.is_empty() { continue; }
                    let id = live[pick % live.len()];
                    let held = outstanding.iter().any(|(r, deadline)| r.message_id == id && *deadline > now);
                    match index.cancel("q", &id, now) {
                        Ok(entry) => {
                            prop_assert_eq!(entry.id, id);
                            prop_assert!(!held, "cancelled a message under a live lease");
                            known.get_mut(&id).unwrap().done = true;
                            outstanding.retain(|(r, _)| r.message_id != id);
                        }
                        Err(CancelRefused::InFlight) => prop_assert!(index.status(&id).is_some_and(|s| s.lease_expires_at_ms.is_some())),
                        Err(CancelRefused::NotHere) => prop_assert!(false, "a live message of q was not found"),
                    }
                }
                Op::Purge => {
                    let members = index.members("q");
                    for entry in index.remove_unleased("q", &members, now) {
                        let held = outstanding.iter().any(|(r, deadline)| r.message_id == entry.id && *deadline > now);
                        prop_assert!(!held, "purged a message under a live lease");
                        known.get_mut(&entry.id).unwrap().done = true;
                        outstanding.retain(|(r, _)| r.message_id != entry.id);
                    }
                }
                Op::Expire => {
                    for change in index.expire(now, 5) {
                        let Change::Expired { seq } = change else {
                            prop_assert!(false, "on_expire = drop dead-lettered: {change:?}");
                            continue;
                        };
                        let id = id_of_seq[&seq];
                        let message = known.get_mut(&id).unwrap();
                        prop_assert!(now - message.enqueued_at >= MAX_AGE_MS, "expired a message {} ms old", now - message.enqueued_at);
                        prop_assert!(!message.done);
                        message.done = true;
                        let held = outstanding.iter().any(|(r, deadline)| r.message_id == id && *deadline > now);
                        prop_assert!(!held, "expired a message under a live lease");
                        outstanding.retain(|(r, _)| r.message_id != id);
                    }
                }
                Op::Pause { paused: pause } => {
                    index.set_paused("q", pause);
                    paused = pause;
                }
                Op::Ack { .. } | Op::Nack { .. } | Op::Extend { .. } => {}
            }
            // The index agrees with itself: sets, lanes, counts and ids in step.
            if let Err(broken) = index.check_invariants() {
                prop_assert!(false, "after {op_text}: {broken}");
            }
            prop_assert!(follow_dead_letters(&index, &mut known), "a message was lost");
            // Nothing lost, nothing invented: live messages in q and its DLQ match the model.
            let live_in_q = known.values().filter(|m| !m.done).count() as u64;
            prop_assert_eq!(index.queue_len("q"), live_in_q);
            let dead = known.keys().filter(|id| index.status(id).is_some_and(|s| s.queue == "q.dlq")).count() as u64;
            prop_assert_eq!(index.queue_len("q.dlq"), dead);
        }

        // In the end, with time moving on, every unfinished message can still be delivered.
        index.set_paused("q", false);
        now += 10 * 60 * 1000;
        let mut remaining: HashSet<Uuid> = known.iter().filter(|(_, m)| !m.done).map(|(id, _)| *id).collect();
        for _ in 0..10_000 {
            if remaining.is_empty() { break; }
            index.tick_queue("q", now);
            remaining.retain(|id| index.status(id).is_some_and(|s| s.queue == "q"));
            for claim in index.claim("q", 100, true, LEASE_MS, now, rand::random) {
                remaining.remove(&claim.message.message_id);
                index.ack("q", &claim.message.receipt, now).unwrap();
            }
            if let Err(broken) = index.check_invariants() {
                prop_assert!(false, "while draining: {broken}");
            }
        }
        prop_assert!(remaining.is_empty(), "{} messages could never be delivered", remaining.len());
    }
}
