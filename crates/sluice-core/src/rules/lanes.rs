//! Per-key lanes: how an ordered queue keeps the messages of one ordering domain one at a time.
//!
//! In a `fifo` queue every message joins the queue's single lane; in a `per_key` queue a message
//! with a key joins its key's lane and one without a key joins none (it is unordered); an
//! `unordered` queue has no lanes. Only a lane's *active* member may be ready, delayed
//! (retrying) or in flight; the others wait behind it, so at most one message of a lane is in
//! flight and a retry holds the lane until it is acked or dead-lettered. The active member is
//! the lane's first member at the time the previous one left: enqueue order.

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

/// The members of one lane, by enqueue order, and which of them is active.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Lane {
    members: BTreeSet<Seq>,
    active: Option<Seq>,
}

impl Lane {
    /// Adds a message to the lane; true when it becomes the active member (the lane had none),
    /// false when it waits behind the active one.
    pub fn join(&mut self, seq: Seq) -> bool {
        self.members.insert(seq);
        if self.active.is_some() {
            return false;
        }
        self.active = Some(seq);
        true
    }

    /// Takes a message out of the lane (acked, dead-lettered, cancelled, expired). When it was
    /// the active member, the first remaining one becomes active. Returns the active member
    /// afterwards: the caller makes it deliverable if it was waiting.
    pub fn leave(&mut self, seq: Seq) -> Option<Seq> {
        self.members.remove(&seq);
        if self.active == Some(seq) {
            self.active = self.members.first().copied();
        }
        self.active
    }

    /// The member that may be delivered.
    pub fn active(&self) -> Option<Seq> {
        self.active
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
    fn the_first_member_is_active_and_the_others_wait_in_enqueue_order() {
        let mut lane = Lane::default();
        assert!(lane.join(5));
        assert!(!lane.join(9));
        assert!(!lane.join(7));
        assert_eq!(lane.active(), Some(5));
        assert_eq!(lane.leave(5), Some(7));
        assert_eq!(lane.leave(7), Some(9));
        assert_eq!(lane.leave(9), None);
        assert!(lane.is_empty());
    }

    #[test]
    fn a_waiting_member_leaving_keeps_the_active_one() {
        let mut lane = Lane::default();
        lane.join(1);
        lane.join(2);
        lane.join(3);
        assert_eq!(lane.leave(2), Some(1));
        assert_eq!(lane.members().iter().copied().collect::<Vec<_>>(), [1, 3]);
    }
}
