//! Leadership and the leader's upkeep with several stores on one schema, as several
//! `sluice serve` nodes on one database (docs/design/postgres-store.md §4): exactly one node
//! leads; when it closes, dies or loses its session another leads within seconds; the upkeep
//! run by two nodes at once expires, retries and dead-letters each message once; counters of
//! every node add up and outlive the node; `queue_list` and `position` read the leader's count;
//! cleanup removes old records, keys and departed nodes; the invariants query catches a broken
//! lane and the safety net repairs one.

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::message::{NewMessage, Payload};
use sluice_core::queue::{OnExpire, Ordering, QueueConfig};
use sluice_core::store::{AckParams, ClaimParams, EnqueueParams, QueuePutParams, Store};
use sluice_store_postgres::{PgOptions, PgStore};
use tokio_postgres::Client;

const T0: i64 = 1_700_000_000_000;
/// The longest a takeover may take in these tests (the design's is about a second).
const TAKEOVER_WITHIN: Duration = Duration::from_secs(5);
/// The longest an announced takeover may take: well below the follower's own retry (a second
/// after its last try), with room for a slow machine.
const ANNOUNCED_TAKEOVER_WITHIN: Duration = Duration::from_millis(500);

/// Stores on one fresh schema, and a connection of the test's own to look at the tables.
struct Cluster {
    url: String,
    schema: String,
    sql: Client,
}

impl Cluster {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let schema = support::fresh_schema();
        let sql = support::connect(&url).await.expect("the test database");
        Some(Self { url, schema, sql })
    }

    fn options(&self) -> PgOptions {
        support::options(&self.url, &self.schema)
    }

    async fn open_with(&self, options: PgOptions) -> Arc<PgStore> {
        let store = Arc::new(PgStore::open(options).await.expect("the store opens"));
        // The schema exists from the first open on.
        self.sql
            .batch_execute(&format!("SET search_path = \"{}\"", self.schema))
            .await
            .unwrap();
        store
    }

    async fn open(&self) -> Arc<PgStore> {
        self.open_with(self.options()).await
    }

    async fn count(&self, query: &str) -> i64 {
        self.sql.query_one(query, &[]).await.unwrap().get(0)
    }

    /// Checks the invariants, then drops the schema.
    async fn finish(self) {
        support::check_and_drop(self.url, self.schema).await;
    }
}

fn is_leader(store: &PgStore) -> bool {
    store.storage_metrics().value("sluice_store_leader") == Some(1.0)
}

/// Waits until `condition` holds, up to `within`; how long it took.
async fn wait_for(
    within: Duration,
    what: &str,
    mut condition: impl AsyncFnMut() -> bool,
) -> Duration {
    let started = Instant::now();
    loop {
        if condition().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn put(store: &PgStore, name: &str, edit: impl FnOnce(&mut QueueConfig)) {
    let mut config = QueueConfig::defaults_for(name);
    edit(&mut config);
    store
        .queue_put(QueuePutParams {
            name: name.into(),
            config,
            now_ms: T0,
        })
        .await
        .expect("queue put");
}

fn message(body: String, key: Option<String>) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: body.into_bytes(),
            ..Payload::default()
        }),
        key,
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

async fn send(store: &PgStore, queue: &str, messages: Vec<NewMessage>) -> Vec<u64> {
    store
        .message_enqueue(EnqueueParams {
            queue: queue.into(),
            messages,
            now_ms: T0,
        })
        .await
        .expect("enqueue")
        .iter()
        .map(|enqueued| enqueued.position)
        .collect()
}

async fn claim_all(store: &PgStore, queue: &str, lease_ms: i64, now_ms: i64) -> usize {
    store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: queue.into(),
            max: 1_000,
            lease_ms: Some(lease_ms),
            now_ms,
        })
        .await
        .expect("claim")
        .messages
        .len()
}

/// Two stores opened on one schema: the first leads (it was alone when it opened), the second
/// follows; the `nodes` table says the same, and the lock's holder is one backend.
#[tokio::test]
async fn two_stores_on_one_schema_elect_exactly_one_leader() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let a = cluster.open().await;
    let b = cluster.open().await;
    assert!(is_leader(&a), "the first store leads");
    assert!(!is_leader(&b), "the second follows");
    // A follower trying again and again never takes it from the leader.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(is_leader(&a) && !is_leader(&b));
    assert_eq!(cluster.count("SELECT count(*) FROM nodes").await, 2);
    assert_eq!(
        cluster
            .count("SELECT count(*) FROM nodes WHERE is_leader")
            .await,
        1
    );
    assert_eq!(lock_holders(&cluster).await.len(), 1);
    a.close().await.unwrap();
    b.close().await.unwrap();
    cluster.finish().await;
}

