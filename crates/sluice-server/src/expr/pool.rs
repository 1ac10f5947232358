//! The server's side of the expression workers: a few child processes, each doing one
//! evaluation at a time, started when first needed and replaced when they die or are killed.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

use super::protocol::{
    HEADER_BYTES_MAX, Outcome, ProgramSpec, READY, Request, Response, WORKER_SUBCOMMAND,
};
use super::worker::WorkerLimits;
use super::{ExprLimits, ExprMetrics};

/// Longest an evaluation waits for a free worker before it is refused as busy.
const WAIT_FOR_WORKER_MAX: Duration = Duration::from_secs(10);
/// Longest a new worker may take to say it is ready.
const START_TIME_MAX: Duration = Duration::from_secs(10);
/// Bytes of a dead worker's stderr read to tell why it died.
const STDERR_TAIL_BYTES: usize = 4096;

/// Why an evaluation did not give outcomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalError {
    /// Every worker stayed busy, or none could be started: nothing about the input; try later.
    Unavailable(String),
    /// The evaluation exceeded a limit (time, memory, stack, output) and was stopped: a
    /// failure of this input, as final as an error the program raised.
    Stopped(String),
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EvalError::Unavailable(e) | EvalError::Stopped(e) => f.write_str(e),
        }
    }
}

/// A program's outcome: its first output (`None`: none), or its error.
pub type ProgramResult = Result<Option<Value>, String>;

/// A running worker process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    stderr: ChildStderr,
}

/// The pool of expression worker processes.
pub struct ExprPool {
    limits: ExprLimits,
    idle: Mutex<Vec<Worker>>,
    slots: Semaphore,
    /// The share of `slots` webhook requests may hold (`[expressions] webhook_workers`).
    webhook_slots: Semaphore,
    metrics: ExprMetrics,
}

