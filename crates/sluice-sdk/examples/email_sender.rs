//! Sending emails at a fixed rate, with retries of transient failures.
//!
//! Shows:
//! - a worker with concurrency 2 whose handler paces itself on a shared 50 ms tick, so the
//!   SMTP relay never sees more than 20 sends a second whatever the concurrency;
//! - a [`RetryPolicy`] with a fixed backoff of 200 ms and at most 4 attempts: the relay
//!   answers `421 try again` to the first two attempts of every third email, and those emails
//!   go out on their third attempt;
//! - enqueueing a batch at once with `enqueue_many`;
//! - stopping by itself once everything is sent (`on_empty` + [`WorkerHandle::shutdown`]).
//!
//! Run it with the queue inside the process:
//!
//! ```text
//! cargo run -p sluice-sdk --example email_sender
//! ```
//!
//! or against a running `sluice serve`:
//!
//! ```text
//! SLUICE_URL=http://127.0.0.1:7566 cargo run -p sluice-sdk --example email_sender
//! ```
//!
//! It exits non-zero unless every email was sent exactly once.
//!
//! [`WorkerHandle::shutdown`]: sluice_sdk::WorkerHandle::shutdown

#[path = "support/cleanup.rs"]
mod cleanup;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_sdk::{Backend, Backoff, Embedded, Envelope, Http, Queue, RetryPolicy, Worker};
use tokio::time::MissedTickBehavior;

/// The worker gives up after this long, whatever happened.
const TIMEOUT: Duration = Duration::from_secs(60);
/// One send per tick: 20 a second at most.
const PACE: Duration = Duration::from_millis(50);
const EMAILS: u32 = 30;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Email {
    id: u32,
    to: String,
    subject: String,
}

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

/// A flaky relay: every third email is refused on its first two attempts.
fn smtp_send(email: &Email, attempt: u32) -> Result<(), String> {
    if email.id.is_multiple_of(3) && attempt <= 2 {
        Err(format!(
            "SMTP 421 try again (to {}, attempt {attempt})",
            email.to
        ))
    } else {
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let backend = backend().await?;
    let name = format!("emails-{}", std::process::id());
    let queue: Queue<Email> = Queue::open(backend, &name).await?;
    println!("queue: {name}");

    // Producer: a batch of emails, each with an idempotency id so a re-run of the producer
    // would not send twice.
    let batch = queue
        .enqueue_many((1..=EMAILS).map(|id| {
            Envelope::new(Email {
                id,
                to: format!("user{id}@example.com"),
                subject: format!("Your receipt #{id}"),
            })
            .id(format!("receipt-{id}"))
        }))
        .await?;
    println!("enqueued {} emails", batch.enqueued);

    // The pace every slot waits on before a send attempt.
    let pace = Arc::new(tokio::sync::Mutex::new({
        let mut interval = tokio::time::interval(PACE);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval
    }));
    let sent = Arc::new(Mutex::new(BTreeMap::<u32, u32>::new()));
    let attempts = Arc::new(Mutex::new(0u32));
    let last_send = Arc::new(Mutex::new(Duration::ZERO));
    let started = Instant::now();

    let worker = Worker::new(queue.clone(), 2)
        .retry(RetryPolicy::new(4).backoff(Backoff::Fixed(Duration::from_millis(200))));
    let handle = worker.handle();
    let worker = worker.on_empty(move |ctx| {
        let handle = handle.clone();
        async move {
            println!("queue empty after {} emails: stopping", ctx.processed);
            handle.shutdown();
        }
    });
    let report = worker
        .run_until(
            {
                let sent = sent.clone();
                let attempts = attempts.clone();
                let last_send = last_send.clone();
                move |ctx| {
                    let (pace, sent) = (pace.clone(), sent.clone());
                    let (attempts, last_send) = (attempts.clone(), last_send.clone());
                    async move {
                        pace.lock().await.tick().await;
                        *attempts.lock().unwrap() += 1;
                        let email = ctx.event;
                        let result = smtp_send(&email, ctx.attempt);
                        *last_send.lock().unwrap() = started.elapsed();
                        result?;
                        println!(
                            "{:>6.2}s slot {} sent #{:<2} to {} (attempt {})",
                            started.elapsed().as_secs_f64(),
                            ctx.slot,
                            email.id,
                            email.to,
                            ctx.attempt
                        );
                        *sent.lock().unwrap().entry(email.id).or_default() += 1;
                        Ok(())
                    }
                }
            },
            tokio::time::sleep(TIMEOUT),
        )
        .await?;

    let sent = sent.lock().unwrap().clone();
    let attempts = *attempts.lock().unwrap();
    // From the start to the last attempt (the worker then idles for a poll before it stops).
    let elapsed = *last_send.lock().unwrap();
    println!(
        "report: sent {}, retried {}, dead-lettered {}",
        report.processed, report.retried, report.dead_lettered
    );
    println!(
        "rate: {attempts} send attempts in {:.2}s = {:.1}/s (limit {:.0}/s)",
        elapsed.as_secs_f64(),
        f64::from(attempts) / elapsed.as_secs_f64(),
        1.0 / PACE.as_secs_f64()
    );

    // Check: every email sent exactly once, the flaky ones after two retries.
    let flaky = (1..=EMAILS).filter(|id| id.is_multiple_of(3)).count() as u64;
    let mut failures = Vec::new();
    let missing: Vec<u32> = (1..=EMAILS).filter(|id| sent.get(id) != Some(&1)).collect();
    if !missing.is_empty() {
        failures.push(format!("not sent exactly once: {missing:?}"));
    }
    if report.processed != u64::from(EMAILS) {
        failures.push(format!("{} acked, expected {EMAILS}", report.processed));
    }
    if report.retried != 2 * flaky {
        failures.push(format!(
            "{} retries, expected {}",
            report.retried,
            2 * flaky
        ));
    }
    if report.dead_lettered != 0 {
        failures.push(format!("{} dead-lettered", report.dead_lettered));
    }
    cleanup::remove_queues(&[&name]).await;
    if failures.is_empty() {
        println!("ok: {EMAILS} emails sent, {flaky} of them after 2 retries, none dead-lettered");
        Ok(())
    } else {
        for failure in &failures {
            eprintln!("FAILED: {failure}");
        }
        std::process::exit(1);
    }
}
