//! One way to start a sluice server in a test.
//!
//! [`Launch`] starts the `sluice` binary (`sluice serve`) as a child process: on a free
//! loopback port (`127.0.0.1:0`, the port read from its ready line `sluice listening on URL`),
//! on a data directory, with a config file, environment and extra arguments of the test's, and
//! none of the caller's `SLUICE_*` environment. It waits, within [`READY_TIMEOUT`], for the
//! ready line and then for `/readyz` to answer 200. The [`Server`] it gives can be SIGKILLed,
//! stopped with SIGTERM and started again on the same data directory and port; it is SIGKILLed
//! when dropped, and a test that fails prints the tail of its stderr log. Both an async
//! ([`Launch::start`]) and a blocking ([`Launch::start_blocking`]) start are there, for tokio
//! tests and for plain ones.
//!
//! The binary's path comes from the caller: `env!("CARGO_BIN_EXE_sluice")` exists in the tests
//! of sluice-cli only; other crates use [`built_binary`].
//!
//! [`in_process`] is the other way: a server future (`sluice_server::run`, which this crate
//! does not link) on a listener bound here, stopped when dropped.

use std::ffi::OsString;
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// From spawning the server to `/readyz` answering 200, retries for a port not yet free (a
/// restart on the old port) included. The one start timeout of every suite.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long SIGTERM may take to stop the server, and a SIGKILLed one to be reaped.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// What `sluice serve` prints on stdout once it accepts connections, followed by its URL.
pub const READY_PREFIX: &str = "sluice listening on ";

/// How often a wait looks again.
const POLL_EVERY: Duration = Duration::from_millis(10);
/// How long one `/readyz` request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// `target/<profile>/sluice` beside this test executable (`target/<profile>/deps/<test>`),
/// if it was built: for test crates other than sluice-cli, which cannot name
/// `CARGO_BIN_EXE_sluice` (build it first with `cargo build -p sluice-cli`).
pub fn built_binary() -> Option<PathBuf> {
    let test_executable = std::env::current_exe().ok()?;
    let profile_dir = test_executable.parent()?.parent()?;
    let binary = profile_dir.join(format!("sluice{}", std::env::consts::EXE_SUFFIX));
    binary.is_file().then_some(binary)
}

/// What the server is told about its config.
#[derive(Debug, Clone)]
enum ConfigFile {
    /// TOML, written to `sluice.toml` in the server's directory at each start.
    Text(String),
    /// A file of the test's.
    Path(PathBuf),
}

/// How to start a `sluice serve`; [`Launch::start`] starts it.
#[derive(Debug, Clone)]
pub struct Launch {
    binary: PathBuf,
    name: String,
    dir: Option<PathBuf>,
    data: Option<PathBuf>,
    log: Option<PathBuf>,
    config: Option<ConfigFile>,
    listen: String,
    env: Vec<(OsString, OsString)>,
    args: Vec<OsString>,
    wait_ready: bool,
}

impl Launch {
    /// `binary serve --listen 127.0.0.1:0 --data DIR/data`, in a temp dir of its own.
    pub fn new(binary: impl Into<PathBuf>) -> Launch {
        Launch {
            binary: binary.into(),
            name: "sluice serve".to_owned(),
            dir: None,
            data: None,
            log: None,
            config: None,
            listen: "127.0.0.1:0".to_owned(),
            env: Vec::new(),
            args: Vec::new(),
            wait_ready: true,
        }
    }

    /// The server's name in messages and in its log (`n1`, say; default `sluice serve`).
    pub fn name(mut self, name: &str) -> Self {
        name.clone_into(&mut self.name);
        self
    }

    /// The directory of its data (`data/`), config (`sluice.toml`) and log (`server.log`),
    /// instead of a temp dir the [`Server`] owns.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// `--data`, instead of `data/` in its directory.
    pub fn data(mut self, data: impl Into<PathBuf>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// Where its stderr goes (appended, across starts), instead of `server.log`.
    pub fn log(mut self, log: impl Into<PathBuf>) -> Self {
        self.log = Some(log.into());
        self
    }

    /// TOML written to `sluice.toml` in its directory and passed as `--config`.
    pub fn config(mut self, toml: &str) -> Self {
        self.config = Some(ConfigFile::Text(toml.to_owned()));
        self
    }

    /// A config file of the test's, passed as `--config`.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = Some(ConfigFile::Path(path.into()));
        self
    }

