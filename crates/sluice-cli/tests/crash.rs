//! Crash test: every send answered with a 2xx survives repeated SIGKILLs (`--durability fsync`).
//!
//! Eight producers send numbered messages (single sends and batches of 1 to 20) while two
//! consumers receive and ack, and a nemesis SIGKILLs the server at random moments spread over
//! the run and restarts it on the same data dir and port. Producers retry unanswered requests,
//! so duplicates are allowed; losses are not. Afterwards the queue is drained and every
//! acknowledged sequence number must have been delivered.
//!
//! In every test run: 20,000 messages and 6 kills. The long soak is the same test with more
//! (documented in RELIABILITY.md):
//! `SLUICE_SOAK_MESSAGES=1000000 SLUICE_SOAK_KILLS=100 cargo test --release -p sluice-cli --test crash -- --nocapture`

#[path = "it/support/mod.rs"]
mod support;

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use support::{TestServer, receipt};

/// Messages sent in every test run (`SLUICE_SOAK_MESSAGES` for the soak).
const MESSAGES_DEFAULT: u64 = 20_000;
/// SIGKILLs in every test run (`SLUICE_SOAK_KILLS` for the soak).
const KILLS_DEFAULT: usize = 6;
const PRODUCERS: u64 = 8;
const CONSUMERS: usize = 2;
const QUEUE: &str = "crash";
/// The whole default run, start to drain; it normally takes well under a minute.
const TEST_TIMEOUT: Duration = Duration::from_secs(170);
/// Extra time allowed per message and per kill when the soak asks for more of them.
const TIME_PER_MESSAGE: Duration = Duration::from_millis(2);
const TIME_PER_KILL: Duration = Duration::from_secs(3);
/// One send; an unanswered one is retried.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_sends_survive_repeated_sigkill() {
    let plan = Plan::from_env();
    let bound = TEST_TIMEOUT
        + TIME_PER_MESSAGE * plan.messages.saturating_sub(MESSAGES_DEFAULT) as u32
        + TIME_PER_KILL * plan.kills.saturating_sub(KILLS_DEFAULT) as u32;
    tokio::time::timeout(bound, run(plan))
        .await
        .expect("the crash test ran over its time bound");
}

/// How much to send and how often to kill.
#[derive(Debug, Clone, Copy)]
struct Plan {
    messages: u64,
    kills: usize,
}

impl Plan {
    fn from_env() -> Plan {
        fn number<T: std::str::FromStr>(name: &str, default: T) -> T {
            match std::env::var(name) {
                Ok(text) => text
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} must be a number, not {text:?}")),
                Err(_) => default,
            }
        }
        Plan {
            messages: number("SLUICE_SOAK_MESSAGES", MESSAGES_DEFAULT),
            kills: number("SLUICE_SOAK_KILLS", KILLS_DEFAULT),
        }
    }
}

/// What the producers saw.
#[derive(Default)]
struct Tally {
    /// Messages counted in 2xx answers (drives the nemesis).
    acknowledged: AtomicU64,
    /// Requests sent again after no answer or a 503.
    retries: AtomicU64,
    /// 5xx answers other than 503: a server bug, reported at the end.
    server_errors: AtomicU64,
    /// Set when every producer is done.
    finished: AtomicBool,
    /// How often each sequence number was delivered to a consumer (during the run and the drain).
    delivered: Mutex<HashMap<u64, u64>>,
    /// Time from each restart's spawn to its ready line.
    restarts: Mutex<Vec<Duration>>,
}

