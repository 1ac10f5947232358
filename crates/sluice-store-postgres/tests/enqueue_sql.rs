//! `sluice.enqueue` and `sluice.enqueue_bytes` (migration 2, docs/design/postgres-store.md §3.2):
//! an application enqueues in its own transaction, and the message exists if and only if that
//! transaction commits, with the rules the nodes apply (idempotency, lanes, limits, checks) and a
//! wake-up at commit.

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;
use std::time::Duration;

use sluice_core::clock::{Clock, SystemClock};
use sluice_core::message::{BodyKind, ClaimedMessage};
use sluice_core::queue::{MessageSchema, Ordering, QueueConfig};
use sluice_core::store::{AckParams, ClaimParams, QueuePutParams, Store};
use sluice_store_postgres::PgStore;
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

/// A node and an application's connection on a fresh schema.
struct Fixture {
    store: Arc<PgStore>,
    app: Client,
    url: String,
    schema: String,
}

impl Fixture {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let schema = support::fresh_schema();
        let store = Arc::new(
            PgStore::open(support::options(&url, &schema))
                .await
                .expect("the store opens"),
        );
        let (app, connection) = tokio_postgres::connect(&url, NoTls)
            .await
            .expect("the application connects");
        tokio::spawn(connection);
        Some(Self {
            store,
            app,
            url,
            schema,
        })
    }

    async fn queue(&self, name: &str, edit: impl FnOnce(&mut QueueConfig)) {
        let mut config = QueueConfig::defaults_for(name);
        edit(&mut config);
        self.store
            .queue_put(QueuePutParams {
                name: name.into(),
                config,
                now_ms: now(),
            })
            .await
            .expect("queue put");
    }

    /// `sluice.enqueue(...)` with the schema's name, as an application writes it.
    fn call(&self, arguments: &str) -> String {
        format!(
            "SELECT message_id, created FROM \"{}\".enqueue({arguments})",
            self.schema
        )
    }

    async fn claim(&self, queue: &str, max: usize) -> Vec<ClaimedMessage> {
        self.store
            .message_claim(ClaimParams {
                lane_runs: false,
                queue: queue.into(),
                max,
                lease_ms: Some(30_000),
                now_ms: now(),
            })
            .await
            .expect("claim")
            .messages
    }

    async fn drop(self) {
        self.store.close().await.unwrap();
        support::drop_schema(self.url, self.schema).await;
    }
}

fn now() -> i64 {
    SystemClock.now_ms()
}

/// The SQLSTATE of a failed statement.
fn sqlstate(error: &tokio_postgres::Error) -> String {
    error
        .code()
        .map(|code| code.code().to_owned())
        .unwrap_or_else(|| panic!("no SQLSTATE in {error}"))
}

#[tokio::test]
async fn a_committed_enqueue_is_delivered_with_everything_it_was_given() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture.queue("orders", |_| {}).await;
    let sql = fixture.call(
        "'orders', '{\"order_id\": 42}', id => 'order-42', key => 'c-7', priority => 3, \
         headers => '{\"source\": \"billing\"}'",
    );
    fixture.app.batch_execute("BEGIN").await.unwrap();
    let row = fixture.app.query_one(&sql, &[]).await.unwrap();
    let (id, created): (Uuid, bool) = (row.get(0), row.get(1));
    assert!(created);
    assert!(
        fixture.claim("orders", 10).await.is_empty(),
        "nothing is claimable before the application commits"
    );
    fixture.app.batch_execute("COMMIT").await.unwrap();

    let claimed = fixture.claim("orders", 10).await;
    assert_eq!(claimed.len(), 1);
    let message = &claimed[0];
    assert_eq!(message.message_id, id);
    assert_eq!(message.idempotency_key.as_deref(), Some("order-42"));
    assert_eq!(message.key.as_deref(), Some("c-7"));
    assert_eq!(message.priority, 3);
    assert_eq!(message.payload.body_kind, BodyKind::Json);
    let body: serde_json::Value = serde_json::from_slice(&message.payload.body_bytes).unwrap();
    assert_eq!(body, serde_json::json!({"order_id": 42}));
    assert_eq!(
        message.payload.headers.get("source").map(String::as_str),
        Some("billing")
    );

    // The same id within the window answers with the first message, as the API does.
    let again = fixture.app.query_one(&sql, &[]).await.unwrap();
    assert_eq!(
        (again.get::<_, Uuid>(0), again.get::<_, bool>(1)),
        (id, false)
    );
    fixture.drop().await;
}

