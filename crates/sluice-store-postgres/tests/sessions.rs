//! Dashboard sessions in the database (docs/design/postgres-store.md §2.13): every rule of
//! `sluice_store_tests::sessions::check`, and what only a shared table gives: a session started
//! on one node is found and ended from another, the caps hold for the nodes together, and
//! expired sessions are deleted.

use crate::support;

use std::sync::Arc;

use sluice_core::store::Store;
use sluice_core::store::sessions::{NewSession, SessionLimits, SessionStartError, SessionStore};
use sluice_store_postgres::PgStore;

const T0: i64 = 1_700_000_000_000;
const HOUR_MS: i64 = 60 * 60 * 1000;

/// Two nodes on a fresh schema.
struct Nodes {
    a: PgStore,
    b: PgStore,
    url: String,
    schema: String,
}

impl Nodes {
    async fn new() -> Option<Self> {
        let url = support::database_url_or_skip().await?;
        let schema = support::fresh_schema();
        let a = PgStore::open(support::options(&url, &schema))
            .await
            .expect("the store opens");
        let b = PgStore::open(support::options(&url, &schema))
            .await
            .expect("the store opens");
        Some(Self { a, b, url, schema })
    }

    fn sessions(store: &PgStore) -> Arc<dyn SessionStore> {
        store.session_store().expect("the store shares sessions")
    }

    async fn count(&self) -> i64 {
        let client = support::connect(&self.url).await.unwrap();
        client
            .query_one(
                &format!("SELECT count(*) FROM \"{}\".sessions", self.schema),
                &[],
            )
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

fn session(id: u8, token: u8, now_ms: i64) -> NewSession {
    NewSession {
        id_digest: [id; 32],
        token_digest: [token; 32],
        now_ms,
        expires_at_ms: now_ms + HOUR_MS,
    }
}

#[tokio::test]
async fn sessions_keep_every_rule() {
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    sluice_store_tests::sessions::check(Nodes::sessions(&nodes.a).as_ref()).await;
    nodes.drop().await;
}

#[tokio::test]
async fn a_session_started_on_one_node_is_found_and_ended_from_another() {
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    let (a, b) = (Nodes::sessions(&nodes.a), Nodes::sessions(&nodes.b));
    let limits = SessionLimits {
        per_token: 2,
        max: 3,
    };
    a.start(session(1, 7, T0), limits).await.unwrap();
    assert_eq!(
        b.token_digest([1; 32], T0 + 1).await.unwrap(),
        Some([7; 32]),
        "node b finds node a's session"
    );
    b.end([1; 32]).await.unwrap();
    assert_eq!(
        a.token_digest([1; 32], T0 + 2).await.unwrap(),
        None,
        "a logout on node b ends the session on node a"
    );

    // The caps count both nodes' sessions: per token ...
    a.start(session(2, 7, T0 + 10), limits).await.unwrap();
    b.start(session(3, 7, T0 + 11), limits).await.unwrap();
    b.start(session(4, 7, T0 + 12), limits).await.unwrap();
    assert_eq!(a.token_digest([2; 32], T0 + 13).await.unwrap(), None);
    for id in [3, 4] {
        assert_eq!(
            a.token_digest([id; 32], T0 + 13).await.unwrap(),
            Some([7; 32]),
            "{id}"
        );
    }
    // ... and in all: 2 + 1 = 3 fills the table, whichever node the next login reaches.
    a.start(session(5, 8, T0 + 14), limits).await.unwrap();
    let refused = b.start(session(6, 9, T0 + 15), limits).await;
    assert!(
        matches!(refused, Err(SessionStartError::Full(3))),
        "{refused:?}"
    );
    nodes.drop().await;
}

#[tokio::test]
async fn logins_at_once_on_two_nodes_never_pass_the_cap() {
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    let limits = SessionLimits {
        per_token: 100,
        max: 10,
    };
    let mut logins = Vec::new();
    for n in 0..40u8 {
        let sessions = Nodes::sessions(if n % 2 == 0 { &nodes.a } else { &nodes.b });
        logins.push(tokio::spawn(async move {
            sessions.start(session(n, n, T0), limits).await
        }));
    }
    let mut started = 0;
    for login in logins {
        match login.await.unwrap() {
            Ok(()) => started += 1,
            Err(SessionStartError::Full(held)) => assert_eq!(held, 10),
            Err(error) => panic!("{error}"),
        }
    }
    assert_eq!(started, 10, "exactly the cap's logins started");
    assert_eq!(nodes.count().await, 10);
    nodes.drop().await;
}

#[tokio::test]
async fn expired_sessions_are_deleted_by_the_next_start() {
    let Some(nodes) = Nodes::new().await else {
        return;
    };
    let sessions = Nodes::sessions(&nodes.a);
    let limits = SessionLimits {
        per_token: 10,
        max: 10,
    };
    for id in 0..5 {
        sessions.start(session(id, id, T0), limits).await.unwrap();
    }
    assert_eq!(nodes.count().await, 5);
    // An hour later all five have expired: the next login deletes them.
    sessions
        .start(session(9, 9, T0 + HOUR_MS), limits)
        .await
        .unwrap();
    assert_eq!(nodes.count().await, 1);
    nodes.drop().await;
}
