//! The harness the worker suite and the conformance runner run on: one [`Backend`] (an
//! [`Embedded`] store, a sluice server started in this process over HTTP, gRPC or its SQS API,
//! or RabbitMQ), a way to move its clock, and helpers to run a worker with a shutdown the test
//! controls and to wait for conditions with a bound.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sluice_sdk::{
    Amqp, Backend, BoxError, Context, Embedded, Grpc, Http, Queue, QueueOptions, QueueStats, Sqs,
    Worker, WorkerReport,
};
use sluice_server::ServeOptions;
use sluice_server::config::{Config, RawConfig};
use sluice_testkit::server::{InProcess, in_process};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use uuid::Uuid;

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The store inside the process.
    Embedded,
    /// A sluice server on 127.0.0.1, over HTTP.
    Http,
    /// A sluice server on 127.0.0.1, over its gRPC API (same port as HTTP).
    Grpc,
    /// The SQS-compatible API of a sluice server on 127.0.0.1, over aws-sdk-sqs.
    Sqs,
    /// RabbitMQ on 127.0.0.1:5672 (guest/guest), over lapin.
    Amqp,
}

impl Kind {
    /// The backend's name in conformance/scenarios.json (`exceptions`, `unchecked`). The file
    /// names brokers, not protocols: sluice over gRPC keeps what sluice over HTTP keeps (the
    /// same operations answer both), so both are `sluice` there.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Embedded => "memory",
            Kind::Http | Kind::Grpc => "sluice",
            Kind::Sqs => "sqs",
            Kind::Amqp => "rabbitmq",
        }
    }

    /// The backend's name in what a test prints.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Grpc => "sluice-grpc",
            other => other.label(),
        }
    }
}

/// Which clock the backend runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// A manual clock that moves only by [`Harness::advance`].
    Test,
    /// The system clock (for what is about real time: heartbeats).
    Real,
}

/// Where the tests find RabbitMQ.
pub const AMQP_URI: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A backend to test against, with a way to move its clock.
pub struct Harness {
    /// The backend under test.
    pub backend: Arc<dyn Backend>,
    /// Which one it is.
    pub kind: Kind,
    /// Which clock it runs on.
    pub clock: Clock,
    /// Wall-clock time just before the backend started (its clock starts at or after this).
    pub started_at: SystemTime,
    inner: Inner,
    /// Queue names given out by [`Harness::name`], for [`Harness::cleanup_all`].
    names: std::sync::Mutex<Vec<String>>,
}

enum Inner {
    Embedded(Arc<Embedded>),
    /// A server in this process, reached over HTTP, gRPC or its SQS API.
    Server {
        base: String,
        client: reqwest::Client,
        _server: Server,
    },
    Amqp(Arc<Amqp>),
}

/// A server running in this process (the test kit's [`InProcess`]) on its own data
/// directory; stopped when dropped.
struct Server {
    _server: InProcess,
    _dir: tempfile::TempDir,
}

/// Starts a sluice server in this process on 127.0.0.1 (port 0); its base URL.
async fn start_server(clock: Clock) -> (String, Server) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut config = Config::from_raw(
        RawConfig::default(),
        &ServeOptions {
            data_dir: Some(dir.path().to_owned()),
            durability: Some("os".into()),
            ..Default::default()
        },
    )
    .expect("server config");
    config.test_clock = clock == Clock::Test;
    let server = in_process(|listener, shutdown, ready| {
        sluice_server::run(config, listener, shutdown, ready)
    })
    .await;
    let url = server.url().to_owned();
    (
        url,
        Server {
            _server: server,
            _dir: dir,
        },
    )
}

impl Harness {
    /// A fresh, empty backend of `kind` on `clock`; panics when its service is missing (see
    /// [`Harness::try_start`]).
    pub async fn start(kind: Kind, clock: Clock) -> Self {
        Self::try_start(kind, clock)
            .await
            .unwrap_or_else(|| panic!("{kind:?} is not available"))
    }

