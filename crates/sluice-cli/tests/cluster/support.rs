//! A cluster of real `sluice serve` processes on one PostgreSQL schema, for `tests/cluster.rs`
//! (docs/design/postgres-store.md §7.1).
//!
//! [`Cluster::start`] makes a fresh schema `sluice_test_<uuid v7>`, writes a config file per
//! node and starts the nodes with the test kit's launcher ([`Launch`]) on `127.0.0.1:0`,
//! waiting for each one's `/readyz`. Each [`Node`] can
//! be SIGKILLed ([`Node::kill9`]) and started again on the same port ([`Node::restart`]); its
//! [`Endpoint`] is a cheap, cloneable HTTP client that load tasks carry. A [`PgProxy`] in front
//! of the database can cut every connection of the cluster and refuse new ones until healed.
//!
//! Clean-up never depends on the test finishing: dropping the [`Cluster`] (also while a test
//! panics) SIGKILLs every node it started, waits for them, and drops the schema. Tests of this
//! file run one at a time ([`SERIAL`]): three nodes per test are all two shared cores can carry.
//!
//! The database is `SLUICE_TEST_POSTGRES_URL` (default the local one); without one a test says
//! it is skipped, unless `CI` or `SLUICE_REQUIRE_POSTGRES` is set, which makes it fail.

#![allow(dead_code, reason = "scenarios use different parts of the support")]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
pub use sluice_testkit::postgres::{self, connect};
pub use sluice_testkit::proxy::{PgProxy, upstream_address};
use sluice_testkit::server::{Launch, Server};
use tempfile::TempDir;

/// Longest single HTTP request (long polls here wait at most a few seconds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One cluster at a time in this test binary.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How a cluster is started.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// `[store] pool_size` of each node: small, so three nodes leave room in the shared
    /// database's 100 connections for other tests.
    pub pool_size: u32,
    /// `[store] writer_connections` of each node.
    pub writer_connections: u32,
    /// `[store] connect_timeout_ms`: how soon a request gives up on a database that is away.
    pub connect_timeout_ms: u64,
    /// The nodes reach the database through a [`PgProxy`] (for cutting it, and for finding
    /// the cluster's own backends).
    pub through_proxy: bool,
    /// More TOML appended to every node's config file.
    pub extra_toml: String,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            pool_size: 6,
            writer_connections: 1,
            connect_timeout_ms: 2_000,
            through_proxy: false,
            extra_toml: String::new(),
        }
    }
}

