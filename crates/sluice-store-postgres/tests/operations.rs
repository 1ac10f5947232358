//! Operator actions and lookups on two nodes (two `PgStore`s on one schema, as two
//! `sluice serve` nodes on one database), and on queues larger than one of the store's chunks
//! or pages: what the conformance suite (one store, a handful of messages) cannot show.
//! A dead letter replayed on one node is claimable on the other, and each dead letter is
//! replayed once however many nodes replay at once; a purge on one node is what the other
//! sees, and leaves no lane stuck; a cancel racing a claim on the other node either wins or
//! loses whole; push attempts are logged with the ack or nack of whichever node; listings,
//! browsing, replays and deletions page through many messages in order
//! (docs/design/postgres-store.md §2.8, §2.10, §2.12).

use crate::support;
use sluice_core::store::prelude::*;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::message::{
    DeadLetterInfo, DeliveryAttempt, DeliveryLogEntry, MessageState, NewMessage, Payload, Receipt,
};
use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::{
    AckParams, BrowseQuery, BrowseState, CancelOutcome, Claim, ClaimParams, DeadLetterQuery,
    DeadLetterSelection, EnqueueParams, MessageGetParams, MessageRef, NackParams, QueuePutParams,
    ReplayParams, Store,
};
use sluice_core::store::{DeadLetterFilter, PurgeScope};
use sluice_store_postgres::PgStore;
use tokio_postgres::Client;
use uuid::Uuid;

const T0: i64 = 1_700_000_000_000;

/// Two nodes on a fresh schema, a connection of the test's own to it, and what drops it.
struct Cluster {
    a: Arc<PgStore>,
    b: Arc<PgStore>,
    sql: Client,
    url: String,
    schema: String,
}

impl Cluster {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let schema = support::fresh_schema();
        let open = || async {
            Arc::new(
                PgStore::open(support::options(&url, &schema))
                    .await
                    .expect("the store opens"),
            )
        };
        let a = open().await;
        let b = open().await;
        let sql = support::connect(&url).await.expect("the test database");
        sql.batch_execute(&format!("SET search_path = \"{schema}\""))
            .await
            .unwrap();
        Some(Self {
            a,
            b,
            sql,
            url,
            schema,
        })
    }

    async fn queue(&self, name: &str, edit: impl FnOnce(&mut QueueConfig)) {
        let mut config = QueueConfig::defaults_for(name);
        edit(&mut config);
        self.a
            .queue_put(QueuePutParams {
                name: name.into(),
                config,
                now_ms: T0,
            })
            .await
            .expect("queue put");
    }

    /// Lanes whose row, members or active member disagree with the messages (none, always).
    async fn lane_violations(&self) -> i64 {
        self.sql
            .query_one(support::LANE_VIOLATIONS, &[])
            .await
            .unwrap()
            .get(0)
    }

    async fn drop(self) {
        self.a.close().await.unwrap();
        self.b.close().await.unwrap();
        support::drop_schema(self.url, self.schema).await;
    }
}

fn message(body: &str, key: Option<&str>) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: body.as_bytes().to_vec(),
            headers: [("origin".to_owned(), body.to_owned())].into(),
            ..Payload::default()
        }),
        key: key.map(str::to_owned),
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

async fn send(store: &PgStore, queue: &str, messages: Vec<NewMessage>) -> Vec<Uuid> {
    store
        .message_enqueue(EnqueueParams {
            queue: queue.into(),
            messages,
            now_ms: T0,
        })
        .await
        .expect("enqueue")
        .iter()
        .map(|enqueued| enqueued.message_id)
        .collect()
}

async fn claim(store: &PgStore, queue: &str, max: usize) -> Claim {
    store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: queue.into(),
            max,
            lease_ms: Some(60_000),
            now_ms: T0,
        })
        .await
        .expect("claim")
}

async fn ack(store: &PgStore, queue: &str, receipt: Receipt, delivery: Option<DeliveryLogEntry>) {
    let answers = store
        .message_ack(AckParams {
            queue: queue.into(),
            receipts: vec![receipt],
            result: None,
            delivery,
            now_ms: T0,
        })
        .await
        .expect("ack");
    assert_eq!(answers, [Ok(())], "the ack is taken");
}

