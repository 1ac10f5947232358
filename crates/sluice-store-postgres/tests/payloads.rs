//! What a message's way through the store writes. Its body and headers live in `payloads`,
//! apart from the `messages` row that every lease change and ack writes again (migration 3,
//! docs/design/postgres-store.md §1.2), and without `acked_retention_ms` an ack deletes the row.
//!
//! PostgreSQL moves a value out of line only from rows over about 2 KB, whatever the table's
//! `toast_tuple_target`, so a 1 KiB body kept in `messages` was copied into a new row version,
//! and into the WAL, by the claim and again by the ack. These tests pin where bodies are now,
//! and that a schema migrated from version 2 keeps every live message's body.
//!
//! A queue with `keep_acked_ms` keeps an acked message's row and payload (migration 6) until
//! its keep ends, with or without `acked_retention_ms`; the cleanup then deletes the payload,
//! and the row once it is past the retention of final records too.

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;

use sluice_core::message::{ClaimedMessage, NewMessage, Payload, Receipt};
use sluice_core::queue::QueueConfig;
use sluice_core::store::LeaseError;
use sluice_core::store::{
    AckParams, ClaimParams, EnqueueParams, MessageGetParams, MessageRef, QueuePutParams, Store,
};
use sluice_store_postgres::migrate::migrate;
use sluice_store_postgres::{PgOptions, PgStore};
use tokio_postgres::Client;

const T0: i64 = 1_700_000_000_000;

fn message(body: &str) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: body.as_bytes().to_vec(),
            headers: [("origin".to_owned(), "test".to_owned())].into(),
            ..Payload::default()
        }),
        key: None,
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

/// A JSON string of `bytes` bytes.
fn body_of(bytes: usize, fill: char) -> String {
    format!("\"{}\"", fill.to_string().repeat(bytes - 2))
}

async fn open_with_queue(url: &str, schema: &str) -> PgStore {
    open_with_queue_as(support::options(url, schema)).await
}

async fn open_with_queue_as(options: PgOptions) -> PgStore {
    open_with_config(options, QueueConfig::defaults_for("q")).await
}

async fn open_with_config(options: PgOptions, config: QueueConfig) -> PgStore {
    let store = PgStore::open(options).await.expect("the store opens");
    store
        .queue_put(QueuePutParams {
            name: "q".into(),
            config,
            now_ms: T0,
        })
        .await
        .expect("queue put");
    store
}

/// Leases up to 10 messages of "q".
async fn claim(store: &PgStore) -> Vec<ClaimedMessage> {
    store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "q".into(),
            max: 10,
            lease_ms: Some(60_000),
            now_ms: T0,
        })
        .await
        .expect("claim")
        .messages
}

/// Acks one receipt of "q"; its answer.
async fn ack(store: &PgStore, receipt: Receipt) -> Vec<Result<(), LeaseError>> {
    store
        .message_ack(AckParams {
            queue: "q".into(),
            receipts: vec![receipt],
            result: None,
            delivery: None,
            now_ms: T0,
        })
        .await
        .expect("ack")
}

/// The sizes of the `messages` row of every message, and how many payload rows there are.
async fn row_sizes(sql: &Client, schema: &str) -> (Vec<i32>, i64) {
    sql.batch_execute(&format!("SET search_path = \"{schema}\""))
        .await
        .expect("the test schema");
    let sizes = sql
        .query(
            "SELECT pg_column_size(m.*) FROM messages m ORDER BY seq",
            &[],
        )
        .await
        .expect("the rows")
        .iter()
        .map(|row| row.get(0))
        .collect();
    let payloads = sql
        .query_one("SELECT count(*) FROM payloads", &[])
        .await
        .expect("the payloads")
        .get(0);
    (sizes, payloads)
}

#[tokio::test]
async fn a_lease_and_an_ack_write_no_body_and_the_ack_drops_it() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let store = open_with_queue(&url, &schema).await;
    let sql = support::connect(&url).await.expect("the test database");
    let body = body_of(1024, 'b');
    let enqueued = store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: vec![message(&body)],
            now_ms: T0,
        })
        .await
        .expect("enqueue");

    let claimed = claim(&store).await;
    assert_eq!(claimed.len(), 1);
    let claimed = &claimed[0];
    assert_eq!(
        claimed.payload.body_bytes,
        body.as_bytes(),
        "the claim reads the body"
    );
    assert_eq!(
        claimed.payload.headers.get("origin").map(String::as_str),
        Some("test")
    );
    let (sizes, payloads) = row_sizes(&sql, &schema).await;
    assert_eq!(payloads, 1);
    assert!(
        sizes[0] < 512,
        "a leased row of a 1 KiB body is {} bytes: the lease copied the body",
        sizes[0]
    );

    let acked = ack(&store, claimed.receipt).await;
    assert!(acked[0].is_ok());
    let (sizes, payloads) = row_sizes(&sql, &schema).await;
    assert_eq!(
        (sizes.len(), payloads),
        (1, 0),
        "the record stays, its body goes"
    );
    let record = store
        .message_body(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(enqueued[0].message_id),
            now_ms: T0,
        })
        .await
        .expect("lookup")
        .expect("the acked record");
    assert!(record.payload.is_none(), "an acked message has no body");
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}

