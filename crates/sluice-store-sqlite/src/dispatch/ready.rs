//! A queue's ready set in dispatch order (priority, then seq), counting its members per
//! priority: paging asks how much of one priority's head is left, and that must not cost a walk
//! of the set.

use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::ops::RangeBounds;

use rustc_hash::FxHashMap as HashMap;

use super::Seq;

/// A ready message's place in dispatch order: higher priority first, then enqueue order.
pub(super) type ReadyKey = (Reverse<i32>, Seq);

#[derive(Debug, Default)]
pub(super) struct ReadySet {
    set: BTreeSet<ReadyKey>,
    per_priority: HashMap<i32, u64>,
}

impl ReadySet {
    pub(super) fn insert(&mut self, key: ReadyKey) -> bool {
        let added = self.set.insert(key);
        if added {
            *self.per_priority.entry(key.0.0).or_default() += 1;
        }
        added
    }

    pub(super) fn remove(&mut self, key: &ReadyKey) -> bool {
        let removed = self.set.remove(key);
        if removed {
            self.uncount(key.0.0);
        }
        removed
    }

    pub(super) fn pop_first(&mut self) -> Option<ReadyKey> {
        let key = self.set.pop_first()?;
        self.uncount(key.0.0);
        Some(key)
    }

    fn uncount(&mut self, priority: i32) {
        if let Some(count) = self.per_priority.get_mut(&priority) {
            *count -= 1;
            if *count == 0 {
                self.per_priority.remove(&priority);
            }
        }
    }

    /// Ready messages of one priority.
    pub(super) fn count_of(&self, priority: i32) -> u64 {
        self.per_priority.get(&priority).copied().unwrap_or(0)
    }

    pub(super) fn first(&self) -> Option<&ReadyKey> {
        self.set.first()
    }

    pub(super) fn range<R: RangeBounds<ReadyKey>>(
        &self,
        range: R,
    ) -> std::collections::btree_set::Range<'_, ReadyKey> {
        self.set.range(range)
    }

    pub(super) fn iter(&self) -> std::collections::btree_set::Iter<'_, ReadyKey> {
        self.set.iter()
    }

    pub(super) fn contains(&self, key: &ReadyKey) -> bool {
        self.set.contains(key)
    }

    pub(super) fn len(&self) -> usize {
        self.set.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}
