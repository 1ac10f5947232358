//! `sluice queue create|update|list|get|stats|pause|resume|push-pause|push-resume|purge|drain|delete`: queue
//! administration over the HTTP API.
//!
//! Reaches the server only through [`sluice_client::Client`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use sluice_client::Client;
use sluice_client::wire::{
    BackoffSpec, PushSpec, QueueOut, QueueSpec, QueueStatsOut, RateLimitSpec, SecretRef,
};

use crate::output;

/// Exit code of `queue drain` when the timeout passed before the queue was empty.
pub const NOT_DRAINED: u8 = crate::failure::TIMED_OUT;

/// The `queue` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// Create a queue (and its dead-letter queue), or update the settings given.
    Create(CreateArgs),
    /// Update the settings given of an existing queue (fails with queue_not_found if absent).
    Update(CreateArgs),
    /// List every queue with its depth.
    List,
    /// Show one queue's settings and stats.
    Get {
        /// Queue name.
        name: String,
    },
    /// Show one queue's depth and counters since the server started.
    Stats {
        /// Queue name.
        name: String,
    },
    /// Stop deliveries: receives get nothing until `resume`; enqueues are still stored and
    /// messages already received can still be acked, nacked and extended.
    Pause {
        /// Queue name.
        name: String,
    },
    /// Start deliveries again after `pause`.
    Resume {
        /// Queue name.
        name: String,
    },
    /// Stop calling the queue's push destination (admin); messages wait in the queue. Kept
    /// across restarts.
    PushPause {
        /// Queue name.
        name: String,
    },
    /// Call the queue's push destination again after `push-pause`.
    PushResume {
        /// Queue name.
        name: String,
    },
    /// Remove every ready and delayed message; in-flight ones stay with their consumers.
    Purge {
        /// Queue name.
        name: String,
        /// Go ahead without asking (needed when stdin is a terminal).
        #[arg(long, short)]
        yes: bool,
    },
    /// Wait until the queue holds no ready, delayed or in-flight message (enqueues go on).
    #[command(
        after_help = "Exit status: 0 when the queue was drained; 7 when the timeout \
                      passed first (what is left is printed); the others as in `sluice --help`."
    )]
    Drain {
        /// Queue name.
        name: String,
        /// Wait at most this long, up to 15m: 30s, 5m, 1500ms.
        #[arg(long, value_name = "DURATION", value_parser = output::parse_duration, default_value = "30s")]
        timeout: Duration,
    },
    /// Delete a queue and its messages, and its dead-letter queue with its dead letters
    /// (unless another queue uses it, or --keep-dead-letters).
    Delete {
        /// Queue name.
        name: String,
        /// Keep its dead-letter queue and dead letters.
        #[arg(long)]
        keep_dead_letters: bool,
    },
}