impl std::fmt::Debug for ExprPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExprPool")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl ExprPool {
    /// A pool with no workers yet; they start on first use.
    pub fn new(limits: ExprLimits) -> Arc<Self> {
        Arc::new(Self {
            slots: Semaphore::new(limits.workers.max(1)),
            webhook_slots: Semaphore::new(limits.webhook_workers.max(1)),
            limits,
            idle: Mutex::new(Vec::new()),
            metrics: ExprMetrics::default(),
        })
    }

    /// The limits every evaluation runs under.
    pub fn limits(&self) -> &ExprLimits {
        &self.limits
    }

    /// What the pool did since start (for metrics).
    pub fn metrics(&self) -> &ExprMetrics {
        &self.metrics
    }

    /// [`ExprPool::eval`] for a webhook request: within the webhook share of the workers, so
    /// requests anyone can send (an endpoint without a signature check) cannot keep push
    /// transforms and topic filters waiting.
    pub async fn eval_for_webhook(
        &self,
        programs: &[ProgramSpec],
        input: &Value,
    ) -> Result<Vec<ProgramResult>, EvalError> {
        let _share = tokio::time::timeout(WAIT_FOR_WORKER_MAX, self.webhook_slots.acquire())
            .await
            .map_err(|_| {
                EvalError::Unavailable(format!(
                    "the webhook share of the expression workers ([expressions] webhook_workers = {}) stayed busy for {} s",
                    self.limits.webhook_workers,
                    WAIT_FOR_WORKER_MAX.as_secs()
                ))
            })?
            .map_err(|_| EvalError::Unavailable("the expression workers are closed".into()))?;
        self.eval(programs, input).await
    }

    /// Runs `programs` in order on `input` in a worker process. The outcomes are fewer than the
    /// programs when a gate closed or a program failed (the rest did not run).
    pub async fn eval(
        &self,
        programs: &[ProgramSpec],
        input: &Value,
    ) -> Result<Vec<ProgramResult>, EvalError> {
        let document = serde_json::to_vec(input)
            .map_err(|e| EvalError::Stopped(format!("the input cannot be serialised: {e}")))?;
        let _slot = tokio::time::timeout(WAIT_FOR_WORKER_MAX, self.slots.acquire())
            .await
            .map_err(|_| {
                EvalError::Unavailable(format!(
                    "every expression worker stayed busy for {} s",
                    WAIT_FOR_WORKER_MAX.as_secs()
                ))
            })?
            .map_err(|_| EvalError::Unavailable("the expression workers are closed".into()))?;
        let idle = self.idle.lock().pop();
        let mut worker = match idle {
            Some(worker) => worker,
            None => self.start().await.map_err(EvalError::Unavailable)?,
        };
        self.metrics.evaluations.fetch_add(1, Ordering::Relaxed);
        let timeout = self.limits.timeout;
        match tokio::time::timeout(
            timeout,
            exchange(&mut worker, programs, &document, &self.limits),
        )
        .await
        {
            Ok(Ok(results)) => {
                self.idle.lock().push(worker);
                Ok(results)
            }
            Ok(Err(Failure::Protocol(error))) => {
                self.metrics.killed_protocol.fetch_add(1, Ordering::Relaxed);
                tracing::error!(%error, "expression worker answered out of protocol; killed");
                kill(worker);
                Err(EvalError::Stopped(format!("expression stopped: {error}")))
            }
            Ok(Err(Failure::Died)) => {
                let why = death_reason(worker, &self.limits).await;
                self.metrics.died.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(reason = %why, "an expression worker died during an evaluation; replaced");
                Err(EvalError::Stopped(format!("expression stopped: {why}")))
            }
            Err(_) => {
                self.metrics.killed_timeout.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    timeout_ms = timeout.as_millis() as u64,
                    "an expression ran past its time limit; its worker was killed"
                );
                kill(worker);
                Err(EvalError::Stopped(format!(
                    "expression stopped: it ran longer than {} ms",
                    timeout.as_millis()
                )))
            }
        }
    }

    /// Starts a worker and waits for its ready line.
    async fn start(&self) -> Result<Worker, String> {
        let executable = match &self.limits.worker_executable {
            Some(path) => path.clone(),
            None => std::env::current_exe().map_err(|e| {
                format!("cannot find the sluice executable for expression workers: {e}")
            })?,
        };
        let limits = WorkerLimits {
            memory_bytes: self.limits.memory_bytes,
            output_bytes: self.limits.output_bytes,
            cpu_seconds: self.limits.timeout.as_secs() + 1,
        };
        let mut child = Command::new(&executable)
            .arg(WORKER_SUBCOMMAND)
            .args(limits.to_args())
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| cannot_start(&executable, &e.to_string()))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(cannot_start(&executable, "no pipes"));
        };
        let mut worker = Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            stderr,
        };
        let mut line = Vec::new();
        let ready = tokio::time::timeout(
            START_TIME_MAX,
            (&mut worker.stdout)
                .take(READY.len() as u64 + 1)
                .read_until(b'\n', &mut line),
        )
        .await;
        if !matches!(ready, Ok(Ok(_))) || line.strip_suffix(b"\n") != Some(READY.as_bytes()) {
            let tail = stderr_tail(&mut worker.stderr).await;
            kill(worker);
            self.metrics.start_failures.fetch_add(1, Ordering::Relaxed);
            return Err(cannot_start(
                &executable,
                &format!(
                    "it did not answer as an expression worker ({})",
                    tail.trim()
                ),
            ));
        }
        self.metrics.started.fetch_add(1, Ordering::Relaxed);
        Ok(worker)
    }
}

fn cannot_start(executable: &std::path::Path, why: &str) -> String {
    let message = format!(
        "cannot start an expression worker ({} {WORKER_SUBCOMMAND}): {why}; set [expressions] worker_executable to the sluice binary",
        executable.display()
    );
    tracing::error!("{message}");
    message
}

/// Why an exchange with a worker ended early.
enum Failure {
    /// The pipe closed: the process died.
    Died,
    /// It said something the protocol does not allow.
    Protocol(String),
}

impl From<std::io::Error> for Failure {
    fn from(_: std::io::Error) -> Self {
        Failure::Died
    }
}