/// The backends holding the schema's leadership lock (§4.1: key `(7567, hashtext(schema))`).
async fn lock_holders(cluster: &Cluster) -> Vec<i32> {
    cluster
        .sql
        .query(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted \
             AND classid = 7567 AND objid = hashtext($1)::oid AND objsubid = 2",
            &[&cluster.schema],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Closing the leader gives its lock up and announces it: the follower leads at once, without
/// waiting for its next try, and the closed node's row is gone.
///
/// The follower also tries the lock every second on its own, so a takeover "within a second"
/// proves nothing. The close starts right after the follower's periodic try (seen in
/// `pg_stat_activity`): its next try is then a second away, and only the announcement can make
/// it lead well before.
#[tokio::test]
async fn closing_the_leader_hands_leadership_to_the_other_at_once() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let a = cluster.open().await;
    let mut options = cluster.options();
    options.node_name = format!("follower-{}", &cluster.schema[cluster.schema.len() - 12..]);
    let follower = format!("sluice/{}", options.node_name);
    let b = cluster.open_with(options).await;
    assert!(is_leader(&a));
    // Looked at every 5 ms, so the close starts within a few ms of the try.
    let previous = last_try(&cluster, &follower).await;
    let started = Instant::now();
    while last_try(&cluster, &follower).await == previous {
        assert!(
            started.elapsed() < TAKEOVER_WITHIN,
            "the follower did not try the lock again"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let closing = Instant::now();
    a.close().await.unwrap();
    wait_for(TAKEOVER_WITHIN, "b leads", async || is_leader(&b)).await;
    let took = closing.elapsed();
    eprintln!("takeover from the start of the leader's close, just after b's try: {took:?}");
    assert!(
        took < ANNOUNCED_TAKEOVER_WITHIN,
        "b led {took:?} after a's close began, just after b's periodic try: that is its next \
         try (a second after the last), not the announcement"
    );
    assert_eq!(cluster.count("SELECT count(*) FROM nodes").await, 1);
    assert_eq!(
        cluster
            .count("SELECT count(*) FROM nodes WHERE is_leader")
            .await,
        1
    );
    b.close().await.unwrap();
    cluster.finish().await;
}

/// When the election session of the node whose connections are named `application_name` last
/// tried the leadership lock (its statement's start, in seconds since the epoch); 0 before any.
async fn last_try(cluster: &Cluster, application_name: &str) -> f64 {
    cluster
        .sql
        .query_opt(
            "SELECT extract(epoch FROM query_start)::float8 FROM pg_stat_activity \
             WHERE application_name = $1 AND query LIKE 'SELECT pg_try_advisory_lock(%'",
            &[&application_name],
        )
        .await
        .unwrap()
        .map_or(0.0, |row| row.get(0))
}

/// A leader dropped without `close` (its process died: nothing is announced) loses its lock
/// with its session, and the follower takes it at its next try.
#[tokio::test]
async fn a_leader_that_dies_is_replaced_within_seconds() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let a = cluster.open().await;
    let b = cluster.open().await;
    assert!(is_leader(&a));
    drop(a);
    let took = wait_for(TAKEOVER_WITHIN, "b leads", async || is_leader(&b)).await;
    eprintln!("takeover after the leader died: {took:?}");
    wait_for(TAKEOVER_WITHIN, "b's row says so", async || {
        cluster
            .count("SELECT count(*) FROM nodes WHERE is_leader")
            .await
            == 1
    })
    .await;
    b.close().await.unwrap();
    cluster.finish().await;
}

/// The leader's session killed by the database (`pg_terminate_backend`, as a restart or a
/// network cut does): the lock goes with it, the old leader steps down when its check fails,
/// and within seconds exactly one node leads again, on another session.
#[tokio::test]
async fn a_leader_whose_session_is_killed_steps_down_and_one_node_leads_again() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let a = cluster.open().await;
    let b = cluster.open().await;
    let holders = lock_holders(&cluster).await;
    assert_eq!(holders.len(), 1);
    let killed: bool = cluster
        .sql
        .query_one("SELECT pg_terminate_backend($1)", &[&holders[0]])
        .await
        .unwrap()
        .get(0);
    assert!(killed);
    wait_for(TAKEOVER_WITHIN, "one leader on a new session", async || {
        let holders_now = lock_holders(&cluster).await;
        holders_now.len() == 1 && holders_now[0] != holders[0] && (is_leader(&a) ^ is_leader(&b))
    })
    .await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    cluster.finish().await;
}

/// Two nodes run the upkeep at the same moments, as two leaders would during a takeover:
/// each expired lease is retried or dead-lettered once (one failure entry each, counted
/// once over both nodes), each old message expires once, and the lanes of a per-key queue
/// stay whole while their heads die and their next members go.
#[tokio::test]
async fn upkeep_on_two_nodes_at_once_does_each_change_once() {
    const MESSAGES: usize = 200;
    const KEYS: usize = 20;
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let a = cluster.open().await;
    let b = cluster.open().await;
    put(&a, "q", |c| c.max_attempts = 1).await;
    put(&a, "keys", |c| {
        c.max_attempts = 1;
        c.ordering = Ordering::PerKey;
    })
    .await;
    put(&a, "old", |c| {
        c.max_age_ms = 10_000;
        c.on_expire = OnExpire::DeadLetter;
    })
    .await;
    put(&a, "dropped", |c| c.max_age_ms = 10_000).await;
    let bodies = |n: usize| (0..n).map(|i| message(i.to_string(), None)).collect();
    send(&a, "q", bodies(MESSAGES)).await;
    send(&a, "old", bodies(MESSAGES)).await;
    send(&a, "dropped", bodies(MESSAGES)).await;
    let keyed = (0..KEYS * 2)
        .map(|i| message(i.to_string(), Some(format!("k{}", i % KEYS))))
        .collect();
    send(&b, "keys", keyed).await;
    assert_eq!(claim_all(&a, "q", 1_000, T0).await, MESSAGES);
    assert_eq!(
        claim_all(&b, "keys", 1_000, T0).await,
        KEYS,
        "one head per key"
    );

    for now_ms in [T0 + 10_000, T0 + 10_500, T0 + 11_000] {
        let (on_a, on_b) = tokio::join!(a.upkeep(now_ms), b.upkeep(now_ms));
        on_a.unwrap();
        on_b.unwrap();
        let broken = support::broken_invariants(&cluster.sql, &cluster.schema).await;
        assert!(broken.is_empty(), "at {now_ms}: {broken:?}");
    }

    let dead_in = |dlq: &str, source: &str| {
        format!(
            "SELECT count(*) FROM messages m JOIN queues d ON d.id = m.queue_id \
             WHERE d.name = '{dlq}' AND m.dead_source_queue = '{source}' \
               AND jsonb_array_length(m.failures) = 1 \
               AND m.failures -> 0 ->> 'dead_lettered' = 'true'"
        )
    };
    assert_eq!(cluster.count(&dead_in("q.dlq", "q")).await, MESSAGES as i64);
    assert_eq!(
        cluster.count(&dead_in("keys.dlq", "keys")).await,
        KEYS as i64,
        "the heads died once each"
    );
    assert_eq!(
        cluster
            .count(
                "SELECT count(*) FROM messages m JOIN queues d ON d.id = m.queue_id \
                 WHERE d.name = 'old.dlq' AND m.dead_source_queue = 'old' \
                   AND m.failures IS NOT NULL AND jsonb_array_length(m.failures) = 1"
            )
            .await,
        MESSAGES as i64,
        "each old message dead-lettered once"
    );
    assert_eq!(
        cluster
            .count("SELECT count(*) FROM messages WHERE state = 'expired'")
            .await,
        MESSAGES as i64,
        "each old message of the dropping queue expired once"
    );
    // The keys' next members took over their lanes.
    assert_eq!(claim_all(&a, "keys", 1_000, T0 + 11_000).await, KEYS);

    // Each change was counted by the node that made it; over both nodes, once.
    wait_for(Duration::from_secs(5), "the counters add up", async || {
        let q = a.queue_get("q", T0 + 11_000).await.unwrap().depth.counters;
        let old = a
            .queue_get("old", T0 + 11_000)
            .await
            .unwrap()
            .depth
            .counters;
        let dropped = b
            .queue_get("dropped", T0 + 11_000)
            .await
            .unwrap()
            .depth
            .counters;
        let keys = b
            .queue_get("keys", T0 + 11_000)
            .await
            .unwrap()
            .depth
            .counters;
        (q.lease_expired, q.dead_lettered) == (MESSAGES as u64, MESSAGES as u64)
            && (old.expired, old.dead_lettered) == (MESSAGES as u64, MESSAGES as u64)
            && dropped.expired == MESSAGES as u64
            && (keys.lease_expired, keys.dead_lettered) == (KEYS as u64, KEYS as u64)
    })
    .await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    cluster.finish().await;
}

/// Each node counts what it does; a queue's counters are every node's, and stay so after a
/// node closed (its totals are folded into the cluster's).
#[tokio::test]
async fn counters_of_every_node_add_up_and_outlive_the_node() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let a = cluster.open().await;
    let b = cluster.open().await;
    put(&a, "q", |_| {}).await;
    send(
        &a,
        "q",
        (0..3).map(|i| message(i.to_string(), None)).collect(),
    )
    .await;
    send(
        &b,
        "q",
        (0..2).map(|i| message(i.to_string(), None)).collect(),
    )
    .await;
    let enqueued = async |store: &PgStore| {
        store
            .queue_get("q", T0)
            .await
            .unwrap()
            .depth
            .counters
            .enqueued
    };
    // This node's own count is exact at once; b's arrives with b's next flush (within a second).
    let seen = enqueued(&a).await;
    assert!(seen == 3 || seen == 5, "{seen}");
    wait_for(
        Duration::from_secs(5),
        "both nodes' counts on a",
        async || enqueued(&a).await == 5,
    )
    .await;
    let listed = a.queue_list(T0).await.unwrap();
    assert_eq!(listed[0].depth.counters.enqueued, 5, "listed the same");
    b.close().await.unwrap();
    assert_eq!(enqueued(&a).await, 5, "b's totals stay after it left");
    assert_eq!(
        cluster
            .count("SELECT count(*) FROM queue_counters WHERE node_id = '00000000-0000-0000-0000-000000000000'")
            .await,
        1,
        "folded into the nil node's row"
    );
    a.close().await.unwrap();
    cluster.finish().await;
}

