//! The planner's choices on the message path (docs/design/postgres-store.md §2.3, §4.3).
//!
//! A prepared statement keeps a generic plan, and a new schema's tables look empty to the
//! planner until their first `ANALYZE`. With every table "empty", a claim's lease change once
//! found each picked row through the queue's `messages_ready` index, which the statement's
//! repeated `state = 'ready'` made usable but whose leading columns it did not fix: a scan of
//! the whole index per row, milliseconds per claim under load. These tests pin the two fixes:
//! the lease changes find their rows by primary key whatever the statistics say, and the
//! leader's upkeep analyzes a table that grew past what its statistics describe. Kept acked
//! messages (migration 6) are browsed, searched and cleaned up through their partial indexes.

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::message::{NewMessage, Payload};
use sluice_core::queue::QueueConfig;
use sluice_core::store::{AckedSearch, EnqueueParams, QueuePutParams, Store};
use sluice_store_postgres::{PgStore, statements};
use tokio_postgres::Client;

const T0: i64 = 1_700_000_000_000;

async fn fresh_store(url: &str, schema: &str) -> Arc<PgStore> {
    let store = Arc::new(
        PgStore::open(support::options(url, schema))
            .await
            .expect("the store opens"),
    );
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config: QueueConfig::defaults_for("q"),
            now_ms: T0,
        })
        .await
        .expect("queue put");
    store
}

