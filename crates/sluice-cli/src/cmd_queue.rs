//! `sluice queue create|list|get|stats|delete`: queue administration over the HTTP API.
//!
//! Reaches the server only through [`sluice_client::Client`].

use sluice_client::Client;
use sluice_client::wire::{BackoffSpec, QueueOut, QueueSpec, QueueStatsOut};

use crate::output;

/// The `queue` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// Create a queue (and its dead-letter queue), or update the settings given.
    Create(CreateArgs),
    /// List every queue with its depth.
    List,
    /// Show one queue's settings and stats.
    Get {
        /// Queue name.
        name: String,
    },
    /// Show one queue's depth and counters since the server started.
    Stats {
        /// Queue name.
        name: String,
    },
    /// Delete a queue and its messages; its dead-letter queue stays.
    Delete {
        /// Queue name.
        name: String,
    },
}

/// Flags of `queue create`; unset flags keep the current value (update) or the default (create).
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Queue name: A-Z, a-z, 0-9, '_', '.' and '-'.
    name: String,
    /// Lease length of a receive, in ms [server default: 30000].
    #[arg(long, value_name = "MS")]
    visibility_timeout_ms: Option<i64>,
    /// Deliveries before dead-lettering; 0 retries forever [server default: 5].
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// Delivery order [server default: unordered].
    #[arg(long, value_parser = ["unordered", "fifo", "per_key"])]
    ordering: Option<String>,
    /// Dead-letter queue name; "" for none [server default: NAME.dlq].
    #[arg(long, value_name = "NAME")]
    dead_letter_queue: Option<String>,
    /// Largest body in bytes [server default: 1048576].
    #[arg(long, value_name = "N")]
    max_message_bytes: Option<usize>,
    /// Idempotency window in ms [server default: 86400000].
    #[arg(long, value_name = "MS")]
    dedup_window_ms: Option<i64>,
    /// First retry delay in ms [server default: 1000].
    #[arg(long, value_name = "MS")]
    backoff_initial_ms: Option<i64>,
    /// Largest retry delay in ms [server default: 60000].
    #[arg(long, value_name = "MS")]
    backoff_max_ms: Option<i64>,
    /// Growth of the retry delay per attempt [server default: 2].
    #[arg(long, value_name = "FACTOR")]
    backoff_factor: Option<f64>,
}

impl CreateArgs {
    fn spec(&self) -> QueueSpec {
        let backoff = BackoffSpec {
            initial_ms: self.backoff_initial_ms,
            max_ms: self.backoff_max_ms,
            factor: self.backoff_factor,
            jitter: None,
        };
        QueueSpec {
            visibility_timeout_ms: self.visibility_timeout_ms,
            max_attempts: self.max_attempts,
            backoff: (backoff != BackoffSpec::default()).then_some(backoff),
            dead_letter_queue: self.dead_letter_queue.clone(),
            max_message_bytes: self.max_message_bytes,
            ordering: self.ordering.clone(),
            dedup_window_ms: self.dedup_window_ms,
        }
    }
}

/// Runs one `queue` subcommand.
pub async fn run(client: &Client, command: QueueCommand, json: bool) -> anyhow::Result<()> {
    match command {
        QueueCommand::Create(args) => {
            let out = client.queue_put(&args.name, &args.spec()).await?;
            if json {
                return output::json(&out);
            }
            let verb = if out.created { "created" } else { "updated" };
            eprintln!("{verb} queue {}", out.queue.name);
            output::print_table(&settings_table(&out.queue))
        }
        QueueCommand::List => {
            let out = client.queue_list().await?;
            if json {
                return output::json(&out);
            }
            let mut table = output::table(&[
                "name",
                "ready",
                "delayed",
                "in flight",
                "dlq",
                "oldest ready age",
                "ordering",
            ]);
            for queue in &out.queues {
                let stats = &queue.stats;
                table.add_row(vec![
                    queue.name.clone(),
                    stats.ready.to_string(),
                    stats.delayed.to_string(),
                    stats.in_flight.to_string(),
                    output::or_dash(stats.dead_lettered),
                    output::or_dash(stats.oldest_ready_age_ms.map(output::human_ms)),
                    queue.config.ordering.clone(),
                ]);
            }
            if out.queues.is_empty() {
                eprintln!("no queues");
                return Ok(());
            }
            output::print_table(&table)
        }
        QueueCommand::Get { name } => {
            let out = client.queue_get(&name).await?;
            if json {
                return output::json(&out);
            }
            let mut table = settings_table(&out);
            for row in stats_rows(&out.stats) {
                table.add_row(vec![row.0.to_owned(), row.1]);
            }
            output::print_table(&table)
        }
        QueueCommand::Stats { name } => {
            let out = client.queue_stats(&name).await?;
            if json {
                return output::json(&out);
            }
            output::print_table(&output::key_value_table(stats_rows(&out)))
        }
        QueueCommand::Delete { name } => {
            let out = client.queue_delete(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "deleted queue {name} ({} messages removed)",
                out.messages_removed
            ))
        }
    }
}

/// A queue's name and settings as a two-column table.
fn settings_table(queue: &QueueOut) -> comfy_table::Table {
    let config = &queue.config;
    let backoff = &config.backoff;
    output::key_value_table([
        ("name", queue.name.clone()),
        ("ordering", config.ordering.clone()),
        (
            "visibility timeout",
            output::human_ms(config.visibility_timeout_ms),
        ),
        (
            "max attempts",
            if config.max_attempts == 0 {
                "unlimited".to_owned()
            } else {
                config.max_attempts.to_string()
            },
        ),
        (
            "backoff",
            format!(
                "{} to {}, x{}{}",
                output::human_ms(backoff.initial_ms),
                output::human_ms(backoff.max_ms),
                backoff.factor,
                if backoff.jitter { ", jitter" } else { "" }
            ),
        ),
        (
            "dead-letter queue",
            output::or_dash(config.dead_letter_queue.as_ref()),
        ),
        ("max message bytes", config.max_message_bytes.to_string()),
        ("dedup window", output::human_ms(config.dedup_window_ms)),
    ])
}

/// Depth and counters as rows.
fn stats_rows(stats: &QueueStatsOut) -> Vec<(&'static str, String)> {
    let counters = &stats.counters;
    vec![
        ("ready", stats.ready.to_string()),
        ("delayed", stats.delayed.to_string()),
        ("in flight", stats.in_flight.to_string()),
        ("in dead-letter queue", output::or_dash(stats.dead_lettered)),
        (
            "oldest ready age",
            output::or_dash(stats.oldest_ready_age_ms.map(output::human_ms)),
        ),
        ("enqueued", counters.enqueued.to_string()),
        ("delivered", counters.delivered.to_string()),
        ("acked", counters.acked.to_string()),
        ("nacked", counters.nacked.to_string()),
        ("dead-lettered", counters.dead_lettered.to_string()),
        ("lease expired", counters.lease_expired.to_string()),
    ]
}
