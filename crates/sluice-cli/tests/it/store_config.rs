//! The store chosen by `[store] kind`, and the graceful stop every part of the server observes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestServer;

#[tokio::test]
async fn the_sqlite_store_is_the_default_and_can_be_named() {
    // Proves `[store] kind = "sqlite"` is accepted and opens the same store as a config without
    // `kind`: a message stored by a server started without it is received after a restart with
    // it, the SQLite database lies in the data directory, and the SQLite options beside `kind`
    // still apply (a `wal_max_bytes` under the minimum stops the start).
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
    assert!(stderr.contains("[store] wal_max_bytes 1000"), "{stderr}");
}

#[tokio::test]
async fn an_unknown_store_kind_stops_the_start_naming_the_kinds() {
    // Proves a `[store] kind` this server cannot open is refused before anything is opened or
    // created: a non-zero exit, an error naming the kind given and the kinds there are, and
    // no data directory.
    let (status, stderr, data_created) = start_with_config("[store]\nkind = \"postgres\"\n").await;
    assert!(!status.success());
    assert!(
        stderr.contains(
            r#"[store] kind "postgres" is not a store this server can open; the kinds are: "sqlite""#
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

/// `sluice serve` with `config` on a free loopback port, without the caller's environment's
/// sluice settings.
fn serve_command(config: &std::path::Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(config)
        .env_remove("SLUICE_CONFIG")
        .env_remove("SLUICE_DATA")
        .env_remove("SLUICE_DURABILITY")
        .kill_on_drop(true);
    command
}

/// Starts a server with `config` that is expected to refuse to start: its exit status, its
/// stderr, and whether the data directory exists afterwards.
async fn start_with_config(config: &str) -> (std::process::ExitStatus, String, bool) {
    let root = tempfile::tempdir().unwrap();
    let path = root.path().join("sluice.toml");
    std::fs::write(&path, config).unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(30),
        serve_command(&path)
            .arg("--data")
            .arg(root.path().join("data"))
            .output(),
    )
    .await
    .expect("a refused start ends by itself")
    .unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
        root.path().join("data").exists(),
    )
}
