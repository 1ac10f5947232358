//! `sluice send`: enqueue one message from an argument, or many from a file or stdin.
//!
//! Every message is JSON. A JSON object with a top-level `body` or `body_base64` key is read as a
//! full `MessageIn` (id, headers, key, priority, delay_ms, not_before); any other JSON value is
//! the body itself. Streams go out in batches of up to [`BATCH_MESSAGES`] messages (and at most
//! [`BATCH_BYTES`] of JSON), each batch one request, so a refused batch stores nothing of itself
//! but the batches before it stay stored.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::value::RawValue;
use sluice_client::Client;
use sluice_client::wire::{EnqueueBatchOut, MessageIn};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use crate::failure::usage;
use crate::output;

/// Most messages in one batch request (the server takes up to 1000).
pub const BATCH_MESSAGES: usize = 500;

/// Most bytes of message JSON in one batch request; the server refuses batches over 10 MiB of
/// bodies and requests over 16 MiB, so this leaves room for the envelope.
pub const BATCH_BYTES: usize = 8 << 20;

/// Flags of `sluice send`.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// Queue name.
    queue: String,
    /// The message as JSON, or `@FILE` (one JSON per line, or one JSON document), or `@-` for
    /// stdin. Without it, one message per stdin line.
    message: Option<String>,
    /// Idempotency key (only for a single message): a second send with the same --id within
    /// the queue's dedup window stores nothing and answers the first message's id.
    #[arg(long, value_name = "IDEMPOTENCY_KEY")]
    id: Option<String>,
    /// Ordering key, for messages that have none (per_key queues deliver one key in order).
    #[arg(long, value_name = "ORDERING_KEY")]
    key: Option<String>,
    /// Priority, higher first, for messages that have none.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Invisible for this long, for messages without a delay of their own, e.g. 30s, 5m.
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    delay: Option<std::time::Duration>,
    /// A header `NAME=VALUE`, added to every message that does not set it; repeatable.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = parse_header)]
    headers: Vec<(String, String)>,
}

/// Runs `sluice send`.
pub async fn run(client: &Client, args: SendArgs, json: bool) -> anyhow::Result<()> {
    let mut source = match args.message.as_deref() {
        Some("@-") | None => {
            if std::io::stdin().is_terminal() {
                eprintln!("reading messages from stdin, one JSON per line (end with ctrl-d)");
            }
            Source::Stdin {
                lines: BufReader::new(tokio::io::stdin()).lines(),
                line: 0,
            }
        }
        Some(arg) if arg.starts_with('@') => Source::file(PathBuf::from(&arg[1..]))?,
        Some(arg) => Source::Argument(Some(arg.to_owned())),
    };
    let total = source.len();
    let mut sender = Sender {
        args: &args,
        source: &mut source,
        seen: 0,
    };

    let mut next = sender.next().await?;
    let Some(first) = &next else {
        return Err(usage("nothing to send: no messages in the input"));
    };
    let mut first_line = first.line;
    let mut stored = Summary::default();
    let mut progress: Option<ProgressBar> = None;
    while next.is_some() {
        let mut batch = Vec::new();
        let mut bytes = 0;
        while let Some(item) = next.take() {
            if !batch.is_empty()
                && (batch.len() == BATCH_MESSAGES || bytes + item.bytes > BATCH_BYTES)
            {
                next = Some(item);
                break;
            }
            bytes += item.bytes;
            batch.push(item.message);
            next = sender.next().await?;
        }
        let count = batch.len();
        if stored.sent == 0 && next.is_none() {
            // Everything fits in one request: show every id.
            return send_small(client, &args.queue, batch, json).await;
        }
        if progress.is_none() && std::io::stderr().is_terminal() {
            progress = Some(progress_bar(total));
        }
        let out = match client.enqueue_batch(&args.queue, batch).await {
            Ok(out) => out,
            Err(error) => {
                if let Some(progress) = &progress {
                    progress.abandon();
                }
                let note = format!(
                    "{} messages were stored; the batch of {count} starting at line {first_line} was refused as a whole",
                    stored.sent
                );
                if json {
                    // Scripts get one JSON error on stderr, the note in its message.
                    return Err(anyhow::Error::from(error).context(note));
                }
                eprintln!("note: {note}");
                return Err(error.into());
            }
        };
        stored.add(&out);
        if let Some(progress) = &progress {
            progress.inc(count as u64);
        }
        first_line = next.as_ref().map_or(first_line, |item| item.line);
    }
    if let Some(progress) = progress {
        progress.finish_and_clear();
    }
    if json {
        return output::json(&stored);
    }
    output::line(format_args!(
        "sent {}, created {}, duplicates {}",
        stored.sent, stored.created, stored.duplicates
    ))
}