async fn nack(
    store: &PgStore,
    queue: &str,
    receipt: Receipt,
    permanent: bool,
    delivery: Option<DeliveryLogEntry>,
) {
    store
        .message_nack(NackParams {
            queue: queue.into(),
            receipt,
            error: Some("broken".into()),
            delay_ms: Some(0),
            permanent,
            delivery,
            now_ms: T0,
        })
        .await
        .expect("nack");
}

fn get(queue: &str, id: Uuid) -> MessageGetParams {
    MessageGetParams {
        queue: queue.into(),
        by: MessageRef::Id(id),
        now_ms: T0,
    }
}

async fn state_of(store: &PgStore, queue: &str, id: Uuid) -> MessageState {
    store
        .message_get(get(queue, id))
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{id} is unknown to {queue:?}"))
        .state
}

fn from(queue: &str) -> DeadLetterFilter {
    DeadLetterFilter {
        source_queue: queue.into(),
        ..DeadLetterFilter::default()
    }
}

fn replay(queue: &str, selection: DeadLetterSelection, limit: usize) -> ReplayParams {
    ReplayParams {
        queue: queue.into(),
        selection,
        limit,
        dry_run: false,
        target_queue: None,
        now_ms: T0,
    }
}

fn body(claim: &Claim) -> Vec<String> {
    claim
        .messages
        .iter()
        .map(|m| String::from_utf8_lossy(&m.payload.body_bytes).into_owned())
        .collect()
}

/// A dead letter replayed on node A is a new message that node B's waiter is woken for and B
/// claims, with the dead letter's body and headers; B reads the dead letter as replayed and
/// will not replay it again. The rest replayed by both nodes at once: each dead letter is
/// replayed exactly once, and nothing is left in the dead-letter queue.
#[tokio::test]
async fn a_dead_letter_replayed_on_one_node_is_claimable_on_the_other() {
    const DEAD: usize = 40;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.max_attempts = 1).await;
    let ids = send(
        &cluster.a,
        "q",
        (0..DEAD).map(|i| message(&format!("m{i}"), None)).collect(),
    )
    .await;
    for _ in 0..2 {
        for message in claim(&cluster.a, "q", 100).await.messages {
            nack(&cluster.a, "q", message.receipt, true, None).await;
        }
    }
    let depth = cluster.b.queue_get("q", T0).await.unwrap();
    assert_eq!(depth.dead_letter_depth, Some(DEAD as u64));

    // B's listener is connected once its definitions counter has moved.
    let mut connected = cluster.b.definitions_changed();
    tokio::time::timeout(
        Duration::from_secs(10),
        connected.wait_for(|count| *count > 0),
    )
    .await
    .expect("B's listener connects")
    .unwrap();
    let signal = cluster.b.notifier().queue("q");
    let mut woken = std::pin::pin!(signal.notified());
    woken.as_mut().enable();
    let done = cluster
        .a
        .dead_letter_replay(replay("q", DeadLetterSelection::Ids(vec![ids[0]]), 10))
        .await
        .unwrap();
    assert_eq!(done.matched, 1);
    let [(dead, new)] = done.replayed[..] else {
        panic!("one replayed: {done:?}")
    };
    assert_eq!(dead, ids[0]);
    tokio::time::timeout(Duration::from_secs(5), woken)
        .await
        .expect("B's waiter is woken by A's replay");
    let claimed = claim(&cluster.b, "q", 10).await;
    assert_eq!(body(&claimed), ["m0"], "only the replayed message");
    let replayed = &claimed.messages[0];
    assert_eq!((replayed.message_id, replayed.attempts), (new, 1));
    assert_eq!(replayed.payload.headers["origin"], "m0");
    assert!(replayed.dead_letter.is_none(), "a fresh message");
    let record = cluster
        .b
        .dead_letter_get("q", ids[0])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record.status.state, MessageState::Replayed);
    assert_eq!(record.status.replayed_as, Some(new));
    assert_eq!(
        record.payload.map(|p| p.body_bytes),
        Some(b"m0".to_vec()),
        "a replayed record keeps its body"
    );
    let again = cluster
        .b
        .dead_letter_replay(replay("q", DeadLetterSelection::Ids(vec![ids[0]]), 10))
        .await
        .unwrap();
    assert!(again.replayed.is_empty(), "not replayed twice");
    ack(&cluster.b, "q", replayed.receipt, None).await;

    // Both nodes replay the rest at once.
    let all = || replay("q", DeadLetterSelection::Matching(from("q")), 100);
    let (on_a, on_b) = tokio::join!(
        cluster.a.dead_letter_replay(all()),
        cluster.b.dead_letter_replay(all())
    );
    let (on_a, on_b) = (on_a.unwrap(), on_b.unwrap());
    let mut dead_ids: Vec<Uuid> = on_a
        .replayed
        .iter()
        .chain(&on_b.replayed)
        .map(|(dead, _)| *dead)
        .collect();
    dead_ids.sort_unstable();
    let mut expected = ids[1..].to_vec();
    expected.sort_unstable();
    assert_eq!(dead_ids, expected, "every dead letter replayed once");
    let new_ids: HashSet<Uuid> = on_a
        .replayed
        .iter()
        .chain(&on_b.replayed)
        .map(|(_, new)| *new)
        .collect();
    assert_eq!(new_ids.len(), DEAD - 1);
    let depth = cluster.a.queue_get("q", T0).await.unwrap();
    assert_eq!(depth.depth.ready, (DEAD - 1) as u64);
    assert_eq!(depth.dead_letter_depth, Some(0));
    cluster.drop().await;
}

