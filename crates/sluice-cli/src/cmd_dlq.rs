//! `sluice dlq list|show|replay|delete|purge`: a queue's dead letters.
//!
//! `QUEUE` is always the source queue: its dead-letter queue is searched, and only entries that
//! came from `QUEUE` are seen. Reaches the server only through [`sluice_client::Client`].

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use sluice_client::wire::{DeadLetterEntryOut, DeadLetterListOut, ReplayIn, ReplayOut};
use sluice_client::{Client, DlqListQuery};

use crate::failure::usage;
use crate::output;

/// Width of the last-error column of `dlq list`.
const ERROR_COLUMN_CHARS: usize = 60;

/// Page size of `dlq list --all` when `--limit` is not given (the server's maximum).
const ALL_PAGE_SIZE: usize = 1000;

/// The `dlq` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum DlqCommand {
    /// List the dead letters that came from QUEUE, newest first.
    List(ListArgs),
    /// Show one dead letter: its metadata, headers and body.
    Show {
        /// The source queue.
        queue: String,
        /// Message id, as `dlq list` shows it.
        message_id: String,
    },
    /// Put dead letters back as fresh messages (new id, attempts reset), by id or by filter.
    ///
    /// Without message ids, every dead letter of QUEUE matching the filters is replayed, in
    /// calls of --batch entries, after a dry run that counts them. Typed at a terminal, such a
    /// replay needs --yes (like purge); in a script it goes ahead.
    Replay(ReplayArgs),
    /// Delete one dead letter.
    Delete {
        /// The source queue.
        queue: String,
        /// Message id, as `dlq list` shows it.
        message_id: String,
    },
    /// Delete every dead letter that came from QUEUE (ones being consumed stay).
    Purge {
        /// The source queue.
        queue: String,
        /// Go ahead without asking (needed when stdin is a terminal).
        #[arg(long, short)]
        yes: bool,
    },
}

/// Filters shared by `dlq list` and `dlq replay`.
#[derive(Debug, clap::Args)]
pub struct Filters {
    /// Only entries whose last error contains TEXT (case-insensitive).
    #[arg(long, value_name = "TEXT")]
    error: Option<String>,
    /// Only entries dead-lettered at or after T: RFC 3339, or a duration ago such as 2h.
    #[arg(long, value_name = "T", value_parser = output::parse_time)]
    since: Option<String>,
    /// Only entries dead-lettered before T: RFC 3339, or a duration ago such as 30m.
    #[arg(long, value_name = "T", value_parser = output::parse_time)]
    until: Option<String>,
}

/// Flags of `dlq list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// The source queue.
    queue: String,
    /// Entries per page, 1 to 1000 [server default: 50].
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Start at this page (the cursor a previous page printed).
    #[arg(long, value_name = "C")]
    cursor: Option<String>,
    /// Follow the pages to the end instead of printing one.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    filters: Filters,
}

/// Flags of `dlq replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The source queue.
    queue: String,
    /// Replay these entries only; without ids, every entry matching the filters.
    #[arg(value_name = "MESSAGE_ID", conflicts_with_all = ["error", "since", "until"])]
    message_ids: Vec<String>,
    #[command(flatten)]
    filters: Filters,
    /// Replay into this queue instead of QUEUE.
    #[arg(long, value_name = "QUEUE")]
    target: Option<String>,
    /// Only count what would be replayed.
    #[arg(long)]
    dry_run: bool,
    /// Replay by filter without asking (needed when stdin is a terminal).
    #[arg(long, short)]
    yes: bool,
    /// Entries replayed per request, 1 to 10000.
    #[arg(long, value_name = "N", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch: u32,
}

/// Runs one `dlq` subcommand.
pub async fn run(client: &Client, command: DlqCommand, json: bool) -> anyhow::Result<()> {
    match command {
        DlqCommand::List(args) => list(client, args, json).await,
        DlqCommand::Show { queue, message_id } => {
            let out = client.dlq_get(&queue, parse_id(&message_id)?).await?;
            if json {
                return output::json(&out);
            }
            show(&out)
        }
        DlqCommand::Replay(args) => replay(client, args, json).await,
        DlqCommand::Delete { queue, message_id } => {
            let out = client.dlq_delete(&queue, parse_id(&message_id)?).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!("deleted {} dead letter(s)", out.deleted))
        }
        DlqCommand::Purge { queue, yes } => {
            output::require_yes(
                yes,
                &format!("deleting every dead letter of {queue} cannot be undone"),
            )?;
            let out = client.dlq_purge(&queue).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "deleted {} dead letter(s) of {queue}",
                out.deleted
            ))
        }
    }
}