/// Nodes of `sluice serve` on one schema, killed and cleaned up on drop.
pub struct Cluster {
    nodes: Vec<Node>,
    schema: String,
    database_url: String,
    database: tokio_postgres::Client,
    proxy: Option<PgProxy>,
    /// Config files, data directories and logs of every node.
    root: TempDir,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Cluster {
    /// Starts `count` nodes on a fresh schema; `None` (after saying so) when the test database
    /// is not there and the test may be skipped.
    pub async fn start(count: usize, options: ClusterOptions) -> Option<Cluster> {
        let serial = SERIAL.lock().await;
        // The database's URL (abandoned test schemas dropped first), or skip.
        let database_url = postgres::database_url_or_skip().await?;
        let database = connect(&database_url)
            .await
            .expect("the test database answered a moment ago");
        let schema = postgres::fresh_schema();
        let proxy = if options.through_proxy {
            Some(PgProxy::start(upstream_address(&database_url)).await)
        } else {
            None
        };
        let store_url = match &proxy {
            Some(proxy) => with_address(&database_url, proxy.address()),
            None => database_url.clone(),
        };
        let root = tempfile::Builder::new()
            .prefix("sluice-cluster-")
            .tempdir()
            .expect("temp dir");
        let mut cluster = Cluster {
            nodes: Vec::with_capacity(count),
            schema,
            database_url,
            database,
            proxy,
            root,
            _serial: serial,
        };
        for index in 0..count {
            let dir = cluster.root.path().join(format!("n{}", index + 1));
            let config = format!(
                "[store]\nkind = \"postgres\"\nurl = \"{store_url}\"\nschema = \"{schema}\"\n\
                 pool_size = {pool}\nwriter_connections = {writers}\nconnect_timeout_ms = {connect}\n\
                 {extra}\n",
                schema = cluster.schema,
                pool = options.pool_size,
                writers = options.writer_connections,
                connect = options.connect_timeout_ms,
                extra = options.extra_toml,
            );
            let name = format!("n{}", index + 1);
            // One at a time: the first creates the schema; the others find it current.
            let server = Launch::new(sluice_binary())
                .name(&name)
                .dir(dir)
                .config(&config)
                .start()
                .await;
            cluster.nodes.push(Node {
                name,
                endpoint: Endpoint::new(server.url().to_owned()),
                server,
            });
        }
        Some(cluster)
    }

    pub fn node(&self, index: usize) -> &Node {
        &self.nodes[index]
    }

    pub fn node_mut(&mut self, index: usize) -> &mut Node {
        &mut self.nodes[index]
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Every node's HTTP endpoint, in node order.
    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.nodes
            .iter()
            .map(|node| node.endpoint.clone())
            .collect()
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// A connection of the test's own to the database (not through the proxy).
    pub fn database(&self) -> &tokio_postgres::Client {
        &self.database
    }

    /// The proxy between the nodes and the database (panics unless started `through_proxy`).
    pub fn proxy(&self) -> &PgProxy {
        self.proxy
            .as_ref()
            .expect("the cluster was started without through_proxy")
    }

    /// The index of the node whose `/metrics` says `sluice_store_leader 1`, if exactly one
    /// running node does; panics if two do at once.
    pub async fn leader(&self) -> Option<usize> {
        let mut leaders = Vec::new();
        for (index, node) in self.nodes.iter().enumerate() {
            if !node.is_running() {
                continue;
            }
            let Ok(reply) = node
                .endpoint
                .try_request(Method::GET, "/metrics", None)
                .await
            else {
                continue;
            };
            if reply.status == 200 && metric_value(&reply.text, "sluice_store_leader") == Some(1.0)
            {
                leaders.push(index);
            }
        }
        assert!(leaders.len() <= 1, "nodes {leaders:?} all say they lead");
        leaders.first().copied()
    }

    /// `pg_terminate_backend` of every backend the cluster's nodes hold, as a database restart
    /// would end them, without touching anyone else's: backends whose `application_name`
    /// starts with `sluice/` and that came through this cluster's proxy. Returns how many.
    pub async fn terminate_backends(&self) -> usize {
        let ports: Vec<i32> = self
            .proxy()
            .upstream_ports()
            .into_iter()
            .map(i32::from)
            .collect();
        let rows = self
            .database
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE starts_with(application_name, 'sluice/') AND client_port = ANY($1) \
                 AND pid <> pg_backend_pid()",
                &[&ports],
            )
            .await
            .expect("pg_terminate_backend");
        rows.iter().filter(|row| row.get::<_, bool>(0)).count()
    }

    /// How many sessions of the cluster (through its proxy) are listeners: their last
    /// statement was the `LISTEN` of the store's channels.
    pub async fn listening_sessions(&self) -> usize {
        let ports: Vec<i32> = self
            .proxy()
            .upstream_ports()
            .into_iter()
            .map(i32::from)
            .collect();
        let row = self
            .database
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE starts_with(application_name, 'sluice/') AND client_port = ANY($1) \
                 AND starts_with(query, 'LISTEN')",
                &[&ports],
            )
            .await
            .expect("pg_stat_activity");
        usize::try_from(row.get::<_, i64>(0)).expect("a count")
    }

    /// Asserts no node's log shows a panic; call it at the end of a test.
    pub fn assert_no_panics(&self) {
        for node in &self.nodes {
            let log = std::fs::read_to_string(node.log_path()).unwrap_or_default();
            assert!(
                !log.contains("panicked"),
                "node {} panicked:\n{}",
                node.name,
                node.log_tail(60)
            );
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Each node's server is SIGKILLed and reaped as it is dropped.
        self.nodes.clear();
        if let Some(proxy) = &self.proxy {
            proxy.close();
        }
        // The schema goes last, when no node holds it any more. `Drop` cannot await, so the
        // statement runs on a thread with a runtime of its own.
        let (url, schema) = (self.database_url.clone(), self.schema.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the clean-up");
            runtime.block_on(async move {
                let Ok(client) = connect(&url).await else {
                    return;
                };
                let statement = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                let _ =
                    tokio::time::timeout(Duration::from_secs(30), client.batch_execute(&statement))
                        .await;
            });
        })
        .join();
        if dropped.is_err() && !std::thread::panicking() {
            panic!("dropping the schema {} failed", self.schema);
        }
    }
}

