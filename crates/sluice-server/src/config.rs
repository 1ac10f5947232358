//! Configuration: the TOML file as written ([`RawConfig`]), then validated ([`Config`]).
//!
//! Precedence, lowest first: built-in defaults, the config file, then command-line flags (which
//! the CLI also fills from `SLUICE_*` environment variables). Nothing reads the environment or a
//! file after start.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;
use sluice_core::queue::{QueueConfig, validate_queue_name};
use sluice_core::wire::{QueueSpec, WebhookSpec};
use sluice_store_sqlite::Durability;

use crate::ServeOptions;

/// The default listen address: loopback, on a port no common service uses.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7566";
/// The default data directory, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "sluice-data";

/// The config file as written; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `[server]`.
    #[serde(default)]
    pub server: RawServer,
    /// `[queues.<name>]`: queues applied at start.
    #[serde(default)]
    pub queues: BTreeMap<String, QueueSpec>,
    /// `[webhooks.<name>]`: webhook endpoints applied at start (after the queues).
    #[serde(default)]
    pub webhooks: BTreeMap<String, WebhookSpec>,
    /// `[auth]`: API tokens.
    #[serde(default)]
    pub auth: crate::auth::AuthSpec,
    /// `[expressions]`: limits of jq evaluations.
    #[serde(default)]
    pub expressions: RawExpressions,
    /// `[push]`: push delivery as a whole.
    #[serde(default)]
    pub push: RawPush,
}

/// `[expressions]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExpressions {
    /// Wall time per evaluation, in ms.
    pub timeout_ms: Option<u64>,
    /// Bytes a worker's memory may grow by.
    pub memory_bytes: Option<u64>,
    /// Bytes of outputs per evaluation.
    pub output_bytes: Option<usize>,
    /// Worker processes.
    pub workers: Option<usize>,
    /// The sluice binary that runs workers (default: this one).
    pub worker_executable: Option<PathBuf>,
}

/// `[push]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPush {
    /// Deliver to push destinations (default true).
    pub enabled: Option<bool>,
}

/// `[server]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// `host:port`.
    pub listen: Option<String>,
    /// Data directory.
    pub data_dir: Option<PathBuf>,
    /// `fsync` (default) or `os`.
    pub durability: Option<String>,
    /// Bytes of message bodies kept in memory (default 64 MiB).
    pub payload_cache_bytes: Option<usize>,
    /// How long acked messages stay answerable by id, in ms (default 1 h).
    pub acked_retention_ms: Option<i64>,
    /// Serve a non-loopback address without tokens (default false: refused).
    pub allow_unauthenticated: Option<bool>,
    /// HTTPS: a PEM certificate chain file (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// HTTPS: the PEM private key file (with `tls_cert`).
    pub tls_key: Option<PathBuf>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Fsync or not.
    pub durability: Durability,
    /// Body cache budget.
    pub payload_cache_bytes: usize,
    /// Acked-record retention.
    pub acked_retention_ms: i64,
    /// Queues to create or update at start.
    pub queues: Vec<(String, QueueConfig)>,
    /// Webhook endpoints to define at start.
    pub webhooks: Vec<(String, WebhookSpec)>,
    /// API tokens, read.
    pub auth: std::sync::Arc<crate::auth::Auth>,
    /// Serve a non-loopback address without tokens.
    pub allow_unauthenticated: bool,
    /// HTTPS certificate and key files.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Use a manual clock moved by `POST /v1/_test/clock/advance` (tests only).
    pub test_clock: bool,
    /// Where the manual clock starts, in epoch ms (default: now).
    pub test_clock_start_ms: Option<i64>,
    /// Limits of jq evaluations.
    pub expressions: crate::expr::ExprLimits,
    /// Deliver to push destinations (off with `--no-push` or `[push] enabled = false`).
    pub push_enabled: bool,
}