    /// A fresh backend of `kind` on `clock`, or `None` (with a message on stderr) when it needs
    /// a service that is not running: RabbitMQ for [`Kind::Amqp`]. With `CI` set a missing
    /// service fails the test instead.
    pub async fn try_start(kind: Kind, clock: Clock) -> Option<Self> {
        let started_at = SystemTime::now();
        let (backend, inner): (Arc<dyn Backend>, Inner) = match kind {
            Kind::Embedded => {
                let mut builder = Embedded::builder();
                if clock == Clock::Test {
                    builder = builder.test_clock(started_at);
                }
                let embedded = Arc::new(builder.open().await.expect("open the embedded store"));
                (embedded.clone(), Inner::Embedded(embedded))
            }
            Kind::Http | Kind::Grpc | Kind::Sqs => {
                let (base, server) = start_server(clock).await;
                let backend: Arc<dyn Backend> = match kind {
                    Kind::Http => Arc::new(Http::new(&base).expect("http backend")),
                    Kind::Grpc => Arc::new(Grpc::connect(&base).await.expect("grpc backend")),
                    // Without access control sluice accepts any key and secret.
                    _ => Arc::new(Sqs::endpoint(&base, "us-east-1", "sluice-tests", "any")),
                };
                let inner = Inner::Server {
                    base,
                    client: reqwest::Client::new(),
                    _server: server,
                };
                (backend, inner)
            }
            Kind::Amqp => {
                assert_eq!(clock, Clock::Real, "RabbitMQ runs on real time only");
                let connected =
                    tokio::time::timeout(Duration::from_secs(10), Amqp::connect(AMQP_URI)).await;
                match connected {
                    Ok(Ok(amqp)) => {
                        let amqp = Arc::new(amqp);
                        (amqp.clone() as Arc<dyn Backend>, Inner::Amqp(amqp))
                    }
                    failed => {
                        let why = match failed {
                            Ok(Err(error)) => error.to_string(),
                            _ => "no answer within 10 s".to_owned(),
                        };
                        if std::env::var_os("CI").is_some() {
                            panic!("RabbitMQ at {AMQP_URI} is needed (CI is set): {why}");
                        }
                        eprintln!("skipped: RabbitMQ at {AMQP_URI} is not available: {why}");
                        return None;
                    }
                }
            }
        };
        Some(Self {
            backend,
            kind,
            clock,
            started_at,
            inner,
            names: std::sync::Mutex::default(),
        })
    }

    /// The HTTP base URL of the server under test (`Kind::Http`, `Kind::Grpc`, `Kind::Sqs`).
    pub fn server_url(&self) -> Option<&str> {
        match &self.inner {
            Inner::Server { base, .. } => Some(base),
            _ => None,
        }
    }

    /// Moves the backend's test clock forward (and lets whatever became due happen).
    pub async fn advance(&self, by: Duration) {
        assert_eq!(self.clock, Clock::Test, "advance needs a test clock");
        match &self.inner {
            Inner::Embedded(embedded) => embedded.advance(by).await,
            Inner::Server { base, client, .. } => {
                let response = client
                    .post(format!("{base}/v1/_test/clock/advance"))
                    .json(&serde_json::json!({ "ms": by.as_millis() as u64 }))
                    .send()
                    .await
                    .expect("POST /v1/_test/clock/advance");
                assert!(
                    response.status().is_success(),
                    "clock advance answered {}",
                    response.status()
                );
            }
            Inner::Amqp(_) => unreachable!("RabbitMQ runs on real time only"),
        }
    }

    /// Lets `by` pass: the test clock moves, or (on real time) the test sleeps.
    pub async fn pass(&self, by: Duration) {
        match self.clock {
            Clock::Test => self.advance(by).await,
            Clock::Real => tokio::time::sleep(by).await,
        }
    }

    /// Removes what a test left on a broker that outlives it (RabbitMQ's queues); nothing
    /// elsewhere (those backends go away with the harness).
    pub async fn cleanup(&self, queue: &str) {
        if let Inner::Amqp(amqp) = &self.inner
            && let Err(error) = amqp.delete_queue(queue).await
        {
            eprintln!("could not delete the RabbitMQ queue {queue}: {error}");
        }
    }

    /// A queue name unique to this harness's broker (RabbitMQ keeps queues across test runs),
    /// removed by [`Harness::cleanup_all`].
    pub fn name(&self, base: &str) -> String {
        let name = if self.kind == Kind::Amqp {
            format!("{base}-{}", &Uuid::now_v7().simple().to_string()[20..])
        } else {
            base.to_owned()
        };
        self.names.lock().unwrap().push(name.clone());
        name
    }

    /// [`Harness::cleanup`] of every name [`Harness::name`] gave out.
    pub async fn cleanup_all(&self) {
        let names = std::mem::take(&mut *self.names.lock().unwrap());
        for name in names {
            self.cleanup(&name).await;
        }
    }

    /// A queue with default settings.
    pub async fn queue<T>(&self, name: &str) -> Queue<T>
    where
        T: Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        Queue::open(self.backend.clone(), &self.name(name))
            .await
            .expect("open the queue")
    }

    /// A queue with `options`.
    pub async fn queue_with<T>(&self, name: &str, options: QueueOptions) -> Queue<T>
    where
        T: Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        Queue::open_with(self.backend.clone(), &self.name(name), &options)
            .await
            .expect("open the queue")
    }

    /// A queue whose messages of one key are delivered one at a time, in order.
    pub async fn per_key_queue<T>(&self, name: &str) -> Queue<T>
    where
        T: Serialize + DeserializeOwned + Send + Sync + 'static,
    {
        self.queue_with(
            name,
            QueueOptions {
                per_key: true,
                ..QueueOptions::default()
            },
        )
        .await
    }
}

/// A worker running in a task until [`Running::stop`] (or drop).
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<sluice_sdk::Result<WorkerReport>>>,
}