/// Flags of `queue create` and `queue update`; unset flags keep the current value (update) or
/// the default (create).
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Queue name: A-Z, a-z, 0-9, '_', '.' and '-'.
    name: String,
    /// Lease length of a receive, e.g. 30s, 5m [server default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    visibility_timeout: Option<Duration>,
    /// Deliveries before dead-lettering; 0 retries forever [server default: 5].
    #[arg(long, value_name = "N")]
    max_attempts: Option<u32>,
    /// Delivery order [server default: unordered].
    #[arg(long, value_parser = ["unordered", "fifo", "per_key"])]
    ordering: Option<String>,
    /// Dead-letter queue name; "" for none [server default: NAME.dlq].
    #[arg(long, value_name = "NAME")]
    dead_letter_queue: Option<String>,
    /// Largest body in bytes [server default: 1048576].
    #[arg(long, value_name = "N")]
    max_message_bytes: Option<usize>,
    /// How long an idempotency key (`send --id`) is remembered, e.g. 1d, 12h [server default:
    /// 1d].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    dedup_window: Option<Duration>,
    /// What makes two messages the same one: `id` (only `send --id`) or `content` (also the
    /// same key and body, for messages sent without an id) [server default: id].
    #[arg(long, value_parser = ["id", "content"])]
    dedup: Option<String>,
    /// First retry delay, e.g. 1s, 500ms [server default: 1s].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    backoff_initial: Option<Duration>,
    /// Largest retry delay, e.g. 1m [server default: 1m].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    backoff_max: Option<Duration>,
    /// Growth of the retry delay per attempt [server default: 2].
    #[arg(long, value_name = "FACTOR")]
    backoff_factor: Option<f64>,
    /// Retention: older messages are removed, e.g. 4d, 12h, 90m [server default: 4d; 14d for
    /// a dead-letter queue].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    max_age: Option<Duration>,
    /// What retention does with an old message [server default: drop].
    #[arg(long, value_parser = ["drop", "dead_letter"])]
    on_expire: Option<String>,
    /// Keep acked messages with their body and result this long, to browse and search them
    /// (`sluice browse QUEUE --state acked`), e.g. 1h, 7d; 0 = drop them at the ack
    /// [server default: 0].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    keep_acked: Option<Duration>,
    /// Most messages held (ready + delayed + in flight); enqueues beyond it get 503
    /// queue_full; 0 = unbounded [server default: unbounded].
    #[arg(long, value_name = "N")]
    max_depth: Option<u64>,
    /// Most messages out to consumers at once; 0 = unbounded [server default: unbounded].
    #[arg(long, value_name = "N")]
    max_in_flight: Option<u32>,
    /// Deliveries per second (fractions allowed); 0 removes the limit [server default: none].
    #[arg(long, value_name = "PER_SECOND")]
    rate_limit: Option<f64>,
    /// Deliveries allowed at once after a quiet spell, with --rate-limit [server default: one
    /// second's worth].
    #[arg(long, value_name = "N", requires = "rate_limit")]
    burst: Option<u32>,
    /// A JSON Schema file every JSON body must satisfy; `none` removes the schema.
    #[arg(long, value_name = "FILE|none")]
    schema: Option<PathBuf>,
    /// Push every message to this http(s) URL instead of waiting for consumers; `none` removes
    /// the destination (other push settings: config file or API).
    #[arg(long, value_name = "URL|none")]
    push_url: Option<String>,
    /// With --push-url: sign pushes (Standard Webhooks) with the `whsec_` secret in this
    /// environment variable of the server.
    #[arg(long, value_name = "NAME", requires = "push_url")]
    push_secret_env: Option<String>,
    /// Delay given to messages sent without one, e.g. 30s [server default: 0].
    #[arg(long, value_name = "DURATION", value_parser = output::parse_duration)]
    delay: Option<Duration>,
    /// A tag KEY=VALUE (repeat it); the tags given replace the queue's tags.
    #[arg(long = "tag", value_name = "KEY=VALUE", value_parser = parse_tag)]
    tags: Vec<(String, String)>,
}

fn parse_tag(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("{text:?} is not KEY=VALUE"))
}