/// `queue_list` reads the leader's last count (`queue_stats`), and so does an enqueue's
/// `position` in an unbounded queue: they move when the upkeep counts again, not before.
/// Until a queue was counted, the list counts it exactly.
#[tokio::test]
async fn queue_list_and_positions_read_the_leaders_count() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let store = cluster.open().await;
    put(&store, "q", |_| {}).await;
    let ready = async || store.queue_list(T0).await.unwrap()[0].depth.ready;
    let three = (0..3).map(|i| message(i.to_string(), None)).collect();
    assert_eq!(send(&store, "q", three).await, [0, 1, 2]);
    assert_eq!(ready().await, 3, "not counted yet: counted now");
    store.maintain(T0).await.unwrap();
    assert_eq!(
        send(&store, "q", vec![message("4".into(), None)]).await,
        [3]
    );
    assert_eq!(ready().await, 3, "the leader's count, until the next one");
    assert_eq!(
        send(&store, "q", vec![message("5".into(), None)]).await,
        [3],
        "a position counts from the last count"
    );
    store.maintain(T0 + 500).await.unwrap();
    assert_eq!(ready().await, 3, "a count a second at most");
    store.maintain(T0 + 1_000).await.unwrap();
    assert_eq!(ready().await, 5);
    assert_eq!(
        store.queue_get("q", T0).await.unwrap().depth.ready,
        5,
        "queue_get counts exactly"
    );
    assert_eq!(
        send(&store, "q", vec![message("6".into(), None)]).await,
        [5]
    );
    store.close().await.unwrap();
    cluster.finish().await;
}

