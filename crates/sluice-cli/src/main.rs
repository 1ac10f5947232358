//! The `sluice` binary: `serve` runs the server, `migrate` brings its store's schema up to date
//! (the only other command that opens the store itself); every other command is a thin client
//! that reaches a server only over HTTP, through [`sluice_client`].
//!
//! This file owns argument parsing and dispatch. How a failure is shown and which exit status
//! it gets is `failure`'s (one table for every command); the shared client flags (`--url`,
//! `--json`, `--token`) are `client_args`'. A command whose outcome is printed but is not the
//! one asked for (a drain that timed out, a cancel that found the message in flight) ends with
//! [`Exit`]: its own exit code and no `error:` line. The commands live in `cmd_*` modules,
//! printing in `output`.

mod client_args;
mod cmd_alert;
mod cmd_browse;
mod cmd_cancel;
mod cmd_dlq;
mod cmd_message;
mod cmd_migrate;
mod cmd_queue;
mod cmd_recv;
mod cmd_schedule;
mod cmd_send;
mod cmd_serve;
mod cmd_stats;
mod cmd_topic;
mod failure;
mod output;

use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

/// mimalloc keeps per-thread free lists, so the many short-lived buffers of request handling
/// cost less than with the system allocator (measured in BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `sluice --version`: the release and the commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SLUICE_COMMIT"),
    ")"
);

/// A durable message queue server and its command-line client.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version = VERSION,
    propagate_version = true,
    after_help = failure::EXIT_CODES
)]
struct Cli {
    #[command(flatten)]
    client: client_args::ClientArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (logs on stderr; stdout gets one ready line).
    // The client flags are global; serve has copies of its own (so they are not propagated to
    // it), hidden here and refused when given: they would do nothing for a server.
    #[command(
        mut_arg("url", |arg| arg.hide(true)),
        mut_arg("json", |arg| arg.hide(true)),
        mut_arg("token", |arg| arg.hide(true)),
        mut_arg("token_file", |arg| arg.hide(true))
    )]
    Serve(cmd_serve::ServeArgs),
    /// Bring the store's schema (the PostgreSQL database, or the SQLite file) to this build's
    /// version, then exit.
    #[command(
        mut_arg("url", |arg| arg.hide(true)),
        mut_arg("json", |arg| arg.hide(true)),
        mut_arg("token", |arg| arg.hide(true)),
        mut_arg("token_file", |arg| arg.hide(true))
    )]
    Migrate(cmd_migrate::MigrateArgs),
    /// Measure a server: throughput, latency, memory, restart time (starts its own unless --url is given).
    // Bench has its own --url and --json; it measures servers without access control, so the
    // token flags are hidden and refused like serve's client flags.
    #[command(
        mut_arg("token", |arg| arg.hide(true)),
        mut_arg("token_file", |arg| arg.hide(true))
    )]
    Bench(BenchCommand),
    /// Create, list, inspect, pause, purge, drain and delete queues.
    #[command(subcommand)]
    Queue(cmd_queue::QueueCommand),
    /// Depth, throughput and latency: every queue as one table, or one queue in detail.
    Stats(cmd_stats::StatsArgs),
    /// Inspect, replay and delete a queue's dead letters.
    #[command(subcommand)]
    Dlq(cmd_dlq::DlqCommand),
    /// Define, list, pause and delete schedules: messages the server enqueues on a cron pattern
    /// or an interval.
    #[command(subcommand)]
    Schedule(cmd_schedule::ScheduleCommand),
    /// Define, list and delete topics, and publish to them: one message, a copy in each
    /// subscribed queue whose filter takes it.
    #[command(subcommand)]
    Topic(cmd_topic::TopicCommand),
    /// Define, list and delete alerts: notifications to Slack or a webhook when messages are
    /// dead-lettered or a queue backs up, at most once per queue and kind per window.
    #[command(subcommand)]
    Alert(cmd_alert::AlertCommand),
    /// Enqueue a message given as JSON, or one per line from a file or stdin.
    Send(cmd_send::SendArgs),
    /// Receive (claim) messages and print them.
    Recv(cmd_recv::RecvArgs),
    /// Ack messages by receipt: they are done.
    Ack(cmd_recv::AckArgs),
    /// Nack a message by receipt: retry it later, or dead-letter it.
    Nack(cmd_recv::NackArgs),
    /// Extend a message's lease.
    Extend(cmd_recv::ExtendArgs),
    /// Show where a message is now, by message id or idempotency key (--id).
    Status(cmd_message::StatusArgs),
    /// List a queue's messages in one state in dispatch order, or search the acked messages it
    /// keeps (`queue create --keep-acked`) by message id, idempotency key, ordering key and ack
    /// time.
    Browse(cmd_browse::BrowseArgs),
    /// Show a message's push delivery log: each attempt's status or error, latency and answer.
    Deliveries(cmd_message::DeliveriesArgs),
    /// Cancel a message that has not been delivered yet, by message id or idempotency key (--id).
    #[command(after_help = cmd_cancel::EXIT_CODES)]
    Cancel(cmd_cancel::CancelArgs),
    /// Ask the server whether it takes new messages (GET /readyz): exit 0 when it does, 1 when
    /// not (disk full, writes stopped, shutting down) or unreachable, whatever the cause. For
    /// health checks, such as the container image's, which has no curl.
    Ready,
}