impl CreateArgs {
    fn spec(&self) -> anyhow::Result<QueueSpec> {
        let backoff = BackoffSpec {
            initial_ms: self.backoff_initial.map(output::millis),
            max_ms: self.backoff_max.map(output::millis),
            factor: self.backoff_factor,
            jitter: None,
        };
        let schema = match &self.schema {
            None => None,
            Some(path) if path.as_os_str() == "none" => Some(serde_json::Value::Null),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the schema file {}", path.display()))?;
                let schema: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("the schema file {} is not JSON", path.display()))?;
                Some(schema)
            }
        };
        Ok(QueueSpec {
            visibility_timeout_ms: self.visibility_timeout.map(output::millis),
            max_attempts: self.max_attempts,
            backoff: (backoff != BackoffSpec::default()).then_some(backoff),
            dead_letter_queue: self.dead_letter_queue.clone(),
            max_message_bytes: self.max_message_bytes,
            ordering: self.ordering.clone(),
            dedup_window_ms: self.dedup_window.map(output::millis),
            dedup: self.dedup.clone(),
            max_age_ms: self.max_age.map(output::millis),
            on_expire: self.on_expire.clone(),
            keep_acked_ms: self.keep_acked.map(output::millis),
            max_depth: self.max_depth,
            max_in_flight: self.max_in_flight,
            rate_limit: self.rate_limit.map(|per_second| RateLimitSpec {
                per_second,
                burst: self.burst,
            }),
            schema,
            delay_ms: self.delay.map(output::millis),
            tags: (!self.tags.is_empty()).then(|| self.tags.iter().cloned().collect()),
            push: self.push_url.as_deref().map(|url| {
                (url != "none").then(|| PushSpec {
                    url: url.to_owned(),
                    method: None,
                    headers: None,
                    timeout_ms: None,
                    transform: None,
                    signing_secret: self.push_secret_env.clone().map(|env| SecretRef {
                        env: Some(env),
                        file: None,
                    }),
                    retry_client_errors: None,
                    concurrency: None,
                    secret_path: None,
                })
            }),
        })
    }
}

/// Why a queue is stuck, as `queue list` shows it: `dead_letters, age`, or `-`.
fn stuck_text(reasons: &[sluice_wire::StuckReason]) -> String {
    if reasons.is_empty() {
        return "-".into();
    }
    reasons
        .iter()
        .map(|reason| reason.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs one `queue` subcommand.
pub async fn run(client: &Client, command: QueueCommand, json: bool) -> anyhow::Result<()> {
    match command {
        QueueCommand::Create(args) => put(client, args, json).await,
        QueueCommand::Update(args) => {
            // Refuse to create: an update names a queue that exists.
            client.queue_get(&args.name).await?;
            put(client, args, json).await
        }
        QueueCommand::List => {
            let out = client.queue_list().await?;
            if json {
                return output::json(&out);
            }
            let mut table = output::table(&[
                "name",
                "ready",
                "delayed",
                "in flight",
                "dlq",
                "oldest ready age",
                "ordering",
                "stuck",
            ]);
            for queue in &out.queues {
                let stats = &queue.stats;
                table.add_row(vec![
                    queue.name.clone(),
                    stats.ready.to_string(),
                    stats.delayed.to_string(),
                    stats.in_flight.to_string(),
                    output::or_dash(stats.dead_lettered),
                    output::or_dash(stats.oldest_ready_age_ms.map(output::human_ms)),
                    queue.config.ordering.clone(),
                    stuck_text(&stats.stuck),
                ]);
            }
            if out.queues.is_empty() {
                eprintln!("no queues");
                return Ok(());
            }
            output::print_table(&table)
        }
        QueueCommand::Get { name } => {
            let out = client.queue_get(&name).await?;
            if json {
                return output::json(&out);
            }
            let mut table = settings_table(&out);
            for row in stats_rows(&out.stats) {
                table.add_row(vec![row.0.to_owned(), row.1]);
            }
            output::print_table(&table)
        }
        QueueCommand::Stats { name } => {
            let out = client.queue_stats(&name).await?;
            if json {
                return output::json(&out);
            }
            output::print_table(&output::key_value_table(stats_rows(&out)))
        }
        QueueCommand::Pause { name } => {
            let out = client.queue_pause(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "paused queue {} ({})",
                out.name,
                depth_text(&out.stats)
            ))
        }
        QueueCommand::Resume { name } => {
            let out = client.queue_resume(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "resumed queue {} ({})",
                out.name,
                depth_text(&out.stats)
            ))
        }
        QueueCommand::PushPause { name } => {
            let out = client.queue_push_pause(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "paused push delivery of queue {} ({})",
                out.name,
                depth_text(&out.stats)
            ))
        }
        QueueCommand::PushResume { name } => {
            let out = client.queue_push_resume(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "resumed push delivery of queue {} ({})",
                out.name,
                depth_text(&out.stats)
            ))
        }
        QueueCommand::Purge { name, yes } => {
            output::require_yes(
                yes,
                &format!("purging every ready and delayed message of {name} cannot be undone"),
            )?;
            let out = client.queue_purge(&name).await?;
            if json {
                return output::json(&out);
            }
            output::line(format_args!(
                "purged {} messages from {name} ({} in flight left)",
                out.purged, out.in_flight
            ))
        }
        QueueCommand::Drain { name, timeout } => {
            let out = client
                .queue_drain(&name, Some(output::millis(timeout)))
                .await?;
            if json {
                output::json(&out)?;
            } else if out.drained {
                output::line(format_args!(
                    "drained {name} in {}",
                    output::human_ms(out.waited_ms as i64)
                ))?;
            } else {
                output::line(format_args!(
                    "not drained after {}: ready {}, delayed {}, in flight {}",
                    output::human_ms(out.waited_ms as i64),
                    out.ready,
                    out.delayed,
                    out.in_flight
                ))?;
            }
            if out.drained {
                Ok(())
            } else {
                Err(crate::Exit(NOT_DRAINED).into())
            }
        }
        QueueCommand::Delete {
            name,
            keep_dead_letters,
        } => {
            let dead_letters = if keep_dead_letters {
                sluice_wire::DeadLettersOnDelete::Keep
            } else {
                sluice_wire::DeadLettersOnDelete::Delete
            };
            let out = client.queue_delete_with(&name, dead_letters).await?;
            if json {
                return output::json(&out);
            }
            match &out.dead_letter_queue {
                Some(dlq) => output::line(format_args!(
                    "deleted queue {name} ({} messages removed) and its dead-letter queue {dlq} ({} dead letters removed)",
                    out.messages_removed, out.dead_letters_removed
                )),
                None => output::line(format_args!(
                    "deleted queue {name} ({} messages removed)",
                    out.messages_removed
                )),
            }
        }
    }
}

