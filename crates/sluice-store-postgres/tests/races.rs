//! Races between two nodes, run many times (docs/design/postgres-store.md §6.4): two
//! `PgStore`s opened on one schema stand for two `sluice serve` nodes, and what each race must
//! never break is checked in SQL after every round, beside what the store answers.

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;

use sluice_core::message::{NewMessage, Payload};
use sluice_core::queue::{Ordering, QueueConfig, RateLimit};
use sluice_core::store::{AckParams, ClaimParams, EnqueueParams, QueuePutParams, Store};
use sluice_store_postgres::PgStore;
use tokio_postgres::Client;

const T0: i64 = 1_700_000_000_000;

struct Nodes {
    a: Arc<PgStore>,
    b: Arc<PgStore>,
    sql: Client,
    url: String,
    schema: String,
}

impl Nodes {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let schema = support::fresh_schema();
        let a = Arc::new(
            PgStore::open(support::options(&url, &schema))
                .await
                .unwrap(),
        );
        let b = Arc::new(
            PgStore::open(support::options(&url, &schema))
                .await
                .unwrap(),
        );
        let sql = support::connect(&url).await.unwrap();
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

    fn node(&self, n: usize) -> Arc<PgStore> {
        if n.is_multiple_of(2) {
            self.a.clone()
        } else {
            self.b.clone()
        }
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
            .unwrap();
    }

    async fn count(&self, query: &str) -> i64 {
        self.sql.query_one(query, &[]).await.unwrap().get(0)
    }

    async fn drop(self) {
        self.a.close().await.unwrap();
        self.b.close().await.unwrap();
        support::drop_schema(self.url, self.schema).await;
    }
}