async fn run(plan: Plan) {
    let Plan { messages, kills } = plan;
    let started = Instant::now();
    let mut server = TestServer::builder().durability("fsync").start().await;
    server
        .put_queue(QUEUE, json!({"visibility_timeout_ms": 600_000}))
        .await;
    let url = server.url().to_owned();
    let tally = Arc::new(Tally::default());

    let per_producer = messages.div_ceil(PRODUCERS);
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|producer| {
            let (url, tally) = (url.clone(), Arc::clone(&tally));
            let seqs = (producer * per_producer).min(messages)
                ..((producer + 1) * per_producer).min(messages);
            tokio::spawn(produce(url, seqs, tally))
        })
        .collect();
    let consumers: Vec<_> = (0..CONSUMERS)
        .map(|_| tokio::spawn(consume(url.clone(), Arc::clone(&tally))))
        .collect();
    let all_produced = {
        let tally = Arc::clone(&tally);
        async move {
            let mut acknowledged = HashSet::new();
            for producer in producers {
                acknowledged.extend(producer.await.expect("producer task"));
            }
            tally.finished.store(true, Ordering::SeqCst);
            acknowledged
        }
    };
    let (acknowledged, killed) =
        tokio::join!(all_produced, nemesis(&mut server, &tally, messages, kills));
    let produced_in = started.elapsed();
    for consumer in consumers {
        consumer.await.expect("consumer task");
    }

    drain(&server, &tally).await;
    let delivered = std::mem::take(&mut *tally.delivered.lock().unwrap());
    let restarts = std::mem::take(&mut *tally.restarts.lock().unwrap());

    let missing: Vec<u64> = {
        let mut missing: Vec<u64> = acknowledged
            .iter()
            .copied()
            .filter(|seq| !delivered.contains_key(seq))
            .collect();
        missing.sort_unstable();
        missing
    };
    let unknown: Vec<u64> = delivered
        .keys()
        .copied()
        .filter(|seq| *seq >= messages)
        .collect();
    let duplicates: u64 = delivered.values().map(|count| count - 1).sum();
    let unacknowledged_delivered = delivered
        .keys()
        .filter(|seq| !acknowledged.contains(seq))
        .count();
    println!(
        "crash test: {killed} kills; {} of {messages} sends acknowledged, {} retries, {} distinct delivered, \
         {duplicates} duplicate deliveries, {unacknowledged_delivered} delivered without a 2xx, {} missing \
         (acknowledged but lost); restart to ready: {}; produced in {produced_in:?}, total {:?}",
        acknowledged.len(),
        tally.retries.load(Ordering::SeqCst),
        delivered.len(),
        missing.len(),
        describe_restarts(restarts),
        started.elapsed()
    );

    assert!(
        killed * 6 >= kills * 5,
        "the nemesis killed the server only {killed} of {kills} times"
    );
    assert!(
        missing.is_empty(),
        "{} acknowledged messages were lost: {missing:?}",
        missing.len()
    );
    assert!(
        unknown.is_empty(),
        "delivered sequence numbers that were never sent: {unknown:?}"
    );
    assert_eq!(acknowledged.len() as u64, messages, "some producer gave up");
    let server_errors = tally.server_errors.load(Ordering::SeqCst);
    assert_eq!(
        server_errors, 0,
        "the server answered {server_errors} sends with a 5xx other than 503"
    );
}

/// Sends `seqs` in random single sends and batches, retrying each until it gets a 2xx.
/// Returns the sequence numbers acknowledged.
async fn produce(url: String, seqs: Range<u64>, tally: Arc<Tally>) -> Vec<u64> {
    let client = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .build()
        .expect("client");
    let endpoint = format!("{url}/v1/queues/{QUEUE}/messages");
    let mut acknowledged = Vec::new();
    let mut next = seqs.start;
    while next < seqs.end {
        let single = rand::random_bool(0.2);
        let size = if single {
            1
        } else {
            rand::random_range(1..=20).min(seqs.end - next)
        };
        let batch: Vec<u64> = (next..next + size).collect();
        let messages: Vec<Value> = batch
            .iter()
            .map(|seq| json!({"body": {"seq": seq, "note": "crash test"}}))
            .collect();
        let request = if single {
            messages[0].clone()
        } else {
            json!({ "messages": messages })
        };

        loop {
            match client.post(&endpoint).json(&request).send().await {
                Ok(response) if response.status().is_success() => {
                    // A 2xx status means stored, even if the body is lost to a kill right after.
                    if let Ok(answer) = response.json::<Value>().await {
                        let results = if single {
                            1
                        } else {
                            answer["results"].as_array().map_or(0, Vec::len)
                        };
                        assert_eq!(results, batch.len(), "a 2xx send answered {answer}");
                    }
                    break;
                }
                Ok(response) if response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE => {}
                Ok(response) if response.status().is_server_error() => {
                    tally.server_errors.fetch_add(1, Ordering::SeqCst);
                    let status = response.status();
                    eprintln!(
                        "send answered {status}: {}",
                        response.text().await.unwrap_or_default()
                    );
                }
                Ok(response) => {
                    let status = response.status();
                    panic!(
                        "send refused with {status}: {}",
                        response.text().await.unwrap_or_default()
                    );
                }
                // No answer: the server is down or went down mid-request; it may or may not
                // have stored the messages, so they are sent again.
                Err(_) => {}
            }
            tally.retries.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(rand::random_range(10..50))).await;
        }
        tally.acknowledged.fetch_add(size, Ordering::SeqCst);
        acknowledged.extend(batch);
        next += size;
    }
    acknowledged
}

