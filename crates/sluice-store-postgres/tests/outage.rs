//! Losing and regaining the database (docs/design/postgres-store.md §5.3): node A reaches the
//! database through a proxy the test cuts (`support::proxy`), node B directly. While the cut
//! lasts, A answers `Unavailable` at once for enqueue, claim and ack (never a success), says so
//! in `write_state`, and wakes its waiters so long polls end with the error; once healed, A
//! recovers without a restart: `write_state` is back, a receipt from before the cut acks,
//! what B stored meanwhile is claimed on A, and a wake-up sent by B reaches A again (its
//! listener `LISTEN`s once more).

use crate::support;
use sluice_core::store::prelude::*;

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::message::{NewMessage, Payload, Receipt};
use sluice_core::queue::QueueConfig;
use sluice_core::store::{
    AckParams, ClaimParams, EnqueueParams, QueuePutParams, Store, StoreError, WriteState,
};
use sluice_store_postgres::PgStore;
use sluice_testkit::eventually;
use support::proxy::PgProxy;

const T0: i64 = 1_700_000_000_000;
/// The longest a recovery may take: the reconnect backoff tops out at 5 s, jittered.
const RECOVERY: Duration = Duration::from_secs(15);

fn message(body: &str) -> NewMessage {
    NewMessage {
        idempotency_key: None,
        payload: Arc::new(Payload {
            body_bytes: body.as_bytes().to_vec(),
            ..Payload::default()
        }),
        key: None,
        priority: 0,
        visible_at_ms: T0,
        dead_letter: None,
    }
}

async fn enqueue(store: &PgStore, body: &str) -> Result<(), StoreError> {
    store
        .message_enqueue(EnqueueParams {
            queue: "q".into(),
            messages: vec![message(body)],
            now_ms: T0,
        })
        .await
        .map(drop)
}

async fn claim(store: &PgStore, max: usize) -> Result<Vec<(String, Receipt)>, StoreError> {
    let claim = store
        .message_claim(ClaimParams {
            lane_runs: false,
            queue: "q".into(),
            max,
            lease_ms: Some(60_000),
            now_ms: T0,
        })
        .await?;
    Ok(claim
        .messages
        .into_iter()
        .map(|m| {
            (
                String::from_utf8(m.payload.body_bytes.clone()).unwrap(),
                m.receipt,
            )
        })
        .collect())
}

async fn ack(store: &PgStore, receipt: Receipt) -> Result<(), StoreError> {
    let mut results = store
        .message_ack(AckParams {
            queue: "q".into(),
            receipts: vec![receipt],
            result: None,
            delivery: None,
            now_ms: T0,
        })
        .await?;
    assert!(results.remove(0).is_ok(), "the receipt acks");
    Ok(())
}

fn unavailable<T: std::fmt::Debug>(what: &str, result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{what} during the cut: {result:?}"
    );
}

/// `Unavailable` with the reason the store keeps for the outage: the call did not try the
/// database itself.
fn refused_by_the_outage<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, StoreError>,
    outage: &str,
) {
    match result {
        Err(StoreError::Unavailable(reason)) if reason == outage => {}
        other => panic!(
            "{what} during the cut: {other:?}, not the outage's own answer ({outage:?}): it \
             tried the database instead of answering at once"
        ),
    }
}

