//! A cluster of real `sluice serve` processes on one PostgreSQL schema, for `tests/cluster.rs`
//! (docs/design/postgres-store.md §7.1).
//!
//! [`Cluster::start`] makes a fresh schema `sluice_test_<uuid v7>`, writes a config file per
//! node and starts the nodes on `127.0.0.1:0`, reading each one's ready line. Each [`Node`] can
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
use std::process::Stdio;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
pub use sluice_testkit::postgres::{self, connect};
pub use sluice_testkit::proxy::{PgProxy, upstream_address};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// From spawning a node to its ready line, retries for a port not yet free included.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest single HTTP request (long polls here wait at most a few seconds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a killed process may take to be reaped.
const REAP_TIMEOUT: Duration = Duration::from_secs(10);
/// What `sluice serve` prints on stdout when it is ready, followed by its URL.
const READY_PREFIX: &str = "sluice listening on ";

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
            std::fs::create_dir_all(dir.join("data")).expect("node dir");
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
            std::fs::write(dir.join("sluice.toml"), config).expect("node config");
            let mut node = Node {
                name: format!("n{}", index + 1),
                dir,
                listen: "127.0.0.1:0".to_owned(),
                endpoint: Endpoint::new(String::new()),
                child: None,
                starts: 0,
            };
            // One at a time: the first creates the schema; the others find it current.
            node.launch().await;
            cluster.nodes.push(node);
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
        for node in &mut self.nodes {
            node.kill_now();
        }
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
    /// Its config file, data directory and log.
    dir: PathBuf,
    /// `127.0.0.1:0` before the first start, then the port it got, so restarts keep the URL.
    listen: String,
    endpoint: Endpoint,
    child: Option<Child>,
    starts: u32,
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
        self.child.is_some()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// SIGKILL, then waits (bounded) until the process is gone.
    pub async fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().expect("SIGKILL the node");
            tokio::time::timeout(REAP_TIMEOUT, child.wait())
                .await
                .expect("the killed node is reaped in time")
                .expect("wait for the killed node");
        }
    }

    /// Starts the node again on the same port and config (SIGKILLing it first if it runs).
    pub async fn restart(&mut self) {
        self.kill9().await;
        self.launch().await;
    }

    /// The last `lines` lines of the node's stderr, across restarts.
    pub fn log_tail(&self, lines: usize) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// SIGKILL without waiting for an answer (for `Drop`); the reap is bounded.
    fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let deadline = std::time::Instant::now() + REAP_TIMEOUT;
            while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Spawns the binary and reads its ready line. A start on a fixed port is tried again while
    /// the old socket is not yet free (the process then exits before its ready line).
    async fn launch(&mut self) {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            self.starts += 1;
            let mut log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.log_path())
                .expect("open node log");
            use std::io::Write as _;
            writeln!(
                log,
                "=== cluster test: start #{} of {} on {} ===",
                self.starts, self.name, self.listen
            )
            .expect("write node log");
            let mut command = Command::new(sluice_binary());
            command
                .args(["serve", "--listen", &self.listen, "--config"])
                .arg(self.dir.join("sluice.toml"))
                .arg("--data")
                .arg(self.dir.join("data"))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(log))
                .kill_on_drop(true);
            for (name, _) in std::env::vars_os() {
                if name.to_string_lossy().starts_with("SLUICE_") {
                    command.env_remove(&name);
                }
            }
            let mut child = command.spawn().expect("spawn the sluice binary");
            let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
            match tokio::time::timeout_at(deadline, stdout.next_line()).await {
                Ok(Ok(Some(line))) => {
                    let url = line
                        .strip_prefix(READY_PREFIX)
                        .unwrap_or_else(|| panic!("{}: not the ready line: {line:?}", self.name))
                        .trim()
                        .to_owned();
                    let port = url
                        .rsplit(':')
                        .next()
                        .and_then(|port| port.parse::<u16>().ok())
                        .filter(|port| *port != 0)
                        .unwrap_or_else(|| panic!("{}: no port in {line:?}", self.name));
                    if self.endpoint.url.is_empty() {
                        self.endpoint = Endpoint::new(url);
                        self.listen = format!("127.0.0.1:{port}");
                    } else {
                        assert_eq!(url, self.endpoint.url, "{} came back elsewhere", self.name);
                        // Pooled connections went with the old process.
                        self.endpoint = Endpoint::new(url);
                    }
                    // Keep the pipe drained so a chatty node never blocks on stdout.
                    tokio::spawn(
                        async move { while let Ok(Some(_)) = stdout.next_line().await {} },
                    );
                    self.child = Some(child);
                    return;
                }
                Ok(_) => {
                    let status = tokio::time::timeout(REAP_TIMEOUT, child.wait()).await;
                    let port_is_fixed = !self.listen.ends_with(":0");
                    if port_is_fixed
                        && tokio::time::Instant::now() + Duration::from_millis(200) < deadline
                    {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    panic!(
                        "{} exited ({status:?}) before its ready line\n{}",
                        self.name,
                        self.log_tail(40)
                    );
                }
                Err(_) => {
                    let _ = child.start_kill();
                    panic!(
                        "{} printed no ready line within {READY_TIMEOUT:?}\n{}",
                        self.name,
                        self.log_tail(40)
                    );
                }
            }
        }
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