#[tokio::test]
async fn a_rolled_back_enqueue_leaves_no_message_and_no_key() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture.queue("orders", |_| {}).await;
    let sql = fixture.call("'orders', '{\"n\": 1}', id => 'order-1'");
    fixture.app.batch_execute("BEGIN").await.unwrap();
    let first: Uuid = fixture.app.query_one(&sql, &[]).await.unwrap().get(0);
    fixture.app.batch_execute("ROLLBACK").await.unwrap();
    assert!(fixture.claim("orders", 10).await.is_empty());

    let row = fixture.app.query_one(&sql, &[]).await.unwrap();
    assert!(row.get::<_, bool>(1), "the key is free after a rollback");
    assert_ne!(row.get::<_, Uuid>(0), first);
    assert_eq!(fixture.claim("orders", 10).await.len(), 1);
    fixture.drop().await;
}

#[tokio::test]
async fn the_commit_wakes_a_waiting_node() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture.queue("orders", |_| {}).await;
    // The node's listener is connected once its definitions counter has moved.
    let mut connected = fixture.store.definitions_changed();
    tokio::time::timeout(
        Duration::from_secs(10),
        connected.wait_for(|count| *count > 0),
    )
    .await
    .expect("the listener connects")
    .unwrap();
    let signal = fixture.store.notifier().queue("orders");
    let mut woken = std::pin::pin!(signal.notified());
    woken.as_mut().enable();
    fixture
        .app
        .query_one(&fixture.call("'orders', '{}'"), &[])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(1), woken)
        .await
        .expect("the node's waiter is woken within a second of the commit");
    assert_eq!(fixture.claim("orders", 1).await.len(), 1);
    fixture.drop().await;
}

#[tokio::test]
async fn a_key_waits_behind_its_lane_head_whoever_enqueued_it() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture
        .queue("accounts", |config| config.ordering = Ordering::PerKey)
        .await;
    for n in 1..=2 {
        fixture
            .app
            .query_one(
                &fixture.call(&format!("'accounts', '{{\"n\": {n}}}', key => 'acct-1'")),
                &[],
            )
            .await
            .unwrap();
    }
    let first = fixture.claim("accounts", 10).await;
    assert_eq!(first.len(), 1, "one message of a key in flight");
    assert_eq!(first[0].payload.body_bytes, br#"{"n": 1}"#);
    let acked = fixture
        .store
        .message_ack(AckParams {
            queue: "accounts".into(),
            receipts: vec![first[0].receipt],
            result: None,
            delivery: None,
            now_ms: now(),
        })
        .await
        .unwrap();
    assert!(acked[0].is_ok());
    let second = fixture.claim("accounts", 10).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].payload.body_bytes, br#"{"n": 2}"#);
    fixture.drop().await;
}

#[tokio::test]
async fn bytes_are_delivered_as_bytes() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture.queue("blobs", |_| {}).await;
    let body: Vec<u8> = vec![0, 159, 146, 150, 255];
    let sql = format!(
        "SELECT created FROM \"{}\".enqueue_bytes('blobs', $1)",
        fixture.schema
    );
    let row = fixture.app.query_one(&sql, &[&body]).await.unwrap();
    assert!(row.get::<_, bool>(0));
    let claimed = fixture.claim("blobs", 1).await;
    assert_eq!(claimed[0].payload.body_kind, BodyKind::Bytes);
    assert_eq!(claimed[0].payload.body_bytes, body);
    fixture.drop().await;
}