/// Sends what fits in one request and prints every message id.
async fn send_small(
    client: &Client,
    queue: &str,
    mut batch: Vec<MessageIn>,
    json: bool,
) -> anyhow::Result<()> {
    let out = if batch.len() == 1 {
        let message = batch.pop().expect("one message");
        let out = client.enqueue(queue, &message).await?;
        if json {
            return output::json(&out);
        }
        EnqueueBatchOut { results: vec![out] }
    } else {
        let out = client.enqueue_batch(queue, batch).await?;
        if json {
            return output::json(&out);
        }
        out
    };
    let mut table = output::table(&["message_id", "created"]);
    for result in &out.results {
        table.add_row(vec![
            result.message_id.to_string(),
            result.created.to_string(),
        ]);
    }
    output::print_table(&table)
}

/// Totals of a large send.
#[derive(Debug, Default, Serialize)]
struct Summary {
    /// Messages the server accepted.
    sent: usize,
    /// New messages among them.
    created: usize,
    /// Repeated idempotency keys among them.
    duplicates: usize,
}

impl Summary {
    fn add(&mut self, out: &EnqueueBatchOut) {
        let created = out.results.iter().filter(|result| result.created).count();
        self.sent += out.results.len();
        self.created += created;
        self.duplicates += out.results.len() - created;
    }
}

fn progress_bar(total: Option<usize>) -> ProgressBar {
    match total {
        Some(total) => ProgressBar::new(total as u64).with_style(
            ProgressStyle::with_template("{bar:40} {human_pos}/{human_len} messages ({eta} left)")
                .expect("valid template"),
        ),
        None => ProgressBar::new_spinner().with_style(
            ProgressStyle::with_template("{spinner} {human_pos} messages sent ({elapsed})")
                .expect("valid template"),
        ),
    }
}

/// One message read from the input.
struct Item {
    message: MessageIn,
    /// Line number in the input, from 1, for error messages.
    line: usize,
    /// Size of its JSON text, to keep batches under the server's limit.
    bytes: usize,
}

/// Reads messages and applies the command-line defaults to them.
struct Sender<'a> {
    args: &'a SendArgs,
    source: &'a mut Source,
    seen: usize,
}

impl Sender<'_> {
    async fn next(&mut self) -> anyhow::Result<Option<Item>> {
        let Some((line, text)) = self.source.next().await? else {
            return Ok(None);
        };
        self.seen += 1;
        if self.seen > 1 && self.args.id.is_some() {
            return Err(usage(
                "--id names one message, but the input has several; put an \"id\" in each line instead",
            ));
        }
        let mut message = parse_message(&text).map_err(|error| {
            let what = match self.source {
                Source::Argument(_) => "MESSAGE is not a message".to_owned(),
                _ => format!("line {line} is not a message"),
            };
            usage(format!("{what}: {error:#}"))
        })?;
        apply_defaults(&mut message, self.args);
        Ok(Some(Item {
            message,
            line,
            bytes: text.len(),
        }))
    }
}

/// Where messages come from.
enum Source {
    /// The MESSAGE argument; taken once.
    Argument(Option<String>),
    /// A file's lines, read whole (numbered from 1), next one last.
    Lines {
        lines: std::vec::IntoIter<(usize, String)>,
        count: usize,
    },
    /// Stdin, one message per line, read as it comes.
    Stdin {
        lines: Lines<BufReader<Stdin>>,
        line: usize,
    },
}

impl Source {
    /// Reads a file: one JSON document (even over several lines) is one message; otherwise each
    /// non-blank line is one.
    fn file(path: PathBuf) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let lines: Vec<(usize, String)> = if serde_json::from_str::<&RawValue>(&text).is_ok() {
            vec![(1, text)]
        } else {
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(index, line)| (index + 1, line.to_owned()))
                .collect()
        };
        Ok(Self::Lines {
            count: lines.len(),
            lines: lines.into_iter(),
        })
    }

    /// How many messages there are, when known in advance.
    fn len(&self) -> Option<usize> {
        match self {
            Self::Argument(_) => Some(1),
            Self::Lines { count, .. } => Some(*count),
            Self::Stdin { .. } => None,
        }
    }

    /// The next non-blank text and its line number.
    async fn next(&mut self) -> anyhow::Result<Option<(usize, String)>> {
        match self {
            Self::Argument(text) => Ok(text.take().map(|text| (1, text))),
            Self::Lines { lines, .. } => Ok(lines.next()),
            Self::Stdin { lines, line } => loop {
                let Some(text) = lines.next_line().await.context("cannot read stdin")? else {
                    return Ok(None);
                };
                *line += 1;
                if !text.trim().is_empty() {
                    return Ok(Some((*line, text)));
                }
            },
        }
    }
}

