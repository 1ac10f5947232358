//! `sluice migrate`: brings the configured store's schema to this build's version and exits,
//! without serving. For the PostgreSQL store this is how an operator migrates with a role that
//! may change the schema, then starts the nodes with `[store] migrate = false`; the SQLite store
//! migrates its file when it opens, which this command does and closes it again.

use std::path::PathBuf;

use sluice_core::Clock;

/// Flags of `sluice migrate`: the store's, as `sluice serve` takes them.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// TOML config file whose `[store]` names the store [default: none].
    #[arg(long, env = "SLUICE_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// The PostgreSQL database to migrate; implies `[store] kind = "postgres"` [default:
    /// `[store] url`].
    #[arg(
        long,
        env = "SLUICE_STORE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    store_url: Option<String>,
    /// Data directory of the SQLite store [default: ./sluice-data, or `[server] data_dir`].
    #[arg(long, env = "SLUICE_DATA", value_name = "DIR")]
    data: Option<PathBuf>,
    /// The client flags under their own ids, so the global ones are not propagated (and not
    /// listed in its help); `main` refuses them when given.
    #[command(flatten)]
    _client_only: crate::client_args::ClientArgs,
}

/// Migrates and prints what was done (one line on stdout).
pub async fn run(args: MigrateArgs) -> anyhow::Result<()> {
    let options = sluice_server::ServeOptions {
        config_path: args.config,
        data_dir: args.data,
        store_url: args.store_url.map(sluice_server::DatabaseUrl::new),
        ..Default::default()
    };
    let config = sluice_server::Config::load(&options).map_err(|error| anyhow::anyhow!(error))?;
    let done = sluice_server::migrate_store(&config, sluice_core::SystemClock.now_ms()).await?;
    println!("{done}");
    Ok(())
}