/// One `sluice serve` process of the cluster.
pub struct Node {
    /// `n1`, `n2`, ...
    name: String,
    /// The process, its config file, data directory and log.
    server: Server,
    endpoint: Endpoint,
}

impl Node {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `http://127.0.0.1:PORT`, the same across restarts.
    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    pub fn is_running(&self) -> bool {
        self.server.is_running()
    }

    pub fn pid(&self) -> Option<u32> {
        self.server.pid()
    }

    /// SIGKILL, then waits (bounded) until the process is gone.
    pub async fn kill9(&mut self) {
        self.server.kill().await;
    }

    /// Starts the node again on the same port and config (SIGKILLing it first if it runs).
    pub async fn restart(&mut self) {
        self.kill9().await;
        self.server.start_again().await;
        // Pooled connections went with the old process.
        self.endpoint = Endpoint::new(self.server.url().to_owned());
    }

    /// The last `lines` lines of the node's stderr, across restarts.
    pub fn log_tail(&self, lines: usize) -> String {
        self.server.log_tail(lines)
    }

    fn log_path(&self) -> PathBuf {
        self.server.log_path()
    }
}

/// The binary under test: `SLUICE_BIN` when set (a release build, say), else this package's.
fn sluice_binary() -> PathBuf {
    std::env::var_os("SLUICE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sluice")))
}

/// A node's address and an HTTP client for it; clones share the client's connections.
#[derive(Clone)]
pub struct Endpoint {
    url: String,
    http: reqwest::Client,
}

impl Endpoint {
    fn new(url: String) -> Self {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .expect("reqwest client");
        Self { url, http }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// One request; `Err` when no answer came (the node is down, or the connection broke).
    pub async fn try_request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, String> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| format!("{method} {}{path}: {e}", self.url))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let text = response
            .text()
            .await
            .map_err(|e| format!("{method} {}{path}: reading the answer: {e}", self.url))?;
        Ok(Reply {
            request: format!("{method} {}{path}", self.url),
            status,
            retry_after,
            text,
        })
    }

    /// `POST path` with a JSON body; `Err` when no answer came.
    pub async fn try_post(&self, path: &str, body: &Value) -> Result<Reply, String> {
        self.try_request(Method::POST, path, Some(body)).await
    }

    /// `POST path`, which must answer 200; its JSON.
    pub async fn post(&self, path: &str, body: &Value) -> Value {
        self.try_post(path, body)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .ok()
    }

    /// `PUT path`, which must answer 200; its JSON.
    pub async fn put(&self, path: &str, body: &Value) -> Value {
        self.try_request(Method::PUT, path, Some(body))
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .ok()
    }

    /// `GET path`, which must answer 200; its JSON.
    pub async fn get(&self, path: &str) -> Value {
        self.try_request(Method::GET, path, None)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .ok()
    }
}

/// An answer read whole.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `METHOD url`, for failure messages.
    pub request: String,
    pub status: u16,
    pub retry_after: Option<String>,
    pub text: String,
}

impl Reply {
    /// The body as JSON (panics when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| {
            panic!(
                "{} answered {} with a body that is not JSON ({e}): {}",
                self.request, self.status, self.text
            )
        })
    }

    /// Asserts 200 and returns the JSON body.
    pub fn ok(&self) -> Value {
        assert_eq!(
            self.status, 200,
            "{} answered {}: {}",
            self.request, self.status, self.text
        );
        self.json()
    }

    /// The `error.code` of an error answer, or "" when there is none.
    pub fn error_code(&self) -> String {
        serde_json::from_str::<Value>(&self.text)
            .ok()
            .and_then(|body| body["error"]["code"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// The value of a metric in Prometheus text: its first sample, with or without labels.
fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let rest = line.strip_prefix(name)?;
            let value = match rest.chars().next()? {
                ' ' => rest,
                '{' => &rest[rest.find('}')? + 1..],
                _ => return None,
            };
            value.split_whitespace().next()?.parse().ok()
        })
}

/// `url` with its host and port replaced by `address`.
fn with_address(url: &str, address: SocketAddr) -> String {
    let mut parsed = reqwest::Url::parse(url).expect("a PostgreSQL URL");
    parsed
        .set_ip_host(address.ip())
        .expect("the URL takes a host");
    parsed
        .set_port(Some(address.port()))
        .expect("the URL takes a port");
    parsed.to_string()
}