/// `sluice bench`'s flags (the `sluice-bench` crate's), and the token flags under their own ids,
/// so the global ones are not propagated to bench (and not listed in its help); [`parse`]
/// refuses them when given.
#[derive(Debug, clap::Args)]
struct BenchCommand {
    #[command(flatten)]
    args: sluice_bench::BenchArgs,
    #[command(flatten)]
    _tokens: client_args::TokenArgs,
}

/// Ends the command with this exit code and no `error:` line: the command ran and printed its
/// outcome, but the outcome is not the one asked for (e.g. a drain that timed out).
#[derive(Debug)]
pub struct Exit(pub u8);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit code {}", self.0)
    }
}

impl std::error::Error for Exit {}

fn main() -> ExitCode {
    // The server's expression workers (`sluice __expr-worker`, started by the server itself):
    // no runtime, no logging, no clap. Not a user command, so not in the help.
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref()
        == Some(std::ffi::OsStr::new(
            sluice_server::expr::protocol::WORKER_SUBCOMMAND,
        ))
    {
        return sluice_server::expr::worker::main(args);
    }
    let (cli, matches) = match parse(std::env::args_os()) {
        Ok(parsed) => parsed,
        Err(error) => return exit_on_usage_error(&error),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async_main(cli, matches))
}

/// Parses the command line, refusing the client flags given to `serve` and the token flags
/// given to `bench` (both hide them).
fn parse<I, T>(args: I) -> Result<(Cli, ArgMatches), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut command = Cli::command();
    let matches = command.try_get_matches_from_mut(args)?;
    let cli = Cli::from_arg_matches(&matches).map_err(|error| error.format(&mut command))?;
    let given =
        |matches: &ArgMatches, id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    let refused = |sub: &ArgMatches, ids: &[&'static str]| {
        ids.iter()
            .copied()
            .find(|id| given(sub, id) || given(&matches, id))
            .map(|id| format!("--{}", id.replace('_', "-")))
    };
    if let Some(flag) = matches
        .subcommand_matches("serve")
        .and_then(|serve| refused(serve, &client_args::CLIENT_ARG_IDS))
    {
        return Err(command.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "{flag} is a flag of the client commands; `sluice serve` takes --listen, \
                 --config and the [auth] tokens of its config file"
            ),
        ));
    }
    if let Some(flag) = matches
        .subcommand_matches("migrate")
        .and_then(|migrate| refused(migrate, &client_args::CLIENT_ARG_IDS))
    {
        return Err(command.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!(
                "{flag} is a flag of the client commands; `sluice migrate` takes --config, \
                 --store-url and --data"
            ),
        ));
    }
    if let Some(flag) = matches
        .subcommand_matches("bench")
        .and_then(|bench| refused(bench, &client_args::TOKEN_ARG_IDS))
    {
        return Err(command.error(
            clap::error::ErrorKind::ArgumentConflict,
            format!("{flag}: `sluice bench` measures servers without access control"),
        ));
    }
    Ok((cli, matches))
}

/// Ends on a command line clap refused (status 2), or after `--help`/`--version` (status 0).
/// With `--json` anywhere on the line, the error is printed as JSON like any other.
fn exit_on_usage_error(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    let is_output = matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    let json = std::env::args_os().any(|arg| arg == "--json");
    if is_output || !json {
        error.exit();
    }
    let text = error.render().to_string();
    let message = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ")
        .to_owned();
    failure::Failure {
        code: failure::FailureCode::Usage,
        message,
        details: None,
        retry_after_s: None,
        exit: 2,
    }
    .print(true);
    ExitCode::from(2)
}