impl Running {
    /// Runs `worker` with `handler` until stopped.
    pub fn spawn<T, H, Fut>(worker: Worker<T>, handler: H) -> Self
    where
        T: Serialize + DeserializeOwned + Send + Sync + 'static,
        H: Fn(Context<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), BoxError>> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(worker.run_until(handler, async move {
            let _ = stopped.await;
        }));
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Triggers the shutdown without waiting for it.
    pub fn trigger(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Shuts the worker down and waits (at most 10 s) for its report.
    pub async fn stop(mut self) -> WorkerReport {
        self.trigger();
        let task = self.task.take().expect("not stopped yet");
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the worker did not stop within 10 s")
            .expect("the worker task panicked")
            .expect("the worker failed")
    }

    /// Waits (at most 10 s) for a worker that was asked to stop another way.
    pub async fn join(mut self) -> WorkerReport {
        let task = self.task.take().expect("not stopped yet");
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the worker did not stop within 10 s")
            .expect("the worker task panicked")
            .expect("the worker failed")
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.trigger();
    }
}

/// Waits for a condition (the one `eventually` of every suite).
#[allow(unused_imports, reason = "not every test binary waits")]
pub use sluice_testkit::eventually;

/// Polls the queue's numbers until `check` holds; panics (with the last numbers) after
/// `timeout`.
pub async fn wait_stats<T>(
    queue: &Queue<T>,
    what: &str,
    timeout: Duration,
    check: impl Fn(&QueueStats) -> bool,
) -> QueueStats
where
    T: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let stats = queue.stats().await.expect("queue status");
        if check(&stats) {
            return stats;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last stats: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A backend whose acks are slow, as over a slow network: each ack waits `before` ahead of
/// reaching the real backend and `after` once it took effect there (a slow response).
pub struct SlowAcks {
    /// The real backend.
    pub inner: Arc<dyn Backend>,
    /// Delay before the ack reaches the backend.
    pub before: Duration,
    /// Delay after the ack took effect.
    pub after: Duration,
}

#[async_trait::async_trait]
impl Backend for SlowAcks {
    fn capabilities(&self) -> sluice_sdk::Capabilities {
        self.inner.capabilities()
    }

    async fn ensure_queue_with(
        &self,
        queue: &str,
        options: &sluice_sdk::QueueOptions,
    ) -> sluice_sdk::Result<()> {
        self.inner.ensure_queue_with(queue, options).await
    }

    async fn dead_letters(
        &self,
        queue: &str,
        max: usize,
    ) -> sluice_sdk::Result<Vec<sluice_sdk::DeadLetter>> {
        self.inner.dead_letters(queue, max).await
    }

    async fn enqueue(
        &self,
        queue: &str,
        messages: Vec<sluice_sdk::Outgoing>,
    ) -> sluice_sdk::Result<Vec<sluice_sdk::Enqueued>> {
        self.inner.enqueue(queue, messages).await
    }

    async fn receive(
        &self,
        queue: &str,
        max: usize,
        lease: Duration,
        wait: Duration,
    ) -> sluice_sdk::Result<Vec<sluice_sdk::Delivery>> {
        self.inner.receive(queue, max, lease, wait).await
    }

    async fn ack(&self, queue: &str, receipt: &str) -> sluice_sdk::Result<()> {
        tokio::time::sleep(self.before).await;
        self.inner.ack(queue, receipt).await?;
        tokio::time::sleep(self.after).await;
        Ok(())
    }

    async fn nack(
        &self,
        queue: &str,
        receipt: &str,
        nack: sluice_sdk::Nack,
    ) -> sluice_sdk::Result<sluice_sdk::NackOutcome> {
        self.inner.nack(queue, receipt, nack).await
    }

    async fn extend(&self, queue: &str, receipt: &str, lease: Duration) -> sluice_sdk::Result<()> {
        self.inner.extend(queue, receipt, lease).await
    }

    async fn release(&self, queue: &str, receipt: &str) -> sluice_sdk::Result<()> {
        self.inner.release(queue, receipt).await
    }

    async fn stats(&self, queue: &str) -> sluice_sdk::Result<QueueStats> {
        self.inner.stats(queue).await
    }

    async fn set_paused(&self, queue: &str, paused: bool) -> sluice_sdk::Result<()> {
        self.inner.set_paused(queue, paused).await
    }

    async fn cancel(
        &self,
        queue: &str,
        message: sluice_sdk::MessageRef,
    ) -> sluice_sdk::Result<sluice_sdk::CancelOutcome> {
        self.inner.cancel(queue, message).await
    }

    async fn get(
        &self,
        queue: &str,
        message: sluice_sdk::MessageRef,
    ) -> sluice_sdk::Result<Option<sluice_sdk::MessageInfo>> {
        self.inner.get(queue, message).await
    }

    async fn drain(&self, queue: &str, timeout: Duration) -> sluice_sdk::Result<bool> {
        self.inner.drain(queue, timeout).await
    }
}
