//! Delivery order: per_key, fifo and priority.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestServer, receipt};

const KEYS: u64 = 20;
const PER_KEY: u64 = 25;
const CONSUMERS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn per_key_order_holds_under_concurrent_consumers() {
    // Proves per_key ordering with 8 concurrent consumers (receive max 1..=10, then ack one by
    // one): never two messages of one key in flight at once, each key's messages processed in
    // send order, and all 20 x 25 messages delivered exactly once. A consumer marks a key free
    // before it acks, so the in-flight check cannot fire falsely.
    let server = Arc::new(TestServer::builder().start().await);
    server.put_queue("q", json!({"ordering": "per_key"})).await;

    let total = (KEYS * PER_KEY) as usize;
    let producer = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            // Message i has key i % KEYS and is that key's (i / KEYS)-th message; batches keep
            // request order, so send order within a key is seq order.
            let all: Vec<Value> = (0..KEYS * PER_KEY)
                .map(|i| json!({"key": format!("k{}", i % KEYS), "body": {"seq": i / KEYS}}))
                .collect();
            for chunk in all.chunks(20) {
                server.send("q", json!({ "messages": chunk })).await;
            }
        })
    };

    let in_flight = Arc::new(Mutex::new(HashSet::<String>::new()));
    let processed = Arc::new(Mutex::new(HashMap::<String, Vec<u64>>::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| {
            let (server, in_flight, processed, done) = (
                Arc::clone(&server),
                Arc::clone(&in_flight),
                Arc::clone(&processed),
                Arc::clone(&done),
            );
            tokio::spawn(async move {
                while done.load(Ordering::SeqCst) < total && tokio::time::Instant::now() < deadline
                {
                    let max: u64 = rand::random_range(1..=10);
                    let messages = server
                        .receive("q", json!({"max": max, "wait_ms": 100}))
                        .await;
                    for message in &messages {
                        let key = message["key"].as_str().expect("key").to_owned();
                        assert!(
                            in_flight.lock().unwrap().insert(key.clone()),
                            "two messages of key {key} in flight at once"
                        );
                    }
                    for message in &messages {
                        let key = message["key"].as_str().unwrap().to_owned();
                        let seq = message["body"]["seq"].as_u64().expect("seq");
                        if rand::random_bool(0.3) {
                            tokio::time::sleep(Duration::from_millis(rand::random_range(1..5)))
                                .await;
                        }
                        processed
                            .lock()
                            .unwrap()
                            .entry(key.clone())
                            .or_default()
                            .push(seq);
                        in_flight.lock().unwrap().remove(&key);
                        server.ack("q", receipt(message)).await;
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();

    producer.await.expect("producer");
    for consumer in consumers {
        consumer.await.expect("consumer");
    }

    let processed = processed.lock().unwrap().clone();
    let expected: Vec<u64> = (0..PER_KEY).collect();
    for key in 0..KEYS {
        let key = format!("k{key}");
        assert_eq!(
            processed.get(&key),
            Some(&expected),
            "key {key} processed out of order or not exactly once"
        );
    }
    assert_eq!(processed.values().map(Vec::len).sum::<usize>(), total);
    assert!(server.receive("q", json!({"max": 100})).await.is_empty());
}

#[tokio::test]
async fn a_fifo_queue_hands_out_one_message_at_a_time_in_order() {
    // Proves a fifo queue has at most one message in flight (a receive of max 10 gets one, and
    // nothing more until it is acked) and delivers in send order, priorities notwithstanding.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({"ordering": "fifo"})).await;
    for seq in 0..10 {
        server
            .send("q", json!({"body": {"seq": seq}, "priority": seq % 3}))
            .await;
    }
    for seq in 0..10 {
        let messages = server.receive("q", json!({"max": 10})).await;
        assert_eq!(
            messages.len(),
            1,
            "fifo handed out {} messages at once",
            messages.len()
        );
        assert_eq!(messages[0]["body"]["seq"], seq);
        assert!(
            server.receive("q", json!({"max": 10})).await.is_empty(),
            "a second message while seq {seq} is in flight"
        );
        server.ack("q", receipt(&messages[0])).await;
    }
    assert!(server.receive("q", json!({"max": 10})).await.is_empty());
}

#[tokio::test]
async fn higher_priority_goes_first_and_equal_priority_in_send_order() {
    // Proves an unordered queue hands out higher priority first and, within one priority, in
    // send order.
    let server = TestServer::builder().start().await;
    server.put_queue("q", json!({})).await;
    let priorities = [0, 5, 1, 5, 0, 10, -3, 1];
    for (seq, priority) in priorities.iter().enumerate() {
        server
            .send("q", json!({"body": {"seq": seq}, "priority": priority}))
            .await;
    }
    let mut order = Vec::new();
    for _ in 0..priorities.len() {
        let message = server.receive("q", json!({})).await.remove(0);
        order.push((
            message["priority"].as_i64().unwrap(),
            message["body"]["seq"].as_u64().unwrap(),
        ));
    }
    assert_eq!(
        order,
        [
            (10, 5),
            (5, 1),
            (5, 3),
            (1, 2),
            (1, 7),
            (0, 0),
            (0, 4),
            (-3, 6)
        ]
    );
}