/// The test database's address, and its URL with that address replaced by `proxy`'s.
async fn through(url: &str, proxy: Option<&PgProxy>) -> (std::net::SocketAddr, String) {
    let config: tokio_postgres::Config = url.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(host) => host.clone(),
        other => panic!("the test database is not on TCP: {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = tokio::net::lookup_host((host.as_str(), port))
        .await
        .unwrap()
        .next()
        .unwrap();
    let url = match proxy {
        Some(proxy) => {
            let proxied = url.replacen(&format!("{host}:{port}"), &proxy.address().to_string(), 1);
            assert_ne!(proxied, url, "the URL names the database's host and port");
            proxied
        }
        None => url.to_owned(),
    };
    (upstream, url)
}

#[tokio::test]
async fn a_node_that_loses_its_database_answers_unavailable_and_recovers_by_itself() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let (upstream, _) = through(&url, None).await;
    let proxy = PgProxy::start(upstream).await;
    let (_, proxied) = through(&url, Some(&proxy)).await;
    let mut options = support::options(&proxied, &schema);
    options.node_name = "cut".into();
    let a = PgStore::open(options).await.expect("node A opens");
    let b = PgStore::open(support::options(&url, &schema))
        .await
        .expect("node B opens");
    b.queue_put(QueuePutParams {
        name: "q".into(),
        config: QueueConfig::defaults_for("q"),
        now_ms: T0,
    })
    .await
    .unwrap();
    let mut listened = a.definitions_changed();
    eventually("A's listener is connected", RECOVERY, || {
        std::future::ready(*listened.borrow_and_update() > 0)
    })
    .await;

    // Before the cut, A works, and holds a lease across it.
    enqueue(&a, "before").await.unwrap();
    let held = claim(&a, 1).await.unwrap();
    assert_eq!(held.len(), 1);
    let waiter = a.notifier().queue("q");
    let mut woken = std::pin::pin!(waiter.notified());
    woken.as_mut().enable();

    proxy.cut();
    let lost_after = eventually("A reports its database unavailable", RECOVERY, || {
        std::future::ready(matches!(a.write_state(), WriteState::Unavailable(_)))
    })
    .await;
    eprintln!("write_state Unavailable {lost_after:?} after the cut");
    tokio::time::timeout(Duration::from_secs(2), woken)
        .await
        .expect("A's waiters are woken, so long polls end with the error");
    // Answered at once from the known outage, not after each call's own try to connect (which
    // waits out the connect timeout against a database that does not answer): the error is the
    // outage's own, word for word, which a call's own failed connection never gives.
    let WriteState::Unavailable(outage) = a.write_state() else {
        panic!("the outage ended during the cut");
    };
    refused_by_the_outage("enqueue", enqueue(&a, "during, on A").await, &outage);
    refused_by_the_outage("claim", claim(&a, 10).await, &outage);
    refused_by_the_outage("ack", ack(&a, held[0].1).await, &outage);
    assert!(matches!(
        a.storage_metrics().write_state,
        WriteState::Unavailable(_)
    ));
    // B reaches the database meanwhile.
    enqueue(&b, "during, on B").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    unavailable("enqueue", enqueue(&a, "still during").await);

    listened.mark_unchanged();
    proxy.heal();
    let healed = Instant::now();
    eventually("A reaches its database again", RECOVERY, || {
        std::future::ready(a.write_state() == WriteState::Accepting)
    })
    .await;
    eventually("A's listener is connected again", RECOVERY, || {
        std::future::ready(listened.has_changed().unwrap_or(false))
    })
    .await;
    eprintln!("recovered {:?} after the heal", healed.elapsed());

    // Everything works again, without a restart.
    ack(&a, held[0].1)
        .await
        .expect("a receipt from before the cut acks");
    enqueue(&a, "after").await.unwrap();
    let mut bodies = Vec::new();
    for (body, receipt) in claim(&a, 10).await.unwrap() {
        ack(&a, receipt).await.unwrap();
        bodies.push(body);
    }
    bodies.sort();
    assert_eq!(
        bodies,
        ["after", "during, on B"],
        "nothing of A's refused enqueue was stored"
    );

    // A wake-up sent by B reaches A again: its listener LISTENs once more (and the timer that
    // stands in for it while it is away does not run: nothing wakes A without B's enqueue).
    let waiter = a.notifier().queue("q");
    let mut woken = std::pin::pin!(waiter.notified());
    woken.as_mut().enable();
    assert!(
        tokio::time::timeout(Duration::from_millis(300), woken.as_mut())
            .await
            .is_err(),
        "A was woken with nothing enqueued"
    );
    let sent = Instant::now();
    enqueue(&b, "wake").await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), woken)
        .await
        .expect("A's waiter is woken by B's enqueue");
    eprintln!("woken on A {:?} after B's enqueue began", sent.elapsed());
    assert_eq!(claim(&a, 10).await.unwrap().len(), 1);

    a.close().await.unwrap();
    b.close().await.unwrap();
    drop(proxy);
    support::drop_schema(url, schema).await;
}

/// An operator (or a database restart) ends every backend of node A: each call that had a
/// connection fails `Unavailable` (never another error, never a success that was not stored),
/// A serves again without a restart, and its listener `LISTEN`s again, so a wake-up from B
/// reaches it.
#[tokio::test]
async fn a_node_whose_backends_are_terminated_reconnects() {
    let Some(url) = support::database_url_or_skip().await else {
        return;
    };
    let schema = support::fresh_schema();
    let mut options = support::options(&url, &schema);
    options.node_name = format!("term-{}", &schema[schema.len() - 12..]);
    let application_name = format!("sluice/{}", options.node_name);
    let a = PgStore::open(options).await.expect("node A opens");
    let b = PgStore::open(support::options(&url, &schema))
        .await
        .expect("node B opens");
    b.queue_put(QueuePutParams {
        name: "q".into(),
        config: QueueConfig::defaults_for("q"),
        now_ms: T0,
    })
    .await
    .unwrap();
    enqueue(&a, "before").await.unwrap();
    let mut listened = a.definitions_changed();
    eventually("A's listener is connected", RECOVERY, || {
        std::future::ready(*listened.borrow_and_update() > 0)
    })
    .await;

    let sql = support::connect(&url).await.unwrap();
    let terminated: i64 = sql
        .query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&application_name],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        terminated >= 2,
        "the pool's and the listener's backends: {terminated}"
    );

    let started = Instant::now();
    let mut failed = 0;
    let claimed = loop {
        assert!(started.elapsed() < RECOVERY, "A did not serve again");
        match claim(&a, 10).await {
            Ok(claimed) => break claimed,
            Err(StoreError::Unavailable(_)) => failed += 1,
            Err(other) => panic!("a lost connection is Unavailable: {other}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    eprintln!(
        "A served again {:?} after its backends were ended ({failed} calls failed first)",
        started.elapsed()
    );
    assert_eq!(claimed.len(), 1);
    ack(&a, claimed[0].1).await.unwrap();
    eventually("A's listener is connected again", RECOVERY, || {
        std::future::ready(listened.has_changed().unwrap_or(false))
    })
    .await;
    let waiter = a.notifier().queue("q");
    let mut woken = std::pin::pin!(waiter.notified());
    woken.as_mut().enable();
    enqueue(&b, "wake").await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), woken)
        .await
        .expect("A's waiter is woken by B's enqueue");

    a.close().await.unwrap();
    b.close().await.unwrap();
    support::drop_schema(url, schema).await;
}
