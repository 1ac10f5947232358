//! Durability of SendMessageBatch across SIGKILL: the real `sluice` binary is killed a few times
//! while several tasks send batches of 10, and restarted on the same data dir; afterwards every
//! message whose batch answered `Successful` must be there, with its MessageId and body.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_sdk_sqs::Client;

use crate::batches::entry;
use sluice_testkit::server::Launch;

use crate::support::binary::sluice_binary_or_skip;
use crate::support::{ENDPOINT_VARIABLE, body, client, unique_name};

const SENDERS: usize = 4;
/// Batches each sender tries at most (bounds the test in count), spread evenly over
/// [`SENDING`] so that every kill finds senders at work.
const BATCHES_PER_SENDER: u32 = 60;
const KILLS: usize = 3;
/// How long the senders run at most (bounds the test in time, with the kills inside it).
const SENDING: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_batch_sends_survive_sigkill() {
    if std::env::var(ENDPOINT_VARIABLE).is_ok_and(|endpoint| !endpoint.is_empty()) {
        eprintln!("skipped against {ENDPOINT_VARIABLE}: the crash test kills a sluice process");
        return;
    }
    let Some(binary) = sluice_binary_or_skip("the SIGKILL test") else {
        return;
    };
    let mut server = Launch::new(binary).start().await;
    let sqs = client(server.url());
    let url = sqs
        .create_queue()
        .queue_name(unique_name("crash"))
        .send()
        .await
        .expect("CreateQueue")
        .queue_url
        .expect("a QueueUrl");

    // MessageId -> body of every entry a SendMessageBatch answered as Successful.
    let acknowledged = Arc::new(Mutex::new(BTreeMap::<String, String>::new()));
    let start = tokio::time::Instant::now();
    let mut senders = Vec::new();
    for sender in 0..SENDERS {
        let sqs = sqs.clone();
        let url = url.clone();
        let acknowledged = acknowledged.clone();
        senders.push(tokio::spawn(async move {
            send_batches(&sqs, &url, sender, start, &acknowledged).await
        }));
    }

    // Kill and restart while they send, spread over the sending window.
    for _ in 0..KILLS {
        tokio::time::sleep(SENDING / (KILLS as u32 + 1)).await;
        server.kill().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.start_again().await;
    }
    let mut refused = 0;
    for sender in senders {
        refused += sender.await.expect("sender task");
    }
    assert!(refused > 0, "no send failed: the kills missed the senders");

    // Every acknowledged message is there after the last restart.
    let acknowledged = acknowledged.lock().expect("acknowledged").clone();
    assert!(
        acknowledged.len() >= 10 * SENDERS,
        "too few acknowledged sends to prove anything: {}",
        acknowledged.len()
    );
    let received = receive_all(&sqs, &url, acknowledged.len()).await;
    eprintln!(
        "{KILLS} kills: {} messages acknowledged, {refused} batch calls failed, {} received",
        acknowledged.len(),
        received.len()
    );
    let missing: Vec<(&String, &String)> = acknowledged
        .iter()
        .filter(|(id, text)| received.get(*id) != Some(*text))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged messages missing or changed after {KILLS} SIGKILLs, e.g. {:?}",
        missing.len(),
        acknowledged.len(),
        &missing[..missing.len().min(5)]
    );
}

/// Sends [`BATCHES_PER_SENDER`] batches of 10, the n-th not before `start` + n steps, until
/// `start` + [`SENDING`]; records the Successful entries and returns how many calls failed
/// (refused or cut off by a kill).
async fn send_batches(
    sqs: &Client,
    url: &str,
    sender: usize,
    start: tokio::time::Instant,
    acknowledged: &Mutex<BTreeMap<String, String>>,
) -> usize {
    let step = SENDING / BATCHES_PER_SENDER;
    let mut failed = 0;
    for batch in 0..BATCHES_PER_SENDER {
        tokio::time::sleep_until(start + step * batch).await;
        if tokio::time::Instant::now() >= start + SENDING {
            break;
        }
        let bodies: Vec<String> = (0..10)
            .map(|n| format!("s{sender}-b{batch}-e{n}"))
            .collect();
        let mut request = sqs.send_message_batch().queue_url(url);
        for (n, text) in bodies.iter().enumerate() {
            request = request.entries(entry(&format!("e{n}"), text));
        }
        match request.send().await {
            Ok(output) => {
                assert!(output.failed().is_empty(), "{output:?}");
                let mut acknowledged = acknowledged.lock().expect("acknowledged");
                for success in output.successful() {
                    let n: usize = success.id()[1..].parse().expect("entry number");
                    acknowledged.insert(success.message_id().to_owned(), bodies[n].clone());
                }
            }
            // The server is down or restarting: on to the next batch.
            Err(_) => failed += 1,
        }
    }
    failed
}

/// Receives until at least `expected` distinct messages arrived and a receive comes back empty
/// (bounded: 15 s); returns MessageId -> body.
async fn receive_all(sqs: &Client, url: &str, expected: usize) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut received = BTreeMap::new();
    let mut seen_twice = BTreeSet::new();
    while tokio::time::Instant::now() < deadline {
        let messages = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(600)
            .wait_time_seconds(if received.len() < expected { 1 } else { 0 })
            .send()
            .await
            .expect("ReceiveMessage after the restarts")
            .messages
            .unwrap_or_default();
        if messages.is_empty() && received.len() >= expected {
            break;
        }
        for message in &messages {
            let id = message.message_id().expect("a MessageId").to_owned();
            if received
                .insert(id.clone(), body(message).to_owned())
                .is_some()
            {
                seen_twice.insert(id);
            }
        }
    }
    assert!(
        seen_twice.is_empty(),
        "messages delivered twice within their 600 s visibility: {seen_twice:?}"
    );
    received
}