/// The cleanup removes final records past `acked_retention_ms`, idempotency keys whose window
/// ended, and nodes unseen for a minute, whose counters it keeps in the cluster's.
#[tokio::test]
async fn cleanup_removes_old_records_keys_and_departed_nodes() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let mut options = cluster.options();
    options.acked_retention_ms = 1_000;
    let store = cluster.open_with(options).await;
    put(&store, "q", |c| c.dedup_window_ms = 1_000).await;
    let mut keyed = message("x".into(), None);
    keyed.idempotency_key = Some("once".into());
    send(&store, "q", vec![keyed]).await;
    let claimed = store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "q".into(),
            max: 1,
            lease_ms: None,
            now_ms: T0,
        })
        .await
        .unwrap()
        .messages;
    let acked = store
        .message_ack(AckParams {
            queue: "q".into(),
            receipts: vec![claimed[0].receipt],
            result: None,
            delivery: None,
            now_ms: T0,
        })
        .await
        .unwrap();
    assert!(acked[0].is_ok());
    // A node that stopped writing its row two minutes ago, with counters of its own.
    cluster
        .sql
        .batch_execute(
            "INSERT INTO nodes (node_id, name, started_at_ms, seen_at_ms) \
             VALUES ('0190aaaa-0000-7000-8000-000000000001', 'gone', 0, \
                     (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 120000); \
             INSERT INTO queue_counters (queue_id, node_id, acked) \
             SELECT id, '0190aaaa-0000-7000-8000-000000000001', 7 FROM queues WHERE name = 'q'",
        )
        .await
        .unwrap();

    store.maintain(T0 + 500).await.unwrap();
    assert_eq!(
        cluster.count("SELECT count(*) FROM messages").await,
        1,
        "the acked record is kept for acked_retention_ms"
    );
    assert_eq!(
        cluster
            .count("SELECT count(*) FROM nodes WHERE name = 'gone'")
            .await,
        0,
        "a node unseen for a minute is removed"
    );
    let acked_total = store.queue_get("q", T0).await.unwrap().depth.counters.acked;
    assert_eq!(acked_total, 1 + 7, "its counters stay in the cluster's");

    // The next cleanup is 10 s of upkeep time later.
    store.maintain(T0 + 5_000).await.unwrap();
    assert_eq!(cluster.count("SELECT count(*) FROM messages").await, 1);
    store.maintain(T0 + 10_500).await.unwrap();
    assert_eq!(cluster.count("SELECT count(*) FROM messages").await, 0);
    assert_eq!(cluster.count("SELECT count(*) FROM idempotency").await, 0);
    assert_eq!(
        cluster.count("SELECT count(*) FROM nodes").await,
        1,
        "this node's own row stays"
    );
    store.close().await.unwrap();
    cluster.finish().await;
}