    /// `--listen` (default `127.0.0.1:0`, a free loopback port).
    pub fn listen(mut self, listen: &str) -> Self {
        listen.clone_into(&mut self.listen);
        self
    }

    /// An environment variable of the server (the caller's `SLUICE_*` ones never reach it).
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.set_env(name, Some(value));
        self
    }

    /// Sets (`Some`) or removes (`None`) an environment variable of the server.
    pub fn set_env(&mut self, name: impl Into<OsString>, value: Option<impl Into<OsString>>) {
        let name = name.into();
        self.env.retain(|(known, _)| *known != name);
        if let Some(value) = value {
            self.env.push((name, value.into()));
        }
    }

    /// More arguments of `sluice serve` (`--durability os`, say).
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// More arguments of `sluice serve`.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Whether a start waits for `/readyz` to answer 200 after the ready line (the default).
    /// Off, a start waits only for `/readyz` to answer at all: for a server that is meant to
    /// come up not ready (on a full disk, say). An `https` server is taken at its ready line.
    pub fn wait_ready(mut self, wait: bool) -> Self {
        self.wait_ready = wait;
        self
    }

    /// Starts the server and waits until it is ready.
    pub async fn start(self) -> Server {
        let mut server = Server::new(self);
        server.start_again().await;
        server
    }

    /// Starts a server that must refuse to start (a bad config, say) and waits, within
    /// [`READY_TIMEOUT`], for it to exit: its status and stderr. Panics if it gets ready.
    pub async fn refused(self) -> Refused {
        let mut server = Server::new(self);
        let (mut child, lines) = server.spawn();
        let deadline = Instant::now() + READY_TIMEOUT;
        match first_line(&mut child, &lines, deadline, Pace::Async).await {
            Some(Spawned::Exited(status)) => {
                let log = std::fs::read_to_string(server.log_path()).unwrap_or_default();
                // Without the test kit's own line at the head of the log.
                let stderr = log.split_once('\n').map_or("", |(_, rest)| rest).to_owned();
                Refused { status, stderr }
            }
            Some(Spawned::Ready(line)) => {
                server.child = Some(child);
                panic!(
                    "{} started although it should refuse: {line}",
                    server.launch.name
                );
            }
            None => {
                server.child = Some(child);
                panic!(
                    "{} neither refused to start nor got ready within {READY_TIMEOUT:?}\n{}",
                    server.launch.name,
                    server.log_tail(40)
                );
            }
        }
    }

    /// [`Launch::start`] for a test without a tokio runtime.
    pub fn start_blocking(self) -> Server {
        let mut server = Server::new(self);
        server.start_again_blocking();
        server
    }
}

/// How a start that [`Launch::refused`] went.
#[derive(Debug)]
pub struct Refused {
    pub status: ExitStatus,
    /// Everything the process wrote on stderr.
    pub stderr: String,
}

/// A `sluice serve` process started by [`Launch`]; SIGKILLed when dropped.
pub struct Server {
    launch: Launch,
    /// The temp dir it runs in, unless [`Launch::dir`] named one.
    _temp: Option<tempfile::TempDir>,
    dir: PathBuf,
    child: Option<Child>,
    /// Empty before the first start, then the URL of the ready line (the same across starts).
    url: String,
    address: Option<SocketAddr>,
    starts: u32,
}

/// What one spawn came to.
enum Spawned {
    /// Its ready line, with the URL.
    Ready(String),
    /// It exited before its ready line.
    Exited(ExitStatus),
}

impl Server {
    fn new(launch: Launch) -> Server {
        let (temp, dir) = match &launch.dir {
            Some(dir) => (None, dir.clone()),
            None => {
                let temp = tempfile::Builder::new()
                    .prefix("sluice-test-")
                    .tempdir()
                    .expect("temp dir");
                let dir = temp.path().to_owned();
                (Some(temp), dir)
            }
        };
        std::fs::create_dir_all(&dir).expect("the server's directory");
        Server {
            launch,
            _temp: temp,
            dir,
            child: None,
            url: String::new(),
            address: None,
            starts: 0,
        }
    }

