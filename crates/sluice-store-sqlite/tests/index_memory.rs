//! What the dispatch index costs per message it holds, measured on the heap (`dhat`): bytes
//! allocated by inserting ready messages without bodies, over how many. The ceiling guards
//! against growth; BENCHMARKS.md has the figure and what it is made of (issue 16 asks for 150
//! bytes, which this layout does not reach).

use std::sync::Arc;

use sluice_core::queue::QueueConfig;
use sluice_store_sqlite::dispatch::{Entry, Index};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const MESSAGES: u64 = 100_000;
/// Bytes per message the index may take (332 measured: the entry map, the ready and members
/// sets).
const CEILING: f64 = 350.0;

#[test]
fn bytes_per_message_held() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let mut index = Index::new();
    index
        .queue_put("q", QueueConfig::defaults_for("q"))
        .unwrap();
    let queue: Arc<str> = index.queue_name("q").unwrap();
    let before = dhat::HeapStats::get().curr_bytes;
    for seq in 1..=MESSAGES {
        let id = sluice_core::stored::ids::encode(seq, 1_000);
        index.insert(
            Entry::new(seq, id, queue.clone(), 0, None, 1_000, 1_000),
            1_000,
        );
    }
    let after = dhat::HeapStats::get().curr_bytes;
    // The bytes are only a cost per message if the index holds every message, ready, and finds
    // each by its id (an index that kept fewer would look cheaper).
    assert_eq!(index.queue_len("q"), MESSAGES, "messages held");
    let depth = index.depth("q", 1_000).expect("the queue");
    assert_eq!(
        (depth.ready, depth.delayed, depth.in_flight),
        (MESSAGES, 0, 0),
        "ready, delayed, in flight"
    );
    assert_eq!(index.members("q").len() as u64, MESSAGES, "members");
    for seq in 1..=MESSAGES {
        let id = sluice_core::stored::ids::encode(seq, 1_000);
        assert_eq!(index.seq_of(&id), Some(seq), "message {seq} by its id");
        assert_eq!(
            index.entry(seq).map(|entry| entry.id),
            Some(id),
            "entry {seq}"
        );
    }
    let per_message = (after - before) as f64 / MESSAGES as f64;
    eprintln!("index bytes per message held: {per_message:.0}");
    assert!(
        per_message <= CEILING,
        "the index takes {per_message:.0} bytes per message, more than {CEILING}"
    );
}