/// Minimum, median and maximum of the restart times.
fn describe_restarts(mut restarts: Vec<Duration>) -> String {
    if restarts.is_empty() {
        return "none".into();
    }
    restarts.sort_unstable();
    format!(
        "min {:?}, median {:?}, max {:?}",
        restarts[0],
        restarts[restarts.len() / 2],
        restarts[restarts.len() - 1]
    )
}

/// Kills the server once in each of `kills` equal slices of the run (by acknowledged messages,
/// between 5 % and 90 %), at a random point within the slice, and restarts it after a random
/// pause. Returns the number of kills.
async fn nemesis(server: &mut TestServer, tally: &Tally, messages: u64, kills: usize) -> usize {
    let (low, high) = (messages as f64 * 0.05, messages as f64 * 0.90);
    let slice = (high - low) / kills as f64;
    let thresholds: Vec<u64> = (0..kills)
        .map(|i| (low + slice * (i as f64 + rand::random_range(0.0..1.0))) as u64)
        .collect();
    let mut killed = 0;
    for threshold in thresholds {
        while tally.acknowledged.load(Ordering::SeqCst) < threshold {
            if tally.finished.load(Ordering::SeqCst) {
                return killed;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_millis(rand::random_range(0..15))).await;
        server.kill().await;
        killed += 1;
        tokio::time::sleep(Duration::from_millis(rand::random_range(0..250))).await;
        let restart = Instant::now();
        server.restart().await;
        tally.restarts.lock().unwrap().push(restart.elapsed());
    }
    killed
}

/// Receives and acks while the producers run, through kills: errors and lost answers are
/// expected (the message comes again, a duplicate). Records every delivery.
async fn consume(url: String, tally: Arc<Tally>) {
    let client = reqwest::Client::builder()
        .timeout(SEND_TIMEOUT)
        .build()
        .expect("client");
    let receive = format!("{url}/v1/queues/{QUEUE}/receive");
    let ack = format!("{url}/v1/queues/{QUEUE}/ack");
    while !tally.finished.load(Ordering::SeqCst) {
        let answer = client
            .post(&receive)
            .json(&json!({"max": 32, "wait_ms": 200}))
            .send()
            .await;
        let messages = match answer {
            Ok(response) if response.status().is_success() => {
                match response.json::<Value>().await {
                    Ok(answer) => answer["messages"].as_array().cloned().unwrap_or_default(),
                    Err(_) => continue,
                }
            }
            _ => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        if messages.is_empty() {
            continue;
        }
        record(&tally, &messages);
        let receipts: Vec<&str> = messages.iter().map(receipt).collect();
        let _ = client
            .post(&ack)
            .json(&json!({ "receipts": receipts }))
            .send()
            .await;
    }
}

/// Counts one delivery of each message.
fn record(tally: &Tally, messages: &[Value]) {
    let mut delivered = tally.delivered.lock().unwrap();
    for message in messages {
        let seq = message["body"]["seq"]
            .as_u64()
            .unwrap_or_else(|| panic!("a delivered body is not ours: {message}"));
        *delivered.entry(seq).or_insert(0) += 1;
    }
}

/// Receives and acks until the queue is empty, recording every delivery.
async fn drain(server: &TestServer, tally: &Tally) {
    let mut empty_answers = 0;
    while empty_answers < 2 {
        let messages = server
            .receive(
                QUEUE,
                json!({"max": 100, "wait_ms": if empty_answers > 0 { 500 } else { 0 }}),
            )
            .await;
        if messages.is_empty() {
            empty_answers += 1;
            continue;
        }
        empty_answers = 0;
        record(tally, &messages);
        let receipts: Vec<&str> = messages.iter().map(receipt).collect();
        server
            .post(
                &format!("/v1/queues/{QUEUE}/ack"),
                json!({ "receipts": receipts }),
            )
            .await
            .ok();
    }
}
