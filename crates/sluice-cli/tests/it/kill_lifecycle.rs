//! Operator actions answered with a 2xx survive a SIGKILL of the server right after.

use serde_json::json;

use crate::support::{TestServer, message_id, receipt};

#[tokio::test]
async fn answered_operator_actions_survive_a_sigkill() {
    // Proves that pause, cancel, purge, replay, dead-letter delete and an ack with a result are
    // on disk once answered: the process is killed with SIGKILL at once, and after the restart
    // the queue is still paused, nothing cancelled, purged or deleted is back, the replayed
    // message is live under its new id, and the result memo answers a duplicate.
    let mut server = TestServer::builder().start().await;
    server.put_queue("q", json!({"max_attempts": 1})).await;
    server.put_queue("purged", json!({})).await;

    let memo = message_id(&server.send("q", json!({"id": "memo", "body": 1})).await);
    let leased = server.receive("q", json!({})).await.remove(0);
    assert_eq!(leased["message_id"], memo.as_str());
    server
        .post(
            "/v1/queues/q/ack",
            json!({"receipt": receipt(&leased), "result": {"ok": true}}),
        )
        .await
        .ok();

    // Two dead letters: one replayed, one deleted.
    let mut dead = Vec::new();
    for n in 0..2 {
        dead.push(message_id(
            &server.send("q", json!({"body": {"dead": n}})).await,
        ));
        let message = server.receive("q", json!({})).await.remove(0);
        server
            .nack("q", json!({"receipt": receipt(&message), "error": "boom"}))
            .await;
    }
    let replay = server
        .post(&format!("/v1/queues/q/dlq/{}/replay", dead[0]), json!({}))
        .await
        .ok();
    let replayed_as = replay["results"][0]["message_id"]
        .as_str()
        .unwrap()
        .to_owned();
    server
        .delete(&format!("/v1/queues/q/dlq/{}", dead[1]))
        .await
        .ok();

    let cancelled = message_id(&server.send("q", json!({"body": "cancel me"})).await);
    let outcome = server
        .post("/v1/queues/q/cancel", json!({"message_id": cancelled}))
        .await
        .ok();
    assert_eq!(outcome["outcome"], "cancelled", "{outcome}");
    for n in 0..5 {
        server.send("purged", json!({"body": n})).await;
    }
    let purge = server.post_empty("/v1/queues/purged/purge").await.ok();
    assert_eq!(purge["purged"], 5, "{purge}");
    server.post_empty("/v1/queues/q/pause").await.ok();

    server.kill().await;
    server.restart().await;

    let stats = server.stats("q").await;
    assert_eq!(stats["paused"], true, "{stats}");
    assert_eq!(stats["ready"], 1, "only the replayed message: {stats}");
    assert_eq!(stats["dead_lettered"], 0, "{stats}");
    assert_eq!(server.stats("purged").await["ready"], 0);
    for (id, state) in [
        (&cancelled, "cancelled"),
        (&replayed_as, "ready"),
        (&memo, "acked"),
    ] {
        let status = server.message_status("q", id).await;
        assert_eq!(status["state"], state, "{id}: {status}");
    }
    let entry = server
        .get(&format!("/v1/queues/q/dlq/{}", dead[0]))
        .await
        .ok();
    assert_eq!(entry["state"], "replayed", "{entry}");
    assert_eq!(entry["replayed_as"], replayed_as.as_str(), "{entry}");
    let deleted = server
        .get(&format!("/v1/queues/q/dlq/{}", dead[1]))
        .await
        .ok();
    assert_eq!(deleted["state"], "deleted", "{deleted}");
    let duplicate = server.send("q", json!({"id": "memo", "body": 1})).await;
    assert_eq!(duplicate["result"], json!({"ok": true}), "{duplicate}");

    assert!(
        server.receive("q", json!({})).await.is_empty(),
        "still paused"
    );
    server.post_empty("/v1/queues/q/resume").await.ok();
    let back = server.receive("q", json!({})).await;
    assert_eq!(back[0]["message_id"], replayed_as.as_str());
    assert_eq!(back[0]["body"], json!({"dead": 0}));
}
