//! The store chosen by `[store] kind`, and the graceful stop every part of the server observes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sluice_testkit::server::Launch;

use crate::support::TestServer;

#[tokio::test]
async fn the_sqlite_store_is_the_default_and_can_be_named() {
    // Proves `[store] kind = "sqlite"` is accepted and opens the same store as a config without
    // `kind`: a message stored by a server started without it is received after a restart with
    // it, the SQLite database lies in the data directory, and the SQLite options beside `kind`
    // still apply (a `max_wal_bytes` under the minimum stops the start).
    let unnamed = "[store]\nwal_max_bytes = 2097152\n";
    let mut server = TestServer::builder().config(unnamed).start().await;
    server.put_queue("q", json!({})).await;
    server
        .send("q", json!({"id": "kept", "body": {"n": 1}}))
        .await;

    let config_file = server.data_dir().parent().unwrap().join("sluice.toml");
    std::fs::write(
        &config_file,
        "[store]\nkind = \"sqlite\"\nwal_max_bytes = 2097152\n",
    )
    .unwrap();
    let status = server.terminate().await;
    assert!(status.success(), "SIGTERM ended the server with {status}");
    server.restart().await;

    let messages = server.receive("q", json!({})).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["id"], "kept");
    assert_eq!(messages[0]["body"], json!({"n": 1}));
    assert!(server.data_dir().join("sluice.db").is_file());

    let (status, stderr, _) =
        start_with_config("[store]\nkind = \"sqlite\"\nwal_max_bytes = 1000\n").await;
    assert!(!status.success());
    assert!(stderr.contains("[store] max_wal_bytes 1000"), "{stderr}");
}

#[tokio::test]
async fn an_unknown_store_kind_stops_the_start_naming_the_kinds() {
    // Proves a `[store] kind` this server cannot open is refused before anything is opened or
    // created: a non-zero exit, an error naming the kind given and the kinds there are, and
    // no data directory. The same for the PostgreSQL store without its database URL.
    let (status, stderr, data_created) = start_with_config("[store]\nkind = \"postgres\"\n").await;
    assert!(!status.success());
    assert!(
        stderr.contains(r#"[store] kind = "postgres" needs [store] url"#),
        "{stderr}"
    );
    assert!(
        !data_created,
        "the refused start created the data directory"
    );
    let (status, stderr, data_created) = start_with_config("[store]\nkind = \"mysql\"\n").await;
    assert!(!status.success());
    assert!(
        stderr.contains(
            r#"[store] kind "mysql" is not a store this server can open; the kinds are: "sqlite", "postgres""#
        ),
        "{stderr}"
    );
    assert!(
        !data_created,
        "the refused start created the data directory"
    );
}

#[tokio::test]
async fn sigterm_ends_long_polls_drains_and_push_workers_at_once() {
    // Proves the shutdown signal reaches everything that waits: a receive waiting 20 s and a
    // drain waiting 20 s both answer within 2 s of SIGTERM (the receive with no messages, the
    // drain with the depth it saw), while a push worker idles on its queue, and the server
    // exits with status 0 within 5 s of the signal.
    let mut server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.put_queue("busy", json!({})).await;
    server.send("busy", json!({"body": "stays"})).await;
    server
        .put_queue(
            "pushed",
            json!({"push": {"url": "http://127.0.0.1:9/unused"}}),
        )
        .await;

    let client = server.client().clone();
    let url = server.url().to_owned();
    let call = |path: &str, body: Value| {
        let request = client.post(format!("{url}{path}")).json(&body).send();
        tokio::spawn(async move {
            let response = request.await.expect("an answer before the server stops");
            let status = response.status().as_u16();
            let body: Value = response.json().await.expect("a JSON answer");
            (status, body, Instant::now())
        })
    };
    let receive = call("/v1/queues/q/receive", json!({"wait_ms": 20_000}));
    let drain = call("/v1/queues/busy/drain", json!({"timeout_ms": 20_000}));
    // Both are waiting once they have not answered for a while.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!receive.is_finished() && !drain.is_finished());

    let signalled = Instant::now();
    let status = server.terminate().await;
    let stopped = signalled.elapsed();
    assert!(status.success(), "SIGTERM ended the server with {status}");
    assert!(
        stopped < Duration::from_secs(5),
        "the stop took {stopped:?}"
    );

    let (status, body, answered) = receive.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["messages"], json!([]), "{body}");
    let waited = answered.duration_since(signalled);
    assert!(
        waited < Duration::from_secs(2),
        "receive answered {waited:?} after SIGTERM"
    );

    let (status, body, answered) = drain.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["drained"], false, "{body}");
    assert_eq!(body["ready"], 1, "{body}");
    let waited = answered.duration_since(signalled);
    assert!(
        waited < Duration::from_secs(2),
        "drain answered {waited:?} after SIGTERM"
    );
}

