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
use sluice_wire::{AlertSpec, QueueSpec, ScheduleSpec, TopicSpec, WebhookSpec};

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
    /// `[schedules.<name>]`: schedules applied at start (after the queues).
    #[serde(default)]
    pub schedules: BTreeMap<String, ScheduleSpec>,
    /// `[topics.<name>]`: topics applied at start (after the queues).
    #[serde(default)]
    pub topics: BTreeMap<String, TopicSpec>,
    /// `[alerts.<name>]`: alerts applied at start (after the queues); only here may a
    /// destination be a command.
    #[serde(default)]
    pub alerts: BTreeMap<String, AlertSpec>,
    /// `[tenants.<name>]`: tenants, each owning the queues, webhooks, schedules, topics and
    /// alerts its patterns name; `tenant_admin` tokens administer one.
    #[serde(default)]
    pub tenants: BTreeMap<String, crate::auth::TenantSpec>,
    /// `[auth]`: API tokens.
    #[serde(default)]
    pub auth: crate::auth::AuthSpec,
    /// `[store]`: which store keeps the queues (`kind`), and its options.
    #[serde(default)]
    pub store: RawStore,
    /// `[limits]`: what requests, connections and sessions may hold.
    #[serde(default)]
    pub limits: RawLimits,
    /// `[expressions]`: limits of jq evaluations.
    #[serde(default)]
    pub expressions: RawExpressions,
    /// `[push]`: push delivery as a whole.
    #[serde(default)]
    pub push: RawPush,
    /// `[dashboard]`: the history its charts show.
    #[serde(default)]
    pub dashboard: crate::history::RawDashboard,
    /// `[tracing]`: OpenTelemetry trace export.
    #[serde(default)]
    pub tracing: crate::telemetry::TracingSpec,
    /// `[sqs]`: the SQS-compatible API.
    #[serde(default)]
    pub sqs: crate::sqs::RawSqs,
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
    /// Of those, the most webhook requests may hold at once (default half, at least 1).
    pub webhook_workers: Option<usize>,
    /// The sluice binary that runs workers (default: this one).
    pub worker_executable: Option<PathBuf>,
}

/// `[push]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPush {
    /// Deliver to push destinations (default true).
    pub enabled: Option<bool>,
    /// Push attempts kept in each message's delivery log (default 10; 0 = no log).
    pub delivery_log_attempts: Option<usize>,
    /// Bytes of each answer's body kept in the delivery log (default 1 KiB).
    pub delivery_log_body_bytes: Option<usize>,
    /// Bytes of each answer's headers kept in the delivery log (default 4 KiB).
    pub delivery_log_header_bytes: Option<usize>,
}

/// `[limits]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Bytes of request bodies held at once, across requests (default 128 MiB).
    pub body_bytes_in_flight: Option<usize>,
    /// Time to send a request's headers, from the connection's start or its previous
    /// response, in ms (default 30 s).
    pub header_read_timeout_ms: Option<u64>,
    /// Longest pause while a request body arrives, in ms (default 30 s); also the grace
    /// before `body_min_bytes_per_s` applies.
    pub body_read_timeout_ms: Option<u64>,
    /// Slowest average a request body may arrive at after the grace, in bytes/s (default 16 KiB/s).
    pub body_min_bytes_per_s: Option<u64>,
    /// Bytes of request bodies one client address may hold at once (default 64 MiB).
    pub body_bytes_in_flight_per_peer: Option<usize>,
    /// Connections served at once (default 10,000).
    pub max_connections: Option<usize>,
    /// Dashboard sessions per token (default 16).
    pub sessions_per_token: Option<usize>,
    /// Dashboard sessions in all (default 10,000).
    /// (`sessions_max`, its earlier name, is read too.)
    #[serde(alias = "sessions_max")]
    pub max_sessions: Option<usize>,
    /// Requests (gRPC calls) open at once on one HTTP/2 connection (default 256).
    pub streams_per_connection: Option<u32>,
    /// Messages one gRPC stream may have in flight: published and not yet answered, or
    /// granted as pull credit and not yet sent (default 10,000).
    pub stream_messages_in_flight: Option<usize>,
    /// Bytes of leased messages one gRPC pull stream holds before its client reads them
    /// (default 16 MiB).
    pub stream_unsent_bytes: Option<usize>,
    /// Bytes one topic publish may store across its copies: the message's size times the
    /// subscriptions that take it (default 64 MiB).
    /// (`topic_publish_bytes_max`, its earlier name, is read too.)
    #[serde(alias = "topic_publish_bytes_max")]
    pub max_topic_publish_bytes: Option<usize>,
}

