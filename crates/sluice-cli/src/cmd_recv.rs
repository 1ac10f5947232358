//! `sluice recv`, `ack`, `nack` and `extend`: taking messages off a queue and settling them.
//!
//! Reaches the server only through [`sluice_client::Client`]. Durations on the command line
//! take a unit (`30s`, `500ms`, `5m`, see [`output::parse_duration`]); they cross the API as ms.

use std::time::Duration;

use sluice_client::Client;
use sluice_client::wire::{AckOut, ExtendIn, NackIn, ReceiveIn, ReceivedMessage};

use crate::failure::usage;
use crate::output;

/// Most receipts in one ack request.
const ACK_BATCH_MAX: usize = 1000;

/// Flags of `sluice recv`.
#[derive(Debug, clap::Args)]
pub struct RecvArgs {
    /// Queue name.
    queue: String,
    /// Most messages to take, 1 to 100.
    #[arg(long, default_value_t = 1)]
    max: i64,
    /// Wait up to this long (at most 20s) for a message to arrive, e.g. 5s.
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration, default_value = "0s")]
    wait: Duration,
    /// Lease length for these messages, e.g. 60s, 5m [default: the queue's].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    visibility_timeout: Option<Duration>,
    /// Ack every message after printing it.
    #[arg(long)]
    ack: bool,
}

/// Flags of `sluice ack`.
#[derive(Debug, clap::Args)]
pub struct AckArgs {
    /// Queue name.
    queue: String,
    /// Receipts from `recv`.
    #[arg(required = true)]
    receipts: Vec<String>,
    /// A JSON result kept with the message (up to 64 KiB; one receipt only): a later send with
    /// the same idempotency key, and `status --id`, get it back.
    #[arg(long, value_name = "JSON")]
    result: Option<String>,
}

/// Flags of `sluice nack`.
#[derive(Debug, clap::Args)]
pub struct NackArgs {
    /// Queue name.
    queue: String,
    /// Receipt from `recv`.
    receipt: String,
    /// What went wrong; kept with the message as its last error.
    #[arg(long, value_name = "TEXT")]
    error: Option<String>,
    /// Retry after this long instead of the queue's backoff, e.g. 10s, 5m.
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    delay: Option<Duration>,
    /// Dead-letter the message now instead of retrying.
    #[arg(long, conflicts_with = "delay")]
    permanent: bool,
}

/// Flags of `sluice extend`.
#[derive(Debug, clap::Args)]
pub struct ExtendArgs {
    /// Queue name.
    queue: String,
    /// Receipt from `recv`.
    receipt: String,
    /// The lease now ends this long from now, e.g. 60s, 5m.
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    visibility_timeout: Duration,
}

/// Runs `sluice recv`.
pub async fn recv(client: &Client, args: RecvArgs, json: bool) -> anyhow::Result<()> {
    let request = ReceiveIn {
        max: Some(args.max),
        wait_ms: Some(output::millis(args.wait)),
        visibility_timeout_ms: args.visibility_timeout.map(output::millis),
    };
    let out = client.receive(&args.queue, &request).await?;
    if json {
        output::json(&out)?;
    } else if out.messages.is_empty() {
        eprintln!("{}", why_none(client, &args.queue).await);
    } else {
        let mut table = output::table(&["message_id", "attempts", "receipt", "body"]);
        for message in &out.messages {
            table.add_row(vec![
                message.message_id.to_string(),
                message.attempts.to_string(),
                message.receipt.clone(),
                body_text(message),
            ]);
        }
        output::print_table(&table)?;
    }
    if args.ack && !out.messages.is_empty() {
        let receipts = out
            .messages
            .into_iter()
            .map(|message| message.receipt)
            .collect();
        let acked = ack_all(client, &args.queue, receipts).await?;
        eprintln!("acked {}", acked.acked);
    }
    Ok(())
}