#[tokio::test]
async fn without_retention_an_ack_deletes_the_message() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let mut options = support::options(&url, &schema);
    options.acked_retention_ms = 0;
    let store = open_with_queue_as(options).await;
    let sql = support::connect(&url).await.expect("the test database");
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: vec![message("\"a\""), message("\"b\"")],
            now_ms: T0,
        })
        .await
        .expect("enqueue");
    let claimed = claim(&store).await;
    let acked = ack(&store, claimed[0].receipt).await;
    assert!(acked[0].is_ok());
    let (sizes, payloads) = row_sizes(&sql, &schema).await;
    assert_eq!(
        (sizes.len(), payloads),
        (1, 1),
        "the acked message left, the other stays"
    );
    let again = ack(&store, claimed[0].receipt).await;
    assert_eq!(
        again[0],
        Err(LeaseError::Stale),
        "a second ack finds nothing to ack"
    );
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}

#[tokio::test]
async fn migrating_from_version_2_moves_every_body_to_payloads() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    // The queue's rows as this build writes them, from a schema of its own.
    let model = support::fresh_schema();
    open_with_queue(&url, &model)
        .await
        .close()
        .await
        .expect("close");
    let schema = support::fresh_schema();
    let sql = support::connect(&url).await.expect("the test database");
    // Version 2 as an older sluice left it: its migrations and their records, applied here
    // the way `migrate` applies them, and two messages stored by its `enqueue`.
    sql.batch_execute(&format!(
        "CREATE SCHEMA \"{schema}\"; SET search_path = \"{schema}\"; BEGIN; {}; {}; {}; \
         INSERT INTO schema_migrations (version, applied_by) VALUES (1, 'test'), (2, 'test'); \
         COMMIT; \
         INSERT INTO queues OVERRIDING SYSTEM VALUE SELECT * FROM \"{model}\".queues; \
         INSERT INTO queue_state SELECT * FROM \"{model}\".queue_state; \
         SELECT enqueue('q', '\"one\"', headers => '{{\"origin\": \"v2\"}}'); \
         SELECT enqueue('q', '\"two\"');",
        include_str!("../migrations/0001_initial.sql"),
        include_str!("../migrations/0001_functions.sql"),
        include_str!("../migrations/0002_enqueue.sql"),
    ))
    .await
    .expect("version 2 applies and stores messages");
    support::drop_schema(url.clone(), model).await;

    let migrated = migrate(&support::options(&url, &schema))
        .await
        .expect("migrates");
    assert_eq!(migrated.from_version, 2);
    assert!(migrated.applied.contains(&3));
    let store = PgStore::open(support::options(&url, &schema))
        .await
        .expect("the store opens");
    let mut bodies: Vec<(String, Option<String>)> = claim(&store)
        .await
        .iter()
        .map(|m| {
            (
                String::from_utf8(m.payload.body_bytes.clone()).unwrap(),
                m.payload.headers.get("origin").cloned(),
            )
        })
        .collect();
    bodies.sort();
    assert_eq!(
        bodies,
        [
            ("\"one\"".to_owned(), Some("v2".to_owned())),
            ("\"two\"".to_owned(), None)
        ]
    );
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}

/// The body of message `id` of "q" as a read at `now_ms` finds it.
async fn body_at(store: &PgStore, id: uuid::Uuid, now_ms: i64) -> Option<Vec<u8>> {
    store
        .message_body(MessageGetParams {
            queue: "q".into(),
            by: MessageRef::Id(id),
            now_ms,
        })
        .await
        .expect("lookup")
        .and_then(|found| found.payload)
        .map(|payload| payload.body_bytes)
}

/// How many `messages` rows and `payloads` rows there are, and the kept rows' `kept_until_ms`.
async fn kept_rows(sql: &Client, schema: &str) -> (i64, i64, Vec<i64>) {
    let (sizes, payloads) = row_sizes(sql, schema).await;
    let kept = sql
        .query(
            "SELECT kept_until_ms FROM messages WHERE kept_until_ms IS NOT NULL ORDER BY seq",
            &[],
        )
        .await
        .expect("the kept rows")
        .iter()
        .map(|row| row.get(0))
        .collect();
    (sizes.len() as i64, payloads, kept)
}