/// What requests, connections and sessions may hold: `[limits]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of request bodies held at once; a request beyond it gets 503.
    pub body_bytes_in_flight: usize,
    /// Time to send a request's headers (and how long an idle keep-alive connection stays).
    pub header_read_timeout: std::time::Duration,
    /// Longest pause while a request body arrives.
    pub body_read_timeout: std::time::Duration,
    /// Slowest average a request body may arrive at, after `body_read_timeout`.
    pub body_min_bytes_per_s: u64,
    /// Bytes of request bodies one client address may hold at once.
    pub body_bytes_in_flight_per_peer: usize,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Dashboard sessions per token; a login beyond it ends that token's oldest session.
    pub sessions_per_token: usize,
    /// Dashboard sessions in all; a login beyond it is refused.
    pub max_sessions: usize,
    /// Requests (gRPC calls) open at once on one HTTP/2 connection.
    pub streams_per_connection: u32,
    /// Messages one gRPC stream may have in flight: published and not yet answered, or granted
    /// as pull credit and not yet sent.
    pub stream_messages_in_flight: usize,
    /// Bytes of leased messages one pull stream holds before its client reads them.
    pub stream_unsent_bytes: usize,
    /// Bytes one topic publish may store across its copies.
    pub max_topic_publish_bytes: usize,
}

impl Limits {
    /// The defaults, as in `config.default.toml`.
    pub const DEFAULT: Self = Self {
        body_bytes_in_flight: 128 << 20,
        header_read_timeout: std::time::Duration::from_secs(30),
        body_read_timeout: std::time::Duration::from_secs(30),
        body_min_bytes_per_s: 16 * 1024,
        body_bytes_in_flight_per_peer: 64 << 20,
        max_connections: 10_000,
        sessions_per_token: 16,
        max_sessions: 10_000,
        streams_per_connection: 256,
        stream_messages_in_flight: 10_000,
        stream_unsent_bytes: 16 << 20,
        max_topic_publish_bytes: 64 << 20,
    };

    fn from_raw(raw: RawLimits) -> Result<Self, String> {
        let d = Self::DEFAULT;
        let limits = Self {
            body_bytes_in_flight: raw.body_bytes_in_flight.unwrap_or(d.body_bytes_in_flight),
            header_read_timeout: raw
                .header_read_timeout_ms
                .map_or(d.header_read_timeout, std::time::Duration::from_millis),
            body_read_timeout: raw
                .body_read_timeout_ms
                .map_or(d.body_read_timeout, std::time::Duration::from_millis),
            body_min_bytes_per_s: raw.body_min_bytes_per_s.unwrap_or(d.body_min_bytes_per_s),
            body_bytes_in_flight_per_peer: raw
                .body_bytes_in_flight_per_peer
                .unwrap_or(d.body_bytes_in_flight_per_peer)
                .min(raw.body_bytes_in_flight.unwrap_or(d.body_bytes_in_flight)),
            max_connections: raw.max_connections.unwrap_or(d.max_connections),
            sessions_per_token: raw.sessions_per_token.unwrap_or(d.sessions_per_token),
            max_sessions: raw.max_sessions.unwrap_or(d.max_sessions),
            streams_per_connection: raw
                .streams_per_connection
                .unwrap_or(d.streams_per_connection),
            stream_messages_in_flight: raw
                .stream_messages_in_flight
                .unwrap_or(d.stream_messages_in_flight),
            stream_unsent_bytes: raw.stream_unsent_bytes.unwrap_or(d.stream_unsent_bytes),
            max_topic_publish_bytes: raw
                .max_topic_publish_bytes
                .unwrap_or(d.max_topic_publish_bytes),
        };
        // A body budget below the largest request would refuse such requests forever.
        if limits.body_bytes_in_flight < crate::body_budget::REQUEST_BYTES_MAX {
            return Err(format!(
                "[limits] body_bytes_in_flight must be at least {} (the largest request), got {}",
                crate::body_budget::REQUEST_BYTES_MAX,
                limits.body_bytes_in_flight
            ));
        }
        if limits.body_bytes_in_flight_per_peer < crate::body_budget::REQUEST_BYTES_MAX {
            return Err(format!(
                "[limits] body_bytes_in_flight_per_peer must be at least {} (the largest request), got {}",
                crate::body_budget::REQUEST_BYTES_MAX,
                limits.body_bytes_in_flight_per_peer
            ));
        }
        if limits.body_min_bytes_per_s == 0 {
            return Err("[limits] body_min_bytes_per_s must be at least 1".into());
        }
        for (key, value) in [
            ("header_read_timeout_ms", limits.header_read_timeout),
            ("body_read_timeout_ms", limits.body_read_timeout),
        ] {
            if value.is_zero() {
                return Err(format!("[limits] {key} must be at least 1"));
            }
        }
        for (key, value) in [
            ("max_connections", limits.max_connections),
            ("sessions_per_token", limits.sessions_per_token),
            ("max_sessions", limits.max_sessions),
            (
                "streams_per_connection",
                limits.streams_per_connection as usize,
            ),
            (
                "stream_messages_in_flight",
                limits.stream_messages_in_flight,
            ),
            ("stream_unsent_bytes", limits.stream_unsent_bytes),
            ("max_topic_publish_bytes", limits.max_topic_publish_bytes),
        ] {
            if value == 0 {
                return Err(format!("[limits] {key} must be at least 1"));
            }
        }
        Ok(limits)
    }
}