async fn async_main(cli: Cli, matches: ArgMatches) -> ExitCode {
    let json = cli.client.json;
    let url = cli.client.url.clone();
    match run(cli, &matches).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<Exit>() {
            Some(Exit(code)) => ExitCode::from(*code),
            None => {
                let failure = failure::Failure::of(&error, &url);
                failure.print(json);
                ExitCode::from(failure.exit)
            }
        },
    }
}

async fn run(cli: Cli, matches: &ArgMatches) -> anyhow::Result<()> {
    let client = || cli.client.client(matches);
    let json = cli.client.json;
    match cli.command {
        Command::Serve(args) => cmd_serve::run(args).await,
        Command::Migrate(args) => cmd_migrate::run(args).await,
        Command::Bench(command) => sluice_bench::run(command.args).await,
        Command::Queue(command) => cmd_queue::run(&client()?, command, json).await,
        Command::Stats(args) => cmd_stats::run(&client()?, args, json).await,
        Command::Dlq(command) => cmd_dlq::run(&client()?, command, json).await,
        Command::Schedule(command) => cmd_schedule::run(&client()?, command, json).await,
        Command::Topic(command) => cmd_topic::run(&client()?, command, json).await,
        Command::Alert(command) => cmd_alert::run(&client()?, command, json).await,
        Command::Cancel(args) => cmd_cancel::run(&client()?, args, json).await,
        Command::Send(args) => cmd_send::run(&client()?, args, json).await,
        Command::Recv(args) => cmd_recv::recv(&client()?, args, json).await,
        Command::Ack(args) => cmd_recv::ack(&client()?, args, json).await,
        Command::Nack(args) => cmd_recv::nack(&client()?, args, json).await,
        Command::Extend(args) => cmd_recv::extend(&client()?, args, json).await,
        Command::Status(args) => cmd_message::status(&client()?, args, json).await,
        Command::Deliveries(args) => cmd_message::deliveries(&client()?, args, json).await,
        Command::Browse(args) => cmd_browse::run(&client()?, args, json).await,
        Command::Ready => {
            // Any failure is 1, the one code a container health check reads as unhealthy.
            let answer = match client()?.readyz().await {
                Ok(answer) => answer,
                Err(error) => {
                    eprintln!("error: not ready: {error}");
                    return Err(Exit(1).into());
                }
            };
            if json {
                return output::json(&answer);
            }
            output::line(format_args!("ready: {}", answer.status))
        }
    }
}

/// True when stdout was closed early (`sluice recv | head`), which is not a failure.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|json| json.io_error_kind())
                .is_some_and(|kind| kind == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn url_and_json_work_before_and_after_the_subcommand() {
        for args in [
            ["sluice", "--url", "http://h:1", "--json", "queue", "list"],
            ["sluice", "queue", "list", "--url", "http://h:1", "--json"],
        ] {
            let (cli, _) = parse(args).unwrap();
            assert_eq!(cli.client.url, "http://h:1");
            assert!(cli.client.json);
        }
    }

    #[test]
    fn serve_neither_shows_nor_takes_the_client_flags() {
        let mut command = Cli::command();
        let help = command
            .find_subcommand_mut("serve")
            .unwrap()
            .render_long_help()
            .to_string();
        for flag in ["--url", "--json", "--token", "--token-file"] {
            assert!(!help.contains(flag), "{flag} in serve --help:\n{help}");
        }
        assert!(help.contains("--listen"), "{help}");
        for args in [
            &["sluice", "serve", "--url", "http://h:1"][..],
            &["sluice", "--json", "serve"],
            &["sluice", "serve", "--token", "t"],
        ] {
            let error = parse(args.iter().copied()).unwrap_err();
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{args:?}"
            );
        }
        let (cli, _) = parse(["sluice", "serve", "--listen", "127.0.0.1:0"]).unwrap();
        assert!(matches!(cli.command, Command::Serve(_)));
        let bench_help = command
            .find_subcommand_mut("bench")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(!bench_help.contains("--token"), "{bench_help}");
        assert!(parse(["sluice", "bench", "--token", "t"]).is_err());
        assert!(parse(["sluice", "bench", "--url", "http://h:1"]).is_ok());
    }
}