/// A purge on node A takes what waits behind the leased heads of a per-key queue's lanes and
/// its delayed messages; node B sees the queue as A left it, still acks the heads it holds,
/// and the keys go on with new messages.
#[tokio::test]
async fn a_purge_on_one_node_is_seen_by_the_other() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let delayed = NewMessage {
        visible_at_ms: T0 + 60_000,
        ..message("later", None)
    };
    let ids = send(
        &cluster.a,
        "q",
        vec![
            message("a1", Some("a")),
            message("a2", Some("a")),
            message("b1", Some("b")),
            message("free", None),
            delayed,
        ],
    )
    .await;
    let heads = claim(&cluster.b, "q", 10).await;
    assert_eq!(body(&heads), ["a1", "b1", "free"]);
    ack(&cluster.b, "q", heads.messages[2].receipt, None).await;

    assert_eq!(
        cluster
            .a
            .queue_purge("q", PurgeScope::Waiting, T0)
            .await
            .unwrap(),
        2
    );
    let depth = cluster.b.queue_get("q", T0).await.unwrap().depth;
    assert_eq!((depth.ready, depth.delayed, depth.in_flight), (0, 0, 2));
    let waiting = cluster
        .b
        .message_browse(BrowseQuery {
            queue: "q".into(),
            state: BrowseState::Waiting,
            after: None,
            limit: 10,
            search: Default::default(),
            now_ms: T0,
        })
        .await
        .unwrap();
    assert!(waiting.messages.is_empty());
    assert_eq!(
        (
            waiting.counts.ready,
            waiting.counts.waiting,
            waiting.counts.in_flight
        ),
        (0, 0, 2)
    );
    assert_eq!(
        state_of(&cluster.b, "q", ids[1]).await,
        MessageState::Purged
    );
    assert_eq!(
        state_of(&cluster.b, "q", ids[4]).await,
        MessageState::Purged
    );
    assert_eq!(
        cluster
            .a
            .queue_get("q", T0)
            .await
            .unwrap()
            .depth
            .counters
            .purged,
        2
    );
    assert_eq!(cluster.lane_violations().await, 0);

    for head in &heads.messages[..2] {
        ack(&cluster.b, "q", head.receipt, None).await;
    }
    send(
        &cluster.a,
        "q",
        vec![message("a3", Some("a")), message("b2", Some("b"))],
    )
    .await;
    assert_eq!(body(&claim(&cluster.b, "q", 10).await), ["a3", "b2"]);
    assert_eq!(cluster.lane_violations().await, 0);
    cluster.drop().await;
}