/// `[store]` as written: its `kind`, and the rest of the table, which that kind's store reads
/// and checks itself (`sluice_store_sqlite::SqliteSection`, `sluice_store_postgres::PgSection`).
/// A key no store reads is refused, named; another kind's keys are allowed, so one file can
/// carry both (as `config.default.toml` does).
#[derive(Debug, Default, Deserialize)]
pub struct RawStore {
    /// Which store keeps the queues: one of [`STORE_KINDS`] (default `"sqlite"`).
    pub kind: Option<String>,
    /// Every other key, for the store of `kind`.
    #[serde(flatten)]
    pub options: toml::Table,
}

/// The `[store] kind` values this build can open, the default first.
pub const STORE_KINDS: &[&str] = &["sqlite", "postgres"];

/// When a write counts as done (`[server] durability`): what a 2xx on enqueue, ack or nack
/// promises, whatever the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// The write is on stable storage (fsynced): it survives a power cut.
    #[default]
    Fsync,
    /// The write reached the operating system: it survives a crash of sluice, not of the
    /// machine.
    Os,
}

/// The store the server opens, by `[store] kind`, with the options of that kind. Only
/// [`crate::store_open::open_store`] turns it into a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// `kind = "sqlite"`: one database in the data directory, served by this process alone.
    Sqlite(sluice_store_sqlite::SqliteSettings),
    /// `kind = "postgres"`: one schema of a PostgreSQL database, shared by every server
    /// opened on it.
    Postgres(sluice_store_postgres::PgSettings),
}

impl StoreConfig {
    /// The `[store] kind` this is.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreConfig::Sqlite(_) => "sqlite",
            StoreConfig::Postgres(_) => "postgres",
        }
    }
}

/// The node name when `[store] node_name` is not set: `<hostname>:<port>` of the address the
/// server listens on (the hostname cut so the name fits, anything but printable ASCII as `?`),
/// or that address itself when the hostname cannot be read.
pub fn default_node_name(listen: std::net::SocketAddr) -> String {
    use sluice_store_postgres::options::NODE_NAME_BYTES_MAX;
    let port = format!(":{}", listen.port());
    match hostname() {
        Some(hostname) if !hostname.is_empty() => {
            let printable: String = hostname
                .chars()
                .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
                .take(NODE_NAME_BYTES_MAX - port.len())
                .collect();
            format!("{printable}{port}")
        }
        _ => listen.to_string(),
    }
}

