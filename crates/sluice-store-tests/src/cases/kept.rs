//! Acked messages kept with their body (a queue's `keep_acked_ms`): found, read and searched
//! until the keep ends, and not a moment longer.

use sluice_core::message::{MessageState, NewMessage, Receipt};
use sluice_core::store::{
    AckParams, AckedSearch, BrowsePage, BrowseQuery, BrowseState, MessageGetParams, MessageRef,
    QueueBytes, Store,
};
use uuid::Uuid;

use crate::Harness;

/// One page of the acked messages `queue` keeps, as `store` answers at `now_ms`.
async fn acked_page(
    store: &dyn Store,
    queue: &str,
    search: AckedSearch,
    after: Option<(i64, u64)>,
    limit: usize,
    now_ms: i64,
) -> BrowsePage {
    store
        .message_browse(BrowseQuery {
            queue: queue.into(),
            state: BrowseState::Acked,
            after,
            limit,
            search,
            now_ms,
        })
        .await
        .unwrap_or_else(|error| panic!("browse acked of {queue:?}: {error}"))
}

/// The ids of every acked message `queue` keeps, as the store pages them one by one.
async fn acked_ids(h: &Harness, queue: &str, search: AckedSearch) -> Vec<Uuid> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = acked_page(&*h.store, queue, search.clone(), after, 1, h.now()).await;
        ids.extend(page.messages.iter().map(|m| m.status.message_id));
        assert!(ids.len() <= 20, "paging must end: {ids:?}");
        match page.next {
            Some(next) => after = Some(next),
            None => return ids,
        }
    }
}

/// The body of message `id` as the store reads it through `queue`, if it still has one.
async fn body_of(store: &dyn Store, queue: &str, id: Uuid, now_ms: i64) -> Option<Vec<u8>> {
    store
        .message_body(MessageGetParams {
            queue: queue.into(),
            by: MessageRef::Id(id),
            now_ms,
        })
        .await
        .unwrap()
        .and_then(|found| found.payload)
        .map(|payload| payload.body_bytes)
}

/// Acks one receipt with a result.
async fn ack_with(h: &Harness, queue: &str, receipt: Receipt, result: &str) {
    let results = h
        .store
        .message_ack(AckParams {
            queue: queue.into(),
            receipts: vec![receipt],
            result: Some(result.into()),
            delivery: None,
            now_ms: h.now(),
        })
        .await
        .unwrap();
    assert_eq!(results, [Ok(())]);
}

