//! Processing GitHub-style webhook deliveries with a [`Worker`].
//!
//! Shows:
//! - enqueueing typed events with their delivery id as the idempotency id: a delivery sent
//!   twice (GitHub redelivers) is stored once, and the second enqueue answers `created: false`;
//! - a worker with concurrency 4 that handles the events;
//! - a non-retryable error (an action this processor does not know) that sends the event
//!   straight to the dead-letter queue, reported by `on_dead_letter`;
//! - stopping by itself once the queue is empty (`on_empty` + [`WorkerHandle::shutdown`]).
//!
//! Run it with the queue inside the process:
//!
//! ```text
//! cargo run -p sluice-sdk --example webhook_processor
//! ```
//!
//! or against a running `sluice serve`:
//!
//! ```text
//! SLUICE_URL=http://127.0.0.1:7566 cargo run -p sluice-sdk --example webhook_processor
//! ```
//!
//! It exits non-zero if an event was not handled or dead-lettered as expected.
//!
//! [`WorkerHandle::shutdown`]: sluice_sdk::WorkerHandle::shutdown

#[path = "support/cleanup.rs"]
mod cleanup;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_sdk::{Backend, BoxError, Embedded, Http, Queue, RetryPolicy, Worker};

/// The worker gives up after this long, whatever happened.
const TIMEOUT: Duration = Duration::from_secs(60);

/// The part of a `pull_request` webhook delivery this processor needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PullRequestEvent {
    /// The `X-GitHub-Delivery` header: unique per delivery, the same on a redelivery.
    delivery_id: String,
    action: String,
    repo: String,
    number: u64,
}

/// An action this processor has no handler for: retrying will not help.
#[derive(Debug)]
struct UnknownAction(String);

impl std::fmt::Display for UnknownAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown pull_request action {:?}", self.0)
    }
}

impl std::error::Error for UnknownAction {}

/// `SLUICE_URL` set: that server (with the token in `SLUICE_TOKEN`, if set); else a temporary
/// store inside the process.
async fn backend() -> sluice_sdk::Result<Arc<dyn Backend>> {
    Ok(match std::env::var("SLUICE_URL") {
        Ok(url) => {
            println!("backend: sluice server at {url}");
            Arc::new(Http::with_env_token(&url)?)
        }
        Err(_) => {
            println!("backend: embedded (temporary store)");
            Arc::new(Embedded::temporary().await?)
        }
    })
}

/// What the webhook endpoint would have received.
fn deliveries() -> Vec<PullRequestEvent> {
    let actions = [
        ("acme/api", 101, "opened"),
        ("acme/api", 101, "synchronize"),
        ("acme/web", 42, "opened"),
        ("acme/web", 42, "labeled"),
        ("acme/api", 102, "opened"),
        ("acme/api", 101, "closed"),
        ("acme/web", 43, "opened"),
        ("acme/web", 42, "synchronize"),
        ("acme/api", 102, "auto_merge_enabled"),
        ("acme/web", 43, "closed"),
        ("acme/web", 42, "reopened"),
        ("acme/api", 103, "opened"),
    ];
    actions
        .iter()
        .enumerate()
        .map(|(i, (repo, number, action))| PullRequestEvent {
            delivery_id: format!("72d3162e-cc78-11e3-81ab-4c9367dc{i:04x}"),
            action: (*action).to_owned(),
            repo: (*repo).to_owned(),
            number: *number,
        })
        .collect()
}

