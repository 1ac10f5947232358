//! `sluice browse QUEUE`: a page of one state's messages in the order dispatch takes them, or
//! of the acked messages a queue with `--keep-acked` keeps (newest ack first), searched by
//! message id, idempotency key, ordering key and ack time.
//!
//! Reaches the server only through [`sluice_client::Client`].

use sluice_client::wire::{BrowseOut, BrowsedMessageOut};
use sluice_client::{BrowseQuery, Client};

use crate::failure::usage;
use crate::output;

/// Width of the result column of acked messages.
const RESULT_COLUMN_CHARS: usize = 40;

/// Width of the preview column.
const PREVIEW_COLUMN_CHARS: usize = 60;

/// The states `--state` takes, as the API names them.
const STATES: [&str; 5] = ["ready", "waiting", "delayed", "in_flight", "acked"];

/// Flags of `sluice browse`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The search flags (--message-id, --id, --key, --since, --until) search \
    the acked messages a queue keeps (`queue create|update --keep-acked`); given without \
    --state they mean --state acked."
)]
pub struct BrowseArgs {
    /// Queue name.
    queue: String,
    /// Which messages: ready, waiting (behind their lane's active message), delayed, in_flight,
    /// or acked (kept with --keep-acked, newest ack first) [default: ready, or acked with a
    /// search flag].
    #[arg(long, value_parser = STATES)]
    state: Option<String>,
    /// Acked only: this message (its message id, a UUID).
    #[arg(long, value_name = "ID")]
    message_id: Option<String>,
    /// Acked only: messages sent with this idempotency key.
    #[arg(long, value_name = "KEY")]
    id: Option<String>,
    /// Acked only: messages sent with this ordering key.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Acked only: acked at or after T: RFC 3339, or a duration ago such as 2h.
    #[arg(long, value_name = "T", value_parser = output::parse_time)]
    since: Option<String>,
    /// Acked only: acked before T: RFC 3339, or a duration ago such as 30m.
    #[arg(long, value_name = "T", value_parser = output::parse_time)]
    until: Option<String>,
    /// Messages per page, 1 to 1000 [server default: 50].
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Start at this page (the cursor a previous page printed).
    #[arg(long, value_name = "C")]
    cursor: Option<String>,
    /// Show the first BYTES bytes of each body, 0 to 1024 [default: no preview].
    #[arg(long, value_name = "BYTES")]
    preview: Option<usize>,
}

