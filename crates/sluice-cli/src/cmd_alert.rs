//! `sluice alert set|list|show|delete`: operations told when messages are dead-lettered or a
//! queue backs up, at most once per queue and kind per window.
//! Reaches the server only through [`sluice_client::Client`].

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_client::Client;
use sluice_client::wire::{AlertDestinationSpec, AlertOut, AlertSpec, SecretRef};

use crate::output;

/// The server's defaults, for `alert show` (docs/alerts.md).
const DEFAULT_WINDOW_MS: i64 = 300_000;
const DEFAULT_SAMPLE_SIZE: u32 = 5;
const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// The `alert` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum AlertCommand {
    /// Define an alert, or replace the one of that name.
    ///
    /// It watches the --queue queues for dead letters (unless --no-dead-letters), and for depth
    /// or oldest-ready age over --depth-above / --oldest-ready-age-above, and notifies at most
    /// once per queue and kind per --window, through its own queue sluice.alerts.NAME (retried,
    /// then dead-lettered there). Without --slack-url or --webhook-url, notifications wait in
    /// that queue for a consumer of your own; a command destination is the config file's only.
    Set(Box<SetArgs>),
    /// List every alert with what it watches, where it sends, and what it sent.
    List,
    /// Show one alert: its definition, what it sent, the queues firing now, its deliveries.
    Show {
        /// The alert's name.
        name: String,
    },
    /// Delete an alert and its queue (notifications not yet delivered go with it).
    Delete {
        /// The alert's name.
        name: String,
    },
}

/// Flags of `alert set`.
#[derive(Debug, clap::Args)]
pub struct SetArgs {
    /// The alert's name (the alphabet of queue names).
    name: String,
    /// A queue watched: a name, or a prefix ending in `*`; repeatable [server default: `*`,
    /// every queue]. Dead-letter queues and alerts' own queues are never watched.
    #[arg(long = "queue", value_name = "PATTERN")]
    queues: Vec<String>,
    /// Do not notify on dead letters (then give a threshold) [server default: notify].
    #[arg(long)]
    no_dead_letters: bool,
    /// Notify while a queue holds more than N messages (ready, delayed and in flight), and
    /// once when it is back at or under N.
    #[arg(long, value_name = "N")]
    depth_above: Option<u64>,
    /// Notify while a queue's oldest ready message is older than this, e.g. 10m, and once when
    /// it is no longer.
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    oldest_ready_age_above: Option<Duration>,
    /// At most one notification per queue and kind per window, at least 1s; dead letters
    /// arriving in between are counted into the next one [server default: 5m].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    window: Option<Duration>,
    /// Errors quoted in a dead-letter notification, newest first, at most 20 [server default: 5].
    #[arg(long, value_name = "N")]
    sample_size: Option<u32>,
    /// Delivery attempts of one notification before it is dead-lettered in the alert's queue
    /// [server default: 10].
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// Send each notification as a message to this Slack incoming-webhook URL.
    #[arg(long, value_name = "URL", conflicts_with = "webhook_url")]
    slack_url: Option<String>,
    /// POST each notification as JSON to this http(s) URL.
    #[arg(long, value_name = "URL")]
    webhook_url: Option<String>,
    /// With --webhook-url: sign each request (Standard Webhooks) with the `whsec_` secret in
    /// this environment variable of the server.
    #[arg(
        long,
        value_name = "NAME",
        requires = "webhook_url",
        conflicts_with_all = ["signing_secret_file", "slack_url"]
    )]
    signing_secret_env: Option<String>,
    /// With --webhook-url: sign each request with the `whsec_` secret in this file, read by
    /// the server.
    #[arg(
        long,
        value_name = "PATH",
        requires = "webhook_url",
        conflicts_with = "slack_url"
    )]
    signing_secret_file: Option<String>,
    /// With --webhook-url: a request header NAME=VALUE; repeatable.
    // (The conflicts with --slack-url are spelled out: clap does not enforce `requires` on an
    // argument whose requirement conflicts with one given.)
    #[arg(
        long = "header",
        value_name = "NAME=VALUE",
        value_parser = crate::cmd_send::parse_header,
        requires = "webhook_url",
        conflicts_with = "slack_url"
    )]
    headers: Vec<(String, String)>,
}