/// A queue with `keep_acked_ms` keeps an acked message's body, headers and result, and lists
/// it, until its ack time plus the keep; from that instant a read finds no body and no listing
/// (whether or not the upkeep ran), and the upkeep then drops it for good. A queue without the
/// option drops the body at the ack, as before. Kept bodies survive a reopen.
pub async fn acked_messages_keep_their_body_until_the_keep_ends(h: Harness) {
    const KEEP_MS: i64 = 60_000;
    h.queue("kept", |c| c.keep_acked_ms = KEEP_MS).await;
    h.queue("plain", |_| {}).await;
    let kept = h.send("kept", &["{\"n\":1}"]).await[0];
    let plain = h.send("plain", &["{\"n\":2}"]).await[0];
    h.advance(1_000);
    let acked_at = h.now();
    let receipt = h.claim("kept", 1).await.messages.remove(0).receipt;
    ack_with(&h, "kept", receipt, "{\"done\":true}").await;
    let receipt = h.claim("plain", 1).await.messages.remove(0).receipt;
    ack_with(&h, "plain", receipt, "{\"done\":true}").await;

    let status = h.status_of("kept", kept).await;
    assert_eq!(status.state, MessageState::Acked);
    assert_eq!(status.acked_at_ms, Some(acked_at));
    assert_eq!(status.kept_until_ms, Some(acked_at + KEEP_MS));
    assert_eq!(status.result.as_deref(), Some("{\"done\":true}"));
    let found = h
        .store
        .message_body(MessageGetParams {
            queue: "kept".into(),
            by: MessageRef::Id(kept),
            now_ms: h.now(),
        })
        .await
        .unwrap()
        .expect("the kept message");
    let payload = found.payload.expect("a kept message has its body");
    assert_eq!(payload.body_bytes, b"{\"n\":1}");
    assert_eq!(payload.headers["origin"], "conformance {\"n\":1}");
    let page = acked_page(&*h.store, "kept", AckedSearch::default(), None, 10, h.now()).await;
    assert_eq!(page.messages.len(), 1);
    let listed = &page.messages[0];
    assert_eq!(listed.status.message_id, kept);
    assert_eq!(listed.status.state, MessageState::Acked);
    assert_eq!(listed.status.kept_until_ms, Some(acked_at + KEEP_MS));
    assert_eq!(listed.status.result.as_deref(), Some("{\"done\":true}"));
    assert_eq!(listed.body_bytes, Some(7));
    assert_eq!(page.next, None);

    // The plain queue dropped its body at the ack and lists nothing.
    assert_eq!(h.status_of("plain", plain).await.kept_until_ms, None);
    assert_eq!(body_of(&*h.store, "plain", plain, h.now()).await, None);
    assert!(
        acked_ids(&h, "plain", AckedSearch::default())
            .await
            .is_empty()
    );

    // The upkeep leaves a keep that has not ended alone, across a reopen too.
    h.advance(KEEP_MS - 1);
    h.maintain().await;
    let store = h.reopen().await;
    let now = h.now();
    assert_eq!(
        body_of(&*store, "kept", kept, now).await.as_deref(),
        Some(&b"{\"n\":1}"[..]),
        "kept 1 ms before the keep ends, after a reopen"
    );
    let page = acked_page(&*store, "kept", AckedSearch::default(), None, 10, now).await;
    assert_eq!(page.messages.len(), 1);

    // At the keep's end the body is gone for every read, before any upkeep.
    h.advance(1);
    let now = h.now();
    assert_eq!(now, acked_at + KEEP_MS);
    assert_eq!(body_of(&*store, "kept", kept, now).await, None);
    let page = acked_page(&*store, "kept", AckedSearch::default(), None, 10, now).await;
    assert!(page.messages.is_empty(), "{:?}", page.messages);
    let status = store
        .message_get(MessageGetParams {
            queue: "kept".into(),
            by: MessageRef::Id(kept),
            now_ms: now,
        })
        .await
        .unwrap();
    if let Some(status) = status {
        assert_eq!(status.state, MessageState::Acked);
        assert_eq!(status.kept_until_ms, None, "the keep is over");
    }
    // The upkeep drops it for good: still no body, still not listed.
    store.maintain(now).await.unwrap();
    assert_eq!(body_of(&*store, "kept", kept, now).await, None);
    let page = acked_page(&*store, "kept", AckedSearch::default(), None, 10, now).await;
    assert!(page.messages.is_empty());
    store.close().await.unwrap();
}

/// The acked messages a queue keeps are listed newest ack first, one page after another from
/// the cursor, and a search keeps only those that match every condition given: the message id,
/// the idempotency key, the ordering key, acked at or after `since`, acked before `until`.
pub async fn a_search_of_kept_acked_messages_matches_every_condition(h: Harness) {
    h.queue("kept", |c| c.keep_acked_ms = 3_600_000).await;
    // Four messages acked 1 s apart: a(k1), b(k2, id "order-7"), c(k1), d(no key).
    let sends: [(Option<&str>, Option<&str>); 4] = [
        (Some("k1"), None),
        (Some("k2"), Some("order-7")),
        (Some("k1"), None),
        (None, None),
    ];
    let mut ids = Vec::new();
    let mut acked_at = Vec::new();
    for (index, (key, idempotency_key)) in sends.into_iter().enumerate() {
        let id = h
            .enqueue(
                "kept",
                vec![NewMessage {
                    key: key.map(Into::into),
                    idempotency_key: idempotency_key.map(Into::into),
                    ..h.message(&format!("{{\"n\":{index}}}"))
                }],
            )
            .await[0]
            .message_id;
        h.advance(1_000);
        let receipt = h.claim("kept", 1).await.messages.remove(0).receipt;
        h.ack("kept", receipt).await.unwrap();
        ids.push(id);
        acked_at.push(h.now());
    }
    // A message still in the queue is not among them.
    h.send("kept", &["{\"live\":true}"]).await;
    let all = acked_ids(&h, "kept", AckedSearch::default()).await;
    assert_eq!(all, [ids[3], ids[2], ids[1], ids[0]], "newest ack first");

    let search = |edit: fn(&mut AckedSearch, &[Uuid], &[i64])| {
        let mut search = AckedSearch::default();
        edit(&mut search, &ids, &acked_at);
        search
    };
    assert_eq!(
        acked_ids(&h, "kept", search(|s, _, _| s.key = Some("k1".into()))).await,
        [ids[2], ids[0]]
    );
    assert_eq!(
        acked_ids(
            &h,
            "kept",
            search(|s, _, _| s.idempotency_key = Some("order-7".into()))
        )
        .await,
        [ids[1]]
    );
    assert_eq!(
        acked_ids(&h, "kept", search(|s, ids, _| s.message_id = Some(ids[2]))).await,
        [ids[2]]
    );
    assert_eq!(
        acked_ids(
            &h,
            "kept",
            search(|s, _, at| (s.since_ms, s.until_ms) = (Some(at[1]), Some(at[3])))
        )
        .await,
        [ids[2], ids[1]],
        "since is inclusive, until exclusive"
    );
    assert_eq!(
        acked_ids(
            &h,
            "kept",
            search(|s, _, at| {
                s.key = Some("k1".into());
                s.since_ms = Some(at[1]);
            })
        )
        .await,
        [ids[2]],
        "every condition holds"
    );
    assert!(
        acked_ids(
            &h,
            "kept",
            AckedSearch {
                message_id: Some(Uuid::now_v7()),
                ..AckedSearch::default()
            }
        )
        .await
        .is_empty(),
        "an unknown id matches nothing"
    );
    assert!(
        acked_ids(&h, "kept", search(|s, _, _| s.key = Some("none".into())))
            .await
            .is_empty()
    );
}