impl BrowseArgs {
    /// The flags of the acked search that were given, by flag name.
    fn search_flags(&self) -> Vec<&'static str> {
        [
            ("--message-id", self.message_id.is_some()),
            ("--id", self.id.is_some()),
            ("--key", self.key.is_some()),
            ("--since", self.since.is_some()),
            ("--until", self.until.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect()
    }

    /// The query: a search without `--state` means `acked`; a search with another state, or a
    /// message id that is not a UUID, is a usage error before any request.
    fn query(self) -> anyhow::Result<BrowseQuery> {
        let searched = self.search_flags();
        let state = match self.state {
            Some(state) if state != "acked" && !searched.is_empty() => {
                return Err(usage(format!(
                    "{} search(es) the acked messages: give --state acked (or no --state), not {state}",
                    searched.join(", ")
                )));
            }
            Some(state) => Some(state),
            None if !searched.is_empty() => Some("acked".to_owned()),
            None => None,
        };
        if let Some(id) = &self.message_id {
            uuid::Uuid::parse_str(id).map_err(|_| {
                usage(format!(
                    "{id:?} is not a message id (a UUID); for an idempotency key use --id"
                ))
            })?;
        }
        Ok(BrowseQuery {
            state,
            limit: self.limit,
            cursor: self.cursor,
            preview_bytes: self.preview,
            message_id: self.message_id,
            id: self.id,
            key: self.key,
            since: self.since,
            until: self.until,
        })
    }
}

/// Runs `sluice browse`.
pub async fn run(client: &Client, args: BrowseArgs, json: bool) -> anyhow::Result<()> {
    let queue = args.queue.clone();
    let query = args.query()?;
    let out = client.browse(&queue, &query).await?;
    if json {
        return output::json(&out);
    }
    if out.messages.is_empty() {
        eprintln!("{}", why_empty(client, &out, &query).await);
    } else {
        let preview = query.preview_bytes.is_some_and(|bytes| bytes > 0);
        output::print_table(&if out.state == "acked" {
            acked_table(&out.messages, preview)
        } else {
            live_table(&out, preview)
        })?;
    }
    if let Some(cursor) = &out.next_cursor {
        eprintln!("more: --cursor {cursor}");
    }
    Ok(())
}

/// Acked messages, newest ack first: when, which, and what their consumer answered.
fn acked_table(messages: &[BrowsedMessageOut], preview: bool) -> comfy_table::Table {
    let mut header = vec!["acked at", "message_id", "key", "id", "attempts", "result"];
    if preview {
        header.push("preview");
    }
    let mut table = output::table(&header);
    for message in messages {
        let status = &message.status;
        let mut row = vec![
            output::or_dash(status.acked_at.as_ref()),
            status.message_id.to_string(),
            output::or_dash(status.key.as_ref()),
            output::or_dash(status.id.as_ref()),
            status.attempts.to_string(),
            output::or_dash(
                status
                    .result
                    .as_ref()
                    .map(|result| output::cut(&result.to_string(), RESULT_COLUMN_CHARS)),
            ),
        ];
        if preview {
            row.push(preview_cell(message));
        }
        table.add_row(row);
    }
    table
}

/// Messages still in the queue, in dispatch order, with the time that matters for their state.
fn live_table(out: &BrowseOut, preview: bool) -> comfy_table::Table {
    let when = match out.state.as_str() {
        "delayed" => Some("visible at"),
        "in_flight" => Some("lease expires at"),
        _ => None,
    };
    let mut header = vec!["message_id", "key", "id", "priority", "attempts", "age"];
    header.extend(when);
    if preview {
        header.push("preview");
    }
    let mut table = output::table(&header);
    for message in &out.messages {
        let status = &message.status;
        let mut row = vec![
            status.message_id.to_string(),
            output::or_dash(status.key.as_ref()),
            output::or_dash(status.id.as_ref()),
            status.priority.to_string(),
            status.attempts.to_string(),
            output::human_ms(message.age_ms),
        ];
        match out.state.as_str() {
            "delayed" => row.push(status.visible_at.clone()),
            "in_flight" => row.push(output::or_dash(status.lease_expires_at.as_ref())),
            _ => {}
        }
        if preview {
            row.push(preview_cell(message));
        }
        table.add_row(row);
    }
    table
}

fn preview_cell(message: &BrowsedMessageOut) -> String {
    output::or_dash(
        message
            .body_preview
            .as_deref()
            .map(|preview| output::cut(preview, PREVIEW_COLUMN_CHARS)),
    )
}

/// What an empty page means; for `acked`, whether the queue keeps acked messages at all (one
/// more request, only when the page is empty).
async fn why_empty(client: &Client, out: &BrowseOut, query: &BrowseQuery) -> String {
    let state = out.state.as_str();
    if query.cursor.is_some() {
        return format!("no {state} messages in {} on this page", out.queue);
    }
    if state != "acked" {
        return format!("no {state} messages in {}", out.queue);
    }
    let searched = [
        &query.message_id,
        &query.id,
        &query.key,
        &query.since,
        &query.until,
    ]
    .iter()
    .any(|field| field.is_some());
    match client.queue_get(&out.queue).await {
        Ok(queue) if queue.config.keep_acked_ms == 0 => format!(
            "no acked messages: {0} does not keep them (sluice queue update {0} --keep-acked 7d)",
            out.queue
        ),
        _ if searched => format!("no kept acked message of {} matches", out.queue),
        _ => format!("no kept acked messages in {}", out.queue),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: BrowseArgs,
    }

    fn query(args: &[&str]) -> anyhow::Result<BrowseQuery> {
        let cli = Cli::try_parse_from(std::iter::once("browse").chain(args.iter().copied()))?;
        cli.args.query()
    }

    #[test]
    fn a_search_means_acked_and_refuses_another_state() {
        assert_eq!(query(&["q"]).unwrap().state, None);
        assert_eq!(
            query(&["q", "--state", "in_flight"])
                .unwrap()
                .state
                .as_deref(),
            Some("in_flight")
        );
        let searched = query(&["q", "--key", "k1", "--since", "2h"]).unwrap();
        assert_eq!(searched.state.as_deref(), Some("acked"));
        assert_eq!(searched.key.as_deref(), Some("k1"));
        assert!(sluice_wire::parse_rfc3339(searched.since.as_deref().unwrap()).is_some());
        let error = query(&["q", "--state", "ready", "--id", "x"]).unwrap_err();
        assert!(error.to_string().contains("--id"), "{error}");
        assert!(query(&["q", "--state", "acked", "--message-id", "nope"]).is_err());
        assert!(query(&["q", "--state", "dead"]).is_err());
        assert!(query(&["q", "--until", "last week"]).is_err());
    }
}