/// The machine's host name (`uname`'s node name).
#[cfg(unix)]
fn hostname() -> Option<String> {
    Some(
        rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned(),
    )
}

/// No host name here: the node is named by its listen address.
#[cfg(not(unix))]
fn hostname() -> Option<String> {
    None
}

impl StoreConfig {
    /// `[store]` (and `[server] payload_cache_bytes`, and `--store-url`), checked by the store
    /// of its kind. A URL, from the flag or the file, makes the kind `postgres` unless the file
    /// names another kind, which is then refused.
    fn from_raw(
        store: RawStore,
        server_payload_cache_bytes: Option<usize>,
        store_url: Option<String>,
    ) -> Result<Self, String> {
        let known = |key: &str| {
            sluice_store_sqlite::SqliteSection::KEYS.contains(&key)
                || sluice_store_postgres::PgSection::KEYS.contains(&key)
        };
        if let Some(unknown) = store.options.keys().find(|key| !known(key)) {
            return Err(format!(
                "[store]: unknown key {unknown:?}; the keys are kind, {}, and {}",
                sluice_store_sqlite::SqliteSection::KEYS.join(", "),
                sluice_store_postgres::PgSection::KEYS.join(", ")
            ));
        }
        let url_given = store_url.is_some() || store.options.contains_key("url");
        let kind = match (store.kind.as_deref(), url_given) {
            (Some(kind), _) => kind,
            (None, true) => "postgres",
            (None, false) => STORE_KINDS[0],
        };
        match kind {
            "sqlite" => {
                if url_given {
                    return Err(
                        "[store] url (or --store-url, SLUICE_STORE_URL) needs [store] kind = \"postgres\"; this config names kind \"sqlite\"".into(),
                    );
                }
                let section: sluice_store_sqlite::SqliteSection = store_section(store.options)?;
                Ok(StoreConfig::Sqlite(
                    section.check(server_payload_cache_bytes)?,
                ))
            }
            "postgres" => {
                let section: sluice_store_postgres::PgSection = store_section(store.options)?;
                Ok(StoreConfig::Postgres(section.check(store_url)?))
            }
            other => Err(format!(
                "[store] kind {other:?} is not a store this server can open; the kinds are: {}",
                STORE_KINDS
                    .iter()
                    .map(|kind| format!("{kind:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

/// `[store]`'s keys read by the section of the store they are for.
fn store_section<T: serde::de::DeserializeOwned>(options: toml::Table) -> Result<T, String> {
    toml::Value::Table(options)
        .try_into()
        .map_err(|e| format!("[store]: {e}"))
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
    /// URLs the server is reached under besides its listen address (a proxy's, a host name):
    /// their hosts are served in open mode and their origins count as the server's own.
    pub public_urls: Option<Vec<String>>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to listen.
    pub listen: SocketAddr,
    /// Data directory: the server's own files, and the store's when it keeps them there.
    pub data_dir: PathBuf,
    /// When a write counts as done, whatever the store.
    pub durability: Durability,
    /// How long final records (acked, expired, cancelled...) stay answerable by id.
    pub acked_retention_ms: i64,
    /// `[store]`: which store, with its options.
    pub store: StoreConfig,
    /// Queues to create or update at start.
    pub queues: Vec<(String, QueueConfig)>,
    /// Webhook endpoints to define at start.
    pub webhooks: Vec<(String, WebhookSpec)>,
    /// Schedules to define at start.
    pub schedules: Vec<(String, ScheduleSpec)>,
    /// Topics to define at start.
    pub topics: Vec<(String, TopicSpec)>,
    /// Alerts to define at start.
    pub alerts: Vec<(String, AlertSpec)>,
    /// API tokens, read.
    pub auth: std::sync::Arc<crate::auth::Auth>,
    /// Serve a non-loopback address without tokens.
    pub allow_unauthenticated: bool,
    /// HTTPS certificate and key files.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Other URLs the server is reached under (see `browser_guard`).
    pub public_urls: Vec<reqwest::Url>,
    /// Use a manual clock moved by `POST /v1/_test/clock/advance` (tests only).
    pub test_clock: bool,
    /// Where the manual clock starts, in epoch ms (default: now).
    pub test_clock_start_ms: Option<i64>,
    /// `[limits]`.
    pub limits: Limits,
    /// Limits of jq evaluations.
    pub expressions: crate::expr::ExprLimits,
    /// Deliver to push destinations (off with `--no-push` or `[push] enabled = false`).
    pub push_enabled: bool,
    /// `[dashboard]`: how often queues are sampled for the charts, and for how long.
    pub history: crate::history::HistoryConfig,
    /// `[tracing]`: where and how traces are exported (off without an endpoint).
    pub tracing: crate::telemetry::TracingConfig,
    /// `[push] delivery_log_*`: what each message's push delivery log keeps.
    pub push_delivery_log: crate::push_log::DeliveryLogLimits,
    /// `[sqs]`: the SQS-compatible API.
    pub sqs: crate::sqs::SqsConfig,
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
        let store = StoreConfig::from_raw(
            raw.store,
            raw.server.payload_cache_bytes,
            options
                .store_url
                .as_ref()
                .map(|url| url.expose().to_owned()),
        )?;
        let mut queues = Vec::new();
        for (name, spec) in raw.queues {
            validate_queue_name(&name).map_err(|e| format!("[queues.{name}]: {e}"))?;
            let config = QueueConfig::defaults_for(&name)
                .apply(&spec)
                .map_err(|e| format!("[queues.{name}]: {e}"))?;
            if let Some(push) = &config.push {
                crate::push::validate(push).map_err(|e| format!("[queues.{name}]: {e}"))?;
            }
            queues.push((name, config));
        }
        let limits = Limits::from_raw(raw.limits)?;
        Ok(Self {
            listen,
            data_dir: options
                .data_dir
                .clone()
                .or(raw.server.data_dir)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
            durability,
            acked_retention_ms: raw.server.acked_retention_ms.unwrap_or(60 * 60 * 1000),
            store,
            queues,
            webhooks: raw.webhooks.into_iter().collect(),
            schedules: raw.schedules.into_iter().collect(),
            topics: raw.topics.into_iter().collect(),
            alerts: raw.alerts.into_iter().collect(),
            auth: std::sync::Arc::new(crate::auth::Auth::load(&raw.auth, &raw.tenants)?),
            allow_unauthenticated: raw.server.allow_unauthenticated.unwrap_or(false),
            tls: match (raw.server.tls_cert, raw.server.tls_key) {
                (Some(cert), Some(key)) => Some((cert, key)),
                (None, None) => None,
                _ => return Err("[server] tls_cert and tls_key go together".into()),
            },
            public_urls: raw
                .server
                .public_urls
                .unwrap_or_default()
                .iter()
                .map(|url| parse_public_url(url))
                .collect::<Result<_, _>>()?,
            test_clock: false,
            test_clock_start_ms: None,
            limits,
            expressions: expressions(raw.expressions)?,
            push_enabled: raw.push.enabled.unwrap_or(true) && !options.no_push,
            history: crate::history::HistoryConfig::from_raw(raw.dashboard)?,
            tracing: crate::telemetry::TracingConfig::from_spec(raw.tracing)?,
            push_delivery_log: delivery_log(&raw.push),
            sqs: crate::sqs::SqsConfig::from_raw(raw.sqs)?,
        })
    }
}

/// A `[server] public_urls` entry: an http(s) URL with a host; only its origin is used.
fn parse_public_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text)
        .map_err(|e| format!("[server] public_urls: {text:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "[server] public_urls: {text:?} is not an http:// or https:// URL with a host"
        ));
    }
    Ok(url)
}

/// `[push] delivery_log_*`, with defaults (every value is allowed: 0 attempts turn the log
/// off, 0 bytes keep no excerpt or headers).
fn delivery_log(raw: &RawPush) -> crate::push_log::DeliveryLogLimits {
    let default = crate::push_log::DeliveryLogLimits::DEFAULT;
    crate::push_log::DeliveryLogLimits {
        attempts: raw.delivery_log_attempts.unwrap_or(default.attempts),
        body_bytes: raw.delivery_log_body_bytes.unwrap_or(default.body_bytes),
        header_bytes: raw
            .delivery_log_header_bytes
            .unwrap_or(default.header_bytes),
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
        webhook_workers: raw
            .webhook_workers
            .unwrap_or_else(|| webhook_workers_default(raw.workers.unwrap_or(WORKERS_DEFAULT))),
        worker_executable: raw.worker_executable,
    };
    if limits.webhook_workers == 0 || limits.webhook_workers > limits.workers {
        return Err(format!(
            "[expressions] webhook_workers must be between 1 and workers ({}), got {}",
            limits.workers, limits.webhook_workers
        ));
    }
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

    #[test]
    fn the_store_is_sqlite_by_default_and_by_name_with_its_options() {
        let options = ServeOptions::default();
        let default = check("", options.clone()).unwrap().store;
        let named = check("[store]\nkind = \"sqlite\"\n", options.clone())
            .unwrap()
            .store;
        assert_eq!(named, default);
        assert_eq!(default.kind(), "sqlite");
        let StoreConfig::Sqlite(sqlite) = check(
            "[server]\npayload_cache_bytes = 1000\n[store]\nkind = \"sqlite\"\nwal_max_bytes = 2097152\ndisk_reserve_bytes = 0\n",
            options.clone(),
        )
        .unwrap()
        .store
        else {
            panic!("kind = \"sqlite\" is the SQLite store")
        };
        assert_eq!(
            sqlite,
            sluice_store_sqlite::SqliteSettings {
                payload_cache_bytes: 1000,
                max_wal_bytes: 2 << 20,
                disk_reserve_bytes: 0,
                ..Default::default()
            }
        );
        let error = check("[store]\nwal_max_bytes = 1000\n", options.clone()).unwrap_err();
        assert!(error.contains("max_wal_bytes"), "{error}");
        // The limits' earlier names are read too (`wal_max_bytes`, `sessions_max`, ...).
        let old = check(
            "[store]\nwal_max_bytes = 2097152\n[limits]\nsessions_max = 7\ntopic_publish_bytes_max = 4096\n[sqs]\nbatch_entries_max = 5\n",
            options.clone(),
        )
        .unwrap();
        let StoreConfig::Sqlite(sqlite) = &old.store else {
            panic!("sqlite")
        };
        assert_eq!(sqlite.max_wal_bytes, 2 << 20);
        assert_eq!(old.limits.max_sessions, 7);
        assert_eq!(old.limits.max_topic_publish_bytes, 4096);
        assert_eq!(old.sqs.max_batch_entries, 5);
        // Each store reads its own keys: a misspelt one is named; a wrong type is its store's.
        let error = check("[store]\nwal_max_byte = 1\n", options.clone()).unwrap_err();
        assert!(
            error.starts_with("[store]") && error.contains("wal_max_byte"),
            "{error}"
        );
        let error = check("[store]\nresident_messages = \"many\"\n", options.clone()).unwrap_err();
        assert!(
            error.starts_with("[store]") && error.contains("string"),
            "{error}"
        );
    }

    #[test]
    fn postgres_is_chosen_by_kind_or_by_a_url_with_its_options() {
        let url = "postgres://sluice:secret@db:5432/queues";
        let by_kind = check(
            &format!("[store]\nkind = \"postgres\"\nurl = {url:?}\n"),
            ServeOptions::default(),
        )
        .unwrap()
        .store;
        let by_flag = check(
            "",
            ServeOptions {
                store_url: Some(sluice_store_postgres::DatabaseUrl::new(url)),
                ..Default::default()
            },
        )
        .unwrap()
        .store;
        assert_eq!(by_flag, by_kind, "a URL alone implies the kind");
        let StoreConfig::Postgres(postgres) = by_kind else {
            panic!("{by_kind:?}")
        };
        assert_eq!(
            postgres,
            sluice_store_postgres::PgSettings {
                url: sluice_store_postgres::DatabaseUrl::new(url),
                schema: "sluice".into(),
                pool_size: 16,
                writer_connections: 2,
                connect_timeout_ms: 5_000,
                migrate: true,
                node_name: None,
                ca_file: None,
            }
        );
        assert!(
            !format!("{postgres:?}").contains("secret"),
            "the password is never shown"
        );
        let StoreConfig::Postgres(tuned) = check(
            &format!(
                "[store]\nurl = {url:?}\nschema = \"queues_a\"\npool_size = 4\nwriter_connections = 1\nconnect_timeout_ms = 500\nmigrate = false\nnode_name = \"db-1\"\nca_file = \"db-ca.pem\"\n"
            ),
            ServeOptions {
                store_url: Some(sluice_store_postgres::DatabaseUrl::new("postgres://other@db/q")),
                ..Default::default()
            },
        )
        .unwrap()
        .store
        else {
            panic!("a URL implies postgres")
        };
        assert_eq!(tuned.url.expose(), "postgres://other@db/q", "the flag wins");
        assert_eq!(
            (
                tuned.schema.as_str(),
                tuned.pool_size,
                tuned.writer_connections
            ),
            ("queues_a", 4, 1)
        );
        assert_eq!((tuned.connect_timeout_ms, tuned.migrate), (500, false));
        assert_eq!(tuned.node_name.as_deref(), Some("db-1"));
        assert_eq!(tuned.ca_file, Some(PathBuf::from("db-ca.pem")));
    }

    /// Without `[store] node_name` a node is `<hostname>:<port>`, within the length
    /// PostgreSQL keeps of `application_name`.
    #[test]
    fn the_default_node_name_is_the_host_and_the_port() {
        let name = default_node_name("127.0.0.1:7566".parse().unwrap());
        assert!(name.ends_with(":7566"), "{name}");
        assert_eq!(
            sluice_store_postgres::options::check_node_name(&name),
            Ok(())
        );
        let hostname = hostname().unwrap_or_default();
        if !hostname.is_empty() && hostname.is_ascii() && hostname.len() < 50 {
            assert_eq!(name, format!("{hostname}:7566"));
        }
    }

    #[test]
    fn postgres_options_are_checked() {
        for (text, expected) in [
            ("[store]\nkind = \"postgres\"\n", "needs [store] url"),
            (
                "[store]\nkind = \"sqlite\"\nurl = \"postgres://db/q\"\n",
                "needs [store] kind = \"postgres\"",
            ),
            (
                "[store]\nurl = \"postgres://db/q\"\nschema = \"Bad-Name\"\n",
                "[store] schema",
            ),
            (
                "[store]\nurl = \"postgres://db/q\"\npool_size = 0\n",
                "[store] pool_size",
            ),
            (
                "[store]\nurl = \"postgres://db/q\"\nnode_name = \"n\u{e9}\"\n",
                "[store] node_name",
            ),
            (
                "[store]\nurl = \"postgres://db/q?sslmode=verify\"\n",
                "sslmode=verify is not one of",
            ),
        ] {
            let error = check(text, ServeOptions::default()).unwrap_err();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }

    #[test]
    fn an_unknown_store_kind_is_refused_naming_the_kinds() {
        for kind in ["mysql", "SQLite", ""] {
            let error = check(
                &format!("[store]\nkind = {kind:?}\n"),
                ServeOptions::default(),
            )
            .unwrap_err();
            assert_eq!(
                error,
                format!(
                    "[store] kind {kind:?} is not a store this server can open; the kinds are: \"sqlite\", \"postgres\""
                )
            );
        }
    }

    #[test]
    fn limits_are_read_and_checked() {
        let config = check(
            "[limits]\nheader_read_timeout_ms = 1500\nmax_connections = 7\nsessions_per_token = 2\n",
            ServeOptions::default(),
        )
        .unwrap();
        assert_eq!(
            config.limits.header_read_timeout,
            std::time::Duration::from_millis(1500)
        );
        assert_eq!(config.limits.max_connections, 7);
        assert_eq!(config.limits.sessions_per_token, 2);
        assert_eq!(config.limits.max_sessions, Limits::DEFAULT.max_sessions);
        for (text, named) in [
            ("body_bytes_in_flight = 1000", "body_bytes_in_flight"),
            ("max_connections = 0", "max_connections"),
            ("header_read_timeout_ms = 0", "header_read_timeout_ms"),
            ("max_sessions = 0", "max_sessions"),
        ] {
            let error = check(&format!("[limits]\n{text}\n"), ServeOptions::default()).unwrap_err();
            assert!(error.contains(named), "{text}: {error}");
        }
    }
}