/// Runs one `alert` subcommand.
pub async fn run(client: &Client, command: AlertCommand, json: bool) -> anyhow::Result<()> {
    match command {
        AlertCommand::Set(args) => {
            let name = args.name.clone();
            let out = client.alert_put(&name, &spec(*args)).await?;
            if json {
                return output::json(&out);
            }
            let verb = if out.created { "created" } else { "updated" };
            let alert = &out.alert;
            let route = if destination_kind(&alert.spec.destination) == "queue" {
                format!("notifications wait in queue {}", alert.queue)
            } else {
                format!(
                    "sent to {} through queue {}",
                    destination(&alert.spec.destination),
                    alert.queue
                )
            };
            output::line(format_args!(
                "{verb} alert {name}: {} on {}; {route}",
                watches(&alert.spec),
                queues(&alert.spec),
            ))
        }
        AlertCommand::List => {
            let out = client.alert_list().await?;
            if json {
                return output::json(&out);
            }
            if out.alerts.is_empty() {
                eprintln!("no alerts");
                return Ok(());
            }
            let mut table = output::table(&[
                "name",
                "queues",
                "watches",
                "destination",
                "sent",
                "last sent",
                "firing",
                "delivery",
            ]);
            for alert in &out.alerts {
                table.add_row(vec![
                    alert.name.clone(),
                    queues(&alert.spec),
                    watches(&alert.spec),
                    destination_kind(&alert.spec.destination).to_owned(),
                    sent_total(alert).to_string(),
                    output::or_dash(alert.last_sent_at.as_deref()),
                    firing(alert),
                    delivery_state(alert),
                ]);
            }
            output::print_table(&table)
        }
        AlertCommand::Show { name } => {
            let out = client.alert_get(&name).await?;
            if json {
                return output::json(&out);
            }
            show(&out)
        }
        AlertCommand::Delete { name } => {
            let out = client.alert_delete(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!("deleted alert {name}"))
        }
    }
}

/// The definition `alert set` sends.
fn spec(args: SetArgs) -> AlertSpec {
    let headers: BTreeMap<String, String> = args.headers.into_iter().collect();
    let signing_secret = match (args.signing_secret_env, args.signing_secret_file) {
        (None, None) => None,
        (env, file) => Some(SecretRef { env, file }),
    };
    AlertSpec {
        queues: (!args.queues.is_empty()).then_some(args.queues),
        dead_letters: args.no_dead_letters.then_some(false),
        depth_above: args.depth_above,
        oldest_ready_age_above_ms: args.oldest_ready_age_above.map(output::millis),
        window_ms: args.window.map(output::millis),
        sample_size: args.sample_size,
        destination: AlertDestinationSpec {
            slack_url: args.slack_url,
            webhook_url: args.webhook_url,
            signing_secret,
            headers: (!headers.is_empty()).then_some(headers),
            command: None,
        },
        max_attempts: args.max_attempts,
    }
}

fn show(out: &AlertOut) -> anyhow::Result<()> {
    let spec = &out.spec;
    let target = &spec.destination;
    let mut rows = vec![
        ("name", out.name.clone()),
        ("queue", out.queue.clone()),
        ("queues", queues(spec)),
        ("dead letters", on_off(spec.dead_letters.unwrap_or(true))),
        ("depth above", output::or_dash(spec.depth_above)),
        (
            "oldest ready age above",
            output::or_dash(spec.oldest_ready_age_above_ms.map(output::human_ms)),
        ),
        (
            "window",
            output::human_ms(spec.window_ms.unwrap_or(DEFAULT_WINDOW_MS)),
        ),
        (
            "sample size",
            spec.sample_size.unwrap_or(DEFAULT_SAMPLE_SIZE).to_string(),
        ),
        (
            "max attempts",
            spec.max_attempts
                .unwrap_or(DEFAULT_MAX_ATTEMPTS)
                .to_string(),
        ),
        ("destination", destination(target)),
    ];
    if let Some(secret) = &target.signing_secret {
        rows.push(("signing secret", secret_ref(secret)));
    }
    if let Some(headers) = &target.headers {
        let headers = headers
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(", ");
        rows.push(("headers", headers));
    }
    rows.extend([
        (
            "sent dead letters",
            format!(
                "{} ({} counted)",
                out.sent.dead_letters, out.sent.dead_letters_counted
            ),
        ),
        ("sent depth", out.sent.depth.to_string()),
        (
            "sent oldest ready age",
            out.sent.oldest_ready_age.to_string(),
        ),
        ("last sent", output::or_dash(out.last_sent_at.as_deref())),
        ("firing", firing(out)),
        ("delivery", delivery_state(out)),
    ]);
    if let Some(push) = out.delivery.as_ref().and_then(|d| d.push.as_ref()) {
        rows.extend([
            ("retried", push.retried.to_string()),
            ("last status", output::or_dash(push.last_status)),
            ("last error", output::or_dash(push.last_error.as_deref())),
        ]);
    }
    output::print_table(&output::key_value_table(rows))
}

/// The patterns watched, `*` (every queue) when none are given.
fn queues(spec: &AlertSpec) -> String {
    match &spec.queues {
        Some(queues) if !queues.is_empty() => queues.join(", "),
        _ => "*".into(),
    }
}

