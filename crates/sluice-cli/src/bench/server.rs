//! The server under test as a child process: start it, wait for its ready line, read its memory
//! and CPU time from `/proc`, stop it with SIGTERM.
//!
//! It knows only what any operator knows: the command line, the ready line on stdout and what
//! Linux reports about the process. It must not reach into the server's internals.

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
    /// Starts `exe serve` on a free loopback port with `data_dir` and `durability`, appending its
    /// log (stderr) to `log`, and waits for the ready line.
    pub async fn start(
        exe: &Path,
        data_dir: &Path,
        durability: &str,
        log: &Path,
    ) -> anyhow::Result<Self> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("cannot open {}", log.display()))?;
        let started = Instant::now();
        let mut child = Command::new(exe)
            .arg("serve")
            .args([
                "--listen",
                "127.0.0.1:0",
                "--durability",
                durability,
                "--data",
            ])
            .arg(data_dir)
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
    pub fn cpu_time(&self) -> Option<Duration> {
        cpu_time(&format!("/proc/{}/stat", self.pid))
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

/// CPU time used by this process (the load generator) so far.
pub fn own_cpu_time() -> Option<Duration> {
    cpu_time("/proc/self/stat")
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

/// Total size of the files under `dir`, in bytes.
pub fn dir_size(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() {
            dir_size(&entry.path())?
        } else {
            metadata.len()
        };
    }
    Ok(total)
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
    fn own_cpu_time_is_readable() {
        assert!(own_cpu_time().is_some());
    }
}