#[tokio::test]
async fn sluice_migrate_prepares_a_postgres_schema_that_a_server_then_serves() {
    // Proves the PostgreSQL store end to end through the binary: `sluice migrate --store-url`
    // applies migration 1 to a new schema (and finds nothing to do the second time), a server
    // started on that schema with `[store] migrate = false` (only checking the version) keeps a
    // queue defined over HTTP in the database, and reads it back. Needs the test database
    // (SLUICE_TEST_POSTGRES_URL, default the local one): skipped without it, failed in CI.
    let url = std::env::var("SLUICE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let database = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok((client, connection)) => {
            tokio::spawn(connection);
            client
        }
        Err(error) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: no PostgreSQL at {url}: {error}");
            return;
        }
        Err(error) => panic!("PostgreSQL at {url} is needed (CI is set): {error}"),
    };
    let schema = format!("sluice_test_{}", uuid::Uuid::now_v7().simple());
    let root = tempfile::tempdir().unwrap();
    let config = root.path().join("sluice.toml");
    std::fs::write(
        &config,
        format!("[store]\nschema = \"{schema}\"\nmigrate = false\n"),
    )
    .unwrap();
    let migrate = || {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["migrate", "--store-url", &url, "--config"])
            .arg(&config)
            .env_remove("SLUICE_STORE_URL")
            .output()
    };
    let first = migrate().await.unwrap();
    let first_out = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{first:?}");
    // The newest version is the build's: read from the answer, so a new migration needs no edit.
    let latest = first_out
        .split("migrated from version 0 to ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .filter(|version| version.parse::<u32>().is_ok_and(|version| version > 0))
        .unwrap_or_else(|| panic!("no migration from version 0: {first_out}"))
        .to_owned();
    let again = migrate().await.unwrap();
    assert!(
        String::from_utf8_lossy(&again.stdout)
            .contains(&format!("at version {latest}: nothing to do")),
        "{again:?}"
    );

    let mut server = TestServer::builder()
        .config(&format!(
            "[store]\nurl = \"{url}\"\nschema = \"{schema}\"\nmigrate = false\n"
        ))
        .start()
        .await;
    server.put_queue("orders", json!({"max_attempts": 3})).await;
    let queue = server.get("/v1/queues/orders").await;
    assert_eq!(queue.status, 200, "{}", queue.text);
    let queue: Value = serde_json::from_str(&queue.text).unwrap();
    assert_eq!(queue["config"]["max_attempts"], 3, "{queue}");
    let stored: Vec<String> = database
        .query(
            &format!("SELECT name FROM \"{schema}\".queues ORDER BY name COLLATE \"C\""),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(stored, ["orders", "orders.dlq"], "kept in the database");
    let status = server.terminate().await;
    assert!(status.success(), "SIGTERM ended the server with {status}");
    database
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .unwrap();
}

/// Starts a server with `config` that is expected to refuse to start: its exit status, its
/// stderr, and whether the data directory exists afterwards.
async fn start_with_config(config: &str) -> (std::process::ExitStatus, String, bool) {
    let root = tempfile::tempdir().unwrap();
    let refused = Launch::new(env!("CARGO_BIN_EXE_sluice"))
        .dir(root.path())
        .config(config)
        .refused()
        .await;
    (
        refused.status,
        refused.stderr,
        root.path().join("data").exists(),
    )
}
