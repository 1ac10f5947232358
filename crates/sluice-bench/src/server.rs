//! The server under test as a child process: start it, wait for its ready line, read its memory
//! and CPU time from `/proc`, stop it with SIGTERM.
//!
//! It knows only what any operator knows: the command line, the ready line on stdout and what
//! Linux reports about the process. It must not reach into the server's internals.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Serialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The start of the line `sluice serve` prints on stdout once it accepts connections.
const READY_PREFIX: &str = "sluice listening on ";

/// How long a start may take before we give up (a restart rebuilds the index from disk).
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// How long the server may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// The environment variable through which the bench hands the server it starts the `whsec_`
/// secret of the webhooks scenario (the endpoint it defines names this variable). Set only for
/// that purpose.
pub const WEBHOOK_SECRET_ENV: &str = "SLUICE_BENCH_WEBHOOK_SECRET";

/// Linux reports CPU time in clock ticks of 1/100 s (`USER_HZ`, fixed at 100 for user space).
const TICKS_PER_SECOND: f64 = 100.0;

/// A running `sluice serve`. Killed (SIGKILL) if dropped without [`ServerProcess::stop`].
#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    pid: u32,
    /// `http://127.0.0.1:PORT`, from the ready line.
    pub url: String,
    /// From spawning the process to reading its ready line.
    pub ready_after: Duration,
    log: PathBuf,
}

/// How a stop went.
#[derive(Debug, Clone, Serialize)]
pub struct StopOutcome {
    /// From SIGTERM to the process's exit.
    pub elapsed_s: f64,
    /// The exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// True when it ignored SIGTERM for too long and was killed.
    pub killed: bool,
}

/// Memory figures of a process, in KiB.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Memory {
    /// Peak resident set size (`VmHWM`).
    pub peak_rss_kib: u64,
    /// Resident set size now (`VmRSS`).
    pub rss_kib: u64,
}

impl ServerProcess {
    /// Starts `exe serve` on a free loopback port with `data_dir` and `durability` (and the
    /// config file `config`, which chooses the store), appending its log (stderr) to `log`, and
    /// waits for the ready line. With `webhook_secret`, the server gets it in
    /// [`WEBHOOK_SECRET_ENV`].
    pub async fn start(
        exe: &Path,
        data_dir: &Path,
        durability: &str,
        config: Option<&Path>,
        log: &Path,
        webhook_secret: Option<&str>,
    ) -> anyhow::Result<Self> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let started = Instant::now();
        let mut command = Command::new(exe);
        if let Some(secret) = webhook_secret {
            command.env(WEBHOOK_SECRET_ENV, secret);
        }
        let mut child = command
            .arg("serve")
            .args([
                "--listen",
                "127.0.0.1:0",
                "--durability",
                durability,
                "--data",
            ])
            .arg(data_dir)
            .args(
                config
                    .map(|config| [Path::new("--config"), config])
                    .into_iter()
                    .flatten(),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {} serve", exe.display()))?;
        let pid = child.id().context("the server exited at once")?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(READY_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if let Some(url) = line.strip_prefix(READY_PREFIX) {
                    return Ok(Some(url.trim().to_owned()));
                }
            }
            Ok::<_, std::io::Error>(None)
        })
        .await;
        let ready_after = started.elapsed();
        let url = match ready {
            Ok(Ok(Some(url))) => url,
            Ok(Ok(None)) => {
                let status = child.wait().await?;
                anyhow::bail!(
                    "the server exited ({status}) before its ready line; its log ends:\n{}",
                    log_tail(log)
                );
            }
            Ok(Err(error)) => return Err(error).context("cannot read the server's stdout"),
            Err(_) => anyhow::bail!(
                "no ready line from the server within {} s; its log ends:\n{}",
                READY_TIMEOUT.as_secs(),
                log_tail(log)
            ),
        };
        // Keep reading stdout so that a later print never blocks or fails the server.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(Self {
            child,
            pid,
            url,
            ready_after,
            log: log.to_owned(),
        })
    }

    /// The server's memory now; `None` when `/proc` cannot tell.
    pub fn memory(&self) -> Option<Memory> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        };
        Some(Memory {
            peak_rss_kib: field("VmHWM:")?,
            rss_kib: field("VmRSS:")?,
        })
    }

    /// User plus system CPU time the server has used so far.
    fn cpu_time(&self) -> Option<Duration> {
        cpu_time(&format!("/proc/{}/stat", self.pid))
    }

    /// CPU time so far per thread name (threads of one name added up; threads that already
    /// ended are not counted).
    fn thread_cpu_times(&self) -> BTreeMap<String, Duration> {
        let mut times = BTreeMap::new();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return times;
        };
        for task in tasks.flatten() {
            let path = task.path();
            let (Ok(name), Some(time)) = (
                std::fs::read_to_string(path.join("comm")),
                cpu_time(&path.join("stat").to_string_lossy()),
            ) else {
                continue;
            };
            *times.entry(name.trim().to_owned()).or_default() += time;
        }
        times
    }

    /// Sends SIGTERM and waits for the exit; kills the process if it does not stop in time.
    pub async fn stop(mut self) -> anyhow::Result<StopOutcome> {
        let started = Instant::now();
        // std has no safe signal call, and the workspace forbids `unsafe`, so ask kill(1).
        let signalled = std::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .status()
            .context("cannot run kill(1)")?;
        anyhow::ensure!(
            signalled.success(),
            "kill -TERM {} failed: {signalled}",
            self.pid
        );
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                Ok(StopOutcome {
                    elapsed_s: started.elapsed().as_secs_f64(),
                    exit_code: status.code(),
                    killed: false,
                })
            }
            Err(_) => {
                self.child.kill().await?;
                eprintln!(
                    "bench: the server ignored SIGTERM for {} s; killed (log: {})",
                    STOP_TIMEOUT.as_secs(),
                    self.log.display()
                );
                Ok(StopOutcome {
                    elapsed_s: started.elapsed().as_secs_f64(),
                    exit_code: None,
                    killed: true,
                })
            }
        }
    }
}