/// Reads one message: a full `MessageIn` when it is an object with a top-level `body` or
/// `body_base64` key, otherwise a JSON body kept exactly as written.
pub fn parse_message(text: &str) -> anyhow::Result<MessageIn> {
    let text = text.trim();
    let value: serde_json::Value = serde_json::from_str(text).with_context(|| {
        let hint = if text.starts_with(['{', '[', '"']) {
            ""
        } else {
            " (a string needs JSON quotes: '\"text\"')"
        };
        format!("not JSON{hint}")
    })?;
    if let serde_json::Value::Object(object) = &value
        && (object.contains_key("body") || object.contains_key("body_base64"))
    {
        return serde_json::from_str(text).context(
            "an object with a top-level \"body\" or \"body_base64\" is read as a full message",
        );
    }
    let body = RawValue::from_string(text.to_owned())?;
    Ok(MessageIn::json(body))
}

/// Fills the fields a message leaves unset from the command line.
fn apply_defaults(message: &mut MessageIn, args: &SendArgs) {
    if message.id.is_none() {
        message.id.clone_from(&args.id);
    }
    if message.key.is_none() {
        message.key.clone_from(&args.key);
    }
    if message.priority.is_none() {
        message.priority = args.priority;
    }
    if message.delay_ms.is_none() && message.not_before.is_none() {
        message.delay_ms = args.delay.map(output::millis);
    }
    if !args.headers.is_empty() {
        let headers = message.headers.get_or_insert_with(BTreeMap::new);
        for (name, value) in &args.headers {
            headers.entry(name.clone()).or_insert_with(|| value.clone());
        }
    }
}

pub(crate) fn parse_header(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    if name.is_empty() {
        return Err(format!("{text:?} has an empty header name"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: serde_json::Value) {
        let message = parse_message(text).unwrap();
        assert_eq!(serde_json::to_value(&message).unwrap(), expected, "{text}");
    }

    #[test]
    fn a_json_value_is_the_body_and_an_object_with_body_is_a_full_message() {
        check(r#"{"n": 1}"#, serde_json::json!({"body": {"n": 1}}));
        check(r#""text""#, serde_json::json!({"body": "text"}));
        check("null", serde_json::json!({"body": null}));
        check(
            r#"{"body": [1], "key": "k", "priority": 2}"#,
            serde_json::json!({"body": [1], "key": "k", "priority": 2}),
        );
        check(
            r#"{"body_base64": "AA==", "id": "x"}"#,
            serde_json::json!({"body_base64": "AA==", "id": "x"}),
        );
    }

    #[test]
    fn bodies_are_kept_exactly_as_written() {
        let message = parse_message(" {\"big\": 123456789012345678901234567890} ").unwrap();
        assert_eq!(
            message.body.unwrap().get(),
            "{\"big\": 123456789012345678901234567890}"
        );
    }

    #[test]
    fn bad_input_is_refused_with_a_reason() {
        let error = format!("{:#}", parse_message("hello").unwrap_err());
        assert!(error.contains("JSON quotes"), "{error}");
        let error = format!(
            "{:#}",
            parse_message(r#"{"body": 1, "colour": "red"}"#).unwrap_err()
        );
        assert!(error.contains("colour"), "{error}");
    }

    #[test]
    fn a_file_is_one_document_or_one_message_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let count = |content: &str| {
            let path = dir.path().join("messages");
            std::fs::write(&path, content).unwrap();
            Source::file(path).unwrap().len()
        };
        assert_eq!(count("{\n  \"a\": 1,\n  \"b\": [2]\n}\n"), Some(1));
        assert_eq!(count("{\"a\": 1}\n\n{\"a\": 2}\n3\n"), Some(3));
        assert_eq!(count("7"), Some(1));
    }

    #[test]
    fn headers_are_name_equals_value() {
        assert_eq!(
            parse_header("a=b=c"),
            Ok(("a".to_owned(), "b=c".to_owned()))
        );
        assert!(parse_header("ab").is_err());
        assert!(parse_header("=b").is_err());
    }
}