/// "no messages", and when ready messages are held back, by what: the receive answer does not
/// say, so the queue's settings and numbers are read (one more request, only when none came).
async fn why_none(client: &Client, queue: &str) -> String {
    let Ok(queue) = client.queue_get(queue).await else {
        return "no messages".into();
    };
    let (config, stats) = (&queue.config, &queue.stats);
    let held_by = if stats.ready == 0 {
        None
    } else if stats.paused {
        Some("the queue is paused (sluice queue resume)".to_owned())
    } else if let Some(max) = config
        .max_in_flight
        .filter(|max| stats.in_flight >= u64::from(*max))
    {
        Some(format!("all {max} leases of max_in_flight are out"))
    } else {
        config.rate_limit.as_ref().map(|limit| {
            format!(
                "the rate limit ({}/s, burst {}) may hold them",
                limit.per_second, limit.burst
            )
        })
    };
    match held_by {
        Some(reason) => format!("no messages: {} ready, but {reason}", stats.ready),
        None if stats.ready > 0 => {
            format!("no messages received, though {} are ready", stats.ready)
        }
        None => "no messages".into(),
    }
}

/// Runs `sluice ack`.
pub async fn ack(client: &Client, args: AckArgs, json: bool) -> anyhow::Result<()> {
    let out = match &args.result {
        Some(result) => {
            let [receipt] = args.receipts.as_slice() else {
                return Err(usage("--result goes with exactly one receipt"));
            };
            let result: serde_json::Value = serde_json::from_str(result)
                .map_err(|error| usage(format!("--result is not JSON: {error}")))?;
            client
                .ack_with_result(&args.queue, receipt, &result)
                .await?
        }
        None => ack_all(client, &args.queue, args.receipts).await?,
    };
    if json {
        return output::json(&out);
    }
    output::line(format_args!("acked {}", out.acked))
}

/// Runs `sluice nack`.
pub async fn nack(client: &Client, args: NackArgs, json: bool) -> anyhow::Result<()> {
    let request = NackIn {
        receipt: args.receipt,
        error: args.error,
        delay_ms: args.delay.map(output::millis),
        permanent: args.permanent.then_some(true),
    };
    let out = client.nack(&args.queue, &request).await?;
    if json {
        return output::json(&out);
    }
    let mut text = out.state.clone();
    if let Some(visible_at) = &out.visible_at {
        text.push_str(&format!(", visible again at {visible_at}"));
    }
    if let Some(queue) = &out.dead_letter_queue {
        text.push_str(&format!(", moved to {queue}"));
    }
    output::line(text)
}

/// Runs `sluice extend`.
pub async fn extend(client: &Client, args: ExtendArgs, json: bool) -> anyhow::Result<()> {
    let request = ExtendIn {
        unstarted: false,
        receipt: args.receipt,
        visibility_timeout_ms: output::millis(args.visibility_timeout),
    };
    let out = client.extend(&args.queue, &request).await?;
    if json {
        return output::json(&out);
    }
    output::line(format_args!("lease expires at {}", out.lease_expires_at))
}

/// Acks receipts in requests of up to [`ACK_BATCH_MAX`], merging the answers.
async fn ack_all(client: &Client, queue: &str, receipts: Vec<String>) -> anyhow::Result<AckOut> {
    let mut total = AckOut {
        acked: 0,
        results: Vec::with_capacity(receipts.len()),
        then: None,
    };
    for chunk in receipts.chunks(ACK_BATCH_MAX) {
        let out = client.ack(queue, chunk.to_vec()).await?;
        total.acked += out.acked;
        total.results.extend(out.results);
    }
    Ok(total)
}

/// A message body for a table cell: compact JSON, or `base64:...` for bytes.
fn body_text(message: &ReceivedMessage) -> String {
    match (&message.body, &message.body_base64) {
        (Some(body), _) => output::compact_json(body.get()),
        (None, Some(bytes)) => format!("base64:{bytes}"),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Commands,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Commands {
        Recv(RecvArgs),
        Nack(NackArgs),
    }

    #[test]
    fn durations_take_a_unit() {
        let cli = Cli::try_parse_from([
            "t",
            "recv",
            "q",
            "--wait",
            "1.5s",
            "--visibility-timeout",
            "2m",
        ])
        .unwrap();
        let Commands::Recv(args) = cli.command else {
            unreachable!()
        };
        assert_eq!(args.wait, Duration::from_millis(1500));
        assert_eq!(args.visibility_timeout, Some(Duration::from_secs(120)));
        assert!(Cli::try_parse_from(["t", "recv", "q", "--wait", "5"]).is_err());
        assert!(Cli::try_parse_from(["t", "nack", "q", "r", "--delay", "100"]).is_err());
        assert!(Cli::try_parse_from(["t", "nack", "q", "r", "--delay", "100ms"]).is_ok());
    }
}