impl Config {
    /// Reads the file named in `options` (if any) and applies the flags on top.
    pub fn load(options: &ServeOptions) -> Result<Self, String> {
        let raw = match &options.config_path {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
                toml::from_str::<RawConfig>(&text)
                    .map_err(|e| format!("config file {}: {e}", path.display()))?
            }
            None => RawConfig::default(),
        };
        Self::from_raw(raw, options)
    }

    /// Validates a raw config with the command-line flags on top.
    pub fn from_raw(raw: RawConfig, options: &ServeOptions) -> Result<Self, String> {
        let listen = options
            .listen
            .clone()
            .or(raw.server.listen)
            .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
        let listen = listen
            .parse()
            .map_err(|e| format!("listen address {listen:?}: {e}"))?;
        let durability = match options
            .durability
            .clone()
            .or(raw.server.durability)
            .as_deref()
        {
            None | Some("fsync") => Durability::Fsync,
            Some("os") => Durability::Os,
            Some(other) => return Err(format!("durability {other:?} is not one of fsync, os")),
        };
        let mut queues = Vec::new();
        for (name, spec) in raw.queues {
            validate_queue_name(&name).map_err(|e| format!("[queues.{name}]: {e}"))?;
            let config = spec
                .apply_to(QueueConfig::defaults_for(&name))
                .map_err(|e| format!("[queues.{name}]: {e}"))?;
            if let Some(push) = &config.push {
                crate::push::validate(push).map_err(|e| format!("[queues.{name}]: {e}"))?;
            }
            queues.push((name, config));
        }
        Ok(Self {
            listen,
            data_dir: options
                .data_dir
                .clone()
                .or(raw.server.data_dir)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            durability,
            payload_cache_bytes: raw.server.payload_cache_bytes.unwrap_or(64 << 20),
            acked_retention_ms: raw.server.acked_retention_ms.unwrap_or(60 * 60 * 1000),
            queues,
            webhooks: raw.webhooks.into_iter().collect(),
            auth: std::sync::Arc::new(crate::auth::Auth::load(&raw.auth)?),
            allow_unauthenticated: raw.server.allow_unauthenticated.unwrap_or(false),
            tls: match (raw.server.tls_cert, raw.server.tls_key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => return Err("[server] tls_cert and tls_key go together".into()),
            },
            test_clock: false,
            test_clock_start_ms: None,
            expressions: expressions(raw.expressions)?,
            push_enabled: raw.push.enabled.unwrap_or(true) && !options.no_push,
        })
    }
}

/// `[expressions]`, checked: every limit above zero.
fn expressions(raw: RawExpressions) -> Result<crate::expr::ExprLimits, String> {
    use crate::expr::*;
    let limits = ExprLimits {
        timeout: std::time::Duration::from_millis(raw.timeout_ms.unwrap_or(TIMEOUT_MS_DEFAULT)),
        memory_bytes: raw.memory_bytes.unwrap_or(MEMORY_BYTES_DEFAULT),
        output_bytes: raw.output_bytes.unwrap_or(OUTPUT_BYTES_DEFAULT),
        workers: raw.workers.unwrap_or(WORKERS_DEFAULT),
        worker_executable: raw.worker_executable,
    };
    if limits.timeout.is_zero()
        || limits.memory_bytes == 0
        || limits.output_bytes == 0
        || limits.workers == 0
    {
        return Err(
            "[expressions] timeout_ms, memory_bytes, output_bytes and workers must be above 0"
                .into(),
        );
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml_text: &str, options: ServeOptions) -> Result<Config, String> {
        let raw = toml::from_str::<RawConfig>(toml_text).map_err(|e| e.to_string())?;
        Config::from_raw(raw, &options)
    }

    /// `config.default.toml` is the reference: it must parse, and its values must be the defaults.
    #[test]
    fn the_reference_config_file_matches_the_defaults() {
        let text = include_str!("../../../config.default.toml");
        let from_file = check(text, ServeOptions::default()).unwrap();
        let defaults = Config::from_raw(RawConfig::default(), &ServeOptions::default()).unwrap();
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
        let commented_queue: String = text
            .lines()
            .filter_map(|line| line.strip_prefix("# "))
            .filter(|line| line.starts_with('[') || line.contains(" = "))
            .map(|line| format!("{line}\n"))
            .collect();
        let queue = check(&commented_queue, ServeOptions::default()).unwrap();
        assert_eq!(queue.queues[0].1, QueueConfig::defaults_for("orders"));
    }

    #[test]
    fn flags_win_over_the_file_and_defaults_fill_the_rest() {
        let config = check(
            "[server]\nlisten = \"127.0.0.1:9\"\ndurability = \"os\"\n",
            ServeOptions {
                listen: Some("127.0.0.1:0".into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(config.listen.port(), 0);
        assert_eq!(config.durability, Durability::Os);
        assert_eq!(config.data_dir, PathBuf::from(DEFAULT_DATA_DIR));
    }

    #[test]
    fn queues_in_the_file_are_validated() {
        let config = check(
            "[queues.orders]\nordering = \"per_key\"\nmax_attempts = 3\n",
            ServeOptions::default(),
        )
        .unwrap();
        assert_eq!(config.queues[0].0, "orders");
        assert_eq!(config.queues[0].1.max_attempts, 3);
        assert!(
            check(
                "[queues.orders]\nordering = \"sideways\"\n",
                ServeOptions::default()
            )
            .unwrap_err()
            .contains("ordering")
        );
        assert!(check("[queues.\"bad name\"]\n", ServeOptions::default()).is_err());
        assert!(
            check("[server]\nport = 1\n", ServeOptions::default())
                .unwrap_err()
                .contains("port")
        );
    }
}