/// Sends one request and reads its response.
async fn exchange(
    worker: &mut Worker,
    programs: &[ProgramSpec],
    document: &[u8],
    limits: &ExprLimits,
) -> Result<Vec<ProgramResult>, Failure> {
    let request = Request {
        programs: programs.to_vec(),
        input_bytes: document.len(),
    };
    let mut header = serde_json::to_vec(&request).map_err(|e| Failure::Protocol(e.to_string()))?;
    header.push(b'\n');
    worker.stdin.write_all(&header).await?;
    worker.stdin.write_all(document).await?;
    worker.stdin.flush().await?;
    let mut line = Vec::new();
    let read = (&mut worker.stdout)
        .take(HEADER_BYTES_MAX as u64 + 1)
        .read_until(b'\n', &mut line)
        .await?;
    if read == 0 {
        return Err(Failure::Died);
    }
    if line.pop() != Some(b'\n') {
        return Err(Failure::Protocol("the worker's answer has no end".into()));
    }
    let response: Response =
        serde_json::from_slice(&line).map_err(|e| Failure::Protocol(e.to_string()))?;
    if response.outcomes.len() > programs.len() {
        return Err(Failure::Protocol("more outcomes than programs".into()));
    }
    let mut output_left = limits.output_bytes;
    let mut results = Vec::with_capacity(response.outcomes.len());
    for outcome in response.outcomes {
        results.push(match outcome {
            Outcome::Empty => Ok(None),
            Outcome::Error(error) => Err(error),
            Outcome::Value(bytes) => {
                output_left = output_left
                    .checked_sub(bytes)
                    .ok_or_else(|| Failure::Protocol("outputs beyond output_bytes".into()))?;
                let mut value = vec![0; bytes];
                worker.stdout.read_exact(&mut value).await?;
                Ok(Some(
                    serde_json::from_slice(&value).map_err(|e| Failure::Protocol(e.to_string()))?,
                ))
            }
        });
    }
    Ok(results)
}

/// Kills a worker; the kernel's answer is collected in the background.
fn kill(mut worker: Worker) {
    let _ = worker.child.start_kill();
    tokio::spawn(async move {
        let _ = worker.child.wait().await;
    });
}

/// What killed a worker whose pipe closed, in words for the message's `last_error`.
async fn death_reason(mut worker: Worker, limits: &ExprLimits) -> String {
    let tail = stderr_tail(&mut worker.stderr).await;
    let status = tokio::time::timeout(Duration::from_secs(1), worker.child.wait()).await;
    if !matches!(status, Ok(Ok(_))) {
        kill(worker);
    }
    if tail.contains("overflowed its stack") {
        "it nested or recursed too deeply (the worker's stack overflowed)".into()
    } else if tail.contains("memory allocation of") {
        format!(
            "it needed more memory than the limit of {} bytes",
            limits.memory_bytes
        )
    } else {
        #[cfg(unix)]
        if let Ok(Ok(status)) = &status {
            use std::os::unix::process::ExitStatusExt;
            if status.signal() == Some(24) {
                return "it used more CPU time than allowed (SIGXCPU)".into();
            }
        }
        let how = match &status {
            Ok(Ok(status)) => status.to_string(),
            _ => "no exit status".into(),
        };
        format!("the worker process ended ({how}) {}", tail.trim())
            .trim()
            .to_owned()
    }
}

/// The last bytes a worker wrote on stderr (waits briefly: it is dead or about to be).
async fn stderr_tail(stderr: &mut ChildStderr) -> String {
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(
        Duration::from_millis(500),
        stderr
            .take(64 * STDERR_TAIL_BYTES as u64)
            .read_to_end(&mut bytes),
    )
    .await;
    let start = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..])
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl ExprMetrics {
    /// Workers stopped since start, by reason: `timeout` (killed at the time limit), `died`
    /// (stack overflow, memory limit, CPU limit), `protocol` (killed for a garbled answer).
    pub fn stopped(&self) -> [(&'static str, u64); 3] {
        [
            ("timeout", self.killed_timeout.load(Ordering::Relaxed)),
            ("died", self.died.load(Ordering::Relaxed)),
            ("protocol", self.killed_protocol.load(Ordering::Relaxed)),
        ]
    }
}
