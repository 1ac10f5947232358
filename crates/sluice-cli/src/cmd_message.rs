//! `sluice status QUEUE (MESSAGE_ID | --id IDEMPOTENCY_KEY)`: where a message is now.
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
