//! `sluice schedule set|list|show|pause|resume|delete`: recurring messages the server enqueues.
//! Reaches the server only through [`sluice_client::Client`].

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_client::Client;
use sluice_client::wire::{MissedRuns, ScheduleMessage, ScheduleOut, ScheduleSpec};

use crate::failure::usage;
use crate::output;

/// The `schedule` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ScheduleCommand {
    /// Define a schedule, or replace the one of that name.
    ///
    /// Each run enqueues BODY into --queue, at the times of --cron (in --timezone) or every
    /// --every. A replaced schedule keeps where it stands unless its timing changes.
    Set(Box<SetArgs>),
    /// List every schedule with its next and last run.
    List,
    /// Show one schedule: its definition, next and last run, counts and last error.
    Show {
        /// The schedule's name.
        name: String,
    },
    /// Stop making runs until resumed (runs passed meanwhile are not missed runs).
    Pause {
        /// The schedule's name.
        name: String,
    },
    /// Make runs again.
    Resume {
        /// The schedule's name.
        name: String,
    },
    /// Delete a schedule: no run is made after it answers.
    Delete {
        /// The schedule's name.
        name: String,
    },
}

/// Flags of `schedule set`.
#[derive(Debug, clap::Args)]
pub struct SetArgs {
    /// The schedule's name (the alphabet of queue names).
    name: String,
    /// The message each run enqueues, as JSON (a bare word is taken as a JSON string).
    body: String,
    /// The queue runs enqueue into.
    #[arg(long)]
    queue: String,
    /// A cron pattern: "min hour day month weekday", with an optional leading seconds field.
    #[arg(long, conflicts_with = "every", required_unless_present = "every")]
    cron: Option<String>,
    /// A fixed interval such as 30s or 1h: runs at every multiple of it since the Unix epoch.
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    every: Option<Duration>,
    /// The IANA time zone the cron pattern is read in [default: UTC].
    #[arg(long, requires = "cron")]
    timezone: Option<String>,
    /// A header NAME=VALUE on each run's message; repeatable.
    #[arg(long = "header", value_name = "NAME=VALUE", value_parser = crate::cmd_send::parse_header)]
    headers: Vec<(String, String)>,
    /// Ordering key of each run's message.
    #[arg(long)]
    key: Option<String>,
    /// Priority of each run's message (higher first).
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Make each run's message visible up to this much later (a fixed share per run).
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    jitter: Option<Duration>,
    /// Runs not made on time (downtime, a clock jump): skip, run_once or run_all [default: skip].
    #[arg(long, value_parser = parse_missed)]
    missed: Option<MissedRuns>,
    /// With --missed run_all: at most this many missed runs at once [default: 100].
    #[arg(long, value_name = "N")]
    missed_max: Option<u32>,
    /// With --missed skip: how late a run may still be made [default: 1m].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    grace: Option<Duration>,
    /// Define it paused.
    #[arg(long)]
    paused: bool,
}

/// Runs one `schedule` subcommand.
pub async fn run(client: &Client, command: ScheduleCommand, json: bool) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Set(args) => {
            let name = args.name.clone();
            let out = client.schedule_put(&name, &spec(*args)?).await?;
            if json {
                return output::json(&out);
            }
            let verb = if out.created { "created" } else { "updated" };
            output::line(format_args!(
                "{verb} schedule {name}: next run {}",
                output::or_dash(out.schedule.next_run_at.as_deref())
            ))
        }
        ScheduleCommand::List => {
            let out = client.schedule_list().await?;
            if json {
                return output::json(&out);
            }
            if out.schedules.is_empty() {
                eprintln!("no schedules");
                return Ok(());
            }
            let mut table = output::table(&[
                "name", "queue", "when", "next run", "last run", "runs", "skipped", "state",
            ]);
            for schedule in &out.schedules {
                table.add_row(vec![
                    schedule.name.clone(),
                    schedule.spec.queue.clone(),
                    when(schedule),
                    output::or_dash(schedule.next_run_at.as_deref()),
                    output::or_dash(schedule.last_run_at.as_deref()),
                    schedule.runs.to_string(),
                    schedule.skipped_runs.to_string(),
                    state(schedule),
                ]);
            }
            output::print_table(&table)
        }
        ScheduleCommand::Show { name } => {
            let out = client.schedule_get(&name).await?;
            if json {
                return output::json(&out);
            }
            show(&out)
        }
        ScheduleCommand::Pause { name } => pause(client, &name, true, json).await,
        ScheduleCommand::Resume { name } => pause(client, &name, false, json).await,
        ScheduleCommand::Delete { name } => {
            let out = client.schedule_delete(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!("deleted schedule {name}"))
        }
    }
}

