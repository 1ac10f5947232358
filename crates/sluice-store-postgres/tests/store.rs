//! The PostgreSQL store's own tests, against the test database (see `support`): migrations
//! when several nodes start at once, queue and webhook definitions as the database holds them,
//! definitions changed on one node seen by another, and errors by meaning.

use crate::support;
use sluice_core::store::prelude::*;

use std::time::Duration;

use sluice_core::queue::{Ordering, QueueConfig};
use sluice_core::store::{
    BrowseQuery, BrowseState, DeadLetterQuery, DeadLetterSelection, MessageGetParams, MessageRef,
    QueuePut, QueuePutParams, ReplayParams, Store, StoreError,
};
use sluice_core::store::{DeadLetterFilter, PurgeScope};
use sluice_store_postgres::migrate::latest_version;
use sluice_store_postgres::{PgOptions, PgStore, error::classify, migrate};
use sluice_testkit::eventually;

const T0: i64 = 1_700_000_000_000;

/// A store on a fresh schema, and what drops the schema after the test.
struct Fixture {
    url: String,
    schema: String,
}

impl Fixture {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        Some(Self {
            url,
            schema: support::fresh_schema(),
        })
    }

    fn options(&self) -> PgOptions {
        support::options(&self.url, &self.schema)
    }

    async fn open(&self) -> PgStore {
        PgStore::open(self.options())
            .await
            .expect("the store opens")
    }

    async fn sql(&self) -> tokio_postgres::Client {
        support::connect(&self.url)
            .await
            .expect("the test database")
    }

    async fn drop(self) {
        support::drop_schema(self.url, self.schema).await;
    }
}

async fn put(store: &PgStore, name: &str, config: QueueConfig) -> Result<QueuePut, StoreError> {
    store
        .queue_put(QueuePutParams {
            name: name.into(),
            config,
            now_ms: T0,
        })
        .await
}

/// How long a change on one node may take to show on another.
const WAIT: Duration = Duration::from_secs(5);

/// Four nodes starting at the same moment on one new schema: all open, and migration 1 is
/// applied once (one `schema_migrations` row; a second application would also have failed on
/// its `CREATE TABLE`s). A later migrate finds nothing to do.
#[tokio::test]
async fn four_stores_opening_one_schema_at_once_apply_each_migration_once() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let opening: Vec<_> = (0..4)
        .map(|_| {
            let options = fixture.options();
            tokio::spawn(async move { PgStore::open(options).await })
        })
        .collect();
    let mut stores = Vec::new();
    for opened in opening {
        stores.push(opened.await.unwrap().expect("every node opens"));
    }
    let rows = fixture
        .sql()
        .await
        .query(
            &format!(
                "SELECT version, applied_by FROM \"{}\".schema_migrations",
                fixture.schema
            ),
            &[],
        )
        .await
        .unwrap();
    let versions: Vec<i32> = rows.iter().map(|row| row.get(0)).collect();
    let expected: Vec<i32> = (1..=latest_version()).collect();
    assert_eq!(versions, expected, "each migration applied once");
    assert!(rows[0].get::<_, String>(1).starts_with("sluice "));
    for store in &stores {
        assert!(store.queue_list(T0).await.unwrap().is_empty());
    }
    let again = migrate(&fixture.options()).await.unwrap();
    assert_eq!(
        (again.from_version, again.to_version),
        (latest_version(), latest_version())
    );
    assert!(again.applied.is_empty());
    for store in &stores {
        store.close().await.unwrap();
    }
    fixture.drop().await;
}