    /// `http://127.0.0.1:PORT` (or `https://`), the same across restarts.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on, the same across restarts.
    pub fn address(&self) -> SocketAddr {
        self.address.expect("the server was started")
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The directory of its data, config and log.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `--data`, the same across restarts.
    pub fn data_dir(&self) -> PathBuf {
        self.launch
            .data
            .clone()
            .unwrap_or_else(|| self.dir.join("data"))
    }

    /// Its stderr, across starts.
    pub fn log_path(&self) -> PathBuf {
        self.launch
            .log
            .clone()
            .unwrap_or_else(|| self.dir.join("server.log"))
    }

    /// The last `lines` lines of its stderr, across starts.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log_path(), lines)
    }

    /// Sets (`Some`) or removes (`None`) an environment variable from the next start on.
    pub fn set_env(&mut self, name: &str, value: Option<&str>) {
        self.launch.set_env(name, value);
    }

    /// SIGKILL, then waits (bounded) until the process is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let status = reap(&mut child, STOP_TIMEOUT, Pace::Async).await;
            assert!(
                status.is_some(),
                "{} was not reaped after SIGKILL",
                self.launch.name
            );
        }
    }

    /// [`Server::kill`] without a runtime.
    pub fn kill_blocking(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let status = block_on_ready(reap(&mut child, STOP_TIMEOUT, Pace::Blocking));
            assert!(
                status.is_some(),
                "{} was not reaped after SIGKILL",
                self.launch.name
            );
        }
    }

    /// SIGTERM, then waits (within [`STOP_TIMEOUT`]) for the process to exit: its status.
    pub async fn terminate(&mut self) -> ExitStatus {
        self.terminate_paced(Pace::Async).await
    }

    /// [`Server::terminate`] without a runtime.
    pub fn terminate_blocking(&mut self) -> ExitStatus {
        block_on_ready(self.terminate_paced(Pace::Blocking))
    }

    async fn terminate_paced(&mut self, pace: Pace) -> ExitStatus {
        let mut child = self.child.take().expect("the server is not running");
        let pid = child.id();
        // The workspace forbids `unsafe`, so the signal goes through kill(1) rather than libc.
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill(1)");
        assert!(sent.success(), "kill -TERM {pid} failed");
        match reap(&mut child, STOP_TIMEOUT, pace).await {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} did not stop within {STOP_TIMEOUT:?} of SIGTERM\n{}",
                    self.launch.name,
                    self.log_tail(40)
                );
            }
        }
    }

    /// Starts it again on the same data directory, config and port (it must not be running:
    /// [`Server::kill`] or [`Server::terminate`] it first), and waits until it is ready.
    pub async fn start_again(&mut self) {
        self.start_paced(Pace::Async).await;
    }

    /// [`Server::start_again`] of a server that comes up not ready (on a full disk, say): waits
    /// only until `/readyz` answers (see [`Launch::wait_ready`]).
    pub async fn start_again_unready(&mut self) {
        let wait = std::mem::replace(&mut self.launch.wait_ready, false);
        self.start_paced(Pace::Async).await;
        self.launch.wait_ready = wait;
    }

    /// [`Server::start_again`] without a runtime.
    pub fn start_again_blocking(&mut self) {
        block_on_ready(self.start_paced(Pace::Blocking));
    }

    /// Spawns the binary until one start gets to its ready line (a start on a fixed port is
    /// tried again while the old socket is not yet free: the process then exits before its
    /// ready line), then waits for `/readyz`.
    async fn start_paced(&mut self, pace: Pace) {
        assert!(self.child.is_none(), "{} is running", self.launch.name);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let (mut child, lines) = self.spawn();
            match first_line(&mut child, &lines, deadline, pace).await {
                Some(Spawned::Ready(line)) => {
                    let url = line
                        .strip_prefix(READY_PREFIX)
                        .unwrap_or_else(|| {
                            let _ = child.kill();
                            panic!(
                                "{}: the first stdout line is not the ready line: {line:?}\n{}",
                                self.launch.name,
                                self.log_tail(40)
                            )
                        })
                        .trim()
                        .to_owned();
                    self.child = Some(child);
                    self.took_url(url);
                    break;
                }
                Some(Spawned::Exited(status)) => {
                    let port_is_fixed = !self.launch.listen.ends_with(":0");
                    if port_is_fixed && Instant::now() + Duration::from_millis(200) < deadline {
                        pace.sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    panic!(
                        "{} exited with {status} before its ready line (start #{})\n{}",
                        self.launch.name,
                        self.starts,
                        self.log_tail(40)
                    );
                }
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "{} printed no ready line within {READY_TIMEOUT:?}\n{}",
                        self.launch.name,
                        self.log_tail(40)
                    );
                }
            }
        }
        if self.url.starts_with("https:") {
            return;
        }
        let address = self.address();
        loop {
            let last = match probe_readyz(address, pace).await {
                Ok(200) => return,
                Ok(_) if !self.launch.wait_ready => return,
                Ok(status) => format!("answered {status}"),
                Err(error) => error,
            };
            if Instant::now() >= deadline {
                panic!(
                    "{}: /readyz not 200 within {READY_TIMEOUT:?} (last: {last})\n{}",
                    self.launch.name,
                    self.log_tail(40)
                );
            }
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "{} exited with {status} before /readyz answered 200 ({last})\n{}",
                    self.launch.name,
                    self.log_tail(40)
                );
            }
            pace.sleep(POLL_EVERY).await;
        }
    }

    /// Keeps the URL of the first start, and checks later starts announce the same.
    fn took_url(&mut self, url: String) {
        let address: SocketAddr = url
            .split_once("://")
            .and_then(|(_, address)| address.parse().ok())
            .unwrap_or_else(|| panic!("{}: no address in {url:?}", self.launch.name));
        assert_ne!(address.port(), 0, "{}: port 0 in {url:?}", self.launch.name);
        if self.url.is_empty() {
            self.launch.listen = address.to_string();
            self.address = Some(address);
            self.url = url;
        } else {
            assert_eq!(url, self.url, "{} came back elsewhere", self.launch.name);
        }
    }

    /// Spawns the binary once; its stdout lines arrive on the channel (the pipe is drained
    /// for the life of the process, so a chatty server never blocks on it).
    fn spawn(&mut self) -> (Child, mpsc::Receiver<String>) {
        self.starts += 1;
        let launch = &self.launch;
        let log_path = self.log_path();
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap_or_else(|e| panic!("open the log {}: {e}", log_path.display()));
        writeln!(
            log,
            "=== test kit: start #{} of {} on {} ===",
            self.starts, launch.name, launch.listen
        )
        .expect("write the server log");
        // Not made here: `sluice serve` makes its data directory (a test may check it did not).
        let data = self.data_dir();
        let mut command = Command::new(&launch.binary);
        command
            .arg("serve")
            .arg("--listen")
            .arg(&launch.listen)
            .arg("--data")
            .arg(&data);
        match &launch.config {
            Some(ConfigFile::Text(toml)) => {
                let path = self.dir.join("sluice.toml");
                std::fs::write(&path, toml).expect("write the config file");
                command.arg("--config").arg(path);
            }
            Some(ConfigFile::Path(path)) => {
                command.arg("--config").arg(path);
            }
            None => {}
        }
        command.args(&launch.args);
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SLUICE_") {
                command.env_remove(&name);
            }
        }
        command.envs(launch.env.iter().map(|(name, value)| (name, value)));
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", launch.binary.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines, received) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Nobody reads past the ready line; the pipe is drained all the same.
                let _ = lines.send(line);
            }
        });
        (child, received)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- log of {} ({}) ----\n{}\n---- end of the log ----",
                self.launch.name,
                self.url,
                self.log_tail(80)
            );
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = block_on_ready(reap(&mut child, STOP_TIMEOUT, Pace::Blocking));
        }
    }
}