#[tokio::test]
async fn what_the_api_refuses_is_refused_with_a_sqlstate_of_its_own() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture
        .queue("small", |config| {
            config.max_message_bytes = 16;
            config.max_depth = Some(1);
        })
        .await;
    fixture
        .queue("checked", |config| {
            config.schema = Some(Arc::new(
                MessageSchema::compile(serde_json::json!({"type": "object"})).expect("a schema"),
            ));
        })
        .await;
    let refused = |arguments: &'static str| {
        let sql = fixture.call(arguments);
        let app = &fixture.app;
        async move {
            let error = app.query_one(&sql, &[]).await.expect_err(arguments);
            let message = error
                .as_db_error()
                .map_or_else(|| error.to_string(), |db| db.message().to_owned());
            (sqlstate(&error), message)
        }
    };
    let (state, text) = refused("'nowhere', '{}'").await;
    assert_eq!(state, "SLQ01", "{text}");
    let (state, text) = refused("'small', '{\"this\": \"is longer than sixteen bytes\"}'").await;
    assert_eq!(state, "SLQ03", "{text}");
    assert!(text.contains("accepts at most 16"), "{text}");
    for arguments in [
        "'small', '{}', id => ''",
        "'small', '{}', delay_ms => -1",
        "'small', '{}', headers => '{\"n\": 1}'",
        "'small', '{}', headers => '[]'",
        "'checked', '{}'",
    ] {
        let (state, text) = refused(arguments).await;
        assert_eq!(state, "SLQ03", "{arguments}: {text}");
    }
    // A body checked by the application passes on a queue with a schema.
    fixture
        .app
        .query_one(
            &fixture.call("'checked', '{}', schema_checked => true"),
            &[],
        )
        .await
        .unwrap();
    fixture
        .app
        .query_one(&fixture.call("'small', '{}'"), &[])
        .await
        .unwrap();
    let (state, text) = refused("'small', '{}'").await;
    assert_eq!(state, "SLQ02", "max_depth 1 is reached: {text}");
    fixture.drop().await;
}

/// An application role with nothing but USAGE on the schema and EXECUTE on the function can
/// enqueue, and cannot reach the store's tables directly.
#[tokio::test]
async fn an_application_role_needs_only_execute() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture.queue("orders", |_| {}).await;
    let role = format!("{}_app", fixture.schema);
    let schema = &fixture.schema;
    fixture
        .app
        .batch_execute(&format!(
            "CREATE ROLE \"{role}\";
             GRANT USAGE ON SCHEMA \"{schema}\" TO \"{role}\";
             GRANT EXECUTE ON FUNCTION \"{schema}\".enqueue(text, jsonb, text, text, integer, bigint, jsonb, boolean) TO \"{role}\";"
        ))
        .await
        .unwrap();
    let as_app = fixture
        .app
        .batch_execute(&format!(
            "SET ROLE \"{role}\";
             SELECT * FROM \"{schema}\".enqueue('orders', '{{\"n\": 1}}');"
        ))
        .await;
    let direct = fixture
        .app
        .batch_execute(&format!("SELECT count(*) FROM \"{schema}\".messages"))
        .await;
    let bytes_call = fixture
        .app
        .batch_execute(&format!(
            "SELECT * FROM \"{schema}\".enqueue_bytes('orders', '\\x00'::bytea)"
        ))
        .await;
    fixture
        .app
        .batch_execute(&format!(
            "RESET ROLE; DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\";"
        ))
        .await
        .unwrap();
    as_app.expect("the application role enqueues through the function");
    assert_eq!(
        sqlstate(&direct.expect_err("no access to the tables")),
        "42501"
    );
    assert_eq!(
        sqlstate(&bytes_call.expect_err("no EXECUTE on enqueue_bytes")),
        "42501"
    );
    assert_eq!(fixture.claim("orders", 10).await.len(), 1);
    fixture.drop().await;
}

/// A delay of two years is taken (up to 100, as the API), and the message keeps its retention
/// for when it becomes visible: a queue keeping messages one minute does not expire it now.
#[tokio::test]
async fn a_far_delay_is_taken_and_retention_waits_for_it() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    fixture
        .queue("later", |config| config.max_age_ms = 60_000)
        .await;
    const TWO_YEARS_MS: i64 = 2 * 365 * 24 * 60 * 60 * 1000;
    let row = fixture
        .app
        .query_one(
            &fixture.call(&format!("'later', '{{}}', delay_ms => {TWO_YEARS_MS}")),
            &[],
        )
        .await
        .expect("a two-year delay");
    let id: Uuid = row.get(0);
    let error = fixture
        .app
        .query_one(
            &fixture.call(&format!(
                "'later', '{{}}', delay_ms => {}",
                101 * TWO_YEARS_MS / 2
            )),
            &[],
        )
        .await
        .expect_err("past 100 years");
    assert_eq!(sqlstate(&error), "SLQ03");
    // An hour on, retention (one minute) has not taken it: it counts from two years ahead.
    fixture.store.maintain(now() + 3_600_000).await.unwrap();
    let status = fixture
        .store
        .message_get(sluice_core::store::MessageGetParams {
            queue: "later".into(),
            by: sluice_core::store::MessageRef::Id(id),
            now_ms: now() + 3_600_000,
        })
        .await
        .unwrap()
        .expect("known");
    assert_eq!(status.state, sluice_core::message::MessageState::Delayed);
    fixture.drop().await;
}
