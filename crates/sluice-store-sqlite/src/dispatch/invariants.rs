//! The index's internal consistency, checked from outside its operations.
//!
//! Every operation of [`Index`] keeps several structures in step: the entries by seq, the ids,
//! each queue's ready, delayed and leased sets, its members by age, its lanes, its total, and
//! the bytes of cached payloads. [`Index::check_invariants`] walks all of them and says which
//! rule broke. It is public (not behind a feature) so that tests of the index and of stores
//! built on it can call it without a special build; it is O(n log n) in the messages held and
//! meant for tests and debugging, never for a request path.

use std::cmp::Reverse;
use std::collections::HashSet;

use super::{Entry, Index, Place, QueueState, Seq};

impl Index {
    /// Checks that the index is consistent with itself; the error names the first rule broken
    /// and the message it broke it for.
    ///
    /// The rules:
    /// - every entry is known by its id, and every id names an entry with that id;
    /// - every entry's queue exists, lists it among its members under the time its retention
    ///   counts from, and counts it in its total (a queue's total is its number of members);
    /// - an entry is in exactly the set its place says (ready by priority then seq, delayed by
    ///   visible time, leased by deadline; a waiting entry in none), and every element of those
    ///   sets is such an entry of that queue;
    /// - a leased entry has a lease start and no left-over expired-lease token;
    /// - in an ordered queue, every entry with a lane is a member of it, and only the lane's
    ///   out members are ready, delayed or leased: the others wait. A lane has at least one
    ///   member out, all of them its members; when it has several (a run), every one is leased.
    ///   So without runs a lane never has two messages in flight. No lane is empty;
    /// - an entry without a lane (unordered queue, or no key in a `per_key` queue) never waits;
    /// - the cached payload bytes are the sum of the payloads held.
    pub fn check_invariants(&self) -> Result<(), String> {
        for (id, seq) in &self.foreign_ids {
            match self.entries.get(seq) {
                Some(entry) if entry.id == *id => {}
                Some(entry) => {
                    return Err(format!(
                        "id {id} points at seq {seq}, which holds id {}",
                        entry.id
                    ));
                }
                None => return Err(format!("id {id} points at seq {seq}, which is not held")),
            }
        }
        let mut cached_bytes = 0;
        for (&seq, entry) in &self.entries {
            if entry.seq != seq {
                return Err(format!(
                    "entry under seq {seq} says it is seq {}",
                    entry.seq
                ));
            }
            if self.seq_of(&entry.id) != Some(seq) {
                return Err(format!("id {} of seq {seq} does not find it", entry.id));
            }
            let state = self.queues.get(&*entry.queue).ok_or_else(|| {
                format!("seq {seq} is in queue {:?}, which is unknown", entry.queue)
            })?;
            Self::check_entry(state, entry)?;
            cached_bytes += entry.payload.as_ref().map_or(0, |p| p.weight_bytes());
        }
        if cached_bytes != self.cached_payload_bytes {
            return Err(format!(
                "cached payload bytes are counted as {} but the entries hold {cached_bytes}",
                self.cached_payload_bytes
            ));
        }
        for (name, state) in &self.queues {
            self.check_queue(name, state)?;
        }
        Ok(())
    }

    /// The rules about one entry that its own queue's structures must agree with.
    fn check_entry(state: &QueueState, entry: &Entry) -> Result<(), String> {
        let seq = entry.seq;
        let queue = &entry.queue;
        if !state.members.contains(&(entry.aged_from_ms(), seq)) {
            return Err(format!(
                "seq {seq} is missing from the members of {queue:?} (aged from {})",
                entry.aged_from_ms()
            ));
        }
        let in_ready = state.ready.contains(&(Reverse(entry.priority), seq));
        let in_delayed = state.delayed.contains(&(entry.visible_at_ms, seq));
        let leased_deadline = match entry.place {
            Place::Leased { deadline_ms, .. } => Some(deadline_ms),
            _ => None,
        };
        let in_leased = leased_deadline.is_some_and(|d| state.leased.contains(&(d, seq)));
        let expected = (
            entry.place == Place::Ready,
            entry.place == Place::Delayed,
            leased_deadline.is_some(),
        );
        if (in_ready, in_delayed, in_leased) != expected {
            return Err(format!(
                "seq {seq} of {queue:?} is {:?} but in ready: {in_ready}, delayed: {in_delayed}, leased: {in_leased}",
                entry.place
            ));
        }
        if leased_deadline.is_some()
            && (entry.leased_at_ms.is_none() || entry.expired_lease_token.is_some())
        {
            return Err(format!(
                "seq {seq} of {queue:?} is leased without a lease start or with an expired token"
            ));
        }
        match state.lane_of(entry.key.as_ref()) {
            None if entry.place == Place::Waiting => Err(format!(
                "seq {seq} of {queue:?} waits but has no lane to wait in"
            )),
            None => Ok(()),
            Some(lane_key) => {
                let lane = state.lanes.get(&lane_key).ok_or_else(|| {
                    format!("seq {seq} of {queue:?} belongs to lane {lane_key:?}, which is missing")
                })?;
                if !lane.members().contains(&seq) {
                    return Err(format!(
                        "seq {seq} of {queue:?} is missing from its lane {lane_key:?}"
                    ));
                }
                let out = lane.out().contains(&seq);
                if out == (entry.place == Place::Waiting) {
                    return Err(format!(
                        "seq {seq} of {queue:?} is {:?} while {} of lane {lane_key:?} (out: {:?})",
                        entry.place,
                        if out { "out" } else { "waiting" },
                        lane.out()
                    ));
                }
                if lane.out().len() > 1
                    && !matches!(entry.place, Place::Leased { .. } | Place::Waiting)
                {
                    return Err(format!(
                        "seq {seq} of {queue:?} is {:?} while lane {lane_key:?} has a run out: {:?}",
                        entry.place,
                        lane.out()
                    ));
                }
                Ok(())
            }
        }
    }

