//! `Index::browse`: pages through each state of a queue in dispatch order from a cursor.

use std::sync::Arc;

use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::BrowseState;
use sluice_core::store::Seq;
use sluice_store_sqlite::dispatch::{Entry, Index};
use uuid::Uuid;

const NOW: i64 = 1_000_000;

fn index_with(name: &str, ordering: Ordering) -> Index {
    let mut index = Index::new();
    let mut config = QueueConfig::defaults_for(name);
    config.ordering = ordering;
    index.queue_put(name, config).unwrap();
    index
}

fn add(
    index: &mut Index,
    queue: &str,
    seq: Seq,
    priority: i32,
    key: Option<&str>,
    visible_at: i64,
) {
    let entry = Entry::new(
        seq,
        Uuid::from_u128(u128::from(seq)),
        Arc::from(queue),
        priority,
        key.map(Arc::from),
        NOW,
        visible_at,
    );
    index.insert(entry, NOW);
}

/// Every seq of a state, read `page` at a time.
fn all_pages(index: &Index, queue: &str, state: BrowseState, page: usize) -> Vec<Seq> {
    let mut seqs = Vec::new();
    let mut after = None;
    loop {
        let (entries, next) = index.browse(queue, state, after, page, 10_000).unwrap();
        assert!(entries.len() <= page);
        seqs.extend(entries.iter().map(|entry| entry.seq));
        match next {
            Some(next) => after = Some(next),
            None => return seqs,
        }
    }
}

#[test]
fn ready_pages_follow_priority_then_enqueue_order() {
    let mut index = index_with("q", Ordering::Unordered);
    for seq in 1..=10 {
        add(&mut index, "q", seq, (seq % 3) as i32 - 1, None, NOW);
    }
    let expected: Vec<Seq> = vec![2, 5, 8, 1, 4, 7, 10, 3, 6, 9];
    for page in [1, 3, 4, 10, 50] {
        assert_eq!(
            all_pages(&index, "q", BrowseState::Ready, page),
            expected,
            "page {page}"
        );
    }
    assert!(
        index
            .browse("nope", BrowseState::Ready, None, 10, 10)
            .is_none()
    );
}

#[test]
fn delayed_pages_follow_visible_time_and_in_flight_pages_the_lease_deadline() {
    let mut index = index_with("q", Ordering::Unordered);
    add(&mut index, "q", 1, 0, None, NOW + 3_000);
    add(&mut index, "q", 2, 0, None, NOW + 1_000);
    add(&mut index, "q", 3, 0, None, NOW + 2_000);
    add(&mut index, "q", 4, 0, None, NOW);
    add(&mut index, "q", 5, 0, None, NOW);
    assert_eq!(
        all_pages(&index, "q", BrowseState::Delayed, 2),
        vec![2, 3, 1]
    );

    let first = index.claim("q", 1, false, 30_000, NOW, || 7);
    let second = index.claim("q", 1, false, 10_000, NOW + 5, || 8);
    assert_eq!(
        all_pages(&index, "q", BrowseState::InFlight, 1),
        vec![second[0].seq, first[0].seq],
        "the shorter lease runs out first"
    );
    assert_eq!(index.leased_at(first[0].seq), Some(NOW));
    assert_eq!(index.leased_at(second[0].seq), Some(NOW + 5));
    assert_eq!(index.leased_at(1), None, "not in flight");
    let counts = index.browse_counts("q").unwrap();
    assert_eq!(
        (
            counts.ready,
            counts.waiting,
            counts.delayed,
            counts.in_flight
        ),
        (0, 0, 3, 2)
    );
}

#[test]
fn waiting_messages_are_those_behind_their_lane() {
    let mut index = index_with("q", Ordering::PerKey);
    for seq in 1..=9 {
        let key = ["a", "b", "c"][(seq % 3) as usize];
        add(&mut index, "q", seq, 0, Some(key), NOW);
    }
    assert_eq!(all_pages(&index, "q", BrowseState::Ready, 2), vec![1, 2, 3]);
    assert_eq!(
        all_pages(&index, "q", BrowseState::Waiting, 2),
        vec![4, 5, 6, 7, 8, 9]
    );
    // A small scan budget still gets through, with more pages.
    let (entries, next) = index
        .browse("q", BrowseState::Waiting, None, 10, 4)
        .unwrap();
    assert_eq!(entries.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![4]);
    let (rest, _) = index
        .browse("q", BrowseState::Waiting, next, 10, 100)
        .unwrap();
    assert_eq!(rest.len(), 5);
    let counts = index.browse_counts("q").unwrap();
    assert_eq!((counts.ready, counts.waiting), (3, 6));
}