async fn pause(client: &Client, name: &str, paused: bool, json: bool) -> anyhow::Result<()> {
    let out = client.schedule_pause(name, paused).await?;
    if json {
        return output::json(&out);
    }
    let verb = if paused { "paused" } else { "resumed" };
    output::line(format_args!(
        "{verb} schedule {name}: next run {}",
        output::or_dash(out.next_run_at.as_deref())
    ))
}

/// The definition `schedule set` sends.
fn spec(args: SetArgs) -> anyhow::Result<ScheduleSpec> {
    let body = serde_json::from_str(&args.body)
        .unwrap_or_else(|_| serde_json::Value::String(args.body.clone()));
    let headers: BTreeMap<String, String> = args.headers.into_iter().collect();
    let ms = |duration: Duration| u64::try_from(output::millis(duration)).unwrap_or(u64::MAX);
    if args.missed_max.is_some() && args.missed != Some(MissedRuns::RunAll) {
        return Err(usage("--missed-max goes with --missed run_all"));
    }
    Ok(ScheduleSpec {
        queue: args.queue,
        cron: args.cron,
        every_ms: args.every.map(ms),
        timezone: args.timezone,
        message: ScheduleMessage {
            body: Some(body),
            body_base64: None,
            headers: (!headers.is_empty()).then_some(headers),
            key: args.key,
            priority: args.priority,
        },
        jitter_ms: args.jitter.map(ms),
        paused: args.paused.then_some(true),
        missed: args.missed,
        missed_max: args.missed_max,
        grace_ms: args.grace.map(ms),
    })
}

fn show(out: &ScheduleOut) -> anyhow::Result<()> {
    let spec = &out.spec;
    let mut rows = vec![
        ("name", out.name.clone()),
        ("queue", spec.queue.clone()),
        ("when", when(out)),
        ("state", state(out)),
        ("next run", output::or_dash(out.next_run_at.as_deref())),
        ("last run", output::or_dash(out.last_run_at.as_deref())),
        (
            "last enqueued",
            output::or_dash(out.last_enqueued_at.as_deref()),
        ),
        ("last message", output::or_dash(out.last_message_id)),
        ("runs", out.runs.to_string()),
        ("skipped runs", out.skipped_runs.to_string()),
        (
            "missed runs",
            spec.missed.unwrap_or_default().as_str().to_owned(),
        ),
        (
            "jitter",
            output::or_dash(spec.jitter_ms.map(|ms| output::human_ms(ms as i64))),
        ),
        ("last error", output::or_dash(out.last_error.as_deref())),
    ];
    if let Some(body) = &spec.message.body {
        rows.push(("body", body.to_string()));
    }
    output::print_table(&output::key_value_table(rows))
}

/// The timing as one cell: the cron pattern and its zone, or the interval.
fn when(schedule: &ScheduleOut) -> String {
    let spec = &schedule.spec;
    match (&spec.cron, spec.every_ms) {
        (Some(cron), _) => format!("{cron} ({})", spec.timezone.as_deref().unwrap_or("UTC")),
        (None, Some(every)) => format!("every {}", output::human_ms(every as i64)),
        (None, None) => "-".into(),
    }
}

fn state(schedule: &ScheduleOut) -> String {
    match (&schedule.last_error, schedule.paused) {
        (_, true) => "paused".into(),
        (Some(_), false) => "failing".into(),
        (None, false) => "active".into(),
    }
}

fn parse_missed(text: &str) -> Result<MissedRuns, String> {
    match text {
        "skip" => Ok(MissedRuns::Skip),
        "run_once" => Ok(MissedRuns::RunOnce),
        "run_all" => Ok(MissedRuns::RunAll),
        other => Err(format!("{other:?}: one of skip, run_once, run_all")),
    }
}
