//! `sluice status QUEUE (MESSAGE_ID | --id IDEMPOTENCY_KEY)`: where a message is now;
//! `sluice deliveries QUEUE MESSAGE_ID`: its push delivery log.
//!
//! Reaches the server only through [`sluice_client::Client`].

use sluice_client::Client;

use crate::failure::usage;
use crate::output;

/// Flags of `sluice status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// Queue name.
    queue: String,
    /// Message id (a UUID, as `send` prints it).
    #[arg(required_unless_present = "id", conflicts_with = "id")]
    message_id: Option<String>,
    /// Find the message by its idempotency key instead (the `--id` it was sent with; within
    /// the dedup window).
    #[arg(long, value_name = "IDEMPOTENCY_KEY")]
    id: Option<String>,
}

/// Runs `sluice status`.
pub async fn status(client: &Client, args: StatusArgs, json: bool) -> anyhow::Result<()> {
    let out = match (&args.message_id, &args.id) {
        (Some(id), _) => {
            let id = uuid::Uuid::parse_str(id).map_err(|_| {
                usage(format!(
                    "{id:?} is not a message id (a UUID); for an idempotency key use --id"
                ))
            })?;
            client.message_get(&args.queue, id).await?
        }
        (None, Some(key)) => {
            client
                .message_get_by_idempotency_key(&args.queue, key)
                .await?
        }
        (None, None) => unreachable!("clap requires one of them"),
    };
    if json {
        return output::json(&out);
    }
    let mut rows = vec![
        ("message_id", out.message_id.to_string()),
        ("queue", out.queue.clone()),
        ("state", out.state.clone()),
        ("idempotency key", output::or_dash(out.id.as_ref())),
        ("ordering key", output::or_dash(out.key.as_ref())),
        ("priority", out.priority.to_string()),
        ("attempts", out.attempts.to_string()),
        ("enqueued at", out.enqueued_at.clone()),
        (
            "first received at",
            output::or_dash(out.first_received_at.as_ref()),
        ),
        ("visible at", out.visible_at.clone()),
        (
            "lease expires at",
            output::or_dash(out.lease_expires_at.as_ref()),
        ),
        ("last error", output::or_dash(out.last_error.as_ref())),
        ("acked at", output::or_dash(out.acked_at.as_ref())),
    ];
    if let Some(finished_at) = &out.finished_at {
        rows.push(("finished at", finished_at.clone()));
    }
    if let Some(result) = &out.result {
        rows.push(("result", result.to_string()));
    }
    if let Some(dead) = &out.dead_letter {
        rows.push(("dead-lettered from", dead.source_queue.clone()));
        rows.push(("attempts there", dead.attempts.to_string()));
    }
    if let Some(replayed_as) = &out.replayed_as {
        rows.push(("replayed as", replayed_as.to_string()));
    }
    output::print_table(&output::key_value_table(rows))
}

/// Flags of `sluice deliveries`.
#[derive(Debug, clap::Args)]
pub struct DeliveriesArgs {
    /// Queue name (its source queue or its dead-letter queue, once it is dead).
    queue: String,
    /// Message id (a UUID, as `send` prints it).
    message_id: String,
}

/// Longest text of an answer or error shown in a row of the table (`--json` has all of it).
const EXCERPT_CHARS: usize = 60;

/// Runs `sluice deliveries`: one row per push attempt, oldest first.
pub async fn deliveries(client: &Client, args: DeliveriesArgs, json: bool) -> anyhow::Result<()> {
    let id = uuid::Uuid::parse_str(&args.message_id).map_err(|_| {
        usage(format!(
            "{:?} is not a message id (a UUID)",
            args.message_id
        ))
    })?;
    let out = client.message_deliveries(&args.queue, id).await?;
    if json {
        return output::json(&out);
    }
    if out.deliveries.is_empty() {
        println!(
            "message {} ({}) has no push attempts on record",
            out.message_id, out.state
        );
        return Ok(());
    }
    let mut table = output::table(&["attempt", "at", "status", "latency", "answer or error"]);
    for attempt in &out.deliveries {
        let status = attempt
            .status
            .map_or_else(|| "-".to_owned(), |status| status.to_string());
        let said = attempt
            .error
            .as_deref()
            .or(attempt.body_excerpt.as_deref())
            .unwrap_or("");
        table.add_row(vec![
            attempt.attempt.to_string(),
            attempt.at.clone(),
            status,
            format!("{} ms", attempt.latency_ms),
            shorten(said),
        ]);
    }
    output::print_table(&table)
}

/// `text` on one line, cut to [`EXCERPT_CHARS`] characters.
fn shorten(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}
