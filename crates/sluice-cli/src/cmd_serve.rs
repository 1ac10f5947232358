//! `sluice serve`: flags, logging and a call to [`sluice_server::serve`]; nothing else.
//!
//! Logs go to stderr. Stdout belongs to the server, which prints exactly one ready line
//! (`sluice listening on http://HOST:PORT`) that scripts and tests wait for.

use std::path::PathBuf;

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// Flags of `sluice serve`; each overrides the config file. The defaults shown are those of
/// the config file (config.default.toml), used when neither sets a value.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on, `host:port` (`127.0.0.1:0` picks a free port); a non-loopback
    /// address needs tokens ([[auth.tokens]] or SLUICE_ADMIN_TOKEN) [default: 127.0.0.1:7566,
    /// or `[server] listen` of --config].
    #[arg(long, env = "SLUICE_LISTEN", value_name = "ADDR")]
    listen: Option<String>,
    /// Data directory, created if missing [default: ./sluice-data, or `[server] data_dir`].
    #[arg(long, env = "SLUICE_DATA", value_name = "DIR")]
    data: Option<PathBuf>,
    /// TOML config file; every key and its default: config.default.toml [default: none].
    #[arg(long, env = "SLUICE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// `fsync`: a 200 means the write reached the disk; `os`: it reached the OS page cache
    /// [default: fsync, or `[server] durability`].
    #[arg(long, env = "SLUICE_DURABILITY", value_parser = ["fsync", "os"])]
    durability: Option<String>,
    /// Keep the queues in this PostgreSQL database (`postgres://user:password@host/db`),
    /// shared with every server started on it; implies `[store] kind = "postgres"` [default:
    /// `[store] url`, or the SQLite store in --data].
    #[arg(
        long,
        env = "SLUICE_STORE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    store_url: Option<String>,
    /// Start with push delivery off (no queue's destination is called), e.g. to recover from
    /// a message or destination that keeps failing; the same as `[push] enabled = false`
    /// [default: push on].
    #[arg(long, env = "SLUICE_NO_PUSH", value_parser = clap::builder::FalseyValueParser::new())]
    no_push: bool,
    /// Log line format on stderr. The level filter comes from SLUICE_LOG or RUST_LOG
    /// (default `info`).
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// The client flags under their own ids, so the global ones are not propagated to serve
    /// (and not listed in its help); `main` refuses them when given.
    #[command(flatten)]
    _client_only: crate::client_args::ClientArgs,
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Runs the server until SIGTERM or ctrl-c (the server handles the signals).
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let options = sluice_server::ServeOptions {
        listen: args.listen,
        data_dir: args.data,
        config_path: args.config,
        durability: args.durability,
        no_push: args.no_push,
        store_url: args.store_url.map(sluice_server::DatabaseUrl::new),
    };
    // The config first: its `[tracing]` section decides whether spans are exported.
    let config = sluice_server::Config::load(&options).map_err(|error| anyhow::anyhow!(error))?;
    let traces = install_tracing(args.log_format, &config.tracing)?;
    let served = sluice_server::serve_config(config)
        .await
        .map_err(|error| anyhow::anyhow!(error));
    if let Some(traces) = traces {
        traces.shutdown().await;
    }
    served
}

/// Installs the global tracing subscriber: log lines to stderr, filtered by SLUICE_LOG or
/// RUST_LOG, and (with `[tracing] otlp_endpoint`) the OTLP span exporter, which has its own
/// filter so the log level does not decide what is traced.
fn install_tracing(
    format: LogFormat,
    tracing_config: &sluice_server::telemetry::TracingConfig,
) -> anyhow::Result<Option<sluice_server::telemetry::TracingGuard>> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let (variable, directives) = ["SLUICE_LOG", "RUST_LOG"]
        .into_iter()
        .find_map(|name| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
                .map(|value| (name, value))
        })
        .unwrap_or(("default", "info".to_owned()));
    let filter = EnvFilter::try_new(&directives)
        .with_context(|| format!("invalid log filter {directives:?} (from {variable})"))?;
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let log: Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync> = match format {
        LogFormat::Text => log.with_filter(filter).boxed(),
        LogFormat::Json => log.json().with_filter(filter).boxed(),
    };
    let (traces, guard) = match sluice_server::telemetry::otlp_layer(tracing_config)
        .map_err(|error| anyhow::anyhow!(error))?
    {
        Some((layer, guard)) => (Some(layer), Some(guard)),
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(log)
        .with(traces)
        .try_init()
        .map_err(|error| anyhow::anyhow!("cannot install the log subscriber: {error}"))?;
    Ok(guard)
}