/// Migration 1's `message_id()` makes the ids the stores make in Rust (`stored::ids`), so a
/// message enqueued in SQL is found by the same lookup.
#[tokio::test]
async fn migration_1_makes_message_ids_as_the_stores_do() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    migrate(&fixture.options()).await.unwrap();
    let sql = fixture.sql().await;
    for (seq, at_ms) in [
        (1_i64, T0),
        (255, 0),
        (1 << 40, T0 + 999),
        ((1 << 62) - 1, 281_474_976_710_655),
    ] {
        let id: uuid::Uuid = sql
            .query_one(
                &format!("SELECT \"{}\".message_id($1, $2)", fixture.schema),
                &[&seq, &at_ms],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(id, sluice_core::stored::ids::encode(seq as u64, at_ms));
    }
    fixture.drop().await;
}

/// A schema a newer sluice migrated is refused, and so is an old one when the node may not
/// migrate it.
#[tokio::test]
async fn schemas_of_another_version_are_refused() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let mut options = fixture.options();
    options.migrate = false;
    let refused = PgStore::open(options.clone()).await.err().unwrap();
    assert!(refused.to_string().contains("sluice migrate"), "{refused}");
    migrate(&fixture.options()).await.unwrap();
    PgStore::open(options).await.unwrap().close().await.unwrap();
    fixture
        .sql()
        .await
        .execute(
            &format!(
                "INSERT INTO \"{}\".schema_migrations (version, applied_by) VALUES (99, 'future')",
                fixture.schema
            ),
            &[],
        )
        .await
        .unwrap();
    let refused = PgStore::open(fixture.options()).await.err().unwrap();
    assert!(
        refused
            .to_string()
            .contains("migrated by a newer sluice (version 99)"),
        "{refused}"
    );
    fixture.drop().await;
}

/// Queue definitions in the database: created with their dead-letter queue, read, listed,
/// updated (the row's version moves, so other nodes' caches can tell), refused an ordering
/// change while a message is live, counted from the message rows, and deleted.
#[tokio::test]
async fn queues_are_created_read_listed_updated_and_deleted() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let store = fixture.open().await;
    let sql = fixture.sql().await;
    let schema = &fixture.schema;
    let version = |name: &'static str| {
        let sql = &sql;
        async move {
            sql.query_one(
                &format!("SELECT config_version FROM \"{schema}\".queues WHERE name = $1"),
                &[&name],
            )
            .await
            .unwrap()
            .get::<_, i64>(0)
        }
    };

    let created = put(&store, "orders", QueueConfig::defaults_for("orders"))
        .await
        .unwrap();
    assert_eq!(
        created,
        QueuePut {
            created: true,
            dead_letter_created: true
        }
    );
    assert_eq!(version("orders").await, 1);
    let mut changed = QueueConfig::defaults_for("orders");
    changed.max_attempts = 9;
    assert!(
        !put(&store, "orders", changed.clone())
            .await
            .unwrap()
            .created
    );
    assert_eq!(version("orders").await, 2, "a change bumps the version");
    put(&store, "orders", changed.clone()).await.unwrap();
    assert_eq!(
        version("orders").await,
        2,
        "the same definition writes nothing"
    );
    assert_eq!(store.queue_config("orders").await.unwrap().max_attempts, 9);

    // A live message, as the message path stores it.
    sql.batch_execute(&format!(
        "INSERT INTO \"{schema}\".messages (seq, id, queue_id, state, priority, enqueued_at_ms, \
             visible_at_ms, body_kind) \
         SELECT 1, \"{schema}\".message_id(1, {T0}), id, 'ready', 0, {T0}, {T0}, 0 \
         FROM \"{schema}\".queues WHERE name = 'orders'"
    ))
    .await
    .unwrap();
    let info = store.queue_get("orders", T0 + 250).await.unwrap();
    assert_eq!(info.depth.ready, 1, "counted from the rows");
    assert_eq!(info.depth.oldest_ready_age_ms, Some(250));
    let mut per_key = changed.clone();
    per_key.ordering = Ordering::PerKey;
    let refused = put(&store, "orders", per_key).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(text)) if text.contains("while the queue holds 1 messages")),
        "{refused:?}"
    );
    assert_eq!(
        store.queue_config("orders").await.unwrap().ordering,
        Ordering::Unordered
    );

    let names: Vec<String> = store
        .queue_list(T0)
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.name)
        .collect();
    assert_eq!(names, ["orders", "orders.dlq"]);
    assert!(matches!(
        store.queue_delete("orders.dlq").await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.queue_delete("orders").await.unwrap(),
        1,
        "its live message"
    );
    assert!(matches!(
        store.queue_get("orders", T0).await,
        Err(StoreError::QueueNotFound(_))
    ));
    let left: i64 = sql
        .query_one(&format!("SELECT count(*) FROM \"{schema}\".messages"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "its messages went with it");
    store.queue_delete("orders.dlq").await.unwrap();
    store.close().await.unwrap();
    fixture.drop().await;
}

/// Two nodes on one schema: a definition one changes or deletes reaches the other's cache
/// through `<schema>.config`, with no restart.
#[tokio::test]
async fn a_definition_changed_on_one_node_reaches_the_other() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let a = fixture.open().await;
    let b = fixture.open().await;
    put(&a, "jobs", QueueConfig::defaults_for("jobs"))
        .await
        .unwrap();
    assert_eq!(
        a.queue_config("jobs").await.unwrap().max_attempts,
        5,
        "cached on a"
    );
    let mut changed = QueueConfig::defaults_for("jobs");
    changed.max_attempts = 2;
    put(&b, "jobs", changed).await.unwrap();
    eventually("a sees b's change", WAIT, || async {
        a.queue_config("jobs").await.unwrap().max_attempts == 2
    })
    .await;
    b.queue_delete("jobs").await.unwrap();
    eventually("a sees b's delete", WAIT, || async {
        matches!(
            a.queue_config("jobs").await,
            Err(StoreError::QueueNotFound(_))
        )
    })
    .await;
    a.close().await.unwrap();
    b.close().await.unwrap();
    fixture.drop().await;
}