/// Waits for the first stdout line of `child`, or its exit; `None` past `deadline`.
async fn first_line(
    child: &mut Child,
    lines: &mpsc::Receiver<String>,
    deadline: Instant,
    pace: Pace,
) -> Option<Spawned> {
    loop {
        match lines.try_recv() {
            Ok(line) => return Some(Spawned::Ready(line)),
            Err(mpsc::TryRecvError::Disconnected) => {
                // stdout closed: the process is exiting without being ready.
                let status = reap(child, STOP_TIMEOUT, pace).await?;
                return Some(Spawned::Exited(status));
            }
            Err(mpsc::TryRecvError::Empty) => {}
        }
        if Instant::now() >= deadline {
            return None;
        }
        pace.sleep(POLL_EVERY).await;
    }
}

/// Waits (within `limit`) for `child` to exit.
async fn reap(child: &mut Child, limit: Duration, pace: Pace) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        pace.sleep(POLL_EVERY).await;
    }
}

/// `GET /readyz` over plain HTTP/1.1: its status, or why there was none.
async fn probe_readyz(address: SocketAddr, pace: Pace) -> Result<u16, String> {
    let request = format!(
        "GET /readyz HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\nAccept: */*\r\n\r\n"
    );
    let head = match pace {
        Pace::Async => {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let exchange = async {
                let mut stream = tokio::net::TcpStream::connect(address).await?;
                stream.write_all(request.as_bytes()).await?;
                let mut head = vec![0; 64];
                let read = stream.read(&mut head).await?;
                head.truncate(read);
                Ok::<_, std::io::Error>(head)
            };
            tokio::time::timeout(PROBE_TIMEOUT, exchange)
                .await
                .map_err(|_| format!("no answer within {PROBE_TIMEOUT:?}"))?
        }
        Pace::Blocking => (|| {
            let mut stream = std::net::TcpStream::connect_timeout(&address, PROBE_TIMEOUT)?;
            stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
            stream.write_all(request.as_bytes())?;
            let mut head = vec![0; 64];
            let read = stream.read(&mut head)?;
            head.truncate(read);
            Ok(head)
        })(),
    }
    .map_err(|e: std::io::Error| e.to_string())?;
    // `HTTP/1.1 200 OK`
    String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {:?}", String::from_utf8_lossy(&head)))
}

