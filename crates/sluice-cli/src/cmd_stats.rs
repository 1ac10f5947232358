//! `sluice stats [QUEUE]`: depth, throughput over the last minute and ack latency of every
//! queue as one table, or everything about one queue.
//!
//! Reaches the server only through [`sluice_client::Client`].

use sluice_client::Client;
use sluice_client::wire::QueueOut;

use crate::{cmd_queue, output};

/// Flags of `sluice stats`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Show this queue in detail (counters, last 1 and 5 minutes, latency) instead of every
    /// queue in one table.
    queue: Option<String>,
}

/// Runs `sluice stats`.
pub async fn run(client: &Client, args: StatsArgs, json: bool) -> anyhow::Result<()> {
    if let Some(queue) = args.queue {
        let out = client.queue_stats(&queue).await?;
        if json {
            return output::json(&out);
        }
        return output::print_table(&output::key_value_table(cmd_queue::stats_rows(&out)));
    }
    let out = client.queue_list().await?;
    if json {
        return output::json(&out);
    }
    if out.queues.is_empty() {
        eprintln!("no queues");
        return Ok(());
    }
    let mut table = output::table(&[
        "name",
        "ready",
        "delayed",
        "in flight",
        "paused",
        "dlq",
        "oldest ready",
        "enq/s 1m",
        "ack/s 1m",
        "fail/s 1m",
        "p50",
        "p95",
        "p99",
    ]);
    for queue in &out.queues {
        table.add_row(row(queue));
    }
    output::print_table(&table)
}

/// One queue as a row of the overview.
fn row(queue: &QueueOut) -> Vec<String> {
    let stats = &queue.stats;
    let latency = |pick: fn(&sluice_client::wire::LatencyOut) -> u64| {
        output::or_dash(
            stats
                .latency_ms
                .as_ref()
                .map(|latency| output::human_ms(pick(latency) as i64)),
        )
    };
    vec![
        queue.name.clone(),
        stats.ready.to_string(),
        stats.delayed.to_string(),
        stats.in_flight.to_string(),
        if stats.paused { "yes" } else { "no" }.to_owned(),
        output::or_dash(stats.dead_lettered),
        output::or_dash(stats.oldest_ready_age_ms.map(output::human_ms)),
        output::rate(stats.last_1m.enqueued_per_s),
        output::rate(stats.last_1m.acked_per_s),
        output::rate(stats.last_1m.failed_per_s),
        latency(|latency| latency.p50),
        latency(|latency| latency.p95),
        latency(|latency| latency.p99),
    ]
}
