//! The `sluice` binary: `serve` runs the server; every other command is a thin client that
//! reaches a server only over HTTP, through [`sluice_client`].
//!
//! This file owns argument parsing, dispatch and how errors are shown: `error: <code>: <message>`
//! on stderr and a non-zero exit. The commands live in `cmd_*` modules, printing in `output`.

mod bench;
mod cmd_message;
mod cmd_queue;
mod cmd_recv;
mod cmd_send;
mod cmd_serve;
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
    /// Create, list, inspect and delete queues.
    #[command(subcommand)]
    Queue(cmd_queue::QueueCommand),
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
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            report(&error);
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let client = || Client::new(&cli.url);
    let json = cli.json;
    match cli.command {
        Command::Serve(args) => cmd_serve::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Queue(command) => cmd_queue::run(&client()?, command, json).await,
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
    if let Some(sluice_client::Error::Api {
        details: Some(details),
        ..
    }) = error.downcast_ref::<sluice_client::Error>()
    {
        let details = serde_json::to_string_pretty(details).unwrap_or_else(|_| details.to_string());
        eprintln!("details: {details}");
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