/// A webhook endpoint defined on one node moves the other node's `definitions_changed`, and
/// the other node then finds the endpoint as defined, so its server serves it too.
#[tokio::test]
async fn a_webhook_defined_on_one_node_moves_the_others_definitions() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let a = fixture.open().await;
    let b = fixture.open().await;
    let mut changed = a.definitions_changed();
    // The listener moves it once connected; wait for that, then for b's change.
    eventually("a's listener is connected", WAIT, || {
        let moved = *changed.borrow() > 0;
        async move { moved }
    })
    .await;
    changed.mark_unchanged();
    b.webhook_put("github", r#"{"queue":"pushes"}"#.into(), T0)
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), changed.changed())
        .await
        .expect("moved within 5 s")
        .unwrap();
    // What a's server reloads when the counter moves.
    assert_eq!(
        a.webhook_list().await.unwrap(),
        [("github".to_owned(), r#"{"queue":"pushes"}"#.to_owned())],
        "a sees b's endpoint"
    );
    a.close().await.unwrap();
    b.close().await.unwrap();
    fixture.drop().await;
}

/// A push pause made on one node moves the other node's definitions counter (its server then
/// stops that queue's push workers) and is reported by the other node at once.
#[tokio::test]
async fn a_push_pause_on_one_node_moves_the_others_definitions() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let a = fixture.open().await;
    let b = fixture.open().await;
    put(&a, "q", QueueConfig::defaults_for("q")).await.unwrap();
    let mut changed = a.definitions_changed();
    eventually("a's listener is connected", WAIT, || {
        let moved = *changed.borrow() > 0;
        async move { moved }
    })
    .await;
    changed.mark_unchanged();
    b.queue_push_pause("q", true).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), changed.changed())
        .await
        .expect("moved within 5 s")
        .unwrap();
    assert!(a.queue_get("q", T0).await.unwrap().is_push_paused);
    a.close().await.unwrap();
    b.close().await.unwrap();
    fixture.drop().await;
}