/// Runs `dlq list`.
async fn list(client: &Client, args: ListArgs, json: bool) -> anyhow::Result<()> {
    let mut query = DlqListQuery {
        limit: args.limit.or(args.all.then_some(ALL_PAGE_SIZE)),
        cursor: args.cursor,
        error: args.filters.error,
        since: args.filters.since,
        until: args.filters.until,
    };
    let mut out = client.dlq_list(&args.queue, &query).await?;
    if args.all {
        while let Some(cursor) = out.next_cursor.take() {
            query.cursor = Some(cursor);
            let page = client.dlq_list(&args.queue, &query).await?;
            out.entries.extend(page.entries);
            out.next_cursor = page.next_cursor;
        }
    }
    if json {
        return output::json(&out);
    }
    print_list(&out)
}

/// The entries as a table, and where the next page starts.
fn print_list(out: &DeadLetterListOut) -> anyhow::Result<()> {
    if out.entries.is_empty() {
        eprintln!("no dead letters in {} on this page", out.dead_letter_queue);
    } else {
        let mut table =
            output::table(&["message_id", "attempts", "dead-lettered at", "last error"]);
        for entry in &out.entries {
            table.add_row(vec![
                entry.message_id.to_string(),
                entry.attempts.to_string(),
                entry.last_seen_at.clone(),
                output::or_dash(
                    entry
                        .last_error
                        .as_deref()
                        .map(|error| output::cut(error, ERROR_COLUMN_CHARS)),
                ),
            ]);
        }
        output::print_table(&table)?;
    }
    if let Some(cursor) = &out.next_cursor {
        eprintln!("more: --cursor {cursor} (or --all)");
    }
    Ok(())
}

/// `dlq show` as tables: metadata, then headers, then the body as indented JSON.
fn show(entry: &DeadLetterEntryOut) -> anyhow::Result<()> {
    let mut rows = vec![
        ("message_id", entry.message_id.to_string()),
        ("source queue", entry.source_queue.clone()),
        ("dead-letter queue", entry.queue.clone()),
        ("state", entry.state.clone()),
        ("attempts", entry.attempts.to_string()),
        ("last error", output::or_dash(entry.last_error.as_ref())),
        ("enqueued at", entry.enqueued_at.clone()),
        ("first received at", entry.first_seen_at.clone()),
        ("dead-lettered at", entry.last_seen_at.clone()),
        ("idempotency key", output::or_dash(entry.id.as_ref())),
        ("ordering key", output::or_dash(entry.key.as_ref())),
        ("priority", entry.priority.to_string()),
        ("body bytes", output::or_dash(entry.body_bytes)),
    ];
    if let Some(at) = &entry.replayed_at {
        rows.push(("replayed at", at.clone()));
    }
    if let Some(id) = entry.replayed_as {
        rows.push(("replayed as", id.to_string()));
    }
    output::print_table(&output::key_value_table(rows))?;
    if let Some(headers) = entry.headers.as_ref().filter(|headers| !headers.is_empty()) {
        output::line("headers:")?;
        for (name, value) in headers {
            output::line(format_args!("  {name}: {value}"))?;
        }
    }
    match (&entry.body, &entry.body_base64) {
        (Some(body), _) => output::line(format_args!("body:\n{}", output::pretty_json(body.get()))),
        (None, Some(bytes)) => output::line(format_args!("body (base64):\n{bytes}")),
        (None, None) => Ok(()),
    }
}