    /// The rules about one queue's structures as a whole: sizes, and no element without its
    /// entry.
    fn check_queue(&self, name: &str, state: &QueueState) -> Result<(), String> {
        let held_here = |seq: &Seq| {
            self.entries
                .get(seq)
                .is_some_and(|entry| &*entry.queue == name)
        };
        if state.total != state.members.len() as u64 {
            return Err(format!(
                "{name:?} counts {} messages but has {} members",
                state.total,
                state.members.len()
            ));
        }
        let sets = [
            (
                "members",
                state.members.iter().map(|&(_, s)| s).collect::<Vec<_>>(),
            ),
            ("ready", state.ready.iter().map(|&(_, s)| s).collect()),
            ("delayed", state.delayed.iter().map(|&(_, s)| s).collect()),
            ("leased", state.leased.iter().map(|&(_, s)| s).collect()),
        ];
        for (set, seqs) in &sets {
            let mut seen = HashSet::with_capacity(seqs.len());
            for seq in seqs {
                if !held_here(seq) {
                    return Err(format!(
                        "the {set} of {name:?} hold seq {seq}, which is not a message of it"
                    ));
                }
                if !seen.insert(seq) {
                    return Err(format!("the {set} of {name:?} hold seq {seq} twice"));
                }
            }
        }
        state.check_cold(name)?;
        let placed = state.ready.len() + state.delayed.len() + state.leased.len();
        if placed > state.members.len() {
            return Err(format!(
                "{name:?} has {placed} messages ready, delayed or leased but only {} members",
                state.members.len()
            ));
        }
        for (lane_key, lane) in &state.lanes {
            if lane.is_empty() {
                return Err(format!("lane {lane_key:?} of {name:?} is empty but kept"));
            }
            if lane.out().is_empty() || !lane.out().is_subset(lane.members()) {
                return Err(format!(
                    "lane {lane_key:?} of {name:?} has out {:?}, not some of its members",
                    lane.out()
                ));
            }
            for seq in lane.members() {
                let in_this_lane = self.entries.get(seq).is_some_and(|entry| {
                    &*entry.queue == name
                        && state.lane_of(entry.key.as_ref()).as_ref() == Some(lane_key)
                });
                if !in_this_lane {
                    return Err(format!(
                        "lane {lane_key:?} of {name:?} holds seq {seq}, which does not belong to it"
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::*;
    use sluice_core::message::Payload;
    use sluice_core::queue::{Ordering, QueueConfig};

    const T0: i64 = 1_000_000;

    fn index_with_lane() -> Index {
        let mut config = QueueConfig::defaults_for("q");
        config.ordering = Ordering::PerKey;
        let mut index = Index::new();
        index.queue_put("q", config).unwrap();
        for seq in 1..=3 {
            let mut entry = Entry::new(
                seq,
                Uuid::now_v7(),
                Arc::from("q"),
                0,
                Some(Arc::from("k")),
                T0,
                T0,
            );
            entry.payload = Some(Arc::new(Payload {
                body_bytes: b"body".to_vec(),
                ..Payload::default()
            }));
            index.insert(entry, T0);
        }
        index.claim("q", 1, false, 1_000, T0, || 7);
        index
    }

    #[test]
    fn a_consistent_index_passes() {
        let index = index_with_lane();
        assert_eq!(index.check_invariants(), Ok(()));
    }

    #[test]
    fn a_second_active_member_of_a_lane_is_caught() {
        let mut index = index_with_lane();
        let state = index.queues.get_mut("q").unwrap();
        // Seq 2 waits behind the leased seq 1; make it ready as a broken claim path would.
        state.ready.insert((Reverse(0), 2));
        index.entries.get_mut(&2).unwrap().place = Place::Ready;
        let error = index.check_invariants().unwrap_err();
        assert!(error.contains("while waiting of lane"), "{error}");
    }

    #[test]
    fn a_ready_member_beside_a_run_is_caught() {
        let mut index = index_with_lane();
        let state = index.queues.get_mut("q").unwrap();
        // Lend seq 2 to seq 1's run but leave it ready, as a broken run claim would.
        state.lanes.get_mut("k").unwrap().lend(2);
        state.ready.insert((Reverse(0), 2));
        index.entries.get_mut(&2).unwrap().place = Place::Ready;
        let error = index.check_invariants().unwrap_err();
        assert!(error.contains("has a run out"), "{error}");
    }

    #[test]
    fn a_lost_set_element_a_wrong_total_and_wrong_bytes_are_caught() {
        let mut index = index_with_lane();
        index.queues.get_mut("q").unwrap().leased.clear();
        assert!(
            index
                .check_invariants()
                .unwrap_err()
                .contains("leased: false")
        );

        let mut index = index_with_lane();
        index.queues.get_mut("q").unwrap().total += 1;
        assert!(index.check_invariants().unwrap_err().contains("counts 4"));

        let mut index = index_with_lane();
        index.cached_payload_bytes += 1;
        assert!(
            index
                .check_invariants()
                .unwrap_err()
                .contains("cached payload bytes")
        );

        let mut index = index_with_lane();
        let id = index.entries[&3].id;
        index.foreign_ids.insert(id, 2);
        assert!(
            index
                .check_invariants()
                .unwrap_err()
                .contains("points at seq 2")
        );
    }
}
