//! `[store] resident_messages`: a backlog deeper than the head waits on disk, the metrics say
//! how much, and every message comes back once, in priority then enqueue order, across a
//! SIGKILL and restart.

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

/// `name`'s value in the server's metrics.
async fn gauge(server: &TestServer, name: &str) -> u64 {
    let text = server.get("/metrics").await.text;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}")) as u64
}

#[tokio::test]
async fn a_deep_backlog_waits_on_disk_and_comes_back_in_order_after_a_sigkill() {
    let mut server = TestServer::builder()
        .durability("fsync")
        .config("[store]\nresident_messages = 5\n")
        .start()
        .await;
    server.put_queue("q", json!({})).await;
    // 30 at priority 0 (a batch, then single sends), then 30 at priority 3.
    let batch: Vec<Value> = (0..10).map(|n| json!({ "body": { "n": n } })).collect();
    server.send("q", json!({ "messages": batch })).await;
    for n in 10..30 {
        server.send("q", json!({ "body": { "n": n } })).await;
    }
    for n in 30..60 {
        server
            .send("q", json!({ "body": { "n": n }, "priority": 3 }))
            .await;
    }
    assert_eq!(gauge(&server, "sluice_storage_index_messages").await, 10);
    assert_eq!(
        gauge(&server, "sluice_storage_paged_out_messages").await,
        50
    );
    let stats = server.get("/v1/queues/q").await.ok();
    assert_eq!(stats["stats"]["ready"], 60, "{stats}");

    server.kill().await;
    server.restart().await;
    assert_eq!(
        gauge(&server, "sluice_storage_paged_out_messages").await,
        50
    );

    let mut seen = Vec::new();
    loop {
        let taken = server.receive("q", json!({ "max": 7 })).await;
        if taken.is_empty() {
            break;
        }
        for message in &taken {
            seen.push(message["body"]["n"].as_u64().unwrap());
            server.ack("q", receipt(message)).await;
        }
    }
    let want: Vec<u64> = (30..60).chain(0..30).collect();
    assert_eq!(seen, want, "priority first, then enqueue order, each once");
    assert_eq!(gauge(&server, "sluice_storage_paged_out_messages").await, 0);
}
