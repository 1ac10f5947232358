//! Restarts keep every message: after SIGTERM, and after SIGKILL with `--durability fsync`.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn a_graceful_restart_keeps_messages_and_frees_leases() {
    // Proves SIGTERM stops the server cleanly (exit 0) and a restart keeps every message,
    // queue settings and idempotency keys; leases held at the stop are visible again at once.
    check_restart(Stop::Terminate).await;
}

#[tokio::test]
async fn a_restart_after_sigkill_keeps_messages_and_frees_leases() {
    // Proves the same after SIGKILL with fsync durability: every answered send and ack survives.
    check_restart(Stop::Kill).await;
}

enum Stop {
    Terminate,
    Kill,
}

async fn check_restart(stop: Stop) {
    let mut server = TestServer::builder().durability("fsync").start().await;
    server
        .put_queue(
            "q",
            json!({"visibility_timeout_ms": 600_000, "max_attempts": 9}),
        )
        .await;

    let batch: Vec<Value> = (0..30)
        .map(|seq| json!({"body": {"seq": seq}, "id": format!("m{seq}")}))
        .collect();
    server.send("q", json!({ "messages": batch })).await;
    for seq in 30..50 {
        server
            .send(
                "q",
                json!({"body": {"seq": seq}, "key": "k", "priority": seq % 2}),
            )
            .await;
    }
    let leased = server.receive("q", json!({"max": 10})).await;
    assert_eq!(leased.len(), 10);
    let mut acked = BTreeSet::new();
    for message in &leased[..5] {
        server.ack("q", receipt(message)).await;
        acked.insert(seq(message));
    }

    match stop {
        Stop::Terminate => {
            let status = server.terminate().await;
            assert!(status.success(), "SIGTERM ended the server with {status}");
        }
        Stop::Kill => server.kill().await,
    }
    server.restart().await;

    assert_eq!(server.get("/healthz").await.ok(), json!({"status": "ok"}));
    let queue = server.get("/v1/queues/q").await.ok();
    assert_eq!(queue["config"]["visibility_timeout_ms"], 600_000, "{queue}");
    assert_eq!(queue["config"]["max_attempts"], 9, "{queue}");
    server.get("/v1/queues/q.dlq").await.ok();

    let mut delivered = BTreeSet::new();
    loop {
        let messages = server.receive("q", json!({"max": 100})).await;
        if messages.is_empty() {
            break;
        }
        for message in &messages {
            assert!(
                delivered.insert(seq(message)),
                "delivered twice after the restart: {message}"
            );
        }
    }
    let expected: BTreeSet<u64> = (0..50).filter(|seq| !acked.contains(seq)).collect();
    let lost: Vec<_> = expected.difference(&delivered).collect();
    let revived: Vec<_> = delivered.intersection(&acked).collect();
    assert!(
        lost.is_empty(),
        "lost by the restart (the in-flight ones must be visible again at once): {lost:?}"
    );
    assert!(
        revived.is_empty(),
        "acked messages came back after the restart: {revived:?}"
    );

    let repeat = server.send("q", json!({"id": "m0", "body": "again"})).await;
    assert_eq!(
        repeat["created"], false,
        "idempotency keys were forgotten by the restart"
    );
}

fn seq(message: &Value) -> u64 {
    message["body"]["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("no seq in {message}"))
}