/// A cancel on node A racing a claim on node B, round after round: either the cancel wins
/// (the claim finds nothing and the message reads cancelled) or the claim does (the cancel
/// says the message is being processed and the lease still acks); never both, never neither.
#[tokio::test]
async fn a_cancel_racing_a_claim_on_the_other_node_wins_or_loses_whole() {
    const ROUNDS: usize = 30;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |_| {}).await;
    let (mut cancelled, mut claimed) = (0, 0);
    for round in 0..ROUNDS {
        let [id] = send(&cluster.a, "q", vec![message(&round.to_string(), None)]).await[..] else {
            unreachable!()
        };
        let (cancel, claim) = tokio::join!(
            cluster.a.message_cancel(get("q", id), None),
            claim(&cluster.b, "q", 1)
        );
        match (cancel.unwrap(), &claim.messages[..]) {
            (CancelOutcome::Cancelled { message_id }, []) => {
                assert_eq!(message_id, id);
                assert_eq!(state_of(&cluster.b, "q", id).await, MessageState::Cancelled);
                cancelled += 1;
            }
            (CancelOutcome::AlreadyProcessing { message_id }, [leased]) => {
                assert_eq!((message_id, leased.message_id), (id, id));
                ack(&cluster.a, "q", leased.receipt, None).await;
                claimed += 1;
            }
            (cancel, leased) => panic!("round {round}: {cancel:?} with {leased:?}"),
        }
    }
    eprintln!("{cancelled} cancels won, {claimed} claims won");
    let depth = cluster.a.queue_get("q", T0).await.unwrap().depth;
    assert_eq!((depth.ready, depth.in_flight), (0, 0));
    assert_eq!(depth.counters.cancelled, cancelled, "A counts its cancels");
    cluster.drop().await;
}

fn attempt(number: u32, status: u16) -> DeliveryLogEntry {
    DeliveryLogEntry {
        attempt: DeliveryAttempt {
            attempt: number,
            at_ms: T0 + i64::from(number),
            method: "POST".into(),
            url: "http://127.0.0.1:9/hook".into(),
            status: Some(status),
            body_excerpt: Some(format!("answer {number}")),
            latency_ms: 3,
            ..DeliveryAttempt::default()
        },
        keep: 2,
    }
}

/// Push attempts are logged with the nack or ack they ended with, on whichever node: the log
/// keeps the last `keep`, oldest first, is read by either node, and follows a message into
/// its dead-letter queue; a message never pushed has none.
#[tokio::test]
async fn push_attempts_are_logged_with_the_ack_or_nack_on_any_node() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.max_attempts = 5).await;
    let ids = send(
        &cluster.a,
        "q",
        vec![
            message("pushed", None),
            message("poison", None),
            message("plain", None),
        ],
    )
    .await;
    let first = claim(&cluster.b, "q", 1).await.messages.remove(0);
    nack(&cluster.b, "q", first.receipt, false, Some(attempt(1, 500))).await;
    let second = claim(&cluster.a, "q", 1).await.messages.remove(0);
    assert_eq!(second.message_id, ids[0], "retried at once");
    nack(
        &cluster.a,
        "q",
        second.receipt,
        false,
        Some(attempt(2, 503)),
    )
    .await;
    let third = claim(&cluster.b, "q", 1).await.messages.remove(0);
    ack(&cluster.a, "q", third.receipt, Some(attempt(3, 200))).await;
    let (status, log) = cluster
        .b
        .message_deliveries(get("q", ids[0]))
        .await
        .unwrap()
        .expect("the message");
    assert_eq!(status.state, MessageState::Acked);
    assert_eq!(log, [attempt(2, 503).attempt, attempt(3, 200).attempt]);

    let poison = claim(&cluster.a, "q", 1).await.messages.remove(0);
    assert_eq!(poison.message_id, ids[1]);
    nack(&cluster.a, "q", poison.receipt, true, Some(attempt(1, 400))).await;
    let (status, log) = cluster
        .b
        .message_deliveries(get("q", ids[1]))
        .await
        .unwrap()
        .expect("the dead letter");
    assert_eq!(
        (status.state, status.queue.as_str()),
        (MessageState::Dead, "q.dlq")
    );
    assert_eq!(log, [attempt(1, 400).attempt]);

    let (_, log) = cluster
        .a
        .message_deliveries(get("q", ids[2]))
        .await
        .unwrap()
        .expect("the plain message");
    assert!(log.is_empty());
    assert!(
        cluster
            .a
            .message_deliveries(get("q", Uuid::now_v7()))
            .await
            .unwrap()
            .is_none()
    );
    cluster.drop().await;
}