/// Runs `dlq replay`.
async fn replay(client: &Client, args: ReplayArgs, json: bool) -> anyhow::Result<()> {
    let base = ReplayIn {
        ids: None,
        error: args.filters.error.clone(),
        since: args.filters.since.clone(),
        until: args.filters.until.clone(),
        limit: Some(args.batch as usize),
        dry_run: None,
        target_queue: args.target.clone(),
    };
    if !args.message_ids.is_empty() {
        return replay_ids(client, &args, base, json).await;
    }

    // Count first, so the progress bar knows its length and a dry run has its answer.
    let counted = client
        .dlq_replay(
            &args.queue,
            &ReplayIn {
                dry_run: Some(true),
                ..base.clone()
            },
        )
        .await?;
    if args.dry_run {
        if json {
            return output::json(&counted);
        }
        return output::line(format_args!(
            "would replay {} into {}",
            counted.matched, counted.target_queue
        ));
    }
    if counted.matched > 0 {
        output::require_yes(
            args.yes,
            &format!(
                "this replays {} dead letter(s) of {} into {} as new messages",
                counted.matched, args.queue, counted.target_queue
            ),
        )?;
    }
    let mut total = ReplayOut {
        dry_run: false,
        matched: counted.matched,
        replayed: 0,
        more: false,
        target_queue: counted.target_queue.clone(),
        results: Vec::new(),
    };
    if counted.matched > 0 {
        let progress = progress_bar(counted.matched);
        let request = ReplayIn {
            dry_run: Some(false),
            ..base
        };
        loop {
            let out = match client.dlq_replay(&args.queue, &request).await {
                Ok(out) => out,
                Err(error) => {
                    progress.abandon();
                    let note = format!(
                        "{} of {} were replayed before the error",
                        total.replayed, total.matched
                    );
                    if json {
                        // Scripts get one JSON error on stderr, the note in its message.
                        return Err(anyhow::Error::from(error).context(note));
                    }
                    eprintln!("note: {note}");
                    return Err(error.into());
                }
            };
            total.replayed += out.replayed;
            total.results.extend(out.results);
            // New dead letters may arrive while replaying: let the bar grow with them.
            if total.replayed > progress.length().unwrap_or(0) {
                progress.set_length(total.replayed);
            }
            progress.set_position(total.replayed);
            // Without a terminal (logs, CI) the bar is hidden: a line per tenth instead.
            let tenth = (total.matched / 10).max(1);
            if progress.is_hidden()
                && total.replayed / tenth > (total.replayed - out.replayed) / tenth
            {
                eprintln!("progress: replayed {} of {}", total.replayed, total.matched);
            }
            if !out.more {
                break;
            }
            if out.replayed == 0 {
                progress.abandon();
                eprintln!("note: the server reports more matches but replayed none; stopping");
                total.more = true;
                break;
            }
        }
        progress.finish_and_clear();
    }
    total.matched = total.matched.max(total.replayed);
    if json {
        return output::json(&total);
    }
    output::line(format_args!(
        "replayed {} of {} into {}",
        total.replayed, total.matched, total.target_queue
    ))
}

/// `dlq replay QUEUE ID...`: the ids in requests of `--batch`, or the single-entry route for
/// one id.
async fn replay_ids(
    client: &Client,
    args: &ReplayArgs,
    base: ReplayIn,
    json: bool,
) -> anyhow::Result<()> {
    let ids = args
        .message_ids
        .iter()
        .map(|id| parse_id(id))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let total = if let ([id], false) = (ids.as_slice(), args.dry_run) {
        client
            .dlq_replay_one(&args.queue, *id, args.target.as_deref())
            .await?
    } else {
        let mut total: Option<ReplayOut> = None;
        for chunk in ids.chunks(args.batch as usize) {
            let request = ReplayIn {
                ids: Some(chunk.iter().map(uuid::Uuid::to_string).collect()),
                limit: Some(chunk.len()),
                dry_run: Some(args.dry_run),
                ..base.clone()
            };
            let out = client.dlq_replay(&args.queue, &request).await?;
            match &mut total {
                None => total = Some(out),
                Some(total) => {
                    total.matched += out.matched;
                    total.replayed += out.replayed;
                    total.more |= out.more;
                    total.results.extend(out.results);
                }
            }
        }
        total.expect("clap requires at least one id here")
    };
    if json {
        return output::json(&total);
    }
    if total.dry_run {
        return output::line(format_args!(
            "would replay {} of {} into {}",
            total.matched,
            ids.len(),
            total.target_queue
        ));
    }
    if !total.results.is_empty() {
        let mut table = output::table(&["dead letter", "new message_id"]);
        for result in &total.results {
            table.add_row(vec![
                result.dead_letter_id.to_string(),
                result.message_id.to_string(),
            ]);
        }
        output::print_table(&table)?;
    }
    output::line(format_args!(
        "replayed {} of {} into {}",
        total.replayed,
        ids.len(),
        total.target_queue
    ))
}

/// A progress bar on stderr, hidden when stderr is not a terminal.
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} replayed ({eta} left)")
            .expect("valid template"),
    )
}

fn parse_id(text: &str) -> anyhow::Result<uuid::Uuid> {
    uuid::Uuid::parse_str(text).map_err(|_| {
        usage(format!(
            "{text:?} is not a message id (a UUID, as `dlq list` shows it)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: DlqCommand,
    }

    #[test]
    fn ids_and_filters_do_not_mix() {
        let id = "00000000-0000-0000-0000-000000000000";
        assert!(Cli::try_parse_from(["dlq", "replay", "q", id, "--error", "x"]).is_err());
        assert!(Cli::try_parse_from(["dlq", "replay", "q", id, "--target", "t"]).is_ok());
        assert!(
            Cli::try_parse_from(["dlq", "replay", "q", "--error", "x", "--since", "1h"]).is_ok()
        );
        assert!(Cli::try_parse_from(["dlq", "replay", "q", "--batch", "0"]).is_err());
        assert!(Cli::try_parse_from(["dlq", "list", "q", "--since", "last week"]).is_err());
    }
}