/// An ack in a queue with `keep_acked_ms` keeps the row and its payload, with
/// `kept_until_ms` = ack time + keep, also where acks otherwise delete rows (no
/// `acked_retention_ms`). From `kept_until_ms` on no read finds the body, before any cleanup;
/// the cleanup then deletes the payload and the row once past the records' retention too.
#[tokio::test]
async fn a_kept_message_keeps_its_payload_until_the_keep_ends() {
    const KEEP_MS: i64 = 60_000;
    /// The cleanup runs at most every 10 s of the given time.
    const CLEANUP_EVERY_MS: i64 = 10_000;
    for retention_ms in [0, 3_600_000] {
        let Some(url) = support::database_url_or_skip().await else {
            return;
        };
        let schema = support::fresh_schema();
        let mut options = support::options(&url, &schema);
        options.acked_retention_ms = retention_ms;
        let mut config = QueueConfig::defaults_for("q");
        config.keep_acked_ms = KEEP_MS;
        let store = open_with_config(options, config).await;
        let sql = support::connect(&url).await.expect("the test database");
        let enqueued = store
            .message_enqueue(EnqueueParams {
                queue: "q".into(),
                messages: vec![message("\"kept\""), message("\"live\"")],
                now_ms: T0,
            })
            .await
            .expect("enqueue");
        let kept = enqueued[0].message_id;
        let claimed = claim(&store).await;
        let receipt = claimed
            .iter()
            .find(|m| m.message_id == kept)
            .expect("claimed")
            .receipt;
        assert!(ack(&store, receipt).await[0].is_ok());
        assert_eq!(
            kept_rows(&sql, &schema).await,
            (2, 2, vec![T0 + KEEP_MS]),
            "retention {retention_ms}: the acked row keeps its payload until ack + keep"
        );
        assert_eq!(
            body_at(&store, kept, T0 + KEEP_MS - 1).await.as_deref(),
            Some(&b"\"kept\""[..])
        );
        assert_eq!(
            body_at(&store, kept, T0 + KEEP_MS).await,
            None,
            "retention {retention_ms}: no body from the keep's end, before any cleanup"
        );

        // A cleanup before the keep's end leaves it.
        store.upkeep(T0 + KEEP_MS - 1).await.expect("upkeep");
        assert_eq!(kept_rows(&sql, &schema).await, (2, 2, vec![T0 + KEEP_MS]));
        // The next one, past the keep, drops the body; the row follows the retention.
        let now = T0 + KEEP_MS - 1 + CLEANUP_EVERY_MS;
        store.upkeep(now).await.expect("upkeep");
        if retention_ms == 0 {
            assert_eq!(kept_rows(&sql, &schema).await, (1, 1, vec![]), "gone");
        } else {
            assert_eq!(
                kept_rows(&sql, &schema).await,
                (2, 1, vec![]),
                "an ordinary acked record now"
            );
            let status = store
                .message_get(MessageGetParams {
                    queue: "q".into(),
                    by: MessageRef::Id(kept),
                    now_ms: now,
                })
                .await
                .expect("lookup")
                .expect("the record");
            assert_eq!(status.kept_until_ms, None);
            assert_eq!(status.acked_at_ms, Some(T0));
            store
                .upkeep(T0 + retention_ms + CLEANUP_EVERY_MS)
                .await
                .expect("upkeep");
            assert_eq!(
                kept_rows(&sql, &schema).await,
                (1, 1, vec![]),
                "gone after the retention"
            );
        }
        store.close().await.expect("close");
        support::check_and_drop(url, schema).await;
    }
}

/// Kept messages of a queue deleted beyond `queue_delete`'s first chunk go with the cleanup's
/// rows of deleted queues, not when their keep ends.
#[tokio::test]
async fn kept_messages_of_a_deleted_queue_go_with_the_cleanup() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let mut config = QueueConfig::defaults_for("q");
    config.keep_acked_ms = 3_600_000;
    let store = open_with_config(support::options(&url, &schema), config).await;
    let sql = support::connect(&url).await.expect("the test database");
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: vec![message("\"a\""), message("\"b\"")],
            now_ms: T0,
        })
        .await
        .expect("enqueue");
    for claimed in claim(&store).await {
        assert!(ack(&store, claimed.receipt).await[0].is_ok());
    }
    assert_eq!(kept_rows(&sql, &schema).await.1, 2);
    // As `queue_delete` leaves a queue whose rows outnumber its first chunk.
    sql.batch_execute("DELETE FROM queues WHERE name = 'q'")
        .await
        .expect("the queue goes");
    store.upkeep(T0 + 1_000).await.expect("upkeep");
    assert_eq!(kept_rows(&sql, &schema).await, (0, 0, vec![]));
    store.close().await.expect("close");
    support::check_and_drop(url, schema).await;
}