/// Deleting a queue deletes the acked messages it keeps: a queue made again under the same
/// name lists none of them, and the old message's body is not found through it.
pub async fn a_deleted_queue_takes_its_kept_messages_with_it(h: Harness) {
    h.queue("kept", |c| c.keep_acked_ms = 3_600_000).await;
    let id = h.send("kept", &["{\"secret\":1}"]).await[0];
    let receipt = h.claim("kept", 1).await.messages.remove(0).receipt;
    h.ack("kept", receipt).await.unwrap();
    assert_eq!(acked_ids(&h, "kept", AckedSearch::default()).await, [id]);

    h.store.queue_delete("kept").await.unwrap();
    h.store.queue_delete("kept.dlq").await.unwrap();
    h.queue("kept", |c| c.keep_acked_ms = 3_600_000).await;
    assert!(
        acked_ids(&h, "kept", AckedSearch::default())
            .await
            .is_empty()
    );
    assert_eq!(body_of(&*h.store, "kept", id, h.now()).await, None);
    h.maintain().await;
    assert!(
        acked_ids(&h, "kept", AckedSearch::default())
            .await
            .is_empty()
    );
}

/// The body bytes `store` counts per queue at `now_ms`, as `(queue, held, kept)`.
async fn bytes_of(store: &dyn Store, now_ms: i64) -> Vec<(String, u64, u64)> {
    store
        .queue_bytes(now_ms)
        .await
        .expect("queue_bytes")
        .into_iter()
        .map(|QueueBytes { queue, held, kept }| (queue, held, kept))
        .collect()
}

/// `queue_bytes` counts the body bytes of every message a queue holds (ready, delayed or
/// leased) and, apart, of the acked messages it keeps while they are kept; a queue that stores
/// no body is not listed. What tenants' byte quotas are counted from.
pub async fn queue_bytes_count_held_and_kept_bodies(h: Harness) {
    const KEEP_MS: i64 = 60_000;
    h.queue("kept", |c| c.keep_acked_ms = KEEP_MS).await;
    h.queue("plain", |_| {}).await;
    assert!(bytes_of(&*h.store, h.now()).await.is_empty());
    h.send("kept", &["{\"n\":1}", "[1,2,3,4,5]"]).await;
    h.send("plain", &["\"abc\""]).await;
    let mut delayed = h.message("{\"later\":true}");
    delayed.visible_at_ms = h.now() + 10_000;
    h.enqueue("plain", vec![delayed]).await;
    assert_eq!(
        bytes_of(&*h.store, h.now()).await,
        [("kept".into(), 7 + 11, 0), ("plain".into(), 5 + 14, 0)]
    );

    // Leased messages are still held; acked ones move to kept, or go.
    let receipt = h.claim("kept", 1).await.messages.remove(0).receipt;
    assert_eq!(
        bytes_of(&*h.store, h.now()).await[0],
        ("kept".into(), 18, 0)
    );
    ack_with(&h, "kept", receipt, "{}").await;
    let receipt = h.claim("plain", 1).await.messages.remove(0).receipt;
    ack_with(&h, "plain", receipt, "{}").await;
    assert_eq!(
        bytes_of(&*h.store, h.now()).await,
        [("kept".into(), 11, 7), ("plain".into(), 14, 0)]
    );

    // Across a reopen, and until the keep ends, not after.
    let store = h.reopen().await;
    h.advance(KEEP_MS - 1);
    assert_eq!(bytes_of(&*store, h.now()).await[0], ("kept".into(), 11, 7));
    h.advance(1);
    assert_eq!(
        bytes_of(&*store, h.now()).await,
        [("kept".into(), 11, 0), ("plain".into(), 14, 0)]
    );
}
