//! The SDK worker's end-to-end rate against a running `sluice serve`: the workload every SDK's
//! worker benchmark runs (`clients/typescript/bench/worker.ts`, `clients/python/bench/worker.py`),
//! so their figures sit side by side in BENCHMARKS.md.
//!
//! A fresh queue; a producer enqueues `BENCH_MESSAGES` (default 20,000) JSON bodies of 1 KiB in
//! batches of 100 while a worker with `BENCH_CONCURRENCY` slots (default 16) and an empty
//! handler runs at its default settings; the clock runs from the first enqueue until the worker
//! has acked every message. Prints one JSON line. Bounded: it gives up after 5 minutes.
//!
//! ```text
//! cargo run --release -p sluice-sdk --example bench_worker   # SLUICE_URL defaults to http://127.0.0.1:7566
//! ```

#[path = "support/cleanup.rs"]
mod cleanup;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sluice_sdk::{Envelope, Http, Queue, Worker};

const LIMIT: Duration = Duration::from_secs(300);
const BATCH: usize = 100;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Padded {
    n: u64,
    pad: String,
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("SLUICE_URL").unwrap_or_else(|_| "http://127.0.0.1:7566".into());
    let messages = setting("BENCH_MESSAGES", 20_000);
    let concurrency = setting("BENCH_CONCURRENCY", 16) as usize;
    let name = format!("bench-worker-{}", std::process::id());
    let backend = Arc::new(Http::new(&url)?);
    let queue: Queue<Padded> = Queue::open(backend, &name).await?;
    // 1 KiB of JSON per message: {"n":..,"pad":"xxx..."}.
    let pad = "x".repeat(1000);

    let started = Instant::now();
    let producer = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let mut n = 0;
            while n < messages {
                let batch: Vec<_> = (n..(n + BATCH as u64).min(messages))
                    .map(|n| {
                        Envelope::new(Padded {
                            n,
                            pad: pad.clone(),
                        })
                    })
                    .collect();
                n += batch.len() as u64;
                queue.enqueue_many(batch).await?;
            }
            Ok::<_, sluice_sdk::Error>(())
        })
    };
    let acked = Arc::new(AtomicU64::new(0));
    let worker = Worker::new(queue.clone(), concurrency);
    let handle = worker.handle();
    let counted = acked.clone();
    let run = tokio::spawn(worker.run(move |_ctx| {
        let counted = counted.clone();
        async move {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }));
    // The handler counts before its ack; the worker's report counts acks. Stop once every
    // message was handled; the report then says whether every one was acked.
    while acked.load(Ordering::Relaxed) < messages && started.elapsed() < LIMIT {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Taken when the last message was handled (its ack follows within a request's time).
    let elapsed = started.elapsed();
    handle.shutdown();
    let report = run.await??;
    producer.await??;
    cleanup::remove_queues(&[&name]).await;
    if report.processed < messages {
        return Err(format!(
            "only {} of {messages} messages were acked within {LIMIT:?}",
            report.processed
        )
        .into());
    }
    println!(
        "{}",
        serde_json::json!({
            "sdk": "rust",
            "messages": messages,
            "concurrency": concurrency,
            "seconds": elapsed.as_secs_f64(),
            "per_second": messages as f64 / elapsed.as_secs_f64(),
        })
    );
    Ok(())
}
