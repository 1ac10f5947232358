//! `sluice cancel QUEUE (MESSAGE_ID | --id IDEMPOTENCY_KEY) [--reason TEXT]`: removes a message before it is
//! delivered.
//!
//! Reaches the server only through [`sluice_client::Client`]. The outcome is printed and also
//! given as the exit status (see [`EXIT_CODES`]), so scripts can branch on it.

use sluice_client::Client;
use sluice_client::wire::{CancelIn, CancelOut};

use crate::failure::usage;
use crate::output;

/// The exit statuses of `sluice cancel`, for its `--help`: the outcome, in the classes of the
/// table every command shares (`sluice --help`).
pub const EXIT_CODES: &str = "\
Exit status (the outcome, in the classes of `sluice --help`):
  0  cancelled: the message was ready or delayed and is gone
  3  not_found: no such message (not found)
  4  already_processing: the message is in flight with a consumer (refused)
  5  already_completed: it was acked, dead-lettered, expired, cancelled or purged (conflict)
  other failures as for every command: 1 other, 2 usage, 3 no such queue, 4 refused,
  6 unreachable";

/// Flags of `sluice cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    /// Queue name.
    queue: String,
    /// Message id (a UUID, as `send` prints it).
    #[arg(required_unless_present = "id", conflicts_with = "id")]
    message_id: Option<String>,
    /// Find the message by its idempotency key instead (the `--id` it was sent with; within
    /// the dedup window).
    #[arg(long, value_name = "IDEMPOTENCY_KEY")]
    id: Option<String>,
    /// Why it is cancelled: kept as the message's last error, shown by `sluice status`.
    #[arg(long)]
    reason: Option<String>,
}

/// Runs `sluice cancel`.
pub async fn run(client: &Client, args: CancelArgs, json: bool) -> anyhow::Result<()> {
    let request = match (args.message_id, args.id) {
        (Some(id), _) => {
            uuid::Uuid::parse_str(&id).map_err(|_| {
                usage(format!(
                    "{id:?} is not a message id (a UUID); for an idempotency key use --id"
                ))
            })?;
            CancelIn {
                message_id: Some(id),
                id: None,
                reason: args.reason,
            }
        }
        (None, key) => CancelIn {
            message_id: None,
            id: key,
            reason: args.reason,
        },
    };
    let out = client.cancel(&args.queue, &request).await?;
    if json {
        output::json(&out)?;
    } else {
        output::line(describe(&out))?;
    }
    match exit_code(&out.outcome) {
        0 => Ok(()),
        code => Err(crate::Exit(code).into()),
    }
}

/// The outcome in words, e.g. `already_completed: 0190... is acked`.
fn describe(out: &CancelOut) -> String {
    let mut text = out.outcome.clone();
    if let Some(id) = out.message_id {
        text.push_str(&format!(": {id}"));
        if let Some(state) = &out.state {
            text.push_str(&format!(" is {state}"));
        }
    }
    text
}

/// The exit status for an outcome; see [`EXIT_CODES`].
fn exit_code(outcome: &str) -> u8 {
    match outcome {
        "cancelled" => 0,
        "not_found" => 3,
        "already_processing" => 4,
        "already_completed" => 5,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_well_and_map_to_their_exit_codes() {
        let out = CancelOut {
            outcome: "already_completed".into(),
            message_id: Some(uuid::Uuid::nil()),
            state: Some("acked".into()),
        };
        assert_eq!(
            describe(&out),
            "already_completed: 00000000-0000-0000-0000-000000000000 is acked"
        );
        for (outcome, code) in [
            ("cancelled", 0),
            ("not_found", 3),
            ("already_processing", 4),
            ("already_completed", 5),
        ] {
            assert_eq!(exit_code(outcome), code);
            assert!(
                EXIT_CODES.contains(&format!("{code}  {outcome}")),
                "{outcome}"
            );
        }
    }
}