/// `queue create` and `queue update`: one PUT with the settings given.
async fn put(client: &Client, args: CreateArgs, json: bool) -> anyhow::Result<()> {
    let out = client.queue_put(&args.name, &args.spec()?).await?;
    if json {
        return output::json(&out);
    }
    let verb = if out.created { "created" } else { "updated" };
    eprintln!("{verb} queue {}", out.queue.name);
    output::print_table(&settings_table(&out.queue))
}

/// `ready 3, delayed 0, in flight 1`.
fn depth_text(stats: &QueueStatsOut) -> String {
    format!(
        "ready {}, delayed {}, in flight {}",
        stats.ready, stats.delayed, stats.in_flight
    )
}

/// `unbounded` for an absent limit.
fn limit_text<T: ToString>(limit: Option<T>) -> String {
    limit.map_or_else(|| "unbounded".to_owned(), |limit| limit.to_string())
}

/// A queue's name and settings as a two-column table.
fn settings_table(queue: &QueueOut) -> comfy_table::Table {
    let config = &queue.config;
    let backoff = &config.backoff;
    output::key_value_table([
        ("name", queue.name.clone()),
        ("ordering", config.ordering.clone()),
        (
            "visibility timeout",
            output::human_ms(config.visibility_timeout_ms),
        ),
        (
            "max attempts",
            if config.max_attempts == 0 {
                "unlimited".to_owned()
            } else {
                config.max_attempts.to_string()
            },
        ),
        (
            "backoff",
            format!(
                "{} to {}, x{}{}",
                output::human_ms(backoff.initial_ms),
                output::human_ms(backoff.max_ms),
                backoff.factor,
                if backoff.jitter { ", jitter" } else { "" }
            ),
        ),
        (
            "dead-letter queue",
            output::or_dash(config.dead_letter_queue.as_ref()),
        ),
        ("max message bytes", config.max_message_bytes.to_string()),
        ("dedup window", output::human_ms(config.dedup_window_ms)),
        ("dedup by", config.dedup.clone()),
        ("max age", output::human_ms(config.max_age_ms)),
        ("on expire", config.on_expire.clone()),
        (
            "keep acked",
            if config.keep_acked_ms > 0 {
                output::human_ms(config.keep_acked_ms)
            } else {
                "-".to_owned()
            },
        ),
        ("max depth", limit_text(config.max_depth)),
        ("max in flight", limit_text(config.max_in_flight)),
        (
            "rate limit",
            config.rate_limit.as_ref().map_or_else(
                || "none".to_owned(),
                |limit| format!("{}/s, burst {}", limit.per_second, limit.burst),
            ),
        ),
        (
            "schema",
            config.schema.as_ref().map_or_else(
                || "none".to_owned(),
                |schema| output::cut(&schema.to_string(), 60),
            ),
        ),
    ])
}