/// More messages than one purge transaction takes, in many lanes: the purge goes chunk by
/// chunk, takes every message but the leased heads, and every lane stays whole.
#[tokio::test]
async fn a_purge_larger_than_a_chunk_takes_everything_not_leased() {
    const KEYS: usize = 10;
    const PER_KEY: usize = 450;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let all: Vec<NewMessage> = (0..KEYS * PER_KEY)
        .map(|i| message(&i.to_string(), Some(&format!("k{}", i % KEYS))))
        .collect();
    for batch in all.chunks(500) {
        send(&cluster.a, "q", batch.to_vec()).await;
    }
    let heads = claim(&cluster.b, "q", 4).await.messages;
    assert_eq!(heads.len(), 4);
    let started = std::time::Instant::now();
    let purged = cluster
        .b
        .queue_purge("q", PurgeScope::Waiting, T0)
        .await
        .unwrap();
    eprintln!("purged {purged} messages in {:?}", started.elapsed());
    assert_eq!(purged as usize, KEYS * PER_KEY - heads.len());
    let depth = cluster.a.queue_get("q", T0).await.unwrap().depth;
    assert_eq!((depth.ready, depth.in_flight), (0, heads.len() as u64));
    assert_eq!(cluster.lane_violations().await, 0);
    for head in &heads {
        ack(&cluster.a, "q", head.receipt, None).await;
    }
    send(
        &cluster.a,
        "q",
        (0..KEYS)
            .map(|k| message("after", Some(&format!("k{k}"))))
            .collect(),
    )
    .await;
    assert_eq!(claim(&cluster.b, "q", 100).await.messages.len(), KEYS);
    assert_eq!(cluster.lane_violations().await, 0);
    cluster.drop().await;
}

/// Dead letters (moved in as the SQS move tasks move them, with their metadata) are listed
/// newest first in pages that neither skip nor repeat, also when the filter matches few of
/// them; a replay takes the oldest matching first and says more are left; a deletion takes
/// exactly the matching rest.
#[tokio::test]
async fn dead_letters_page_replay_and_delete_in_order_across_many() {
    const DEAD: i64 = 300;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |_| {}).await;
    let dead: Vec<NewMessage> = (0..DEAD)
        .map(|i| NewMessage {
            dead_letter: Some(DeadLetterInfo {
                source_queue: "q".into(),
                last_error: Some(if i % 10 == 0 {
                    "a NEEDLE".into()
                } else {
                    "hay".into()
                }),
                attempts: 1,
                first_seen_at_ms: T0,
                // Dead-lettered in an order unlike enqueue order: pages follow this one.
                last_seen_at_ms: T0 + (i * 37) % DEAD,
            }),
            ..message(&i.to_string(), None)
        })
        .collect();
    let ids = send(&cluster.a, "q.dlq", dead).await;
    let mut by_death: Vec<(i64, usize)> =
        (0..DEAD).map(|i| ((i * 37) % DEAD, i as usize)).collect();
    by_death.sort_unstable();
    let newest_first = |keep: &dyn Fn(usize) -> bool| -> Vec<Uuid> {
        by_death
            .iter()
            .rev()
            .filter(|(_, i)| keep(*i))
            .map(|(_, i)| ids[*i])
            .collect()
    };
    let list_all = |filter: DeadLetterFilter, limit: usize| {
        let store = cluster.b.clone();
        async move {
            let (mut listed, mut before, mut pages) = (Vec::new(), None, 0);
            loop {
                let page = store
                    .dead_letter_list(DeadLetterQuery {
                        queue: "q".into(),
                        filter: filter.clone(),
                        before,
                        limit,
                    })
                    .await
                    .unwrap();
                assert!(page.entries.len() <= limit, "the limit holds");
                listed.extend(page.entries.iter().map(|e| e.status.message_id));
                pages += 1;
                assert!(pages <= 200, "the cursor goes on forever");
                match page.next {
                    Some(next) => before = Some(next),
                    None => return listed,
                }
            }
        }
    };
    assert_eq!(list_all(from("q"), 7).await, newest_first(&|_| true));
    let needles = DeadLetterFilter {
        error_contains: Some("needle".into()),
        ..from("q")
    };
    assert_eq!(
        list_all(needles.clone(), 4).await,
        newest_first(&|i| i % 10 == 0)
    );

    let done = cluster
        .a
        .dead_letter_replay(replay(
            "q",
            DeadLetterSelection::Matching(needles.clone()),
            3,
        ))
        .await
        .unwrap();
    let oldest_needles: Vec<Uuid> = by_death
        .iter()
        .filter(|(_, i)| i % 10 == 0)
        .take(3)
        .map(|(_, i)| ids[*i])
        .collect();
    assert_eq!(
        done.replayed
            .iter()
            .map(|(dead, _)| *dead)
            .collect::<Vec<_>>(),
        oldest_needles,
        "oldest first"
    );
    assert!(done.more);
    assert_eq!(
        body(&claim(&cluster.b, "q", 10).await),
        oldest_needles
            .iter()
            .map(|id| ids.iter().position(|x| x == id).unwrap().to_string())
            .collect::<Vec<_>>(),
        "the new messages in the dead letters' order"
    );

    let deleted = cluster
        .b
        .dead_letter_delete(
            "q",
            DeadLetterSelection::Matching(needles.clone()),
            T0 + DEAD,
        )
        .await
        .unwrap();
    assert_eq!(deleted, (DEAD / 10 - 3) as u64);
    assert!(list_all(needles, 4).await.is_empty());
    assert_eq!(
        list_all(from("q"), 50).await,
        newest_first(&|i| i % 10 != 0)
    );
    assert_eq!(
        cluster
            .a
            .queue_get("q", T0)
            .await
            .unwrap()
            .dead_letter_depth,
        Some((DEAD - DEAD / 10) as u64)
    );
    cluster.drop().await;
}