/// What is watched, as one cell: `dead letters, depth > 1000, oldest ready > 10m00s`.
fn watches(spec: &AlertSpec) -> String {
    let mut kinds = Vec::new();
    if spec.dead_letters.unwrap_or(true) {
        kinds.push("dead letters".to_owned());
    }
    if let Some(depth) = spec.depth_above {
        kinds.push(format!("depth > {depth}"));
    }
    if let Some(age) = spec.oldest_ready_age_above_ms {
        kinds.push(format!("oldest ready > {}", output::human_ms(age)));
    }
    if kinds.is_empty() {
        return "-".into();
    }
    kinds.join(", ")
}

fn destination_kind(destination: &AlertDestinationSpec) -> &'static str {
    if destination.slack_url.is_some() {
        "slack"
    } else if destination.webhook_url.is_some() {
        "webhook"
    } else if destination.command.is_some() {
        "command"
    } else {
        "queue"
    }
}

/// The destination with its URL or command.
fn destination(destination: &AlertDestinationSpec) -> String {
    if let Some(url) = &destination.slack_url {
        format!("slack {url}")
    } else if let Some(url) = &destination.webhook_url {
        format!("webhook {url}")
    } else if let Some(command) = &destination.command {
        format!("command {}", command.join(" "))
    } else {
        "none: a consumer of its queue".into()
    }
}

fn secret_ref(secret: &SecretRef) -> String {
    match (&secret.env, &secret.file) {
        (Some(env), _) => format!("env {env}"),
        (None, Some(file)) => format!("file {file}"),
        (None, None) => "-".into(),
    }
}

fn on_off(on: bool) -> String {
    if on { "on" } else { "off" }.into()
}

fn sent_total(alert: &AlertOut) -> u64 {
    alert.sent.dead_letters + alert.sent.depth + alert.sent.oldest_ready_age
}

fn firing(alert: &AlertOut) -> String {
    if alert.firing.is_empty() {
        return "-".into();
    }
    alert.firing.join(", ")
}

/// How delivery stands: notifications delivered, waiting (ready, delayed or being sent) and
/// failed (dead-lettered in the alert's queue); only those waiting without a destination.
fn delivery_state(alert: &AlertOut) -> String {
    let Some(delivery) = &alert.delivery else {
        return "-".into();
    };
    let waiting = delivery.ready + delivery.delayed + delivery.in_flight;
    match &delivery.push {
        Some(push) => format!(
            "{} delivered, {waiting} waiting, {} failed",
            push.delivered, push.failed_permanently
        ),
        None => format!("{waiting} waiting"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(args: &[&str]) -> AlertSpec {
        let line = ["sluice", "alert", "set", "a"].iter().chain(args);
        let (cli, _) = crate::parse(line).unwrap();
        match cli.command {
            crate::Command::Alert(AlertCommand::Set(args)) => spec(*args),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_left_out_are_left_to_the_server() {
        assert_eq!(set(&[]), AlertSpec::default());
        assert_eq!(
            serde_json::to_value(set(&[])).unwrap(),
            serde_json::json!({"destination": {}})
        );
    }

    #[test]
    fn every_flag_reaches_the_definition() {
        let spec = set(&[
            "--queue",
            "a*",
            "--queue",
            "b",
            "--no-dead-letters",
            "--depth-above",
            "7",
            "--oldest-ready-age-above",
            "90s",
            "--window",
            "2m",
            "--sample-size",
            "3",
            "--max-attempts",
            "4",
            "--webhook-url",
            "http://h/x",
            "--signing-secret-file",
            "/run/secret",
            "--header",
            "x-a=1",
        ]);
        assert_eq!(
            serde_json::to_value(spec).unwrap(),
            serde_json::json!({
                "queues": ["a*", "b"],
                "dead_letters": false,
                "depth_above": 7,
                "oldest_ready_age_above_ms": 90_000,
                "window_ms": 120_000,
                "sample_size": 3,
                "max_attempts": 4,
                "destination": {
                    "webhook_url": "http://h/x",
                    "signing_secret": {"file": "/run/secret"},
                    "headers": {"x-a": "1"},
                },
            })
        );
        assert_eq!(
            set(&["--slack-url", "https://hooks.slack.com/x"])
                .destination
                .slack_url
                .as_deref(),
            Some("https://hooks.slack.com/x")
        );
    }

    #[test]
    fn one_destination_and_webhook_flags_only_with_a_webhook() {
        for args in [
            &["--slack-url", "https://s/x", "--webhook-url", "http://h/x"][..],
            &["--signing-secret-env", "S"],
            &["--header", "a=b"],
            &["--slack-url", "https://s/x", "--header", "a=b"],
            &["--slack-url", "https://s/x", "--signing-secret-env", "S"],
            &["--slack-url", "https://s/x", "--signing-secret-file", "/f"],
            &[
                "--webhook-url",
                "http://h/x",
                "--signing-secret-env",
                "S",
                "--signing-secret-file",
                "/f",
            ],
            &["--window", "60"],
        ] {
            let line = ["sluice", "alert", "set", "a"].iter().chain(args);
            assert!(crate::parse(line).is_err(), "{args:?}");
        }
    }
}