/// Every connection of a node carries `application_name = sluice/<node name>`, so an operator
/// (and the multi-node tests) find a node's backends in `pg_stat_activity`.
#[tokio::test]
async fn a_nodes_connections_are_named_after_it() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let mut options = fixture.options();
    options.node_name = format!("n-{}", &fixture.schema[fixture.schema.len() - 12..]);
    let application_name = format!("sluice/{}", options.node_name);
    let store = PgStore::open(options).await.expect("the store opens");
    put(&store, "q", QueueConfig::defaults_for("q"))
        .await
        .unwrap();
    let sql = fixture.sql().await;
    eventually(
        "the pool's and the listener's connections are named",
        WAIT,
        || {
            let (sql, application_name) = (&sql, &application_name);
            async move {
                let named: i64 = sql
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                        &[application_name],
                    )
                    .await
                    .unwrap()
                    .get(0);
                named >= 2
            }
        },
    )
    .await;
    store.close().await.unwrap();
    fixture.drop().await;
}

/// Webhook definitions are kept in the database, and every change is announced on
/// `<schema>.config` as `webhook:<name>` when it commits, for the other nodes.
#[tokio::test]
async fn webhook_changes_are_kept_and_announced() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let store = fixture.open().await;
    let (listener, mut connection) = tokio_postgres::connect(&fixture.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let (sender, mut announced) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(tokio_postgres::AsyncMessage::Notification(notification))) => {
                    if sender
                        .send(notification.payload().to_owned())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            }
        }
    });
    listener
        .batch_execute(&format!("LISTEN \"{}.config\"", fixture.schema))
        .await
        .unwrap();
    store
        .webhook_put("github", r#"{"queue":"pushes"}"#.into(), T0)
        .await
        .unwrap();
    assert!(store.webhook_delete("github").await.unwrap());
    assert!(
        !store.webhook_delete("github").await.unwrap(),
        "nothing to announce"
    );
    store.webhook_put("stripe", "{}".into(), T0).await.unwrap();
    let mut payloads = Vec::new();
    for _ in 0..3 {
        let payload = tokio::time::timeout(Duration::from_secs(5), announced.recv())
            .await
            .expect("announced within 5 s")
            .unwrap();
        payloads.push(payload);
    }
    assert_eq!(
        payloads,
        ["webhook:github", "webhook:github", "webhook:stripe"]
    );
    assert_eq!(
        store.webhook_list().await.unwrap(),
        [("stripe".to_owned(), "{}".to_owned())]
    );
    store.close().await.unwrap();
    fixture.drop().await;
}