/// How a wait passes time: on the tokio runtime, or by blocking the thread.
#[derive(Debug, Clone, Copy)]
enum Pace {
    Async,
    Blocking,
}

impl Pace {
    async fn sleep(self, time: Duration) {
        match self {
            Pace::Async => tokio::time::sleep(time).await,
            Pace::Blocking => std::thread::sleep(time),
        }
    }
}

/// Runs a future that never waits on anything but [`Pace::Blocking`] (so it is always ready
/// when polled) to its end, without a runtime.
fn block_on_ready<T>(future: impl Future<Output = T>) -> T {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match future.as_mut().poll(&mut context) {
        std::task::Poll::Ready(value) => value,
        std::task::Poll::Pending => unreachable!("a blocking wait returned pending"),
    }
}

/// The last `lines` lines of a file.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A server running in this process (`sluice_server::run`), stopped when dropped.
pub struct InProcess {
    url: String,
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl InProcess {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// What [`in_process`] hands the server: resolves when the [`InProcess`] is dropped.
pub type Shutdown = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;
/// What [`in_process`] hands the server: call it once the server is ready.
pub type OnReady = Box<dyn FnOnce() + Send>;

/// Binds a free loopback port, spawns `run(listener, shutdown, on_ready)` (such as
/// `sluice_server::run(config, listener, shutdown, on_ready)`) on the runtime and waits, within
/// [`READY_TIMEOUT`], for it to call `on_ready`. A server that fails panics its task, naming
/// the error.
pub async fn in_process<F, Fut, E>(run: F) -> InProcess
where
    F: FnOnce(tokio::net::TcpListener, Shutdown, OnReady) -> Fut,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let address = listener.local_addr().expect("the listener's address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (ready, is_ready) = tokio::sync::oneshot::channel::<()>();
    let shutdown: Shutdown = Box::pin(async move {
        let _ = stopped.await;
    });
    let on_ready: OnReady = Box::new(move || {
        let _ = ready.send(());
    });
    let server = run(listener, shutdown, on_ready);
    tokio::spawn(async move {
        if let Err(error) = server.await {
            panic!("the in-process sluice server failed: {error}");
        }
    });
    tokio::time::timeout(READY_TIMEOUT, is_ready)
        .await
        .unwrap_or_else(|_| panic!("the in-process server was not ready within {READY_TIMEOUT:?}"))
        .expect("the in-process server stopped before it was ready");
    InProcess {
        url: format!("http://{address}"),
        address,
        stop: Some(stop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_start_that_fails_is_a_refusal_with_its_status() {
        // `false` takes any arguments and exits 1 without a ready line.
        let refused = Launch::new("false").refused().await;
        assert_eq!(refused.status.code(), Some(1));
        assert_eq!(refused.stderr, "");
    }

    #[tokio::test]
    #[should_panic(expected = "exited with exit status: 0 before its ready line")]
    async fn a_process_that_exits_without_its_ready_line_fails_the_start() {
        Launch::new("true").start().await;
    }

    #[test]
    #[should_panic(expected = "the first stdout line is not the ready line")]
    fn another_first_line_fails_the_start() {
        // `echo` prints its arguments: `serve --listen 127.0.0.1:0 --data ...`.
        Launch::new("echo").start_blocking();
    }
}
