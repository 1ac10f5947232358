//! Per-key lanes: how an ordered queue keeps the messages of one ordering domain in order.
//!
//! In a `fifo` queue every message joins the queue's single lane; in a `per_key` queue a message
//! with a key joins its key's lane and one without a key joins none (it is unordered); an
//! `unordered` queue has no lanes.
//!
//! A lane's members are handed out in enqueue order. Only its *out* members may be ready,
//! delayed (retrying) or in flight; the others wait. Normally one member is out: the first, so
//! at most one message of a lane is in flight and a retry holds the lane until it is acked or
//! dead-lettered. A claim that asks for runs (SQS's FIFO receive, which returns several
//! messages of one group) may also *lend* the members that follow the one it leased, in order:
//! they are out, in flight together. While any member is out, no other is handed out; a lent
//! member that comes back (a failure, a release) waits again, and when the last out member
//! leaves or comes back, the lane's first member goes out: enqueue order, whatever came back.
//! Without runs this is exactly the one-at-a-time rule.
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::message::Seq;
use crate::queue::Ordering;

/// The lane a message with ordering key `key` joins in a queue ordered as `ordering`; `None`
/// when it joins none. The whole of a `fifo` queue is the one lane named `""`.
pub fn lane_key(ordering: Ordering, key: Option<&Arc<str>>) -> Option<Arc<str>> {
    match ordering {
        Ordering::Unordered => None,
        Ordering::Fifo => Some(Arc::from("")),
        Ordering::PerKey => key.cloned(),
    }
}

/// The members of one lane, by enqueue order, and which of them are out (deliverable).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lane {
    members: BTreeSet<Seq>,
    out: BTreeSet<Seq>,
}

impl Lane {
    /// Adds a message to the lane; true when it goes out at once (the lane had no member out),
    /// false when it waits.
    pub fn join(&mut self, seq: Seq) -> bool {
        self.members.insert(seq);
        if !self.out.is_empty() {
            return false;
        }
        self.out.insert(seq);
        true
    }

    /// Takes a message out of the lane (acked, dead-lettered, cancelled, expired). When no
    /// member is out afterwards, the first remaining one goes out: it is returned, for the
    /// caller to make deliverable.
    pub fn leave(&mut self, seq: Seq) -> Option<Seq> {
        self.members.remove(&seq);
        self.out.remove(&seq);
        self.first_out()
    }

    /// A run claim hands out `seq` too, behind the member it leased.
    pub fn lend(&mut self, seq: Seq) {
        debug_assert!(self.members.contains(&seq));
        self.out.insert(seq);
    }

    /// An out member comes back (a failed attempt, a release): it waits again. When no member
    /// is out afterwards, the first one goes out (it may be this one): it is returned, for the
    /// caller to make deliverable.
    pub fn come_back(&mut self, seq: Seq) -> Option<Seq> {
        self.out.remove(&seq);
        self.first_out()
    }

    /// With no member out, the first one goes out; it is returned.
    fn first_out(&mut self) -> Option<Seq> {
        if !self.out.is_empty() {
            return None;
        }
        let first = *self.members.first()?;
        self.out.insert(first);
        Some(first)
    }

    /// The members that may be delivered or are in flight.
    pub fn out(&self) -> &BTreeSet<Seq> {
        &self.out
    }

    /// The member after `seq` in enqueue order.
    pub fn next_after(&self, seq: Seq) -> Option<Seq> {
        self.members.range(seq.saturating_add(1)..).next().copied()
    }

    /// Every member, by enqueue order.
    pub fn members(&self) -> &BTreeSet<Seq> {
        &self.members
    }

    /// True once the last member left: the lane can be forgotten.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ordering_says_which_lane_a_message_joins() {
        let key = Arc::from("customer-7");
        assert_eq!(lane_key(Ordering::Unordered, Some(&key)), None);
        assert_eq!(lane_key(Ordering::Fifo, None), Some(Arc::from("")));
        assert_eq!(lane_key(Ordering::Fifo, Some(&key)), Some(Arc::from("")));
        assert_eq!(lane_key(Ordering::PerKey, Some(&key)), Some(key));
        assert_eq!(lane_key(Ordering::PerKey, None), None);
    }

    #[test]
    fn the_first_member_is_out_and_the_others_wait_in_enqueue_order() {
        let mut lane = Lane::default();
        assert!(lane.join(5));
        assert!(!lane.join(9));
        assert!(!lane.join(7));
        assert_eq!(lane.out().iter().copied().collect::<Vec<_>>(), [5]);
        assert_eq!(lane.leave(5), Some(7));
        assert_eq!(lane.leave(7), Some(9));
        assert_eq!(lane.leave(9), None);
        assert!(lane.is_empty());
    }

    #[test]
    fn a_waiting_member_leaving_keeps_the_out_one() {
        let mut lane = Lane::default();
        lane.join(1);
        lane.join(2);
        lane.join(3);
        assert_eq!(lane.leave(2), None);
        assert_eq!(lane.members().iter().copied().collect::<Vec<_>>(), [1, 3]);
        assert_eq!(lane.out().iter().copied().collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn a_member_that_comes_back_alone_goes_out_again() {
        let mut lane = Lane::default();
        lane.join(1);
        lane.join(2);
        assert_eq!(lane.come_back(1), Some(1), "retried: still the first");
    }

    #[test]
    fn a_run_holds_the_lane_until_its_last_member_and_order_is_kept() {
        let mut lane = Lane::default();
        for seq in 1..=4 {
            lane.join(seq);
        }
        lane.lend(2);
        lane.lend(3);
        // 2 failed while 1 and 3 are in flight: it waits, nothing goes out.
        assert_eq!(lane.come_back(2), None);
        assert_eq!(lane.leave(1), None, "3 is still out");
        // The last out member comes back: the first member (2) goes out, not 3 or 4.
        assert_eq!(lane.come_back(3), Some(2));
        assert_eq!(lane.out().iter().copied().collect::<Vec<_>>(), [2]);
        assert_eq!(lane.next_after(2), Some(3));
        assert_eq!(lane.leave(2), Some(3));
    }
}