/// Operator calls refuse an unknown queue as every store does, and the dead-letter calls
/// refuse a queue without a dead-letter queue (`Conflict`, as the SQLite store answers).
#[tokio::test]
async fn operator_calls_refuse_unknown_queues_and_queues_without_dead_letters() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let store = fixture.open().await;
    let mut plain = QueueConfig::defaults_for("plain");
    plain.dead_letter_queue = None;
    put(&store, "plain", plain).await.unwrap();
    put(&store, "q", QueueConfig::defaults_for("q"))
        .await
        .unwrap();
    let browse = |queue: &str| BrowseQuery {
        queue: queue.into(),
        state: BrowseState::Ready,
        after: None,
        limit: 10,
        search: Default::default(),
        now_ms: T0,
    };
    let list = |queue: &str| DeadLetterQuery {
        queue: queue.into(),
        filter: DeadLetterFilter {
            source_queue: queue.into(),
            ..DeadLetterFilter::default()
        },
        before: None,
        limit: 10,
    };
    let replay = |queue: &str| ReplayParams {
        queue: queue.into(),
        selection: DeadLetterSelection::Ids(vec![uuid::Uuid::now_v7()]),
        limit: 10,
        dry_run: false,
        target_queue: None,
        now_ms: T0,
    };
    let cancel = MessageGetParams {
        queue: "nowhere".into(),
        by: MessageRef::Id(uuid::Uuid::now_v7()),
        now_ms: T0,
    };
    let not_found = |what: &str, error: Option<StoreError>| match error {
        Some(StoreError::QueueNotFound(name)) => assert_eq!(name, "nowhere", "{what}"),
        other => panic!("{what}: {other:?}"),
    };
    not_found(
        "browse",
        store.message_browse(browse("nowhere")).await.err(),
    );
    not_found("cancel", store.message_cancel(cancel, None).await.err());
    not_found(
        "purge",
        store
            .queue_purge("nowhere", PurgeScope::Waiting, T0)
            .await
            .err(),
    );
    not_found("list", store.dead_letter_list(list("nowhere")).await.err());
    not_found(
        "get",
        store
            .dead_letter_get("nowhere", uuid::Uuid::now_v7())
            .await
            .err(),
    );
    not_found(
        "replay",
        store.dead_letter_replay(replay("nowhere")).await.err(),
    );
    not_found(
        "delete",
        store
            .dead_letter_delete("nowhere", DeadLetterSelection::Ids(Vec::new()), T0)
            .await
            .err(),
    );
    let mut into_nowhere = replay("q");
    into_nowhere.target_queue = Some("nowhere".into());
    not_found(
        "replay into an unknown target",
        store.dead_letter_replay(into_nowhere).await.err(),
    );

    assert!(matches!(
        store.dead_letter_list(list("plain")).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store.dead_letter_replay(replay("plain")).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .dead_letter_delete("plain", DeadLetterSelection::Ids(Vec::new()), T0)
            .await,
        Err(StoreError::Conflict(_))
    ));

    store.close().await.unwrap();
    fixture.drop().await;
}

/// Once closed, every call is `Unavailable`, also those the cache could answer.
#[tokio::test]
async fn a_closed_store_is_unavailable() {
    let Some(fixture) = Fixture::new().await else {
        return;
    };
    let store = fixture.open().await;
    put(&store, "q", QueueConfig::defaults_for("q"))
        .await
        .unwrap();
    store.queue_config("q").await.unwrap();
    store.close().await.unwrap();
    assert!(matches!(
        store.queue_config("q").await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.queue_list(T0).await,
        Err(StoreError::Unavailable(_))
    ));
    assert!(matches!(
        store.webhook_list().await,
        Err(StoreError::Unavailable(_))
    ));
    fixture.drop().await;
}

/// A database that refuses the connection is `Unavailable` (503 with Retry-After), not an
/// internal error. Needs no database: the port is one just closed on loopback.
#[tokio::test]
async fn a_connection_refused_is_unavailable() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut options = PgOptions::new(
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        "sluice",
    );
    options.connect_timeout = Duration::from_secs(2);
    match PgStore::open(options).await {
        Err(StoreError::Unavailable(why)) => assert!(why.contains("refused"), "{why}"),
        Err(other) => panic!("expected Unavailable, got {other:?}"),
        Ok(_) => panic!("nothing listens on port {port}"),
    }
}

/// SQLSTATEs are sorted by meaning (docs/design/postgres-store.md §5.1), with the errors the
/// database itself raises.
#[tokio::test]
async fn database_errors_are_sorted_by_meaning() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let sql = support::connect(&url).await.unwrap();
    let raise = |code: &'static str| {
        let sql = &sql;
        async move {
            let error = sql
                .batch_execute(&format!(
                    "DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '{code}'; END $$"
                ))
                .await
                .expect_err("the block raises");
            classify(error)
        }
    };
    for code in [
        "08006", "57P01", "57P03", "53300", "25006", "58030", "40001", "40P01", "57014", "55P03",
    ] {
        let error = raise(code).await;
        assert!(
            matches!(&error, StoreError::Unavailable(text) if text.contains(code)),
            "{code}: {error:?}"
        );
    }
    assert!(matches!(raise("53100").await, StoreError::DiskFull(_)));
    for code in ["22012", "23505", "42P01"] {
        assert!(matches!(raise(code).await, StoreError::Other(_)), "{code}");
    }
}