/// CPU time used so far by the server, its threads, the bench and the whole machine.
#[derive(Debug, Clone)]
pub struct CpuSample {
    at: Instant,
    server: Option<Duration>,
    server_threads: BTreeMap<String, Duration>,
    bench: Option<Duration>,
    database: Option<Duration>,
    machine: Option<Duration>,
}

/// CPU use over an interval, in percent of one core (so up to 100 × cores).
#[derive(Debug, Clone, Serialize)]
pub struct CpuUse {
    /// The server process.
    pub server_percent: Option<f64>,
    /// The server per thread name (e.g. `tokio-rt-worker`, `sluice-sqlite-w`).
    pub server_threads_percent: BTreeMap<String, f64>,
    /// The bench (load generator) process.
    pub bench_percent: Option<f64>,
    /// Every `postgres` process of the machine (the PostgreSQL store's database, or the
    /// pg-baseline's; near 0 otherwise).
    pub database_percent: Option<f64>,
    /// The whole machine (user, system, interrupts and steal; not idle or iowait).
    pub machine_percent: Option<f64>,
    /// The machine minus the server and the bench: anything else running meanwhile (unknown
    /// for an external server).
    pub other_percent: Option<f64>,
}

impl CpuSample {
    /// Reads the counters now.
    pub fn take(server: Option<&ServerProcess>) -> Self {
        Self {
            at: Instant::now(),
            server: server.and_then(ServerProcess::cpu_time),
            server_threads: server
                .map(ServerProcess::thread_cpu_times)
                .unwrap_or_default(),
            bench: cpu_time("/proc/self/stat"),
            database: postgres_cpu_time(),
            machine: machine_busy_time(),
        }
    }

    /// The use between `before` and this sample.
    pub fn since(&self, before: &CpuSample) -> CpuUse {
        let wall = self.at.duration_since(before.at).as_secs_f64().max(1e-9);
        let percent = |after: Option<Duration>, before: Option<Duration>| {
            Some(after?.saturating_sub(before?).as_secs_f64() / wall * 100.0)
        };
        let server_percent = percent(self.server, before.server);
        let bench_percent = percent(self.bench, before.bench);
        let database_percent = percent(self.database, before.database);
        let machine_percent = percent(self.machine, before.machine);
        let server_threads_percent = self
            .server_threads
            .iter()
            .map(|(name, after)| {
                let before = before.server_threads.get(name).copied().unwrap_or_default();
                (
                    name.clone(),
                    after.saturating_sub(before).as_secs_f64() / wall * 100.0,
                )
            })
            .collect();
        // Unknown without the server's figure: an external server on this machine would count.
        let other_percent = match (machine_percent, server_percent, bench_percent) {
            (Some(machine), Some(server), Some(bench)) => {
                Some((machine - server - bench - database_percent.unwrap_or(0.0)).max(0.0))
            }
            _ => None,
        };
        CpuUse {
            server_percent,
            server_threads_percent,
            bench_percent,
            database_percent,
            machine_percent,
            other_percent,
        }
    }
}

/// Busy CPU time of the whole machine from the `cpu` line of `/proc/stat`: user, nice,
/// system, irq, softirq and steal (idle and iowait left out).
fn machine_busy_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|field| field.parse().ok())
        .collect::<Option<_>>()?;
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&index| fields.get(index).copied().unwrap_or(0))
        .sum::<u64>();
    Some(Duration::from_secs_f64(busy as f64 / TICKS_PER_SECOND))
}

/// CPU time used so far by every process named `postgres` (PostgreSQL's backends, checkpointer,
/// WAL writer...); processes that ended meanwhile are not counted, so a figure over an interval
/// leaves out backends that closed within it. `None` when there are none.
fn postgres_cpu_time() -> Option<Duration> {
    let mut total = None;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let path = entry.path();
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        let is_postgres =
            std::fs::read_to_string(path.join("comm")).is_ok_and(|comm| comm.trim() == "postgres");
        if let (true, Some(time)) = (is_postgres, cpu_time(&path.join("stat").to_string_lossy())) {
            *total.get_or_insert(Duration::ZERO) += time;
        }
    }
    total
}

/// `utime + stime` from a `/proc/<pid>/stat` file.
fn cpu_time(path: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(path).ok()?;
    // The command name in field 2 may hold spaces; the fields after its `)` do not.
    let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    // After `)` come state (field 3), ..., utime (field 14) and stime (field 15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_secs_f64(
        (utime + stime) as f64 / TICKS_PER_SECOND,
    ))
}

/// The size in bytes of each file under `dir`, by path relative to `dir`.
pub fn file_sizes(dir: &Path) -> std::io::Result<BTreeMap<String, u64>> {
    let mut sizes = BTreeMap::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next)? {
            let entry = entry?;
            let metadata = entry.metadata()?;
            if metadata.is_dir() {
                pending.push(entry.path());
            } else {
                let path = entry.path();
                let name = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                sizes.insert(name, metadata.len());
            }
        }
    }
    Ok(sizes)
}

/// The last lines of the server's log, for an error message.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_counters_are_readable() {
        let sample = CpuSample::take(None);
        assert!(sample.bench.is_some() && sample.machine.is_some());
        let used = CpuSample::take(None).since(&sample);
        assert!(used.bench_percent.is_some() && used.server_percent.is_none());
    }
}
