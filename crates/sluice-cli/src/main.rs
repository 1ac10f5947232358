//! The `sluice` binary: `serve` runs the server; every other command is a thin client that
//! reaches a server only over HTTP, through [`sluice_client`].
//!
//! This file owns argument parsing, dispatch and how errors are shown: `error: <code>: <message>`
//! on stderr and a non-zero exit. A command whose outcome is printed but is not the one asked
//! for (a drain that timed out, a cancel that found the message in flight) ends with [`Exit`]:
//! its own exit code and no `error:` line. The commands live in `cmd_*` modules, printing in
//! `output`.

mod bench;
mod cmd_cancel;
mod cmd_dlq;
mod cmd_message;
mod cmd_queue;
mod cmd_recv;
mod cmd_send;
mod cmd_serve;
mod cmd_stats;
mod output;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc keeps per-thread free lists, so the many short-lived buffers of request handling
/// cost less than with the system allocator (measured in BENCHMARKS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use sluice_client::Client;

/// A durable message queue server and its command-line client.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, propagate_version = true)]
struct Cli {
    /// Server URL for client commands.
    #[arg(long, global = true, env = "SLUICE_URL", default_value = sluice_client::DEFAULT_URL)]
    url: String,
    /// Print the server's JSON answers instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server (logs on stderr; stdout gets one ready line).
    Serve(cmd_serve::ServeArgs),
    /// Measure a server: throughput, latency, memory, restart time (starts its own unless --url is given).
    Bench(bench::BenchArgs),
    /// Create, list, inspect, pause, purge, drain and delete queues.
    #[command(subcommand)]
    Queue(cmd_queue::QueueCommand),
    /// Depth, throughput and latency: every queue as one table, or one queue in detail.
    Stats(cmd_stats::StatsArgs),
    /// Inspect, replay and delete a queue's dead letters.
    #[command(subcommand)]
    Dlq(cmd_dlq::DlqCommand),
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
    /// Show where a message is now, by message id or idempotency key.
    Status(cmd_message::StatusArgs),
    /// Cancel a message that has not been delivered yet, by message id or idempotency key.
    #[command(after_help = cmd_cancel::EXIT_CODES)]
    Cancel(cmd_cancel::CancelArgs),
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
    let cli = Cli::parse();
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
    runtime.block_on(async_main(cli))
}

async fn async_main(cli: Cli) -> ExitCode {
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => match error.downcast_ref::<Exit>() {
            Some(Exit(code)) => ExitCode::from(*code),
            None => {
                report(&error);
                ExitCode::FAILURE
            }
        },
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let client = || Client::new(&cli.url);
    let json = cli.json;
    match cli.command {
        Command::Serve(args) => cmd_serve::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Queue(command) => cmd_queue::run(&client()?, command, json).await,
        Command::Stats(args) => cmd_stats::run(&client()?, args, json).await,
        Command::Dlq(command) => cmd_dlq::run(&client()?, command, json).await,
        Command::Cancel(args) => cmd_cancel::run(&client()?, args, json).await,
        Command::Send(args) => cmd_send::run(&client()?, args, json).await,
        Command::Recv(args) => cmd_recv::recv(&client()?, args, json).await,
        Command::Ack(args) => cmd_recv::ack(&client()?, args, json).await,
        Command::Nack(args) => cmd_recv::nack(&client()?, args, json).await,
        Command::Extend(args) => cmd_recv::extend(&client()?, args, json).await,
        Command::Status(args) => cmd_message::status(&client()?, args, json).await,
    }
}

/// Prints an error on stderr: `error: <code>: <message>` for API errors (and their details),
/// the whole cause chain for the rest.
fn report(error: &anyhow::Error) {
    eprintln!("error: {error:#}");
    let Some(api) = error.downcast_ref::<sluice_client::Error>() else {
        return;
    };
    if let Some(details) = api.details() {
        let details = serde_json::to_string_pretty(details).unwrap_or_else(|_| details.to_string());
        eprintln!("details: {details}");
    }
    if let Some(after) = api.retry_after() {
        eprintln!("retry after: {}s", after.as_secs());
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
    use clap::CommandFactory;

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
            let cli = Cli::try_parse_from(args).unwrap();
            assert_eq!(cli.url, "http://h:1");
            assert!(cli.json);
        }
    }
}