/// The text plan of `sql` run with `args` as a generic plan (what a pooled connection keeps).
async fn generic_plan(sql: &Client, schema: &str, statement: &str, args: &str) -> String {
    sql.batch_execute(&format!(
        "SET search_path = \"{schema}\"; SET plan_cache_mode = force_generic_plan; \
         DEALLOCATE ALL; PREPARE probe AS {statement}"
    ))
    .await
    .expect("the statement prepares");
    let rows = sql
        .query(&format!("EXPLAIN EXECUTE probe({args})"), &[])
        .await
        .expect("explain");
    rows.iter()
        .map(|row| row.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn lease_changes_find_their_rows_by_primary_key_before_any_statistics() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let store = fresh_store(&url, &schema).await;
    let sql = support::connect(&url).await.expect("the test database");
    let analyzed: Option<i64> = sql
        .query_one(
            "SELECT analyze_count + autoanalyze_count FROM pg_stat_user_tables \
             WHERE schemaname = $1 AND relname = 'messages'",
            &[&schema],
        )
        .await
        .expect("the table's statistics")
        .get(0);
    assert_eq!(analyzed, Some(0), "the table must not have statistics yet");

    let cases = [
        ("the claim", statements::claim(), "1, 10, 0, 1000"),
        ("due delays", statements::ready_due(), "1, 0, 1000"),
        (
            "expired leases",
            statements::leases_expired(),
            "1, 0, 1000, 5, true, 'expired'",
        ),
    ];
    for (what, statement, args) in cases {
        let plan = generic_plan(&sql, &schema, statement, args).await;
        let changed = plan
            .lines()
            .filter(|line| line.contains("Scan") && line.contains(" on messages"))
            .filter(|line| !line.contains("messages_"))
            .count();
        assert!(
            plan.contains("Index Scan using messages_pkey on messages"),
            "{what}: the changed rows are not found by primary key:\n{plan}"
        );
        assert_eq!(changed, 0, "{what}: a scan without an index:\n{plan}");
        for partial in ["messages_ready", "messages_delayed", "messages_leased"] {
            let scans = plan
                .matches(&format!("using {partial} on messages"))
                .count();
            assert!(
                scans <= 1,
                "{what}: {partial} scanned {scans} times (once to pick the rows at most):\n{plan}"
            );
        }
    }
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}

#[tokio::test]
async fn the_leaders_upkeep_analyzes_a_table_that_grew() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let store = fresh_store(&url, &schema).await;
    let sql = support::connect(&url).await.expect("the test database");
    let messages = (0..3_000)
        .map(|i| NewMessage {
            idempotency_key: None,
            payload: Arc::new(Payload {
                body_bytes: format!("\"{i}\"").into_bytes(),
                ..Payload::default()
            }),
            key: None,
            priority: 0,
            visible_at_ms: T0,
            dead_letter: None,
        })
        .collect();
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages,
            now_ms: T0,
        })
        .await
        .expect("enqueue");

    // A backend reports its changes to the statistics a little after its transaction (at most
    // ~10 s later when it goes idle), so the upkeep is run until it sees them.
    let started = Instant::now();
    // The depth count, and the statistics with it, are due once a second of the given time.
    let mut now_ms = T0;
    let reltuples = loop {
        now_ms += 1_000;
        store.upkeep(now_ms).await.expect("upkeep");
        let row = sql
            .query_one(
                "SELECT s.analyze_count, c.reltuples::bigint \
                 FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid \
                 WHERE s.schemaname = $1 AND s.relname = 'messages'",
                &[&schema],
            )
            .await
            .expect("the table's statistics");
        if row.get::<_, i64>(0) > 0 {
            break row.get::<_, i64>(1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the upkeep never analyzed the messages table"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(reltuples, 3_000, "the statistics count the rows");

    // Once they describe the table, the upkeep leaves it alone.
    store.upkeep(now_ms + 1_000).await.expect("upkeep");
    let count: i64 = sql
        .query_one(
            "SELECT analyze_count FROM pg_stat_user_tables \
             WHERE schemaname = $1 AND relname = 'messages'",
            &[&schema],
        )
        .await
        .expect("the table's statistics")
        .get(0);
    assert_eq!(count, 1, "analyzed again without new changes");
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}

/// Each shape of an acked browse walks the index its conditions fix, newest first, and the
/// cleanup finds ended keeps by `messages_kept_until`, before any statistics: no scan of the
/// table, whose final records may far outnumber the kept ones.
#[tokio::test]
async fn kept_acked_messages_are_read_and_cleaned_up_through_their_indexes() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let store = fresh_store(&url, &schema).await;
    let sql = support::connect(&url).await.expect("the test database");
    let page_args = "1, 0, -9223372036854775808, 9223372036854775807, \
                     9223372036854775807, 9223372036854775807, 11";
    let key = || Some("k".to_owned());
    let cases = [
        ("a page", AckedSearch::default(), "", "messages_kept"),
        (
            "by ordering key",
            AckedSearch {
                key: key(),
                ..AckedSearch::default()
            },
            ", 'k'",
            "messages_kept_key",
        ),
        (
            "by idempotency key",
            AckedSearch {
                idempotency_key: key(),
                ..AckedSearch::default()
            },
            ", 'k'",
            "messages_kept_idempotency",
        ),
        (
            "by message id",
            AckedSearch {
                message_id: Some(uuid::Uuid::nil()),
                ..AckedSearch::default()
            },
            ", 5, '00000000-0000-0000-0000-000000000000'",
            "messages_pkey",
        ),
    ];
    for (what, search, extra, index) in cases {
        let statement = statements::acked_page(&search);
        let plan = generic_plan(&sql, &schema, &statement, &format!("{page_args}{extra}")).await;
        assert!(
            plan.contains(&format!("using {index} on messages")),
            "{what}: not through {index}:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan on messages"),
            "{what}: a scan of the table:\n{plan}"
        );
        // A page comes in the index's order; one message by id needs no order.
        assert!(
            index == "messages_pkey" || !plan.contains("Sort"),
            "{what}: a sort:\n{plan}"
        );
    }
    let plan = generic_plan(&sql, &schema, statements::keeps_ended(), "0, 0, 5000").await;
    assert!(
        plan.contains("using messages_kept_until on messages"),
        "ended keeps are not found by their index:\n{plan}"
    );
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}
