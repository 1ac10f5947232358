//! [`GroupRuns`]: a FIFO receive hands several messages of one group at once (AWS does, and
//! sluice's SQS API as AWS), but the backend contract gives out one message of a key at a time
//! (the conformance scenario `per_key_order`): the next waits until the previous is acked. So
//! the later messages of a run wait here, still leased, and go out one by one as their group
//! frees up. A message that comes back (a retry, a release) sends the rest of its run back
//! too, behind it.

use std::collections::HashMap;

use crate::backend::Delivery;

/// One queue's runs.
#[derive(Debug, Default)]
pub(crate) struct GroupRuns {
    /// Per group given out: the receipt of its message out now.
    out: HashMap<String, String>,
    /// Per receipt out: its group.
    group_of: HashMap<String, String>,
    /// Per group: the later messages of its run, in order.
    waiting: HashMap<String, Vec<Delivery>>,
    /// Groups in the order their runs started waiting, so the oldest goes first.
    order: Vec<String>,
}

impl GroupRuns {
    /// Of `received` (in SQS's order), those to give out now; the rest wait.
    pub(crate) fn take(&mut self, received: Vec<(Option<String>, Delivery)>) -> Vec<Delivery> {
        let mut out = Vec::new();
        for (group, delivery) in received {
            match group {
                None => out.push(delivery),
                Some(group)
                    if self.out.contains_key(&group) || self.waiting.contains_key(&group) =>
                {
                    if !self.waiting.contains_key(&group) {
                        self.order.push(group.clone());
                    }
                    self.waiting.entry(group).or_default().push(delivery);
                }
                Some(group) => {
                    self.give_out(group, &delivery);
                    out.push(delivery);
                }
            }
        }
        out
    }

    /// Up to `max` waiting messages whose group is free, given out now.
    pub(crate) fn ready(&mut self, max: usize) -> Vec<Delivery> {
        let mut out = Vec::new();
        let groups: Vec<String> = self.order.clone();
        for group in groups {
            if out.len() >= max {
                break;
            }
            if self.out.contains_key(&group) {
                continue;
            }
            let Some(run) = self.waiting.get_mut(&group) else {
                continue;
            };
            let next = run.remove(0);
            if run.is_empty() {
                self.waiting.remove(&group);
                self.order.retain(|g| g != &group);
            }
            self.give_out(group, &next);
            out.push(next);
        }
        out
    }

    /// The message out under `receipt` is done (acked, dead-lettered): its group is free.
    pub(crate) fn done(&mut self, receipt: &str) -> Option<String> {
        let group = self.group_of.remove(receipt)?;
        if self.out.get(&group).is_some_and(|out| out == receipt) {
            self.out.remove(&group);
        }
        Some(group)
    }

    /// The message out under `receipt` comes back (a retry, a release): the rest of its run
    /// must go back too; returns them, for the caller to give back.
    pub(crate) fn back_off(&mut self, receipt: &str) -> Vec<Delivery> {
        let Some(group) = self.done(receipt) else {
            return Vec::new();
        };
        self.order.retain(|g| g != &group);
        self.waiting.remove(&group).unwrap_or_default()
    }

    fn give_out(&mut self, group: String, delivery: &Delivery) {
        self.out.insert(group.clone(), delivery.receipt.clone());
        self.group_of.insert(delivery.receipt.clone(), group);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(receipt: &str) -> Delivery {
        Delivery {
            message_id: uuid::Uuid::nil(),
            receipt: receipt.to_owned(),
            body: Vec::new(),
            id: None,
            key: None,
            attempt: 1,
            enqueued_at: std::time::SystemTime::UNIX_EPOCH,
            last_error: None,
        }
    }

    fn receipts(deliveries: &[Delivery]) -> Vec<&str> {
        deliveries.iter().map(|d| d.receipt.as_str()).collect()
    }

    #[test]
    fn one_message_of_a_group_at_a_time_in_order() {
        let mut runs = GroupRuns::default();
        let a = || Some("a".to_owned());
        let out = runs.take(vec![
            (a(), d("a1")),
            (a(), d("a2")),
            (Some("b".into()), d("b1")),
            (None, d("x")),
            (a(), d("a3")),
        ]);
        assert_eq!(receipts(&out), ["a1", "b1", "x"]);
        assert!(runs.ready(10).is_empty());
        runs.done("a1");
        assert_eq!(receipts(&runs.ready(10)), ["a2"]);
        assert!(runs.ready(10).is_empty());
        assert!(runs.take(vec![(a(), d("a4"))]).is_empty());
        assert_eq!(receipts(&runs.back_off("a2")), ["a3", "a4"]);
        assert_eq!(receipts(&runs.take(vec![(a(), d("a2"))])), ["a2"]);
    }
}