/// The invariants query sees a lane whose count is off, and one left without an active member;
/// the upkeep's safety net settles the latter (a bug's damage contained, and logged).
#[tokio::test]
async fn the_invariants_catch_a_broken_lane_and_the_safety_net_repairs_a_stuck_one() {
    let Some(cluster) = Cluster::new().await else {
        return;
    };
    let store = cluster.open().await;
    put(&store, "q", |c| c.ordering = Ordering::PerKey).await;
    let two = (0..2)
        .map(|i| message(i.to_string(), Some("k".into())))
        .collect();
    send(&store, "q", two).await;
    assert!(
        support::broken_invariants(&cluster.sql, &cluster.schema)
            .await
            .is_empty()
    );

    cluster
        .sql
        .batch_execute("UPDATE lanes SET members = members + 1")
        .await
        .unwrap();
    let broken = support::broken_invariants(&cluster.sql, &cluster.schema).await;
    assert!(
        broken
            .iter()
            .any(|(rule, _)| rule.contains("does not count")),
        "{broken:?}"
    );
    cluster
        .sql
        .batch_execute(
            "UPDATE lanes SET members = members - 1; \
             UPDATE messages SET state = 'waiting' WHERE state = 'ready'",
        )
        .await
        .unwrap();
    let broken = support::broken_invariants(&cluster.sql, &cluster.schema).await;
    assert!(
        broken
            .iter()
            .any(|(rule, _)| rule.contains("has no active member")),
        "{broken:?}"
    );
    store.upkeep(T0).await.unwrap();
    assert!(
        support::broken_invariants(&cluster.sql, &cluster.schema)
            .await
            .is_empty()
    );
    assert_eq!(
        claim_all(&store, "q", 1_000, T0).await,
        1,
        "the key goes on"
    );
    store.close().await.unwrap();
    cluster.finish().await;
}
