//! `sluice topic set|list|show|delete|publish`: one publish, a copy in each subscribed queue.
//! Reaches the server only through [`sluice_client::Client`].

use sluice_client::Client;
use sluice_client::wire::{MessageIn, SubscriptionSpec, TopicOut, TopicSpec};

use crate::output;

/// The `topic` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TopicCommand {
    /// Define a topic, or replace the one of that name (its counters start again).
    Set {
        /// The topic's name (the alphabet of queue names).
        name: String,
        /// A subscribed queue, QUEUE or QUEUE=FILTER with a jq filter over
        /// {body, headers, key, priority}; repeatable.
        #[arg(long = "subscribe", value_name = "QUEUE[=FILTER]", value_parser = parse_subscription)]
        subscriptions: Vec<SubscriptionSpec>,
    },
    /// List every topic with its subscriptions and counts.
    List,
    /// Show one topic: its subscriptions, filters and counts.
    Show {
        /// The topic's name.
        name: String,
    },
    /// Delete a topic (its queues and their messages stay).
    Delete {
        /// The topic's name.
        name: String,
    },
    /// Publish one message: a copy in each subscribed queue whose filter takes it, in one commit.
    Publish {
        /// The topic's name.
        name: String,
        /// The body, as JSON (a bare word is taken as a JSON string).
        body: String,
        /// Idempotency key: publishing again with it stores no new copy.
        #[arg(long)]
        id: Option<String>,
        /// Ordering key of every copy.
        #[arg(long)]
        key: Option<String>,
    },
}

/// Runs one `topic` subcommand.
pub async fn run(client: &Client, command: TopicCommand, json: bool) -> anyhow::Result<()> {
    match command {
        TopicCommand::Set {
            name,
            subscriptions,
        } => {
            let out = client
                .topic_put(&name, &TopicSpec { subscriptions })
                .await?;
            if json {
                return output::json(&out);
            }
            let verb = if out.created { "created" } else { "updated" };
            output::line(format_args!(
                "{verb} topic {name}: {} subscriptions",
                out.topic.spec.subscriptions.len()
            ))
        }
        TopicCommand::List => {
            let out = client.topic_list().await?;
            if json {
                return output::json(&out);
            }
            if out.topics.is_empty() {
                eprintln!("no topics");
                return Ok(());
            }
            let mut table = output::table(&[
                "name",
                "subscriptions",
                "published",
                "copies",
                "filtered",
                "duplicates",
            ]);
            for topic in &out.topics {
                table.add_row(vec![
                    topic.name.clone(),
                    subscriptions(topic),
                    topic.stats.published.to_string(),
                    topic.stats.copies.to_string(),
                    topic.stats.filtered.to_string(),
                    topic.stats.duplicates.to_string(),
                ]);
            }
            output::print_table(&table)
        }
        TopicCommand::Show { name } => {
            let out = client.topic_get(&name).await?;
            if json {
                return output::json(&out);
            }
            let mut table = output::table(&["queue", "filter"]);
            for subscription in &out.spec.subscriptions {
                table.add_row(vec![
                    subscription.queue.clone(),
                    output::or_dash(subscription.filter.as_deref()),
                ]);
            }
            output::print_table(&table)?;
            output::line(format_args!(
                "published {}, copies {}, filtered {}, duplicates {}",
                out.stats.published, out.stats.copies, out.stats.filtered, out.stats.duplicates
            ))
        }
        TopicCommand::Delete { name } => {
            let out = client.topic_delete(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!("deleted topic {name}"))
        }
        TopicCommand::Publish {
            name,
            body,
            id,
            key,
        } => {
            let value: serde_json::Value =
                serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
            let raw = serde_json::value::to_raw_value(&value)?;
            let mut message = MessageIn::json(raw);
            message.id = id;
            message.key = key;
            let out = client.topic_publish(&name, &message).await?;
            if json {
                return output::json(&out);
            }
            if out.copies.is_empty() {
                return output::line("no subscription took the message");
            }
            for copy in &out.copies {
                let what = if copy.created { "stored" } else { "duplicate" };
                output::line(format_args!("{} {} ({what})", copy.queue, copy.message_id))?;
            }
            Ok(())
        }
    }
}

fn subscriptions(topic: &TopicOut) -> String {
    topic
        .spec
        .subscriptions
        .iter()
        .map(|s| match &s.filter {
            Some(_) => format!("{} (filtered)", s.queue),
            None => s.queue.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_subscription(text: &str) -> Result<SubscriptionSpec, String> {
    let (queue, filter) = match text.split_once('=') {
        Some((queue, filter)) => (queue, Some(filter.to_owned())),
        None => (text, None),
    };
    if queue.is_empty() {
        return Err(format!("{text:?} names no queue"));
    }
    Ok(SubscriptionSpec {
        queue: queue.to_owned(),
        filter,
    })
}