fn is_known(action: &str) -> bool {
    matches!(action, "opened" | "synchronize" | "closed" | "reopened")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = backend().await?;
    let name = format!("webhooks-{}", std::process::id());
    let queue: Queue<PullRequestEvent> = Queue::open(backend, &name).await?;
    println!("queue: {name}");

    // Producer: what the webhook endpoint does, one enqueue per delivery. The first three are
    // delivered again (GitHub redelivers on a timeout): the idempotency id makes that a no-op.
    let events = deliveries();
    let redelivered = &events[..3];
    let mut duplicates = 0;
    for event in events.iter().chain(redelivered) {
        let enqueued = queue.enqueue(event).id(&event.delivery_id).await?;
        println!(
            "enqueue {} {}#{} {:<18} created: {}",
            event.delivery_id, event.repo, event.number, event.action, enqueued.created
        );
        if !enqueued.created {
            duplicates += 1;
        }
    }

    // Worker: 4 handlers at once; unknown actions are not retried.
    let handled = Arc::new(Mutex::new(BTreeSet::new()));
    let dead = Arc::new(Mutex::new(BTreeSet::new()));
    let worker = Worker::new(queue.clone(), 4)
        .retry(RetryPolicy::new(3).retry_if(|error| !error.is::<UnknownAction>()))
        .on_dead_letter({
            let dead = dead.clone();
            move |event: PullRequestEvent, error, ctx| {
                let dead = dead.clone();
                async move {
                    println!(
                        "dead-lettered {} (attempt {}): {error}",
                        event.delivery_id, ctx.attempt
                    );
                    dead.lock().unwrap().insert(event.delivery_id);
                }
            }
        });
    let handle = worker.handle();
    let worker = worker.on_empty(move |ctx| {
        let handle = handle.clone();
        async move {
            println!("queue empty after {} events: stopping", ctx.processed);
            handle.shutdown();
        }
    });
    let report = worker
        .run_until(
            {
                let handled = handled.clone();
                move |ctx| {
                    let handled = handled.clone();
                    async move {
                        let event = ctx.event;
                        if !is_known(&event.action) {
                            return Err(BoxError::from(UnknownAction(event.action)));
                        }
                        // A real handler would call the GitHub API, post to chat, start CI...
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        println!(
                            "slot {} handled {}#{} {} ({})",
                            ctx.slot, event.repo, event.number, event.action, event.delivery_id
                        );
                        handled.lock().unwrap().insert(event.delivery_id);
                        Ok(())
                    }
                }
            },
            tokio::time::sleep(TIMEOUT),
        )
        .await?;
    println!(
        "report: processed {}, retried {}, dead-lettered {}, duplicates dropped at enqueue {}",
        report.processed, report.retried, report.dead_lettered, duplicates
    );

    // Check: every known delivery handled once, every unknown one dead-lettered.
    let expected_handled: BTreeSet<String> = events
        .iter()
        .filter(|e| is_known(&e.action))
        .map(|e| e.delivery_id.clone())
        .collect();
    let expected_dead: BTreeSet<String> = events
        .iter()
        .filter(|e| !is_known(&e.action))
        .map(|e| e.delivery_id.clone())
        .collect();
    let handled = handled.lock().unwrap().clone();
    let dead = dead.lock().unwrap().clone();
    let mut failures = Vec::new();
    if duplicates != redelivered.len() {
        failures.push(format!(
            "{duplicates} duplicate enqueues, expected {}",
            redelivered.len()
        ));
    }
    if handled != expected_handled || report.processed != expected_handled.len() as u64 {
        failures.push(format!(
            "handled {} events ({} acked), expected {}",
            handled.len(),
            report.processed,
            expected_handled.len()
        ));
    }
    if dead != expected_dead || report.dead_lettered != expected_dead.len() as u64 {
        failures.push(format!(
            "dead-lettered {} events, expected {}",
            dead.len(),
            expected_dead.len()
        ));
    }
    if report.retried != 0 {
        failures.push(format!("{} retries, expected none", report.retried));
    }
    let stats = queue.stats().await?;
    if stats.outstanding() != 0 {
        failures.push(format!("the queue is not empty: {stats:?}"));
    }
    cleanup::remove_queues(&[&name]).await;
    if failures.is_empty() {
        println!(
            "ok: {} handled, {} dead-lettered, {} redeliveries ignored",
            handled.len(),
            dead.len(),
            duplicates
        );
        Ok(())
    } else {
        for failure in &failures {
            eprintln!("FAILED: {failure}");
        }
        std::process::exit(1);
    }
}
