//! Alerts on the server: the dashboard address their links use, and the runner of command
//! destinations. Defining alerts and deciding what to notify is `sluice_ops::alerts`; the
//! upkeep task (`crate::maintenance`) runs its pass; slack and webhook destinations are the
//! alert queue's push destination, delivered by the push workers like any other.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use sluice_ops::alerts::Alert;
use sluice_ops::{AckRequest, NackRequest, Ops, ReceiveRequest};
use tokio::io::AsyncWriteExt;
use tokio_util::sync::CancellationToken;

/// How often the runner looks for notifications to give to commands.
const COMMAND_POLL: Duration = Duration::from_secs(1);
/// Notifications one look gives to an alert's command, one at a time.
const COMMAND_BATCH: usize = 10;
/// The longest a command may run; it is killed beyond, and the notification tried again.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// The lease a command's notification is held under (longer than the command may run).
const COMMAND_LEASE_MS: i64 = 120_000;
/// The most of a failed command's output kept as the notification's error.
const COMMAND_ERROR_MAX: usize = 500;
/// The most of a command's standard error read (the rest is discarded unread).
const COMMAND_STDERR_MAX: u64 = 64 * 1024;

/// The dashboard's address for links in notifications: the first public URL, else the listen
/// address when it names one host (not 0.0.0.0 or ::), else none.
pub fn dashboard_url(
    public_urls: &[reqwest::Url],
    listen: std::net::SocketAddr,
    tls: bool,
) -> Option<String> {
    if let Some(url) = public_urls.first() {
        return Some(format!("{}/ui/", url.as_str().trim_end_matches('/')));
    }
    if listen.ip().is_unspecified() {
        return None;
    }
    let scheme = if tls { "https" } else { "http" };
    Some(format!("{scheme}://{listen}/ui/"))
}

/// Gives each notification of an alert with a command destination to its command, until
/// `shutdown`: acked when the command exits 0, failed (retried with backoff, then
/// dead-lettered in the alert's queue) otherwise.
pub async fn run_commands(ops: Arc<Ops>, shutdown: CancellationToken) {
    let mut interval = tokio::time::interval(COMMAND_POLL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        let alerts = match ops.alerts().await {
            Ok(alerts) => alerts,
            Err(error) => {
                tracing::warn!(error = %error.message, "alerts not read for their commands");
                continue;
            }
        };
        for alert in alerts.iter().filter(|alert| alert.command().is_some()) {
            if let Err(error) = run_due(&ops, alert).await {
                tracing::warn!(alert = %alert.name, error = %error.message, "an alert's commands were not run");
            }
        }
    }
}

async fn run_due(ops: &Ops, alert: &Alert) -> Result<(), sluice_ops::OpsError> {
    let Some(command) = alert.command() else {
        return Ok(());
    };
    let queue = alert.queue();
    // One at a time, each under a lease longer than the command may run, so no other node
    // takes a notification whose command is still running.
    for _ in 0..COMMAND_BATCH {
        let Some(message) = ops
            .receive(ReceiveRequest {
                lane_runs: false,
                queue: queue.clone(),
                max: Some(1),
                wait_ms: None,
                visibility_timeout_ms: Some(COMMAND_LEASE_MS),
            })
            .await?
            .pop()
        else {
            return Ok(());
        };
        let receipt = message.receipt.to_string();
        match run_one(command, &message.payload.body_bytes).await {
            Ok(()) => {
                ops.ack(AckRequest {
                    queue: queue.clone(),
                    receipts: vec![receipt],
                    result: None,
                    then: Vec::new(),
                })
                .await?;
            }
            Err(error) => {
                tracing::warn!(alert = %alert.name, %error, "an alert's command failed; it is tried again");
                ops.nack(NackRequest {
                    queue: queue.clone(),
                    receipt,
                    error: Some(error),
                    delay_ms: None,
                    permanent: false,
                })
                .await?;
            }
        }
    }
    Ok(())
}

/// Runs `command` with `input` on its standard input; the error says how it failed.
async fn run_one(command: &[String], input: &[u8]) -> Result<(), String> {
    use tokio::io::AsyncReadExt;
    let (program, args) = command.split_first().ok_or("no program")?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {program:?}: {e}"))?;
    let stdin = child.stdin.take();
    let stderr = child.stderr.take();
    let run = async {
        if let Some(mut stdin) = stdin {
            // A command that does not read its input is free not to: a closed pipe is no
            // failure.
            let _ = stdin.write_all(input).await;
        }
        let mut text = Vec::new();
        if let Some(stderr) = stderr {
            let mut stderr = stderr.take(COMMAND_STDERR_MAX);
            let _ = stderr.read_to_end(&mut text).await;
            // Beyond the bound, read and dropped, so the command never blocks on a full pipe.
            let _ = tokio::io::copy(&mut stderr.into_inner(), &mut tokio::io::sink()).await;
        }
        let status = child.wait().await;
        (status, text)
    };
    let (status, stderr) = tokio::time::timeout(COMMAND_TIMEOUT, run)
        .await
        .map_err(|_| format!("{program:?} ran longer than {COMMAND_TIMEOUT:?}; killed"))?;
    let status = status.map_err(|e| format!("{program:?}: {e}"))?;
    if status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&stderr);
    let tail: String = stderr
        .trim()
        .chars()
        .rev()
        .take(COMMAND_ERROR_MAX)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(format!("{program:?} exited with {status}: {tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_use_the_public_url_or_a_named_listen_address() {
        let public = [reqwest::Url::parse("https://queue.example.com/").unwrap()];
        let listen = "127.0.0.1:7700".parse().unwrap();
        assert_eq!(
            dashboard_url(&public, listen, false).as_deref(),
            Some("https://queue.example.com/ui/")
        );
        assert_eq!(
            dashboard_url(&[], listen, false).as_deref(),
            Some("http://127.0.0.1:7700/ui/")
        );
        assert_eq!(
            dashboard_url(&[], "0.0.0.0:7700".parse().unwrap(), true),
            None
        );
    }

    #[tokio::test]
    async fn a_command_gets_the_input_and_its_failure_says_why() {
        let cat = [
            "sh".to_owned(),
            "-c".to_owned(),
            "test \"$(cat)\" = hello".to_owned(),
        ];
        assert_eq!(run_one(&cat, b"hello").await, Ok(()));
        let error = run_one(&cat, b"other").await.unwrap_err();
        assert!(error.contains("exited with"), "{error}");
        let failing = [
            "sh".to_owned(),
            "-c".to_owned(),
            "echo broken >&2; exit 3".to_owned(),
        ];
        let error = run_one(&failing, b"").await.unwrap_err();
        assert!(error.ends_with(": broken"), "{error}");
        let missing = ["/no/such/program".to_owned()];
        assert!(
            run_one(&missing, b"")
                .await
                .unwrap_err()
                .contains("cannot start")
        );
    }
}