/// Browsing pages through many messages of every state in dispatch order: ready ones by
/// priority (many priorities) then enqueue order, waiting ones behind their lanes' heads,
/// with pages that neither skip nor repeat.
#[tokio::test]
async fn browse_pages_through_many_messages_in_dispatch_order() {
    const FREE: usize = 60;
    const KEYED: usize = 30;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    cluster.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let mut messages: Vec<NewMessage> = (0..FREE)
        .map(|i| NewMessage {
            priority: (i as i32 * 7) % 5 - 2,
            ..message(&format!("free{i}"), None)
        })
        .collect();
    messages
        .extend((0..KEYED).map(|i| message(&format!("keyed{i}"), Some(&format!("k{}", i % 3)))));
    let ids = send(&cluster.a, "q", messages).await;
    // Ready: the free messages and the three lane heads, by priority then enqueue order.
    let mut ready: Vec<(i32, usize)> = (0..FREE).map(|i| ((i as i32 * 7) % 5 - 2, i)).collect();
    ready.extend((FREE..FREE + 3).map(|i| (0, i)));
    ready.sort_by_key(|&(priority, i)| (std::cmp::Reverse(priority), i));
    let ready: Vec<Uuid> = ready.iter().map(|&(_, i)| ids[i]).collect();
    let waiting: Vec<Uuid> = ids[FREE + 3..].to_vec();

    for (state, expected) in [(BrowseState::Ready, ready), (BrowseState::Waiting, waiting)] {
        let (mut seen, mut after, mut pages) = (Vec::new(), None, 0);
        loop {
            let page = cluster
                .b
                .message_browse(BrowseQuery {
                    queue: "q".into(),
                    state,
                    after,
                    limit: 7,
                    search: Default::default(),
                    now_ms: T0,
                })
                .await
                .unwrap();
            assert!(page.messages.len() <= 7);
            assert_eq!(
                (page.counts.ready, page.counts.waiting),
                ((FREE + 3) as u64, (KEYED - 3) as u64)
            );
            seen.extend(page.messages.iter().map(|m| m.status.message_id));
            pages += 1;
            assert!(pages <= 50, "{state:?}: the cursor goes on forever");
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, expected, "{state:?} in dispatch order");
    }
    cluster.drop().await;
}