fn message(body: &str, key: Option<&str>, idempotency_key: Option<&str>) -> NewMessage {
    NewMessage {
        idempotency_key: idempotency_key.map(str::to_owned),
        payload: Arc::new(Payload {
            body_bytes: body.as_bytes().to_vec(),
            ..Payload::default()
        }),
        key: key.map(str::to_owned),
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

fn claim_params(queue: &str, max: usize, now_ms: i64) -> ClaimParams {
    ClaimParams {
        lane_runs: false,
        queue: queue.into(),
        max,
        lease_ms: Some(600_000),
        now_ms,
    }
}

/// One idempotency key sent by 16 tasks over both nodes at once makes one message: every
/// answer names it, exactly one says it was created, and the table holds one row.
#[tokio::test]
async fn one_key_sent_by_sixteen_tasks_on_two_nodes_makes_one_message() {
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    nodes.queue("q", |_| {}).await;
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let store = nodes.node(n);
            tokio::spawn(async move {
                store
                    .message_enqueue(EnqueueParams {
                        queue: "q".into(),
                        messages: vec![message(&format!("copy {n}"), None, Some("the key"))],
                        now_ms: T0,
                    })
                    .await
                    .expect("enqueue")
                    .remove(0)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    assert_eq!(answers.iter().filter(|answer| answer.created).count(), 1);
    assert!(
        answers
            .iter()
            .all(|answer| answer.message_id == answers[0].message_id)
    );
    assert_eq!(nodes.count("SELECT count(*) FROM messages").await, 1);
    nodes.drop().await;
}

/// An enqueue to a key on node A races the ack of that key's head on node B, 200 times: the
/// lane never loses its active member or miscounts (checked after every round), and the
/// message enqueued is always the next one delivered.
#[tokio::test]
async fn an_enqueue_racing_the_ack_of_its_lanes_head_never_strands_the_lane() {
    const ROUNDS: usize = 200;
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    nodes.queue("q", |c| c.ordering = Ordering::PerKey).await;
    let send = |store: Arc<PgStore>, body: String| async move {
        store
            .message_enqueue(EnqueueParams {
                queue: "q".into(),
                messages: vec![message(&body, Some("k"), None)],
                now_ms: T0,
            })
            .await
            .expect("enqueue")
    };
    send(nodes.a.clone(), "0".into()).await;
    for round in 1..=ROUNDS {
        let head = nodes
            .b
            .message_claim(claim_params("q", 10, T0))
            .await
            .unwrap()
            .messages;
        assert_eq!(head.len(), 1, "round {round}: one head of the key");
        let body = String::from_utf8(head[0].payload.body_bytes.clone()).unwrap();
        assert_eq!(body, (round - 1).to_string(), "round {round}: in order");
        let b = nodes.b.clone();
        let receipt = head[0].receipt;
        let (_, acked) = tokio::join!(
            send(nodes.a.clone(), round.to_string()),
            b.message_ack(AckParams {
                queue: "q".into(),
                receipts: vec![receipt],
                result: None,
                delivery: None,
                now_ms: T0,
            })
        );
        assert!(acked.unwrap()[0].is_ok(), "round {round}");
        let broken = support::broken_invariants(&nodes.sql, &nodes.schema).await;
        assert!(broken.is_empty(), "round {round}: {broken:?}");
    }
    nodes.drop().await;
}

/// `max_in_flight = 5` with 10 claimers split over both nodes: the leases out never pass 5,
/// counted in SQL after every claim, and every message is delivered.
#[tokio::test]
async fn max_in_flight_holds_for_ten_claimers_on_two_nodes() {
    const MESSAGES: usize = 60;
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    nodes.queue("q", |c| c.max_in_flight = Some(5)).await;
    let bodies: Vec<NewMessage> = (0..MESSAGES)
        .map(|n| message(&n.to_string(), None, None))
        .collect();
    nodes
        .a
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: bodies,
            now_ms: T0,
        })
        .await
        .unwrap();
    let nodes = Arc::new(nodes);
    let delivered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let tasks: Vec<_> = (0..10)
        .map(|n| {
            let (nodes, delivered) = (nodes.clone(), delivered.clone());
            tokio::spawn(async move {
                let store = nodes.node(n);
                let sql = support::connect(&nodes.url).await.unwrap();
                let leased = format!(
                    "SELECT count(*) FROM \"{}\".messages WHERE state = 'leased'",
                    nodes.schema
                );
                while delivered.load(std::sync::atomic::Ordering::SeqCst) < MESSAGES {
                    assert!(std::time::Instant::now() < deadline, "not drained in time");
                    let claimed = store
                        .message_claim(claim_params("q", 3, T0))
                        .await
                        .unwrap()
                        .messages;
                    let out: i64 = sql.query_one(&leased, &[]).await.unwrap().get(0);
                    assert!(out <= 5, "{out} leases out");
                    if claimed.is_empty() {
                        tokio::task::yield_now().await;
                        continue;
                    }
                    delivered.fetch_add(claimed.len(), std::sync::atomic::Ordering::SeqCst);
                    let acked = store
                        .message_ack(AckParams {
                            queue: "q".into(),
                            receipts: claimed.iter().map(|m| m.receipt).collect(),
                            result: None,
                            delivery: None,
                            now_ms: T0,
                        })
                        .await
                        .unwrap();
                    assert!(acked.iter().all(Result::is_ok));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a claimer failed");
    }
    assert_eq!(
        delivered.load(std::sync::atomic::Ordering::SeqCst),
        MESSAGES
    );
    let nodes = Arc::into_inner(nodes).expect("the claimers are done");
    nodes.drop().await;
}

/// A rate limit of 20/s with a burst of 5 is the queue's: claims over both nodes, at times
/// 100 ms apart for 2 s, deliver at most burst + 20 × elapsed in all.
#[tokio::test]
async fn a_rate_limit_holds_for_both_nodes_together() {
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    nodes
        .queue("q", |c| {
            c.rate_limit = Some(RateLimit {
                per_second: 20.0,
                burst: 5,
            })
        })
        .await;
    let bodies: Vec<NewMessage> = (0..200)
        .map(|n| message(&n.to_string(), None, None))
        .collect();
    nodes
        .a
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: bodies,
            now_ms: T0,
        })
        .await
        .unwrap();
    let mut delivered = 0;
    for step in 0..=20_i64 {
        let now_ms = T0 + step * 100;
        let (on_a, on_b) = tokio::join!(
            nodes.a.message_claim(claim_params("q", 10, now_ms)),
            nodes.b.message_claim(claim_params("q", 10, now_ms))
        );
        delivered += on_a.unwrap().messages.len() + on_b.unwrap().messages.len();
        let allowed = 5 + (20 * step * 100 / 1_000) as usize;
        assert!(
            delivered <= allowed,
            "{delivered} delivered by {} ms, at most {allowed}",
            step * 100
        );
    }
    assert_eq!(delivered, 45, "the burst and 2 s of the rate");
    nodes.drop().await;
}
