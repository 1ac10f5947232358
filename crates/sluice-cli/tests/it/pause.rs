//! Pause and resume: deliveries stop, enqueues and existing leases go on, and the paused state
//! survives a restart.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{TestServer, receipt};

#[tokio::test]
async fn a_paused_queue_delivers_nothing_even_after_a_restart() {
    // Proves pause: enqueues are stored, receives (and a 300 ms long poll) return nothing,
    // leases taken before the pause can still be extended, acked and nacked; after a SIGTERM
    // restart stats.paused is still true and receives still return nothing; resume delivers.
    let mut server = TestServer::builder().start().await;
    server
        .put_queue("q", json!({"visibility_timeout_ms": 600_000}))
        .await;
    server
        .send("q", json!({"messages": [{"body": "a"}, {"body": "b"}]}))
        .await;
    let leased = server.receive("q", json!({"max": 2})).await;
    assert_eq!(leased.len(), 2);

    let paused = server.post_empty("/v1/queues/q/pause").await.ok();
    assert_eq!(paused["name"], "q", "{paused}");
    assert_eq!(paused["stats"]["paused"], true, "{paused}");

    server.send("q", json!({"body": "during"})).await;
    assert_eq!(server.stats("q").await["ready"], 1);
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
    let started = Instant::now();
    let polled = server
        .receive("q", json!({"max": 10, "wait_ms": 300}))
        .await;
    assert!(polled.is_empty(), "a paused queue delivered {polled:?}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Leases already out keep working.
    server
        .post(
            "/v1/queues/q/extend",
            json!({"receipt": receipt(&leased[0]), "visibility_timeout_ms": 600_000}),
        )
        .await
        .ok();
    server.ack("q", receipt(&leased[0])).await;
    let nacked = server
        .nack("q", json!({"receipt": receipt(&leased[1]), "delay_ms": 0}))
        .await;
    assert_eq!(nacked["state"], "ready", "{nacked}");
    assert!(
        server.receive("q", json!({"max": 10})).await.is_empty(),
        "a nacked message was delivered while paused"
    );

    server.restart().await;
    let stats = server.stats("q").await;
    assert_eq!(
        stats["paused"], true,
        "the pause did not survive a restart: {stats}"
    );
    assert_eq!(stats["ready"], 2, "{stats}");
    assert_eq!(
        server.get("/v1/queues/q").await.ok()["stats"]["paused"],
        true
    );
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());

    let resumed = server.post_empty("/v1/queues/q/resume").await.ok();
    assert_eq!(resumed["stats"]["paused"], false, "{resumed}");
    let mut bodies: Vec<String> = server
        .receive("q", json!({"max": 10}))
        .await
        .iter()
        .map(|message| message["body"].as_str().unwrap().to_owned())
        .collect();
    bodies.sort();
    assert_eq!(bodies, ["b", "during"]);
    assert_eq!(server.stats("q").await["paused"], false);
}

#[tokio::test]
async fn resume_wakes_a_waiting_long_poll() {
    // Proves a long poll (wait_ms 5000) on a paused queue with a ready message is woken by
    // resume 200 ms later and returns the message well before its deadline.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    server.post_empty("/v1/queues/q/pause").await.ok();
    server.send("q", json!({"body": "held"})).await;

    let started = Instant::now();
    let (received, resumed_at) = tokio::join!(
        async {
            let messages = server
                .receive("q", json!({"max": 1, "wait_ms": 5000}))
                .await;
            (messages, Instant::now())
        },
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let resumed_at = Instant::now();
            server.post_empty("/v1/queues/q/resume").await.ok();
            resumed_at
        },
    );
    let (messages, returned) = received;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["body"], "held");
    let after = returned.saturating_duration_since(resumed_at);
    assert!(
        after < Duration::from_millis(1500),
        "returned {after:?} after resume"
    );
    assert!(returned - started >= Duration::from_millis(150));
}

#[tokio::test]
async fn pausing_an_unknown_queue_is_404() {
    // Proves pause, resume, purge, drain and cancel name a missing queue with queue_not_found.
    let server = TestServer::builder().start().await;
    for route in ["pause", "resume", "purge", "drain"] {
        server
            .post_empty(&format!("/v1/queues/nope/{route}"))
            .await
            .error(404, "queue_not_found");
    }
    server
        .post(
            "/v1/queues/nope/cancel",
            json!({"message_id": uuid::Uuid::now_v7().to_string()}),
        )
        .await
        .error(404, "queue_not_found");
}