/// Depth, recent throughput, latency and counters as rows.
pub fn stats_rows(stats: &QueueStatsOut) -> Vec<(&'static str, String)> {
    let counters = &stats.counters;
    let latency = |pick: fn(&sluice_client::wire::LatencyOut) -> u64| {
        output::or_dash(
            stats
                .latency_ms
                .as_ref()
                .map(|latency| output::human_ms(pick(latency) as i64)),
        )
    };
    let throughput = |span: &sluice_client::wire::ThroughputOut| {
        format!(
            "{} ({}/s)",
            span.enqueued,
            output::rate(span.enqueued_per_s)
        )
    };
    let push = stats.push.as_ref().map(|push| {
        if !push.enabled {
            "off (server started with push off)"
        } else if push.paused {
            "paused"
        } else {
            "running"
        }
    });
    vec![
        ("paused", stats.paused.to_string()),
        ("push delivery", output::or_dash(push)),
        ("ready", stats.ready.to_string()),
        ("delayed", stats.delayed.to_string()),
        ("in flight", stats.in_flight.to_string()),
        ("in dead-letter queue", output::or_dash(stats.dead_lettered)),
        (
            "oldest ready age",
            output::or_dash(stats.oldest_ready_age_ms.map(output::human_ms)),
        ),
        ("enqueued, last 1m", throughput(&stats.last_1m)),
        (
            "acked, last 1m",
            format!(
                "{} ({}/s)",
                stats.last_1m.acked,
                output::rate(stats.last_1m.acked_per_s)
            ),
        ),
        (
            "failed, last 1m",
            format!(
                "{} ({}/s)",
                stats.last_1m.failed,
                output::rate(stats.last_1m.failed_per_s)
            ),
        ),
        ("enqueued, last 5m", throughput(&stats.last_5m)),
        (
            "acked, last 5m",
            format!(
                "{} ({}/s)",
                stats.last_5m.acked,
                output::rate(stats.last_5m.acked_per_s)
            ),
        ),
        (
            "failed, last 5m",
            format!(
                "{} ({}/s)",
                stats.last_5m.failed,
                output::rate(stats.last_5m.failed_per_s)
            ),
        ),
        (
            "latency samples, 5m",
            output::or_dash(stats.latency_ms.as_ref().map(|latency| latency.samples)),
        ),
        ("latency p50", latency(|latency| latency.p50)),
        ("latency p95", latency(|latency| latency.p95)),
        ("latency p99", latency(|latency| latency.p99)),
        ("enqueued", counters.enqueued.to_string()),
        ("delivered", counters.delivered.to_string()),
        ("acked", counters.acked.to_string()),
        ("nacked", counters.nacked.to_string()),
        ("dead-lettered", counters.dead_lettered.to_string()),
        ("lease expired", counters.lease_expired.to_string()),
        ("expired", counters.expired.to_string()),
        ("rejected (queue full)", counters.rejected.to_string()),
        ("cancelled", counters.cancelled.to_string()),
        ("purged", counters.purged.to_string()),
        ("deduplicated", counters.deduplicated.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: QueueCommand,
    }

    fn spec(args: &[&str]) -> QueueSpec {
        let cli = Cli::try_parse_from(args).unwrap();
        let (QueueCommand::Create(args) | QueueCommand::Update(args)) = cli.command else {
            panic!("not create or update");
        };
        args.spec().unwrap()
    }

    #[test]
    fn flow_control_flags_fill_the_spec() {
        let spec = spec(&[
            "queue",
            "create",
            "q",
            "--visibility-timeout",
            "1m",
            "--dedup-window",
            "12h",
            "--backoff-initial",
            "500ms",
            "--backoff-max",
            "2m",
            "--max-age",
            "2h",
            "--on-expire",
            "dead_letter",
            "--max-depth",
            "100",
            "--max-in-flight",
            "0",
            "--rate-limit",
            "2.5",
            "--burst",
            "5",
            "--schema",
            "none",
        ]);
        assert_eq!(spec.max_age_ms, Some(7_200_000));
        assert_eq!(spec.visibility_timeout_ms, Some(60_000));
        assert_eq!(spec.dedup_window_ms, Some(43_200_000));
        let backoff = spec.backoff.as_ref().unwrap();
        assert_eq!(
            (backoff.initial_ms, backoff.max_ms),
            (Some(500), Some(120_000))
        );
        assert_eq!(spec.on_expire.as_deref(), Some("dead_letter"));
        assert_eq!(spec.max_depth, Some(100));
        assert_eq!(spec.max_in_flight, Some(0));
        assert_eq!(
            spec.rate_limit,
            Some(RateLimitSpec {
                per_second: 2.5,
                burst: Some(5)
            })
        );
        assert_eq!(spec.schema, Some(serde_json::Value::Null));
        let body = serde_json::to_value(&spec).unwrap();
        assert_eq!(body["schema"], serde_json::Value::Null, "{body}");
        assert_eq!(
            body["backoff"],
            serde_json::json!({"initial_ms": 500, "max_ms": 120_000})
        );
    }

    #[test]
    fn durations_need_a_unit() {
        for flag in [
            "--visibility-timeout",
            "--dedup-window",
            "--backoff-initial",
            "--max-age",
        ] {
            let error = Cli::try_parse_from(["queue", "create", "q", flag, "30"]).unwrap_err();
            assert!(error.to_string().contains("has no unit"), "{flag}: {error}");
        }
        assert!(Cli::try_parse_from(["queue", "drain", "q", "--timeout", "500"]).is_err());
    }

    #[test]
    fn unset_flags_leave_the_spec_empty() {
        assert_eq!(spec(&["queue", "update", "q"]), QueueSpec::default());
        let body = serde_json::to_value(spec(&["queue", "update", "q"])).unwrap();
        assert_eq!(body, serde_json::json!({}));
    }

    #[test]
    fn burst_needs_a_rate_limit() {
        assert!(Cli::try_parse_from(["queue", "create", "q", "--burst", "3"]).is_err());
    }

    #[test]
    fn a_schema_file_is_read_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("schema.json");
        std::fs::write(&path, r#"{"type": "object", "required": ["n"]}"#).unwrap();
        let spec = spec(&["queue", "create", "q", "--schema", path.to_str().unwrap()]);
        assert_eq!(spec.schema.unwrap()["required"][0], "n");
        std::fs::write(&path, "not json").unwrap();
        let cli = Cli::try_parse_from(["queue", "create", "q", "--schema", path.to_str().unwrap()])
            .unwrap();
        let QueueCommand::Create(args) = cli.command else {
            unreachable!()
        };
        assert!(args.spec().is_err());
    }
}
